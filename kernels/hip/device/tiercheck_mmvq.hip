// tiercheck's device kernels for the hip-wave32 / hip-wave64 lanes: ggml's MMVQ path
// for one activation column, written from the float order documented in
// tiercheck-core's `gpu` module (docs/NUMERICS.md, section 5). Upstream functions:
//   quantize_q8_1            ggml-cuda/quantize.cu
//   vec_dot_q4_K_q8_1        ggml-cuda/vecdotq.cuh (+ _impl_vmmq)
//   vec_dot_q6_K_q8_1        ggml-cuda/vecdotq.cuh (+ _impl_mmvq)
//   vec_dot_q8_0_q8_1        ggml-cuda/vecdotq.cuh (+ _impl<float, 2>)
//   vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_1, vec_dot_q5_1_q8_1 (+ their _impl<2>),
//   vec_dot_q2_K_q8_1, vec_dot_q3_K_q8_1 (+ _impl_mmvq), vec_dot_q5_K_q8_1 (+ _impl_vmmq),
//   vec_dot_iq4_nl_q8_1, vec_dot_iq4_xs_q8_1   ggml-cuda/vecdotq.cuh
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
struct block_q4_1 {
    uint32_t dm;  // f16 d (low half) and m (high half)
    uint8_t qs[16];
};
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct block_q5_1 {
    uint32_t dm;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct block_q2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d;
    uint16_t dmin;
};
struct block_q3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[16];
};
struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");
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

// The q8_1 block's (d, s) as one dword (ggml's `half2 ds`; blocks are 36 bytes, so
// the pair is 4-byte aligned).
TC_DEVICE uint32_t q8_1_ds(const block_q8_1* b) {
    return *(const uint32_t*)&b->d;
}

// Q4_1, Q5_1: sumi * (d * d8) + (m * s8) / 2 with both scale products in f16 (ggml's
// FAST_FP16_AVAILABLE path, on every GPU the lanes model). The `/ 2` is
// QI8_1 / (VDR * QR) = 8 / 4 (Q4_1) and QI5_1 / VDR = 4 / 2 (Q5_1).
TC_DEVICE float min_close(const int sumi, const uint32_t dm, const block_q8_1* y) {
    const float2 tmp = tc_hmul2_f32(dm, q8_1_ds(y));
    const float dd8 = tmp.x;
    const float ms8 = tmp.y;
    return sumi * dd8 + ms8 / 2;
}

// Q4_1: VDR 2, QI 4: 2 threads per block, iqs = 0, 2.
TC_DEVICE float vec_dot_q4_1_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q4_1* b = (const block_q4_1*)vbq + kbx;
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int v = get_int_b4(b->qs, iqs + i);
        sumi = tc_dp4a((v >> 0) & 0x0F0F0F0F, get_int_b4(bq8_1->qs, iqs + i), sumi);
        sumi = tc_dp4a((v >> 4) & 0x0F0F0F0F, get_int_b4(bq8_1->qs, iqs + i + 4), sumi);
    }
    return min_close(sumi, b->dm, bq8_1);
}

// The 5-bit legacy quants of ints iqs + i: low nibbles, bit k of vh (0..3) as bit 4 of
// byte k; high nibbles, bits 16..19.
TC_DEVICE int q5_sumi(const uint8_t* qs, const uint8_t* qh4, const block_q8_1* y,
                      const int iqs, const bool b4) {
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int vl = b4 ? get_int_b4(qs, iqs + i) : get_int_b2(qs, iqs + i);
        const int vh = (b4 ? get_int_b4(qh4, 0) : get_int_b2(qh4, 0)) >> (4 * (iqs + i));
        int vi0 = (vl >> 0) & 0x0F0F0F0F;
        vi0 |= (vh << 4) & 0x00000010;
        vi0 |= (vh << 11) & 0x00001000;
        vi0 |= (vh << 18) & 0x00100000;
        vi0 |= (vh << 25) & 0x10000000;
        sumi = tc_dp4a(vi0, get_int_b4(y->qs, iqs + i), sumi);
        int vi1 = (vl >> 4) & 0x0F0F0F0F;
        vi1 |= (vh >> 12) & 0x00000010;
        vi1 |= (vh >> 5) & 0x00001000;
        vi1 |= (vh << 2) & 0x00100000;
        vi1 |= (vh << 9) & 0x10000000;
        sumi = tc_dp4a(vi1, get_int_b4(y->qs, iqs + i + 4), sumi);
    }
    return sumi;
}

