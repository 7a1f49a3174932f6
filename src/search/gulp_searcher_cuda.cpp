// The CUDA GulpSearcher: only packed samples go to the GPU and only statistics and peaks come
// back.
//
// `lanes` lanes (1 or 2), one CUDA stream each, each with its own buffers (the gulp's packed rows
// and channel rows: CudaGulpCleaner; the plane; the search scratch: CudaPlaneSearcher; a pinned
// host buffer for rows read on the host, allocated on first use). Gulp n goes to lane n % lanes:
//   host: the loader hands over gulp n's packed rows (the file search: the GulpReader's pinned
//         buffer, read ahead on its own thread), reads them into the lane's pinned buffer, or
//         enqueues a device copy into the lane's device buffer (the pipeline's beam rows)
//   its stream: copy to the device -> unpack + corner turn -> per-channel statistics -> copy
//               the statistics back
//   host: wait for them (the other lane's gulp n-1 keeps the GPU busy meanwhile), decide the
//         zapped channels (clean_filterbank()'s rules), enqueue the cleaning
//   its stream: clean (normalise, zap, zero-DM) -> per chunk of DM trials: dedisperse
//               (channel-major input) -> search the plane -> copy the peak count back
//   host: collect gulp n-1's peaks (waits for its stream), hand them to the sink (clustering),
//         then load gulp n+1 while the GPU works on gulp n (the loader's host rows are free
//         again when submit() returns: the statistics came after their copy).
// So the read and copy of gulp n+1 and its RFI stage overlap the dedispersion and search of gulp
// n, and the host holds at most two gulps. With one lane each gulp is finished before the next
// is submitted: the reference the tests compare the overlapped pipeline with. The brute-force
// dedispersion plans (channel-major plans hold no scratch) and the search configurations per
// (chunk, plane length) are shared by the lanes; a sub-band or FDMT plan holds its stage-1 series
// or level buffers, so each lane has its own, one at a time (made again when the chunk or the
// plane length changes, as the CPU searcher's; a sub-band plan, which accepts shorter input, is
// made for the longest plane and runs the shorter first and last gulps too: one per chunk and
// lane).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "core/cuda_check.hpp"
#include "search/cuda_search.hpp"
#include "search/executor.hpp"
#include "search/gulp_searcher.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::search {

