//! Divergence analysis (`delta`, `attribute`) on the embedded model: a lane against
//! itself reports zero everywhere; a planted one-component bug is found at the right
//! tap and named as the right component; two pinned lane
//! pairs (`x86_64-avx2` against `ref` and against `aarch64-neon`) give the
//! component-level answers their recipes predict.

use tiercheck_analysis::attribute::{
    attribute, attribute_with, AttributeOptions, Component, MAX_FLAGGED,
};
use tiercheck_analysis::{delta, delta_cached, Cache, DeltaOptions, Source};
use tiercheck_core::arch::generic::{RefTwin, REF};
use tiercheck_core::lane::{Kernels, Lane, PlantedFault};
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError};
use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::embedded;
use tiercheck_model::{Attention, Batching, Mode, Model, Residual};

const PROMPT: [u32; 4] = [17, 2045, 388, 901];

fn model() -> Model {
    Model::open(&embedded::ensure_model(None).unwrap()).unwrap()
}

fn opts(steps: usize, floor_seeds: u64) -> DeltaOptions {
    DeltaOptions {
        dump: Default::default(),
        ids: PROMPT.to_vec(),
        steps,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        n_ctx: 512,
        attn: Attention::F32_OFF,
        threshold: 0.2,
        floor_seeds,
        threads: 1,
        state: None,
    }
}

fn lane(name: &str) -> Source {
    Source::Lane(lanes::choose(lanes::find(name).unwrap(), Impl::Portable).unwrap())
}

/// `ref` with one planted bug: its q8_K activation quantizer truncates toward zero
/// instead of rounding to nearest (everything else, the recipe included, is `ref`'s).
struct Planted;

fn q8_k_truncating(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 256 * 292);
    for b in x.chunks_exact(256) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in b {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut qs = [0i8; 256];
        let mut d = 0.0f32;
        if amax != 0.0 {
            let iscale = -127.0f32 / max;
            for (q, &v) in qs.iter_mut().zip(b) {
                *q = ((iscale * v).trunc() as i32).min(127) as i8;
            }
            d = 1.0 / iscale;
        }
        out.extend_from_slice(&d.to_le_bytes());
        out.extend(qs.iter().map(|&q| q as u8));
        for g in qs.chunks_exact(16) {
            let s: i16 = g.iter().map(|&q| q as i16).sum();
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    out
}

impl Kernels for Planted {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        RefTwin.act_rule(wtype)
    }
    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        match wtype {
            GgmlType::Q4_K | GgmlType::Q6_K => Ok(q8_k_truncating(x)),
            _ => RefTwin.quantize_act(wtype, x),
        }
    }
    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        RefTwin.vec_dot(wtype, w_row, act)
    }
}

static PLANTED: Lane = Lane {
    name: "planted-q8k-truncation",
    arch: tiercheck_core::lane::Arch::Portable,
    status: tiercheck_core::lane::Status::Synthetic { checked: "a negative control" },
    summary: "ref with a truncating q8_K quantizer (negative control)",
    recipe: REF.recipe,
    portable: &Planted,
};

/// `attribute` of the planted lane against `ref` on the first prompt, `steps` steps.
fn attribute_planted(m: &Model, steps: usize) -> tiercheck_analysis::attribute::Attribution {
    attribute(
        m,
        &PLANTED,
        &REF,
        &PROMPT,
        steps,
        Mode::Prompt,
        Residual::F32,
        512,
        Attention::F32_OFF,
    )
    .unwrap()
}

fn planted() -> Source {
    Source::Lane(Chosen { kernels: &Planted, ..Chosen::portable(&PLANTED) })
}

#[test]
fn a_lane_against_itself_is_zero_everywhere() {
    let m = model();
    let r =
        delta(&m, &lane("x86_64-avx2-repack"), &lane("x86_64-avx2-repack"), &opts(6, 1)).unwrap();
    assert_eq!(r.tokens_agree, 6);
    assert_eq!(r.free.first_step, None, "{:?}", r.free.first_tap);
    assert!(r
        .free
        .rows
        .iter()
        .all(|t| t.all.n_diff == 0 && t.all.rel_l2 == 0.0 && (t.all.cosine - 1.0).abs() < 1e-12));
    let t = r.teacher.as_ref().unwrap();
    assert_eq!(t.top1_agreement, 1.0);
    assert_eq!((t.kld.max, t.max_abs_dlogit.max), (0.0, 0.0));
    let ll = r.layer_local.as_ref().unwrap();
    assert_eq!(ll.first_tap, None);
    assert!(ll.rows.iter().all(|t| t.all.n_diff == 0));
    assert!(r.flips.is_empty());
    assert!(r.free.jumps.is_empty());
    // No verdict needs a floor: it is not measured, and the report says why.
    assert!(r.floor.is_none() && r.layer_verdicts.is_empty(), "{:?}", r.layer_verdicts);
    let f = r.costs.iter().find(|c| c.stage == "floor").unwrap();
    assert_eq!(f.computed, 0);
    assert!(f.skipped.as_deref().unwrap_or("").contains("bitwise equal"), "{f:?}");
    // One side's runs serve the other: one free run, one layer-local replay computed.
    let free = r.costs.iter().find(|c| c.stage == "free-running runs").unwrap();
    assert_eq!((free.computed, free.reused), (1, 1));
    assert_eq!(r.headline.kind, "identical");
}

