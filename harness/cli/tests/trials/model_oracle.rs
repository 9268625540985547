//! The decoder against independent implementations of the same model.
//!
//! - `numpy_f64/*`: the architecture math. `ci/py/ref_forward.py` (gguf-py's dequantizers,
//!   a plain float64 numpy forward, no activation quantization) against the decoder's
//!   [`Arith::DequantF32`] forward on the embedded model, teacher-forced, in decode and in
//!   prompt mode, every tap of every step within [`F64_TOL`].
//! - `llama_cpp/*`: llama.cpp itself (its haswell CPU tier, built by `ci/oracle`, driven
//!   through the capture tool (`tools/capture`, `tiercheck-capture`) with a `cb_eval` callback, two threads, its tiled
//!   K-quant matmul on as by default) against the `x86_64-avx2-repack` lane (repack on,
//!   llama.cpp's default) and, under `llama_cpp/no_repack/`, the `x86_64-avx2` lane
//!   (`--no-repack`): decode and prompt mode (the prompt is one batch of 20 rows, so every
//!   K-quant matmul of the plain weights takes the tiled path), whole-run and layer-local,
//!   every tap of every step bitwise.
//! - `llama_cpp/zen4/no_repack/*`: the same against llama.cpp's zen4 build (ggml's
//!   AVX-512 variant) and `x86_64-avx512`, where the host has AVX-512 (ignored with the
//!   reason elsewhere); `llama_cpp/zen4/differs_from_haswell`: the haswell lane does not
//!   reproduce that build.
//! - `llama_cpp/arm-dotprod/{no_repack,repack}/*` and `llama_cpp/arm-i8mm/{no_repack,
//!   repack}/*`: the same against llama.cpp's aarch64 builds (GCC, dotprod and
//!   dotprod+i8mm, the static `llamataps` driver of `ci/oracle-driver` under qemu-aarch64
//!   on `neoverse-n1` and `max,sve=off`), against `aarch64-neon`, `aarch64-neon-repack`,
//!   `aarch64-i8mm` and `aarch64-i8mm-repack`: decode and prompt mode, whole-run and
//!   layer-local, every tap bitwise (the Q6_K weights repacked as `q6_K_8x4` /
//!   `q6_K_8x8`; the i8mm build's plain matmuls on 2x2 `smmla` tiles and its batched
//!   attention without llamafile).
//! - Attention: every trial above runs with llama.cpp's defaults (`--kv f16 --fa on`: the
//!   F16 K/V cache and flash attention) under the names given, and with `--kv f32 --fa
//!   off` under `.../f32_off/...`; `llama_cpp[/<build>]/f16_off/*` (every build) and
//!   `llama_cpp/f32_on/*` (haswell) check the other two combinations;
//!   `llama_cpp/split_kv/decode/end_to_end` runs 262 tokens one by one, so that from
//!   position 256 flash attention takes ggml's split-KV path with two threads.
//!
//! - `llama_cpp/trace_cache/recomputes_bitwise`: llama.cpp's runs are kept in a cache
//!   (`llama_trace`); one cached run is recomputed and must equal the stored trace.
//!
//! Needs the oracle stage (`ci/oracle`); without it the trials are reported ignored with
//! the reason, and `TIERCHECK_REQUIRE_ORACLE=1` (CI) makes that a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Completion, Trial};
use tiercheck_testkit::suites::{trial_name, Selection};

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded::{self, Prompts, Recipe};
use tiercheck_model::sequence::{self, graphs, read_trace, Graph, RunSpec, Trace};
use tiercheck_model::state::KvState;
use tiercheck_model::tapdiff::{self, TapDiff};
use tiercheck_model::{
    Arith, Attention, Batching, Decoder, FlashAttn, KvType, Logits, Mode, Model, Residual, TapSink,
};
use tiercheck_oracle::{ArmTier, OracleConfig};

/// A llama.cpp build of `ci/oracle`: the haswell one (in process through ctypes) or an
/// aarch64 one (the static `llamataps` driver under qemu-aarch64 on its tier's CPU model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Build {
    Haswell,
    Zen4,
    ArmDotprod,
    ArmI8mm,
    ArmSve128,
    ArmSve256,
}

impl Build {
    /// The aarch64 build of `ci/oracle` this is, whose facts are its `[[tier]]` entry of
    /// `targets/aarch64-unknown-linux-gnu.toml`.
    fn arm(self) -> Option<ArmTier> {
        match self {
            Build::Haswell | Build::Zen4 => None,
            Build::ArmDotprod => Some(ArmTier::Dotprod),
            Build::ArmI8mm => Some(ArmTier::I8mm),
            Build::ArmSve128 => Some(ArmTier::Sve128),
            Build::ArmSve256 => Some(ArmTier::Sve256),
        }
    }

    fn name(self) -> &'static str {
        match (self, self.arm()) {
            (_, Some(tier)) => tier.name(),
            (Build::Zen4, None) => "zen4",
            (_, None) => "haswell",
        }
    }

    /// The lane that reproduces this build with its repack buffer on (llama.cpp's
    /// default) or off.
    fn lane(self, repack: bool) -> &'static str {
        match (self, repack) {
            (Build::Haswell, true) => "x86_64-avx2-repack",
            (Build::Haswell, false) => "x86_64-avx2",
            // No lane reproduces the zen4 build's AVX-512 repacked gemm; no trial asks.
            (Build::Zen4, _) => "x86_64-avx512",
            (Build::ArmDotprod, true) => "aarch64-neon-repack",
            (Build::ArmDotprod, false) => "aarch64-neon",
            (Build::ArmI8mm, true) => "aarch64-i8mm-repack",
            (Build::ArmI8mm, false) => "aarch64-i8mm",
            (Build::ArmSve128, true) => "aarch64-sve128-repack",
            (Build::ArmSve128, false) => "aarch64-sve128",
            (Build::ArmSve256, true) => "aarch64-sve256-repack",
            (Build::ArmSve256, false) => "aarch64-sve256",
        }
    }

    /// The oracle.env key of the build and the qemu CPU model its tier runs on (empty
    /// for the x86 builds, which run in process).
    fn oracle(self) -> Result<(&'static str, &'static str), String> {
        let err = |e: tiercheck_oracle::OracleError| e.to_string();
        let Some(tier) = self.arm() else {
            return Ok((tiercheck_oracle::llama_env(self.name()).map_err(err)?, ""));
        };
        Ok((tier.llama_env_var().map_err(err)?, tier.qemu_cpu().map_err(err)?))
    }
}

/// Tolerance of the f32 forward against the float64 one, as `||a-b||/||b||` per tap.
///
/// Each f32 op rounds with relative error at most 2^-24 ≈ 6e-8; the matmul dots are
/// accumulated in f64 and rounded once, RMSNorm and softmax sum in f64, so a layer adds
/// a few ulps of relative error to well-conditioned taps, and the attention softmax and
/// the RMSNorms do not amplify it much (their condition numbers are O(1) for these
/// activations). Measured on the embedded model (8 layers, 20 teacher-forced tokens):
/// worst 3.8e-7 (`ffn_out`, decode mode), 2.6e-7 in prompt mode; `inp_embd` is bitwise
/// equal (both dequantize Q4_K in f32 without fusing). 1e-5 leaves a factor of 25 of
/// margin while staying four orders below what a real mistake (a wrong RoPE pair, a
/// missing norm weight, an off-by-one position) produces, which is O(1e-1..1).
const F64_TOL: f64 = 1e-5;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("workspace root")
        .to_owned()
}

fn require_oracle() -> bool {
    std::env::var("TIERCHECK_REQUIRE_ORACLE").is_ok_and(|v| v == "1")
}

fn python() -> Result<PathBuf, String> {
    OracleConfig::from_env().require_python().map(Path::to_owned).map_err(|e| e.to_string())
}

/// The ids to teacher-force: the first prompt followed by a fixed continuation, so
/// every step is defined independently of any greedy choice.
fn forced_ids(n: usize) -> Vec<u32> {
    let recipe = Recipe::load(&Recipe::default_path()).expect("recipe");
    let prompts = Prompts::load(&Prompts::default_path(), &recipe).expect("prompts");
    let mut ids = prompts.prompts[1].tokens.clone();
    let mut x = 12345u32;
    while ids.len() < n {
        x = x.wrapping_mul(1103515245).wrapping_add(12345);
        ids.push((x >> 8) % recipe.n_vocab);
    }
    ids
}

fn run_python(py: &Path, args: &[String]) -> Result<(), String> {
    let out = Command::new(py).args(args).output().map_err(|e| format!("{}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed: {}",
            py.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Threads llama.cpp runs with in these trials (`tiercheck-capture`'s default), which is
/// also the tier thread count the lanes are given (only split-KV flash attention reads
/// it).
const LLAMA_THREADS: usize = 2;

/// The attention options of a trial, with the oracle's thread count.
fn attn(kv: KvType, fa: FlashAttn) -> Attention {
    Attention { kv, fa, tier_threads: LLAMA_THREADS, tier_numa: false }
}

fn ours(
    model: &Model,
    arith: Arith,
    ids: &[u32],
    mode: Mode,
    attention: Attention,
    path: &Path,
) -> Result<Trace, String> {
    let spec = RunSpec {
        ids: ids.to_vec(),
        steps: 0,
        mode,
        batching: Batching::EVERY_ROW,
        forced: Vec::new(),
    };
    ours_spec(model, arith, &spec, attention, 512, path)
}

/// Our lane's trace of `spec` in a context of `n_ctx` cells, written to `path` and read
/// back.
fn ours_spec(
    model: &Model,
    arith: Arith,
    spec: &RunSpec,
    attention: Attention,
    n_ctx: usize,
    path: &Path,
) -> Result<Trace, String> {
    let dec =
        Decoder::new(model, arith, Residual::F32, n_ctx, attention).map_err(|e| e.to_string())?;
    let out = sequence::run(&dec, spec, TapSink::new(true, false)).map_err(|e| e.to_string())?;
    sequence::write_trace(path, &out, Default::default()).map_err(|e| e.to_string())?;
    read_trace(path).map_err(|e| e.to_string())
}

fn report(diffs: &[TapDiff]) -> String {
    let mut s = String::new();
    for (kind, (worst, n, bitwise)) in tapdiff::summarize(diffs) {
        s += &format!("  {kind:<14} worst rel_l2 {worst:.3e}  bitwise {bitwise}/{n}\n");
    }
    s
}

fn numpy_f64(mode: Mode) -> Result<(), String> {
    let model_path = embedded::ensure_model(None).map_err(|e| e.to_string())?;
    numpy_f64_of(&model_path, mode)
}

/// [`numpy_f64`] on the embedded model's f32 form quantized with `scheme` (the new weight
/// types through the decoder's loader, get_rows and dequantizers, against gguf-py's).
fn numpy_f64_scheme(scheme: &str) -> Result<(), String> {
    let recipe = Recipe::load(&Recipe::default_path()).map_err(|e| e.to_string())?;
    let f32_bytes = embedded::generate_f32(&recipe).map_err(|e| e.to_string())?;
    let input = tiercheck_gguf::GgufFile::from_bytes("<f32 model>", f32_bytes)
        .map_err(|e| e.to_string())?;
    let scheme = tiercheck_model::model_quant::Scheme::parse(scheme).ok_or("unknown scheme")?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("model.gguf");
    tiercheck_model::model_quant::quantize_file(&input, &path, scheme)
        .map_err(|e| e.to_string())?;
    numpy_f64_of(&path, Mode::Prompt)
}

fn numpy_f64_of(model_path: &Path, mode: Mode) -> Result<(), String> {
    let py = python()?;
    let model = Model::open(model_path).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(20);
    let ids_s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let theirs_path = dir.path().join("numpy.safetensors");
    let script = repo_root().join("ci/py/ref_forward.py");
    run_python(
        &py,
        &[
            script.display().to_string(),
            "--model".into(),
            model_path.display().to_string(),
            "--ids".into(),
            ids_s.join(","),
            "--mode".into(),
            mode.name().into(),
            "--out".into(),
            theirs_path.display().to_string(),
        ],
    )?;
    let theirs = read_trace(&theirs_path).map_err(|e| e.to_string())?;
    let f32_off = attn(KvType::F32, FlashAttn::Off);
    let mine =
        ours(&model, Arith::DequantF32, &ids, mode, f32_off, &dir.path().join("ours.safetensors"))?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let expected = (mine.steps.len(), theirs.steps.len());
    if expected.0 != expected.1 || diffs.is_empty() {
        return Err(format!("step counts {expected:?}, {} taps compared", diffs.len()));
    }
    let worst = diffs.iter().max_by(|a, b| a.rel_l2.total_cmp(&b.rel_l2)).expect("nonempty");
    eprintln!("numpy_f64/{}: {} taps\n{}", mode.name(), diffs.len(), report(&diffs));
    if worst.rel_l2 > F64_TOL {
        return Err(format!(
            "step {} tap {}: rel_l2 {:.3e} > {F64_TOL:e}\n{}",
            worst.step,
            worst.name,
            worst.rel_l2,
            report(&diffs)
        ));
    }
    Ok(())
}

/// The capture tool (`tools/capture`, `python -m tiercheck_capture`) from this checkout,
/// run by the oracle venv's `py`.
fn capture(py: &Path) -> Command {
    let mut cmd = Command::new(py);
    cmd.args(["-m", "tiercheck_capture"]).env("PYTHONPATH", repo_root().join("tools/capture"));
    cmd
}

/// The capture tool's arguments that select `build`: `--lib DIR` or `--driver BIN
/// --qemu-cpu MODEL`; "oracle not built" when `ci/oracle` did not make it.
fn build_args(build: Build) -> Result<Vec<String>, String> {
    let (key, cpu) = build.oracle()?;
    let path = OracleConfig::from_env().setting(key).map_err(|e| e.to_string())?;
    if build == Build::Zen4 && !host_has_avx512() {
        return Err(HOST_LACKS_AVX512.into());
    }
    if matches!(build, Build::Haswell | Build::Zen4) {
        if !path.join("libllama.so").is_file() {
            return Err(format!(
                "oracle not built: run ci/oracle (no libllama.so in {})",
                path.display()
            ));
        }
        return Ok(vec!["--lib".into(), path.display().to_string()]);
    }
    if !path.is_file() {
        return Err(format!("oracle not built: run ci/oracle (no {})", path.display()));
    }
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    if std::env::consts::ARCH != "aarch64" && !on_path("qemu-aarch64") {
        return Err("oracle not built: qemu-aarch64 is not installed".into());
    }
    Ok(vec!["--driver".into(), path.display().to_string(), "--qemu-cpu".into(), cpu.into()])
}

/// How llama.cpp runs: mode, repack, greedy steps after the ids, and the K/V cache type
/// and flash attention (`tiercheck-capture --kv --fa`).
struct LlamaRun {
    mode: Mode,
    repack: bool,
    steps: usize,
    attn: Attention,
    /// Batch and ubatch sizes and output rows (`--batch --ubatch --logits`).
    batching: Batching,
    /// Context length (`--ctx`).
    ctx: usize,
    /// llama.cpp's threads (`--threads`), which the lane is given as its tier thread
    /// count.
    threads: usize,
    /// A sequence state to start from (`--state-in`).
    state_in: Option<PathBuf>,
    /// llama.cpp NUMA-aware (`--numa distribute` on two NUMA nodes: [`fake_numa`]).
    numa: bool,
}

/// The capture tool's arguments after the build's for `run` on `model` (all but `--out`).
fn run_args(model: &Path, ids: &[u32], run: &LlamaRun) -> Vec<String> {
    let ids_s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let mut args: Vec<String> = vec!["--model".into(), model.display().to_string()];
    for (k, v) in [
        ("--ids", ids_s.join(",")),
        ("--mode", run.mode.name().into()),
        ("--steps", run.steps.to_string()),
        ("--kv", run.attn.kv.name().into()),
        ("--fa", run.attn.fa.name().into()),
        ("--threads", run.threads.to_string()),
        ("--ctx", run.ctx.to_string()),
        ("--batch", run.batching.n_batch.to_string()),
        ("--ubatch", run.batching.n_ubatch.to_string()),
        ("--logits", run.batching.logits.name().into()),
    ] {
        args.push(k.into());
        args.push(v);
    }
    if !run.repack {
        args.push("--no-repack".into());
    }
    if let Some(p) = &run.state_in {
        args.push("--state-in".into());
        args.push(p.display().to_string());
    }
    if run.numa {
        args.push("--numa".into());
        args.push("distribute".into());
    }
    args
}

const NO_FAKE_NUMA: &str = "this host cannot show ggml two NUMA nodes: a mount namespace \
     (`unshare -m`) with a bind mount over /sys/devices/system/node is not permitted here";

/// A folder that, bind-mounted over `/sys/devices/system/node` in a mount namespace of
/// its own, shows ggml two NUMA nodes (node0 with cpu0, node1 with cpu1): what
/// `ggml_numa_init` reads, so that llama.cpp's `--numa` makes it NUMA-aware on a
/// one-node host. Checked once per process; [`NO_FAKE_NUMA`] where the namespace or the
/// mount is refused.
fn fake_numa() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tiercheck-numa-{}", std::process::id()));
        for (node, cpu) in [("node0", "cpu0"), ("node1", "cpu1")] {
            std::fs::create_dir_all(dir.join(node).join(cpu))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let ok = Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg("mount --bind \"$0\" /sys/devices/system/node && test -d /sys/devices/system/node/node1/cpu1")
            .arg(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            Ok(dir)
        } else {
            Err(NO_FAKE_NUMA.into())
        }
    })
    .clone()
}

/// The capture tool's command for `build` running `run` on `ids` (passed through a file
/// in `dir`: a long prompt exceeds the limit of one argument), all but `--out`.
fn capture_cmd(
    build: Build,
    model: &Path,
    ids: &[u32],
    run: &LlamaRun,
    dir: &Path,
) -> Result<Command, String> {
    let py = python()?;
    let ids_file = dir.join("ids.txt");
    let text: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    std::fs::write(&ids_file, text.join(","))
        .map_err(|e| format!("{}: {e}", ids_file.display()))?;
    let mut args = run_args(model, ids, run);
    let at = args.iter().position(|a| a == "--ids").expect("run_args passes --ids") + 1;
    args[at] = format!("@{}", ids_file.display());
    let mut cmd = if run.numa {
        // The capture (and the driver it starts) in a mount namespace showing two nodes.
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", "mount --bind \"$0\" /sys/devices/system/node && exec \"$@\""]);
        c.arg(fake_numa()?).arg(&py).args(["-m", "tiercheck_capture"]);
        c.env("PYTHONPATH", repo_root().join("tools/capture"));
        c
    } else {
        capture(&py)
    };
    cmd.args(build_args(build)?).args(args).env_remove("GGML_CPU_TILED_MM");
    Ok(cmd)
}

