//! Component bisection (`tiercheck attribute A B`): which parts of a lane's recipe
//! account for its divergence from another lane.
//!
//! A lane is decomposed into four components, each taken from the portable twin of
//! either side:
//!
//! - `act` — the activation quantizer and its rounding ([`Kernels::quantize_act`]);
//! - `kernel` — the dot-product and matmul kernels: accumulation schedule, multiply-add
//!   contraction, weight layout (repack) and the gemv/gemm variant per row count. A tier
//!   compiles these into one kernel, and the twins reproduce them together, so they move
//!   as one component (repacked kernels also bring their own gemm quantizer);
//! - `get_rows` — the embedding dequantizer (GCC fuses `d*q - m` on aarch64);
//! - `elem` — the elementwise and attention loops ([`tiercheck_core::elem`]: SIMD `expf`
//!   and its width, softmax and f32-dot reduction orders, RoPE contraction).
//!
//! The residual stream type is a run option, the same for both sides.
//!
//! A composite lane takes each component from A or from B. The bisection runs every
//! composite (2^4 = 16) and compares its trace with B's, tap by tap, in one of two ways:
//!
//! - **layer-local** (the default, [`attribute_with`] with `layers`): each composite runs
//!   only the chosen layers, each fed B's input and B's K/V cache at every step of B's
//!   greedy sequence, so the comparison is of those layers' own arithmetic, at the cost
//!   of 16 runs of a few layers. The layers are the user's, or those a layer-local
//!   profile of A on B's inputs flags ([`flag_layers`]). The measure is the relative L2
//!   of the chosen layers' `l_out`; the embedding dequantizer is not exercised (layer 0
//!   takes B's embedding rows);
//! - **whole-model** ([`attribute`]): each composite runs the whole model teacher-forced
//!   on B's greedy token sequence (16 whole-model runs); the measure is the logits'
//!   relative L2.
//!
//! Either way, by construction the composite with every component from
//! B must be bitwise equal to B: the report checks this ("the decomposition closes"),
//! so a difference outside the four components cannot hide. Per component it reports
//! the effect of swapping it alone into A, and of it alone differing (B with A's
//! component): the divergence that component accounts for by itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tiercheck_core::elem::{self, ElemOps};
use tiercheck_core::lane::{Kernels, Lane};
use tiercheck_core::repack::{Prepared, Target};
use tiercheck_core::{GgmlType, KernelError, WeightMatrix};

use std::time::Instant;

use crate::layer_local::{layer_local_on, NOISE_RATIO};
use crate::metrics::{self, Acc};
use crate::result_cache::{OnResult, StageCost};
use crate::trace::{tap_layer, tap_order, trace_of};
use tiercheck_model::sequence::{self, RunSpec, Trace};
use tiercheck_model::{Arith, Attention, Batching, Decoder, Mode, Model, Residual, TapSink};

/// One component of a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// Activation quantizer.
    Act,
    /// Dot-product / matmul kernels (accumulation, contraction, layout, variant).
    Kernel,
    /// Embedding dequantizer.
    GetRows,
    /// Elementwise and attention loops.
    Elem,
}

impl Component {
    /// All components, in report order.
    pub const ALL: [Component; 4] =
        [Component::Act, Component::Kernel, Component::GetRows, Component::Elem];

    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Component::Act => "act",
            Component::Kernel => "kernel",
            Component::GetRows => "get_rows",
            Component::Elem => "elem",
        }
    }

    /// What a lane's recipe says about this component.
    pub fn describe(self, lane: &Lane) -> String {
        let r = &lane.recipe;
        match self {
            Component::Act => format!("{}/{}", r.act_k.name(), r.act_legacy.name()),
            Component::Kernel => format!(
                "{} {} {} {}",
                r.accumulation.name(),
                r.contraction.name(),
                r.layout.name(),
                r.matmul.name()
            ),
            Component::GetRows => if r.contraction == tiercheck_core::lane::Contraction::GccAarch64
            {
                "fused-fma"
            } else {
                "unfused"
            }
            .into(),
            Component::Elem => r.elem.name().into(),
        }
    }
}

