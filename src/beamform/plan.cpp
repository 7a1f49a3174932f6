// BeamformPlan: validation, the conversion table, the choice of algorithm and executor.
#include <cmath>
#include <cstring>

#include "beamform/executor.hpp"
#include "beamform/int8.hpp"
#include "warpbeam/beamform.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::beamform {

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "auto";
    case Algorithm::register_tiled:
      return "register-tiled";
    case Algorithm::register_stream:
      return "register-stream";
    case Algorithm::tensor_core:
      return "tensor-core";
    case Algorithm::cublas_fp16:
      return "cublas-fp16";
    case Algorithm::tensor_int8:
      return "tensor-int8";
    case Algorithm::tensor_int8_stream:
      return "tensor-int8-stream";
  }
  return "?";
}

bool uses_fp16(Algorithm a) {
  return a == Algorithm::tensor_core || a == Algorithm::cublas_fp16;
}

bool uses_int8(Algorithm a) {
  return a == Algorithm::tensor_int8 || a == Algorithm::tensor_int8_stream;
}

bool cuda_only(Algorithm a) {
  return a == Algorithm::register_stream || uses_fp16(a) || uses_int8(a);
}

Algorithm parse_algorithm(std::string_view s) {
  for (auto a : {Algorithm::automatic, Algorithm::register_tiled, Algorithm::register_stream,
                 Algorithm::tensor_core, Algorithm::cublas_fp16, Algorithm::tensor_int8,
                 Algorithm::tensor_int8_stream})
    if (s == to_string(a)) return a;
  fail(ErrorCategory::invalid_argument,
       "algorithm '{}' is not one of auto, register-tiled, register-stream, tensor-core, "
       "cublas-fp16, tensor-int8, tensor-int8-stream",
       s);
}

void BeamformConfig::validate() const {
  require_range("nchans", nchans, 1, 1 << 20);
  require_range("nantennas", nantennas, 1, 1 << 16);
  require_range("npol", npol, 1, 2);
  require_range("nbeams", nbeams, 1, 1 << 16);
  require_range<std::int64_t>("nsamples", nsamples, 1, std::int64_t{1} << 31);
  require_range("integration", integration, 1, 1 << 24);
  require_range("threads", threads, 0, 4096);
  if (output == OutputKind::voltage && (integration != 1 || sum_pols))
    fail(ErrorCategory::invalid_argument,
         "voltage output takes neither integration ({}) nor sum_pols", integration);
  if (nsamples % integration != 0)
    fail(ErrorCategory::invalid_argument, "integration = {} must divide nsamples = {}", integration,
         nsamples);
  if (!levels.empty() && sample_type != SampleType::ci4 && sample_type != SampleType::ci8)
    fail(ErrorCategory::invalid_argument, "levels are for ci4/ci8 input, not {}",
         to_string(sample_type));
  if (sample_type == SampleType::ci4 || sample_type == SampleType::ci8)
    (void)conversion_table(sample_type, encoding, levels);  // checks the levels
  // The largest index of any array stays inside int64 and CUDA grid limits.
  const double in_bytes = static_cast<double>(nchans) * nsamples * row_bytes();
  const double out_floats =
      static_cast<double>(nbeams) * nout_pols() * nsamples_out() * out_row_floats();
  if (in_bytes > 1e12 || out_floats > 1e12)
    fail(ErrorCategory::invalid_argument,
         "one block of {} input bytes / {} output floats is too large: use smaller blocks",
         in_bytes, out_floats);
}

