//! Free-running comparison: both sides decode greedily, and their taps are compared
//! step by step while their inputs are still the same (up to the first differing
//! token), giving the first step and tap whose bits differ, a per-tap profile and the
//! single-op jumps of the divergence.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tiercheck_model::sequence::{StepRecord, Trace};
use tiercheck_model::Model;

use crate::flips::{flips, matmul_input, Flip, NEAR_BOUNDARY};
use crate::metrics::{self, Acc, Stat};
use crate::side::{SideRun, Source};
use crate::trace::tap_order;

/// Per-tap divergence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapRow {
    /// Tap name.
    pub name: String,
    /// At the first divergent step (when there is one).
    pub first: Option<Stat>,
    /// Over every compared step.
    pub all: Stat,
    /// The floor for this tap (relative L2), when measured.
    pub floor: Option<f64>,
    /// `all.rel_l2 / floor`.
    pub ratio: Option<f64>,
}

/// A single-op jump of the divergence (the relative L2 grows a hundredfold or more from
/// one tap to the next). It is called an activation-quantization flip only where the
/// codes entering its matmul were compared and every flipped one sat within
/// [`NEAR_BOUNDARY`] of a rounding boundary ([`Jump::kind`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Jump {
    /// Step.
    pub step: usize,
    /// Tap before the jump.
    pub from: String,
    /// Tap where it jumped.
    pub to: String,
    /// Relative L2 before.
    pub from_rel: f64,
    /// Relative L2 after.
    pub to_rel: f64,
    /// The activation codes entering the matmul that produced `to`, compared between
    /// the two sides (when `to` is a matmul output and a lane side can quantize).
    pub codes: Option<Flip>,
    /// `flip` (measured: codes differ, each within [`NEAR_BOUNDARY`] of a rounding
    /// boundary), else `jump` (named by its size alone).
    #[serde(default)]
    pub kind: String,
}

impl Jump {
    /// Whether the measured codes make this jump an activation-quantization flip.
    pub fn is_flip(&self) -> bool {
        self.codes.as_ref().is_some_and(|f| f.codes_differ > 0 && f.max_boundary <= NEAR_BOUNDARY)
    }
}

/// A tap-by-tap comparison over some steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Steps compared.
    pub steps_compared: usize,
    /// First step where any tap's bits differ.
    pub first_step: Option<usize>,
    /// There, the first tap (graph order) whose bits differ.
    pub first_tap: Option<String>,
    /// Per tap, graph order.
    pub rows: Vec<TapRow>,
    /// Jumps of at least 100x between consecutive taps at the first divergent step.
    pub jumps: Vec<Jump>,
}

/// The values of `x` and `y` to compare: all of both, or, when one holds fewer rows of
/// the same width (a dump with only the last row's logits), the trailing rows both hold.
pub(crate) fn common<'t>(
    x: &'t tiercheck_gguf::tensorfile::Tensor,
    y: &'t tiercheck_gguf::tensorfile::Tensor,
) -> (&'t [f32], &'t [f32]) {
    let (wx, wy) = (x.shape.last().copied(), y.shape.last().copied());
    if x.data.len() == y.data.len() || wx != wy {
        return (&x.data, &y.data);
    }
    let n = x.data.len().min(y.data.len());
    (&x.data[x.data.len() - n..], &y.data[y.data.len() - n..])
}

pub(crate) fn compare(
    a: &Trace,
    b: &Trace,
    steps: &[usize],
    floor: Option<&BTreeMap<String, f64>>,
) -> Divergence {
    let mut names: Vec<String> = Vec::new();
    for (s, n) in a.taps.keys() {
        if steps.contains(s) && b.taps.contains_key(&(*s, n.clone())) && !names.contains(n) {
            names.push(n.clone());
        }
    }
    names.sort_by_key(|n| tap_order(n));
    let mut first_step = None;
    let mut first_tap = None;
    'outer: for &s in steps {
        for n in &names {
            if let (Some(x), Some(y)) = (a.taps.get(&(s, n.clone())), b.taps.get(&(s, n.clone()))) {
                let (x, y) = common(x, y);
                if x.iter().zip(y).any(|(p, q)| p.to_bits() != q.to_bits()) {
                    first_step = Some(s);
                    first_tap = Some(n.clone());
                    break 'outer;
                }
            }
        }
    }
    let mut rows = Vec::new();
    for n in &names {
        let mut acc = Acc::default();
        let mut first = None;
        for &s in steps {
            if let (Some(x), Some(y)) = (a.taps.get(&(s, n.clone())), b.taps.get(&(s, n.clone()))) {
                let (x, y) = common(x, y);
                acc.add(x, y);
                if Some(s) == first_step {
                    first = Some(metrics::stat(x, y));
                }
            }
        }
        rows.push(TapRow { name: n.clone(), first, all: acc.stat(), floor: None, ratio: None });
    }
    set_floor(&mut rows, floor);
    let mut jumps = Vec::new();
    if let Some(s) = first_step {
        let seq: Vec<(&str, f64)> =
            rows.iter().filter_map(|r| r.first.map(|f| (r.name.as_str(), f.rel_l2))).collect();
        for w in seq.windows(2) {
            let ((n0, r0), (n1, r1)) = (w[0], w[1]);
            if r0 > 0.0 && r1 >= 100.0 * r0 && r1 >= 1e-5 {
                jumps.push(Jump {
                    step: s,
                    from: n0.into(),
                    to: n1.into(),
                    from_rel: r0,
                    to_rel: r1,
                    codes: None,
                    kind: "jump".into(),
                });
            }
        }
    }
    Divergence { steps_compared: steps.len(), first_step, first_tap, rows, jumps }
}