/// llama.cpp's taps for `ids` (teacher-forced) on `build` as `run` says, computed now:
/// [`llama_trace_fresh`] through the trace cache. `out` receives the trace file either way.
///
/// llama.cpp's output is a function of its build, the capture tool, the model bytes
/// and the arguments (the trials below rely on that: it is checked by
/// `llama_cpp/trace_cache/recomputes_bitwise`), so a run is stored under
/// `<cache>/oracle-traces/<key>.safetensors`, the key the sha256 of all of those: the
/// bytes of the build's libraries (and the host's CPU flags, where they run in process)
/// or static driver (and qemu-aarch64, where the driver runs under it), of the capture
/// tool's files, the model's bytes, and every argument.
/// A later run of the suite reads the trace instead of running llama.cpp again (the
/// aarch64 builds' runs under qemu are most of this file's time). A build rebuilt by
/// `ci/oracle`, an edited capture tool or model, or another argument is another key.
/// `TIERCHECK_ORACLE_CACHE=off` runs llama.cpp every time.
fn llama_trace(
    build: Build,
    model: &Path,
    ids: &[u32],
    run: LlamaRun,
    out: &Path,
) -> Result<Trace, String> {
    let off = std::env::var("TIERCHECK_ORACLE_CACHE").is_ok_and(|v| v == "off");
    let entry = if off { None } else { Some(trace_cache_entry(build, model, ids, &run)?) };
    if let Some(entry) = &entry {
        if entry.is_file() {
            std::fs::copy(entry, out)
                .map_err(|e| format!("{} -> {}: {e}", entry.display(), out.display()))?;
            let t = read_trace(out).map_err(|e| format!("{}: {e}", entry.display()))?;
            check_attention(&t, run.attn)?;
            return Ok(t);
        }
    }
    let t = llama_trace_fresh(build, model, ids, run, out)?;
    if let Some(entry) = entry {
        // Written whole under a temporary name and renamed, so a reader never sees a
        // partial file; a failure to store only costs the next run its time.
        let dir = entry.parent().expect("cache entry has a folder");
        let stored = std::fs::create_dir_all(dir).and_then(|()| {
            let tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::fs::copy(out, tmp.path())?;
            tmp.persist(&entry).map(|_| ()).map_err(|e| e.error)
        });
        if let Err(e) = stored {
            eprintln!("oracle trace cache: cannot store {}: {e}", entry.display());
        }
    }
    Ok(t)
}

/// sha256 of `path`'s bytes (lowercase hex), read in pieces.
fn file_digest(path: &Path) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The digests of the regular files under `dir` (recursively, sorted by path; Python's
/// bytecode caches and pip's build leftovers left out), one `path digest` line each,
/// computed once per process.
fn tree_digest(dir: &Path) -> Result<String, String> {
    static DONE: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    if let Some(d) = done.lock().map_err(|e| e.to_string())?.get(dir) {
        return Ok(d.clone());
    }
    let mut files = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = e.map_err(|e| format!("{}: {e}", d.display()))?.path();
            // Not the tool's: Python's bytecode caches, and what `pip install` leaves in
            // a source folder it builds from (`build/`, `*.egg-info/`).
            let skip = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "__pycache__" || n == "build" || n.ends_with(".egg-info"));
            if skip {
                continue;
            }
            let m = std::fs::metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            if m.is_dir() {
                todo.push(p);
            } else if m.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut lines = String::new();
    for f in files {
        let rel = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
        lines += &format!("{rel} {}\n", file_digest(&f)?);
    }
    done.lock().map_err(|e| e.to_string())?.insert(dir.to_owned(), lines.clone());
    Ok(lines)
}

/// Where [`llama_trace`] keeps the trace of (`build`, `model`, `ids`, `run`).
fn trace_cache_entry(
    build: Build,
    model: &Path,
    ids: &[u32],
    run: &LlamaRun,
) -> Result<PathBuf, String> {
    use sha2::{Digest, Sha256};
    let mut key = String::from("tiercheck oracle trace v1\n");
    let args = build_args(build)?;
    key += &format!("build {}\n", build.name());
    // The build's own bytes instead of its paths: `--lib DIR` (every library in it) or
    // `--driver BIN --qemu-cpu MODEL` (the static driver, and qemu-aarch64 itself).
    match args.first().map(String::as_str) {
        Some("--lib") => {
            key += &tree_digest(Path::new(&args[1]))?;
            // In process on this host: its CPU (the trace records its features).
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            let flags = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap_or("");
            key += &format!("host {flags}\n");
        }
        Some("--driver") => {
            key += &format!("driver {}\nqemu-cpu {}\n", file_digest(Path::new(&args[1]))?, args[3]);
            if std::env::consts::ARCH != "aarch64" {
                let qemu = std::env::var_os("PATH")
                    .and_then(|p| {
                        std::env::split_paths(&p)
                            .map(|d| d.join("qemu-aarch64"))
                            .find(|q| q.is_file())
                    })
                    .ok_or("qemu-aarch64 is not on PATH")?;
                key += &format!("qemu {}\n", file_digest(&qemu)?);
            }
        }
        other => return Err(format!("unexpected capture arguments {other:?}")),
    }
    key += &format!("python {}\n", python()?.display());
    key += &tree_digest(&repo_root().join("tools/capture"))?;
    key += &format!("model {}\n", file_digest(model)?);
    // The model by its bytes (above), not its path: a temporary folder's name differs;
    // so is a state to start from.
    let mut rest = run_args(model, ids, run);
    rest.drain(..2);
    if let Some(p) = &run.state_in {
        let at = rest.iter().position(|a| a == "--state-in").expect("run_args passes it") + 1;
        rest[at] = format!("sha256:{}", file_digest(p)?);
    }
    key += &rest.join(" ");
    let digest: String =
        Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let dir = embedded::default_cache_dir().map_err(|e| e.to_string())?;
    Ok(dir.join("oracle-traces").join(format!("{}-{}.safetensors", build.name(), &digest[..40])))
}

/// The trace's metadata echoes the attention options asked for.
fn check_attention(t: &Trace, attn: Attention) -> Result<(), String> {
    let (kv, fa) = (t.meta.get("kv").map(String::as_str), t.meta.get("fa").map(String::as_str));
    if kv != Some(attn.kv.name()) || fa != Some(attn.fa.name()) {
        return Err(format!("llama.cpp's trace says kv {kv:?} fa {fa:?}, asked {}", attn.label()));
    }
    Ok(())
}

