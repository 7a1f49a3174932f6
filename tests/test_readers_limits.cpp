// Issue 18: readers and option parsers given hostile inputs. Each test is a regression test of a
// reproducer of ../shared/repro (fuzzing, sanitizers, review): a one-line error naming the
// problem, no output, and memory bounded by the file's size or the budget (the CLI runs under
// `ulimit -v`, so a reader that allocates what a header declares fails the test quickly instead
// of taking gigabytes).
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/das.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/io/ultrasound.hpp"
#include "warpbeam/io/voltages.hpp"
#include "warpbeam/search.hpp"
// Both simulators' headers in one file: two structs named sim::SkySource were an ODR violation
// (and this include pair did not compile) until the station's became sim::StationSource.
#include "warpbeam/sim/station.hpp"
#include "warpbeam/sim/ultrasound.hpp"
#include "warpbeam/sim/voltages.hpp"

using namespace warpbeam;
namespace fs = std::filesystem;

namespace {

/// The reproducers' folder, beside the data folder (../shared/repro).
std::string repro_file(const std::string& rel) {
  return (fs::path(wbtest::data_dir()).parent_path() / "repro" / rel).string();
}

#define WB_REQUIRE_REPRO(rel)                                                      \
  do {                                                                             \
    if (!fs::exists(repro_file(rel)))                                              \
      GTEST_SKIP() << "reproducer not found: " << repro_file(rel)                  \
                   << " (../shared/repro beside the data folder, see its README)"; \
  } while (0)

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

/// The address space (MiB, to 16 MiB) `warpbeam --version` needs under ulimit -v: the mapped
/// libraries, which a CUDA build makes large (cuBLAS alone maps hundreds of MiB). Measured once by
/// bisection so that the limits below bound what a command allocates, not what it links.
int loaded_mib() {
  static const int mib = [] {
    auto runs = [](int m) {
      return wbtest::run_cli_with_prefix("ulimit -v " + std::to_string(m * 1024) + "; exec",
                                         "--version")
                 .exit_code == 0;
    };
    int lo = 0, hi = 1 << 16;
    if (!runs(hi)) return 0;
    while (hi - lo > 16) {
      const int mid = (lo + hi) / 2;
      (runs(mid) ? hi : lo) = mid;
    }
    return hi;
  }();
  return mib;
}

/// `warpbeam ARGS` with its memory limited to `mib` MiB beyond what loading it takes: ulimit -v,
/// or under ASan (which reserves terabytes of address space) ASan's own limit on one allocation.
wbtest::CliResult run_cli_limited(const std::string& args, int mib = 3072) {
  if (kAsan)
    return wbtest::run_cli_with_prefix(
        "ASAN_OPTIONS=\"$ASAN_OPTIONS:allocator_may_return_null=1:"
        "max_allocation_size_mb=" +
            std::to_string(mib) + "\" exec",
        args);
  return wbtest::run_cli_with_prefix(
      "ulimit -v " + std::to_string((mib + loaded_mib()) * 1024) + "; exec", args);
}

// A SIGPROC header written byte by byte (independently of warpbeam's writer).
struct RawHeader {
  std::string bytes;
  RawHeader() { str("HEADER_START"); }
  void str(const std::string& s) {
    const auto n = static_cast<std::int32_t>(s.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    bytes += s;
  }
  void i32(const std::string& k, std::int32_t v) {
    str(k);
    bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  void f64(const std::string& k, double v) {
    str(k);
    bytes.append(reinterpret_cast<const char*>(&v), 8);
  }
  std::string end() {
    str("HEADER_END");
    return bytes;
  }
};

std::string write_file(const wbtest::TempDir& d, const std::string& name, const std::string& b) {
  std::ofstream(d.file(name), std::ios::binary) << b;
  return d.file(name);
}

bool contains(const std::string& s, const std::string& w) {
  return s.find(w) != std::string::npos;
}

// The message of the Error that `f` throws, "" when none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------- SSMIF

// N_SNAP 65536 x N_SNAPCH 65537 overflowed int, passed "at most 65536", and SNAP_ANT wrote past
// the map: beamform and image ended in a segmentation fault.
TEST(ReaderLimits, SsmifDigitiserProductOverflowIsAnError) {
  WB_REQUIRE_REPRO("ssmif/ssmif_snap_overflow_far.txt");
  for (const char* f : {"ssmif/ssmif_snap_overflow_far.txt", "ssmif/ssmif_snap_overflow.txt"}) {
    const auto e = error_of([&] { io::read_ssmif(repro_file(f)); });
    EXPECT_TRUE(contains(e, "N_SNAP")) << f << ": " << e;
  }
  WB_REQUIRE_DATA("lwa/tbf-test.dat");
  wbtest::TempDir dir;
  const auto r = run_cli_limited("image '" + wbtest::data_file("lwa/tbf-test.dat") + "' --ssmif '" +
                                 repro_file("ssmif/ssmif_snap_overflow_far.txt") + "' --out '" +
                                 dir.file("o") + "' --backend cpu --gulp 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "65536 inputs")) << r.err;
  EXPECT_TRUE(dir.files().empty());
}

// A station file cut at 50 kB (no cable lengths, no input map) beamformed silently with defaults.
TEST(ReaderLimits, TruncatedStationFileIsRefused) {
  WB_REQUIRE_DATA("lwa/lwasv-ssmif.txt");
  wbtest::TempDir dir;
  const std::string full = wbtest::slurp(wbtest::data_file("lwa/lwasv-ssmif.txt"));
  for (std::size_t cut : {30000u, 50000u, 120000u}) {
    std::ofstream(dir.file("cut.txt")) << full.substr(0, full.rfind('\n', cut) + 1);
    const auto e = error_of([&] {
      const io::Ssmif s = io::read_ssmif(dir.file("cut.txt"));
      io::tbf_station_model(s, s.nstand());
    });
    EXPECT_TRUE(contains(e, "truncated")) << cut << ": [" << e << "]";
  }
  // The whole file still works.
  const io::Ssmif s = io::read_ssmif(wbtest::data_file("lwa/lwasv-ssmif.txt"));
  EXPECT_TRUE(s.cable_lengths_given && s.input_map_given);
  EXPECT_EQ(io::tbf_station_model(s, s.nstand()).nstand(), 256);
}

// ---------------------------------------------------------------------------------------- GUPPI

// BLOCSIZE 4 GiB in a 22 kB file: 12.8 GB before "no whole block".
TEST(ReaderLimits, GuppiBlockLargerThanTheFileAllocatesNothing) {
  WB_REQUIRE_REPRO("guppi/manual-blocsize-4GiB.raw");
  wbtest::TempDir dir;
  std::ofstream(dir.file("ant1.txt")) << "0 0 0\n";
  for (const char* f : {"guppi/manual-blocsize-4GiB.raw", "guppi/manual-blocsize-1GiB.raw"}) {
    const auto r =
        run_cli_limited("beamform '" + repro_file(f) + "' --grid azel:180:180:1:60:60:1 --array '" +
                            dir.file("ant1.txt") + "' --backend cpu --out '" + dir.file("o") + "'",
                        512);
    EXPECT_EQ(r.exit_code, 1) << f << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "partial block")) << r.err;
    EXPECT_TRUE(contains(r.err, "no whole block")) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("o")));
  }
}

