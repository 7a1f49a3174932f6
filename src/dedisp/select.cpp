// select_algorithm(): brute force, subband or fdmt by a time model and the S/N bound.
//
// The model: seconds = max(additions / add rate, bytes / byte rate) with the OperationCount of
// each method (method_tables.cpp) and the rates below. They are rough on purpose: the choice
// only needs the order of the candidates, which differ by factors, not percent.
#include <algorithm>
#include <cmath>

#include "dedisp/method_tables.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp {
namespace {

struct Rates {
  double brute_adds, subband_adds, fdmt_adds, bytes;
};

// CPU: the tiled loop's 1.36e10 channel*DM*samples/s on D1 (2-core development VM,
// docs/PERFORMANCE.md, issue 2); the sub-band stages run the same accumulate loop from L2
// (taken at 0.8 of it); FDMT levels stream through memory at ~10 GB/s. Measured on that VM
// (2026-12-02, one D1 gulp): sub-band 4.5-4.8x brute force for 7.2x fewer additions (9.5e9
// additions per CPU second against brute force's 1.5e10: 0.63 of it, the model says 0.8),
// FDMT 0.99x (memory-bound, 5.3 GB/s): the model's order is the measured one.
// CUDA (H200, measured 2026-12-02 on D1, docs/PERFORMANCE.md "Sub-band and FDMT on the GPU"):
// brute force 8.3e12 additions/s with the packed kernel (packed input) and 6.0e12 with the tiled
// fp32 kernel (channel-major float input: the GPU search); the sub-band method 2.6e12 additions/s
// end to end with the group stage-2 kernel (0.0622 s for 1.64e11; 1.36e12 with the first
// kernel), FDMT's levels 2.9e12 bytes/s (0.260 s for 7.71e11 bytes, 70 % of the copy rate).
Rates rates(const DedispersionConfig& c, Backend b) {
  if (b == Backend::cuda) {
    const bool packed = !c.channel_major && c.nbits <= 8;
    return {packed ? 8.3e12 : 6.0e12, 2.6e12, 2.9e12 / 8, 2.9e12};
  }
  return {1.36e10, 1.1e10, 1.1e10, 1e10};
}

// A method other than brute force must be modelled faster by this factor: it also builds
// larger tables and buffers per plan, and a pick that loses end to end is the one error the
// choice must not make.
constexpr double kMargin = 1.25;

double model_s(const OperationCount& k, double add_rate, double byte_rate) {
  return std::max(k.additions / add_rate, k.bytes / byte_rate);
}

float worst(const std::vector<float>& v) {
  return v.empty() ? 1.0f : *std::min_element(v.begin(), v.end());
}

}  // namespace

AlgorithmChoice select_algorithm(const DedispersionConfig& config, Backend backend,
                                 double min_snr_fraction) {
  if (!(min_snr_fraction > 0 && min_snr_fraction <= 1))
    fail(ErrorCategory::invalid_argument, "min_snr_fraction = {} must be in (0, 1]",
         min_snr_fraction);
  backend = resolve_backend(backend);
  config.validate();
  const auto delays = delay_table(config);
  const std::int32_t max_delay = *std::max_element(delays.begin(), delays.end());
  if (config.nsamples_in <= max_delay)
    fail(ErrorCategory::invalid_argument,
         "nsamples_in = {} must exceed the largest delay, {} samples (DM {})", config.nsamples_in,
         max_delay, config.dms.back());
  const std::int64_t nout = config.nsamples_in - max_delay;
  const Rates r = rates(config, backend);

  AlgorithmChoice ch;
  auto brute = config;
  brute.algorithm = Algorithm::automatic;
  const auto tb = detail::make_method_tables(brute, backend, delays, nout);
  ch.brute_s = model_s(detail::count_operations(brute, tb, nout), r.brute_adds, r.bytes);

  auto try_method = [&](Algorithm a, double add_rate, float& snr, std::string& why) {
    auto c = config;
    c.algorithm = a;
    try {
      const auto tp = detail::cached_method_tables(c, backend, delays, nout);
      const detail::MethodTables& t = *tp;
      snr = worst(t.report.snr_fraction);
      if (a == Algorithm::subband) ch.subband_trials = t.report;
      if (snr < min_snr_fraction) {
        why = fmt::format("{}: predicted S/N {:.3f} of brute force's < {}", to_string(a), snr,
                          min_snr_fraction);
        return -1.0;
      }
      return model_s(detail::count_operations(c, t, nout), add_rate, r.bytes);
    } catch (const Error& e) {
      why = fmt::format("{}: {}", to_string(a), e.what());
      return -1.0;
    }
  };
  std::string why_sb, why_fdmt;
  ch.subband_s = try_method(Algorithm::subband, r.subband_adds, ch.subband_snr, why_sb);
  ch.fdmt_s = try_method(Algorithm::fdmt, r.fdmt_adds, ch.fdmt_snr, why_fdmt);

  ch.algorithm = Algorithm::automatic;
  double best = ch.brute_s / kMargin;
  if (ch.subband_s >= 0 && ch.subband_s < best)
    best = ch.subband_s, ch.algorithm = Algorithm::subband;
  if (ch.fdmt_s >= 0 && ch.fdmt_s < best) best = ch.fdmt_s, ch.algorithm = Algorithm::fdmt;
  ch.reason = fmt::format(
      "modelled on {}: brute force {:.3g} s, subband {}, fdmt {}; picked {}", to_string(backend),
      ch.brute_s,
      ch.subband_s >= 0 ? fmt::format("{:.3g} s (S/N {:.3f})", ch.subband_s, ch.subband_snr)
                        : why_sb,
      ch.fdmt_s >= 0 ? fmt::format("{:.3g} s (S/N {:.3f})", ch.fdmt_s, ch.fdmt_snr) : why_fdmt,
      ch.algorithm == Algorithm::automatic ? std::string("brute force") : to_string(ch.algorithm));
  return ch;
}

}  // namespace warpbeam::dedisp
