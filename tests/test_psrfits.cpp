// PSRFITS search-mode reader (src/io/psrfits.cpp), checked against files written by an
// independent writer: tests/psrfits_writer.py (astropy.io.fits), which also computes with NumPy
// the values a reader must return (the PSRFITS definition's (DATA - ZERO_OFF) * DAT_SCL +
// DAT_OFFS, times DAT_WTS, AA + BB) and writes them as SIGPROC float32 files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/sigproc.hpp"

namespace {

using warpbeam::io::FilterbankSource;
using warpbeam::io::open_filterbank;

// The writer's output, made once per process (astropy's import takes a second), or once for the
// whole ctest run by the fixture psrfits_suite, which names its folder in $WB_PSRFITS_SUITE.
struct Suite {
  wbtest::TempDir tmp;
  std::filesystem::path dir;
  nlohmann::json manifest;
  std::string skip;  // why the suite could not be written (no cfitsio, python3 or astropy)
  bool with_data = false;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

Suite& suite() {
  static Suite* s = [] {
    auto* s = new Suite;
    s->dir = s->tmp.path;
    if (!warpbeam::io::psrfits_supported()) {
      s->skip = "this build has no cfitsio";
      return s;
    }
    if (const char* shared = std::getenv("WB_PSRFITS_SUITE");
        shared && std::filesystem::exists(std::filesystem::path(shared) / "manifest.json")) {
      s->dir = shared;
    } else {
      const std::string cmd = std::string("'") + WARPBEAM_PYTHON + "' '" +
                              WARPBEAM_TEST_SOURCE_DIR + "/psrfits_writer.py' '" + s->dir.string() +
                              "' --data '" + wbtest::data_dir() + "'";
      const int rc = std::system(cmd.c_str());
      if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        s->skip = std::string("python3 with astropy and numpy not found (") + WARPBEAM_PYTHON + ")";
        return s;
      }
      if (rc != 0) {
        s->skip = "psrfits_writer.py failed: " + cmd;  // reported as a failure below
        return s;
      }
    }
    s->manifest = nlohmann::json::parse(wbtest::slurp(s->file("manifest.json")));
    s->with_data = s->manifest["with_data"].get<bool>();
    return s;
  }();
  return *s;
}

#define WB_REQUIRE_SUITE()                                                              \
  do {                                                                                  \
    if (suite().skip.rfind("psrfits_writer.py failed", 0) == 0) FAIL() << suite().skip; \
    if (!suite().skip.empty()) GTEST_SKIP() << suite().skip;                            \
  } while (0)

std::vector<float> read_all(FilterbankSource& s) {
  const auto& h = s.header();
  std::vector<float> v(static_cast<std::size_t>(h.nsamples) * h.nchans);
  s.seek(0);
  EXPECT_EQ(s.read(h.nsamples, v.data()), h.nsamples);
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v)
    m = std::max(m, std::abs(x));
  return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const float tol = 1e-6f * std::max(1.0f, max_abs(want));
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": first mismatch at " << first << ": " << got[first] << " vs "
                     << want[first];
}

