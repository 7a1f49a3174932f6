// SIGPROC filterbank I/O: every real file in ../shared/data/filterbank against the values that
// ../shared/data/README.md gives, the Parkes 1/2/4/8-bit files against each other, the writer
// by round trip, and every bad input the issue lists.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "test_util.hpp"
#include "warpbeam/io/filterbank_source.hpp"
#include "warpbeam/io/sigproc.hpp"
#include "warpbeam/unpack.hpp"

using namespace warpbeam;
using io::FilterbankHeader;
using io::FilterbankReader;

namespace {
struct Expected {
  const char* file;
  int nchans;
  double fch1, foff, tsamp;
  int nbits;
  std::int64_t nsamples;
  std::int64_t header_bytes;  // 0 = not stated in the README
};

const Expected kFiles[] = {
    {"burst_28.fil", 336, 1465, -1, 1.26646875e-3, 8, 5120, 327},
    {"small.fil", 336, 1465, -1, 1.26646875e-3, 8, 10, 389},
    {"parkes_1bit.fil", 832, 4030, -4, 512e-6, 1, 4096, 0},
    {"parkes_2bit.fil", 832, 4030, -4, 512e-6, 2, 4096, 0},
    {"parkes_4bit.fil", 832, 4030, -4, 512e-6, 4, 4096, 0},
    {"parkes_8bit_1.fil", 832, 4030, -4, 512e-6, 8, 4096, 0},
    {"tutorial_2bit.fil", 64, 1510, -1.09, 320e-6, 2, 187520, 0},
};

double pearson(const std::vector<float>& a, const std::vector<float>& b) {
  const double n = static_cast<double>(a.size());
  double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

FilterbankHeader small_header(int nbits, double foff) {
  FilterbankHeader h;
  h.source_name = "test";
  h.nchans = 13;  // odd, so sub-byte rows do not fill whole bytes
  h.nbits = nbits;
  h.fch1 = foff < 0 ? 1500 : 1400;
  h.foff = foff;
  h.tsamp = 64e-6;
  h.tstart = 60000.5;
  h.telescope_id = 7;
  return h;
}

// Writes raw header tokens, for malformed-file tests.
struct RawHeader {
  std::string bytes;
  RawHeader& str(const std::string& s) {
    const auto n = static_cast<std::int32_t>(s.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4).append(s);
    return *this;
  }
  RawHeader& i32(const std::string& k, std::int32_t v) {
    str(k);
    bytes.append(reinterpret_cast<const char*>(&v), 4);
    return *this;
  }
  RawHeader& f64(const std::string& k, double v) {
    str(k);
    bytes.append(reinterpret_cast<const char*>(&v), 8);
    return *this;
  }
  RawHeader& standard(int nchans, int nbits) {
    str("HEADER_START").i32("nchans", nchans).i32("nbits", nbits).i32("nifs", 1);
    return f64("fch1", 1500).f64("foff", -1).f64("tsamp", 64e-6).f64("tstart", 60000);
  }
  void save(const std::string& path, std::size_t data_bytes = 0) const {
    std::ofstream f(path, std::ios::binary);
    f << bytes << std::string(data_bytes, '\x11');
  }
};

void expect_error(const std::string& path, ErrorCategory cat, const std::string& word) {
  try {
    FilterbankReader r(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), cat) << e.what();
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(SigprocData, HeadersMatchReadme) {
  for (const auto& x : kFiles) {
    const std::string rel = std::string("filterbank/") + x.file;
    WB_REQUIRE_DATA(rel);
    FilterbankReader r(wbtest::data_file(rel));
    const auto& h = r.header();
    SCOPED_TRACE(x.file);
    EXPECT_EQ(h.nchans, x.nchans);
    EXPECT_DOUBLE_EQ(h.fch1, x.fch1);
    EXPECT_NEAR(h.foff, x.foff, 1e-9);
    EXPECT_NEAR(h.tsamp, x.tsamp, 1e-12);
    EXPECT_EQ(h.nbits, x.nbits);
    EXPECT_EQ(h.nsamples, x.nsamples);
    if (x.header_bytes) EXPECT_EQ(h.header_bytes, x.header_bytes);
    // The whole data section reads, and it is not constant.
    auto d = r.read_all();
    ASSERT_EQ(d.size(), static_cast<std::size_t>(x.nsamples) * x.nchans);
    auto [lo, hi] = std::minmax_element(d.begin(), d.end());
    EXPECT_LT(*lo, *hi);
    EXPECT_GE(*lo, 0.0f);
    EXPECT_LE(*hi, std::ldexp(1.0f, x.nbits) - 1);
  }
}

TEST(SigprocData, Burst28Keywords) {
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  auto h = io::read_filterbank_header(wbtest::data_file("filterbank/burst_28.fil"));
  EXPECT_EQ(h.telescope_id, 7);
  EXPECT_EQ(h.source_name, "src1");
}

TEST(SigprocData, SmallFileDataTypeZeroIsRead) {
  WB_REQUIRE_DATA("filterbank/small.fil");
  FilterbankReader r(wbtest::data_file("filterbank/small.fil"));
  EXPECT_EQ(r.header().data_type, 0);
  // Its 10 samples are the first 10 of burst_28.fil (same setup): compare them.
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  auto a = r.read_all();
  FilterbankReader b(wbtest::data_file("filterbank/burst_28.fil"));
  std::vector<float> bb(a.size());
  b.read(10, bb.data());
  EXPECT_GT(pearson(a, bb), 0.0);  // same telescope setup; values are real samples
}

TEST(SigprocData, ParkesBitDepthsCorrelate) {
  const char* names[] = {"parkes_1bit.fil", "parkes_2bit.fil", "parkes_4bit.fil"};
  const double need[] = {0.75, 0.90, 0.95};
  WB_REQUIRE_DATA("filterbank/parkes_8bit_1.fil");
  auto ref = FilterbankReader(wbtest::data_file("filterbank/parkes_8bit_1.fil")).read_all();
  for (int i = 0; i < 3; ++i) {
    WB_REQUIRE_DATA(std::string("filterbank/") + names[i]);
    auto d = FilterbankReader(wbtest::data_file(std::string("filterbank/") + names[i])).read_all();
    ASSERT_EQ(d.size(), ref.size());
    const double r = pearson(d, ref);
    EXPECT_GE(r, need[i]) << names[i];
    RecordProperty(names[i], std::to_string(r));
  }
}

TEST(SigprocData, GulpedReadEqualsWholeRead) {
  WB_REQUIRE_DATA("filterbank/tutorial_2bit.fil");
  FilterbankReader r(wbtest::data_file("filterbank/tutorial_2bit.fil"));
  auto all = r.read_all();
  r.seek(0);
  std::vector<float> g(all.size());
  std::int64_t pos = 0, got;
  while ((got = r.read(1237, g.data() + pos * 64)) > 0)
    pos += got;
  EXPECT_EQ(pos, r.header().nsamples);
  EXPECT_EQ(all, g);
}

TEST(SigprocData, OpenFilterbankReadsWhatTheSigprocReaderReads) {
  WB_REQUIRE_DATA("filterbank/parkes_2bit.fil");
  const std::string path = wbtest::data_file("filterbank/parkes_2bit.fil");
  FilterbankReader r(path);
  const auto src = warpbeam::io::open_filterbank(path);
  EXPECT_EQ(src->format(), "SIGPROC filterbank");
  EXPECT_EQ(src->header().nsamples, r.header().nsamples);
  EXPECT_EQ(src->header().nchans, r.header().nchans);
  EXPECT_EQ(src->header().nbits, 2);
  const std::int64_t n = 1000, row = static_cast<std::int64_t>(r.header().bytes_per_sample());
  std::vector<std::uint8_t> a(static_cast<std::size_t>(n * row)), b(a.size(), 0xAB);
  r.seek(517);
  src->seek(517);
  ASSERT_EQ(r.read_raw(n, a.data()), n);
  ASSERT_EQ(src->read_raw(n, b.data()), n);
  EXPECT_EQ(src->position(), 517 + n);
  EXPECT_EQ(a, b);
  EXPECT_THROW(src->seek(src->header().nsamples + 1), warpbeam::Error);
  EXPECT_THROW(warpbeam::io::open_filterbank(path + ".missing"), warpbeam::Error);
}

TEST(Sigproc, RoundTripEveryNbitsBothFoffSigns) {
  wbtest::TempDir t;
  for (int nbits : {1, 2, 4, 8, 16, 32}) {
    for (double foff : {-0.5, 0.5}) {
      auto h = small_header(nbits, foff);
      const std::int64_t n = 37;
      std::vector<float> data(n * h.nchans);
      std::mt19937 rng(nbits);
      const int maxv = nbits == 32 ? 1000 : (1 << std::min(nbits, 16)) - 1;
      for (auto& v : data)
        v = static_cast<float>(rng() % (maxv + 1));
      if (nbits == 32) data[5] = 0.25f;
      const std::string path = t.file("rt.fil");
      {
        io::FilterbankWriter w(path, h);
        w.write(data.data(), 20);
        w.write(data.data() + 20 * h.nchans, n - 20);
        w.commit();
      }
      FilterbankReader r(path);
      EXPECT_EQ(r.header().nsamples, n);
      EXPECT_EQ(r.header().nbits, nbits);
      EXPECT_DOUBLE_EQ(r.header().foff, foff);
      EXPECT_DOUBLE_EQ(r.header().tstart, 60000.5);
      EXPECT_EQ(r.header().source_name, "test");
      EXPECT_EQ(r.read_all(), data) << "nbits " << nbits << " foff " << foff;
    }
  }
}

TEST(Sigproc, WriterClipsAndRounds) {
  std::vector<float> in = {-3.f, 0.4f, 0.6f, 2.5f, 3.7f, 99.f};
  std::vector<std::uint8_t> packed(2);
  io::pack_samples(in.data(), 2, in.size(), packed.data());
  std::vector<float> out(in.size());
  unpack_samples(packed.data(), 2, in.size(), out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 0, 1, 2, 3, 3}));  // nearbyint: 2.5 -> 2 (to even)
}

TEST(Sigproc, UnfinishedWriterLeavesNoFile) {
  wbtest::TempDir t;
  {
    io::FilterbankWriter w(t.file("x.fil"), small_header(8, -1));
    std::vector<float> d(13, 1.f);
    w.write(d.data(), 1);
  }  // no commit: e.g. an exception unwound past it
  EXPECT_TRUE(t.files().empty());
}

TEST(Sigproc, BadInputs) {
  wbtest::TempDir t;
  expect_error(t.file("missing.fil"), ErrorCategory::io, "missing.fil");
  {
    std::ofstream(t.file("magic.fil")) << "this is not a filterbank at all";
    expect_error(t.file("magic.fil"), ErrorCategory::format, "not a SIGPROC");
  }
  {
    RawHeader h;
    h.str("HEADER_START").i32("nchans", 4);
    std::string b = h.bytes.substr(0, h.bytes.size() - 2);  // cut inside a value
    std::ofstream(t.file("trunc.fil"), std::ios::binary) << b;
    expect_error(t.file("trunc.fil"), ErrorCategory::format, "truncated");
  }
  {
    RawHeader h;
    h.str("HEADER_START").i32("nchans", 4);  // never ends
    h.save(t.file("noend.fil"));
    expect_error(t.file("noend.fil"), ErrorCategory::format, "truncated");
  }
  {
    RawHeader h;
    h.standard(16, 3).str("HEADER_END").save(t.file("nbits3.fil"), 100);
    expect_error(t.file("nbits3.fil"), ErrorCategory::format, "nbits");
  }
  {
    RawHeader h;
    h.standard(0, 8).str("HEADER_END").save(t.file("nchans0.fil"), 100);
    expect_error(t.file("nchans0.fil"), ErrorCategory::format, "nchans");
  }
  {
    RawHeader h;
    h.standard(2000000000, 8).str("HEADER_END").save(t.file("huge.fil"), 100);
    expect_error(t.file("huge.fil"), ErrorCategory::format, "nchans");
  }
  {
    RawHeader h;
    h.str("HEADER_START").i32("nchans", 16).i32("nbits", 8).f64("fch1", 1500).f64("foff", -1);
    h.f64("tsamp", -1).str("HEADER_END").save(t.file("tsamp.fil"), 100);
    expect_error(t.file("tsamp.fil"), ErrorCategory::format, "tsamp");
  }
  {
    RawHeader h;
    h.standard(16, 8).f64("bogus_key", 1).str("HEADER_END").save(t.file("key.fil"), 100);
    expect_error(t.file("key.fil"), ErrorCategory::format, "bogus_key");
  }
  {
    RawHeader h;
    h.str("HEADER_START");
    const std::int32_t absurd = 1 << 30;
    h.bytes.append(reinterpret_cast<const char*>(&absurd), 4);
    h.save(t.file("absurd.fil"));
    expect_error(t.file("absurd.fil"), ErrorCategory::format, "corrupt");
  }
  expect_error(t.path.string(), ErrorCategory::io, "directory");
}

namespace {
// A 13-channel 16-bit file of `n` samples whose every byte is random: 26 bytes a row, so the
// pieces of a parallel read start inside rows.
std::vector<std::uint8_t> random_file(const std::string& path, std::int64_t n) {
  const auto h = small_header(16, -0.5);
  std::vector<std::uint8_t> rows(static_cast<std::size_t>(n) * h.bytes_per_sample());
  std::mt19937 rng(1234);
  for (auto& b : rows)
    b = static_cast<std::uint8_t>(rng());
  io::FilterbankWriter w(path, h);
  w.write_raw(rows.data(), rows.size());
  w.commit();
  return rows;
}
}  // namespace

// A large read_raw() split among threads (positional reads) returns the bytes one fread does,
// from any sample, and leaves the reader where one fread would (the next read goes on from
// there, by either path).
TEST(Sigproc, ReadThreadsReadTheSameBytes) {
  wbtest::TempDir t;
  const std::int64_t n = 200003;  // 5.2 MB: pieces of >= 1 MiB for up to 4 threads
  const auto rows = random_file(t.file("r.fil"), n);
  const std::size_t row = 26;
  for (int threads : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    FilterbankReader r(t.file("r.fil"));
    r.set_read_threads(threads);
    EXPECT_EQ(r.read_threads(), threads);
    ASSERT_EQ(r.header().nsamples, n);
    const std::int64_t first = 12345, count = 150001;
    r.seek(first);
    std::vector<std::uint8_t> got(static_cast<std::size_t>(count) * row + 1, 0xA5);
    ASSERT_EQ(r.read_raw(count, got.data()), count);
    EXPECT_EQ(got.back(), 0xA5);  // nothing written past the rows asked for
    got.pop_back();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), rows.begin() + first * row));
    EXPECT_EQ(r.position(), first + count);
    // The next small read (one fread) and the last large one (clipped at the end) go on from
    // there.
    std::vector<std::uint8_t> next(10 * row);
    ASSERT_EQ(r.read_raw(10, next.data()), 10);
    EXPECT_TRUE(std::equal(next.begin(), next.end(), rows.begin() + (first + count) * row));
    std::vector<std::uint8_t> rest(static_cast<std::size_t>(n) * row);
    const std::int64_t left = n - first - count - 10;
    ASSERT_EQ(r.read_raw(n, rest.data()), left);
    EXPECT_TRUE(std::equal(rest.begin(), rest.begin() + left * row,
                           rows.begin() + (first + count + 10) * row));
    EXPECT_EQ(r.read_raw(5, rest.data()), 0);  // at the end
  }
  FilterbankReader r(t.file("r.fil"));
  r.set_read_threads(0);
  EXPECT_EQ(r.read_threads(), 1);  // clamped to 1-64
  r.set_read_threads(1000);
  EXPECT_EQ(r.read_threads(), 64);
  // The file through open_filterbank() takes the hint too.
  const auto src = io::open_filterbank(t.file("r.fil"));
  src->set_read_threads(3);
  std::vector<std::uint8_t> all(rows.size());
  ASSERT_EQ(src->read_raw(n, all.data()), n);
  EXPECT_EQ(all, rows);
}

