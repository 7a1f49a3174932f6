#pragma once
// Internal: the kernel behind a SearchPlan, one per backend (cpu.cpp now; a CUDA executor in
// issue 3). Each follows the stage definitions of warpbeam/search.hpp.
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
};

std::unique_ptr<SearchExecutor> make_cpu_search_executor(const SearchConfig& config);

}  // namespace warpbeam::search::detail