TEST(Psrfits, EverySampleLayoutReadsTheValuesOfTheDefinition) {
  WB_REQUIRE_SUITE();
  const auto& cases = suite().manifest["synthetic"];
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    auto src = open_filterbank(suite().file(c["fits"]));
    const auto& h = src->header();
    EXPECT_EQ(src->format(), "PSRFITS search mode");
    EXPECT_EQ(h.nbits, c["nbits"].get<int>());
    EXPECT_EQ(h.is_signed, c["signed"].get<bool>());
    EXPECT_EQ(h.nchans, c["nchans"].get<int>());
    EXPECT_EQ(h.nsamples, c["nsamples"].get<std::int64_t>());
    EXPECT_NEAR(h.fch1, c["fch1"].get<double>(), 1e-4);
    EXPECT_NEAR(h.foff, c["foff"].get<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(h.tsamp, c["tsamp"].get<double>());
    EXPECT_NEAR(h.tstart, c["tstart"].get<double>(), 1e-10);  // 9 us
    EXPECT_EQ(h.source_name, "TEST");
    EXPECT_EQ(h.telescope_id, 7);            // TELESCOP 'GMRT'
    EXPECT_NEAR(h.src_raj, 53431.97, 1e-6);  // RA '05:34:31.97'
    EXPECT_NEAR(h.src_dej, 220052.1, 1e-6);  // DEC '+22:00:52.1'
    EXPECT_NEAR(h.za_start, 30.25, 1e-6);

    warpbeam::io::FilterbankReader expected(suite().file(c["expected"]));
    const std::vector<float> want = expected.read_all();
    expect_close(read_all(*src), want, name);

    // Gulps that cut rows anywhere, after a seek into the second row.
    const std::int64_t start = 21, step = 7;
    src->seek(start);
    std::vector<float> gulp(static_cast<std::size_t>(step) * h.nchans);
    for (std::int64_t t = start; t < h.nsamples; t += step) {
      const std::int64_t n = src->read(step, gulp.data());
      ASSERT_EQ(n, std::min(step, h.nsamples - t));
      ASSERT_EQ(src->position(), t + n);
      for (std::int64_t i = 0; i < n * h.nchans; ++i)
        ASSERT_NEAR(gulp[i], want[t * h.nchans + i], 1e-6 * std::max(1.0f, max_abs(want)))
            << "sample " << t + i / h.nchans;
    }
    EXPECT_EQ(src->read(step, gulp.data()), 0);
  }
}

TEST(Psrfits, UnscaledSamplesStayPackedAsSigprocPacksThem) {
  WB_REQUIRE_SUITE();
  if (!suite().with_data) GTEST_SKIP() << "real data not found: " << wbtest::data_dir();
  for (const char* stem : {"burst_28", "parkes_2bit"}) {
    SCOPED_TRACE(stem);
    warpbeam::io::FilterbankReader fil(
        wbtest::data_file(std::string("filterbank/") + stem + ".fil"));
    auto fits = open_filterbank(suite().file(std::string(stem) + ".fits"));
    const auto& a = fil.header();
    const auto& b = fits->header();
    ASSERT_EQ(b.nbits, a.nbits);
    ASSERT_EQ(b.nsamples, a.nsamples);
    ASSERT_EQ(b.nchans, a.nchans);
    EXPECT_EQ(b.fch1, a.fch1);
    EXPECT_EQ(b.foff, a.foff);
    EXPECT_EQ(b.tsamp, a.tsamp);
    EXPECT_NEAR(b.tstart, a.tstart, 1e-10);
    EXPECT_EQ(b.source_name, a.source_name);
    const std::size_t bytes = a.bytes_per_sample() * static_cast<std::size_t>(a.nsamples);
    std::vector<std::uint8_t> x(bytes), y(bytes);
    ASSERT_EQ(fil.read_raw(a.nsamples, x.data()), a.nsamples);
    ASSERT_EQ(fits->read_raw(b.nsamples, y.data()), b.nsamples);
    EXPECT_TRUE(x == y) << "packed rows differ";
  }
}

