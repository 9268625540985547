//! The golden suite: one trial per (kernel, shape, case, lane) and check, except where
//! a check would compare a value with itself.
//!
//! Trial names (sorted):
//! - `<kernel>/<op>/<shape>/<case>/<lane>`: the lane's portable implementation is
//!   bitwise equal to the lane's golden;
//! - `<...>/<lane>/native`: the lane's native kernel is bitwise equal to its portable
//!   twin (and so to the golden); ignored at run time with the reason where this CPU
//!   cannot run it, a failure instead when `TIERCHECK_REQUIRE_LANES` names the lane;
//!   for the elementwise cases (`elem/<op>/k=<k>/<case>`), the native loops of the lane's
//!   flavour against its portable form (no such trial for the x64 flavour, which has no
//!   native form);
//! - `<...>/<lane>/scalar` (dot products): the lane's scalar twin, with the accelerated
//!   forms of `tiercheck_core::accel` off, is bitwise equal to the golden as well;
//!   ignored with the reason on a host without accelerated forms;
//! - `<...>/<lane>/tolerance`: the lane is within its error bound of the exact answer
//!   and within NMSE of `ref` (`tiercheck_golden::check`); for quantize and dequantize
//!   cases only where the lane's goldens differ from `ref`'s (never for `ref` itself);
//! - `<kernel>/<op>/<lane>/equals-ref` (quantize and dequantize): the lane's goldens of
//!   every case of that kernel and op are `ref`'s, digest for digest; one trial checks
//!   the lane's outputs of all of them against its goldens (per-case trials and a
//!   tolerance against `ref` would repeat `ref`'s own);
//! - `<kernel>/<op>/<lane>/native-shares-twin-code` (quantize and dequantize): the
//!   native implementation runs its twin's code for these cases (see
//!   [`NATIVE_QUANTIZERS`]); one trial still compares native and twin on all of them;
//! - `inputs-reproducible`, `verify`, `native-tables`, `require-lanes`: the suite's own.
//!
//! Trial names start with `golden::` (the suites of the `trials` binary). `TIERCHECK_BLESS=1
//! cargo test -p tiercheck --test trials -- golden::` refreshes every lane's goldens first
//! (refused under `CI`), then runs the suite.

use std::collections::HashSet;
use std::sync::Arc;

use libtest_mimic::{Completion, Trial};
use tiercheck_core::quant::ActRule;
use tiercheck_core::Lane;
use tiercheck_golden::bless::{allowed, bless_lane};
use tiercheck_golden::cases::generate;
use tiercheck_golden::cases::{Case, Op};
use tiercheck_golden::check::{check_golden, check_tolerance, check_twin};
use tiercheck_golden::manifest::sha256_hex;
use tiercheck_golden::run::{applicable, run_case, run_elem};
use tiercheck_golden::{catalogue, verify, GoldenDir, GoldenError, Inputs, LaneGolden};
use tiercheck_lanes as lanes;
use tiercheck_testkit::suites::{trial_name, Selection};

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "golden";

