// The tables of Algorithm::fdmt (method_tables.hpp): the tree of sub-bands, the rows each level
// computes (pruned from the outputs downwards), their lengths and the delay curves.
//
// Zackay & Ofek (2017, ApJ 835, 11, section 3) build the transform bottom-up: the sum of a
// frequency band at delay delta is the sum of its upper half at the delay its dispersion curve
// has where the halves meet, plus the lower half, shifted by that delay, at the rest. Here
// channels are points at their centre frequencies, as in brute force (no initialisation over a
// channel's own smearing, ZO17's eq. 20), so that every output row is the sum of exactly one
// sample per channel and can be compared with brute force and searched with its statistics.
//
// The splits. Rounding the upper child's delay and the split point to the nearest sample at
// every level lets the errors of ten levels add up (D1: up to 2-3 samples, which costs a pulse
// narrower than a sample 10-15 % of its S/N). Each row instead takes, of the four roundings
// (floor or ceil of each), the one whose delays scatter least about its own ideal curve
// delta * (F(p) - F(p_0)) / (F(p_1) - F(p_0)). The scatter of a row follows from three sums of
// its children's errors (sum e, sum e^2, sum e w over their positions, w the position's place
// on the curve), so the choice for every (node, delay) costs O(1): a dynamic programme from the
// channels up, over every delay a node can be asked for. The transform is unchanged in cost and
// structure: each row is still one sum of two rows of the level below.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp::detail {
namespace {

// Positions in order of descending frequency and F(p) = f(p)^-2 at each.
struct Band {
  int n = 0;
  std::vector<int> chan;
  std::vector<double> F;
};

Band make_band(const DedispersionConfig& c) {
  Band b;
  b.n = c.nchans;
  for (int p = 0; p < c.nchans; ++p) {
    const int ch = c.foff_mhz < 0 ? p : c.nchans - 1 - p;
    const double f = c.fch1_mhz + ch * c.foff_mhz;
    b.chan.push_back(ch);
    b.F.push_back(1 / (f * f));
  }
  return b;
}

// The positions of node k of level h and where its children meet.
struct NodeSpan {
  std::int64_t p0 = 0, pm = 0, p1 = 0;
  bool has_lower = false;
};

NodeSpan node_span(const Band& band, int h, std::int64_t k) {
  NodeSpan n;
  n.p0 = k << h;
  n.p1 = std::min<std::int64_t>((k + 1) << h, band.n) - 1;
  n.pm = std::min<std::int64_t>(n.p0 + (std::int64_t{1} << (h - 1)), band.n) - 1;
  n.has_lower = n.pm < n.p1;
  return n;
}

// Sums of a row's delay errors e_p = delay - ideal over its positions, with w_p in [0, 1] the
// position's place on the node's curve: sum e, sum e^2, sum e w; and the node's own n, sum w and
// sum w^2, which do not depend on the delay.
struct RowStat {
  double s1 = 0, s2 = 0, sw = 0;
};

struct NodeStat {
  double n = 0, w1 = 0, w2 = 0;
};

// The choices of every (level, node, delay): the upper child's delay and the split.
struct Choices {
  std::vector<std::vector<std::int32_t>> dmax;                       // [level][node]
  std::vector<std::vector<std::vector<std::int32_t>>> upper, split;  // [level][node][delay]
  // The root, per output trial: its children's delays are chosen against the trial's own
  // (fractional) delay across the band, not the rounded one.
  std::vector<std::int32_t> root_delay, root_upper, root_split;  // [ndm]
};

// The four nearest integers to x, the nearest first: the two roundings and one beyond each
// (the outer pair lets a row trade its own scatter for its children's: D1's worst trial goes
// from 0.80 to 0.85 of brute force's predicted S/N; a wider choice, +-2, changed nothing more).
std::array<std::int32_t, 4> roundings(double x) {
  const auto r = static_cast<std::int32_t>(std::lround(x));
  const auto f = static_cast<std::int32_t>(std::floor(x));
  const std::int32_t other = r == f ? f + 1 : f;
  return {r, other, std::min(r, other) - 1, std::max(r, other) + 1};
}

// `root_delay` [ndm]: each output's integer delay across the band; `root_target` [ndm]: its exact
// (fractional) delay there.
Choices choose_splits(const Band& band, int H, const std::vector<std::int32_t>& root_delay,
                      const std::vector<double>& root_target) {
  const std::int32_t root_max =
      root_delay.empty() ? 0 : *std::max_element(root_delay.begin(), root_delay.end());
  Choices ch;
  auto nodes = [&](int h) { return static_cast<std::size_t>((band.n + (1 << h) - 1) >> h); };
  ch.dmax.resize(static_cast<std::size_t>(H) + 1);
  ch.upper.resize(static_cast<std::size_t>(H) + 1);
  ch.split.resize(static_cast<std::size_t>(H) + 1);
  for (int h = 0; h <= H; ++h) {
    ch.dmax[h].assign(nodes(h), 0);
    ch.upper[h].resize(nodes(h));
    ch.split[h].resize(nodes(h));
  }
  // Place of position b on the curve of [p0, p1].
  auto frac = [&](std::int64_t b, std::int64_t p0, std::int64_t p1) {
    return p1 > p0 ? (band.F[b] - band.F[p0]) / (band.F[p1] - band.F[p0]) : 0.0;
  };
  // The largest delay each node can be asked for, from the root down (one position: 0).
  ch.dmax[H][0] = band.n > 1 ? root_max : 0;
  for (int h = H; h >= 1; --h)
    for (std::size_t k = 0; k < nodes(h); ++k) {
      const NodeSpan ns = node_span(band, h, static_cast<std::int64_t>(k));
      const std::int32_t dm = ch.dmax[h][k];
      if (!ns.has_lower) {
        ch.dmax[h - 1][2 * k] = dm;
        continue;
      }
      const double ru = frac(ns.pm, ns.p0, ns.p1), rs = frac(ns.pm + 1, ns.p0, ns.p1);
      ch.dmax[h - 1][2 * k] = ns.pm > ns.p0 ? static_cast<std::int32_t>(std::ceil(dm * ru)) : 0;
      ch.dmax[h - 1][2 * k + 1] =
          ns.p1 > ns.pm + 1 ? std::min(dm, static_cast<std::int32_t>(std::ceil(dm * (1 - rs))) + 1)
                            : 0;
    }
  auto node_stat = [&](std::int64_t a, std::int64_t b) {
    NodeStat s;
    for (std::int64_t p = a; p <= b; ++p) {
      const double w = frac(p, a, b);
      s.n += 1, s.w1 += w, s.w2 += w * w;
    }
    return s;
  };
  // The rows from the channels (one row each, no error) up.
  std::vector<std::vector<RowStat>> below(nodes(0), std::vector<RowStat>(1));
  for (int h = 1; h <= H; ++h) {
    std::vector<std::vector<RowStat>> here(nodes(h));
    for (std::size_t k = 0; k < nodes(h); ++k) {
      const NodeSpan ns = node_span(band, h, static_cast<std::int64_t>(k));
      const std::int32_t dm = ch.dmax[h][k];
      here[k].resize(static_cast<std::size_t>(dm) + 1);
      ch.upper[h][k].resize(static_cast<std::size_t>(dm) + 1);
      ch.split[h][k].assign(static_cast<std::size_t>(dm) + 1, 0);
      if (!ns.has_lower) {  // one child over the same positions: the same rows
        for (std::int32_t d = 0; d <= dm; ++d) {
          here[k][d] = below[2 * k][d];
          ch.upper[h][k][d] = d;
        }
        continue;
      }
      const NodeStat U = node_stat(ns.p0, ns.pm), L = node_stat(ns.pm + 1, ns.p1);
      const double rho_u = frac(ns.pm, ns.p0, ns.p1);
      const double gamma = frac(ns.pm + 1, ns.p0, ns.p1);
      const double rho_l = 1 - gamma;
      const auto& SU = below[2 * k];
      const auto& SL = below[2 * k + 1];
      const auto umax = static_cast<std::int32_t>(SU.size()) - 1;
      const auto lmax = static_cast<std::int32_t>(SL.size()) - 1;
      const double n = U.n + L.n;
      // The best (upper delay, split) for a row of integer delay d whose ideal curve is
      // target * w (target = d, except at the root).
      auto choose = [&](std::int32_t d, double target, RowStat& stat, std::int32_t& best_du,
                        std::int32_t& best_sp) -> double {
        double best = std::numeric_limits<double>::infinity();
        for (std::int32_t du : roundings(target * rho_u))
          for (std::int32_t sp : roundings(target * gamma)) {
            const std::int32_t dl = d - sp;
            if (du < 0 || du > umax || du > sp || dl < 0 || dl > lmax) continue;
            const RowStat& a = SU[du];
            const RowStat& b = SL[dl];
            // Upper: e = e_U + al w_U. Lower: e = e_L + be w_L + dd. In the parent's frame the
            // upper positions sit at w = rho_u w_U, the lower ones at w = rho_l w_L + gamma.
            const double al = du - target * rho_u;
            const double be = dl - target * rho_l, dd = sp - target * gamma;
            const double lower_s1 = b.s1 + be * L.w1 + dd * L.n;
            RowStat r;
            r.s1 = a.s1 + al * U.w1 + lower_s1;
            r.s2 = a.s2 + 2 * al * a.sw + al * al * U.w2 + b.s2 + be * be * L.w2 + dd * dd * L.n +
                   2 * be * b.sw + 2 * dd * b.s1 + 2 * be * dd * L.w1;
            r.sw = rho_u * (a.sw + al * U.w2) + rho_l * (b.sw + be * L.w2 + dd * L.w1) +
                   gamma * lower_s1;
            const double var = r.s2 / n - (r.s1 / n) * (r.s1 / n);
            if (var < best - 1e-12) {
              best = var;
              stat = r;
              best_du = du;
              best_sp = sp;
            }
          }
        return best;
      };
      for (std::int32_t d = 0; d <= dm; ++d)
        choose(d, d, here[k][d], ch.upper[h][k][d], ch.split[h][k][d]);
      if (h == H) {
        ch.root_upper.resize(root_delay.size());
        ch.root_split.resize(root_delay.size());
        ch.root_delay.resize(root_delay.size());
        RowStat unused;
        for (std::size_t i = 0; i < root_delay.size(); ++i) {
          const std::int32_t d = root_delay[i];
          ch.root_delay[i] = d;
          ch.root_upper[i] = ch.upper[h][k][d];  // kept when no candidate fits
          ch.root_split[i] = ch.split[h][k][d];
          choose(d, root_target[i], unused, ch.root_upper[i], ch.root_split[i]);
        }
      }
    }
    below = std::move(here);
  }
  return ch;
}

struct Split {
  std::int32_t upper = 0, shift = 0, lower = 0;
  bool has_lower = false;
};

// The children of node k of level h at delay delta, as chosen.
Split split(const Band& band, const Choices& ch, int h, std::int64_t k, std::int32_t delta) {
  const NodeSpan ns = node_span(band, h, k);
  Split s;
  s.upper = ch.upper[h][static_cast<std::size_t>(k)][static_cast<std::size_t>(delta)];
  s.has_lower = ns.has_lower;
  if (ns.has_lower) {
    s.shift = ch.split[h][static_cast<std::size_t>(k)][static_cast<std::size_t>(delta)];
    s.lower = delta - s.shift;
  }
  return s;
}

int levels_for(int n) {
  int h = 0;
  while ((std::int64_t{1} << h) < n)
    ++h;
  return std::max(h, 1);
}

}  // namespace

