//! The `tiercheck` binary end to end: every subcommand on files the test makes, and
//! the errors a user gets for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tiercheck_core::blocks::dequantize;
use tiercheck_core::quant::weights;
use tiercheck_core::{lane, GgmlType, WeightMatrix};
use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_gguf::{GgufFile, GgufWriter, MetaValue};
use tiercheck_model::kernel_inputs::Rng;

fn tiercheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiercheck")).args(args).output().expect("run tiercheck")
}

fn ok(args: &[&str]) -> String {
    let out = tiercheck(args);
    assert!(
        out.status.success(),
        "tiercheck {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = tiercheck(args);
    assert!(!out.status.success(), "tiercheck {args:?} should fail");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "panic instead of an error: {err}");
    err
}

const LAYERS: usize = 8;
const HIDDEN: usize = 256;
const FFN: usize = 512;

/// A small f32 model with the tensor names of a llama.cpp qwen3 GGUF.
fn write_f32_model(path: &Path) {
    let mut rng = Rng::new(7);
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", MetaValue::String("qwen3".into())).unwrap();
    w.add_metadata("qwen3.block_count", MetaValue::U32(LAYERS as u32)).unwrap();
    w.add_metadata("general.file_type", MetaValue::U32(0)).unwrap();
    let mut add = |name: String, dims: &[usize]| {
        let n: usize = dims.iter().product();
        let data: Vec<u8> = rng.normals(n, 0.05).iter().flat_map(|v| v.to_le_bytes()).collect();
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        w.add_tensor(name, &dims, GgmlType::F32, data).unwrap();
    };
    add("token_embd.weight".into(), &[HIDDEN, 64]);
    for l in 0..LAYERS {
        add(format!("blk.{l}.attn_norm.weight"), &[HIDDEN]);
        add(format!("blk.{l}.attn_q.weight"), &[HIDDEN, HIDDEN]);
        add(format!("blk.{l}.attn_v.weight"), &[HIDDEN, 64]);
        add(format!("blk.{l}.ffn_down.weight"), &[FFN, HIDDEN]);
    }
    add("output_norm.weight".into(), &[HIDDEN]);
    add("output.weight".into(), &[HIDDEN, 64]);
    w.write_file(path).unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        write_f32_model(&root.join("f32.gguf"));
        Fixture { _dir: dir, root }
    }
    fn p(&self, name: &str) -> String {
        self.root.join(name).to_string_lossy().into_owned()
    }
}

#[test]
fn lanes_lists_ref_and_cpu_features() {
    let out = ok(&["lanes"]);
    assert!(out.contains("ref"), "{out}");
    assert!(out.contains("cpu features:"), "{out}");
    assert!(out.contains("act_k=q8_K/ref-nearest-even"), "{out}");
    let names: Vec<String> = ok(&["lanes", "--names"]).lines().map(str::to_string).collect();
    let all: Vec<String> = tiercheck_lanes::all().iter().map(|l| l.name.to_string()).collect();
    assert_eq!(names, all);
}

#[test]
fn info_prints_metadata_and_tensor_table() {
    let f = Fixture::new();
    let out = ok(&["gguf", "info", &f.p("f32.gguf")]);
    assert!(out.contains("general.architecture = \"qwen3\""), "{out}");
    assert!(out.contains("blk.7.ffn_down.weight"), "{out}");
    assert!(out.contains("[512, 256]"), "{out}");
}

#[test]
fn quantize_q4_k_m_follows_llama_cpp_rules() {
    let f = Fixture::new();
    ok(&["gguf", "quantize", &f.p("f32.gguf"), &f.p("q4km.gguf"), "--type", "q4_k_m"]);
    let q = GgufFile::open(f.p("q4km.gguf")).unwrap();
    // llama.cpp's use_more_bits for 8 layers picks layers 0, 3, 6, 7 (written out by
    // hand from `i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2`).
    let more = [0usize, 3, 6, 7];
    let ty = |name: &str| q.tensor(name).unwrap().ty;
    assert_eq!(ty("token_embd.weight"), GgmlType::Q4_K);
    assert_eq!(ty("output.weight"), GgmlType::Q6_K);
    assert_eq!(ty("output_norm.weight"), GgmlType::F32);
    for l in 0..LAYERS {
        let want = if more.contains(&l) { GgmlType::Q6_K } else { GgmlType::Q4_K };
        assert_eq!(ty(&format!("blk.{l}.attn_v.weight")), want, "layer {l}");
        assert_eq!(ty(&format!("blk.{l}.ffn_down.weight")), want, "layer {l}");
        assert_eq!(ty(&format!("blk.{l}.attn_q.weight")), GgmlType::Q4_K);
        assert_eq!(ty(&format!("blk.{l}.attn_norm.weight")), GgmlType::F32);
    }
    assert_eq!(q.get("general.file_type"), Some(&MetaValue::U32(15)));
    // The bytes are the reference quantizer's.
    let src = GgufFile::open(f.p("f32.gguf")).unwrap();
    let t = src.tensor("blk.3.ffn_down.weight").unwrap();
    let vals: Vec<f32> = src
        .tensor_data(t)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want = weights::quantize(GgmlType::Q6_K, &vals, HIDDEN, FFN).unwrap();
    assert_eq!(q.tensor_bytes("blk.3.ffn_down.weight").unwrap(), &want[..]);
}