#[test]
fn a_planted_quantizer_bug_is_found_at_the_first_quantized_matmul_and_named() {
    let m = model();
    let r = delta(&m, &planted(), &lane("ref"), &opts(4, 1)).unwrap();
    // The embedding and the first norm are untouched; the first matmul output differs.
    assert_eq!(r.free.first_step, Some(0));
    assert_eq!(r.free.first_tap.as_deref(), Some("Qcur-0"));
    let row = |n: &str| r.free.rows.iter().find(|t| t.name == n).unwrap().clone();
    assert_eq!(row("attn_norm-0").all.n_diff, 0);
    assert!(row("Qcur-0").all.rel_l2 > 1e-3, "{:?}", row("Qcur-0"));
    // Layer-locally the layers stay far above their floor (a one-ulp input dither flips
    // a few codes: 4e-4 here; truncation moves half of them: 40 times that), and codes
    // differ at the quantized matmul inputs.
    let ll = r.layer_local.as_ref().unwrap();
    let l3 = ll.rows.iter().find(|t| t.name == "Vcur-3").unwrap();
    assert!(l3.ratio.unwrap() > 10.0, "{l3:?}");
    assert!(r.flips.iter().any(|f| f.input == "attn_norm-0" && f.codes_differ > 100));
    assert!(r.layer_verdicts.iter().all(|v| v.verdict == "discrepancy"), "{:?}", r.layer_verdicts);

    let a = attribute_planted(&m, 4);
    assert!(a.closes);
    assert!(a.recipe_differs.is_empty(), "the planted bug hides from the recipe");
    assert_eq!(a.responsible, vec![Component::Act]);
    let act = &a.components[0];
    assert!(act.swapped_into_a.equal() && act.share_removed == 1.0);
}

#[test]
fn legitimate_tiers_are_noise_or_near_boundary_flips_never_discrepancies() {
    let m = model();
    let r = delta(&m, &lane("x86_64-avx2"), &lane("ref"), &opts(48, 3)).unwrap();
    assert_eq!(r.tokens_agree, 6);
    assert!(r.free_verdict.contains("near-tie"), "{}", r.free_verdict);
    let j = &r.free.jumps[0];
    assert_eq!((j.step, j.to.as_str()), (0, "ffn_out-5"));
    let c = j.codes.as_ref().unwrap();
    assert_eq!(c.codes_differ, 1);
    assert!(c.max_boundary < 1e-3);
    // Measured near the boundary: a flip; a jump whose codes were not measured is not.
    assert!(j.kind == "flip" && j.is_flip(), "{j:?}");
    assert!(r.free.jumps.iter().all(|j| (j.kind == "flip") == j.is_flip()), "{:?}", r.free.jumps);
    let t = r.teacher.as_ref().unwrap();
    assert!(t.unexplained.is_empty() && t.top1_agreement < 1.0);
    assert!(r.layer_verdicts.iter().all(|v| v.verdict != "discrepancy"), "{:?}", r.layer_verdicts);
    // x86 against aarch64: a flip at layer 2 (codes whose values sit exactly on the
    // rounding boundary: the two q8_K rules round them apart), every other layer noise.
    let r = delta(&m, &lane("x86_64-avx2"), &lane("aarch64-neon"), &opts(48, 3)).unwrap();
    // Here the floor is needed, measured, and positive downstream of the dither.
    let f = r.floor.as_ref().unwrap();
    assert!(f.per_tap["l_out-7"] > 0.0 && f.layer_local["l_out-3"] > 0.0);
    let v: Vec<&str> = r.layer_verdicts.iter().map(|v| v.verdict.as_str()).collect();
    assert_eq!(
        v,
        ["noise", "noise", "flip", "noise", "noise", "noise", "noise", "noise"],
        "{:?}",
        r.layer_verdicts
    );
}

#[test]
fn x86_avx2_against_aarch64_neon_names_act_kernel_and_elem() {
    let m = model();
    let a = attribute(
        &m,
        lanes::find("x86_64-avx2").unwrap(),
        lanes::find("aarch64-neon").unwrap(),
        &PROMPT,
        48,
        Mode::Prompt,
        Residual::F32,
        512,
        Attention::F32_OFF,
    )
    .unwrap();
    assert!(a.closes, "the decomposition must close");
    // The recipes differ in all four components ...
    assert_eq!(
        a.recipe_differs,
        vec![Component::Act, Component::Kernel, Component::GetRows, Component::Elem]
    );
    // ... and three of them change bits on their own. The embedding dequantizer's
    // fused `fma(d1, q, -m1)` equals the unfused form for Q4_K: `d1*q` is exact (an
    // f16 scale times a 6-bit sub-scale times a 4-bit code fits in 24 bits).
    assert_eq!(a.responsible, vec![Component::Act, Component::Kernel, Component::Elem]);
    let by = |c: Component| a.components.iter().find(|r| r.component == c).unwrap();
    // The q8_K rounding rules differ only where a value sits on a rounding boundary:
    // the first such flip is in layer 3, at step 10.
    assert_eq!(by(Component::Act).alone.first_tap, Some((10, "Qcur-3".to_string())));
    assert_eq!(by(Component::Kernel).alone.first_tap, Some((0, "Qcur-0".to_string())));
    assert!(by(Component::GetRows).alone.equal());
}

