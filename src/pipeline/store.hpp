#pragma once
// Internal: the backend half of the multi-beam pipeline (warpbeam/pipeline.hpp). The driver
// (pipeline.cpp) splits the work over workers (devices, or MPI ranks) and decides when a gulp is
// complete and clusters the peaks; a BeamStore is one worker: it forms the beams of its sub-band
// of channels and keeps and searches its share of the beams over every channel:
//   formed  [formed beam][nb][sub-band channel] float32: the beams of the last block, over this
//           worker's channels (the beamformer's output);
//   buffer  [stored beam][capacity rows][nchans] float32 (host for cpu, device for cuda); row 0 is
//           the first row of the next gulp to search (the driver shifts it after each gulp);
//   form_block     beamform one block of the worker's sub-band into `formed`;
//   send_rows      formed beams -> a store's buffer (its own, another device's: a peer copy);
//   export_rows / import_rows  the same through host memory (between MPI ranks);
//   search_gulp    clean, dedisperse and search rows [0, rows) of every stored beam as gulp g
//                  (the search's GulpSearcher, src/search/gulp_searcher.hpp, one per store);
//   shift          move rows [drop, drop + keep) to [0, keep).
// Splitting channels (each worker ingests a sub-band, forms every beam there, and the beams'
// sub-band rows cross to the worker that searches them: a corner turn) or beams (each worker
// ingests every channel and forms and searches its own beams) are two partitions of the same
// exchange. cpu_store.cpp and file_search_cuda.cpp implement it.
#include <complex>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "search/gulp_searcher.hpp"
#include "warpbeam/beamform.hpp"

namespace warpbeam::pipeline::detail {

/// Receives the peaks of one beam for one gulp (in beam order within a gulp).
using BeamPeakSink = std::function<void(int beam, search::GulpPeaks&&)>;

struct StoreSetup {
  /// The beams this store forms: nchans = its sub-band's channels, nbeams = the beams it forms,
  /// nsamples = voltage samples per block.
  beamform::BeamformConfig beamform;
  const search::FileSearchPlan* plan = nullptr;  ///< the beams' search, every channel (header)
  int stored_beams = 0;            ///< beams it keeps and searches (over every channel)
  std::int64_t capacity_rows = 0;  ///< beam rows the buffer holds per beam
  int device = 0;                  ///< cuda (the search's lanes: plan->options().gpu_streams)
};

/// Byte counters (cuda; zero on the CPU).
struct StoreCounters {
  std::int64_t to_device = 0, from_device = 0, device_to_device = 0;
  std::int64_t between_devices = 0;  ///< rows sent to another device's buffer (peer copies)
};

class BeamStore {
 public:
  virtual ~BeamStore() = default;
  virtual beamform::Algorithm algorithm() const = 0;
  /// Beamforms `block` (host, [sub-band chan][time][antenna][pol], this store's channels) into
  /// `formed`. New weights ([sub-band chans][npol][formed beams][nantennas]) first when
  /// `weights` is not null.
  virtual void form_block(const std::uint8_t* block, std::size_t bytes,
                          const std::vector<std::complex<float>>* weights) = 0;
  /// `formed` = zeros: the beams of a block of zeros, without beamforming it (issued in order
  /// with form_block's work; weights are kept for the next block).
  virtual void zero_block() = 0;
  /// Returns when the `block` of the last form_block may be reused by the caller (a store may
  /// read a pinned block by DMA after form_block returned, so that the copies of several
  /// devices overlap).
  virtual void wait_input() {}
  /// Formed beams [f0, f1) -> `dest`'s stored beams [s0, s0 + f1 - f0), channels [c0, c0 + this
  /// store's sub-band), rows [at, at + nb). Ordered after dest's earlier work on its buffer and
  /// before its later work. Default: dest.import_rows() from export_rows()'s host copy.
  virtual void send_rows(BeamStore& dest, int f0, int f1, int s0, int c0, std::int64_t at);
  /// Formed beams [f0, f1) -> host `out` [f1 - f0][nb][sub-band chans]; returns when written.
  virtual void export_rows(int f0, int f1, float* out) = 0;
  /// Host rows `in` [s1 - s0][nb][nch] -> stored beams [s0, s1), channels [c0, c0 + nch), rows
  /// [at, at + nb); returns when `in` may be reused.
  virtual void import_rows(const float* in, int s0, int s1, int c0, int nch, std::int64_t at) = 0;
  virtual std::int64_t formed_rows() const = 0;  ///< nb: beam rows per block
  virtual int subband_channels() const = 0;
  virtual void search_gulp(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) = 0;
  virtual void shift(std::int64_t drop, std::int64_t keep) = 0;
  virtual StoreCounters counters() const = 0;
  /// The search's stage times so far (its GulpSearcher's, the ones it replaced included).
  virtual search::StageTimes search_times() const = 0;
  /// A new GulpSearcher for the plan as it is now (an open-ended stream's plan is replaced by
  /// its true length's at the end: its chunk and plane length may differ). Between gulps only.
  virtual void renew_searcher() = 0;
  virtual std::int64_t buffer_bytes() const = 0;
};

std::unique_ptr<BeamStore> make_cpu_store(const StoreSetup& setup,
                                          const std::vector<std::complex<float>>& weights);
/// CUDA builds only (throws unsupported otherwise).
std::unique_ptr<BeamStore> make_cuda_store(const StoreSetup& setup,
                                           const std::vector<std::complex<float>>& weights);

}  // namespace warpbeam::pipeline::detail
