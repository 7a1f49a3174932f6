// The search's command line: the real burst through `warpbeam search`, every bad-input case of
// the issue (one-line error, exit 1 for a bad file and 2 for a bad option, no output file),
// `simulate filterbank`, `demo` and `bench dedisp`.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "warpbeam/io/candidates.hpp"
#include "warpbeam/sim/filterbank.hpp"

using namespace warpbeam;

namespace {

// A SIGPROC header written byte by byte here (independently of warpbeam's writer).
struct RawHeader {
  std::string bytes;
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
};

// A valid header with one field overridden: nchans, nbits or tsamp.
std::string header(int nchans, int nbits, double tsamp) {
  RawHeader h;
  h.str("HEADER_START");
  h.i32("telescope_id", 0);
  h.i32("data_type", 1);
  h.f64("fch1", 1500);
  h.f64("foff", -1);
  h.i32("nchans", nchans);
  h.i32("nbits", nbits);
  h.i32("nifs", 1);
  h.f64("tstart", 60000);
  h.f64("tsamp", tsamp);
  h.str("HEADER_END");
  return h.bytes;
}

void write_bytes(const std::string& path, const std::string& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// Runs `warpbeam ARGS --output DIR/out.cand --json DIR/out.json` and checks the failure: the exit
// code, one line on stderr naming `word`, and no output file.
void expect_failure(const wbtest::TempDir& dir, const std::string& args, int code,
                    const std::string& word) {
  const auto before = dir.files();
  const auto r = wbtest::run_cli(args + " --output '" + dir.file("out.cand") + "' --json '" +
                                 dir.file("out.json") + "'");
  SCOPED_TRACE(args);
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("warpbeam: error: ", 0), 0u) << r.err;
  const std::string first = r.err.substr(0, r.err.find('\n'));
  EXPECT_NE(first.find(word), std::string::npos)
      << "the error should name '" << word << "': " << first;
  if (code == 1) EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(dir.files(), before) << "a failed run left a file behind";
}

std::string small_file(const wbtest::TempDir& dir) {
  sim::FilterbankSimConfig s;
  s.nchans = 32;
  s.foff_mhz = -4;
  s.duration_s = 2;
  s.bursts = {{100, 15, 1e-3, 0.5}};
  const std::string path = dir.file("small.fil");
  sim::simulate_filterbank(s, path);
  std::filesystem::remove(path + ".json");
  return path;
}

}  // namespace

TEST(SearchCli, FindsTheRealBurstAndWritesCandFiles) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  wbtest::TempDir dir;
  const auto fil = wbtest::data_file("filterbank/burst_28.fil");
  const auto r = wbtest::run_cli("search '" + fil + "' --output '" + dir.file("b.cand") +
                                 "' --json '" + dir.file("b.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank"), std::string::npos) << r.out;  // the table
  const auto cands = io::read_cand(dir.file("b.cand"));
  ASSERT_FALSE(cands.empty());
  EXPECT_GE(cands[0].dm, 465);
  EXPECT_LE(cands[0].dm, 485);
  EXPECT_GE(cands[0].time_s, 2.00);
  EXPECT_LE(cands[0].time_s, 2.06);
  EXPECT_GE(cands[0].snr, 12);
  for (std::size_t i = 1; i < cands.size(); ++i)
    EXPECT_LT(cands[i].snr, 8);
  // 9 tab-separated columns by default.
  const std::string text = wbtest::slurp(dir.file("b.cand"));
  const std::string line = text.substr(0, text.find('\n'));
  EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 8);
  const auto j = nlohmann::json::parse(wbtest::slurp(dir.file("b.json")));
  EXPECT_EQ(j["header"]["nchans"], 336);
  EXPECT_EQ(j["parameters"]["dm_max"], 2000.0);
  EXPECT_EQ(j["parameters"]["snr_min"], 6.0);
  EXPECT_EQ(j["candidates"][0]["sample"], cands[0].sample);
  EXPECT_GT(j["candidates"][0]["mjd"].get<double>(), 50000);
  EXPECT_FALSE(j["provenance"]["git_commit"].get<std::string>().empty());
  // The beam column on request.
  const auto r2 =
      wbtest::run_cli("search '" + fil + "' --beam-column --output '" + dir.file("c.cand") + "'");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const std::string t2 = wbtest::slurp(dir.file("c.cand"));
  const std::string l2 = t2.substr(0, t2.find('\n'));
  EXPECT_EQ(std::count(l2.begin(), l2.end(), '\t'), 9);
}

