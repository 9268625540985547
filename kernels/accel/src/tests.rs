use super::*;
use tiercheck_core::blocks::q4_k::scale_min_k4;

/// Whether the AVX2 forms can be checked here. Without AVX2 the lanes never take
/// them (the dispatch asserted below), so there is nothing to compare; under CI
/// (`CI` set), whose machines have AVX2, that is a failure, not a pass.
#[cfg(target_arch = "x86_64")]
fn avx2_here() -> bool {
    let here = Host::detect().avx2_fma;
    if !here {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but this host lacks AVX2: the accelerated forms cannot be checked"
        );
    }
    here
}

#[test]
fn q4k_scales_mins_is_scale_min_k4() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20000 {
        let mut q = [0u8; 12];
        for b in q.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        let (sc, mn) = q4k_scales_mins(&q);
        for j in 0..8 {
            assert_eq!((sc[j], mn[j]), scale_min_k4(j, &q), "{q:?} j={j}");
        }
    }
}

/// `q8_0x4_isums` and `q4_0x4_isums` against their definition, both interleaves, on
/// random bytes and on extreme ones (-128 and 127 everywhere).
#[cfg(target_arch = "x86_64")]
#[test]
fn x4_isums_are_their_definition() {
    use tiercheck_core::repack::interleaved_index;
    if !avx2_here() {
        return;
    }
    let mut st = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        st as u8
    };
    for round in 0..2000 {
        let pick = |b: u8| match round % 4 {
            0 => 0x80,
            1 => 0x7F,
            _ => b,
        };
        let q8: [u8; 128] = core::array::from_fn(|_| pick(next()));
        let q4: [u8; 64] = core::array::from_fn(|_| pick(next()));
        let y: [u8; 32] = core::array::from_fn(|_| pick(next()));
        for il in [4, 8] {
            // SAFETY: AVX2 checked above.
            let got8 = unsafe { x86::q8_0x4_isums(&q8, il, &y) };
            // SAFETY: AVX2 checked above.
            let got4 = unsafe { x86::q4_0x4_isums(&q4, il, &y) };
            for r in 0..4 {
                let want8: i32 = (0..32)
                    .map(|o| q8[interleaved_index(4, il, r, o)] as i8 as i32 * y[o] as i8 as i32)
                    .sum();
                let want4: i32 = (0..16)
                    .map(|o| {
                        let q = q4[interleaved_index(4, il, r, o)] ^ 0x88;
                        ((q & 0xF) as i32 - 8) * y[o] as i8 as i32
                            + ((q >> 4) as i32 - 8) * y[o + 16] as i8 as i32
                    })
                    .sum();
                assert_eq!(got8[r], want8, "q8_0x4 il {il} row {r} round {round}");
                assert_eq!(got4[r], want4, "q4_0x4 il {il} row {r} round {round}");
            }
        }
    }
}

/// `q4kx8_dots` against its definition on random bytes and on extreme ones (every
/// nibble 15 against -128).
#[cfg(target_arch = "x86_64")]
#[test]
fn q4kx8_dots_is_its_definition() {
    if !avx2_here() {
        return;
    }
    let mut rng = tiercheck_core::rng::Rng::new(5);
    for round in 0..200 {
        let mut qs = [0u8; 1024];
        let mut y = [0u8; 256];
        rng.fill_bytes(&mut qs);
        rng.fill_bytes(&mut y);
        if round == 0 {
            (qs, y) = ([0xFF; 1024], [0x80; 256]);
        }
        for il in [4, 8] {
            // SAFETY: AVX2 detected above.
            let got = unsafe { x86::q4kx8_dots(&qs, &y, il) };
            for r in 0..8 {
                for s in 0..8 {
                    let (c, high) = (s / 2, s % 2 == 1);
                    let want: i32 = (0..32)
                        .map(|l| {
                            let b =
                                qs[tiercheck_core::repack::interleaved_index(8, il, r, 32 * c + l)];
                            let n = if high { b >> 4 } else { b & 0xF };
                            n as i32 * y[64 * c + 32 * high as usize + l] as i8 as i32
                        })
                        .sum();
                    assert_eq!(got[s][r], want, "il={il} r={r} s={s}");
                }
            }
        }
    }
}

/// `q6kx8_isums` against its definition (each row deinterleaved, its signed 6-bit
/// values times the activations, by group times the group's scale) on random bytes and
/// on extreme ones (every value 63 - 32 = 31 against -128, scales -128).
#[cfg(target_arch = "x86_64")]
#[test]
fn q6kx8_isums_is_its_definition() {
    if !avx2_here() {
        return;
    }
    let mut rng = tiercheck_core::rng::Rng::new(6);
    for round in 0..200 {
        let mut x: tiercheck_core::repack::BlockQ6Kx8 = bytemuck::Zeroable::zeroed();
        rng.fill_bytes(bytemuck::bytes_of_mut(&mut x));
        let mut y = [0u8; 256];
        rng.fill_bytes(&mut y);
        if round == 0 {
            x.ql = [0xFF; 1024];
            x.qh = [0xFF; 512];
            x.scales = [0x80; 128];
            y = [0x80; 256];
        }
        let mut bsums = [0u8; 32];
        for g in 0..16 {
            let s: i16 = (0..16).map(|i| y[16 * g + i] as i8 as i16).sum();
            bsums[2 * g..2 * g + 2].copy_from_slice(&s.to_le_bytes());
        }
        for il in [4, 8] {
            // SAFETY: AVX2 detected above.
            let got = unsafe { x86::q6kx8_isums(&x, il, &y, &bsums) };
            for (r, &g) in got.iter().enumerate() {
                let b = x.row(r, il);
                let q = b.quants();
                let want: i32 = (0..16)
                    .map(|grp| {
                        let dot: i32 = (16 * grp..16 * grp + 16)
                            .map(|i| q[i] as i32 * y[i] as i8 as i32)
                            .sum();
                        dot * b.scale(grp) as i32
                    })
                    .sum();
                assert_eq!(g, want, "round {round} il={il} r={r}");
            }
        }
    }
}

#[test]
fn install_fills_what_the_host_serves_and_with_scalar_turns_it_off_on_this_thread_only() {
    use tiercheck_core::accel::{describe, with_scalar};
    install();
    let host = Host::detect();
    let want = if host.avx2_fma {
        "avx2+fma"
    } else if host.neon {
        "neon"
    } else {
        "scalar"
    };
    assert_eq!(describe(), want);
    with_scalar(|| {
        assert_eq!(describe(), "scalar");
        std::thread::spawn(move || assert_eq!(describe(), want)).join().unwrap();
    });
    assert_eq!(describe(), want);
}