#[test]
fn dequant_writes_the_tensor_as_safetensors() {
    let f = Fixture::new();
    ok(&["gguf", "quantize", &f.p("f32.gguf"), &f.p("q8.gguf"), "--type", "q8_0"]);
    ok(&[
        "gguf",
        "dequant",
        &f.p("q8.gguf"),
        "blk.2.attn_q.weight",
        "--out",
        &f.p("w.safetensors"),
    ]);
    let (ts, meta) = tensorfile::read(Path::new(&f.p("w.safetensors"))).unwrap();
    assert_eq!(ts[0].shape, vec![HIDDEN, HIDDEN]);
    assert_eq!(meta.get("source_type").map(String::as_str), Some("q8_0"));
    let q = GgufFile::open(f.p("q8.gguf")).unwrap();
    let mut want = vec![0.0; HIDDEN * HIDDEN];
    dequantize(GgmlType::Q8_0, q.tensor_bytes("blk.2.attn_q.weight").unwrap(), &mut want).unwrap();
    assert_eq!(ts[0].data.len(), want.len());
    assert!(ts[0].data.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn matmul_replays_the_lane_bitwise_for_gemv_and_gemm() {
    let f = Fixture::new();
    // The ref lane multiplies every quantizable type.
    let schemes = [
        "q4_0",
        "q8_0",
        "q4_k",
        "q6_k",
        "q4_1",
        "q5_0",
        "q5_1",
        "q3_k",
        "q5_k",
        "iq4_nl",
        "uniform:q2_k",
        "uniform:iq4_xs",
    ];
    for scheme in schemes {
        let qfile = f.p(&format!("{}.gguf", scheme.replace(':', "-")));
        ok(&["gguf", "quantize", &f.p("f32.gguf"), &qfile, "--type", scheme]);
        for m in [1usize, 3] {
            let mut rng = Rng::new(m as u64);
            let x = Tensor {
                name: "x".into(),
                shape: vec![m, HIDDEN],
                data: rng.normals(m * HIDDEN, 1.0),
            };
            let xin = f.p(&format!("x{m}.safetensors"));
            tensorfile::write(Path::new(&xin), std::slice::from_ref(&x), &Default::default())
                .unwrap();
            let yout = f.p(&format!("y-{scheme}-{m}.safetensors"));
            let out = tiercheck(&[
                "matmul",
                "--lane",
                "ref",
                "--gguf",
                &qfile,
                "--tensor",
                "blk.1.attn_q.weight",
                "--input",
                &xin,
                "--out",
                &yout,
            ]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("portable"), "says which implementation ran: {err}");
            assert!(err.contains(if m == 1 { "gemv" } else { "gemm" }), "{err}");
            let (y, meta) = tensorfile::read(Path::new(&yout)).unwrap();
            assert_eq!(y[0].shape, vec![m, HIDDEN]);
            assert_eq!(meta.get("lane").map(String::as_str), Some("ref"));
            let q = GgufFile::open(&qfile).unwrap();
            let t = q.tensor("blk.1.attn_q.weight").unwrap();
            let wm = WeightMatrix::new(t.ty, HIDDEN, HIDDEN, q.tensor_data(t)).unwrap();
            let want = lane("ref").unwrap().portable.matmul(&wm, &x.data, m).unwrap();
            assert_eq!(y[0].data.len(), want.len(), "{scheme} m={m}");
            assert!(
                y[0].data.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{scheme} m={m}"
            );
        }
    }
}

#[test]
fn bad_inputs_give_clear_errors_naming_the_file() {
    let f = Fixture::new();
    std::fs::write(f.p("junk.gguf"), b"not a gguf file at all").unwrap();
    let e = fails(&["gguf", "info", &f.p("junk.gguf")]);
    assert!(e.contains("junk.gguf"), "{e}");
    let e = fails(&["gguf", "info", &f.p("missing.gguf")]);
    assert!(e.contains("missing.gguf"), "{e}");
    let e = fails(&["gguf", "dequant", &f.p("f32.gguf"), "nope", "--out", &f.p("o.safetensors")]);
    assert!(e.contains("no tensor named 'nope'"), "{e}");
    let e = fails(&["gguf", "quantize", &f.p("f32.gguf"), &f.p("o.gguf"), "--type", "iq2_xxs"]);
    assert!(e.contains("unknown --type"), "{e}");
    assert!(!Path::new(&f.p("o.gguf")).exists());

    ok(&["gguf", "quantize", &f.p("f32.gguf"), &f.p("q.gguf"), "--type", "q4_k"]);
    let e = fails(&["gguf", "quantize", &f.p("q.gguf"), &f.p("qq.gguf"), "--type", "q8_0"]);
    assert!(e.contains("already q4_K"), "{e}");
    assert!(!Path::new(&f.p("qq.gguf")).exists(), "no output on error");

    let x = Tensor { name: "x".into(), shape: vec![2, 100], data: vec![0.0; 200] };
    tensorfile::write(Path::new(&f.p("x.safetensors")), &[x], &Default::default()).unwrap();
    let base = |lane: &str, imp: &str, tensor: &str| {
        fails(&[
            "matmul",
            "--lane",
            lane,
            "--impl",
            imp,
            "--gguf",
            &f.p("q.gguf"),
            "--tensor",
            tensor,
            "--input",
            &f.p("x.safetensors"),
            "--out",
            &f.p("y.safetensors"),
        ])
    };
    let e = base("ref", "auto", "blk.0.attn_q.weight");
    assert!(e.contains("x.safetensors") && e.contains("100 columns"), "{e}");
    let e = base("nosuch", "auto", "blk.0.attn_q.weight");
    assert!(e.contains("unknown lane `nosuch`") && e.contains("ref"), "{e}");
    let e = base("ref", "native", "blk.0.attn_q.weight");
    assert!(e.contains("--impl native") && e.contains("specification"), "{e}");
    let e = base("ref", "auto", "blk.0.attn_norm.weight");
    assert!(e.contains("matmul needs a 2-D weight"), "{e}");
    // A type the lane does not multiply: refused, with the types it does.
    ok(&["gguf", "quantize", &f.p("f32.gguf"), &f.p("q4_0.gguf"), "--type", "uniform:q4_0"]);
    let e = fails(&[
        "matmul",
        "--lane",
        "hip-wave32",
        "--impl",
        "portable",
        "--gguf",
        &f.p("q4_0.gguf"),
        "--tensor",
        "blk.0.attn_q.weight",
        "--input",
        &f.p("x.safetensors"),
        "--out",
        &f.p("y.safetensors"),
    ]);
    assert!(e.contains("is q4_0") && e.contains("hip-wave32 multiplies"), "{e}");
    std::fs::write(f.p("bad.safetensors"), b"\x08\x00\x00\x00\x00\x00\x00\x00{}").unwrap();
    let e = fails(&[
        "matmul",
        "--lane",
        "ref",
        "--gguf",
        &f.p("q.gguf"),
        "--tensor",
        "blk.0.attn_q.weight",
        "--input",
        &f.p("bad.safetensors"),
        "--out",
        &f.p("y.safetensors"),
    ]);
    assert!(e.contains("bad.safetensors"), "{e}");
    assert!(!Path::new(&f.p("y.safetensors")).exists());
}

/// A small valid embedded-model recipe without a sha256.
const TINY_RECIPE: &str = r#"
architecture = "qwen3"
name = "tiny"
n_embd = 512
n_layer = 1
n_head = 8
n_head_kv = 2
head_dim = 64
n_ff = 256
n_vocab = 64
context_length = 64
rope_freq_base = 1000000.0
rms_eps = 1e-6
seed = 3
embd_std = 0.5
norm_noise_std = 0.05
logit_std = 3.0
quantization = "q4_k_m"
sha256 = ""
"#;

#[test]
fn golden_model_blesses_builds_and_reuses() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("recipe.toml");
    std::fs::write(&recipe, TINY_RECIPE).unwrap();
    let cache = dir.path().join("cache");
    let args = ["golden", "model", "--recipe", recipe.to_str().unwrap()];
    let args: Vec<&str> = args.into_iter().chain(["--cache", cache.to_str().unwrap()]).collect();
    let run = |extra: &[&str], ci: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tiercheck"));
        c.args(&args).args(extra);
        match ci {
            Some(v) => c.env("CI", v),
            None => c.env_remove("CI"),
        };
        c.output().expect("run tiercheck")
    };
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    let out = run(&[], None);
    assert!(!out.status.success());
    assert!(err(&out).contains("no sha256 recorded") && err(&out).contains("--bless"));
    let out = run(&["--bless"], Some("1"));
    assert!(!out.status.success());
    assert!(err(&out).contains("refusing to rewrite"), "{}", err(&out));

    let out = run(&["--bless"], None);
    assert!(out.status.success(), "{}", err(&out));
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let text = std::fs::read_to_string(&recipe).unwrap();
    let sha = text.lines().find_map(|l| l.strip_prefix("sha256 = \"")).unwrap();
    let sha = sha.trim_end_matches('"');
    assert_eq!(path, cache.join("model").join(format!("{sha}.gguf")));
    assert_eq!(GgufFile::open(&path).unwrap().get_str("general.name").unwrap(), "tiny");

    let out = run(&[], Some("1"));
    assert!(out.status.success(), "{}", err(&out));
    assert!(err(&out).contains("reused"), "{}", err(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), path.to_str().unwrap());
}

