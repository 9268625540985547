//! A trace replays its own run: `identify` and `delta` take the model, context and tier
//! threads a trace records, with no flag repeated; a moved or different model and a
//! contradicting flag are clear errors; and traces of other vocabularies, layer counts
//! and lengths are errors naming the file, never panics.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tiercheck_analysis::{delta, identify, DeltaOptions, Source};
use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded::{self, Recipe};
use tiercheck_model::sequence::read_trace;
use tiercheck_model::{import, Attention, Batching, Mode, Model, Residual};

fn bin(args: &[&str], env: Option<(&str, &Path)>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tiercheck"));
    c.args(args).env_remove("TIERCHECK_MODELS");
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    c.output().expect("run tiercheck")
}

fn ok(args: &[&str], env: Option<(&str, &Path)>) -> String {
    let o = bin(args, env);
    assert!(o.status.success(), "tiercheck {args:?}:\n{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn fails(args: &[&str], env: Option<(&str, &Path)>) -> String {
    let o = bin(args, env);
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "tiercheck {args:?} should fail");
    assert!(!e.contains("panicked"), "a panic instead of an error: {e}");
    e
}

/// The embedded recipe with another vocabulary and two layers, generated into `dir`.
fn small_model(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(Recipe::default_path()).unwrap();
    assert!(text.contains("n_vocab = 3072") && text.contains("n_layer = 8"));
    let text =
        text.replace("n_vocab = 3072", "n_vocab = 1000").replace("n_layer = 8", "n_layer = 2");
    let recipe = Recipe::parse("small", &text).unwrap();
    let path = dir.join("m.gguf");
    std::fs::write(&path, embedded::generate(&recipe).unwrap()).unwrap();
    path
}

