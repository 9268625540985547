//! Every kind of file a user can hand tiercheck, malformed in each way its loader
//! checks, gives its own clear error naming the file (GGUF files have their own suite,
//! `gguf_malformed.rs`; random bytes for all of them are the fuzzers' job, see
//! `fuzz_corpus.rs`).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use tiercheck_golden::store::parse_manifest;
use tiercheck_model::embedded::{Prompts, Recipe};
use tiercheck_model::sequence::parse_trace;

/// The error of `r`, which must be one, checked to name `file`.
fn error_naming<T, E: std::fmt::Display>(r: Result<T, E>, file: &str, what: &str) -> String {
    match r {
        Ok(_) => panic!("accepted: {what}"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains(file), "error does not name the file {file}: {e}");
            e
        }
    }
}

// ----------------------------------------------------------------------------- traces

/// A safetensors file of f32 tensors `(name, shape)` with `meta`.
fn safetensors(tensors: &[(&str, Vec<usize>)], meta: &[(&str, &str)], dtype: Dtype) -> Vec<u8> {
    let width = match dtype {
        Dtype::F32 => 4,
        Dtype::F16 | Dtype::BF16 => 2,
        Dtype::I64 => 8,
        _ => 1,
    };
    let raws: Vec<Vec<u8>> =
        tensors.iter().map(|(_, s)| vec![0u8; s.iter().product::<usize>() * width]).collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&raws)
        .map(|((n, s), r)| (n.to_string(), TensorView::new(dtype, s.clone(), r).unwrap()))
        .collect();
    let meta: HashMap<String, String> =
        meta.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    safetensors::serialize(views, &Some(meta)).unwrap()
}

/// Real step records (from the committed trace seed of the fuzzer).
fn steps_json() -> String {
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/trace/one-tap.safetensors");
    let (_, meta) = tiercheck_gguf::tensorfile::read(&seed).unwrap();
    meta["tiercheck.steps"].clone()
}

fn trace_err(bytes: &[u8]) -> String {
    let file = "user/trace.safetensors";
    error_naming(parse_trace(Path::new(file), bytes), file, "a malformed trace")
}

#[test]
fn malformed_traces() {
    let fmt = ("tiercheck.format", "trace-1");
    let steps_text = steps_json();
    let steps = ("tiercheck.steps", steps_text.as_str());
    let good = safetensors(&[("000/l_out-0", vec![1, 4])], &[fmt, steps], Dtype::F32);
    let t = parse_trace(Path::new("ok.safetensors"), &good);
    // The step record layout is the decoder's; if this sample drifts, say so clearly.
    let t = t.unwrap_or_else(|e| panic!("the well-formed sample trace is rejected: {e}"));
    assert_eq!(t.taps.len(), 1);

    let e = trace_err(b"definitely not safetensors");
    assert!(e.contains("safetensors") || e.contains("header"), "{e}");
    let e = trace_err(&safetensors(&[("000/x", vec![1, 2])], &[steps], Dtype::F32));
    assert!(e.contains("not a tiercheck trace"), "{e}");
    let e = trace_err(&safetensors(&[("000/x", vec![1, 2])], &[fmt], Dtype::F32));
    assert!(e.contains("tiercheck.steps is missing"), "{e}");
    let e = trace_err(&safetensors(
        &[("000/x", vec![1, 2])],
        &[fmt, ("tiercheck.steps", "[{")],
        Dtype::F32,
    ));
    assert!(e.contains("metadata tiercheck.steps"), "{e}");
    let e = trace_err(&safetensors(&[("l_out-0", vec![1, 2])], &[fmt, steps], Dtype::F32));
    assert!(e.contains("is not named NNN/TAP"), "{e}");
    let e = trace_err(&safetensors(&[("x7/l_out-0", vec![1, 2])], &[fmt, steps], Dtype::F32));
    assert!(e.contains("bad step number"), "{e}");
    let e = trace_err(&safetensors(&[("000/l_out-0", vec![8])], &[fmt, steps], Dtype::F32));
    assert!(e.contains("is not 2-D"), "{e}");
    let e = trace_err(&safetensors(&[("000/l_out-0", vec![1, 2])], &[fmt, steps], Dtype::I64));
    assert!(e.contains("I64"), "{e}");
    // Truncated: the header promises more data than the file holds.
    let e = trace_err(&good[..good.len() - 3]);
    assert!(!e.is_empty());
}

