//! The delta run: both sides' free runs, their provenance, then each layer of the report
//! in turn (teacher-forced, free-running, layer-local, the floor) and the verdicts.

use std::sync::Arc;

use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::sequence::RunSpec;
use tiercheck_model::{FlashAttn, KvType, Mode, Model};

use crate::free_running::{self, Divergence};
use crate::layer_local::{self, LayerVerdict};
use crate::report::{DeltaReport, Headline};
use crate::result_cache::{self, Cache, Costs, Ctx};
use crate::results::Run;
use crate::side::{decoder, lane_run, DeltaOptions, SideRun, Source};
use crate::teacher_forced::{self, TeacherForced};
use crate::trace::{
    check_trace_state, taps_lacking, trace_attention, trace_batching, trace_ctx, trace_prompt,
};
use crate::{floor, identify};

/// One side's free run: a lane's, through the cache (and stored again as the replay of
/// its own tokens), or a trace file's, read and checked against the saved cache.
fn side_run(
    ctx: &Ctx<'_>,
    model: &Model,
    src: &Source,
    o: &DeltaOptions,
    prompt: &[u32],
    steps: usize,
    mode: Mode,
) -> anyhow::Result<SideRun> {
    match src {
        Source::Lane(c) => {
            let lane = result_cache::lane_key(c, o);
            let key = result_cache::run_key(&lane, prompt, mode, steps, &[], None);
            let run = ctx.run(Some(&key), || {
                let dec = decoder(model, c, o)?;
                lane_run(
                    &dec,
                    &RunSpec {
                        ids: prompt.to_vec(),
                        steps,
                        mode,
                        batching: o.batching,
                        forced: Vec::new(),
                    },
                )
            })?;
            // Replaying the tokens it chose itself is the same computation.
            ctx.alias(&result_cache::replay_key(&lane, prompt, mode, &run.generated), &run);
            let generated = run.generated.clone();
            Ok(SideRun { run, prompt: prompt.to_vec(), mode, generated, key: Some(key) })
        }
        Source::Trace(p) => {
            let trace = tiercheck_model::import::load(model, p, &o.dump)?;
            check_trace_state(p, &trace, o.state.as_deref())?;
            let (prompt, mode, generated) = trace_prompt(p, &trace)?;
            let run = Arc::new(Run { trace, generated: generated.clone() });
            Ok(SideRun { run, prompt, mode, generated, key: None })
        }
    }
}

/// What the headline is made of.
struct Parts<'r> {
    free: &'r Divergence,
    free_verdict: &'r str,
    teacher: Option<&'r TeacherForced>,
    layer_verdicts: &'r [LayerVerdict],
    /// A trace side whose provenance names a lane that does not reproduce it: (side,
    /// lane, step, tap).
    not_lane: Option<(String, String, usize, String)>,
}

