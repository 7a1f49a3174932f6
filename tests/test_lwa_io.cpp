// LWA I/O: the real TBF file and SSMIF against what ../shared/data/README.md and the files' own
// bytes say, TBF round trips through the writer, and every bad input the issue lists.
#include <cmath>
#include <cstring>
#include <fstream>

#include "test_util.hpp"
#include "warpbeam/io/lwa.hpp"

using namespace warpbeam;
using namespace warpbeam::io;

namespace {

std::vector<std::string> g_warnings;
void capture(const std::string& m) {
  g_warnings.push_back(m);
}
struct CaptureWarnings {
  WarningHandler prev;
  CaptureWarnings() : prev(set_warning_handler(capture)) { g_warnings.clear(); }
  ~CaptureWarnings() { set_warning_handler(prev); }
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void write_all(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Random ci4 voltages [nchan][ntime][nstand][2].
std::vector<std::uint8_t> random_ci4(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& x : v)
    x = static_cast<std::uint8_t>(rng());
  return v;
}

template <class F>
std::string error_of(F&& f, ErrorCategory want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.category()), static_cast<int>(want)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

}  // namespace

TEST(LwaCi4, NibblesAreTwosComplementRealHigh) {
  for (int re = -8; re <= 7; ++re)
    for (int im = -8; im <= 7; ++im) {
      const std::uint8_t b = ci4_pack(re, im);
      EXPECT_EQ(ci4_real(b), re);
      EXPECT_EQ(ci4_imag(b), im);
    }
  EXPECT_EQ(ci4_real(0x7F), 7);
  EXPECT_EQ(ci4_imag(0x7F), -1);
  EXPECT_EQ(ci4_real(0x80), -8);
  EXPECT_EQ(ci4_imag(0x80), 0);
}

TEST(LwaTbf, RealFileHasTheDocumentedLayout) {
  WB_REQUIRE_DATA("lwa/tbf-test.dat");
  const std::string path = wbtest::data_file("lwa/tbf-test.dat");
  CaptureWarnings w;
  const TbfReader r(path);
  const auto& i = r.info();
  // README: 6168-byte frames, nstand 0 (= 256), a trailing partial frame. The file is 36000
  // bytes: 5 whole frames (one spectrum, channel blocks 2348 .. 2396) and 5160 bytes dropped.
  EXPECT_EQ(i.nstand, 256);
  EXPECT_EQ(i.ntime, 1);
  ASSERT_EQ(i.nchan(), 60);
  EXPECT_EQ(i.channels.front(), 2348);
  EXPECT_EQ(i.channels.back(), 2407);
  EXPECT_TRUE(i.contiguous());
  EXPECT_DOUBLE_EQ(i.frequency_hz(0), 58.7e6);  // E1's band starts here
  EXPECT_EQ(i.dropped_bytes, 36000 - 5 * 6168);
  ASSERT_EQ(i.time_tags.size(), 1u);
  EXPECT_EQ(i.time_tags[0], 283685766952000000ll);
  EXPECT_DOUBLE_EQ(i.unix_time(0), 1447376362.0);  // = the frames' second count
  ASSERT_FALSE(g_warnings.empty());
  EXPECT_NE(g_warnings[0].find("partial"), std::string::npos) << g_warnings[0];

  // The reader's voltages against the file's raw bytes: channel c of frame b sits at
  // 24 + (c % 12) * 512 in frame c / 12.
  std::vector<std::uint8_t> v(static_cast<std::size_t>(i.nchan()) * 512);
  r.read(0, 1, 0, i.nchan(), v.data());
  const auto raw = read_all(path);
  for (int c = 0; c < i.nchan(); ++c)
    ASSERT_EQ(
        std::memcmp(v.data() + c * 512, raw.data() + (c / 12) * 6168 + 24 + (c % 12) * 512, 512), 0)
        << "channel " << c;
  // Real voltages: not all zero, and both signs present.
  int nonzero = 0, negative = 0;
  for (auto b : v) {
    nonzero += b != 0;
    negative += ci4_real(b) < 0;
  }
  EXPECT_GT(nonzero, 20000);
  EXPECT_GT(negative, 5000);
  // A sub-range read is the matching slice.
  std::vector<std::uint8_t> part(5 * 512);
  r.read(0, 1, 11, 5, part.data());
  EXPECT_EQ(std::memcmp(part.data(), v.data() + 11 * 512, part.size()), 0);
}

TEST(LwaTbf, WriterRoundTripsThroughTheReader) {
  wbtest::TempDir dir;
  const int nchan = 24, nstand = 7;
  const std::int64_t ntime = 5, tt0 = 283685766952000000ll;
  const auto v = random_ci4(static_cast<std::size_t>(nchan) * ntime * nstand * 2, 3);
  const std::string path = dir.file("x.tbf");
  write_tbf(path, v.data(), nchan, ntime, nstand, 1000, tt0);
  const TbfReader r(path);
  EXPECT_EQ(r.info().nstand, nstand);
  EXPECT_EQ(r.info().ntime, ntime);
  EXPECT_EQ(r.info().nchan(), nchan);
  EXPECT_EQ(r.info().channels[0], 1000);
  EXPECT_EQ(r.info().time_tags[4], tt0 + 4 * kTbfTicksPerSpectrum);
  std::vector<std::uint8_t> back(v.size());
  r.read(0, ntime, 0, nchan, back.data());
  EXPECT_EQ(back, v);
  // A window of spectra and channels.
  std::vector<std::uint8_t> win(3 * 2 * nstand * 2);
  r.read(2, 2, 13, 3, win.data());
  for (int c = 0; c < 3; ++c)
    for (int t = 0; t < 2; ++t)
      EXPECT_EQ(std::memcmp(win.data() + (c * 2 + t) * nstand * 2,
                            v.data() + ((13 + c) * ntime + 2 + t) * nstand * 2, nstand * 2),
                0);
  EXPECT_THROW(r.read(4, 2, 0, 1, win.data()), Error);
  // Frames of one spectrum in any order read the same.
  auto bytes = read_all(path);
  const std::size_t fb = static_cast<std::size_t>(tbf_frame_bytes(nstand));
  std::vector<std::uint8_t> f0(bytes.begin(), bytes.begin() + fb);
  std::copy(bytes.begin() + fb, bytes.begin() + 2 * fb, bytes.begin());
  std::copy(f0.begin(), f0.end(), bytes.begin() + fb);
  write_all(dir.file("swapped.tbf"), bytes);
  std::vector<std::uint8_t> back2(v.size());
  TbfReader(dir.file("swapped.tbf")).read(0, ntime, 0, nchan, back2.data());
  EXPECT_EQ(back2, v);
}

TEST(LwaTbf, BadInputsGiveClearErrors) {
  wbtest::TempDir dir;
  const int nchan = 24, nstand = 4;
  const std::int64_t ntime = 3;
  const auto v = random_ci4(static_cast<std::size_t>(nchan) * ntime * nstand * 2, 9);
  const std::string good = dir.file("good.tbf");
  write_tbf(good, v.data(), nchan, ntime, nstand, 2348, 283685766952000000ll);
  const auto bytes = read_all(good);
  const std::size_t fb = static_cast<std::size_t>(tbf_frame_bytes(nstand));
  auto mutate = [&](const char* name, auto&& change) {
    auto b = bytes;
    change(b);
    write_all(dir.file(name), b);
    return dir.file(name);
  };
  // Wrong sync word in frame 2.
  auto bad = mutate("sync.tbf", [&](auto& b) { b[2 * fb] ^= 0xFF; });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("sync word"),
            std::string::npos);
  // A frame whose nstand contradicts frame 0.
  bad = mutate("nstand.tbf", [&](auto& b) { b[3 * fb + 15] = 5; });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("contradict"),
            std::string::npos);
  // A second count that contradicts the frame's own time tag.
  bad = mutate("second.tbf", [&](auto& b) { b[1 * fb + 8] ^= 0x10; });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("contradicts"),
            std::string::npos);
  // A time tag that skips spectra.
  bad = mutate("gap.tbf", [&](auto& b) {
    TbfFrameHeader h = decode_tbf_header(&b[4 * fb]);
    h.time_tag += kTbfTicksPerSpectrum;
    encode_tbf_header(h, &b[4 * fb]);
  });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("time tag"),
            std::string::npos);
  // A repeated channel block inside one spectrum.
  bad = mutate("repeat.tbf", [&](auto& b) {
    TbfFrameHeader h = decode_tbf_header(&b[1 * fb]);
    h.first_chan = 2348;
    encode_tbf_header(h, &b[1 * fb]);
  });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("repeats"),
            std::string::npos);
  // Not TBF (id byte): a first frame of another LWA kind (2: COR) is named and unsupported;
  // a later frame of another id is a broken file.
  bad = mutate("id.tbf", [&](auto& b) { b[4] = 2; });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::unsupported).find("COR"),
            std::string::npos);
  bad = mutate("id1.tbf", [&](auto& b) { b[fb + 4] = 2; });
  EXPECT_NE(error_of([&] { TbfReader r(bad); }, ErrorCategory::format).find("id"),
            std::string::npos);
  // Empty and missing files.
  write_all(dir.file("empty.tbf"), {});
  error_of([&] { TbfReader r(dir.file("empty.tbf")); }, ErrorCategory::format);
  error_of([&] { TbfReader r(dir.file("missing.tbf")); }, ErrorCategory::io);
  // An incomplete last spectrum is dropped with a warning, not an error.
  {
    CaptureWarnings w;
    auto cut = bytes;
    cut.resize(bytes.size() - fb);  // the last spectrum loses one of its two frames
    write_all(dir.file("cut.tbf"), cut);
    const TbfReader r(dir.file("cut.tbf"));
    EXPECT_EQ(r.info().ntime, 2);
    EXPECT_EQ(r.info().dropped_frames, 1);
    EXPECT_FALSE(g_warnings.empty());
  }
  // The writer refuses shapes TBF cannot hold.
  error_of([&] { write_tbf(dir.file("w.tbf"), v.data(), 13, 1, nstand, 0, 0); },
           ErrorCategory::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.tbf")));
}