/// A lane assembled from two lanes' portable components.
pub(crate) struct Composite {
    act: &'static Lane,
    kernel: &'static Lane,
    get_rows: &'static Lane,
}

impl Kernels for Composite {
    fn act_rule(&self, wtype: GgmlType) -> Result<tiercheck_core::quant::ActRule, KernelError> {
        self.act.portable.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.act.portable.quantize_act(wtype, x)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        self.get_rows.portable.dequantize(ty, bytes, out)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        self.kernel.portable.prepare(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            // Plain weights: the act component's codes into the kernel component's plain
            // matmul (vec_dot per row pair, or the tier's whole-matrix kernel).
            Prepared::Plain(p) => self.matmul(p, x, m),
            // Repacked weights: the repacking tier's own gemv/gemm, quantizers included.
            Prepared::Repacked(_) => self.kernel.portable.matmul_prepared(w, x, m),
        }
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.kernel.portable.vec_dot(wtype, w_row, act)
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        self.kernel.portable.matmul_quantized(w, act, m)
    }

    fn matmul_quantized_tier(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
        tier: tiercheck_core::lane::TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        self.kernel.portable.matmul_quantized_tier(w, act, m, tier)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        self.kernel.portable.plain_path(wtype, m)
    }

    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        self.kernel.portable.id_takes_plain_gemm(wtype, m)
    }

    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        self.kernel.portable.plain_split(wtype, n, m)
    }
}

/// One composite's comparison with B.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// Components taken from B (the rest from A).
    pub from_b: Vec<Component>,
    /// Relative L2 of the logits against B's over all steps.
    pub rel_logits: f64,
    /// (step, tap) pairs bitwise equal to B's.
    pub bitwise_taps: usize,
    /// (step, tap) pairs compared.
    pub taps: usize,
    /// First (step, tap) whose bits differ from B's.
    pub first_tap: Option<(usize, String)>,
    /// Its layer (`None`: embedding or head, or no difference).
    pub first_layer: Option<usize>,
    /// Steps whose greedy token differs from B's.
    pub tokens_changed: usize,
}

impl Variant {
    /// Whether every tap equals B's bitwise.
    pub fn equal(&self) -> bool {
        self.bitwise_taps == self.taps
    }
}

/// Per component.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComponentResult {
    /// The component.
    pub component: Component,
    /// A's recipe value.
    pub a: String,
    /// B's recipe value.
    pub b: String,
    /// A with only this component from B.
    pub swapped_into_a: Variant,
    /// B with only this component from A (this component alone differs).
    pub alone: Variant,
    /// `1 - rel(A with B's component) / rel(A)`: share of A's logit divergence removed
    /// by the swap.
    pub share_removed: f64,
}

/// The bisection result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// Lane A.
    pub a: String,
    /// Lane B.
    pub b: String,
    /// Steps of B's sequence replayed.
    pub steps: usize,
    /// A itself against B.
    pub baseline: Variant,
    /// Per component.
    pub components: Vec<ComponentResult>,
    /// Every composite.
    pub lattice: Vec<Variant>,
    /// Whether the all-from-B composite is bitwise equal to B.
    pub closes: bool,
    /// Components that alone make a difference (their `alone` variant is not bitwise
    /// equal to B).
    pub responsible: Vec<Component>,
    /// Components whose recipe values differ between A and B.
    pub recipe_differs: Vec<Component>,
    /// The layers the composites ran on layer-locally, fed B's inputs (empty: the whole
    /// model, teacher-forced on B's tokens).
    #[serde(default)]
    pub layers: Vec<usize>,
    /// Why each of `layers` was chosen.
    #[serde(default)]
    pub layer_reasons: Vec<String>,
    /// Each stage's wall time and decoder runs (whole-model runs or layer-local replays).
    #[serde(default)]
    pub costs: Vec<StageCost>,
}

/// Whether tap `name` is in scope: every tap (whole model), or a tap of one of `layers`.
fn in_scope(name: &str, layers: Option<&[usize]>) -> bool {
    match layers {
        None => true,
        Some(ls) => tap_layer(name).is_some_and(|l| ls.contains(&l)),
    }
}

