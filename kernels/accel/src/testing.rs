//! Test inputs shared by the accelerated forms' tests, and the one comparison they make:
//! the installed form against the scalar twin, bitwise.

use tiercheck_core::rng::Rng;
use tiercheck_core::GgmlType;

/// `nb` random blocks of `ty` with finite scales (f16 exponent below all-ones; the
/// Q8_K f32 scale a normal number) and every other byte random, so extreme codes
/// (-128 in q8 data, 0 and 15 nibbles) occur.
pub(crate) fn blocks(rng: &mut Rng, ty: GgmlType, nb: usize, extreme: bool) -> Vec<u8> {
    let size = ty.type_size();
    let mut b = vec![0u8; nb * size];
    rng.fill_bytes(&mut b);
    if extreme {
        for (i, v) in b.iter_mut().enumerate() {
            *v = if i % 3 == 0 {
                0x80
            } else if i % 3 == 1 {
                0x7F
            } else {
                0xFF
            };
        }
    }
    for blk in b.chunks_exact_mut(size) {
        let f16 = |rng: &mut Rng| (0x3000u16 + rng.below(0x1800) as u16).to_le_bytes();
        match ty {
            GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::Q5_0 | GgmlType::IQ4_NL => {
                blk[..2].copy_from_slice(&f16(rng))
            }
            // d, then m (Q4_1, Q5_1) or s (Q8_1: d times the block's sum, any finite value).
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => {
                blk[..2].copy_from_slice(&f16(rng));
                blk[2..4].copy_from_slice(&f16(rng));
            }
            GgmlType::Q4_K | GgmlType::Q5_K => {
                blk[..2].copy_from_slice(&f16(rng));
                blk[2..4].copy_from_slice(&f16(rng));
            }
            GgmlType::IQ4_XS => blk[..2].copy_from_slice(&f16(rng)),
            // scales, qs, then d and dmin.
            GgmlType::Q2_K => {
                blk[80..82].copy_from_slice(&f16(rng));
                blk[82..84].copy_from_slice(&f16(rng));
            }
            // hmask, qs, scales, then d.
            GgmlType::Q3_K => blk[108..110].copy_from_slice(&f16(rng)),
            GgmlType::Q6_K => blk[208..210].copy_from_slice(&f16(rng)),
            GgmlType::Q8_K => {
                blk[..4].copy_from_slice(&(rng.range(-2.0, 2.0) * 1e-2).to_le_bytes());
                // bsums hold the sums of each 16 quants, as every Q8_K quantizer writes
                // them (the kernels rely on it).
                for g in 0..16 {
                    let sum: i32 =
                        blk[4 + 16 * g..4 + 16 * g + 16].iter().map(|&q| q as i8 as i32).sum();
                    let at = 4 + 256 + 2 * g;
                    blk[at..at + 2].copy_from_slice(&(sum as i16).to_le_bytes());
                }
            }
            _ => unreachable!(),
        }
    }
    b
}

/// The installed form of `f` and its scalar twin (`with_scalar`) give the same bits.
pub(crate) fn same(what: &str, f: impl Fn() -> f32) {
    crate::install();
    let fast = f();
    let scalar = tiercheck_core::accel::with_scalar(&f);
    assert_eq!(fast.to_bits(), scalar.to_bits(), "{what}: accelerated {fast} scalar {scalar}");
}

/// [`same`] for integer results.
pub(crate) fn same_int(what: &str, f: impl Fn() -> i32) {
    crate::install();
    let fast = f();
    let scalar = tiercheck_core::accel::with_scalar(&f);
    assert_eq!(fast, scalar, "{what}: accelerated {fast} scalar {scalar}");
}

/// Installs the forms and asserts that `slot` holds one when `expected` (the host serves
/// it): a comparison with an empty slot would only compare the scalar twin with itself.
pub(crate) fn installed<F: Copy>(
    what: &str,
    slot: &tiercheck_core::accel::Slot<F>,
    expected: bool,
) {
    crate::install();
    assert_eq!(slot.has_fast(), expected, "{what}: slot filled {} on this host", slot.has_fast());
}

/// Whether this host serves the x86-64 AVX2+FMA forms; under CI (whose x86-64 machines
/// have AVX2) a host without them is a failure, not a pass.
#[allow(dead_code)]
pub(crate) fn avx2_here() -> bool {
    let here = crate::Host::detect().avx2_fma;
    if cfg!(target_arch = "x86_64") && !here {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but this host lacks AVX2: the accelerated forms cannot be checked"
        );
    }
    here
}
