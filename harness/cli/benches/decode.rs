//! Whole-model decode speed per lane, native and twin, and the wall time of `delta` and
//! `attribute`, on a generated model of a real shape (`tiercheck golden model --shape`).
//!
//! For each selected lane and implementation (`native` where this CPU can run it, the
//! portable twin everywhere), the bench prepares a decoder (the lane's repack decision,
//! as at model load: timed as `prepare`) and evaluates `--tokens` teacher-forced tokens
//! one at a time (decode mode: the gemv paths), `--rounds` times, interleaving the lanes
//! round by round so that a slow minute of the machine hits every lane alike, after
//! reading the file once into the page cache. Each cell is the median seconds per token
//! (the lower median for an even number of rounds). A lane's twin and native must give bitwise equal top
//! logits at every step (the bench exits non-zero otherwise), and every cell is also
//! given as a ratio to `x86_64-avx2` native, the tier a maintainer compares against.
//!
//! With `--delta` / `--attribute` the bench then runs the `tiercheck` binary's
//! `delta aarch64-i8mm-repack x86_64-avx2` (and `attribute` of the same pair) on the model
//! with a 16-token prompt and 16 greedy steps, and reports their wall time and the cost
//! table they print.
//!
//! ```text
//! cargo bench -p tiercheck --bench decode                          # qwen3-8b, 5 GB
//! cargo bench -p tiercheck --bench decode -- --delta --attribute --json decode.json
//! cargo bench -p tiercheck --bench decode -- --quick               # smoke run (ci/bench)
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::sequence::{self, Batching, RunSpec};
use tiercheck_model::shaped::{self, ShapeOptions};
use tiercheck_model::{Arith, Attention, Decoder, Mode, Model, Residual, TapSink};

const USAGE: &str = "\
usage: cargo bench -p tiercheck --bench decode -- [options]

  --shape NAME       generate (or reuse from the cache) this shape (default qwen3-8b)
  --model PATH       use this GGUF instead of a generated shape
  --lane NAME        only these lanes (repeatable or comma-separated; default x86_64-avx2
                     and every aarch64 lane)
  --tokens N         decode tokens per round (default 8)
  --rounds N         rounds, interleaved across lanes (default 3)
  --threads N        matmul threads (default: the available cores)
  --delta            also time `tiercheck delta aarch64-i8mm-repack x86_64-avx2`
  --attribute        also time `tiercheck attribute` of the same pair
  --quick            smoke run: qwen3-0.6b with 2 layers and a 4096 vocabulary, 3 tokens,
                     1 round
  --json PATH        also write the results as JSON to PATH
";

struct Opts {
    shape: String,
    model: Option<PathBuf>,
    lanes: Vec<String>,
    tokens: usize,
    rounds: usize,
    threads: usize,
    delta: bool,
    attribute: bool,
    quick: bool,
    json: Option<PathBuf>,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        shape: "qwen3-8b".into(),
        model: None,
        lanes: Vec::new(),
        tokens: 8,
        rounds: 3,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        delta: false,
        attribute: false,
        quick: false,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<usize, String> {
        let v = v.ok_or_else(|| format!("{what} needs a value"))?;
        match v.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{what} {v:?}: a positive integer")),
        }
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--shape" => o.shape = args.next().ok_or("--shape needs a value")?,
            "--model" => o.model = Some(args.next().ok_or("--model needs a value")?.into()),
            "--lane" => {
                let v = args.next().ok_or("--lane needs a value")?;
                for name in v.split(',').filter(|s| !s.is_empty()) {
                    lanes::find(name)?;
                    o.lanes.push(name.to_string());
                }
            }
            "--tokens" => o.tokens = num(args.next(), "--tokens")?,
            "--rounds" => o.rounds = num(args.next(), "--rounds")?,
            "--threads" => o.threads = num(args.next(), "--threads")?,
            "--delta" => o.delta = true,
            "--attribute" => o.attribute = true,
            "--quick" => o.quick = true,
            "--json" => o.json = Some(args.next().ok_or("--json needs a value")?.into()),
            // cargo bench passes --bench.
            "--bench" => {}
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    if o.quick {
        o.tokens = o.tokens.min(3);
        o.rounds = 1;
    }
    if o.lanes.is_empty() {
        o.lanes = lanes::all()
            .iter()
            .map(|l| l.name.to_string())
            .filter(|n| n == "x86_64-avx2" || n.starts_with("aarch64-"))
            .collect();
    }
    Ok(o)
}