// ----------------------------------------------------------------------------- prompts

fn recipe() -> Recipe {
    Recipe::load(&Recipe::default_path()).unwrap()
}

fn prompts_err(text: &str) -> String {
    let file = "user/prompts.toml";
    error_naming(Prompts::parse(file, text, &recipe()), file, text)
}

#[test]
fn malformed_prompts_files() {
    let ok = "steps = 4\n[[prompt]]\nname = \"a\"\ntokens = [1, 2]\n";
    Prompts::parse("ok.toml", ok, &recipe()).unwrap();
    let e = prompts_err("steps = [");
    assert!(e.contains("not a valid prompts file"), "{e}");
    let e = prompts_err("steps = \"four\"\n");
    assert!(e.contains("not a valid prompts file"), "{e}");
    let e = prompts_err("steps = 0\n[[prompt]]\nname = \"a\"\ntokens = [1]\n");
    assert!(e.contains("steps = 0"), "{e}");
    let e = prompts_err("steps = 4\n");
    assert!(e.contains("no [[prompt]] entries"), "{e}");
    let e = prompts_err("steps = 4\n[[prompt]]\nname = \" \"\ntokens = [1]\n");
    assert!(e.contains("empty name"), "{e}");
    let e = prompts_err(
        "steps = 4\n[[prompt]]\nname = \"a\"\ntokens = [1]\n[[prompt]]\nname = \"a\"\ntokens = [2]\n",
    );
    assert!(e.contains("used twice"), "{e}");
    let e = prompts_err("steps = 4\n[[prompt]]\nname = \"a\"\ntokens = []\n");
    assert!(e.contains("no tokens"), "{e}");
    let e = prompts_err("steps = 4\n[[prompt]]\nname = \"a\"\ntokens = [1, 999999]\n");
    assert!(e.contains("outside the vocabulary"), "{e}");
    let e = prompts_err("steps = 4\n[[prompt]]\nname = \"a\"\ntokens = [1, -2]\n");
    assert!(e.contains("not a valid prompts file"), "{e}");
    let e = prompts_err("steps = 100000\n[[prompt]]\nname = \"a\"\ntokens = [1]\n");
    assert!(e.contains("exceed context_length"), "{e}");
}

// ----------------------------------------------------------------------------- manifests

fn manifest_err(text: &str, lane: Option<&str>) -> String {
    let file = "golden/lanes/ref/manifest.json";
    error_naming(parse_manifest(Path::new(file), text, lane), file, text)
}

