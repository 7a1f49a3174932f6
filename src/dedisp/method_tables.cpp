// The TrialReport of every plan, the tables of subband and fdmt (subband_plan.cpp,
// fdmt_plan.cpp) and the operation counts of one execute() (for rooflines and
// select_algorithm()).
#include <algorithm>
#include <cmath>

#include "dedisp/method_tables.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

bool kept(const DedispersionConfig& c, int ch) {
  return c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)] != 0;
}

double f_hi(const DedispersionConfig& c) {
  return std::max(c.fch1_mhz, c.fch1_mhz + (c.nchans - 1) * c.foff_mhz);
}

double f_lo(const DedispersionConfig& c) {
  return std::min(c.fch1_mhz, c.fch1_mhz + (c.nchans - 1) * c.foff_mhz);
}

}  // namespace

double delay_variance(const DedispersionConfig& c, const std::int32_t* delays, double dm) {
  const double fh = f_hi(c);
  double s = 0, s2 = 0;
  int n = 0;
  for (int ch = 0; ch < c.nchans; ++ch) {
    if (!kept(c, ch)) continue;
    const double exact = dispersion_delay_s(dm, c.fch1_mhz + ch * c.foff_mhz, fh) / c.tsamp_s;
    const double e = delays[ch] - exact;
    s += e;
    s2 += e * e;
    ++n;
  }
  if (n == 0) return 0;
  const double m = s / n;
  return std::max(0.0, s2 / n - m * m);
}

double snr_model(const DedispersionConfig& c, double dm, double v, double v_bf) {
  // The pulse's variance in samples^2: its Gaussian FWHM, the sample's box and the channel's
  // dispersion smearing at the band centre as a box (8.3 us MHz^-1 GHz^3 per unit DM).
  const double fc_ghz = (c.fch1_mhz + 0.5 * (c.nchans - 1) * c.foff_mhz) * 1e-3;
  const double sigma_w = c.pulse_width_us * 1e-6 / 2.3548 / c.tsamp_s;
  const double tchan = 8.3e-6 * std::abs(c.foff_mhz) * dm / std::pow(fc_ghz, 3) / c.tsamp_s;
  const double s2 = sigma_w * sigma_w + 1.0 / 12 + tchan * tchan / 12;
  // A matched boxcar's S/N goes as the pulse's width^(-1/2), the width as sqrt(variance).
  return std::pow((s2 + v_bf) / (s2 + v), 0.25);
}

std::array<double, 3> judged_dms(const std::vector<float>& dms, std::size_t i) {
  const double d = dms[i];
  const double lo =
      i > 0 ? 0.5 * (d + dms[i - 1]) : (i + 1 < dms.size() ? d - 0.5 * (dms[i + 1] - d) : d);
  const double hi =
      i + 1 < dms.size() ? 0.5 * (d + dms[i + 1]) : (i > 0 ? d + 0.5 * (d - dms[i - 1]) : d);
  return {d, std::max(0.0, lo), hi};
}

double trial_snr_fraction(const DedispersionConfig& c, std::size_t i, const std::int32_t* delays,
                          const std::int32_t* bf, const double* bf_var) {
  const auto at = judged_dms(c.dms, i);
  double worst = 1;
  for (std::size_t k = 0; k < at.size(); ++k) {
    const double v = delay_variance(c, delays, at[k]);
    const double v_bf = bf_var ? bf_var[k] : delay_variance(c, bf, at[k]);
    worst = std::min(worst, snr_model(c, at[k], v, v_bf));
  }
  return worst;
}

void fill_report_errors(const DedispersionConfig& c, const std::vector<std::int32_t>& delays,
                        TrialReport& r) {
  const std::size_t ndm = c.dms.size();
  r.max_delay_error.assign(ndm, 0);
  r.smearing_s.assign(ndm, 0.0f);
  r.snr_fraction.assign(ndm, 1.0f);
  for (std::size_t i = 0; i < ndm; ++i) {
    const std::int32_t* eff = r.delays.data() + i * c.nchans;
    const std::int32_t* bf = delays.data() + i * c.nchans;
    std::int32_t err = 0;
    for (int ch = 0; ch < c.nchans; ++ch)
      if (kept(c, ch)) err = std::max(err, std::abs(eff[ch] - bf[ch]));
    r.max_delay_error[i] = err;
    const double v = delay_variance(c, eff, r.dms[i]);
    const double v_bf = delay_variance(c, bf, c.dms[i]);
    r.smearing_s[i] = static_cast<float>(c.tsamp_s * std::sqrt(12 * std::max(0.0, v - v_bf)));
    r.snr_fraction[i] = static_cast<float>(trial_snr_fraction(c, i, eff, bf));
  }
}