using detail::CudaGulpCleaner;
using detail::CudaPlaneSearcher;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Distinct plane lengths a file search has: first, middle, last gulps (and the one before the
// last when the last is shorter than the margin). The budget counts the dedispersion plans of
// each.
constexpr int kPlaneLengths = 4;

struct ChunkRange {
  std::int64_t d0, d1;
};

// The dedispersion configuration of a plane of `chunk` trials and `rows` input rows, for the
// workspace estimate (the DM values do not matter).
dedisp::DedispersionConfig estimate_config(int nchans, std::int64_t chunk, std::int64_t rows) {
  dedisp::DedispersionConfig c;
  c.nchans = nchans;
  c.nbits = 32;
  c.channel_major = true;
  c.dms.assign(static_cast<std::size_t>(chunk), 0.f);
  c.nsamples_in = rows;
  return c;
}

// One stream's buffers and the gulp it holds.
struct Lane {
  Lane(const FileSearchPlan& plan, std::int64_t chunk, bool host_input)
      : cleaner(plan.header().nchans, plan.header().nbits, plan.header().is_signed,
                plan.plane_samples() + plan.max_delay()),
        plane(static_cast<std::size_t>(chunk * plan.plane_samples())),
        searcher(plan.plane_samples()) {
    searcher.reserve(chunk);
    device_memset(plane.data(), 0xFF, plane.bytes());  // NaN: an unwritten sample shows
    if (host_input) host.emplace(cleaner.raw_bytes());
  }
  Stream stream;
  std::optional<PinnedArray<std::uint8_t>> host;  // rows read on the host
  CudaGulpCleaner cleaner;
  DeviceArray<float> plane;
  CudaPlaneSearcher searcher;
  Event start, copied, cleaned;
  std::vector<std::unique_ptr<Event>> dedisped, searched;  // per chunk (Events cannot move)
  std::int64_t gulp = -1, tag = 0;                         // the gulp in flight, -1: none
  int kept = 0;
  // subband / fdmt: this lane's plan and its (chunk, plane length).
  std::optional<dedisp::DedispersionPlan> method_plan;
  std::pair<std::size_t, std::int64_t> method_key{};
  std::vector<std::uint8_t> zap_reason;  // of the gulp in flight (RfiReport::reason)
};

class CudaGulpSearcher final : public GulpSearcher {
 public:
  CudaGulpSearcher(const FileSearchPlan& plan, std::int64_t dm_begin, std::int64_t dm_end,
                   int device, bool host_input)
      : plan_(plan), rfi_(plan.rfi()), device_(device) {
    const auto t_setup = Clock::now();
    const RunOptions& o = plan.options();
    require_range("gpu_streams", o.gpu_streams, 1, 2);
    set_device(device);
    for (std::int64_t d0 = dm_begin; d0 < dm_end; d0 += plan.dm_chunk())
      chunks_.push_back({d0, std::min(dm_end, d0 + plan.dm_chunk())});
    // The dedispersion kernel: the default, or autotune()'s pick on the longest plane's shape
    // (brute force; the sub-band and FDMT plans pick their own kernels).
    if (o.autotune && plan.dedisp_algorithm() == dedisp::Algorithm::automatic)
      tuned_ = dedisp::autotune(
          plan.dedispersion_config(chunks_[0].d0, chunks_[0].d1, plan.plane_samples()));
    const std::int64_t chunk_max = std::min(plan.dm_chunk(), dm_end - dm_begin);
    if (plan.dedisp_algorithm() != dedisp::Algorithm::automatic)
      one_length_ = dedisp::DedispersionPlan::accepts_shorter_input(
          plan.dedispersion_config(chunks_[0].d0, chunks_[0].d1, plan.plane_samples()),
          Backend::cuda);
    for (int i = 0; i < o.gpu_streams; ++i) {
      lanes_.push_back(std::make_unique<Lane>(plan, chunk_max, host_input));
      for (std::size_t k = 0; k < chunks_.size(); ++k) {
        lanes_.back()->dedisped.push_back(std::make_unique<Event>());
        lanes_.back()->searched.push_back(std::make_unique<Event>());
      }
    }
    times_.setup = seconds_since(t_setup);
  }

  ~CudaGulpSearcher() override {
    try {
      set_device(device_);
      for (auto& w : lanes_)
        w->stream.synchronize();
    } catch (...) {  // a failed stream already reported its error
    }
  }

  void submit(std::int64_t g, std::int64_t tag, std::int64_t rows, const GulpLoader& load,
              const GulpSink& sink) override {
    set_device(device_);  // also from a host thread of its own (several devices)
    Lane& w = *lanes_[static_cast<std::size_t>(next_) % lanes_.size()];
    if (w.gulp >= 0) finish(w, sink);  // one lane: the previous gulp
    issue(w, g, tag, rows, load);
    if (lanes_.size() > 1 && previous_ && previous_ != &w && previous_->gulp >= 0)
      finish(*previous_, sink);
    previous_ = &w;
    ++next_;
  }

  void flush(const GulpSink& sink) override {
    set_device(device_);
    // At most the last gulp is in flight (submit() finished the one before it).
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      Lane& w = *lanes_[(static_cast<std::size_t>(next_) + i) % lanes_.size()];
      if (w.gulp >= 0) finish(w, sink);
    }
    previous_ = nullptr;
  }

  const StageTimes& times() const override {
    times_.bytes_to_device = bytes_to_device_;
    times_.bytes_from_device = 0;
    for (const auto& w : lanes_) {
      times_.bytes_to_device += w->cleaner.bytes_to_device();
      times_.bytes_from_device += w->cleaner.bytes_from_device() + w->searcher.bytes_from_device();
    }
    return times_;
  }

  Workspace workspace() const override {
    Workspace ws;
    for (const auto& w : lanes_) {
      if (w->host) ws.host_bytes += static_cast<std::int64_t>(w->host->size());
      ws.device_bytes += w->cleaner.device_bytes() + static_cast<std::int64_t>(w->plane.bytes()) +
                         w->searcher.device_bytes();
    }
    for (const auto& [key, p] : plans_)
      ws += p.workspace();
    for (const auto& w : lanes_)
      if (w->method_plan) ws += w->method_plan->workspace();
    return ws;
  }

 private:
  using Key = std::pair<std::size_t, std::int64_t>;  // chunk, plane length

  // Plans and search configurations per (chunk, plane length), made on first use; a sub-band or
  // FDMT plan per lane, one at a time.
  const dedisp::DedispersionPlan& plan_for(Lane& w, std::size_t k, std::int64_t len) {
    const Key key{k, len};
    if (plan_.dedisp_algorithm() != dedisp::Algorithm::automatic) {
      // A plan that accepts shorter input: made for the longest plane, run on every gulp.
      const Key method_key{k, one_length_ ? plan_.plane_samples() : len};
      if (!w.method_plan || w.method_key != method_key) {
        const auto t0 = Clock::now();
        w.stream.synchronize();  // its buffers may still be in use by the lane's last gulp
        w.method_plan.reset();
        w.method_plan.emplace(
            plan_.dedispersion_config(chunks_[k].d0, chunks_[k].d1, method_key.second),
            Backend::cuda);
        w.method_key = method_key;
        times_.gulp_plans += seconds_since(t0);
        ++times_.dedisp_plans;
      }
      return *w.method_plan;
    }
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      const auto t0 = Clock::now();
      auto c = plan_.dedispersion_config(chunks_[k].d0, chunks_[k].d1, len);
      if (tuned_) {
        c.algorithm = tuned_->algorithm;
        c.tuning = tuned_->tuning;
      }
      it = plans_.emplace(key, dedisp::DedispersionPlan(c, Backend::cuda)).first;
      times_.gulp_plans += seconds_since(t0);
      ++times_.dedisp_plans;
    }
    return it->second;
  }
  const SearchConfig& config_for(std::size_t k, std::int64_t len) {
    const Key key{k, len};
    auto it = configs_.find(key);
    if (it == configs_.end()) {
      const auto t0 = Clock::now();
      it = configs_.emplace(key, plan_.search_config(chunks_[k].d0, chunks_[k].d1, len)).first;
      times_.gulp_plans += seconds_since(t0);
    }
    return it->second;
  }

  // Dedisperses and searches every chunk of the cleaned gulp in w (on its stream).
  void enqueue_chunks(Lane& w, const GulpRange& r) {
    const std::int64_t len = r.len();
    w.searcher.begin(&w.stream);
    for (std::size_t k = 0; k < chunks_.size(); ++k) {
      const auto& plan = plan_for(w, k, len);
      const std::int64_t nd = chunks_[k].d1 - chunks_[k].d0;
      // The plane's rows (fewer than the plan's where it was made for a longer plane).
      View<const float, 2> in(w.cleaner.data(), {plan_.header().nchans, len + plan.max_delay()},
                              Space::device);
      in.strides = {w.cleaner.stride(), 1};
      plan.execute_channel_major(in, View<float, 2>(w.plane.data(), {nd, len}, Space::device),
                                 &w.stream);
      w.dedisped[k]->record(&w.stream);
      w.searcher.enqueue(config_for(k, len), w.plane.data(), r.own_begin - r.p0, r.own_end - r.p0,
                         static_cast<std::int32_t>(chunks_[k].d0), r.p0, &w.stream);
      w.searched[k]->record(&w.stream);
    }
    w.searcher.end(&w.stream);
  }

  // The rows of gulp g (the loader's), their copy, the RFI stage and the chunks on lane w.
  void issue(Lane& w, std::int64_t g, std::int64_t tag, std::int64_t rows, const GulpLoader& load) {
    const GulpRange r = plan_.gulp_range(g);
    const auto row_bytes = static_cast<std::int64_t>(plan_.header().bytes_per_sample());
    const auto bytes = static_cast<std::size_t>(rows * row_bytes);
    GulpInput in;
    in.rows = rows;
    in.row_bytes = row_bytes;
    in.host = [&] {
      if (!w.host) w.host.emplace(w.cleaner.raw_bytes());
      return w.host->data();
    };
    in.device = w.cleaner.raw();
    in.stream = &w.stream;
    const auto t0 = Clock::now();
    const std::uint8_t* src = load(in);
    times_.read_wait += seconds_since(t0);
    w.start.record(&w.stream);
    if (src != in.device) {  // host rows: copy them
      copy_bytes(w.cleaner.raw(), src, bytes, &w.stream);
      bytes_to_device_ += static_cast<std::int64_t>(bytes);
    }
    w.copied.record(&w.stream);
    w.cleaner.enqueue_stats(rows, &w.stream);
    const auto t1 = Clock::now();
    const RfiReport rep = w.cleaner.enqueue_clean(rfi_, &w.stream);  // waits for the statistics
    // The loader's host rows are copied once submit() returns (GulpLoader): already so, since
    // the statistics came after the copy on this stream; said here in so many words.
    w.copied.synchronize();
    times_.gpu_wait += seconds_since(t1);
    w.cleaned.record(&w.stream);
    w.kept = rep.kept();
    w.zap_reason = rep.reason;
    enqueue_chunks(w, r);
    w.gulp = g;
    w.tag = tag;
  }

  // Waits for lane w's gulp, hands its peaks (each chunk's as SearchPlan::execute would leave
  // them) to the sink and adds its stage times.
  void finish(Lane& w, const GulpSink& sink) {
    const GulpRange r = plan_.gulp_range(w.gulp);
    std::vector<Peak> found;
    const auto t0 = Clock::now();
    while (!w.searcher.collect(&w.stream, found))
      enqueue_chunks(w, r);  // the peak buffer grew: search again (the gulp is still there)
    times_.gpu_wait += seconds_since(t0);
    std::sort(found.begin(), found.end(),
              [](const Peak& a, const Peak& b) { return a.dm_trial < b.dm_trial; });
    GulpPeaks out;
    out.gulp = w.gulp;
    out.tag = w.tag;
    out.channels_kept = w.kept;
    out.zap_reason = w.zap_reason;
    out.peaks.reserve(found.size());
    const std::int64_t max_peaks = plan_.search_config(0, 0, 0).max_peaks;
    auto it = found.begin();
    for (const auto& c : chunks_) {
      const auto end =
          std::partition_point(it, found.end(), [&](const Peak& p) { return p.dm_trial < c.d1; });
      const std::size_t first = out.peaks.size();
      out.peaks.insert(out.peaks.end(), it, end);
      detail::finish_plane_peaks(out.peaks, first, max_peaks);
      it = end;
    }
    times_.copy += w.copied.elapsed_ms_since(w.start) * 1e-3;
    times_.rfi += w.cleaned.elapsed_ms_since(w.copied) * 1e-3;
    for (std::size_t k = 0; k < chunks_.size(); ++k) {
      const Event& before = k == 0 ? w.cleaned : *w.searched[k - 1];
      times_.dedisp += w.dedisped[k]->elapsed_ms_since(before) * 1e-3;
      times_.search += w.searched[k]->elapsed_ms_since(*w.dedisped[k]) * 1e-3;
    }
    w.gulp = -1;
    sink(std::move(out));
  }

  const FileSearchPlan& plan_;
  RfiConfig rfi_;
  int device_;
  std::vector<ChunkRange> chunks_;
  std::optional<dedisp::AutotuneResult> tuned_;
  std::map<Key, dedisp::DedispersionPlan> plans_;
  std::map<Key, SearchConfig> configs_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  Lane* previous_ = nullptr;  // the lane of the last gulp submitted
  std::int64_t next_ = 0;     // gulps submitted
  std::int64_t bytes_to_device_ = 0;
  bool one_length_ = false;  // the method's plans accept shorter input (sub-band)
  mutable StageTimes times_;
};

}  // namespace

