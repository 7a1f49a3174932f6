// The multi-beam pipeline's CUDA store: the beams never leave the GPU.
//
// Streams:
//   copy      voltage block i: pinned host slot i % 2 -> device slot i % 2 (waits until the
//             beamformer has consumed what the slot held, block i - 2);
//   beamform  waits for the copy, beamforms the sub-band into `formed` [beam][nb][sub-band chan];
//             the rows of every beam are then sent to the buffer [beam][capacity][chan] of the
//             store that searches it (one strided 3-D copy per destination: its own buffer, or a
//             peer copy to another device's, ordered with events on both beamform streams);
//             shifts the buffer after a gulp;
//   search 0/1  per beam of a complete gulp, the search's CUDA GulpSearcher (src/search/
//             gulp_searcher_cuda.cpp), one beam after the other on its two lanes: device copy of
//             the beam's rows into the lane's input (float32 rows as nbits 32), RFI statistics
//             (back to the host: 12 bytes per channel), cleaning, dedispersion of each DM chunk
//             from channel-major rows, the plane search; only peaks come back. While the host
//             waits for one beam's statistics the other lane searches the previous beam (as the
//             file search overlaps gulps).
// So block i + 1's copy overlaps block i's beamforming, and the host reads the next block from
// disk while both run. search_gulp() returns when every beam of the gulp is searched (its peaks
// are on the host); the buffer shift that follows is ordered after it.
#include <cuda_runtime.h>  // make_cudaPitchedPtr, make_cudaPos, make_cudaExtent
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/cuda_check.hpp"
#include "pipeline/store.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::pipeline::detail {

namespace {

void wait_event(const Stream& s, const Event& e) {
  WB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()),
                                    static_cast<cudaEvent_t>(e.handle()), 0));
}

// Copies `height` rows of `width` bytes between device buffers with row pitches.
void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
             std::size_t height, const Stream& s) {
  WB_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                  static_cast<cudaStream_t>(s.handle())));
}

// Lets `from` read and write `to`'s memory directly (NVLink or PCIe peer to peer) when the
// devices allow it, once per pair; otherwise peer copies are staged by the driver.
void enable_peer_access(int from, int to) {
  static std::mutex lock;
  static std::set<std::pair<int, int>> done;
  const std::lock_guard<std::mutex> guard(lock);
  if (from == to || !done.insert({from, to}).second) return;
  int can = 0;
  WB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) return;
  set_device(from);
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();  // enabled earlier in this process: fine
  else
    WB_CUDA_CHECK(e);
}

// Makes `device` current; a store's first member, so that its streams and events (members) are
// created on its device.
struct OnDevice {
  explicit OnDevice(int device) { set_device(device); }
};

class CudaStore final : public BeamStore {
 public:
  CudaStore(const StoreSetup& s, const std::vector<std::complex<float>>& weights)
      : on_device_(s.device),
        search_(*s.plan),
        device_(s.device),
        nchans_(search_.header().nchans),
        nsub_(s.beamform.nchans),
        nformed_(s.beamform.nbeams),
        nbeams_(s.stored_beams),
        cap_(s.capacity_rows),
        nb_(s.beamform.nsamples_out()),
        block_bytes_(static_cast<std::size_t>(s.beamform.nchans * s.beamform.nsamples *
                                              s.beamform.row_bytes())) {
    plan_ = std::make_unique<beamform::BeamformPlan>(s.beamform, Backend::cuda);
    set_weights(weights);
    for (int i = 0; i < 2; ++i) {
      // host_[i] (staging of pageable blocks) is allocated on the first pageable block: pinned
      // input never needs it, and page-locking 2 blocks costs ~0.2 s of planning on B1.
      volt_[i] = DeviceArray<std::uint8_t>(block_bytes_);
      consumed_[i].record(&bf_stream_);  // nothing to wait for yet
    }
    beams_ = DeviceArray<float>(static_cast<std::size_t>(nformed_ * nb_ * nsub_));
    buffer_ = DeviceArray<float>(static_cast<std::size_t>(nbeams_ * cap_ * nchans_));
    device_memset(buffer_.data(), 0xFF, buffer_.bytes());  // NaN: a row never written shows
    // The beams' rows are on this device already: no host buffers for the search.
    searcher_ = search::GulpSearcher::make(search_, 0, search_.ndms(), s.device, false);
    device_synchronize();  // the poisoning (legacy stream) is done before the streams start
  }

