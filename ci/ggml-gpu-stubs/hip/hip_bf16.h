// Stand-in for HIP's bf16 header (absent from Debian's HIP 5.2.3), for the device-only
// build of ggml-cuda's MMVQ and q8_1 quantizer (ci/ggml-gpu). The bf16 types are only
// named by code those kernels do not use. The three half-precision helpers below are
// ones HIP 5.2.3 lacks and ggml's common.cuh instantiates in half2 reductions that MMVQ
// does not call; they move bits (shuffles) or compare, and no float arithmetic of the
// analysed kernels goes through them.
#pragma once
#include <hip/hip_fp16.h>
struct __hip_bfloat16 { unsigned short x; };
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
static __device__ __forceinline__ __half2 __shfl_xor(__half2 v, int mask, int width = warpSize) {
    int bits = __shfl_xor(*reinterpret_cast<int *>(&v), mask, width);
    return *reinterpret_cast<__half2 *>(&bits);
}
static __device__ __forceinline__ __half2 __shfl_up(__half2 v, unsigned int delta, int width = warpSize) {
    int bits = __shfl_up(*reinterpret_cast<int *>(&v), delta, width);
    return *reinterpret_cast<__half2 *>(&bits);
}
static __device__ __forceinline__ __half __hmax(__half a, __half b) { return __hgt(a, b) ? a : b; }