/// With `TIERCHECK_BLESS=1`: refresh every lane's goldens (before any trial is built;
/// refused under `CI`). Without it: nothing.
pub fn bless_if_asked() -> Result<(), String> {
    if !std::env::var("TIERCHECK_BLESS").is_ok_and(|v| v == "1") {
        return Ok(());
    }
    if !allowed() {
        return Err(
            "TIERCHECK_BLESS=1 is refused under CI (the CI environment variable is set)".into()
        );
    }
    let dir = GoldenDir::from_env();
    let inputs = dir.load_inputs().map_err(|e| format!("cannot bless: {e}"))?;
    for lane in lanes::all() {
        eprint!("{}", bless_lane(&dir, lane, None, &inputs).map_err(|e| e.to_string())?);
    }
    Ok(())
}

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    let dir = GoldenDir::from_env();
    let mut trials = vec![
        inputs_reproducible(dir.clone()),
        Trial::test(trial_name(SUITE, "verify"), {
            let dir = dir.clone();
            move || {
                let r = verify(&dir);
                if r.problems.is_empty() {
                    Ok(())
                } else {
                    Err(r.to_string().into())
                }
            }
        }),
    ];
    // The native tables compiled into this build (this CPU's crate and the GPU lanes')
    // name registered lanes, one row each: under qemu-aarch64 this checks the aarch64
    // table, on x86-64 hosts the x86 one.
    trials.push(Trial::test(trial_name(SUITE, "native-tables"), || {
        lanes::check_native_tables().map_err(Into::into)
    }));
    let required = required_lanes();
    trials.push(Trial::test(trial_name(SUITE, "require-lanes"), {
        let required = required.clone();
        move || {
            let unknown: Vec<&String> =
                required.iter().filter(|l| lanes::find(l).is_err()).collect();
            if unknown.is_empty() {
                Ok(())
            } else {
                Err(format!("TIERCHECK_REQUIRE_LANES names unknown lanes: {unknown:?}").into())
            }
        }
    }));
    let inputs: Arc<Result<Inputs, String>> =
        Arc::new(dir.load_inputs().map_err(|e| e.to_string()));
    let goldens: Vec<Arc<Result<LaneGolden, String>>> = lanes::all()
        .iter()
        .map(|lane| {
            Arc::new(dir.load_lane(lane.name).map_err(|e| match e {
                GoldenError::Corrupt { .. } => {
                    format!("{e} (a damaged golden, not a kernel failure)")
                }
                other => other.to_string(),
            }))
        })
        .collect();
    let ref_golden = lanes::all().iter().position(|l| l.name == "ref").map(|i| goldens[i].clone());
    let cases = catalogue();
    for (lane, golden) in lanes::all().iter().copied().zip(&goldens) {
        let t = Trials {
            lane,
            inputs: inputs.clone(),
            golden: golden.clone(),
            must_run: required.contains(lane.name),
        };
        let lane_cases: Vec<&Case> = cases.iter().filter(|c| applicable(lane, c)).collect();
        // Dot products: every case has its own trials.
        for case in lane_cases.iter().filter(|c| !is_codec(c)) {
            trials.push(t.golden(format!("{}/{}", case.name, lane.name), &[case]));
            let native = match case.op {
                // Elementwise cases: the native loops of the lane's flavour.
                Op::Elem(_) => {
                    lanes::has_native(lane) && lanes::flavour_has_native(lane.recipe.elem)
                }
                _ => lanes::has_native(lane),
            };
            if native {
                trials.push(t.native(format!("{}/{}/native", case.name, lane.name), &[case]));
            }
            if !matches!(case.op, Op::Elem(_)) {
                trials.push(t.scalar(format!("{}/{}/scalar", case.name, lane.name), case));
            }
            trials.push(t.tolerance(case));
        }
        // Quantize and dequantize, per (op, type).
        let mut groups: Vec<(String, Vec<&Case>)> = Vec::new();
        for case in lane_cases.iter().filter(|c| is_codec(c)) {
            let key = format!("{}/{}", case.op.ty().name(), case.op.name());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(case),
                None => groups.push((key, vec![case])),
            }
        }
        for (key, group) in groups {
            let same_as_ref = lane.name != "ref"
                && ref_golden.as_ref().is_some_and(|r| goldens_equal(golden, r, &group));
            if same_as_ref {
                trials.push(t.golden(format!("{key}/{}/equals-ref", lane.name), &group));
            } else {
                for case in &group {
                    trials.push(t.golden(format!("{}/{}", case.name, lane.name), &[case]));
                    if lane.name != "ref" {
                        trials.push(t.tolerance(case));
                    }
                }
            }
            if !lanes::has_native(lane) {
                continue;
            }
            if native_has_own_code(lane, group[0].op) {
                for case in &group {
                    let name = format!("{}/{}/native", case.name, lane.name);
                    trials.push(t.native(name, &[case]));
                }
            } else {
                let name = format!("{key}/{}/native-shares-twin-code", lane.name);
                trials.push(t.native(name, &group));
            }
        }
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    trials
}

