//! The lanes' status claims point at real proofs: every suite a [`Proof`] names is a
//! suite of this package's `trials` test binary that checks its claims
//! (`tiercheck_testkit::claims::claim_trials` over trials made by `claims::tracked`: a
//! claim fails whose trials are missing, filtered out or failed in the same run), a
//! proven lane names at least one proof with trials, and the labels that no device has
//! checked hold (`hip-*` and `cuda-sm90` modelled; `x86_64-avx512` proven against ggml's
//! zen4 build).
//!
//! [`Proof`]: tiercheck_core::lane::Proof

use std::path::Path;

use tiercheck_core::lane::Status;
use tiercheck_core::LANES;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_named_proof_suite_exists_and_checks_its_claims() {
    let dir = manifest_dir().join("tests").join("trials");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for lane in LANES {
        for proof in lane.status.proofs() {
            assert!(
                main.contains(&format!("({0}::SUITE, {0}::trials)", proof.suite)),
                "{}: proof suite `{}` is not a suite of the trials binary",
                lane.name,
                proof.suite
            );
            let src = dir.join(format!("{}.rs", proof.suite));
            let text = std::fs::read_to_string(&src)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", lane.name, src.display()));
            assert!(
                text.contains(&format!("pub const SUITE: &str = \"{}\";", proof.suite))
                    && text.contains("claim_trials(SUITE, selection, &trials)")
                    && text.contains("claims::tracked("),
                "{}: {} does not check its claims with claim_trials(SUITE, ..) over tracked trials",
                lane.name,
                src.display(),
            );
            assert!(!proof.trials.is_empty(), "{}: a proof naming no trials", lane.name);
            assert!(!proof.against.is_empty(), "{}: a proof against nothing", lane.name);
        }
    }
}

#[test]
fn proven_lanes_name_proofs_and_labels_are_truthful() {
    for lane in LANES {
        if let Status::Proven(p) = lane.status {
            assert!(!p.is_empty(), "{} is `proven` with no proof", lane.name);
        }
        // No GPU has run the GPU lanes: they are models, checked against code objects.
        if lane.name.starts_with("hip-") || lane.name.starts_with("cuda-") {
            assert!(matches!(lane.status, Status::Modelled { .. }), "{}", lane.name);
        }
    }
    let avx512 = tiercheck_core::lane("x86_64-avx512").unwrap();
    assert!(matches!(avx512.status, Status::Proven(_)));
    // Every CPU lane is proven up to runs as llama-cli makes them.
    for lane in LANES.iter().filter(|l| l.arch.cpu_target_arch().is_some()) {
        assert_eq!(
            lane.status.best_level(),
            Some(tiercheck_core::lane::Level::DecoderCli),
            "{}",
            lane.name
        );
    }
}

#[test]
fn tiercheck_lanes_prints_every_lanes_status() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .arg("lanes")
        .output()
        .expect("run tiercheck lanes");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for lane in LANES {
        let at = text
            .lines()
            .position(|l| l.split_whitespace().next() == Some(lane.name))
            .unwrap_or_else(|| panic!("`tiercheck lanes` does not list {}:\n{text}", lane.name));
        let status = text.lines().nth(at + 1).unwrap_or_default();
        let want = format!("status: {}", lane.status);
        assert!(status.contains(&want), "{}: {status:?} lacks {want:?}", lane.name);
        assert!(status.contains(lane.status.kind()), "{}", lane.name);
    }
}

#[test]
fn status_tags_name_the_unqualified_level() {
    let tag = |name: &str| tiercheck_core::lane(name).unwrap().status.tag();
    assert_eq!(tag("x86_64-avx2-repack"), "proven:cli");
    assert_eq!(tag("x86_64-avx2"), "proven:cli");
    assert_eq!(tag("aarch64-neon"), "proven:cli");
    assert_eq!(tag("aarch64-neon-repack"), "proven:cli");
    assert_eq!(tag("aarch64-i8mm-repack"), "proven:cli");
    assert_eq!(tag("x86_64-avx512"), "proven:cli");
    assert_eq!(tag("aarch64-i8mm"), "proven:cli");
    assert_eq!(tag("hip-wave32"), "modelled");
    assert_eq!(tag("hip-wave64"), "modelled");
    assert_eq!(tag("cuda-sm90"), "modelled");
    // A proof that holds only under a stated setting does not raise the plain level: the
    // tag names the unqualified one and says more is proven with `+`.
    use tiercheck_core::lane::{Level, Proof, Status};
    let proof = |level, only| Proof { level, against: "a build", only, suite: "t", trials: &[] };
    static QUALIFIED: std::sync::OnceLock<[Proof; 2]> = std::sync::OnceLock::new();
    let proofs = QUALIFIED.get_or_init(|| {
        [proof(Level::DecoderDecode, ""), proof(Level::DecoderPrompt, "with a switch off")]
    });
    assert_eq!(Status::Proven(proofs).tag(), "proven:decode+");
    assert_eq!(Status::Proven(&proofs[..1]).tag(), "proven:decode");
}

