//! `tiercheck lanes`: the known lanes, which ones this host runs natively, and its CPU
//! features.

use anyhow::Result;

use tiercheck_core::lane::Status;
use tiercheck_core::quant::weights;
use tiercheck_core::GgmlType;
use tiercheck_core::Lane;
use tiercheck_lanes::{self as lanes, host};

/// Why a proven lane's proofs cannot run on this host, if they cannot: the x86 lanes'
/// proofs run the tier's own build in this process, so they need its CPU features; the
/// aarch64 lanes' run its build under qemu-aarch64 (or natively on an aarch64 host with
/// the lane's features).
pub fn not_checkable_here(lane: &Lane) -> Option<String> {
    if !matches!(lane.status, Status::Proven(_)) {
        return None;
    }
    let arch = lane.arch.cpu_target_arch()?;
    let here = std::env::consts::ARCH;
    match (arch, here) {
        ("x86_64", "x86_64") => lanes::native(lane)
            .err()
            .map(|why| format!("its proofs run the tier's build on this CPU, and {why}")),
        ("x86_64", _) => {
            Some("its proofs run the tier's x86-64 build, and this host is not x86-64".into())
        }
        ("aarch64", "aarch64") => lanes::native(lane)
            .err()
            .map(|why| format!("its proofs run the tier's build on this CPU, and {why}")),
        ("aarch64", _) => {
            let on_path = std::env::var_os("PATH").is_some_and(|p| {
                std::env::split_paths(&p).any(|d| d.join("qemu-aarch64").is_file())
            });
            (!on_path).then(|| "its proofs run the tier's aarch64 build under qemu-aarch64, which is not installed".into())
        }
        _ => None,
    }
}

/// A lane's status in one line for the Markdown table: the kind in bold, and for a
/// proven lane the levels proven (with any qualification).
fn status_line(status: &Status) -> String {
    match status.short().split_once(": ") {
        Some((kind, levels)) => format!("**{kind}**: {levels}"),
        None => format!("**{}**", status.kind()),
    }
}

/// One Markdown table cell: `|` escaped, whitespace runs (line continuations) as one
/// space.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// The weight types `lane` multiplies (its vec_dot, matmul and, where it has one, its
/// repack): those its activation rule is defined for, in the order of
/// [`weights::QUANTIZABLE`].
pub fn weight_types(lane: &Lane) -> Vec<GgmlType> {
    weights::QUANTIZABLE.iter().copied().filter(|&t| lane.portable.act_rule(t).is_ok()).collect()
}

fn type_list(lane: &Lane) -> String {
    weight_types(lane).iter().map(|t| t.name()).collect::<Vec<_>>().join(" ")
}

/// The lane table of README.md and docs/LANES.md, from the registry: one row per lane
/// with its name, architecture, summary, weight types and status line. Ends with a
/// newline.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| lane | arch | reproduces | weight types | status |\n|---|---|---|---|---|\n",
    );
    for lane in lanes::all() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            lane.name,
            lane.arch.name(),
            cell(lane.summary),
            type_list(lane),
            status_line(&lane.status)
        ));
    }
    out
}

/// `tiercheck lanes` (`--names`: the names alone, one per line; `--markdown`: the
/// table of [`markdown_table`]).
pub fn run(names: bool, markdown: bool) -> Result<()> {
    if markdown {
        print!("{}", markdown_table());
        return Ok(());
    }
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
        if let Some(why) = not_checkable_here(lane) {
            println!("  {:<22} not checked on this host: {why}", "");
        }
        println!("  {:<22} {native}; portable twin: yes", "");
        println!("  {:<22} weight types: {}", "", type_list(lane));
        let recipe: Vec<String> =
            lane.recipe.components().iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {:<22} {}", "", recipe.join(" "));
    }
    Ok(())
}
