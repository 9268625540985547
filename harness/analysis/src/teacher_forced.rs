//! Teacher-forced comparison: one side replays the other's token sequence, so every
//! step has the same context: per-step KLD, top-1 agreement, max |Δlogit|, and the
//! near-tie table (tokens that differ or gaps below a threshold).

use serde::{Deserialize, Serialize};

use tiercheck_lanes::Chosen;
use tiercheck_model::sequence::{RunSpec, Trace};
use tiercheck_model::{Mode, Model};

use crate::metrics::{self, Summary};
use std::sync::Arc;

use crate::result_cache::{self, Ctx};
use crate::results::Run;
use crate::side::{decoder, lane_run, DeltaOptions, SideRun, Source};

/// One teacher-forced step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMetric {
    /// Step.
    pub step: usize,
    /// Greedy choice of side A.
    pub token_a: u32,
    /// Greedy choice of side B.
    pub token_b: u32,
    /// A's top-1 minus top-2 logit.
    pub gap_a: f32,
    /// B's gap.
    pub gap_b: f32,
    /// Rank of A's token in B's logits (0 = B's own choice).
    pub rank_a_in_b: usize,
    /// Rank of B's token in A's logits.
    pub rank_b_in_a: usize,
    /// KL(B || A) of the next-token distributions, nats.
    pub kld: f64,
    /// Largest |logit A - logit B|.
    pub max_abs_dlogit: f64,
}

/// Teacher-forced comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TeacherForced {
    /// What was replayed through what.
    pub how: String,
    /// Per step.
    pub steps: Vec<StepMetric>,
    /// KLD summary.
    pub kld: Summary,
    /// Max |Δlogit| summary.
    pub max_abs_dlogit: Summary,
    /// Fraction of steps with the same greedy token.
    pub top1_agreement: f64,
    /// Steps where the tokens differ or a gap is below the threshold.
    pub near_ties: Vec<StepMetric>,
    /// Tokens that differ at a gap above the threshold on both sides.
    pub unexplained: Vec<usize>,
}

fn logits_row(t: &Trace, step: usize) -> Option<&[f32]> {
    let x = t.taps.get(&(step, "result_output".to_string()))?;
    let w = x.shape[1];
    Some(&x.data[x.data.len() - w..])
}

fn teacher(a: &Trace, b: &Trace, how: String, threshold: f32) -> TeacherForced {
    let mut steps = Vec::new();
    for (i, (sa, sb)) in a.steps.iter().zip(&b.steps).enumerate() {
        let (Some(la), Some(lb)) = (logits_row(a, i), logits_row(b, i)) else { continue };
        let max_abs =
            la.iter().zip(lb).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
        steps.push(StepMetric {
            step: i,
            token_a: sa.emitted,
            token_b: sb.emitted,
            gap_a: sa.gap,
            gap_b: sb.gap,
            rank_a_in_b: metrics::rank(lb, sa.emitted),
            rank_b_in_a: metrics::rank(la, sb.emitted),
            kld: metrics::kld(lb, la),
            max_abs_dlogit: max_abs,
        });
    }
    let kl: Vec<f64> = steps.iter().map(|s| s.kld).collect();
    let md: Vec<f64> = steps.iter().map(|s| s.max_abs_dlogit).collect();
    let agree = steps.iter().filter(|s| s.token_a == s.token_b).count();
    let near_ties: Vec<StepMetric> = steps
        .iter()
        .filter(|s| s.token_a != s.token_b || s.gap_a < threshold || s.gap_b < threshold)
        .cloned()
        .collect();
    let unexplained = steps
        .iter()
        .filter(|s| s.token_a != s.token_b && s.gap_a >= threshold && s.gap_b >= threshold)
        .map(|s| s.step)
        .collect();
    TeacherForced {
        how,
        top1_agreement: if steps.is_empty() { 1.0 } else { agree as f64 / steps.len() as f64 },
        kld: metrics::summary(&kl),
        max_abs_dlogit: metrics::summary(&md),
        near_ties,
        unexplained,
        steps,
    }
}