std::vector<std::int64_t> FdmtLevel::offsets(std::int64_t block) const {
  std::vector<std::int64_t> off(a.size() + 1, 0);
  for (std::size_t r = 0; r < a.size(); ++r)
    off[r + 1] = off[r] + (block + ext[r] + 15) / 16 * 16;
  return off;
}

FdmtTables plan_fdmt(const DedispersionConfig& c, const std::vector<std::int32_t>& delays,
                     std::int64_t block) {
  const Band band = make_band(c);
  const int n = band.n;
  const int H = levels_for(n);
  const std::size_t ndm = c.dms.size();
  FdmtTables t;
  t.chan_of_pos = band.chan;
  t.block = block;

  // The outputs: each trial at its brute-force delay of the lowest channel.
  const int lowest = band.chan[static_cast<std::size_t>(n - 1)];
  t.out_delay.resize(ndm);
  for (std::size_t i = 0; i < ndm; ++i)
    t.out_delay[i] = delays[i * c.nchans + lowest];

  // The exact delay of each trial at the lowest channel, the target of its root's splits.
  std::vector<double> target(ndm);
  {
    const double fhi = 1 / std::sqrt(band.F[0]), flo = 1 / std::sqrt(band.F[n - 1]);
    for (std::size_t i = 0; i < ndm; ++i)
      target[i] = dispersion_delay_s(c.dms[i], flo, fhi) / c.tsamp_s;
  }
  const Choices choices = choose_splits(band, H, t.out_delay, target);
  if (!choices.root_delay.empty()) t.out_delay = choices.root_delay;
  const NodeSpan root = node_span(band, H, 0);
  // The root's children of output i (one root row per output trial).
  auto root_split = [&](std::size_t i) {
    Split s;
    s.has_lower = root.has_lower;
    if (!root.has_lower) {
      s.upper = t.out_delay[i];
      return s;
    }
    s.upper = choices.root_upper[i];
    s.shift = choices.root_split[i];
    s.lower = t.out_delay[i] - s.shift;
    return s;
  };

  // Pruning: the delays each node needs, from the root down. need[h][k] = sorted delays.
  std::vector<std::vector<std::vector<std::int32_t>>> need(static_cast<std::size_t>(H) + 1);
  for (int h = 0; h <= H; ++h)
    need[h].resize(static_cast<std::size_t>((n + (1 << h) - 1) >> h));
  for (std::size_t i = 0; i < ndm; ++i) {
    const Split s = root_split(i);
    need[H - 1][0].push_back(s.upper);
    if (s.has_lower) need[H - 1][1].push_back(s.lower);
  }
  for (int h = H - 1; h >= 1; --h) {
    for (auto& v : need[h]) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    for (std::size_t k = 0; k < need[h].size(); ++k)
      for (std::int32_t d : need[h][k]) {
        const Split s = split(band, choices, h, static_cast<std::int64_t>(k), d);
        need[h - 1][2 * k].push_back(s.upper);
        if (s.has_lower) need[h - 1][2 * k + 1].push_back(s.lower);
      }
  }
  for (auto& v : need[0])
    for (std::int32_t d : v)
      if (d != 0)
        fail(ErrorCategory::invalid_argument,
             "fdmt: internal error: a channel was asked for delay {}", d);

  // Row numbers: level h's rows are its nodes' delays in order. row_of(h, k, d).
  std::vector<std::vector<std::int64_t>> first(static_cast<std::size_t>(H) + 1);
  for (int h = 1; h < H; ++h) {
    first[h].assign(need[h].size() + 1, 0);
    for (std::size_t k = 0; k < need[h].size(); ++k)
      first[h][k + 1] = first[h][k] + static_cast<std::int64_t>(need[h][k].size());
  }
  auto row_of = [&](int h, std::int64_t k, std::int32_t d) -> std::int32_t {
    if (h == 0) {  // a channel row of the input (-1: killed, reads as zero)
      const int ch = band.chan[static_cast<std::size_t>(k)];
      return (c.killmask.empty() || c.killmask[static_cast<std::size_t>(ch)]) ? ch : -1;
    }
    const auto& v = need[h][static_cast<std::size_t>(k)];
    const auto it = std::lower_bound(v.begin(), v.end(), d);
    return static_cast<std::int32_t>(first[h][static_cast<std::size_t>(k)] + (it - v.begin()));
  };

  t.levels.resize(static_cast<std::size_t>(H));
  for (int h = 1; h < H; ++h) {
    FdmtLevel& L = t.levels[static_cast<std::size_t>(h - 1)];
    for (std::size_t k = 0; k < need[h].size(); ++k)
      for (std::int32_t d : need[h][k]) {
        const Split s = split(band, choices, h, static_cast<std::int64_t>(k), d);
        L.a.push_back(row_of(h - 1, static_cast<std::int64_t>(2 * k), s.upper));
        L.b.push_back(s.has_lower ? row_of(h - 1, static_cast<std::int64_t>(2 * k + 1), s.lower)
                                  : -1);
        L.shift.push_back(s.shift);
        L.node.push_back(static_cast<std::int32_t>(k));
        L.delay.push_back(d);
      }
    L.ext.assign(L.a.size(), 0);
  }
  // The last level: one row per output trial.
  {
    FdmtLevel& L = t.levels[static_cast<std::size_t>(H - 1)];
    for (std::size_t i = 0; i < ndm; ++i) {
      const Split s = root_split(i);
      L.a.push_back(row_of(H - 1, 0, s.upper));
      L.b.push_back(s.has_lower ? row_of(H - 1, 1, s.lower) : -1);
      L.shift.push_back(s.shift);
      L.node.push_back(0);
      L.delay.push_back(t.out_delay[i]);
    }
    L.ext.assign(L.a.size(), 0);
  }
  t.out_row.resize(ndm);
  for (std::size_t i = 0; i < ndm; ++i)
    t.out_row[i] = static_cast<std::int32_t>(i);

  // Lengths, from the root down: a row read at shift s by a row that needs e more samples than
  // the block needs e + s more itself. Level-1 rows read the input channels.
  t.chan_ext.assign(static_cast<std::size_t>(c.nchans), 0);
  for (int h = H; h >= 1; --h) {
    const FdmtLevel& L = t.levels[static_cast<std::size_t>(h - 1)];
    for (std::size_t r = 0; r < L.a.size(); ++r) {
      const std::int32_t e = L.ext[r];
      auto grow = [&](std::int32_t row, std::int32_t need_ext) {
        if (row < 0) return;
        auto& slot = h == 1 ? t.chan_ext[static_cast<std::size_t>(row)]
                            : t.levels[static_cast<std::size_t>(h - 2)].ext[row];
        slot = std::max(slot, need_ext);
      };
      grow(L.a[r], e);
      if (L.b[r] >= 0) grow(L.b[r], e + L.shift[r]);
    }
  }
  // The last level writes the output directly; the others need ping-pong buffers.
  for (int h = 1; h < H; ++h)
    t.max_level_elements = std::max(
        t.max_level_elements, t.levels[static_cast<std::size_t>(h - 1)].offsets(block).back());

  // The delay of every channel in every output row: follow the splits down.
  t.curves.assign(ndm * static_cast<std::size_t>(c.nchans), 0);
  std::function<void(int, std::int64_t, std::int32_t, std::int32_t, std::int32_t*)> trace =
      [&](int h, std::int64_t k, std::int32_t d, std::int32_t base, std::int32_t* curve) {
        if (h == 0) {
          curve[band.chan[static_cast<std::size_t>(k)]] = base;
          return;
        }
        const Split s = split(band, choices, h, k, d);
        trace(h - 1, 2 * k, s.upper, base, curve);
        if (s.has_lower) trace(h - 1, 2 * k + 1, s.lower, base + s.shift, curve);
      };
  for (std::size_t i = 0; i < ndm; ++i) {
    std::int32_t* curve = t.curves.data() + i * c.nchans;
    const Split s = root_split(i);
    trace(H - 1, 0, s.upper, 0, curve);
    if (s.has_lower) trace(H - 1, 1, s.lower, s.shift, curve);
  }
  return t;
}

}  // namespace warpbeam::dedisp::detail
