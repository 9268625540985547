//! How `tiercheck matrix` runs each lane here, the qemu driver for another
//! architecture's build, and a lane's agreement with `ref`.
//!
//! A lane runs in one of three ways: natively in this process (the host has the
//! features), as the native build of another architecture under qemu-user (aarch64
//! lanes on an x86 host, when `qemu-aarch64` and the cross-built binary are present),
//! or as its portable twin in this process. The three give the same bits (the golden
//! suite proves the kernels so; the model goldens prove the whole decoder so).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use tiercheck_core::lane::Arch;
use tiercheck_lanes::{self as lanes, provenance};
use tiercheck_model::lane_run::{LaneResult, PromptResult, RunOptions};

/// How the matrix will run one lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// In this process, native kernels.
    Native,
    /// In this process, the portable twin (with why native is not possible).
    Portable(String),
    /// A cross-built binary under qemu-user with this CPU model.
    Qemu {
        /// The emulator.
        qemu: PathBuf,
        /// `-L` sysroot.
        sysroot: PathBuf,
        /// The tiercheck binary for the other architecture.
        binary: PathBuf,
        /// qemu `-cpu` model.
        cpu: String,
    },
}

/// Find a program on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The cross-built aarch64 tiercheck binary, if one was built in this workspace.
pub fn default_aarch64_binary() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?.parent()?.to_owned();
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or(root.join("target"));
    ["release", "debug"]
        .iter()
        .map(|p| target.join("aarch64-unknown-linux-gnu").join(p).join("tiercheck"))
        .find(|p| p.is_file())
}

/// Decide how to run `lane` here: natively where the host can; an aarch64 lane on
/// another host under the runner of `targets/aarch64-unknown-linux-gnu.toml`, on the CPU
/// model of the lane's own tier from that table (or `qemu_cpu` when given), when qemu,
/// the sysroot and the cross-built binary are there; else its portable twin, with why.
pub fn plan(
    lane: &'static tiercheck_core::Lane,
    aarch64_bin: Option<&Path>,
    qemu_cpu: Option<&str>,
) -> Plan {
    let why = match lanes::native(lane) {
        Ok(_) => return Plan::Native,
        Err(why) => why,
    };
    if lane.arch != Arch::Aarch64 || cfg!(target_arch = "aarch64") {
        return Plan::Portable(why.to_string());
    }
    let table = match tiercheck_targets::load_arch("aarch64") {
        Ok(t) => t,
        Err(e) => return Plan::Portable(format!("{why}; {e}")),
    };
    let cpu = match (qemu_cpu, table.model_for(lane.name)) {
        (Some(cpu), _) => cpu.to_string(),
        (None, Some(m)) => m.qemu_cpu.clone(),
        (None, None) => {
            return Plan::Portable(format!(
                "{why}; targets/{}.toml has no CPU model for `{}`",
                table.triple, lane.name
            ))
        }
    };
    // The runner: `qemu-aarch64 -L <sysroot>`.
    let runner = table.runner.clone().unwrap_or_default();
    let mut words = runner.split_whitespace();
    let program = words.next().unwrap_or("qemu-aarch64");
    let mut sysroot = PathBuf::from("/usr/aarch64-linux-gnu");
    while let Some(w) = words.next() {
        if w == "-L" {
            if let Some(p) = words.next() {
                sysroot = PathBuf::from(p);
            }
        }
    }
    match (which(program), aarch64_bin) {
        (Some(qemu), Some(bin)) if sysroot.is_dir() => {
            Plan::Qemu { qemu, sysroot, binary: bin.to_owned(), cpu }
        }
        (None, _) => Plan::Portable(format!("{why}; {program} not found")),
        (_, None) => Plan::Portable(format!(
            "{why}; no aarch64 build of tiercheck (cargo build --release --target aarch64-unknown-linux-gnu -p tiercheck)"
        )),
        _ => Plan::Portable(format!("{why}; no aarch64 sysroot at {}", sysroot.display())),
    }
}