  ~CudaStore() override {
    try {
      set_device(device_);
      bf_stream_.synchronize();
      copy_stream_.synchronize();
    } catch (...) {  // a failed stream already reported its error
    }
  }

  beamform::Algorithm algorithm() const override { return plan_->algorithm(); }

  std::int64_t formed_rows() const override { return nb_; }
  int subband_channels() const override { return nsub_; }

  void form_block(const std::uint8_t* block, std::size_t bytes,
                  const std::vector<std::complex<float>>* weights) override {
    if (bytes != block_bytes_)
      fail(ErrorCategory::invalid_argument, "a sub-band block of {} bytes (expected {})", bytes,
           block_bytes_);
    set_device(device_);  // this store's GPU (several stores: one per device)
    const int i = slot_;
    slot_ ^= 1;
    // A pinned block (the caller's DMA-able buffer) is copied straight from where it is, the
    // caller waiting in wait_input() (after every device's copy was issued, so that they overlap
    // on their own links); a pageable one is staged through this store's pinned slot. Staging
    // costs a host memcpy per block and device: on the H200 machine ~27 ms per 268 MB B1 block,
    // which bounded the pipeline (docs/PERFORMANCE.md).
    const bool direct = is_pinned_host(block);
    copied_[i].synchronize();  // the pinned slot's previous copy (block i - 2) is done
    if (!direct && host_[i].size() == 0) host_[i] = PinnedArray<std::uint8_t>(block_bytes_);
    if (!direct) std::memcpy(host_[i].data(), block, bytes);
    wait_event(copy_stream_, consumed_[i]);
    copy_bytes(volt_[i].data(), direct ? block : host_[i].data(), bytes, &copy_stream_);
    copied_[i].record(&copy_stream_);
    pending_input_ = direct ? &copied_[i] : nullptr;
    counters_.to_device += static_cast<std::int64_t>(bytes);

    wait_event(bf_stream_, copied_[i]);
    if (weights) set_weights(*weights);
    const auto& c = plan_->config();
    plan_->execute(View<const std::uint8_t, 3>(volt_[i].data(), c.input_shape(), Space::device),
                   View<float, 4>(beams_.data(), c.output_shape(), Space::device), &bf_stream_);
    consumed_[i].record(&bf_stream_);
  }

  // On the beamform stream, as the beamformer's output would be (after the last block's sends).
  void zero_block() override {
    set_device(device_);
    device_memset(beams_.data(), 0, beams_.bytes(), &bf_stream_);
  }