/// A claim holds only where its proving trials ran and passed in the same run: the claim
/// trials of `oracle_x86_lanes` (`x86_64-avx2` by `matmul-plain`, `x86_64-avx2-repack` by
/// `matmul-repack`) over stand-in proving trials pass when their trial passes, fail when
/// it fails or is skipped, and are ignored with its reason when it is ignored because the
/// host cannot run it (and fail where the lane is required: `TIERCHECK_REQUIRE_LANES`).
#[test]
fn claims_follow_the_outcomes_of_their_trials_in_the_same_run() {
    use libtest_mimic::{Completion, Trial};
    use tiercheck_testkit::claims::{claim_trials, tracked};
    use tiercheck_testkit::suites::Selection;
    let argv = |a: Vec<String>| Selection::parse(a.into_iter().map(Into::into));
    // No lane required, whatever the suite was started with (restored at the end; no
    // other test of this binary reads it).
    let required = std::env::var_os("TIERCHECK_REQUIRE_LANES");
    std::env::remove_var("TIERCHECK_REQUIRE_LANES");
    // (what the matmul-plain stand-in does, skip it?): passed, failed, ignored in all
    // (stand-ins and claims).
    let cases = [
        ("pass", false, (4, 0, 0)),
        ("fail", false, (2, 2, 0)),
        ("ignore", false, (2, 0, 2)),
        ("pass", true, (2, 1, 0)),
    ];
    for (k, (plain, skip, want)) in cases.into_iter().enumerate() {
        let mut trials: Vec<Trial> = ["matmul-plain", "matmul-repack"]
            .into_iter()
            .map(|p| {
                let what = if p == "matmul-plain" { plain } else { "pass" };
                tracked(format!("oracle_x86_lanes::oracle/haswell/{p}/case{k}"), move || match what
                {
                    "fail" => Err("a planted failure".into()),
                    "ignore" => Ok(Completion::ignored_with("this host lacks the tier's CPU")),
                    _ => Ok(Completion::Completed),
                })
            })
            .collect();
        // The inner runs' reports go to a file: their planted failures are expected.
        let log = std::env::temp_dir().join(format!("claims-{}-{k}.log", std::process::id()));
        let mut argv_of = vec!["t".to_string(), "--test-threads".into(), "2".into()];
        argv_of.extend(["--logfile".to_string(), log.display().to_string()]);
        if skip {
            argv_of.extend(["--skip".to_string(), "matmul-plain".into()]);
        }
        let selection = argv(argv_of);
        let claims = claim_trials("oracle_x86_lanes", &selection, &trials);
        assert_eq!(claims.len(), 2);
        trials.extend(claims);
        let c = selection.conclude(trials);
        assert_eq!(
            (c.num_passed, c.num_failed, c.num_ignored),
            want,
            "case {k}: {plain}, skip {skip}"
        );
    }
    // Where the lane is required, an ignored proving trial fails its claim.
    std::env::set_var("TIERCHECK_REQUIRE_LANES", "x86_64-avx2");
    let trials = vec![tracked("oracle_x86_lanes::oracle/haswell/matmul-plain/required", || {
        Ok(Completion::ignored_with("this host lacks the tier's CPU"))
    })];
    let log = std::env::temp_dir().join(format!("claims-{}-required.log", std::process::id()));
    let log = log.display().to_string();
    let selection = argv(
        ["t", "--test-threads", "1", "--skip", "matmul-repack", "--logfile", log.as_str()]
            .map(String::from)
            .to_vec(),
    );
    let mut all = trials;
    let claims = claim_trials("oracle_x86_lanes", &selection, &all);
    all.extend(claims);
    let c = selection.conclude(all);
    match required {
        Some(v) => std::env::set_var("TIERCHECK_REQUIRE_LANES", v),
        None => std::env::remove_var("TIERCHECK_REQUIRE_LANES"),
    }
    // The stand-in ignored; x86_64-avx2's claim failed; x86_64-avx2-repack's claim
    // failed too (its trial is missing from this list).
    assert_eq!((c.num_passed, c.num_failed, c.num_ignored), (0, 2, 1));
}
