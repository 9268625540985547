// tiercheck's device kernels for the hip-wave32 / hip-wave64 lanes: ggml's MMVQ path
// for one activation column, written from the float order documented in
// tiercheck-core's `gpu` module (docs/NUMERICS.md, section 5). Upstream functions:
//   quantize_q8_1            ggml-cuda/quantize.cu
//   vec_dot_q4_K_q8_1        ggml-cuda/vecdotq.cuh (+ _impl_vmmq)
//   vec_dot_q6_K_q8_1        ggml-cuda/vecdotq.cuh (+ _impl_mmvq)
//   vec_dot_q8_0_q8_1        ggml-cuda/vecdotq.cuh (+ _impl<float, 2>)
//   mul_mat_vec_q            ggml-cuda/mmvq.cu (one column, one row per block)
//   warp_reduce_sum/_max     ggml-cuda/common.cuh
//
// Expressions are written as upstream writes them (`sumf += d8 * (dot * sc)`,
// `tmp += vec_dot(...)`, `dm.x*sumf_d - dm.y*sumf_m`) and compiled with the compiler's
// default contraction, as ggml's HIP build is: which multiply-adds fuse is the
// compiler's decision here exactly as it is there. The portable twins model that
// decision with `tiercheck_core::gpu::Contraction`; a device run settles it.
//
// The logical warp size WARP is a template parameter: 32 (RDNA, NVIDIA) or 64
// (GCN/CDNA). A WARP=32 kernel also runs on a 64-wide device (shuffles of width 32
// stay within their half); a WARP=64 kernel needs a 64-wide device.

#include "compat.h"

#define QK8_1 32

struct block_q8_1 {
    uint16_t d;  // f16 bits: amax / 127
    uint16_t s;  // f16 bits: the float sum of the unquantized values (MMVQ quantizer)
    int8_t qs[QK8_1];
};
struct block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
struct block_q6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
struct block_q8_0 {
    uint16_t d;
    int8_t qs[32];
};
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

// Reads of 32-bit ints from 2-byte and 4-byte aligned data (`get_int_b2`, `get_int_b4`).
TC_DEVICE int get_int_b2(const void* x, int i32) {
    const uint16_t* x16 = (const uint16_t*)x;
    int v = x16[2 * i32 + 0] << 0;
    v |= x16[2 * i32 + 1] << 16;
    return v;
}
TC_DEVICE int get_int_b4(const void* x, int i32) {
    return ((const int*)x)[i32];
}

template <int width>
TC_DEVICE float warp_reduce_sum(float x) {
#pragma unroll
    for (int offset = width / 2; offset > 0; offset >>= 1) {
        x += tc_shfl_xor(x, offset, width);
    }
    return x;
}

template <int width>
TC_DEVICE float warp_reduce_max(float x) {
#pragma unroll
    for (int offset = width / 2; offset > 0; offset >>= 1) {
        x = fmaxf(x, tc_shfl_xor(x, offset, width));
    }
    return x;
}

// ---------------------------------------------------------------------------------
// Activations: one thread per value, 32 consecutive threads per q8_1 block.
// Launch: blockDim.x a multiple of 32, at least nblocks*32 threads in all.
extern "C" __global__ void tc_quantize_q8_1(const float* __restrict__ x,
                                            block_q8_1* __restrict__ y, const int ne00,
                                            const int nblocks) {
    const int i0 = blockDim.x * blockIdx.x + threadIdx.x;
    if (i0 >= nblocks * QK8_1) {
        return;  // whole groups of 32 leave together
    }
    const int ib = i0 / QK8_1;
    const int iqs = i0 % QK8_1;

    const float xi = i0 < ne00 ? x[i0] : 0.0f;
    float amax = fabsf(xi);
    float sum = xi;

    amax = warp_reduce_max<QK8_1>(amax);
    sum = warp_reduce_sum<QK8_1>(sum);

    const float d = amax / 127.0f;
    const int8_t q = amax == 0.0f ? 0 : (int8_t)roundf(xi / d);

    y[ib].qs[iqs] = q;
    if (iqs > 0) {
        return;
    }
    y[ib].d = tc_f2h(d);
    y[ib].s = tc_f2h(sum);
}

// ---------------------------------------------------------------------------------
// One thread's share of a weight block against its q8_1 blocks.