#[test]
fn aarch64_neon_against_i8mm_repack_names_the_kernel_alone() {
    let m = model();
    let a = attribute(
        &m,
        lanes::find("aarch64-neon").unwrap(),
        lanes::find("aarch64-i8mm-repack").unwrap(),
        &PROMPT,
        16,
        Mode::Prompt,
        Residual::F32,
        512,
        Attention::F32_OFF,
    )
    .unwrap();
    assert!(a.closes);
    // The recipes differ in the kernels and in the elementwise flavour (the i8mm build
    // has no llamafile: its batched `kqv` runs `ggml_vec_dot_f32`) ...
    assert_eq!(a.recipe_differs, vec![Component::Kernel, Component::Elem]);
    // ... but only the kernels change bits here: the one batched step has 4 positions,
    // where tinyBLAS's single 4-float accumulator and `ggml_vec_dot_f32`'s first one add
    // the same nonzero products in the same order.
    assert_eq!(a.responsible, vec![Component::Kernel]);
    let by = |c: Component| a.components.iter().find(|r| r.component == c).unwrap();
    assert!(by(Component::Elem).alone.equal());
    let k = by(Component::Kernel);
    assert!(k.swapped_into_a.equal());
    assert_eq!(k.share_removed, 1.0);
}

fn attr_opts(steps: usize, layers: Option<Vec<usize>>) -> AttributeOptions {
    AttributeOptions {
        prompt: PROMPT.to_vec(),
        steps,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        n_ctx: 512,
        attn: Attention::F32_OFF,
        layers,
        threads: 1,
        state: None,
    }
}

/// `--threads` changes no result of an analysis: a delta and an attribution with three
/// threads per matmul (rows split three ways) equal the one-thread ones.
#[test]
fn threads_do_not_change_a_delta_or_an_attribution() {
    let m = model();
    let (x, n) = (lane("x86_64-avx2"), lane("aarch64-neon"));
    let one = delta(&m, &x, &n, &opts(6, 1)).unwrap();
    let three = delta(&m, &x, &n, &DeltaOptions { threads: 3, ..opts(6, 1) }).unwrap();
    assert_eq!(one.without_costs(), three.without_costs());
    assert!(one.floor.is_some() && !one.layer_verdicts.is_empty());
    let (a, b) = (lanes::find("x86_64-avx2").unwrap(), lanes::find("aarch64-neon").unwrap());
    let strip = |r: tiercheck_analysis::attribute::Attribution| {
        tiercheck_analysis::attribute::Attribution { costs: Vec::new(), ..r }
    };
    for layers in [None, Some(Vec::new())] {
        let one = attribute_with(&m, a, b, &attr_opts(6, layers.clone())).unwrap();
        let three =
            attribute_with(&m, a, b, &AttributeOptions { threads: 3, ..attr_opts(6, layers) })
                .unwrap();
        assert_eq!(strip(one), strip(three));
    }
}

/// Layer-local attribution: the profile flags the first differing layer and the layers
/// that stand out (here the activation flips of x86 against aarch64), the composites
/// run only there, and the components named are the whole-model run's, less the
/// embedding dequantizer (which a layer fed B's input never runs).
#[test]
fn layer_local_attribution_runs_the_flagged_layers_and_names_the_components() {
    let m = model();
    let (x86, neon) = (lanes::find("x86_64-avx2").unwrap(), lanes::find("aarch64-neon").unwrap());
    let a = attribute_with(&m, x86, neon, &attr_opts(48, Some(Vec::new()))).unwrap();
    assert!(a.closes, "the decomposition must close");
    assert_eq!(a.layers.first(), Some(&0), "{:?}", a.layer_reasons);
    assert!(a.layers.len() > 1 && a.layers.len() <= MAX_FLAGGED, "{:?}", a.layer_reasons);
    assert_eq!(a.layer_reasons.len(), a.layers.len());
    assert_eq!(a.responsible, vec![Component::Act, Component::Kernel, Component::Elem]);
    let by = |a: &tiercheck_analysis::attribute::Attribution, c: Component| {
        a.components.iter().find(|r| r.component == c).unwrap().clone()
    };
    assert!(by(&a, Component::GetRows).alone.equal());
    // Only the flagged layers' taps were compared; 15 composites ran layer-locally (the
    // all-from-A one is the profile's run).
    let taps_per_layer = tiercheck_model::taps::LAYER_TAPS.len();
    assert_eq!(a.baseline.taps, 48 * taps_per_layer * a.layers.len());
    let runs: Vec<(String, usize)> =
        a.costs.iter().map(|c| (c.stage.clone(), c.computed)).collect();
    assert_eq!(
        runs,
        [("B's run".to_string(), 1), ("profile".to_string(), 1), ("composites".to_string(), 15)]
    );
    // A chosen layer: the act component alone first differs in that layer, the kernels
    // at its first matmul of step 0.
    let one = attribute_with(&m, x86, neon, &attr_opts(48, Some(vec![3]))).unwrap();
    assert_eq!(one.layers, vec![3]);
    assert!(one.closes);
    assert_eq!(by(&one, Component::Act).alone.first_layer, Some(3));
    assert_eq!(by(&one, Component::Kernel).alone.first_tap, Some((0, "Qcur-3".to_string())));
    assert_eq!(one.costs.iter().find(|c| c.stage == "composites").unwrap().computed, 16);
    // The kernels alone between two aarch64 lanes, as the whole-model run finds.
    let k = attribute_with(
        &m,
        neon,
        lanes::find("aarch64-i8mm-repack").unwrap(),
        &attr_opts(16, Some(Vec::new())),
    )
    .unwrap();
    assert!(k.closes);
    assert_eq!(k.responsible, vec![Component::Kernel]);
    // A lane against itself has no layer to attribute; a layer past the model is refused.
    let e = attribute_with(&m, x86, x86, &attr_opts(4, Some(Vec::new()))).unwrap_err();
    assert!(e.to_string().contains("no layer to attribute"), "{e}");
    let e = attribute_with(&m, x86, neon, &attr_opts(4, Some(vec![8]))).unwrap_err();
    assert!(e.to_string().contains("layer 8 is not below the model's 8"), "{e}");
}