/// The lanes whose native trials must run here: `TIERCHECK_REQUIRE_LANES`, read by
/// [`tiercheck_testkit::require::required_lanes`] (a comma list, or `auto`: the `require`
/// list of this target's table for the CPU model in `QEMU_CPU`).
fn required_lanes() -> HashSet<String> {
    tiercheck_testkit::require::required_lanes()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .collect()
}

/// Activation rules that a native implementation computes with code of its own: the
/// x86 lanes' AVX2 `quantize_row_q8_0` and the HIP device's `quantize_q8_1`. Every
/// other rule is quantized by the shared portable `ActRule::quantize` in the native
/// implementations too, and no native implementation has a dequantizer of its own
/// (each uses `Kernels::dequantize`'s default or its twin's), so their native trials
/// would compare the twin's code with itself: such cases share one trial per (type,
/// op, lane), `<kernel>/<op>/<lane>/native-shares-twin-code`, which still runs every
/// case (and so catches a native implementation that gains code of its own).
const NATIVE_QUANTIZERS: &[ActRule] = &[ActRule::Q8_0X86, ActRule::Q8_1HipMmvq];

/// Whether the native implementation of `lane` runs code of its own for `op` (a
/// quantize or dequantize op).
fn native_has_own_code(lane: &Lane, op: Op) -> bool {
    match op {
        Op::Quantize(fmt) => [lane.recipe.act_k, lane.recipe.act_legacy]
            .into_iter()
            .any(|r| r.format() == fmt && NATIVE_QUANTIZERS.contains(&r)),
        Op::Dequantize(_) => false,
        Op::VecDot(_) | Op::Gemv(_) | Op::Gemm(_) | Op::Elem(_) => true,
    }
}

/// Quantize and dequantize cases (the codecs), as opposed to dot products.
fn is_codec(case: &Case) -> bool {
    matches!(case.op, Op::Quantize(_) | Op::Dequantize(_))
}

/// Whether `lane`'s committed goldens of every case in `cases` are `ref`'s (same
/// digest): then the lane's outputs are checked against them in one trial
/// (`<kernel>/<op>/<lane>/equals-ref`), and no tolerance trial compares `ref` with
/// itself.
fn goldens_equal(
    lane: &Result<LaneGolden, String>,
    reference: &Result<LaneGolden, String>,
    cases: &[&Case],
) -> bool {
    let (Ok(lane), Ok(reference)) = (lane, reference) else { return false };
    cases.iter().all(|c| {
        match (lane.manifest.entries.get(&c.name), reference.manifest.entries.get(&c.name)) {
            (Some(a), Some(b)) => a.sha256 == b.sha256,
            _ => false,
        }
    })
}

/// The trials of one lane.
struct Trials {
    lane: &'static Lane,
    inputs: Arc<Result<Inputs, String>>,
    golden: Arc<Result<LaneGolden, String>>,
    must_run: bool,
}

impl Trials {
    /// `name` (`<case>/<lane>` for one case): the lane's portable outputs of `cases`
    /// are bitwise its goldens.
    fn golden(&self, name: String, cases: &[&Case]) -> Trial {
        let (lane, inputs, golden) = (self.lane, self.inputs.clone(), self.golden.clone());
        let cases: Vec<Case> = cases.iter().map(|&c| c.clone()).collect();
        Trial::test(trial_name(SUITE, name), move || {
            let inputs = inputs.as_ref().as_ref()?;
            let golden = golden.as_ref().as_ref()?;
            for case in &cases {
                let out = run_case(lane, lane.portable, case, inputs)?;
                check_golden(lane.name, case, &out, golden)?;
            }
            Ok(())
        })
    }

