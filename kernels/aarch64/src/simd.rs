//! The small NEON load and store helpers the native kernels share: bounds-checked loads
//! from byte slices and arrays, broadcasts of 4 or 8 bytes, stores to arrays. Each is one
//! instruction (or a lane broadcast) around an assertion; none rounds or reorders.

use core::arch::aarch64::*;

/// 16 bytes of `p` (at least 16 long).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn ld(p: &[u8]) -> uint8x16_t {
    assert!(p.len() >= 16);
    // SAFETY: 16 readable bytes (asserted).
    unsafe { vld1q_u8(p.as_ptr()) }
}

/// 16 bytes of `p` as signed bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn lds(p: &[u8]) -> int8x16_t {
    vreinterpretq_s8_u8(ld(p))
}

/// 4 bytes of `p`, in every lane (`vld1q_dup_s32`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn ld_dup4(p: &[u8]) -> int8x16_t {
    let v = u32::from_le_bytes(p[..4].try_into().expect("4 bytes"));
    vreinterpretq_s8_u32(vdupq_n_u32(v))
}

/// 8 bytes of `p`, twice (`vld1q_dup_s64`).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn ld_dup8(p: &[u8]) -> int8x16_t {
    let v = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
    vreinterpretq_s8_u64(vdupq_n_u64(v))
}

/// Four floats.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn ldf(v: [f32; 4]) -> float32x4_t {
    // SAFETY: 4 floats.
    unsafe { vld1q_f32(v.as_ptr()) }
}

/// Four ints.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn ldi(v: [i32; 4]) -> int32x4_t {
    // SAFETY: 4 ints.
    unsafe { vld1q_s32(v.as_ptr()) }
}

/// The four floats of `v`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn st(v: float32x4_t) -> [f32; 4] {
    let mut o = [0.0f32; 4];
    // SAFETY: 4 writable floats.
    unsafe { vst1q_f32(o.as_mut_ptr(), v) };
    o
}

/// The four ints of `v`.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn sti(v: int32x4_t) -> [i32; 4] {
    let mut o = [0i32; 4];
    // SAFETY: 4 writable ints.
    unsafe { vst1q_s32(o.as_mut_ptr(), v) };
    o
}
