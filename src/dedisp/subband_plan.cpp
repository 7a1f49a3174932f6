// The derivation of Algorithm::subband: the sub-bands, the coarse DM grid and the delays of both
// stages (method_tables.hpp; SubbandConfig in the public header states the bound).
//
// The number of sub-bands trades the two stages: stage 1 costs ncoarse x nchans additions per
// sample and stage 2 ndm x nsub. The smearing bound lets a coarse DM serve fine trials within
//   |DM_i - DM_j| <= smearing * W_s(DM_i) / (k (f_lo,s^-2 - f_hi,s^-2))   for every sub-band s,
// a window that grows with the number of sub-bands (narrower sub-bands sweep less), so ncoarse
// falls roughly as 1/nsub and the sum has a minimum near sqrt(nchans ncoarse(1) / ndm) sub-bands.
// The automatic choice evaluates every power of two and keeps the cheapest.
//
// Whole samples. Stage 1 of phase p delays channel c by round(tau_j(c) - tau_j(top_s) + p/P)
// (tau: the exact delay in samples); stage 2 gives each fine trial and sub-band the phase and
// the shift whose delays are nearest (least squares) the trial's exact curve tau_i, clamped so
// that no delay exceeds the trial's largest brute-force delay. The S/N model (snr_model) then
// checks every trial against brute force's own rounding.
#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <string>

#include "dedisp/cpu_common.hpp"
#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp::detail {
namespace {

double freq(const DedispersionConfig& c, int ch) {
  return c.fch1_mhz + ch * c.foff_mhz;
}

// Channel at position p (positions in order of descending frequency).
int chan_at(const DedispersionConfig& c, int p) {
  return c.foff_mhz < 0 ? p : c.nchans - 1 - p;
}

bool kept(const DedispersionConfig& c, int ch) {
  return c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)] != 0;
}

// Exact delay per unit DM of every channel (samples), relative to the band's top.
std::vector<double> delay_per_dm(const DedispersionConfig& c) {
  const double fhi = std::max(freq(c, 0), freq(c, c.nchans - 1));
  std::vector<double> g(static_cast<std::size_t>(c.nchans));
  for (int ch = 0; ch < c.nchans; ++ch)
    g[ch] = dispersion_delay_s(1.0, freq(c, ch), fhi) / c.tsamp_s;
  return g;
}

// The geometry of one way of cutting the band, with what the bound allows per fine trial.
struct Cut {
  int subbands = 0;
  std::vector<std::vector<int>> channels;  // kept channels of each listed sub-band
  std::vector<int> top;                    // [listed] its highest channel (the reference)
  std::vector<double> sweep;               // [listed] k (F_lo - F_hi), s per unit DM
  std::vector<int> sub_of_chan;            // [nchans] listed sub-band or -1
  std::vector<double> allowed;             // [ndm] largest |DM_i - DM_j| the bound allows
};

Cut make_cut(const DedispersionConfig& c, int nsub) {
  Cut cut;
  cut.subbands = nsub;
  cut.sub_of_chan.assign(static_cast<std::size_t>(c.nchans), -1);
  const double width_s = c.pulse_width_us * 1e-6;
  std::vector<double> flo_ghz;
  for (int s = 0; s < nsub; ++s) {
    const int p0 = static_cast<int>(static_cast<std::int64_t>(s) * c.nchans / nsub);
    const int p1 = static_cast<int>(static_cast<std::int64_t>(s + 1) * c.nchans / nsub);
    std::vector<int> chans;
    for (int p = p0; p < p1; ++p)
      if (kept(c, chan_at(c, p))) chans.push_back(chan_at(c, p));
    if (chans.empty()) continue;  // nothing to sum: the sub-band is not listed
    const int id = static_cast<int>(cut.channels.size());
    for (int p = p0; p < p1; ++p)
      cut.sub_of_chan[static_cast<std::size_t>(chan_at(c, p))] = id;
    const double fhi = freq(c, chan_at(c, p0)), flo = freq(c, chan_at(c, p1 - 1));
    cut.channels.push_back(std::move(chans));
    cut.top.push_back(chan_at(c, p0));
    cut.sweep.push_back(kDispersionConstant * (1 / (flo * flo) - 1 / (fhi * fhi)));
    flo_ghz.push_back(flo * 1e-3);
  }
  // The bound per fine trial: the tightest over the listed sub-bands.
  cut.allowed.assign(c.dms.size(), std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i < c.dms.size(); ++i)
    for (std::size_t s = 0; s < cut.sweep.size(); ++s) {
      if (!(cut.sweep[s] > 0)) continue;  // one channel: no smearing within it
      const double tchan = 8.3e-6 * std::abs(c.foff_mhz) * c.dms[i] / std::pow(flo_ghz[s], 3);
      const double w = std::sqrt(width_s * width_s + c.tsamp_s * c.tsamp_s + tchan * tchan);
      cut.allowed[i] = std::min(cut.allowed[i], c.subband.smearing * w / cut.sweep[s]);
    }
  return cut;
}

