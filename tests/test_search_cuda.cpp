// The GPU search (issue 3) against the CPU search, stage by stage and end to end:
//   SearchStagesGpu    each kernel against its CPU stage on random series: the baseline, the
//                      robust RMS (both of its branches), the normalised boxcars of every width,
//                      and the peaks of whole planes (SearchPlan cuda against cpu);
//   SearchRfiGpu       the GPU RFI stage (unpack, statistics, zapping, zero-DM) against
//                      clean_filterbank() for every nbits;
//   SearchPipelineGpu  the streaming file search: gulp edges at and near a burst, the two-stream
//                      pipeline against the one-stream one, DM chunks;
// every device output is poisoned (NaN) before the kernels run. CPU tests (no device needed):
// the simulator's noise stream and the CLI options of this issue.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/search.hpp"
#include "warpbeam/sim/filterbank.hpp"
#include "warpbeam/unpack.hpp"
#ifdef WARPBEAM_HAVE_CUDA
#include "search/cuda_search.hpp"
#include "search/gulp_searcher.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#endif

using namespace warpbeam;
using namespace warpbeam::search;

namespace {

// A plane [ndm][n] of noise on a slow trend (so the baseline has something to follow), with a
// few outliers; row d has its own amplitude so the trials differ.
std::vector<float> random_plane(std::int64_t ndm, std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x(static_cast<std::size_t>(ndm * n));
  for (std::int64_t d = 0; d < ndm; ++d) {
    const double amp = 0.5 + 2.0 * u(rng), phase = 6.28 * u(rng), level = 10 * u(rng);
    for (std::int64_t t = 0; t < n; ++t) {
      double v = level + amp * g(rng) + 3.0 * std::sin(phase + 2e-4 * static_cast<double>(t));
      if (u(rng) < 1e-3) v += 40 * u(rng);  // outliers (RFI-like spikes)
      x[static_cast<std::size_t>(d * n + t)] = static_cast<float>(v);
    }
  }
  return x;
}

// First mismatch and max error of `got` against `ref` with tolerance tol (absolute).
::testing::AssertionResult close(const std::vector<float>& ref, const std::vector<float>& got,
                                 double tol, const std::string& what) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  double maxerr = 0;
  std::int64_t first = -1;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::isnan(got[i]) != std::isnan(ref[i])
                         ? INFINITY
                         : (std::isnan(ref[i]) ? 0.0 : std::abs(double(got[i]) - ref[i]));
    maxerr = std::max(maxerr, e);
    if (e > tol && first < 0) first = static_cast<std::int64_t>(i);
  }
  if (first >= 0)
    return ::testing::AssertionFailure()
           << what << ": first mismatch at index " << first << ": got " << got[first]
           << ", expected " << ref[first] << "; max error " << maxerr << " > " << tol;
  return ::testing::AssertionSuccess() << what << ": max error " << maxerr;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v)
    if (std::isfinite(x)) m = std::max(m, double(std::abs(x)));
  return m;
}

// Same peaks (dm_trial, filter, sample, begin, end), S/N within rel of the CPU's.
::testing::AssertionResult same_peaks(const std::vector<Peak>& cpu, const std::vector<Peak>& gpu,
                                      double rel) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(cpu.size(), gpu.size()); ++i) {
    const Peak &a = cpu[i], &b = gpu[i];
    if (a.dm_trial != b.dm_trial || a.filter != b.filter || a.sample != b.sample ||
        a.begin != b.begin || a.end != b.end || !(std::abs(a.snr - b.snr) <= rel * std::abs(a.snr)))
      return ::testing::AssertionFailure()
             << "peak " << i << " of " << cpu.size() << ": gpu (dm " << b.dm_trial << ", filter "
             << b.filter << ", sample " << b.sample << ", span " << b.begin << "-" << b.end
             << ", snr " << b.snr << ") cpu (dm " << a.dm_trial << ", filter " << a.filter
             << ", sample " << a.sample << ", span " << a.begin << "-" << a.end << ", snr " << a.snr
             << ")";
    worst = std::max(worst, double(std::abs(a.snr - b.snr) / std::abs(a.snr)));
  }
  if (cpu.size() != gpu.size())
    return ::testing::AssertionFailure() << "gpu " << gpu.size() << " peaks, cpu " << cpu.size();
  return ::testing::AssertionSuccess() << cpu.size() << " peaks, max S/N rel. error " << worst;
}

