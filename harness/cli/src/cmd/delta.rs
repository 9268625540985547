//! `tiercheck delta`: divergence analysis between two lanes or trace files.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use tiercheck_analysis::{
    self as analysis, plot, DeltaOptions, DeltaReport, Divergence, Source, NEAR_BOUNDARY,
};
use tiercheck_gguf::atomic_write::write_atomic;
use tiercheck_lanes::Impl;

use crate::args::{Setup, Threads};

/// `tiercheck delta`.
#[derive(Args, Clone, Debug)]
pub struct DeltaArgs {
    /// Side A: a lane name (run on the fly) or a trace file.
    pub a: String,
    /// Side B: a lane name or a trace file.
    pub b: String,
    /// Which implementation of lane sides to run.
    #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
    pub imp: Impl,
    #[command(flatten)]
    pub setup: Setup,
    #[command(flatten)]
    pub threads: Threads,
    /// Near-tie threshold on the top-1/top-2 logit gap (nats).
    #[arg(long, default_value_t = 0.2)]
    pub threshold: f32,
    /// Dither seeds for the noise floor (0: no floor).
    #[arg(long, default_value_t = 3)]
    pub floor_seeds: u64,
    /// Tap kinds to plot (comma-separated; the first also gives the floor band).
    #[arg(long, default_value = "l_out,ffn_out,kqv_out")]
    pub taps: String,
    /// Write the report (delta.txt, delta.json) and the plot (delta.svg) into this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress display (there is none either when stderr is not a terminal).
    #[arg(long)]
    pub quiet: bool,
    /// The token ids of a side that is a plain dump (no tiercheck metadata), where the
    /// file holds none (comma-separated).
    #[arg(long, value_name = "IDS")]
    pub ids: Option<String>,
    /// Refuse a plain dump's arrays that are neither taps nor token ids (by default they
    /// are ignored, with one warning).
    #[arg(long)]
    pub strict: bool,
}

/// `--ids 1,2,3`.
pub fn parse_ids(s: &str) -> Result<Vec<u32>> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<u32>().map_err(|_| anyhow::anyhow!("--ids: '{x}' is not a token id")))
        .collect()
}

use tiercheck_model::taps::ALL_LAYER_TAPS as KINDS;

fn sci(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.1e}")
    }
}

fn profile(d: &Divergence, n_layer: usize, out: &mut String) {
    let cell = |name: &str| -> String {
        match d.rows.iter().find(|r| r.name == name) {
            None => "-".into(),
            Some(r) => match r.ratio {
                Some(q) => format!("{} x{:.1}", sci(r.all.rel_l2), q),
                None => sci(r.all.rel_l2),
            },
        }
    };
    // The kinds the traces have (a dense model's or a mixture-of-experts model's), in
    // graph order.
    let kinds: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| {
            d.rows.iter().any(|r| r.name.rsplit_once('-').is_some_and(|(kind, _)| kind == *k))
        })
        .collect();
    out.push_str(&format!("  {:<7}", "layer"));
    for k in &kinds {
        out.push_str(&format!(" {k:>14}"));
    }
    out.push('\n');
    out.push_str(&format!("  {:<7} {:>14}\n", "embd", cell("inp_embd")));
    for l in 0..n_layer {
        out.push_str(&format!("  {l:<7}"));
        for k in &kinds {
            out.push_str(&format!(" {:>14}", cell(&format!("{k}-{l}"))));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "  {:<7} result_norm {}  result_output {}\n",
        "head",
        cell("result_norm"),
        cell("result_output")
    ));
}