// The constructor threw on a bad header without closing the file: 2 descriptors per attempt.
TEST(ReaderLimits, GuppiReaderClosesItsFileWhenItThrows) {
  WB_REQUIRE_REPRO("guppi/guppi_bad_npol3.raw");
  const int before = open_fds();
  for (int i = 0; i < 50; ++i)
    for (const char* f : {"guppi/guppi_bad_npol3.raw", "guppi/guppi_no_end_card.raw"})
      EXPECT_FALSE(error_of([&] { io::GuppiReader r(repro_file(f)); }).empty());
  EXPECT_EQ(open_fds(), before) << "file descriptors leaked";
}

// A BLOCSIZE smaller than the real blocks: the next "header" is data; the error said "non-ASCII
// byte" instead of naming the block size.
TEST(ReaderLimits, GuppiBlockSizeThatDoesNotMatchTheDataIsNamed) {
  wbtest::TempDir dir;
  const auto card = [](const std::string& k, const std::string& v) {
    std::string c = k;
    c.resize(8, ' ');
    c += "= " + v;
    c.resize(80, ' ');
    return c;
  };
  auto header = [&](int blocsize) {
    std::string h;
    for (auto [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"BLOCSIZE", std::to_string(blocsize)},
                                                          {"NBITS", "8"},
                                                          {"NPOL", "1"},
                                                          {"OBSNCHAN", "1"},
                                                          {"TBIN", "1e-6"},
                                                          {"OBSFREQ", "400"},
                                                          {"CHAN_BW", "1"}})
      h += card(k, v);
    std::string end = "END";
    end.resize(80, ' ');
    return h + end;
  };
  // Two real blocks of 512 bytes, each header claiming 256.
  std::string file;
  for (int b = 0; b < 2; ++b)
    file += header(256) + std::string(512, static_cast<char>(0x90 + b));
  std::ofstream(dir.file("bad.raw"), std::ios::binary) << file;
  io::GuppiReader r(dir.file("bad.raw"));
  std::vector<std::uint8_t> block;
  EXPECT_TRUE(r.read_block(block));
  const auto e = error_of([&] {
    while (r.read_block(block)) {
    }
  });
  EXPECT_TRUE(contains(e, "BLOCSIZE")) << e;
  EXPECT_TRUE(contains(e, "does not match the data")) << e;
}

