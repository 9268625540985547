// The few device primitives tiercheck_mmvq.hip needs, for HIP (AMD GPUs, hipcc) and,
// through the same names, for CUDA (nvcc), so that one source builds for both.
//
// Every primitive here is exact or has one IEEE rounding that is the same on both
// platforms (binary16 conversion to nearest even); nothing here approximates.
// Neither build may use fast-math: ci/gpu-check compiles with nvcc's defaults
// (-prec-div=true, -ftz=false), hipcc has no fast-math unless asked.
#pragma once

#if defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#define TC_PLATFORM_HIP 1
#elif defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cstdint>
#define TC_PLATFORM_CUDA 1
#else
#error "tiercheck device code builds with hipcc or nvcc only"
#endif

#define TC_DEVICE static __device__ __forceinline__

// XOR shuffle within groups of `width` lanes (a power of two up to the warp size).
TC_DEVICE float tc_shfl_xor(float v, int lane_mask, int width) {
#if defined(TC_PLATFORM_HIP)
    return __shfl_xor(v, lane_mask, width);
#else
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
#endif
}

// `ggml_cuda_dp4a`: c + the four products of the signed bytes of a and b. Exact in
// 32 bits on every path. AMD: `v_dot4_i32_i8` (sdot4, clamp off) where the target has
// the dot instructions ggml uses (gfx906, CDNA, RDNA2), the signed form of sudot4 on
// RDNA3/4, plain byte products elsewhere; NVIDIA: `__dp4a`.
TC_DEVICE int tc_dp4a(int a, int b, int c) {
#if defined(TC_PLATFORM_HIP)
#if defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx942__) || \
    defined(__gfx1030__) || defined(__gfx1031__) || defined(__gfx1032__) || defined(__gfx1034__) || \
    defined(__gfx1035__) || defined(__gfx1036__)
    return __builtin_amdgcn_sdot4(a, b, c, false);
#else
    const int8_t* a8 = (const int8_t*)&a;
    const int8_t* b8 = (const int8_t*)&b;
    return c + a8[0] * b8[0] + a8[1] * b8[1] + a8[2] * b8[2] + a8[3] * b8[3];
#endif
#else
    return __dp4a(a, b, c);
#endif
}

// binary16 bits <-> binary32, round to nearest even (ggml stores q8_1's ds as half2).
TC_DEVICE float tc_h2f(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}
TC_DEVICE uint16_t tc_f2h(float f) {
    return __half_as_ushort(__float2half_rn(f));
}

// `__hmul2` of two f16 pairs read as dwords (low half first, as ggml's half2 fields):
// both products rounded to f16 once (`v_pk_mul_f16`, `HMUL2`), returned as f32.
TC_DEVICE float2 tc_hmul2_f32(uint32_t a, uint32_t b) {
    const __half2 p = __hmul2(*(const __half2*)&a, *(const __half2*)&b);
    return __half22float2(p);
}

// Both f16 halves of a dword (low half first), as f32: ggml's `__half22float2` of a
// half2 field.
TC_DEVICE float2 tc_h2f2(uint32_t h) {
    return __half22float2(*(const __half2*)&h);
}