std::int64_t BeamformConfig::row_bytes() const {
  return static_cast<std::int64_t>(nantennas) * npol * bytes_per_complex(sample_type);
}
int BeamformConfig::nout_pols() const {
  return (output == OutputKind::power && sum_pols) ? 1 : npol;
}
std::int64_t BeamformConfig::nsamples_out() const {
  return nsamples / integration;
}
std::int64_t BeamformConfig::out_row_floats() const {
  return output == OutputKind::voltage ? 2 * static_cast<std::int64_t>(nchans) : nchans;
}
std::array<std::int64_t, 3> BeamformConfig::input_shape() const {
  return {nchans, nsamples, row_bytes()};
}
std::array<std::int64_t, 4> BeamformConfig::output_shape() const {
  return {nbeams, nout_pols(), nsamples_out(), out_row_floats()};
}
double BeamformConfig::flops() const {
  return 8.0 * nbeams * nantennas * static_cast<double>(nsamples) * nchans * npol;
}

namespace detail {
CudaTuning resolve_tuning(Algorithm a, const CudaTuning& t) {
  CudaTuning r = t;
  if (a == Algorithm::register_tiled) {
    // Round-1 defaults for sm_90 (H200, measured): 16 beams x 2 samples, 256 threads.
    if (r.beams_per_thread == 0) r.beams_per_thread = 16;
    if (r.samples_per_thread == 0) r.samples_per_thread = 2;
    if (r.threads_per_block == 0) r.threads_per_block = 256;
    if (r.beams_per_thread != 8 && r.beams_per_thread != 16 && r.beams_per_thread != 32)
      fail(ErrorCategory::invalid_argument, "tuning.beams_per_thread = {} is not 8, 16 or 32",
           r.beams_per_thread);
    if (r.samples_per_thread != 2 && r.samples_per_thread != 4)
      fail(ErrorCategory::invalid_argument, "tuning.samples_per_thread = {} is not 2 or 4",
           r.samples_per_thread);
    if (r.beams_per_thread == 32 && r.samples_per_thread == 4)
      fail(ErrorCategory::invalid_argument,
           "tuning 32 beams x 4 samples per thread needs 256 accumulator registers: not compiled");
    if (r.threads_per_block != 128 && r.threads_per_block != 256)
      fail(ErrorCategory::invalid_argument, "tuning.threads_per_block = {} is not 128 or 256",
           r.threads_per_block);
    r.gemm_output_bits = r.gemm_chunk_channels = 0;
  } else if (a == Algorithm::register_stream) {
    // H200 sweep of B1 (2026-11-29, docs/PERFORMANCE.md): 16 beams x 1 sample 2.000 ms, 32 x 1
    // 2.194 ms, 16 x 2 2.330 ms. Every variant is capped at 128 registers; 16 x 1 is the only
    // one that does not spill, which outweighs decoding each voltage twice for 32 beams.
    if (r.beams_per_thread == 0) r.beams_per_thread = 16;
    if (r.samples_per_thread == 0) r.samples_per_thread = 1;
    const bool ok = (r.beams_per_thread == 32 && r.samples_per_thread == 1) ||
                    (r.beams_per_thread == 16 && r.samples_per_thread == 1) ||
                    (r.beams_per_thread == 16 && r.samples_per_thread == 2);
    if (!ok)
      fail(ErrorCategory::invalid_argument,
           "register-stream tuning {} beams x {} samples per thread is not one of 32x1, 16x1, 16x2",
           r.beams_per_thread, r.samples_per_thread);
    if (r.threads_per_block != 0 && r.threads_per_block != 256)
      fail(ErrorCategory::invalid_argument,
           "register-stream uses 256 threads per block (8 warps = 8 channels), not {}",
           r.threads_per_block);
    r.threads_per_block = 256;
    r.gemm_output_bits = r.gemm_chunk_channels = 0;
  } else if (a == Algorithm::cublas_fp16) {
    if (r.gemm_output_bits == 0) r.gemm_output_bits = 16;
    if (r.gemm_output_bits != 16 && r.gemm_output_bits != 32)
      fail(ErrorCategory::invalid_argument, "tuning.gemm_output_bits = {} is not 16 or 32",
           r.gemm_output_bits);
    if (r.gemm_chunk_channels < 0)
      fail(ErrorCategory::invalid_argument, "tuning.gemm_chunk_channels = {} must be >= 0",
           r.gemm_chunk_channels);
    r.beams_per_thread = r.samples_per_thread = r.threads_per_block = 0;
  } else if (a == Algorithm::tensor_int8) {
    // The GEMM kernel's block (cuda_tensor_int8_gemm.cu; the general kernel has none): 256
    // threads = 128 samples, one block per SM; 128 = 64 samples, two per SM.
    if (r.threads_per_block == 0) r.threads_per_block = 256;
    if (r.threads_per_block != 128 && r.threads_per_block != 256)
      fail(ErrorCategory::invalid_argument,
           "tensor-int8 tuning.threads_per_block = {} is not 128 or 256", r.threads_per_block);
    r.beams_per_thread = r.samples_per_thread = r.gemm_output_bits = r.gemm_chunk_channels = 0;
  } else {
    r = CudaTuning{};
  }
  return r;
}
}  // namespace detail