// ------------------------------------------------------------------------------------- SIGPROC

// A 327-byte file with nchans 16777216 and no sample: search built a 17.5 GiB delay table (18.5
// GB, 160 s) before it found 0 samples.
TEST(ReaderLimits, SearchOfAFileWithoutSamplesFailsBeforeAnyTable) {
  wbtest::TempDir dir;
  RawHeader h;
  h.i32("nchans", 1 << 24);
  h.i32("nbits", 32);
  h.i32("nifs", 1);
  h.f64("fch1", 1500);
  h.f64("foff", -1e-5);
  h.f64("tsamp", 6.4e-5);
  const auto fil = write_file(dir, "huge.fil", h.end() + std::string(100, '\0'));
  std::vector<std::string> files = {fil};
  if (fs::exists(repro_file("sigproc/repro-search-18GB-nchans16M-327B.fil")))
    files.push_back(repro_file("sigproc/repro-search-18GB-nchans16M-327B.fil"));
  for (const auto& f : files) {
    const auto r =
        run_cli_limited("search '" + f + "' --output '" + dir.file("o.cand") + "'", 1024);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "no whole time sample")) << r.err;
    EXPECT_FALSE(fs::exists(dir.file("o.cand")));
  }
}

// `info` printed "-9223372036854775808 samples" for a delay beyond int64 (undefined behaviour).
TEST(ReaderLimits, InfoPrintsAHugeMaxDelay) {
  wbtest::TempDir dir;
  RawHeader h;
  h.i32("nchans", 1000);
  h.i32("nbits", 8);
  h.f64("fch1", 0.001);
  h.f64("foff", -1e-7);
  h.f64("tsamp", 1e-9);
  const auto fil = write_file(dir, "low.fil", h.end() + std::string(4000, '\1'));
  const auto r = wbtest::run_cli("info '" + fil + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto line = r.out.substr(r.out.find("max delay"));
  EXPECT_FALSE(contains(line, "-")) << line;
  // k DM (fmin^-2 - fmax^-2) / tsamp, fmin = fch1 + 999 foff.
  const double fmin = 0.001 - 999e-7, delay = 4.148808e3 * 1000 * (1 / (fmin * fmin) - 1e6);
  EXPECT_TRUE(contains(line, fmt::format("{:.0f} samples", std::round(delay / 1e-9)))) << line;
}

// Reading 0 samples of a 32-bit file passed a null pointer to memcpy (UBSan).
TEST(ReaderLimits, ZeroSamplesOfA32BitFileReadCleanly) {
  wbtest::TempDir dir;
  RawHeader h;
  h.i32("nchans", 4);
  h.i32("nbits", 32);
  h.f64("fch1", 1400);
  h.f64("foff", -1);
  h.f64("tsamp", 1e-3);
  std::vector<std::string> files = {write_file(dir, "empty.fil", h.end())};
  if (fs::exists(repro_file("sigproc/min-unpack-nonnull.fil")))
    files.push_back(repro_file("sigproc/min-unpack-nonnull.fil"));
  for (const auto& f : files) {
    io::FilterbankReader r(f);
    EXPECT_EQ(r.read(10, nullptr), 0);
    EXPECT_TRUE(r.read_all().empty());
  }
}

// ----------------------------------------------------------------------------- .cand and lists

TEST(ReaderLimits, CandFilterOutsideABoxcarIsAFormatError) {
  wbtest::TempDir dir;
  std::vector<std::string> files = {
      write_file(dir, "f40.cand", "14.6\t1603\t2.03\t40\t130\t473.4\t75\t1575\t1639\n")};
  if (fs::exists(repro_file("cand/cand_filter40.cand")))
    files.push_back(repro_file("cand/cand_filter40.cand"));
  for (const auto& f : files) {
    const auto e = error_of([&] { io::read_cand(f); });
    EXPECT_TRUE(contains(e, "filter 40")) << e;
  }
  const auto ok = io::read_cand(
      write_file(dir, "ok.cand", "14.6\t1603\t2.03\t30\t130\t473.4\t75\t1575\t1639\n"));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].width(), 1 << 30);
}