/// Composite trace `t` against B's trace `b` on the taps in scope: the logits (whole
/// model) or the scoped layers' `l_out` (layer-local) give the relative L2.
fn compare(t: &Trace, b: &Trace, from_b: Vec<Component>, layers: Option<&[usize]>) -> Variant {
    let mut acc = Acc::default();
    let (mut eq, mut n) = (0, 0);
    let mut first: Option<(usize, String)> = None;
    let mut keys: Vec<&(usize, String)> =
        t.taps.keys().filter(|k| b.taps.contains_key(*k) && in_scope(&k.1, layers)).collect();
    keys.sort_by_key(|(s, name)| (*s, tap_order(name)));
    for k in keys {
        let (x, y) = (&t.taps[k], &b.taps[k]);
        n += 1;
        if x.data.iter().zip(&y.data).all(|(p, q)| p.to_bits() == q.to_bits()) {
            eq += 1;
        } else if first.is_none() {
            first = Some(k.clone());
        }
        let measured = match layers {
            None => k.1 == "result_output",
            Some(_) => k.1.starts_with("l_out-"),
        };
        if measured {
            acc.add(&x.data, &y.data);
        }
    }
    let tokens_changed = match layers {
        None => t.steps.iter().zip(&b.steps).filter(|(p, q)| p.emitted != q.emitted).count(),
        Some(_) => 0,
    };
    let first_layer = first.as_ref().and_then(|(_, n)| tap_layer(n));
    Variant {
        from_b,
        rel_logits: acc.stat().rel_l2,
        bitwise_taps: eq,
        taps: n,
        first_tap: first,
        first_layer,
        tokens_changed,
    }
}

/// The options of a bisection.
#[derive(Clone, Debug)]
pub struct AttributeOptions {
    /// Prompt ids.
    pub prompt: Vec<u32>,
    /// B's greedy steps (the replayed sequence).
    pub steps: usize,
    /// Batching mode.
    pub mode: Mode,
    /// Batch and ubatch sizes and output rows of the prompt step.
    pub batching: Batching,
    /// Residual stream type.
    pub residual: Residual,
    /// Context length.
    pub n_ctx: usize,
    /// K/V cache type and attention path.
    pub attn: Attention,
    /// Where the composites run: `None`, the whole model teacher-forced on B's tokens;
    /// `Some(layers)`, layer-locally on those layers fed B's inputs (an empty list: the
    /// layers the profile flags, [`flag_layers`]).
    pub layers: Option<Vec<usize>>,
    /// Threads per matmul of the composites' decoders (results do not depend on it).
    pub threads: usize,
    /// The saved K/V cache the runs start from.
    pub state: Option<std::sync::Arc<tiercheck_model::state::KvState>>,
}

/// Most layers [`flag_layers`] picks.
pub const MAX_FLAGGED: usize = 4;

/// The layers a layer-local profile of A on B's inputs flags, with why: the first layer
/// whose own arithmetic differs from B's, and the layers where, at some step, some tap
/// kind's relative L2 exceeds [`NOISE_RATIO`] times that kind's median over the
/// layers at that step (a layer standing out from the rest, as an activation flip or a
/// wrong kernel does); at most [`MAX_FLAGGED`], the largest excesses first, then in
/// layer order.
pub fn flag_layers(a_local: &Trace, b: &Trace, n_layer: usize) -> Vec<(usize, String)> {
    // Per (step, tap kind): relative L2 per layer.
    let mut rel: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
    let mut first: Option<usize> = None;
    for ((step, name), x) in &a_local.taps {
        let Some(l) = tap_layer(name) else { continue };
        let Some(y) = b.taps.get(&(*step, name.clone())) else { continue };
        let kind = name.rsplit_once('-').map_or(name.as_str(), |(k, _)| k);
        let st = metrics::stat(&x.data, &y.data);
        if st.n_diff > 0 && first.is_none_or(|f| l < f) {
            first = Some(l);
        }
        rel.entry((*step, kind.to_string())).or_insert_with(|| vec![0.0; n_layer])[l] = st.rel_l2;
    }
    let mut out: Vec<(usize, String, f64)> = Vec::new();
    if let Some(l) = first {
        out.push((l, "the first layer whose own arithmetic differs".into(), f64::INFINITY));
    }
    for ((step, kind), v) in &rel {
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        for (l, &x) in v.iter().enumerate() {
            let excess = if median > 0.0 {
                x / median
            } else if x > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            if excess > NOISE_RATIO {
                let why = format!(
                    "step {step} {kind}-{l} rel L2 {x:.1e}, {} the median layer",
                    if excess.is_finite() { format!("x{excess:.1}") } else { "above 0,".into() }
                );
                match out.iter_mut().find(|(m, _, _)| *m == l) {
                    Some(e) if e.2 < excess => *e = (l, why, excess),
                    Some(_) => {}
                    None => out.push((l, why, excess)),
                }
            }
        }
    }
    out.sort_by(|x, y| y.2.total_cmp(&x.2).then(x.0.cmp(&y.0)));
    out.truncate(MAX_FLAGGED);
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|(l, why, _)| (l, why)).collect()
}