// Q5_0: VDR 2, QI 4: d5 * (sumi * d8 - 8 * s8), 8 = 16 * VDR / QI5_0.
TC_DEVICE float vec_dot_q5_0_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q5_0* b = (const block_q5_0*)vbq + kbx;
    const int sumi = q5_sumi(b->qs, b->qh, bq8_1, iqs, false);
    const float2 ds8 = tc_h2f2(q8_1_ds(bq8_1));
    return tc_h2f(b->d) * (sumi * ds8.x - (16 * 2 / 4) * ds8.y);
}

// Q5_1: VDR 2, QI 4.
TC_DEVICE float vec_dot_q5_1_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q5_1* b = (const block_q5_1*)vbq + kbx;
    const int sumi = q5_sumi(b->qs, b->qh, bq8_1, iqs, true);
    return min_close(sumi, b->dm, bq8_1);
}

// Q2_K: VDR 1, QI 16: 16 threads per superblock, four q8_1 blocks per thread.
TC_DEVICE float vec_dot_q2_K_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q2_K* b = (const block_q2_K*)vbq + kbx;
    const int bq8_offset = 4 * (iqs / 8);
    const int scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    const uint8_t* scales = b->scales + scale_offset;
    const int v = get_int_b4(b->qs, iqs);
    int u[4];
    float d8[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        u[i] = get_int_b4(bq8_1[bq8_offset + i].qs, iqs % 8);
        d8[i] = tc_h2f(bq8_1[bq8_offset + i].d);
    }
    float sumf_d = 0.0f;
    float sumf_m = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int sc = scales[2 * i];
        const int vi = (v >> (2 * i)) & 0x03030303;
        sumf_d += d8[i] * (tc_dp4a(vi, u[i], 0) * (sc & 0xF));
        int m = sc >> 4;
        m |= m << 8;
        m |= m << 16;
        sumf_m += d8[i] * tc_dp4a(m, u[i], 0);
    }
    const float dx = tc_h2f(b->d);
    const float dy = tc_h2f(b->dmin);
    return dx * sumf_d - dy * sumf_m;
}

// Q3_K: VDR 1, QI 16: 16 threads per superblock, four q8_1 blocks per thread.
TC_DEVICE float vec_dot_q3_K_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q3_K* b = (const block_q3_K*)vbq + kbx;
    const int bq8_offset = 4 * (iqs / 8);
    const int scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    const int vl = get_int_b2(b->qs, iqs);
    // Inverted: a clear high bit subtracts 4.
    const int vh = ~get_int_b2(b->hmask, iqs % 8) >> bq8_offset;
    float sumf = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int isc = scale_offset + 2 * i;
        const int sc_low = (b->scales[isc % 8] >> (4 * (isc / 8))) & 0xF;
        const int sc_high = ((b->scales[8 + isc % 4] >> (2 * (isc / 4))) & 3) << 4;
        const int sc = (sc_low | sc_high) - 32;
        const int vil = (vl >> (2 * i)) & 0x03030303;
        const int vih = ((vh >> i) << 2) & 0x04040404;
        // Bytewise vil - vih: each byte of vil is 0..3 and of vih 0 or 4 (ggml's __vsub4).
        int vi = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            vi |= (((vil >> (8 * k)) - (vih >> (8 * k))) & 0xFF) << (8 * k);
        }
        const int u = get_int_b4(bq8_1[bq8_offset + i].qs, iqs % 8);
        const float d8 = tc_h2f(bq8_1[bq8_offset + i].d);
        sumf += d8 * (tc_dp4a(vi, u, 0) * sc);
    }
    return tc_h2f(b->d) * sumf;
}