// Twenty "--zap-chans 0-16777216" took 2.3 GB and 18 s: ranges are merged before expansion.
TEST(ReaderLimits, ChannelListsMergeRangesBeforeExpanding) {
  std::string spec;
  for (int i = 0; i < 20; ++i)
    spec += (i ? "," : "") + std::string("0-16777216");
  const auto t0 = std::chrono::steady_clock::now();
  const auto all = search::ChannelMask::parse(spec).channels();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  ASSERT_EQ(all.size(), 16777217u);
  EXPECT_EQ(all.back(), 16777216);
  // Against a naive set on random overlapping ranges.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string s;
    std::set<int> expect;
    for (int k = 0; k < 6; ++k) {
      const int a = static_cast<int>(rng() % 100), b = a + static_cast<int>(rng() % 20);
      const bool single = rng() % 3 == 0;
      s += (k ? "," : "") + (single ? fmt::format("{}", a) : fmt::format("{}-{}", a, b));
      for (int c = a; c <= (single ? a : b); ++c)
        expect.insert(c);
    }
    EXPECT_EQ(search::ChannelMask::parse(s).channels(),
              std::vector<int>(expect.begin(), expect.end()))
        << s;
  }
  for (const char* bad : {"99999999999999999999", "1-2-3", "5-3", "-1", "a", "1,,2"})
    EXPECT_FALSE(error_of([&] { search::ChannelMask::parse(bad).channels(); }).empty()) << bad;
  const auto r = run_cli_limited(
      "search /nonexistent.fil --zap-chans " + spec + " --output /nonexistent/o.cand", 1024);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(contains(r.err, "bad_alloc")) << r.err;
}

