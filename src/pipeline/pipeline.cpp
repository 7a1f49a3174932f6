// The multi-beam pipeline's driver (warpbeam/pipeline.hpp): plans the search of the beams with
// the file search's plan (search::FileSearchPlan), feeds the blocks to a backend's BeamStore,
// searches each gulp as soon as its rows are in the buffer, and clusters each beam's peaks across
// gulps exactly as search_filterbank() does.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "dist/pack.hpp"
#include "pipeline/store.hpp"
#include "search/gulp_searcher.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/dist/work.hpp"
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

const char* to_string(Split s) {
  switch (s) {
    case Split::channels:
      return "channels";
    case Split::beams:
      return "beams";
    default:
      return "auto";
  }
}

Split parse_split(const std::string& s) {
  for (Split k : {Split::automatic, Split::channels, Split::beams})
    if (s == to_string(k)) return k;
  fail(ErrorCategory::invalid_argument, "split '{}': use auto, channels or beams", s);
}

void PipelineConfig::validate() const {
  if (pointings.empty())
    fail(ErrorCategory::invalid_argument, "the pipeline needs at least 1 beam");
  require_range("integration", integration, 1, 1 << 20);
  for (int d : devices)
    require_range("devices", d, 0, 1023);
  search.validate();
  run.validate();
}

nlohmann::json PipelineConfig::to_json() const {
  nlohmann::json beams = nlohmann::json::array();
  for (const auto& p : pointings)
    beams.push_back(
        {{"name", p.name}, {"frame", beamform::to_string(p.frame)}, {"a", p.a}, {"b", p.b}});
  return {{"integration", integration},
          {"algorithm", beamform::to_string(algorithm)},
          {"int8_weights", int8_weights},
          {"nantennas", array.nantennas()},
          {"devices", devices},
          {"split", to_string(split)},
          {"beams", beams},
          {"search", search.to_json()},
          {"run", run.to_json()}};
}

nlohmann::json PipelineResult::to_json() const {
  return {{"backend", backend},
          {"beamform_algorithm", algorithm},
          {"devices", devices},
          {"split", split},
          {"workers", workers},
          {"ranks", ranks},
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
          {"bytes_between_devices", bytes_between_devices},
          {"bytes_between_ranks", bytes_between_ranks},
          {"observation_s", observation_s},
          {"input_pinned", input_pinned},
          {"open_ended", open_ended},
          {"real_time_factor", seconds_total > 0 ? observation_s / seconds_total : 0.0},
          {"seconds",
           {{"total", seconds_total},
            {"plan", seconds_plan},
            {"read", seconds_read},
            {"beamform", seconds_beamform},
            {"search", seconds_search},
            {"search_read", seconds_search_read},
            {"rfi", seconds_rfi},
            {"dedisp", seconds_dedisp},
            {"plane_search", seconds_plane_search},
            {"zero_blocks", seconds_zero_blocks}}},
          {"zero_blocks", zero_blocks},
          {"gulps_skipped", gulps_skipped}};
}

