//! Single-thread gemv throughput of every lane, next to this core's memory bandwidth.
//!
//! For each weight type (Q4_K, Q6_K, Q8_0 by default; `--type` takes any of the twelve,
//! and a lane that does not multiply a type is left out of its rows) and shape (n rows x k values:
//! 4096x4096 and the Qwen3 27B FFN shapes 5120x17408 and 17408x5120), every lane's
//! portable twin and, where this CPU can run it, its native implementation multiply one
//! activation row: `Kernels::prepare` once (the lane's repack decision, as at model load;
//! plain lanes keep the blocks), then `Kernels::matmul_prepared(&w, &x, 1)` timed, which
//! for plain weights is `Kernels::matmul` and includes quantizing the activation row.
//! Throughput is GB/s of weight bytes (the plain matrix size; 1 GB = 1e9 bytes) and a
//! fraction of a single-core read-bandwidth probe measured in the same process.
//!
//! Unless `--hot` is given, the last-level cache is flushed (by reading an unrelated
//! buffer of 4x its size) before every timed run, so the weights stream from memory as
//! they do when a model much larger than the cache is decoded.
//!
//! ```text
//! cargo bench -p tiercheck --bench gemv                     # full run (a few minutes)
//! cargo bench -p tiercheck --bench gemv -- --quick          # smoke run (ci/bench)
//! cargo bench -p tiercheck --bench gemv -- --lane x86_64-avx2 --type q4_K \
//!     --shape 5120x17408 --json /tmp/gemv.json
//! ```
//!
//! Weights are quantized with the reference quantizer from normal values; to keep
//! set-up short, a pool of up to 64 distinct rows is quantized and repeated to `n`
//! rows (every row still has its own address, so all of it streams from memory). The
//! twin's output is compared bitwise with the native one, and the twin's accelerated
//! form (`portable`) with its scalar form (`scalar`, `tiercheck_core::accel::with_scalar`),
//! as a by-product (the bench exits non-zero if they differ).

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use tiercheck_core::quant::weights;
use tiercheck_core::repack::{Prepared, Target};
use tiercheck_core::{GgmlType, Kernels, Lane, WeightMatrix};
use tiercheck_lanes as lanes;
use tiercheck_model::kernel_inputs::Rng;

const DEFAULT_TYPES: &[GgmlType] = &[GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0];
const DEFAULT_SHAPES: &[(usize, usize)] = &[(4096, 4096), (5120, 17408), (17408, 5120)];
const QUICK_SHAPES: &[(usize, usize)] = &[(4096, 4096)];
/// Distinct weight rows quantized per matrix; the rest repeat them.
const POOL_ROWS: usize = 64;
const MIB: usize = 1 << 20;

const USAGE: &str = "\
usage: cargo bench -p tiercheck --bench gemv -- [options]

  --lane NAME        only this lane (repeatable or comma-separated)
  --type TYPE        only this weight type, e.g. q4_K (repeatable or comma-separated)
  --shape NxK        only this shape, n rows of k values (repeatable or comma-separated)
  --impl IMPL        only `native`, `portable` (the twin, accelerated where it can be) or `scalar` (the twin's scalar form)
  --quick            smoke run: 4096x4096 unless --shape is given, 3 runs per cell,
                     smaller bandwidth probe
  --reps N           timed runs per cell (default: 5 to 25, by cell duration)
  --hot              do not flush the cache before each run (weights may stay in cache)
  --breakdown        also time the activation quantization and the vec_dot loop alone
  --json PATH        also write the results as JSON to PATH
  -h, --help         this text";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Imp {
    Native,
    Portable,
    /// The portable twin with the accelerated forms off (`accel::with_scalar`).
    Scalar,
}

impl Imp {
    fn name(self) -> &'static str {
        match self {
            Imp::Native => "native",
            Imp::Portable => "portable",
            Imp::Scalar => "scalar",
        }
    }
}

