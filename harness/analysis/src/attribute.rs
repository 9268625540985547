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
//! composite (2^4 = 16) teacher-forced on B's greedy token sequence and compares its
//! trace with B's, tap by tap. By construction, the composite with every component from
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

use super::metrics::Acc;
use super::{tap_layer, tap_order, trace_of};
use tiercheck_model::run::{self, RunSpec, Trace};
use tiercheck_model::{Arith, Attention, Decoder, Mode, Model, Residual, TapSink};

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

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        self.kernel.portable.plain_path(wtype, m)
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
}

fn compare(t: &Trace, b: &Trace, from_b: Vec<Component>) -> Variant {
    let mut acc = Acc::default();
    let (mut eq, mut n) = (0, 0);
    let mut first: Option<(usize, String)> = None;
    let mut keys: Vec<&(usize, String)> =
        t.taps.keys().filter(|k| b.taps.contains_key(*k)).collect();
    keys.sort_by_key(|(s, name)| (*s, tap_order(name)));
    for k in keys {
        let (x, y) = (&t.taps[k], &b.taps[k]);
        n += 1;
        if x.data.iter().zip(&y.data).all(|(p, q)| p.to_bits() == q.to_bits()) {
            eq += 1;
        } else if first.is_none() {
            first = Some(k.clone());
        }
        if k.1 == "result_output" {
            acc.add(&x.data, &y.data);
        }
    }
    let tokens_changed =
        t.steps.iter().zip(&b.steps).filter(|(p, q)| p.emitted != q.emitted).count();
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

/// Run the bisection of `a` toward `b` on `prompt` (B's greedy continuation of `steps`
/// tokens is the replayed sequence).
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
    let run_with = |kernels: &'static dyn Kernels,
                    e: &'static dyn ElemOps,
                    spec: &RunSpec|
     -> anyhow::Result<Trace> {
        let dec = Decoder::new(
            model,
            Arith::Lane { kernels, elem: e, threads: 1 },
            residual,
            n_ctx,
            attn,
        )?;
        Ok(trace_of(run::run(&dec, spec, TapSink::new(true, false))?))
    };
    let free = RunSpec { ids: prompt.to_vec(), steps, mode, forced: Vec::new() };
    let tb = run_with(b.portable, elem::portable(b.recipe.elem), &free)?;
    let generated: Vec<u32> = {
        let prompt_steps = tb.steps.len() + 1 - steps.max(1);
        tb.steps[prompt_steps - 1..].iter().map(|s| s.emitted).collect()
    };
    let spec = RunSpec {
        ids: prompt.to_vec(),
        steps: generated.len(),
        mode,
        forced: generated[..generated.len().saturating_sub(1)].to_vec(),
    };
    let pick = |c: Component, from_b: &[Component]| if from_b.contains(&c) { b } else { a };
    let mut cache: BTreeMap<Vec<Component>, Variant> = BTreeMap::new();
    let mut lattice = Vec::new();
    for mask in 0u32..16 {
        let from_b: Vec<Component> = Component::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, c)| *c)
            .collect();
        let comp: &'static Composite = Box::leak(Box::new(Composite {
            act: pick(Component::Act, &from_b),
            kernel: pick(Component::Kernel, &from_b),
            get_rows: pick(Component::GetRows, &from_b),
        }));
        let e = elem::portable(pick(Component::Elem, &from_b).recipe.elem);
        let t = run_with(comp, e, &spec)?;
        let v = compare(&t, &tb, from_b.clone());
        cache.insert(from_b, v.clone());
        lattice.push(v);
    }
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
    })
}

/// The result as text.
pub fn render(r: &Attribution) -> String {
    let mut s = format!(
        "attribute  A = {}  ->  B = {}   ({} steps of B's greedy sequence, teacher-forced, portable twins)\n",
        r.a, r.b, r.steps
    );
    let first = |v: &Variant| match &v.first_tap {
        None => "bitwise equal".to_string(),
        Some((st, t)) => format!("step {st} {t}"),
    };
    s += &format!(
        "A vs B: logits rel L2 {:.2e}, {}/{} taps bitwise, first difference {}, {} tokens changed\n",
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
        "alone differing: logits rel, first diff"
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
    s
}
