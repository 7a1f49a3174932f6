// The multi-beam pipeline's driver (warpbeam/pipeline.hpp): plans the search of the beams with
// the file search's layout (search/pipeline.hpp), feeds the blocks to a backend's BeamStore,
// searches each gulp as soon as its rows are in the buffer, and clusters each beam's peaks across
// gulps exactly as search_filterbank() does.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>

#include "beamform/pipeline_store.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/pipeline.hpp"
#include "warpbeam/progress.hpp"

namespace warpbeam::pipeline {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

void PipelineConfig::validate() const {
  if (pointings.empty())
    fail(ErrorCategory::invalid_argument, "the pipeline needs at least 1 beam");
  require_range("--integrate", integration, 1, 1 << 20);
  for (int d : devices)
    require_range("--gpus device", d, 0, 1023);
  search.validate();
}

nlohmann::json PipelineConfig::to_json() const {
  nlohmann::json beams = nlohmann::json::array();
  for (const auto& p : pointings)
    beams.push_back(
        {{"name", p.name}, {"frame", beamform::to_string(p.frame)}, {"a", p.a}, {"b", p.b}});
  return {{"integration", integration},
          {"algorithm", beamform::to_string(algorithm)},
          {"nantennas", array.nantennas()},
          {"devices", devices},
          {"beams", beams},
          {"search", search.to_json()}};
}

nlohmann::json PipelineResult::to_json() const {
  return {{"backend", backend},
          {"beamform_algorithm", algorithm},
          {"devices", devices},
          {"nbeams", nbeams},
          {"nchans", header.nchans},
          {"tsamp_s", header.tsamp},
          {"nsamples_per_beam", header.nsamples},
          {"ndms", dms.size()},
          {"dm_first", dms.empty() ? 0.f : dms.front()},
          {"dm_last", dms.empty() ? 0.f : dms.back()},
          {"candidates", candidates.size()},
          {"blocks", blocks},
          {"samples_per_block", samples_per_block},
          {"max_delay_samples", max_delay},
          {"gulp", gulp},
          {"gulps", gulps},
          {"margin", margin},
          {"dm_chunk", dm_chunk},
          {"beam_bytes", beam_bytes},
          {"beam_buffer_bytes", beam_buffer_bytes},
          {"bytes_to_device", bytes_to_device},
          {"bytes_from_device", bytes_from_device},
          {"bytes_device_to_device", bytes_device_to_device},
          {"observation_s", observation_s},
          {"real_time_factor", seconds_total > 0 ? observation_s / seconds_total : 0.0},
          {"seconds",
           {{"total", seconds_total},
            {"read", seconds_read},
            {"beamform", seconds_beamform},
            {"search", seconds_search}}}};
}

namespace detail {

class PipelineExecutor {
 public:
  PipelineExecutor(PipelineConfig config, const io::VoltageStreamInfo& info, std::int64_t nblocks,
                   Backend backend)
      : cfg_(std::move(config)), info_(info), nblocks_(nblocks), start_(Clock::now()) {
    cfg_.validate();
    backend_ = resolve_backend(backend);
    if (backend_ != Backend::cuda && !cfg_.devices.empty())
      fail(ErrorCategory::invalid_argument, "--gpus is for the cuda backend");
    const std::string where = info.source_name.empty() ? info.format : info.source_name;
    if (cfg_.array.nantennas() != info.nantennas)
      fail(ErrorCategory::invalid_argument,
           "the voltages have {} antennas but the array has {}: give the matching --array",
           info.nantennas, cfg_.array.nantennas());
    if (nblocks < 1)
      fail(ErrorCategory::format, "the voltages hold no whole block: nothing to search");
    if (info.block_samples % cfg_.integration != 0)
      fail(ErrorCategory::invalid_argument, "--integrate {} must divide the {} samples of a block",
           cfg_.integration, info.block_samples);
    nb_ = info.block_samples / cfg_.integration;

    // The beamformer: power summed over the pols.
    auto& c = bf_;
    c.nchans = info.nchans;
    c.nantennas = info.nantennas;
    c.npol = info.npol;
    c.nbeams = static_cast<int>(cfg_.pointings.size());
    c.nsamples = info.block_samples;
    c.sample_type = info.sample_type;
    c.output = beamform::OutputKind::power;
    c.sum_pols = true;
    c.integration = cfg_.integration;
    c.algorithm = cfg_.algorithm;
    c.tuning = cfg_.tuning;
    c.threads = cfg_.search.threads;
    c.validate();
    freqs_.resize(static_cast<std::size_t>(info.nchans));
    for (int ch = 0; ch < info.nchans; ++ch)
      freqs_[static_cast<std::size_t>(ch)] = info.fch1_hz + ch * info.foff_hz;
    tracking_ = beamform::is_tracking(cfg_.pointings);
    // Weights at the start: also checks that every beam is above the horizon.
    const auto weights = weights_at(info.mjd_start);

    // Each beam as a float32 filterbank.
    auto& h = header_;
    h.source_name = info.source_name;
    h.nchans = info.nchans;
    h.nbits = 32;
    h.fch1 = info.fch1_hz / 1e6;
    h.foff = info.foff_hz / 1e6;
    h.tsamp = info.tsamp_s * cfg_.integration;
    h.tstart = info.mjd_start;
    h.nbeams = c.nbeams;
    h.nsamples = nblocks * nb_;

    plan_layout(where);
    StoreSetup s;
    s.beamform = bf_;
    s.layout = &layout_;
    s.capacity_rows = capacity_rows();
    s.device = cfg_.search.device;
    s.streams = cfg_.search.gpu_streams;
    make_stores(s, weights);
    clusterers_.assign(static_cast<std::size_t>(c.nbeams), search::Clusterer(cfg_.search.cluster));
    progress_ = std::make_unique<Progress>("pipeline", layout_.nout);
    if (!cfg_.search.progress) progress_->set_enabled(false);
  }