// Same candidates (dm_trial, sample, filter, members) with S/N within rel, compared in the order
// (sample, dm_trial, filter) so that two candidates of nearly equal S/N may swap ranks.
void expect_same_candidates(const SearchResult& cpu_result, const SearchResult& gpu_result,
                            double rel) {
  auto by_position = [](std::vector<Candidate> v) {
    std::sort(v.begin(), v.end(), [](const Candidate& a, const Candidate& b) {
      if (a.sample != b.sample) return a.sample < b.sample;
      if (a.dm_trial != b.dm_trial) return a.dm_trial < b.dm_trial;
      return a.filter < b.filter;
    });
    return v;
  };
  const auto cpu = by_position(cpu_result.candidates), gpu = by_position(gpu_result.candidates);
  ASSERT_EQ(gpu.size(), cpu.size());
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const auto &a = cpu[i], &b = gpu[i];
    SCOPED_TRACE("candidate " + std::to_string(i));
    EXPECT_EQ(b.dm_trial, a.dm_trial);
    EXPECT_EQ(b.sample, a.sample);
    EXPECT_EQ(b.filter, a.filter);
    EXPECT_EQ(b.members, a.members);
    EXPECT_LE(std::abs(b.snr - a.snr), rel * std::abs(a.snr))
        << "gpu " << b.snr << " cpu " << a.snr;
    worst = std::max(worst, double(std::abs(b.snr - a.snr) / std::abs(a.snr)));
  }
  std::printf("%zu candidates, max S/N rel. error %.3g\n", cpu.size(), worst);
}

SearchConfig stage_config(std::int64_t ndm, std::int64_t n, std::int64_t window) {
  SearchConfig c;
  c.ndms = ndm;
  c.nsamples = n;
  c.tsamp_s = 1e-3;
  c.baseline_s = static_cast<double>(window) * 1e-3;
  c.boxcar_max = 4096;
  c.snr_min = 6;
  return c;
}

// (n, baseline window): levels 0 (n < 5), 1, 2, 3 (median and mean levels), 4 and 6, and odd
// lengths whose decimations drop incomplete groups.
const std::pair<std::int64_t, std::int64_t> kStageShapes[] = {
    {4, 100}, {7, 5}, {124, 125}, {126, 30000}, {3001, 31250}, {20011, 600}, {70001, 31250}};

}  // namespace

#ifdef WARPBEAM_HAVE_CUDA
using warpbeam::search::detail::CudaGulpCleaner;
using warpbeam::search::detail::CudaPlaneSearcher;

namespace {

struct DevicePlane {
  DeviceArray<float> d;
  explicit DevicePlane(const std::vector<float>& x) : d(x.size()) {
    copy_bytes(d.data(), x.data(), d.bytes());
  }
};

std::vector<float> to_host(const DeviceArray<float>& a) {
  std::vector<float> h(a.size());
  copy_bytes(h.data(), a.data(), a.bytes());
  return h;
}

}  // namespace

TEST(SearchStagesGpu, BaselineMatchesTheCpu) {
  WB_REQUIRE_GPU();
  const std::int64_t ndm = 7;
  for (const auto& [n, window] : kStageShapes) {
    SCOPED_TRACE("n " + std::to_string(n) + ", window " + std::to_string(window));
    const SearchConfig c = stage_config(ndm, n, window);
    const auto x = random_plane(ndm, n, static_cast<std::uint32_t>(n));
    const int levels = baseline_levels(c.baseline_window(), n);
    std::vector<float> ref(x.size()), scratch(2 * static_cast<std::size_t>(n) + 8),
        masked(static_cast<std::size_t>(n));
    for (std::int64_t d = 0; d < ndm; ++d)  // stage 1 with its masked passes
      search_baseline(x.data() + d * n, n, levels, ref.data() + d * n, masked.data(),
                      scratch.data());
    DevicePlane plane(x);
    CudaPlaneSearcher s(n, 3);  // batches of 3: rows 0-2, 3-5, 6
    DeviceArray<float> out(x.size());
    device_memset(out.data(), 0xFF, out.bytes());
    for (int first = 0; first < ndm; first += 3) {
      const int count = std::min<int>(3, static_cast<int>(ndm) - first);
      s.test_baseline(c, plane.d.data(), first, count, out.data() + first * n);
    }
    EXPECT_TRUE(close(ref, to_host(out), 1e-6 * max_abs(x), "baseline")) << levels << " levels";
  }
}