#[test]
fn delta_reads_trace_files_and_writes_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ref.safetensors");
    let bin = env!("CARGO_BIN_EXE_tiercheck");
    let st = std::process::Command::new(bin)
        .args(["run", "--lane", "ref", "--prompt", "short-4", "--steps", "6", "--quiet", "--out"])
        .arg(&trace)
        .status()
        .unwrap();
    assert!(st.success());
    let out = dir.path().join("report");
    let o = std::process::Command::new(bin)
        .args(["delta", "x86_64-avx2"])
        .arg(&trace)
        .args(["--floor-seeds", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("FREE-RUNNING")
            && text.contains("TEACHER-FORCED")
            && text.contains("LAYER-LOCAL"),
        "{text}"
    );
    assert!(text.contains("A's layers (x86_64-avx2) fed B's inputs"), "{text}");
    let svg = std::fs::read_to_string(out.join("delta.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("floor band") && svg.contains("l_out free-running")
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("delta.json")).unwrap()).unwrap();
    assert_eq!(json["prompt"], serde_json::json!(PROMPT));
    // Bad input: a missing trace file and an unknown tap kind are clear errors.
    let o = std::process::Command::new(bin)
        .args(["delta", "ref", "/no/such.safetensors"])
        .output()
        .unwrap();
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("/no/such.safetensors")
    );
    let o = std::process::Command::new(bin)
        .args(["delta", "ref", "ref", "--taps", "bogus"])
        .output()
        .unwrap();
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains("unknown tap kind 'bogus'")
    );
}

/// The embedded model with its RMSNorm epsilon times ten (the f32 metadata value patched
/// in place), written to `dir`.
fn model_with_eps_times_ten(dir: &std::path::Path) -> std::path::PathBuf {
    let src = embedded::ensure_model(None).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    let key = b"qwen3.attention.layer_norm_rms_epsilon";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("the epsilon key") + key.len();
    // GGUF: the key string, then the value type (u32, 6 = f32), then the value.
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 6);
    let v = f32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
    bytes[at + 4..at + 8].copy_from_slice(&(v * 10.0).to_le_bytes());
    let out = dir.join("eps10.gguf");
    std::fs::write(&out, bytes).unwrap();
    out
}

/// A trace of `lane` on `model` (prompt short-4, 4 greedy tokens), optionally without
/// its provenance (`lane` metadata), as an engine's dump would be. A model other than the
/// embedded one stands for a faulty tier running the embedded model: its trace does not
/// name the model it ran (the analysis would refuse it as another model's trace).
fn trace_on(model: &std::path::Path, lane: &str, out: &std::path::Path, provenance: bool) {
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args(["run", "--lane", lane, "--impl", "portable", "--prompt", "short-4", "--steps", "4"])
        .args(["--kv", "f32", "--fa", "off", "--quiet", "--model"])
        .arg(model)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap();
    assert!(st.success());
    let faulty = model != embedded::ensure_model(None).unwrap();
    if !provenance || faulty {
        let mut t = tiercheck_model::sequence::read_trace(out).unwrap();
        if !provenance {
            t.meta.remove("lane");
        }
        if faulty {
            t.meta.remove("model_sha256");
            t.meta.remove("model_path");
        }
        tiercheck_model::import::write(out, &t).unwrap();
    }
}

#[test]
fn a_systematic_elementwise_fault_is_a_discrepancy_not_a_flip_and_not_its_lane() {
    let m = model();
    let dir = tempfile::tempdir().unwrap();
    let eps = model_with_eps_times_ten(dir.path());
    // Without provenance: an excess at attn_norm-0, which no quantization precedes, is
    // the layer's own arithmetic, whatever codes flip downstream of it.
    let t = dir.path().join("eps.safetensors");
    trace_on(&eps, "x86_64-avx2", &t, false);
    let r = delta(&m, &Source::Trace(t.clone()), &lane("x86_64-avx2"), &opts(4, 1)).unwrap();
    assert_eq!(r.headline.kind, "discrepancy", "{}", r.headline.text);
    let l0 = r.layer_verdicts.iter().find(|v| v.layer == 0).unwrap();
    assert_eq!(l0.verdict, "discrepancy", "{l0:?}");
    assert_eq!(r.layer_local.as_ref().unwrap().first_tap.as_deref(), Some("attn_norm-0"));
    // With provenance: the trace says it is x86_64-avx2, which does not reproduce it.
    let t2 = dir.path().join("eps-prov.safetensors");
    trace_on(&eps, "x86_64-avx2", &t2, true);
    let r = delta(&m, &Source::Trace(t2), &lane("aarch64-neon"), &opts(4, 1)).unwrap();
    assert_eq!(r.headline.kind, "not-lane", "{}", r.headline.text);
    assert!(r.headline.text.contains("from step 0 tap attn_norm-0"), "{}", r.headline.text);
}

