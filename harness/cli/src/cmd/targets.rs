//! `tiercheck targets`: a target table (`targets/<triple>.toml`), its lanes, CPU models
//! and oracle builds.

use anyhow::Result;
use clap::Args;

use tiercheck_targets as targets;

/// `tiercheck targets`.
#[derive(Args, Clone, Debug)]
pub struct TargetsArgs {
    /// Target triple (default: the one this binary was built for).
    #[arg(long)]
    pub triple: Option<String>,
    /// One line per model, `name|QEMU_CPU|required lanes` (for scripts).
    #[arg(long)]
    pub shell: bool,
    /// One line per lane with a native form, `lane|tier model|QEMU_CPU` (for scripts):
    /// the CPU model of each lane's own tier.
    #[arg(long, conflicts_with = "shell")]
    pub lanes_shell: bool,
    /// The oracle's builds of the target (`[[tier]]`) as bash assignments for `eval`
    /// (ci/oracle): `<prefix>TIERS=(...)` and one associative array per fact,
    /// `declare -A <prefix>MARCH=(...)`, `QEMU_CPU`, `INFO`, `ENV`, `LLAMA_ENV`, `PROVES`.
    #[arg(long, conflicts_with_all = ["shell", "lanes_shell"])]
    pub tiers_shell: bool,
    /// The prefix of the variable names `--tiers-shell` prints (e.g. `ARM_`).
    #[arg(long, default_value = "", requires = "tiers_shell", value_parser = shell_prefix)]
    pub prefix: String,
}

/// A bash variable-name prefix: ASCII letters, digits and `_`, not starting with a digit.
fn shell_prefix(s: &str) -> Result<String, String> {
    if s.starts_with(|c: char| c.is_ascii_digit())
        || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!("`{s}` cannot start a shell variable name (A-Z, a-z, 0-9, _)"));
    }
    Ok(s.to_string())
}

/// `tiercheck targets`.
pub fn run(a: TargetsArgs) -> Result<()> {
    let triple = a.triple.as_deref().unwrap_or(targets::TRIPLE);
    let t = targets::load(&targets::targets_dir(), triple)?;
    tiercheck_lanes::check_target_lanes(&t)?;
    if a.tiers_shell {
        print!("{}", t.tiers_shell(&a.prefix));
        return Ok(());
    }
    if a.lanes_shell {
        for name in &t.lanes {
            let lane = tiercheck_lanes::find(name).map_err(anyhow::Error::msg)?;
            if !tiercheck_lanes::has_native(lane) {
                continue;
            }
            // A lane no model requires (x86_64-avx512: CI hosts vary) has no tier model.
            if let Some(m) = t.model_for(name) {
                println!("{name}|{}|{}", m.name, m.qemu_cpu);
            }
        }
        return Ok(());
    }
    if a.shell {
        for m in &t.models {
            println!("{}|{}|{}", m.name, m.qemu_cpu, m.require.join(","));
        }
        return Ok(());
    }
    println!("target {}", t.triple);
    if let Some(r) = &t.runner {
        println!("runner: {r}");
    }
    println!("lanes: {}", t.lanes.join(", "));
    for m in &t.models {
        let cpu = if m.qemu_cpu.is_empty() { "host" } else { m.qemu_cpu.as_str() };
        println!(
            "  model {:<10} QEMU_CPU={:<16} requires: {}",
            m.name,
            cpu,
            if m.require.is_empty() { "-".to_string() } else { m.require.join(", ") }
        );
        if let Some(n) = &m.note {
            println!("  {:<16} {n}", "");
        }
    }
    for tier in &t.tiers {
        println!(
            "  oracle build {} -march={} on model {} (QEMU_CPU={}), proves: {}",
            tier.name,
            tier.march,
            tier.model,
            t.tier_qemu_cpu(tier),
            tier.proves.join(", ")
        );
    }
    Ok(())
}