// One coarse DM: its stage-1 delays per phase and their largest value per sub-band.
struct Coarse {
  float dm = 0;
  std::vector<std::vector<std::int32_t>> off1;    // [phase][nchans]
  std::vector<std::vector<std::int32_t>> maxoff;  // [phase][listed]
};

Coarse make_coarse(const DedispersionConfig& c, const Cut& cut, float dm, int phases,
                   const std::vector<double>& g) {
  Coarse k;
  k.dm = dm;
  k.off1.assign(static_cast<std::size_t>(phases),
                std::vector<std::int32_t>(static_cast<std::size_t>(c.nchans), 0));
  k.maxoff.assign(static_cast<std::size_t>(phases),
                  std::vector<std::int32_t>(cut.channels.size(), 0));
  for (int p = 0; p < phases; ++p)
    for (int ch = 0; ch < c.nchans; ++ch) {
      const int s = cut.sub_of_chan[static_cast<std::size_t>(ch)];
      if (s < 0) continue;
      const double rel = dm * (g[ch] - g[cut.top[static_cast<std::size_t>(s)]]);  // >= 0
      const auto v = static_cast<std::int32_t>(std::lround(rel + static_cast<double>(p) / phases));
      k.off1[p][ch] = v;
      if (kept(c, ch)) k.maxoff[p][s] = std::max(k.maxoff[p][s], v);
    }
  return k;
}

// What the fine trials need: the exact curves, their largest brute-force delay, the scatter of
// brute force's delays.
struct Fine {
  const std::vector<std::int32_t>* delays = nullptr;  // [ndm][nchans]
  std::vector<double> g;                              // [nchans] exact delay per unit DM
  std::vector<std::int32_t> dmax;                     // [ndm] over all channels
  std::vector<std::array<double, 3>> v_bf;  // [ndm] brute force's variance at judged_dms()
};

// Stage-2 phase and shift of fine trial i on coarse k for every sub-band (least squares against
// the exact curve, clamped to [0, Dmax_i - max off1]); false when some sub-band sweeps further
// at the coarse DM than the trial's whole band does (no shift keeps its delays within Dmax_i).
bool fit_shifts(const DedispersionConfig& c, const Cut& cut, const Fine& fine, std::size_t i,
                const Coarse& k, std::int32_t* phase, std::int32_t* shift) {
  const double dm = c.dms[i];
  const int phases = static_cast<int>(k.off1.size());
  for (std::size_t s = 0; s < cut.channels.size(); ++s) {
    double best = std::numeric_limits<double>::infinity();
    bool any = false;
    for (int p = 0; p < phases; ++p) {
      const std::int32_t upper = fine.dmax[i] - k.maxoff[p][s];
      if (upper < 0) continue;
      double sum = 0;
      for (int ch : cut.channels[s])
        sum += dm * fine.g[ch] - k.off1[p][ch];
      const auto n = static_cast<double>(cut.channels[s].size());
      const std::int32_t sh = std::clamp(static_cast<std::int32_t>(std::lround(sum / n)), 0, upper);
      double err = 0;
      for (int ch : cut.channels[s]) {
        const double e = k.off1[p][ch] + sh - dm * fine.g[ch];
        err += e * e;
      }
      if (err < best) best = err, phase[s] = p, shift[s] = sh, any = true;
    }
    if (!any) return false;
  }
  return true;
}