/// The headline of the parts (see [`Headline`]).
fn headline(p: &Parts<'_>) -> Headline {
    let size = match p.teacher {
        Some(t) => {
            let floor = p
                .free
                .rows
                .iter()
                .find(|r| r.name == "result_output")
                .and_then(|r| r.ratio)
                .map(|q| format!(", logits x{q:.1} the floor"))
                .unwrap_or_default();
            format!(
                "; teacher-forced: mean KLD {:.1e}, max |dlogit| {:.2e}{floor}",
                t.kld.mean, t.max_abs_dlogit.max
            )
        }
        None => String::new(),
    };
    let h =
        |kind: &str, text: String| Headline { kind: kind.into(), text: format!("{text}{size}") };
    if let Some((side, lane, st, tap)) = &p.not_lane {
        return h(
            "not-lane",
            format!(
                "NOT {lane}: {side} says it is {lane} (its provenance) but {lane} does not reproduce it from step {st} tap {tap}"
            ),
        );
    }
    let bad: Vec<&LayerVerdict> =
        p.layer_verdicts.iter().filter(|v| v.verdict == "discrepancy").collect();
    if let Some(first) = bad.first() {
        let layers: Vec<String> = bad.iter().map(|v| v.layer.to_string()).collect();
        return h(
            "discrepancy",
            format!(
                "DISCREPANCY at layer{} {}: beyond the layer-local floor with no activation flip to explain it (first: layer {}, {} x{:.0})",
                if bad.len() > 1 { "s" } else { "" },
                layers.join(", "),
                first.layer,
                first.worst_tap,
                first.ratio
            ),
        );
    }
    let teacher_bad = p.teacher.is_some_and(|t| !t.unexplained.is_empty());
    if p.free_verdict.contains("NOT a near-tie") || teacher_bad {
        return h(
            "not-near-tie",
            "tokens part where neither side had a near-tie: a wrong tier is suspected".into(),
        );
    }
    let flips: Vec<String> = p
        .layer_verdicts
        .iter()
        .filter(|v| v.verdict == "flip")
        .map(|v| v.layer.to_string())
        .collect();
    if !flips.is_empty() {
        return h(
            "flips",
            format!(
                "explained: near-boundary activation flips at layer{} {} (decided by the last bits), every other layer within the floor",
                if flips.len() > 1 { "s" } else { "" },
                flips.join(", ")
            ),
        );
    }
    if p.free.first_step.is_none() && p.free.steps_compared > 0 {
        return h("identical", "identical: every compared tap bitwise equal".into());
    }
    h("noise", "explained by reduction-order noise: every layer within its floor".into())
}

/// Severity of a layer verdict, for combining the two directions.
fn severity(v: &LayerVerdict) -> (u8, u64) {
    let s = match v.verdict.as_str() {
        "discrepancy" => 2,
        "flip" => 1,
        _ => 0,
    };
    (s, v.ratio.to_bits())
}

/// A provenance lane that does not reproduce its trace: the lane, step and tap.
type NotLane = (String, usize, String);

/// A trace side whose provenance (`lane` metadata) names a lane: whether that lane
/// reproduces it bitwise layer-locally (then the side is that lane for the analysis),
/// or where it stops.
fn verify_provenance(
    model: &Model,
    src: &Source,
    run: &SideRun,
    o: &DeltaOptions,
) -> anyhow::Result<(Option<Chosen>, Option<NotLane>)> {
    let Source::Trace(_) = src else { return Ok((None, None)) };
    let Some(name) = run.trace().meta.get("lane") else { return Ok((None, None)) };
    let Ok(lane) = lanes::find(name) else { return Ok((None, None)) };
    let c = lanes::choose(lane, Impl::Auto).map_err(anyhow::Error::msg)?;
    let (_, first) = identify::replay(model, &c, o, run.trace())?;
    Ok(match first {
        None => (Some(c), None),
        Some((st, tap, _)) => (None, Some((name.clone(), st, tap))),
    })
}

/// Run the whole analysis (a fresh [`Cache`]: each run, replay and floor computed once).
pub fn delta(
    model: &Model,
    a: &Source,
    b: &Source,
    o: &DeltaOptions,
) -> anyhow::Result<DeltaReport> {
    delta_cached(model, a, b, o, &Cache::new())
}

/// The most results (decoder runs, layer-local replays, floors) a [`delta`] of two lanes
/// computes with `o` (fewer where they are reused or not needed): a progress display's
/// total.
pub fn delta_results(o: &DeltaOptions) -> usize {
    // Two free runs, the teacher-forced replay, two layer-local replays; the floor: its
    // undithered replay, per seed a dithered replay and a layer-local run, and itself.
    5 + if o.floor_seeds > 0 { 2 + 2 * o.floor_seeds as usize } else { 0 }
}

