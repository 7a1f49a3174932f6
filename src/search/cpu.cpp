// CPU search executor: stages 1-6 of warpbeam/search.hpp for every DM trial (OpenMP over
// trials), with per-thread scratch allocated once by the plan.
#include <omp.h>

#include <cmath>
#include <vector>

#include "search/executor.hpp"

namespace warpbeam::search::detail {
namespace {

class CpuSearchExecutor final : public SearchExecutor {
 public:
  explicit CpuSearchExecutor(const SearchConfig& c)
      : threads_(c.threads > 0 ? c.threads : omp_get_max_threads()),
        widths_(c.widths()),
        levels_(baseline_levels(c.baseline_window(), c.nsamples)),
        scratch_(static_cast<std::size_t>(threads_)) {
    const auto n = static_cast<std::size_t>(c.nsamples);
    for (auto& s : scratch_) {
      s.residual.resize(n);
      s.baseline.resize(n);
      s.work.resize(2 * n);
      s.snr.resize(n);
      s.prefix.resize(n + 1);
    }
  }

  Workspace workspace() const override {
    std::int64_t bytes = 0;
    for (const auto& s : scratch_)
      bytes += static_cast<std::int64_t>(
          (s.residual.size() + s.baseline.size() + s.work.size() + s.snr.size()) * sizeof(float) +
          s.prefix.size() * sizeof(double));
    return {bytes, 0};
  }

  void execute(const SearchConfig& c, const float* plane, std::int64_t own_begin,
               std::int64_t own_end, std::int32_t dm_offset, std::int64_t sample_offset,
               std::vector<Peak>& peaks, std::vector<double>& rms, const Stream*) override {
    const std::int64_t n = c.nsamples;
    for (auto& s : scratch_)
      s.peaks.clear();
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (std::int64_t d = 0; d < c.ndms; ++d) {
      Scratch& s = scratch_[static_cast<std::size_t>(omp_get_thread_num())];
      const float* x = plane + d * n;
      // 1-2. Baseline and residual.
      search_baseline(x, n, levels_, s.baseline.data(), s.snr.data(), s.work.data());
      for (std::int64_t t = 0; t < n; ++t)
        s.residual[t] = x[t] - s.baseline[t];
      // 3. Robust RMS.
      const double sigma = robust_rms(s.residual.data(), n, 0.0f, s.work.data());
      rms[d] = sigma;
      if (!(sigma > c.min_rms) || !std::isfinite(sigma)) continue;
      // 4-6. Boxcars from the prefix sum, normalised per width, peaks.
      s.prefix[0] = 0;
      for (std::int64_t t = 0; t < n; ++t)
        s.prefix[t + 1] = s.prefix[t] + s.residual[t];
      const int widest = widest_boxcar(c, n, d);
      for (int w : widths_) {
        if (w > widest) break;
        boxcar_snr(s.prefix.data(), n, w, sigma, s.snr.data());
        const double rho = normalise_boxcar(s.snr.data(), n, w, s.work.data());
        if (!(rho > 0) || !std::isfinite(rho)) continue;
        find_peaks(s.snr.data(), n, w, c.snr_min, own_begin, own_end,
                   static_cast<std::int32_t>(d) + dm_offset, sample_offset, s.peaks);
      }
    }
    for (auto& s : scratch_)
      peaks.insert(peaks.end(), s.peaks.begin(), s.peaks.end());
  }

 private:
  struct Scratch {
    std::vector<float> residual, baseline, work, snr;
    std::vector<double> prefix;
    std::vector<Peak> peaks;
  };
  int threads_;
  std::vector<int> widths_;
  int levels_;
  std::vector<Scratch> scratch_;
};

}  // namespace

Workspace estimate_cpu_search_workspace(const SearchConfig& c) {
  const std::int64_t threads = c.threads > 0 ? c.threads : omp_get_max_threads();
  return {threads * (5 * c.nsamples * static_cast<std::int64_t>(sizeof(float)) +
                     (c.nsamples + 1) * static_cast<std::int64_t>(sizeof(double))),
          0};
}

std::unique_ptr<SearchExecutor> make_cpu_search_executor(const SearchConfig& config) {
  return std::make_unique<CpuSearchExecutor>(config);
}

}  // namespace warpbeam::search::detail