/// 520 prompt ids: more than the default context of 512 holds.
fn long_ids() -> String {
    (0..520).map(|i| ((i * 37 + 11) % 1000).to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn a_trace_replays_its_model_context_and_tier_threads_without_flags() {
    let dir = tempfile::tempdir().unwrap();
    let model = small_model(dir.path());
    let m = model.to_str().unwrap();
    let sha = Model::open(&model).unwrap().sha256;
    let ids = long_ids();
    let a = dir.path().join("a.safetensors");
    let b = dir.path().join("b.safetensors");
    let (at, bt) = (a.to_str().unwrap(), b.to_str().unwrap());
    for (lane, out) in [("x86_64-avx2", at), ("ref", bt)] {
        ok(
            &[
                "run",
                "--lane",
                lane,
                "--impl",
                "portable",
                "--model",
                m,
                "--teacher-force",
                &ids,
                "--ctx",
                "1024",
                "--tier-threads",
                "2",
                "--steps",
                "2",
                "--quiet",
                "--out",
                out,
            ],
            None,
        );
    }
    let t = read_trace(&a).unwrap();
    assert_eq!(t.meta["n_ctx"], "1024");
    assert_eq!(t.meta["model_sha256"], sha);
    let lanes_arg = ["--lanes", "x86_64-avx2,ref", "--impl", "portable", "--floor-seeds", "0"];
    let id = |extra: &[&str], env| {
        ok(&[&["identify", at, "--json"], &lanes_arg[..], extra].concat(), env)
    };
    let j: serde_json::Value = serde_json::from_str(&id(&[], None)).unwrap();
    assert_eq!(j["explained"], serde_json::json!(true), "{j}");
    assert_eq!(j["best_lane"], serde_json::json!("x86_64-avx2"), "{j}");
    let dl = |x: &str, y: &str, extra: &[&str], env| {
        let args = ["delta", x, y, "--impl", "portable", "--floor-seeds", "0", "--json"];
        let out = ok(&[&args[..], extra].concat(), env);
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let r = dl(at, "x86_64-avx2", &[], None);
    assert_eq!(r["headline"]["kind"], serde_json::json!("identical"), "{}", r["headline"]);
    assert_eq!(r["model_sha256"], serde_json::json!(sha));
    // A second trace of the same model is compared on that model.
    let r = dl(at, bt, &[], None);
    assert_eq!(r["model_sha256"], serde_json::json!(sha));
    assert_ne!(r["headline"]["kind"], serde_json::json!("not-lane"), "{}", r["headline"]);
    // Flags that say what the trace says are accepted; flags that contradict it are not.
    dl(at, "x86_64-avx2", &["--ctx", "1024", "--tier-threads", "2", "--model", m], None);
    let e = fails(&["identify", at, "--ctx", "512"], None);
    assert!(e.contains("--ctx 512 contradicts") && e.contains("n_ctx = 1024"), "{e}");
    let e = fails(&["attribute", at, "ref", "--ctx", "512"], None);
    assert!(e.contains("--ctx 512 contradicts"), "{e}");
    let e = fails(&["delta", at, "ref", "--tier-threads", "4"], None);
    assert!(e.contains("--tier-threads 4 contradicts") && e.contains("a.safetensors"), "{e}");
    let embedded = embedded::ensure_model(None).unwrap();
    let e = fails(&["delta", at, "ref", "--model", embedded.to_str().unwrap()], None);
    assert!(e.contains(&sha) && e.contains("3503cc44c954"), "{e}");
    // The model moved away: both refuse, naming its hash and where they looked ...
    let away = dir.path().join("away");
    std::fs::create_dir(&away).unwrap();
    std::fs::rename(&model, away.join("m.gguf")).unwrap();
    for args in
        [&["identify", at][..], &["delta", at, "x86_64-avx2"][..], &["attribute", at, "ref"]]
    {
        let e = fails(args, None);
        assert!(e.contains(&sha) && e.contains(m) && e.contains("--model"), "{e}");
    }
    // ... and find it through $TIERCHECK_MODELS, by its recorded file name.
    let env = Some(("TIERCHECK_MODELS", away.as_path()));
    let r = dl(at, "x86_64-avx2", &[], env);
    assert_eq!(r["headline"]["kind"], serde_json::json!("identical"), "{}", r["headline"]);
    let j: serde_json::Value = serde_json::from_str(&id(&[], env)).unwrap();
    assert_eq!(j["explained"], serde_json::json!(true), "{j}");
    // Another file under the recorded name is not the model.
    std::fs::copy(&embedded, &model).unwrap();
    let e = fails(&["identify", at], None);
    assert!(e.contains(&sha) && e.contains("3503cc44c954"), "{e}");
}

fn delta_opts() -> DeltaOptions {
    DeltaOptions {
        dump: Default::default(),
        ids: Vec::new(),
        steps: 0,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        n_ctx: 512,
        attn: Attention::F32_OFF,
        threshold: 0.2,
        floor_seeds: 0,
        threads: 1,
        state: None,
    }
}

/// Traces whose shapes are not the model's — another vocabulary, a layer the model does
/// not have, rows missing or added, ids outside the vocabulary, step records and taps
/// that disagree, steps dropped — given to `delta` and `identify` on the embedded model:
/// each one an error naming the file, never a panic. The mutations are drawn from a
/// seeded generator, 48 of them; each kind is drawn at least once.
#[test]
fn traces_of_other_shapes_are_errors_never_panics() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.safetensors");
    let st = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args(["run", "--lane", "ref", "--impl", "portable", "--teacher-force", "5,17,900,3"])
        .args([
            "--steps", "2", "--mode", "decode", "--kv", "f32", "--fa", "off", "--quiet", "--out",
        ])
        .arg(&base)
        .status()
        .unwrap();
    assert!(st.success());
    let good = read_trace(&base).unwrap();
    let hp = &model.hp;
    let refl = Source::Lane(lanes::choose(lanes::find("ref").unwrap(), Impl::Portable).unwrap());
    let mut rng = tiercheck_core::rng::Rng::new(0x7ace);
    let mut below = |n: usize| rng.below(n as u64) as usize;
    let mut kinds = [0usize; 8];
    for i in 0..48 {
        let mut t = good.clone();
        // Half of them say nothing about their model, as an engine's dump would not.
        if i % 2 == 1 {
            t.meta.remove("model_sha256");
        }
        let steps = t.steps.len();
        let s = below(steps);
        let kind = if i < kinds.len() { i } else { below(kinds.len()) };
        kinds[kind] += 1;
        let grow = 1 + below(400);
        let want = match kind {
            // Another vocabulary: the logits of every step wider or narrower.
            0 => {
                let narrower = below(2) == 0;
                for ((_, name), x) in t.taps.iter_mut() {
                    if name == "result_output" {
                        let w = if narrower {
                            hp.n_vocab - grow.min(hp.n_vocab - 1)
                        } else {
                            hp.n_vocab + grow
                        };
                        x.data.resize(w * x.shape[0], 0.5);
                        x.shape[1] = w;
                    }
                }
                "wide"
            }
            // Another layer count: a layer past the model's.
            1 => {
                let l = hp.n_layer + below(4);
                let mut x = t.taps[&(s, "l_out-0".to_string())].clone();
                x.name = tiercheck_model::sequence::tap_key(s, &format!("l_out-{l}"));
                t.taps.insert((s, format!("l_out-{l}")), x);
                "past the model's"
            }
            // A tap with a row too many.
            2 => {
                let x = t.taps.get_mut(&(s, "ffn_norm-3".to_string())).unwrap();
                x.data.extend(vec![0.0; x.shape[1]]);
                x.shape[0] += 1;
                "rows"
            }
            // An id outside the vocabulary.
            3 => {
                t.steps[s].input_ids[0] = (hp.n_vocab + grow) as u32;
                "vocabulary"
            }
            // An emitted token outside the vocabulary.
            4 => {
                t.steps[s].emitted = (hp.n_vocab + grow) as u32;
                "vocabulary"
            }
            // A step record dropped, its taps kept.
            5 => {
                t.steps.remove(s);
                "no step record"
            }
            // A step with more positions than ids.
            6 => {
                t.steps[s].positions.push(999);
                "one id per position"
            }
            // A hidden-width tap of another model width.
            _ => {
                let x = t.taps.get_mut(&(s, "attn_norm-1".to_string())).unwrap();
                x.data.truncate(x.data.len() - x.shape[0] * 64);
                x.shape[1] -= 64;
                "wide"
            }
        };
        let path = dir.path().join(format!("m{i}.safetensors"));
        import::write(&path, &t).unwrap();
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let d = delta(&model, &Source::Trace(path.clone()), &refl, &delta_opts());
            let io = identify::IdentifyOptions {
                lanes: Some(vec![lanes::find("ref").unwrap()]),
                imp: Impl::Portable,
                residual: Residual::F32,
                n_ctx: 512,
                floor_seeds: 0,
                dump: Default::default(),
                threads: 1,
                state: None,
            };
            let r = identify::identify(&model, &path, &io);
            (d.err().map(|e| e.to_string()), r.err().map(|e| e.to_string()))
        }));
        let (d, r) = run.unwrap_or_else(|_| panic!("mutation {i} (kind {kind}) panicked"));
        for (what, e) in [("delta", d), ("identify", r)] {
            let e = e.unwrap_or_else(|| panic!("{what} accepted mutation {i} (kind {kind})"));
            assert!(
                e.contains(&format!("m{i}.safetensors")) && e.contains(want),
                "{what} {i}: {e}"
            );
        }
    }
    assert!(kinds.iter().all(|&n| n > 0), "{kinds:?}");
}

