#include <cmath>

#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp {

std::vector<float> dm_list_dedisp(double dm_min, double dm_max, double pulse_width_us,
                                  double tolerance, int nchans, double tsamp_s, double fch1_mhz,
                                  double foff_mhz) {
  if (!(dm_min >= 0)) fail(ErrorCategory::invalid_argument, "dm_min = {} must be >= 0", dm_min);
  if (!(dm_max >= dm_min))
    fail(ErrorCategory::invalid_argument, "dm_max = {} must be >= dm_min = {}", dm_max, dm_min);
  if (!(tolerance > 1))
    fail(ErrorCategory::invalid_argument, "DM tolerance = {} must be > 1", tolerance);
  if (!(pulse_width_us > 0))
    fail(ErrorCategory::invalid_argument, "pulse width = {} us must be > 0", pulse_width_us);
  if (nchans <= 0 || !(tsamp_s > 0))
    fail(ErrorCategory::invalid_argument, "nchans and tsamp must be positive");
  // dedisp's generate_dm_list (Barsdell et al. 2012), after Cordes & McLaughlin (2003) and
  // Levin: smearing of a DM error in the band centre, with 8.3 us MHz^-1 GHz^3 per unit DM.
  const double tsamp_us = tsamp_s * 1e6;
  const double f_ghz = (fch1_mhz + (nchans / 2 - 0.5) * foff_mhz) * 1e-3;
  const double tol2 = tolerance * tolerance;
  const double a = 8.3 * foff_mhz / (f_ghz * f_ghz * f_ghz);
  const double a2 = a * a;
  const double b2 = a2 * static_cast<double>(nchans) * nchans / 16.0;
  const double c = (tsamp_us * tsamp_us + pulse_width_us * pulse_width_us) * (tol2 - 1.0);
  std::vector<float> dms{static_cast<float>(dm_min)};
  double prev = dm_min;
  constexpr std::size_t kMaxTrials = 1u << 22;
  while (prev < dm_max) {
    const double prev2 = prev * prev;
    const double k = c + tol2 * a2 * prev2;
    const double dm = (b2 * prev + std::sqrt(-a2 * b2 * prev2 + (a2 + b2) * k)) / (a2 + b2);
    if (!(dm > prev) || dms.size() >= kMaxTrials)
      fail(ErrorCategory::invalid_argument, "the DM list does not advance past {} (over {} trials)",
           prev, dms.size());
    dms.push_back(static_cast<float>(dm));
    prev = dm;
  }
  return dms;
}

std::vector<float> dm_list_linear(double dm_min, double dm_max, double step) {
  if (!(dm_min >= 0)) fail(ErrorCategory::invalid_argument, "dm_min = {} must be >= 0", dm_min);
  if (!(dm_max >= dm_min))
    fail(ErrorCategory::invalid_argument, "dm_max = {} must be >= dm_min = {}", dm_max, dm_min);
  if (!(step > 0)) fail(ErrorCategory::invalid_argument, "DM step = {} must be > 0", step);
  const auto n = static_cast<std::size_t>(std::floor((dm_max - dm_min) / step + 1e-9)) + 1;
  if (n > (1u << 22)) fail(ErrorCategory::invalid_argument, "{} DM trials is too many", n);
  std::vector<float> dms(n);
  for (std::size_t i = 0; i < n; ++i)
    dms[i] = static_cast<float>(dm_min + step * i);
  return dms;
}

}  // namespace warpbeam::dedisp