TEST(LwaSsmif, RealStationFileParses) {
  WB_REQUIRE_DATA("lwa/lwasv-ssmif.txt");
  const Ssmif s = read_ssmif(wbtest::data_file("lwa/lwasv-ssmif.txt"));
  EXPECT_EQ(s.station_id, "SV");
  EXPECT_EQ(s.format_version, 10);
  EXPECT_DOUBLE_EQ(s.lat_deg, 34.348358);
  EXPECT_DOUBLE_EQ(s.lon_deg, -106.885783);
  ASSERT_EQ(s.nstand(), 256);
  EXPECT_DOUBLE_EQ(s.stand_xyz_m[0][0], -37.116);
  EXPECT_DOUBLE_EQ(s.stand_xyz_m[0][1], 26.191);
  EXPECT_DOUBLE_EQ(s.stand_xyz_m[0][2], 2.503);
  EXPECT_DOUBLE_EQ(s.stand_xyz_m[255][0], -293.335);  // the outrigger
  ASSERT_EQ(s.antennas.size(), 512u);
  EXPECT_EQ(s.antennas[19].status, kBad);  // ANT_STAT[20] 1
  EXPECT_EQ(s.antennas[20].status, kOk);
  EXPECT_EQ(s.antennas[19].stand, 10);
  EXPECT_EQ(s.antennas[19].pol, 1);
  int bad = 0;
  for (const auto& a : s.antennas)
    bad += a.status <= kBad;
  EXPECT_EQ(bad, 24);
  ASSERT_EQ(s.cables.size(), 512u);
  EXPECT_DOUBLE_EQ(s.cables[0].length_m, 83.0);
  EXPECT_DOUBLE_EQ(s.cables[0].stretch, 1.0403);
  EXPECT_DOUBLE_EQ(s.cables[0].velocity_factor, 0.83);  // the MCS0031 default
  EXPECT_DOUBLE_EQ(s.cables[510].velocity_factor, 0.85);
  EXPECT_DOUBLE_EQ(s.cables[510].dispersion_s, 2e-9);
  EXPECT_DOUBLE_EQ(s.cables[510].length_m, 414.11);
  // Cable 1 at 60 MHz: 83 m * 1.0403 / (0.83 c) + 2.4 ns * (0.863449) / sqrt(6).
  const double len = 83 * 1.0403;
  const double want = len / (0.83 * 299792458.0) + 2.4e-9 * (len / 100) / std::sqrt(6.0);
  EXPECT_NEAR(s.cables[0].delay_s(60e6), want, 1e-15);
  EXPECT_NEAR(s.cables[0].delay_s(60e6), 347.9e-9, 0.5e-9);
  EXPECT_LT(s.cables[0].gain(60e6), 1.0);
  // The digitiser map (SNAP_ANT) is the identity: TBF stand s, pol p -> antenna 2s + p + 1.
  EXPECT_EQ(s.tbf_antenna(0, 0), 1);
  EXPECT_EQ(s.tbf_antenna(9, 1), 20);
  EXPECT_EQ(s.tbf_antenna(255, 1), 512);
}

TEST(LwaSsmif, BadFilesGiveClearErrors) {
  wbtest::TempDir dir;
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  error_of([&] { read_ssmif(dir.file("missing.txt")); }, ErrorCategory::io);
  EXPECT_NE(error_of([&] { read_ssmif(write("a.txt", "STD_LX[1] 1.0\n")); }, ErrorCategory::format)
                .find("N_STD"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_ssmif(write("b.txt", "N_STD 2\nSTD_LX[3] 1.0\n")); },
                     ErrorCategory::format)
                .find("outside"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_ssmif(write("c.txt", "N_STD 2\nSTD_LY[1] north\n")); },
                     ErrorCategory::format)
                .find("not a number"),
            std::string::npos);
  const Ssmif s = read_ssmif(write("d.txt", "N_STD 2\nSTD_LX[2] -4.5 # comment\nRPD_VF 90\n"));
  EXPECT_EQ(s.nstand(), 2);
  EXPECT_DOUBLE_EQ(s.stand_xyz_m[1][0], -4.5);
  EXPECT_DOUBLE_EQ(s.cables[3].velocity_factor, 0.9);
  EXPECT_EQ(s.tbf_antenna(1, 1), 4);
}
