//! The lanes' status claims point at real proofs: every test a [`Proof`] names is an
//! integration test of this package that checks its claims
//! (`tiercheck_golden::claims::claim_checks`, which fails a claim whose trials are missing), a
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
fn every_named_proof_test_exists_and_checks_its_claims() {
    let manifest = std::fs::read_to_string(manifest_dir().join("Cargo.toml")).unwrap();
    for lane in LANES {
        for proof in lane.status.proofs() {
            assert!(
                manifest.contains(&format!("name = \"{}\"", proof.test)),
                "{}: proof test `{}` is not a [[test]] of this package",
                lane.name,
                proof.test
            );
            let src = manifest_dir().join("tests").join(format!("{}.rs", proof.test));
            let text = std::fs::read_to_string(&src)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", lane.name, src.display()));
            assert!(
                text.contains(&format!("claim_checks(\n        \"{}\"", proof.test))
                    || text.contains(&format!("claim_checks(\"{}\"", proof.test)),
                "{}: {} does not check its claims with claim_checks(\"{}\", ..)",
                lane.name,
                src.display(),
                proof.test
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
    let proof = |level, only| Proof { level, against: "a build", only, test: "t", trials: &[] };
    static QUALIFIED: std::sync::OnceLock<[Proof; 2]> = std::sync::OnceLock::new();
    let proofs = QUALIFIED.get_or_init(|| {
        [proof(Level::DecoderDecode, ""), proof(Level::DecoderPrompt, "with a switch off")]
    });
    assert_eq!(Status::Proven(proofs).tag(), "proven:decode+");
    assert_eq!(Status::Proven(&proofs[..1]).tag(), "proven:decode");
}