TEST(SearchStagesGpu, RobustRmsMatchesTheCpu) {
  WB_REQUIRE_GPU();
  const std::int64_t ndm = 5;
  for (const auto& [n, window] : kStageShapes) {
    SCOPED_TRACE("n " + std::to_string(n) + ", window " + std::to_string(window));
    const SearchConfig c = stage_config(ndm, n, window);
    auto x = random_plane(ndm, n, static_cast<std::uint32_t>(n + 1));
    // Row 3: 70 % of the samples equal, so sigma0 is 0 and the plain RMS branch runs; row 4:
    // constant (sigma 0).
    std::mt19937 rng(9);
    for (std::int64_t t = 0; t < n; ++t) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.7) x[3 * n + t] = 2.5f;
      x[4 * n + t] = -1.25f;
    }
    const int levels = baseline_levels(c.baseline_window(), n);
    std::vector<double> ref(static_cast<std::size_t>(ndm));
    std::vector<float> b(static_cast<std::size_t>(n)), r(b.size()), scratch(2 * b.size() + 8),
        masked(b.size());
    for (std::int64_t d = 0; d < ndm; ++d) {
      search_baseline(x.data() + d * n, n, levels, b.data(), masked.data(), scratch.data());
      for (std::int64_t t = 0; t < n; ++t)
        r[t] = x[d * n + t] - b[t];
      ref[d] = robust_rms(r.data(), n, 0.0f, scratch.data());
    }
    DevicePlane plane(x);
    CudaPlaneSearcher s(n, 2);
    std::vector<double> got;
    for (int first = 0; first < ndm; first += 2) {
      const int count = std::min<int>(2, static_cast<int>(ndm) - first);
      s.test_sigma(c, plane.d.data(), first, count, got);
      for (int i = 0; i < count; ++i)
        EXPECT_NEAR(got[i], ref[first + i], 1e-9 * std::abs(ref[first + i]) + 1e-300)
            << "trial " << first + i;
    }
  }
}

TEST(SearchStagesGpu, NormalisedBoxcarsMatchTheCpu) {
  WB_REQUIRE_GPU();
  const std::int64_t ndm = 4;
  for (const auto& [n, window] :
       {std::pair<std::int64_t, std::int64_t>{20011, 31250}, {70001, 31250}, {3001, 600}}) {
    const SearchConfig c = stage_config(ndm, n, window);
    const auto x = random_plane(ndm, n, static_cast<std::uint32_t>(3 * n));
    const int levels = baseline_levels(c.baseline_window(), n);
    DevicePlane plane(x);
    CudaPlaneSearcher s(n, 4);
    DeviceArray<float> out(x.size());
    std::vector<float> b(static_cast<std::size_t>(n)), r(b.size()), scratch(2 * b.size() + 8),
        snr(b.size()), masked(b.size());
    std::vector<double> prefix(b.size() + 1);
    for (int w = 1; w <= widest_boxcar(c, n, 0); w *= 2) {
      SCOPED_TRACE("n " + std::to_string(n) + ", width " + std::to_string(w));
      device_memset(out.data(), 0xFF, out.bytes());
      std::vector<double> rho;
      s.test_snr(c, plane.d.data(), 0, static_cast<int>(ndm), w, out.data(), rho);
      const auto got = to_host(out);
      for (std::int64_t d = 0; d < ndm; ++d) {
        search_baseline(x.data() + d * n, n, levels, b.data(), masked.data(), scratch.data());
        prefix[0] = 0;
        for (std::int64_t t = 0; t < n; ++t) {
          r[t] = x[d * n + t] - b[t];
          prefix[t + 1] = prefix[t] + r[t];
        }
        const double sigma = robust_rms(r.data(), n, 0.0f, scratch.data());
        boxcar_snr(prefix.data(), n, w, sigma, snr.data());
        const double rho_cpu = normalise_boxcar(snr.data(), n, w, scratch.data());
        EXPECT_NEAR(rho[d], rho_cpu, 1e-6 * rho_cpu) << "trial " << d;
        const std::vector<float> row(got.begin() + d * n, got.begin() + (d + 1) * n);
        EXPECT_TRUE(close(snr, row, 1e-5 * max_abs(snr), "S/N of trial " + std::to_string(d)));
      }
    }
  }
}