  Backend backend() const { return backend_; }

  void execute(const std::uint8_t* block, std::size_t bytes, double mjd) {
    if (blocks_ >= nblocks_)
      fail(ErrorCategory::invalid_argument, "the pipeline was planned for {} blocks", nblocks_);
    if (static_cast<std::int64_t>(bytes) != info_.block_bytes())
      fail(ErrorCategory::invalid_argument, "a block of {} bytes (expected {})", bytes,
           info_.block_bytes());
    auto t = Clock::now();
    std::vector<std::complex<float>> w;
    if (tracking_ && blocks_ > 0) w = weights_at(mjd);
    for (std::size_t k = 0; k < stores_.size(); ++k) {
      std::vector<std::complex<float>> wk;
      if (!w.empty()) wk = beam_subset(w, k);
      stores_[k]->append_block(block, bytes, w.empty() ? nullptr : &wk, len_);
    }
    for (auto& s : stores_)
      s->wait_input();  // the caller may reuse `block` when execute() returns
    len_ += nb_;
    ++blocks_;
    seconds_beamform_ += seconds_since(t);
    t = Clock::now();
    search_ready();
    seconds_search_ += seconds_since(t);
  }

  PipelineResult finish() {
    if (blocks_ != nblocks_ || next_gulp_ != layout_.gulps)
      fail(ErrorCategory::invalid_argument, "the pipeline got {} of its {} blocks", blocks_,
           nblocks_);
    progress_->finish();
    PipelineResult r;
    r.header = header_;
    r.backend = backend_ == Backend::cuda ? "cuda" : "cpu";
    r.algorithm = std::string(beamform::to_string(stores_[0]->algorithm()));
    r.devices = devices_;
    r.nbeams = bf_.nbeams;
    r.dms = layout_.dms;
    r.blocks = blocks_;
    r.samples_per_block = nb_;
    r.max_delay = layout_.max_delay;
    r.gulp = layout_.gulp;
    r.gulps = layout_.gulps;
    r.margin = layout_.margin;
    r.dm_chunk = layout_.chunk;
    r.beam_bytes = std::int64_t{bf_.nbeams} * header_.nsamples * header_.nchans * 4;
    for (const auto& st : stores_) {
      r.beam_buffer_bytes += st->buffer_bytes();
      const StoreCounters k = st->counters();
      r.bytes_to_device += k.to_device;
      r.bytes_from_device += k.from_device;
      r.bytes_device_to_device += k.device_to_device;
    }
    r.seconds_beamform = seconds_beamform_;
    r.seconds_search = seconds_search_;
    r.seconds_total = seconds_since(start_);
    r.observation_s = static_cast<double>(nblocks_ * info_.block_samples) * info_.tsamp_s;
    for (auto& cl : clusters_)
      r.candidates.push_back(search::to_candidate(cl.second, layout_.dms, header_.tsamp, cl.first));
    std::sort(r.candidates.begin(), r.candidates.end(),
              [](const search::Candidate& a, const search::Candidate& b) {
                if (a.snr != b.snr) return a.snr > b.snr;
                if (a.beam != b.beam) return a.beam < b.beam;
                return a.sample < b.sample;
              });
    return r;
  }

