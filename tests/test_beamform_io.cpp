// GUPPI raw (the real PUPPI and VEGAS samples, round trips, bad headers), the voltage simulator,
// and the beamformer's subcommands end to end (bad inputs give clear errors and no output).
#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <numbers>

#include "beamform_test_util.hpp"
#include "test_util.hpp"
#include "warpbeam/io/guppi.hpp"
#include "warpbeam/io/image.hpp"
#include "warpbeam/io/lwa.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/sim/voltages.hpp"

using namespace warpbeam;
using namespace warpbeam::io;

namespace {

std::vector<std::string> g_warnings;
void capture(const std::string& m) {
  g_warnings.push_back(m);
}
struct CaptureWarnings {
  WarningHandler old;
  CaptureWarnings() : old(set_warning_handler(capture)) { g_warnings.clear(); }
  ~CaptureWarnings() { set_warning_handler(old); }
};

std::string card(const std::string& k, const std::string& v) {
  return guppi_card(k, v);
}

// A minimal valid header (ci8, dual pol, 2 antennas x 3 channels, 4 samples), with `skip` left
// out and `override_key` = `override_value`.
std::string test_header(const std::string& skip = "", const std::string& override_key = "",
                        const std::string& override_value = "") {
  std::vector<std::pair<std::string, std::string>> cards = {
      {"OBSFREQ", "400"}, {"CHAN_BW", "1.5"},   {"OBSNCHAN", "6"}, {"NANTS", "2"},
      {"NPOL", "4"},      {"NBITS", "8"},       {"TBIN", "1e-6"},  {"BLOCSIZE", "96"},
      {"OVERLAP", "0"},   {"STT_IMJD", "60000"}};
  std::string h;
  for (auto& [k, v] : cards) {
    if (k == skip) continue;
    h += card(k, k == override_key ? override_value : v);
  }
  h += "END" + std::string(77, ' ');
  return h;
}

template <class F>
void expect_error(F&& f, ErrorCategory cat, const std::string& needle) {
  try {
    f();
    FAIL() << "no error (expected one mentioning '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), cat) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Guppi, ReadsThePuppiSample) {
  WB_REQUIRE_DATA("baseband/sample_puppi.raw");
  const std::string path = wbtest::data_file("baseband/sample_puppi.raw");
  GuppiReader r(path);
  const auto& h = r.first_header();
  EXPECT_EQ(h.obsnchan, 4);
  EXPECT_EQ(h.npol, 2);  // NPOL = 4: dual-pol complex
  EXPECT_EQ(h.nbits, 8);
  EXPECT_EQ(h.blocsize, 16384);
  EXPECT_EQ(h.block_samples(), 1024);
  EXPECT_EQ(h.overlap, 64);
  EXPECT_EQ(h.header_bytes, 6400);
  EXPECT_EQ(h.get("SRC_NAME"), "J1810+1744");
  EXPECT_EQ(r.nblocks(), 4);
  const auto& info = r.info();
  EXPECT_EQ(info.nchans, 4);
  EXPECT_EQ(info.nantennas, 1);
  EXPECT_EQ(info.block_samples, 960);
  EXPECT_EQ(info.sample_type, SampleType::ci8);
  EXPECT_NEAR(info.fch1_hz, (356.6875 - 1.5 * 3.125) * 1e6, 1e-3);
  EXPECT_NEAR(info.tsamp_s, 0.004, 1e-12);  // as the header says (TBIN)
  EXPECT_NEAR(info.mjd_start, 58132 + 51093 / 86400.0, 1e-9);
  // Every sample of every block against the file's bytes at offsets computed here:
  // block k starts at k (6400 + 16384); channel c, time t, pol p at ((c 1024 + t) 2 + p) 2.
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::uint8_t> block;
  int k = 0;
  double mjd = 0;
  while (r.read_block(block, &mjd)) {
    ASSERT_EQ(block.size(), 4u * 960 * 2 * 2);
    EXPECT_NEAR(mjd, info.mjd_start + k * 960 * 0.004 / 86400, 1e-12);
    int mismatches = 0;
    for (int c = 0; c < 4; ++c)
      for (int t = 0; t < 960; ++t)
        for (int p = 0; p < 2; ++p)
          for (int ri = 0; ri < 2; ++ri) {
            const std::size_t off = static_cast<std::size_t>(k) * (6400 + 16384) + 6400 +
                                    ((c * 1024 + t) * 2 + p) * 2 + ri;
            mismatches += block[((static_cast<std::size_t>(c) * 960 + t) * 2 + p) * 2 + ri] !=
                          static_cast<std::uint8_t>(bytes[off]);
          }
    EXPECT_EQ(mismatches, 0) << "block " << k;
    ++k;
  }
  EXPECT_EQ(k, 4);
  int nonzero = 0;
  for (auto b : block)
    nonzero += b != 0;
  EXPECT_GT(nonzero, 1000);  // real voltages, not padding
}

TEST(Guppi, VegasSampleTruncatedBlockIsDroppedWithAWarning) {
  WB_REQUIRE_DATA("baseband/sample_vegas.raw");
  CaptureWarnings w;
  GuppiReader r(wbtest::data_file("baseband/sample_vegas.raw"));
  const auto& h = r.first_header();  // numeric values written as quoted strings in this file
  EXPECT_EQ(h.obsnchan, 32);
  EXPECT_EQ(h.nbits, 8);
  EXPECT_EQ(h.npol, 2);
  EXPECT_EQ(h.blocsize, 132186112);
  EXPECT_EQ(h.overlap, 512);
  EXPECT_NEAR(h.chan_bw_mhz, -3.125, 1e-12);
  EXPECT_NEAR(h.tbin_s, 3.2e-7, 1e-18);
  EXPECT_EQ(r.nblocks(), 0);
  std::vector<std::uint8_t> block;
  EXPECT_FALSE(r.read_block(block));
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("partial block"), std::string::npos) << g_warnings[0];
  EXPECT_NE(g_warnings[0].find("132186112"), std::string::npos) << g_warnings[0];
}

TEST(Guppi, WriterRoundTripsWithNants) {
  wbtest::TempDir dir;
  GuppiWriterConfig c;
  c.nchans = 5;
  c.nantennas = 3;
  c.npol = 2;
  c.sample_type = SampleType::ci4;
  c.obsfreq_mhz = 408;
  c.chan_bw_mhz = -0.5;
  c.tbin_s = 2e-6;
  c.mjd_start = 60000.25;
  c.block_samples = 7;
  const std::size_t n = 5 * 7 * 3 * 2;
  std::vector<std::uint8_t> b0(n), b1(n);
  for (std::size_t i = 0; i < n; ++i) {
    b0[i] = static_cast<std::uint8_t>(i * 37 + 1);
    b1[i] = static_cast<std::uint8_t>(i * 11 + 5);
  }
  {
    GuppiWriter w(dir.file("x.raw"), c);
    w.write_block(b0.data());
    w.write_block(b1.data());
    w.commit();
  }
  GuppiReader r(dir.file("x.raw"));
  EXPECT_EQ(r.first_header().nants, 3);
  EXPECT_EQ(r.first_header().obsnchan, 15);
  EXPECT_EQ(r.first_header().get("NPOL"), "4");
  EXPECT_EQ(r.info().nchans, 5);
  EXPECT_EQ(r.info().sample_type, SampleType::ci4);
  EXPECT_NEAR(r.info().fch1_hz, (408 + 2 * 0.5) * 1e6, 1e-3);
  EXPECT_NEAR(r.info().foff_hz, -0.5e6, 1e-6);
  EXPECT_NEAR(r.info().mjd_start, 60000.25, 1e-9);
  std::vector<std::uint8_t> got;
  ASSERT_TRUE(r.read_block(got));
  EXPECT_EQ(got, b0);
  ASSERT_TRUE(r.read_block(got));
  EXPECT_EQ(got, b1);
  EXPECT_FALSE(r.read_block(got));
  // As stored: [antenna][chan][time][pol]: antenna 2, channel 1, time 3, pol 1 of block 0.
  GuppiReader raw(dir.file("x.raw"));
  GuppiHeader h;
  std::vector<std::uint8_t> data;
  ASSERT_TRUE(raw.read_raw_block(data, h));
  EXPECT_EQ(data[((2 * 5 + 1) * 7 + 3) * 2 + 1], b0[((1 * 7 + 3) * 3 + 2) * 2 + 1]);
}

TEST(Guppi, BadHeadersGiveClearErrors) {
  EXPECT_NO_THROW(parse_guppi_header(test_header(), "t"));
  // A header that contradicts its block size: 95 bytes are not whole samples of 6 x 2 x 2 bytes.
  expect_error([] { parse_guppi_header(test_header("", "BLOCSIZE", "95"), "t"); },
               ErrorCategory::format, "BLOCSIZE");
  for (const char* k : {"NBITS", "BLOCSIZE", "OBSNCHAN", "NPOL", "TBIN", "OBSFREQ"})
    expect_error([&] { parse_guppi_header(test_header(k), "t"); }, ErrorCategory::format,
                 std::string("lacks the keyword ") + k);
  expect_error([] { parse_guppi_header(test_header("", "NANTS", "4"), "t"); },
               ErrorCategory::format, "NANTS");
  expect_error([] { parse_guppi_header(test_header("", "NBITS", "'eight'"), "t"); },
               ErrorCategory::format, "NBITS");
  expect_error([] { parse_guppi_header(test_header("", "NPOL", "3"), "t"); }, ErrorCategory::format,
               "NPOL");
  // Files: no END card; a later block that disagrees with the first.
  wbtest::TempDir dir;
  {
    std::ofstream f(dir.file("noend.raw"), std::ios::binary);
    const std::string h = test_header();
    f << h.substr(0, h.size() - 80);
  }
  expect_error([&] { GuppiReader r(dir.file("noend.raw")); }, ErrorCategory::format, "END");
  {
    std::ofstream f(dir.file("two.raw"), std::ios::binary);
    f << test_header() << std::string(96, '\x11') << test_header("", "NANTS", "3")
      << std::string(96, '\x11');
  }
  GuppiReader r(dir.file("two.raw"));
  std::vector<std::uint8_t> b;
  EXPECT_TRUE(r.read_block(b));
  expect_error([&] { r.read_block(b); }, ErrorCategory::format, "block 1");
  expect_error([&] { GuppiReader x(dir.file("missing.raw")); }, ErrorCategory::io, "missing.raw");
}

TEST(SimVoltages, DeterministicQuantisedAndScaled) {
  sim::VoltageSimConfig c;
  c.freqs_hz = beamform::best2_frequencies_hz(16);
  c.tsamp_s = 16 / 20e6;
  c.nsamples = 512;
  c.block_samples = 256;
  c.sources.push_back({{beamform::Frame::azel, 1.0, 1.0}, 0.5});
  c.pulsars.push_back({{beamform::Frame::azel, 3.0, 1.2}, 2, 1e-4, 10, 1e-5, 0});
  std::vector<std::uint8_t> a, b, d;
  sim::simulate_block(c, 256, 256, a);
  sim::simulate_block(c, 256, 256, b);
  EXPECT_EQ(a, b);
  c.seed = 2;
  sim::simulate_block(c, 256, 256, d);
  EXPECT_NE(a, d);
  // ci4 values within +-7, and without the pulsar (which the scale does not count) an RMS per
  // component of quant_rms = 2 levels plus the rounding noise: sqrt(4 + 1/12).
  c.pulsars.clear();
  sim::simulate_block(c, 0, 256, a);
  double sum2 = 0;
  for (auto byte : a) {
    const int re = static_cast<std::int8_t>(byte & 0xF0) >> 4;
    const int im = static_cast<std::int8_t>(static_cast<std::uint8_t>(byte << 4)) >> 4;
    EXPECT_LE(std::abs(re), 7);
    EXPECT_LE(std::abs(im), 7);
    sum2 += re * re + im * im;
  }
  EXPECT_NEAR(std::sqrt(sum2 / (2.0 * a.size())), std::sqrt(4 + 1 / 12.0), 0.08);
  c.nsamples = 500;
  EXPECT_THROW(c.validate(), Error);  // not a whole number of blocks
}

// End to end: simulate a BEST-2 observation with a pulsar, beamform a grid on the CPU: the beam
// pointing at the pulsar is the one whose power is modulated the most.
TEST(BeamformCli, SimulatedPulsarShowsInItsBeam) {
  wbtest::TempDir dir;
  const std::string raw = dir.file("sim.raw");
  auto r = wbtest::run_cli("simulate voltages --out '" + raw +
                           "' --nchans 32 --nsamples 8192 --block-samples 4096 --no-sources "
                           "--pulsar 'azel 200 70 6 0.002 0 0.0001' --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(raw + ".json"));
  r = wbtest::run_cli("beamform '" + raw + "' --grid azel:194:206:3:68:72:3 --out '" +
                      dir.file("beams") + "' --backend cpu --integrate 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int best = -1;
  double best_mod = 0;
  for (int b = 0; b < 9; ++b) {
    const std::string f = dir.file("beams") + fmt::format("/beam{:04d}.fil", b);
    FilterbankReader fr(f);
    EXPECT_EQ(fr.header().nchans, 32);
    EXPECT_NEAR(fr.header().tsamp, 8 * 32 / 20e6, 1e-12);
    EXPECT_EQ(fr.header().nsamples, 1024);
    const auto x = fr.read_all();
    std::vector<double> ts(1024, 0.0);
    for (std::size_t t = 0; t < 1024; ++t)
      for (int c = 0; c < 32; ++c)
        ts[t] += x[t * 32 + static_cast<std::size_t>(c)];
    double mean = 0, var = 0;
    for (double v : ts)
      mean += v / 1024;
    for (double v : ts)
      var += (v - mean) * (v - mean) / 1024;
    const double mod = std::sqrt(var) / mean;
    if (mod > best_mod) {
      best_mod = mod;
      best = b;
    }
  }
  EXPECT_EQ(best, 4)
      << "the pulsar at az 200, el 70 is the centre of the 3 x 3 grid (beams ~2 deg apart)";
  EXPECT_TRUE(std::filesystem::exists(dir.file("beams") + "/beamform.json"));
}

TEST(BeamformCli, BadInputsGiveClearErrorsAndNoOutput) {
  wbtest::TempDir dir;
  const std::string raw = dir.file("sim.raw");
  ASSERT_EQ(wbtest::run_cli("simulate voltages --out '" + raw +
                            "' --nchans 8 --nsamples 256 --block-samples 256")
                .exit_code,
            0);
  // An antenna count that does not match the geometry.
  {
    std::ofstream f(dir.file("five.txt"));
    f << "0 0 0\n1 0 0\n2 0 0\n3 0 0\n4 0 0\n";
  }
  auto r = wbtest::run_cli("beamform '" + raw + "' --grid azel:180:180:1:60:60:1 --array '" +
                           dir.file("five.txt") + "' --out '" + dir.file("o1") + "' --backend cpu");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("32 antennas"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o1")));
  // A beam below the horizon.
  r = wbtest::run_cli("beamform '" + raw + "' --grid azel:180:180:1:-5:-5:1 --out '" +
                      dir.file("o2") + "' --backend cpu");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("below the horizon"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o2")));
  // Neither --beams nor --grid; a malformed grid; a missing file.
  r = wbtest::run_cli("beamform '" + raw + "' --out '" + dir.file("o3") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = wbtest::run_cli("beamform '" + raw + "' --grid azel:1:2 --out '" + dir.file("o3") + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = wbtest::run_cli("beamform '" + dir.file("nope.raw") + "' --grid azel:1:2:1:50:50:1 --out '" +
                      dir.file("o3") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o3")));
  // A CUDA-only algorithm with --backend cpu (the name parses: the error names the backend; a
  // command line that cannot work, exit 2, as the pipeline's), and a name that is none.
  r = wbtest::run_cli("beamform '" + raw + "' --grid azel:180:180:1:60:60:1 --out '" +
                      dir.file("o4") + "' --backend cpu --algorithm tensor-int8");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--algorithm tensor-int8 needs the CUDA backend"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o4")));
  r = wbtest::run_cli("beamform '" + raw + "' --grid azel:180:180:1:60:60:1 --out '" +
                      dir.file("o4") + "' --backend cpu --algorithm int8");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--algorithm"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o4")));
  // Bad option values.
  r = wbtest::run_cli("simulate voltages --out '" + dir.file("x.raw") + "' --npol 3");
  EXPECT_EQ(r.exit_code, 2);
  r = wbtest::run_cli("simulate voltages --out '" + dir.file("x.raw") +
                      "' --pulsar 'azel 10 20 1' --nchans 4 --nsamples 16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--pulsar"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.raw")));
}

TEST(BeamformCli, TruncatedVegasBlockWarnsAndStops) {
  WB_REQUIRE_DATA("baseband/sample_vegas.raw");
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli("beamform '" + wbtest::data_file("baseband/sample_vegas.raw") +
                                 "' --grid lm:0:0:1:0:0:1 --array best2 --out '" + dir.file("o") +
                                 "' --backend cpu");
  // One antenna in the file, 32 in BEST-2: the geometry check speaks first.
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::ofstream(dir.file("one.txt")) << "0 0 0\n";
  const auto r2 = wbtest::run_cli("beamform '" + wbtest::data_file("baseband/sample_vegas.raw") +
                                  "' --grid lm:0:0:1:0:0:1 --array '" + dir.file("one.txt") +
                                  "' --out '" + dir.file("o2") + "' --backend cpu");
  EXPECT_EQ(r2.exit_code, 1) << r2.err;
  EXPECT_NE(r2.err.find("partial block"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("no whole block"), std::string::npos) << r2.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o2"))) << "a failed run left its --out folder";
}

TEST(BeamformCli, PuppiSampleBeamformsEveryWholeBlock) {
  WB_REQUIRE_DATA("baseband/sample_puppi.raw");
  wbtest::TempDir dir;
  std::ofstream(dir.file("one.txt")) << "0 0 0\n";
  const auto r = wbtest::run_cli("beamform '" + wbtest::data_file("baseband/sample_puppi.raw") +
                                 "' --grid lm:0:0:1:0:0:1 --array '" + dir.file("one.txt") +
                                 "' --out '" + dir.file("o") + "' --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  FilterbankReader fr(dir.file("o") + "/beam0000_pol0.fil");
  EXPECT_EQ(fr.header().nchans, 4);
  EXPECT_EQ(fr.header().nsamples, 4 * 960);  // every whole block, overlap dropped
  // One antenna with unit weight: the power is |x|^2 of pol 0, channel 2, sample 5 of block 0.
  const auto x = fr.read_all();
  std::ifstream f(wbtest::data_file("baseband/sample_puppi.raw"), std::ios::binary);
  f.seekg(6400 + ((2 * 1024 + 5) * 2 + 0) * 2);
  char s[2];
  f.read(s, 2);
  const double re = static_cast<std::int8_t>(s[0]), im = static_cast<std::int8_t>(s[1]);
  EXPECT_FLOAT_EQ(x[5 * 4 + 2], static_cast<float>(re * re + im * im));
}

TEST(BeamformCli, BeamPatternWritesPngAndFits) {
  wbtest::TempDir dir;
  const auto r = wbtest::run_cli("beam-pattern --out '" + dir.file("bp") +
                                 "' --size 64 --nchans 4 --pointing 'azel 180 60'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("bp.json")));
  if (io::png_supported()) EXPECT_GT(std::filesystem::file_size(dir.file("bp.png")), 100u);
  if (io::fits_supported()) EXPECT_GT(std::filesystem::file_size(dir.file("bp.fits")), 2880u);
  const auto bad =
      wbtest::run_cli("beam-pattern --out '" + dir.file("b2") + "' --pointing 'azel 180 -20'");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("b2.png")));
}

TEST(BeamformCli, BeamPatternLeavesNothingWhenAProductFails) {
  wbtest::TempDir dir;
  // A folder where the PNG must go: the PNG cannot be written, so neither FITS nor JSON may be
  // left behind (round 1 left the FITS).
  if (io::png_supported()) {
    std::filesystem::create_directories(dir.file("p1.png"));
    const auto r = wbtest::run_cli("beam-pattern --out '" + dir.file("p1") +
                                   "' --size 32 --nchans 2 --pointing 'azel 180 60'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("p1.png"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("p1.fits")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("p1.json")));
  }
  // The same with the FITS: no PNG left.
  if (io::fits_supported()) {
    std::filesystem::create_directories(dir.file("p2.fits"));
    const auto r = wbtest::run_cli("beam-pattern --out '" + dir.file("p2") +
                                   "' --size 32 --nchans 2 --pointing 'azel 180 60'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("p2.png")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("p2.json")));
  }
  // No temporary file is left either: only the two folders made above remain.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    EXPECT_TRUE(e.is_directory()) << e.path();
    ++entries;
  }
  EXPECT_LE(entries, 2);
}

TEST(LwaTbfVoltages, RealFileIsAVoltageStream) {
  WB_REQUIRE_DATA("lwa/tbf-test.dat");
  const std::string path = wbtest::data_file("lwa/tbf-test.dat");
  CaptureWarnings w;
  auto reader = open_voltage_file(path);
  const auto& i = reader->info();
  EXPECT_EQ(i.format, "lwa-tbf");
  EXPECT_EQ(i.nchans, 60);
  EXPECT_EQ(i.nantennas, 256);
  EXPECT_EQ(i.npol, 2);
  EXPECT_EQ(i.sample_type, SampleType::ci4);
  EXPECT_DOUBLE_EQ(i.fch1_hz, 58.7e6);
  EXPECT_DOUBLE_EQ(i.foff_hz, 25e3);
  EXPECT_DOUBLE_EQ(i.tsamp_s, 40e-6);
  EXPECT_EQ(i.block_samples, 1);
  EXPECT_NEAR(i.mjd_start, 1447376362.0 / 86400 + 40587, 1e-9);  // 2015-11-13 00:59:22 UTC
  // The trailing partial frame is dropped with a warning, not an error.
  ASSERT_FALSE(g_warnings.empty());
  EXPECT_NE(g_warnings[0].find("partial"), std::string::npos) << g_warnings[0];
  std::vector<std::uint8_t> block;
  double mjd = 0;
  ASSERT_TRUE(reader->read_block(block, &mjd));
  EXPECT_EQ(static_cast<std::int64_t>(block.size()), i.block_bytes());
  EXPECT_DOUBLE_EQ(mjd, i.mjd_start);
  std::vector<std::uint8_t> direct(block.size());
  TbfReader(path).read(0, 1, 0, 60, direct.data());
  EXPECT_EQ(block, direct);
  EXPECT_FALSE(reader->read_block(block, &mjd));
}

// The real TBX file (64 stands: the SSMIF's first 128 F-engine inputs, NDP channels of
// fS / 8192) beamformed on the CPU at the zenith, against the sum by hand.
TEST(BeamformCli, TbxFileBeamformsWithTheSsmif) {
  WB_REQUIRE_DATA("lwa/tbx-test.dat");
  WB_REQUIRE_DATA("lwa/lwasv-ssmif.txt");
  const std::string path = wbtest::data_file("lwa/tbx-test.dat");
  const std::string ssmif_path = wbtest::data_file("lwa/lwasv-ssmif.txt");
  wbtest::TempDir dir;
  const auto r =
      wbtest::run_cli("beamform '" + path + "' --ssmif '" + ssmif_path +
                      "' --grid azel:0:0:1:90:90:1 --backend cpu --out '" + dir.file("zen") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TbxReader tbx(path);
  const TbfInfo& t = tbx.info();
  ASSERT_EQ(t.nstand, 64);
  const int nchan = t.nchan();
  const TbfStationModel st = tbf_station_model(read_ssmif(ssmif_path), 64, true);
  std::vector<std::uint8_t> v(static_cast<std::size_t>(nchan) * 64 * 2);
  tbx.read(0, 1, 0, nchan, v.data());
  for (int p = 0; p < 2; ++p) {
    FilterbankReader fr(dir.file("zen") + fmt::format("/beam0000_pol{}.fil", p));
    EXPECT_EQ(fr.header().nchans, nchan);
    EXPECT_NEAR(fr.header().fch1, 2176 * 196.0 / 8192, 1e-9);
    EXPECT_NEAR(fr.header().foff, 196.0 / 8192, 1e-12);
    EXPECT_NEAR(fr.header().tsamp, 8192 / 196e6, 1e-15);
    EXPECT_EQ(fr.header().nsamples, 1);
    const auto got = fr.read_all();
    double max_ref = 0, max_err = 0;
    for (int c = 0; c < nchan; ++c) {
      const double f = t.frequency_hz(c);
      std::complex<double> sum;
      for (int s = 0; s < 64; ++s) {
        if (!st.ok[static_cast<std::size_t>(s)]) continue;
        const std::uint8_t b = v[static_cast<std::size_t>(c * 128 + s * 2 + p)];
        const std::complex<double> x(ci4_real(b), ci4_imag(b));
        const double phase =
            -2 * std::numbers::pi * f * st.xyz_m[static_cast<std::size_t>(s)][2] / 299792458.0 +
            2 * std::numbers::pi * f * st.cable_delay_s(s, p, f);
        sum += std::polar(1.0, phase) * x;
      }
      const double ref = std::norm(sum);
      max_ref = std::max(max_ref, ref);
      max_err = std::max(max_err, std::abs(got[static_cast<std::size_t>(c)] - ref));
    }
    EXPECT_GT(max_ref, 0);
    EXPECT_LE(max_err, 1e-4 * max_ref) << "pol " << p;
  }
}

TEST(BeamformCli, TbfFileBeamformsWithTheSsmif) {
  WB_REQUIRE_DATA("lwa/tbf-test.dat");
  WB_REQUIRE_DATA("lwa/lwasv-ssmif.txt");
  const std::string path = wbtest::data_file("lwa/tbf-test.dat");
  const std::string ssmif_path = wbtest::data_file("lwa/lwasv-ssmif.txt");
  wbtest::TempDir dir;
  const auto r =
      wbtest::run_cli("beamform '" + path + "' --ssmif '" + ssmif_path +
                      "' --grid azel:0:0:1:90:90:1 --backend cpu --out '" + dir.file("zen") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("partial"), std::string::npos) << "the partial frame warns: " << r.err;

  // The zenith beam by hand: stands with both antennas usable, the geometric phase of the
  // height, each cable's delay undone, |sum|^2 per channel and pol.
  const TbfReader tbf(path);
  const Ssmif ssmif = read_ssmif(ssmif_path);
  const TbfStationModel st = tbf_station_model(ssmif, 256);
  std::vector<std::uint8_t> v(60 * 512);
  tbf.read(0, 1, 0, 60, v.data());
  for (int p = 0; p < 2; ++p) {
    FilterbankReader fr(dir.file("zen") + fmt::format("/beam0000_pol{}.fil", p));
    EXPECT_EQ(fr.header().nchans, 60);
    EXPECT_NEAR(fr.header().fch1, 58.7, 1e-9);
    EXPECT_NEAR(fr.header().foff, 0.025, 1e-12);
    EXPECT_EQ(fr.header().nsamples, 1);
    const auto got = fr.read_all();
    double max_ref = 0, max_err = 0;
    for (int c = 0; c < 60; ++c) {
      const double f = tbf.info().frequency_hz(c);
      std::complex<double> sum;
      for (int s = 0; s < 256; ++s) {
        if (!st.ok[static_cast<std::size_t>(s)]) continue;
        const std::uint8_t b = v[static_cast<std::size_t>(c * 512 + s * 2 + p)];
        const std::complex<double> x(ci4_real(b), ci4_imag(b));
        const double phase =
            -2 * std::numbers::pi * f * st.xyz_m[static_cast<std::size_t>(s)][2] / 299792458.0 +
            2 * std::numbers::pi * f * st.cable_delay_s(s, p, f);
        sum += std::polar(1.0, phase) * x;
      }
      const double ref = std::norm(sum);
      max_ref = std::max(max_ref, ref);
      max_err = std::max(max_err, std::abs(got[static_cast<std::size_t>(c)] - ref));
    }
    EXPECT_GT(max_ref, 0);
    EXPECT_LE(max_err, 1e-4 * max_ref) << "pol " << p;
  }
  // BEST-2's 32 antennas do not match the 256 TBF stands: a clear usage error, no output.
  const auto bad = wbtest::run_cli("beamform '" + path +
                                   "' --array best2 --grid azel:0:0:1:90:90:1 "
                                   "--backend cpu --out '" +
                                   dir.file("bad") + "'");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("256 antennas"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad") + "/beam0000_pol0.fil"));
}