// Whole planes: SearchPlan on the GPU against the CPU: the peaks (runs that cross the threads'
// strides, runs cut by the owned range, widths up to the widest) and the RMS of every trial.
TEST(SearchStagesGpu, PlanPeaksMatchTheCpu) {
  WB_REQUIRE_GPU();
  struct Case {
    std::int64_t ndm, n;
    float snr_min;
    std::int64_t own_begin, own_end;
  };
  // The last case finds more peaks than the device buffer first holds (it grows and reruns).
  for (const Case& k : {Case{37, 50000, 6.0f, 1000, 47000}, Case{5, 3001, 3.0f, 0, 3001},
                        Case{600, 9000, 2.0f, 100, 8000}}) {
    SCOPED_TRACE("ndm " + std::to_string(k.ndm) + ", n " + std::to_string(k.n) + ", snr_min " +
                 std::to_string(k.snr_min));
    SearchConfig c = stage_config(k.ndm, k.n, 2000);
    c.snr_min = k.snr_min;
    c.min_rms = 1e-2;
    auto x = random_plane(k.ndm, k.n, static_cast<std::uint32_t>(k.ndm + k.n));
    // Pulses of several widths, some at the owned range's edges and across a 512-sample stride.
    std::mt19937 rng(4);
    for (std::int64_t d = 0; d < k.ndm; d += 3) {
      const std::int64_t w = std::int64_t{1} << (d % 7);
      const std::int64_t at[] = {k.own_begin - w / 2, k.own_end - 1, 511,
                                 std::uniform_int_distribution<std::int64_t>(0, k.n - 1)(rng)};
      for (std::int64_t t0 : at)
        for (std::int64_t t = std::max<std::int64_t>(0, t0); t < std::min(k.n, t0 + w); ++t)
          x[d * k.n + t] += static_cast<float>(12.0 / std::sqrt(double(w)));
    }
    std::vector<Peak> cpu, gpu;
    SearchPlan pc(c, Backend::cpu);
    pc.execute(View<const float, 2>(x.data(), {k.ndm, k.n}), k.own_begin, k.own_end, 7, 100000,
               cpu);
    SearchPlan pg(c, Backend::cuda);
    DevicePlane plane(x);
    Stream stream;
    pg.execute(View<const float, 2>(plane.d.data(), {k.ndm, k.n}, Space::device), k.own_begin,
               k.own_end, 7, 100000, gpu, &stream);
    EXPECT_GT(cpu.size(), 0u);
    EXPECT_TRUE(same_peaks(cpu, gpu, 1e-4));
    ASSERT_EQ(pg.last_rms().size(), pc.last_rms().size());
    for (std::size_t d = 0; d < pc.last_rms().size(); ++d)
      EXPECT_NEAR(pg.last_rms()[d], pc.last_rms()[d], 1e-9 * pc.last_rms()[d]) << "trial " << d;
  }
}

