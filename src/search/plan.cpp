// SearchPlan: validation, the choice of executor and the ordering of the peaks.
#include <algorithm>
#include <bit>
#include <cmath>

#include "search/executor.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search {

void SearchConfig::validate() const {
  require_range<std::int64_t>("ndms", ndms, 1, std::int64_t{1} << 31);
  require_range<std::int64_t>("nsamples", nsamples, 1, std::int64_t{1} << 40);
  if (!(tsamp_s > 0) || !std::isfinite(tsamp_s))
    fail(ErrorCategory::invalid_argument, "tsamp = {} s must be > 0", tsamp_s);
  if (!(baseline_s > 0) || !std::isfinite(baseline_s))
    fail(ErrorCategory::invalid_argument, "baseline = {} s must be > 0", baseline_s);
  require_range("boxcar_max", boxcar_max, 1, 1 << 24);
  if (!std::has_single_bit(static_cast<unsigned>(boxcar_max)))
    fail(ErrorCategory::invalid_argument, "boxcar_max = {} must be a power of 2", boxcar_max);
  if (!(snr_min > 0) || !std::isfinite(snr_min))
    fail(ErrorCategory::invalid_argument, "snr_min = {} must be > 0", snr_min);
  if (!(min_rms >= 0)) fail(ErrorCategory::invalid_argument, "min_rms = {} must be >= 0", min_rms);
  require_range<std::int64_t>("max_peaks", max_peaks, 1, std::int64_t{1} << 40);
  require_range("threads", threads, 0, 4096);
  if (!max_width.empty() && static_cast<std::int64_t>(max_width.size()) != ndms)
    fail(ErrorCategory::invalid_argument, "max_width has {} entries for {} DM trials",
         max_width.size(), ndms);
}

std::vector<int> SearchConfig::widths() const {
  std::vector<int> w;
  for (int x = 1; x <= boxcar_max; x *= 2)
    w.push_back(x);
  return w;
}

std::int64_t SearchConfig::baseline_window() const {
  return std::max<std::int64_t>(1, std::llround(baseline_s / tsamp_s));
}

namespace detail {
class SearchExecutor;
}

SearchPlan::SearchPlan(SearchConfig config, Backend backend)
    : config_(std::move(config)), backend_(resolve_backend(backend)) {
  config_.validate();
  if (backend_ == Backend::cuda) {
#ifdef WARPBEAM_HAVE_CUDA
    exec_ = detail::make_cuda_search_executor(config_);
#endif
  } else {
    exec_ = detail::make_cpu_search_executor(config_);
  }
  rms_.assign(static_cast<std::size_t>(config_.ndms), 0.0);
}

SearchPlan::~SearchPlan() = default;
SearchPlan::SearchPlan(SearchPlan&&) noexcept = default;
SearchPlan& SearchPlan::operator=(SearchPlan&&) noexcept = default;

const std::vector<double>& SearchPlan::last_rms() const {
  return rms_;
}

Workspace SearchPlan::workspace() const {
  return exec_->workspace();
}

Workspace SearchPlan::estimate_workspace(const SearchConfig& config, Backend backend) {
  return resolve_backend(backend) == Backend::cuda ? detail::estimate_cuda_search_workspace(config)
                                                   : detail::estimate_cpu_search_workspace(config);
}

#ifndef WARPBEAM_HAVE_CUDA
Workspace detail::estimate_cuda_search_workspace(const SearchConfig&) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

void SearchPlan::execute(View<const float, 2> plane, std::int64_t own_begin, std::int64_t own_end,
                         std::int32_t dm_offset, std::int64_t sample_offset,
                         std::vector<Peak>& peaks, const Stream* stream) const {
  const Space space = backend_ == Backend::cuda ? Space::device : Space::host;
  require_view(plane, {config_.ndms, config_.nsamples}, space, "search plane");
  const std::size_t first = peaks.size();
  exec_->execute(config_, plane.data, own_begin, own_end, dm_offset, sample_offset, peaks, rms_,
                 stream);
  detail::finish_plane_peaks(peaks, first, config_.max_peaks);
}

void detail::finish_plane_peaks(std::vector<Peak>& peaks, std::size_t first,
                                std::int64_t max_peaks) {
  auto by_position = [](const Peak& a, const Peak& b) {
    if (a.dm_trial != b.dm_trial) return a.dm_trial < b.dm_trial;
    if (a.filter != b.filter) return a.filter < b.filter;
    return a.sample < b.sample;
  };
  const auto begin = peaks.begin() + static_cast<std::ptrdiff_t>(first);
  const auto count = static_cast<std::int64_t>(peaks.size() - first);
  if (count > max_peaks) {
    std::sort(begin, peaks.end(), [&](const Peak& a, const Peak& b) {
      if (a.snr != b.snr) return a.snr > b.snr;
      return by_position(a, b);
    });
    peaks.resize(first + static_cast<std::size_t>(max_peaks));
    warnf("{} peaks in one plane: only the {} brightest are kept (max_peaks)", count, max_peaks);
  }
  std::sort(peaks.begin() + static_cast<std::ptrdiff_t>(first), peaks.end(), by_position);
}

}  // namespace warpbeam::search
