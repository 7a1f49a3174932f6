#pragma once
// Internal: the backend half of the multi-beam pipeline (warpbeam/pipeline.hpp). The driver
// (pipeline.cpp) decides when a gulp is complete and clusters the peaks; a BeamStore owns the
// beamformer, the buffer of beam rows and the per-gulp search on its backend:
//   buffer  [beam][capacity rows][nchans] float32 (host for cpu, device for cuda); row 0 is the
//           first row of the next gulp to search (the driver shifts it after each gulp);
//   append_block   beamform one voltage block and write its rows at row `at` of every beam;
//   search_gulp    clean, dedisperse and search rows [0, rows) of every beam as gulp g;
//   shift          move rows [drop, drop + keep) to [0, keep).
// pipeline_cpu.cpp and pipeline_cuda.cpp implement it.
#include <complex>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "search/pipeline.hpp"
#include "warpbeam/beamform.hpp"

namespace warpbeam::pipeline::detail {

/// Receives the peaks of one beam for one gulp (in beam order within a gulp).
using BeamPeakSink = std::function<void(int beam, search::detail::GulpPeaks&&)>;

struct StoreSetup {
  beamform::BeamformConfig beamform;  ///< nsamples = voltage samples per block
  const search::detail::FileSearchLayout* layout = nullptr;
  std::int64_t capacity_rows = 0;  ///< beam rows the buffer holds per beam
  int device = 0;
  int streams = 2;  ///< cuda: search streams (2: one beam's RFI overlaps the other's search)
};

/// Byte counters (cuda; zero on the CPU).
struct StoreCounters {
  std::int64_t to_device = 0, from_device = 0, device_to_device = 0;
};

class BeamStore {
 public:
  virtual ~BeamStore() = default;
  virtual beamform::Algorithm algorithm() const = 0;
  /// Beamforms `block` (host, [chan][time][antenna][pol]) and writes its beam rows at row `at`.
  /// New weights ([nchans][npol][nbeams][nantennas]) first when `weights` is not null.
  virtual void append_block(const std::uint8_t* block, std::size_t bytes,
                            const std::vector<std::complex<float>>* weights, std::int64_t at) = 0;
  /// Returns when the `block` of the last append_block may be reused by the caller (a store may
  /// read a pinned block by DMA after append_block returned, so that the copies of several
  /// devices overlap).
  virtual void wait_input() {}
  virtual void search_gulp(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) = 0;
  virtual void shift(std::int64_t drop, std::int64_t keep) = 0;
  virtual StoreCounters counters() const = 0;
  virtual std::int64_t buffer_bytes() const = 0;
};

std::unique_ptr<BeamStore> make_cpu_store(const StoreSetup& setup,
                                          const std::vector<std::complex<float>>& weights);
/// CUDA builds only (throws unsupported otherwise).
std::unique_ptr<BeamStore> make_cuda_store(const StoreSetup& setup,
                                           const std::vector<std::complex<float>>& weights);

}  // namespace warpbeam::pipeline::detail