  // Into a CUDA store: one 3-D copy (beams x rows x the sub-band's channels) on this store's
  // beamform stream, after the destination's earlier buffer work (its shift) and before its
  // later work (its next search). Between devices it is a peer copy (NVLink where there is one;
  // peer access is enabled when the devices allow it, else the driver stages it).
  void send_rows(BeamStore& dest, int f0, int f1, int s0, int c0, std::int64_t at) override {
    auto* d = dynamic_cast<CudaStore*>(&dest);
    if (!d) return BeamStore::send_rows(dest, f0, f1, s0, c0, at);
    if (at + nb_ > d->cap_ || f0 < 0 || f1 > nformed_ || s0 + (f1 - f0) > d->nbeams_)
      fail(ErrorCategory::invalid_argument, "beam rows {}-{} at row {} do not fit the buffer", f0,
           f1, at);
    if (f1 <= f0) return;
    if (d != this) {
      set_device(d->device_);
      d->tail_.record(&d->bf_stream_);
      set_device(device_);
      wait_event(bf_stream_, d->tail_);
      enable_peer_access(device_, d->device_);
    }
    set_device(device_);
    cudaMemcpy3DPeerParms p{};
    p.srcPtr = make_cudaPitchedPtr(beams_.data(), static_cast<std::size_t>(nsub_) * 4,
                                   static_cast<std::size_t>(nsub_), static_cast<std::size_t>(nb_));
    p.srcPos = make_cudaPos(0, 0, static_cast<std::size_t>(f0));
    p.srcDevice = device_;
    p.dstPtr =
        make_cudaPitchedPtr(d->buffer_.data(), static_cast<std::size_t>(nchans_) * 4,
                            static_cast<std::size_t>(nchans_), static_cast<std::size_t>(d->cap_));
    p.dstPos = make_cudaPos(static_cast<std::size_t>(c0) * 4, static_cast<std::size_t>(at),
                            static_cast<std::size_t>(s0));
    p.dstDevice = d->device_;
    p.extent = make_cudaExtent(static_cast<std::size_t>(nsub_) * 4, static_cast<std::size_t>(nb_),
                               static_cast<std::size_t>(f1 - f0));
    const auto stream = static_cast<cudaStream_t>(bf_stream_.handle());
    const std::int64_t bytes = std::int64_t{f1 - f0} * nb_ * nsub_ * 4;
    if (d->device_ == device_) {
      cudaMemcpy3DParms q{};
      q.srcPtr = p.srcPtr;
      q.srcPos = p.srcPos;
      q.dstPtr = p.dstPtr;
      q.dstPos = p.dstPos;
      q.extent = p.extent;
      q.kind = cudaMemcpyDeviceToDevice;
      WB_CUDA_CHECK(cudaMemcpy3DAsync(&q, stream));
      counters_.device_to_device += bytes;
    } else {
      WB_CUDA_CHECK(cudaMemcpy3DPeerAsync(&p, stream));
      counters_.between_devices += bytes;
    }
    if (d != this) {
      sent_.record(&bf_stream_);
      set_device(d->device_);
      wait_event(d->bf_stream_, sent_);
      set_device(device_);
    }
  }

  void export_rows(int f0, int f1, float* out) override {
    set_device(device_);
    const std::size_t n = static_cast<std::size_t>(nb_ * nsub_);
    const std::size_t bytes = static_cast<std::size_t>(f1 - f0) * n * 4;
    WB_CUDA_CHECK(cudaMemcpyAsync(out, beams_.data() + static_cast<std::size_t>(f0) * n, bytes,
                                  cudaMemcpyDeviceToHost,
                                  static_cast<cudaStream_t>(bf_stream_.handle())));
    bf_stream_.synchronize();
    counters_.from_device += static_cast<std::int64_t>(bytes);
  }

  void import_rows(const float* in, int s0, int s1, int c0, int nch, std::int64_t at) override {
    if (at + nb_ > cap_ || s0 < 0 || s1 > nbeams_)
      fail(ErrorCategory::invalid_argument, "beam rows at row {} do not fit the buffer", at);
    set_device(device_);
    const std::size_t width = static_cast<std::size_t>(nch) * 4;
    for (int b = s0; b < s1; ++b, in += static_cast<std::size_t>(nb_ * nch))
      WB_CUDA_CHECK(cudaMemcpy2DAsync(buffer_.data() + (b * cap_ + at) * nchans_ + c0,
                                      static_cast<std::size_t>(nchans_) * 4, in, width, width,
                                      static_cast<std::size_t>(nb_), cudaMemcpyHostToDevice,
                                      static_cast<cudaStream_t>(bf_stream_.handle())));
    bf_stream_.synchronize();  // `in` may be reused
    counters_.to_device += std::int64_t{s1 - s0} * nb_ * nch * 4;
  }

  void wait_input() override {
    if (!pending_input_) return;
    set_device(device_);
    pending_input_->synchronize();
    pending_input_ = nullptr;
  }