// Q4_K: VDR 2, QI 32: 16 threads per superblock, iqs = 0, 2, .., 30.
TC_DEVICE float vec_dot_q4_K_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q4_K* bq4_K = (const block_q4_K*)vbq + kbx;

    int v[2];
    int u[4];
    float d8[2];

    // Two q8_1 blocks (one per nibble half) of the 64-value chunk this thread is in.
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    const int* q4 = (const int*)(bq4_K->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    v[0] = q4[0];
    v[1] = q4[4];

    const uint16_t* scales = (const uint16_t*)bq4_K->scales;
    uint16_t aux[2];
    const int j = bq8_offset / 2;
    if (j < 2) {
        aux[0] = scales[j + 0] & 0x3f3f;
        aux[1] = scales[j + 2] & 0x3f3f;
    } else {
        aux[0] = ((scales[j + 2] >> 0) & 0x0f0f) | ((scales[j - 2] & 0xc0c0) >> 2);
        aux[1] = ((scales[j + 2] >> 4) & 0x0f0f) | ((scales[j - 0] & 0xc0c0) >> 2);
    }
    const uint8_t* sc = (const uint8_t*)aux;
    const uint8_t* m = sc + 2;

    for (int i = 0; i < 2; ++i) {
        const block_q8_1* bq8i = bq8_1 + bq8_offset + i;
        d8[i] = tc_h2f(bq8i->d);
        const int* q8 = (const int*)bq8i->qs + ((iqs / 2) % 4);
        u[2 * i + 0] = q8[0];
        u[2 * i + 1] = q8[4];
    }

    float sumf_d = 0.0f;
    float sumf_m = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int v0i = (v[0] >> (4 * i)) & 0x0F0F0F0F;
        const int v1i = (v[1] >> (4 * i)) & 0x0F0F0F0F;
        const int dot1 = tc_dp4a(v1i, u[2 * i + 1], tc_dp4a(v0i, u[2 * i + 0], 0));
        const int dot2 = tc_dp4a(0x01010101, u[2 * i + 1], tc_dp4a(0x01010101, u[2 * i + 0], 0));
        sumf_d += d8[i] * (dot1 * sc[i]);
        sumf_m += d8[i] * (dot2 * m[i]);
    }
    const float dx = tc_h2f(bq4_K->d);
    const float dy = tc_h2f(bq4_K->dmin);
    return dx * sumf_d - dy * sumf_m;
}

// Q6_K: VDR 1, QI 32: 32 threads per superblock, iqs = 0..31.
TC_DEVICE float vec_dot_q6_K_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q6_K* bq6_K = (const block_q6_K*)vbq + kbx;

    const int bq8_offset = 4 * (iqs / 16) + (iqs % 16) / 8;
    const int scale_offset = 8 * (iqs / 16) + (iqs % 16) / 4;
    const int vh_shift = 2 * ((iqs % 16) / 8);

    const int vl = get_int_b2(bq6_K->ql, iqs);
    const int vh = get_int_b2(bq6_K->qh, 8 * (iqs / 16) + iqs % 8) >> vh_shift;
    const int8_t* scales = bq6_K->scales + scale_offset;

    int u[2];
    float d8[2];
    for (int i = 0; i < 2; ++i) {
        u[i] = get_int_b4(bq8_1[bq8_offset + 2 * i].qs, iqs % 8);
        d8[i] = tc_h2f(bq8_1[bq8_offset + 2 * i].d);
    }

    float sumf = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int sc = scales[4 * i];
        const int vil = (vl >> (4 * i)) & 0x0F0F0F0F;
        const int vih = ((vh >> (4 * i)) << 4) & 0x30303030;
        // Bytewise (vil | vih) - 32: every byte is 0..63, so no byte borrows.
        const int vi = (vil | vih) - 0x20202020;
        sumf += d8[i] * (tc_dp4a(vi, u[i], 0) * sc);
    }
    return tc_h2f(bq6_K->d) * sumf;
}

// Q8_0: VDR 2, QI 8: 4 threads per block, iqs = 0, 2, 4, 6.
TC_DEVICE float vec_dot_q8_0_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q8_0* bq8_0 = (const block_q8_0*)vbq + kbx;
    int v[2];
    int u[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        v[i] = get_int_b2(bq8_0->qs, iqs + i);
        u[i] = get_int_b4(bq8_1->qs, iqs + i);
    }
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        sumi = tc_dp4a(v[i], u[i], sumi);
    }
    const float d8_0 = tc_h2f(bq8_0->d);
    const float d8_1 = tc_h2f(bq8_1->d);
    return d8_0 * d8_1 * ((float)sumi);
}

// ---------------------------------------------------------------------------------
// mul_mat_vec_q for one column: block (WARP, NWARPS), one weight row per block.

enum tc_type { TC_Q4_K, TC_Q6_K, TC_Q8_0 };