struct Opts {
    lanes: Vec<String>,
    types: Vec<GgmlType>,
    shapes: Vec<(usize, usize)>,
    impls: Vec<Imp>,
    quick: bool,
    reps: Option<usize>,
    hot: bool,
    breakdown: bool,
    json: Option<PathBuf>,
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (n, k) = s.split_once(['x', 'X']).ok_or_else(|| format!("bad shape `{s}`: want NxK"))?;
    let n: usize = n.trim().parse().map_err(|_| format!("bad shape `{s}`: n is not a number"))?;
    let k: usize = k.trim().parse().map_err(|_| format!("bad shape `{s}`: k is not a number"))?;
    if n == 0 || k == 0 {
        return Err(format!("bad shape `{s}`: n and k must be positive"));
    }
    Ok((n, k))
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        lanes: Vec::new(),
        types: Vec::new(),
        shapes: Vec::new(),
        impls: Vec::new(),
        quick: false,
        reps: None,
        hot: false,
        breakdown: false,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            // `cargo bench` passes `--bench` to every bench target.
            "--bench" => {}
            "--quick" => o.quick = true,
            "--hot" => o.hot = true,
            "--breakdown" => o.breakdown = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--lane" => {
                for name in split_list(&value("--lane")?) {
                    lanes::find(name)?;
                    o.lanes.push(name.to_string());
                }
            }
            "--type" => {
                for name in split_list(&value("--type")?) {
                    let ty = GgmlType::from_name(name)
                        .filter(|t| weights::QUANTIZABLE.contains(t))
                        .ok_or_else(|| {
                            let known: Vec<&str> =
                                weights::QUANTIZABLE.iter().map(|t| t.name()).collect();
                            format!("unknown weight type `{name}`; known: {}", known.join(", "))
                        })?;
                    o.types.push(ty);
                }
            }
            "--shape" => {
                for s in split_list(&value("--shape")?) {
                    o.shapes.push(parse_shape(s)?);
                }
            }
            "--impl" => {
                for s in split_list(&value("--impl")?) {
                    o.impls.push(match s {
                        "native" => Imp::Native,
                        "portable" | "twin" => Imp::Portable,
                        "scalar" => Imp::Scalar,
                        other => return Err(format!("bad --impl `{other}`: native or portable")),
                    });
                }
            }
            "--reps" => {
                let v = value("--reps")?;
                let n: usize = v.parse().map_err(|_| format!("bad --reps `{v}`"))?;
                o.reps = Some(n.max(1));
            }
            "--json" => o.json = Some(PathBuf::from(value("--json")?)),
            other => return Err(format!("unknown argument `{other}`\n\n{USAGE}")),
        }
    }
    if o.types.is_empty() {
        o.types = DEFAULT_TYPES.to_vec();
    }
    if o.shapes.is_empty() {
        o.shapes = if o.quick { QUICK_SHAPES } else { DEFAULT_SHAPES }.to_vec();
    }
    if o.impls.is_empty() {
        o.impls = vec![Imp::Native, Imp::Portable, Imp::Scalar];
    }
    Ok(o)
}