#[test]
fn malformed_golden_manifests() {
    let ok = r#"{"format":1,"lane":"ref","outputs_file":"outputs-0.safetensors","entries":{}}"#;
    parse_manifest(Path::new("m.json"), ok, Some("ref")).unwrap();
    let e = manifest_err("{", None);
    assert!(e.contains("not a valid manifest"), "{e}");
    let e = manifest_err(r#"{"format":1,"lane":"ref"}"#, None);
    assert!(e.contains("not a valid manifest") && e.contains("outputs_file"), "{e}");
    let e = manifest_err(&ok.replace("\"format\":1", "\"format\":2"), None);
    assert!(e.contains("format 2 (expected 1)"), "{e}");
    let e = manifest_err(ok, Some("x86_64-avx2"));
    assert!(e.contains("found in the folder of lane `x86_64-avx2`"), "{e}");
    for bad in ["../outputs.safetensors", "a/b.safetensors", "", "a\\\\b"] {
        let e = manifest_err(&ok.replace("outputs-0.safetensors", bad), None);
        assert!(e.contains("bad outputs file name"), "{bad}: {e}");
    }
    let e = manifest_err(&ok.replace("{}", r#"{"c":{"sha256":"x"}}"#), None);
    assert!(e.contains("not a valid manifest"), "{e}");
}

// ----------------------------------------------------------------------------- target tables

fn table_err(text: &str) -> String {
    let file = "targets/x86_64-unknown-linux-gnu.toml";
    let table = tiercheck_targets::parse(Path::new(file), text);
    error_naming(table.and_then(|t| tiercheck_lanes::check_target_lanes(&t)), file, text)
}

#[test]
fn malformed_target_tables() {
    let head = "triple = \"x86_64-unknown-linux-gnu\"\nlanes = [\"ref\", \"x86_64-avx2\"]\n";
    let model = "[[model]]\nname = \"host\"\nqemu_cpu = \"\"\nrequire = [\"x86_64-avx2\"]\n";
    tiercheck_targets::parse(
        Path::new("t/x86_64-unknown-linux-gnu.toml"),
        &format!("{head}{model}"),
    )
    .unwrap();
    let e = table_err("triple = ");
    assert!(!e.is_empty());
    let e = table_err(&format!(
        "{}{model}",
        head.replace("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")
    ));
    assert!(e.contains("does not match the file name"), "{e}");
    let e = table_err(&format!("{}{model}", head.replace("\"ref\"", "\"warp-drive\"")));
    assert!(e.contains("unknown lane `warp-drive`"), "{e}");
    let e = table_err(head);
    assert!(e.contains("no [[model]] entries"), "{e}");
    let e = table_err(&format!("{head}{model}{model}"));
    assert!(e.contains("duplicate model `host`"), "{e}");
    let e = table_err(&format!("{head}{}", model.replace("x86_64-avx2", "x86_64-avx512")));
    assert!(e.contains("not in `lanes`"), "{e}");
    let e = table_err(&format!("{head}[[model]]\nqemu_cpu = \"\"\n"));
    assert!(e.contains("name"), "{e}");
}

// ----------------------------------------------------------------------------- saved caches

/// A sequence state llama.cpp's haswell build wrote (3 cells, F16, flash attention: the
/// fuzzer's seed).
fn saved_state() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/state/seq-f16-fa-3-cells.state");
    std::fs::read(p).unwrap()
}

/// The shape of the embedded model (8 layers, 2 KV heads of 64).
fn tiny_hp() -> tiercheck_model::HParams {
    tiercheck_golden::fuzzing::embedded_shape()
}

#[test]
fn malformed_saved_caches() {
    use tiercheck_model::state::KvState;
    use tiercheck_model::{Attention, FlashAttn, KvType};
    let file = "user/slot0.bin";
    let good = saved_state();
    let s = KvState::parse(Path::new(file), &good).unwrap();
    assert_eq!((s.cells, s.tokens.clone()), (3, vec![17, 2045, 388]));
    let hp = tiny_hp();
    s.check(&hp, &Attention::LLAMA_DEFAULT, 512).unwrap();
    // What a run cannot start from, each with its reason.
    let f32_off =
        Attention { kv: KvType::F32, fa: FlashAttn::Off, tier_threads: 1, tier_numa: false };
    let f16_off =
        Attention { kv: KvType::F16, fa: FlashAttn::Off, tier_threads: 1, tier_numa: false };
    let cases: Vec<(Result<(), tiercheck_model::ModelError>, &str)> = vec![
        (s.check(&hp, &f32_off, 512), "pass --kv f16 --fa on"),
        (s.check(&hp, &f16_off, 512), "V not transposed"),
        (
            s.check(
                &tiercheck_model::HParams { n_layer: 4, ..tiny_hp() },
                &Attention::LLAMA_DEFAULT,
                512,
            ),
            "the model has 4 of 128",
        ),
        (
            s.check(
                &tiercheck_model::HParams { head_dim: 128, ..tiny_hp() },
                &Attention::LLAMA_DEFAULT,
                512,
            ),
            "the model has 8 of 256",
        ),
    ];
    for (r, want) in cases {
        let e = error_naming(r, file, want);
        assert!(e.contains(want), "{e}");
    }
    // The file itself: a wrong magic, a future version, trailing bytes, a cut.
    let mut bad = good.clone();
    bad[..4].copy_from_slice(b"GGUF");
    let e = error_naming(KvState::parse(Path::new(file), &bad), file, "a GGUF header");
    assert!(e.contains("not a llama.cpp state file"), "{e}");
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&4u32.to_le_bytes());
    let e = error_naming(KvState::parse(Path::new(file), &bad), file, "version 4");
    assert!(e.contains("version 4"), "{e}");
    let mut bad = good.clone();
    bad.extend_from_slice(&[0; 3]);
    let e = error_naming(KvState::parse(Path::new(file), &bad), file, "trailing bytes");
    assert!(e.contains("3 bytes after the cache"), "{e}");
    let e = error_naming(KvState::parse(Path::new(file), &good[..good.len() - 1]), file, "a cut");
    assert!(e.contains("truncated"), "{e}");
}
