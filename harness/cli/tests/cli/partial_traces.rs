//! Partial traces: a dump holding only the taps an engine usually writes (`attn_norm`,
//! `kqv_out`, `ffn_inp`, `ffn_out`, `l_out` per layer, `result_norm`, `result_output`;
//! no embedding, no Q/K/V) is compared on the taps both sides have, the missing ones are
//! named, and the layer-local replay needs only each layer's input: layer 0 is fed the
//! ids' embedding rows and the K/V cache is recomputed from the earlier steps' inputs by
//! the replaying lane. The prompts file is not read when a side is a trace.
//!
//! The checks can fail: a lane replaying its own partial trace must reproduce every tap
//! bitwise (any error in the recomputed embedding or cache shows), and one planted value
//! must be found at its own step and tap. Plain dumps (no tiercheck metadata, one array
//! per llama.cpp tap name, perhaps the logits of the last row only) are imported
//! (`trace import`, or directly by `delta`) and every bad array is named.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_model::sequence::read_trace;

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
    // An engine's dump: no tiercheck provenance (a trace naming its lane would be
    // analysed as that lane once the lane reproduces it).
    let mut meta: BTreeMap<String, String> = t.meta.clone();
    meta.remove("lane");
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
    assert!(text.contains("A's layers (aarch64-neon) fed B's inputs (B has no inp_embd"), "{text}");
    // Two tiers with other kernels: the layer-local replay is not bitwise, and the
    // difference starts inside a layer that was replayed.
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("delta.json")).unwrap()).unwrap();
    let first = j["layer_local"]["first_tap"].as_str().expect("a first differing tap");
    assert!(KEEP.iter().any(|k| first.starts_with(k)) || first.starts_with("result_"), "{first}");
}