namespace detail {

namespace {

// One worker's share: it ingests channels [c0, c1), forms beams [f0, f1) there and keeps and
// searches beams [s0, s1) over every channel.
struct Part {
  int c0 = 0, c1 = 0, f0 = 0, f1 = 0, s0 = 0, s1 = 0;
  int device = -1;
  int nsub() const { return c1 - c0; }
};

// [begin, end) of the beams that worker p forms and worker q stores (empty: begin >= end).
std::pair<int, int> sent_beams(const Part& p, const Part& q) {
  return {std::max(p.f0, q.s0), std::min(p.f1, q.s1)};
}

}  // namespace

const dist::Comm& world_of_one() {
  static const dist::Comm one;
  return one;
}

class PipelineExecutor {
 public:
  PipelineExecutor(PipelineConfig config, const io::VoltageStreamInfo& info, std::int64_t nblocks,
                   Backend backend)
      : cfg_(std::move(config)),
        comm_(cfg_.comm ? *cfg_.comm : world_of_one()),
        info_(info),
        nblocks_(nblocks),
        open_(nblocks == PipelinePlan::open_ended),
        start_(Clock::now()) {
    cfg_.validate();
    backend_ = resolve_backend(backend);
    if (backend_ != Backend::cuda && !cfg_.devices.empty())
      fail(ErrorCategory::invalid_argument, "devices are for the cuda backend");
    where_ = info.source_name.empty() ? info.format : info.source_name;
    const std::string& where = where_;
    if (cfg_.array.nantennas() != info.nantennas)
      fail(ErrorCategory::invalid_argument,
           "{}: the voltages have {} antennas but the array has {}: give the matching array", where,
           info.nantennas, cfg_.array.nantennas());
    if (nblocks < 1 && !open_)
      fail(ErrorCategory::format, "{}: the voltages hold no whole block: nothing to search", where);
    if (info.block_samples % cfg_.integration != 0)
      fail(ErrorCategory::invalid_argument,
           "integration = {} must divide the {} samples of a block", cfg_.integration,
           info.block_samples);
    nb_ = info.block_samples / cfg_.integration;
    // Open-ended: planned as a stream of 2^50 beam samples (centuries at any tsamp); finish()
    // plans the tail for the blocks that came.
    if (open_) nblocks_ = std::max<std::int64_t>(1, (std::int64_t{1} << 50) / nb_);

    // The beamformer of the whole band and every beam: power summed over the pols. Each worker
    // forms its part of it (make_stores).
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
    c.int8_weights = cfg_.int8_weights;
    c.tuning = cfg_.tuning;
    c.threads = cfg_.run.threads;
    c.validate();
    freqs_.resize(static_cast<std::size_t>(info.nchans));
    for (int ch = 0; ch < info.nchans; ++ch)
      freqs_[static_cast<std::size_t>(ch)] = info.fch1_hz + ch * info.foff_hz;
    tracking_ = beamform::is_tracking(cfg_.pointings);
    // Weights at the start: also checks that every beam is above the horizon.
    const auto weights = weights_at(info.mjd_start);

    // Each beam as a float32 filterbank.
    header_ = io::beam_header(info, cfg_.integration, c.nbeams);
    header_.nsamples = nblocks_ * nb_;

    // Every worker plans the same layout (the whole run's beams and channels), so the gulps and
    // hence the candidates do not depend on the split.
    plan_layout(where);
    plan_parts();
    make_stores(weights);
    clusterers_.assign(static_cast<std::size_t>(c.nbeams), search::Clusterer(cfg_.search.cluster));
    progress_ = std::make_unique<Progress>("pipeline", plan().nsamples_searched());
    if (!cfg_.run.progress || !comm_.is_root() || open_) progress_->set_enabled(false);
    seconds_plan_ = seconds_since(start_);
  }

  Backend backend() const { return backend_; }

  void execute(const std::uint8_t* block, std::size_t bytes, double mjd) {
    if (blocks_ >= nblocks_)
      fail(ErrorCategory::invalid_argument, "the pipeline was planned for {} blocks", nblocks_);
    if (static_cast<std::int64_t>(bytes) != info_.block_bytes())
      fail(ErrorCategory::invalid_argument, "a block of {} bytes (expected {})", bytes,
           info_.block_bytes());
    formed_blocks_.push_back(blocks_);
    auto t = Clock::now();
    std::vector<std::complex<float>> w;
    if (tracking_ && blocks_ > 0) w = weights_at(mjd);
    // The block is [chan][time][antenna][pol]: a sub-band is one contiguous range of it.
    const std::size_t chan_bytes = bytes / static_cast<std::size_t>(bf_.nchans);
    for (std::size_t k = 0; k < stores_.size(); ++k) {
      const Part& p = parts_[static_cast<std::size_t>(local_[k])];
      std::vector<std::complex<float>> wk;
      if (!w.empty()) wk = weights_of(w, p);
      stores_[k]->form_block(block + static_cast<std::size_t>(p.c0) * chan_bytes,
                             static_cast<std::size_t>(p.nsub()) * chan_bytes,
                             w.empty() ? nullptr : &wk);
    }
    exchange(len_);
    for (auto& s : stores_)
      s->wait_input();  // the caller may reuse `block` when execute() returns
    len_ += nb_;
    ++blocks_;
    seconds_beamform_ += seconds_since(t);
    t = Clock::now();
    search_ready();
    seconds_search_ += seconds_since(t);
  }

