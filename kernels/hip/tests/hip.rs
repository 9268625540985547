//! The HIP crate's trials (libtest-mimic, so that what cannot run here is reported
//! ignored with its reason):
//!
//! - `code_object <target>`: for each configured offload target, the embedded code
//!   object is an AMDGPU ELF for that ISA holding every kernel the host resolves.
//!   Without the `hip` feature or hipcc: ignored with the build note (a failure when
//!   `TIERCHECK_REQUIRE_HIP=1`, as in CI).
//! - `contraction <target>`: the multiply-adds the compiler fused in that code object,
//!   read from its disassembly (`llvm-objdump`), agree with the twin's
//!   [`tiercheck_core::gpu::Contraction`] for the lane that models the target (gfx1030
//!   for `hip-wave32`, gfx90a for `hip-wave64`).
//! - `tree <target> <type>`: the project's MMVQ kernel for the lane's warp size and
//!   warps per block has the recipe's loop step and reduction as expression trees, the
//!   same trees the `ggml` trials hold ggml's own kernels to (`tests/common`).
//! - `device <lane> <type> k=<k> rows=<n>`: the device's q8_1 activations and MMVQ
//!   outputs equal the portable twin's, bit for bit. Ignored with the runtime's reason
//!   where there is no device (`hipErrorNoDevice`), unless `TIERCHECK_REQUIRE_DEVICE`
//!   names the lane.

use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Arguments, Completion, Trial};
use tiercheck_gpu_testkit::isa;

mod common;
use tiercheck_core::arch::hip::{HipTwin, HIP_WAVE32_TWIN, HIP_WAVE64_TWIN};
use tiercheck_core::gpu::{Combine, Contraction, MmvqConfig, WAVE32, WAVE64};
use tiercheck_core::{GgmlType, Kernels, WeightMatrix};
use tiercheck_gpu_testkit::inputs::Rng;
use tiercheck_gpu_testkit::inspect;
use tiercheck_hip::{
    code_object, kernel_names, mmvq_kernel, wave_size, BUILD_NOTE, CODE_OBJECTS, CONFIGURED_TARGETS,
};

fn require_hip() -> bool {
    std::env::var("TIERCHECK_REQUIRE_HIP").is_ok_and(|v| v == "1")
}

/// `TIERCHECK_REQUIRE_DEVICE=hip-wave32,hip-wave64`: lanes whose device trials must
/// run (`ci/gpu-check` sets it on a GPU machine); an ignore is then a failure.
fn required_on_device(lane: &str) -> bool {
    std::env::var("TIERCHECK_REQUIRE_DEVICE")
        .is_ok_and(|v| v.split(',').map(str::trim).any(|l| l == lane))
}

/// A trial that is ignored with `why`, or fails with it when the build is required to
/// have device code.
fn missing(name: String, why: &str) -> Trial {
    let why = why.to_string();
    if require_hip() {
        Trial::test(name, move || Err(format!("TIERCHECK_REQUIRE_HIP=1 but {why}").into()))
    } else {
        ignored(name, why)
    }
}

fn ignored(name: String, why: String) -> Trial {
    Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
}

// ---------------------------------------------------------------------------------
// Code objects.

