//! The cache of what an analysis has computed (runs, layer-local replays, floors), and
//! the cost of each stage.
//!
//! A [`delta`](crate::delta()) runs a lane several times on the same sequence: its
//! free-running run, the teacher-forced replay of the other side's tokens (the same
//! computation when the tokens agree), the floor's undithered replay, and, with two
//! lanes, both layer-local directions. A [`Cache`] keeps each result under a key that
//! names everything the result depends on, so it is computed once:
//!
//! - **runs** (a lane's trace of one token sequence): the lane (its name, whether it is
//!   native, and the address of its kernel and elementwise objects, so two lanes of one
//!   name, such as a planted fault, never share a result), the residual type, the context
//!   length, the attention options, the prompt ids, the batching mode, the number of
//!   steps, the forced tokens and the dither seed. A free run that emitted tokens `g` is
//!   also stored under the key of the replay of `g`: feeding a lane the tokens it chose
//!   itself is the same computation, so the trace is bitwise the same (the test
//!   `cached_and_fresh_reports_are_equal` compares the reports);
//! - **layer-local replays**: the replaying lane's key and the key of the run it was fed
//!   (a trace read from a file is never keyed: it is replayed each time);
//! - **floors**: the lane's key, the sequence (prompt, mode, tokens) and the seeds.
//!
//! One `delta` uses a fresh cache ([`crate::delta()`]); a caller comparing many pairs shares
//! one across calls ([`crate::delta_cached`]); [`Cache::scoped`] shares the runs and
//! floors but keeps layer-local replays, the bulk of the memory, to one scope. Results
//! are computed by one thread each: a second thread asking for a key being computed waits
//! for it.
//!
//! [`StageCost`] records, per stage of an analysis, its wall time and how many results it
//! computed and reused.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use tiercheck_lanes::Chosen;
use tiercheck_model::sequence::Trace;
use tiercheck_model::Mode;

use crate::results::{Floor, Replay, Run};
use crate::side::DeltaOptions;

type Slot<T> = Arc<Mutex<Option<Arc<T>>>>;

/// Results of one kind by key.
struct Memo<T> {
    map: Mutex<HashMap<String, Slot<T>>>,
    /// Whether values are kept (a disabled cache computes every request).
    keep: bool,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo { map: Mutex::new(HashMap::new()), keep: true }
    }
}

impl<T> Memo<T> {
    fn off() -> Self {
        Memo { map: Mutex::new(HashMap::new()), keep: false }
    }

    fn slot(&self, key: &str) -> Slot<T> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key.to_owned()).or_default().clone()
    }

    /// The value under `key`, computing it with `f` when there is none; whether it was
    /// reused.
    fn get(
        &self,
        key: &str,
        f: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<(Arc<T>, bool)> {
        if !self.keep {
            return Ok((Arc::new(f()?), false));
        }
        let slot = self.slot(key);
        let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = &*g {
            return Ok((v.clone(), true));
        }
        let v = Arc::new(f()?);
        *g = Some(v.clone());
        Ok((v, false))
    }

    /// Store `v` under `key` unless a value is there.
    fn put(&self, key: &str, v: Arc<T>) {
        if !self.keep {
            return;
        }
        let slot = self.slot(key);
        let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(v);
        }
    }

    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Called after each result an analysis computes (a decoder run, a layer-local replay, a
/// floor) with how many it has computed so far: a progress display's hook.
pub type OnResult = Arc<dyn Fn(usize) + Send + Sync>;

/// What analyses have computed, by key (module doc).
#[derive(Clone, Default)]
pub struct Cache {
    runs: Arc<Memo<Run>>,
    floors: Arc<Memo<Floor>>,
    locals: Arc<Memo<(Trace, Replay)>>,
    on_result: Option<OnResult>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Cache {
        Cache::default()
    }

    /// A cache that keeps nothing: every run, replay and floor is computed (the reference
    /// the reuse is tested against).
    pub fn disabled() -> Cache {
        Cache {
            runs: Arc::new(Memo::off()),
            floors: Arc::new(Memo::off()),
            locals: Arc::new(Memo::off()),
            on_result: None,
        }
    }

    /// A cache sharing this one's runs and floors, with layer-local replays of its own.
    pub fn scoped(&self) -> Cache {
        let locals = Memo { map: Mutex::new(HashMap::new()), keep: self.locals.keep };
        Cache {
            runs: self.runs.clone(),
            floors: self.floors.clone(),
            locals: Arc::new(locals),
            on_result: self.on_result.clone(),
        }
    }

    /// This cache, calling `f` after each result an analysis using it computes.
    pub fn with_progress(mut self, f: OnResult) -> Cache {
        self.on_result = Some(f);
        self
    }

    /// Results held: (runs, floors, layer-local replays).
    pub fn len(&self) -> (usize, usize, usize) {
        (self.runs.len(), self.floors.len(), self.locals.len())
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0, 0)
    }
}