#[test]
fn golden_model_shape_writes_reuses_and_refuses_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let c = cache.to_str().unwrap();
    let base = ["golden", "model", "--shape", "0.6b", "--layers", "1", "--vocab", "512"];
    let args: Vec<&str> = base.into_iter().chain(["--cache", c, "--quiet"]).collect();
    let path = PathBuf::from(ok(&args).trim());
    assert_eq!(path, cache.join("model/shape-qwen3-0.6b-L1-V512-q4_k_m-s20261202.gguf"));
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.get_u32("qwen3.embedding_length").unwrap(), 1024);
    assert_eq!(f.get_u32("qwen3.block_count").unwrap(), 1);
    assert!(f.tensor("output.weight").is_none(), "qwen3-0.6b ties its output");
    let first = std::fs::read(&path).unwrap();
    let again = tiercheck(&args);
    assert!(String::from_utf8_lossy(&again.stderr).contains("reused"));
    let out = dir.path().join("x.gguf");
    let with_out: Vec<&str> =
        args.iter().copied().chain(["--out", out.to_str().unwrap(), "--threads", "3"]).collect();
    ok(&with_out);
    assert_eq!(std::fs::read(&out).unwrap(), first, "thread counts give the same bytes");

    for (bad, want) in [
        (&["golden", "model", "--shape", "27b"][..], "unknown shape \"27b\""),
        (&["golden", "model", "--shape", "8b", "--layers", "37"], "has 36 layers"),
        (&["golden", "model", "--shape", "8b", "--quantization", "iq2_xs"], "iq2_xs"),
        (&["golden", "model", "--layers", "2"], "--shape"),
        (&["golden", "model", "--shape", "8b", "--bless"], "cannot be used with"),
    ] {
        let err = fails(bad);
        assert!(err.contains(want), "{bad:?}: {err}");
    }
    // An unwritable destination is an error naming it, and leaves nothing behind.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let target = blocker.join("m.gguf");
    let bad: Vec<&str> = base.into_iter().chain(["--out", target.to_str().unwrap()]).collect();
    let err = fails(&bad);
    assert!(err.contains(blocker.to_str().unwrap()), "{err}");
}