  void search_gulp(std::int64_t g, std::int64_t rows, const BeamPeakSink& sink) override {
    set_device(device_);  // also in a host thread of its own (several devices)
    ready_.record(&bf_stream_);
    const search::GulpSink to_sink = [&](search::GulpPeaks&& gp) {
      sink(static_cast<int>(gp.tag), std::move(gp));
    };
    const std::size_t bytes = static_cast<std::size_t>(rows * nchans_) * 4;
    for (int b = 0; b < nbeams_; ++b)
      searcher_->submit(
          g, b, rows,
          [&](search::GulpInput& in) -> const std::uint8_t* {
            // The beam's rows, once the beamform stream has written them, into the lane's input.
            wait_event(*in.stream, ready_);
            copy_bytes(in.device, buffer_.data() + static_cast<std::int64_t>(b) * cap_ * nchans_,
                       bytes, in.stream);
            counters_.device_to_device += static_cast<std::int64_t>(bytes);
            return in.device;
          },
          to_sink);
    searcher_->flush(to_sink);
  }

  void shift(std::int64_t drop, std::int64_t keep) override {
    if (drop == 0 || keep <= 0) return;
    set_device(device_);
    // Forward in pieces of at most `drop` rows, so that no piece overlaps its source.
    const std::size_t row = static_cast<std::size_t>(nchans_) * 4;
    for (std::int64_t k = 0; k < keep; k += drop) {
      const std::int64_t n = std::min(drop, keep - k);
      copy_2d(buffer_.data() + k * nchans_, cap_ * row, buffer_.data() + (k + drop) * nchans_,
              cap_ * row, n * row, static_cast<std::size_t>(nbeams_), bf_stream_);
      counters_.device_to_device += nbeams_ * n * nchans_ * 4;
    }
  }

  StoreCounters counters() const override {
    StoreCounters k = counters_;
    const search::StageTimes t = search_times();
    k.to_device += t.bytes_to_device;
    k.from_device += t.bytes_from_device;
    return k;
  }
  search::StageTimes search_times() const override {
    search::StageTimes t = past_times_;
    return t += searcher_->times();
  }
  void renew_searcher() override {
    set_device(device_);
    device_synchronize();  // nothing of the old searcher's is in flight when its buffers go
    past_times_ += searcher_->times();
    searcher_.reset();
    searcher_ = search::GulpSearcher::make(search_, 0, search_.ndms(), device_, false);
  }
  std::int64_t buffer_bytes() const override { return static_cast<std::int64_t>(buffer_.bytes()); }

 private:
  void set_weights(const std::vector<std::complex<float>>& w) {
    const auto& c = plan_->config();
    plan_->set_weights(
        View<const std::complex<float>, 4>(w.data(), {c.nchans, c.npol, c.nbeams, c.nantennas}),
        &bf_stream_);
    counters_.to_device += static_cast<std::int64_t>(w.size() * sizeof(w[0]));
  }

  OnDevice on_device_;  // first: every member below is created on the store's device
  const search::FileSearchPlan& search_;
  int device_;
  int nchans_, nsub_, nformed_, nbeams_;  // every channel, the sub-band, formed, stored beams
  std::int64_t cap_, nb_;
  std::size_t block_bytes_;
  std::unique_ptr<beamform::BeamformPlan> plan_;
  Stream copy_stream_, bf_stream_;
  PinnedArray<std::uint8_t> host_[2];
  Event* pending_input_ = nullptr;  // the copy of the caller's pinned block, until wait_input()
  DeviceArray<std::uint8_t> volt_[2];
  Event copied_[2], consumed_[2], ready_;
  Event tail_, sent_;  // peer copies: the destination's buffer work so far; the copy itself
  int slot_ = 0;
  DeviceArray<float> beams_, buffer_;
  std::unique_ptr<search::GulpSearcher> searcher_;
  search::StageTimes past_times_;  // of the searchers renew_searcher() replaced
  StoreCounters counters_;
};

}  // namespace

std::unique_ptr<BeamStore> make_cuda_store(const StoreSetup& setup,
                                           const std::vector<std::complex<float>>& weights) {
  return std::make_unique<CudaStore>(setup, weights);
}

}  // namespace warpbeam::pipeline::detail
