//! Cached runtime feature detection.

use std::sync::atomic::{AtomicU8, Ordering};

/// A detection result computed once: 0 = not yet, 1 = absent, 2 = present.
pub(crate) struct Cached(AtomicU8);

impl Cached {
    pub(crate) const fn new() -> Self {
        Cached(AtomicU8::new(0))
    }

    /// The cached answer, computing it with `detect` on first use. The answer never
    /// changes during a run.
    #[inline]
    pub(crate) fn get(&self, detect: fn() -> bool) -> bool {
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
