//! Runtime feature detection: the one place of the workspace that asks the CPU what it
//! has ([`cpu_has`]), and the per-lane cache of the answer ([`FeatureSet`]), shared by the
//! native crates, the accelerated forms and the host report. One answer per process,
//! computed on first use (the answer never changes during a run).

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

/// The CPU features [`cpu_has`] knows on this architecture, in the order the host report
/// lists them (std's names: `avx2`, `f16c`, `dotprod`, `i8mm`, `sve`, ...).
pub const KNOWN: &[&str] = {
    #[cfg(target_arch = "x86_64")]
    {
        &[
            "sse3",
            "ssse3",
            "sse4.2",
            "avx",
            "f16c",
            "fma",
            "avx2",
            "bmi2",
            "avx512f",
            "avx512dq",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512vbmi",
            "avx512bf16",
            "avxvnni",
        ]
    }
    #[cfg(target_arch = "aarch64")]
    {
        &["neon", "dotprod", "i8mm", "sve", "sve2", "fp16"]
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        &[]
    }
};

/// Whether this CPU has feature `name` (one of [`KNOWN`]; std caches the answer).
///
/// # Panics
/// If `name` is not in [`KNOWN`] for this architecture (a misspelt feature would
/// otherwise read as absent).
pub fn cpu_has(name: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        match name {
            "sse3" => has!("sse3"),
            "ssse3" => has!("ssse3"),
            "sse4.2" => has!("sse4.2"),
            "avx" => has!("avx"),
            "f16c" => has!("f16c"),
            "fma" => has!("fma"),
            "avx2" => has!("avx2"),
            "bmi2" => has!("bmi2"),
            "avx512f" => has!("avx512f"),
            "avx512dq" => has!("avx512dq"),
            "avx512bw" => has!("avx512bw"),
            "avx512vl" => has!("avx512vl"),
            "avx512vnni" => has!("avx512vnni"),
            "avx512vbmi" => has!("avx512vbmi"),
            "avx512bf16" => has!("avx512bf16"),
            "avxvnni" => has!("avxvnni"),
            other => panic!("cpu_has: unknown x86-64 feature {other:?}"),
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        match name {
            "neon" => has!("neon"),
            "dotprod" => has!("dotprod"),
            "i8mm" => has!("i8mm"),
            "sve" => has!("sve"),
            "sve2" => has!("sve2"),
            "fp16" => has!("fp16"),
            other => panic!("cpu_has: unknown aarch64 feature {other:?}"),
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        panic!("cpu_has: no CPU features are known on this architecture ({name:?})")
    }
}

/// A set of CPU features a native implementation needs, detected once.
pub struct FeatureSet {
    cache: Cached,
    needs: &'static [&'static str],
}

impl FeatureSet {
    /// `needs`: every feature the implementation needs (names of [`KNOWN`]).
    pub const fn new(needs: &'static [&'static str]) -> Self {
        FeatureSet { cache: Cached::new(), needs }
    }

    /// The needed features with whether this CPU has each.
    pub fn detect(&self) -> Vec<(&'static str, bool)> {
        self.needs.iter().map(|&n| (n, cpu_has(n))).collect()
    }

    /// Whether every feature is present (detected once per process).
    #[inline]
    pub fn available(&self) -> bool {
        self.cache.get(|| self.needs.iter().all(|n| cpu_has(n)))
    }

    /// `Ok(())` when every feature is present, else the missing ones.
    pub fn check(&self) -> Result<(), crate::lane::Unavailable> {
        if self.available() {
            Ok(())
        } else {
            crate::lane::Unavailable::check(&self.detect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_feature_can_be_asked_and_a_set_reports_what_is_missing() {
        for &name in KNOWN {
            let _ = cpu_has(name);
        }
        let set = FeatureSet::new(KNOWN);
        let missing: Vec<_> = set.detect().into_iter().filter(|(_, on)| !on).collect();
        assert_eq!(set.available(), missing.is_empty());
        assert_eq!(set.check().is_ok(), missing.is_empty());
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[should_panic(expected = "unknown")]
    fn a_misspelt_feature_is_refused() {
        cpu_has("avx-2");
    }
}