// `radec 83.6 95 x` (Dec > 90) was accepted; a grid of 1e10 beams overflowed int (UBSan).
TEST(ReaderLimits, BeamListsAndGridsCheckTheirRanges) {
  for (const char* bad : {"radec 83.6 95 x", "azel 180 -91", "lm 0.8 0.8", "radec nan 10",
                          "azel inf 10", "radec 10:00:00 -90:00:01"}) {
    const auto e = error_of([&] { beamform::parse_beam_list(bad); });
    EXPECT_FALSE(e.empty()) << bad;
  }
  EXPECT_TRUE(
      contains(error_of([&] { beamform::parse_beam_list("radec 83.6 95 x"); }), "declination"));
  EXPECT_EQ(beamform::parse_beam_list("radec 83.6 -90\nazel 0 90\nlm 0.6 0.8").size(), 3u);
  for (const char* bad :
       {"azel:180:180:1e10:60:60:1", "azel:180:180:3:60:60:-2", "azel:180:180:300:60:60:300",
        "azel:180:180:1.5:60:60:1", "radec:0:10:2:80:100:3"})
    EXPECT_FALSE(error_of([&] { beamform::parse_beam_grid(bad); }).empty()) << bad;
}

// ------------------------------------------------------------------------------------------ das

// A grid of 1e-6 m steps grew to 15 GB; 1e-9 ended in a bare std::bad_alloc; extremes were UB.
TEST(ReaderLimits, DasGridsAreCheckedAgainstLimitsAndTheBudget) {
  for (const char* bad : {"0:0.1:1e-12,0:0.1:1e-12", "0:1e300:1e-300,0:1:1", "0:inf:1,0:1:1",
                          "-1e308:1e308:1e-308,0:1:1", "0:1:nan,0:1:1"}) {
    const auto e = error_of([&] { das::parse_grid(bad); });
    EXPECT_FALSE(e.empty()) << bad;
  }
  das::Axis huge{0, 1e300, 1e-300};
  EXPECT_EQ(huge.size(), das::kMaxAxisPoints);  // saturated, not overflowed
  WB_REQUIRE_DATA("ultrasound/PWI_disk.mat");
  wbtest::TempDir dir;
  const std::string mat = wbtest::data_file("ultrasound/PWI_disk.mat");
  for (const char* grid : {"-10e-3:10e-3:1e-6,5e-3:35e-3:1e-6", "0:0.1:1e-5,0:0.1:1e-5"}) {
    const auto r = run_cli_limited(
        fmt::format("das '{}' --grid={} --backend cpu --out '{}'", mat, grid, dir.file("o.png")),
        2048);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "more than --memory")) << r.err;
  }
  const auto r = wbtest::run_cli(
      fmt::format("das '{}' --grid=-1e-3:1e-3:1e-9,5e-3:6e-3:1e-9 --backend cpu --out '{}'", mat,
                  dir.file("o.png")));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(contains(r.err, "bad_alloc")) << r.err;
  EXPECT_TRUE(dir.files().empty());
}

// `das --c 0`, `--c -1540` were ignored; `--fnumber 1000` gave an all-zero image silently.
TEST(ReaderLimits, DasSoundSpeedAndFnumberAreChecked) {
  WB_REQUIRE_DATA("ultrasound/PWI_disk.mat");
  wbtest::TempDir dir;
  const std::string base = "das '" + wbtest::data_file("ultrasound/PWI_disk.mat") +
                           "' --backend cpu --out '" + dir.file("o.png") + "' ";
  for (const char* c : {"0", "-1540", "nan"}) {
    const auto r = wbtest::run_cli(base + "--grid=-2e-3:2e-3:1e-4,10e-3:12e-3:1e-4 --c " + c);
    EXPECT_EQ(r.exit_code, 2) << c << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--c")) << r.err;
  }
  auto r = wbtest::run_cli(base + "--grid=-2e-3:2e-3:1e-4,1e-3:3e-3:1e-4 --fnumber 1000");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "every voxel is 0")) << r.err;
  EXPECT_TRUE(dir.files().empty());
  r = wbtest::run_cli(base + "--grid=-2e-3:2e-3:1e-4,10e-3:12e-3:1e-4 --memory -5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = wbtest::run_cli(base + "--grid=-12e-3:12e-3:2e-4,10e-3:35e-3:2e-4 --fnumber 1000");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "voxels are 0")) << r.err;
}