/// Peak resident memory of `tiercheck args`, in bytes, as the kernel counts it for a
/// finished child (Python's `getrusage(RUSAGE_CHILDREN).ru_maxrss`, an independent
/// reader of the same number `/usr/bin/time` prints).
fn peak_rss(args: &[&str]) -> u64 {
    let script = "import resource, subprocess, sys\n\
                  r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n\
                  assert r.returncode == 0, r.stderr.decode()\n\
                  print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let out = Command::new("python3")
        .args(["-c", script, env!("CARGO_BIN_EXE_tiercheck")])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().parse::<u64>().unwrap() * 1024
}

/// Peak memory is the model file plus what a lane copies, not more: a repacked lane
/// releases the mapped pages of the weights it repacked (so its peak stays near one
/// copy of the weights, not two), and a plain lane maps the file without copying it.
#[test]
fn peak_memory_is_one_copy_of_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    let m = model.to_str().unwrap();
    ok(&["golden", "model", "--shape", "1.7b", "--layers", "8", "--vocab", "32768", "--out", m]);
    let file = std::fs::metadata(&model).unwrap().len();
    assert!(file > 200 << 20, "{file} bytes");
    let trace = dir.path().join("t.safetensors");
    let t = trace.to_str().unwrap();
    let slack = 64u64 << 20;
    for lane in ["aarch64-i8mm-repack", "x86_64-avx2-repack", "aarch64-neon"] {
        let args = [
            "run",
            "--lane",
            lane,
            "--model",
            m,
            "--teacher-force",
            "1,2,3",
            "--mode",
            "decode",
            "--steps",
            "0",
            "--quiet",
            "--out",
            t,
        ];
        let peak = peak_rss(&args);
        let mib = |b: u64| b >> 20;
        eprintln!("{lane}: peak {} MiB for a {} MiB file", mib(peak), mib(file));
        assert!(
            peak < file + file / 2 + slack,
            "{lane}: peak {} MiB, file {} MiB: the plain pages of repacked weights stay resident",
            mib(peak),
            mib(file)
        );
    }
}