TEST(SearchCli, BadFilesExitOne) {
  wbtest::TempDir dir;
  expect_failure(dir, "search '" + dir.file("missing.fil") + "'", 1, "missing.fil");

  write_bytes(dir.file("magic.fil"), "GARBAGE! this is not a filterbank at all");
  expect_failure(dir, "search '" + dir.file("magic.fil") + "'", 1, "not a SIGPROC filterbank");

  const std::string full = header(64, 8, 64e-6);
  write_bytes(dir.file("trunc.fil"), full.substr(0, 60));  // cut inside the keywords
  expect_failure(dir, "search '" + dir.file("trunc.fil") + "'", 1, "truncated");

  write_bytes(dir.file("nbits3.fil"), header(64, 3, 64e-6) + std::string(1000, '\0'));
  expect_failure(dir, "search '" + dir.file("nbits3.fil") + "'", 1, "nbits = 3");

  write_bytes(dir.file("nchans0.fil"), header(0, 8, 64e-6) + std::string(1000, '\0'));
  expect_failure(dir, "search '" + dir.file("nchans0.fil") + "'", 1, "nchans = 0");

  // Absurd sizes: a billion channels, a sampling time of 10^9 s, a keyword of 2 GB.
  write_bytes(dir.file("huge.fil"), header(1 << 30, 8, 64e-6) + std::string(1000, '\0'));
  expect_failure(dir, "search '" + dir.file("huge.fil") + "'", 1, "nchans");
  write_bytes(dir.file("tsamp.fil"), header(64, 8, 1e9) + std::string(1000, '\0'));
  expect_failure(dir, "search '" + dir.file("tsamp.fil") + "'", 1, "tsamp");
  std::string longkey = full.substr(0, 16);  // HEADER_START, then a string of length 2^31 - 1
  const std::int32_t big = 0x7fffffff;
  longkey.append(reinterpret_cast<const char*>(&big), 4);
  write_bytes(dir.file("longkey.fil"), longkey + "abc");
  expect_failure(dir, "search '" + dir.file("longkey.fil") + "'", 1, "corrupt header");

  // A product that cannot be written is found before the search, and the other product is not
  // left behind: a JSON in a folder that does not exist, beside a .cand that could be written.
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const auto before = dir.files();
  const auto r =
      wbtest::run_cli("search '" + wbtest::data_file("filterbank/burst_28.fil") + "' --output '" +
                      dir.file("ok.cand") + "' --json '" + dir.file("nodir/x.json") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("nodir"), std::string::npos) << r.err;
  EXPECT_EQ(dir.files(), before) << "a failed run left a file behind";
}

TEST(SearchCli, BadOptionsExitTwo) {
  wbtest::TempDir dir;
  const std::string fil = "search '" + small_file(dir) + "'";
  expect_failure(dir, fil + " --dm-min 500 --dm-max 100", 2, "--dm-max");
  expect_failure(dir, fil + " --dm-min -5", 2, "--dm-min");
  expect_failure(dir, fil + " --dm-tol 1", 2, "--dm-tol");
  expect_failure(dir, fil + " --pulse-width 0", 2, "--pulse-width");
  expect_failure(dir, fil + " --boxcar-max 3", 2, "--boxcar-max");
  expect_failure(dir, fil + " --snr-min -1", 2, "--snr-min");
  expect_failure(dir, fil + " --zap-chans 9-2", 2, "--zap-chans");
  expect_failure(dir, fil + " --zap-chans 40", 2, "--zap-chans");  // the file has 32 channels
  expect_failure(dir, fil + " --threads -2", 2, "--threads");
  expect_failure(dir, fil + " --read-threads -1", 2, "--read-threads");
  expect_failure(dir, fil + " --read-threads 65", 2, "--read-threads");
  expect_failure(dir, fil + " --read-threads many", 2, "--read-threads");
  expect_failure(dir, fil + " --memory 0", 2, "--memory");
  expect_failure(dir, fil + " --memory 1", 2, "--memory");  // less than one DM trial needs
  expect_failure(dir, fil + " --gulp -1", 2, "--gulp");
  expect_failure(dir, fil + " --baseline 0", 2, "--baseline");
  expect_failure(dir, fil + " --zap-sigma -1", 2, "--zap-sigma");
  expect_failure(dir, fil + " --dm-max 20000", 2, "--dm-max");  // a sweep longer than the file
  expect_failure(dir, fil + " --backend gpu", 2, "--backend");
  expect_failure(dir, fil + " --dm-max lots", 2, "--dm-max");
  // An inverted range is a usage error even when the file is missing too.
  expect_failure(dir, "search nothing.fil --dm-min 5 --dm-max 1", 2, "--dm-max");
}