template <int type>
struct tc_traits;
template <>
struct tc_traits<TC_Q4_K> {
    static constexpr int qk = 256, qi = 32, vdr = 2;
    TC_DEVICE float vec_dot(const void* vx, const block_q8_1* y, int kbx, int iqs) {
        return vec_dot_q4_K_q8_1(vx, y, kbx, iqs);
    }
};
template <>
struct tc_traits<TC_Q6_K> {
    static constexpr int qk = 256, qi = 32, vdr = 1;
    TC_DEVICE float vec_dot(const void* vx, const block_q8_1* y, int kbx, int iqs) {
        return vec_dot_q6_K_q8_1(vx, y, kbx, iqs);
    }
};
template <>
struct tc_traits<TC_Q8_0> {
    static constexpr int qk = 32, qi = 8, vdr = 2;
    TC_DEVICE float vec_dot(const void* vx, const block_q8_1* y, int kbx, int iqs) {
        return vec_dot_q8_0_q8_1(vx, y, kbx, iqs);
    }
};

template <int type, int WARP, int NWARPS>
static __device__ __forceinline__ void mul_mat_vec_q(const void* __restrict__ vx,
                                                     const block_q8_1* __restrict__ vy,
                                                     float* __restrict__ dst,
                                                     const int blocks_per_row) {
    using T = tc_traits<type>;
    constexpr int qk = T::qk;
    constexpr int qi = T::qi;
    constexpr int vdr = T::vdr;
    constexpr int blocks_per_iter = vdr * NWARPS * WARP / qi;

    const int tid = WARP * threadIdx.y + threadIdx.x;
    const int row = blockIdx.x;

    float tmp = 0.0f;
    for (int kbx = tid / (qi / vdr); kbx < blocks_per_row; kbx += blocks_per_iter) {
        const int kby = kbx * (qk / QK8_1);
        const int kqs = vdr * (tid % (qi / vdr));
        tmp += T::vec_dot(vx, &vy[kby], row * blocks_per_row + kbx, kqs);
    }

    __shared__ float tmp_shared[NWARPS - 1 > 0 ? NWARPS - 1 : 1][WARP];
    if (threadIdx.y > 0) {
        tmp_shared[threadIdx.y - 1][threadIdx.x] = tmp;
    }
    __syncthreads();
    if (threadIdx.y > 0) {
        return;
    }
#pragma unroll
    for (int l = 0; l < NWARPS - 1; ++l) {
        tmp += tmp_shared[l][threadIdx.x];
    }
    tmp = warp_reduce_sum<WARP>(tmp);
    if (threadIdx.x == 0) {
        dst[row] = tmp;
    }
}

// Kernels the host finds by name: tc_mmvq_<type>_w<WARP>_n<NWARPS>. Launch with grid
// (nrows) and block (WARP, NWARPS); vx holds nrows rows of blocks_per_row blocks, vy
// one column of blocks_per_row * qk/32 q8_1 blocks, dst nrows floats.
#define TC_MMVQ(NAME, TYPE, WARP, NWARPS)                                                   \
    extern "C" __global__ void __launch_bounds__(WARP* NWARPS, 1)                           \
        tc_mmvq_##NAME##_w##WARP##_n##NWARPS(const void* __restrict__ vx,                   \
                                             const block_q8_1* __restrict__ vy,             \
                                             float* __restrict__ dst, const int blocks_per_row) { \
        mul_mat_vec_q<TYPE, WARP, NWARPS>(vx, vy, dst, blocks_per_row);                     \
    }

#define TC_MMVQ_NWARPS(NAME, TYPE, WARP) \
    TC_MMVQ(NAME, TYPE, WARP, 1)         \
    TC_MMVQ(NAME, TYPE, WARP, 2)         \
    TC_MMVQ(NAME, TYPE, WARP, 4)         \
    TC_MMVQ(NAME, TYPE, WARP, 8)

#define TC_MMVQ_TYPES(WARP)                \
    TC_MMVQ_NWARPS(q4_K, TC_Q4_K, WARP)    \
    TC_MMVQ_NWARPS(q6_K, TC_Q6_K, WARP)    \
    TC_MMVQ_NWARPS(q8_0, TC_Q8_0, WARP)

TC_MMVQ_TYPES(32)

// 64-wide kernels only where the hardware wavefront is 64 wide (gfx8/gfx9). On
// NVIDIA and on RDNA (wave32 by default) they are not built; the host reports the
// hip-wave64 device trials as ignored there.
#if defined(TC_PLATFORM_HIP) && defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE == 64
TC_MMVQ_TYPES(64)
#endif
