#pragma once
// Internal: the shapes the fused CUDA kernel is built for, shared by plan.cpp (which decides
// whether the fused path can run a plan) and cuda_fused.cu (which instantiates the kernels).
namespace warpbeam::epic::detail {

/// Grid sizes with a fused kernel.
constexpr bool fused_size_supported(int n) {
  return n == 64 || n == 128 || n == 256;
}
/// A: the aperture (rows and columns of the grid holding antennas) must fit in A x A cells. The
/// grid's other rows are zero, so the row FFTs skip them and the column FFTs start with their
/// inputs' upper (N - A) entries zero ("half-grid": shared memory holds only A rows).
constexpr int fused_aperture(int n) {
  return n < 64 ? n : 64;
}
/// Thread blocks per channel (a thread-block cluster on sm_90): each owns N / C image columns
/// and their accumulators, so that every block keeps 8192 (N = 64: 4096) pixels in registers.
constexpr int fused_cluster(int n) {
  return n == 64 ? 1 : n == 128 ? 2 : 8;
}
/// The most stands one spectrum may hold.
constexpr int kFusedMaxStands = 512;

}  // namespace warpbeam::epic::detail