#[test]
fn a_kernel_level_fault_heads_the_report_as_a_discrepancy() {
    let m = model();
    let r = delta(&m, &planted(), &lane("ref"), &opts(4, 1)).unwrap();
    assert_eq!(r.headline.kind, "discrepancy", "{}", r.headline.text);
    assert!(r.headline.text.contains("teacher-forced"), "{}", r.headline.text);
}

#[test]
fn verdicts_are_symmetric_and_do_not_depend_on_a_side_being_a_lane_or_its_trace() {
    let m = model();
    let dir = tempfile::tempdir().unwrap();
    let real = embedded::ensure_model(None).unwrap();
    for (x, y) in [
        ("x86_64-avx2", "aarch64-neon"),
        ("x86_64-avx2", "ref"),
        ("aarch64-neon", "aarch64-i8mm-repack"),
    ] {
        let xy = delta(&m, &lane(x), &lane(y), &opts(4, 3)).unwrap();
        let yx = delta(&m, &lane(y), &lane(x), &opts(4, 3)).unwrap();
        let tx = dir.path().join(format!("{x}.safetensors"));
        trace_on(&real, x, &tx, true);
        let ty = delta(&m, &Source::Trace(tx.clone()), &lane(y), &opts(4, 3)).unwrap();
        let yt = delta(&m, &lane(y), &Source::Trace(tx), &opts(4, 3)).unwrap();
        let kinds: Vec<&str> =
            [&xy, &yx, &ty, &yt].iter().map(|r| r.headline.kind.as_str()).collect();
        assert!(kinds.iter().all(|k| *k == kinds[0]), "{x} {y}: {kinds:?}");
        let layers = |r: &tiercheck_analysis::DeltaReport| -> Vec<String> {
            r.layer_verdicts.iter().map(|v| v.verdict.clone()).collect()
        };
        assert_eq!(layers(&xy), layers(&yx), "{x} {y}");
        assert_eq!(layers(&xy), layers(&ty), "{x} {y}: lane vs its trace");
        assert_eq!(layers(&xy), layers(&yt), "{x} {y}: lane vs its trace");
        // Two proven lanes are never a discrepancy.
        assert!(
            !["discrepancy", "not-lane", "not-near-tie"].contains(&kinds[0]),
            "{x} {y}: {}",
            xy.headline.text
        );
    }
}

/// `path` with `edit` applied to one tap (every step where `step` is `None`).
fn edit_trace(
    path: &std::path::Path,
    step: Option<usize>,
    tap: &str,
    edit: impl Fn(&mut Vec<f32>),
) {
    let mut t = tiercheck_model::sequence::read_trace(path).unwrap();
    let mut n = 0;
    for ((s, name), x) in t.taps.iter_mut() {
        if name == tap && step.is_none_or(|w| w == *s) {
            edit(&mut x.data);
            n += 1;
        }
    }
    assert!(n > 0, "no {tap} in {}", path.display());
    tiercheck_model::import::write(path, &t).unwrap();
}

#[test]
fn attention_and_layout_faults_in_a_dump_are_discrepancies_at_their_tap() {
    let m = model();
    let dir = tempfile::tempdir().unwrap();
    let real = embedded::ensure_model(None).unwrap();
    // Attention: one step's attention output of layer 3 off by 1% (as a stale K row
    // would make it), the rest of the dump as the tier computed it.
    let att = dir.path().join("attention.safetensors");
    trace_on(&real, "x86_64-avx2", &att, false);
    edit_trace(&att, Some(2), "kqv_out-3", |d| d.iter_mut().for_each(|v| *v *= 1.01));
    let r = delta(&m, &Source::Trace(att.clone()), &lane("x86_64-avx2"), &opts(4, 3)).unwrap();
    assert_eq!(r.headline.kind, "discrepancy", "{}", r.headline.text);
    let ll = r.layer_local.as_ref().unwrap();
    assert_eq!((ll.first_step, ll.first_tap.as_deref()), (Some(2), Some("kqv_out-3")));
    let bad: Vec<usize> =
        r.layer_verdicts.iter().filter(|v| v.verdict == "discrepancy").map(|v| v.layer).collect();
    assert_eq!(bad, vec![3], "{:?}", r.layer_verdicts);
    // Layout: two output columns of a matmul swapped at every step (a repack interleave
    // read one column off), layer 1's Q projection.
    let lay = dir.path().join("layout.safetensors");
    trace_on(&real, "x86_64-avx2", &lay, false);
    edit_trace(&lay, None, "Qcur-1", |d| d.swap(0, 1));
    let r = delta(&m, &Source::Trace(lay.clone()), &lane("x86_64-avx2"), &opts(4, 3)).unwrap();
    assert_eq!(r.headline.kind, "discrepancy", "{}", r.headline.text);
    let ll = r.layer_local.as_ref().unwrap();
    assert_eq!((ll.first_step, ll.first_tap.as_deref()), (Some(0), Some("Qcur-1")));
    // identify: no lane reproduces Qcur-1, whose input attn_norm-1 every CPU lane does.
    let o = tiercheck_analysis::identify::IdentifyOptions {
        lanes: None,
        imp: Impl::Portable,
        residual: Residual::F32,
        n_ctx: 512,
        floor_seeds: 0,
        dump: Default::default(),
        threads: 1,
        state: None,
    };
    let id = tiercheck_analysis::identify::identify(&m, &lay, &o).unwrap();
    let u = id.first_unexplained.expect("unexplained");
    assert_eq!(
        (u.step, u.tap.as_str(), u.kind.as_str()),
        (0, "Qcur-1", "kernel"),
        "{}",
        id.verdict
    );
    assert_eq!(id.best_lane, "x86_64-avx2");
    assert_eq!(id.best_candidate, "x86_64-avx2 (kv=f32 fa=off)");
    assert_eq!((id.best_kv.as_str(), id.best_fa.as_str()), ("f32", "off"));
}