/// llama.cpp's taps for `ids` (teacher-forced) on `build` as `run` says (its tiled
/// K-quant matmul on where the build has it, as by default, whatever the caller's
/// environment), run now; the trace's metadata must echo the attention options.
fn llama_trace_fresh(
    build: Build,
    model: &Path,
    ids: &[u32],
    run: LlamaRun,
    out: &Path,
) -> Result<Trace, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cmd = capture_cmd(build, model, ids, &run, dir.path())?;
    cmd.arg("--out").arg(out);
    let res = cmd.output().map_err(|e| format!("tiercheck-capture: {e}"))?;
    if !res.status.success() {
        return Err(format!("tiercheck-capture failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    let t = read_trace(out).map_err(|e| e.to_string())?;
    check_attention(&t, run.attn)?;
    Ok(t)
}

/// Teacher-forced ids per trial: 20 with llama.cpp's default attention; 12 with the
/// other settings, which halves the time of their aarch64 runs under qemu. A batch of 12
/// rows takes the same batched kernels as one of 20: the x86 tiled K-quant matmul (from
/// 8 rows), whole groups of 4 for the repacked gemm, the dotprod build's tinyBLAS (from 4
/// rows), the i8mm build's even-row tiles. (Leftover gemv rows of the repacked gemm are
/// covered by the kernel-level trials and the 70-row tiled-attention trial.)
fn trial_len(a: Attention) -> usize {
    if a.kv == KvType::F16 && a.fa == FlashAttn::On {
        20
    } else {
        12
    }
}

/// The teacher-forced trace of (build, mode, repack, attention) on the embedded model,
/// computed once per test process (the whole-run and layer-local trials share it).
fn forced_trace(
    build: Build,
    mode: Mode,
    repack: bool,
    a: Attention,
) -> Result<Arc<Trace>, String> {
    type Cell = Arc<OnceLock<Result<Arc<Trace>, String>>>;
    type Key = (Build, &'static str, bool, Attention);
    static CELLS: OnceLock<Mutex<HashMap<Key, Cell>>> = OnceLock::new();
    let cell: Cell = {
        let mut map = CELLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
        Arc::clone(map.entry((build, mode.name(), repack, a)).or_default())
    };
    cell.get_or_init(|| {
        let model = embedded_model()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("llama.safetensors");
        llama_trace(
            build,
            &model.path,
            &forced_ids(trial_len(a)),
            LlamaRun {
                mode,
                repack,
                steps: 0,
                attn: a,
                batching: Batching::EVERY_ROW,
                ctx: 512,
                threads: LLAMA_THREADS,
                state_in: None,
                numa: false,
            },
            &path,
        )
        .map(Arc::new)
    })
    .clone()
}

fn lane_arith(name: &str) -> Result<Arith, String> {
    let lane = lanes::find(name)?;
    let chosen = lanes::choose(lane, Impl::Auto)?;
    Ok(Arith::from_chosen(&chosen, 1))
}

/// Check diffs: every tap bitwise equal.
fn judge(what: &str, diffs: &[TapDiff]) -> Result<(), String> {
    let n_bit = diffs.iter().filter(|d| d.bitwise()).count();
    eprintln!("{what}: {n_bit}/{} taps bitwise equal\n{}", diffs.len(), report(diffs));
    if diffs.is_empty() {
        return Err(format!("{what}: nothing compared"));
    }
    match diffs.iter().find(|d| !d.bitwise()) {
        None => Ok(()),
        Some(d) => Err(format!(
            "{what}: step {} tap {} is not bitwise equal ({} of {} values differ, rel_l2 {:.3e})",
            d.step, d.name, d.n_diff, d.n, d.rel_l2
        )),
    }
}

/// `mine` must differ from llama.cpp's `theirs` somewhere (the trial exercises what
/// `what` names: a thread count, NUMA); prints the first tap that differs.
fn must_differ(mine: &Trace, theirs: &Trace, what: &str) -> Result<(), String> {
    let (diffs, _) = tapdiff::compare(mine, theirs);
    match diffs.iter().find(|d| !d.bitwise()) {
        None => Err(format!("{what} reproduces llama.cpp's run: the trial does not exercise it")),
        Some(d) => {
            eprintln!("{what} first differs from llama.cpp at step {} tap {}", d.step, d.name);
            Ok(())
        }
    }
}

fn embedded_model() -> Result<Model, String> {
    let path = embedded::ensure_model(None).map_err(|e| e.to_string())?;
    Model::open(&path).map_err(|e| e.to_string())
}

/// Whole run: our lane against llama.cpp, every tap of every step.
fn llama_end_to_end(build: Build, mode: Mode, repack: bool, a: Attention) -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(trial_len(a));
    let theirs = forced_trace(build, mode, repack, a)?;
    let arith = lane_arith(build.lane(repack))?;
    let mine = ours(&model, arith, &ids, mode, a, &dir.path().join("ours.safetensors"))?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let what = format!(
        "{} vs llama.cpp {} {} (repack {repack}, {}) end to end",
        build.lane(repack),
        build.name(),
        mode.name(),
        a.label()
    );
    judge(&what, &diffs)
}

/// The embedded model's f32 form quantized with `scheme` (llama.cpp's mixes, written by
/// `gguf quantize`), at `path`.
fn quantized_model(scheme: &str, path: &Path) -> Result<(), String> {
    let recipe = Recipe::load(&Recipe::default_path()).map_err(|e| e.to_string())?;
    let f32_bytes = embedded::generate_f32(&recipe).map_err(|e| e.to_string())?;
    let input = tiercheck_gguf::GgufFile::from_bytes("<f32 model>", f32_bytes)
        .map_err(|e| e.to_string())?;
    let scheme = tiercheck_model::model_quant::Scheme::parse(scheme).ok_or("unknown scheme")?;
    tiercheck_model::model_quant::quantize_file(&input, path, scheme)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The embedded model quantized with `scheme` (Q5_K_M, Q3_K_M, Q2_K, IQ4_XS: the new
/// weight types in llama.cpp's own mixes; Q4_1, Q5_0, Q5_1, IQ4_NL: uniform): the lane of `build` reproduces llama.cpp's
/// build at every tap, with llama.cpp's default attention.
fn llama_quant_mix(scheme: &str, build: Build, mode: Mode, repack: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join(format!("{scheme}.gguf"));
    quantized_model(scheme, &path)?;
    let ids = forced_ids(trial_len(attn(KvType::F16, FlashAttn::On)));
    default_attention_run(build, mode, repack, &path, &ids, &format!("the {scheme} model"))
}

/// `build` (repack as given, llama.cpp's default attention, one batch of every row in
/// prompt mode) on the model at `path` with `ids`, against the build's lane: every tap
/// bitwise. `on` names the model in the report.
fn default_attention_run(
    build: Build,
    mode: Mode,
    repack: bool,
    path: &Path,
    ids: &[u32],
    on: &str,
) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let model = Model::open(path).map_err(|e| e.to_string())?;
    let a = attn(KvType::F16, FlashAttn::On);
    let run = LlamaRun {
        mode,
        repack,
        steps: 0,
        attn: a,
        batching: Batching::EVERY_ROW,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    let theirs = llama_trace(build, path, ids, run, &dir.path().join("llama.safetensors"))?;
    let arith = lane_arith(build.lane(repack))?;
    let mine = ours(&model, arith, ids, mode, a, &dir.path().join("ours.safetensors"))?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let what =
        format!("{} vs llama.cpp {} {} on {on}", build.lane(repack), build.name(), mode.name());
    judge(&what, &diffs)
}

/// A small variant of a real shape (`tiercheck golden model --shape NAME --layers 2
/// --vocab 4096`: the real widths, head counts and Q4_K_M mix, random blocks): llama.cpp
/// loads it and our lane reproduces `build` at every tap, with llama.cpp's default
/// attention. The tied 0.6B shape takes its output from the Q6_K embedding; the 8B
/// shape's 4096-wide rows and 12288-wide feed-forward are Qwen3 8B's widths; Qwen2.5 7B's
/// (qwen2: biases, 3584 wide, 28 query heads on 4 KV heads) are the third, Llama 3.1 8B's
/// (llama: normal-mode RoPE with frequency factors, 14336-wide feed-forward) the fourth.
fn llama_shaped(shape: &str, build: Build, mode: Mode, repack: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // Qwen3-30B-A3B's layer alone is 0.4 GB: one layer of it.
    let layers = if shape == "qwen3-30b-a3b" { 1 } else { 2 };
    let opts = tiercheck_model::shaped::ShapeOptions {
        shape: shape.into(),
        layers: Some(layers),
        vocab: Some(4096),
        out: Some(dir.path().join("shaped.gguf")),
        threads: 2,
        ..Default::default()
    };
    let built =
        tiercheck_model::shaped::build_shaped(&opts, &mut |_, _| {}).map_err(|e| e.to_string())?;
    let ids: Vec<u32> =
        forced_ids(trial_len(attn(KvType::F16, FlashAttn::On))).iter().map(|&i| i % 4096).collect();
    let on = format!("the {shape} shape ({layers} layers, vocabulary 4096)");
    default_attention_run(build, mode, repack, &built.path, &ids, &on)
}

/// The zen4 build is a tier of its own: the haswell lane (eight-wide loops) does not
/// reproduce its trace, in either mode, while `x86_64-avx512` does (the trials above).
fn zen4_differs_from_haswell() -> Result<(), String> {
    build_differs_from_lane(Build::Zen4, false, "x86_64-avx2")
}

/// The lane of a neighbouring tier does not reproduce `build` (repack as given) in
/// either mode with llama.cpp's default attention: what the build's own lane models is
/// needed. Prints the first tap that differs.
fn build_differs_from_lane(build: Build, repack: bool, lane: &str) -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for mode in [Mode::Decode, Mode::Prompt] {
        let a = attn(KvType::F16, FlashAttn::On);
        let theirs = forced_trace(build, mode, repack, a)?;
        let arith = lane_arith(lane)?;
        let path = dir.path().join(format!("{}.st", mode.name()));
        let mine = ours(&model, arith, &forced_ids(20), mode, a, &path)?;
        let (diffs, _) = tapdiff::compare(&mine, &theirs);
        let first = diffs.iter().find(|d| !d.bitwise()).map(|d| (d.step, d.name.clone()));
        let b = build.name();
        match first {
            None => return Err(format!("{}: {lane} reproduces the {b} trace", mode.name())),
            Some((step, tap)) => {
                eprintln!("{b} {}: {lane} first differs at step {step} tap {tap}", mode.name())
            }
        }
    }
    Ok(())
}

/// ggml's tiled flash attention: a prompt of 70 ids as one batch (at least 64 query
/// rows), llama.cpp's default attention, every tap bitwise; with `--fa off` the same
/// lane differs from that trace (the tiled path is what is being checked).
fn llama_tiled(build: Build, repack: bool) -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(70);
    let a = attn(KvType::F16, FlashAttn::On);
    let run = LlamaRun {
        mode: Mode::Prompt,
        repack,
        steps: 0,
        attn: a,
        batching: Batching::EVERY_ROW,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    let theirs = llama_trace(build, &model.path, &ids, run, &dir.path().join("l.st"))?;
    let arith = lane_arith(build.lane(repack))?;
    let mine = ours(&model, arith, &ids, Mode::Prompt, a, &dir.path().join("ours.st"))?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let what = format!(
        "{} vs llama.cpp {} tiled flash attention (70 rows)",
        build.lane(repack),
        build.name()
    );
    judge(&what, &diffs)?;
    let f16_off = attn(KvType::F16, FlashAttn::Off);
    let other = ours(&model, arith, &ids, Mode::Prompt, f16_off, &dir.path().join("off.st"))?;
    let (diffs, _) = tapdiff::compare(&other, &theirs);
    if diffs.iter().all(|d| d.bitwise()) {
        return Err(format!("{what}: --fa off gives the same bits: the trial checks nothing"));
    }
    Ok(())
}

/// ggml's split-KV flash attention: token-by-token steps attending 512 cells (from
/// position 256 on, llama.cpp's padded KV length doubles), where each of llama.cpp's
/// threads takes its share of the cells and the partial results are merged in thread
/// order. Every tap of the last steps (those past position 256, and two before) bitwise.
fn llama_split_kv() -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(262);
    let a = attn(KvType::F16, FlashAttn::On);
    let run = LlamaRun {
        mode: Mode::Decode,
        repack: true,
        steps: 0,
        attn: a,
        batching: Batching::EVERY_ROW,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    let theirs = llama_trace(Build::Haswell, &model.path, &ids, run, &dir.path().join("l.st"))?;
    let arith = lane_arith(Build::Haswell.lane(true))?;
    let mine = ours(&model, arith, &ids, Mode::Decode, a, &dir.path().join("ours.safetensors"))?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let late: Vec<TapDiff> = diffs.into_iter().filter(|d| d.step >= 254).collect();
    if late.iter().filter(|d| d.step >= 256).count() == 0 {
        return Err("no step past position 256 compared".into());
    }
    judge("x86_64-avx2-repack vs llama.cpp haswell, split-KV flash attention", &late)?;
    // The thread count matters here: as one chunk (one tier thread) the same lane differs.
    let one = Attention { tier_threads: 1, ..a };
    let single = ours(&model, arith, &ids, Mode::Decode, one, &dir.path().join("one.st"))?;
    let (diffs, _) = tapdiff::compare(&single, &theirs);
    if diffs.iter().filter(|d| d.step >= 256).all(|d| d.bitwise()) {
        return Err("with one tier thread the split-KV steps are still bitwise equal: the \
                    trial does not exercise the split"
            .into());
    }
    Ok(())
}

/// Layer-local: each of our layers fed llama.cpp's input to that layer (its previous
/// `l_out`, or its embedding rows) and a KV cache filled from llama.cpp's own `Kcur` and
/// `Vcur` of earlier steps; the head fed llama.cpp's last `l_out`.
fn llama_layer_local(build: Build, mode: Mode, repack: bool, a: Attention) -> Result<(), String> {
    let model = embedded_model()?;
    let theirs = forced_trace(build, mode, repack, a)?;
    let dec = Decoder::new(&model, lane_arith(build.lane(repack))?, Residual::F32, 512, a)
        .map_err(|e| e.to_string())?;
    let diffs = layer_local_diffs(&dec, &theirs)?;
    let what = format!(
        "{} vs llama.cpp {} {} (repack {repack}, {}) layer-local",
        build.lane(repack),
        build.name(),
        mode.name(),
        a.label()
    );
    judge(&what, &diffs)
}

/// Each of `dec`'s layers fed `theirs`'s input to that layer (its previous `l_out`, or
/// its embedding rows), graph by graph as the trace's steps record their ubatches, with
/// a KV cache filled from `theirs`'s own `Kcur` and `Vcur` of the earlier steps and
/// graphs; the last layer pruned to each graph's output rows; the head fed the trace's
/// last `l_out`. Every tap compared with the same rows of the trace.
fn layer_local_diffs(dec: &Decoder<'_>, theirs: &Trace) -> Result<Vec<TapDiff>, String> {
    let hp = dec.hp;
    let n_layer = hp.n_layer;
    let get = |step: usize, name: &str| -> Result<&tiercheck_gguf::tensorfile::Tensor, String> {
        theirs
            .taps
            .get(&(step, name.to_string()))
            .ok_or_else(|| format!("llama trace lacks {step:03}/{name}"))
    };
    let rows_of = |step: usize, name: &str, g: &Graph| -> Result<&[f32], String> {
        let t = get(step, name)?;
        let (row0, rows) = g.rows_in(name, n_layer);
        let w = t.shape[1];
        t.data
            .get(row0 * w..(row0 + rows) * w)
            .ok_or_else(|| format!("llama trace's {step:03}/{name} has too few rows"))
    };
    let mut diffs = Vec::new();
    for (step, rec) in theirs.steps.iter().enumerate() {
        let pos0 = rec.positions[0];
        for g in graphs(rec) {
            let mut sink = TapSink::new(true, false);
            sink.set_step(step);
            for il in 0..n_layer {
                let input = if il == 0 {
                    rows_of(step, "inp_embd", &g)?
                } else {
                    rows_of(step, &format!("l_out-{}", il - 1), &g)?
                };
                let mut cache = dec.new_cache().map_err(|e| e.to_string())?;
                for earlier in 0..=step {
                    let k = get(earlier, &format!("Kcur-{il}"))?;
                    let v = get(earlier, &format!("Vcur-{il}"))?;
                    let kvd = k.shape[1];
                    let positions = &theirs.steps[earlier].positions;
                    let n = if earlier == step { g.start } else { positions.len() };
                    for (r, p) in positions[..n].iter().enumerate() {
                        cache.store(
                            il,
                            *p,
                            &k.data[r * kvd..(r + 1) * kvd],
                            &v.data[r * kvd..(r + 1) * kvd],
                        );
                    }
                }
                let outputs = (il + 1 == n_layer).then_some(&g.outputs[..]);
                dec.eval_layer_out(
                    il,
                    &mut cache,
                    input,
                    pos0 + g.start,
                    g.rows,
                    outputs,
                    &mut sink,
                )
                .map_err(|e| e.to_string())?;
            }
            if !g.outputs.is_empty() {
                let last = rows_of(step, &format!("l_out-{}", n_layer - 1), &g)?;
                dec.head(last, g.outputs.len(), &mut sink).map_err(|e| e.to_string())?;
            }
            for t in sink.into_taps().0 {
                diffs.push(tapdiff::diff(step, &t.name, &t.data, rows_of(step, &t.name, &g)?));
            }
        }
    }
    Ok(diffs)
}

/// A run the way llama-cli and llama-server make it, on a small scale: the prompt given
/// to `llama_decode` in batches of `n_batch`, each evaluated as graphs of `n_ubatch` rows,
/// only the prompt's last row an output, then greedy single-token steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct CliRun {
    prompt: usize,
    steps: usize,
    batching: Batching,
    ctx: usize,
    /// llama.cpp's threads, and the lane's tier thread count.
    threads: usize,
}

/// 157 ids as batches of 96 cut into ubatches of 64: graphs of 64 (ggml's tiled flash
/// attention, whole groups of the repacked gemm), 32 and 61 rows (odd: the i8mm tiles'
/// `nrc == 1` rows, the repacked gemm's leftover gemv rows), the K/V cache carried
/// between them; the last layer and the head on the prompt's last row alone (gemv where
/// the prompt's other layers take gemm or the tiled paths); three greedy steps.
const CLI_SMALL: CliRun = CliRun {
    prompt: 157,
    steps: 3,
    batching: Batching { n_batch: 96, n_ubatch: 64, logits: Logits::Last },
    ctx: 512,
    threads: LLAMA_THREADS,
};

/// llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 (n_batch 2048),
/// the second ubatch attending 768 cells, in a context of 1024; three greedy steps.
const CLI_DEFAULTS: CliRun = CliRun {
    prompt: 600,
    steps: 3,
    batching: Batching::LLAMA_CLI,
    ctx: 1024,
    threads: LLAMA_THREADS,
};

/// Thread-dependent plans on a small scale: 26 ids as ubatches of 16 and 10, two greedy
/// steps. With 3 threads ggml re-chunks the 128-row K and V projections of the 16-row
/// graph by thread (8 chunks of 16 are fewer than 4 per thread): spans of 43, 43 and 42
/// weight rows, so the i8mm builds' 2x2 tiles cover only the last; with 8 and 14
/// threads the spans are 16 and 10.
const CLI_THREADS: CliRun = CliRun {
    prompt: 26,
    steps: 2,
    batching: Batching { n_batch: 2048, n_ubatch: 16, logits: Logits::Last },
    ctx: 512,
    threads: 1,
};

/// llama.cpp's trace of `cli` on `build` (through the trace cache), computed once per
/// test process.
fn cli_trace(build: Build, repack: bool, a: Attention, cli: CliRun) -> Result<Arc<Trace>, String> {
    type Cell = Arc<OnceLock<Result<Arc<Trace>, String>>>;
    type Key = (Build, bool, Attention, CliRun);
    static CELLS: OnceLock<Mutex<HashMap<Key, Cell>>> = OnceLock::new();
    let cell: Cell = {
        let mut map = CELLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
        Arc::clone(map.entry((build, repack, a, cli)).or_default())
    };
    cell.get_or_init(|| Ok(Arc::new(cli_trace_of(&embedded_model()?, build, repack, a, cli)?)))
        .clone()
}

/// llama.cpp's trace of `cli` on `build` with the model `model`, checked to be the run
/// `cli` asks for (its graphs, output rows, steps and batch sizes).
fn cli_trace_of(
    model: &Model,
    build: Build,
    repack: bool,
    a: Attention,
    cli: CliRun,
) -> Result<Trace, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let run = LlamaRun {
        mode: Mode::Prompt,
        repack,
        steps: cli.steps,
        attn: a,
        batching: cli.batching,
        ctx: cli.ctx,
        threads: cli.threads,
        state_in: None,
        numa: a.tier_numa,
    };
    let t =
        llama_trace(build, &model.path, &forced_ids(cli.prompt), run, &dir.path().join("l.st"))?;
    // NUMA-aware exactly when asked (the capture tool records what ggml found).
    let numa = t.meta.get("numa").map(String::as_str);
    if numa != a.tier_numa.then_some("distribute") {
        return Err(format!("llama.cpp's trace says numa {numa:?}, asked {}", a.tier_numa));
    }
    // llama.cpp ran the graphs and outputs this run means (the capture tool checked
    // each graph's rows against them).
    let b = cli.batching.effective(cli.ctx);
    let first = t.steps.first().ok_or("llama.cpp's trace has no steps")?;
    if first.ubatches != b.ubatches(cli.prompt) || first.outputs != Some(vec![cli.prompt - 1]) {
        return Err(format!(
            "llama.cpp's prompt step ran graphs {:?} with outputs {:?}, expected {:?} and [{}]",
            first.ubatches,
            first.outputs,
            b.ubatches(cli.prompt),
            cli.prompt - 1
        ));
    }
    let want = (1 + cli.steps, b.n_batch.to_string(), b.n_ubatch.to_string());
    let got = (t.steps.len(), t.meta["n_batch"].clone(), t.meta["n_ubatch"].clone());
    if got != want {
        return Err(format!(
            "llama.cpp's trace: steps, n_batch, n_ubatch {got:?}, expected {want:?}"
        ));
    }
    Ok(t)
}

/// Our lane against llama.cpp run as `cli` says: whole run (the same greedy tokens, every
/// tap of every step bitwise) or layer-local.
fn llama_cli(
    build: Build,
    repack: bool,
    a: Attention,
    cli: CliRun,
    local: bool,
) -> Result<(), String> {
    let model = embedded_model()?;
    let a = Attention { tier_threads: cli.threads, ..a };
    let theirs = cli_trace(build, repack, a, cli)?;
    cli_compare(&model, &theirs, build, repack, a, cli, local, "")
}

/// The embedded model quantized with `scheme` (the other weight types, in llama.cpp's
/// mixes or uniform), run as llama-cli runs it (`cli`, llama.cpp's default attention):
/// our lane reproduces every tap of the whole run.
fn llama_cli_quant(scheme: &str, build: Build, repack: bool, cli: CliRun) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join(format!("{scheme}.gguf"));
    quantized_model(scheme, &path)?;
    let model = Model::open(&path).map_err(|e| e.to_string())?;
    let a = Attention { tier_threads: cli.threads, ..attn(KvType::F16, FlashAttn::On) };
    let theirs = cli_trace_of(&model, build, repack, a, cli)?;
    cli_compare(&model, &theirs, build, repack, a, cli, false, &format!(" on the {scheme} model"))
}

/// The model of another architecture's recipe (`golden/model/<arch>.toml`: `qwen2`,
/// Q, K and V biases without Q/K norm; `llama`, normal-mode RoPE with frequency
/// factors), built into the cache with its recorded sha256.
fn arch_model(arch: &str) -> Result<Model, String> {
    let recipe = match arch {
        "qwen2" => Recipe::qwen2_path(),
        "llama" => Recipe::llama_path(),
        "qwen3moe" => Recipe::qwen3moe_path(),
        _ => return Err(format!("no recipe for {arch}")),
    };
    let opts = embedded::BuildOptions { recipe: Some(recipe), ..Default::default() };
    let built = embedded::build(&opts).map_err(|e| e.to_string())?;
    Model::open(&built.path).map_err(|e| e.to_string())
}

/// The `arch` model on `build` in `mode` (one batch of every row in prompt mode),
/// llama.cpp's default attention: every tap bitwise.
fn llama_arch(arch: &str, build: Build, mode: Mode, repack: bool) -> Result<(), String> {
    let model = arch_model(arch)?;
    let ids = forced_ids(trial_len(attn(KvType::F16, FlashAttn::On)));
    default_attention_run(build, mode, repack, &model.path, &ids, &format!("the {arch} model"))
}

/// The `arch` model run as llama-cli runs it (`cli`, llama.cpp's default attention): our
/// lane reproduces every tap of the whole run.
fn llama_arch_cli(arch: &str, build: Build, repack: bool, cli: CliRun) -> Result<(), String> {
    let model = arch_model(arch)?;
    let a = Attention { tier_threads: cli.threads, ..attn(KvType::F16, FlashAttn::On) };
    let theirs = cli_trace_of(&model, build, repack, a, cli)?;
    cli_compare(&model, &theirs, build, repack, a, cli, false, &format!(" on the {arch} model"))
}

/// `llama_cpp/quant/<build>/<repack|no_repack>/<what>/<scheme>/end_to_end`: the name of a
/// trial of the other weight types.
fn quant_trial(build: Build, repack: bool, what: &str, scheme: &str) -> String {
    let r = if repack { "repack" } else { "no_repack" };
    format!("llama_cpp/quant/{}/{r}/{what}/{scheme}/end_to_end", build.name())
}