// snr_model of fine trial i on coarse k (0 when infeasible).
double trial_snr(const DedispersionConfig& c, const Cut& cut, const Fine& fine, std::size_t i,
                 const Coarse& k, std::vector<std::int32_t>& phase,
                 std::vector<std::int32_t>& shift, std::vector<std::int32_t>& eff) {
  if (!fit_shifts(c, cut, fine, i, k, phase.data(), shift.data())) return 0;
  const std::int32_t* D = fine.delays->data() + i * c.nchans;
  for (int ch = 0; ch < c.nchans; ++ch) {
    const int s = cut.sub_of_chan[static_cast<std::size_t>(ch)];
    eff[ch] = s < 0 ? D[ch] : k.off1[phase[s]][ch] + shift[s];
  }
  return trial_snr_fraction(c, i, eff.data(), D, fine.v_bf[i].data());
}

// The grouping: coarse DMs and, per fine trial, its coarse index.
struct Grid {
  std::vector<Coarse> coarse;
  std::vector<std::int32_t> coarse_of;
};

// Greedy pass over the fine list: each group [a, b] as long as every member is within the
// bound of the group's middle trial (the fine DM nearest the group's mid-DM) and keeps its
// predicted S/N, found by galloping then bisecting on b.
Grid greedy_grid(const DedispersionConfig& c, const Cut& cut, const Fine& fine,
                 const std::vector<int>& phase_options) {
  const auto& dms = c.dms;
  const int ndm = static_cast<int>(dms.size());
  std::size_t kept_channels = 0;
  for (const auto& ch : cut.channels)
    kept_channels += ch.size();
  std::vector<std::vector<std::optional<Coarse>>> cache(
      phase_options.size(), std::vector<std::optional<Coarse>>(dms.size()));
  auto coarse_at = [&](std::size_t o, int m) -> const Coarse& {
    if (!cache[o][m]) cache[o][m] = make_coarse(c, cut, dms[m], phase_options[o], fine.g);
    return *cache[o][m];
  };
  auto middle = [&](int a, int b) {
    const float mid = 0.5f * (dms[a] + dms[b]);
    int m =
        static_cast<int>(std::lower_bound(dms.begin() + a, dms.begin() + b + 1, mid) - dms.begin());
    if (m > a && std::abs(dms[m - 1] - mid) <= std::abs(dms[m] - mid)) --m;
    return std::min(m, b);
  };
  std::vector<std::int32_t> phase(cut.channels.size()), shift(cut.channels.size());
  std::vector<std::int32_t> eff(static_cast<std::size_t>(c.nchans));
  auto ok = [&](std::size_t o, int a, int b) {
    const int m = middle(a, b);
    const Coarse& k = coarse_at(o, m);
    for (int i = a; i <= b; ++i) {
      if (std::abs(static_cast<double>(dms[i]) - dms[m]) > cut.allowed[i]) return false;
      if (trial_snr(c, cut, fine, i, k, phase, shift, eff) < c.subband.min_snr_fraction)
        return false;
    }
    return true;
  };
  // The last fine trial of the widest group from a with option o.
  auto extent = [&](std::size_t o, int a) {
    int good = a, step = 1;
    while (good + step < ndm && ok(o, a, good + step)) {
      good += step;
      step *= 2;
    }
    int lo = good, hi = std::min(ndm - 1, good + step);  // ok(a, lo); hi unknown or bad
    while (hi > lo + 1) {
      const int mid = (lo + hi) / 2;
      if (ok(o, a, mid))
        lo = mid;
      else
        hi = mid;
    }
    if (hi > lo && ok(o, a, hi)) lo = hi;
    return lo;
  };
  Grid g;
  g.coarse_of.resize(dms.size());
  for (int a = 0; a < ndm;) {
    // Per group, the phase count with the fewest additions per fine trial:
    // (phases x channels) / group size + sub-bands.
    std::size_t best_o = 0;
    int best_b = a;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t o = 0; o < phase_options.size(); ++o) {
      const int b = extent(o, a);
      const double per_trial =
          static_cast<double>(phase_options[o]) * static_cast<double>(kept_channels) / (b - a + 1);
      if (per_trial < best - 1e-9) best = per_trial, best_o = o, best_b = b;
    }
    const int m = middle(a, best_b);
    for (int i = a; i <= best_b; ++i)
      g.coarse_of[i] = static_cast<std::int32_t>(g.coarse.size());
    g.coarse.push_back(coarse_at(best_o, m));
    a = best_b + 1;
  }
  return g;
}