std::unique_ptr<GulpSearcher> make_cuda_gulp_searcher(const FileSearchPlan& plan,
                                                      std::int64_t dm_begin, std::int64_t dm_end,
                                                      int device, bool host_input) {
  return std::make_unique<CudaGulpSearcher>(plan, dm_begin, dm_end, device, host_input);
}

Workspace estimate_cuda_gulp_searcher(const io::FilterbankHeader& h, std::int64_t plane_len,
                                      std::int32_t max_delay, std::int64_t chunk, int lanes,
                                      const Workspace* method_plan, bool host_input) {
  const std::int64_t rows = plane_len + max_delay;
  const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  Workspace per_lane;
  per_lane.host_bytes = host_input ? rows * row_bytes : 0;  // the pinned rows read on the host
  per_lane.device_bytes = detail::gulp_cleaner_bytes(h.nchans, rows, row_bytes) +
                          chunk * plane_len * static_cast<std::int64_t>(sizeof(float)) +
                          detail::plane_searcher_bytes(plane_len, chunk);
  if (method_plan) return std::max(lanes, 1) * (per_lane + *method_plan);  // one plan per lane
  const Workspace plans = dedisp::DedispersionPlan::estimate_workspace(
      estimate_config(h.nchans, chunk, rows), Backend::cuda);
  return std::max(lanes, 1) * per_lane + kPlaneLengths * plans;
}

std::int64_t device_memory_budget(const RunOptions& options) {
  if (options.device_memory_bytes > 0) return options.device_memory_bytes;
  set_device(options.device);
  std::size_t free_bytes = 0, total = 0;
  WB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return static_cast<std::int64_t>(free_bytes / 5 * 4);
}

}  // namespace warpbeam::search