// Ten NaN samples in one element made 56 % of the DAS output NaN without a word.
TEST(ReaderLimits, DasZeroesAndCountsNonFiniteSamples) {
  WB_REQUIRE_DATA("ultrasound/PWI_disk.mat");
  wbtest::TempDir dir;
  io::UltrasoundData d = io::read_mat(wbtest::data_file("ultrasound/PWI_disk.mat"));
  for (int k = 0; k < 10; ++k)
    d.rf[static_cast<std::size_t>(5 * d.nsamples + 100 + k)] = NAN;  // element 5 of frame 0
  io::write_mat(dir.file("nan.mat"), d, {});
  const auto r = wbtest::run_cli("das '" + dir.file("nan.mat") +
                                 "' --grid=-5e-3:5e-3:2e-4,10e-3:30e-3:2e-4 --backend cpu --out '" +
                                 dir.file("o.npy") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "10 NaN or infinite samples")) << r.err;
  const auto meta = nlohmann::json::parse(wbtest::slurp(dir.file("o.npy.json")));
  EXPECT_EQ(meta.at("nonfinite_samples_zeroed").get<int>(), 10);
  const std::string npy = wbtest::slurp(dir.file("o.npy"));
  const std::size_t header =
      10 + static_cast<unsigned char>(npy[8]) + 256 * static_cast<unsigned char>(npy[9]);
  std::int64_t nan = 0;
  for (std::size_t i = header; i + 4 <= npy.size(); i += 4) {
    float v;
    std::memcpy(&v, npy.data() + i, 4);
    nan += !std::isfinite(v);
  }
  EXPECT_EQ(nan, 0);
}

// -------------------------------------------------------------------------------- .mat and UFF

// The named reproducers through the CLI, memory-limited: one line naming the problem, exit 1.
TEST(ReaderLimits, MatReproducersFailCleanlyAndSmall) {
  WB_REQUIRE_REPRO("mat/repro-das-21GB-rss.mat");
  wbtest::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mat/repro-das-segv-Mat_VarGetStructFieldByName.mat", "not a MAT-file warpbeam reads"},
      {"mat/repro-das-21GB-rss.mat", "not a MAT-file warpbeam reads"},
      {"mat/min-v4-header-oom-20bytes.mat", "not a MATLAB v5 or v7.3"},
      {"mat/repro-slow-10s-asan.mat", "not a MAT-file warpbeam reads"}};
  for (const auto& [f, word] : cases) {
    const auto r = run_cli_limited("das '" + repro_file(f) +
                                       "' --grid=-2e-3:2e-3:5e-4,1e-3:5e-3:5e-4 --backend cpu "
                                       "--out '" +
                                       dir.file("o.png") + "'",
                                   1024);
    EXPECT_EQ(r.exit_code, 1) << f << ": " << r.err;
    EXPECT_TRUE(contains(r.err, word)) << f << ": " << r.err;
  }
  EXPECT_TRUE(dir.files().empty());
}

