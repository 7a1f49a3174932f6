// The CUDA backend of DedispersionPlan: picks the kernel variant (direct, tiled, packed), owns
// its device tables and the corner-turn scratch (allocated here, in the plan's constructor;
// execute() allocates nothing), and launches it. The kernels live one per file: cuda_direct.cu,
// cuda_tiled.cu, cuda_packed.cu (and the corner turn, cuda_transpose.cu).
//
// One execute() at a time per plan: every variant corner-turns the gulp into the plan's
// scratch, so two streams need two plans.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "dedisp/cuda_kernels.hpp"
#include "dedisp/executor.hpp"
#include "dedisp/tile_geometry.hpp"
#include "warpbeam/format.hpp"
#include "warpbeam/unpack.hpp"

namespace warpbeam::dedisp::detail {
namespace {

SmemLimits device_smem_limits() {
  int dev = 0, per_block = 0, per_sm = 0;
  WB_CUDA_CHECK(cudaGetDevice(&dev));
  WB_CUDA_CHECK(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  WB_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  return {static_cast<std::size_t>(per_block), static_cast<std::size_t>(per_sm)};
}

template <class T>
DeviceArray<T> upload(const std::vector<T>& v) {
  DeviceArray<T> d(v.size());
  copy_bytes(d.data(), v.data(), d.bytes());
  return d;
}

Algorithm resolve_algorithm(const DedispersionConfig& c) {
  if (c.algorithm == Algorithm::automatic)
    return c.nbits <= 8 ? Algorithm::packed : Algorithm::tiled;
  if (c.algorithm == Algorithm::packed && c.nbits > 8)
    fail(ErrorCategory::invalid_argument,
         "algorithm packed needs nbits <= 8 (16-bit lanes hold 256 channels of 8-bit codes); "
         "nbits = {}: use tiled",
         c.nbits);
  return c.algorithm;
}

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(const PlanData& p) : algorithm_(resolve_algorithm(p.config)) {
    validate(p.config.tuning);
    if (algorithm_ == Algorithm::direct)
      make_direct(p);
    else
      make_tiled(p);
  }

  void execute(const PlanData& p, const std::uint8_t* in, float* out,
               const Stream* stream) override {
    run(p, in, OutputTarget{out, 32, 1.0f, 0.0f}, stream);
  }

  void execute_channel_major(const PlanData& p, const float* in, std::int64_t stride, float* out,
                             const Stream* stream) override {
    if (!p.config.channel_major || algorithm_ != Algorithm::tiled)
      fail(ErrorCategory::invalid_argument, "channel-major input needs a channel_major tiled plan");
    launch_tiles(p, in, stride, OutputTarget{out, 32, 1.0f, 0.0f}, stream);
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  bool execute_scaled(const PlanData& p, const std::uint8_t* in, void* out, int out_nbits,
                      const OutputScaling& s, const Stream* stream) override {
    run(p, in, OutputTarget{out, out_nbits, s.scale, s.offset}, stream);
    return true;
  }

  Algorithm algorithm(const PlanData&) const override { return algorithm_; }
  Workspace workspace() const override {
    return {0, static_cast<std::int64_t>(delays_.bytes() + killmask_.bytes() + words_.bytes() +
                                         compact_.bytes() + base_.bytes() + span_.bytes() +
                                         chan_row_.bytes() + scratch_.bytes())};
  }
  CudaTuning tuning(const PlanData&) const override {
    return algorithm_ == Algorithm::direct ? CudaTuning{} : geo_.tuning();
  }
  std::string description(const PlanData&) const override {
    if (algorithm_ == Algorithm::direct)
      return "cuda direct (dedisp's scheme): one thread per (DM, 2 samples), 8 x 32 threads per "
             "block";
    return "cuda " + geo_.describe();
  }

 private:
  void make_direct(const PlanData& p) {
    const auto& c = p.config;
    delays_ = upload(p.delays);
    if (!c.killmask.empty()) killmask_ = upload(c.killmask);
    nused_ = static_cast<int>(used_channels(c).size());
    const std::int64_t row_bytes = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    nwords_ = static_cast<int>((row_bytes + 3) / 4);
    stride_ = (c.nsamples_in + 3) / 4 * 4;
    words_ = DeviceArray<std::uint32_t>(static_cast<std::size_t>(nwords_) *
                                        static_cast<std::size_t>(stride_));
    device_memset(words_.data(), 0, words_.bytes());
  }

  void make_tiled(const PlanData& p) {
    const auto& c = p.config;
    const int ndm = static_cast<int>(c.dms.size());
    const std::vector<int> used = used_channels(c);
    nused_ = static_cast<int>(used.size());
    const auto compact = compact_delays(p.delays, ndm, c.nchans, used);
    geo_ = plan_tile_geometry(algorithm_, c.tuning, compact, ndm, nused_, p.nsamples_out,
                              device_smem_limits());
    std::vector<std::int32_t> base, span;
    tile_tables(compact, ndm, nused_, geo_.dms_per_block, base, span);
    std::vector<std::int32_t> chan_row(static_cast<std::size_t>(c.nchans), -1);
    for (int k = 0; k < nused_; ++k)
      chan_row[static_cast<std::size_t>(used[k])] = k;
    compact_ = upload(compact);
    base_ = upload(base);
    span_ = upload(span);
    chan_row_ = upload(chan_row);
    // Scratch rows: codes (1 byte) for nbits <= 8, float32 otherwise; padded past nsamples_in
    // (zeros, set once here; the corner turn never writes them) so that staging may read a
    // whole window past a row's last sample. Channel-major input is its own scratch.
    float_codes_ = c.nbits > 8;
    if (c.channel_major) return;
    const std::int64_t n = c.nsamples_in;
    stride_ = float_codes_ ? (n + 4 + 3) / 4 * 4 : (n + 8 + 15) / 16 * 16;
    const std::size_t elem = float_codes_ ? 4 : 1;
    scratch_ = DeviceArray<std::uint8_t>(static_cast<std::size_t>(nused_) *
                                         static_cast<std::size_t>(stride_) * elem);
    device_memset(scratch_.data(), 0, scratch_.bytes());
  }

  void run(const PlanData& p, const std::uint8_t* in, const OutputTarget& out,
           const Stream* stream) {
    const auto& c = p.config;
    if (c.channel_major)
      fail(ErrorCategory::invalid_argument,
           "this plan takes channel-major float32 input: call execute_channel_major()");
    const std::int64_t row_bytes = static_cast<std::int64_t>(packed_bytes(c.nbits, c.nchans));
    if (c.nbits >= 16 && reinterpret_cast<std::uintptr_t>(in) % (c.nbits / 8) != 0)
      fail(ErrorCategory::invalid_argument,
           "the device input of {}-bit samples must be aligned to {} bytes", c.nbits, c.nbits / 8);
    const unsigned sign_flip =
        (c.is_signed && c.nbits > 1 && c.nbits <= 8) ? 1u << (c.nbits - 1) : 0u;
    if (algorithm_ == Algorithm::direct) {
      launch_direct_transpose(in, row_bytes, c.nsamples_in, words_.data(), nwords_, stride_,
                              stream);
      DirectArgs a;
      a.words = words_.data();
      a.stride = stride_;
      a.nwords = nwords_;
      a.nchans = c.nchans;
      a.nbits = c.nbits;
      a.is_signed = c.is_signed;
      a.sign_flip = sign_flip;
      a.nused = nused_;
      a.delays = delays_.data();
      a.killmask = killmask_.data();
      a.ndm = static_cast<int>(c.dms.size());
      a.nsamples_out = p.nsamples_out;
      a.out = out;
      launch_direct(a, stream);
    } else {
      if (nused_ > 0) {
        TransposeArgs t;
        t.in = in;
        t.row_bytes = row_bytes;
        t.nsamples = c.nsamples_in;
        t.nchans = c.nchans;
        t.nbits = c.nbits;
        t.is_signed = c.is_signed;
        t.chan_row = chan_row_.data();
        t.scratch = scratch_.data();
        t.stride = stride_;
        launch_transpose(t, stream);
      }
      launch_tiles(p, scratch_.data(), stride_, out, stream);
    }
    if (!stream) WB_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

  // The tiled or packed kernel on corner-turned rows [nused][stride] (codes or float32).
  void launch_tiles(const PlanData& p, const void* rows, std::int64_t stride,
                    const OutputTarget& out, const Stream* stream) {
    const auto& c = p.config;
    const unsigned sign_flip =
        (c.is_signed && c.nbits > 1 && c.nbits <= 8) ? 1u << (c.nbits - 1) : 0u;
    TileArgs a;
    a.scratch = rows;
    a.stride = stride;
    a.float_codes = float_codes_;
    a.nused = nused_;
    a.ndm = static_cast<int>(c.dms.size());
    a.nsamples_out = p.nsamples_out;
    a.delays = compact_.data();
    a.base = base_.data();
    a.span = span_.data();
    a.dms_per_block = geo_.dms_per_block;
    a.lanes = geo_.lanes;
    a.samples_per_thread = geo_.samples_per_thread;
    a.channels_per_stage = geo_.channels_per_stage;
    a.row_words = geo_.row_words;
    a.ndm_tiles = geo_.ndm_tiles;
    a.ntime_tiles = geo_.ntime_tiles;
    a.smem_bytes = geo_.smem_bytes;
    a.stages_per_flush = geo_.stages_per_flush;
    a.sign_flip = sign_flip;
    a.out = out;
    if (algorithm_ == Algorithm::packed)
      launch_packed(a, stream);
    else
      launch_tiled(a, stream);
  }

  Algorithm algorithm_;
  // direct
  DeviceArray<std::int32_t> delays_;
  DeviceArray<std::uint8_t> killmask_;
  DeviceArray<std::uint32_t> words_;
  int nwords_ = 0;
  // tiled / packed
  TileGeometry geo_;
  int nused_ = 0;
  DeviceArray<std::int32_t> compact_, base_, span_, chan_row_;
  DeviceArray<std::uint8_t> scratch_;
  std::int64_t stride_ = 0;
  bool float_codes_ = false;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan) {
  return std::make_unique<CudaExecutor>(plan);
}

}  // namespace warpbeam::dedisp::detail