// The GPU RFI stage against clean_filterbank() for every nbits (odd channel counts, so sub-byte
// rows do not end on a byte boundary), with dead, outlier and masked channels.
TEST(SearchRfiGpu, CleaningMatchesTheCpu) {
  WB_REQUIRE_GPU();
  struct Case {
    int nbits;
    bool is_signed;
  };
  for (const Case k :
       {Case{1, false}, Case{2, false}, Case{2, true}, Case{4, false}, Case{4, true},
        Case{8, false}, Case{8, true}, Case{16, false}, Case{16, true}, Case{32, false}}) {
    for (bool zero_dm : {true, false}) {
      SCOPED_TRACE("nbits " + std::to_string(k.nbits) + (k.is_signed ? " signed" : "") +
                   (zero_dm ? ", zero-DM" : ""));
      const int nchans = 77;
      const std::int64_t rows = 3001;
      const auto row_bytes =
          static_cast<std::int64_t>(packed_bytes(k.nbits, static_cast<std::size_t>(nchans)));
      std::mt19937 rng(static_cast<std::uint32_t>(k.nbits * 10 + k.is_signed));
      std::vector<std::uint8_t> raw(static_cast<std::size_t>(rows * row_bytes));
      for (auto& v : raw)
        v = static_cast<std::uint8_t>(rng());
      if (k.nbits == 32) {
        std::normal_distribution<float> g(0, 1);
        std::vector<float> f(static_cast<std::size_t>(rows * nchans));
        for (std::int64_t t = 0; t < rows; ++t)
          for (int c = 0; c < nchans; ++c)
            f[t * nchans + c] = (c == 11 ? 30.0f : 1.0f) * g(rng) + static_cast<float>(c);
        std::memcpy(raw.data(), f.data(), raw.size());
      }
      if (k.nbits >= 8)  // channel 5 dead (constant)
        for (std::int64_t t = 0; t < rows; ++t)
          std::memset(raw.data() + t * row_bytes + 5 * (k.nbits / 8), 0x3C, k.nbits / 8);
      RfiConfig cfg;
      cfg.zap = ChannelMask({0, 40});
      cfg.zero_dm = zero_dm;
      // CPU: unpack row by row, clean.
      std::vector<float> ref(static_cast<std::size_t>(rows * nchans));
      for (std::int64_t t = 0; t < rows; ++t)
        unpack_samples(raw.data() + t * row_bytes, k.nbits, static_cast<std::size_t>(nchans),
                       ref.data() + t * nchans, k.is_signed);
      const RfiReport rc = clean_filterbank(ref.data(), rows, nchans, cfg, 2);
      // GPU.
      CudaGulpCleaner g(nchans, k.nbits, k.is_signed, rows + 17);
      copy_bytes(g.raw(), raw.data(), raw.size());
      Stream stream;
      g.enqueue_stats(rows, &stream);
      const RfiReport rg = g.enqueue_clean(cfg, &stream);
      stream.synchronize();
      std::vector<float> rowsdev(static_cast<std::size_t>(nchans * g.stride()));
      copy_bytes(rowsdev.data(), g.data(), rowsdev.size() * sizeof(float));
      std::vector<float> got(ref.size());
      for (std::int64_t t = 0; t < rows; ++t)
        for (int c = 0; c < nchans; ++c)
          got[t * nchans + c] = rowsdev[c * g.stride() + t];
      EXPECT_EQ(rg.keep, rc.keep);
      EXPECT_EQ(rg.median, rc.median);
      for (int c = 0; c < nchans; ++c)
        EXPECT_NEAR(rg.sigma[c], rc.sigma[c], 1e-9 * rc.sigma[c]) << "channel " << c;
      EXPECT_EQ(rg.zapped_by_mask, rc.zapped_by_mask);
      EXPECT_EQ(rg.zapped_dead, rc.zapped_dead);
      EXPECT_EQ(rg.zapped_outlier, rc.zapped_outlier);
      EXPECT_TRUE(close(ref, got, 1e-5 * std::max(1.0, max_abs(ref)), "cleaned samples"));
    }
  }
}

namespace {

// A small file with one bright burst (and two fainter ones) searched to DM 400.
struct PipelineFile {
  wbtest::TempDir dir;
  std::string path;
  PipelineFile() {
    sim::FilterbankSimConfig s;
    s.nchans = 96;
    s.fch1_mhz = 1420;
    s.foff_mhz = -2.0;
    s.tsamp_s = 256e-6;
    s.nbits = 8;
    s.duration_s = 24;
    s.seed = 77;
    s.bursts = {{220, 30, 2e-3, 9.0}, {90, 12, 1e-3, 3.3}, {330, 14, 4e-3, 16.2}};
    path = dir.file("p.fil");
    sim::simulate_filterbank(s, path);
  }
};

FileSearchConfig pipeline_config() {
  FileSearchConfig c;
  c.dm_max = 400;
  c.boxcar_max = 256;
  return c;
}

RunOptions quiet_run() {
  RunOptions r;
  r.progress = false;
  return r;
}

}  // namespace

