//! Calibration of the dot-product error bound (`tiercheck_golden::exact`): for many
//! seeds, shapes and weight types, the largest |ref - exact| / bound that the `ref`
//! lane reaches. A rigorous bound gives ratios below 1; this shows how much slack it
//! leaves. Run: `cargo run --release -p tiercheck-golden --example calibrate_bounds [seeds]
//! [--bounds-only]`.

use tiercheck_core::lane;
use tiercheck_core::quant::weights;
use tiercheck_golden::exact::dot_with_bound;
use tiercheck_model::kernel_inputs::{Rng, RowKind};

fn main() {
    let seeds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let r = lane("ref").expect("ref");
    for &ty in weights::QUANTIZABLE {
        let fmt = r.portable.act_rule(ty).expect("rule").format();
        let (mut worst, mut worst_rel) = (0.0f64, 0.0f64);
        for seed in 0..seeds {
            let mut rng = Rng::new(seed);
            for k in [256usize, 4096, 17408] {
                let w = RowKind::Normal.row(&mut rng, k);
                let x = RowKind::FINITE[(seed % 9) as usize].row(&mut rng, k);
                let wq = weights::quantize(ty, &w, 1, k).expect("quantize");
                let aq = r.portable.quantize_act(ty, &x).expect("act");
                let got = r.portable.vec_dot(ty, &wq, &aq).expect("dot") as f64;
                let (exact, mag, bound) = dot_with_bound(ty, &wq, fmt, &aq).expect("model");
                if bound > 0.0 {
                    worst = worst.max((got - exact).abs() / bound);
                }
                if mag > 0.0 {
                    worst_rel = worst_rel.max((got - exact).abs() / mag);
                }
            }
        }
        println!(
            "{:<5} {} seeds x k in {{256, 4096, 17408}}: max |err|/bound = {worst:.3e}, max |err|/S = {worst_rel:.3e}",
            ty.name(),
            seeds
        );
    }
    if std::env::args().nth(2).as_deref() != Some("--bounds-only") {
        calibrate_nmse(seeds);
    }
}

/// NMSE of every non-`ref` lane's vec_dot outputs against `ref`'s, per weight type and
/// row kind, over many seeds (each sample: 16 weight rows x one activation row).
pub fn calibrate_nmse(seeds: u64) {
    let r = lane("ref").expect("ref");
    for l in tiercheck_core::LANES.iter().filter(|l| l.name != "ref") {
        for &ty in tiercheck_core::lane::WEIGHT_TYPES {
            let mut worst = (0.0f64, "");
            let mut worst_same = 0.0f64;
            let mut worst_nontie = 0.0f64;
            for seed in 0..seeds {
                let mut rng = Rng::new(1000 + seed);
                for kind in RowKind::FINITE {
                    let k = 4096;
                    let w: Vec<f32> =
                        (0..16).flat_map(|_| RowKind::Normal.row(&mut rng, k)).collect();
                    let x = kind.row(&mut rng, k);
                    let wq = weights::quantize(ty, &w, 16, k).expect("quantize");
                    let wm = tiercheck_core::WeightMatrix::new(ty, 16, k, &wq).expect("matrix");
                    let a = l.portable.matmul(&wm, &x, 1).expect("lane");
                    let b = r.portable.matmul(&wm, &x, 1).expect("ref");
                    let num: f64 =
                        a.iter().zip(&b).map(|(&p, &q)| (p as f64 - q as f64).powi(2)).sum();
                    let den: f64 = b.iter().map(|&q| (q as f64).powi(2)).sum();
                    let nmse = if den == 0.0 { 0.0 } else { num / den };
                    if nmse > worst.0 {
                        worst = (nmse, kind.name());
                    }
                    if kind != RowKind::Ties {
                        worst_nontie = worst_nontie.max(nmse);
                    }
                    // ref's kernel on this lane's own codes (same format only)
                    if l.portable.act_rule(ty).unwrap().format()
                        == r.portable.act_rule(ty).unwrap().format()
                    {
                        let act = l.portable.quantize_act(ty, &x).expect("act");
                        let rb = ty.row_bytes(k).unwrap();
                        let mut num = 0.0f64;
                        let mut den = 0.0f64;
                        for j in 0..16 {
                            let q = r.portable.vec_dot(ty, &wq[j * rb..(j + 1) * rb], &act).unwrap()
                                as f64;
                            num += (a[j] as f64 - q).powi(2);
                            den += q * q;
                        }
                        if den > 0.0 {
                            worst_same = worst_same.max(num / den);
                        }
                    }
                }
            }
            println!(
                "{:<20} {:<5} {seeds} seeds x 9 row kinds (k=4096, n=16): max NMSE vs ref {:.3e} ({}), \
                 without tie rows {:.3e}, vs ref's kernel on the lane's codes {:.3e}",
                l.name, ty.name(), worst.0, worst.1, worst_nontie, worst_same
            );
        }
    }
}