#[test]
fn run_writes_a_trace_with_taps_steps_and_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.safetensors");
    let o = out.to_str().unwrap();
    ok(&[
        "run",
        "--lane",
        "x86_64-avx2",
        "--prompt",
        "short-4",
        "--steps",
        "3",
        "--out",
        o,
        "--quiet",
    ]);
    let t = tiercheck_model::sequence::read_trace(&out).unwrap();
    // The prompt as one batch, then two greedy single-token steps.
    assert_eq!(t.steps.len(), 3);
    assert_eq!(t.steps[0].input_ids, vec![17, 2045, 388, 901]);
    assert_eq!(t.steps[1].input_ids, vec![t.steps[0].emitted]);
    assert_eq!(t.steps[2].positions, vec![5]);
    assert_eq!(t.steps[0].top.len(), 5);
    assert!(t.steps.iter().all(|s| s.gap >= 0.0 && s.top[0].0 == s.emitted));
    assert_eq!(t.taps[&(0, "attn_norm-0".to_string())].shape, vec![4, 512]);
    assert_eq!(t.taps[&(2, "result_output".to_string())].shape, vec![1, 3072]);
    assert_eq!(t.taps.len(), 3 * (1 + 10 * 8 + 2));
    // `--threads` defaults to the available cores (and is recorded).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    for (k, v) in [
        ("lane", "x86_64-avx2"),
        ("mode", "prompt"),
        ("residual", "f32"),
        ("threads", cores.as_str()),
        ("producer", "tiercheck"),
    ] {
        assert_eq!(t.meta.get(k).map(String::as_str), Some(v), "metadata {k}");
    }
    assert_eq!(t.meta["prompt_ids"], "[17,2045,388,901]");
    for k in [
        "impl",
        "cpu_features",
        "repack",
        "matmul_paths",
        "model_sha256",
        "git_revision",
        "tiercheck_version",
        "elem",
    ] {
        assert!(t.meta.contains_key(k), "metadata lacks {k}");
    }
}

#[test]
fn run_teacher_forced_decode_mode_is_one_step_per_id() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.safetensors");
    let args = ["run", "--lane", "ref", "--teacher-force", "1,250,1999", "--mode", "decode"];
    ok(&[&args[..], &["--out", out.to_str().unwrap(), "--quiet"]].concat());
    let t = tiercheck_model::sequence::read_trace(&out).unwrap();
    assert_eq!(t.steps.len(), 3);
    assert_eq!(t.steps.iter().map(|s| s.input_ids[0]).collect::<Vec<_>>(), vec![1, 250, 1999]);
    assert_eq!(t.taps[&(2, "Qcur-7".to_string())].shape, vec![1, 512]);
}

#[test]
fn run_and_matrix_refuse_bad_input_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"not a gguf").unwrap();
    let j = junk.to_str().unwrap();
    let e = fails(&["run", "--lane", "ref", "--teacher-force", "1,x"]);
    assert!(e.contains("--teacher-force"), "{e}");
    let e = fails(&["run", "--lane", "ref", "--teacher-force", "99999"]);
    assert!(e.contains("token id 99999 is out of range"), "{e}");
    let e = fails(&["run", "--lane", "ref", "--teacher-force", "1", "--ctx", "300"]);
    assert!(e.contains("multiple of 256"), "{e}");
    let e = fails(&["run", "--lane", "nope", "--teacher-force", "1"]);
    assert!(e.contains("unknown lane"), "{e}");
    let e = fails(&["run", "--lane", "ref", "--model", j, "--teacher-force", "1"]);
    assert!(e.contains(j), "{e}");
    let e = fails(&["run", "--lane", "ref", "--prompt", "no-such-prompt"]);
    assert!(e.contains("no prompt named 'no-such-prompt'"), "{e}");
    let t = dir.path().join("x.safetensors");
    let e = fails(&["run", "--lane", "ref", "--steps", "1", "--out", t.to_str().unwrap()]);
    assert!(e.contains("need a folder"), "{e}");
    // A qwen3 file without the hyper-parameters.
    let llama = dir.path().join("llama.gguf");
    write_f32_model(&llama);
    let e = fails(&[
        "run",
        "--lane",
        "ref",
        "--model",
        llama.to_str().unwrap(),
        "--teacher-force",
        "1",
    ]);
    assert!(
        e.contains("llama.gguf") && (e.contains("not supported") || e.contains("missing")),
        "{e}"
    );
    let e = fails(&["matrix", "--lanes", "ref,bogus"]);
    assert!(e.contains("unknown lane `bogus`"), "{e}");
    let e = fails(&["matrix", "--aarch64-bin", "/no/such/binary", "--steps", "1"]);
    assert!(e.contains("/no/such/binary"), "{e}");
}

