// What every GulpSearcher shares: the choice of implementation, the memory estimate of the CPU
// one, the slices of a plan, and search_gulps(): the loop over a source's gulps that the file
// search and the distributed search both run.
#include "search/gulp_searcher.hpp"

#include <chrono>

#include "warpbeam/format.hpp"

namespace warpbeam::search {

// gulp_searcher_cpu.cpp and gulp_searcher_cuda.cpp (the latter's stand-ins without CUDA below).
std::unique_ptr<GulpSearcher> make_cpu_gulp_searcher(const FileSearchPlan& plan,
                                                     std::int64_t dm_begin, std::int64_t dm_end);
std::unique_ptr<GulpSearcher> make_cuda_gulp_searcher(const FileSearchPlan& plan,
                                                      std::int64_t dm_begin, std::int64_t dm_end,
                                                      int device, bool host_input);
Workspace estimate_cuda_gulp_searcher(const io::FilterbankHeader& h, std::int64_t plane_len,
                                      std::int32_t max_delay, std::int64_t chunk, int lanes);

void StageTimes::report_to(SearchResult& r) const {
  r.seconds_read = read;
  r.seconds_rfi = rfi;
  r.seconds_dedisp = dedisp;
  r.seconds_search = search;
  r.seconds_setup = setup;
  r.bytes_to_device = bytes_to_device;
  r.bytes_from_device = bytes_from_device;
}

std::unique_ptr<GulpSearcher> GulpSearcher::make(const FileSearchPlan& plan, std::int64_t dm_begin,
                                                 std::int64_t dm_end, int device, bool host_input) {
  if (dm_begin < 0 || dm_end > plan.ndms() || dm_begin >= dm_end)
    fail(ErrorCategory::invalid_argument, "DM trials [{}, {}) of {}", dm_begin, dm_end,
         plan.ndms());
  if (plan.backend() == Backend::cuda)
    return make_cuda_gulp_searcher(plan, dm_begin, dm_end, device, host_input);
  return make_cpu_gulp_searcher(plan, dm_begin, dm_end);
}

Workspace GulpSearcher::estimate(const io::FilterbankHeader& h, Backend backend,
                                 std::int64_t plane_len, std::int32_t max_delay, std::int64_t chunk,
                                 int threads, int lanes) {
  if (backend == Backend::cuda)
    return estimate_cuda_gulp_searcher(h, plane_len, max_delay, chunk, lanes);
  // The CPU searcher (gulp_searcher_cpu.cpp): the packed rows, the cleaned float32 rows and
  // their RFI scratch, the plane of one chunk, and the plans of one chunk.
  const std::int64_t rows = plane_len + max_delay;
  Workspace w;
  w.host_bytes = rows * static_cast<std::int64_t>(h.bytes_per_sample()) +
                 rows * h.nchans * static_cast<std::int64_t>(sizeof(float)) +
                 chunk * plane_len * static_cast<std::int64_t>(sizeof(float));
  w += clean_filterbank_workspace(rows, threads);
  dedisp::DedispersionConfig dc;
  dc.nchans = h.nchans;
  dc.nbits = 32;
  dc.dms.assign(static_cast<std::size_t>(chunk), 0.f);
  dc.nsamples_in = rows;
  dc.threads = threads;
  w += dedisp::DedispersionPlan::estimate_workspace(dc, Backend::cpu);
  SearchConfig sc;
  sc.ndms = chunk;
  sc.nsamples = plane_len;
  sc.threads = threads;
  w += SearchPlan::estimate_workspace(sc, Backend::cpu);
  return w;
}

SearchSlice SearchSlice::resolve(const FileSearchPlan& plan) const {
  SearchSlice s = *this;
  if (s.gulp_end < 0) s.gulp_end = plan.gulps();
  if (s.dm_end < 0) s.dm_end = plan.ndms();
  if (s.gulp_begin < 0 || s.gulp_begin >= s.gulp_end || s.gulp_end > plan.gulps())
    fail(ErrorCategory::invalid_argument, "gulps [{}, {}) of {}", s.gulp_begin, s.gulp_end,
         plan.gulps());
  if (s.dm_begin < 0 || s.dm_begin >= s.dm_end || s.dm_end > plan.ndms())
    fail(ErrorCategory::invalid_argument, "DM trials [{}, {}) of {}", s.dm_begin, s.dm_end,
         plan.ndms());
  return s;
}

void search_gulps(const FileSearchPlan& plan, io::FilterbankSource& source,
                  const SearchSlice& slice, int device,
                  const std::function<bool(GulpPeaks&&)>& sink, StageTimes& times) {
  const SearchSlice s = slice.resolve(plan);
  const auto searcher = GulpSearcher::make(plan, s.dm_begin, s.dm_end, device);
  bool go_on = true;
  const GulpSink deliver = [&](GulpPeaks&& gp) {
    if (!sink(std::move(gp))) go_on = false;
  };
  for (std::int64_t g = s.gulp_begin; g < s.gulp_end && go_on; ++g) {
    const GulpRange r = plan.gulp_range(g);
    const std::int64_t rows = r.len() + plan.max_delay();
    searcher->submit(
        g, 0, rows,
        [&](GulpInput& in) -> const std::uint8_t* {
          std::uint8_t* rows_out = in.host();
          source.seek(r.p0);
          if (source.read_raw(rows, rows_out) != rows)
            fail(ErrorCategory::io, "'{}': short read at sample {}", source.path(), r.p0);
          return rows_out;
        },
        deliver);
  }
  searcher->flush(deliver);
  const StageTimes& t = searcher->times();
  times.read += t.read;
  times.rfi += t.rfi;
  times.dedisp += t.dedisp;
  times.search += t.search;
  times.setup += t.setup;
  times.bytes_to_device += t.bytes_to_device;
  times.bytes_from_device += t.bytes_from_device;
}

SearchResult planned_result(const FileSearchPlan& plan) {
  SearchResult res;
  res.header = plan.header();
  res.backend = plan.backend() == Backend::cuda ? "cuda" : "cpu";
  res.dms = plan.dms();
  res.max_delay = plan.max_delay();
  res.nsamples_searched = plan.nsamples_searched();
  res.gulp = plan.gulp();
  res.gulps = plan.gulps();
  res.margin = plan.margin();
  res.dm_chunk = plan.dm_chunk();
  res.memory_bytes = plan.workspace().host_bytes;
  res.device_memory_bytes = plan.workspace().device_bytes;
  res.min_channels_kept = plan.header().nchans;
  res.widest_boxcar = widest_boxcar(plan.search_config(0, 0, 0), plan.plane_samples(), 0);
  return res;
}

#ifndef WARPBEAM_HAVE_CUDA
std::unique_ptr<GulpSearcher> make_cuda_gulp_searcher(const FileSearchPlan&, std::int64_t,
                                                      std::int64_t, int, bool) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
Workspace estimate_cuda_gulp_searcher(const io::FilterbankHeader&, std::int64_t, std::int32_t,
                                      std::int64_t, int) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
std::int64_t device_memory_budget(const RunOptions&) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam::search