/// The key of a lane's decoder under `o`: everything a run's arithmetic depends on
/// besides its tokens.
pub(crate) fn lane_key(c: &Chosen, o: &DeltaOptions) -> String {
    format!(
        "{}|{}|{:p}|{:p}|{:p}|{:?}|{}|{:?}|{:?}|{}",
        c.lane.name,
        c.impl_name(),
        c.lane as *const _,
        c.kernels as *const dyn tiercheck_core::lane::Kernels as *const (),
        c.elem as *const dyn tiercheck_core::elem::ElemOps as *const (),
        o.residual,
        o.n_ctx,
        o.attn,
        o.batching,
        o.state.as_ref().map_or("", |s| s.sha256.as_str())
    )
}

/// The key of one run: lane, prompt, mode, steps, forced tokens, dither.
pub(crate) fn run_key(
    lane: &str,
    prompt: &[u32],
    mode: Mode,
    steps: usize,
    forced: &[u32],
    dither: Option<u64>,
) -> String {
    format!("{lane}|{prompt:?}|{mode:?}|{steps}|{forced:?}|{dither:?}")
}

/// The key of the replay of `generated` after `prompt`: what a free run that emitted
/// `generated` also is.
pub(crate) fn replay_key(lane: &str, prompt: &[u32], mode: Mode, generated: &[u32]) -> String {
    let forced = &generated[..generated.len().saturating_sub(1)];
    run_key(lane, prompt, mode, generated.len(), forced, None)
}

/// One analysis's view of a cache: counts what it computed and reused.
pub(crate) struct Ctx<'c> {
    cache: &'c Cache,
    computed: Cell<usize>,
    reused: Cell<usize>,
}

impl<'c> Ctx<'c> {
    pub(crate) fn new(cache: &'c Cache) -> Ctx<'c> {
        Ctx { cache, computed: Cell::new(0), reused: Cell::new(0) }
    }

    fn count(&self, reused: bool) {
        let c = if reused { &self.reused } else { &self.computed };
        c.set(c.get() + 1);
        if let (false, Some(f)) = (reused, &self.cache.on_result) {
            f(self.computed.get());
        }
    }

    /// The value under `key` in `memo` (`None`: not cacheable, computed), counted once it
    /// exists.
    fn fetch<T>(
        &self,
        memo: &Memo<T>,
        key: Option<&str>,
        f: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<Arc<T>> {
        let (v, hit) = match key {
            Some(k) => memo.get(k, f)?,
            None => (Arc::new(f()?), false),
        };
        self.count(hit);
        Ok(v)
    }

    /// A run by key (`None`: not cacheable, computed).
    pub(crate) fn run(
        &self,
        key: Option<&str>,
        f: impl FnOnce() -> anyhow::Result<Run>,
    ) -> anyhow::Result<Arc<Run>> {
        self.fetch(&self.cache.runs, key, f)
    }

    /// Store a run under a second key (a free run as the replay of its own tokens).
    pub(crate) fn alias(&self, key: &str, v: &Arc<Run>) {
        self.cache.runs.put(key, v.clone());
    }

    /// A layer-local replay by key (`None`: not cacheable).
    pub(crate) fn local(
        &self,
        key: Option<&str>,
        f: impl FnOnce() -> anyhow::Result<(Trace, Replay)>,
    ) -> anyhow::Result<Arc<(Trace, Replay)>> {
        self.fetch(&self.cache.locals, key, f)
    }

    /// A floor by key.
    pub(crate) fn floor(
        &self,
        key: &str,
        f: impl FnOnce() -> anyhow::Result<Floor>,
    ) -> anyhow::Result<Arc<Floor>> {
        self.fetch(&self.cache.floors, Some(key), f)
    }

    fn counts(&self) -> (usize, usize) {
        (self.computed.get(), self.reused.get())
    }
}

/// The cost of one stage of an analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageCost {
    /// Stage name.
    pub stage: String,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Results computed (decoder runs, layer-local replays, floors).
    pub computed: usize,
    /// Results reused from the cache.
    pub reused: usize,
    /// Why the stage did nothing, when it did nothing on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Stage costs as they are recorded.
pub(crate) struct Costs {
    stages: Vec<StageCost>,
    t: Instant,
    at: (usize, usize),
}

impl Costs {
    pub(crate) fn start(ctx: &Ctx<'_>) -> Costs {
        Costs { stages: Vec::new(), t: Instant::now(), at: ctx.counts() }
    }

    /// Close the stage that ran since the last one.
    pub(crate) fn stage(&mut self, ctx: &Ctx<'_>, name: &str, skipped: Option<String>) {
        let now = (Instant::now(), ctx.counts());
        self.stages.push(StageCost {
            stage: name.into(),
            seconds: now.0.duration_since(self.t).as_secs_f64(),
            computed: now.1 .0 - self.at.0,
            reused: now.1 .1 - self.at.1,
            skipped,
        });
        (self.t, self.at) = now;
    }

    pub(crate) fn into_stages(self) -> Vec<StageCost> {
        self.stages
    }
}
