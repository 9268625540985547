//! `identify` starts from the lane a trace names (its provenance `lane`): whether that
//! lane reproduces the trace and where it stops, then which lanes go further; a trace
//! that neither its own lane nor the lane going furthest reproduces is "reproduced by
//! neither", with both first differing taps; each stop's kind follows from that lane's
//! own replay. `delta` calls a jump a flip only where it measured the codes.

use std::path::Path;
use std::process::Command;

use tiercheck_analysis::identify::{identify, IdentifyOptions, IdentifyReport};
use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded;
use tiercheck_model::sequence::read_trace;
use tiercheck_model::{import, Model, Residual};

fn model() -> Model {
    Model::open(&embedded::ensure_model(None).unwrap()).unwrap()
}

/// A trace of `lane` (prompt mode, 5 ids, 2 greedy steps, F32 cache without flash
/// attention) that names `claims` as its lane.
fn trace(lane: &str, claims: &str, out: &Path) {
    let st = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args(["run", "--lane", lane, "--impl", "portable", "--teacher-force", "5,17,900,3,2045"])
        .args(["--steps", "2", "--kv", "f32", "--fa", "off", "--quiet", "--out"])
        .arg(out)
        .status()
        .unwrap();
    assert!(st.success());
    let mut t = read_trace(out).unwrap();
    t.meta.insert("lane".into(), claims.into());
    import::write(out, &t).unwrap();
}

/// `path` with one tap of one step moved by one part in a million.
fn plant(path: &Path, step: usize, tap: &str) {
    let mut t = read_trace(path).unwrap();
    let x = t.taps.get_mut(&(step, tap.to_string())).expect("the tap");
    x.data[0] *= 1.000_001;
    import::write(path, &t).unwrap();
}

fn run(path: &Path, names: &[&str]) -> IdentifyReport {
    let o = IdentifyOptions {
        lanes: Some(names.iter().map(|n| lanes::find(n).unwrap()).collect()),
        imp: Impl::Portable,
        residual: Residual::F32,
        n_ctx: 512,
        floor_seeds: 0,
        dump: Default::default(),
        threads: 1,
        state: None,
    };
    identify(&model(), path, &o).unwrap()
}

#[test]
fn a_trace_whose_own_lane_reproduces_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.safetensors");
    trace("x86_64-avx2", "x86_64-avx2", &p);
    let r = run(&p, &["ref", "x86_64-avx2"]);
    let c = r.claim.as_ref().expect("a claim");
    assert!(r.explained && c.reproduces && c.stop.is_none(), "{}", r.verdict);
    assert!(r.verdict.starts_with("explained: its lane x86_64-avx2"), "{}", r.verdict);
}

#[test]
fn a_mislabelled_trace_is_explained_by_its_real_lane_and_names_where_the_claim_stops() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.safetensors");
    trace("aarch64-neon", "x86_64-avx2", &p);
    // The claimed lane is a candidate even when --lanes leaves it out.
    let r = run(&p, &["ref", "aarch64-neon"]);
    assert!(r.explained, "{}", r.verdict);
    assert_eq!(r.best_lane, "aarch64-neon");
    let c = r.claim.as_ref().expect("a claim");
    assert_eq!(c.lane, "x86_64-avx2");
    let stop = c.stop.as_ref().expect("the claim stops");
    assert!(!c.reproduces && c.further.iter().any(|f| f.starts_with("aarch64-neon")), "{c:?}");
    assert!(r.candidates.iter().any(|x| x.lane == "x86_64-avx2"), "{:?}", r.candidates);
    assert!(
        r.verdict.starts_with("explained by aarch64-neon")
            && r.verdict.contains("not by its own lane x86_64-avx2")
            && r.verdict.contains(&format!("step {} tap {}", stop.step, stop.tap)),
        "{}",
        r.verdict
    );
}

/// The case of a fault in the claimed lane that another lane does not share: the
/// claimed lane stops early, another goes further, and neither explains the trace.
#[test]
fn a_trace_neither_its_lane_nor_the_furthest_lane_reproduces_names_both_stops() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.safetensors");
    trace("aarch64-neon", "x86_64-avx2", &p);
    plant(&p, 1, "ffn_out-6");
    let r = run(&p, &["ref", "aarch64-neon", "x86_64-avx2"]);
    assert!(!r.explained, "{}", r.verdict);
    let c = r.claim.as_ref().expect("a claim");
    let stop = c.stop.as_ref().expect("the claim stops");
    let u = r.first_unexplained.as_ref().expect("unexplained");
    assert_eq!((u.step, u.tap.as_str()), (1, "ffn_out-6"));
    // ffn_out-6 is ffn_down's output; its input ffn_swiglu-6 is in the trace and the
    // furthest lane reproduced it: a kernel-level difference by that lane's replay.
    assert_eq!(u.kind, "kernel", "{u:?}");
    assert!(stop.step == 0 && stop.tap != "ffn_out-6", "{stop:?}");
    assert!(
        r.verdict.starts_with("reproduced by neither: its lane x86_64-avx2")
            && r.verdict.contains(&format!("stops at step 0 tap {}", stop.tap))
            && r.verdict.contains("aarch64-neon")
            && r.verdict.contains("step 1 tap ffn_out-6"),
        "{}",
        r.verdict
    );
}

/// A fault in the claimed lane's own matmul that no lane reproduces (the claimed lane
/// mutated): the claimed lane's first differing tap heads the verdict, labelled by its
/// replay, and no lane goes further.
#[test]
fn a_fault_in_the_claimed_lanes_matmul_names_its_first_differing_tap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.safetensors");
    trace("x86_64-avx2", "x86_64-avx2", &p);
    plant(&p, 0, "Qcur-2");
    let r = run(&p, &["ref", "aarch64-neon", "x86_64-avx2"]);
    let c = r.claim.as_ref().expect("a claim");
    let stop = c.stop.as_ref().expect("the claim stops");
    assert_eq!((stop.step, stop.tap.as_str(), stop.kind.as_str()), (0, "Qcur-2", "kernel"));
    assert!(c.further.is_empty(), "{c:?}");
    assert_eq!(r.best_lane, "x86_64-avx2");
    assert!(
        r.verdict.starts_with("unexplained from step 0 tap Qcur-2: its lane x86_64-avx2")
            && r.verdict.contains("no lane goes further")
            && r.verdict.contains("attn_norm-2 is reproduced bitwise"),
        "{}",
        r.verdict
    );
    // The text report names the claim too.
    let o = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args([
            "identify",
            "--lanes",
            "ref,x86_64-avx2",
            "--impl",
            "portable",
            "--floor-seeds",
            "0",
        ])
        .arg(&p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("its lane: x86_64-avx2"), "{text}");
}