  // Zeros in, zeros out: the beams of a zero block are zeros whatever the weights (power of a
  // weighted sum of zeros), so they are written, not formed; search_ready() skips the gulps
  // that read only such rows.
  void execute_zeros(double mjd) {
    (void)mjd;  // no weights are needed for zeros
    if (blocks_ >= nblocks_)
      fail(ErrorCategory::invalid_argument, "the pipeline was planned for {} blocks", nblocks_);
    const auto t = Clock::now();
    for (auto& s : stores_)
      s->zero_block();
    exchange(len_);
    len_ += nb_;
    ++blocks_;
    ++zero_blocks_;
    const auto t_search = Clock::now();
    search_ready();  // a gulp that reads real rows too is searched in full
    seconds_search_ += seconds_since(t_search);
    seconds_zero_blocks_ += seconds_since(t);
  }

  std::vector<search::Candidate> take_candidates() {
    std::vector<search::Candidate> out;
    for (; taken_ < clusters_.size(); ++taken_)
      out.push_back(search::to_candidate(clusters_[taken_].second, plan().dms(), header_.tsamp,
                                         clusters_[taken_].first));
    return out;
  }

  PipelineResult finish() {
    if (open_ && !finished_open_) {
      if (blocks_ == 0)
        fail(ErrorCategory::invalid_argument, "{}: the stream gave no block: nothing to search",
             where_);
      const auto t = Clock::now();
      plan_tail();
      search_ready();
      seconds_search_ += seconds_since(t);
      finished_open_ = true;
    }
    if (blocks_ != nblocks_ || next_gulp_ != plan().gulps())
      fail(ErrorCategory::invalid_argument, "the pipeline got {} of its {} blocks", blocks_,
           nblocks_);
    progress_->finish();
    PipelineResult r;
    r.header = header_;
    r.backend = backend_ == Backend::cuda ? "cuda" : "cpu";
    r.algorithm = std::string(beamform::to_string(stores_[0]->algorithm()));
    r.split = to_string(split_);
    r.workers = static_cast<int>(parts_.size());
    r.ranks = comm_.size();
    r.nbeams = bf_.nbeams;
    r.dms = plan().dms();
    r.blocks = blocks_;
    r.samples_per_block = nb_;
    r.max_delay = plan().max_delay();
    r.gulp = plan().gulp();
    r.gulps = plan().gulps();
    r.margin = plan().margin();
    r.dm_chunk = plan().dm_chunk();
    r.beam_bytes = std::int64_t{bf_.nbeams} * header_.nsamples * header_.nchans * 4;
    for (const auto& st : stores_) {
      r.beam_buffer_bytes += st->buffer_bytes();
      const StoreCounters k = st->counters();
      r.bytes_to_device += k.to_device;
      r.bytes_from_device += k.from_device;
      r.bytes_device_to_device += k.device_to_device;
      r.bytes_between_devices += k.between_devices;
    }
    r.bytes_between_ranks = bytes_between_ranks_;
    for (const int k : local_)
      if (backend_ == Backend::cuda)
        r.devices.push_back(parts_[static_cast<std::size_t>(k)].device);
    r.seconds_beamform = seconds_beamform_;
    r.seconds_search = seconds_search_;
    for (const auto& st : stores_) {
      const search::StageTimes s = st->search_times();
      r.seconds_search_read += s.read;
      r.seconds_rfi += s.rfi;
      r.seconds_dedisp += s.dedisp;
      r.seconds_plane_search += s.search;
    }
    r.zero_blocks = zero_blocks_;
    r.gulps_skipped = gulps_skipped_;
    r.seconds_zero_blocks = seconds_zero_blocks_;
    r.seconds_plan = seconds_plan_;
    r.observation_s = static_cast<double>(blocks_ * info_.block_samples) * info_.tsamp_s;
    r.open_ended = open_;
    for (auto& cl : clusters_)
      r.candidates.push_back(
          search::to_candidate(cl.second, plan().dms(), header_.tsamp, cl.first));
    if (comm_.size() > 1) gather_ranks(r);
    // Stable: equal keys keep the beam's gulp order, so one worker and several agree exactly.
    std::stable_sort(r.candidates.begin(), r.candidates.end(),
                     [](const search::Candidate& a, const search::Candidate& b) {
                       if (a.snr != b.snr) return a.snr > b.snr;
                       if (a.beam != b.beam) return a.beam < b.beam;
                       return a.sample < b.sample;
                     });
    r.seconds_total = seconds_since(start_);
    return r;
  }