// A uniform grid dms[0] + n step; throws when a fine trial breaks the bound.
Grid uniform_grid(const DedispersionConfig& c, const Cut& cut, const Fine& fine, int phases) {
  const double step = c.subband.coarse_dm_step;
  const double dm0 = c.dms.front();
  const double widest = 2 * *std::min_element(cut.allowed.begin(), cut.allowed.end());
  Grid g;
  g.coarse_of.resize(c.dms.size());
  std::vector<std::int32_t> phase(cut.channels.size()), shift(cut.channels.size());
  long last = -1;
  for (std::size_t i = 0; i < c.dms.size(); ++i) {
    const long n = std::lround((c.dms[i] - dm0) / step);
    const double dm = dm0 + n * step;
    if (std::abs(c.dms[i] - dm) > cut.allowed[i])
      fail(ErrorCategory::invalid_argument,
           "subband.coarse_dm_step = {} pc cm^-3 is coarser than {} sub-bands allow at DM {} "
           "(smearing bound {} of the effective width): use at most {:.4g}, more sub-bands, or "
           "0 (automatic)",
           step, cut.subbands, c.dms[i], c.subband.smearing, widest);
    if (n != last) {
      g.coarse.push_back(make_coarse(c, cut, static_cast<float>(dm), phases, fine.g));
      last = n;
    }
    g.coarse_of[i] = static_cast<std::int32_t>(g.coarse.size() - 1);
    if (!fit_shifts(c, cut, fine, i, g.coarse.back(), phase.data(), shift.data()))
      fail(ErrorCategory::invalid_argument,
           "subband.coarse_dm_step = {} pc cm^-3: the coarse DM {} sweeps a sub-band by more "
           "than trial DM {} delays the whole band; use a finer step or 0 (automatic)",
           step, dm, c.dms[i]);
  }
  return g;
}

// The grid given by SubbandConfig::trial_coarse_dms / trial_phases: consecutive fine trials of
// one coarse DM and phase count share a coarse entry.
Grid explicit_grid(const DedispersionConfig& c, const Cut& cut, const Fine& fine) {
  const auto& dm_of = c.subband.trial_coarse_dms;
  const auto& phases_of = c.subband.trial_phases;
  Grid g;
  g.coarse_of.resize(c.dms.size());
  std::vector<std::int32_t> phase(cut.channels.size()), shift(cut.channels.size());
  for (std::size_t i = 0; i < c.dms.size(); ++i) {
    if (i == 0 || dm_of[i] != dm_of[i - 1] || phases_of[i] != phases_of[i - 1])
      g.coarse.push_back(make_coarse(c, cut, dm_of[i], phases_of[i], fine.g));
    g.coarse_of[i] = static_cast<std::int32_t>(g.coarse.size() - 1);
    if (!fit_shifts(c, cut, fine, i, g.coarse.back(), phase.data(), shift.data()))
      fail(ErrorCategory::invalid_argument,
           "subband.trial_coarse_dms[{}] = {}: the coarse DM sweeps a sub-band by more than "
           "trial DM {} delays the whole band",
           i, dm_of[i], c.dms[i]);
  }
  return g;
}

// Additions per output sample of a grid.
double cost(const Cut& cut, const Grid& g, std::size_t ndm) {
  std::size_t kept_channels = 0;
  for (const auto& ch : cut.channels)
    kept_channels += ch.size();
  std::size_t rows = 0;
  for (const auto& k : g.coarse)
    rows += k.off1.size();
  return static_cast<double>(rows) * static_cast<double>(kept_channels) +
         static_cast<double>(ndm) * static_cast<double>(cut.channels.size());
}

}  // namespace