// A file cut short after it was opened: the split read says where, as one fread does.
TEST(Sigproc, ReadThreadsReportAShortFile) {
  wbtest::TempDir t;
  const std::int64_t n = 200003;
  random_file(t.file("cut.fil"), n);
  for (int threads : {1, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const std::string path = t.file("cut" + std::to_string(threads) + ".fil");
    std::filesystem::copy_file(t.file("cut.fil"), path);
    FilterbankReader r(path);
    r.set_read_threads(threads);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100000 * 26);
    std::vector<std::uint8_t> got(static_cast<std::size_t>(n) * 26);
    try {
      r.read_raw(n, got.data());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::io) << e.what();
      EXPECT_NE(std::string(e.what()).find("unexpected end of file"), std::string::npos)
          << e.what();
    }
  }
}

namespace {
std::vector<std::string> g_warnings;
void capture(const std::string& m) {
  g_warnings.push_back(m);
}
}  // namespace

TEST(Sigproc, PartialRowIsDroppedWithWarning) {
  wbtest::TempDir t;
  RawHeader h;
  h.standard(16, 8).str("HEADER_END").save(t.file("partial.fil"), 16 * 5 + 7);
  g_warnings.clear();
  auto old = set_warning_handler(&capture);
  FilterbankReader r(t.file("partial.fil"));
  set_warning_handler(old);
  EXPECT_EQ(r.header().nsamples, 5);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("partial"), std::string::npos);
  EXPECT_EQ(r.read_all().size(), 5u * 16);
}

TEST(SigprocCli, InfoAndExitCodes) {
  wbtest::TempDir t;
  auto missing = wbtest::run_cli("info " + t.file("nope.fil"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("warpbeam: error:"), std::string::npos);
  EXPECT_NE(missing.err.find("nope.fil"), std::string::npos);
  auto bad_opt = wbtest::run_cli("info x.fil --dm -5");
  EXPECT_EQ(bad_opt.exit_code, 2);
  auto unknown = wbtest::run_cli("info x.fil --frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  WB_REQUIRE_DATA("filterbank/burst_28.fil");
  auto ok = wbtest::run_cli("info " + wbtest::data_file("filterbank/burst_28.fil"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("nchans          336"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("nsamples        5120"), std::string::npos) << ok.out;
}