 private:
  std::vector<std::complex<float>> weights_at(double mjd) const {
    return beamform::compute_weights(cfg_.array, cfg_.pointings, freqs_, info_.npol, mjd);
  }

  const search::FileSearchPlan& plan() const { return *search_plan_; }
  std::int64_t capacity_rows() const { return plan().plane_samples() + plan().max_delay() + nb_; }
  std::int64_t buffer_bytes() const {
    return std::int64_t{bf_.nbeams} * capacity_rows() * header_.nchans * 4;
  }

  // The file search's plan for the beams; with gulp 0, the gulp is halved until the beam buffer
  // fits too (what the search leaves of the host budget, or half the device budget). Sized for
  // one worker holding every beam, so that every split plans the same gulps.
  void plan_layout(const std::string& where) {
    search::RunOptions o = cfg_.run;
    auto make = [&] {  // in place once made: the stores and their searchers refer to it
      search::FileSearchPlan p(cfg_.search, o, header_, backend_, where);
      if (search_plan_)
        *search_plan_ = std::move(p);
      else
        search_plan_ = std::make_unique<search::FileSearchPlan>(std::move(p));
    };
    make();
    std::int64_t budget = o.memory_bytes - plan().workspace().host_bytes;
    if (backend_ == Backend::cuda)
      budget = search::device_memory_budget(o) / 2 - 2 * info_.block_bytes() -
               std::int64_t{bf_.nbeams} * nb_ * header_.nchans * 4;
    const std::int64_t min_gulp = std::max<std::int64_t>(plan().margin(), 4096);
    while (cfg_.run.gulp == 0 && buffer_bytes() > budget && plan().gulp() > min_gulp) {
      o.gulp = std::max(min_gulp, plan().gulp() / 2);
      make();
    }
    if (buffer_bytes() > budget)
      fail(ErrorCategory::invalid_argument,
           "the buffer of {} beams x {} rows x {} channels needs {} MiB, more than the {} MiB "
           "left of the {} budget: lower dm_max, the beams or the gulp, or raise {}",
           bf_.nbeams, capacity_rows(), header_.nchans, buffer_bytes() >> 20,
           std::max<std::int64_t>(budget, 0) >> 20, backend_ == Backend::cuda ? "device" : "host",
           backend_ == Backend::cuda ? "device_memory_bytes" : "memory_bytes");
  }

  // Open-ended, at the end: the search of the blocks that came, planned as the file search
  // plans a file of them. Nothing searched yet: exactly run_pipeline()'s plan (plan_layout; its
  // gulp may be longer than the open-ended one, and every row is still in the buffer). Else
  // the gulps searched keep their gulp, which a file this long has too unless its gulp was
  // halved for memory (a gulp's range depends on the length only when it reaches the end, and
  // the open-ended plan searched only gulps whose rows, margin and largest delay included, had
  // all come). The searchers are made anew: the tail's chunk and planes may differ.
  void plan_tail() {
    nblocks_ = blocks_;
    header_.nsamples = blocks_ * nb_;
    if (next_gulp_ == 0) {
      plan_layout(where_);
    } else {
      search::RunOptions o = cfg_.run;
      o.gulp = plan().gulp();
      *search_plan_ = search::FileSearchPlan(cfg_.search, o, header_, backend_, where_);
    }
    for (auto& st : stores_)
      st->renew_searcher();
  }

