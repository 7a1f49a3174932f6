// What every GulpSearcher shares: the choice of implementation, the memory estimate of the CPU
// one, the slices of a plan, and search_gulps(): the loop over a source's gulps that the file
// search and the distributed search both run.
#include "search/gulp_searcher.hpp"

#include <chrono>
#include <optional>

#include "search/gulp_reader.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::search {

// gulp_searcher_cpu.cpp and gulp_searcher_cuda.cpp (the latter's stand-ins without CUDA below).
std::unique_ptr<GulpSearcher> make_cpu_gulp_searcher(const FileSearchPlan& plan,
                                                     std::int64_t dm_begin, std::int64_t dm_end,
                                                     bool host_input);
std::unique_ptr<GulpSearcher> make_cuda_gulp_searcher(const FileSearchPlan& plan,
                                                      std::int64_t dm_begin, std::int64_t dm_end,
                                                      int device, bool host_input);
Workspace estimate_cuda_gulp_searcher(const io::FilterbankHeader& h, std::int64_t plane_len,
                                      std::int32_t max_delay, std::int64_t chunk, int lanes,
                                      const Workspace* method_plan, bool host_input);

StageTimes& StageTimes::operator+=(const StageTimes& o) {
  read += o.read;
  read_wait += o.read_wait;
  unpack += o.unpack;
  copy += o.copy;
  rfi += o.rfi;
  dedisp += o.dedisp;
  search += o.search;
  setup += o.setup;
  gulp_plans += o.gulp_plans;
  gpu_wait += o.gpu_wait;
  dedisp_plans += o.dedisp_plans;
  bytes_to_device += o.bytes_to_device;
  bytes_from_device += o.bytes_from_device;
  return *this;
}

void StageTimes::report_to(SearchResult& r) const {
  r.seconds_read = read;
  r.seconds_read_wait = read_wait;
  r.seconds_unpack = unpack;
  r.seconds_copy = copy;
  r.seconds_rfi = rfi;
  r.seconds_dedisp = dedisp;
  r.seconds_search = search;
  r.seconds_setup = setup;
  r.seconds_gulp_plans = gulp_plans;
  r.seconds_gpu_wait = gpu_wait;
  r.dedisp_plans = dedisp_plans;
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
  return make_cpu_gulp_searcher(plan, dm_begin, dm_end, host_input);
}

Workspace GulpSearcher::estimate(const io::FilterbankHeader& h, Backend backend,
                                 std::int64_t plane_len, std::int32_t max_delay, std::int64_t chunk,
                                 int threads, int lanes, const Workspace* method_plan,
                                 bool host_input) {
  if (backend == Backend::cuda)
    return estimate_cuda_gulp_searcher(h, plane_len, max_delay, chunk, lanes, method_plan,
                                       host_input);
  // The CPU searcher (gulp_searcher_cpu.cpp): the packed rows (host_input), the cleaned float32
  // rows and their RFI scratch, the plane of one chunk, and the plans of one chunk.
  const std::int64_t rows = plane_len + max_delay;
  Workspace w;
  w.host_bytes = (host_input ? rows * static_cast<std::int64_t>(h.bytes_per_sample()) : 0) +
                 rows * h.nchans * static_cast<std::int64_t>(sizeof(float)) +
                 chunk * plane_len * static_cast<std::int64_t>(sizeof(float));
  w += clean_filterbank_workspace(rows, threads);
  if (method_plan) {
    w += *method_plan;
  } else {
    dedisp::DedispersionConfig dc;
    dc.nchans = h.nchans;
    dc.nbits = 32;
    dc.dms.assign(static_cast<std::size_t>(chunk), 0.f);
    dc.nsamples_in = rows;
    dc.threads = threads;
    w += dedisp::DedispersionPlan::estimate_workspace(dc, Backend::cpu);
  }
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
  // The reader outlives the searcher, whose streams may still hold its buffers when an error
  // unwinds (the searcher's destructor waits for them); it is made after the searcher, which
  // selects the device.
  std::optional<detail::GulpReader> reader;
  const auto searcher = GulpSearcher::make(plan, s.dm_begin, s.dm_end, device, false);
  const auto t_setup = std::chrono::steady_clock::now();
  reader.emplace(plan, source, s.gulp_begin, s.gulp_end, plan.options().resolved_read_threads());
  const double reader_setup =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();
  bool go_on = true;
  const GulpSink deliver = [&](GulpPeaks&& gp) {
    if (!sink(std::move(gp))) go_on = false;
  };
  for (std::int64_t g = s.gulp_begin; g < s.gulp_end && go_on; ++g) {
    const GulpRange r = plan.gulp_range(g);
    const std::int64_t rows = r.len() + plan.max_delay();
    // The reader's buffer of gulp g is consumed when submit() returns (GulpLoader): the reader
    // then fills it with gulp g + 2 while gulp g + 1 is searched.
    searcher->submit(
        g, 0, rows, [&](GulpInput&) -> const std::uint8_t* { return reader->acquire(g); }, deliver);
    if (go_on) reader->release(g);  // stopped: nothing more to read ahead
  }
  searcher->flush(deliver);
  StageTimes t = searcher->times();
  t.read += reader->read_seconds();
  t.setup += reader_setup;
  times += t;
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
  res.read_threads = plan.options().resolved_read_threads();
  res.widest_boxcar = widest_boxcar(plan.search_config(0, 0, 0), plan.plane_samples(), 0);
  res.dedisp_method = plan.dedisp_algorithm() == dedisp::Algorithm::subband ? "subband"
                      : plan.dedisp_algorithm() == dedisp::Algorithm::fdmt  ? "fdmt"
                                                                            : "brute";
  res.dedisp_choice = plan.dedisp_choice();
  return res;
}

#ifndef WARPBEAM_HAVE_CUDA
std::unique_ptr<GulpSearcher> make_cuda_gulp_searcher(const FileSearchPlan&, std::int64_t,
                                                      std::int64_t, int, bool) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
Workspace estimate_cuda_gulp_searcher(const io::FilterbankHeader&, std::int64_t, std::int32_t,
                                      std::int64_t, int, const Workspace*, bool) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
std::int64_t device_memory_budget(const RunOptions&) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam::search
