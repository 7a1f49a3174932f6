// Issue 18: readers and option parsers given hostile inputs. Each test is a regression test of a
// reproducer of ../shared/repro (fuzzing, sanitizers, review): a one-line error naming the
// problem, no output, and memory bounded by the file's size or the budget (the CLI runs under
// `ulimit -v`, so a reader that allocates what a header declares fails the test quickly instead
// of taking gigabytes).
#include <dirent.h>

#include <filesystem>
#include <fstream>

#include "test_util.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/io/lwa.hpp"

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

/// `warpbeam ARGS` with its address space limited to `mib` MiB (ulimit -v).
wbtest::CliResult run_cli_limited(const std::string& args, int mib = 3072) {
  return wbtest::run_cli_with_prefix("ulimit -v " + std::to_string(mib * 1024) + "; exec", args);
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
                                 dir.file("o") + "' --backend cpu");
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
