// Stand-in for HIP's bf16 header (absent from Debian's HIP 5.2.3), for the device-only
// build of ggml-cuda's MMVQ and q8_1 quantizer (ci/ggml-gpu). The bf16 types are only
// named by code those kernels do not use. The three half-precision helpers below are
// ones HIP 5.2.3 lacks and ggml's common.cuh instantiates in half2 reductions that MMVQ
// does not call; they move bits (shuffles) or compare, and no float arithmetic of the
// analysed kernels goes through them. The two bf16 conversions let the bf16 instances of
// the elementwise kernels (rope, unary) compile; the analysed f32 instances never call
// them (bf16 widening is exact, narrowing rounds to nearest even, NaN kept quiet).
#pragma once
#include <hip/hip_fp16.h>
struct __hip_bfloat16 { unsigned short x; };
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
static __device__ __forceinline__ float __bfloat162float(__hip_bfloat16 v) {
    unsigned int bits = static_cast<unsigned int>(v.x) << 16;
    return *reinterpret_cast<float *>(&bits);
}
static __device__ __forceinline__ __hip_bfloat16 __float2bfloat16(float f) {
    unsigned int bits = *reinterpret_cast<unsigned int *>(&f);
    __hip_bfloat16 r;
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        r.x = static_cast<unsigned short>((bits >> 16) | 0x40u);
    } else {
        r.x = static_cast<unsigned short>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
    return r;
}
static __device__ __forceinline__ __half2 __shfl_xor(__half2 v, int mask, int width = warpSize) {
    int bits = __shfl_xor(*reinterpret_cast<int *>(&v), mask, width);
    return *reinterpret_cast<__half2 *>(&bits);
}
static __device__ __forceinline__ __half2 __shfl_up(__half2 v, unsigned int delta, int width = warpSize) {
    int bits = __shfl_up(*reinterpret_cast<int *>(&v), delta, width);
    return *reinterpret_cast<__half2 *>(&bits);
}
static __device__ __forceinline__ __half __hmax(__half a, __half b) { return __hgt(a, b) ? a : b; }