/// Size of the last-level cache in bytes (Linux sysfs), or 32 MiB if unknown.
fn llc_bytes() -> usize {
    let mut best = 0usize;
    for i in 0..8 {
        let p = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
        let Ok(s) = std::fs::read_to_string(p) else { continue };
        let s = s.trim();
        let (num, mul) = match s.strip_suffix('K') {
            Some(n) => (n, 1024),
            None => match s.strip_suffix('M') {
                Some(n) => (n, MIB),
                None => (s, 1),
            },
        };
        if let Ok(v) = num.parse::<usize>() {
            best = best.max(v * mul);
        }
    }
    if best == 0 {
        32 * MIB
    } else {
        best
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Wrapping sum of `buf` in eight independent lanes (the compiler vectorizes it).
#[inline(always)]
fn sum_u64_body(buf: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = buf.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    let mut s = rest.iter().fold(0u64, |a, &v| a.wrapping_add(v));
    for a in acc {
        s = s.wrapping_add(a);
    }
    s
}

#[inline(never)]
fn sum_u64_baseline(buf: &[u64]) -> u64 {
    sum_u64_body(buf)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
fn sum_u64_avx2(buf: &[u64]) -> u64 {
    sum_u64_body(buf)
}

/// Sum `buf` with the widest loop this CPU runs.
fn sum_u64(buf: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if tiercheck_core::detect::cpu_has("avx2") {
        // SAFETY: AVX2 was detected on this CPU just above.
        return unsafe { sum_u64_avx2(buf) };
    }
    sum_u64_baseline(buf)
}

/// A buffer of `bytes` (rounded down to whole u64s), every page written.
fn filled_buffer(bytes: usize) -> Vec<u64> {
    (0..bytes / 8).map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect()
}

struct Probe {
    bytes: usize,
    runs_gbps: Vec<f64>,
    best_gbps: f64,
}

/// Single-core read bandwidth: best of `runs` sums over a `bytes`-sized buffer.
fn probe_bandwidth(bytes: usize, runs: usize) -> Probe {
    let buf = filled_buffer(bytes);
    black_box(sum_u64(&buf)); // warm-up (TLB, frequency)
    let mut runs_gbps = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        black_box(sum_u64(black_box(&buf)));
        let s = t.elapsed().as_secs_f64();
        runs_gbps.push((buf.len() * 8) as f64 / s / 1e9);
    }
    let best_gbps = runs_gbps.iter().copied().fold(0.0, f64::max);
    Probe { bytes: buf.len() * 8, runs_gbps, best_gbps }
}

/// Weights of `ty`, `n` rows of `k`, from a pool of quantized normal rows.
fn make_weights(ty: GgmlType, n: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
    let pool_rows = n.min(POOL_ROWS);
    let src = rng.normals(pool_rows * k, 0.02);
    let pool = weights::quantize(ty, &src, pool_rows, k).expect("quantize weight pool");
    let row_bytes = ty.row_bytes(k).expect("whole blocks");
    let mut out = Vec::with_capacity(n * row_bytes);
    while out.len() < n * row_bytes {
        let take = (n * row_bytes - out.len()).min(pool.len());
        out.extend_from_slice(&pool[..take]);
    }
    out
}

#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

fn spread(v: &[f64]) -> Spread {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len();
    let median = if m % 2 == 1 { s[m / 2] } else { 0.5 * (s[m / 2 - 1] + s[m / 2]) };
    Spread { median, min: s[0], max: s[m - 1] }
}

struct Cell {
    lane: &'static str,
    imp: Imp,
    /// `plain`, or the repacked layout the lane prepared.
    layout: &'static str,
    ty: GgmlType,
    n: usize,
    k: usize,
    weight_bytes: usize,
    secs: Vec<f64>,
    /// GB/s of weight bytes over the runs (median, min, max).
    gbps: Spread,
    /// Portable GB/s over native GB/s (portable rows with a native sibling).
    twin_over_native: Option<f64>,
    /// Whether the output equals the native output bitwise (portable rows).
    bitwise_equal_native: Option<bool>,
    /// Median seconds of the activation quantization and of the vec_dot loop alone.
    breakdown: Option<(f64, f64)>,
}

struct Bench {
    flush: Option<Vec<u64>>,
    quick: bool,
    reps: Option<usize>,
}

impl Bench {
    fn flush(&self) {
        if let Some(f) = &self.flush {
            black_box(sum_u64(black_box(f)));
        }
    }

    /// Time `f` (after a flush each run): a warm-up, then a number of runs chosen from
    /// the warm-up's duration. Returns seconds per run.
    fn time<R>(&self, mut f: impl FnMut() -> R) -> Vec<f64> {
        self.flush();
        let t = Instant::now();
        black_box(f());
        let first = t.elapsed().as_secs_f64();
        let reps = self.reps.unwrap_or(if self.quick {
            3
        } else {
            // About 1.5 s per cell, 5 to 25 runs.
            ((1.5 / first.max(1e-6)) as usize).clamp(5, 25)
        });
        let mut secs = Vec::with_capacity(reps);
        for _ in 0..reps {
            self.flush();
            let t = Instant::now();
            black_box(f());
            secs.push(t.elapsed().as_secs_f64());
        }
        secs
    }
}

fn run_cell(
    bench: &Bench,
    lane: &'static Lane,
    imp: Imp,
    kernels: &dyn Kernels,
    w: &WeightMatrix<'_>,
    x: &[f32],
    breakdown: bool,
) -> (Cell, Vec<f32>) {
    // The lane's repack decision (if its tier repacks this type) happens once, as at
    // model load; the timed call is the matmul on the prepared weights.
    let prepared = kernels.prepare(*w, Target::Cpu).unwrap_or_else(|e| {
        panic!("{} {} {} prepare failed: {e}", lane.name, imp.name(), w.ty().name())
    });
    let out = kernels.matmul_prepared(&prepared, x, 1).unwrap_or_else(|e| {
        panic!("{} {} {} matmul failed: {e}", lane.name, imp.name(), w.ty().name())
    });
    let secs = bench
        .time(|| kernels.matmul_prepared(black_box(&prepared), black_box(x), 1).expect("matmul"));
    let layout = match &prepared {
        Prepared::Plain(_) => "plain",
        Prepared::Repacked(r) => r.layout().name(),
    };
    let weight_bytes = w.data().len();
    let gbps: Vec<f64> = secs.iter().map(|s| weight_bytes as f64 / s / 1e9).collect();
    // The vec_dot loop is the matmul of plain weights only.
    let breakdown = (breakdown && layout == "plain").then(|| {
        let q = bench.time(|| kernels.quantize_act(w.ty(), black_box(x)).expect("quantize"));
        let act = kernels.quantize_act(w.ty(), x).expect("quantize");
        let d = bench.time(|| {
            let mut s = 0.0f32;
            for j in 0..w.n() {
                s += kernels.vec_dot(w.ty(), w.row(j), black_box(&act)).expect("vec_dot");
            }
            s
        });
        (spread(&q).median, spread(&d).median)
    });
    let cell = Cell {
        lane: lane.name,
        imp,
        layout,
        ty: w.ty(),
        n: w.n(),
        k: w.k(),
        weight_bytes,
        gbps: spread(&gbps),
        secs,
        twin_over_native: None,
        bitwise_equal_native: None,
        breakdown,
    };
    (cell, out)
}

fn fmt_gbps(g: f64) -> String {
    if g >= 10.0 {
        format!("{g:.1}")
    } else {
        format!("{g:.2}")
    }
}

fn table(cells: &[Cell], probe: &Probe, breakdown: bool) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "| lane | impl | type | shape (n x k) | MiB | ms (median) | GB/s median (min-max) \
         | % of probe | twin/native |"
    );
    if breakdown {
        s.push_str(" act quant ms | vec_dot loop ms |");
    }
    s.push('\n');
    s.push_str("|---|---|---|---|--:|--:|--:|--:|--:|");
    if breakdown {
        s.push_str("--:|--:|");
    }
    s.push('\n');
    for c in cells {
        let ratio = match (c.twin_over_native, c.bitwise_equal_native) {
            (Some(r), Some(false)) => format!("{r:.3}x (bits differ!)"),
            (Some(r), _) => format!("{r:.3}x"),
            _ => "-".to_string(),
        };
        let imp = match c.layout {
            "plain" => c.imp.name().to_string(),
            layout => format!("{} ({layout})", c.imp.name()),
        };
        let _ = write!(
            s,
            "| {} | {} | {} | {}x{} | {:.1} | {:.2} | {} ({}-{}) | {:.1}% | {} |",
            c.lane,
            imp,
            c.ty.name(),
            c.n,
            c.k,
            c.weight_bytes as f64 / MIB as f64,
            c.weight_bytes as f64 / c.gbps.median / 1e6,
            fmt_gbps(c.gbps.median),
            fmt_gbps(c.gbps.min),
            fmt_gbps(c.gbps.max),
            100.0 * c.gbps.median / probe.best_gbps,
            ratio
        );
        if breakdown {
            match c.breakdown {
                Some((q, d)) => {
                    let _ = write!(s, " {:.3} | {:.2} |", q * 1e3, d * 1e3);
                }
                None => s.push_str(" - | - |"),
            }
        }
        s.push('\n');
    }
    s
}

