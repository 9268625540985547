//! Layer-local comparison: a lane's layer `L` is fed exactly the input (and KV cache)
//! the other side's layer `L` received, separating each layer's own contribution from
//! what it inherited; per layer, a verdict against the layer-local floor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tiercheck_gguf::tensorfile::Tensor;
use tiercheck_lanes::Chosen;
use tiercheck_model::run::{RunOutput, Trace};
use tiercheck_model::{Model, TapSink};

use crate::flips::{flips, Flip};
use crate::free_running::{compare, Divergence};
use crate::{decoder, tap_order, trace_of, DeltaOptions, SideRun, Source};

/// The layer-local verdict for one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerVerdict {
    /// Layer.
    pub layer: usize,
    /// The tap with the largest ratio to its layer-local floor.
    pub worst_tap: String,
    /// That ratio.
    pub ratio: f64,
    /// Activation codes that differ at this layer's matmul inputs (all steps).
    pub flipped_codes: usize,
    /// The largest distance from its rounding boundary of a value flipped at the first
    /// flipped input of a step (later inputs of the layer inherit that change).
    pub max_boundary: f64,
    /// `noise`, `flip` (above the floor, but every flip sat within
    /// [`NEAR_BOUNDARY`] of a rounding boundary) or `discrepancy`.
    pub verdict: String,
}

/// Ratio to the floor up to which a divergence counts as reduction-order noise.
pub const NOISE_RATIO: f64 = 4.0;
/// Distance from a rounding boundary (code units) within which a flipped activation
/// code counts as decided by last-bit noise.
pub const NEAR_BOUNDARY: f64 = 0.05;

/// Per layer: the tap with the largest ratio to its layer-local floor, the flips at
/// the layer's matmul inputs, and the verdict.
pub(crate) fn layer_verdicts(d: &Divergence, flips: &[Flip], n_layer: usize) -> Vec<LayerVerdict> {
    let mut out = Vec::new();
    for l in 0..n_layer {
        let suffix = format!("-{l}");
        let worst = d
            .rows
            .iter()
            .filter(|r| r.name.ends_with(&suffix))
            .filter_map(|r| r.ratio.map(|q| (r.name.clone(), q)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((worst_tap, ratio)) = worst else { continue };
        let here: Vec<&Flip> = flips.iter().filter(|f| f.input.ends_with(&suffix)).collect();
        let flipped_codes = here.iter().map(|f| f.codes_differ).sum();
        // Only the first flipped input of each step counts: later inputs of the layer
        // inherit its change, and their flips are consequences, not boundary luck.
        let mut primary: BTreeMap<usize, &Flip> = BTreeMap::new();
        for f in &here {
            let e = primary.entry(f.step).or_insert(f);
            if tap_order(&f.input) < tap_order(&e.input) {
                *e = f;
            }
        }
        let max_boundary = primary.values().map(|f| f.max_boundary).fold(0.0, f64::max);
        let verdict = if ratio <= NOISE_RATIO {
            "noise"
        } else if flipped_codes > 0 && max_boundary <= NEAR_BOUNDARY {
            "flip"
        } else {
            "discrepancy"
        };
        out.push(LayerVerdict {
            layer: l,
            worst_tap,
            ratio,
            flipped_codes,
            max_boundary,
            verdict: verdict.into(),
        });
    }
    out
}

/// Layer-local: `c`'s layers fed `other`'s inputs and KV cache, step by step.
pub(crate) fn layer_local(
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    other: &Trace,
) -> anyhow::Result<Trace> {
    let dec = decoder(model, c, o)?;
    let hp = &model.hp;
    let get = |step: usize, name: &str| -> anyhow::Result<&Tensor> {
        other
            .taps
            .get(&(step, name.to_string()))
            .ok_or_else(|| anyhow::anyhow!("the other trace lacks tap {step:03}/{name}"))
    };
    let mut sink = TapSink::new(true, false);
    let mut cache = dec.new_cache();
    for (step, rec) in other.steps.iter().enumerate() {
        let m = rec.input_ids.len();
        let pos0 = rec.positions[0];
        sink.set_step(step);
        for il in 0..hp.n_layer {
            let input = if il == 0 {
                get(step, "inp_embd")?
            } else {
                get(step, &format!("l_out-{}", il - 1))?
            };
            // The KV cache of earlier steps: the other side's own K and V.
            for earlier in 0..step {
                let (k, v) =
                    (get(earlier, &format!("Kcur-{il}"))?, get(earlier, &format!("Vcur-{il}"))?);
                let kvd = k.shape[1];
                for (r, p) in other.steps[earlier].positions.iter().enumerate() {
                    cache.store(
                        il,
                        *p,
                        &k.data[r * kvd..(r + 1) * kvd],
                        &v.data[r * kvd..(r + 1) * kvd],
                    );
                }
            }
            dec.eval_layer(il, &mut cache, &input.data, pos0, m, &mut sink)?;
        }
        let last = get(step, &format!("l_out-{}", hp.n_layer - 1))?;
        dec.head(&last.data, m, &mut sink)?;
    }
    let (taps, _) = sink.into_taps();
    let mut t = trace_of(RunOutput {
        steps: other.steps.clone(),
        generated: Vec::new(),
        taps,
        digests: BTreeMap::new(),
    });
    t.meta.insert("layer_local".into(), "1".into());
    Ok(t)
}

/// The layer-local comparison of two side runs, when one is a lane: its layers fed the
/// other side's inputs and compared with them tap by tap (ratios to the layer-local
/// `floor`, when measured), and the activation codes at every quantized matmul input.
pub(crate) fn analyse(
    model: &Model,
    a: &Source,
    b: &Source,
    ra: &SideRun,
    rb: &SideRun,
    o: &DeltaOptions,
    floor: Option<&BTreeMap<String, f64>>,
) -> anyhow::Result<(Option<Divergence>, String, Vec<Flip>)> {
    // Layer-local: a lane's layers fed the other side's inputs.
    Ok(match (a, b) {
        (Source::Lane(c), _) => {
            let mine = layer_local(model, c, o, &rb.trace)?;
            let steps: Vec<usize> = (0..rb.trace.steps.len()).collect();
            let d = compare(&mine, &rb.trace, &steps, floor);
            let fl = flips(model, c, &mine, &rb.trace, b.chosen(), None)?;
            (Some(d), format!("A's layers ({}) fed B's inputs", c.lane.name), fl)
        }
        (Source::Trace(_), Source::Lane(c)) => {
            let mine = layer_local(model, c, o, &ra.trace)?;
            let steps: Vec<usize> = (0..ra.trace.steps.len()).collect();
            let d = compare(&ra.trace, &mine, &steps, floor);
            let fl = flips(model, c, &mine, &ra.trace, None, None)?;
            (Some(d), format!("B's layers ({}) fed A's inputs", c.lane.name), fl)
        }
        _ => (None, "no lane side: layer-local comparison needs one".into(), Vec::new()),
    })
}