/// Run the bisection of `a` toward `b` on `prompt`, whole-model (B's greedy
/// continuation of `steps` tokens is the replayed sequence).
#[allow(clippy::too_many_arguments)]
pub fn attribute(
    model: &Model,
    a: &'static Lane,
    b: &'static Lane,
    prompt: &[u32],
    steps: usize,
    mode: Mode,
    residual: Residual,
    n_ctx: usize,
    attn: Attention,
) -> anyhow::Result<Attribution> {
    let o = AttributeOptions {
        prompt: prompt.to_vec(),
        steps,
        mode,
        batching: Batching::LLAMA_CLI,
        residual,
        n_ctx,
        attn,
        layers: None,
        threads: 1,
        state: None,
    };
    attribute_with(model, a, b, &o)
}

/// Run the bisection of `a` toward `b` as `o` says (whole-model or layer-local).
pub fn attribute_with(
    model: &Model,
    a: &'static Lane,
    b: &'static Lane,
    o: &AttributeOptions,
) -> anyhow::Result<Attribution> {
    attribute_observed(model, a, b, o, None)
}

/// The runs (decoder runs or layer-local replays) an attribution computes: B's run and
/// 16 composites, or, with the layers from the profile, B's run, the profile (which is
/// also the all-from-A composite) and 15 composites: a progress display's total.
pub const ATTRIBUTE_RUNS: usize = 17;