/// A plain dump of `full` as an engine writes one: per tap kept, one `[rows, width]`
/// array under llama.cpp's name (decode mode: the steps' rows stacked), an `i64` `ids`
/// array, no metadata. `last_logits_only`: `result_output` holds the last row only.
fn plain_dump(full: &Path, out: &Path, last_logits_only: bool) {
    use safetensors::tensor::{Dtype, TensorView};
    let t = read_trace(full).unwrap();
    let mut arrays: BTreeMap<String, (Vec<usize>, Vec<u8>)> = BTreeMap::new();
    let mut ids: Vec<u32> = Vec::new();
    for s in &t.steps {
        ids.extend(&s.input_ids);
    }
    // The trace of a `--steps 1` run: its steps cover exactly the ids.
    for ((_, name), tensor) in &t.taps {
        let kind = name.rsplit_once('-').map_or(name.as_str(), |(k, _)| k);
        if !(KEEP.contains(&kind) || name == "result_norm" || name == "result_output") {
            continue;
        }
        let (mut data, w) = (tensor.data.clone(), tensor.shape[1]);
        if last_logits_only && name == "result_output" {
            data = data[data.len() - w..].to_vec();
        }
        let e = arrays.entry(name.clone()).or_insert((vec![0, w], Vec::new()));
        e.0[0] += data.len() / w;
        e.1.extend(data.iter().flat_map(|v| v.to_le_bytes()));
    }
    let ids_bytes: Vec<u8> = ids.iter().flat_map(|&i| (i as i64).to_le_bytes()).collect();
    let mut views: Vec<(String, TensorView<'_>)> = arrays
        .iter()
        .map(|(n, (shape, b))| (n.clone(), TensorView::new(Dtype::F32, shape.clone(), b).unwrap()))
        .collect();
    views.push(("ids".into(), TensorView::new(Dtype::I64, vec![ids.len()], &ids_bytes).unwrap()));
    std::fs::write(out, safetensors::serialize(views, &None).unwrap()).unwrap();
}

/// `tiercheck run` of `lane` on `short-4` in `mode`, one greedy step (the dump's steps
/// then cover exactly the ids).
fn one_step_trace(lane: &str, mode: &str, path: &Path) {
    let st = bin()
        .args(["run", "--lane", lane, "--impl", "portable", "--prompt", "short-4", "--steps", "1"])
        .args(["--mode", mode, "--quiet", "--out"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_plain_dump_is_imported_and_compared_bitwise_with_its_lane() {
    let dir = tempfile::tempdir().unwrap();
    for (mode, last_only) in [("decode", false), ("prompt", true)] {
        let full = dir.path().join(format!("{mode}.safetensors"));
        let plain = dir.path().join(format!("{mode}-dump.safetensors"));
        let trace = dir.path().join(format!("{mode}-trace.safetensors"));
        one_step_trace("x86_64-avx2", mode, &full);
        plain_dump(&full, &plain, last_only);
        // `trace import`, then `delta` on the trace; and `delta` on the dump directly.
        let o = bin()
            .args(["trace", "import"])
            .arg(&plain)
            .args(["--mode", mode, "--out"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for side in [&trace, &plain] {
            let o = bin()
                .arg("delta")
                .arg(side)
                .args(["x86_64-avx2", "--impl", "portable", "--floor-seeds", "1", "--json"])
                .args(["--mode", mode])
                .output()
                .unwrap();
            assert!(o.status.success(), "{mode}: {}", String::from_utf8_lossy(&o.stderr));
            let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(j["mode"], serde_json::json!(mode));
            assert!(j["free"]["first_step"].is_null(), "{mode}: {}", j["free"]);
            assert!(j["layer_local"]["first_step"].is_null(), "{mode}: {}", j["layer_local"]);
            let rows = j["free"]["rows"].as_array().unwrap();
            assert!(rows.iter().any(|r| r["name"] == "result_output"), "{mode}");
        }
    }
}

#[test]
fn bad_dumps_are_errors_naming_the_file_and_the_array() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.safetensors");
    one_step_trace("ref", "decode", &full);
    let plain = dir.path().join("dump.safetensors");
    plain_dump(&full, &plain, false);
    let import = |path: &Path, extra: &[&str]| -> String {
        let o = bin()
            .args(["trace", "import"])
            .arg(path)
            .args(extra)
            .arg("--out")
            .arg(dir.path().join("out.safetensors"))
            .output()
            .unwrap();
        assert!(!o.status.success(), "{extra:?} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let p = plain.display().to_string();
    // No mode in the file and none given.
    let e = import(&plain, &[]);
    assert!(e.contains(&p) && e.contains("--mode"), "{e}");
    // Ids that contradict the file's.
    let e = import(&plain, &["--mode", "decode", "--ids", "1,2,3,4"]);
    assert!(e.contains("differ from the file's"), "{e}");
    // Prompt mode needs one row per id: the decode dump has them, but a wrong width or
    // an unknown name is named.
    use safetensors::tensor::{Dtype, TensorView};
    let write = |name: &str, shape: Vec<usize>| -> std::path::PathBuf {
        let n: usize = shape.iter().product();
        let b: Vec<u8> = vec![0u8; 4 * n];
        let ids: Vec<u8> = [1i64, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = vec![
            (name.to_string(), TensorView::new(Dtype::F32, shape, &b).unwrap()),
            ("ids".to_string(), TensorView::new(Dtype::I64, vec![2], &ids).unwrap()),
        ];
        let path = dir.path().join(format!("bad-{name}.safetensors"));
        std::fs::write(&path, safetensors::serialize(views, &None).unwrap()).unwrap();
        path
    };
    let e = import(&write("l_out-0", vec![2, 7]), &["--mode", "decode"]);
    assert!(e.contains("array 'l_out-0' is 7 wide"), "{e}");
    let e = import(&write("l_out-99", vec![2, 7]), &["--mode", "decode"]);
    assert!(e.contains("array 'l_out-99'") && e.contains("past the model's"), "{e}");
    // An array that is no tap is ignored (then the logits are missing here), refused
    // with --strict.
    let e = import(&write("hidden", vec![2, 7]), &["--mode", "decode"]);
    assert!(e.contains("no result_output"), "{e}");
    let e = import(&write("hidden", vec![2, 7]), &["--mode", "decode", "--strict"]);
    assert!(e.contains("array 'hidden': not a tap name"), "{e}");
    let e = import(&write("result_norm", vec![3, 1]), &["--mode", "decode"]);
    assert!(e.contains("array 'result_norm'"), "{e}");
    // No logits: the steps' tokens are unknown.
    let t = read_trace(&full).unwrap();
    let w = t.taps[&(0, "l_out-0".to_string())].shape[1];
    let e = import(&write("l_out-0", vec![2, w]), &["--mode", "decode"]);
    assert!(e.contains("no result_output"), "{e}");
    // A prompt dump whose pruned taps disagree: the last layer's l_out holds the last row
    // only while its ffn_out holds both (llama.cpp prunes them alike).
    let n_layer = t.taps.keys().filter(|(s, n)| *s == 0 && n.starts_with("l_out-")).count();
    let last = format!("l_out-{}", n_layer - 1);
    let ffn = last.replace("l_out", "ffn_out");
    let (a, b, c) = (vec![0u8; 4 * 2 * w], vec![0u8; 4 * w], vec![0u8; 4 * 3072]);
    let ids: Vec<u8> = [1i64, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = vec![
        (ffn.clone(), TensorView::new(Dtype::F32, vec![2, w], &a).unwrap()),
        (last.clone(), TensorView::new(Dtype::F32, vec![1, w], &b).unwrap()),
        ("result_output".to_string(), TensorView::new(Dtype::F32, vec![1, 3072], &c).unwrap()),
        ("ids".to_string(), TensorView::new(Dtype::I64, vec![2], &ids).unwrap()),
    ];
    let mixed = dir.path().join("mixed.safetensors");
    std::fs::write(&mixed, safetensors::serialize(views, &None).unwrap()).unwrap();
    let e = import(&mixed, &["--mode", "prompt"]);
    assert!(
        e.contains(&mixed.display().to_string())
            && e.contains(&format!("'{last}' holds the last row only but '{ffn}' holds every row")),
        "{e}"
    );
}

fn identify_json(path: &Path, extra: &[&str]) -> serde_json::Value {
    let o = bin()
        .arg("identify")
        .arg(path)
        .args(["--impl", "portable", "--json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn names(v: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn identify_names_the_lane_of_full_traces_and_of_partial_plain_dumps() {
    let dir = tempfile::tempdir().unwrap();
    for (lane, mode) in
        [("x86_64-avx2-repack", "prompt"), ("aarch64-i8mm-repack", "prompt"), ("ref", "decode")]
    {
        let full = dir.path().join(format!("{lane}.safetensors"));
        one_step_trace(lane, mode, &full);
        let j = identify_json(&full, &[]);
        assert_eq!(j["explained"], serde_json::json!(true), "{lane}: {}", j["verdict"]);
        assert!(j["first_unexplained"].is_null());
        let best = names(&j["best_lanes"]);
        assert!(best.contains(&format!("{lane} (kv=f16 fa=on)")), "{lane}: {best:?}");
        // Every tap of the trace is reproduced by its lane.
        let per_tap = j["per_tap"].as_array().unwrap();
        assert_eq!(per_tap.len() as u64, j["taps"].as_u64().unwrap(), "{lane}");
        // A lane with other kernels does not reproduce it.
        let other = if lane == "ref" { "x86_64-avx2" } else { "ref" };
        assert!(!best.iter().any(|b| b.starts_with(&format!("{other} "))), "{lane}: {best:?}");
    }
    // A partial plain dump, no attention metadata: every attention setting is tried.
    let full = dir.path().join("neon.safetensors");
    one_step_trace("aarch64-neon", "decode", &full);
    let plain = dir.path().join("neon-dump.safetensors");
    plain_dump(&full, &plain, false);
    let j = identify_json(&plain, &["--mode", "decode", "--lanes", "aarch64-neon,x86_64-avx2,ref"]);
    assert_eq!(j["explained"], serde_json::json!(true), "{}", j["verdict"]);
    // No thread count recorded either: for four decode steps (no split-KV) and these
    // lanes (no chunk-plan tiles) every count gives the same arithmetic, one class.
    let all = "threads=1-16,24,32,48,64,96,128)";
    let want = format!("aarch64-neon (kv=f16 fa=on {all}");
    assert!(names(&j["best_lanes"]).contains(&want), "{:?}", j["best_lanes"]);
    let cands = j["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 12, "3 lanes x 4 attention settings x one thread class");
    assert!(cands.iter().all(|c| c["tier_threads"].as_array().unwrap().len() == 22));
    // Flash attention reads an F32 cache rounded to F16: those two settings coincide, and
    // the report says so.
    assert_eq!(j["ambiguous"], serde_json::json!(true), "{}", j["verdict"]);
    let why = j["ambiguity"].as_str().unwrap();
    assert!(why.contains("does not record its K/V cache type"), "{why}");
    assert_eq!(j["best_lane"], serde_json::json!("aarch64-neon"));
}

/// A decode-mode trace of the dotprod lane is reproduced as well by the i8mm lane, whose
/// 2x2 tiles need two rows: `identify` reports the tie and why, `best_lane` is a lane
/// name and the settings have fields of their own; a trace that tells them apart is not
/// ambiguous.
#[test]
fn identify_reports_ambiguity_and_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("neon.safetensors");
    one_step_trace("aarch64-neon", "decode", &full);
    let j = identify_json(&full, &["--lanes", "aarch64-neon,aarch64-i8mm,ref"]);
    assert_eq!(j["explained"], serde_json::json!(true), "{}", j["verdict"]);
    assert_eq!(j["ambiguous"], serde_json::json!(true), "{}", j["verdict"]);
    let best = names(&j["best_lanes"]);
    assert_eq!(best, vec!["aarch64-neon (kv=f16 fa=on)", "aarch64-i8mm (kv=f16 fa=on)"]);
    let why = j["ambiguity"].as_str().unwrap();
    assert!(why.contains("aarch64-neon and aarch64-i8mm differ in"), "{why}");
    assert!(
        why.contains("plain gemm") && why.contains("every step of the trace has one row"),
        "{why}"
    );
    assert!(
        j["verdict"].as_str().unwrap().contains("ambiguously: 2 candidates"),
        "{}",
        j["verdict"]
    );
    assert_eq!(j["best_lane"], serde_json::json!("aarch64-neon"));
    assert_eq!((j["best_kv"].as_str(), j["best_fa"].as_str()), (Some("f16"), Some("on")));
    let full = dir.path().join("i8mm.safetensors");
    one_step_trace("aarch64-i8mm", "prompt", &full);
    let j = identify_json(&full, &["--lanes", "aarch64-neon,aarch64-i8mm,ref"]);
    assert_eq!(j["ambiguous"], serde_json::json!(false), "{}", j["verdict"]);
    assert!(j["ambiguity"].is_null());
    assert_eq!(j["best_lane"], serde_json::json!("aarch64-i8mm"));
}

#[test]
fn identify_reports_a_planted_value_as_the_first_unexplained_tap() {
    let dir = tempfile::tempdir().unwrap();
    let (full, part) = (dir.path().join("full.safetensors"), dir.path().join("part.safetensors"));
    full_trace("aarch64-neon-repack", &full);
    partial(&full, &part, Some((2, "ffn_out-5")));
    let j = identify_json(&part, &[]);
    assert_eq!(j["explained"], serde_json::json!(false), "{}", j["verdict"]);
    let u = &j["first_unexplained"];
    assert_eq!(u["step"], serde_json::json!(2), "{u}");
    assert_eq!(u["tap"], serde_json::json!("ffn_out-5"), "{u}");
    // ffn_out is the output of ffn_down, whose input (ffn_swiglu) this partial trace lacks.
    assert_eq!(u["kind"], serde_json::json!("input-missing"), "{u}");
    assert!(u["ratio"].as_f64().unwrap() > 4.0, "{u}");
    assert_eq!(j["best_lane"], serde_json::json!("aarch64-neon-repack"));
    assert_eq!(j["best_candidate"], serde_json::json!("aarch64-neon-repack (kv=f16 fa=on)"));
    let v = j["verdict"].as_str().unwrap();
    assert!(v.starts_with("unexplained from step 2 tap ffn_out-5"), "{v}");
}

#[test]
fn delta_on_a_trace_never_reads_the_prompts_file_so_any_vocabulary_works() {
    use tiercheck_model::embedded::{self, Recipe};
    let dir = tempfile::tempdir().unwrap();
    // The embedded recipe with a 1000-token vocabulary: the default prompts file holds
    // ids above 999, so it does not fit this model.
    let text = std::fs::read_to_string(Recipe::default_path()).unwrap();
    assert!(text.contains("n_vocab = 3072"));
    let recipe =
        Recipe::parse("small-vocab", &text.replace("n_vocab = 3072", "n_vocab = 1000")).unwrap();
    let model = dir.path().join("small-vocab.gguf");
    std::fs::write(&model, embedded::generate(&recipe).unwrap()).unwrap();
    let trace = dir.path().join("t.safetensors");
    let st = bin()
        .args([
            "run",
            "--lane",
            "ref",
            "--teacher-force",
            "5,17,900,3",
            "--mode",
            "decode",
            "--quiet",
        ])
        .arg("--model")
        .arg(&model)
        .arg("--out")
        .arg(&trace)
        .status()
        .unwrap();
    assert!(st.success());
    let o = bin()
        .arg("delta")
        .arg(&trace)
        .args(["ref", "--impl", "portable", "--floor-seeds", "1", "--json", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["free"]["first_step"].is_null(), "{}", j["free"]);
    assert_eq!(j["headline"]["kind"], serde_json::json!("identical"), "{}", j["headline"]);
    // Two lanes need the prompts file, which does not fit: a clear error naming it.
    let o = bin().args(["delta", "ref", "x86_64-avx2", "--model"]).arg(&model).output().unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("prompts.toml"), "{e}");
}

/// One dump saved the ways engines save numpy archives (`fuzz/corpus/npz/`, written by
/// `ci/py/npz_variants.py` from a `ref` trace of two decode steps): `logits` for
/// `result_output`, `tokens` or `input_ids` for the ids, `savez_compressed`, big-endian
/// and Fortran-order arrays, and extra arrays of an engine's own. Each imports as the
/// same trace as the plain archive, bitwise; the extra arrays are listed as ignored,
/// and `--strict` refuses them.
#[test]
fn dumps_as_engines_write_them_import_alike() {
    use tiercheck_model::import::{load, ImportOptions};
    let model = tiercheck_model::Model::open(
        &tiercheck_model::embedded::ensure_model(None).expect("the embedded model"),
    )
    .unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/npz");
    let opts = ImportOptions { mode: Some(tiercheck_model::Mode::Decode), ..Default::default() };
    let plain = load(&model, &dir.join("plain.npz"), &opts).unwrap();
    assert_eq!(plain.steps.len(), 2);
    assert_eq!(plain.taps.len(), 4, "attn_norm-0 and result_output of two steps");
    for v in ["logits", "input_ids", "compressed", "big_endian", "fortran", "extra"] {
        let t = load(&model, &dir.join(format!("{v}.npz")), &opts).unwrap();
        assert_eq!(t.steps, plain.steps, "{v}");
        assert_eq!(t.taps.len(), plain.taps.len(), "{v}");
        for (k, a) in &plain.taps {
            let b = &t.taps[k];
            assert_eq!(a.shape, b.shape, "{v} {k:?}");
            assert!(
                a.data.iter().zip(&b.data).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{v} {k:?}"
            );
        }
        let ignored = t.meta.get("tiercheck.ignored_arrays").map(String::as_str);
        let want = (v == "extra").then_some(r#"["engine_scale","rope_cache"]"#);
        assert_eq!(ignored, want, "{v}");
    }
    let strict = ImportOptions { strict: true, ..opts };
    let e = load(&model, &dir.join("extra.npz"), &strict).unwrap_err().to_string();
    assert!(
        e.contains("extra.npz") && e.contains("'engine_scale'") && e.contains("not a tap name"),
        "{e}"
    );
    // The CLI: one warning naming the ignored arrays; `--strict` refuses.
    let out = tempfile::tempdir().unwrap();
    let run = |strict: bool| {
        let mut c = bin();
        c.args(["trace", "import"]).arg(dir.join("extra.npz"));
        c.args(["--mode", "decode", "--out"]).arg(out.path().join("t.safetensors"));
        if strict {
            c.arg("--strict");
        }
        c.output().unwrap()
    };
    let o = run(false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("warning:").count(), 1, "{err}");
    assert!(err.contains("rope_cache") && err.contains("--strict"), "{err}");
    assert!(!run(true).status.success());
}

/// Two trace sides without a lane of their own (no provenance) that no lane reproduces:
/// `delta` says so for each side, measures no floor (there is no lane to measure it
/// with), and therefore does not call their difference noise: "not judged".
#[test]
fn delta_does_not_judge_without_a_floor() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.safetensors");
    full_trace("aarch64-neon-repack", &full);
    let (a, b) = (dir.path().join("a.safetensors"), dir.path().join("b.safetensors"));
    partial(&full, &a, Some((1, "ffn_out-2")));
    partial(&full, &b, Some((2, "ffn_out-5")));
    let j = delta_json(&a, b.to_str().unwrap());
    let sides: Vec<String> = serde_json::from_value(j["sides"].clone()).unwrap();
    assert_eq!(sides.len(), 2, "{sides:?}");
    assert!(sides.iter().all(|s| s.contains("no lane reproduces it")), "{sides:?}");
    assert!(j["floor"].is_null());
    assert_eq!(j["headline"]["kind"], serde_json::json!("not-judged"), "{}", j["headline"]);
    let text = j["headline"]["text"].as_str().unwrap();
    assert!(text.contains("no floor was measured") && !text.contains("within"), "{text}");
}
