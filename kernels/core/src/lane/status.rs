//! What a lane is, where it runs and what it is proven against, as data beside the lane.
//!
//! A lane's [`Status`] is a claim the suite checks: every [`Proof`] names the test target
//! and the trial-name prefixes that establish it. Each such test calls the checker of
//! its claims (`tiercheck_testkit::claims::claim_checks` in the harness), which adds one
//! trial per claim that fails when no trial of the named prefixes exists in that test;
//! the proving trials themselves fail when the lane differs from the real tier, and are
//! required (not ignorable) under `TIERCHECK_REQUIRE_ORACLE=1`. A meta test checks that
//! every named test target exists and calls the checker. So a claim without a passing
//! proof fails the suite.

use core::fmt;

/// Where a lane's native code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// No native form: the lane is the specification (`ref`).
    Portable,
    /// x86-64 CPUs (`kernels/x86_64`).
    X86_64,
    /// aarch64 CPUs (`kernels/aarch64`).
    Aarch64,
    /// AMD GPUs through HIP (`kernels/hip`).
    AmdGpu,
    /// NVIDIA GPUs through CUDA (no host in this build: twin only).
    NvidiaGpu,
}

impl Arch {
    /// Stable name (`portable`, `x86_64`, `aarch64`, `amdgpu`, `nvidia`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Portable => "portable",
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::AmdGpu => "amdgpu",
            Arch::NvidiaGpu => "nvidia",
        }
    }

    /// The Rust `target_arch` a CPU lane's native code is compiled for (`None` for
    /// portable and GPU lanes).
    pub fn cpu_target_arch(self) -> Option<&'static str> {
        match self {
            Arch::X86_64 => Some("x86_64"),
            Arch::Aarch64 => Some("aarch64"),
            Arch::Portable | Arch::AmdGpu | Arch::NvidiaGpu => None,
        }
    }
}

/// The level at which a lane is compared with the real tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Kernels: quantizers, vec_dot, matmul (plain or repacked) against the tier's ggml
    /// build, bitwise.
    Kernel,
    /// The whole decoder token by token (decode mode), every tap bitwise against the
    /// tier's llama.cpp build.
    DecoderDecode,
    /// The whole decoder with the prompt as one batch (prompt mode), every tap bitwise.
    DecoderPrompt,
    /// The whole decoder run the way llama-cli and llama-server run llama.cpp: the
    /// prompt in batches and ubatches, only its last row's logits (the last layer
    /// pruned to it), greedy steps after it, several thread counts; every tap bitwise.
    DecoderCli,
}

impl Level {
    /// Short name (`kernel`, `decode`, `prompt`, `cli`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Kernel => "kernel",
            Level::DecoderDecode => "decode",
            Level::DecoderPrompt => "prompt",
            Level::DecoderCli => "cli",
        }
    }
}

/// One claimed proof: a lane equals a real tier's build at one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    /// The level.
    pub level: Level,
    /// The real build compared against (`ggml haswell`, `llama.cpp haswell`, ...).
    pub against: &'static str,
    /// A qualification of the claim, empty when there is none (e.g. the run setting under
    /// which it holds).
    pub only: &'static str,
    /// The suite holding it: a module of the `tiercheck` package's `trials` test binary,
    /// whose trial names start with `<suite>::`.
    pub suite: &'static str,
    /// Trial-name prefixes within that suite; each must match at least one trial.
    pub trials: &'static [&'static str],
}

/// What a lane is proven against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Proven bitwise against the real tier's own build, at the listed levels.
    Proven(&'static [Proof]),
    /// Reproduces a tier from its source as the project reads it, not yet proven against
    /// the tier's own build or hardware; `checked` says what it is checked against.
    Modelled {
        /// What is checked today.
        checked: &'static str,
    },
    /// The project's own design: reproduces no tier; `checked` says what it is checked
    /// against.
    Synthetic {
        /// What is checked today.
        checked: &'static str,
    },
}

impl Status {
    /// `proven`, `modelled` or `synthetic`.
    pub fn kind(&self) -> &'static str {
        match self {
            Status::Proven(_) => "proven",
            Status::Modelled { .. } => "modelled",
            Status::Synthetic { .. } => "synthetic",
        }
    }

    /// The claimed proofs (empty unless [`Status::Proven`]).
    pub fn proofs(&self) -> &'static [Proof] {
        match self {
            Status::Proven(p) => p,
            _ => &[],
        }
    }

    /// The highest level proven, if any.
    pub fn best_level(&self) -> Option<Level> {
        self.proofs().iter().map(|p| p.level).max()
    }

    /// A tag for tables: `proven:<highest level proven without qualification>`, with a
    /// `+` when a qualified proof (one that holds only under a stated setting) reaches
    /// higher; `modelled` or `synthetic`.
    pub fn tag(&self) -> String {
        let plain = self.proofs().iter().filter(|p| p.only.is_empty()).map(|p| p.level).max();
        match (plain, self.best_level()) {
            (Some(p), Some(best)) if best > p => format!("proven:{}+", p.name()),
            (Some(p), _) => format!("proven:{}", p.name()),
            (None, Some(best)) => format!("proven:{}+", best.name()),
            (None, None) => self.kind().to_string(),
        }
    }

    /// One short line: `proven: kernel, decode vs llama.cpp haswell`, `modelled`, ...
    pub fn short(&self) -> String {
        match self {
            Status::Proven(proofs) => {
                let mut levels: Vec<String> = Vec::new();
                for p in proofs.iter() {
                    let l = if p.only.is_empty() {
                        p.level.name().to_string()
                    } else {
                        format!("{} ({})", p.level.name(), p.only)
                    };
                    if !levels.contains(&l) {
                        levels.push(l);
                    }
                }
                format!("proven: {}", levels.join(", "))
            }
            other => other.kind().to_string(),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Proven(proofs) => {
                write!(f, "proven")?;
                for (i, p) in proofs.iter().enumerate() {
                    let sep = if i == 0 { ": " } else { "; " };
                    write!(f, "{sep}{} vs {}", p.level.name(), p.against)?;
                    if !p.only.is_empty() {
                        write!(f, " ({})", p.only)?;
                    }
                }
                Ok(())
            }
            Status::Modelled { checked } => write!(f, "modelled: {checked}"),
            Status::Synthetic { checked } => write!(f, "synthetic: {checked}"),
        }
    }
}