/// The report as text.
pub fn render(r: &DeltaReport, n_layer: usize) -> String {
    let mut s = String::new();
    s += &format!("delta  A = {}\n       B = {}\n", r.a, r.b);
    s += &format!(
        "model {}, prompt {:?}, {} greedy tokens, mode {}, {}, near-tie threshold {}\n",
        &r.model_sha256[..12],
        r.prompt,
        r.tokens_a.len().max(r.tokens_b.len()),
        r.mode.name(),
        r.attention,
        r.threshold
    );
    for side in &r.sides {
        s += &format!("side {side}\n");
    }
    if let Some(f) = &r.floor {
        s += &format!("floor: {} teacher-forced, {} steps, one-ulp dither after layer 0, max over {} seeds; cells below read `rel_l2 xRATIO` (ratio to the floor, layer-local floor for the layer-local table; <= 4: reduction-order noise)\n", f.lane, f.steps, f.seeds);
    } else if let Some(why) =
        r.costs.iter().find(|c| c.stage == "floor").and_then(|c| c.skipped.as_ref())
    {
        s += &format!("floor: not measured ({why})\n");
    }
    s += &format!("VERDICT: {}\n", r.headline.text);
    for (has, lacks, only) in [("A", "B", &r.taps_only_a), ("B", "A", &r.taps_only_b)] {
        if !only.is_empty() {
            s += &format!(
                "partial trace: {lacks} lacks {} (compared on the taps both sides have; {has} has them)\n",
                only.join(", ")
            );
        }
    }
    if let Some(c) = &r.routing {
        s += &format!("ROUTING: {}\n", tiercheck_analysis::routing::describe(c));
    } else if r.free.rows.iter().any(|t| t.name.starts_with("ffn_moe_topk-")) {
        s += "ROUTING: the same experts for every token at every compared step and layer\n";
    }
    s += &format!(
        "\nFREE-RUNNING: {} of {} greedy tokens agree\n  verdict: {}\n",
        r.tokens_agree,
        r.tokens_a.len().min(r.tokens_b.len()),
        r.free_verdict
    );
    match (&r.free.first_step, &r.free.first_tap) {
        (Some(st), Some(t)) => {
            s += &format!("  first divergent step {st}, first tap whose bits differ: {t}\n")
        }
        _ => {
            s += &format!(
                "  every tap bitwise equal over the {} steps with equal inputs\n",
                r.free.steps_compared
            )
        }
    }
    for j in &r.free.jumps {
        // A jump is named a flip only where the codes entering its matmul were measured
        // near a rounding boundary; otherwise by its size. A jump into the attention
        // output has no quantized matmul input: with an F16 cache or flash attention, an
        // F16 value rounding to its other neighbour is one cause, not measured here.
        let why = if j.is_flip() {
            "an activation-quantization flip".to_string()
        } else if j.to.starts_with("kqv_out") {
            if r.attention == "kv=f32 fa=off" {
                "a single-op jump in attention (softmax and f32 dot products)".to_string()
            } else {
                "a single-op jump in attention (not measured: an F16 rounding in the K/V cache or in flash attention's accumulator is one cause)".to_string()
            }
        } else {
            match &j.codes {
                Some(f) if f.codes_differ > 0 => format!(
                    "a single-op jump of x{:.0}, not a flip: flipped values sat up to {:.1e} code units from the boundary, beyond the {NEAR_BOUNDARY} that last-bit noise reaches",
                    j.to_rel / j.from_rel,
                    f.max_boundary
                ),
                Some(_) => format!("a single-op jump of x{:.0}", j.to_rel / j.from_rel),
                None => format!(
                    "a single-op jump of x{:.0} (codes not measured: no lane side quantizes them)",
                    j.to_rel / j.from_rel
                ),
            }
        };
        s += &format!(
            "  JUMP at step {}: {} {:.1e} -> {} {:.1e} (x{:.0}): {why}\n",
            j.step,
            j.from,
            j.from_rel,
            j.to,
            j.to_rel,
            j.to_rel / j.from_rel
        );
        match &j.codes {
            Some(f) if f.codes_differ > 0 => {
                s += &format!(
                    "    measured: {} of {} int8 codes of {} differ between the sides (the flipped values sat {:.1e}..{:.1e} code units from the rounding boundary); the flips alone move the matmul output by {:.1e}\n",
                    f.codes_differ, f.codes, f.input, f.min_boundary, f.max_boundary, f.flip_effect
                );
            }
            Some(f) => {
                s += &format!(
                    "    not a flip: the int8 codes of {} are identical on both sides\n",
                    f.input
                )
            }
            None => {}
        }
    }
    s += &format!(
        "  profile over the {} steps with equal inputs (relative L2; an activation flip, a discrete event the floor's\n  few seeds may not reproduce, shows as a large ratio from its layer on: the layer-local verdicts judge each layer):\n",
        r.free.steps_compared
    );
    profile(&r.free, n_layer, &mut s);
    match &r.teacher {
        None => s += &format!("\nTEACHER-FORCED: {}\n", r.teacher_verdict),
        Some(t) => {
            s += &format!("\nTEACHER-FORCED: {}\n", t.how);
            s += &format!(
                "  top-1 agreement {:.1}% over {} steps; KLD mean {:.2e} median {:.2e} p99 {:.2e} max {:.2e}; max|dlogit| mean {:.2e} median {:.2e} p99 {:.2e} max {:.2e}\n",
                100.0 * t.top1_agreement,
                t.steps.len(),
                t.kld.mean,
                t.kld.median,
                t.kld.p99,
                t.kld.max,
                t.max_abs_dlogit.mean,
                t.max_abs_dlogit.median,
                t.max_abs_dlogit.p99,
                t.max_abs_dlogit.max
            );
            s += &format!("  verdict: {}\n", r.teacher_verdict);
            if !t.near_ties.is_empty() {
                s += &format!("  near-ties (tokens differ, or a gap below {}):\n", r.threshold);
                s += &format!(
                    "  {:>5} {:>7} {:>8} {:>7} {:>8} {:>9} {:>9} {:>9}\n",
                    "step", "tok A", "gap A", "tok B", "gap B", "A in B", "B in A", "KLD"
                );
                for n in &t.near_ties {
                    s += &format!(
                        "  {:>5} {:>7} {:>8.3} {:>7} {:>8.3} {:>9} {:>9} {:>9.1e}{}\n",
                        n.step,
                        n.token_a,
                        n.gap_a,
                        n.token_b,
                        n.gap_b,
                        format!("#{}", n.rank_a_in_b),
                        format!("#{}", n.rank_b_in_a),
                        n.kld,
                        if n.token_a != n.token_b { "  <- tokens differ" } else { "" }
                    );
                }
            }
        }
    }
    match &r.layer_local {
        None => s += &format!("\nLAYER-LOCAL: {}\n", r.layer_local_how),
        Some(d) => {
            s += &format!("\nLAYER-LOCAL: {} ({} steps)\n", r.layer_local_how, d.steps_compared);
            match &d.first_tap {
                Some(t) => {
                    s += &format!(
                        "  first tap whose bits differ: step {} {t}\n",
                        d.first_step.unwrap_or(0)
                    )
                }
                None => {
                    s +=
                        "  every tap bitwise equal: the two sides compute every layer identically\n"
                }
            }
            profile(d, n_layer, &mut s);
            if !r.layer_verdicts.is_empty() {
                s += "  per layer, the worse of both directions when both sides are lanes (ratio to the layer-local floor; noise <= 4; a flip: above it, but every flipped code sat within 0.05 of a rounding boundary):\n";
                for v in &r.layer_verdicts {
                    let what = match v.verdict.as_str() {
                        "noise" => "reduction-order noise".to_string(),
                        "flip" => format!(
                            "{} near-boundary activation flip(s): noise decided by the last bits",
                            v.flipped_codes
                        ),
                        _ => format!(
                            "DISCREPANCY: above the floor{}",
                            if v.flipped_codes > 0 {
                                format!(
                                    ", {} flipped codes up to {:.2} from a boundary",
                                    v.flipped_codes, v.max_boundary
                                )
                            } else {
                                String::new()
                            }
                        ),
                    };
                    s += &format!(
                        "    layer {:<2} x{:<9.1} {:<12} {what}\n",
                        v.layer, v.ratio, v.worst_tap
                    );
                }
            }
        }
    }
    if !r.flips.is_empty() {
        let total: usize = r.flips.iter().map(|f| f.codes_differ).sum();
        s += &format!("\nACTIVATION-QUANTIZATION FLIPS (layer-local): {total} int8 codes differ at {} matmul inputs\n", r.flips.len());
        s += "  boundary: how far the other side's value sat from the rounding boundary (code units); flip effect:\n  output change from the flipped codes alone (one kernel); observed: the two sides' outputs (own codes, own kernels)\n";
        s += &format!(
            "  {:>5} {:<14} {:>11} {:>22} {:>11} {:>10} {:>8}  weights\n",
            "step", "input", "codes", "boundary min..max", "flip effect", "observed", "share"
        );
        for f in r.flips.iter().take(24) {
            let (obs, share) = match f.observed {
                Some(o) if o > 0.0 => (sci(o), format!("{:.0}%", 100.0 * f.flip_effect / o)),
                Some(o) => (sci(o), "-".into()),
                None => ("-".into(), "-".into()),
            };
            s += &format!(
                "  {:>5} {:<14} {:>5}/{:<5} {:>10.1e}..{:<10.1e} {:>11.1e} {:>10} {:>8}  {}\n",
                f.step,
                f.input,
                f.codes_differ,
                f.codes,
                f.min_boundary,
                f.max_boundary,
                f.flip_effect,
                obs,
                share,
                f.weights.join(",")
            );
        }
        if r.flips.len() > 24 {
            s += &format!("  ... {} more (see --json)\n", r.flips.len() - 24);
        }
    }
    s += &costs(&r.costs);
    s
}