  // The workers and their shares. One process: one worker per entry of --gpus (cuda; at most
  // one per beam, and with the channel split one per channel) or one (cpu). Under MPI: one per
  // rank, this process being worker `rank`.
  void plan_parts() {
    const int nbeams = bf_.nbeams, nchans = bf_.nchans;
    const int wanted = comm_.size() > 1 ? comm_.size()
                       : backend_ == Backend::cuda
                           ? std::max<int>(1, static_cast<int>(cfg_.devices.size()))
                           : 1;
    // auto: channels, unless there are more workers than channels (and enough beams).
    split_ = cfg_.split;
    if (split_ == Split::automatic)
      split_ = wanted > nchans && wanted <= nbeams ? Split::beams : Split::channels;
    std::vector<int> devices;  // of this process's workers
    int n = 1;
    if (comm_.size() > 1) {
      n = comm_.size();
      if (n > nbeams)
        fail(ErrorCategory::invalid_argument,
             "{} ranks for {} beams: every rank searches at least one beam (use at most {} "
             "ranks, or more beams)",
             n, nbeams, nbeams);
      if (split_ == Split::channels && n > nchans)
        fail(ErrorCategory::invalid_argument,
             "{} ranks for {} channels: the channels split gives every rank at least one "
             "channel (use split beams, or at most {} ranks)",
             n, nchans, nchans);
      devices = backend_ == Backend::cuda ? dist::local_devices(Backend::cuda, cfg_.devices, comm_)
                                          : std::vector<int>{-1};
      local_ = {comm_.rank()};
    } else {
      if (backend_ == Backend::cuda)
        devices = cfg_.devices.empty() ? std::vector<int>{cfg_.run.device} : cfg_.devices;
      else
        devices = {-1};
      const int most = split_ == Split::beams ? nbeams : std::min(nbeams, nchans);
      n = std::min<int>(static_cast<int>(devices.size()), most);
      devices.resize(static_cast<std::size_t>(n));
      for (int k = 0; k < n; ++k)
        local_.push_back(k);
    }
    for (int k = 0; k < n; ++k) {
      Part p;
      const auto [b0, b1] = dist::split_range(nbeams, n, k);
      p.s0 = static_cast<int>(b0);
      p.s1 = static_cast<int>(b1);
      if (split_ == Split::beams) {
        p.c0 = 0, p.c1 = nchans, p.f0 = p.s0, p.f1 = p.s1;
      } else {
        const auto [c0, c1] = dist::split_range(nchans, n, k);
        p.c0 = static_cast<int>(c0), p.c1 = static_cast<int>(c1), p.f0 = 0, p.f1 = nbeams;
      }
      parts_.push_back(p);
    }
    for (std::size_t i = 0; i < local_.size(); ++i)
      parts_[static_cast<std::size_t>(local_[i])].device = devices[i];
  }

  // One store per worker of this process.
  void make_stores(const std::vector<std::complex<float>>& weights) {
    for (const int k : local_) {
      const Part& p = parts_[static_cast<std::size_t>(k)];
      StoreSetup s;
      s.beamform = bf_;
      s.beamform.nchans = p.nsub();
      s.beamform.nbeams = p.f1 - p.f0;
      s.plan = search_plan_.get();
      s.stored_beams = p.s1 - p.s0;
      s.capacity_rows = capacity_rows();
      s.device = p.device;
      const auto w = weights_of(weights, p);
      stores_.push_back(backend_ == Backend::cuda ? make_cuda_store(s, w) : make_cpu_store(s, w));
    }
  }

