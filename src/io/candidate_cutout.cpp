// The candidate cutout (include/warpbeam/io/candidate_cutout.hpp gives the recipe and its
// sources): the window read through a FilterbankSource, dedispersed with the dedispersion
// plan, decimated, cropped, resized and normalised as your_candmaker does.
#include "warpbeam/io/candidate_cutout.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/provenance.hpp"

namespace warpbeam::io {

namespace {

// np.median of `v` (the mean of the middle two for an even count); reorders v.
float median_of(std::vector<float>& v) {
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const float hi = v[h];
  if (v.size() % 2 == 1) return hi;
  const float lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h));
  return static_cast<float>((static_cast<double>(lo) + hi) / 2);
}

// The window [first, first + n) of `source` as float32 [n][nchans]; samples outside the file
// take their channel's median over the samples inside (your's padding).
std::vector<float> read_window(FilterbankSource& source, std::int64_t first, std::int64_t n) {
  const auto& h = source.header();
  const int nchans = h.nchans;
  const std::int64_t a = std::clamp<std::int64_t>(first, 0, h.nsamples);
  const std::int64_t b = std::clamp<std::int64_t>(first + n, 0, h.nsamples);
  if (b <= a)
    fail(ErrorCategory::invalid_argument,
         "the candidate's window (samples {} to {}) lies outside '{}' ({} samples)", first,
         first + n, source.path(), h.nsamples);
  std::vector<float> out(static_cast<std::size_t>(n) * nchans);
  source.seek(a);
  const std::int64_t got = source.read(b - a, out.data() + (a - first) * nchans);
  if (got != b - a)
    fail(ErrorCategory::io, "'{}': read {} of {} samples", source.path(), got, b - a);
  if (a == first && b == first + n) return out;
  std::vector<float> column(static_cast<std::size_t>(b - a));
  for (int c = 0; c < nchans; ++c) {
    for (std::int64_t t = a; t < b; ++t)
      column[t - a] = out[(t - first) * nchans + c];
    const float m = median_of(column);
    for (std::int64_t t = first; t < first + n; ++t)
      if (t < a || t >= b) out[(t - first) * nchans + c] = m;
  }
  return out;
}

// your's _decimate(pad=True, mode="median") of `rows` vectors of length n laid out with
// element (r, t) at data[r * rs + t * ts]: the end of each vector padded with its median to a
// multiple of f, then means of f. Returns [rows][ceil(n / f)].
std::vector<float> decimate(const std::vector<float>& data, std::int64_t rows, std::int64_t n,
                            std::int64_t rs, std::int64_t ts, int f) {
  const std::int64_t m = (n + f - 1) / f;
  std::vector<float> out(static_cast<std::size_t>(rows * m));
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t t = 0; t < n; ++t)
      v[t] = data[r * rs + t * ts];
    float pad = 0;
    if (n % f != 0) {
      std::vector<float> copy = v;
      pad = median_of(copy);
    }
    for (std::int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int k = 0; k < f; ++k) {
        const std::int64_t t = j * f + k;
        s += t < n ? v[t] : pad;
      }
      out[r * m + j] = static_cast<float>(s / f);
    }
  }
  return out;
}

// The central `length` of `n` (your's crop(data, n // 2 - length // 2, length)).
std::int64_t crop_start(std::int64_t n, int length) {
  if (n < length)
    fail(ErrorCategory::invalid_argument, "the cutout holds {} samples, fewer than {}", n, length);
  return n == length ? 0 : n / 2 - length / 2;
}

// skimage.transform.resize of each row [rows][n_in] to [rows][n_out] along the row, with
// anti_aliasing=True and mode="constant" (cval 0): a Gaussian of sigma max(0, (s - 1) / 2),
// s = n_in / n_out, truncated at int(4 sigma + 0.5) samples, zero outside; then linear
// interpolation at x = (o + 0.5) s - 0.5, zero outside [0, n_in).
std::vector<float> resize_rows(const std::vector<float>& in, std::int64_t rows, int n_in,
                               int n_out) {
  const double s = static_cast<double>(n_in) / n_out;
  const double sigma = std::max(0.0, (s - 1) / 2);
  std::vector<double> kernel{1.0};
  if (sigma > 0) {
    const int radius = static_cast<int>(4 * sigma + 0.5);
    kernel.assign(2 * radius + 1, 0);
    double sum = 0;
    for (int i = -radius; i <= radius; ++i)
      sum += kernel[i + radius] = std::exp(-0.5 * i * i / (sigma * sigma));
    for (double& k : kernel)
      k /= sum;
  }
  const int radius = static_cast<int>(kernel.size() / 2);
  std::vector<float> out(static_cast<std::size_t>(rows) * n_out);
  std::vector<double> smooth(static_cast<std::size_t>(n_in));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = in.data() + r * n_in;
    for (int i = 0; i < n_in; ++i) {
      double v = 0;
      for (int k = -radius; k <= radius; ++k)
        if (i + k >= 0 && i + k < n_in) v += kernel[k + radius] * x[i + k];
      smooth[i] = v;
    }
    auto at = [&](std::int64_t i) { return i >= 0 && i < n_in ? smooth[i] : 0.0; };
    for (int o = 0; o < n_out; ++o) {
      const double pos = (o + 0.5) * s - 0.5;
      const auto i0 = static_cast<std::int64_t>(std::floor(pos));
      const double w = pos - static_cast<double>(i0);
      out[r * n_out + o] = static_cast<float>((1 - w) * at(i0) + w * at(i0 + 1));
    }
  }
  return out;
}