// Every fuzzing artifact of the .mat and UFF readers (crash-*, oom-*, repro-*): an Error, never a
// crash; the real files still read.
//
// Under ASan the test runs again in a child process with allocator_may_return_null=1, and only
// for libhdf5's sake: on one UFF artifact libhdf5 1.10 itself mallocs a size read from the broken
// file (0x6e696c706d617388, the text "sampling" read as a size, in H5C_protect inside H5Fopen,
// before warpbeam sees a byte) and handles the null that glibc's malloc returns outside ASan; ASan
// aborts on such a request instead. warpbeam's own allocations are still checked: a `new` of an
// impossible size throws std::bad_alloc, which is not an Error and fails the test.
TEST(ReaderLimits, MatAndUffArtifactsGiveErrors) {
  WB_REQUIRE_REPRO("mat/repro-das-21GB-rss.mat");
  if (kAsan && !std::getenv("WB_ASAN_CHILD")) {
    wbtest::TempDir t;
    const std::string log = t.file("child.log");
    const std::string cmd =
        "WB_ASAN_CHILD=1 ASAN_OPTIONS=\"$ASAN_OPTIONS:allocator_may_return_null=1\" "
        "/proc/" +
        std::to_string(getpid()) +
        "/exe --gtest_filter=ReaderLimits.MatAndUffArtifactsGiveErrors >'" + log + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << wbtest::slurp(log);
    EXPECT_TRUE(contains(wbtest::slurp(log), "[  PASSED  ] 1 test")) << wbtest::slurp(log);
    return;
  }
  int n = 0;
  for (const char* folder : {"mat", "uff"})
    for (const auto& e : fs::directory_iterator(repro_file(folder))) {
      const std::string name = e.path().filename();
      if (name.rfind("crash-", 0) != 0 && name.rfind("oom-", 0) != 0 &&
          name.rfind("repro-", 0) != 0 && name.rfind("min-", 0) != 0)
        continue;
      // The reader is chosen by the extension: copy each artifact under its folder's one.
      wbtest::TempDir dir;
      const auto copy = dir.file(std::string("x.") + folder);
      fs::copy_file(e.path(), copy);
      const auto err = error_of([&] { io::read_ultrasound(copy); });
      EXPECT_FALSE(err.empty()) << name << " was read as channel data";
      ++n;
    }
  EXPECT_GT(n, 150);
  WB_REQUIRE_DATA("ultrasound/PWI_disk.mat");
  EXPECT_EQ(io::read_mat(wbtest::data_file("ultrasound/PWI_disk.mat")).nrx, 128);
}

// A dataset without filters that stores fewer bytes than its extent: libhdf5 1.10 copied the
// declared 3,392 bytes out of a 1-byte compact buffer (an ASan heap over-read inside H5Dread;
// release builds got "cannot read UFF"). It is refused before H5Dread, naming what is stored.
TEST(ReaderLimits, UffDatasetShorterThanItsExtentIsRefusedBeforeReading) {
  WB_REQUIRE_REPRO("uff/repro-hdf5-heap-overread-H5VM_memcpyvv.uff");
  const auto err = error_of(
      [&] { io::read_ultrasound(repro_file("uff/repro-hdf5-heap-overread-H5VM_memcpyvv.uff")); });
  EXPECT_TRUE(contains(err, "but the file stores")) << err;
}