/// Replay `generated` after `prompt` through lane `c` (undithered replays through
/// `ctx`'s cache: a free run of `c` that chose these tokens is this replay).
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay(
    ctx: &Ctx<'_>,
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    prompt: &[u32],
    mode: Mode,
    generated: &[u32],
    dither: Option<u64>,
) -> anyhow::Result<Arc<Run>> {
    let key = dither
        .is_none()
        .then(|| result_cache::replay_key(&result_cache::lane_key(c, o), prompt, mode, generated));
    ctx.run(key.as_deref(), || {
        let mut dec = decoder(model, c, o)?;
        dec.set_dither(dither);
        let forced = generated[..generated.len().saturating_sub(1)].to_vec();
        let spec = RunSpec {
            ids: prompt.to_vec(),
            steps: generated.len(),
            mode,
            batching: o.batching,
            forced,
        };
        lane_run(&dec, &spec)
    })
}

/// The teacher-forced comparison of two side runs: a lane side replays the other side's
/// tokens; two traces are compared as they are when they ran the same tokens.
pub(crate) fn analyse(
    ctx: &Ctx<'_>,
    model: &Model,
    a: &Source,
    b: &Source,
    ra: &SideRun,
    rb: &SideRun,
    o: &DeltaOptions,
) -> anyhow::Result<Option<TeacherForced>> {
    // Teacher-forced: a lane replays the other side's tokens.
    let (teacher, teacher_how_trace) = match (a, b) {
        (Source::Lane(c), _) => {
            let t = replay(ctx, model, c, o, &rb.prompt, rb.mode, &rb.generated, None)?;
            (
                Some((
                    t,
                    format!("A ({}) replayed B's {} tokens", c.lane.name, rb.generated.len()),
                )),
                true,
            )
        }
        (Source::Trace(_), Source::Lane(c)) => {
            let t = replay(ctx, model, c, o, &ra.prompt, ra.mode, &ra.generated, None)?;
            (
                Some((
                    t,
                    format!("B ({}) replayed A's {} tokens", c.lane.name, ra.generated.len()),
                )),
                false,
            )
        }
        _ => (None, false),
    };
    Ok(match teacher {
        Some((t, how)) if teacher_how_trace => {
            Some(self::teacher(&t.trace, rb.trace(), how, o.threshold))
        }
        Some((t, how)) => Some(self::teacher(ra.trace(), &t.trace, how, o.threshold)),
        None if ra
            .trace()
            .steps
            .iter()
            .zip(&rb.trace().steps)
            .all(|(x, y)| x.input_ids == y.input_ids) =>
        {
            Some(self::teacher(
                ra.trace(),
                rb.trace(),
                "both traces ran the same tokens".into(),
                o.threshold,
            ))
        }
        None => None,
    })
}

/// The teacher-forced verdict.
pub(crate) fn verdict(teacher: Option<&TeacherForced>, threshold: f32) -> String {
    match teacher {
        None => "no teacher-forced comparison: two traces of different token sequences".into(),
        Some(t) if t.unexplained.is_empty() && t.top1_agreement == 1.0 => format!(
            "same greedy token at all {} steps (max |Δlogit| {:.3e}, mean KLD {:.3e})",
            t.steps.len(),
            t.max_abs_dlogit.max,
            t.kld.mean
        ),
        Some(t) if t.unexplained.is_empty() => format!(
            "{} of {} steps choose differently, all at near-ties (gap < {}): explained by reduction-order noise",
            t.steps.iter().filter(|s| s.token_a != s.token_b).count(),
            t.steps.len(),
            threshold
        ),
        Some(t) => format!(
            "tokens differ at steps {:?} where both gaps exceed {}: not a near-tie, look at the layer-local profile",
            t.unexplained, threshold
        ),
    }
}
