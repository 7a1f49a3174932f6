#pragma once
// Internal: the kernel behind a SearchPlan, one per backend (cpu.cpp; cuda_search.cpp in CUDA
// builds). Each follows the stage definitions of warpbeam/search.hpp.
#include <cstdint>
#include <memory>
#include <vector>

#include "warpbeam/search.hpp"

namespace warpbeam::search::detail {

class SearchExecutor {
 public:
  virtual ~SearchExecutor() = default;
  /// plane: [ndms][nsamples] in the backend's memory; shapes already checked by the plan.
  /// Appends peaks (any order: the plan sorts them) and sets rms[d] for every trial.
  virtual void execute(const SearchConfig& config, const float* plane, std::int64_t own_begin,
                       std::int64_t own_end, std::int32_t dm_offset, std::int64_t sample_offset,
                       std::vector<Peak>& peaks, std::vector<double>& rms,
                       const Stream* stream) = 0;
  /// What the executor allocated (SearchPlan::workspace()).
  virtual Workspace workspace() const = 0;
};

std::unique_ptr<SearchExecutor> make_cpu_search_executor(const SearchConfig& config);
/// SearchPlan::estimate_workspace() on the CPU (cpu.cpp) and on CUDA (cuda_search.cpp).
Workspace estimate_cpu_search_workspace(const SearchConfig& config);
Workspace estimate_cuda_search_workspace(const SearchConfig& config);
/// The GPU executor (cuda_search.cpp; CUDA builds only): the plane in device memory, only the
/// peaks and the RMS come back.
std::unique_ptr<SearchExecutor> make_cuda_search_executor(const SearchConfig& config);

/// What SearchPlan::execute does with the peaks peaks[first ..] of one plane: when there are
/// more than max_peaks, keeps the brightest (S/N descending, then dm_trial, filter, sample) with
/// a warning; then sorts them by (dm_trial, filter, sample). The streaming GPU search applies it
/// to each plane's peaks too.
void finish_plane_peaks(std::vector<Peak>& peaks, std::size_t first, std::int64_t max_peaks);

}  // namespace warpbeam::search::detail