// Gulp edges exactly at the burst's best sample, one sample either side and half its width away:
// the GPU gives the CPU's candidates, and the burst is found once.
TEST(SearchPipelineGpu, GulpEdgesAtAndNearABurst) {
  WB_REQUIRE_GPU();
  PipelineFile f;
  FileSearchConfig c = pipeline_config();
  RunOptions run = quiet_run();
  const auto whole = search_filterbank(f.path, c, run, Backend::cpu);
  ASSERT_FALSE(whole.candidates.empty());
  const Candidate top = whole.candidates.front();
  ASSERT_NEAR(top.dm, 220, 10);
  const std::int64_t s0 = top.sample, w = top.width();
  for (std::int64_t gulp : {s0, s0 + 1, s0 - 1, s0 - w / 2, s0 + w / 2 + 1, (s0 + 1) / 2}) {
    SCOPED_TRACE("gulp " + std::to_string(gulp) + " (burst at sample " + std::to_string(s0) +
                 ", width " + std::to_string(w) + ")");
    run.gulp = gulp;
    const auto cpu = search_filterbank(f.path, c, run, Backend::cpu);
    const auto gpu = search_filterbank(f.path, c, run, Backend::cuda);
    EXPECT_GT(gpu.gulps, 1);
    expect_same_candidates(cpu, gpu, 1e-3);
    int near = 0;
    for (const auto& cand : gpu.candidates)
      if (std::abs(cand.sample - s0) <= 2 * w && cand.snr > 12) ++near;
    EXPECT_EQ(near, 1) << "the burst must be one candidate";
  }
}