/// Give each row its tap's `floor` (when measured) and the ratio to it.
pub(crate) fn set_floor(rows: &mut [TapRow], floor: Option<&BTreeMap<String, f64>>) {
    for r in rows {
        r.floor = floor.and_then(|f| f.get(&r.name).copied());
        r.ratio = r.floor.filter(|f| *f > 0.0).map(|f| r.all.rel_l2 / f);
    }
}

/// The free-running comparison of two side runs: the steps whose inputs are identical so
/// far (without ratios: the caller sets the floor when it measures one); at each jump at a matmul output, the
/// activation codes that entered that matmul, compared between the sides.
pub(crate) fn analyse(
    model: &Model,
    a: &Source,
    b: &Source,
    ra: &SideRun,
    rb: &SideRun,
) -> anyhow::Result<Divergence> {
    // Free-running: steps whose inputs are identical so far.
    let mut same = Vec::new();
    for (i, (x, y)) in ra.trace().steps.iter().zip(&rb.trace().steps).enumerate() {
        if x.input_ids != y.input_ids || x.positions != y.positions {
            break;
        }
        same.push(i);
    }
    let mut free = compare(ra.trace(), rb.trace(), &same, None);
    // A jump at a matmul output: compare the codes that entered that matmul.
    if let Some(c) = a.chosen().or(b.chosen()) {
        let a_is_lane = a.chosen().is_some();
        for j in free.jumps.iter_mut() {
            let Some(input) = matmul_input(&j.to) else { continue };
            let key = [(j.step, input.clone())];
            let found = if a_is_lane {
                flips(model, c, ra.trace(), rb.trace(), b.chosen(), Some(&key))?
            } else {
                flips(model, c, rb.trace(), ra.trace(), None, Some(&key))?
            };
            j.codes = Some(found.into_iter().next().unwrap_or(Flip {
                step: j.step,
                input,
                weights: Vec::new(),
                codes_differ: 0,
                codes: 0,
                min_boundary: f64::NAN,
                max_boundary: f64::NAN,
                flip_effect: 0.0,
                observed: None,
            }));
            if j.is_flip() {
                j.kind = "flip".into();
            }
        }
    }
    Ok(free)
}

/// The free-running verdict: where the greedy tokens diverge, and whether either side
/// has a near-tie there.
pub(crate) fn verdict(a: &SideRun, b: &SideRun, agree: usize, threshold: f32) -> String {
    let n = a.generated.len().min(b.generated.len());
    if agree >= n {
        return format!("identical greedy tokens for all {n} steps");
    }
    // Generated token `agree` comes from step (prompt steps - 1 + agree).
    let step_of = |r: &SideRun| r.trace().steps.len() + agree + 1 - r.generated.len() - 1;
    let (sa, sb): (&StepRecord, &StepRecord) =
        (&a.trace().steps[step_of(a)], &b.trace().steps[step_of(b)]);
    let near = sa.gap < threshold || sb.gap < threshold;
    format!(
        "tokens diverge at generated token {agree} (step {}): A {} (gap {:.3}), B {} (gap {:.3}) — {}",
        step_of(a),
        sa.emitted,
        sa.gap,
        sb.emitted,
        sb.gap,
        if near { "a near-tie: explained by reduction-order noise" } else { "NOT a near-tie: a wrong tier is suspected" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jump(codes: Option<(usize, f64)>) -> Jump {
        Jump {
            step: 0,
            from: "ffn_norm-1".into(),
            to: "ffn_swiglu-1".into(),
            from_rel: 1e-6,
            to_rel: 1e-3,
            codes: codes.map(|(differ, max)| Flip {
                step: 0,
                input: "ffn_norm-1".into(),
                weights: Vec::new(),
                codes_differ: differ,
                codes: 2048,
                min_boundary: max / 2.0,
                max_boundary: max,
                flip_effect: 0.0,
                observed: None,
            }),
            kind: "jump".into(),
        }
    }

    #[test]
    fn a_jump_is_a_flip_only_with_flipped_codes_measured_near_a_boundary() {
        assert!(jump(Some((1, 1e-4))).is_flip());
        assert!(jump(Some((3, NEAR_BOUNDARY))).is_flip());
        assert!(!jump(Some((3, 0.3))).is_flip(), "codes far from the boundary");
        assert!(!jump(Some((0, f64::NAN))).is_flip(), "identical codes");
        assert!(!jump(None).is_flip(), "not measured");
    }
}