fn to_json(cells: &[Cell], probe: &Probe, opts: &Opts, llc: usize) -> serde_json::Value {
    use serde_json::json;
    let results: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            json!({
                "lane": c.lane,
                "impl": c.imp.name(),
                "layout": c.layout,
                "type": c.ty.name(),
                "n": c.n,
                "k": c.k,
                "weight_bytes": c.weight_bytes,
                "runs_s": c.secs,
                "gbps_median": c.gbps.median,
                "gbps_min": c.gbps.min,
                "gbps_max": c.gbps.max,
                "fraction_of_probe": c.gbps.median / probe.best_gbps,
                "twin_over_native": c.twin_over_native,
                "bitwise_equal_native": c.bitwise_equal_native,
                "act_quant_s_median": c.breakdown.map(|b| b.0),
                "vec_dot_loop_s_median": c.breakdown.map(|b| b.1),
            })
        })
        .collect();
    json!({
        "bench": "gemv",
        "unit": "GB/s of weight bytes, 1 GB = 1e9 bytes; single thread; m = 1",
        "cpu": cpu_model(),
        "cpu_features": tiercheck_lanes::host::cpu_feature_string(),
        "llc_bytes": llc,
        "cache": if opts.hot { "hot (no flush)" } else { "flushed before every run" },
        "quick": opts.quick,
        "probe": {
            "bytes": probe.bytes,
            "runs_gbps": probe.runs_gbps,
            "best_gbps": probe.best_gbps,
        },
        "results": results,
    })
}