TEST(Psrfits, Burst28CopiesReadAsTheFilterbank) {
  WB_REQUIRE_SUITE();
  if (!suite().with_data) GTEST_SKIP() << "real data not found: " << wbtest::data_dir();
  warpbeam::io::FilterbankReader fil(wbtest::data_file("filterbank/burst_28.fil"));
  const auto& h = fil.header();
  const std::vector<float> x = fil.read_all();

  auto four = open_filterbank(suite().file("burst_28_4pol.fits"));
  EXPECT_EQ(four->header().nbits, 32);  // a sum of products: float32 rows
  expect_close(read_all(*four), x, "4-pol AA + BB");

  auto rev = open_filterbank(suite().file("burst_28_reversed.fits"));
  EXPECT_EQ(rev->header().fch1, h.fch1 + (h.nchans - 1) * h.foff);
  EXPECT_EQ(rev->header().foff, -h.foff);
  std::vector<float> flipped(x.size());
  for (std::int64_t t = 0; t < h.nsamples; ++t)
    for (int c = 0; c < h.nchans; ++c)
      flipped[t * h.nchans + c] = x[t * h.nchans + (h.nchans - 1 - c)];
  expect_close(read_all(*rev), flipped, "reversed band");

  auto scaled = open_filterbank(suite().file("burst_28_scaled.fits"));
  EXPECT_EQ(scaled->header().nbits, 32);
  std::vector<float> affine(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    affine[i] = 1.75f * x[i] - 13.0f;
  expect_close(read_all(*scaled), affine, "scaled");

  auto rescaled = open_filterbank(suite().file("burst_28_rescaled.fits"));
  warpbeam::io::FilterbankReader want(suite().file("burst_28_rescaled.expected.fil"));
  expect_close(read_all(*rescaled), want.read_all(), "rescaled per row and channel");
}

TEST(Psrfits, InfoPrintsTheLayout) {
  WB_REQUIRE_SUITE();
  const auto r = wbtest::run_cli("info '" + suite().file("aabbcrci_scaled.fits") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PSRFITS search mode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("AA+BB is read"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nbits           32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nsamples        80"), std::string::npos) << r.out;
}

// One candidate of a .cand file (heimdall's columns).
struct Cand {
  double snr = 0, time_s = 0, dm = 0;
  long long sample = 0, filter = 0, trial = 0, members = 0, begin = 0, end = 0;
};

std::vector<Cand> search_cands(const std::string& file, const wbtest::TempDir& out,
                               const std::string& name) {
  const std::string cand = out.file(name + ".cand");
  const auto r = wbtest::run_cli("search '" + file + "' --backend cpu --output '" + cand + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<Cand> v;
  std::istringstream in(wbtest::slurp(cand));
  Cand c;
  while (in >> c.snr >> c.sample >> c.time_s >> c.filter >> c.trial >> c.dm >> c.members >>
         c.begin >> c.end)
    v.push_back(c);
  return v;
}

void expect_same_cands(const std::vector<Cand>& a, const std::vector<Cand>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].snr, b[i].snr, 1e-3 * b[i].snr) << what << " #" << i;
    EXPECT_EQ(a[i].sample, b[i].sample) << what << " #" << i;
    EXPECT_EQ(a[i].filter, b[i].filter) << what << " #" << i;
    EXPECT_EQ(a[i].trial, b[i].trial) << what << " #" << i;
    EXPECT_EQ(a[i].begin, b[i].begin) << what << " #" << i;
    EXPECT_EQ(a[i].end, b[i].end) << what << " #" << i;
  }
}

// Must show 1: the PSRFITS copies of burst_28.fil give the filterbank's candidates.
TEST(Psrfits, SearchOfBurst28CopiesFindsTheFilterbanksCandidates) {
  WB_REQUIRE_SUITE();
  if (!suite().with_data) GTEST_SKIP() << "real data not found: " << wbtest::data_dir();
  wbtest::TempDir out;
  const auto fil = search_cands(wbtest::data_file("filterbank/burst_28.fil"), out, "fil");
  ASSERT_FALSE(fil.empty());
  EXPECT_NEAR(fil[0].dm, 475, 5);  // the published burst, DM 475.28 at 2.03 s
  EXPECT_NEAR(fil[0].time_s, 2.03, 0.01);
  for (const char* copy : {"burst_28", "burst_28_4pol", "burst_28_reversed", "burst_28_scaled"})
    expect_same_cands(search_cands(suite().file(std::string(copy) + ".fits"), out, copy), fil,
                      copy);
  // Per-row, per-channel scales change the data (and the candidates): as the NumPy values do.
  expect_same_cands(search_cands(suite().file("burst_28_rescaled.fits"), out, "rescaled"),
                    search_cands(suite().file("burst_28_rescaled.expected.fil"), out, "want"),
                    "rescaled");
}

// Garbage in: exit 1 with the reason, and no product.
TEST(Psrfits, MalformedFilesFailWithTheReason) {
  WB_REQUIRE_SUITE();
  const auto& cases = suite().manifest["malformed"];
  ASSERT_EQ(cases.size(), 8u);
  for (const auto& c : cases) {
    const std::string name = c["name"], reason = c["reason"];
    SCOPED_TRACE(name);
    const std::string path = suite().file(c["fits"]);
    try {
      open_filterbank(path);
      ADD_FAILURE() << "no error";
    } catch (const warpbeam::Error& e) {
      EXPECT_EQ(warpbeam::to_string(e.category()), c["category"].get<std::string>()) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
    const auto info = wbtest::run_cli("info '" + path + "'");
    EXPECT_EQ(info.exit_code, 1);
    EXPECT_NE(info.err.find(reason), std::string::npos) << info.err;
    wbtest::TempDir out;
    const auto search =
        wbtest::run_cli("search '" + path + "' --backend cpu --output '" + out.file("c.cand") +
                        "' --json '" + out.file("c.json") + "'");
    EXPECT_EQ(search.exit_code, 1);
    EXPECT_NE(search.err.find(reason), std::string::npos) << search.err;
    EXPECT_TRUE(out.files().empty());
  }
  // Not FITS-like at all, and FITS but not PSRFITS.
  wbtest::TempDir t;
  {
    std::FILE* f = std::fopen(t.file("image.fits").c_str(), "wb");
    std::string card = "SIMPLE  =                    T";
    card.resize(2880, ' ');
    std::fwrite(card.data(), 1, card.size(), f);
    std::fclose(f);
  }
  const auto r = wbtest::run_cli("info '" + t.file("image.fits") + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("warpbeam: error:"), std::string::npos) << r.err;
}

// fuzz_psrfits's first finding: cfitsio 4.2 copied an unquoted 70-character TTYPEn value into its
// 70-byte column name (ffgtbp), one byte past the field: glibc's fortified strcpy aborted `info`
// and every reader ("buffer overflow detected"). The headers are now checked before cfitsio
// parses them: the bad card is named, and so is a header byte that is not ASCII text. The file is
// written here card by card (FITS 4.0: 2880-byte blocks of 80-byte cards), no astropy needed.
TEST(Psrfits, HeadersCfitsioCannotHoldAreRefusedBeforeItParsesThem) {
  if (!warpbeam::io::psrfits_supported()) GTEST_SKIP() << "this build has no cfitsio";
  const auto hdu = [](const std::vector<std::string>& cards) {
    std::string h;
    for (const auto& c : cards) {
      std::string card = c;
      card.resize(80, ' ');
      h += card;
    }
    h += std::string("END").append(77, ' ');
    h.resize((h.size() + 2879) / 2880 * 2880, ' ');
    return h;
  };
  const std::string primary = hdu(
      {"SIMPLE  =                    T", "BITPIX  =                    8",
       "NAXIS   =                    0", "EXTEND  =                    T", "FITSTYPE= 'PSRFITS '",
       "OBS_MODE= 'SEARCH  '", "STT_IMJD=                60123", "STT_SMJD=                39466"});
  const auto subint = [&](const std::string& ttype) {
    return hdu({"XTENSION= 'BINTABLE'", "BITPIX  =                    8",
                "NAXIS   =                    2", "NAXIS1  =                    8",
                "NAXIS2  =                    1", "PCOUNT  =                    0",
                "GCOUNT  =                    1", "TFIELDS =                    1", ttype,
                "TFORM1  = '1D      '", "EXTNAME = 'SUBINT  '"}) +
           std::string(2880, '\0');
  };
  wbtest::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    const std::string path = dir.file(name);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    return path;
  };
  struct Case {
    std::string name, ttype, reason;
  };
  const std::vector<Case> cases = {
      {"unquoted.fits", "TTYPE1  = " + std::string(70, 'x'), "TTYPE1 in header 2 is not a quoted"},
      {"binary.fits", "TTYPE1  = 'TSUBINT\x01'", "card 9 of header 2 holds byte 0x01"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = write(c.name, primary + subint(c.ttype));
    try {
      open_filterbank(path);
      ADD_FAILURE() << "no error";
    } catch (const warpbeam::Error& e) {
      EXPECT_EQ(e.category(), warpbeam::ErrorCategory::format) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
    }
    const auto info = wbtest::run_cli("info '" + path + "'");
    EXPECT_EQ(info.exit_code, 1) << info.err;
    EXPECT_NE(info.err.find(c.reason), std::string::npos) << info.err;
  }
  // The same table with a quoted name passes the check and reaches the reader's own checks (no
  // NBITS: not a search-mode SUBINT table).
  const std::string ok = write("quoted.fits", primary + subint("TTYPE1  = 'TSUBINT '"));
  try {
    open_filterbank(ok);
    ADD_FAILURE() << "no error";
  } catch (const warpbeam::Error& e) {
    EXPECT_NE(std::string(e.what()).find("NBITS"), std::string::npos) << e.what();
  }
}

}  // namespace
