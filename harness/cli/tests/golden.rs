//! The golden suite: one trial per (kernel, shape, case, lane).
//!
//! Trial names (sorted):
//! - `<kernel>/<op>/<shape>/<case>/<lane>`: the lane's portable implementation is
//!   bitwise equal to the lane's golden;
//! - `<...>/<lane>/native`: the lane's native kernel is bitwise equal to its portable
//!   twin (and so to the golden); ignored at run time with the reason where this CPU
//!   cannot run it, a failure instead when `TIERCHECK_REQUIRE_LANES` names the lane;
//! - `<...>/<lane>/tolerance`: the lane is within its error bound of the exact answer
//!   and within NMSE of `ref` (`tiercheck_golden::check`);
//! - `golden/inputs-reproducible`, `golden/verify`, `golden/require-lanes`.
//!
//! `TIERCHECK_BLESS=1 cargo test --test golden` refreshes every lane's goldens first
//! (refused under `CI`), then runs the suite.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Completion, Trial};
use tiercheck_golden::bless::{allowed, bless_lane};
use tiercheck_golden::cases::generate;
use tiercheck_golden::check::{check_golden, check_tolerance, check_twin};
use tiercheck_golden::manifest::sha256_hex;
use tiercheck_golden::run::{applicable, run_case};
use tiercheck_golden::{catalogue, verify, GoldenDir, GoldenError, Inputs, LaneGolden};
use tiercheck_lanes as lanes;

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let dir = GoldenDir::from_env();
    if std::env::var("TIERCHECK_BLESS").is_ok_and(|v| v == "1") {
        if !allowed() {
            eprintln!("TIERCHECK_BLESS=1 is refused under CI (the CI environment variable is set)");
            return ExitCode::FAILURE;
        }
        let inputs = match dir.load_inputs() {
            Ok(i) => i,
            Err(e) => {
                eprintln!("cannot bless: {e}");
                return ExitCode::FAILURE;
            }
        };
        for lane in lanes::all() {
            match bless_lane(&dir, lane, None, &inputs) {
                Ok(summary) => eprint!("{summary}"),
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let mut trials = vec![
        inputs_reproducible(dir.clone()),
        Trial::test("golden/verify", {
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
    let required = required_lanes();
    trials.push(Trial::test("golden/require-lanes", {
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
    for lane in lanes::all() {
        let golden: Arc<Result<LaneGolden, String>> =
            Arc::new(dir.load_lane(lane.name).map_err(|e| match e {
                GoldenError::Corrupt { .. } => {
                    format!("{e} (a damaged golden, not a kernel failure)")
                }
                other => other.to_string(),
            }));
        for case in catalogue().into_iter().filter(|c| applicable(lane, c)) {
            let case = Arc::new(case);
            trials.push(Trial::test(format!("{}/{}", case.name, lane.name), {
                let (inputs, golden, case) = (inputs.clone(), golden.clone(), case.clone());
                move || {
                    let inputs = inputs.as_ref().as_ref()?;
                    let golden = golden.as_ref().as_ref()?;
                    let out = run_case(lane, lane.portable, &case, inputs)?;
                    check_golden(lane.name, &case, &out, golden)?;
                    Ok(())
                }
            }));
            if lanes::has_native(lane) {
                let must_run = required.contains(lane.name);
                trials.push(Trial::ignorable_test(
                    format!("{}/{}/native", case.name, lane.name),
                    {
                        let (inputs, case) = (inputs.clone(), case.clone());
                        move || {
                            let native = match lanes::native(lane) {
                                Ok(k) => k,
                                Err(why) if must_run => {
                                    return Err(format!(
                                        "TIERCHECK_REQUIRE_LANES requires {}: {why}",
                                        lane.name
                                    )
                                    .into())
                                }
                                Err(why) => return Ok(Completion::ignored_with(why)),
                            };
                            let inputs = inputs.as_ref().as_ref()?;
                            let n = run_case(lane, native, &case, inputs)?;
                            let p = run_case(lane, lane.portable, &case, inputs)?;
                            check_twin(lane.name, &case, &n, &p)?;
                            Ok(Completion::Completed)
                        }
                    },
                ));
            }
            trials.push(Trial::test(format!("{}/{}/tolerance", case.name, lane.name), {
                let (inputs, case) = (inputs.clone(), case.clone());
                move || {
                    let inputs = inputs.as_ref().as_ref()?;
                    let out = run_case(lane, lane.portable, &case, inputs)?;
                    let want = tiercheck_golden::run::reference_output(&case, inputs)?;
                    check_tolerance(lane, lane.portable, &case, &out, &want, inputs)?;
                    Ok(())
                }
            }));
        }
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    libtest_mimic::run(&args, trials).exit_code()
}

/// `TIERCHECK_REQUIRE_LANES=a,b`: lanes whose native trials must run here;
/// `TIERCHECK_REQUIRE_LANES=auto`: the `require` list of this target's table
/// (`targets/<triple>.toml`) for the CPU model in `QEMU_CPU` (none: the host model).
fn required_lanes() -> HashSet<String> {
    let spec = std::env::var("TIERCHECK_REQUIRE_LANES").unwrap_or_default();
    if spec == "auto" {
        let cpu = std::env::var("QEMU_CPU").ok().filter(|s| !s.is_empty());
        return tiercheck_lanes::targets::required_lanes_for(
            tiercheck_lanes::targets::TRIPLE,
            cpu.as_deref(),
        )
        .unwrap_or_else(|| {
            panic!(
                "TIERCHECK_REQUIRE_LANES=auto: no model for QEMU_CPU={cpu:?} in targets/{}.toml",
                tiercheck_lanes::targets::TRIPLE
            )
        })
        .into_iter()
        .collect();
    }
    spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// Regenerating the inputs in memory reproduces the committed file byte for byte.
fn inputs_reproducible(dir: GoldenDir) -> Trial {
    Trial::test("golden/inputs-reproducible", move || {
        let bytes = GoldenDir::inputs_bytes(&generate());
        let path = dir.root().join("inputs").join("kernels.safetensors");
        let committed = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes == committed {
            Ok(())
        } else {
            Err(format!(
                "regenerated inputs (sha256 {}) differ from {} (sha256 {}); if the generator \
                 changed on purpose, run `cargo run -p tiercheck -- golden gen-inputs` and then \
                 `cargo run -p tiercheck -- bless`",
                sha256_hex(&bytes),
                path.display(),
                sha256_hex(&committed)
            )
            .into())
        }
    })
}