/// [`attribute_with`], calling `on_run` after each run with how many have run.
pub fn attribute_observed(
    model: &Model,
    a: &'static Lane,
    b: &'static Lane,
    o: &AttributeOptions,
    on_run: Option<&OnResult>,
) -> anyhow::Result<Attribution> {
    let done = std::cell::Cell::new(0usize);
    let ran = || {
        done.set(done.get() + 1);
        if let Some(f) = on_run {
            f(done.get());
        }
    };
    let mut stage_t = Instant::now();
    let mut costs = Vec::new();
    let mut stage = |name: &str, runs: usize, costs: &mut Vec<StageCost>| {
        let now = Instant::now();
        costs.push(StageCost {
            stage: name.into(),
            seconds: now.duration_since(stage_t).as_secs_f64(),
            computed: runs,
            reused: 0,
            skipped: None,
        });
        stage_t = now;
    };
    let decoder =
        |kernels: &'static dyn Kernels, e: &'static dyn ElemOps| -> anyhow::Result<Decoder<'_>> {
            let mut dec = Decoder::new(
                model,
                Arith::Lane { kernels, elem: e, threads: o.threads.max(1) },
                o.residual,
                o.n_ctx,
                o.attn,
            )?;
            dec.set_state(o.state.clone())?;
            Ok(dec)
        };
    let run_with = |kernels: &'static dyn Kernels,
                    e: &'static dyn ElemOps,
                    spec: &RunSpec|
     -> anyhow::Result<Trace> {
        Ok(trace_of(sequence::run(&decoder(kernels, e)?, spec, TapSink::new(true, false))?))
    };
    let steps = o.steps;
    let free = RunSpec {
        ids: o.prompt.clone(),
        steps,
        mode: o.mode,
        batching: o.batching,
        forced: Vec::new(),
    };
    let tb = run_with(b.portable, elem::portable(b.recipe.elem), &free)?;
    let generated: Vec<u32> = {
        let prompt_steps = tb.steps.len() + 1 - steps.max(1);
        tb.steps[prompt_steps - 1..].iter().map(|s| s.emitted).collect()
    };
    ran();
    stage("B's run", 1, &mut costs);
    let spec = RunSpec {
        ids: o.prompt.clone(),
        steps: generated.len(),
        mode: o.mode,
        batching: o.batching,
        forced: generated[..generated.len().saturating_sub(1)].to_vec(),
    };
    let pick = |c: Component, from_b: &[Component]| if from_b.contains(&c) { b } else { a };
    let composite = |from_b: &[Component]| -> (&'static Composite, &'static dyn ElemOps) {
        let comp: &'static Composite = Box::leak(Box::new(Composite {
            act: pick(Component::Act, from_b),
            kernel: pick(Component::Kernel, from_b),
            get_rows: pick(Component::GetRows, from_b),
        }));
        (comp, elem::portable(pick(Component::Elem, from_b).recipe.elem))
    };
    let n_layer = model.hp.n_layer;
    // Layer-local: which layers, and A's own replay on all of them when the profile
    // chooses (it is then the all-from-A composite's trace too).
    let (layers, reasons, a_local): (Option<Vec<usize>>, Vec<String>, Option<Trace>) = match &o
        .layers
    {
        None => (None, Vec::new(), None),
        Some(ls) if !ls.is_empty() => {
            if let Some(bad) = ls.iter().find(|l| **l >= n_layer) {
                anyhow::bail!("--layers: layer {bad} is not below the model's {n_layer}");
            }
            let mut ls = ls.clone();
            ls.sort_unstable();
            ls.dedup();
            let why = ls.iter().map(|l| format!("layer {l}: chosen")).collect();
            (Some(ls), why, None)
        }
        Some(_) => {
            let (c, e) = composite(&[]);
            let (t, _) = layer_local_on(&decoder(c, e)?, &tb, None)?;
            let flagged = flag_layers(&t, &tb, n_layer);
            ran();
            stage("profile", 1, &mut costs);
            if flagged.is_empty() {
                anyhow::bail!(
                        "{} fed {}'s inputs computes every layer bitwise as {} does: no layer to attribute",
                        a.name,
                        b.name,
                        b.name
                    );
            }
            let ls = flagged.iter().map(|f| f.0).collect();
            let why = flagged.iter().map(|(l, w)| format!("layer {l}: {w}")).collect();
            (Some(ls), why, Some(t))
        }
    };
    let mut cache: BTreeMap<Vec<Component>, Variant> = BTreeMap::new();
    let mut lattice = Vec::new();
    let mut runs = 0;
    for mask in 0u32..16 {
        let from_b: Vec<Component> = Component::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, c)| *c)
            .collect();
        let t = match (&layers, &a_local) {
            (Some(_), Some(t)) if from_b.is_empty() => t.clone(),
            (Some(ls), _) => {
                runs += 1;
                let (c, e) = composite(&from_b);
                let t = layer_local_on(&decoder(c, e)?, &tb, Some(ls))?.0;
                ran();
                t
            }
            (None, _) => {
                runs += 1;
                let (c, e) = composite(&from_b);
                let t = run_with(c, e, &spec)?;
                ran();
                t
            }
        };
        let v = compare(&t, &tb, from_b.clone(), layers.as_deref());
        cache.insert(from_b, v.clone());
        lattice.push(v);
    }
    stage("composites", runs, &mut costs);
    let baseline = cache[&Vec::new()].clone();
    let all: Vec<Component> = Component::ALL.to_vec();
    let closes = cache[&all].equal();
    let mut components = Vec::new();
    for c in Component::ALL {
        let swapped = cache[&vec![c]].clone();
        let others: Vec<Component> = Component::ALL.iter().copied().filter(|x| *x != c).collect();
        let alone = cache[&others].clone();
        let share_removed = if baseline.rel_logits > 0.0 {
            1.0 - swapped.rel_logits / baseline.rel_logits
        } else {
            0.0
        };
        components.push(ComponentResult {
            component: c,
            a: c.describe(a),
            b: c.describe(b),
            swapped_into_a: swapped,
            alone,
            share_removed,
        });
    }
    let responsible = components.iter().filter(|r| !r.alone.equal()).map(|r| r.component).collect();
    let recipe_differs = components.iter().filter(|r| r.a != r.b).map(|r| r.component).collect();
    Ok(Attribution {
        a: a.name.into(),
        b: b.name.into(),
        steps: generated.len(),
        baseline,
        components,
        lattice,
        closes,
        responsible,
        recipe_differs,
        layers: layers.unwrap_or_default(),
        layer_reasons: reasons,
        costs,
    })
}