/// `x86_64-avx2`'s twin with a fault planted in its decoder (a stale K row, a swapped
/// expert). Every kernel is the twin's own.
struct Avx2Fault(tiercheck_core::lane::PlantedFault);

fn avx2_twin() -> &'static dyn Kernels {
    lanes::find("x86_64-avx2").unwrap().portable
}

impl Kernels for Avx2Fault {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        avx2_twin().act_rule(wtype)
    }
    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        avx2_twin().quantize_act(wtype, x)
    }
    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        avx2_twin().dequantize(ty, bytes, out)
    }
    fn prepare<'a>(
        &self,
        w: tiercheck_core::WeightMatrix<'a>,
        target: tiercheck_core::repack::Target,
    ) -> Result<tiercheck_core::repack::Prepared<'a>, KernelError> {
        avx2_twin().prepare(w, target)
    }
    fn matmul_prepared(
        &self,
        w: &tiercheck_core::repack::Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        avx2_twin().matmul_prepared(w, x, m)
    }
    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        avx2_twin().vec_dot(wtype, w_row, act)
    }
    fn matmul(
        &self,
        w: &tiercheck_core::WeightMatrix<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        avx2_twin().matmul(w, x, m)
    }
    fn matmul_quantized(
        &self,
        w: &tiercheck_core::WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        avx2_twin().matmul_quantized(w, act, m)
    }
    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        avx2_twin().plain_path(wtype, m)
    }
    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        avx2_twin().plain_split(wtype, n, m)
    }
    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        avx2_twin().id_takes_plain_gemm(wtype, m)
    }
    fn planted_fault(&self) -> Option<tiercheck_core::lane::PlantedFault> {
        Some(self.0)
    }
}

/// Layer 3 never writes position 2's (or 6's) K row to its cache.
static STALE_K_PROMPT: Avx2Fault = Avx2Fault(PlantedFault::StaleK { layer: 3, pos: 2 });
static STALE_K_DECODE: Avx2Fault = Avx2Fault(PlantedFault::StaleK { layer: 3, pos: 6 });

fn stale_k_lane(k: &'static Avx2Fault, name: &'static str) -> Source {
    let avx2 = lanes::find("x86_64-avx2").unwrap();
    let lane: &'static Lane = Box::leak(Box::new(Lane {
        name,
        arch: tiercheck_core::lane::Arch::Portable,
        status: tiercheck_core::lane::Status::Synthetic { checked: "a negative control" },
        summary: "x86_64-avx2 reading a stale K row in layer 3 (negative control)",
        recipe: avx2.recipe,
        portable: k,
    }));
    Source::Lane(Chosen { kernels: k, ..Chosen::portable(lane) })
}

#[test]
fn a_lane_reading_a_stale_k_row_is_a_discrepancy_at_its_layer_and_in_the_headline() {
    let m = model();
    // In the prompt batch (position 2 of 4) and at a later greedy step (position 6:
    // prompt mode runs positions 0..4 as step 0, then one position per step).
    for (k, name, step) in
        [(&STALE_K_PROMPT, "stale-k-at-2", 0usize), (&STALE_K_DECODE, "stale-k-at-6", 3usize)]
    {
        let bad = stale_k_lane(k, name);
        for (a, b) in [(&bad, &lane("x86_64-avx2")), (&lane("x86_64-avx2"), &bad)] {
            let r = delta(&m, a, b, &opts(8, 3)).unwrap();
            let ll = r.layer_local.as_ref().unwrap();
            assert_eq!(
                (ll.first_step, ll.first_tap.as_deref()),
                (Some(step), Some("kqv_out-3")),
                "{name}"
            );
            let bad_layers: Vec<usize> = r
                .layer_verdicts
                .iter()
                .filter(|v| v.verdict == "discrepancy")
                .map(|v| v.layer)
                .collect();
            assert_eq!(bad_layers, vec![3], "{name}: {:?}", r.layer_verdicts);
            // The headline is the worst of its parts, with the teacher-forced size.
            assert_eq!(r.headline.kind, "discrepancy", "{name}: {}", r.headline.text);
            assert!(r.headline.text.contains("teacher-forced: mean KLD"), "{}", r.headline.text);
            assert!(!r.headline.text.contains("explained"), "{}", r.headline.text);
        }
    }
}