fn code_object_trial(target: &'static str) -> Trial {
    let name = format!("code_object {target}");
    if CODE_OBJECTS.is_empty() {
        return missing(name, BUILD_NOTE);
    }
    Trial::test(name, move || {
        let co = code_object(target).ok_or("configured but not embedded")?;
        let info = inspect(co.bytes).map_err(|e| format!("{target}: {e}"))?;
        if let Some(mach) = tiercheck_gpu_testkit::mach_of(target) {
            if info.mach != mach {
                return Err(
                    format!("{target}: e_flags mach {:#x}, expected {mach:#x}", info.mach).into()
                );
            }
        }
        let wave = wave_size(target).ok_or("not a gfx target")?;
        let absent: Vec<String> =
            kernel_names(wave).into_iter().filter(|k| !info.has_kernel(k)).collect();
        if !absent.is_empty() {
            return Err(format!("{target}: kernels missing: {}", absent.join(", ")).into());
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------
// Contraction from the disassembly.

fn find_objdump() -> Option<PathBuf> {
    tiercheck_gpu_testkit::isa::find_llvm_tool("llvm-objdump")
}

/// The f32 arithmetic of one kernel, in program order (one mnemonic per instruction).
fn float_ops(listing: &str, kernel: &str) -> Result<Vec<String>, String> {
    let head = format!("<{kernel}>:");
    let start = listing.find(&head).ok_or_else(|| format!("{kernel} not in the disassembly"))?;
    let body = &listing[start + head.len()..];
    let end = body.find("s_endpgm").ok_or_else(|| format!("{kernel}: no s_endpgm"))?;
    Ok(body[..end]
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|m| m.starts_with("v_") && m.contains("f32") && !m.contains("cvt"))
        .map(str::to_string)
        .collect())
}

fn is_fused(m: &str) -> bool {
    ["v_fma_f32", "v_fmac_f32", "v_fma_mix_f32", "v_pk_fma_f32", "v_fmaak_f32", "v_fmamk_f32"]
        .iter()
        .any(|p| m.starts_with(p))
}
fn is_mul(m: &str) -> bool {
    m.starts_with("v_mul_f32") || m.starts_with("v_pk_mul_f32")
}
fn is_sub(m: &str) -> bool {
    m.starts_with("v_sub_f32") || m.starts_with("v_subrev_f32")
}

/// What the disassembly says, in the twin's terms (the q4_K combine only as fused or
/// not: which of the two products was fused is not read here).
fn observed(listing: &str, cfg: &MmvqConfig) -> Result<(bool, bool, bool), String> {
    let kernel = |ty: GgmlType, s: &str| mmvq_kernel(s, cfg.warp_size, cfg.nwarps(ty));
    let q8 = float_ops(listing, &kernel(GgmlType::Q8_0, "q8_0"))?;
    let q6 = float_ops(listing, &kernel(GgmlType::Q6_K, "q6_K"))?;
    let q4 = float_ops(listing, &kernel(GgmlType::Q4_K, "q4_K"))?;
    // q8_0: (d_x * d_y) is one multiply; the product with sumi fused into tmp or not.
    let accumulate = q8.iter().any(|m| is_fused(m));
    // q6_K: with the two scale products and the final d * sumf all fused, no multiply
    // is left.
    let sums = q6.iter().filter(|m| is_mul(m)).count() == 0 && q6.iter().any(|m| is_fused(m));
    // q4_K: an unfused combine is two products and a subtraction.
    let combine_fused = !q4.iter().any(|m| is_sub(m));
    Ok((sums, combine_fused, accumulate))
}

/// The lane recipe that models `target` and the disassembler, or the trial `name` that
/// reports why a disassembly trial cannot run.
fn disassembly_setup(name: &str, target: &str) -> Result<(MmvqConfig, PathBuf), Trial> {
    let cfg = match target {
        "gfx1030" => WAVE32,
        "gfx90a" => WAVE64,
        _ => {
            let why = format!("no lane models {target}'s compiler output");
            return Err(ignored(name.to_string(), why));
        }
    };
    if code_object(target).is_none() {
        return Err(missing(name.to_string(), BUILD_NOTE));
    }
    match find_objdump() {
        Some(objdump) => Ok((cfg, objdump)),
        None => {
            Err(missing(name.to_string(), "llvm-objdump not found (set TIERCHECK_LLVM_OBJDUMP)"))
        }
    }
}

/// `llvm-objdump -d` of the embedded code object for `target`.
fn disassemble(objdump: &std::path::Path, target: &str) -> Result<String, String> {
    // One folder per call: trials run in parallel and each removes its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let co = code_object(target).ok_or("configured but not embedded")?;
    let dir =
        std::env::temp_dir().join(format!("tiercheck-hip-{}-{target}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(format!("{target}.co"));
    std::fs::write(&path, co.bytes).map_err(|e| e.to_string())?;
    let out = Command::new(objdump).arg("-d").arg(format!("--mcpu={target}")).arg(&path).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("{}: {e}", objdump.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} -d failed: {}",
            objdump.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `tree <target> <type>`: the project's own MMVQ kernel for the lane's warp size and
/// warps per block, read as expression trees ([`isa::amdgpu`]), has the recipe's loop
/// step (one to four chained `tmp += vec_dot(...)`) and the recipe's reduction: the
/// trees the `ggml` trials hold ggml's own kernels to (`tests/common`). So the device
/// code and ggml's code are held to one recipe, not merely to three fusion switches.
fn tree_trial(target: &'static str, ty: GgmlType, spelling: &'static str) -> Trial {
    let name = format!("tree {target} {}", ty.name());
    let (cfg, objdump) = match disassembly_setup(&name, target) {
        Ok(x) => x,
        Err(t) => return t,
    };
    Trial::test(name, move || {
        let listing = disassemble(&objdump, target)?;
        let kernel = mmvq_kernel(spelling, cfg.warp_size, cfg.nwarps(ty));
        let k = isa::amdgpu(&listing, &kernel)?;
        let mut bad = Vec::new();
        let steps: Vec<String> = (0..k.loops.len())
            .flat_map(|l| k.accumulators(l))
            .map(|acc| k.exprs.render(acc))
            .collect();
        if steps.is_empty() {
            bad.push("no loop carries a float accumulator".to_string());
        }
        for st in &steps {
            if !common::step_matches(st, ty, cfg.contraction) {
                let mut e = isa::Exprs::new();
                let acc = e.leaf("acc");
                let one = common::step(&mut e, ty, cfg.contraction, acc);
                bad.push(format!("loop step:\n    device {st}\n    recipe {}", e.render(one)));
            }
        }
        let out = k
            .stores
            .iter()
            .rev()
            .find(|s| s.op.starts_with("global_store_dword"))
            .ok_or("no global_store_dword")?;
        let got = k.exprs.render(out.value);
        let mut e = isa::Exprs::new();
        let r = common::reduction(&mut e, cfg.warp_size, cfg.nwarps(ty));
        let want = e.render(r);
        if got != want {
            bad.push(format!("reduction:\n    device {got}\n    recipe {want}"));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{target} {kernel} ({}):\n  {}", cfg.name, bad.join("\n  ")).into())
        }
    })
}

fn contraction_trial(target: &'static str) -> Trial {
    let name = format!("contraction {target}");
    let (cfg, objdump) = match disassembly_setup(&name, target) {
        Ok(x) => x,
        Err(t) => return t,
    };
    Trial::test(name, move || {
        let listing = disassemble(&objdump, target)?;
        let (sums, combine_fused, accumulate) = observed(&listing, &cfg)?;
        let c: Contraction = cfg.contraction;
        let want_combine_fused = c.combine != Combine::Unfused;
        let mut bad = Vec::new();
        if sums != c.vec_dot_sums {
            bad.push(format!("vec_dot sums fused: code object {sums}, twin {}", c.vec_dot_sums));
        }
        if combine_fused != want_combine_fused {
            bad.push(format!(
                "q4_K combine fused: code object {combine_fused}, twin {:?}",
                c.combine
            ));
        }
        if accumulate != c.accumulate {
            bad.push(format!("tmp += fused: code object {accumulate}, twin {}", c.accumulate));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{target} ({}): {}", cfg.name, bad.join("; ")).into())
        }
    })
}

// ---------------------------------------------------------------------------------
// Device == twin.

fn device_trial(cfg: MmvqConfig, ty: GgmlType, k: usize, rows: usize) -> Trial {
    let name = format!("device {} {} k={k} rows={rows}", cfg.name, ty.name());
    let hip_twin: &'static HipTwin =
        if cfg.warp_size == 32 { &HIP_WAVE32_TWIN } else { &HIP_WAVE64_TWIN };
    let twin: &'static dyn Kernels = hip_twin;
    Trial::ignorable_test(name, move || {
        let dev = match tiercheck_hip::kernels(hip_twin) {
            Ok(d) => d,
            Err(why) if required_on_device(cfg.name) => {
                return Err(format!("TIERCHECK_REQUIRE_DEVICE names {}: {why}", cfg.name).into())
            }
            Err(why) => return Ok(Completion::ignored_with(why)),
        };
        let mut rng = Rng::for_case(k, rows);
        let w = rng.weights(ty, rows, k)?;
        let wm = WeightMatrix::new(ty, rows, k, &w)?;
        for trial in 0..3 {
            let x = rng.activations(k);
            let a_dev = dev.quantize_act(ty, &x)?;
            let a_twin = twin.quantize_act(ty, &x)?;
            if let Some(i) = (0..a_dev.len()).find(|&i| a_dev[i] != a_twin[i]) {
                return Err(format!(
                    "activation set {trial}: q8_1 bytes differ first at byte {i} (block {}): \
                     device {:#04x}, twin {:#04x}",
                    i / 36,
                    a_dev[i],
                    a_twin[i]
                )
                .into());
            }
            let y_dev = dev.matmul(&wm, &x, 1)?;
            let y_twin = twin.matmul(&wm, &x, 1)?;
            for j in 0..rows {
                if y_dev[j].to_bits() != y_twin[j].to_bits() {
                    return Err(format!(
                        "activation set {trial}, row {j}: device {:e} ({:#010x}), twin {:e} \
                         ({:#010x})",
                        y_dev[j],
                        y_dev[j].to_bits(),
                        y_twin[j],
                        y_twin[j].to_bits()
                    )
                    .into());
                }
            }
            // vec_dot on one row goes through the same kernel with one block.
            let one = dev.vec_dot(ty, wm.row(0), &a_dev)?;
            if one.to_bits() != y_twin[0].to_bits() {
                return Err(format!("vec_dot row 0: device {one:e}, twin {:e}", y_twin[0]).into());
            }
        }
        Ok(Completion::Completed)
    })
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for &t in CONFIGURED_TARGETS {
        trials.push(code_object_trial(t));
        trials.push(contraction_trial(t));
        for (ty, spelling) in tiercheck_hip::TYPES {
            trials.push(tree_trial(t, ty, spelling));
        }
    }
    for cfg in [WAVE32, WAVE64] {
        for ty in tiercheck_core::gpu::MMVQ_TYPES {
            for (k, rows) in [(256, 1), (512, 7), (4352, 33), (5120, 3)] {
                trials.push(device_trial(cfg, ty, k, rows));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
