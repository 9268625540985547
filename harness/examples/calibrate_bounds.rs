//! Calibration of the dot-product error bound (`tiercheck::golden::exact`): for many
//! seeds, shapes and weight types, the largest |ref - exact| / bound that the `ref`
//! lane reaches. A rigorous bound gives ratios below 1; this shows how much slack it
//! leaves. Run: `cargo run --release -p tiercheck --example calibrate_bounds [seeds]`.

use tiercheck::gen::{Rng, RowKind};
use tiercheck::golden::exact::dot_with_bound;
use tiercheck_core::quant::weights;
use tiercheck_core::{lane, GgmlType};

fn main() {
    let seeds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let r = lane("ref").expect("ref");
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
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
}