// your's normalise(): minus the median, over the (population) standard deviation; an array
// without spread is only centred.
void normalise(std::vector<float>& v) {
  std::vector<float> copy = v;
  const double med = median_of(copy);
  double mean = 0;
  for (float x : v)
    mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (float x : v)
    var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / static_cast<double>(v.size()));
  for (float& x : v)
    x = static_cast<float>(sd > 0 ? (x - med) / sd : x - med);
}

}  // namespace

void CutoutConfig::validate() const {
  if (!(dm >= 0) || !std::isfinite(dm))
    fail(ErrorCategory::invalid_argument, "cutout dm = {} must be >= 0", dm);
  if (!std::isfinite(tcand_s))
    fail(ErrorCategory::invalid_argument, "cutout tcand = {} s is not finite", tcand_s);
  require_range("cutout width", width, 1, 1 << 20);
  require_range("cutout time_size", time_size, 2, 8192);
  require_range("cutout frequency_size", frequency_size, 2, 8192);
  require_range("cutout dm_size", dm_size, 2, 8192);
  require_range("cutout min_samp", min_samp, 2, 1 << 20);
}

std::string candidate_id(double tstart_mjd, double tcand_s, double dm, double snr) {
  return fmt::format("cand_tstart_{:.12f}_tcand_{:.7f}_dm_{:.5f}_snr_{:.5f}", tstart_mjd, tcand_s,
                     dm, snr);
}

