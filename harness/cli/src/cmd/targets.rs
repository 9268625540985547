//! `tiercheck targets`: a target table (`targets/<triple>.toml`), its lanes and CPU
//! models.

use anyhow::Result;
use clap::Args;

use tiercheck_lanes::targets;

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
}

/// `tiercheck targets`.
pub fn run(a: TargetsArgs) -> Result<()> {
    let triple = a.triple.as_deref().unwrap_or(targets::TRIPLE);
    let t = targets::load(&targets::targets_dir(), triple)?;
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
    Ok(())
}