// Q5_K: VDR 2, QI 32: 16 threads per superblock, as Q4_K with a fifth bit.
TC_DEVICE float vec_dot_q5_K_q8_1(const void* __restrict__ vbq,
                                  const block_q8_1* __restrict__ bq8_1, const int kbx,
                                  const int iqs) {
    const block_q5_K* b = (const block_q5_K*)vbq + kbx;
    const int bq8_offset = 2 * ((iqs / 2) / 4);
    const int* ql = (const int*)(b->qs + 16 * bq8_offset + 4 * ((iqs / 2) % 4));
    const int* qh = (const int*)(b->qh + 4 * ((iqs / 2) % 4));
    const int vl[2] = {ql[0], ql[4]};
    const int vh[2] = {qh[0] >> bq8_offset, qh[4] >> bq8_offset};

    const uint16_t* scales = (const uint16_t*)b->scales;
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

    float sumf_d = 0.0f;
    float sumf_m = 0.0f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const block_q8_1* bq8i = bq8_1 + bq8_offset + i;
        const float d8 = tc_h2f(bq8i->d);
        const int* q8 = (const int*)bq8i->qs + ((iqs / 2) % 4);
        const int v0i = ((vl[0] >> (4 * i)) & 0x0F0F0F0F) | (((vh[0] >> i) << 4) & 0x10101010);
        const int v1i = ((vl[1] >> (4 * i)) & 0x0F0F0F0F) | (((vh[1] >> i) << 4) & 0x10101010);
        const int dot1 = tc_dp4a(v0i, q8[0], tc_dp4a(v1i, q8[4], 0));
        const int dot2 = tc_dp4a(0x01010101, q8[0], tc_dp4a(0x01010101, q8[4], 0));
        sumf_d += d8 * (dot1 * sc[i]);
        sumf_m += d8 * (dot2 * m[i]);
    }
    const float dx = tc_h2f(b->d);
    const float dy = tc_h2f(b->dmin);
    return dx * sumf_d - dy * sumf_m;
}

// The IQ4_NL code book (ggml's kvalues_iq4nl).
__constant__ int8_t tc_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

// The table values of the eight nibbles of q4: the low nibbles' bytes, the high ones'.
TC_DEVICE int2 iq4_lookup(const int q4) {
    int lo = 0;
    int hi = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int byte = (q4 >> (8 * k)) & 0xFF;
        lo |= (tc_kvalues_iq4nl[byte & 0xF] & 0xFF) << (8 * k);
        hi |= (tc_kvalues_iq4nl[byte >> 4] & 0xFF) << (8 * k);
    }
    return make_int2(lo, hi);
}

// IQ4_NL: VDR 2, QI 4: 2 threads per block.
TC_DEVICE float vec_dot_iq4_nl_q8_1(const void* __restrict__ vbq,
                                    const block_q8_1* __restrict__ bq8_1, const int kbx,
                                    const int iqs) {
    const block_iq4_nl* b = (const block_iq4_nl*)vbq + kbx;
    const int* q8 = (const int*)bq8_1->qs + iqs;
    int sumi = 0;
#pragma unroll
    for (int l = 0; l < 2; ++l) {
        const int2 v = iq4_lookup(get_int_b2(b->qs, iqs + l));
        sumi = tc_dp4a(v.x, q8[l + 0], sumi);
        sumi = tc_dp4a(v.y, q8[l + 4], sumi);
    }
    const float d = tc_h2f(b->d) * tc_h2f(bq8_1->d);
    return d * sumi;
}