/// A report from a cache that other comparisons filled (runs of the same lanes on the
/// same and on other sequences, both directions) equals one that computed everything.
#[test]
fn cached_and_fresh_reports_are_equal() {
    let m = model();
    let shared = Cache::new();
    // x86 against aarch64 agree on these 6 tokens; x86 against ref part at a near-tie
    // after 6 (`legitimate_tiers_...`), so teacher forcing replays tokens a lane did not
    // choose itself.
    let cases =
        [("x86_64-avx2", "aarch64-neon", opts(6, 1), 0), ("x86_64-avx2", "ref", opts(10, 1), 1)];
    for (x, y, o, new) in &cases {
        let (x, y) = (lane(x), lane(y));
        let warm = delta_cached(&m, &y, &x, o, &shared).unwrap();
        let cached = delta_cached(&m, &x, &y, o, &shared).unwrap();
        let fresh = delta_cached(&m, &x, &y, o, &Cache::disabled()).unwrap();
        let plain = delta(&m, &x, &y, o).unwrap();
        assert_eq!(cached.without_costs(), fresh.without_costs());
        assert_eq!(plain.without_costs(), fresh.without_costs());
        assert_ne!(warm.without_costs(), fresh.without_costs(), "the sides are swapped");
        let reused =
            |r: &tiercheck_analysis::DeltaReport| r.costs.iter().map(|c| c.reused).sum::<usize>();
        assert_eq!(reused(&fresh), 0, "{:?}", fresh.costs);
        // Everything but the comparisons themselves came from the first direction's
        // runs: the two free runs, both layer-local replays, the floor; where the
        // tokens part, A's replay of B's tokens is new.
        let computed: usize = cached.costs.iter().map(|c| c.computed).sum();
        assert_eq!(computed, *new, "{:?}", cached.costs);
        assert!(reused(&cached) >= 5, "{:?}", cached.costs);
    }
    let parted = delta(&m, &lane("x86_64-avx2"), &lane("ref"), &cases[1].2).unwrap();
    assert_eq!(parted.tokens_agree, 6, "{:?} / {:?}", parted.tokens_a, parted.tokens_b);
}

/// The progress hook hears every result a delta computes, up to the total a display
/// shows; an attribution reports each of its runs.
#[test]
fn progress_hooks_count_what_the_analyses_compute() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let m = model();
    let o = opts(4, 2);
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let cache = Cache::new().with_progress(Arc::new(move |n| {
        s.fetch_max(n, Ordering::Relaxed);
    }));
    let r = delta_cached(&m, &lane("x86_64-avx2"), &lane("aarch64-neon"), &o, &cache).unwrap();
    let computed: usize = r.costs.iter().map(|c| c.computed).sum();
    assert_eq!(seen.load(Ordering::Relaxed), computed);
    assert!(computed <= tiercheck_analysis::delta_results(&o), "{:?}", r.costs);
    let runs = Arc::new(AtomicUsize::new(0));
    let n = runs.clone();
    let hook: tiercheck_analysis::OnResult = Arc::new(move |k| {
        assert_eq!(n.fetch_add(1, Ordering::Relaxed) + 1, k);
    });
    let (a, b) = (lanes::find("x86_64-avx2").unwrap(), lanes::find("aarch64-neon").unwrap());
    for layers in [None, Some(Vec::new()), Some(vec![2])] {
        runs.store(0, Ordering::Relaxed);
        tiercheck_analysis::attribute::attribute_observed(
            &m,
            a,
            b,
            &attr_opts(4, layers),
            Some(&hook),
        )
        .unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), tiercheck_analysis::attribute::ATTRIBUTE_RUNS);
    }
}

/// Steps per prompt in the all-pairs trial (the prompts file's 48 would make it 12 times
/// as long; the verdict rules are the same at every step).
const PAIR_STEPS: usize = 4;