/// Two traces of one model but different lengths (one stopped early) are compared over
/// the steps both have; a trace of a model with another vocabulary analysed with this
/// model is an error naming both hashes.
#[test]
fn traces_of_different_lengths_compare_and_another_models_trace_is_refused() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = |lane: &str, steps: &str, out: &Path, m: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tiercheck"));
        c.args(["run", "--lane", lane, "--impl", "portable", "--teacher-force", "5,17,900,3"])
            .args(["--steps", steps, "--quiet", "--out"])
            .arg(out);
        if let Some(m) = m {
            c.arg("--model").arg(m);
        }
        assert!(c.status().unwrap().success());
    };
    let (long, short) = (dir.path().join("long.safetensors"), dir.path().join("short.safetensors"));
    run("ref", "6", &long, None);
    run("x86_64-avx2", "2", &short, None);
    let r =
        delta(&model, &Source::Trace(long.clone()), &Source::Trace(short.clone()), &delta_opts())
            .unwrap();
    assert_eq!(r.tokens_a.len(), 6);
    assert_eq!(r.tokens_b.len(), 2);
    let small = small_model(dir.path());
    let other = dir.path().join("other.safetensors");
    run("ref", "2", &other, Some(&small));
    let e = delta(&model, &Source::Trace(other), &Source::Trace(long), &delta_opts())
        .unwrap_err()
        .to_string();
    let theirs = Model::open(&small).unwrap().sha256;
    assert!(e.contains(&theirs) && e.contains(&model.sha256), "{e}");
}

/// A trace made with a relative `--model` records the model's absolute path, so an
/// analysis run from another folder finds it.
#[test]
fn a_relative_model_path_is_recorded_absolute() {
    let dir = tempfile::tempdir().unwrap();
    small_model(dir.path());
    let st = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .current_dir(dir.path())
        .args(["run", "--lane", "ref", "--impl", "portable", "--model", "m.gguf"])
        .args(["--teacher-force", "5,17,900", "--steps", "1", "--quiet", "--out", "t.safetensors"])
        .status()
        .unwrap();
    assert!(st.success());
    let t = dir.path().join("t.safetensors");
    let recorded = read_trace(&t).unwrap().meta["model_path"].clone();
    assert!(Path::new(&recorded).is_absolute(), "{recorded}");
    let r = ok(
        &[
            "delta",
            t.to_str().unwrap(),
            "ref",
            "--impl",
            "portable",
            "--floor-seeds",
            "0",
            "--json",
        ],
        None,
    );
    let j: serde_json::Value = serde_json::from_str(&r).unwrap();
    assert_eq!(j["headline"]["kind"], serde_json::json!("identical"), "{}", j["headline"]);
}