// Issue 13: the real burst found by each dedispersion method (and by auto), the method and
// auto's reasoning in the JSON record.
TEST(SearchCli, EachDedispersionMethodFindsTheRealBurst) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const auto fil = wbtest::data_file("filterbank/burst_28.fil");
  for (const std::string method : {"subband", "fdmt", "auto"}) {
    wbtest::TempDir dir;
    const auto r = wbtest::run_cli("search '" + fil + "' --dedisp " + method + " --output '" +
                                   dir.file("b.cand") + "' --json '" + dir.file("b.json") + "'");
    SCOPED_TRACE(method);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto cands = io::read_cand(dir.file("b.cand"));
    ASSERT_FALSE(cands.empty());
    EXPECT_NEAR(cands[0].dm, 475.28, 10);  // the published DM and arrival time
    EXPECT_NEAR(cands[0].time_s, 2.03, 0.01);
    EXPECT_GE(cands[0].snr, 12);
    for (std::size_t i = 1; i < cands.size(); ++i)
      EXPECT_LT(cands[i].snr, 8);
    const auto j = nlohmann::json::parse(wbtest::slurp(dir.file("b.json")));
    EXPECT_EQ(j["parameters"]["dedisp"], method);
    const std::string ran = j["parameters"]["run"]["dedisp_method"];
    if (method == "auto") {
      EXPECT_NE(j["parameters"]["run"]["dedisp_choice"].get<std::string>().find("modelled"),
                std::string::npos);
    } else {
      EXPECT_EQ(ran, method);
    }
    EXPECT_NE(r.out.find(ran + " dedispersion"), std::string::npos) << r.out;
  }
}

TEST(SearchCli, BadDedispersionSettingsExitTwo) {
  wbtest::TempDir dir;
  const std::string fil = "search '" + small_file(dir) + "'";  // 32 channels
  expect_failure(dir, fil + " --dedisp fast", 2, "--dedisp");
  expect_failure(dir, fil + " --dedisp subband --subbands 33", 2, "--subbands");
  expect_failure(dir, fil + " --dedisp subband --subbands 4 --subband-dm-step 200", 2,
                 "--subband-dm-step = 200 is refused: subband.coarse_dm_step = 200 pc cm^-3 is "
                 "coarser");
  expect_failure(dir, fil + " --dedisp subband --subband-dm-step -1", 2, "--subband-dm-step");
  expect_failure(dir, fil + " --dedisp auto --dedisp-min-snr 2", 2, "--dedisp-min-snr");
}

