//! What this host's CPU can execute, detected at run time.

/// CPU features that matter to some lane, as (name, present) pairs in a fixed order.
pub fn cpu_features() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![
            ("sse4.2", std::arch::is_x86_feature_detected!("sse4.2")),
            ("avx", std::arch::is_x86_feature_detected!("avx")),
            ("f16c", std::arch::is_x86_feature_detected!("f16c")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("bmi2", std::arch::is_x86_feature_detected!("bmi2")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
            ("avx512vl", std::arch::is_x86_feature_detected!("avx512vl")),
            ("avx512vnni", std::arch::is_x86_feature_detected!("avx512vnni")),
            ("avxvnni", std::arch::is_x86_feature_detected!("avxvnni")),
        ]
    }
    #[cfg(target_arch = "aarch64")]
    {
        vec![
            ("neon", std::arch::is_aarch64_feature_detected!("neon")),
            ("dotprod", std::arch::is_aarch64_feature_detected!("dotprod")),
            ("i8mm", std::arch::is_aarch64_feature_detected!("i8mm")),
            ("sve", std::arch::is_aarch64_feature_detected!("sve")),
            ("fp16", std::arch::is_aarch64_feature_detected!("fp16")),
        ]
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Vec::new()
    }
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
