// Candidate products (`warpbeam search --candidates-dir`, `warpbeam plot`): burst_28's cutout
// has the burst where physics puts it (the dedispersed profile peaks at the centre, the DM-time
// array's maximum is at the candidate's DM and time), the file has FETCH's and your's layout
// and matches your's own Candidate pipeline (tests/check_candidate_h5.py: h5py, FETCH's
// preprocessing, your's plot_h5 and Candidate), the cutout of a synthetic dispersed pulse
// recovers it, --zap-chans reaches the files' kill_mask, and bad inputs (options, folders,
// broken candidate files) fail clearly without products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>
#ifdef WB_TEST_HDF5
#include <hdf5.h>
#endif

#include "test_util.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/io/candidate_cutout.hpp"
#include "warpbeam/io/filterbank_source.hpp"

namespace {

using namespace warpbeam;

std::vector<std::string> files_with(const wbtest::TempDir& d, const std::string& ext) {
  std::vector<std::string> v;
  if (!std::filesystem::exists(d.path / "cands")) return v;
  for (auto& e : std::filesystem::directory_iterator(d.path / "cands"))
    if (e.path().extension() == ext) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

// (row, column) of the largest value of a [rows][cols] array.
std::pair<int, int> argmax2(const std::vector<float>& v, int cols) {
  const auto i = std::max_element(v.begin(), v.end()) - v.begin();
  return {static_cast<int>(i / cols), static_cast<int>(i % cols)};
}

int profile_peak(const io::CandidateCutout& c) {
  int best = 0;
  double best_v = -1e300;
  for (int t = 0; t < c.time_size; ++t) {
    double s = 0;
    for (int j = 0; j < c.frequency_size; ++j)
      s += c.freq_time[static_cast<std::size_t>(t) * c.frequency_size + j];
    if (s > best_v) best_v = s, best = t;
  }
  return best;
}

TEST(CandidateProducts, Burst28CutoutShowsTheBurstWherePhysicsPutsIt) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const std::string fil = wbtest::data_file("filterbank/burst_28.fil");
  wbtest::TempDir d;
  const auto r =
      wbtest::run_cli("search '" + fil + "' --backend cpu --output '" + d.file("c.cand") +
                      "' --candidates-dir '" + d.file("cands") + "' --candidates-snr 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto h5 = files_with(d, ".h5");
  ASSERT_EQ(h5.size(), 1u) << r.out;  // one candidate of S/N >= 8: the burst
  EXPECT_EQ(files_with(d, ".png").size(), io::candidate_plot_supported() ? 1u : 0u);
  const io::CandidateCutout c = io::read_candidate_h5(h5[0]);
  EXPECT_NEAR(c.dm, 475, 5);  // published DM 475.28
  EXPECT_NEAR(c.tcand_s, 2.03, 0.01);
  EXPECT_EQ(std::filesystem::path(h5[0]).stem().string(), c.cand_id);
  EXPECT_EQ(c.cand_id, io::candidate_id(c.header.tstart, c.tcand_s, c.dm, c.snr));
  ASSERT_EQ(c.time_size, 256);
  ASSERT_EQ(c.frequency_size, 256);
  ASSERT_EQ(c.dm_size, 256);
  // The dedispersed waterfall's profile peaks at the centre (the candidate's time).
  EXPECT_NEAR(profile_peak(c), c.time_size / 2, 1);
  // The DM-time array's maximum is at the candidate's DM and time.
  const auto [row, col] = argmax2(c.dm_time, c.time_size);
  const double dm_at = c.dm_min + (c.dm_max - c.dm_min) * row / (c.dm_size - 1);
  EXPECT_NEAR(dm_at, c.dm, 0.02 * c.dm) << "row " << row;
  EXPECT_NEAR(col, c.time_size / 2, 1);
  // Normalised as your_candmaker: median 0, standard deviation 1.
  for (const auto* v : {&c.freq_time, &c.dm_time}) {
    std::vector<float> s = *v;
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    EXPECT_NEAR(s[s.size() / 2], 0, 0.01);
    double m = 0, q = 0;
    for (float x : *v)
      m += x, q += x * x;
    m /= v->size();
    EXPECT_NEAR(std::sqrt(q / v->size() - m * m), 1, 1e-3);
  }
  // The provenance and the search's candidate travel with the file.
  EXPECT_EQ(c.search.at("file").get<std::string>(), fil);
  EXPECT_EQ(c.search.at("filter").get<int>(), 1);
  EXPECT_TRUE(c.provenance.contains("warpbeam_version"));

  // h5py, FETCH's preprocessing, your's plot_h5 and your's own Candidate pipeline.
  std::filesystem::create_directories(d.path / "your");
  const std::string cmd = std::string("'") + WARPBEAM_PYTHON + "' '" + WARPBEAM_TEST_SOURCE_DIR +
                          "/check_candidate_h5.py' '" + h5[0] + "' '" + fil + "' '" +
                          d.file("your") + "' > '" + d.file("check.json") + "'";
  const int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << "h5py not installed";
  ASSERT_EQ(rc, 0) << wbtest::slurp(d.file("check.json"));
  const auto j = nlohmann::json::parse(wbtest::slurp(d.file("check.json")));
  EXPECT_EQ(j.at("ft_profile_peak").get<int>(), profile_peak(c));
  if (!j.contains("corr_ft")) GTEST_SKIP() << "your not installed: " << j.dump();
  EXPECT_TRUE(std::filesystem::file_size(j.at("your_png").get<std::string>()) > 0);
  EXPECT_GT(j.at("corr_ft").get<double>(), 0.9) << j.dump();
  EXPECT_GT(j.at("corr_dmt_centre").get<double>(), 0.9) << j.dump();
  EXPECT_GT(j.at("corr_dmt").get<double>(), 0.8) << j.dump();  // your wraps its shifts around
  EXPECT_EQ(j.at("your_ft_profile_peak").get<int>(), profile_peak(c)) << j.dump();
  EXPECT_EQ(j.at("your_dmt_peak"), j.at("dmt_peak")) << j.dump();

  // `warpbeam plot` redraws it.
  if (io::candidate_plot_supported()) {
    const auto p = wbtest::run_cli("plot '" + h5[0] + "' --out '" + d.file("re.png") + "'");
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const std::string png = wbtest::slurp(d.file("re.png"));
    ASSERT_GT(png.size(), 1000u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
  }
}

// A dispersed pulse written into noise at a known DM and time comes back at the centre of the
// cutout and on the bowtie's central DM row; the waterfall at the pulse time is bright in every
// channel (the sweep straightened).
TEST(CandidateProducts, SyntheticPulseIsStraightenedAndCentred) {
  wbtest::TempDir d;
  io::FilterbankHeader h;
  h.nchans = 64;
  h.nbits = 32;
  h.fch1 = 1500;
  h.foff = -2;
  h.tsamp = 1e-3;
  h.tstart = 60000;
  const std::int64_t n = 4096;
  const double dm = 300, t_pulse = 1.7;  // arrival at the top of the band (s)
  std::vector<float> data = wbtest::random_floats(static_cast<std::size_t>(n) * h.nchans, 3, -1, 1);
  for (int ch = 0; ch < h.nchans; ++ch) {
    const double delay = dedisp::dispersion_delay_s(dm, h.frequency_mhz(ch), h.fmax_mhz());
    const auto t = static_cast<std::int64_t>(std::lround((t_pulse + delay) / h.tsamp));
    for (int k = 0; k < 4; ++k)
      data[(t + k) * h.nchans + ch] += 3;
  }
  {
    io::FilterbankWriter w(d.file("pulse.fil"), h);
    w.write(data.data(), n);
    w.commit();
  }
  auto src = io::open_filterbank(d.file("pulse.fil"));
  io::CutoutConfig cfg;
  cfg.dm = dm;
  cfg.tcand_s = t_pulse + 2 * h.tsamp;  // the boxcar's centre
  cfg.width = 4;
  cfg.snr = 20;
  const io::CandidateCutout c = io::make_candidate_cutout(*src, cfg);
  EXPECT_EQ(c.time_decimation, 2);
  EXPECT_NEAR(profile_peak(c), 128, 1);
  const auto [row, col] = argmax2(c.dm_time, c.time_size);
  EXPECT_NEAR(row, 128, 3);
  EXPECT_NEAR(col, 128, 1);
  // Straightened: at the peak, every resized channel is well above the median (the pulse adds 3
  // to noise of rms 0.58 in each channel; after decimation by 2 it is still > 2 rms).
  int bright = 0;
  const int peak = profile_peak(c);
  for (int j = 0; j < c.frequency_size; ++j)
    bright += c.freq_time[static_cast<std::size_t>(peak) * c.frequency_size + j] > 1.0f;
  EXPECT_GT(bright, 0.9 * c.frequency_size);
  // Written and read back unchanged.
  io::write_candidate_h5(d.file("c.h5"), c);
  const io::CandidateCutout back = io::read_candidate_h5(d.file("c.h5"));
  EXPECT_EQ(back.freq_time, c.freq_time);
  EXPECT_EQ(back.dm_time, c.dm_time);
  EXPECT_EQ(back.cand_id, c.cand_id);
  EXPECT_DOUBLE_EQ(back.dm_max, c.dm_max);
  EXPECT_EQ(back.time_decimation, 2);
  EXPECT_EQ(back.header.nchans, 64);
}

TEST(CandidateProducts, BadInputsFailClearlyWithoutProducts) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const std::string fil = wbtest::data_file("filterbank/burst_28.fil");
  wbtest::TempDir d;
  // Bad option values: usage errors, nothing written.
  for (const char* opt : {"--candidates-snr -1", "--candidates-max -2"}) {
    const auto r = wbtest::run_cli("search '" + fil + "' --backend cpu --candidates-dir '" +
                                   d.file("cands") + "' " + opt);
    EXPECT_EQ(r.exit_code, 2) << opt << r.err;
    EXPECT_FALSE(std::filesystem::exists(d.path / "cands")) << opt;
  }
  // A folder whose parent does not exist: exit 1 before the search.
  const auto r = wbtest::run_cli("search '" + fil + "' --backend cpu --candidates-dir '" +
                                 d.file("no/such/cands") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  // A --candidates-dir that is a file: exit 1 before the search (the option named), the file
  // untouched.
  {
    std::FILE* f = std::fopen(d.file("afile").c_str(), "wb");
    std::fputs("mine", f);
    std::fclose(f);
  }
  const auto as_file = wbtest::run_cli("search '" + fil + "' --backend cpu --candidates-dir '" +
                                       d.file("afile") + "'");
  EXPECT_EQ(as_file.exit_code, 1) << as_file.err;
  EXPECT_NE(as_file.err.find("--candidates-dir"), std::string::npos) << as_file.err;
  EXPECT_EQ(wbtest::slurp(d.file("afile")), "mine");
  // `warpbeam plot` of garbage and of a missing file (broken HDF5 files: the next test).
  {
    std::FILE* f = std::fopen(d.file("junk.h5").c_str(), "wb");
    std::fputs("not an HDF5 file at all", f);
    std::fclose(f);
  }
  const auto junk = wbtest::run_cli("plot '" + d.file("junk.h5") + "'");
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("not an HDF5 file"), std::string::npos) << junk.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("junk.png")));
  const auto missing = wbtest::run_cli("plot '" + d.file("none.h5") + "'");
  EXPECT_EQ(missing.exit_code, 1);
  const auto bad_out = wbtest::run_cli("plot '" + d.file("junk.h5") + "' --out x.jpg");
  EXPECT_EQ(bad_out.exit_code, 2) << bad_out.err;
  // A cutout window outside the file.
  auto src = io::open_filterbank(fil);
  io::CutoutConfig cfg;
  cfg.dm = 10;
  cfg.tcand_s = 1e4;
  cfg.width = 1;
  try {
    io::make_candidate_cutout(*src, cfg);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
}

// --zap-chans is the cutouts' kill_mask (1 = zapped), as your_candmaker records the channels it
// was told to kill; read back by read_candidate_h5.
TEST(CandidateProducts, ZappedChannelsAreTheKillMask) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  const std::string fil = wbtest::data_file("filterbank/burst_28.fil");
  wbtest::TempDir d;
  const auto r = wbtest::run_cli("search '" + fil + "' --backend cpu --zap-chans 0-10,300 " +
                                 "--candidates-dir '" + d.file("cands") + "' --candidates-snr 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto h5 = files_with(d, ".h5");
  ASSERT_EQ(h5.size(), 1u) << r.out;
  const io::CandidateCutout c = io::read_candidate_h5(h5[0]);
  ASSERT_EQ(c.kill_mask.size(), static_cast<std::size_t>(c.header.nchans));
  for (int ch = 0; ch < c.header.nchans; ++ch)
    EXPECT_EQ(c.kill_mask[ch], ch <= 10 || ch == 300 ? 1 : 0) << "channel " << ch;
}

#ifdef WB_TEST_HDF5
// Edits of a good candidate file with HDF5's C API.
void edit_h5(const std::string& path, const std::function<void(hid_t)>& edit) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  edit(f);
  H5Fclose(f);
}
void set_double_attr(hid_t f, const char* name, double v) {
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
  H5Aclose(a);
  H5Sclose(s);
}
#endif