namespace {

// Rounds to the nearest fp16 value (ties to even), as __float2half_rn, clamping to +-65504 as
// the kernel's conversion does; returned as float.
float round_to_half(float v) {
  v = std::fmin(std::fmax(v, -65504.f), 65504.f);
  if (std::fabs(v) >= 0x1.0p-14f) {  // normal fp16: keep 10 mantissa bits, round to even
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0xFFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
    std::memcpy(&v, &u, 4);
    return std::fmin(std::fmax(v, -65504.f), 65504.f);
  }
  return half_to_float(float_to_half(v));  // subnormal fp16 range
}

Algorithm pick_algorithm(const BeamformConfig& c, Backend b) {
  if (b == Backend::cpu) {
    if (cuda_only(c.algorithm))
      fail(ErrorCategory::unsupported, "the {} beamformer needs the CUDA backend",
           to_string(c.algorithm));
    return Algorithm::register_tiled;
  }
  if (c.algorithm == Algorithm::tensor_int8) detail::check_int8_config(c);
  if (c.algorithm == Algorithm::tensor_int8_stream) detail::check_int8_stream_config(c);
  // The hand-written tensor-core kernel forms power only, integrated over a power of two
  // dividing its 64-sample tile.
  const bool mma_ok = c.output == OutputKind::power && 64 % c.integration == 0;
  if (c.algorithm == Algorithm::tensor_core && !mma_ok)
    fail(ErrorCategory::unsupported,
         "the tensor-core beamformer forms power only, with an integration dividing 64 (got {} "
         "output, integration {}); cublas-fp16 forms every output",
         c.output == OutputKind::power ? "power" : "voltage", c.integration);
  if (c.algorithm != Algorithm::automatic) return c.algorithm;
  // int8 weights change beam power by up to ~1 %, so only when the caller allows them. Measured on
  // the H200 (docs/results/s16-a, B1): tensor_int8_stream 0.562 ms, register_stream 2.209 ms,
  // tensor_int8 1.985 ms; tensor_int8 is not a candidate (not measured on B2-like shapes yet).
  if (c.int8_weights && detail::fits_int8_stream(c)) return Algorithm::tensor_int8_stream;
  // Large N: enough beams and antennas for the GEMM tiles to be mostly full.
  // Round 1 measured the fp32 kernels at 13.5 TFLOP/s on B1 and 8.3 on B2, the hand-written MMA
  // kernel at 40 on B2; cuBLAS fp16 runs at 850 (docs/PERFORMANCE.md): cublas-fp16 for large N,
  // register-stream (predicted 2-3x register-tiled on B1) otherwise.
  return (c.nbeams >= 128 && c.nantennas >= 64) ? Algorithm::cublas_fp16
                                                : Algorithm::register_stream;
}
}  // namespace

