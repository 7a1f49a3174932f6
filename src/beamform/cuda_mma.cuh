#pragma once
// Internal: the PTX wrappers the tensor-core beamformers share (cuda_tensor_core.cu: fp16
// mma.sync.m16n8k16; cuda_tensor_int8*.cu: s8 mma.sync.m16n8k32): shared-memory addresses,
// cp.async of 16-byte chunks, ldmatrix of four 8x8 b16 tiles and the two MMA shapes. PTX ISA 8
// (sm_80+): "Data Movement and Conversion Instructions" and "Warp Level Matrix Multiply-
// Accumulate Instructions".
#include <cuda_runtime.h>

namespace warpbeam::beamform::detail::mma {

/// The 32-bit shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes global -> shared asynchronously (L2 only: .cg); both 16-byte aligned.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}

/// The same to a shared-state-space address (smem_addr()), for loops that keep it in a register.
__device__ __forceinline__ void cp_async16_s(unsigned smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}

/// Closes the group of cp.async issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

/// Waits for every cp.async group of this thread (a __syncthreads must follow before others read).
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}

/// Waits until at most N of this thread's cp.async groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// Four 8x8 tiles of 16-bit elements (or 8x16 of bytes) from shared memory, one row address per
/// lane (lanes 8i..8i+7 address tile i), into r[0..3].
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/// The same from a shared-state-space address (smem_addr()).
__device__ __forceinline__ void ldmatrix_x4_s(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// c += a b for a 16x16 fp16 A (row), 16x8 fp16 B (col), fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// c += a b for a 16x32 s8 A (row), 32x8 s8 B (col), s32 accumulators (exact).
__device__ __forceinline__ void mma_16832(int (&c)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace warpbeam::beamform::detail::mma
