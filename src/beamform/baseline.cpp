// The cuBLAS baseline of the B2 benchmark, in a build without CUDA (cublas_baseline.cu otherwise).
#include "warpbeam/beamform.hpp"

namespace warpbeam::beamform {

#ifndef WARPBEAM_HAVE_CUDA
double cublas_cgemm_ms(int, int, int, int, bool, int) {
  fail(ErrorCategory::unsupported, "the cuBLAS baseline needs the CUDA backend");
}
double cublas_hgemm_flops(int, int) {
  fail(ErrorCategory::unsupported, "the cuBLAS baseline needs the CUDA backend");
}
#endif

}  // namespace warpbeam::beamform