/// The stage costs as text: wall time, results computed and reused.
pub fn costs(stages: &[analysis::StageCost]) -> String {
    if stages.is_empty() {
        return String::new();
    }
    let total: f64 = stages.iter().map(|c| c.seconds).sum();
    let mut s =
        format!("\nCOST: {total:.1} s (runs, layer-local replays and floors computed / reused)\n");
    for c in stages {
        s += &format!("  {:<18} {:>8.2} s {:>4} / {:<4}", c.stage, c.seconds, c.computed, c.reused);
        if let Some(why) = &c.skipped {
            s += &format!(" skipped: {why}");
        }
        s.push('\n');
    }
    s
}

/// `tiercheck delta`.
pub fn run(mut a: DeltaArgs) -> Result<()> {
    let sa = Source::parse(&a.a, a.imp)?;
    let sb = Source::parse(&a.b, a.imp)?;
    let files = [&sa, &sb].into_iter().filter_map(|s| match s {
        Source::Trace(p) => Some(p.as_path()),
        _ => None,
    });
    let (model, setup) = a.setup.for_traces(files)?;
    a.setup = setup;
    // A trace brings its own ids: the prompts file is read only when both sides are lanes.
    let (ids, steps) = match (&sa, &sb) {
        (Source::Lane(_), Source::Lane(_)) => a.setup.prompt(&model)?,
        _ => (Vec::new(), 0),
    };
    if !(a.threshold.is_finite() && a.threshold >= 0.0) {
        bail!("--threshold {} is not a non-negative number", a.threshold);
    }
    let kinds: Vec<&str> = a.taps.split(',').map(str::trim).filter(|k| !k.is_empty()).collect();
    if let Some(bad) = kinds.iter().find(|k| !KINDS.contains(k)) {
        bail!("--taps: unknown tap kind '{bad}' (known: {})", KINDS.join(", "));
    }
    let dump = tiercheck_model::import::ImportOptions {
        ids: a.ids.as_deref().map(parse_ids).transpose()?,
        mode: a.setup.mode,
        strict: a.strict,
    };
    let opts = DeltaOptions {
        dump,
        ids,
        steps,
        mode: a.setup.mode(),
        batching: a.setup.batching(),
        residual: a.setup.residual,
        n_ctx: a.setup.n_ctx(),
        attn: a.setup.attention(),
        threshold: a.threshold,
        floor_seeds: a.floor_seeds,
        threads: a.threads.get(1),
        state: a.setup.state()?,
    };
    let bar = std::sync::Arc::new(std::sync::Mutex::new(crate::progress::Progress::new(
        analysis::delta_results(&opts),
        a.quiet,
    )));
    let hook = bar.clone();
    let cache = analysis::Cache::new().with_progress(std::sync::Arc::new(move |n| {
        if let Ok(mut b) = hook.lock() {
            b.set(n, "delta: runs, layer-local replays and floors");
        }
    }));
    let report = analysis::delta_cached(&model, &sa, &sb, &opts, &cache);
    if let Ok(b) = bar.lock() {
        b.finish();
    }
    let report = report?;
    let text = render(&report, model.hp.n_layer);
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        let svg = dir.join("delta.svg");
        plot::write_svg(&report, &kinds, model.hp.n_layer, &svg)?;
        write_atomic(&dir.join("delta.txt"), text.as_bytes())?;
        write_atomic(&dir.join("delta.json"), serde_json::to_string_pretty(&report)?.as_bytes())?;
        eprintln!("wrote {}, delta.txt, delta.json", svg.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{text}");
    }
    Ok(())
}
