//! Builds the device code: with the `hip` feature and hipcc present, one code object
//! (an AMDGPU ELF, `--genco --no-gpu-bundle-output`) per offload target from
//! `device/tiercheck_mmvq.hip`, embedded into the crate. Without the feature, or
//! without hipcc, the crate builds with no code objects and says why
//! (`tiercheck_hip::BUILD_NOTE`, and a cargo warning when the feature asked for them).
//!
//! Environment:
//! - `TIERCHECK_HIP_TARGETS`: comma-separated offload targets (default
//!   `gfx90a,gfx1030`: CDNA2 wave64 and RDNA2 wave32).
//! - `HIPCC`: the compiler (default: `hipcc` on PATH, then `$HIP_PATH/bin`,
//!   `$ROCM_PATH/bin`, `/opt/rocm/bin`).

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_TARGETS: &str = "gfx90a,gfx1030";
const SOURCE: &str = "device/tiercheck_mmvq.hip";

fn main() {
    println!("cargo:rerun-if-changed=device");
    for var in ["TIERCHECK_HIP_TARGETS", "HIPCC", "HIP_PATH", "ROCM_PATH", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));

    let targets = match targets() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let (objects, note) = if env::var_os("CARGO_FEATURE_HIP").is_none() {
        (Vec::new(), "built without the `hip` feature: no device code".to_string())
    } else {
        match find_hipcc() {
            None => {
                let note = "the `hip` feature is on but hipcc was not found (set HIPCC, or \
                            install hipcc): no device code";
                println!("cargo:warning=tiercheck-hip: {note}");
                (Vec::new(), note.to_string())
            }
            Some(hipcc) => {
                let version = hipcc_version(&hipcc);
                let mut objects = Vec::new();
                for t in &targets {
                    let out = out_dir.join(format!("tiercheck_mmvq-{t}.co"));
                    compile(&hipcc, &manifest, t, &out);
                    objects.push((t.clone(), out));
                }
                let note = format!(
                    "code objects for {} built by {} ({version})",
                    targets.join(", "),
                    hipcc.display()
                );
                (objects, note)
            }
        }
    };

    let mut gen = String::new();
    gen.push_str("/// The code objects this build embeds, one per offload target.\n");
    gen.push_str("pub const CODE_OBJECTS: &[CodeObject] = &[\n");
    for (t, path) in &objects {
        let _ = writeln!(
            gen,
            "    CodeObject {{ target: {t:?}, bytes: include_bytes!({:?}) }},",
            path.display().to_string()
        );
    }
    gen.push_str("];\n");
    let _ = writeln!(gen, "/// The offload targets this build was configured for.");
    let _ = writeln!(gen, "pub const CONFIGURED_TARGETS: &[&str] = &{targets:?};");
    let _ = writeln!(gen, "/// How the device code was (or was not) built.");
    let _ = writeln!(gen, "pub const BUILD_NOTE: &str = {note:?};");
    std::fs::write(out_dir.join("code_objects.rs"), gen).expect("write code_objects.rs");
}

/// The configured offload targets, validated.
fn targets() -> Result<Vec<String>, String> {
    let raw = env::var("TIERCHECK_HIP_TARGETS").unwrap_or_else(|_| DEFAULT_TARGETS.to_string());
    let mut out = Vec::new();
    for t in raw.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let ok = t.len() > 3
            && t.starts_with("gfx")
            && t[3..].chars().all(|c| c.is_ascii_hexdigit() || c.is_ascii_lowercase());
        if !ok {
            return Err(format!(
                "TIERCHECK_HIP_TARGETS: `{t}` is not an AMD GPU offload target (like gfx90a, \
                 gfx1030)"
            ));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    if out.is_empty() {
        return Err(format!("TIERCHECK_HIP_TARGETS is empty (`{raw}`): name at least one"));
    }
    Ok(out)
}

fn find_hipcc() -> Option<PathBuf> {
    if let Some(p) = env::var_os("HIPCC") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let p = dir.join("hipcc");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let roots = ["HIP_PATH", "ROCM_PATH"]
        .iter()
        .filter_map(|v| env::var_os(v).map(PathBuf::from))
        .chain([PathBuf::from("/opt/rocm")]);
    roots.map(|r| r.join("bin/hipcc")).find(|p| p.is_file())
}

fn hipcc_version(hipcc: &Path) -> String {
    match Command::new(hipcc).arg("--version").output() {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("HIP version") || l.contains("clang version"))
                .collect();
            if lines.is_empty() {
                "version unknown".to_string()
            } else {
                lines.join(", ")
            }
        }
        Err(e) => format!("version unknown: {e}"),
    }
}

fn compile(hipcc: &Path, manifest: &Path, target: &str, out: &Path) {
    let src = manifest.join(SOURCE);
    let status = Command::new(hipcc)
        .arg(format!("--offload-arch={target}"))
        .args(["--genco", "--no-gpu-bundle-output", "-O3", "-std=c++17"])
        .arg("-I")
        .arg(manifest.join("device"))
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output();
    match status {
        Ok(o) if o.status.success() && out.is_file() => {}
        Ok(o) => {
            eprintln!("{}", String::from_utf8_lossy(&o.stderr));
            eprintln!(
                "error: {} --offload-arch={target} failed on {} ({})",
                hipcc.display(),
                src.display(),
                o.status
            );
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("error: cannot run {}: {e}", hipcc.display());
            std::process::exit(1);
        }
    }
}
