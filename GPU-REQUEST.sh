#!/usr/bin/env bash
# bf8 (issue 17): the new tensor-int8-stream beamformer, first run on a GPU. Run from the
# worktree root with build-gpu = a CUDA build of this branch (same layout as build-cuda), on the
# H200. In order of importance; about 3 minutes in all. OUT defaults to ./gpu-out.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
# The CLI: build-cuda puts it in bin/ (apps/warpbeam/CMakeLists.txt); the brief's path if staged.
WB=build-gpu/bin/warpbeam
[ -x build-gpu/apps/warpbeam/warpbeam ] && WB=build-gpu/apps/warpbeam/warpbeam

# 1. Correctness: the new kernel bit for bit against the host emulation and tensor-int8 (odd
#    shapes, B1's shape on 128 channels), against the fp32 CPU path, its refusals; and the old
#    tensor-int8 tests (the comparison uses tensor-int8 as a second reference). ~30 s.
timeout 120 build-gpu/tests/test_beamform \
  --gtest_filter='BeamformGpu.TensorInt8*:BeamformGpu.AutomaticDoesNotPickTensorInt8Yet:BeamformInt8.*:BeamformConfig.*' \
  2>&1 | tee "$OUT/test-int8.log" | tail -40

# 2. Memory errors (out-of-bounds loads of the ring, stores of partial tiles) on the small shapes,
#    aligned and unaligned input. ~60 s under memcheck.
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$CS" --tool memcheck --error-exitcode 9 \
  build-gpu/tests/test_beamform --gtest_filter='BeamformGpu.TensorInt8StreamOddShapesEqualTheEmulationExactly' \
  2>&1 | tee "$OUT/memcheck-stream.log" | tail -15

# 3. B1 timing: the new variant, tensor-int8 and auto's candidates in the same session (the
#    ratio). Each prints its median ms and verifies ~2000 sampled rows (err/max must be ok).
timeout 120 "$WB" bench beamform --config B1 --backend cuda \
  --algorithm tensor-int8-stream --json "$OUT/b1-stream.json" 2>&1 | tee "$OUT/b1-stream.log" | tail -8
timeout 120 "$WB" bench beamform --config B1 --backend cuda \
  --algorithm tensor-int8 --json "$OUT/b1-int8.json" 2>&1 | tee "$OUT/b1-int8.log" | tail -8
timeout 150 "$WB" bench beamform --config B1 --backend cuda \
  --algorithm auto --json "$OUT/b1-auto.json" 2>&1 | tee "$OUT/b1-auto.log" | tail -10