/// The result as text.
pub fn render(r: &Attribution) -> String {
    let local = !r.layers.is_empty();
    let mut s = if local {
        format!(
            "attribute  A = {}  ->  B = {}   (layer-local on layer{} {}, fed B's inputs over {} steps of B's greedy sequence, portable twins)\n",
            r.a,
            r.b,
            if r.layers.len() > 1 { "s" } else { "" },
            r.layers.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", "),
            r.steps
        )
    } else {
        format!(
            "attribute  A = {}  ->  B = {}   ({} steps of B's greedy sequence, teacher-forced, portable twins)\n",
            r.a, r.b, r.steps
        )
    };
    for why in &r.layer_reasons {
        s += &format!("  {why}\n");
    }
    if local {
        s += "  (layer-local: each layer takes B's input and K/V, so the embedding dequantizer (get_rows) has no effect here; --whole-model tests it)\n";
    }
    let measure = if local { "l_out" } else { "logits" };
    let first = |v: &Variant| match &v.first_tap {
        None => "bitwise equal".to_string(),
        Some((st, t)) => format!("step {st} {t}"),
    };
    s += &format!(
        "A vs B: {measure} rel L2 {:.2e}, {}/{} taps bitwise, first difference {}, {} tokens changed\n",
        r.baseline.rel_logits,
        r.baseline.bitwise_taps,
        r.baseline.taps,
        first(&r.baseline),
        r.baseline.tokens_changed
    );
    s += &format!(
        "decomposition {}: A with all four components from B is {}\n\n",
        if r.closes { "closes" } else { "DOES NOT CLOSE" },
        if r.closes {
            "bitwise equal to B"
        } else {
            "still different from B: a difference lies outside the components"
        }
    );
    s += &format!(
        "{:<9} {:>8}  {:<36} {:<36}\n",
        "component",
        "removed",
        "swapped into A: first diff, tokens",
        format!("alone differing: {measure} rel, first diff")
    );
    for c in &r.components {
        s += &format!(
            "{:<9} {:>7.0}%  {:<36} {:<36}\n",
            c.component.name(),
            100.0 * c.share_removed,
            format!("{}, {}", first(&c.swapped_into_a), c.swapped_into_a.tokens_changed),
            if c.alone.equal() {
                "no effect".to_string()
            } else {
                format!("{:.1e}, {}", c.alone.rel_logits, first(&c.alone))
            }
        );
    }
    s += "\nrecipe values (A | B):\n";
    for c in &r.components {
        let mark = if c.a == c.b { " " } else { "*" };
        s += &format!("  {mark} {:<9} {} | {}\n", c.component.name(), c.a, c.b);
    }
    let names = |v: &[Component]| v.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
    s += &format!(
        "\nrecipes differ in: {}\nresponsible (alone make a difference): {}\n",
        if r.recipe_differs.is_empty() { "nothing".into() } else { names(&r.recipe_differs) },
        if r.responsible.is_empty() { "nothing".into() } else { names(&r.responsible) }
    );
    if !r.costs.is_empty() {
        let total: f64 = r.costs.iter().map(|c| c.seconds).sum();
        s += &format!("\nCOST: {total:.1} s (decoder runs or layer-local replays)\n");
        for c in &r.costs {
            s += &format!("  {:<12} {:>8.2} s {:>4}\n", c.stage, c.seconds, c.computed);
        }
    }
    s
}