/// Our lane on `model` against llama.cpp's trace `theirs` of `cli`: whole run (the same
/// greedy tokens, every tap of every step bitwise) or layer-local. `on` ends the report's
/// description.
#[allow(clippy::too_many_arguments)]
fn cli_compare(
    model: &Model,
    theirs: &Trace,
    build: Build,
    repack: bool,
    a: Attention,
    cli: CliRun,
    local: bool,
    on: &str,
) -> Result<(), String> {
    let arith = lane_arith(build.lane(repack))?;
    let what = format!(
        "{} vs llama.cpp {} as llama-cli runs ({} ids, {} threads, n_batch {}, n_ubatch {}, logits {}, repack {repack}, {}){on}",
        build.lane(repack),
        build.name(),
        cli.prompt,
        cli.threads,
        cli.batching.n_batch,
        cli.batching.n_ubatch,
        cli.batching.logits.name(),
        a.label()
    );
    if local {
        let dec =
            Decoder::new(model, arith, Residual::F32, cli.ctx, a).map_err(|e| e.to_string())?;
        return judge(&format!("{what} layer-local"), &layer_local_diffs(&dec, theirs)?);
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let spec = RunSpec {
        ids: forced_ids(cli.prompt),
        // tiercheck counts the prompt step's greedy token as the first of its steps.
        steps: cli.steps + 1,
        mode: Mode::Prompt,
        batching: cli.batching,
        forced: Vec::new(),
    };
    let mine = ours_spec(model, arith, &spec, a, cli.ctx, &dir.path().join("ours.st"))?;
    // The same steps: positions, ids fed, graphs, output rows and greedy choices.
    let shape = |t: &Trace| {
        t.steps
            .iter()
            .map(|s| {
                (
                    s.positions.clone(),
                    s.input_ids.clone(),
                    s.ubatch_rows(),
                    s.output_rows(),
                    s.emitted,
                )
            })
            .collect::<Vec<_>>()
    };
    if shape(&mine) != shape(theirs) {
        let tokens = |t: &Trace| t.steps.iter().map(|s| s.emitted).collect::<Vec<_>>();
        return Err(format!(
            "{what}: the steps differ (greedy tokens {:?}, llama.cpp's {:?})",
            tokens(&mine),
            tokens(theirs)
        ));
    }
    let (diffs, unmatched) = tapdiff::compare(&mine, theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    judge(&format!("{what} end to end"), &diffs)
}

/// A setting of the tier matters: our lane given `ours` (a wrong thread count, NUMA
/// untold) does not reproduce llama.cpp's trace of `cli` run with `theirs` (so the trials
/// with the right setting check the setting's plan, not a path every setting shares).
/// Prints the first tap that differs.
fn llama_setting_matters(
    build: Build,
    repack: bool,
    cli: CliRun,
    theirs: Attention,
    ours: Attention,
    what: &str,
) -> Result<(), String> {
    let model = embedded_model()?;
    let trace = cli_trace(build, repack, theirs, cli)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let spec = RunSpec {
        ids: forced_ids(cli.prompt),
        steps: cli.steps + 1,
        mode: Mode::Prompt,
        batching: cli.batching,
        forced: Vec::new(),
    };
    let arith = lane_arith(build.lane(repack))?;
    let mine = ours_spec(&model, arith, &spec, ours, cli.ctx, &dir.path().join("ours.st"))?;
    must_differ(&mine, &trace, &format!("{} {what}", build.lane(repack)))
}

/// The thread count matters: our lane given `wrong` tier threads does not reproduce
/// llama.cpp at `cli.threads`.
fn llama_threads_matter(
    build: Build,
    repack: bool,
    cli: CliRun,
    wrong: usize,
) -> Result<(), String> {
    let a = Attention { tier_threads: cli.threads, ..attn(KvType::F16, FlashAttn::On) };
    let what = format!("with {wrong} tier threads (llama.cpp ran {})", cli.threads);
    llama_setting_matters(build, repack, cli, a, Attention { tier_threads: wrong, ..a }, &what)
}

/// The model of a long-context trial: the embedded one, or the embedded one quantized
/// with a scheme of [`quantized_model`].
type LongModel = Option<&'static str>;

/// The file of `m`: the embedded model, or its quantization (made once per test process
/// into a folder that lives as long as the process).
fn long_model_path(m: LongModel) -> Result<PathBuf, String> {
    let Some(scheme) = m else {
        return embedded::ensure_model(None).map_err(|e| e.to_string());
    };
    type Cell = Arc<OnceLock<Result<PathBuf, String>>>;
    static CELLS: OnceLock<Mutex<HashMap<&'static str, Cell>>> = OnceLock::new();
    static DIR: OnceLock<Result<tempfile::TempDir, String>> = OnceLock::new();
    let cell: Cell = {
        let mut map = CELLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
        Arc::clone(map.entry(scheme).or_default())
    };
    cell.get_or_init(|| {
        let dir = DIR.get_or_init(|| tempfile::tempdir().map_err(|e| e.to_string())).as_ref()?;
        let path = dir.path().join(format!("{scheme}.gguf"));
        quantized_model(scheme, &path)?;
        Ok(path)
    })
    .clone()
}

/// The context of the long-context trials: the largest llama-cli users set (`-c 32768`).
const LONG_CTX: usize = 32768;

/// Cells of the long-context trials' saved caches: a decode step attends 4097 to 4099
/// cells (n_kv 4352) or 16385 to 16387 (n_kv 16640).
const LONG_CELLS: [usize; 2] = [4096, 16384];

/// llama.cpp's haswell build (repack on, llama-cli's batch sizes, the last row's logits,
/// two threads) after a prompt of `cells` ids in a context of [`LONG_CTX`], with the
/// cache type and flash attention of `a`: the sequence state it saves
/// (`tiercheck-capture --no-taps --state-out`), read back. Made once (about 35 s for
/// 16384 cells with flash attention, 80 s without) and kept under
/// `<cache>/oracle-states/`, keyed as the trace cache keys a run; computed once per
/// test process.
fn long_state(m: LongModel, a: Attention, cells: usize) -> Result<(PathBuf, Arc<KvState>), String> {
    type Cell = Arc<OnceLock<Result<(PathBuf, Arc<KvState>), String>>>;
    type Key = (LongModel, KvType, FlashAttn, usize);
    static CELLS: OnceLock<Mutex<HashMap<Key, Cell>>> = OnceLock::new();
    let cell: Cell = {
        let mut map = CELLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
        Arc::clone(map.entry((m, a.kv, a.fa, cells)).or_default())
    };
    cell.get_or_init(|| {
        let model = Model::open(&long_model_path(m)?).map_err(|e| e.to_string())?;
        let run = LlamaRun {
            mode: Mode::Prompt,
            repack: true,
            steps: 0,
            attn: attn(a.kv, a.fa),
            batching: Batching::LLAMA_CLI,
            ctx: LONG_CTX,
            threads: LLAMA_THREADS,
            state_in: None,
            numa: false,
        };
        let ids = forced_ids(cells);
        let traces = trace_cache_entry(Build::Haswell, &model.path, &ids, &run)?;
        let name = traces.file_stem().and_then(|n| n.to_str()).ok_or("cache entry name")?;
        let dir = embedded::default_cache_dir().map_err(|e| e.to_string())?.join("oracle-states");
        let entry = dir.join(format!("{name}.state"));
        let off = std::env::var("TIERCHECK_ORACLE_CACHE").is_ok_and(|v| v == "off");
        if off || !entry.is_file() {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let tmp = tempfile::tempdir_in(&dir).map_err(|e| e.to_string())?;
            let state = tmp.path().join("state");
            let mut cmd = capture_cmd(Build::Haswell, &model.path, &ids, &run, tmp.path())?;
            cmd.arg("--no-taps").arg("--state-out").arg(&state);
            cmd.arg("--out").arg(tmp.path().join("steps.safetensors"));
            let res = cmd.output().map_err(|e| format!("tiercheck-capture: {e}"))?;
            if !res.status.success() {
                return Err(format!(
                    "tiercheck-capture (filling {cells} cells) failed: {}",
                    String::from_utf8_lossy(&res.stderr)
                ));
            }
            std::fs::rename(&state, &entry)
                .map_err(|e| format!("{} -> {}: {e}", state.display(), entry.display()))?;
        }
        let s = KvState::read(&entry).map_err(|e| e.to_string())?;
        if s.cells != cells || s.kv != a.kv || s.fa() != a.fa || s.tokens != ids {
            return Err(format!(
                "{}: {} cells of {} (fa {}), expected {cells} of {} (fa {}) holding the prompt's ids",
                entry.display(),
                s.cells,
                s.kv.name(),
                s.fa().name(),
                a.kv.name(),
                a.fa.name()
            ));
        }
        Ok((entry, Arc::new(s)))
    })
    .clone()
}

/// The id fed after a long state, then two greedy steps.
fn long_ids(cells: usize) -> Vec<u32> {
    forced_ids(cells + 1)[cells..].to_vec()
}

/// llama.cpp's trace on `build` (repack `repack`, `a.tier_threads` threads) of three
/// decode steps after the [`long_state`] of `cells` cells: one teacher-forced id, two
/// greedy tokens (through the trace cache; once per test process).
fn long_trace(
    m: LongModel,
    build: Build,
    repack: bool,
    a: Attention,
    cells: usize,
) -> Result<Arc<Trace>, String> {
    type Cell = Arc<OnceLock<Result<Arc<Trace>, String>>>;
    type Key = (LongModel, Build, bool, Attention, usize);
    static CELLS: OnceLock<Mutex<HashMap<Key, Cell>>> = OnceLock::new();
    let cell: Cell = {
        let mut map = CELLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
        Arc::clone(map.entry((m, build, repack, a, cells)).or_default())
    };
    cell.get_or_init(|| {
        let model = Model::open(&long_model_path(m)?).map_err(|e| e.to_string())?;
        let (state, _) = long_state(m, a, cells)?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let run = LlamaRun {
            mode: Mode::Decode,
            repack,
            steps: 2,
            attn: a,
            batching: Batching::LLAMA_CLI,
            ctx: LONG_CTX,
            threads: a.tier_threads,
            state_in: Some(state),
            numa: false,
        };
        let t = llama_trace(build, &model.path, &long_ids(cells), run, &dir.path().join("l.st"))?;
        let positions: Vec<Vec<usize>> = t.steps.iter().map(|s| s.positions.clone()).collect();
        let want = vec![vec![cells], vec![cells + 1], vec![cells + 2]];
        if positions != want || t.meta.get("state_cells") != Some(&cells.to_string()) {
            return Err(format!(
                "llama.cpp's trace after {cells} saved cells has positions {positions:?}, state_cells {:?}",
                t.meta.get("state_cells")
            ));
        }
        Ok(Arc::new(t))
    })
    .clone()
}

/// Our lane against llama.cpp's `build` decoding after the saved cache of `cells` cells
/// in a context of [`LONG_CTX`]: whole run (the same greedy tokens, every tap of every
/// step bitwise) or layer-local.
fn llama_long(
    build: Build,
    repack: bool,
    a: Attention,
    cells: usize,
    local: bool,
) -> Result<(), String> {
    llama_long_on(None, build, repack, a, cells, local)
}

/// [`llama_long`] on the model `m`.
fn llama_long_on(
    m: LongModel,
    build: Build,
    repack: bool,
    a: Attention,
    cells: usize,
    local: bool,
) -> Result<(), String> {
    let model = Model::open(&long_model_path(m)?).map_err(|e| e.to_string())?;
    let theirs = long_trace(m, build, repack, a, cells)?;
    let dec = long_decoder(m, &model, build.lane(repack), a, cells)?;
    let on = m.map(|s| format!(" on the {s} model")).unwrap_or_default();
    let what = format!(
        "{} vs llama.cpp {} decoding after {cells} saved cells (ctx {LONG_CTX}, {} threads, repack {repack}, {}){on}",
        build.lane(repack),
        build.name(),
        a.tier_threads,
        a.label()
    );
    if local {
        return judge(&format!("{what} layer-local"), &layer_local_diffs(&dec, &theirs)?);
    }
    let mine = long_run(&dec, cells)?;
    let steps = |t: &Trace| {
        t.steps
            .iter()
            .map(|s| (s.positions.clone(), s.input_ids.clone(), s.emitted))
            .collect::<Vec<_>>()
    };
    if steps(&mine) != steps(&theirs) {
        return Err(format!(
            "{what}: the steps differ: {:?}, llama.cpp's {:?}",
            steps(&mine),
            steps(&theirs)
        ));
    }
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    judge(&format!("{what} end to end"), &diffs)
}

/// At 16384 saved cells the tier's thread count matters: our lane given one tier thread
/// does not reproduce llama.cpp's haswell build at 14 (split-KV flash attention: 14
/// parts of 1189 cells against one of 16640).
fn llama_long_count_matters() -> Result<(), String> {
    let model = embedded_model()?;
    let a = Attention { tier_threads: 14, ..attn(KvType::F16, FlashAttn::On) };
    let theirs = long_trace(None, Build::Haswell, true, a, 16384)?;
    let one = Attention { tier_threads: 1, ..a };
    let dec = long_decoder(None, &model, Build::Haswell.lane(true), one, 16384)?;
    let what = "x86_64-avx2-repack with 1 tier thread (llama.cpp ran 14)";
    must_differ(&long_run(&dec, 16384)?, &theirs, what)
}

/// `lane`'s decoder in a context of [`LONG_CTX`] started from the [`long_state`] of
/// `cells` cells saved with `a`'s cache type and attention.
fn long_decoder<'m>(
    m: LongModel,
    model: &'m Model,
    lane: &str,
    a: Attention,
    cells: usize,
) -> Result<Decoder<'m>, String> {
    let (_, state) = long_state(m, a, cells)?;
    let mut dec = Decoder::new(model, lane_arith(lane)?, Residual::F32, LONG_CTX, a)
        .map_err(|e| e.to_string())?;
    dec.set_state(Some(state)).map_err(|e| e.to_string())?;
    Ok(dec)
}

/// The three decode steps of the long-context trials on `dec` (one forced id, two
/// greedy tokens), every tap kept.
fn long_run(dec: &Decoder<'_>, cells: usize) -> Result<Trace, String> {
    let spec = RunSpec {
        ids: long_ids(cells),
        steps: 3,
        mode: Mode::Decode,
        batching: Batching::LLAMA_CLI,
        forced: Vec::new(),
    };
    let out = sequence::run(dec, &spec, TapSink::new(true, false)).map_err(|e| e.to_string())?;
    Ok(tiercheck_analysis::trace_of(out))
}

