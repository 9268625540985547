//! Portable twins of ggml's CUDA/HIP matrix-vector path for quantized weights (MMVQ,
//! `ggml-cuda/mmvq.cu`, `vecdotq.cuh`, `quantize.cu`; the F32/F16 one of the attention
//! products is [`MmvfConfig`]), as compiled by HIP clang for
//! AMD GPUs and by nvcc for NVIDIA GPUs: the arithmetic of the `hip-wave32`, `hip-wave64` and
//! `cuda-sm90` lanes ([`WAVE32`], [`WAVE64`], [`CUDA`]).
//!
//! One output of a matrix-vector product with a single activation column (decode) is
//! computed on the device in three stages. Each stage below states the upstream
//! function, then the float operations in the order the device performs them. Integer
//! parts are exact on every GPU; only the float order, the fusion of multiply-adds and
//! the activation rounding make tiers differ.
//!
//! # 1. Activations: `quantize_q8_1` ([`quantize_q8_1_mmvq`])
//!
//! One thread per value, 32 consecutive threads (one q8_1 block) per reduction, width
//! 32 also on 64-wide AMD wavefronts. Thread i holds `x_i` (0.0 beyond the row's end).
//! - `amax = warp_reduce_max<32>(fabsf(x_i))`: XOR butterfly, offsets 16, 8, 4, 2, 1,
//!   lane i takes `fmaxf(v_i, v_(i^off))`. `fmaxf` ignores a NaN operand; on the
//!   non-negative `fabsf` values the maximum does not depend on the order.
//! - `sum = warp_reduce_sum<32>(x_i)`: the same butterfly with `v_i + v_(i^off)`, one
//!   binary32 rounding per addition. Every lane ends with the same value (addition is
//!   commutative); lane 0's is the tree
//!   `((((x0+x16)+(x8+x24))+((x4+x20)+(x12+x28)))+(...x2...))+(...x1...)`: level by
//!   level, lane i adds lane i+16, then i+8, i+4, i+2, i+1.
//! - `d = amax / 127.0f`: a true IEEE division. HIP clang compiles f32 division
//!   correctly rounded by default (`-fhip-fp32-correctly-rounded-divide-sqrt` is on
//!   unless disabled), and ggml's HIP build (`ggml-hip/CMakeLists.txt`) sets no
//!   fast-math or contraction flag.
//! - `q_i = amax == 0 ? 0 : roundf(x_i / d)`: a second IEEE division (not a multiply
//!   by a reciprocal), rounded half away from zero, converted to `int8_t`. The
//!   conversion is modelled as AMDGPU's `v_cvt_i32_f32` (NaN to 0, saturating) then the
//!   low 8 bits; it only matters when `d` underflows to 0 or for non-finite inputs.
//! - `ds = make_half2(d, sum)`: both rounded to binary16, nearest even (ggml's
//!   `GGML_FP32_TO_FP16` rule; NaN payloads are not modelled). So the q8_1 `s` field is
//!   the f16 of the **float sum of the unquantized values**, not `d * sum(q)` as on the
//!   CPU. (q4_K, q6_K, q8_0 and the K and IQ types read only `d`; q4_K and q5_K take
//!   the q8 sums they need from `dp4a` with 0x01010101 instead of `s`. Q4_1, Q5_1 and
//!   Q5_0 read `s`: their offsets multiply it.)
//!
//! CUDA differs: ggml's CUDA build uses `-use_fast_math`, and the SASS nvcc makes of
//! this kernel (sm_80, sm_90) flushes subnormals in every float instruction, computes
//! `d = amax * RN(1/127)` (ptxas folds the approximate division by a constant into a
//! product) and the code from `x * MUFU.RCP(d)`, a hardware reciprocal approximation.
//! [`quantize_q8_1_cuda`] is that quantizer, with the reciprocal modelled as correctly
//! rounded (the one step no document specifies bit for bit).
//!
//! # 2. One thread's share: `vec_dot_*_q8_1` ([`vec_dot_q4_k_q8_1`], [`vec_dot_q6_k_q8_1`], [`vec_dot_q8_0_q8_1`], and the other eight types)
//!
//! Integer dot products of four byte pairs use `ggml_cuda_dp4a` (`sdot4` on CDNA /
//! RDNA2, `sudot4` with both operands signed on RDNA3/4, `__dp4a` on NVIDIA): exact,
//! wrapping in 32 bits ([`dp4a`]). Every integer that meets a float below is below
//! 2^24 in magnitude, so its conversion is exact.
//!
//! - `vec_dot_q4_K_q8_1` (`VDR_Q4_K_Q8_1_MMVQ = 2`, `QI4_K = 32`, 16 threads per
//!   superblock, `iqs = 0, 2, .., 30`): chunk `c = iqs/8` (sub-blocks 2c, 2c+1), byte
//!   offset `r = 4*((iqs/2)%4)`; the thread covers values `64c + r .. +4` and
//!   `64c + 16 + r .. +4` of both sub-blocks. For i = 0, 1 (sub-block 2c+i, q8_1 block
//!   2c+i with scale `d8_i`): `dot1_i` = dp4a of the eight nibbles with the eight q8
//!   bytes, `dot2_i` = dp4a of 0x01010101 with the same q8 bytes (their sum). Float:
//!   `sumf_d = 0; sumf_d += d8_i * (float)(dot1_i * sc_i)` for i = 0, 1, and
//!   `sumf_m = 0; sumf_m += d8_i * (float)(dot2_i * m_i)` likewise; the result is
//!   `dm.x * sumf_d - dm.y * sumf_m` (`vec_dot_q4_K_q8_1_impl_vmmq`).
//! - `vec_dot_q6_K_q8_1` (`VDR = 1`, `QI6_K = 32`, 32 threads per superblock,
//!   `iqs = 0..32`): half `n = iqs/16`; four values from `ql[4*iqs..]` with their two
//!   high bits from `qh` (shift 0 or 2); for i = 0, 1 the low (i = 0) or high (i = 1)
//!   nibbles, minus 32, against q8_1 block `4n + (iqs%16)/8 + 2i` with the 8-bit scale
//!   `scales[8n + (iqs%16)/4 + 4i]`. Float: `sumf = 0; sumf += d8_i * (float)(dp4a *
//!   sc_i)` for i = 0, 1; result `d * sumf` (`vec_dot_q6_K_q8_1_impl_mmvq`).
//! - `vec_dot_q8_0_q8_1` (`VDR = 2`, `QI8_0 = 8`, 4 threads per block,
//!   `iqs = 0, 2, 4, 6`): `sumi` = two chained dp4a over bytes `4*iqs .. 4*iqs + 8`;
//!   result `(d_x * d_y) * (float)sumi` (`vec_dot_q8_0_q8_1_impl<float, 2>`).
//!
//! The other eight types ([`MMVQ_TYPES`]; integer parts exact as above):
//! - `vec_dot_q4_1_q8_1`, `vec_dot_q5_1_q8_1` (`VDR = 2`, `QI = 4`, 2 threads per
//!   block, `iqs = 0, 2`): `sumi` over ints `iqs`, `iqs + 1` (low nibbles against q8
//!   ints `iqs + i`, high ones against `iqs + i + 4`; Q5_1 with the fifth bits from
//!   `qh >> 4*(iqs + i)`). Float: ggml's FAST_FP16_AVAILABLE path (every GPU modelled
//!   here): `__hmul2(dm, ds8)`, i.e. `dd8 = f16(d * d8)` and `ms8 = f16(m * s8)`, two
//!   f16 products rounded once each (an f16 result: `d * d8` below 2^-14 is an f16
//!   subnormal); result `sumi * dd8 + ms8 / 2` (the `/ 2` is
//!   `QI8_1 / (VDR * QR)`, compiled as a product by 0.5), combined per
//!   [`Contraction::combine`].
//! - `vec_dot_q5_0_q8_1` (`VDR = 2`, `QI = 4`): `sumi` as Q5_1 (unsigned 5-bit codes);
//!   result `d5 * (sumi * d8 - 8 * s8)` (`16 * VDR / QI5_0 = 8`; two threads per block,
//!   so the block's `- 16 * d5 * s8`), the inner combine per [`Contraction::combine`],
//!   the outer product a [`Contraction::accumulate`] candidate.
//! - `vec_dot_q2_K_q8_1` (`VDR = 1`, `QI2_K = 16`, 16 threads per superblock): one int of
//!   2-bit codes against four q8_1 blocks `4*(iqs/8) + i`; `sumf_d += d8_i * (float)(dot_i
//!   * (sc & 0xF))`, `sumf_m += d8_i * (float)dp4a(m replicated, u_i)` for i = 0..4;
//!   result `dm.x * sumf_d - dm.y * sumf_m`, as q4_K.
//! - `vec_dot_q3_K_q8_1` (`VDR = 1`, `QI3_K = 16`): codes `(qs >> 2i) & 3` minus 4 where
//!   the `hmask` bit is clear (`__vsub4`), the 6-bit scale minus 32; `sumf += d8_i *
//!   (float)(dot_i * sc_i)` for i = 0..4; result `d * sumf`, as q6_K.
//! - `vec_dot_q5_K_q8_1` (`VDR = 2`, `QI5_K = 32`): q4_K's order with a fifth bit from
//!   `qh`.
//! - `vec_dot_iq4_nl_q8_1` (`VDR = 2`, `QI = 4`) and `vec_dot_iq4_xs_q8_1` (`VDR = 4`,
//!   `QI = 32`, 8 threads per superblock, one q8_1 block each): codes through the
//!   16-entry table; IQ4_XS multiplies `sumi` by its 6-bit scale minus 32 (integer);
//!   result `(d_x * d_y) * (float)sumi`, as q8_0.
//!
//! # 3. The reduction of one output: `mul_mat_vec_q` ([`mmvq_gemv`])
//!
//! A block of `nwarps` warps of `warp_size` lanes; thread `tid = warp_size*warp + lane`.
//! - Per thread: `tmp = 0`; for `kbx = tid / (qi/vdr)`, stepping by
//!   `blocks_per_iter = vdr * nwarps * warp_size / qi` while `kbx < blocks_per_row`:
//!   `tmp += vec_dot(x[kbx], y[kbx * qk/32 ..], iqs = vdr * (tid % (qi/vdr)))`, in
//!   increasing kbx.
//! - Warps 1..nwarps-1 store `tmp` to shared memory; lane l of warp 0 adds them in
//!   order: `tmp += shared[0][l]; tmp += shared[1][l]; ...` (warp 1 first).
//! - `warp_reduce_sum<warp_size>`: the XOR butterfly over warp 0 with offsets
//!   `warp_size/2, .., 2, 1`; lane 0's value is the output (every lane holds it).
//!
//! So the float order depends on `warp_size` and `nwarps`, i.e. on the GPU
//! generation ([`calc_nwarps`], [`MmvqTable`]). The `small_k` variant only raises the
//! rows per block; each row's order is unchanged. Fused epilogues (bias, GLU gate) and
//! the multi-column (`ncols_dst > 1`) and MoE kernels are not reproduced.
//!
//! # Contraction (fused multiply-add)
//!
//! ggml's HIP build passes no `-ffp-contract`; HIP clang's default for device code is
//! `-ffp-contract=fast-honor-pragmas` (since LLVM 12): every `fmul`/`fadd` carries the
//! `contract` flag, and the AMDGPU back end fuses a multiply feeding an add into
//! `v_fma_f32` / `v_fmac_f32` / `v_fma_mix_f32` across statements and across the
//! inlined `vec_dot`. Which ones fuse was read from the disassembly of the code objects
//! that Debian's HIP 5.2.3 / clang 15 builds from **ggml's own** `mmvq.cu` (gfx1030 and
//! gfx90a; `kernels/hip`'s `ggml` trials compare every kernel's float operations with
//! these recipes), and from `kernels/hip`'s own device source, which that crate's other
//! tests check whenever its code objects are built:
//! - `sumf_d`, `sumf_m` (q4_K) and `sumf` (q6_K): `sumf = fma(d8_i, (float)int_i,
//!   sumf)` (for i = 0 against 0.0, which equals the rounded product). Both targets.
//! - q4_K's result on RDNA2 (gfx1030): `fma(dm.x, sumf_d, -(dm.y * sumf_m))`
//!   ([`Contraction::HIP_CLANG`]). On CDNA2 (gfx90a), which has packed f32
//!   instructions, the two products become one `v_pk_mul_f32` and the subtraction
//!   stays separate: unfused ([`Contraction::HIP_CLANG_GFX90A`]). The same holds for
//!   every two-product close ([`Contraction::combine`]): q5_K's and q2_K's, q4_1's and
//!   q5_1's `fma(sumi, dd8, ms8 * 0.5)`, q5_0's `fma(sumi, d8, -(8 * s8))`, fused on
//!   RDNA, RDNA3 and NVIDIA, unfused on gfx90a.
//! - The kernel's `tmp += vec_dot(...)` when the inlined `vec_dot` ends in a multiply:
//!   q6_K and q3_K `tmp = fma(d, sumf, tmp)`, q8_0, IQ4_NL and IQ4_XS `tmp = fma(d_x *
//!   d_y, (float)sumi, tmp)`, q5_0 `tmp = fma(d5, inner, tmp)`. q4_K's (q5_K's, q2_K's,
//!   q4_1's, q5_1's) result is already an fma, a sum or a subtraction, so its `tmp +=`
//!   stays a plain addition. Both targets.
//! - Additions of the shared-memory partials and of the butterflies, and everything in
//!   `quantize_q8_1` (its divisions are the correctly rounded `v_div_scale` /
//!   `v_div_fmas` / `v_div_fixup` sequence), have no multiply to fuse.
//!
//! These are the choices of one compiler version (HIP 5.2.3's clang 15) for ggml's
//! source; another ROCm can vectorize differently; each choice is a switch of
//! [`Contraction`], and a device run (`ci/gpu-check`) compares device and twin bit for
//! bit. (NVIDIA's nvcc also fuses by default, `--fmad=true`, by its own rules.)

mod blockwise;
pub mod elem;
mod mmvf;
pub mod mmvq;
pub mod ocml;
mod quantize;
mod vecdotq;

#[cfg(test)]
mod tests;

pub use mmvf::{MmvfAcc, MmvfConfig, MMVF_AMPERE, MMVF_CDNA, MMVF_RDNA2, MMVF_RDNA3};
pub use mmvq::{
    calc_nwarps, mmvq_gemv, nwarps_one_column, MmvqConfig, MmvqTable, CUDA, MMVQ_TYPES, WAVE32,
    WAVE32_RDNA3_0, WAVE64,
};
pub use quantize::{butterfly_max, butterfly_sum, quantize_q8_1_cuda, quantize_q8_1_mmvq};
pub use vecdotq::{
    dp4a, q4_k_scales_for_chunk, vec_dot_q4_k_q8_1, vec_dot_q6_k_q8_1, vec_dot_q8_0_q8_1, Combine,
    Contraction,
};