/// The git revision another architecture's binary was built from (`--version` under
/// qemu), or why it could not be asked.
pub fn probe_revision(plan: &Plan) -> Result<String, String> {
    let Plan::Qemu { qemu, sysroot, binary, cpu } = plan else {
        return Err("not a qemu plan".into());
    };
    let out = Command::new(qemu)
        .arg("-L")
        .arg(sysroot)
        .arg("-cpu")
        .arg(cpu)
        .arg(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", qemu.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("(git ").nth(1).and_then(|r| r.split(')').next()).map(str::to_string).ok_or_else(
        || format!("{} --version printed no git revision: {}", binary.display(), text.trim()),
    )
}

/// Run a lane through another architecture's binary under qemu: `tiercheck run --json`.
pub fn run_under_qemu(
    plan: &Plan,
    lane: &str,
    model: &Path,
    prompts_file: &Path,
    opts: &RunOptions,
    only: Option<&str>,
) -> anyhow::Result<LaneResult> {
    let Plan::Qemu { qemu, sysroot, binary, cpu } = plan else {
        anyhow::bail!("not a qemu plan");
    };
    let mut cmd = Command::new(qemu);
    cmd.arg("-L").arg(sysroot).arg("-cpu").arg(cpu).arg(binary);
    cmd.args(["run", "--lane", lane, "--impl", "native", "--json", "--quiet"]);
    cmd.arg("--model").arg(model).arg("--prompts").arg(prompts_file);
    cmd.args(["--steps", &opts.steps.to_string(), "--mode", opts.mode.name()]);
    cmd.args(["--residual", opts.residual.name(), "--threads", &opts.threads.to_string()]);
    cmd.args(["--ctx", &opts.n_ctx.to_string()]);
    cmd.args(["--kv", opts.attn.kv.name(), "--fa", opts.attn.fa.name()]);
    cmd.args(["--tier-threads", &opts.attn.tier_threads.to_string()]);
    if opts.attn.tier_numa {
        cmd.arg("--tier-numa");
    }
    cmd.args(["--batch", &opts.batching.n_batch.to_string()]);
    cmd.args(["--ubatch", &opts.batching.n_ubatch.to_string()]);
    cmd.args(["--logits", opts.batching.logits.name()]);
    if let Some(s) = &opts.state {
        cmd.arg("--state").arg(&s.path);
    }
    if let Some(name) = only {
        cmd.args(["--prompt", name]);
        if let Some(dir) = &opts.traces {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("{}: cannot create folder: {e}", dir.display()))?;
            cmd.arg("--out").arg(dir.join(format!("{name}.safetensors")));
        }
    } else if let Some(dir) = &opts.traces {
        cmd.arg("--out").arg(dir);
    }
    cmd.env("QEMU_CPU", cpu);
    let out = cmd.output().map_err(|e| anyhow::anyhow!("{}: {e}", qemu.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} {} run --lane {lane} failed ({}): {}",
            qemu.display(),
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut r: LaneResult = serde_json::from_slice(&out.stdout).map_err(|e| {
        anyhow::anyhow!("{}: unreadable JSON from the qemu run: {e}", binary.display())
    })?;
    let theirs = r.provenance.get("git_revision").cloned().unwrap_or_default();
    let ours = provenance::git_revision();
    if theirs != ours {
        anyhow::bail!(
            "{} was built from revision {theirs}, this tiercheck from {ours}: rebuild it \
             (cargo build --release --target aarch64-unknown-linux-gnu -p tiercheck)",
            binary.display()
        );
    }
    r.how = format!("native under qemu-aarch64 ({cpu})");
    Ok(r)
}

/// One lane compared with `ref`, per prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptAgreement {
    /// Prompt name.
    pub name: String,
    /// Generated tokens equal to ref's before the first difference.
    pub agree: usize,
    /// Generated tokens in all.
    pub of: usize,
    /// First divergent generated token (0-based), if any.
    pub first_divergence: Option<usize>,
    /// ref's top-1 minus top-2 logit at that step.
    pub ref_gap: Option<f32>,
    /// This lane's gap at that step.
    pub lane_gap: Option<f32>,
}

/// Compare a lane's generated tokens with ref's.
pub fn agreement(reference: &LaneResult, lane: &LaneResult) -> Vec<PromptAgreement> {
    let mut out = Vec::new();
    for p in &lane.prompts {
        let Some(r) = reference.prompts.iter().find(|r| r.name == p.name) else { continue };
        let of = p.generated.len().min(r.generated.len());
        let agree = p.generated.iter().zip(&r.generated).take_while(|(a, b)| a == b).count();
        let first = (agree < of).then_some(agree);
        // Generated token g comes from step (prompt steps - 1 + g).
        let gap_at = |res: &PromptResult, g: usize| {
            let base = res.steps.len() + 1 - res.generated.len();
            res.steps.get(base - 1 + g).map(|s| s.gap)
        };
        out.push(PromptAgreement {
            name: p.name.clone(),
            agree,
            of,
            first_divergence: first,
            ref_gap: first.and_then(|g| gap_at(r, g)),
            lane_gap: first.and_then(|g| gap_at(p, g)),
        });
    }
    out
}
