//! The recipe's expression trees for MMVQ, shared by the `ggml` trials (ggml's own code
//! objects) and the `hip` trials (the project's device code): the same trees, so both
//! are held to the same recipe.

use tiercheck_core::gpu::{Combine, Contraction};
use tiercheck_core::GgmlType;
use tiercheck_gpu_testkit::isa::{Exprs, Id};

/// `acc + a * b`: one fma when `fuse`, else a rounded product and a rounded sum.
pub fn mad(e: &mut Exprs, fuse: bool, a: Id, b: Id, acc: Id) -> Id {
    if fuse {
        e.fma(a, b, acc)
    } else {
        let p = e.mul(a, b);
        e.add(acc, p)
    }
}

/// One `tmp += vec_dot(...)` of the recipe, on the accumulator `acc`. Leaves: `h.lo` /
/// `h.hi` the low / high f16 of a loaded `half2` (q8_1's `ds = (d, s)`, q4_K's
/// `dm = (d, dmin)`) or a loaded `half`; `i` an integer dot converted to float, `i1`
/// one built from the q8 byte sums (`dp4a` with 0x01010101).
pub fn step(e: &mut Exprs, ty: GgmlType, c: Contraction, acc: Id) -> Id {
    let zero = e.constant(0.0);
    // `sumf = 0; for i in 0..n { sumf += d8_i * (float)int_i; }`
    let sums = |e: &mut Exprs, n: usize, int: &str| {
        let mut s = zero;
        for _ in 0..n {
            let (d8, x) = (e.leaf("h.lo"), e.leaf(int));
            s = mad(e, c.vec_dot_sums, d8, x, s);
        }
        s
    };
    // `a * b ± p * q` with the recipe's combine.
    let combine = |e: &mut Exprs, (a, b): (Id, Id), minus: bool, (p, q): (Id, Id)| match c.combine {
        Combine::Unfused => {
            let ab = e.mul(a, b);
            let mut pq = e.mul(p, q);
            if minus {
                pq = e.neg(pq);
            }
            e.add(ab, pq)
        }
        Combine::FuseFirst => {
            let mut pq = e.mul(p, q);
            if minus {
                pq = e.neg(pq);
            }
            e.fma(a, b, pq)
        }
        Combine::FuseSecond => {
            let ab = e.mul(a, b);
            let p = if minus { e.neg(p) } else { p };
            e.fma(p, q, ab)
        }
    };
    match ty {
        // `dm.x * sumf_d - dm.y * sumf_m`, sums over 2 (q4_K, q5_K) or 4 (q2_K) q8_1
        // blocks; q2_K's min sums are dots with the replicated min, not byte sums.
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q2_K => {
            let (n, min_int) = if ty == GgmlType::Q2_K { (4, "i") } else { (2, "i1") };
            let sumf_d = sums(e, n, "i");
            let sumf_m = sums(e, n, min_int);
            let (dx, dy) = (e.leaf("h.lo"), e.leaf("h.hi"));
            let v = combine(e, (dx, sumf_d), true, (dy, sumf_m));
            e.add(acc, v)
        }
        // `d * sumf`, sums over 2 (q6_K) or 4 (q3_K) q8_1 blocks.
        GgmlType::Q6_K | GgmlType::Q3_K => {
            let sumf = sums(e, if ty == GgmlType::Q6_K { 2 } else { 4 }, "i");
            let d = e.leaf("h.lo");
            mad(e, c.accumulate, d, sumf, acc)
        }
        // `(d_x * d_y) * (float)sumi`.
        GgmlType::Q8_0 | GgmlType::IQ4_NL | GgmlType::IQ4_XS => {
            let (dx, dy, sumi) = (e.leaf("h.lo"), e.leaf("h.lo"), e.leaf("i"));
            let dd = e.mul(dx, dy);
            mad(e, c.accumulate, dd, sumi, acc)
        }
        // `__hmul2(dm, ds8)`: two f16 products; then `sumi * d_d8 + m_s8 / 2`.
        GgmlType::Q4_1 | GgmlType::Q5_1 => {
            let (dx, dy) = (e.leaf("h.lo"), e.leaf("h.lo"));
            let dd = e.mul(dx, dy);
            let dd = e.f2h(dd);
            let (mx, sy) = (e.leaf("h.hi"), e.leaf("h.hi"));
            let ms = e.mul(mx, sy);
            let ms = e.f2h(ms);
            let (sumi, half) = (e.leaf("i"), e.constant(0.5));
            let v = combine(e, (sumi, dd), false, (ms, half));
            e.add(acc, v)
        }
        // `d5 * (sumi * ds8.x - 8 * ds8.y)`.
        GgmlType::Q5_0 => {
            let (sumi, d8, eight, s8) =
                (e.leaf("i"), e.leaf("h.lo"), e.constant(8.0), e.leaf("h.hi"));
            let inner = combine(e, (sumi, d8), true, (eight, s8));
            let d5 = e.leaf("h.lo");
            mad(e, c.accumulate, d5, inner, acc)
        }
        _ => unreachable!("{} has no MMVQ recipe", ty.name()),
    }
}

/// The output of warp 0's lane 0: the partials of warps 1..nwarps added in order
/// (shared memory, one `warp_size`-float row per warp), then the XOR butterfly.
pub fn reduction(e: &mut Exprs, warp: usize, nwarps: usize) -> Id {
    let mut v = e.leaf("acc");
    for l in 0..nwarps - 1 {
        let s = e.leaf(&format!("lds+{}", 4 * warp * l));
        v = e.add(v, s);
    }
    butterfly(e, v, warp, false)
}

/// `v = op(v, shfl_xor(v, o))` for `o = width/2, .., 1`.
pub fn butterfly(e: &mut Exprs, mut v: Id, width: usize, max: bool) -> Id {
    let mut o = width / 2;
    while o >= 1 {
        let s = e.shfl_xor(v, o as u32);
        v = if max { e.max(v, s) } else { e.add(v, s) };
        o /= 2;
    }
    v
}

/// The loop step as `k` chained recipe steps, for k = 1..4 (the loop may be unrolled).
pub fn step_matches(observed: &str, ty: GgmlType, c: Contraction) -> bool {
    let mut e = Exprs::new();
    let mut v = e.leaf("acc");
    (1..=4).any(|_| {
        v = step(&mut e, ty, c, v);
        e.render(v) == observed
    })
}