BeamformPlan::BeamformPlan(BeamformConfig config, Backend backend)
    : config_(std::move(config)), backend_(resolve_backend(backend)) {
  config_.validate();
  algorithm_ = pick_algorithm(config_, backend_);
  if (backend_ == Backend::cuda) tuning_ = detail::resolve_tuning(algorithm_, config_.tuning);
  if (config_.sample_type == SampleType::ci4 || config_.sample_type == SampleType::ci8)
    table_ = conversion_table(config_.sample_type, config_.encoding, config_.levels);
  weights_.assign(
      static_cast<std::size_t>(config_.nchans) * config_.npol * config_.nbeams * config_.nantennas,
      std::complex<float>(0, 0));
  const detail::PlanData data{config_, table_, tuning_};
  if (backend_ == Backend::cuda) {
#ifdef WARPBEAM_HAVE_CUDA
    switch (algorithm_) {
      case Algorithm::tensor_core:
        exec_ = detail::make_tensor_core_executor(data);
        break;
      case Algorithm::register_stream:
        exec_ = detail::make_register_stream_executor(data);
        break;
      case Algorithm::cublas_fp16:
        exec_ = detail::make_cublas_fp16_executor(data);
        break;
      case Algorithm::tensor_int8:
        exec_ = detail::make_tensor_int8_executor(data);
        break;
      case Algorithm::tensor_int8_stream:
        exec_ = detail::make_tensor_int8_stream_executor(data);
        break;
      default:
        exec_ = detail::make_register_tiled_executor(data);
        break;
    }
#endif
  } else {
    exec_ = detail::make_cpu_executor(data);
  }
  apply_weights(nullptr);
}

BeamformPlan::~BeamformPlan() = default;
BeamformPlan::BeamformPlan(BeamformPlan&&) noexcept = default;
BeamformPlan& BeamformPlan::operator=(BeamformPlan&&) noexcept = default;

CudaTuning BeamformPlan::tuning() const {
  return tuning_;
}

void BeamformPlan::set_weights(View<const std::complex<float>, 4> w, const Stream* stream) {
  require_view(w, {config_.nchans, config_.npol, config_.nbeams, config_.nantennas}, Space::host,
               "beamformer weights");
  for (std::int64_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w.data[i].real()) || !std::isfinite(w.data[i].imag()))
      fail(ErrorCategory::invalid_argument, "weight {} is not finite", i);
    weights_[static_cast<std::size_t>(i)] = w.data[i];
  }
  apply_weights(stream);
}

void BeamformPlan::apply_weights(const Stream* stream) {
  if (uses_fp16(algorithm_)) {
    // What the fp16 kernels apply: each component rounded to half precision (and clamped to
    // its range) in cuda_tensor_core.cu / cuda_cublas_fp16.cu; mirror the rounding here so a CPU
    // plan can use the same weights.
    for (auto& x : weights_)
      x = {round_to_half(x.real()), round_to_half(x.imag())};
  }
  detail::PlanData data{config_, table_, tuning_};
  if (uses_int8(algorithm_)) {
    // The int8 kernel applies scale * q (beamform/int8.hpp); it receives q and the scales, and
    // effective_weights() are what it applies.
    int8_ = std::make_shared<detail::Int8Weights>(detail::quantize_int8(config_, weights_.data()));
    weights_ = detail::dequantize_int8(config_, *int8_);
    data.int8 = int8_.get();
  }
  exec_->set_weights(data, weights_.data(), stream);
}

void BeamformPlan::execute(View<const std::uint8_t, 3> in, View<float, 4> out,
                           const Stream* stream) const {
  const Space space = backend_ == Backend::cuda ? Space::device : Space::host;
  require_view(in, config_.input_shape(), space, "beamformer input");
  require_view(out, config_.output_shape(), space, "beamformer output");
  const detail::PlanData data{config_, table_, tuning_};
  exec_->execute(data, in.data, out.data, stream);
}

}  // namespace warpbeam::beamform