/// `attribute --layers` and `--whole-model`, and the stage costs of `delta`.
#[test]
fn attribute_layers_and_delta_costs() {
    let e = fails(&["attribute", "x86_64-avx2", "aarch64-neon", "--layers", "1,x"]);
    assert!(e.contains("--layers: 'x' is not a layer index"), "{e}");
    let e = fails(&["attribute", "x86_64-avx2", "aarch64-neon", "--layers", ","]);
    assert!(e.contains("--layers: no layer given"), "{e}");
    let e = fails(&["attribute", "x86_64-avx2", "aarch64-neon", "--steps", "2", "--layers", "9"]);
    assert!(e.contains("layer 9 is not below the model's 8"), "{e}");
    let e = fails(&["attribute", "x86_64-avx2", "aarch64-neon", "--layers", "1", "--whole-model"]);
    assert!(e.contains("cannot be used with"), "{e}");
    let out = ok(&["attribute", "x86_64-avx2", "aarch64-neon", "--steps", "4", "--layers", "3,1"]);
    assert!(out.contains("layer-local on layers 1, 3, fed B's inputs"), "{out}");
    assert!(out.contains("COST:") && out.contains("composites"), "{out}");
    let out = ok(&["attribute", "x86_64-avx2", "aarch64-neon", "--steps", "4", "--whole-model"]);
    assert!(out.contains("4 steps of B's greedy sequence, teacher-forced"), "{out}");
    let out = ok(&["delta", "x86_64-avx2", "x86_64-avx2", "--steps", "2"]);
    assert!(
        out.contains("floor: not measured (not needed: every compared tap is bitwise equal)"),
        "{out}"
    );
    assert!(out.contains("COST:") && out.contains("free-running runs"), "{out}");
}