std::vector<std::int32_t> SubbandTables::effective_delays(
    const std::vector<std::int32_t>& delays) const {
  const std::size_t nchans = sub_of_chan.size();
  const std::size_t ndm = coarse_of.size();
  const auto ns = static_cast<std::size_t>(nsub());
  std::vector<std::int32_t> eff(ndm * nchans);
  for (std::size_t i = 0; i < ndm; ++i)
    for (std::size_t ch = 0; ch < nchans; ++ch) {
      const int s = sub_of_chan[ch];
      if (s < 0) {
        eff[i * nchans + ch] = delays[i * nchans + ch];
        continue;
      }
      const std::size_t q =
          static_cast<std::size_t>(phase_begin[static_cast<std::size_t>(coarse_of[i])]) +
          static_cast<std::size_t>(phase[i * ns + s]);
      eff[i * nchans + ch] = off1[q * nchans + ch] + shift[i * ns + s];
    }
  return eff;
}

SubbandTables plan_subbands(const DedispersionConfig& c, const std::vector<std::int32_t>& delays) {
  const int nchans = c.nchans;
  const std::size_t ndm = c.dms.size();
  if (c.subband.subbands > nchans)
    fail(ErrorCategory::invalid_argument, "subband.subbands = {} is more than the {} channels",
         c.subband.subbands, nchans);
  Fine fine;
  fine.delays = &delays;
  fine.g = delay_per_dm(c);
  fine.dmax.assign(ndm, 0);
  fine.v_bf.resize(ndm);
  for (std::size_t i = 0; i < ndm; ++i) {
    for (int ch = 0; ch < nchans; ++ch)
      fine.dmax[i] = std::max(fine.dmax[i], delays[i * nchans + ch]);
    const auto at = judged_dms(c.dms, i);
    for (std::size_t k = 0; k < at.size(); ++k)
      fine.v_bf[i][k] = delay_variance(c, delays.data() + i * nchans, at[k]);
  }

  std::vector<int> sub_candidates;
  if (c.subband.subbands > 0) {
    sub_candidates.push_back(c.subband.subbands);
  } else {
    for (int n = 2; n <= nchans / 2; n *= 2)
      sub_candidates.push_back(n);
    if (sub_candidates.empty()) sub_candidates.push_back(1);
  }
  // Phases: as configured, else chosen per group (1 or 2) by the greedy pass; a uniform grid
  // takes one phase unless told otherwise.
  const std::vector<int> phase_options =
      c.subband.phases > 0 ? std::vector<int>{c.subband.phases} : std::vector<int>{1, 2};
  // Every candidate cut on its own thread (the greedy pass is most of a D1 plan's setup); the
  // cheapest wins, the first of equals, whatever the threads.
  const auto ncand = static_cast<std::int64_t>(sub_candidates.size());
  std::vector<std::optional<Cut>> cuts(sub_candidates.size());
  std::vector<std::optional<Grid>> grids(sub_candidates.size());
  std::vector<std::exception_ptr> errors(sub_candidates.size());
#pragma omp parallel for schedule(dynamic) num_threads(cpu_thread_count(c))
  for (std::int64_t k = 0; k < ncand; ++k) {
    try {
      Cut cut = make_cut(c, sub_candidates[static_cast<std::size_t>(k)]);
      if (!c.subband.trial_coarse_dms.empty())
        grids[k] = explicit_grid(c, cut, fine);
      else if (c.subband.coarse_dm_step > 0)
        grids[k] = uniform_grid(c, cut, fine, std::max(c.subband.phases, 1));
      else
        grids[k] = greedy_grid(c, cut, fine, phase_options);
      cuts[k] = std::move(cut);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  }
  std::optional<Cut> best_cut;
  std::optional<Grid> best_grid;
  double best_cost = std::numeric_limits<double>::infinity();
  std::string first_error;
  for (std::size_t k = 0; k < sub_candidates.size(); ++k) {
    if (errors[k]) {
      // A setting the bound refuses rules out this cut (the message of the first is kept);
      // anything else is rethrown as it came.
      try {
        std::rethrow_exception(errors[k]);
      } catch (const Error& e) {
        if (e.category() != ErrorCategory::invalid_argument || sub_candidates.size() == 1) throw;
        if (first_error.empty()) first_error = e.what();
      }
      continue;
    }
    const double cost_k = cost(*cuts[k], *grids[k], ndm);
    if (cost_k < best_cost) {
      best_cost = cost_k;
      best_cut = std::move(cuts[k]);
      best_grid = std::move(grids[k]);
    }
  }
  if (!best_cut) fail(ErrorCategory::invalid_argument, "{}", first_error);
  const Cut& cut = *best_cut;
  const Grid& grid = *best_grid;

  SubbandTables t;
  t.subbands = cut.subbands;
  t.channels = cut.channels;
  t.sweep_s_per_dm = cut.sweep;
  t.sub_of_chan = cut.sub_of_chan;
  t.coarse_of = grid.coarse_of;
  t.phase_begin.push_back(0);
  for (const auto& k : grid.coarse) {
    t.coarse_dms.push_back(k.dm);
    t.phase_begin.push_back(t.phase_begin.back() + static_cast<std::int32_t>(k.off1.size()));
    t.phases = std::max(t.phases, static_cast<int>(k.off1.size()));
  }
  const int nsub = t.nsub();
  const int ncoarse = t.ncoarse();
  t.group_begin.assign(static_cast<std::size_t>(ncoarse) + 1, static_cast<std::int32_t>(ndm));
  for (std::size_t i = ndm; i-- > 0;)
    t.group_begin[static_cast<std::size_t>(t.coarse_of[i])] = static_cast<std::int32_t>(i);
  const auto nq = static_cast<std::size_t>(t.nrows1());
  t.off1.assign(nq * nchans, 0);
  for (int j = 0; j < ncoarse; ++j)
    for (std::size_t p = 0; p < grid.coarse[j].off1.size(); ++p)
      std::copy(grid.coarse[j].off1[p].begin(), grid.coarse[j].off1[p].end(),
                t.off1.begin() + static_cast<std::ptrdiff_t>((t.phase_begin[j] + p) * nchans));

  const auto ns = static_cast<std::size_t>(nsub);
  t.phase.assign(ndm * ns, 0);
  t.shift.assign(ndm * ns, 0);
  t.smearing_s.assign(ndm, 0.0f);
  t.snr_fraction.assign(ndm, 0.0f);
  std::vector<std::int32_t> phase(ns), shift(ns), eff(static_cast<std::size_t>(nchans));
  for (std::size_t i = 0; i < ndm; ++i) {
    const Coarse& k = grid.coarse[static_cast<std::size_t>(t.coarse_of[i])];
    t.snr_fraction[i] = static_cast<float>(trial_snr(c, cut, fine, i, k, phase, shift, eff));
    std::copy(phase.begin(), phase.end(), t.phase.begin() + static_cast<std::ptrdiff_t>(i * ns));
    std::copy(shift.begin(), shift.end(), t.shift.begin() + static_cast<std::ptrdiff_t>(i * ns));
    double smear = 0;
    for (std::size_t s = 0; s < ns; ++s)
      smear = std::max(smear, std::abs(static_cast<double>(c.dms[i]) - k.dm) * cut.sweep[s]);
    t.smearing_s[i] = static_cast<float>(smear);
  }
  t.min_shift.assign(nq * ns, std::numeric_limits<std::int32_t>::max());
  t.max_shift.assign(nq * ns, 0);
  t.used.assign(nq * ns, 0);
  for (std::size_t i = 0; i < ndm; ++i)
    for (std::size_t s = 0; s < ns; ++s) {
      const std::size_t q = static_cast<std::size_t>(t.phase_begin[t.coarse_of[i]]) +
                            static_cast<std::size_t>(t.phase[i * ns + s]);
      t.min_shift[q * ns + s] = std::min(t.min_shift[q * ns + s], t.shift[i * ns + s]);
      t.max_shift[q * ns + s] = std::max(t.max_shift[q * ns + s], t.shift[i * ns + s]);
      t.used[q * ns + s] = 1;
    }
  for (std::size_t q = 0; q < nq * ns; ++q)
    if (!t.used[q]) t.min_shift[q] = t.max_shift[q] = 0;
  return t;
}

}  // namespace warpbeam::dedisp::detail
