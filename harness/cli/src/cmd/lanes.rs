//! `tiercheck lanes`: the known lanes, which ones this host runs natively, and its CPU
//! features.

use anyhow::Result;

use tiercheck_lanes::{self as lanes, host};

/// `tiercheck lanes` (`--names`: the names alone, one per line).
pub fn run(names: bool) -> Result<()> {
    if names {
        for lane in lanes::all() {
            println!("{}", lane.name);
        }
        return Ok(());
    }
    println!("host: {} ({})", host::arch(), std::env::consts::OS);
    let feats = host::cpu_features();
    let line: Vec<String> =
        feats.iter().map(|(n, on)| format!("{}{n}", if *on { "+" } else { "-" })).collect();
    println!("cpu features: {}", line.join(" "));
    if let Some(q) = host::qemu_cpu() {
        println!("qemu cpu model: {q}");
    }
    println!();
    println!("lanes:");
    for lane in lanes::all() {
        let native = match lanes::native(lane) {
            Ok(_) => "native here: yes".to_string(),
            Err(why) => format!("native here: no ({why})"),
        };
        println!("  {:<22} {}", lane.name, lane.summary);
        println!("  {:<22} arch: {}; status: {}", "", lane.arch.name(), lane.status);
        println!("  {:<22} {native}; portable twin: yes", "");
        let recipe: Vec<String> =
            lane.recipe.components().iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {:<22} {}", "", recipe.join(" "));
    }
    Ok(())
}