#[test]
fn matrix_json_compares_every_lane_with_ref() {
    let out = ok(&[
        "matrix",
        "--lanes",
        "x86_64-avx2-repack,aarch64-neon",
        "--portable",
        "--prompt",
        "short-4",
        "--steps",
        "3",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let lanes = v["lanes"].as_array().unwrap();
    let names: Vec<&str> = lanes.iter().map(|l| l["lane"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["ref", "x86_64-avx2-repack", "aarch64-neon"]);
    for l in lanes {
        assert_eq!(l["how"], "portable");
        let a = &l["agreement"][0];
        assert_eq!(a["name"], "short-4");
        assert_eq!(a["of"], 3);
        assert!(a["agree"].as_u64().unwrap() <= 3);
        assert_eq!(l["prompts"][0]["generated"].as_array().unwrap().len(), 3);
    }
    assert_eq!(lanes[0]["agreement"][0]["agree"], 3, "ref agrees with itself");
}

#[test]
fn matrix_jobs_change_only_the_wall_times() {
    let run = |jobs: &str| {
        let out = ok(&[
            "matrix",
            "--lanes",
            "x86_64-avx2,aarch64-neon-repack,hip-wave32",
            "--portable",
            "--prompt",
            "mixed-7",
            "--steps",
            "4",
            "--jobs",
            jobs,
            "--threads",
            "1",
            "--json",
        ]);
        // Everything but the wall times (of the run, each lane and each prompt).
        fn strip(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Object(m) => {
                    m.remove("wall_s");
                    m.values_mut().for_each(strip);
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
        strip(&mut v);
        v
    };
    let one = run("1");
    let three = run("3");
    assert_eq!(one, three, "--jobs 3 changed a result");
    let names: Vec<&str> =
        three["lanes"].as_array().unwrap().iter().map(|l| l["lane"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["ref", "x86_64-avx2", "aarch64-neon-repack", "hip-wave32"]);
    let e = fails(&["matrix", "--jobs", "0"]);
    assert!(e.contains("--jobs"), "{e}");
}

/// `--state`: a run continues after the cells of a cache llama.cpp saved (a sequence
/// state its haswell build wrote for the embedded model: 3 cells, F16, flash attention),
/// its trace records the file, `identify` needs the same file to replay it, and what does
/// not fit is refused with the file named.
#[test]
fn runs_continue_from_a_saved_cache() {
    let f = Fixture::new();
    let seed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/state/seq-f16-fa-3-cells.state");
    let seed = seed.to_str().unwrap();
    let trace = f.p("from-state.safetensors");
    let run = |extra: &[&str]| {
        let mut a = vec!["run", "--lane", "ref", "--teacher-force", "5", "--mode", "decode"];
        a.extend_from_slice(&["--steps", "2", "--state", seed, "--out", &trace]);
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let args = run(&[]);
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let t = tiercheck_model::sequence::read_trace(Path::new(&trace)).unwrap();
    assert_eq!(t.meta["state_cells"], "3");
    assert_eq!(t.steps[0].positions, vec![3]);
    assert_eq!(t.steps[1].positions, vec![4]);
    let e = fails(&["identify", &trace, "--lanes", "ref"]);
    assert!(e.contains("pass it with --state") && e.contains("3 cells"), "{e}");
    let out = ok(&["identify", &trace, "--lanes", "ref", "--state", seed]);
    assert!(out.contains("explained"), "{out}");
    let args = run(&["--kv", "f32", "--fa", "off"]);
    let e = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(e.contains("seq-f16-fa-3-cells.state") && e.contains("pass --kv f16 --fa on"), "{e}");
    let e = fails(&["run", "--lane", "ref", "--teacher-force", "5", "--state", &f.p("none.state")]);
    assert!(e.contains("none.state") && e.contains("cannot read"), "{e}");
    std::fs::write(f.p("junk.state"), b"ggsq").unwrap();
    let e = fails(&["run", "--lane", "ref", "--teacher-force", "5", "--state", &f.p("junk.state")]);
    assert!(e.contains("junk.state") && e.contains("truncated"), "{e}");
}

/// `tiercheck targets --tiers-shell`, evaluated by bash, holds the aarch64 table's oracle
/// builds as `ci/oracle` reads them; bad arguments and tables give clear errors.
#[test]
fn targets_tiers_shell_evaluates_to_the_table() {
    let table = tiercheck_targets::load_arch("aarch64").unwrap();
    let shell = ok(&[
        "targets",
        "--triple",
        "aarch64-unknown-linux-gnu",
        "--tiers-shell",
        "--prefix",
        "ARM_",
    ]);
    let script = "set -eu\neval \"$1\"\nfor t in \"${ARM_TIERS[@]}\"; do\n\
                  printf '%s|%s|%s|%s|%s|%s|%s\\n' \"$t\" \"${ARM_MARCH[$t]}\" \
                  \"${ARM_QEMU_CPU[$t]}\" \"${ARM_INFO[$t]}\" \"${ARM_ENV[$t]}\" \
                  \"${ARM_LLAMA_ENV[$t]}\" \"${ARM_PROVES[$t]}\"\ndone";
    let out = Command::new("bash").args(["-c", script, "bash", &shell]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<String> =
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
    let want: Vec<String> = table
        .tiers
        .iter()
        .map(|t| {
            format!(
                "{}|{}|{}|{}|{}|{}|{}",
                t.name,
                t.march,
                table.tier_qemu_cpu(t),
                t.info.join(" "),
                t.env,
                t.llama_env,
                t.proves.join(" ")
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.iter().any(|l| l.starts_with("arm-i8mm|armv8.6-a+dotprod+i8mm|max,sve=off|")));

    let e = fails(&["targets", "--triple", "nope-unknown-linux-gnu", "--tiers-shell"]);
    assert!(e.contains("nope-unknown-linux-gnu.toml"), "{e}");
    let e = fails(&["targets", "--prefix", "ARM_"]);
    assert!(e.contains("--tiers-shell"), "{e}");
    let e = fails(&["targets", "--tiers-shell", "--prefix", "A-"]);
    assert!(e.contains("cannot start a shell variable name"), "{e}");
    // A table naming a lane the registry does not know.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        tiercheck_targets::targets_dir().join("aarch64-unknown-linux-gnu.toml"),
    )
    .unwrap()
    .replacen("\"ref\", ", "\"ref\", \"warp-drive\", ", 1);
    let file = dir.path().join("aarch64-unknown-linux-gnu.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args(["targets", "--triple", "aarch64-unknown-linux-gnu", "--tiers-shell"])
        .env("TIERCHECK_TARGETS_DIR", dir.path())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{e}");
    assert!(
        e.contains(&file.display().to_string()) && e.contains("unknown lane `warp-drive`"),
        "{e}"
    );
}

/// The text of `doc` between its `<!-- lanes:begin ... -->` and `<!-- lanes:end -->`
/// lines, or what is wrong with the markers.
fn generated_part(doc: &str) -> Result<String, String> {
    let lines: Vec<&str> = doc.lines().collect();
    let begin: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].starts_with("<!-- lanes:begin")).collect();
    let end: Vec<usize> = (0..lines.len()).filter(|&i| lines[i] == "<!-- lanes:end -->").collect();
    match (begin.as_slice(), end.as_slice()) {
        ([b], [e]) if b < e => Ok(lines[b + 1..*e].iter().map(|l| format!("{l}\n")).collect()),
        _ => Err(format!(
            "expected one `<!-- lanes:begin ... -->` line before one `<!-- lanes:end -->` \
             line, found begin at lines {begin:?} and end at {end:?} (0-based)"
        )),
    }
}

/// Where `got` differs from `want`, line by line, as `-want` / `+got` pairs.
fn line_diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = String::new();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i), g.get(i));
        if a != b {
            if let Some(a) = a {
                out.push_str(&format!("  row {:>2} -generated: {a}\n", i + 1));
            }
            if let Some(b) = b {
                out.push_str(&format!("  row {:>2} +in file:   {b}\n", i + 1));
            }
        }
    }
    out
}

/// README.md's and docs/LANES.md's lane tables are the output of `tiercheck lanes
/// --markdown` (the lanes' summaries and `Status`), so no status is restated by hand.
#[test]
fn lane_tables_in_the_docs_are_generated() {
    let table = ok(&["lanes", "--markdown"]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 2 + tiercheck_core::LANES.len(), "{table}");
    assert!(rows.iter().any(|r| r.starts_with("| `ref` | portable |")), "{table}");
    for r in &rows[2..] {
        assert!(r.len() < 400, "a row of {} characters: {r}", r.len());
    }
    assert!(table.contains("| **proven**: kernel, decode, prompt, cli |"), "{table}");
    assert!(table.contains("| **modelled** |"), "{table}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut problems = Vec::new();
    for doc in ["README.md", "docs/LANES.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        match generated_part(&text) {
            Ok(part) if part == table => {}
            Ok(part) => problems.push(format!("{doc}:\n{}", line_diff(&table, &part))),
            Err(e) => problems.push(format!("{doc}: {e}")),
        }
    }
    assert!(
        problems.is_empty(),
        "the lane tables differ from the lanes' data:\n{}\nregenerate them: run \
         `cargo run -p tiercheck -- lanes --markdown` and put its output between the \
         `<!-- lanes:begin ... -->` and `<!-- lanes:end -->` lines of README.md and \
         docs/LANES.md",
        problems.join("\n")
    );
    // The checks themselves see a changed row and a missing marker.
    let edited = table.replacen("**proven**", "**modelled**", 1);
    assert!(line_diff(&table, &edited).contains("row  3 -generated: | `ref`"));
    assert!(generated_part("<!-- lanes:end -->\n").is_err());
    let doc = format!("x\n<!-- lanes:begin (generated) -->\n{table}<!-- lanes:end -->\ny\n");
    assert_eq!(generated_part(&doc).unwrap(), table);
}

/// A tiny model of scheme `scheme` built by `golden model` in `dir`: its path.
fn tiny_model(dir: &std::path::Path, scheme: &str) -> String {
    let recipe = dir.join(format!("recipe-{scheme}.toml"));
    std::fs::write(&recipe, TINY_RECIPE.replace("\"q4_k_m\"", &format!("\"{scheme}\""))).unwrap();
    let cache = dir.join(format!("cache-{scheme}"));
    let out = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args(["golden", "model", "--recipe", recipe.to_str().unwrap(), "--bless"])
        .args(["--cache", cache.to_str().unwrap()])
        .env_remove("CI")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A model of another weight type runs on the lanes that multiply it (`ref`: all twelve;
/// the x86 lanes; the GPU lanes all but Q4_0) and is refused, naming the tensor and its
/// type, by a lane that does not (a GPU lane, on a Q4_0 model).
#[test]
fn a_q5_k_m_model_runs_on_ref_x86_and_gpu_and_q4_0_is_refused_by_a_gpu_lane() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path(), "q5_k_m");
    let f = GgufFile::open(&model).unwrap();
    assert_eq!(f.tensor("blk.0.attn_q.weight").unwrap().ty, GgmlType::Q5_K);
    let trace = dir.path().join("t.safetensors");
    let t = trace.to_str().unwrap();
    let run = ["run", "--model", &model, "--teacher-force", "1,2,3", "--steps", "1", "--quiet"];
    ok(&[&run[..], &["--lane", "ref", "--out", t]].concat());
    let steps = tiercheck_model::sequence::read_trace(&trace).unwrap().steps;
    assert_eq!(steps[0].input_ids, vec![1, 2, 3]);
    assert!(steps.iter().all(|s| s.top.iter().all(|(_, l)| l.is_finite())), "{:?}", steps[0].top);
    let avx2 = dir.path().join("avx2.safetensors");
    ok(&[
        &run[..],
        &["--lane", "x86_64-avx2", "--impl", "portable", "--out"],
        &[avx2.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(
        tiercheck_model::sequence::read_trace(&avx2).unwrap().steps[0].input_ids,
        vec![1, 2, 3]
    );
    let gpu = dir.path().join("gpu.safetensors");
    ok(&[
        &run[..],
        &["--lane", "hip-wave32", "--impl", "portable", "--out"],
        &[gpu.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(
        tiercheck_model::sequence::read_trace(&gpu).unwrap().steps[0].input_ids,
        vec![1, 2, 3]
    );
    let q4_0 = tiny_model(dir.path(), "q4_0");
    let run = ["run", "--model", &q4_0, "--teacher-force", "1,2,3", "--steps", "1", "--quiet"];
    let e = fails(&[&run[..], &["--lane", "hip-wave32", "--impl", "portable"]].concat());
    assert!(e.contains("blk.0.attn_q.weight") && e.contains("q4_0"), "{e}");
    assert!(e.contains("does not multiply"), "{e}");
}