/// [`delta`] reusing, and adding to, what `cache` holds (a caller comparing many pairs
/// computes each lane's runs once; [`result_cache`]).
pub fn delta_cached(
    model: &Model,
    a: &Source,
    b: &Source,
    o: &DeltaOptions,
    cache: &Cache,
) -> anyhow::Result<DeltaReport> {
    let ctx = Ctx::new(cache);
    let mut costs = Costs::start(&ctx);
    // Free-running runs. A trace brings its prompt, mode and attention options; a lane
    // follows it.
    let mut own = o.clone();
    let (prompt, steps, mode) = match (a, b) {
        (_, Source::Trace(p)) | (Source::Trace(p), _) => {
            let t = tiercheck_model::import::load(model, p, &o.dump)?;
            let (pr, md, gen) = trace_prompt(p, &t)?;
            own.attn = trace_attention(p, &t, o.attn)?;
            own.n_ctx = trace_ctx(p, &t, o.n_ctx)?;
            own.batching = trace_batching(p, &t, o.batching, model.hp.n_layer)?;
            (pr, gen.len(), md)
        }
        _ => (o.ids.clone(), o.steps, o.mode),
    };
    let o = &own;
    let ra = side_run(&ctx, model, a, o, &prompt, steps, mode)?;
    let rb = side_run(&ctx, model, b, o, &prompt, steps, mode)?;
    if ra.prompt != rb.prompt {
        anyhow::bail!("the two sides ran different prompts ({:?} vs {:?})", ra.prompt, rb.prompt);
    }
    let tokens_agree = ra.generated.iter().zip(&rb.generated).take_while(|(x, y)| x == y).count();
    costs.stage(&ctx, "free-running runs", None);

    // A trace whose provenance names a lane that reproduces it bitwise is that lane for
    // the analysis, so a verdict does not depend on whether a side is given as a lane or
    // as its trace.
    let prov_a = verify_provenance(model, a, &ra, o)?;
    let prov_b = verify_provenance(model, b, &rb, o)?;
    let (label_a, label_b) = (a.label(), b.label());
    let mut sides = Vec::new();
    let mut recorded = true;
    for (side, src, prov) in [("A", a, &prov_a), ("B", b, &prov_b)] {
        if let (Source::Trace(p), Some(c)) = (src, &prov.0) {
            sides.push(format!(
                "{side} ({}): its provenance lane {}, which reproduces it bitwise",
                p.display(),
                c.lane.name
            ));
        }
        if let Source::Trace(_) = src {
            let t = if side == "A" { ra.trace() } else { rb.trace() };
            recorded &= t.meta.contains_key("kv") && t.meta.contains_key("fa");
        }
    }
    // Two trace sides: each one with no lane of its own (no provenance, as an engine's
    // dump) is the lane `identify` finds for it, with the attention setting and thread
    // count it found (with a lane side, that lane measures the floor and replays the
    // trace's layers itself).
    let both_traces = matches!((a, b), (Source::Trace(_), Source::Trace(_)));
    let mut identified = Vec::new();
    for (side, src, prov) in [("A", a, &prov_a), ("B", b, &prov_b)] {
        let Source::Trace(p) = src else {
            identified.push(None);
            continue;
        };
        if !both_traces {
            identified.push(None);
            continue;
        }
        if prov.0.is_some() || prov.1.is_some() {
            identified.push(None);
            continue;
        }
        let io = identify::IdentifyOptions {
            lanes: None,
            imp: Impl::Auto,
            residual: o.residual,
            n_ctx: o.n_ctx,
            floor_seeds: 0,
            dump: o.dump.clone(),
            threads: o.threads,
            state: o.state.clone(),
        };
        let r = identify::identify(model, p, &io)?;
        if r.explained {
            let lane = lanes::find(&r.best_lane).map_err(anyhow::Error::msg)?;
            let c = lanes::choose(lane, Impl::Auto).map_err(anyhow::Error::msg)?;
            let ambiguous = if r.ambiguous {
                format!(" (ambiguously: {})", r.best_lanes.join(", "))
            } else {
                String::new()
            };
            sides.push(format!(
                "{side} ({}): identified as {}{ambiguous}",
                p.display(),
                r.best_candidate
            ));
            let kv = if r.best_kv == "f32" { KvType::F32 } else { KvType::F16 };
            let fa = if r.best_fa == "off" { FlashAttn::Off } else { FlashAttn::On };
            let threads = r.best_tier_threads.first().copied();
            identified.push(Some((c, kv, fa, threads)));
        } else {
            sides.push(format!(
                "{side} ({}): no lane reproduces it ({}): no layer-local comparison or floor with it",
                p.display(),
                r.verdict
            ));
            identified.push(None);
        }
    }
    // The identified settings stand for a trace's unrecorded ones (both sides ran the
    // same settings if both are dumps of one comparison; the first identified wins).
    if !recorded {
        if let Some((_, kv, fa, threads)) = identified.iter().flatten().next() {
            own.attn.kv = *kv;
            own.attn.fa = *fa;
            if let Some(n) = threads {
                own.attn.tier_threads = *n;
            }
        }
    }
    let o = &own;
    let side_of = |prov: &(Option<Chosen>, Option<NotLane>),
                   id: &Option<(Chosen, KvType, FlashAttn, Option<usize>)>,
                   src: &Source| {
        prov.0.or(id.as_ref().map(|x| x.0)).map(Source::Lane).unwrap_or_else(|| src.clone())
    };
    let ea = side_of(&prov_a, &identified[0], a);
    let eb = side_of(&prov_b, &identified[1], b);
    let attention_known = recorded
        || identified.iter().flatten().next().is_some()
        || matches!((a, b), (Source::Lane(_), _) | (_, Source::Lane(_)));
    let (a, b) = (&ea, &eb);
    costs.stage(&ctx, "provenance", None);

    let teacher = teacher_forced::analyse(&ctx, model, a, b, &ra, &rb, o)?;
    let teacher_verdict = teacher_forced::verdict(teacher.as_ref(), o.threshold);
    costs.stage(&ctx, "teacher-forced", None);

    let mut free = free_running::analyse(model, a, b, &ra, &rb)?;
    let free_verdict = free_running::verdict(&ra, &rb, tokens_agree, o.threshold);
    let (mut layer_local, layer_local_how, flips) =
        layer_local::analyse(&ctx, model, a, b, &ra, &rb, o)?;
    // Two lanes: each side's layers fed the other's inputs too.
    let mut reverse = match (a, b) {
        (Source::Lane(_), Source::Lane(_)) => {
            let (rev, _, rev_flips) = layer_local::analyse(&ctx, model, b, a, &rb, &ra, o)?;
            rev.map(|d| (d, rev_flips))
        }
        _ => None,
    };
    costs.stage(&ctx, "layer-local", None);

    // The floor, from a lane side teacher-forced on the other side's sequence; with two
    // lanes, the one whose name sorts first (the order of the sides does not matter). It
    // is measured only when a verdict needs it: when some compared tap differs.
    let differs = free.first_step.is_some()
        || layer_local.as_ref().is_some_and(|d| d.first_step.is_some())
        || reverse.as_ref().is_some_and(|(d, _)| d.first_step.is_some());
    let (floor_lane, seq) = match (a.chosen(), b.chosen()) {
        (Some(x), Some(y)) if y.lane.name < x.lane.name => (Some(y), &ra),
        (Some(x), _) => (Some(x), &rb),
        (None, Some(y)) => (Some(y), &ra),
        (None, None) => (None, &rb),
    };
    let (floor, floor_skipped) = match floor_lane {
        Some(_) if o.floor_seeds == 0 => (None, Some("--floor-seeds 0".to_string())),
        Some(_) if !differs => {
            (None, Some("not needed: every compared tap is bitwise equal".to_string()))
        }
        Some(c) => {
            let key = format!(
                "{}|{:?}|{:?}|{:?}|{}",
                result_cache::lane_key(c, o),
                seq.prompt,
                seq.mode,
                seq.generated,
                o.floor_seeds
            );
            let f = ctx.floor(&key, || {
                floor::measure(&ctx, model, c, o, &seq.prompt, seq.mode, &seq.generated)
            })?;
            (Some((*f).clone()), None)
        }
        None => (None, Some("no lane side to measure it with".to_string())),
    };
    let floor_skip_reason = floor_skipped.clone();
    costs.stage(&ctx, "floor", floor_skipped);
    let fmap = floor.as_ref().map(|f| &f.per_tap);
    let llmap = floor.as_ref().map(|f| &f.layer_local);
    free_running::set_floor(&mut free.rows, fmap);
    if let Some(d) = layer_local.as_mut() {
        free_running::set_floor(&mut d.rows, llmap);
    }
    if let Some((d, _)) = reverse.as_mut() {
        free_running::set_floor(&mut d.rows, llmap);
    }

    let mut layer_verdicts = match &layer_local {
        Some(d) => layer_local::layer_verdicts(d, &flips, model.hp.n_layer),
        None => Vec::new(),
    };
    // Two lanes: per layer the worse verdict of both directions, so the verdict does not
    // depend on the order of the sides.
    if let Some((d, rev_flips)) = &reverse {
        for v in layer_local::layer_verdicts(d, rev_flips, model.hp.n_layer) {
            match layer_verdicts.iter_mut().find(|w| w.layer == v.layer) {
                Some(w) if severity(&v) > severity(w) => *w = v,
                Some(_) => {}
                None => layer_verdicts.push(v),
            }
        }
        layer_verdicts.sort_by_key(|v| v.layer);
    }
    let not_lane = match (&prov_a.1, &prov_b.1) {
        (Some((l, st, tap)), _) => Some(("A".to_string(), l.clone(), *st, tap.clone())),
        (None, Some((l, st, tap))) => Some(("B".to_string(), l.clone(), *st, tap.clone())),
        _ => None,
    };
    let mut headline = headline(&Parts {
        free: &free,
        free_verdict: &free_verdict,
        teacher: teacher.as_ref(),
        layer_verdicts: &layer_verdicts,
        not_lane,
    });
    // A verdict that leans on a floor needs one that was measured.
    if floor.is_none() && matches!(headline.kind.as_str(), "noise" | "flips") {
        let why = floor_skip_reason.clone().unwrap_or_default();
        headline = Headline {
            kind: "not-judged".into(),
            text: format!(
                "not judged: the sides differ (first at step {} tap {}), and no floor was measured ({why}) to tell reduction-order noise from a wrong tier",
                free.first_step.map_or("?".into(), |s| s.to_string()),
                free.first_tap.clone().unwrap_or_else(|| "?".into())
            ),
        };
    }
    // Routing: over the steps whose inputs agree (the free-running comparison's).
    let same: Vec<usize> = ra
        .trace()
        .steps
        .iter()
        .zip(&rb.trace().steps)
        .take_while(|(x, y)| x.input_ids == y.input_ids && x.positions == y.positions)
        .map(|(x, _)| x.step)
        .collect();
    let routing =
        crate::routing::first_change(ra.trace(), rb.trace(), &same, model.hp.n_layer, o.threshold);
    let taps_only_a = taps_lacking(ra.trace(), rb.trace());
    let taps_only_b = taps_lacking(rb.trace(), ra.trace());
    costs.stage(&ctx, "verdicts", None);
    Ok(DeltaReport {
        costs: costs.into_stages(),
        routing,
        headline,
        taps_only_a,
        taps_only_b,
        attention: if attention_known { o.attn.label() } else { "unknown".into() },
        sides,
        layer_verdicts,
        a: label_a,
        b: label_b,
        model_sha256: model.sha256.clone(),
        prompt: ra.prompt.clone(),
        mode: ra.mode,
        threshold: o.threshold,
        tokens_a: ra.generated.clone(),
        tokens_b: rb.generated.clone(),
        tokens_agree,
        free,
        free_verdict,
        teacher,
        teacher_verdict,
        layer_local,
        layer_local_how,
        flips,
        floor,
    })
}