// A candidate file without a dataset, with a dataset of the wrong rank or shape, or with an
// attribute out of range fails read_candidate_h5 (format, with the reason) and `warpbeam plot`
// (exit 1, no PNG).
TEST(CandidateProducts, BrokenCandidateFilesFailWithTheReason) {
#ifndef WB_TEST_HDF5
  GTEST_SKIP() << "this build has no HDF5";
#else
  wbtest::TempDir d;
  // A good file: the cutout of a noise-only filterbank.
  io::FilterbankHeader h;
  h.nchans = 16;
  h.nbits = 32;
  h.fch1 = 1500;
  h.foff = -4;
  h.tsamp = 1e-3;
  h.tstart = 60000;
  const std::int64_t n = 2048;
  const auto data = wbtest::random_floats(static_cast<std::size_t>(n) * h.nchans, 5, -1, 1);
  {
    io::FilterbankWriter w(d.file("noise.fil"), h);
    w.write(data.data(), n);
    w.commit();
  }
  auto src = io::open_filterbank(d.file("noise.fil"));
  io::CutoutConfig cfg;
  cfg.dm = 50;
  cfg.tcand_s = 1.0;
  cfg.width = 2;
  cfg.snr = 9;
  cfg.time_size = cfg.frequency_size = cfg.dm_size = 32;
  const std::string good = d.file("good.h5");
  io::write_candidate_h5(good, io::make_candidate_cutout(*src, cfg));
  ASSERT_NO_THROW(io::read_candidate_h5(good));

  struct Case {
    std::string name, reason;
    std::function<void(hid_t)> edit;
  };
  const std::vector<Case> cases = {
      {"no_ft", "no dataset 'data_freq_time'",
       [](hid_t f) { H5Ldelete(f, "data_freq_time", H5P_DEFAULT); }},
      {"no_dmt", "no dataset 'data_dm_time'",
       [](hid_t f) { H5Ldelete(f, "data_dm_time", H5P_DEFAULT); }},
      {"rank", "is not a 2-D dataset",
       [](hid_t f) {
         H5Ldelete(f, "data_dm_time", H5P_DEFAULT);
         const hsize_t n1 = 10;
         const hid_t s = H5Screate_simple(1, &n1, nullptr);
         const hid_t ds = H5Dcreate2(f, "data_dm_time", H5T_NATIVE_FLOAT, s, H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT);
         const std::vector<float> z(10, 0.f);
         H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, z.data());
         H5Dclose(ds);
         H5Sclose(s);
       }},
      {"shape", "has shape 1 x 5",
       [](hid_t f) {
         H5Ldelete(f, "data_freq_time", H5P_DEFAULT);
         const hsize_t n2[2] = {1, 5};
         const hid_t s = H5Screate_simple(2, n2, nullptr);
         const hid_t ds = H5Dcreate2(f, "data_freq_time", H5T_NATIVE_FLOAT, s, H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT);
         const std::vector<float> z(5, 0.f);
         H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, z.data());
         H5Dclose(ds);
         H5Sclose(s);
       }},
      {"no_dm", "the attribute 'dm' is missing", [](hid_t f) { H5Adelete(f, "dm"); }},
      {"tsamp", "are not a filterbank's", [](hid_t f) { set_double_attr(f, "tsamp", 0); }},
      {"nchans", "nchans 1000000000000 is not",
       [](hid_t f) { set_double_attr(f, "nchans", 1e12); }},
      {"width", "are not a candidate's", [](hid_t f) { set_double_attr(f, "width", 0); }},
      {"decimation", "'wb_time_decimation' = nan",
       [](hid_t f) { set_double_attr(f, "wb_time_decimation", std::nan("")); }},
      {"kill_mask", "'kill_mask' has 3 entries",
       [](hid_t f) {
         H5Adelete(f, "kill_mask");
         const hsize_t n3 = 3;
         const hid_t s = H5Screate_simple(1, &n3, nullptr);
         const hid_t a = H5Acreate2(f, "kill_mask", H5T_NATIVE_INT32, s, H5P_DEFAULT, H5P_DEFAULT);
         const std::int32_t v[3] = {1, 0, 1};
         H5Awrite(a, H5T_NATIVE_INT32, v);
         H5Aclose(a);
         H5Sclose(s);
       }},
  };
  const std::string bytes = wbtest::slurp(good);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = d.file(c.name + ".h5");
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
    edit_h5(path, c.edit);
    try {
      io::read_candidate_h5(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::format) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
    }
    const std::string png = d.file(c.name + ".png");
    const auto r = wbtest::run_cli("plot '" + path + "' --out '" + png + "'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    if (io::candidate_plot_supported()) EXPECT_NE(r.err.find(c.reason), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(png));
  }
#endif
}

}  // namespace