CandidateCutout make_candidate_cutout(FilterbankSource& source, const CutoutConfig& cfg) {
  cfg.validate();
  const FilterbankHeader& h = source.header();
  const double tsamp = h.tsamp;
  const int nchans = h.nchans;
  if (!cfg.kill_mask.empty() && static_cast<int>(cfg.kill_mask.size()) != nchans)
    fail(ErrorCategory::invalid_argument, "cutout kill_mask has {} channels, the file {}",
         cfg.kill_mask.size(), nchans);

  // The window, as your's Candidate.get_chunk(for_preprocessing=True).
  const double delay = dedisp::dispersion_delay_s(cfg.dm, h.fmin_mhz(), h.fmax_mhz());
  const double t0 = cfg.tcand_s - delay - cfg.width * tsamp;
  const double t1 = cfg.tcand_s + delay + cfg.width * tsamp;
  const auto nstart = static_cast<std::int64_t>(std::trunc(t0 / tsamp));
  const auto nsamp = static_cast<std::int64_t>(std::trunc((t1 - t0) / tsamp));
  std::int64_t nsamp_read = nsamp, nstart_read = nstart;
  const std::int64_t half = cfg.width / 2;
  if (cfg.width > 2 && nsamp / half < cfg.min_samp) {
    nsamp_read = std::int64_t{cfg.min_samp} * cfg.width / 2;
    nstart_read = nstart - (nsamp_read - nsamp) / 2;
  } else if (nsamp < cfg.min_samp) {
    nsamp_read = cfg.min_samp;
    nstart_read = nstart - (nsamp_read - nsamp) / 2;
  }

  // The DMs of the DM-time array and the delays (to the highest frequency) of both arrays.
  const double range = std::max(cfg.dm, 1.0);
  const double dm_lo = std::max(0.0, cfg.dm - range), dm_hi = cfg.dm + range;
  dedisp::DedispersionConfig dc;
  dc.nchans = nchans;
  dc.fch1_mhz = h.fch1;
  dc.foff_mhz = h.foff;
  dc.tsamp_s = tsamp;
  dc.nbits = 32;
  for (int i = 0; i < cfg.dm_size; ++i)
    dc.dms.push_back(static_cast<float>(dm_lo + (dm_hi - dm_lo) * i / (cfg.dm_size - 1)));
  dedisp::DedispersionConfig one = dc;
  one.dms = {static_cast<float>(cfg.dm)};
  const std::vector<std::int32_t> delays = dedisp::delay_table(one);
  const std::vector<std::int32_t> all = dedisp::delay_table(dc);
  const std::int64_t max_delay = std::max<std::int64_t>(
      *std::max_element(all.begin(), all.end()), *std::max_element(delays.begin(), delays.end()));
  const std::int64_t rows = nsamp_read + max_delay;
  if (static_cast<double>(rows) * nchans > 4e9)
    fail(ErrorCategory::invalid_argument,
         "the cutout of DM {} needs {} samples x {} channels: too large", cfg.dm, rows, nchans);

  std::vector<float> x = read_window(source, nstart_read, rows);
  for (int c = 0; c < nchans; ++c)
    if (!cfg.kill_mask.empty() && cfg.kill_mask[c])
      for (std::int64_t t = 0; t < rows; ++t)
        x[t * nchans + c] = 0;  // your applies its kill mask as zeros

  // Dedispersed at the candidate's DM: [nsamp_read][nchans].
  std::vector<float> ft(static_cast<std::size_t>(nsamp_read) * nchans);
  for (std::int64_t t = 0; t < nsamp_read; ++t)
    for (int c = 0; c < nchans; ++c)
      ft[t * nchans + c] = x[(t + delays[c]) * nchans + c];

  // The DM-time array through the dedispersion plan: [dm_size][nsamp_read].
  dc.nsamples_in = rows;
  dedisp::DedispersionPlan plan(dc, Backend::cpu);
  std::vector<float> dmt(static_cast<std::size_t>(cfg.dm_size) * plan.nsamples_out());
  plan.execute(View<const std::uint8_t, 2>(reinterpret_cast<const std::uint8_t*>(x.data()),
                                           {rows, plan.row_bytes()}),
               View<float, 2>(dmt.data(), {cfg.dm_size, plan.nsamples_out()}));
  const std::int64_t dmt_len = plan.nsamples_out();  // >= nsamp_read

  // Decimate, crop, resize, normalise (your_candmaker's cpu_dedisp_dmt and cand2h5).
  const int f = cfg.width == 1 ? 1 : cfg.width / 2;
  std::vector<float> ft_dec = decimate(ft, nchans, nsamp_read, 1, nchans, f);  // [chan][time]
  std::vector<float> dmt_dec = decimate(dmt, cfg.dm_size, nsamp_read, dmt_len, 1, f);
  const std::int64_t n_dec = (nsamp_read + f - 1) / f;
  const std::int64_t c0 = crop_start(n_dec, cfg.time_size);
  // Cropped FT as [time][chan], then resized along the channels.
  std::vector<float> ft_crop(static_cast<std::size_t>(cfg.time_size) * nchans);
  for (int t = 0; t < cfg.time_size; ++t)
    for (int c = 0; c < nchans; ++c)
      ft_crop[static_cast<std::size_t>(t) * nchans + c] = ft_dec[c * n_dec + c0 + t];

  CandidateCutout out;
  out.freq_time = resize_rows(ft_crop, cfg.time_size, nchans, cfg.frequency_size);
  out.dm_time.resize(static_cast<std::size_t>(cfg.dm_size) * cfg.time_size);
  for (int d = 0; d < cfg.dm_size; ++d)
    std::copy_n(dmt_dec.begin() + d * n_dec + c0, cfg.time_size,
                out.dm_time.begin() + static_cast<std::ptrdiff_t>(d) * cfg.time_size);
  normalise(out.freq_time);
  normalise(out.dm_time);

  out.cand_id = candidate_id(h.tstart, cfg.tcand_s, cfg.dm, cfg.snr);
  out.file = source.path();
  out.file_format = source.format().rfind("PSRFITS", 0) == 0 ? "fits" : "fil";
  out.header = h;
  out.tcand_s = cfg.tcand_s;
  out.dm = cfg.dm;
  out.snr = cfg.snr;
  out.width = cfg.width;
  out.label = cfg.label;
  out.time_decimation = f;
  out.dm_min = dm_lo;
  out.dm_max = dm_hi;
  out.nstart_read = nstart_read;
  out.nsamp_read = nsamp_read;
  out.time_size = cfg.time_size;
  out.frequency_size = cfg.frequency_size;
  out.dm_size = cfg.dm_size;
  out.kill_mask = cfg.kill_mask.empty() ? std::vector<std::uint8_t>(nchans, 0) : cfg.kill_mask;
  out.search = cfg.search;
  out.provenance = provenance();
  return out;
}

}  // namespace warpbeam::io