  // The weights [nchans][npol][nbeams][nantennas] of part p's channels and formed beams.
  std::vector<std::complex<float>> weights_of(const std::vector<std::complex<float>>& w,
                                              const Part& p) const {
    if (p.nsub() == bf_.nchans && p.f1 - p.f0 == bf_.nbeams) return w;
    const auto na = static_cast<std::size_t>(bf_.nantennas),
               nbm = static_cast<std::size_t>(bf_.nbeams),
               npol = static_cast<std::size_t>(bf_.npol);
    const auto f0 = static_cast<std::size_t>(p.f0), f1 = static_cast<std::size_t>(p.f1);
    std::vector<std::complex<float>> out;
    out.reserve(static_cast<std::size_t>(p.nsub()) * npol * (f1 - f0) * na);
    for (std::size_t cp = static_cast<std::size_t>(p.c0) * npol;
         cp < static_cast<std::size_t>(p.c1) * npol; ++cp)
      out.insert(out.end(), w.begin() + static_cast<std::ptrdiff_t>((cp * nbm + f0) * na),
                 w.begin() + static_cast<std::ptrdiff_t>((cp * nbm + f1) * na));
    return out;
  }

  // The block's beam rows to the workers that search them, at buffer row `at`: between the
  // stores of this process directly (device or peer copies), between ranks through host memory
  // and one MPI_Alltoallv (only the channel split exchanges anything).
  void exchange(std::int64_t at) {
    if (comm_.size() == 1) {
      for (std::size_t i = 0; i < stores_.size(); ++i)
        for (std::size_t j = 0; j < stores_.size(); ++j)
          send(i, *stores_[j], parts_[static_cast<std::size_t>(local_[j])], at);
      return;
    }
    const auto me = static_cast<std::size_t>(comm_.rank());
    const Part& mine = parts_[me];
    send(0, *stores_[0], mine, at);
    if (split_ == Split::beams) return;  // every rank formed exactly its own beams
    std::vector<std::string> out(parts_.size());
    for (std::size_t q = 0; q < parts_.size(); ++q) {
      const auto [b0, b1] = sent_beams(mine, parts_[q]);
      if (q == me || b1 <= b0) continue;
      out[q].resize(static_cast<std::size_t>(std::int64_t{b1 - b0} * nb_ * mine.nsub()) * 4);
      stores_[0]->export_rows(b0 - mine.f0, b1 - mine.f0, reinterpret_cast<float*>(out[q].data()));
      bytes_between_ranks_ += static_cast<std::int64_t>(out[q].size());
    }
    const std::vector<std::string> in = comm_.alltoall(out);
    for (std::size_t q = 0; q < parts_.size(); ++q) {
      const Part& from = parts_[q];
      const auto [b0, b1] = sent_beams(from, mine);
      if (q == me || b1 <= b0) continue;
      if (in[q].size() != static_cast<std::size_t>(std::int64_t{b1 - b0} * nb_ * from.nsub()) * 4)
        fail(ErrorCategory::io, "rank {} sent {} bytes of beam rows (ranks of different builds?)",
             q, in[q].size());
      stores_[0]->import_rows(reinterpret_cast<const float*>(in[q].data()), b0 - mine.s0,
                              b1 - mine.s0, from.c0, from.nsub(), at);
    }
  }

  // Local store i's formed rows of the beams `to` stores -> `dest`.
  void send(std::size_t i, BeamStore& dest, const Part& to, std::int64_t at) {
    const Part& from = parts_[static_cast<std::size_t>(local_[i])];
    const auto [b0, b1] = sent_beams(from, to);
    if (b1 > b0) stores_[i]->send_rows(dest, b0 - from.f0, b1 - from.f0, b0 - to.s0, from.c0, at);
  }

