//! Partial traces: a dump holding only the taps an engine usually writes (`attn_norm`,
//! `kqv_out`, `ffn_inp`, `ffn_out`, `l_out` per layer, `result_norm`, `result_output`;
//! no embedding, no Q/K/V) is compared on the taps both sides have, the missing ones are
//! named, and the layer-local replay needs only each layer's input: layer 0 is fed the
//! ids' embedding rows and the K/V cache is recomputed from the earlier steps' inputs by
//! the replaying lane. The prompts file is not read when a side is a trace.
//!
//! The checks can fail: a lane replaying its own partial trace must reproduce every tap
//! bitwise (any error in the recomputed embedding or cache shows), and one planted value
//! must be found at its own step and tap.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_model::run::read_trace;

const KEEP: [&str; 5] = ["attn_norm", "kqv_out", "ffn_inp", "ffn_out", "l_out"];

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tiercheck"))
}

/// A full trace of `lane` on `short-4` (prompt mode, 4 greedy tokens).
fn full_trace(lane: &str, path: &Path) {
    let st = bin()
        .args(["run", "--lane", lane, "--impl", "portable", "--prompt", "short-4", "--steps", "4"])
        .args(["--mode", "prompt", "--quiet", "--out"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `full` rewritten with only the usual dump's taps; `plant` changes one value of one
/// tap at one step.
fn partial(full: &Path, out: &Path, plant: Option<(usize, &str)>) {
    let t = read_trace(full).unwrap();
    let mut tensors: Vec<Tensor> = Vec::new();
    for ((step, name), tensor) in &t.taps {
        let kind = name.rsplit_once('-').map_or(name.as_str(), |(k, _)| k);
        if KEEP.contains(&kind) || name == "result_norm" || name == "result_output" {
            let mut tensor = tensor.clone();
            if plant == Some((*step, name.as_str())) {
                tensor.data[5] += 1.0;
            }
            tensors.push(tensor);
        }
    }
    let meta: BTreeMap<String, String> = t.meta.clone();
    tensorfile::write(out, &tensors, &meta).unwrap();
}

fn delta_json(a: &Path, b: &str) -> serde_json::Value {
    let o = bin()
        .arg("delta")
        .arg(a)
        .arg(b)
        .args(["--impl", "portable", "--floor-seeds", "1", "--json"])
        // A trace brings its ids: a prompts file that does not exist is never read.
        .args(["--prompts", "/no/such/prompts.toml"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_lane_reproduces_its_own_partial_trace_bitwise_layer_locally() {
    let dir = tempfile::tempdir().unwrap();
    let (full, part) = (dir.path().join("full.safetensors"), dir.path().join("part.safetensors"));
    full_trace("aarch64-i8mm-repack", &full);
    partial(&full, &part, None);
    let j = delta_json(&part, "aarch64-i8mm-repack");

    // The missing taps are named, by kind.
    let only_b: Vec<String> = serde_json::from_value(j["taps_only_b"].clone()).unwrap();
    assert!(only_b.iter().any(|k| k == "inp_embd"), "{only_b:?}");
    for k in ["Qcur", "Kcur", "Vcur", "ffn_norm", "ffn_swiglu"] {
        assert!(only_b.iter().any(|x| x.starts_with(&format!("{k} ("))), "{k}: {only_b:?}");
    }
    assert_eq!(j["taps_only_a"], serde_json::json!([]));

    // Free-running: equal on every shared tap.
    assert!(j["free"]["first_step"].is_null(), "{}", j["free"]);

    // Layer-local: the embedding recomputed, the cache recomputed, every shared tap of
    // every layer and the head bitwise equal.
    let how = j["layer_local_how"].as_str().unwrap();
    assert!(how.contains("no inp_embd") && how.contains("recomputed"), "{how}");
    let ll = &j["layer_local"];
    assert!(ll["first_step"].is_null(), "{ll}");
    let rows = ll["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"attn_norm-0") && names.contains(&"result_output"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("Qcur")), "{names:?}");
    for r in rows {
        assert_eq!(r["all"]["rel_l2"].as_f64().unwrap(), 0.0, "{}", r["name"]);
    }
}

#[test]
fn a_planted_value_in_a_partial_trace_is_found_at_its_step_and_tap() {
    let dir = tempfile::tempdir().unwrap();
    let (full, part) = (dir.path().join("full.safetensors"), dir.path().join("part.safetensors"));
    full_trace("x86_64-avx2", &full);
    partial(&full, &part, Some((2, "l_out-3")));
    let j = delta_json(&part, "x86_64-avx2");
    // Layer-local, the lane's layer 3 (fed the trace's unplanted l_out-2) differs from
    // the planted l_out-3 first, at step 2; the layers before it are still bitwise.
    let ll = &j["layer_local"];
    assert_eq!(ll["first_step"], serde_json::json!(2), "{ll}");
    assert_eq!(ll["first_tap"], serde_json::json!("l_out-3"), "{ll}");
}

#[test]
fn a_partial_trace_against_another_lane_is_compared_and_reported_as_partial() {
    let dir = tempfile::tempdir().unwrap();
    let (full, part) = (dir.path().join("full.safetensors"), dir.path().join("part.safetensors"));
    full_trace("x86_64-avx2", &full);
    partial(&full, &part, None);
    let report = dir.path().join("report");
    let o = bin()
        .args(["delta", "aarch64-neon"])
        .arg(&part)
        .args(["--impl", "portable", "--floor-seeds", "1", "--prompts", "/no/such/prompts.toml"])
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("partial trace: B lacks inp_embd, Qcur (8 layers), Kcur (8 layers), Vcur (8 layers), ffn_norm (8 layers), ffn_swiglu (8 layers)"),
        "{text}"
    );
    assert!(
        text.contains("A's layers (aarch64-neon) fed B's inputs (B has no inp_embd"),
        "{text}"
    );
    // Two tiers with other kernels: the layer-local replay is not bitwise, and the
    // difference starts inside a layer that was replayed.
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("delta.json")).unwrap())
            .unwrap();
    let first = j["layer_local"]["first_tap"].as_str().expect("a first differing tap");
    assert!(KEEP.iter().any(|k| first.starts_with(k)) || first.starts_with("result_"), "{first}");
}