fn main() {
    tiercheck_lanes::install_accelerated();
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gemv: {e}");
            std::process::exit(2);
        }
    };
    let t_start = Instant::now();
    let llc = llc_bytes();

    let probe_bytes = if opts.quick { (4 * llc).max(256 * MIB) } else { (8 * llc).max(512 * MIB) };
    let probe = probe_bandwidth(probe_bytes, if opts.quick { 3 } else { 7 });
    println!("cpu: {} (LLC {} MiB)", cpu_model(), llc / MIB);
    println!(
        "memory-bandwidth probe (1 thread, {} MiB read, best of {}): {:.1} GB/s (runs: {})",
        probe.bytes / MIB,
        probe.runs_gbps.len(),
        probe.best_gbps,
        probe.runs_gbps.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>().join(", ")
    );

    let bench = Bench {
        flush: (!opts.hot).then(|| filled_buffer(4 * llc)),
        quick: opts.quick,
        reps: opts.reps,
    };
    let selected: Vec<&'static Lane> = lanes::all()
        .iter()
        .copied()
        .filter(|l| opts.lanes.is_empty() || opts.lanes.iter().any(|n| n == l.name))
        .collect();
    for lane in &selected {
        if let Err(why) = lanes::native(lane) {
            println!("{}: native not run ({why})", lane.name);
        }
    }

    let mut rng = Rng::new(0x6765_6d76);
    let mut cells: Vec<Cell> = Vec::new();
    let mut scalar_differs = false;
    for &ty in &opts.types {
        for &(n, k) in &opts.shapes {
            if ty.row_bytes(k).is_none() {
                println!(
                    "skipping {} {n}x{k}: k is not a multiple of {}",
                    ty.name(),
                    ty.block_size()
                );
                continue;
            }
            let data = make_weights(ty, n, k, &mut rng);
            let w = WeightMatrix::new(ty, n, k, &data).expect("weight matrix");
            let x = rng.normals(k, 1.0);
            for &lane in &selected {
                if lane.portable.act_rule(ty).is_err() {
                    if !opts.lanes.is_empty() {
                        println!("{}: does not multiply {}", lane.name, ty.name());
                    }
                    continue;
                }
                let mut native_result: Option<(f64, Vec<f32>)> = None;
                let mut twin_out: Option<Vec<f32>> = None;
                for &imp in &opts.impls {
                    let kernels: &dyn Kernels = match imp {
                        Imp::Portable | Imp::Scalar => lane.portable,
                        Imp::Native => match lanes::native(lane) {
                            Ok(k) => k,
                            Err(_) => continue,
                        },
                    };
                    let (mut cell, out) = if imp == Imp::Scalar {
                        tiercheck_core::accel::with_scalar(|| {
                            run_cell(&bench, lane, imp, kernels, &w, &x, opts.breakdown)
                        })
                    } else {
                        run_cell(&bench, lane, imp, kernels, &w, &x, opts.breakdown)
                    };
                    match (imp, &twin_out) {
                        (Imp::Portable, _) => twin_out = Some(out.clone()),
                        (Imp::Scalar, Some(t))
                            if !t.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()) =>
                        {
                            scalar_differs = true;
                        }
                        _ => {}
                    }
                    match (imp, &native_result) {
                        (Imp::Native, _) => native_result = Some((cell.gbps.median, out)),
                        (Imp::Portable, Some((g, nat))) => {
                            cell.twin_over_native = Some(cell.gbps.median / g);
                            cell.bitwise_equal_native =
                                Some(nat.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()));
                        }
                        (Imp::Portable, None) | (Imp::Scalar, _) => {}
                    }
                    eprintln!(
                        "  {:<12} {:<8} {:<5} {:>5}x{:<5} {:>7} GB/s  ({} runs)",
                        cell.lane,
                        cell.imp.name(),
                        ty.name(),
                        n,
                        k,
                        fmt_gbps(cell.gbps.median),
                        cell.secs.len()
                    );
                    cells.push(cell);
                }
            }
        }
    }

    println!();
    println!(
        "gemv, 1 thread, m = 1 (`Kernels::matmul_prepared` after `prepare`, activation \
         quantization included); GB/s of weight bytes; cache {}; probe {:.1} GB/s; \
         twin/native = portable GB/s over native GB/s",
        if opts.hot { "hot (not flushed)" } else { "flushed before every run" },
        probe.best_gbps
    );
    println!();
    print!("{}", table(&cells, &probe, opts.breakdown));
    if cells.iter().any(|c| c.bitwise_equal_native == Some(false)) {
        println!("\nWARNING: a portable twin's output differs from its native implementation");
    }
    println!("\ntotal {:.1} s", t_start.elapsed().as_secs_f64());

    if let Some(path) = &opts.json {
        let v = to_json(&cells, &probe, &opts, llc);
        let text = serde_json::to_string_pretty(&v).expect("json") + "\n";
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("gemv: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("wrote {}", path.display());
    }
    if scalar_differs {
        println!("\nWARNING: a twin's accelerated form differs from its scalar form");
    }
    if cells.iter().any(|c| c.bitwise_equal_native == Some(false)) || scalar_differs {
        std::process::exit(1);
    }
}