  // Rank 0 gets every rank's candidates, devices and byte counts (in rank order).
  void gather_ranks(PipelineResult& r) const {
    dist::detail::Packer pk;
    pk.put_vector(r.candidates);
    pk.put_vector(r.devices);
    for (const std::int64_t v :
         {r.beam_buffer_bytes, r.bytes_to_device, r.bytes_from_device, r.bytes_device_to_device,
          r.bytes_between_devices, r.bytes_between_ranks})
      pk.put(v);
    const auto all = comm_.gather(pk.bytes());
    if (!comm_.is_root()) {
      r.candidates.clear();
      return;
    }
    r.candidates.clear();
    r.devices.clear();
    r.beam_buffer_bytes = r.bytes_to_device = r.bytes_from_device = r.bytes_device_to_device =
        r.bytes_between_devices = r.bytes_between_ranks = 0;
    for (const auto& bytes : all) {
      dist::detail::Unpacker u(bytes);
      const auto c = u.get_vector<search::Candidate>();
      r.candidates.insert(r.candidates.end(), c.begin(), c.end());
      const auto d = u.get_vector<int>();
      r.devices.insert(r.devices.end(), d.begin(), d.end());
      for (std::int64_t* v :
           {&r.beam_buffer_bytes, &r.bytes_to_device, &r.bytes_from_device,
            &r.bytes_device_to_device, &r.bytes_between_devices, &r.bytes_between_ranks})
        *v += u.get<std::int64_t>();
    }
  }