/// The reader of saved caches against llama.cpp's writers: the haswell build (repack on)
/// evaluates 40 ids as llama-cli does and saves the sequence (`llama_state_seq_save_file`)
/// and the whole context (`llama_state_save_file`); both files read back as the same cache, and
/// it is the K and V our lane computes for those ids (its `Kcur`/`Vcur` taps, rounded to
/// the cache type), cell by cell, layer by layer: the layouts (V transposed without flash
/// attention) are read as llama.cpp writes them. Then a lane started from the context
/// file emits what it emits started from the sequence state.
fn state_files_hold_the_cache(a: Attention) -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(40);
    let run = LlamaRun {
        mode: Mode::Prompt,
        repack: true,
        steps: 0,
        attn: a,
        batching: Batching::LLAMA_CLI,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    let (seq, ctx) = (dir.path().join("seq.state"), dir.path().join("context.bin"));
    let mut cmd = capture_cmd(Build::Haswell, &model.path, &ids, &run, dir.path())?;
    cmd.arg("--no-taps").arg("--state-out").arg(&seq).arg("--session-out").arg(&ctx);
    cmd.arg("--out").arg(dir.path().join("steps.safetensors"));
    let res = cmd.output().map_err(|e| format!("tiercheck-capture: {e}"))?;
    if !res.status.success() {
        return Err(format!("tiercheck-capture failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    let s = KvState::read(&seq).map_err(|e| e.to_string())?;
    let t = KvState::read(&ctx).map_err(|e| e.to_string())?;
    use tiercheck_model::state::StateFile;
    if s.file != StateFile::Sequence || t.file != (StateFile::Context { arch: "qwen3".into() }) {
        return Err(format!("file kinds {:?} and {:?}", s.file, t.file));
    }
    if (s.cells, &s.tokens, s.kv, s.fa()) != (40, &ids, a.kv, a.fa)
        || (t.cells, &t.tokens, t.k != s.k, t.v != s.v) != (40, &ids, false, false)
    {
        return Err("the sequence state and the context file differ, or not as saved".into());
    }
    // Our lane's K and V for the same ids, as stored in a cache of this type.
    let spec = RunSpec {
        ids: ids.clone(),
        steps: 0,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        forced: Vec::new(),
    };
    let mine = ours_spec(
        &model,
        lane_arith(Build::Haswell.lane(true))?,
        &spec,
        a,
        512,
        &dir.path().join("ours.st"),
    )?;
    let stored = |x: f32| match (a.kv, a.fa) {
        (KvType::F32, FlashAttn::Off) => x,
        _ => tiercheck_core::fp16::f16_bits_to_f32(tiercheck_core::fp16::f32_to_f16_bits_hw(x)),
    };
    for il in 0..model.hp.n_layer {
        for (tap, got) in [("Kcur", &s.k[il]), ("Vcur", &s.v[il])] {
            let t = mine.taps.get(&(0, format!("{tap}-{il}"))).ok_or("our trace lacks a tap")?;
            let want: Vec<f32> = t.data.iter().map(|&x| stored(x)).collect();
            if want.len() != got.len()
                || want.iter().zip(got).any(|(x, y)| x.to_bits() != y.to_bits())
            {
                return Err(format!(
                    "layer {il}: the saved {tap} is not our lane's {tap} as stored"
                ));
            }
        }
    }
    // A run from either file is the same run.
    let from = |st: KvState| -> Result<Vec<u32>, String> {
        let mut dec =
            Decoder::new(&model, lane_arith(Build::Haswell.lane(true))?, Residual::F32, 512, a)
                .map_err(|e| e.to_string())?;
        dec.set_state(Some(Arc::new(st))).map_err(|e| e.to_string())?;
        let spec = RunSpec {
            ids: vec![7],
            steps: 4,
            mode: Mode::Decode,
            batching: Batching::LLAMA_CLI,
            forced: Vec::new(),
        };
        let out =
            sequence::run(&dec, &spec, TapSink::new(false, false)).map_err(|e| e.to_string())?;
        Ok(out.generated)
    };
    let (x, y) = (from(s)?, from(t)?);
    if x != y {
        return Err(format!("from the sequence state {x:?}, from the whole-context state {y:?}"));
    }
    eprintln!(
        "{}: both files hold our lane's K and V of 40 ids; greedy from them {x:?}",
        a.label()
    );
    Ok(())
}

/// NUMA matters: our lane not told that llama.cpp ran NUMA-aware (`tier_numa` off) does
/// not reproduce its NUMA-aware trace of `cli` with plain weights.
fn llama_numa_matters(build: Build, cli: CliRun) -> Result<(), String> {
    let a = Attention {
        tier_threads: cli.threads,
        tier_numa: true,
        ..attn(KvType::F16, FlashAttn::On)
    };
    let plain = Attention { tier_numa: false, ..a };
    llama_setting_matters(build, false, cli, a, plain, "not told of NUMA")
}

/// A qwen3 GGUF written by gguf-py itself (F32 and Q8_0 weights, a tied and an untied
/// variant): the decoder loads it and its f32 forward matches the numpy one.
fn gguf_py_model(tied: bool) -> Result<(), String> {
    let py = python()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("tiny.gguf");
    let mut args = vec![
        repo_root().join("ci/py/make_tiny_qwen3.py").display().to_string(),
        path.display().to_string(),
    ];
    if tied {
        args.push("--tied".into());
    }
    run_python(&py, &args)?;
    let model = Model::open(&path).map_err(|e| e.to_string())?;
    let ids = vec![1u32, 2, 3, 700, 5, 2999, 42];
    let ids_s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let theirs_path = dir.path().join("numpy.safetensors");
    run_python(
        &py,
        &[
            repo_root().join("ci/py/ref_forward.py").display().to_string(),
            "--model".into(),
            path.display().to_string(),
            "--ids".into(),
            ids_s.join(","),
            "--mode".into(),
            "decode".into(),
            "--out".into(),
            theirs_path.display().to_string(),
        ],
    )?;
    let theirs = read_trace(&theirs_path).map_err(|e| e.to_string())?;
    let f32_off = attn(KvType::F32, FlashAttn::Off);
    let out_path = dir.path().join("ours.safetensors");
    let mine = ours(&model, Arith::DequantF32, &ids, Mode::Decode, f32_off, &out_path)?;
    let (diffs, unmatched) = tapdiff::compare(&mine, &theirs);
    if !unmatched.is_empty() || diffs.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    let worst = diffs.iter().max_by(|a, b| a.rel_l2.total_cmp(&b.rel_l2)).expect("nonempty");
    if worst.rel_l2 > F64_TOL {
        return Err(format!(
            "step {} tap {}: rel_l2 {:.3e} > {F64_TOL:e}",
            worst.step, worst.name, worst.rel_l2
        ));
    }
    // And every lane runs it (Q8_0 and F32 weights through the lanes' kernels).
    for lane in lanes::all() {
        let chosen = lanes::choose(lane, Impl::Auto)?;
        let arith = Arith::from_chosen(&chosen, 1);
        let dec = Decoder::new(&model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT)
            .map_err(|e| format!("{}: {e}", lane.name))?;
        let out = sequence::run(
            &dec,
            &RunSpec {
                ids: ids.clone(),
                steps: 4,
                mode: Mode::Prompt,
                batching: Batching::LLAMA_CLI,
                forced: Vec::new(),
            },
            TapSink::none(),
        )
        .map_err(|e| format!("{}: {e}", lane.name))?;
        if out.generated.len() != 4 {
            return Err(format!("{}: {} tokens generated", lane.name, out.generated.len()));
        }
    }
    Ok(())
}

/// `tiercheck delta` between our lane and llama.cpp's own greedy trace (a prompt of 9
/// ids as one batch, so the plain K-quant weights take the tiled path, then 12 greedy
/// steps): the same tokens, and every tap of every step bitwise equal, free-running and
/// layer-local.
fn llama_delta() -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = dir.path().join("llama.safetensors");
    let ids = [17, 2045, 388, 901, 5, 5, 912, 42, 3000];
    let defaults = attn(KvType::F16, FlashAttn::On);
    let run = LlamaRun {
        mode: Mode::Prompt,
        repack: true,
        steps: 12,
        attn: defaults,
        batching: Batching::EVERY_ROW,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    llama_trace(Build::Haswell, &model.path, &ids, run, &out)?;
    let a = tiercheck_analysis::Source::parse(Build::Haswell.lane(true), Impl::Auto)
        .map_err(|e| e.to_string())?;
    let b = tiercheck_analysis::Source::Trace(out);
    let opts = tiercheck_analysis::DeltaOptions {
        dump: Default::default(),
        ids: Vec::new(),
        steps: 0,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        n_ctx: 512,
        attn: defaults,
        threshold: 0.2,
        floor_seeds: 0,
        threads: 2,
        state: None,
    };
    let r = tiercheck_analysis::delta(&model, &a, &b, &opts).map_err(|e| format!("{e:#}"))?;
    if r.tokens_a != r.tokens_b || r.tokens_a.len() != 13 {
        return Err(format!("tokens differ: {:?} vs {:?}", r.tokens_a, r.tokens_b));
    }
    if let Some(t) = &r.free.first_tap {
        return Err(format!(
            "free-running: first differing tap {t} at step {:?}",
            r.free.first_step
        ));
    }
    let ll = r.layer_local.as_ref().ok_or("no layer-local comparison")?;
    if let Some(t) = &ll.first_tap {
        return Err(format!("layer-local: first differing tap {t}"));
    }
    eprintln!(
        "llama.cpp delta: 13 greedy tokens identical, {} taps per step bitwise equal",
        r.free.rows.len()
    );
    Ok(())
}

/// `delta` on two plain dumps of llama.cpp's haswell build (repack on and off, the F32
/// cache without flash attention, decode mode; no metadata but the mode and ids given):
/// it identifies each side's lane and attention setting, measures its floor with them,
/// compares layer-locally, and reports the setting it identified; the activation flip
/// between the two builds' plain and repacked matmuls is named.
fn llama_delta_two_dumps() -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = [17, 2045, 388, 901, 55, 1200, 7, 300];
    let mut dumps = Vec::new();
    for repack in [true, false] {
        let out = dir.path().join(format!("llama-{repack}.safetensors"));
        let run = LlamaRun {
            mode: Mode::Decode,
            repack,
            steps: 4,
            attn: attn(KvType::F32, FlashAttn::Off),
            batching: Batching::EVERY_ROW,
            ctx: 512,
            threads: LLAMA_THREADS,
            state_in: None,
            numa: false,
        };
        let t = llama_trace(Build::Haswell, &model.path, &ids, run, &out)?;
        // The taps as an engine dumps them: one array per tap, rows = steps, nothing else.
        let mut names: Vec<String> = t.taps.keys().map(|(_, n)| n.clone()).collect();
        names.sort();
        names.dedup();
        let tensors: Vec<tiercheck_gguf::tensorfile::Tensor> = names
            .iter()
            .map(|n| {
                let rows: Vec<f32> =
                    (0..t.steps.len()).flat_map(|s| t.taps[&(s, n.clone())].data.clone()).collect();
                let w = rows.len() / t.steps.len();
                tiercheck_gguf::tensorfile::Tensor {
                    name: n.clone(),
                    shape: vec![t.steps.len(), w],
                    data: rows,
                }
            })
            .collect();
        let fed: Vec<u32> = t.steps.iter().map(|s| s.input_ids[0]).collect();
        let path = dir.path().join(format!("dump-{repack}.safetensors"));
        tiercheck_gguf::tensorfile::write(&path, &tensors, &Default::default())
            .map_err(|e| e.to_string())?;
        dumps.push((path, fed));
    }
    let opts = tiercheck_analysis::DeltaOptions {
        dump: tiercheck_model::import::ImportOptions {
            ids: Some(dumps[0].1.clone()),
            mode: Some(Mode::Decode),
            strict: false,
        },
        ids: Vec::new(),
        steps: 0,
        mode: Mode::Decode,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        n_ctx: 512,
        // tiercheck's defaults: the dumps say otherwise, as identified.
        attn: attn(KvType::F16, FlashAttn::On),
        threshold: 0.2,
        floor_seeds: 1,
        threads: 2,
        state: None,
    };
    let a = tiercheck_analysis::Source::Trace(dumps[0].0.clone());
    let b = tiercheck_analysis::Source::Trace(dumps[1].0.clone());
    let r = tiercheck_analysis::delta(&model, &a, &b, &opts).map_err(|e| format!("{e:#}"))?;
    let want_sides = [
        "identified as x86_64-avx2-repack (kv=f32 fa=off",
        "identified as x86_64-avx2 (kv=f32 fa=off",
    ];
    let sides_ok = r.sides.len() == 2 && r.sides.iter().zip(want_sides).all(|(s, w)| s.contains(w));
    let flips: Vec<usize> =
        r.layer_verdicts.iter().filter(|v| v.verdict == "flip").map(|v| v.layer).collect();
    if !sides_ok || r.attention != "kv=f32 fa=off" || r.floor.is_none() || flips.is_empty() {
        return Err(format!(
            "sides {:?}, attention {}, floor {}, flips at layers {flips:?}; verdict {}",
            r.sides,
            r.attention,
            r.floor.is_some(),
            r.headline.text
        ));
    }
    eprintln!("two llama.cpp dumps: {:?}; {}", r.sides, r.headline.text);
    Ok(())
}

/// Run `cmd` (a capture writing `out`) and compare its trace with `theirs`: the same
/// taps, shapes and step count, every tap bitwise (`judge`); `what` names the path.
fn captured_matches(
    mut cmd: Command,
    out: &Path,
    theirs: &Trace,
    what: &str,
) -> Result<Trace, String> {
    let res = cmd.output().map_err(|e| e.to_string())?;
    if !res.status.success() {
        return Err(format!("{what} failed: {}", String::from_utf8_lossy(&res.stderr)));
    }
    let mine = read_trace(out).map_err(|e| e.to_string())?;
    let (diffs, unmatched) = tapdiff::compare(&mine, theirs);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    if mine.steps.len() != theirs.steps.len() {
        return Err(format!("{} vs {} steps", mine.steps.len(), theirs.steps.len()));
    }
    judge(what, &diffs)?;
    Ok(mine)
}

/// The aarch64 builds' path (the static `llamataps` driver writing a dump that
/// `tiercheck-capture --driver` turns into a trace) captures exactly what the in-process path
/// captures: the same driver source built for this host against the haswell library,
/// decode and prompt mode with greedy steps, every tap and every step record equal.
fn driver_matches_in_process() -> Result<(), String> {
    let model = embedded_model()?;
    let key = tiercheck_oracle::llama_driver_env().map_err(|e| e.to_string())?;
    let driver = OracleConfig::from_env().setting(key).map_err(|e| e.to_string())?;
    if !driver.is_file() {
        return Err(format!("oracle not built: run ci/oracle (no {})", driver.display()));
    }
    let py = python()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    for mode in [Mode::Decode, Mode::Prompt] {
        let a = dir.path().join(format!("in-process-{}.safetensors", mode.name()));
        let run = LlamaRun {
            mode,
            repack: true,
            steps: 3,
            attn: attn(KvType::F16, FlashAttn::On),
            batching: Batching::EVERY_ROW,
            ctx: 512,
            threads: LLAMA_THREADS,
            state_in: None,
            numa: false,
        };
        let theirs = llama_trace_fresh(Build::Haswell, &model.path, &forced_ids(10), run, &a)?;
        let b = dir.path().join(format!("driver-{}.safetensors", mode.name()));
        let ids: Vec<String> = forced_ids(10).iter().map(|i| i.to_string()).collect();
        let mut cmd = capture(&py);
        cmd.arg("--driver")
            .arg(&driver)
            .args(["--qemu-cpu", "", "--model"])
            .arg(&model.path)
            .args(["--ids", &ids.join(","), "--mode", mode.name(), "--steps", "3"])
            .args(["--kv", "f16", "--fa", "on", "--threads", &LLAMA_THREADS.to_string(), "--out"])
            .arg(&b)
            .env_remove("GGML_CPU_TILED_MM");
        let what = format!("driver vs in-process, {}", mode.name());
        let mine = captured_matches(cmd, &b, &theirs, &what)?;
        if mine.steps.len() < 4 {
            return Err(format!("{} steps", mine.steps.len()));
        }
        for (x, y) in mine.steps.iter().zip(&theirs.steps) {
            if x.input_ids != y.input_ids || x.positions != y.positions || x.emitted != y.emitted {
                return Err(format!("{} step records differ", mode.name()));
            }
        }
    }
    Ok(())
}

/// `tiercheck-capture --llama-cpp-python` finds the libllama of an installed
/// `llama_cpp` package and captures exactly what `--lib` captures from the same build:
/// the package stood in by a folder `llama_cpp/` on `PYTHONPATH` holding the haswell
/// build's libraries in `lib/` (where llama-cpp-python's wheels put them; they load each
/// other through `$ORIGIN`), decode and prompt mode, every tap and step record equal.
fn capture_from_llama_cpp_python() -> Result<(), String> {
    let model = embedded_model()?;
    let key = tiercheck_oracle::llama_env("haswell").map_err(|e| e.to_string())?;
    let lib = OracleConfig::from_env().setting(key).map_err(|e| e.to_string())?;
    if !lib.join("libllama.so").is_file() {
        return Err(format!(
            "oracle not built: run ci/oracle (no libllama.so in {})",
            lib.display()
        ));
    }
    let py = python()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pkg = dir.path().join("site/llama_cpp");
    std::fs::create_dir_all(pkg.join("lib")).map_err(|e| e.to_string())?;
    std::fs::write(pkg.join("__init__.py"), "").map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(&lib).map_err(|e| e.to_string())? {
        let e = e.map_err(|e| e.to_string())?;
        let to = pkg.join("lib").join(e.file_name());
        match std::fs::read_link(e.path()) {
            Ok(target) => std::os::unix::fs::symlink(target, &to),
            Err(_) => std::fs::copy(e.path(), &to).map(|_| ()),
        }
        .map_err(|err| format!("{}: {err}", to.display()))?;
    }
    let path = std::env::join_paths([repo_root().join("tools/capture"), dir.path().join("site")])
        .map_err(|e| e.to_string())?;
    for mode in [Mode::Decode, Mode::Prompt] {
        let a = dir.path().join(format!("lib-{}.safetensors", mode.name()));
        let run = LlamaRun {
            mode,
            repack: true,
            steps: 2,
            attn: attn(KvType::F16, FlashAttn::On),
            batching: Batching::EVERY_ROW,
            ctx: 512,
            threads: LLAMA_THREADS,
            state_in: None,
            numa: false,
        };
        let theirs = llama_trace_fresh(Build::Haswell, &model.path, &forced_ids(6), run, &a)?;
        let b = dir.path().join(format!("package-{}.safetensors", mode.name()));
        let ids: Vec<String> = forced_ids(6).iter().map(|i| i.to_string()).collect();
        let mut cmd = capture(&py);
        cmd.env("PYTHONPATH", &path)
            .arg("--llama-cpp-python")
            .arg("--model")
            .arg(&model.path)
            .args(["--ids", &ids.join(","), "--mode", mode.name(), "--steps", "2"])
            .args(["--kv", "f16", "--fa", "on", "--threads", &LLAMA_THREADS.to_string(), "--out"])
            .arg(&b)
            .env_remove("GGML_CPU_TILED_MM");
        captured_matches(
            cmd,
            &b,
            &theirs,
            &format!("--llama-cpp-python vs --lib, {}", mode.name()),
        )?;
    }
    Ok(())
}

/// Why the zen4 trials cannot run on this host (qemu-x86_64 cannot emulate AVX-512).
const HOST_LACKS_AVX512: &str =
    "this host lacks AVX-512 F/DQ: llama.cpp's zen4 build cannot run here (qemu-x86_64 \
     cannot emulate AVX-512)";

fn host_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        tiercheck_core::detect::cpu_has("avx512f") && tiercheck_core::detect::cpu_has("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The expert routing's sort (`tiercheck_model::moe::std_sort_by`) against libstdc++'s
/// own `std::sort` with ggml's argsort comparator (`ci/oracle-driver/stdsort.cpp`, built
/// here by the host's g++), on rows of every length from 1 to 40 and the expert counts
/// of real models (64, 128, 256, 512), with values drawn from sets of 1, 2, 3 and 7
/// distinct values (ties everywhere) and from a continuous range: the same permutation,
/// ties included.
fn std_sort() -> Result<(), String> {
    let gxx = ["g++", "c++"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .ok_or("oracle not built: no C++ compiler (g++) on PATH")?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let bin = dir.path().join("stdsort");
    let out = Command::new(gxx)
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&bin)
        .arg(repo_root().join("ci/oracle-driver/stdsort.cpp"))
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("{gxx} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut rows: Vec<Vec<f32>> = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x = tiercheck_core::rng::splitmix64(x);
        x
    };
    let lens: Vec<usize> = (1..=40).chain([64, 128, 256, 512]).collect();
    for &n in &lens {
        for distinct in [1u64, 2, 3, 7, 0] {
            for _ in 0..4 {
                rows.push(
                    (0..n)
                        .map(|_| match distinct {
                            0 => (next() >> 40) as f32 / (1u64 << 24) as f32,
                            d => (next() % d) as f32 * 0.25,
                        })
                        .collect(),
                );
            }
        }
    }
    let input: String = rows
        .iter()
        .map(|r| r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" ") + "\n")
        .collect();
    let mut child = Command::new(&bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Written from another thread: the child's output would fill its pipe otherwise.
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes())
    });
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    writer.join().map_err(|_| "writer panicked")?.map_err(|e| e.to_string())?;
    let text = String::from_utf8(out.stdout).map_err(|e| e.to_string())?;
    let theirs: Vec<&str> = text.lines().collect();
    if theirs.len() != rows.len() {
        return Err(format!("stdsort wrote {} lines for {} rows", theirs.len(), rows.len()));
    }
    let mut ties = 0;
    for (r, line) in rows.iter().zip(theirs) {
        let mine = tiercheck_model::moe::std_sort_by(r.len(), |a, b| r[a] > r[b]);
        let want: Vec<usize> = line
            .split(' ')
            .map(|v| v.parse().map_err(|_| format!("bad index {v:?}")))
            .collect::<Result<_, _>>()?;
        if mine != want {
            return Err(format!("{} values {:?}: libstdc++ {want:?}, ours {mine:?}", r.len(), r));
        }
        let stable = {
            let mut v: Vec<usize> = (0..r.len()).collect();
            v.sort_by(|&a, &b| r[b].total_cmp(&r[a]));
            v
        };
        ties += usize::from(stable != want);
    }
    println!(
        "{} rows (lengths 1..=40, 64, 128, 256, 512): every permutation equal to libstdc++'s; \
         {ties} of them order ties otherwise than a stable sort",
        rows.len()
    );
    if ties == 0 {
        return Err("no row tested the tie order".into());
    }
    Ok(())
}