/// The model file: `--model`, or the shape generated into the cache (reused when there).
fn model_path(o: &Opts) -> Result<PathBuf, String> {
    if let Some(p) = &o.model {
        return Ok(p.clone());
    }
    let opts = ShapeOptions {
        shape: if o.quick { "qwen3-0.6b".into() } else { o.shape.clone() },
        layers: o.quick.then_some(2),
        vocab: o.quick.then_some(4096),
        threads: o.threads,
        ..Default::default()
    };
    let built = shaped::build_shaped(&opts, &mut |_, _| {}).map_err(|e| e.to_string())?;
    if built.generated {
        eprintln!("generated {} in {:.1} s", built.path.display(), built.seconds);
    }
    Ok(built.path)
}

/// Teacher-forced ids below the vocabulary size.
fn ids(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

struct Cell {
    lane: String,
    native: bool,
    prepare_s: f64,
    per_token: Vec<f64>,
    top: Vec<Vec<(u32, u32)>>,
}

impl Cell {
    /// The median (the lower one of an even count).
    fn median(&self) -> f64 {
        let mut v = self.per_token.clone();
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    }
}

fn decode_round(
    model: &Model,
    cell: &mut Cell,
    chosen: &lanes::Chosen,
    o: &Opts,
) -> Result<(), String> {
    let arith = Arith::from_chosen(chosen, o.threads);
    let t0 = Instant::now();
    let dec = Decoder::new(model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT)
        .map_err(|e| e.to_string())?;
    let prepare = t0.elapsed().as_secs_f64();
    if cell.per_token.is_empty() {
        cell.prepare_s = prepare;
    }
    let spec = RunSpec {
        ids: ids(o.tokens, model.hp.n_vocab),
        steps: 0,
        mode: Mode::Decode,
        batching: Batching::LLAMA_CLI,
        forced: Vec::new(),
    };
    let t1 = Instant::now();
    let out = sequence::run(&dec, &spec, TapSink::none()).map_err(|e| e.to_string())?;
    cell.per_token.push(t1.elapsed().as_secs_f64() / o.tokens as f64);
    cell.top = out
        .steps
        .iter()
        .map(|s| s.top.iter().map(|&(id, l)| (id, l.to_bits())).collect())
        .collect();
    Ok(())
}

/// Run `tiercheck <cmd> aarch64-i8mm-repack x86_64-avx2` with a 16-token prompt and 16
/// steps (4 and 4 with --quick): wall seconds and the cost table it printed.
fn time_command(cmd: &str, model: &Path, o: &Opts, vocab: usize) -> Result<(f64, String), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let n = if o.quick { 4 } else { 16 };
    let prompts = dir.path().join("prompts.toml");
    let tokens: Vec<String> = ids(n, vocab).iter().map(|i| i.to_string()).collect();
    std::fs::write(
        &prompts,
        format!("steps = {n}\n\n[[prompt]]\nname = \"bench\"\ntokens = [{}]\n", tokens.join(", ")),
    )
    .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tiercheck"))
        .args([cmd, "aarch64-i8mm-repack", "x86_64-avx2", "--quiet"])
        .arg("--model")
        .arg(model)
        .arg("--prompts")
        .arg(&prompts)
        .args(["--threads", &o.threads.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("tiercheck {cmd} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let cost: Vec<&str> = stdout.lines().skip_while(|l| !l.starts_with("COST")).collect();
    Ok((wall, cost.join("\n")))
}

fn main() {
    tiercheck_lanes::install_accelerated();
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("decode: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = bench(&o) {
        eprintln!("decode: {e}");
        std::process::exit(1);
    }
}

fn bench(o: &Opts) -> Result<(), String> {
    let path = model_path(o)?;
    let model = Model::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Read the file once so that the first lane does not pay for the disk.
    let t0 = Instant::now();
    {
        use std::io::Read;
        let mut f = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 8 << 20];
        while f.read(&mut buf).map_err(|e| e.to_string())? > 0 {}
    }
    eprintln!("read the model into the page cache in {:.1} s", t0.elapsed().as_secs_f64());
    let bytes = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
    println!(
        "model {} ({:.2} GB, {} layers, {} wide, vocabulary {}), {} threads, {} tokens x {} rounds",
        path.display(),
        bytes as f64 / 1e9,
        model.hp.n_layer,
        model.hp.n_embd,
        model.hp.n_vocab,
        o.threads,
        o.tokens,
        o.rounds
    );
    let mut cells: Vec<(Cell, lanes::Chosen)> = Vec::new();
    for name in &o.lanes {
        let lane = lanes::find(name)?;
        for imp in [Impl::Native, Impl::Portable] {
            match lanes::choose(lane, imp) {
                Ok(chosen) => {
                    let cell = Cell {
                        lane: name.clone(),
                        native: chosen.native,
                        prepare_s: 0.0,
                        per_token: Vec::new(),
                        top: Vec::new(),
                    };
                    cells.push((cell, chosen));
                }
                Err(why) => println!("{name}: native not run ({why})"),
            }
        }
    }
    for round in 0..o.rounds {
        for (cell, chosen) in cells.iter_mut() {
            decode_round(&model, cell, chosen, o)?;
            eprintln!(
                "  round {round}: {:<22} {:<8} {:.3} s/token",
                cell.lane,
                if cell.native { "native" } else { "twin" },
                cell.per_token.last().copied().unwrap_or(0.0)
            );
        }
    }
    let base =
        cells.iter().find(|(c, _)| c.lane == "x86_64-avx2" && c.native).map(|(c, _)| c.median());
    let mut mismatch = false;
    println!("\n| lane | impl | prepare s | s/token (median) | tokens/s | / x86_64-avx2 native | twin == native |");
    println!("|---|---|---|---|---|---|---|");
    let mut json = Vec::new();
    for (c, _) in &cells {
        let twin_eq = (!c.native).then(|| {
            cells.iter().find(|(n, _)| n.lane == c.lane && n.native).map(|(n, _)| n.top == c.top)
        });
        let twin_eq = twin_eq.flatten();
        if twin_eq == Some(false) {
            mismatch = true;
        }
        let m = c.median();
        let ratio = base.map(|b| m / b);
        println!(
            "| `{}` | {} | {:.1} | {:.3} | {:.2} | {} | {} |",
            c.lane,
            if c.native { "native" } else { "twin" },
            c.prepare_s,
            m,
            1.0 / m,
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
            match twin_eq {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        );
        json.push(serde_json::json!({
            "lane": c.lane,
            "impl": if c.native { "native" } else { "portable" },
            "prepare_s": c.prepare_s,
            "seconds_per_token": c.per_token,
            "median_seconds_per_token": m,
            "over_x86_64_avx2_native": ratio,
            "bitwise_equal_native": twin_eq,
        }));
    }
    let mut commands = Vec::new();
    for (flag, cmd) in [(o.delta, "delta"), (o.attribute, "attribute")] {
        if flag {
            let (wall, cost) = time_command(cmd, &path, o, model.hp.n_vocab)?;
            println!("\n{cmd} aarch64-i8mm-repack x86_64-avx2: {wall:.1} s wall\n{cost}");
            commands.push(serde_json::json!({"command": cmd, "wall_s": wall, "cost": cost}));
        }
    }
    if let Some(p) = &o.json {
        let doc = serde_json::json!({
            "model": path.display().to_string(),
            "model_bytes": bytes,
            "threads": o.threads,
            "tokens": o.tokens,
            "rounds": o.rounds,
            "cells": json,
            "commands": commands,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if mismatch {
        return Err("a twin's top logits differ from its native lane's".into());
    }
    Ok(())
}