  // Searches gulp g on every store: one host thread per store when there are several (each
  // store's peaks are kept and handed to the sink in beam order afterwards: deterministic).
  void search_all(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) {
    const auto first = [&](std::size_t k) {
      return parts_[static_cast<std::size_t>(local_[k])].s0;
    };
    if (stores_.size() == 1) {
      stores_[0]->search_gulp(
          g, rows, [&](int beam, search::GulpPeaks&& gp) { sink(first(0) + beam, std::move(gp)); });
      return;
    }
    std::vector<std::vector<std::pair<int, search::GulpPeaks>>> found(stores_.size());
    std::vector<std::exception_ptr> errors(stores_.size());
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < stores_.size(); ++k)
      threads.emplace_back([&, k] {
        try {
          stores_[k]->search_gulp(g, rows, [&](int beam, search::GulpPeaks&& gp) {
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
        sink(first(k) + beam, std::move(gp));
  }

  // Whether beam rows [p0, p1) all come from blocks given by execute_zeros() (the formed blocks
  // before p0 are forgotten: the gulps go forward).
  bool only_zero_blocks(std::int64_t p0, std::int64_t p1) {
    while (!formed_blocks_.empty() && (formed_blocks_.front() + 1) * nb_ <= p0)
      formed_blocks_.pop_front();
    return formed_blocks_.empty() || formed_blocks_.front() * nb_ >= p1;
  }

  // Searches every gulp whose rows are all in the buffer; keeps the rows the next one needs.
  void search_ready() {
    const search::FileSearchPlan& L = plan();
    while (next_gulp_ < L.gulps()) {
      const search::GulpRange r = L.gulp_range(next_gulp_);
      const std::int64_t need_end = r.p1 + L.max_delay();
      if (first_ + len_ < need_end) return;
      const std::int64_t g = next_gulp_;
      auto sink = [&](int beam, search::GulpPeaks&& gp) {
        auto& cl = clusterers_[static_cast<std::size_t>(beam)];
        cl.add(gp.peaks);
        const auto done = g + 1 < L.gulps() ? cl.take_final(r.own_end - L.margin()) : cl.finish();
        for (const auto& c : done)
          clusters_.emplace_back(beam, c);
      };
      if (only_zero_blocks(r.p0, need_end)) {
        for (int b = 0; b < bf_.nbeams; ++b) {
          search::GulpPeaks none;
          none.gulp = g;
          none.tag = b;
          sink(b, std::move(none));
        }
        ++gulps_skipped_;
      } else {
        search_all(g, need_end - r.p0, sink);
      }
      progress_->update(r.own_end);
      ++next_gulp_;
      if (next_gulp_ < L.gulps()) {
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
  const dist::Comm& comm_;
  io::VoltageStreamInfo info_;
  std::int64_t nblocks_;  // open-ended: the plan's (2^50 samples) until finish()
  bool open_ = false, finished_open_ = false;
  std::string where_;      // the stream's name in messages
  std::size_t taken_ = 0;  // clusters_ handed out by take_candidates()
  Backend backend_ = Backend::cpu;
  beamform::BeamformConfig bf_;
  std::vector<double> freqs_;
  bool tracking_ = false;
  io::FilterbankHeader header_;
  std::int64_t nb_ = 0;                                  // beam samples per block
  std::unique_ptr<search::FileSearchPlan> search_plan_;  // stores keep a pointer: it stays put
  Split split_ = Split::channels;
  std::vector<Part> parts_;                         // every worker of the run
  std::vector<int> local_;                          // [store]: its worker (index into parts_)
  std::vector<std::unique_ptr<BeamStore>> stores_;  // this process's workers
  std::vector<search::Clusterer> clusterers_;
  std::vector<std::pair<int, search::Cluster>> clusters_;
  std::unique_ptr<Progress> progress_;
  std::int64_t blocks_ = 0, next_gulp_ = 0;
  std::deque<std::int64_t> formed_blocks_;  // blocks given by execute() whose rows may be read
  std::int64_t zero_blocks_ = 0, gulps_skipped_ = 0;
  double seconds_zero_blocks_ = 0;
  std::int64_t first_ = 0, len_ = 0;  // beam sample of buffer row 0; rows held
  Clock::time_point start_;
  double seconds_beamform_ = 0, seconds_search_ = 0, seconds_plan_ = 0;
  std::int64_t bytes_between_ranks_ = 0;
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
void PipelinePlan::execute_zeros(double mjd) {
  exec_->execute_zeros(mjd);
}
std::vector<search::Candidate> PipelinePlan::take_candidates() {
  return exec_->take_candidates();
}
PipelineResult PipelinePlan::finish() {
  return exec_->finish();
}

PipelineResult run_pipeline(io::VoltageReader& reader, std::int64_t nblocks,
                            const PipelineConfig& config, Backend backend) {
  const auto t0 = Clock::now();
  const dist::Comm& comm = config.comm ? *config.comm : detail::world_of_one();
  // Under MPI a rank's error is every rank's (Comm::agree), so that none waits in a collective
  // for a rank that stopped; in one process errors pass through unchanged.
  const auto agreed = [&](auto&& step) {
    std::exception_ptr error;
    try {
      step();
    } catch (...) {
      if (comm.size() == 1) throw;
      error = std::current_exception();
    }
    comm.agree(error);
  };
  std::unique_ptr<PipelinePlan> plan;
  agreed([&] { plan = std::make_unique<PipelinePlan>(config, reader.info(), nblocks, backend); });
  std::vector<std::uint8_t> block;
  // cuda: the block buffer is page-locked in place once (it keeps its size, so it does not
  // move), so that every device copies it by DMA instead of staging it through a pinned slot
  // (a host memcpy per block and device: ~27 ms per B1 block on the H200 machine).
  std::optional<HostRegistration> pinned;
  bool input_pinned = false;
  double mjd = reader.info().mjd_start, read_s = 0;
  for (;;) {
    const auto t = Clock::now();
    bool more = false;
    agreed([&] { more = reader.read_block(block, &mjd); });
    read_s += seconds_since(t);
    if (!more) break;
    if (plan->backend() == Backend::cuda && (!pinned || pinned->data() != block.data())) {
      pinned.reset();  // (first block, or the buffer moved)
      pinned.emplace(block.data(), block.size());
      input_pinned = true;
    }
    plan->execute(block.data(), block.size(), mjd);
  }
  PipelineResult r;
  agreed([&] { r = plan->finish(); });
  r.seconds_read = read_s;
  r.seconds_total = seconds_since(t0);
  r.input_pinned = input_pinned;
  return r;
}

}  // namespace warpbeam::pipeline
