// The CUDA runner of the file search: only packed samples go to the GPU and only statistics and
// peaks come back.
//
// Two workers, one CUDA stream each, each with its own buffers (pinned host gulp, device gulp,
// channel rows, plane, search scratch). Gulp n goes to worker n % 2:
//   host: read gulp n (packed rows) into the worker's pinned buffer
//   its stream: copy to the device -> unpack + corner turn -> per-channel statistics -> copy
//               the statistics back
//   host: wait for them (the other worker's gulp n-1 keeps the GPU busy meanwhile), decide the
//         zapped channels (clean_filterbank()'s rules), enqueue the cleaning
//   its stream: clean (normalise, zap, zero-DM) -> per chunk of DM trials: dedisperse
//               (channel-major input) -> search the plane -> copy the peak count back
//   host: collect gulp n-1's peaks (waits for its stream), hand them to the sink (clustering),
//         then read gulp n+1 while the GPU works on gulp n.
// So the read and copy of gulp n+1 and its RFI stage overlap the dedispersion and search of gulp
// n, and the host holds at most two gulps. With one stream (CudaRunOptions::streams = 1) each
// gulp is finished before the next is read: the reference the tests compare the overlapped
// pipeline with.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "core/cuda_check.hpp"
#include "search/cuda_search.hpp"
#include "search/executor.hpp"
#include "search/file_search.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::search::detail {

namespace {

// Distinct plane lengths a file search has: first, middle, last gulps (and the one before the
// last when the last is shorter than the margin).
constexpr int kPlaneLengths = 4;
// Device bytes of the dedispersion tables per DM trial and channel (compact delays; base and
// span per DM tile are smaller), per plane length.
constexpr std::int64_t kTableBytesPerTrialChannel = 6;

struct ChunkRange {
  std::int64_t d0, d1;
};

// One stream's buffers and the gulp it holds.
struct Worker {
  Worker(const FileSearchLayout& L, std::int64_t chunk)
      : raw_host(static_cast<std::size_t>((L.plane_len + L.max_delay) *
                                          static_cast<std::int64_t>(L.header.bytes_per_sample()))),
        cleaner(L.header.nchans, L.header.nbits, L.header.is_signed, L.plane_len + L.max_delay),
        plane(static_cast<std::size_t>(chunk * L.plane_len)),
        searcher(L.plane_len) {
    searcher.reserve(chunk);
    device_memset(plane.data(), 0xFF, plane.bytes());  // NaN: an unwritten sample shows
  }
  Stream stream;
  PinnedArray<std::uint8_t> raw_host;
  CudaGulpCleaner cleaner;
  DeviceArray<float> plane;
  CudaPlaneSearcher searcher;
  Event start, copied, cleaned;
  std::vector<std::unique_ptr<Event>> dedisped, searched;  // per chunk (Events cannot move)
  std::int64_t gulp = -1;                                  // the gulp in flight, -1: none
  int kept = 0;
  std::vector<std::uint8_t> zap_reason;  // of the gulp in flight (RfiReport::reason)
};

}  // namespace

std::int64_t cuda_device_bytes(const io::FilterbankHeader& h, std::int64_t plane_len,
                               std::int32_t max_delay, std::int64_t chunk, int streams) {
  const std::int64_t rows = plane_len + max_delay;
  const auto row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  const std::int64_t per_stream = gulp_cleaner_bytes(h.nchans, rows, row_bytes) +
                                  chunk * plane_len * 4 + plane_searcher_bytes(plane_len, chunk);
  const std::int64_t tables = kPlaneLengths * chunk * h.nchans * kTableBytesPerTrialChannel;
  return std::max(streams, 1) * per_stream + tables;
}

std::int64_t cuda_device_budget(const FileSearchConfig& cfg) {
  if (cfg.device_memory_bytes > 0) return cfg.device_memory_bytes;
  set_device(cfg.device);
  std::size_t free_bytes = 0, total = 0;
  WB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return static_cast<std::int64_t>(free_bytes / 5 * 4);
}