/// `tiercheck gguf quantize --type <scheme>` against llama.cpp's own `llama_model_quantize`
/// (the haswell build, ftype `ftype`, no importance matrix, through `ci/py/llama_quantize.py`)
/// on two f32 models: the embedded model's (8 layers, n_head/n_head_kv = 4) and a narrower
/// one with 17 layers and n_head/n_head_kv = 1 (the other side of the n_gqa rules, and
/// Q3_K_M's n/16 rule on a layer): every tensor's type and bytes, and `general.file_type`,
/// equal.
fn llama_quantize(scheme: &str, ftype: u32) -> Result<(), String> {
    let recipe = Recipe::load(&Recipe::default_path()).map_err(|e| e.to_string())?;
    llama_quantize_model(scheme, ftype, &recipe)?;
    let text = std::fs::read_to_string(Recipe::default_path()).map_err(|e| e.to_string())?;
    let mut edited = String::new();
    for line in text.lines() {
        let line = match line.split(" = ").next() {
            Some("n_layer") => "n_layer = 17",
            Some("n_head_kv") => "n_head_kv = 8",
            Some("n_ff") => "n_ff = 512",
            Some("n_vocab") => "n_vocab = 512",
            _ => line,
        };
        edited.push_str(line);
        edited.push('\n');
    }
    let narrow = Recipe::parse("<17-layer recipe>", &edited).map_err(|e| e.to_string())?;
    llama_quantize_model(scheme, ftype, &narrow)
}

