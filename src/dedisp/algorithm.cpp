// Names of the kernel variants, validation of the CUDA tile sizes, and the quantised output's
// scaling: host-side helpers shared by the CPU and CUDA builds.
#include <algorithm>

#include "dedisp/quantise.hpp"
#include "warpbeam/dedisp.hpp"
#include "warpbeam/format.hpp"

namespace warpbeam::dedisp {

std::string to_string(Algorithm a) {
  switch (a) {
    case Algorithm::automatic:
      return "automatic";
    case Algorithm::direct:
      return "direct";
    case Algorithm::tiled:
      return "tiled";
    case Algorithm::packed:
      return "packed";
    case Algorithm::subband:
      return "subband";
    case Algorithm::fdmt:
      return "fdmt";
  }
  return "unknown";
}

Algorithm parse_algorithm(const std::string& name) {
  if (name == "auto" || name == "automatic") return Algorithm::automatic;
  if (name == "direct") return Algorithm::direct;
  if (name == "tiled") return Algorithm::tiled;
  if (name == "packed") return Algorithm::packed;
  if (name == "subband") return Algorithm::subband;
  if (name == "fdmt") return Algorithm::fdmt;
  fail(ErrorCategory::invalid_argument,
       "algorithm '{}' is not one of auto, direct, tiled, packed, subband, fdmt", name);
}

void validate(const CudaTuning& t) {
  if (t.dms_per_block != 0) require_range("dms_per_block", t.dms_per_block, 1, 32);
  if (t.samples_per_thread != 0 && t.samples_per_thread != 8 && t.samples_per_thread != 16 &&
      t.samples_per_thread != 32)
    fail(ErrorCategory::invalid_argument, "samples_per_thread = {} is not one of 8, 16, 32",
         t.samples_per_thread);
  if (t.threads_per_block != 0 &&
      (t.threads_per_block < 32 || t.threads_per_block > 1024 || t.threads_per_block % 32 != 0))
    fail(ErrorCategory::invalid_argument,
         "threads_per_block = {} must be a multiple of 32 in [32, 1024]", t.threads_per_block);
  if (t.channels_per_stage != 0) require_range("channels_per_stage", t.channels_per_stage, 1, 256);
}

OutputScaling dedisp_output_scaling(const DedispersionConfig& config, int out_nbits) {
  if (out_nbits != 8 && out_nbits != 16)
    fail(ErrorCategory::invalid_argument, "output nbits = {} must be 8 or 16", out_nbits);
  const int in_bits = config.nbits == 32 ? 8 : config.nbits;
  const double in_range = static_cast<double>((1u << in_bits) - 1u);
  const double out_range = static_cast<double>((1u << out_nbits) - 1u);
  const double factor = 3.0 * 1024.0 / 255.0 / 16.0;  // dedisp's HTRU 2-bit -> 8-bit emulation
  return {static_cast<float>(out_range / (in_range * std::max(config.nchans, 1)) * factor), 0.0f};
}

std::uint32_t quantise_output(float sum, const OutputScaling& s, int out_nbits) {
  const float maxval = out_nbits == 8 ? 255.0f : 65535.0f;
  return detail::quantise(sum, s.scale, s.offset, maxval);
}

#ifndef WARPBEAM_HAVE_CUDA
void random_device_bytes(std::uint8_t*, std::size_t, std::uint64_t, const Stream*) {
  fail(ErrorCategory::unsupported, "this warpbeam build has no CUDA backend");
}
#endif

}  // namespace warpbeam::dedisp