// IQ4_XS: VDR 4, QI 32: 8 threads per superblock, one q8_1 block each.
TC_DEVICE float vec_dot_iq4_xs_q8_1(const void* __restrict__ vbq,
                                    const block_q8_1* __restrict__ bq8_1, const int kbx,
                                    const int iqs) {
    const block_iq4_xs* b = (const block_iq4_xs*)vbq + kbx;
    int sumi = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int2 v = iq4_lookup(get_int_b4(b->qs, iqs + j));
        sumi = tc_dp4a(v.x, get_int_b4(bq8_1[iqs / 4].qs, j + 0), sumi);
        sumi = tc_dp4a(v.y, get_int_b4(bq8_1[iqs / 4].qs, j + 4), sumi);
    }
    const int ls = ((b->scales_l[iqs / 8] >> (iqs & 0x04)) & 0x0F) |
                   (((b->scales_h >> (iqs / 2)) & 0x03) << 4);
    sumi *= ls - 32;
    const float d = tc_h2f(b->d) * tc_h2f(bq8_1[iqs / 4].d);
    return d * sumi;
}

// ---------------------------------------------------------------------------------
// mul_mat_vec_q for one column: block (WARP, NWARPS), one weight row per block.

enum tc_type {
    TC_Q4_K,
    TC_Q6_K,
    TC_Q8_0,
    TC_Q4_1,
    TC_Q5_0,
    TC_Q5_1,
    TC_Q2_K,
    TC_Q3_K,
    TC_Q5_K,
    TC_IQ4_NL,
    TC_IQ4_XS
};

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

#define TC_TRAITS(TYPE, QK, QI, VDR, FN)                                            \
    template <>                                                                     \
    struct tc_traits<TYPE> {                                                        \
        static constexpr int qk = QK, qi = QI, vdr = VDR;                           \
        TC_DEVICE float vec_dot(const void* vx, const block_q8_1* y, int kbx, int iqs) { \
            return FN(vx, y, kbx, iqs);                                             \
        }                                                                           \
    };
TC_TRAITS(TC_Q4_1, 32, 4, 2, vec_dot_q4_1_q8_1)
TC_TRAITS(TC_Q5_0, 32, 4, 2, vec_dot_q5_0_q8_1)
TC_TRAITS(TC_Q5_1, 32, 4, 2, vec_dot_q5_1_q8_1)
TC_TRAITS(TC_Q2_K, 256, 16, 1, vec_dot_q2_K_q8_1)
TC_TRAITS(TC_Q3_K, 256, 16, 1, vec_dot_q3_K_q8_1)
TC_TRAITS(TC_Q5_K, 256, 32, 2, vec_dot_q5_K_q8_1)
TC_TRAITS(TC_IQ4_NL, 32, 4, 2, vec_dot_iq4_nl_q8_1)
TC_TRAITS(TC_IQ4_XS, 256, 32, 4, vec_dot_iq4_xs_q8_1)

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

#define TC_MMVQ_TYPES(WARP)                  \
    TC_MMVQ_NWARPS(q4_K, TC_Q4_K, WARP)      \
    TC_MMVQ_NWARPS(q6_K, TC_Q6_K, WARP)      \
    TC_MMVQ_NWARPS(q8_0, TC_Q8_0, WARP)      \
    TC_MMVQ_NWARPS(q4_1, TC_Q4_1, WARP)      \
    TC_MMVQ_NWARPS(q5_0, TC_Q5_0, WARP)      \
    TC_MMVQ_NWARPS(q5_1, TC_Q5_1, WARP)      \
    TC_MMVQ_NWARPS(q2_K, TC_Q2_K, WARP)      \
    TC_MMVQ_NWARPS(q3_K, TC_Q3_K, WARP)      \
    TC_MMVQ_NWARPS(q5_K, TC_Q5_K, WARP)      \
    TC_MMVQ_NWARPS(iq4_nl, TC_IQ4_NL, WARP)  \
    TC_MMVQ_NWARPS(iq4_xs, TC_IQ4_XS, WARP)

TC_MMVQ_TYPES(32)

// 64-wide kernels only where the hardware wavefront is 64 wide (gfx8/gfx9). On
// NVIDIA and on RDNA (wave32 by default) they are not built; the host reports the
// hip-wave64 device trials as ignored there.
#if defined(TC_PLATFORM_HIP) && defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE == 64
TC_MMVQ_TYPES(64)
#endif