 private:
  std::vector<std::complex<float>> weights_at(double mjd) const {
    return beamform::compute_weights(cfg_.array, cfg_.pointings, freqs_, info_.npol, mjd);
  }

  std::int64_t capacity_rows() const { return layout_.plane_len + layout_.max_delay + nb_; }
  std::int64_t buffer_bytes() const {
    return std::int64_t{bf_.nbeams} * capacity_rows() * header_.nchans * 4;
  }

  // The file search's layout for the beams; with gulp 0, the gulp is halved until the beam
  // buffer fits too (what remains of the host budget, or half the device budget).
  void plan_layout(const std::string& where) {
    search::FileSearchConfig sc = cfg_.search;
    layout_ = search::detail::plan_file_search(where, header_, sc, backend_);
    std::int64_t budget = sc.memory_bytes - layout_.host_bytes;
#ifdef WARPBEAM_HAVE_CUDA
    if (backend_ == Backend::cuda)
      budget = search::detail::cuda_device_budget(sc) / 2 - 2 * info_.block_bytes() -
               std::int64_t{bf_.nbeams} * nb_ * header_.nchans * 4;
#endif
    const std::int64_t min_gulp = std::max<std::int64_t>(layout_.margin, 4096);
    while (cfg_.search.gulp == 0 && buffer_bytes() > budget && layout_.gulp > min_gulp) {
      sc.gulp = std::max(min_gulp, layout_.gulp / 2);
      layout_ = search::detail::plan_file_search(where, header_, sc, backend_);
    }
    if (buffer_bytes() > budget)
      fail(ErrorCategory::invalid_argument,
           "the buffer of {} beams x {} rows x {} channels needs {} MiB, more than the {} MiB "
           "left of the {} budget: lower --dm-max, the beams or --gulp, or raise {}",
           bf_.nbeams, capacity_rows(), header_.nchans, buffer_bytes() >> 20,
           std::max<std::int64_t>(budget, 0) >> 20, backend_ == Backend::cuda ? "device" : "host",
           backend_ == Backend::cuda ? "--gpu-memory" : "--memory");
  }

  // The stores: on cuda one per device, each with a contiguous share of the beams (formed by one
  // launch there and searched there); on the CPU one with every beam.
  void make_stores(StoreSetup s, const std::vector<std::complex<float>>& weights) {
    if (backend_ != Backend::cuda) {
      first_beam_ = {0, bf_.nbeams};
      stores_.push_back(make_cpu_store(s, weights));
      return;
    }
    std::vector<int> devs = cfg_.devices;
    if (devs.empty()) devs.push_back(cfg_.search.device);
    const int n = std::min<int>(static_cast<int>(devs.size()), bf_.nbeams);
    devices_.assign(devs.begin(), devs.begin() + n);
    for (int k = 0; k <= n; ++k)
      first_beam_.push_back(static_cast<int>(std::int64_t{bf_.nbeams} * k / n));
    for (int k = 0; k < n; ++k) {
      StoreSetup sk = s;
      sk.beamform.nbeams = first_beam_[k + 1] - first_beam_[k];
      sk.device = devices_[static_cast<std::size_t>(k)];
      stores_.push_back(make_cuda_store(sk, beam_subset(weights, static_cast<std::size_t>(k))));
    }
  }

  // The weights [nchans][npol][beam][antenna] of store k's beams.
  std::vector<std::complex<float>> beam_subset(const std::vector<std::complex<float>>& w,
                                               std::size_t k) const {
    if (stores_.size() <= 1 && first_beam_.size() == 2) return w;
    const std::size_t b0 = static_cast<std::size_t>(first_beam_[k]),
                      b1 = static_cast<std::size_t>(first_beam_[k + 1]);
    const auto na = static_cast<std::size_t>(bf_.nantennas),
               nbm = static_cast<std::size_t>(bf_.nbeams);
    std::vector<std::complex<float>> out;
    out.reserve(static_cast<std::size_t>(bf_.nchans * bf_.npol) * (b1 - b0) * na);
    for (std::size_t cp = 0; cp < static_cast<std::size_t>(bf_.nchans * bf_.npol); ++cp)
      out.insert(out.end(), w.begin() + static_cast<std::ptrdiff_t>((cp * nbm + b0) * na),
                 w.begin() + static_cast<std::ptrdiff_t>((cp * nbm + b1) * na));
    return out;
  }

