//! Routing decisions of a mixture-of-experts model: the first step, layer and token at
//! which two runs send a token to different experts (`ffn_moe_topk`), and whether their
//! router logits (`ffn_moe_logits`) made that choice a near-tie.
//!
//! A routing change is a discrete jump: the token's feed-forward output is computed by
//! other experts, so every later tap of that token differs by far more than any
//! reduction-order noise. Whether it is explained is decided at the router: on each side,
//! the gap between the logits of the experts the sides disagree on (the expert one side
//! chose over the expert the other side chose). Where each side's choice agrees with its
//! own logits (both gaps at least 0) and a gap lies below the near-tie threshold on
//! either side (the threshold of the token decisions), it is a near-tie: the two sides'
//! rounding could order those experts either way. Larger gaps on both sides are not
//! explained by rounding, and a negative gap (a side chose an expert its own router
//! ranked lower) is a wrong routing whatever its size.

use serde::{Deserialize, Serialize};

use tiercheck_model::sequence::Trace;

/// The first routing change between two traces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutingChange {
    /// Step.
    pub step: usize,
    /// Layer.
    pub layer: usize,
    /// The token's position.
    pub position: usize,
    /// A's experts for that token (the sort's order).
    pub experts_a: Vec<usize>,
    /// B's.
    pub experts_b: Vec<usize>,
    /// On A, the router logit of the expert A chose that B did not, minus the one B chose
    /// that A did not (the smallest such gap over the experts in dispute).
    pub gap_a: f32,
    /// The same on B (B's choice minus A's, on B's logits).
    pub gap_b: f32,
    /// The largest difference between the two sides' router logits of that token.
    pub logits_diff: f32,
    /// Whether both sides chose by their own logits (both gaps at least 0) and either
    /// gap is below the near-tie threshold.
    pub near_tie: bool,
}

/// The first routing change between `a` and `b` over `steps` (steps whose inputs agree),
/// in step, layer and token order; `None` when the experts agree everywhere both traces
/// hold `ffn_moe_topk` (or neither does: a dense model).
pub fn first_change(
    a: &Trace,
    b: &Trace,
    steps: &[usize],
    n_layer: usize,
    threshold: f32,
) -> Option<RoutingChange> {
    for &step in steps {
        for layer in 0..n_layer {
            let key = (step, format!("ffn_moe_topk-{layer}"));
            let (Some(ta), Some(tb)) = (a.taps.get(&key), b.taps.get(&key)) else { continue };
            let used = *ta.shape.last()?;
            if used == 0 || tb.shape != ta.shape {
                continue;
            }
            for (row, (ra, rb)) in
                ta.data.chunks_exact(used).zip(tb.data.chunks_exact(used)).enumerate()
            {
                let ea: Vec<usize> = ra.iter().map(|&v| v as usize).collect();
                let eb: Vec<usize> = rb.iter().map(|&v| v as usize).collect();
                let (mut sa, mut sb) = (ea.clone(), eb.clone());
                sa.sort_unstable();
                sb.sort_unstable();
                if sa == sb {
                    continue;
                }
                let rows = ta.data.len() / used;
                let Some(st) = a.steps.iter().find(|s| s.step == step) else { continue };
                // A pruned (last-layer) tap holds the output rows only.
                let position = if rows == st.positions.len() {
                    st.positions[row]
                } else {
                    st.output_rows().get(row).map_or(usize::MAX, |&r| st.positions[r])
                };
                let logits = |t: &Trace| {
                    t.taps.get(&(step, format!("ffn_moe_logits-{layer}"))).and_then(|l| {
                        let w = *l.shape.last()?;
                        l.data.chunks_exact(w).nth(row).map(<[f32]>::to_vec)
                    })
                };
                let (la, lb) = (logits(a), logits(b));
                let only_a: Vec<usize> = ea.iter().copied().filter(|x| !eb.contains(x)).collect();
                let only_b: Vec<usize> = eb.iter().copied().filter(|x| !ea.contains(x)).collect();
                let gap = |l: &Option<Vec<f32>>, mine: &[usize], theirs: &[usize]| -> f32 {
                    let Some(l) = l else { return f32::NAN };
                    let mut g = f32::INFINITY;
                    for &x in mine {
                        for &y in theirs {
                            if let (Some(&lx), Some(&ly)) = (l.get(x), l.get(y)) {
                                g = g.min(lx - ly);
                            }
                        }
                    }
                    g
                };
                let gap_a = gap(&la, &only_a, &only_b);
                let gap_b = gap(&lb, &only_b, &only_a);
                let logits_diff = match (&la, &lb) {
                    (Some(x), Some(y)) => {
                        x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max)
                    }
                    _ => f32::NAN,
                };
                return Some(RoutingChange {
                    step,
                    layer,
                    position,
                    experts_a: ea,
                    experts_b: eb,
                    gap_a,
                    gap_b,
                    logits_diff,
                    near_tie: gap_a >= 0.0
                        && gap_b >= 0.0
                        && (gap_a < threshold || gap_b < threshold),
                });
            }
        }
    }
    None
}

/// The change in one line.
pub fn describe(c: &RoutingChange) -> String {
    format!(
        "first routing change at step {}, layer {}, position {}: A chose experts {:?}, B {:?}; router logit gap of the disputed experts A {:.4}, B {:.4} (largest router-logit difference {:.2e}) — {}",
        c.step,
        c.layer,
        c.position,
        c.experts_a,
        c.experts_b,
        c.gap_a,
        c.gap_b,
        c.logits_diff,
        if c.near_tie {
            "a near-tie: explained by reduction-order noise"
        } else if c.gap_a < 0.0 || c.gap_b < 0.0 {
            "a side chose an expert its own router ranked lower: a wrong routing"
        } else {
            "NOT a near-tie: a wrong routing is suspected"
        }
    )
}