// The two-stream pipeline gives exactly what one stream gives (same kernels, same order), and
// DM chunks (a small device budget) give the CPU's candidates.
TEST(SearchPipelineGpu, TwoStreamsEqualOneAndChunksEqualTheCpu) {
  WB_REQUIRE_GPU();
  PipelineFile f;
  FileSearchConfig c = pipeline_config();
  RunOptions run = quiet_run();
  run.gulp = 9000;
  run.gpu_streams = 2;
  const auto two = search_filterbank(f.path, c, run, Backend::cuda);
  run.gpu_streams = 1;
  const auto one = search_filterbank(f.path, c, run, Backend::cuda);
  EXPECT_GT(two.gulps, 3);
  ASSERT_EQ(two.candidates.size(), one.candidates.size());
  for (std::size_t i = 0; i < one.candidates.size(); ++i) {
    EXPECT_EQ(two.candidates[i].snr, one.candidates[i].snr) << i;
    EXPECT_EQ(two.candidates[i].sample, one.candidates[i].sample) << i;
    EXPECT_EQ(two.candidates[i].dm_trial, one.candidates[i].dm_trial) << i;
    EXPECT_EQ(two.candidates[i].filter, one.candidates[i].filter) << i;
    EXPECT_EQ(two.candidates[i].members, one.candidates[i].members) << i;
  }
  EXPECT_GT(two.bytes_to_device, 0);
  EXPECT_GT(two.bytes_from_device, 0);

  // A device budget that holds about a third of the DM trials at once.
  run.gpu_streams = 2;
  const std::int64_t ndm = static_cast<std::int64_t>(two.dms.size());
  const std::int64_t len = std::min(two.gulp + 2 * two.margin, two.nsamples_searched);
  const std::int64_t fixed =
      GulpSearcher::estimate(two.header, Backend::cuda, len, two.max_delay, 0, 0, 2).device_bytes;
  const std::int64_t per_trial =
      GulpSearcher::estimate(two.header, Backend::cuda, len, two.max_delay, 1, 0, 2).device_bytes -
      fixed;
  run.device_memory_bytes = fixed + per_trial * (ndm / 3);
  const auto chunked = search_filterbank(f.path, c, run, Backend::cuda);
  EXPECT_LT(chunked.dm_chunk, ndm / 2);
  EXPECT_LE(chunked.device_memory_bytes, run.device_memory_bytes);
  const auto cpu = search_filterbank(f.path, c, run, Backend::cpu);
  expect_same_candidates(cpu, chunked, 1e-3);
}
// The CUDA GulpSearcher holds what the plan's workspace says, by the plans' own reports (no
// constant guessed outside the engines): checked after every gulp was searched, in one and two
// lanes, with DM chunks, on rows read on the host.
TEST(SearchPipelineGpu, WorkspaceBoundsWhatTheSearcherHolds) {
  WB_REQUIRE_GPU();
  PipelineFile f;
  const FileSearchConfig c = pipeline_config();
  const auto source = io::open_filterbank(f.path);
  for (int lanes : {1, 2})
    for (int third : {0, 1}) {
      RunOptions run = quiet_run();
      run.gulp = 9000;
      run.gpu_streams = lanes;
      // Unbounded, then a budget that holds about a third of the DM trials at once (by the
      // searcher's own estimate: a fixed budget can fall below the minimum of one trial).
      std::int64_t budget = 0;
      if (third) {
        const FileSearchPlan all(c, run, source->header(), Backend::cuda, f.path);
        const std::int64_t fixed =
            GulpSearcher::estimate(source->header(), Backend::cuda, all.plane_samples(),
                                   all.max_delay(), 0, 0, lanes)
                .device_bytes;
        budget = fixed + (all.workspace().device_bytes - fixed) / 3;
      }
      run.device_memory_bytes = budget;
      const FileSearchPlan plan(c, run, source->header(), Backend::cuda, f.path);
      if (third) EXPECT_LT(plan.dm_chunk(), plan.ndms());
      SCOPED_TRACE(std::to_string(lanes) + " lanes, budget " + std::to_string(budget) + ", chunk " +
                   std::to_string(plan.dm_chunk()) + " of " + std::to_string(plan.ndms()));
      if (budget > 0) EXPECT_LE(plan.workspace().device_bytes, budget);
      const auto searcher = GulpSearcher::make(plan, 0, plan.ndms(), 0);
      std::int64_t done = 0;
      const GulpSink count = [&](GulpPeaks&& gp) { EXPECT_EQ(gp.gulp, done++); };
      for (std::int64_t g = 0; g < plan.gulps(); ++g) {
        const GulpRange r = plan.gulp_range(g);
        const std::int64_t rows = r.len() + plan.max_delay();
        searcher->submit(
            g, 0, rows,
            [&](GulpInput& in) -> const std::uint8_t* {
              source->seek(r.p0);
              EXPECT_EQ(source->read_raw(rows, in.host()), rows);
              return in.host();
            },
            count);
      }
      searcher->flush(count);
      EXPECT_EQ(done, plan.gulps());
      const Workspace held = searcher->workspace();
      EXPECT_LE(held.device_bytes, plan.workspace().device_bytes);
      EXPECT_GT(held.device_bytes, plan.workspace().device_bytes / 3);
      EXPECT_LE(held.host_bytes, plan.workspace().host_bytes);
    }
}

// A sub-band plan accepts shorter input, so each lane makes one, for the longest plane, and runs
// the shorter first and last gulps through it (before: one per lane and plane length, D1: 4);
// the candidates are the CPU's, which makes one for the whole search.
TEST(SearchPipelineGpu, SubbandSearchMakesOnePlanPerLane) {
  WB_REQUIRE_GPU();
  PipelineFile f;
  FileSearchConfig c = pipeline_config();
  c.dedisp = DedispMethod::subband;
  RunOptions run = quiet_run();
  run.gulp = 9000;
  const auto cpu = search_filterbank(f.path, c, run, Backend::cpu);
  ASSERT_EQ(cpu.dedisp_method, "subband");
  ASSERT_GT(cpu.gulps, 3);  // first, middle and last planes of different lengths
  ASSERT_EQ(cpu.dm_chunk, static_cast<std::int64_t>(cpu.dms.size()));
  EXPECT_EQ(cpu.dedisp_plans, 1);
  for (int lanes : {2, 1}) {
    SCOPED_TRACE(std::to_string(lanes) + " lanes");
    run.gpu_streams = lanes;
    const auto gpu = search_filterbank(f.path, c, run, Backend::cuda);
    EXPECT_EQ(gpu.dedisp_method, "subband");
    EXPECT_EQ(gpu.dm_chunk, static_cast<std::int64_t>(gpu.dms.size()));
    EXPECT_EQ(gpu.dedisp_plans, lanes);
    EXPECT_EQ(gpu.to_json()["dedisp_plans"], lanes);
    expect_same_candidates(cpu, gpu, 1e-3);
  }
  // Brute force: the plans per plane length, shared by the lanes.
  c.dedisp = DedispMethod::brute;
  run.gpu_streams = 2;
  const auto brute = search_filterbank(f.path, c, run, Backend::cuda);
  EXPECT_GE(brute.dedisp_plans, 3);
}
#endif