    /// `name` (`<case>/<lane>/native` for one case): the lane's native outputs of
    /// `cases` are bitwise its portable twin's; ignored at run time with the reason
    /// where this machine cannot run them, a failure instead when the lane is required.
    fn native(&self, name: String, cases: &[&Case]) -> Trial {
        let (lane, inputs, must_run) = (self.lane, self.inputs.clone(), self.must_run);
        let cases: Vec<Case> = cases.iter().map(|&c| c.clone()).collect();
        Trial::ignorable_test(trial_name(SUITE, name), move || {
            let elem = cases.iter().all(|c| matches!(c.op, Op::Elem(_)));
            let unavailable = if elem {
                lanes::native_elem_ops(lane).err()
            } else {
                lanes::native(lane).err().map(|e| e.to_string())
            };
            match unavailable {
                Some(why) if must_run => {
                    return Err(
                        format!("TIERCHECK_REQUIRE_LANES requires {}: {why}", lane.name).into()
                    )
                }
                Some(why) => return Ok(Completion::ignored_with(why)),
                None => {}
            }
            let inputs = inputs.as_ref().as_ref()?;
            for case in &cases {
                let n = if let Op::Elem(_) = case.op {
                    run_elem(lanes::native_elem_ops(lane)?, case, inputs)?
                } else {
                    run_case(lane, lanes::native(lane).map_err(|e| e.to_string())?, case, inputs)?
                };
                let p = run_case(lane, lane.portable, case, inputs)?;
                check_twin(lane.name, case, &n, &p)?;
            }
            Ok(Completion::Completed)
        })
    }

    /// `name` (`<case>/<lane>/scalar`): the lane's scalar twin (the readable
    /// specification, [`tiercheck_core::accel::with_scalar`]) is bitwise the lane's
    /// golden too, so accelerated twin, scalar twin and native agree. Ignored with the
    /// reason on a host without accelerated forms, where `<case>/<lane>` already ran the
    /// scalar twin.
    fn scalar(&self, name: String, case: &Case) -> Trial {
        let (lane, inputs, golden, case) =
            (self.lane, self.inputs.clone(), self.golden.clone(), case.clone());
        Trial::ignorable_test(trial_name(SUITE, name), move || {
            if tiercheck_core::accel::describe() == "scalar" {
                return Ok(Completion::ignored_with(
                    "this host has no accelerated twin forms (x86-64 AVX2+FMA, aarch64 NEON): the portable trial ran the scalar twin",
                ));
            }
            let inputs = inputs.as_ref().as_ref()?;
            let golden = golden.as_ref().as_ref()?;
            let out = tiercheck_core::accel::with_scalar(|| {
                run_case(lane, lane.portable, &case, inputs)
            })?;
            check_golden(lane.name, &case, &out, golden)?;
            Ok(Completion::Completed)
        })
    }

    /// `<case>/<lane>/tolerance`: the lane is within its error bound of the exact
    /// answer and of `ref` (`tiercheck_golden::check`).
    fn tolerance(&self, case: &Case) -> Trial {
        let (lane, inputs, case) = (self.lane, self.inputs.clone(), case.clone());
        Trial::test(
            trial_name(SUITE, format!("{}/{}/tolerance", case.name, lane.name)),
            move || {
                let inputs = inputs.as_ref().as_ref()?;
                let out = run_case(lane, lane.portable, &case, inputs)?;
                let want = tiercheck_golden::run::reference_output(&case, inputs)?;
                check_tolerance(lane, lane.portable, &case, &out, want.as_ref(), inputs)?;
                Ok(())
            },
        )
    }
}

/// Regenerating the inputs in memory reproduces the committed file byte for byte.
fn inputs_reproducible(dir: GoldenDir) -> Trial {
    Trial::test(trial_name(SUITE, "inputs-reproducible"), move || {
        let (main, more) = GoldenDir::split_inputs(&generate());
        for (inputs, file) in [(main, "kernels.safetensors"), (more, "kernels-more.safetensors")] {
            let bytes = GoldenDir::inputs_bytes(&inputs);
            let path = dir.root().join("inputs").join(file);
            let committed = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if bytes != committed {
                return Err(format!(
                    "regenerated inputs (sha256 {}) differ from {} (sha256 {}); if the generator \
                 changed on purpose, run `cargo run -p tiercheck -- golden gen-inputs` and then \
                 `cargo run -p tiercheck -- bless`",
                    sha256_hex(&bytes),
                    path.display(),
                    sha256_hex(&committed)
                )
                .into());
            }
        }
        Ok(())
    })
}