  // Searches gulp g on every store: one host thread per device when there are several (each
  // store's peaks are kept and handed to the sink in beam order afterwards: deterministic).
  void search_all(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) {
    if (stores_.size() == 1) {
      stores_[0]->search_gulp(g, rows, sink);
      return;
    }
    std::vector<std::vector<std::pair<int, search::detail::GulpPeaks>>> found(stores_.size());
    std::vector<std::exception_ptr> errors(stores_.size());
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < stores_.size(); ++k)
      threads.emplace_back([&, k] {
        try {
          stores_[k]->search_gulp(g, rows, [&](int beam, search::detail::GulpPeaks&& gp) {
            found[k].emplace_back(beam, std::move(gp));
          });
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    for (auto& t : threads)
      t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (std::size_t k = 0; k < stores_.size(); ++k)
      for (auto& [beam, gp] : found[k])
        sink(first_beam_[k] + beam, std::move(gp));
  }

  // Searches every gulp whose rows are all in the buffer; keeps the rows the next one needs.
  void search_ready() {
    const auto& L = layout_;
    while (next_gulp_ < L.gulps) {
      const search::detail::GulpRange r = L.gulp_range(next_gulp_);
      const std::int64_t need_end = r.p1 + L.max_delay;
      if (first_ + len_ < need_end) return;
      const std::int64_t g = next_gulp_;
      auto sink = [&](int beam, search::detail::GulpPeaks&& gp) {
        auto& cl = clusterers_[static_cast<std::size_t>(beam)];
        cl.add(gp.peaks);
        const auto done = g + 1 < L.gulps ? cl.take_final(r.own_end - L.margin) : cl.finish();
        for (const auto& c : done)
          clusters_.emplace_back(beam, c);
      };
      search_all(g, need_end - r.p0, sink);
      progress_->update(r.own_end);
      ++next_gulp_;
      if (next_gulp_ < L.gulps) {
        const std::int64_t p0 = L.gulp_range(next_gulp_).p0;
        const std::int64_t drop = p0 - first_;
        for (auto& st : stores_)
          st->shift(drop, len_ - drop);
        first_ = p0;
        len_ -= drop;
      }
    }
  }

  PipelineConfig cfg_;
  io::VoltageStreamInfo info_;
  std::int64_t nblocks_;
  Backend backend_ = Backend::cpu;
  beamform::BeamformConfig bf_;
  std::vector<double> freqs_;
  bool tracking_ = false;
  io::FilterbankHeader header_;
  std::int64_t nb_ = 0;  // beam samples per block
  search::detail::FileSearchLayout layout_;
  std::vector<std::unique_ptr<BeamStore>> stores_;  // one per device (cpu: one)
  std::vector<int> first_beam_;                     // [store]: its first beam; then nbeams
  std::vector<int> devices_;                        // cuda: the device of each store
  std::vector<search::Clusterer> clusterers_;
  std::vector<std::pair<int, search::Cluster>> clusters_;
  std::unique_ptr<Progress> progress_;
  std::int64_t blocks_ = 0, next_gulp_ = 0;
  std::int64_t first_ = 0, len_ = 0;  // beam sample of buffer row 0; rows held
  Clock::time_point start_;
  double seconds_beamform_ = 0, seconds_search_ = 0;
};

}  // namespace detail

PipelinePlan::PipelinePlan(PipelineConfig config, const io::VoltageStreamInfo& info,
                           std::int64_t nblocks, Backend backend)
    : exec_(std::make_unique<detail::PipelineExecutor>(std::move(config), info, nblocks, backend)) {
}
PipelinePlan::~PipelinePlan() = default;
PipelinePlan::PipelinePlan(PipelinePlan&&) noexcept = default;
PipelinePlan& PipelinePlan::operator=(PipelinePlan&&) noexcept = default;
Backend PipelinePlan::backend() const {
  return exec_->backend();
}
void PipelinePlan::execute(const std::uint8_t* block, std::size_t bytes, double mjd) {
  exec_->execute(block, bytes, mjd);
}
PipelineResult PipelinePlan::finish() {
  return exec_->finish();
}

PipelineResult run_pipeline(io::VoltageReader& reader, std::int64_t nblocks,
                            const PipelineConfig& config, Backend backend) {
  const auto t0 = Clock::now();
  PipelinePlan plan(config, reader.info(), nblocks, backend);
  std::vector<std::uint8_t> block;
  double mjd = reader.info().mjd_start, read_s = 0;
  for (;;) {
    const auto t = Clock::now();
    const bool more = reader.read_block(block, &mjd);
    read_s += seconds_since(t);
    if (!more) break;
    plan.execute(block.data(), block.size(), mjd);
  }
  PipelineResult r = plan.finish();
  r.seconds_read = read_s;
  r.seconds_total = seconds_since(t0);
  return r;
}

}  // namespace warpbeam::pipeline