// libhdf5 1.10 sizes an object header's continuation chunk and a local heap's data block from
// lengths in the file and mallocs them before reading: fuzz_uff's long run found a 23 kB file
// that made it ask for 8 GiB (H5Gopen2 -> H5O_protect -> H5C_protect). The metadata are now
// walked first (src/io/hdf5_check.cpp) and a length past the end of the file is named. Cases: the
// root group's continuation message (warpbeam's writer puts the root group's messages in a
// continuation chunk) and the root group's local heap, each given 8 GiB.
TEST(ReaderLimits, Hdf5MetadataLengthsPastTheFileAreRefusedBeforeLibhdf5) {
  if (!io::uff_supported()) GTEST_SKIP() << "no HDF5 in this build";
  sim::UltrasoundSimConfig s;
  s.probe = das::linear_array(8, 0.3e-3);
  s.transmits = {das::Transmit::plane(0.0, 0.0)};
  s.scatterers = {{0.0, 0.0, 8e-3}};
  s.amplitudes = {1.0};
  s.fs = 20e6;
  s.nsamples = 64;
  const auto d = sim::simulate_ultrasound(s);
  wbtest::TempDir t;
  io::write_uff(t.file("ok.uff"), d, {});
  std::string bytes = wbtest::slurp(t.file("ok.uff"));
  ASSERT_GT(bytes.size(), 0x100u);
  const auto u64 = [&](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  // Superblock version 0 (§II.A): the root group's symbol table entry at 0x38: its object
  // header's address at 0x40, cache type 1, the B-tree and local heap addresses at 0x50, 0x58.
  ASSERT_EQ(bytes[8], 0) << "the writer's superblock version changed";
  const std::uint64_t root = u64(0x40), heap = u64(0x58);
  ASSERT_LT(root + 40, bytes.size());
  ASSERT_EQ(std::memcmp(bytes.data() + heap, "HEAP", 4), 0);
  std::uint16_t first_type = 0;
  std::memcpy(&first_type, bytes.data() + root + 16, 2);
  ASSERT_EQ(first_type, 0x10) << "the root group's header no longer starts with a continuation";
  const std::uint64_t huge = 8ull << 30;
  const auto patched = [&](std::size_t at, const char* name) {
    std::string b = bytes;
    std::memcpy(b.data() + at, &huge, 8);
    const std::string f = t.file(name);
    std::ofstream(f, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    return f;
  };
  EXPECT_TRUE(io::read_uff(t.file("ok.uff")).nrx == 8);
  // The continuation message (v1 header: 16-byte prefix, 8-byte message header, offset, length).
  const std::string cont = patched(root + 16 + 8 + 8, "cont.uff");
  std::string err = error_of([&] { io::read_ultrasound(cont); });
  EXPECT_TRUE(contains(err, "corrupt HDF5 file: a continuation chunk")) << err;
  EXPECT_TRUE(contains(err, "runs past the end of the file")) << err;
  // The local heap's data segment size (signature, version, reserved, then the size).
  const std::string lheap = patched(heap + 8, "heap.uff");
  err = error_of([&] { io::read_ultrasound(lheap); });
  EXPECT_TRUE(contains(err, "corrupt HDF5 file: a local heap")) << err;
  // The walk does not refuse what libhdf5 itself reads: every UFF file the writer makes.
  EXPECT_NO_THROW(io::read_ultrasound(t.file("ok.uff")));
}

// ------------------------------------------------------------------------------ LWA TBX and COR

// tbx-test.dat and cor-test.dat got TBF errors ("has id 8, not 1"): they are named as what they
// are. TBX now has a reader (issue 14), so only COR is "not supported"; the TBF reader still names
// either kind.
TEST(ReaderLimits, LwaTbxAndCorFramesAreNamedNotSupported) {
  WB_REQUIRE_DATA("lwa/cor-test.dat");
  try {
    io::open_voltage_file(wbtest::data_file("lwa/cor-test.dat"));
    ADD_FAILURE() << "cor-test.dat opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::unsupported) << e.what();
    EXPECT_TRUE(contains(e.what(), "COR")) << e.what();
  }
  // (pairs, not a structured binding: clang before 16 cannot capture one in a lambda)
  for (const auto& fk : std::vector<std::pair<std::string, std::string>>{
           {"lwa/tbx-test.dat", "TBX"}, {"lwa/cor-test.dat", "COR"}})
    EXPECT_TRUE(
        contains(error_of([&] { io::TbfReader r(wbtest::data_file(fk.first)); }), fk.second));
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli("beamform '" + wbtest::data_file("lwa/cor-test.dat") +
                                 "' --grid lm:0:0:1:0:0:1 --out '" + dir.file("o") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "COR")) << r.err;
}

// ------------------------------------------------------------------------------------------ CLI

TEST(ReaderLimits, AMistypedCommandIsNamed) {
  auto r = wbtest::run_cli("serch x.fil");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "'serch' is not a warpbeam command")) << r.err;
  EXPECT_TRUE(contains(r.err, "did you mean 'search'")) << r.err;
  r = wbtest::run_cli("simulate filterbnk x.fil");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "did you mean 'simulate filterbank'")) << r.err;
}

// The two simulators' sources are different types (compiling this file is half the test).
TEST(ReaderLimits, SimulatorSourcesAreDistinctTypes) {
  static_assert(!std::is_same_v<sim::SkySource, sim::StationSource>);
  sim::VoltageSimConfig v;
  v.sources.push_back({});
  sim::StationSimConfig s;
  s.sources.push_back({0.1, 0.2, 3.0, 0.1, 0.0, 0.0});
  EXPECT_EQ(v.sources.size() + s.sources.size(), 2u);
  EXPECT_DOUBLE_EQ(s.sources[0].flux, 3.0);
}
