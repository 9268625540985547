//! Accelerated form of `tiercheck_core::arch::x86_64::avx2::tiled` (the x86 lanes'
//! tiled K-quant matmul): `s1` by [`crate::x86`] on x86-64 with AVX2 and FMA, the float
//! steps of the twin one for one.

#[allow(unused_imports)]
use tiercheck_core::arch::x86_64::avx2::tiled::{slots, *};
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ4K, BlockQ6K, BlockQ8K};
#[allow(unused_imports)]
use tiercheck_core::{GgmlType, KernelError, WeightMatrix};

use crate::Host;

/// Fills this file's slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::MATMUL.set_fast(|w, ys| unsafe { fast::matmul(w, ys) });
    }
    let _ = host;
}

/// The accelerated form (see [`crate`]): `s1` by [`crate::x86`] (the same
/// exact integers: for Q6_K the unsigned 6-bit dot minus `32 * sum sc_s * bsum_s`, which
/// is `sum_s sc_s * sum (q - 32) * a`), the float steps above one for one.
#[cfg(target_arch = "x86_64")]
mod fast {
    use super::*;
    use crate::x86;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn matmul(
        w: &WeightMatrix<'_>,
        ys: &[&[BlockQ8K]],
    ) -> Result<Vec<f32>, KernelError> {
        let (n, m) = (w.n(), ys.len());
        let mut out = vec![0.0f32; m * n];
        let mut acc = vec![0.0f32; m];
        for j in 0..n {
            acc.iter_mut().for_each(|a| *a = 0.0);
            match w.ty() {
                GgmlType::Q4_K => {
                    let row: &[BlockQ4K] =
                        tiercheck_core::blocks::cast_blocks(GgmlType::Q4_K, w.row(j))?;
                    for (b, x) in row.iter().enumerate() {
                        let (sc, mn) = crate::q4k_scales_mins(&x.scales);
                        let mins: [i32; 8] = core::array::from_fn(|s| mn[s] as i32);
                        let (d, dmin) = (x.d(), x.dmin());
                        for (acc, y) in acc.iter_mut().zip(ys) {
                            let y = &y[b];
                            let s1 = x86::q4k_sumi(&x.qs, &y.qs, &sc);
                            *acc = q4_k_step(*acc, d, dmin, s1, q4_k_s2(&mins, y), y.d());
                        }
                    }
                }
                GgmlType::Q6_K => {
                    let row: &[BlockQ6K] =
                        tiercheck_core::blocks::cast_blocks(GgmlType::Q6_K, w.row(j))?;
                    for (b, x) in row.iter().enumerate() {
                        let d = x.d();
                        for (acc, y) in acc.iter_mut().zip(ys) {
                            let y = &y[b];
                            let s1 = x86::q6k_dot(&x.ql, &x.qh, &y.qs, &x.scales)
                                - 32 * x86::bsums_dot(&y.bsums, &x.scales);
                            *acc = q6_k_step(*acc, d, s1, y.d());
                        }
                    }
                }
                other => {
                    return Err(KernelError::Unsupported {
                        op: "x86 tiled matmul",
                        ty: other.name(),
                    })
                }
            }
            for (i, v) in acc.iter().enumerate() {
                out[i * n + j] = *v;
            }
        }
        Ok(out)
    }
}
