//! The recipe's expression trees for MMVQ, shared by the `ggml` trials (ggml's own code
//! objects) and the `hip` trials (the project's device code): the same trees, so both
//! are held to the same recipe.

use tiercheck_core::gpu::{Contraction, Q4KCombine};
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
    // `sumf = 0; for i in 0..2 { sumf += d8_i * (float)int_i; }`
    let sums = |e: &mut Exprs, int: &str| {
        let mut s = zero;
        for _ in 0..2 {
            let (d8, x) = (e.leaf("h.lo"), e.leaf(int));
            s = mad(e, c.vec_dot_sums, d8, x, s);
        }
        s
    };
    match ty {
        GgmlType::Q4_K => {
            let sumf_d = sums(e, "i");
            let sumf_m = sums(e, "i1");
            let (dx, dy) = (e.leaf("h.lo"), e.leaf("h.hi"));
            let v = match c.q4_k_combine {
                Q4KCombine::Unfused => {
                    let a = e.mul(dx, sumf_d);
                    let b = e.mul(dy, sumf_m);
                    let nb = e.neg(b);
                    e.add(a, nb)
                }
                Q4KCombine::FuseFirst => {
                    let b = e.mul(dy, sumf_m);
                    let nb = e.neg(b);
                    e.fma(dx, sumf_d, nb)
                }
                Q4KCombine::FuseSecond => {
                    let a = e.mul(dx, sumf_d);
                    let ndy = e.neg(dy);
                    e.fma(ndy, sumf_m, a)
                }
            };
            e.add(acc, v)
        }
        GgmlType::Q6_K => {
            let sumf = sums(e, "i");
            let d = e.leaf("h.lo");
            mad(e, c.accumulate, d, sumf, acc)
        }
        GgmlType::Q8_0 => {
            let (dx, dy, sumi) = (e.leaf("h.lo"), e.leaf("h.lo"), e.leaf("i"));
            let dd = e.mul(dx, dy);
            mad(e, c.accumulate, dd, sumi, acc)
        }
        _ => unreachable!("only the three MMVQ types are checked"),
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