std::int64_t fdmt_block(const DedispersionConfig& c, Backend backend, std::int64_t nsamples_out) {
  const std::int64_t b =
      c.fdmt.block > 0 ? c.fdmt.block : (backend == Backend::cuda ? 65536 : 8192);
  return std::max<std::int64_t>(1, std::min(b, nsamples_out));
}

MethodTables make_method_tables(const DedispersionConfig& c, Backend backend,
                                const std::vector<std::int32_t>& delays,
                                std::int64_t nsamples_out) {
  MethodTables m;
  TrialReport& r = m.report;
  if (c.algorithm == Algorithm::subband) {
    m.subband = plan_subbands(c, delays);
    const auto& t = *m.subband;
    r.dms = c.dms;
    r.delays = t.effective_delays(delays);
    r.subbands = t.subbands;
    r.subband_phases = t.phases;
    for (int j = 0; j < t.ncoarse(); ++j)
      r.coarse_phases.push_back(t.phase_begin[j + 1] - t.phase_begin[j]);
    r.coarse_dms = t.coarse_dms;
    r.coarse_trial = t.coarse_of;
    r.subband_smearing_s = t.smearing_s;
  } else if (c.algorithm == Algorithm::fdmt) {
    m.fdmt = plan_fdmt(c, delays, fdmt_block(c, backend, nsamples_out));
    const auto& t = *m.fdmt;
    r.delays = t.curves;
    r.fdmt_delay = t.out_delay;
    r.fdmt_max_delay =
        t.out_delay.empty() ? 0 : *std::max_element(t.out_delay.begin(), t.out_delay.end());
    // The DM of an integer delay across the band (the channel centres' extremes).
    const double per_dm = dispersion_delay_s(1.0, f_lo(c), f_hi(c)) / c.tsamp_s;
    r.dms.resize(c.dms.size());
    for (std::size_t i = 0; i < c.dms.size(); ++i)
      r.dms[i] = per_dm > 0 ? static_cast<float>(t.out_delay[i] / per_dm) : c.dms[i];
  } else {
    // Brute force is its own reference: no delay error, no added smearing and an S/N fraction of
    // exactly 1 (snr_model(v, v) = 1), which fill_report_errors would find after ~10^7 delay
    // evaluations for D1: ~0.1 s per plan, and the search makes its plans inside the gulp loop.
    r.dms = c.dms;
    r.delays = delays;
    r.max_delay_error.assign(c.dms.size(), 0);
    r.smearing_s.assign(c.dms.size(), 0.0f);
    r.snr_fraction.assign(c.dms.size(), 1.0f);
    return m;
  }
  fill_report_errors(c, delays, r);
  return m;
}

OperationCount count_operations(const DedispersionConfig& c, const MethodTables& m,
                                std::int64_t nout) {
  int nkept = 0;
  for (int ch = 0; ch < c.nchans; ++ch)
    nkept += kept(c, ch) ? 1 : 0;
  const double ndm = static_cast<double>(c.dms.size());
  const double out = static_cast<double>(nout);
  OperationCount k;
  // Input read once (packed), output written once (float32).
  k.bytes = static_cast<double>(c.nsamples_in) *
                static_cast<double>(packed_bytes(c.nbits, static_cast<std::size_t>(c.nchans))) +
            4.0 * ndm * out;
  if (m.subband) {
    const auto& t = *m.subband;
    const auto ns = static_cast<std::size_t>(t.nsub());
    for (std::size_t q = 0; q < static_cast<std::size_t>(t.nrows1()); ++q)
      for (std::size_t s = 0; s < ns; ++s) {
        if (!t.used[q * ns + s]) continue;
        const double len = out + (t.max_shift[q * ns + s] - t.min_shift[q * ns + s]);
        k.additions += static_cast<double>(t.channels[s].size()) * len;
        k.bytes += 8.0 * len;  // the stage-1 series, written once and read once
      }
    k.additions += ndm * static_cast<double>(ns) * out;
  } else if (m.fdmt) {
    const auto& t = *m.fdmt;
    const std::int64_t B = t.block;
    const std::int64_t nblocks = (nout + B - 1) / B;
    const double last = static_cast<double>(nout - (nblocks - 1) * B);
    for (std::size_t h = 0; h + 1 < t.levels.size(); ++h) {
      const FdmtLevel& L = t.levels[h];
      for (std::int64_t r = 0; r < L.nrows(); ++r) {
        // Every block computes block + ext samples of the row (the last block fewer).
        const double len =
            static_cast<double>(nblocks - 1) * static_cast<double>(B + L.ext[r]) + last + L.ext[r];
        if (L.b[r] >= 0) k.additions += len;
        k.bytes += 8.0 * len;  // written once, read once (its second reader hits a cache)
      }
    }
    k.additions += ndm * out;  // the last level, straight into the output
  } else {
    k.additions = ndm * nkept * out;
  }
  return k;
}

}  // namespace warpbeam::dedisp::detail
