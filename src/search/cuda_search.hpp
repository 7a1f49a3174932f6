#pragma once
// Internal: the GPU search's host side (plain C++; CUDA builds only). Two building blocks, one of
// each per CUDA stream, shared by the CUDA SearchExecutor (SearchPlan) and the streaming file
// search (file_search_cuda.cpp):
//   CudaPlaneSearcher  stages 1-7 of warpbeam/search.hpp on DM-time planes that live on the GPU;
//                      only the peaks come back;
//   CudaGulpCleaner    the RFI stage of a gulp on the GPU: packed samples in, cleaned float32
//                      channel rows out (the channel-major input of the dedispersion).
#include <cstdint>
#include <memory>
#include <vector>

#include "search/cuda_kernels.hpp"
#include "warpbeam/device.hpp"
#include "warpbeam/search.hpp"

namespace warpbeam::search::detail {

/// DM trials searched together (one thread block each); the scratch is sized for this many.
inline constexpr int kDefaultSearchBatch = 512;
/// Peaks the device buffer holds at first (it grows when a plane finds more).
inline constexpr std::int64_t kInitialPeakCapacity = std::int64_t{1} << 16;

/// Device bytes of a CudaPlaneSearcher for planes of up to `max_nsamples` samples and up to
/// `max_ndms` trials (scratch, the per-trial arrays and the initial peak buffer).
std::int64_t plane_searcher_bytes(std::int64_t max_nsamples, std::int64_t max_ndms, int batch = 0);

class CudaPlaneSearcher {
 public:
  /// Scratch for planes of up to `max_nsamples` samples, searched `batch` trials at a time
  /// (0: kDefaultSearchBatch). Allocates and poisons (NaN) its scratch.
  explicit CudaPlaneSearcher(std::int64_t max_nsamples, int batch = 0);
  ~CudaPlaneSearcher();
  CudaPlaneSearcher(const CudaPlaneSearcher&) = delete;
  CudaPlaneSearcher& operator=(const CudaPlaneSearcher&) = delete;

  /// Sizes the per-trial arrays for planes of up to `ndms` trials (enqueue() does it too, but a
  /// resize there waits for the device: call it first in a pipeline).
  void reserve(std::int64_t ndms);
  /// Zeroes the peak counter on `stream`: call before the first plane whose peaks collect()
  /// should return.
  void begin(const Stream* stream);
  /// Enqueues the search of a plane [c.ndms][c.nsamples] (device memory) on `stream` (the
  /// arguments as SearchPlan::execute). Its peaks accumulate in the device buffer.
  void enqueue(const SearchConfig& c, const float* plane, std::int64_t own_begin,
               std::int64_t own_end, std::int32_t dm_offset, std::int64_t sample_offset,
               const Stream* stream);
  /// Enqueues the copy of the peak count to the host: after the last enqueue() of a batch.
  void end(const Stream* stream);
  /// Waits for `stream`; appends the peaks found since begin() (in no particular order) to
  /// `out` and returns true; or, when more were found than the buffer holds, grows the buffer,
  /// appends nothing and returns false: the caller enqueues the same planes again.
  bool collect(const Stream* stream, std::vector<Peak>& out);
  /// The robust RMS of plane rows [0, ndms) of the last plane enqueued (synchronous).
  void copy_rms(std::int64_t ndms, std::vector<double>& rms) const;

  /// Bytes copied from the device by collect() so far (peak counts and peaks).
  std::int64_t bytes_from_device() const { return bytes_from_device_; }
  std::int64_t max_nsamples() const { return max_n_; }
  /// Device bytes it holds now (plane_searcher_bytes() at first; the per-trial arrays and the
  /// peak buffer grow with the planes).
  std::int64_t device_bytes() const;

  /// Tests: the per-stage kernels on the rows [first, first + count) of a plane, with the
  /// searcher's scratch. Each writes float32 [count][c.nsamples] to `out` (device).
  void test_baseline(const SearchConfig& c, const float* plane, int first, int count, float* out);
  void test_sigma(const SearchConfig& c, const float* plane, int first, int count,
                  std::vector<double>& sigma);
  void test_snr(const SearchConfig& c, const float* plane, int first, int count, int width,
                float* out, std::vector<double>& rho);

 private:
  struct Tables;
  TrialBatch batch_args(const SearchConfig& c, const float* plane, int first, int count);
  const std::int32_t* widest_table(const SearchConfig& c);

  std::int64_t max_n_;
  int batch_;
  std::int64_t a_stride_, b_stride_;
  DeviceArray<float> level_a_, level_b_, ylev_, yprev_;
  DeviceArray<double> prefix_, rho_, sigma_;
  DeviceArray<DevicePeak> peaks_;
  DeviceArray<unsigned long long> count_;
  PinnedArray<unsigned long long> count_host_;
  std::vector<DevicePeak> staging_;
  std::unique_ptr<Tables> tables_;
  std::int64_t bytes_from_device_ = 0;
};

/// Device bytes of a CudaGulpCleaner (see its constructor).
std::int64_t gulp_cleaner_bytes(int nchans, std::int64_t max_rows, std::int64_t row_bytes);

class CudaGulpCleaner {
 public:
  /// Buffers for gulps of up to `max_rows` time samples of `nchans` channels of `nbits`.
  CudaGulpCleaner(int nchans, int nbits, bool is_signed, std::int64_t max_rows);
  CudaGulpCleaner(const CudaGulpCleaner&) = delete;
  CudaGulpCleaner& operator=(const CudaGulpCleaner&) = delete;

  /// The cleaned rows [nchans][stride()] (valid samples: the last gulp's rows).
  float* data() const { return data_.data(); }
  std::int64_t stride() const { return stride_; }
  /// The device buffer of packed input rows [max_rows][row_bytes].
  std::uint8_t* raw() const { return raw_.data(); }
  std::size_t raw_bytes() const { return raw_.bytes(); }
  std::int64_t row_bytes() const { return row_bytes_; }

  /// Enqueues on `stream`: unpack and corner turn of `rows` packed rows (already in raw()), the
  /// per-channel statistics, and their copy to the host.
  void enqueue_stats(std::int64_t rows, const Stream* stream);
  /// Waits for the statistics, decides which channels to keep (as clean_filterbank()) and
  /// enqueues the cleaning (normalisation, zapping, zero-DM). Returns the report.
  RfiReport enqueue_clean(const RfiConfig& config, const Stream* stream);

  std::int64_t bytes_to_device() const { return bytes_to_device_; }
  std::int64_t bytes_from_device() const { return bytes_from_device_; }
  /// Device bytes it holds (gulp_cleaner_bytes()).
  std::int64_t device_bytes() const;

 private:
  int nchans_, nbits_;
  bool is_signed_;
  std::int64_t max_rows_, row_bytes_, stride_, a_stride_, b_stride_;
  std::int64_t rows_ = 0;
  DeviceArray<std::uint8_t> raw_, keep_;
  DeviceArray<float> data_, level_a_, level_b_, median_, scale_;
  DeviceArray<double> sigma_;
  PinnedArray<float> median_host_, scale_host_;
  PinnedArray<double> sigma_host_;
  PinnedArray<std::uint8_t> keep_host_;
  std::int64_t bytes_to_device_ = 0, bytes_from_device_ = 0;
};

}  // namespace warpbeam::search::detail