void run_gulps_cuda(const FileSearchLayout& L, std::int64_t dm_begin, std::int64_t dm_end,
                    const CudaRunOptions& opt, const PeakSink& sink, StageTimes& times,
                    GulpSpan span) {
  const auto [g_begin, g_end] = span.resolve(L.gulps);
  const auto t_setup = std::chrono::steady_clock::now();
  require_range("streams", opt.streams, 1, 2);
  if (dm_begin < 0 || dm_end > L.ndms() || dm_begin >= dm_end)
    fail(ErrorCategory::invalid_argument, "DM trials [{}, {}) of {}", dm_begin, dm_end, L.ndms());
  set_device(opt.device);
  const io::FilterbankHeader& h = L.header;
  const std::int64_t row_bytes = static_cast<std::int64_t>(h.bytes_per_sample());
  io::FilterbankReader reader(L.path);
  std::vector<ChunkRange> chunks;
  for (std::int64_t d0 = dm_begin; d0 < dm_end; d0 += L.chunk)
    chunks.push_back({d0, std::min(dm_end, d0 + L.chunk)});

  // The dedispersion kernel: the default, or autotune()'s pick on the longest plane's shape.
  std::optional<dedisp::AutotuneResult> tuned;
  if (opt.autotune)
    tuned = dedisp::autotune(L.chunk_dedisp(chunks[0].d0, chunks[0].d1, L.plane_len));

  // Plans and search configurations per (chunk, plane length), made on first use. Channel-major
  // plans hold no scratch, so both streams share them.
  std::map<std::pair<std::size_t, std::int64_t>, dedisp::DedispersionPlan> plans;
  std::map<std::pair<std::size_t, std::int64_t>, SearchConfig> configs;
  auto plan_for = [&](std::size_t k, std::int64_t len) -> const dedisp::DedispersionPlan& {
    const auto key = std::make_pair(k, len);
    auto it = plans.find(key);
    if (it == plans.end()) {
      auto c = L.chunk_dedisp(chunks[k].d0, chunks[k].d1, len);
      if (tuned) {
        c.algorithm = tuned->algorithm;
        c.tuning = tuned->tuning;
      }
      it = plans.emplace(key, dedisp::DedispersionPlan(c, Backend::cuda)).first;
    }
    return it->second;
  };
  auto config_for = [&](std::size_t k, std::int64_t len) -> const SearchConfig& {
    const auto key = std::make_pair(k, len);
    auto it = configs.find(key);
    if (it == configs.end())
      it = configs.emplace(key, L.chunk_search(chunks[k].d0, chunks[k].d1, len)).first;
    return it->second;
  };

  const std::int64_t chunk_max = std::min(L.chunk, dm_end - dm_begin);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < opt.streams; ++i) {
    workers.push_back(std::make_unique<Worker>(L, chunk_max));
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      workers.back()->dedisped.push_back(std::make_unique<Event>());
      workers.back()->searched.push_back(std::make_unique<Event>());
    }
  }

  // Dedisperses and searches every chunk of the cleaned gulp in w (on its stream).
  auto enqueue_chunks = [&](Worker& w, const GulpRange& r) {
    const std::int64_t len = r.len();
    w.searcher.begin(&w.stream);
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const auto& plan = plan_for(k, len);
      const std::int64_t nd = chunks[k].d1 - chunks[k].d0;
      View<const float, 2> in(w.cleaner.data(), {h.nchans, plan.config().nsamples_in},
                              Space::device);
      in.strides = {w.cleaner.stride(), 1};
      plan.execute_channel_major(in, View<float, 2>(w.plane.data(), {nd, len}, Space::device),
                                 &w.stream);
      w.dedisped[k]->record(&w.stream);
      w.searcher.enqueue(config_for(k, len), w.plane.data(), r.own_begin - r.p0, r.own_end - r.p0,
                         static_cast<std::int32_t>(chunks[k].d0), r.p0, &w.stream);
      w.searched[k]->record(&w.stream);
    }
    w.searcher.end(&w.stream);
  };

  // Host read, copy, RFI stage and the chunks of gulp g on worker w.
  auto issue = [&](Worker& w, std::int64_t g) {
    const GulpRange r = L.gulp_range(g);
    const std::int64_t rows = r.len() + L.max_delay;
    const auto t0 = std::chrono::steady_clock::now();
    reader.seek(r.p0);
    if (reader.read_raw(rows, w.raw_host.data()) != rows)
      fail(ErrorCategory::io, "'{}': short read at sample {}", L.path, r.p0);
    times.read += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    w.start.record(&w.stream);
    copy_bytes(w.cleaner.raw(), w.raw_host.data(), static_cast<std::size_t>(rows * row_bytes),
               &w.stream);
    times.bytes_to_device += rows * row_bytes;
    w.copied.record(&w.stream);
    w.cleaner.enqueue_stats(rows, &w.stream);
    const RfiReport rep = w.cleaner.enqueue_clean(L.rfi, &w.stream);
    w.cleaned.record(&w.stream);
    w.kept = rep.kept();
    w.zap_reason = rep.reason;
    enqueue_chunks(w, r);
    w.gulp = g;
  };

  // Waits for worker w's gulp, hands its peaks (each chunk's as SearchPlan::execute would
  // leave them) to the sink and adds its stage times.
  auto finish = [&](Worker& w) {
    const GulpRange r = L.gulp_range(w.gulp);
    std::vector<Peak> found;
    while (!w.searcher.collect(&w.stream, found))
      enqueue_chunks(w, r);  // the peak buffer grew: search again (the gulp is still there)
    std::sort(found.begin(), found.end(),
              [](const Peak& a, const Peak& b) { return a.dm_trial < b.dm_trial; });
    GulpPeaks out;
    out.gulp = w.gulp;
    out.channels_kept = w.kept;
    out.zap_reason = w.zap_reason;
    out.peaks.reserve(found.size());
    auto it = found.begin();
    for (const auto& c : chunks) {
      const auto end =
          std::partition_point(it, found.end(), [&](const Peak& p) { return p.dm_trial < c.d1; });
      const std::size_t first = out.peaks.size();
      out.peaks.insert(out.peaks.end(), it, end);
      finish_plane_peaks(out.peaks, first, L.search.max_peaks);
      it = end;
    }
    times.read += w.copied.elapsed_ms_since(w.start) * 1e-3;
    times.rfi += w.cleaned.elapsed_ms_since(w.copied) * 1e-3;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const Event& before = k == 0 ? w.cleaned : *w.searched[k - 1];
      times.dedisp += w.dedisped[k]->elapsed_ms_since(before) * 1e-3;
      times.search += w.searched[k]->elapsed_ms_since(*w.dedisped[k]) * 1e-3;
    }
    w.gulp = -1;
    sink(std::move(out));
  };

  times.setup += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();
  for (std::int64_t g = g_begin; g < g_end; ++g) {
    Worker& w = *workers[static_cast<std::size_t>(g) % workers.size()];
    if (w.gulp >= 0) finish(w);  // one stream: the previous gulp
    issue(w, g);
    if (workers.size() > 1 && g > g_begin) finish(*workers[static_cast<std::size_t>(g - 1) % 2]);
  }
  for (std::int64_t g = std::max<std::int64_t>(g_begin, g_end - 2); g < g_end; ++g) {
    Worker& w = *workers[static_cast<std::size_t>(g) % workers.size()];
    if (w.gulp == g) finish(w);
  }
  for (const auto& w : workers) {
    times.bytes_to_device += w->cleaner.bytes_to_device();
    times.bytes_from_device += w->cleaner.bytes_from_device() + w->searcher.bytes_from_device();
  }
}

}  // namespace warpbeam::search::detail
