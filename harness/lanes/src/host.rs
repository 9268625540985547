//! What this host's CPU can execute, detected at run time.

/// The CPU features the host report lists, in this order (the provenance string of
/// traces; a subset of `tiercheck_core::detect::KNOWN`).
#[cfg(target_arch = "x86_64")]
const REPORTED: &[&str] = &[
    "sse4.2",
    "avx",
    "f16c",
    "fma",
    "avx2",
    "bmi2",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512vnni",
    "avxvnni",
];
#[cfg(target_arch = "aarch64")]
const REPORTED: &[&str] = &["neon", "dotprod", "i8mm", "sve", "fp16"];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const REPORTED: &[&str] = &[];

/// CPU features that matter to some lane, as (name, present) pairs in a fixed order
/// (detected by `tiercheck_core::detect::cpu_has`).
pub fn cpu_features() -> Vec<(&'static str, bool)> {
    REPORTED.iter().map(|&n| (n, tiercheck_core::detect::cpu_has(n))).collect()
}

/// The detected features, space-separated (for provenance metadata).
pub fn cpu_feature_string() -> String {
    cpu_features().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect::<Vec<_>>().join(" ")
}

/// `x86_64`, `aarch64`, ...
pub fn arch() -> &'static str {
    std::env::consts::ARCH
}

/// The qemu CPU model this process runs under, when the runner says so (`QEMU_CPU`).
pub fn qemu_cpu() -> Option<String> {
    std::env::var("QEMU_CPU").ok().filter(|s| !s.is_empty())
}

/// Whether this CPU has the x86 feature `name` (false on other architectures and for
/// names this function does not know).
pub fn x86_has(name: &str) -> bool {
    cpu_features().iter().any(|(n, on)| *on && *n == name) && cfg!(target_arch = "x86_64")
}