// ------------------------------------------------------------------------------------------
// CPU tests: the simulator's noise stream, the CLI of this issue
// ------------------------------------------------------------------------------------------

namespace {
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// The documented noise: Box-Muller on uniforms hashed from (seed, i / 2), cosine for even i.
double reference_gaussian(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t q = i >> 1, k = splitmix64(seed ^ 0xD1B54A32D192ED03ull);
  const double u1 = (static_cast<double>(splitmix64(k + 2 * q) >> 11) + 0.5) * 0x1p-53;
  const double u2 = static_cast<double>(splitmix64(k + 2 * q + 1) >> 11) * 0x1p-53;
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
  return (i & 1) ? r * std::sin(a) : r * std::cos(a);
}
}  // namespace

// The simulator computes each Box-Muller pair once (in parallel): the values are still the
// counter-based stream, also where a pair straddles two rows (odd nchans).
TEST(SimFilterbankNoise, IsTheCounterBasedStream) {
  wbtest::TempDir dir;
  sim::FilterbankSimConfig s;
  s.nchans = 7;
  s.nbits = 32;
  s.tsamp_s = 1e-3;
  s.duration_s = 9;  // 9000 rows: more than one block of 8192
  s.seed = 5;
  sim::simulate_filterbank(s, dir.file("n.fil"));
  io::FilterbankReader r(dir.file("n.fil"));
  const auto x = r.read_all();
  ASSERT_EQ(x.size(), 9000u * 7u);
  for (std::size_t i = 0; i < x.size(); i += 997) {
    const auto ref = static_cast<float>(0.0 + 1.0 * reference_gaussian(5, i));
    EXPECT_NEAR(x[i], ref, 1e-6 * (1 + std::abs(ref))) << "index " << i;
  }
  EXPECT_NEAR(x[8192 * 7 + 3], reference_gaussian(5, 8192 * 7 + 3), 1e-6);
}

TEST(SearchCudaCli, SimulateTakesSeveralBursts) {
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli("simulate filterbank '" + dir.file("b.fil") +
                                 "' --nchans 32 --duration 4 --burst 100,20,1,1.0 --burst "
                                 "200,15,2,2.5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir.file("b.fil") + ".json");
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["bursts"].size(), 2u);
  EXPECT_EQ(j["bursts"][1]["dm"].get<double>(), 200);
  EXPECT_EQ(j["bursts"][1]["width_s"].get<double>(), 2e-3);
  const auto bad =
      wbtest::run_cli("simulate filterbank '" + dir.file("c.fil") + "' --burst 100,20,1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--burst"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.fil")));
}

TEST(SearchCudaCli, GpuOptionsAreValidated) {
  wbtest::TempDir dir;
  const std::string fil = dir.file("s.fil");
  ASSERT_EQ(wbtest::run_cli("simulate filterbank '" + fil + "' --nchans 16 --duration 3 --no-burst")
                .exit_code,
            0);
  for (const char* opt : {"--gpu-streams 3", "--gpu-memory -1", "--device -2"}) {
    const auto r = wbtest::run_cli("search '" + fil + "' " + opt);
    EXPECT_EQ(r.exit_code, 2) << opt << ": " << r.err;
  }
  // `bench dedisp-gpu` folded into `bench dedisp --backend cuda`.
  EXPECT_EQ(wbtest::run_cli("bench dedisp-gpu --config D1").exit_code, 2);
  if (!cuda_available()) {
    const auto r = wbtest::run_cli("bench dedisp --config D1 --backend cuda --no-file");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const auto s = wbtest::run_cli("search '" + fil + "' --backend cuda");
    EXPECT_EQ(s.exit_code, 1) << s.err;
  }
}