fn llama_quantize_model(scheme: &str, ftype: u32, recipe: &Recipe) -> Result<(), String> {
    let key = tiercheck_oracle::llama_env("haswell").map_err(|e| e.to_string())?;
    let lib = OracleConfig::from_env().setting(key).map_err(|e| e.to_string())?;
    if !lib.join("libllama.so").is_file() {
        return Err(format!(
            "oracle not built: run ci/oracle (no libllama.so in {})",
            lib.display()
        ));
    }
    let py = python()?;
    let f32_bytes = embedded::generate_f32(recipe).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (src, dst) = (dir.path().join("f32.gguf"), dir.path().join("theirs.gguf"));
    std::fs::write(&src, &f32_bytes).map_err(|e| e.to_string())?;
    let out = Command::new(&py)
        .arg(repo_root().join("ci/py/llama_quantize.py"))
        .arg(&lib)
        .arg(&src)
        .arg(&dst)
        .arg(ftype.to_string())
        .env("PYTHONPATH", repo_root().join("tools/capture"))
        .output()
        .map_err(|e| format!("running {}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!("llama_quantize.py failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let theirs = tiercheck_gguf::GgufFile::open(&dst).map_err(|e| e.to_string())?;
    let input = tiercheck_gguf::GgufFile::from_bytes("<f32 model>", f32_bytes)
        .map_err(|e| e.to_string())?;
    let scheme = tiercheck_model::model_quant::Scheme::parse(scheme).ok_or("unknown scheme")?;
    let (w, plans) =
        tiercheck_model::model_quant::quantize(&input, scheme).map_err(|e| e.to_string())?;
    let ours =
        tiercheck_gguf::GgufFile::from_bytes("<ours>", w.to_bytes().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let file_type =
        |f: &tiercheck_gguf::GgufFile| f.get("general.file_type").and_then(|v| v.to_u64());
    if file_type(&ours) != file_type(&theirs) {
        return Err(format!(
            "general.file_type: ours {:?}, llama.cpp {:?}",
            file_type(&ours),
            file_type(&theirs)
        ));
    }
    let mut bad = Vec::new();
    let mut types = std::collections::BTreeMap::<&str, usize>::new();
    for t in theirs.tensors() {
        let (Some(o), Some(p)) = (ours.tensor(&t.name), plans.iter().find(|p| p.name == t.name))
        else {
            bad.push(format!("{}: missing from ours", t.name));
            continue;
        };
        *types.entry(t.ty.name()).or_default() += 1;
        if o.ty != t.ty {
            bad.push(format!("{}: ours {} ({}), llama.cpp {}", t.name, o.ty, p.reason, t.ty));
        } else if ours.tensor_data(o) != theirs.tensor_data(t) {
            bad.push(format!("{}: {} bytes differ", t.name, t.ty));
        }
    }
    if theirs.tensors().len() != ours.tensors().len() {
        bad.push(format!(
            "{} tensors in ours, {} in llama.cpp's",
            ours.tensors().len(),
            theirs.tensors().len()
        ));
    }
    if bad.is_empty() {
        eprintln!(
            "{scheme:?}, {} layers: {} tensors equal, types {types:?}",
            recipe.n_layer,
            theirs.tensors().len()
        );
        Ok(())
    } else {
        Err(format!(
            "{} of {} tensors differ: {}",
            bad.len(),
            theirs.tensors().len(),
            bad.join("; ")
        ))
    }
}

fn trial(name: &str, f: impl FnOnce() -> Result<(), String> + Send + 'static) -> Trial {
    tiercheck_testkit::claims::tracked(trial_name(SUITE, name), move || match f() {
        Ok(()) => Ok(Completion::Completed),
        Err(e) if e == HOST_LACKS_AVX512 || e == NO_FAKE_NUMA => Ok(Completion::ignored_with(e)),
        Err(e) if e.contains("oracle not built") && !require_oracle() => {
            Ok(Completion::ignored_with(e))
        }
        Err(e) => Err(e.into()),
    })
}

/// `tiercheck identify` on dumps the capture tool takes from llama.cpp's own builds
/// (decode mode, llama.cpp's default attention, repack on, and the haswell build with
/// repack off too): each is explained, by the lane of that build; one planted value in
/// the haswell dump is reported as the first unexplained tap at its step.
fn llama_identify() -> Result<(), String> {
    llama_identify_on(&embedded_model()?)
}

/// [`llama_identify`] on `model`.
fn llama_identify_on(model: &Model) -> Result<(), String> {
    use tiercheck_analysis::identify::{identify, IdentifyOptions};
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ids = forced_ids(4);
    let opts = IdentifyOptions {
        lanes: None,
        imp: Impl::Auto,
        residual: Residual::F32,
        n_ctx: 512,
        floor_seeds: 1,
        dump: Default::default(),
        threads: 2,
        state: None,
    };
    let builds = [
        (Build::Haswell, true),
        (Build::Haswell, false),
        (Build::ArmDotprod, true),
        (Build::ArmI8mm, true),
        (Build::ArmSve128, true),
        (Build::ArmSve256, true),
    ];
    for (build, repack) in builds {
        let out = dir.path().join(format!("{}-{repack}.safetensors", build.name()));
        let run = LlamaRun {
            mode: Mode::Decode,
            repack,
            steps: 0,
            attn: attn(KvType::F16, FlashAttn::On),
            batching: Batching::EVERY_ROW,
            ctx: 512,
            threads: LLAMA_THREADS,
            state_in: None,
            numa: false,
        };
        llama_trace(build, &model.path, &ids, run, &out)?;
        let r = identify(model, &out, &opts).map_err(|e| format!("{e:#}"))?;
        // A model no GPU lane runs (Llama 3.1's RoPE frequency factors, a mixture of
        // experts): each GPU lane is named with the reason, not tried.
        let gpu_refuses =
            model.file.tensor("rope_freqs.weight").is_some() || model.hp.moe.is_some();
        if gpu_refuses != r.not_candidates.iter().any(|n| n.starts_with("cuda-sm90: ")) {
            return Err(format!(
                "not candidates {:?} (GPU lanes refuse it: {gpu_refuses})",
                r.not_candidates
            ));
        }
        let want = format!("{} (kv=f16 fa=on)", build.lane(repack));
        if !r.explained || !r.best_lanes.contains(&want) {
            return Err(format!(
                "{} repack {repack}: {}; best {:?}",
                build.name(),
                r.verdict,
                r.best_lanes
            ));
        }
        eprintln!("{} repack {repack}: {}", build.name(), r.verdict);
    }
    // One planted value (step 1, the layer-2 output of the last feed-forward matmul:
    // ffn_out-2, or a mixture of experts' ffn_moe_down-2) in the haswell dump.
    let planted_tap = if model.hp.moe.is_some() { "ffn_moe_down-2" } else { "ffn_out-2" };
    let src = dir.path().join("haswell-true.safetensors");
    let mut t = read_trace(&src).map_err(|e| e.to_string())?;
    let tap = t
        .taps
        .get_mut(&(1, planted_tap.to_string()))
        .ok_or_else(|| format!("no {planted_tap} at step 1"))?;
    tap.data[7] *= 1.001;
    let planted = dir.path().join("planted.safetensors");
    tiercheck_model::import::write(&planted, &t).map_err(|e| e.to_string())?;
    let r = identify(model, &planted, &opts).map_err(|e| format!("{e:#}"))?;
    let u = r
        .first_unexplained
        .as_ref()
        .ok_or_else(|| format!("planted value explained: {}", r.verdict))?;
    if (u.step, u.tap.as_str(), u.kind.as_str()) != (1, planted_tap, "kernel") {
        return Err(format!("planted value at step 1 {planted_tap}, reported: {}", r.verdict));
    }
    eprintln!("planted: {}", r.verdict);
    Ok(())
}

/// `identify` on runs made as llama-cli makes them (ubatches, the last row's logits,
/// greedy steps) with their thread count removed from the metadata, as an engine's dump
/// would come: the i8mm build with repack off at 3 threads (CLI_THREADS, where the chunk
/// plan differs from one thread's) must be explained by `aarch64-i8mm` with a class of
/// counts holding 3 and not 1; haswell with repack on at 3 threads at llama-cli's sizes
/// (split-KV steps) by `x86_64-avx2-repack` with a class holding 3 and not 1 or 2.
fn llama_identify_cli() -> Result<(), String> {
    use tiercheck_analysis::identify::{identify, IdentifyOptions};
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let default = attn(KvType::F16, FlashAttn::On);
    for (build, repack, cli, lanes, wrong) in [
        (
            Build::ArmI8mm,
            false,
            CliRun { threads: 3, ..CLI_THREADS },
            vec!["aarch64-i8mm", "aarch64-neon"],
            vec![1],
        ),
        (
            Build::Haswell,
            true,
            CliRun { threads: 3, ..CLI_DEFAULTS },
            vec!["x86_64-avx2-repack"],
            vec![1, 2],
        ),
    ] {
        let a = Attention { tier_threads: cli.threads, ..default };
        let mut t = (*cli_trace(build, repack, a, cli)?).clone();
        t.meta.remove("threads");
        t.meta.remove("tier_threads");
        let path = dir.path().join(format!("{}.safetensors", build.name()));
        tiercheck_model::import::write(&path, &t).map_err(|e| e.to_string())?;
        let opts = IdentifyOptions {
            lanes: Some(lanes.iter().map(|l| lanes::find(l)).collect::<Result<_, _>>()?),
            imp: Impl::Auto,
            residual: Residual::F32,
            n_ctx: cli.ctx,
            floor_seeds: 0,
            dump: Default::default(),
            threads: 2,
            state: None,
        };
        let r = identify(&model, &path, &opts).map_err(|e| format!("{e:#}"))?;
        let lane = build.lane(repack);
        let best: Vec<_> = r.candidates.iter().filter(|c| r.best_lanes.contains(&c.name)).collect();
        // Every equally good candidate is the build's lane with counts other than the
        // wrong ones, and one of them holds 3.
        let ok = r.explained
            && best.iter().any(|c| c.tier_threads.contains(&3))
            && best
                .iter()
                .all(|c| c.lane == lane && wrong.iter().all(|w| !c.tier_threads.contains(w)));
        if !ok {
            return Err(format!(
                "{} at 3 threads without its count: {}; best {:?}",
                build.name(),
                r.verdict,
                r.best_lanes
            ));
        }
        eprintln!(
            "{} at 3 threads: {} (of {} candidates)",
            build.name(),
            r.verdict,
            r.candidates.len()
        );
    }
    Ok(())
}

/// `identify` on llama.cpp's trace of decode steps after 16384 saved cells at 14 threads,
/// its thread count removed: given the saved cache (`--state`), the haswell lane explains
/// it with a class of counts that holds 14 and none of 1, 2 or 3 (split-KV parts of 16640
/// cells); without the cache, or with the other attention setting's, it refuses with the
/// reason.
fn llama_identify_long() -> Result<(), String> {
    use tiercheck_analysis::identify::{identify, IdentifyOptions};
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let a = Attention { tier_threads: 14, ..attn(KvType::F16, FlashAttn::On) };
    let mut t = (*long_trace(None, Build::Haswell, true, a, 16384)?).clone();
    t.meta.remove("threads");
    t.meta.remove("tier_threads");
    let path = dir.path().join("long.safetensors");
    tiercheck_model::import::write(&path, &t).map_err(|e| e.to_string())?;
    let (_, state) = long_state(None, a, 16384)?;
    let opts = |state| -> Result<IdentifyOptions, String> {
        Ok(IdentifyOptions {
            lanes: Some(vec![lanes::find("x86_64-avx2-repack")?]),
            imp: Impl::Auto,
            residual: Residual::F32,
            n_ctx: LONG_CTX,
            floor_seeds: 0,
            dump: Default::default(),
            threads: 2,
            state,
        })
    };
    let r = identify(&model, &path, &opts(Some(state))?).map_err(|e| format!("{e:#}"))?;
    let best: Vec<_> = r.candidates.iter().filter(|c| r.best_lanes.contains(&c.name)).collect();
    let ok = r.explained
        && best.iter().any(|c| c.tier_threads.contains(&14))
        && best.iter().all(|c| [1, 2, 3].iter().all(|w| !c.tier_threads.contains(w)));
    if !ok {
        return Err(format!(
            "after 16384 cells at 14 threads: {}; best {:?}",
            r.verdict, r.best_lanes
        ));
    }
    eprintln!(
        "after 16384 cells at 14 threads: {} (of {} candidates)",
        r.verdict,
        r.candidates.len()
    );
    let e = identify(&model, &path, &opts(None)?).map(|_| ()).unwrap_err().to_string();
    if !e.contains("pass it with --state") {
        return Err(format!("without the saved cache: {e}"));
    }
    let (_, other) = long_state(None, attn(KvType::F32, FlashAttn::Off), 16384)?;
    let e = identify(&model, &path, &opts(Some(other))?).map(|_| ()).unwrap_err().to_string();
    if !e.contains("sha256") {
        return Err(format!("with another saved cache: {e}"));
    }
    Ok(())
}

/// The trace cache's premise: llama.cpp run again on the same build, model and
/// arguments writes the same trace. One cached run (the i8mm build under qemu, prompt
/// mode, repack on, llama.cpp's default attention: one of the trials' own runs) is run
/// again now and compared with what the cache holds: every tap bitwise, the same step
/// records and metadata. A cache entry that does not hold its run fails here.
fn trace_cache_recomputes_bitwise() -> Result<(), String> {
    let model = embedded_model()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let a = attn(KvType::F16, FlashAttn::On);
    let ids = forced_ids(trial_len(a));
    let run = || LlamaRun {
        mode: Mode::Prompt,
        repack: true,
        steps: 0,
        attn: a,
        batching: Batching::EVERY_ROW,
        ctx: 512,
        threads: LLAMA_THREADS,
        state_in: None,
        numa: false,
    };
    let build = Build::ArmI8mm;
    let cached = llama_trace(build, &model.path, &ids, run(), &dir.path().join("cached.st"))?;
    let entry = trace_cache_entry(build, &model.path, &ids, &run())?;
    if std::env::var("TIERCHECK_ORACLE_CACHE").is_ok_and(|v| v == "off") {
        eprintln!("trace cache off: comparing two fresh runs");
    } else if !entry.is_file() {
        return Err(format!("{} was not stored", entry.display()));
    }
    let fresh = llama_trace_fresh(build, &model.path, &ids, run(), &dir.path().join("fresh.st"))?;
    let (diffs, unmatched) = tapdiff::compare(&fresh, &cached);
    if !unmatched.is_empty() {
        return Err(format!("taps differ in presence or shape: {}", unmatched.join("; ")));
    }
    if fresh.steps.len() != cached.steps.len() {
        return Err(format!("{} vs {} steps", fresh.steps.len(), cached.steps.len()));
    }
    for (x, y) in fresh.steps.iter().zip(&cached.steps) {
        if x.input_ids != y.input_ids || x.positions != y.positions || x.emitted != y.emitted {
            return Err("step records differ".into());
        }
    }
    if fresh.meta != cached.meta {
        return Err(format!("metadata differs: {:?} vs {:?}", fresh.meta, cached.meta));
    }
    judge(&format!("llama.cpp {} run again vs {}", build.name(), entry.display()), &diffs)
}

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "model_oracle";

/// The suite's trials, in the order they run.
pub fn trials(selection: &Selection) -> Vec<Trial> {
    let mut trials = vec![
        trial("numpy_f64/decode", || numpy_f64(Mode::Decode)),
        trial("numpy_f64/prompt", || numpy_f64(Mode::Prompt)),
        trial("numpy_f64/q3_k_m/prompt", || numpy_f64_scheme("q3_k_m")),
        trial("numpy_f64/iq4_xs/prompt", || numpy_f64_scheme("iq4_xs")),
        trial("numpy_f64/q5_0/prompt", || numpy_f64_scheme("q5_0")),
        trial("gguf_py_model/untied", || gguf_py_model(false)),
        trial("gguf_py_model/tied", || gguf_py_model(true)),
        trial("llama_cpp/delta_greedy", llama_delta),
        trial("llama_cpp/delta_two_dumps", llama_delta_two_dumps),
        trial("llama_cpp/trace_cache/recomputes_bitwise", trace_cache_recomputes_bitwise),
        trial("llama_cpp/driver_matches_in_process", driver_matches_in_process),
        trial("llama_cpp/identify", llama_identify),
        trial("llama_cpp/identify_cli_threads", llama_identify_cli),
        trial("llama_cpp/capture_llama_cpp_python", capture_from_llama_cpp_python),
        trial("llama_cpp/quantize/q2_k", || llama_quantize("q2_k", 10)),
        trial("llama_cpp/quantize/q3_k_m", || llama_quantize("q3_k_m", 12)),
        trial("llama_cpp/quantize/q4_k_m", || llama_quantize("q4_k_m", 15)),
        trial("llama_cpp/quantize/q5_k_m", || llama_quantize("q5_k_m", 17)),
        trial("llama_cpp/quantize/iq4_xs", || llama_quantize("iq4_xs", 30)),
        trial("llama_cpp/quantize/qwen3moe/q4_k_m", || {
            let recipe = Recipe::load(&Recipe::qwen3moe_path()).map_err(|e| e.to_string())?;
            llama_quantize_model("q4_k_m", 15, &recipe)
        }),
        trial("llama_cpp/std_sort", std_sort),
        trial("llama_cpp/split_kv/decode/end_to_end", llama_split_kv),
        trial("llama_cpp/tiled_fa/prompt/end_to_end", || llama_tiled(Build::Haswell, true)),
        trial("llama_cpp/zen4/tiled_fa/prompt/end_to_end", || llama_tiled(Build::Zen4, false)),
        trial("llama_cpp/arm-dotprod/tiled_fa/prompt/end_to_end", || {
            llama_tiled(Build::ArmDotprod, true)
        }),
        trial("llama_cpp/zen4/differs_from_haswell", zen4_differs_from_haswell),
        trial("llama_cpp/arm-sve128/tiled_fa/prompt/end_to_end", || {
            llama_tiled(Build::ArmSve128, true)
        }),
        trial("llama_cpp/arm-sve128/differs_from_i8mm", || {
            build_differs_from_lane(Build::ArmSve128, true, "aarch64-i8mm-repack")
        }),
        trial("llama_cpp/arm-sve256/tiled_fa/prompt/end_to_end", || {
            llama_tiled(Build::ArmSve256, true)
        }),
        trial("llama_cpp/arm-sve256/differs_from_sve128", || {
            build_differs_from_lane(Build::ArmSve256, true, "aarch64-sve128-repack")
        }),
    ];
    // The new weight types in llama.cpp's mixes, on the x86 builds (llama.cpp's default
    // attention): `llama_cpp/quant/<build>/<repack|no_repack>/<mode>/<scheme>/end_to_end`.
    // The legacy fallbacks as uniform models (every matrix in the type; IQ4_NL takes the
    // iq4_nl_8x8 repack on haswell).
    for scheme in ["q5_k_m", "q3_k_m", "q2_k", "iq4_xs", "q4_1", "q5_0", "q5_1", "iq4_nl"] {
        for (build, repack) in
            [(Build::Haswell, true), (Build::Haswell, false), (Build::Zen4, false)]
        {
            for mode in [Mode::Decode, Mode::Prompt] {
                let r = if repack { "repack" } else { "no_repack" };
                let name = format!(
                    "llama_cpp/quant/{}/{r}/{}/{scheme}/end_to_end",
                    build.name(),
                    mode.name()
                );
                trials.push(trial(&name, move || llama_quant_mix(scheme, build, mode, repack)));
            }
        }
    }
    // aarch64-neon on the dotprod build (repack off: the build repacks Q5_K and IQ4_NL
    // into layouts no lane reproduces), under qemu: prompt mode (each row through the
    // same vec_dot a decode step takes on this build), and one mix in decode mode.
    let arm = [("q3_k_m", Mode::Decode), ("q3_k_m", Mode::Prompt), ("iq4_xs", Mode::Prompt)];
    let arm_uniform = [("q2_k", Mode::Prompt), ("q4_1", Mode::Prompt), ("q5_1", Mode::Prompt)];
    for (scheme, mode) in arm.into_iter().chain(arm_uniform).chain([("iq4_nl", Mode::Prompt)]) {
        {
            let name = format!(
                "llama_cpp/quant/arm-dotprod/no_repack/{}/{scheme}/end_to_end",
                mode.name()
            );
            trials.push(trial(&name, move || {
                llama_quant_mix(scheme, Build::ArmDotprod, mode, false)
            }));
        }
    }
    // aarch64-neon-repack on the dotprod build with repack on: IQ4_NL in iq4_nl_4x4, the
    // Q3_K_M mix (Q5_K in q5_K_8x4, Q4_K and Q6_K in theirs, Q3_K plain), and a type the
    // build does not repack.
    for scheme in ["iq4_nl", "q3_k_m", "q5_1"] {
        let name = format!("llama_cpp/quant/arm-dotprod/repack/prompt/{scheme}/end_to_end");
        trials.push(trial(&name, move || {
            llama_quant_mix(scheme, Build::ArmDotprod, Mode::Prompt, true)
        }));
    }
    // The i8mm build (prompt mode: even row counts take the nrc == 2 tiles, Q4_1's
    // included), repack off and on (Q5_K in q5_K_8x8, IQ4_NL in iq4_nl_4x4), and the
    // 128-bit SVE build on a mix without the SVE kernels it runs for Q2_K and Q3_K.
    let i8mm =
        [("q3_k_m", false), ("q4_1", false), ("q5_0", false), ("q3_k_m", true), ("iq4_nl", true)];
    for (scheme, repack) in i8mm {
        let r = if repack { "repack" } else { "no_repack" };
        let name = format!("llama_cpp/quant/arm-i8mm/{r}/prompt/{scheme}/end_to_end");
        trials.push(trial(&name, move || {
            llama_quant_mix(scheme, Build::ArmI8mm, Mode::Prompt, repack)
        }));
    }
    for (scheme, repack) in [("iq4_xs", false), ("q2_k", false), ("q5_k_m", true)] {
        let r = if repack { "repack" } else { "no_repack" };
        let name = format!("llama_cpp/quant/arm-sve128/{r}/prompt/{scheme}/end_to_end");
        trials.push(trial(&name, move || {
            llama_quant_mix(scheme, Build::ArmSve128, Mode::Prompt, repack)
        }));
    }
    // The 256-bit SVE build: its own Q2_K kernel (llama.cpp's Q2_K mix) and Q3_K.
    for scheme in ["q2_k", "q3_k_m"] {
        let name = format!("llama_cpp/quant/arm-sve256/no_repack/prompt/{scheme}/end_to_end");
        trials.push(trial(&name, move || {
            llama_quant_mix(scheme, Build::ArmSve256, Mode::Prompt, false)
        }));
    }
    // The same models run as llama-cli runs them (CLI_SMALL: batches and ubatches, the
    // last row's logits, greedy steps): every scheme on haswell with repack on and off,
    // two on zen4, and per aarch64 build schemes that reach its own paths (the repacked
    // Q5_K and IQ4_NL layouts, the i8mm Q4_1 tiles and Q5_0 tail, the SVE Q2_K kernels):
    // `llama_cpp/quant/<build>/<repack|no_repack>/cli/<scheme>/end_to_end`.
    let all = ["q5_k_m", "q3_k_m", "q2_k", "iq4_xs", "q4_1", "q5_0", "q5_1", "iq4_nl"];
    let mut cli: Vec<(Build, bool, &str)> = Vec::new();
    for scheme in all {
        cli.push((Build::Haswell, true, scheme));
        cli.push((Build::Haswell, false, scheme));
    }
    cli.extend([
        (Build::Zen4, false, "q5_k_m"),
        (Build::Zen4, false, "iq4_nl"),
        (Build::ArmDotprod, true, "q3_k_m"),
        (Build::ArmDotprod, true, "iq4_nl"),
        (Build::ArmDotprod, false, "iq4_xs"),
        (Build::ArmI8mm, false, "q4_1"),
        (Build::ArmI8mm, false, "q5_0"),
        (Build::ArmI8mm, true, "q3_k_m"),
        (Build::ArmSve128, false, "q2_k"),
        (Build::ArmSve128, true, "q5_k_m"),
        (Build::ArmSve256, false, "q2_k"),
        (Build::ArmSve256, true, "q5_k_m"),
    ]);
    for (build, repack, scheme) in cli {
        let name = quant_trial(build, repack, "cli", scheme);
        trials.push(trial(&name, move || llama_cli_quant(scheme, build, repack, CLI_SMALL)));
    }
    // ... at llama-cli's own sizes (CLI_DEFAULTS: 600 ids as ubatches of 512 and 88, the
    // repacked gemm and the tiled flash attention on whole ubatches, then greedy steps
    // attending 600+ cells through split-KV flash attention), per build the schemes that
    // reach its own paths: `llama_cpp/quant/<build>/<repack|no_repack>/cli_defaults/...`.
    for (build, repack, scheme) in [
        (Build::Haswell, true, "q5_k_m"),
        (Build::Haswell, true, "iq4_nl"),
        (Build::Haswell, true, "q2_k"),
        (Build::Haswell, false, "q3_k_m"),
        (Build::Haswell, false, "iq4_xs"),
        (Build::Haswell, false, "q4_1"),
        (Build::Haswell, false, "q5_0"),
        (Build::Haswell, false, "q5_1"),
        (Build::Zen4, false, "q5_k_m"),
        (Build::Zen4, false, "iq4_xs"),
        (Build::ArmDotprod, true, "iq4_nl"),
        (Build::ArmDotprod, true, "q5_k_m"),
        (Build::ArmDotprod, false, "iq4_xs"),
        (Build::ArmI8mm, false, "q4_1"),
        (Build::ArmI8mm, true, "q3_k_m"),
        (Build::ArmI8mm, true, "q5_k_m"),
        (Build::ArmSve128, false, "q2_k"),
        (Build::ArmSve128, true, "q5_k_m"),
        (Build::ArmSve256, false, "q2_k"),
        (Build::ArmSve256, true, "q5_k_m"),
    ] {
        let name = quant_trial(build, repack, "cli_defaults", scheme);
        trials.push(trial(&name, move || llama_cli_quant(scheme, build, repack, CLI_DEFAULTS)));
    }
    // ... at other thread counts (CLI_THREADS: ggml re-chunks the 16-row graphs by
    // thread, which decides the i8mm build's 2x2 tiles of Q4_1 and the repacked rows each
    // thread takes): 1, 3, 8 and 14 on haswell, 3 and 8 on the i8mm build, 3 on zen4, on
    // the dotprod build's repacked Q5_K and IQ4_NL, on the i8mm build's repacked Q5_K and
    // on the SVE builds' Q2_K:
    // `llama_cpp/quant/<build>/<repack|no_repack>/threads/<n>/<scheme>/end_to_end`.
    for (build, repack, scheme, threads) in [
        (Build::Haswell, true, "q5_k_m", 1),
        (Build::Haswell, true, "q5_k_m", 3),
        (Build::Haswell, true, "q5_k_m", 8),
        (Build::Haswell, true, "q5_k_m", 14),
        (Build::Haswell, false, "iq4_xs", 1),
        (Build::Haswell, false, "iq4_xs", 3),
        (Build::Haswell, false, "iq4_xs", 8),
        (Build::Haswell, false, "iq4_xs", 14),
        (Build::ArmI8mm, false, "q4_1", 3),
        (Build::ArmI8mm, false, "q4_1", 8),
        (Build::Zen4, false, "q5_k_m", 3),
        (Build::ArmDotprod, true, "q5_k_m", 3),
        (Build::ArmDotprod, true, "iq4_nl", 3),
        (Build::ArmI8mm, true, "q5_k_m", 3),
        (Build::ArmSve128, false, "q2_k", 3),
        (Build::ArmSve256, false, "q2_k", 3),
    ] {
        let name = quant_trial(build, repack, &format!("threads/{threads}"), scheme);
        let cli = CliRun { threads, ..CLI_THREADS };
        trials.push(trial(&name, move || llama_cli_quant(scheme, build, repack, cli)));
    }
    // ... and after a long context: three decode steps after 4096 cells that llama.cpp's
    // haswell build filled with the same model and saved, in a context of 32768:
    // `llama_cpp/quant/<build>/<repack|no_repack>/long/4096/<scheme>/end_to_end`.
    for (build, repack, scheme) in [
        (Build::Haswell, true, "q5_k_m"),
        (Build::Haswell, false, "iq4_xs"),
        (Build::Haswell, false, "q4_1"),
        (Build::Zen4, false, "q5_k_m"),
        (Build::ArmDotprod, true, "iq4_nl"),
        (Build::ArmI8mm, false, "q4_1"),
        (Build::ArmI8mm, true, "q3_k_m"),
        (Build::ArmSve256, false, "q2_k"),
    ] {
        let name = quant_trial(build, repack, "long/4096", scheme);
        trials.push(trial(&name, move || {
            llama_long_on(
                Some(scheme),
                build,
                repack,
                attn(KvType::F16, FlashAttn::On),
                4096,
                false,
            )
        }));
    }
    // ... after 16384 saved cells (n_kv 16640): Q5_K_M on haswell with repack at 2 and 14
    // threads (split-KV flash attention in as many parts) and on zen4, IQ4_NL on the
    // dotprod build with repack, Q4_1 on the i8mm build and Q2_K on both SVE builds,
    // repack off:
    // `llama_cpp/quant/<build>/<r>/long/16384/[threads/<n>/]<scheme>/end_to_end`.
    for (build, repack, scheme, threads) in [
        (Build::Haswell, true, "q5_k_m", LLAMA_THREADS),
        (Build::Haswell, true, "q5_k_m", 14),
        (Build::Zen4, false, "q5_k_m", LLAMA_THREADS),
        (Build::ArmDotprod, true, "iq4_nl", LLAMA_THREADS),
        (Build::ArmI8mm, false, "q4_1", LLAMA_THREADS),
        (Build::ArmSve128, false, "q2_k", LLAMA_THREADS),
        (Build::ArmSve256, false, "q2_k", LLAMA_THREADS),
    ] {
        let t =
            if threads == LLAMA_THREADS { String::new() } else { format!("/threads/{threads}") };
        let name = quant_trial(build, repack, &format!("long/16384{t}"), scheme);
        let a = Attention { tier_threads: threads, ..attn(KvType::F16, FlashAttn::On) };
        trials.push(trial(&name, move || {
            llama_long_on(Some(scheme), build, repack, a, 16384, false)
        }));
    }
    // The qwen2 and llama architectures (`golden/model/{qwen2,llama}.toml`) on every build
    // with repack on and off where a lane reproduces it: prompt mode (and decode mode on
    // the x86 builds; under qemu the llama-cli runs' greedy steps take the decode path),
    // as llama-cli runs it at CLI_SMALL and at its own sizes, and at 3 threads:
    // `llama_cpp/arch/<arch>/<build>/<repack|no_repack>/<what>/end_to_end`.
    let builds = [
        (Build::Haswell, true),
        (Build::Haswell, false),
        (Build::Zen4, false),
        (Build::ArmDotprod, true),
        (Build::ArmDotprod, false),
        (Build::ArmI8mm, true),
        (Build::ArmI8mm, false),
        (Build::ArmSve128, true),
        (Build::ArmSve128, false),
        (Build::ArmSve256, true),
        (Build::ArmSve256, false),
    ];
    for arch in ["qwen2", "llama", "qwen3moe"] {
        for (build, repack) in builds {
            let r = if repack { "repack" } else { "no_repack" };
            let name = move |what: &str| {
                format!("llama_cpp/arch/{arch}/{}/{r}/{what}/end_to_end", build.name())
            };
            for mode in [Mode::Decode, Mode::Prompt] {
                if mode == Mode::Decode && build.arm().is_some() {
                    continue;
                }
                trials
                    .push(trial(&name(mode.name()), move || llama_arch(arch, build, mode, repack)));
            }
            for (what, cli) in [
                ("cli", CLI_SMALL),
                ("cli_defaults", CLI_DEFAULTS),
                ("threads/3", CliRun { threads: 3, ..CLI_THREADS }),
            ] {
                // qwen3moe under qemu: llama-cli's own sizes only (its attention and dense
                // matmuls are qwen3's, whose smaller and 3-thread runs the other trials
                // cover; MUL_MAT_ID has no thread-dependent kernel choice).
                if arch == "qwen3moe" && build.arm().is_some() && what != "cli_defaults" {
                    continue;
                }
                trials.push(trial(&name(what), move || llama_arch_cli(arch, build, repack, cli)));
            }
        }
    }
    for arch in ["qwen2", "llama", "qwen3moe"] {
        trials.push(trial(&format!("llama_cpp/arch/{arch}/identify"), move || {
            llama_identify_on(&arch_model(arch)?)
        }));
    }
    for shape in ["qwen3-0.6b", "qwen3-8b", "qwen2.5-7b", "llama3.1-8b", "qwen3-30b-a3b"] {
        for mode in [Mode::Decode, Mode::Prompt] {
            let m = mode.name();
            trials.push(trial(&format!("llama_cpp/shaped/{shape}/{m}/end_to_end"), move || {
                llama_shaped(shape, Build::Haswell, mode, true)
            }));
        }
    }
    trials.push(trial("llama_cpp/arm-i8mm/shaped/qwen3-0.6b/prompt/end_to_end", || {
        llama_shaped("qwen3-0.6b", Build::ArmI8mm, Mode::Prompt, true)
    }));
    // Every build with repack off and on, where a lane reproduces it, with llama.cpp's
    // default attention (F16 K/V cache, flash attention) and with the F32 cache without
    // flash attention: `llama_cpp/<build>/<repack|no_repack>/<mode>/<end_to_end|
    // layer_local>` and `.../f32_off/...` (the haswell build with repack on keeps the
    // shorter `llama_cpp/<mode>/...`).
    let builds: [(Build, bool); 11] = [
        (Build::Haswell, true),
        (Build::Haswell, false),
        (Build::Zen4, false),
        (Build::ArmDotprod, false),
        (Build::ArmDotprod, true),
        (Build::ArmI8mm, false),
        (Build::ArmI8mm, true),
        (Build::ArmSve128, false),
        (Build::ArmSve128, true),
        (Build::ArmSve256, false),
        (Build::ArmSve256, true),
    ];
    let default = attn(KvType::F16, FlashAttn::On);
    let f32_off = attn(KvType::F32, FlashAttn::Off);
    for (build, repack) in builds {
        for mode in [Mode::Decode, Mode::Prompt] {
            for (a, tag) in [(default, ""), (f32_off, "f32_off/")] {
                let r = if repack { "repack" } else { "no_repack" };
                let prefix = match (build, repack) {
                    (Build::Haswell, true) => format!("llama_cpp/{tag}"),
                    (Build::Haswell, false) => format!("llama_cpp/{tag}{r}/"),
                    (Build::Zen4, _) => format!("llama_cpp/zen4/{tag}{r}/"),
                    _ => format!("llama_cpp/{}/{tag}{r}/", build.name()),
                };
                let m = mode.name();
                trials.push(trial(&format!("{prefix}{m}/end_to_end"), move || {
                    llama_end_to_end(build, mode, repack, a)
                }));
                trials.push(trial(&format!("{prefix}{m}/layer_local"), move || {
                    llama_layer_local(build, mode, repack, a)
                }));
            }
        }
    }
    // The other two combinations, once per build (repack on where a lane reproduces it),
    // whole run: the F16 cache without flash attention (ggml_vec_dot_f16 and each build's
    // F16 tinyBLAS: zen4's is sixteen wide) on every build (the aarch64 ones in prompt
    // mode); flash attention on an F32 cache (llama.cpp casts it to F16, so it is the
    // default path) on haswell only.
    let f16_off = (attn(KvType::F16, FlashAttn::Off), "f16_off");
    let f32_on = (attn(KvType::F32, FlashAttn::On), "f32_on");
    for (build, repack, combos) in [
        (Build::Haswell, true, &[f16_off, f32_on][..]),
        (Build::Zen4, false, &[f16_off][..]),
        (Build::ArmDotprod, true, &[f16_off][..]),
        (Build::ArmI8mm, true, &[f16_off][..]),
        (Build::ArmSve128, true, &[f16_off][..]),
        (Build::ArmSve256, true, &[f16_off][..]),
    ] {
        for &(a, tag) in combos {
            // The aarch64 builds' F16 tinyBLAS is a batch path: prompt mode only there.
            let modes: &[Mode] = match build {
                Build::Haswell | Build::Zen4 => &[Mode::Decode, Mode::Prompt],
                _ => &[Mode::Prompt],
            };
            for &mode in modes {
                let name = match build {
                    Build::Haswell => format!("llama_cpp/{tag}/{}/end_to_end", mode.name()),
                    _ => format!("llama_cpp/{}/{tag}/{}/end_to_end", build.name(), mode.name()),
                };
                trials.push(trial(&name, move || llama_end_to_end(build, mode, repack, a)));
            }
        }
    }
    // Runs as llama-cli makes them (CLI_SMALL: several batches and ubatches, the last
    // row's logits, greedy steps) on every build with repack off and on, with llama.cpp's
    // default attention (whole run and layer-local) and the F32 cache without flash
    // attention (whole run): `llama_cpp[/<build>]/cli/[f32_off/]<repack|no_repack>/...`.
    for (build, repack) in builds {
        for (a, tag, local) in [(default, "", true), (f32_off, "f32_off/", false)] {
            let r = if repack { "repack" } else { "no_repack" };
            let prefix = match build {
                Build::Haswell => format!("llama_cpp/cli/{tag}{r}/"),
                Build::Zen4 => format!("llama_cpp/zen4/cli/{tag}{r}/"),
                _ => format!("llama_cpp/{}/cli/{tag}{r}/", build.name()),
            };
            trials.push(trial(&format!("{prefix}end_to_end"), move || {
                llama_cli(build, repack, a, CLI_SMALL, false)
            }));
            if local {
                trials.push(trial(&format!("{prefix}layer_local"), move || {
                    llama_cli(build, repack, a, CLI_SMALL, true)
                }));
            }
        }
    }
    // llama-cli's own sizes (600 ids: ubatches of 512 and 88) on haswell, repack on and
    // off, both attention settings, and on the i8mm build with repack off.
    for (build, repack, combos) in [
        (Build::Haswell, true, &[(default, ""), (f32_off, "f32_off/")][..]),
        (Build::Haswell, false, &[(default, ""), (f32_off, "f32_off/")][..]),
        (Build::ArmI8mm, false, &[(default, "")][..]),
    ] {
        for &(a, tag) in combos {
            let r = if repack { "repack" } else { "no_repack" };
            let name = match build {
                Build::Haswell => format!("llama_cpp/cli_defaults/{tag}{r}/end_to_end"),
                _ => format!("llama_cpp/{}/cli_defaults/{tag}{r}/end_to_end", build.name()),
            };
            trials.push(trial(&name, move || llama_cli(build, repack, a, CLI_DEFAULTS, false)));
        }
    }
    // Thread counts 1, 3, 8 and 14 on every build with repack off and on (CLI_THREADS:
    // ggml's chunk plan, re-chunked by thread, decides the i8mm and SVE builds' 2x2
    // tiles): `llama_cpp[/<build>]/threads/<n>/<repack|no_repack>/end_to_end`; and on
    // haswell at llama-cli's sizes (600 ids, then greedy steps attending 600+ cells:
    // split-KV flash attention, one part per thread): `llama_cpp/threads_split_kv/<n>/...`.
    for threads in [1, 3, 8, 14] {
        for (build, repack) in builds {
            // Under qemu, 8 and 14 threads on 2 cores are slow (25 s a run at 14): the
            // builds whose arithmetic can depend on the count (the chunk plan's tiles of
            // the i8mm and SVE builds with plain weights) run every count, the other
            // aarch64 ones 3 threads (their lanes' results do not read it below 512 cells).
            let qemu = !matches!(build, Build::Haswell | Build::Zen4);
            let plan = matches!(build, Build::ArmI8mm | Build::ArmSve128 | Build::ArmSve256);
            let every_count = !qemu || (plan && !repack);
            if !every_count && threads != 3 {
                continue;
            }
            let r = if repack { "repack" } else { "no_repack" };
            let name = match build {
                Build::Haswell => format!("llama_cpp/threads/{threads}/{r}/end_to_end"),
                Build::Zen4 => format!("llama_cpp/zen4/threads/{threads}/{r}/end_to_end"),
                _ => format!("llama_cpp/{}/threads/{threads}/{r}/end_to_end", build.name()),
            };
            let cli = CliRun { threads, ..CLI_THREADS };
            trials.push(trial(&name, move || llama_cli(build, repack, default, cli, false)));
        }
        let name = format!("llama_cpp/threads_split_kv/{threads}/repack/end_to_end");
        let cli = CliRun { threads, ..CLI_DEFAULTS };
        trials.push(trial(&name, move || llama_cli(Build::Haswell, true, default, cli, false)));
    }
    // ... and the count matters there: at 3 threads, the lane given one tier thread differs
    // (split-KV on haswell, the chunk plan on the i8mm build).
    trials.push(trial("llama_cpp/threads/3/repack/count_matters", || {
        llama_threads_matter(Build::Haswell, true, CliRun { threads: 3, ..CLI_DEFAULTS }, 1)
    }));
    trials.push(trial("llama_cpp/arm-i8mm/threads/3/no_repack/count_matters", || {
        llama_threads_matter(Build::ArmI8mm, false, CliRun { threads: 3, ..CLI_THREADS }, 1)
    }));
    // Long contexts: three decode steps after a cache of 4096 and 16384 cells that
    // llama.cpp's haswell build filled and saved, in a context of 32768, on every build
    // with repack off and on, both attention settings:
    // `llama_cpp[/<build>]/long/<cells>/[f32_off/]<repack|no_repack>/end_to_end`; layer-
    // local on haswell (repack) and the i8mm build (no repack); and thread counts 1, 3, 8
    // and 14 at 16384 cells (split-KV flash attention, one part per thread) on haswell,
    // zen4 and the i8mm and SVE-256 builds: `.../long/16384/threads/<n>/...`.
    for (build, repack) in builds {
        for cells in LONG_CELLS {
            for (a, tag) in [(default, ""), (f32_off, "f32_off/")] {
                let r = if repack { "repack" } else { "no_repack" };
                let prefix = match build {
                    Build::Haswell => format!("llama_cpp/long/{cells}/{tag}{r}/"),
                    Build::Zen4 => format!("llama_cpp/zen4/long/{cells}/{tag}{r}/"),
                    _ => format!("llama_cpp/{}/long/{cells}/{tag}{r}/", build.name()),
                };
                trials.push(trial(&format!("{prefix}end_to_end"), move || {
                    llama_long(build, repack, a, cells, false)
                }));
                let local = cells == 16384
                    && matches!((build, repack), (Build::Haswell, true) | (Build::ArmI8mm, false));
                if local {
                    trials.push(trial(&format!("{prefix}layer_local"), move || {
                        llama_long(build, repack, a, cells, true)
                    }));
                }
            }
        }
    }
    for threads in [1, 3, 8, 14] {
        for (build, repack) in [
            (Build::Haswell, true),
            (Build::Zen4, false),
            (Build::ArmI8mm, false),
            (Build::ArmSve256, false),
        ] {
            let r = if repack { "repack" } else { "no_repack" };
            let name = match build {
                Build::Haswell => format!("llama_cpp/long/16384/threads/{threads}/{r}/end_to_end"),
                Build::Zen4 => {
                    format!("llama_cpp/zen4/long/16384/threads/{threads}/{r}/end_to_end")
                }
                _ => format!(
                    "llama_cpp/{}/long/16384/threads/{threads}/{r}/end_to_end",
                    build.name()
                ),
            };
            let a = Attention { tier_threads: threads, ..default };
            trials.push(trial(&name, move || llama_long(build, repack, a, 16384, false)));
        }
    }
    trials.push(trial(
        "llama_cpp/long/16384/threads/14/repack/count_matters",
        llama_long_count_matters,
    ));
    // NUMA-aware llama.cpp (`--numa distribute`, two nodes shown to ggml in a mount
    // namespace): 157 ids in ubatches of 64 at 3 threads, where ggml's chunk plan keeps
    // chunks of 16 without NUMA and chunks by thread with it (the i8mm and SVE builds'
    // tiles with plain weights), and on haswell (whose lanes do not read the plan);
    // `numa_matters`: the lane not told of NUMA differs.
    let numa = Attention { tier_numa: true, ..default };
    for (build, repack) in [
        (Build::Haswell, true),
        (Build::ArmI8mm, false),
        (Build::ArmSve128, false),
        (Build::ArmSve256, false),
    ] {
        let r = if repack { "repack" } else { "no_repack" };
        let name = match build {
            Build::Haswell => format!("llama_cpp/numa/3/{r}/end_to_end"),
            _ => format!("llama_cpp/{}/numa/3/{r}/end_to_end", build.name()),
        };
        let cli = CliRun { threads: 3, ..CLI_SMALL };
        trials.push(trial(&name, move || llama_cli(build, repack, numa, cli, false)));
    }
    trials.push(trial("llama_cpp/arm-i8mm/numa/3/no_repack/numa_matters", move || {
        llama_numa_matters(Build::ArmI8mm, CliRun { threads: 3, ..CLI_SMALL })
    }));
    trials.push(trial("llama_cpp/long/identify", llama_identify_long));
    trials.push(trial("llama_cpp/state/files_hold_the_cache", || {
        state_files_hold_the_cache(attn(KvType::F16, FlashAttn::On))
    }));
    trials.push(trial("llama_cpp/state/f32_off/files_hold_the_cache", || {
        state_files_hold_the_cache(attn(KvType::F32, FlashAttn::Off))
    }));
    let claims = tiercheck_testkit::claims::claim_trials(SUITE, selection, &trials);
    trials.extend(claims);
    trials
}