TEST(SearchCli, SimulateFilterbank) {
  wbtest::TempDir dir;
  const std::string out = dir.file("sim.fil");
  auto r = wbtest::run_cli("simulate filterbank '" + out +
                           "' --dm 200 --snr 30 --width 2 --time 1 --nchans 32 --foff -4 "
                           "--tsamp 256 --nbits 4 --duration 3 --seed 9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  io::FilterbankReader reader(out);
  EXPECT_EQ(reader.header().nbits, 4);
  EXPECT_EQ(reader.header().nchans, 32);
  EXPECT_EQ(reader.header().nsamples, 11719);
  const auto j = nlohmann::json::parse(wbtest::slurp(out + ".json"));
  EXPECT_EQ(j["seed"], 9);
  EXPECT_EQ(j["bursts"][0]["dm"], 200.0);
  // Found by the search at its DM and time.
  r = wbtest::run_cli("search '" + out + "' --dm-max 400 --output '" + dir.file("s.cand") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto c = io::read_cand(dir.file("s.cand"));
  ASSERT_FALSE(c.empty());
  EXPECT_NEAR(c[0].dm, 200, 20);
  EXPECT_NEAR(c[0].time_s, 1.0, 0.01);
  // Bad options: exit 2 and no file.
  wbtest::TempDir bad;
  for (const char* opt : {"--nbits 3", "--nchans 0", "--tsamp 0", "--width 0", "--time 99"}) {
    const auto rb = wbtest::run_cli("simulate filterbank '" + bad.file("x.fil") + "' " + opt);
    EXPECT_EQ(rb.exit_code, 2) << opt << ": " << rb.err;
    EXPECT_TRUE(bad.files().empty()) << opt;
  }
}

TEST(SearchCli, DemoRecoversTheBurst) {
  const auto r = wbtest::run_cli("demo");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("injected"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recovered: the top candidate is the injected burst"), std::string::npos)
      << r.out;
}

TEST(SearchCli, BenchDedispReportsThroughput) {
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli(
      "bench dedisp --config D1 --backend cpu --nsamples 256 "
      "--no-sweep --json '" +
      dir.file("b.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("channel*DM*samples/s"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(wbtest::slurp(dir.file("b.json")));
  EXPECT_EQ(j["ndms"], 1122);
  // dedisp's D1 has 1,032,380 valid output samples; warpbeam's delays (round to nearest, double
  // precision, k = 4.148808e3) give a largest delay 5 samples shorter.
  EXPECT_NEAR(j["nsamples_out_full"].get<double>(), 1032380, 10);
  EXPECT_EQ(j["nsamples_out"], 256);
  EXPECT_GT(j["channel_dm_samples_per_s"].get<double>(), 0);
  EXPECT_GT(j["real_time_factor"].get<double>(), 0);
  EXPECT_GT(j["baseline"]["speedup"].get<double>(), 1);
  EXPECT_TRUE(j.contains("provenance"));
  EXPECT_EQ(wbtest::run_cli("bench dedisp --config D7").exit_code, 2);
}

// bench search --dedisp takes search's method names; anything else is a usage error (exit 2,
// naming the option) before any file is simulated or any record written.
TEST(SearchCli, BenchSearchRejectsABadDedispersionMethod) {
  wbtest::TempDir dir;
  for (const char* bad : {"fast", "", "FDMT"}) {
    SCOPED_TRACE(bad);
    const auto r = wbtest::run_cli(std::string("bench search --backend cpu --dedisp '") + bad +
                                   "' --json '" + dir.file("b.json") + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--dedisp"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("b.json")));
  }
}

// An interrupted command (SIGINT, as Ctrl-C sends; SIGTERM alike) removes its temporary output
// and dies of the signal: no "*.tmp.PID" and no product left behind.
TEST(SearchCli, AnInterruptedCommandLeavesNoTemporaryFile) {
  wbtest::TempDir dir;
  const std::string out = dir.file("big.fil"), status = dir.file("status");
  for (const char* sig : {"INT", "TERM"}) {
    SCOPED_TRACE(sig);
    // A long simulation (2048 channels x 120 s), interrupted once its temporary file exists.
    std::ofstream(dir.file("run.sh"))
        << "'" << WARPBEAM_CLI_PATH << "' simulate filterbank '" << out
        << "' --nchans 2048 --foff -0.25 --duration 120 --no-burst >/dev/null 2>&1 &\n"
        << "p=$!; i=0\n"
        << "while [ $i -lt 1000 ] && ! ls '" << out << "'.tmp.* >/dev/null 2>&1; do\n"
        << "  sleep 0.01; i=$((i+1))\n"
        << "done\n"
        << "ls '" << out << "'.tmp.* >/dev/null 2>&1 && seen=1 || seen=0\n"
        << "kill -" << sig << " $p; wait $p; echo \"$seen $?\" > '" << status << "'\n";
    ASSERT_EQ(std::system(("sh '" + dir.file("run.sh") + "'").c_str()), 0);
    const std::string got = wbtest::slurp(status);
    ASSERT_EQ(got.substr(0, 1), "1") << "the temporary file never appeared: " << got;
    EXPECT_EQ(std::atoi(got.c_str() + 2), 128 + (std::string(sig) == "INT" ? 2 : 15))
        << "killed by the signal";
    EXPECT_FALSE(std::filesystem::exists(out));
    for (const auto& e : std::filesystem::directory_iterator(dir.path))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
          << e.path() << " left behind";
  }
}
