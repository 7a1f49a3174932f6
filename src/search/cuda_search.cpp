// The GPU search's host side: CudaPlaneSearcher (stages 1-7 on planes in device memory),
// CudaGulpCleaner (the RFI stage of a gulp) and the CUDA SearchExecutor of SearchPlan. The
// kernels are in cuda_trial.cu, cuda_boxcar.cu and cuda_rfi.cu.
#include "search/cuda_search.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstddef>

#include "core/cuda_check.hpp"
#include "search/executor.hpp"
#include "search/rfi_rules.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::search::detail {

static_assert(kDevMadToSigma == kMadToSigma && kDevClipSigma == kClipSigma &&
                  kDevClipVarianceFactor == kClipVarianceFactor && kDevTreeStop == kTreeStop,
              "the device statistics must use the constants of warpbeam/search.hpp");
static_assert(kDevBaselinePasses == kBaselinePasses && kDevBaselineMaskSigma == kBaselineMaskSigma,
              "the device baseline must make search_baseline()'s passes");
static_assert(sizeof(DevicePeak) == sizeof(Peak) && offsetof(Peak, sample) == 16,
              "DevicePeak mirrors search::Peak");

namespace {

// Tree scratch of a series of n values: level 1 needs n / 5 floats, level 2 n / 25 (+ slack so
// that a stride is never 0).
std::int64_t a_stride_for(std::int64_t n) {
  return n / 5 + 4;
}
std::int64_t b_stride_for(std::int64_t n) {
  return n / 25 + 4;
}

// A non-finite value (all bits set: a NaN) in every scratch byte, so that a read of something
// never written shows up as a mismatch in the tests.
template <class T>
void poison(const DeviceArray<T>& a) {
  if (a.size()) device_memset(a.data(), 0xFF, a.bytes());
}

Peak to_peak(const DevicePeak& d) {
  Peak p;
  p.snr = d.snr;
  p.dm_trial = d.dm_trial;
  p.filter = d.filter;
  p.sample = d.sample;
  p.begin = d.begin;
  p.end = d.end;
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CudaPlaneSearcher
// ---------------------------------------------------------------------------------------------

// widest_boxcar() of every trial of a plane, uploaded once per distinct plane shape (the file
// search has a few: the chunks of DM trials x the first, middle and last gulp lengths).
struct CudaPlaneSearcher::Tables {
  struct Entry {
    std::vector<std::int32_t> host;
    DeviceArray<std::int32_t> device;
  };
  std::vector<Entry> entries;
};

std::int64_t plane_searcher_bytes(std::int64_t n, std::int64_t ndms, int batch) {
  const std::int64_t b = batch > 0 ? batch : kDefaultSearchBatch;
  return b * (3 * a_stride_for(n) + b_stride_for(n)) * 4 + b * (n + 1) * 8 + b * 8 + ndms * 12 +
         kInitialPeakCapacity * static_cast<std::int64_t>(sizeof(DevicePeak));
}

CudaPlaneSearcher::CudaPlaneSearcher(std::int64_t max_nsamples, int batch)
    : max_n_(max_nsamples),
      batch_(batch > 0 ? batch : kDefaultSearchBatch),
      a_stride_(a_stride_for(max_nsamples)),
      b_stride_(b_stride_for(max_nsamples)),
      count_host_(1),
      tables_(std::make_unique<Tables>()) {
  require_range<std::int64_t>("search plane samples", max_nsamples, 1, std::int64_t{1} << 40);
  const auto b = static_cast<std::size_t>(batch_);
  level_a_ = DeviceArray<float>(b * static_cast<std::size_t>(a_stride_));
  level_b_ = DeviceArray<float>(b * static_cast<std::size_t>(b_stride_));
  ylev_ = DeviceArray<float>(b * static_cast<std::size_t>(a_stride_));
  yprev_ = DeviceArray<float>(b * static_cast<std::size_t>(a_stride_));
  prefix_ = DeviceArray<double>(b * static_cast<std::size_t>(max_n_ + 1));
  rho_ = DeviceArray<double>(b);
  peaks_ = DeviceArray<DevicePeak>(static_cast<std::size_t>(kInitialPeakCapacity));
  count_ = DeviceArray<unsigned long long>(1);
  poison(level_a_);
  poison(level_b_);
  poison(ylev_);
  poison(yprev_);
  poison(prefix_);
  poison(rho_);
  device_memset(count_.data(), 0, count_.bytes());
}

CudaPlaneSearcher::~CudaPlaneSearcher() = default;

std::int64_t CudaPlaneSearcher::device_bytes() const {
  std::int64_t b = 0;
  for (const auto& e : tables_->entries)
    b += static_cast<std::int64_t>(e.device.bytes());
  return b + static_cast<std::int64_t>(level_a_.bytes() + level_b_.bytes() + ylev_.bytes() +
                                       prefix_.bytes() + rho_.bytes() + sigma_.bytes() +
                                       peaks_.bytes() + count_.bytes());
}

void CudaPlaneSearcher::reserve(std::int64_t ndms) {
  if (static_cast<std::int64_t>(sigma_.size()) >= ndms) return;
  // Only when a plane has more trials than any before (the streaming search sizes it first).
  sigma_ = DeviceArray<double>(static_cast<std::size_t>(ndms));
  poison(sigma_);
}

const std::int32_t* CudaPlaneSearcher::widest_table(const SearchConfig& c) {
  std::vector<std::int32_t> w(static_cast<std::size_t>(c.ndms));
  for (std::int64_t d = 0; d < c.ndms; ++d)
    w[static_cast<std::size_t>(d)] = widest_boxcar(c, c.nsamples, d);
  for (const auto& e : tables_->entries)
    if (e.host == w) return e.device.data();
  // A new shape: uploaded synchronously into a new array (arrays in use by queued kernels are
  // never overwritten).
  Tables::Entry e;
  e.device = DeviceArray<std::int32_t>(w.size());
  copy_bytes(e.device.data(), w.data(), e.device.bytes());
  e.host = std::move(w);
  tables_->entries.push_back(std::move(e));
  return tables_->entries.back().device.data();
}

TrialBatch CudaPlaneSearcher::batch_args(const SearchConfig& c, const float* plane, int first,
                                         int count) {
  if (c.nsamples > max_n_)
    fail(ErrorCategory::invalid_argument, "a plane of {} samples exceeds the searcher's {}",
         c.nsamples, max_n_);
  reserve(c.ndms);
  TrialBatch b;
  b.plane = plane;
  b.n = c.nsamples;
  b.first = first;
  b.count = count;
  b.levels = baseline_levels(c.baseline_window(), c.nsamples);
  b.ylen = c.nsamples;
  double step = 1;
  for (int k = 0; k < b.levels; ++k) {
    b.ylen /= 5;
    step *= 5;
  }
  if (b.levels == 0) b.ylen = 1;  // the lower median, held everywhere
  b.step = step;
  b.min_rms = c.min_rms;
  b.sigma = sigma_.data();
  b.widest = widest_table(c);
  b.s.level_a = level_a_.data();
  b.s.level_b = level_b_.data();
  b.s.ylev = ylev_.data();
  b.s.yprev = yprev_.data();
  b.s.prefix = prefix_.data();
  b.s.a_stride = a_stride_;
  b.s.b_stride = b_stride_;
  return b;
}

void CudaPlaneSearcher::begin(const Stream* stream) {
  device_memset(count_.data(), 0, count_.bytes(), stream);
}

void CudaPlaneSearcher::enqueue(const SearchConfig& c, const float* plane, std::int64_t own_begin,
                                std::int64_t own_end, std::int32_t dm_offset,
                                std::int64_t sample_offset, const Stream* stream) {
  const auto widths = c.widths();
  for (std::int64_t first = 0; first < c.ndms; first += batch_) {
    const int count = static_cast<int>(std::min<std::int64_t>(batch_, c.ndms - first));
    const TrialBatch b = batch_args(c, plane, static_cast<int>(first), count);
    launch_search_baseline(b, stream);
    launch_prefix(b, stream);
    int widest = 0;
    for (int d = 0; d < count; ++d)
      widest = std::max(widest, widest_boxcar(c, c.nsamples, first + d));
    WidthArgs w;
    w.rho = rho_.data();
    w.snr_min = c.snr_min;
    w.own_begin = own_begin;
    w.own_end = own_end;
    w.dm_offset = dm_offset;
    w.sample_offset = sample_offset;
    w.peaks = peaks_.data();
    w.count = count_.data();
    w.capacity = peaks_.size();
    for (int width : widths) {
      if (width > widest) break;
      w.width = width;
      w.filter = std::countr_zero(static_cast<unsigned>(width));
      launch_boxcar_rms(b, w, stream);
      launch_peaks(b, w, stream);
    }
  }
}

void CudaPlaneSearcher::end(const Stream* stream) {
  copy_bytes(count_host_.data(), count_.data(), sizeof(unsigned long long), stream);
}

bool CudaPlaneSearcher::collect(const Stream* stream, std::vector<Peak>& out) {
  WB_CUDA_CHECK(cudaStreamSynchronize(WB_STREAM(stream)));
  const unsigned long long found = count_host_[0];
  bytes_from_device_ += sizeof(unsigned long long);
  if (found > peaks_.size()) {
    // Grow (with room) and let the caller search the planes again.
    const auto want = static_cast<std::size_t>(found + found / 4 + 1024);
    peaks_ = DeviceArray<DevicePeak>(want);
    return false;
  }
  const auto n = static_cast<std::size_t>(found);
  if (staging_.size() < n) staging_.resize(n);
  if (n) copy_bytes(staging_.data(), peaks_.data(), n * sizeof(DevicePeak));
  bytes_from_device_ += static_cast<std::int64_t>(n * sizeof(DevicePeak));
  out.reserve(out.size() + n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(to_peak(staging_[i]));
  return true;
}

void CudaPlaneSearcher::copy_rms(std::int64_t ndms, std::vector<double>& rms) const {
  rms.resize(static_cast<std::size_t>(ndms));
  if (ndms) copy_bytes(rms.data(), sigma_.data(), rms.size() * sizeof(double));
}

void CudaPlaneSearcher::test_baseline(const SearchConfig& c, const float* plane, int first,
                                      int count, float* out) {
  const TrialBatch b = batch_args(c, plane, first, count);
  launch_search_baseline(b, nullptr);
  launch_write_baseline(b, out, nullptr);
  WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void CudaPlaneSearcher::test_sigma(const SearchConfig& c, const float* plane, int first, int count,
                                   std::vector<double>& sigma) {
  const TrialBatch b = batch_args(c, plane, first, count);
  launch_search_baseline(b, nullptr);
  WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  sigma.resize(static_cast<std::size_t>(count));
  copy_bytes(sigma.data(), sigma_.data() + first, sigma.size() * sizeof(double));
}

void CudaPlaneSearcher::test_snr(const SearchConfig& c, const float* plane, int first, int count,
                                 int width, float* out, std::vector<double>& rho) {
  const TrialBatch b = batch_args(c, plane, first, count);
  launch_search_baseline(b, nullptr);
  launch_prefix(b, nullptr);
  WidthArgs w;
  w.width = width;
  w.filter = std::countr_zero(static_cast<unsigned>(width));
  w.rho = rho_.data();
  launch_boxcar_rms(b, w, nullptr);
  launch_write_snr(b, w, out, nullptr);
  WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  rho.resize(static_cast<std::size_t>(count));
  copy_bytes(rho.data(), rho_.data(), rho.size() * sizeof(double));
}

// ---------------------------------------------------------------------------------------------
// CudaGulpCleaner
// ---------------------------------------------------------------------------------------------

namespace {
// Row stride of the cleaned channel rows: a multiple of 4 floats (16-byte rows) past max_rows.
std::int64_t clean_stride(std::int64_t rows) {
  return (rows + 4 + 3) / 4 * 4;
}
}  // namespace

std::int64_t gulp_cleaner_bytes(int nchans, std::int64_t max_rows, std::int64_t row_bytes) {
  const std::int64_t c = nchans;
  return max_rows * row_bytes + c * clean_stride(max_rows) * 4 +
         c * (a_stride_for(max_rows) + b_stride_for(max_rows)) * 4 + c * 21;
}

std::int64_t CudaGulpCleaner::device_bytes() const {
  return static_cast<std::int64_t>(raw_.bytes() + keep_.bytes() + data_.bytes() + level_a_.bytes() +
                                   level_b_.bytes() + median_.bytes() + scale_.bytes() +
                                   sigma_.bytes());
}

CudaGulpCleaner::CudaGulpCleaner(int nchans, int nbits, bool is_signed, std::int64_t max_rows)
    : nchans_(nchans),
      nbits_(nbits),
      is_signed_(is_signed),
      max_rows_(max_rows),
      row_bytes_(static_cast<std::int64_t>(packed_bytes(nbits, static_cast<std::size_t>(nchans)))),
      stride_(clean_stride(max_rows)),
      a_stride_(a_stride_for(max_rows)),
      b_stride_(b_stride_for(max_rows)) {
  require_range("nchans", nchans, 1, 1 << 20);
  require_range<std::int64_t>("gulp rows", max_rows, 1, std::int64_t{1} << 40);
  if (!supported_nbits(nbits))
    fail(ErrorCategory::invalid_argument, "nbits = {} is not one of 1, 2, 4, 8, 16, 32", nbits);
  const auto c = static_cast<std::size_t>(nchans);
  raw_ = DeviceArray<std::uint8_t>(static_cast<std::size_t>(max_rows * row_bytes_));
  data_ = DeviceArray<float>(c * static_cast<std::size_t>(stride_));
  level_a_ = DeviceArray<float>(c * static_cast<std::size_t>(a_stride_));
  level_b_ = DeviceArray<float>(c * static_cast<std::size_t>(b_stride_));
  median_ = DeviceArray<float>(c);
  scale_ = DeviceArray<float>(c);
  sigma_ = DeviceArray<double>(c);
  keep_ = DeviceArray<std::uint8_t>(c);
  median_host_ = PinnedArray<float>(c);
  scale_host_ = PinnedArray<float>(c);
  sigma_host_ = PinnedArray<double>(c);
  keep_host_ = PinnedArray<std::uint8_t>(c);
  poison(raw_);
  poison(data_);  // the padding past a gulp's rows stays NaN: it feeds no valid output
  poison(level_a_);
  poison(level_b_);
}

namespace {
RfiArgs rfi_args(const CudaGulpCleaner& g, std::int64_t rows, int nchans, int nbits,
                 bool is_signed) {
  RfiArgs a;
  a.raw = g.raw();
  a.row_bytes = g.row_bytes();
  a.rows = rows;
  a.nchans = nchans;
  a.nbits = nbits;
  a.is_signed = is_signed;
  a.data = g.data();
  a.stride = g.stride();
  return a;
}
}  // namespace

void CudaGulpCleaner::enqueue_stats(std::int64_t rows, const Stream* stream) {
  if (rows < 1 || rows > max_rows_)
    fail(ErrorCategory::invalid_argument, "a gulp of {} rows (buffers for {})", rows, max_rows_);
  rows_ = rows;
  RfiArgs a = rfi_args(*this, rows, nchans_, nbits_, is_signed_);
  a.level_a = level_a_.data();
  a.level_b = level_b_.data();
  a.a_stride = a_stride_;
  a.b_stride = b_stride_;
  a.median = median_.data();
  a.sigma = sigma_.data();
  launch_rfi_unpack(a, stream);
  launch_rfi_stats(a, stream);
  copy_bytes(median_host_.data(), median_.data(), median_.bytes(), stream);
  copy_bytes(sigma_host_.data(), sigma_.data(), sigma_.bytes(), stream);
  bytes_from_device_ += static_cast<std::int64_t>(median_.bytes() + sigma_.bytes());
}

RfiReport CudaGulpCleaner::enqueue_clean(const RfiConfig& config, const Stream* stream) {
  config.validate(nchans_);
  WB_CUDA_CHECK(cudaStreamSynchronize(WB_STREAM(stream)));  // the statistics are on the host
  const auto c = static_cast<std::size_t>(nchans_);
  RfiReport r;
  r.median.assign(median_host_.data(), median_host_.data() + c);
  r.sigma.assign(sigma_host_.data(), sigma_host_.data() + c);
  decide_channels(r, config);
  for (std::size_t k = 0; k < c; ++k) {
    keep_host_[k] = r.keep[k];
    scale_host_[k] = r.keep[k] ? static_cast<float>(1.0 / r.sigma[k]) : 0.0f;
  }
  copy_bytes(keep_.data(), keep_host_.data(), keep_.bytes(), stream);
  copy_bytes(scale_.data(), scale_host_.data(), scale_.bytes(), stream);
  bytes_to_device_ += static_cast<std::int64_t>(keep_.bytes() + scale_.bytes());
  RfiArgs a = rfi_args(*this, rows_, nchans_, nbits_, is_signed_);
  a.median = median_.data();
  a.scale = scale_.data();
  a.keep = keep_.data();
  a.kept = r.kept();
  a.zero_dm = config.zero_dm;
  launch_rfi_clean(a, stream);
  return r;
}

// ---------------------------------------------------------------------------------------------
// The CUDA SearchExecutor: one plane, synchronously
// ---------------------------------------------------------------------------------------------

namespace {

class CudaSearchExecutor final : public SearchExecutor {
 public:
  explicit CudaSearchExecutor(const SearchConfig& c) : searcher_(c.nsamples) {}

  Workspace workspace() const override { return {0, searcher_.device_bytes()}; }

  void execute(const SearchConfig& c, const float* plane, std::int64_t own_begin,
               std::int64_t own_end, std::int32_t dm_offset, std::int64_t sample_offset,
               std::vector<Peak>& peaks, std::vector<double>& rms, const Stream* stream) override {
    for (;;) {
      searcher_.begin(stream);
      searcher_.enqueue(c, plane, own_begin, own_end, dm_offset, sample_offset, stream);
      searcher_.end(stream);
      if (searcher_.collect(stream, peaks)) break;
    }
    searcher_.copy_rms(c.ndms, rms);
  }

 private:
  CudaPlaneSearcher searcher_;
};

}  // namespace

Workspace estimate_cuda_search_workspace(const SearchConfig& c) {
  return {0, plane_searcher_bytes(c.nsamples, c.ndms)};
}

std::unique_ptr<SearchExecutor> make_cuda_search_executor(const SearchConfig& config) {
  return std::make_unique<CudaSearchExecutor>(config);
}

}  // namespace warpbeam::search::detail
