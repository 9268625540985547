//! Cached runtime feature detection, shared by the architecture crates: one answer per
//! process, computed on first use (the answer never changes during a run).

use std::sync::atomic::{AtomicU8, Ordering};

/// A detection result computed once: 0 = not yet, 1 = absent, 2 = present.
pub struct Cached(AtomicU8);

impl Default for Cached {
    fn default() -> Self {
        Cached::new()
    }
}

impl Cached {
    /// Not yet detected.
    pub const fn new() -> Self {
        Cached(AtomicU8::new(0))
    }

    /// The cached answer, computing it with `detect` on first use. The answer never
    /// changes during a run.
    #[inline]
    pub fn get(&self, detect: impl FnOnce() -> bool) -> bool {
        match self.0.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => {
                let present = detect();
                self.0.store(if present { 2 } else { 1 }, Ordering::Relaxed);
                present
            }
        }
    }
}

/// A set of CPU features a native implementation needs, detected once.
pub struct FeatureSet {
    cache: Cached,
    detect: fn() -> Vec<(&'static str, bool)>,
}

impl FeatureSet {
    /// `detect` lists every needed feature with whether this CPU has it.
    pub const fn new(detect: fn() -> Vec<(&'static str, bool)>) -> Self {
        FeatureSet { cache: Cached::new(), detect }
    }

    /// Whether every feature is present (detected once per process).
    #[inline]
    pub fn available(&self) -> bool {
        self.cache.get(|| (self.detect)().iter().all(|&(_, present)| present))
    }

    /// `Ok(())` when every feature is present, else the missing ones.
    pub fn check(&self) -> Result<(), crate::lane::Unavailable> {
        if self.available() {
            Ok(())
        } else {
            crate::lane::Unavailable::check(&(self.detect)())
        }
    }
}