#[test]
fn every_pair_of_proven_lanes_both_ways_on_every_prompt_is_symmetric_and_never_a_discrepancy() {
    use tiercheck_core::lane::Level;
    let (m, prompts, _) = tiercheck_golden::model::inputs().unwrap();
    // The lanes proven bitwise against their tier's llama.cpp in prompt mode.
    let proven: Vec<&'static Lane> = lanes::all()
        .iter()
        .copied()
        .filter(|l| l.status.proofs().iter().any(|p| p.level == Level::DecoderPrompt))
        .collect();
    assert!(proven.len() >= 11, "{:?}", proven.iter().map(|l| l.name).collect::<Vec<_>>());
    let mut jobs = Vec::new();
    for (i, x) in proven.iter().enumerate() {
        for y in &proven[i + 1..] {
            for p in &prompts {
                jobs.push((x.name, y.name, p.name.clone(), p.ids.clone()));
            }
        }
    }
    // Each lane's free runs and floors are computed once for all its pairs; a pair's two
    // directions share their layer-local replays.
    let cache = Cache::new();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((x, y, name, ids)) = jobs.get(i) else { break };
                let o = DeltaOptions { ids: ids.clone(), ..opts(PAIR_STEPS, 3) };
                // Native where this host runs the lane (bitwise its twin: the golden
                // and oracle suites prove it), else the twin.
                let auto = |n: &str| {
                    Source::Lane(lanes::choose(lanes::find(n).unwrap(), Impl::Auto).unwrap())
                };
                let pair = cache.scoped();
                let xy = delta_cached(&m, &auto(x), &auto(y), &o, &pair).unwrap();
                let yx = delta_cached(&m, &auto(y), &auto(x), &o, &pair).unwrap();
                let verdicts = |r: &tiercheck_analysis::DeltaReport| -> Vec<String> {
                    r.layer_verdicts.iter().map(|v| v.verdict.clone()).collect()
                };
                let mut bad = Vec::new();
                if xy.headline.kind != yx.headline.kind {
                    bad.push(format!(
                        "headline {} one way, {} the other",
                        xy.headline.kind, yx.headline.kind
                    ));
                }
                if verdicts(&xy) != verdicts(&yx) {
                    bad.push(format!(
                        "layers {:?} one way, {:?} the other",
                        verdicts(&xy),
                        verdicts(&yx)
                    ));
                }
                for r in [&xy, &yx] {
                    if ["discrepancy", "not-lane", "not-near-tie"]
                        .contains(&r.headline.kind.as_str())
                    {
                        bad.push(format!("{} vs {}: {}", r.a, r.b, r.headline.text));
                    }
                }
                if !bad.is_empty() {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{x} / {y} on {name}: {}", bad.join("; ")));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} pairs x prompts:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}

/// The qwen2, llama and qwen3moe models (`golden/model/{qwen2,llama,qwen3moe}.toml`:
/// Q/K/V biases without Q/K norm; normal-mode RoPE with frequency factors; routed
/// experts): `delta` finds the planted quantizer bug at the first quantized matmul and
/// `attribute` names the activation quantizer, as on the qwen3 model; a lane against
/// itself is identical.
#[test]
fn delta_and_attribute_work_on_the_qwen2_llama_and_qwen3moe_models() {
    for (arch, recipe) in [
        ("qwen2", embedded::Recipe::qwen2_path()),
        ("llama", embedded::Recipe::llama_path()),
        ("qwen3moe", embedded::Recipe::qwen3moe_path()),
    ] {
        let opts_b = embedded::BuildOptions { recipe: Some(recipe), ..Default::default() };
        let m = Model::open(&embedded::build(&opts_b).unwrap().path).unwrap();
        assert_eq!(m.hp.arch, arch);
        let same = delta(&m, &lane("aarch64-neon"), &lane("aarch64-neon"), &opts(3, 1)).unwrap();
        assert_eq!(same.headline.kind, "identical", "{arch}");
        let r = delta(&m, &planted(), &lane("ref"), &opts(3, 1)).unwrap();
        assert_eq!(
            (r.free.first_step, r.free.first_tap.as_deref()),
            (Some(0), Some("Qcur-0")),
            "{arch}"
        );
        let a = attribute_planted(&m, 3);
        assert!(a.closes, "{arch}");
        assert_eq!(a.responsible, vec![Component::Act], "{arch}");
    }
}

/// On the qwen3moe model, layer 2 routes the token at position 1 (or 5) to the best
/// expert its router did not select in place of the last one it did.
static SWAPPED_IN_PROMPT: Avx2Fault = Avx2Fault(PlantedFault::SwapExpert { layer: 2, pos: 1 });
static SWAPPED_IN_DECODE: Avx2Fault = Avx2Fault(PlantedFault::SwapExpert { layer: 2, pos: 5 });

#[test]
fn a_planted_expert_swap_is_a_routing_change_at_its_layer_and_step() {
    let path = embedded::build(&embedded::BuildOptions {
        recipe: Some(embedded::Recipe::qwen3moe_path()),
        ..Default::default()
    })
    .unwrap()
    .path;
    let m = Model::open(&path).unwrap();
    let avx2 = lanes::find("x86_64-avx2").unwrap();
    // In the prompt batch (position 1 of 4, step 0) and at a greedy step (position 5:
    // step 2).
    for (k, name, step, pos) in [
        (&SWAPPED_IN_PROMPT, "swapped-expert-at-1", 0usize, 1usize),
        (&SWAPPED_IN_DECODE, "swapped-expert-at-5", 2, 5),
    ] {
        let planted: &'static Lane = Box::leak(Box::new(Lane {
            name,
            arch: tiercheck_core::lane::Arch::Portable,
            status: tiercheck_core::lane::Status::Synthetic { checked: "a negative control" },
            summary: "x86_64-avx2 routing one token to a wrong expert (negative control)",
            recipe: avx2.recipe,
            portable: k,
        }));
        let bad = Source::Lane(Chosen { kernels: k, ..Chosen::portable(planted) });
        let r = delta(&m, &bad, &lane("x86_64-avx2"), &opts(4, 0)).unwrap();
        let c = r.routing.as_ref().unwrap_or_else(|| panic!("{name}: no routing change"));
        assert_eq!((c.step, c.layer, c.position), (step, 2, pos), "{name}: {c:?}");
        assert!(!c.near_tie && c.gap_a < 0.0, "{name}: {c:?}");
        assert_ne!(c.experts_a, c.experts_b);
        let text = tiercheck_analysis::routing::describe(c);
        assert!(
            text.starts_with(&format!("first routing change at step {step}, layer 2"))
                && text.contains("a wrong routing"),
            "{text}"
        );
        // Before the fault every tap agreed; the first differing one is the layer's topk.
        assert_eq!(r.free.first_tap.as_deref(), Some("ffn_moe_topk-2"), "{name}");
    }
    // Two correct lanes: no routing change, and the report says so.
    let r = delta(&m, &lane("x86_64-avx2"), &lane("x86_64-avx2"), &opts(4, 0)).unwrap();
    assert!(r.routing.is_none());
    assert!(r.free.rows.iter().any(|t| t.name == "ffn_moe_topk-3"));
}
