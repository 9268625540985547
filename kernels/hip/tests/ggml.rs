//! The hip lanes' recipes against **ggml's own** device code (libtest-mimic).
//!
//! `ci/ggml-gpu` compiles ggml's `ggml-cuda/mmvq.cu` and `ggml-cuda/quantize.cu` with
//! hipcc into AMDGPU code objects, one folder per offload target, and
//! `TIERCHECK_GGML_GPU` names the folder above them. For each target that a lane models
//! (gfx1030: `hip-wave32`; gfx90a: `hip-wave64`; gfx1151, RDNA3.5, built by Debian's
//! clang-19 and read with LLVM 19's `llvm-objdump`: `hip-wave32`; gfx1100, RDNA3.0, the
//! same way: RDNA's recipe with its own warp table, [`WAVE32_RDNA3_0`], no lane) the
//! trials disassemble ggml's kernels
//! (`llvm-objdump`), evaluate their float operations as trees
//! ([`tiercheck_gpu_testkit::isa`]) and compare them with the trees the lane's recipe
//! describes (its [`MmvqConfig`]: warp size, warps per block, [`Contraction`]):
//!
//! - `ggml <target> mmvq <type>`: for `mul_mat_vec_q<type, ncols_dst = 1>` (no fusion,
//!   not `small_k`): the block size in the kernel's metadata is `nwarps * warp_size`;
//!   the loop's accumulator is `tmp += vec_dot(...)` with exactly the recipe's roundings
//!   and fusions (which products are fused, into what); and the stored output is the
//!   recipe's reduction (the shared-memory partials of warps 1.. added in order, then the
//!   XOR butterfly with the recipe's offsets).
//!   Each kernel's descriptor (`<kernel>.kd`) must also keep f32 and f16 subnormals
//!   (`FLOAT_DENORM_MODE_32` = 3, `FLOAT_DENORM_MODE_16_64` = 3), as the recipes
//!   compute (q4_1 and q5_1 multiply their f16 scales in f16, `v_pk_mul_f16`).
//!   The types are the eleven the twin reproduces ([`tiercheck_core::gpu::MMVQ_TYPES`]:
//!   Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS).
//! - `ggml <target> quantize_q8_1`: the stored `ds` is `(f16(amax / 127), f16(sum))` with
//!   both 32-lane butterflies and a correctly rounded division, and the stored code reads
//!   `x / d` as a correctly rounded division.
//! - `ggml <target> recipes are told apart`: every other recipe (the 11 other
//!   [`Contraction`] variants, and the other lane's warp size and table) fails at least
//!   one of the comparisons above on that target: the check pins the recipe, it does not
//!   merely accept it.
//!
//!
//! The same for NVIDIA, from ggml's cubins built by nvcc (`sm_90`, `sm_80`) and read
//! from `cuobjdump -sass` (with the kernel's constant bank from `cuobjdump -elf`),
//! against [`CUDA`]: `ggml sm_XX mmvq <type>` (the launch bound from
//! `EIATTR_MAX_THREADS`, the loop steps, every loop's, the
//! reduction of four warps, and every f32 instruction flushing subnormals as
//! `-use_fast_math` asks; q4_1's and q5_1's f16 products are `HMUL2` / `HFMA2.MMA`
//! with a `-RZ` addend, without `.FTZ`), `ggml sm_XX quantize_q8_1` (`d = amax * RN(1/127)`, the
//! code from `x * rcp(d)`), and `ggml sm_XX recipes are told apart`.
//!
//! And for every target, ggml's GPU elementwise kernels against the lane's
//! [`GpuMath`] (`tiercheck_core::gpu::elem`), from `norm.cu` and `unary.cu`:
//! `ggml <target> rms_norm` (both block sizes of `rms_norm_f32<B, true>`: every loop
//! step a chain of `fma(x, x, acc)`, the shared store the 32-lane butterfly of that
//! sum, the stored output the recipe's tree, subnormal handling the recipe's),
//! `ggml <target> swiglu` (`unary_gated_op_kernel<op_silu, float>`'s stored tree and
//! subnormal handling), and `ggml <target> elementwise recipes are told apart` (of the
//! 16 switch combinations exactly the lane's matches both kernels); on NVIDIA also
//! `ggml <target> rope` (CUDA's `rope_neox`: the angle under `FMUL.RZ` by `1/(2 pi)`
//! holds the recipe's `__powf` form, both stores are the recipe's fused rotation, the
//! unfused one does not match). Subnormal handling
//! is SASS's `.FTZ` per instruction, or the AMDGPU kernel descriptor's f32 denormal
//! mode.
//!
//! On AMD, `ggml <target> rope executes`: HIP's `rope_neox` inlines the device
//! library's branching `powf`/`sinf`/`cosf`, so it is not read as trees but executed
//! ([`tiercheck_gpu_testkit::isa::exec`]) for 2,940 threads, each of whose two stores must equal
//! [`tiercheck_core::gpu::ocml::rope_pair_hip`] bit for bit; the other rotation forms
//! and the CPU's angles must each differ from ggml's outputs somewhere. And
//! `ggml <target> swiglu executes`: SwiGLU executed for 2,030 elements (the device
//! `expf`'s cut-offs, special values, random ones) against `gpu::elem::swiglu`.
//!
//! Without the folder (or without `llvm-objdump` / `cuobjdump`) the trials are ignored
//! with that reason; with `TIERCHECK_REQUIRE_HIP=1` (CI) they fail instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use libtest_mimic::{Arguments, Completion, Trial};
use tiercheck_core::elem::{ElemFlavour, RopeRotation};
use tiercheck_core::gpu::elem::{swiglu, Divide, Expf, GpuMath, RmsMean};
use tiercheck_core::gpu::{
    Combine, Contraction, MmvfAcc, MmvfConfig, MmvqConfig, CUDA, MMVF_AMPERE, MMVF_CDNA,
    MMVF_RDNA2, MMVF_RDNA3, WAVE32, WAVE32_RDNA3_0, WAVE64,
};
use tiercheck_core::GgmlType;
use tiercheck_gpu_testkit::isa::{self, Exprs, Id};

mod common;
use common::{butterfly, reduction, step, step_matches};

const TYPES: [GgmlType; 11] = tiercheck_core::gpu::MMVQ_TYPES;

fn require() -> bool {
    std::env::var("TIERCHECK_REQUIRE_HIP").is_ok_and(|v| v == "1")
}

/// The lane whose recipe models ggml's code for `target`.
fn lane_of(target: &str) -> Option<MmvqConfig> {
    match target {
        "gfx1030" | "gfx1151" => Some(WAVE32),
        "gfx1100" => Some(WAVE32_RDNA3_0),
        "gfx90a" => Some(WAVE64),
        _ => None,
    }
}

/// The LLVM tool that reads `target`'s code objects: LLVM 19's for gfx11 (older
/// releases do not know gfx1151; `TIERCHECK_LLVM19_OBJDUMP`, `TIERCHECK_LLVM19_READELF`
/// name it elsewhere), the HIP toolchain's otherwise.
fn amd_tool(name: &str, target: &str) -> Result<PathBuf, String> {
    if target.starts_with("gfx11") {
        let var = format!("TIERCHECK_LLVM19_{}", name.trim_start_matches("llvm-").to_uppercase());
        let p = std::env::var_os(&var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("/usr/lib/llvm-19/bin/{name}")));
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{} not found (Debian: apt-get install llvm-19; or set {var})",
                p.display()
            ))
        };
    }
    isa::find_llvm_tool(name).ok_or_else(|| {
        format!(
            "{name} not found (set TIERCHECK_LLVM_{})",
            name.trim_start_matches("llvm-").to_uppercase()
        )
    })
}

/// A target's disassembly and metadata notes, for both translation units.
struct Listings {
    mmvq: String,
    mmvq_notes: String,
    quantize: String,
    norm: String,
    unary: String,
    /// `llvm-objdump -D` of norm.co and unary.co (the kernel descriptors).
    softmax: String,
    norm_all: String,
    unary_all: String,
    softmax_all: String,
    /// The f32 and the f16/f64 denormal modes of each MMVQ kernel and of
    /// `quantize_q8_1`, from its descriptor (`None`: no descriptor found).
    denorm: Vec<(String, Option<(u32, u32)>)>,
}

/// `llvm-objdump <args> <file>` for `target`, with gfx11's memory instructions under
/// their earlier names ([`isa::gfx11_names`]).
fn disassembly(target: &str, args: &[&str], file: &Path) -> Result<String, String> {
    let objdump = amd_tool("llvm-objdump", target)?;
    let mcpu = format!("--mcpu={target}");
    let args: Vec<&str> = [&mcpu[..]].into_iter().chain(args.iter().copied()).collect();
    let out = tool_output(&objdump, &args, file)?;
    Ok(if target.starts_with("gfx11") { isa::gfx11_names(&out) } else { out })
}

fn tool_output(tool: &Path, args: &[&str], file: &Path) -> Result<String, String> {
    let out = Command::new(tool)
        .args(args)
        .arg(file)
        .output()
        .map_err(|e| format!("{}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} {}: {}",
            tool.display(),
            args.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn listings_of(dir: &Path, target: &str) -> Result<Listings, String> {
    let readelf = amd_tool("llvm-readelf", target)?;
    let mmvq = dir.join("mmvq.co");
    let quantize = dir.join("quantize.co");
    let (mmvq_listing, quantize_listing) =
        (disassembly(target, &["-d"], &mmvq)?, disassembly(target, &["-d"], &quantize)?);
    // Each kernel's descriptor, disassembled alone (`<kernel>.kd`).
    let mut denorm = Vec::new();
    let kernels = TYPES.iter().map(|&t| (&mmvq, &mmvq_listing, mmvq_prefix(t))).chain([(
        &quantize,
        &quantize_listing,
        "_ZL13quantize_q8_1".to_string(),
    )]);
    for (file, listing, prefix) in kernels {
        if let Some(name) = isa::find_kernel(listing, &prefix) {
            let only = format!("--disassemble-symbols={name}.kd");
            let kd = disassembly(target, &["-D", &only], file)?;
            let f32_mode = isa::amdgpu_denorm_mode_f32(&kd, &name);
            let f16_mode = isa::amdgpu_denorm_mode_f16_f64(&kd, &name);
            denorm.push((name.clone(), f32_mode.zip(f16_mode)));
        }
    }
    Ok(Listings {
        mmvq: mmvq_listing,
        mmvq_notes: tool_output(&readelf, &["--notes"], &mmvq)?,
        quantize: quantize_listing,
        denorm,
        norm: disassembly(target, &["-d"], &dir.join("norm.co"))?,
        unary: disassembly(target, &["-d"], &dir.join("unary.co"))?,
        norm_all: disassembly(target, &["-D"], &dir.join("norm.co"))?,
        unary_all: disassembly(target, &["-D"], &dir.join("unary.co"))?,
        softmax: disassembly(target, &["-d"], &dir.join("softmax.co"))?,
        softmax_all: disassembly(target, &["-D"], &dir.join("softmax.co"))?,
    })
}

// ---------------------------------------------------------------------------------
// The comparisons.

/// ggml's `mul_mat_vec_q<type, 1, false, false, false>`: mangled name prefix.
fn mmvq_prefix(ty: GgmlType) -> String {
    format!("_ZL13mul_mat_vec_qIL9ggml_type{}ELi1ELb0ELb0ELb0EE", ty.id())
}

/// What ggml's code object says about one MMVQ kernel.
struct Observed {
    block: u64,
    step: String,
    output: String,
    /// The kernel's f32 and f16/f64 denormal modes (3: subnormals kept, as the recipes
    /// compute; q4_1 and q5_1 round two products to f16).
    denorm: Option<(u32, u32)>,
}

/// The f32 denormal mode recorded for `kernel` in `l`.
fn denorm_of(l: &Listings, kernel: &str) -> Option<u32> {
    denorm_modes(l, kernel).map(|m| m.0)
}

/// The f32 and f16/f64 denormal modes recorded for `kernel` in `l`.
fn denorm_modes(l: &Listings, kernel: &str) -> Option<(u32, u32)> {
    l.denorm.iter().find(|(n, _)| n == kernel).and_then(|(_, m)| *m)
}

fn observe_mmvq(l: &Listings, ty: GgmlType) -> Result<Observed, String> {
    let name = isa::find_kernel(&l.mmvq, &mmvq_prefix(ty))
        .ok_or_else(|| format!("no {} kernel in ggml's mmvq code object", mmvq_prefix(ty)))?;
    let block = isa::amdgpu_metadata(&l.mmvq_notes, &name, ".max_flat_workgroup_size")
        .ok_or_else(|| format!("{name}: no .max_flat_workgroup_size in the metadata"))?;
    let k = isa::amdgpu(&l.mmvq, &name)?;
    if k.loops.len() != 1 {
        return Err(format!(
            "{name}: {} loops, expected the one over the row's blocks",
            k.loops.len()
        ));
    }
    let acc = k.accumulators(0);
    let [acc] = acc[..] else {
        return Err(format!("{name}: {} float accumulators in the loop, expected 1", acc.len()));
    };
    let out = k
        .stores
        .iter()
        .rev()
        .find(|s| s.op.starts_with("global_store_dword"))
        .ok_or_else(|| format!("{name}: no global_store_dword"))?;
    Ok(Observed {
        block,
        step: k.exprs.render(acc),
        output: k.exprs.render(out.value),
        denorm: denorm_modes(l, &name),
    })
}

/// The differences between ggml's kernel and the recipe `cfg` (empty: they agree).
fn compare_mmvq(obs: &Observed, cfg: &MmvqConfig, ty: GgmlType) -> Vec<String> {
    let mut bad = Vec::new();
    let nwarps = cfg.nwarps(ty);
    let want_block = (nwarps * cfg.warp_size) as u64;
    if obs.block != want_block {
        bad.push(format!(
            "block size: ggml {} threads, recipe {nwarps} warps x {} = {want_block}",
            obs.block, cfg.warp_size
        ));
    }
    if obs.denorm != Some((3, 3)) {
        bad.push(format!(
            "(f32, f16/f64) denormal modes {:?}, the recipe keeps subnormals (3, 3)",
            obs.denorm
        ));
    }
    // The loop body may be unrolled: k steps per iteration.
    let mut e = Exprs::new();
    let acc = e.leaf("acc");
    let mut v = acc;
    let mut matched = false;
    let mut first = String::new();
    for k in 1..=4 {
        v = step(&mut e, ty, cfg.contraction, v);
        let want = e.render(v);
        if k == 1 {
            first = want.clone();
        }
        if want == obs.step {
            matched = true;
            break;
        }
    }
    if !matched {
        bad.push(format!("loop step:\n    ggml   {}\n    recipe {first}", obs.step));
    }
    let mut e = Exprs::new();
    let r = reduction(&mut e, cfg.warp_size, nwarps);
    let want = e.render(r);
    if want != obs.output {
        bad.push(format!("reduction:\n    ggml   {}\n    recipe {want}", obs.output));
    }
    bad
}

/// What the recipe says `quantize_q8_1` stores (width 32 on every warp size): the `ds`
/// dword and the division `x / d` that the code rounds.
fn quantize_recipe(e: &mut Exprs) -> (Id, Id) {
    let x = e.leaf("f");
    let ax = e.abs(x);
    let amax = butterfly(e, ax, 32, true);
    let sum = butterfly(e, x, 32, false);
    let k = e.constant(127.0);
    let d = e.div(amax, k);
    let (hd, hs) = (e.f2h(d), e.f2h(sum));
    let ds = e.pack(hd, hs);
    let q = e.div(x, d);
    (ds, q)
}

fn check_quantize(l: &Listings) -> Result<(), String> {
    let name = isa::find_kernel(&l.quantize, "_ZL13quantize_q8_1")
        .ok_or("no quantize_q8_1 kernel in ggml's quantize code object")?;
    let k = isa::amdgpu(&l.quantize, &name)?;
    let mut e = Exprs::new();
    let (ds, q) = quantize_recipe(&mut e);
    let (want_ds, want_q) = (e.render(ds), e.render(q));
    if denorm_of(l, &name) != Some(3) {
        return Err(format!(
            "{name}: f32 denormal mode {:?}, the twin keeps subnormals (3)",
            denorm_of(l, &name)
        ));
    }
    let dword = k
        .stores
        .iter()
        .find(|s| s.op == "global_store_dword")
        .ok_or_else(|| format!("{name}: no global_store_dword (ds)"))?;
    let got_ds = k.exprs.render(dword.value);
    let mut bad = Vec::new();
    if got_ds != want_ds {
        bad.push(format!("ds:\n    ggml   {got_ds}\n    recipe {want_ds}"));
    }
    let byte = k
        .stores
        .iter()
        .find(|s| s.op == "global_store_byte")
        .ok_or_else(|| format!("{name}: no global_store_byte (qs)"))?;
    if !k.exprs.subtree_forms(byte.value).contains(&want_q) {
        bad.push(format!("code: no {want_q} in the stored value"));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}:\n  {}", bad.join("\n  ")))
    }
}

/// Every recipe a GPU lane could have: the 12 [`Contraction`] variants on each of the
/// three warp-size-and-table configurations (RDNA2, CDNA, NVIDIA generic).
fn all_recipes() -> Vec<MmvqConfig> {
    let mut out = Vec::new();
    for base in [WAVE32, WAVE32_RDNA3_0, WAVE64, CUDA] {
        for vec_dot_sums in [false, true] {
            for combine in [Combine::Unfused, Combine::FuseFirst, Combine::FuseSecond] {
                for accumulate in [false, true] {
                    out.push(MmvqConfig {
                        contraction: Contraction { vec_dot_sums, combine, accumulate },
                        ..base
                    });
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------
// Trials.

fn ggml_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("TIERCHECK_GGML_GPU").ok_or(
        "TIERCHECK_GGML_GPU is not set (ci/ggml-gpu builds ggml's GPU code objects and prints \
         the folder)",
    )?;
    Ok(PathBuf::from(dir))
}

fn unavailable(name: String, why: String) -> Trial {
    if require() {
        Trial::test(name, move || Err(format!("TIERCHECK_REQUIRE_HIP=1 but {why}").into()))
    } else {
        Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
    }
}

/// What the trials of one vendor need: where its files are, how to read them, and how
/// to compare them with a recipe.
trait Vendor: 'static {
    /// A target's listings, read once for all its trials.
    type Listing: Send + Sync + 'static;
    /// What one MMVQ kernel's listing says.
    type Observed;
    /// Why the trials cannot run here (a file or a tool missing), if they cannot.
    fn missing(dir: &Path, target: &str) -> Option<String>;
    fn load(dir: &Path, target: &str) -> Result<Self::Listing, String>;
    fn observe(l: &Self::Listing, ty: GgmlType) -> Result<Self::Observed, String>;
    /// The differences from the recipe `cfg` (empty: they agree).
    fn compare(o: &Self::Observed, cfg: &MmvqConfig, ty: GgmlType) -> Vec<String>;
    fn check_quantize(l: &Self::Listing) -> Result<(), String>;
    /// How the vendor's listings name what the elementwise recipes use.
    const VOCAB: Vocab;
    /// What ggml's RMSNorm and SwiGLU kernels say.
    fn observe_elem(l: &Self::Listing) -> Result<ElemObserved, String>;
    /// Every MMVF instance of [`mmvf_instances`] in ggml's `mmvf.cu` build for `target`.
    fn observe_mmvf(
        dir: &Path,
        target: &str,
        cfg: &MmvfConfig,
    ) -> Result<Vec<MmvfObserved>, String>;
    /// How the listing prints a packed FP16 fused multiply-add.
    const PK_FMA: &'static str;
}

struct Amd;

impl Vendor for Amd {
    type Listing = Listings;
    type Observed = Observed;
    fn missing(dir: &Path, target: &str) -> Option<String> {
        for f in
            ["mmvq.co", "quantize.co", "norm.co", "unary.co", "softmax.co", "mmvf.co", "rope.co"]
        {
            let p = dir.join(target).join(f);
            if !p.is_file() {
                return Some(format!("{} not found (run ci/ggml-gpu)", p.display()));
            }
        }
        amd_tool("llvm-objdump", target).and(amd_tool("llvm-readelf", target)).err()
    }
    fn load(dir: &Path, target: &str) -> Result<Listings, String> {
        listings_of(&dir.join(target), target)
    }
    fn observe(l: &Listings, ty: GgmlType) -> Result<Observed, String> {
        observe_mmvq(l, ty)
    }
    fn compare(o: &Observed, cfg: &MmvqConfig, ty: GgmlType) -> Vec<String> {
        compare_mmvq(o, cfg, ty)
    }
    fn check_quantize(l: &Listings) -> Result<(), String> {
        check_quantize(l)
    }
    const VOCAB: Vocab =
        Vocab { rsq: "rsq_f32", rcp: "rcp_f32", ex2: "exp_f32", eps: "arg0", rsq_scaled: true };
    fn observe_elem(l: &Listings) -> Result<ElemObserved, String> {
        let norm =
            observe_norms("_ZL12rms_norm_f32", ["ds_write_b32", "global_store_dword"], |p| {
                let name = isa::find_kernel(&l.norm, p)?;
                Some(isa::amdgpu(&l.norm, &name).map(|k| (amd_ftz(&l.norm_all, &name), name, k)))
            })?;
        let prefix = "_ZL21unary_gated_op_kernelIXadL_ZL7op_silufEEfE";
        let name = isa::find_kernel(&l.unary, prefix)
            .ok_or_else(|| format!("no {prefix} kernel in ggml's unary code object"))?;
        let k = isa::amdgpu(&l.unary, &name)?;
        let silu = observe_silu(&name, &k, "global_store_dword", amd_ftz(&l.unary_all, &name))?;
        // `ds_write_b32`, and `ds_write2st64_b32` for two cached values at once.
        let soft_max =
            observe_soft_maxes("_ZL12soft_max_f32", ["ds_write", "global_store_dword"], |p| {
                let name = isa::find_kernel(&l.softmax, p)?;
                Some(
                    isa::amdgpu(&l.softmax, &name)
                        .map(|k| (amd_ftz(&l.softmax_all, &name), name, k)),
                )
            })?;
        Ok(ElemObserved { norm, silu, rope: None, soft_max })
    }
    fn observe_mmvf(
        dir: &Path,
        target: &str,
        cfg: &MmvfConfig,
    ) -> Result<Vec<MmvfObserved>, String> {
        let file = dir.join(target).join("mmvf.co");
        let listing = disassembly(target, &["-d"], &file)?;
        let mut out = Vec::new();
        for inst in mmvf_instances(cfg) {
            let prefix = inst.prefix("_ZL");
            let name = isa::find_kernel(&listing, &prefix)
                .ok_or_else(|| format!("no {prefix} kernel in ggml's mmvf code object"))?;
            let only = format!("--disassemble-symbols={name}.kd");
            let kd = disassembly(target, &["-D", &only], &file)?;
            let k = isa::amdgpu(&listing, &name)?;
            out.push(observe_mmvf(
                inst,
                &k,
                ["ds_write", "global_store_dword"],
                amd_ftz(&kd, &name),
            ));
        }
        Ok(out)
    }
    const PK_FMA: &'static str = "pk_fma_f16";
}

/// The folder of ggml's GPU builds, or why a target's trials cannot run here.
fn target_dir<V: Vendor>(target: &str) -> Result<PathBuf, String> {
    let dir = ggml_dir()?;
    V::missing(&dir, target).map_or(Ok(dir), Err)
}

/// A target's listings, read on first use and kept for its other trials.
fn load_once<'a, V: Vendor>(
    l: &'a OnceLock<Result<V::Listing, String>>,
    dir: &Path,
    target: &str,
) -> Result<&'a V::Listing, String> {
    l.get_or_init(|| V::load(dir, target)).as_ref().map_err(|e| e.clone())
}

/// The five trials of one target (three MMVQ types, the quantizer, the recipes told
/// apart), against the lane recipe `cfg`.
fn target_trials<V: Vendor>(target: &'static str, cfg: MmvqConfig) -> Vec<Trial> {
    let names: Vec<String> = TYPES
        .iter()
        .map(|t| format!("ggml {target} mmvq {}", t.name()))
        .chain([
            format!("ggml {target} quantize_q8_1"),
            format!("ggml {target} recipes are told apart"),
        ])
        .collect();
    let dir = match target_dir::<V>(target) {
        Ok(dir) => dir,
        Err(why) => return names.into_iter().map(|n| unavailable(n, why.clone())).collect(),
    };
    let shared: Arc<OnceLock<Result<V::Listing, String>>> = Arc::new(OnceLock::new());
    let mut out = Vec::new();
    for ty in TYPES {
        let (l, dir) = (shared.clone(), dir.clone());
        out.push(Trial::test(format!("ggml {target} mmvq {}", ty.name()), move || {
            let obs = V::observe(load_once::<V>(&l, &dir, target)?, ty)?;
            let bad = V::compare(&obs, &cfg, ty);
            if bad.is_empty() {
                Ok(())
            } else {
                Err(format!("{target} ({}), {}:\n  {}", cfg.name, ty.name(), bad.join("\n  "))
                    .into())
            }
        }));
    }
    let (l, d) = (shared.clone(), dir.clone());
    out.push(Trial::test(format!("ggml {target} quantize_q8_1"), move || {
        V::check_quantize(load_once::<V>(&l, &d, target)?)
            .map_err(|e| format!("{target}: {e}").into())
    }));
    out.push(Trial::test(format!("ggml {target} recipes are told apart"), move || {
        let l = load_once::<V>(&shared, &dir, target)?;
        let obs: Vec<(GgmlType, V::Observed)> =
            TYPES.iter().map(|&t| V::observe(l, t).map(|o| (t, o))).collect::<Result<_, _>>()?;
        let accepted: Vec<MmvqConfig> = all_recipes()
            .into_iter()
            .filter(|r| obs.iter().all(|(t, o)| V::compare(o, r, *t).is_empty()))
            .collect();
        match accepted[..] {
            [r] if r == cfg => Ok(()),
            _ => Err(format!(
                "{target}: ggml's code matches {} recipes, expected exactly {}'s: {accepted:?}",
                accepted.len(),
                cfg.name
            )
            .into()),
        }
    }));
    out
}

// ---------------------------------------------------------------------------------
// NVIDIA: ggml's cubins from nvcc, read from `cuobjdump -sass`.

/// ggml's CUDA kernels are `static` but mangled `_Z` (no `L`) by nvcc.
fn cuda_prefix(ty: GgmlType) -> String {
    format!("_Z13mul_mat_vec_qIL9ggml_type{}ELi1ELb0ELb0ELb0EE", ty.id())
}

fn cuobjdump(dir: &Path) -> Result<(PathBuf, Option<PathBuf>), String> {
    if let Some(p) = std::env::var_os("TIERCHECK_CUOBJDUMP") {
        return Ok((PathBuf::from(p), None));
    }
    let bin = dir.join("cuda-bin");
    let p = bin.join("cuobjdump");
    if p.is_file() {
        // cuobjdump -sass runs nvdisasm from the same folder.
        return Ok((p, Some(bin)));
    }
    Err(format!("cuobjdump not found ({} missing; set TIERCHECK_CUOBJDUMP)", p.display()))
}

struct Sass {
    mmvq: String,
    mmvq_elf: String,
    quantize: String,
    quantize_elf: String,
    norm: String,
    norm_elf: String,
    unary: String,
    unary_elf: String,
    rope: String,
    rope_elf: String,
    softmax: String,
    softmax_elf: String,
}

/// `cuobjdump <what> <dir>/<arch>/<file>`.
fn sass_run(dir: &Path, arch: &str, what: &str, file: &str) -> Result<String, String> {
    let (tool, bin) = cuobjdump(dir)?;
    let path = dir.join(arch).join(file);
    let mut cmd = Command::new(&tool);
    cmd.arg(what).arg(&path);
    if let Some(bin) = &bin {
        let old = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![bin.clone()];
        paths.extend(std::env::split_paths(&old));
        cmd.env("PATH", std::env::join_paths(paths).map_err(|e| e.to_string())?);
    }
    let out = cmd.output().map_err(|e| format!("{}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {what} {}: {}",
            tool.display(),
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sass_of(dir: &Path, arch: &str) -> Result<Sass, String> {
    let run = |what: &str, file: &str| sass_run(dir, arch, what, file);
    Ok(Sass {
        mmvq: run("-sass", "mmvq.cubin")?,
        mmvq_elf: run("-elf", "mmvq.cubin")?,
        quantize: run("-sass", "quantize.cubin")?,
        quantize_elf: run("-elf", "quantize.cubin")?,
        norm: run("-sass", "norm.cubin")?,
        norm_elf: run("-elf", "norm.cubin")?,
        unary: run("-sass", "unary.cubin")?,
        unary_elf: run("-elf", "unary.cubin")?,
        rope: run("-sass", "rope.cubin")?,
        rope_elf: run("-elf", "rope.cubin")?,
        softmax: run("-sass", "softmax.cubin")?,
        softmax_elf: run("-elf", "softmax.cubin")?,
    })
}

/// What ggml's cubin says about one MMVQ kernel: every loop's accumulator step, the
/// stored output, and the `.FTZ` count.
struct ObservedCuda {
    block: u64,
    steps: Vec<String>,
    output: String,
    ftz: (usize, usize),
}

fn observe_cuda(s: &Sass, ty: GgmlType) -> Result<ObservedCuda, String> {
    let name = isa::find_sass_kernel(&s.mmvq, &cuda_prefix(ty))
        .ok_or_else(|| format!("no {} kernel in ggml's mmvq cubin", cuda_prefix(ty)))?;
    let block = isa::max_threads(&s.mmvq_elf, &name)
        .ok_or_else(|| format!("{name}: no EIATTR_MAX_THREADS in the cubin"))?;
    let k = isa::sass(&s.mmvq, &name, &isa::constant_bank(&s.mmvq_elf, &name, 2))?;
    let mut steps = Vec::new();
    for l in 0..k.loops.len() {
        match k.accumulators(l)[..] {
            [] => {}
            [acc] => steps.push(k.exprs.render(acc)),
            ref more => {
                return Err(format!("{name}: loop {l} carries {} float accumulators", more.len()))
            }
        }
    }
    if steps.is_empty() {
        return Err(format!("{name}: no loop carries a float accumulator"));
    }
    let out = k
        .stores
        .iter()
        .rev()
        .find(|st| st.op == "STG.E")
        .ok_or_else(|| format!("{name}: no STG.E"))?;
    Ok(ObservedCuda { block, steps, output: k.exprs.render(out.value), ftz: k.ftz })
}

fn compare_cuda(obs: &ObservedCuda, cfg: &MmvqConfig, ty: GgmlType) -> Vec<String> {
    let mut bad = Vec::new();
    let want_block = (cfg.nwarps(ty) * cfg.warp_size) as u64;
    if obs.block != want_block {
        bad.push(format!(
            "block size: ggml {} threads (launch bound), recipe {} warps x {} = {want_block}",
            obs.block,
            cfg.nwarps(ty),
            cfg.warp_size
        ));
    }
    for (l, st) in obs.steps.iter().enumerate() {
        if !step_matches(st, ty, cfg.contraction) {
            let mut e = Exprs::new();
            let acc = e.leaf("acc");
            let one = step(&mut e, ty, cfg.contraction, acc);
            bad.push(format!("loop {l} step:\n    ggml   {st}\n    recipe {}", e.render(one)));
        }
    }
    let mut e = Exprs::new();
    let r = reduction(&mut e, cfg.warp_size, cfg.nwarps(ty));
    let want = e.render(r);
    if want != obs.output {
        bad.push(format!("reduction:\n    ggml   {}\n    recipe {want}", obs.output));
    }
    if obs.ftz.0 != obs.ftz.1 {
        bad.push(format!(
            "only {} of {} float instructions flush subnormals (-use_fast_math)",
            obs.ftz.0, obs.ftz.1
        ));
    }
    bad
}

/// ggml's CUDA `quantize_q8_1` under `-use_fast_math`: `d = amax * RN(1/127)` (ptxas
/// folds the approximate division by a constant into a product), and the code reads
/// `x * rcp(d)` (the hardware reciprocal, `MUFU.RCP`).
fn check_quantize_cuda(s: &Sass) -> Result<(), String> {
    let name = isa::find_sass_kernel(&s.quantize, "_Z13quantize_q8_1")
        .ok_or("no quantize_q8_1 kernel in ggml's quantize cubin")?;
    let k = isa::sass(&s.quantize, &name, &isa::constant_bank(&s.quantize_elf, &name, 2))?;
    let mut e = Exprs::new();
    let x = e.leaf("f");
    let ax = e.abs(x);
    let amax = butterfly(&mut e, ax, 32, true);
    let sum = butterfly(&mut e, x, 32, false);
    let inv = e.constant(1.0 / 127.0);
    let d = e.mul(amax, inv);
    let (hd, hs) = (e.f2h(d), e.f2h(sum));
    let ds = e.pack(hd, hs);
    let want_ds = e.render(ds);
    let want_q = format!("mul(?mufu.rcp({}), f)", e.render(d));
    let mut bad = Vec::new();
    let dword = k.stores.iter().rev().find(|st| st.op == "STG.E").ok_or("no STG.E (ds)")?;
    let got_ds = k.exprs.render(dword.value);
    if got_ds != want_ds {
        bad.push(format!("ds:\n    ggml   {got_ds}\n    recipe {want_ds}"));
    }
    let byte = k.stores.iter().find(|st| st.op == "STG.E.U8").ok_or("no STG.E.U8 (qs)")?;
    if !k.exprs.subtree_forms(byte.value).contains(&want_q) {
        bad.push(format!("code: no {want_q} in the stored value"));
    }
    if k.ftz.0 != k.ftz.1 {
        bad.push(format!("only {} of {} float instructions flush subnormals", k.ftz.0, k.ftz.1));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}:\n  {}", bad.join("\n  ")))
    }
}

struct Nvidia;

impl Vendor for Nvidia {
    type Listing = Sass;
    type Observed = ObservedCuda;
    fn missing(dir: &Path, arch: &str) -> Option<String> {
        for f in [
            "mmvq.cubin",
            "quantize.cubin",
            "norm.cubin",
            "unary.cubin",
            "rope.cubin",
            "softmax.cubin",
            "mmvf.cubin",
        ] {
            let p = dir.join(arch).join(f);
            if !p.is_file() {
                return Some(format!("{} not found (run ci/ggml-gpu)", p.display()));
            }
        }
        cuobjdump(dir).err()
    }
    fn load(dir: &Path, arch: &str) -> Result<Sass, String> {
        sass_of(dir, arch)
    }
    fn observe(s: &Sass, ty: GgmlType) -> Result<ObservedCuda, String> {
        observe_cuda(s, ty)
    }
    fn compare(o: &ObservedCuda, cfg: &MmvqConfig, ty: GgmlType) -> Vec<String> {
        compare_cuda(o, cfg, ty)
    }
    fn check_quantize(s: &Sass) -> Result<(), String> {
        check_quantize_cuda(s)
    }
    const VOCAB: Vocab = Vocab {
        rsq: "mufu.rsq",
        rcp: "mufu.rcp",
        ex2: "mufu.ex2",
        eps: "param",
        rsq_scaled: false,
    };
    fn observe_elem(s: &Sass) -> Result<ElemObserved, String> {
        let norm = observe_norms("_Z12rms_norm_f32", ["STS", "STG.E"], |p| {
            let name = isa::find_sass_kernel(&s.norm, p)?;
            let bank2 = isa::constant_bank(&s.norm_elf, &name, 2);
            Some(isa::sass(&s.norm, &name, &bank2).map(|k| (sass_ftz(k.ftz), name, k)))
        })?;
        // nvcc names the static `op_silu` with a per-file hash: `_ZN<..>op_siluEf`.
        let name = sass_kernels(&s.unary)
            .find(|n| {
                n.starts_with("_Z21unary_gated_op_kernelIXadL_ZN") && n.contains("op_siluEfEEfEv")
            })
            .ok_or("no unary_gated_op_kernel<op_silu, float> in ggml's unary cubin")?
            .to_string();
        let k = isa::sass(&s.unary, &name, &isa::constant_bank(&s.unary_elf, &name, 2))?;
        let silu = observe_silu(&name, &k, "STG.E", sass_ftz(k.ftz))?;
        let prefix = "_Z9rope_neoxILb1ELb0EffE";
        let name = isa::find_sass_kernel(&s.rope, prefix)
            .ok_or_else(|| format!("no {prefix} kernel in ggml's rope cubin"))?;
        let k = isa::sass(&s.rope, &name, &isa::constant_bank(&s.rope_elf, &name, 2))?;
        let rope = Some(observe_rope(&name, &k)?);
        let soft_max = observe_soft_maxes("_Z12soft_max_f32", ["STS", "STG.E"], |p| {
            let name = isa::find_sass_kernel(&s.softmax, p)?;
            let bank2 = isa::constant_bank(&s.softmax_elf, &name, 2);
            Some(isa::sass(&s.softmax, &name, &bank2).map(|k| (sass_ftz(k.ftz), name, k)))
        })?;
        Ok(ElemObserved { norm, silu, rope, soft_max })
    }
    fn observe_mmvf(dir: &Path, arch: &str, cfg: &MmvfConfig) -> Result<Vec<MmvfObserved>, String> {
        let s = sass_run(dir, arch, "-sass", "mmvf.cubin")?;
        let elf = sass_run(dir, arch, "-elf", "mmvf.cubin")?;
        let mut out = Vec::new();
        for inst in mmvf_instances(cfg) {
            let prefix = inst.prefix("_Z");
            let name = isa::find_sass_kernel(&s, &prefix)
                .ok_or_else(|| format!("no {prefix} kernel in ggml's mmvf cubin"))?;
            let k = isa::sass(&s, &name, &isa::constant_bank(&elf, &name, 2))?;
            out.push(observe_mmvf(inst, &k, ["STS", "STG.E"], sass_ftz(k.ftz)));
        }
        Ok(out)
    }
    const PK_FMA: &'static str = "hfma2";
}

// ---------------------------------------------------------------------------------
// Elementwise: ggml's GPU RMSNorm and SwiGLU against `tiercheck_core::gpu::elem`.

/// Both block sizes ggml instantiates `rms_norm_f32<B, do_multiply = true>` with.
const RMS_BLOCKS: [usize; 2] = [256, 1024];

/// How one vendor's listing prints what the elementwise recipes use.
struct Vocab {
    /// The hardware reciprocal square root.
    rsq: &'static str,
    /// The hardware reciprocal.
    rcp: &'static str,
    /// The hardware `2^x`.
    ex2: &'static str,
    /// How the kernel argument `eps` prints: `sym:arg0` (AMDGPU, the first dword of its
    /// scalar load of the arguments), `sym:param` (SASS, constant bank 0).
    eps: &'static str,
    /// Whether the reciprocal square root comes with the exact power-of-two scaling of
    /// HIP's `rsqrtf` (`x * sel(1, 2^100)` in, `* sel(1, 2^50)` out).
    rsq_scaled: bool,
}

/// Whether a kernel flushes f32 subnormals: AMDGPU sets it per kernel
/// (`FLOAT_DENORM_MODE_32` in the descriptor: 0 flushes, 3 keeps; `None` for a mixed
/// mode or none found), SASS per instruction (`.FTZ` on every float instruction, on
/// none, or `None` for a mix).
fn amd_ftz(all: &str, kernel: &str) -> Option<bool> {
    match isa::amdgpu_denorm_mode_f32(all, kernel)? {
        0 => Some(true),
        3 => Some(false),
        _ => None,
    }
}

fn sass_ftz((flushing, all): (usize, usize)) -> Option<bool> {
    if all > 0 && flushing == all {
        Some(true)
    } else if flushing == 0 {
        Some(false)
    } else {
        None
    }
}

/// What ggml's elementwise kernels say: per `rms_norm_f32` block size its loop steps,
/// the per-warp partial stored to shared memory, the stored output; SwiGLU's output.
struct ElemObserved {
    norm: Vec<NormObserved>,
    silu: SiluObserved,
    /// CUDA's `rope_neox` (HIP's is executed instead: `ggml <target> rope executes`).
    rope: Option<RopeObserved>,
    /// Every `soft_max_f32<true, ncols, block, float>` of [`SOFT_MAX_COLS`].
    soft_max: Vec<SoftMaxObserved>,
}

/// The row lengths whose `soft_max_f32` instances are checked: llama.cpp pads the
/// attended cells to a multiple of 256, and ggml instantiates the kernel for 256, 512,
/// 1024, 2048 and 4096 columns (one block of `min(ncols, 1024)` threads; one, two or
/// four columns per thread). Other lengths run `soft_max_f32<true, 0, 0>` with the same
/// block size and order, its loops not unrolled.
const SOFT_MAX_COLS: [usize; 5] = [256, 512, 1024, 2048, 4096];

/// What one `soft_max_f32<true, ncols, block, float>` says: the per-thread sum under the
/// shared store's butterfly, and the stored outputs, with every shared-memory offset
/// erased (`lds+N` printed as `lds`: the values a thread reads back are its own, the
/// offsets are address arithmetic).
struct SoftMaxObserved {
    name: String,
    /// Columns per thread.
    cols: usize,
    partial: Option<String>,
    /// Every value stored to shared memory (the cached `vals`, the partials).
    shared: Vec<String>,
    outputs: Vec<String>,
    ftz: Option<bool>,
}

/// ggml's CUDA `rope_neox<forward, no freq factors, float, float>`: the angle `T` that
/// `FMUL.RZ` scales by `1/(2 pi)`, every form inside it, and the two stored values.
struct RopeObserved {
    angle: String,
    angle_forms: Vec<String>,
    stores: Vec<String>,
}

struct NormObserved {
    name: String,
    steps: Vec<String>,
    /// The per-thread sum under the shared store's butterfly (`None`: no butterfly).
    partial: Option<String>,
    output: String,
    ftz: Option<bool>,
}

struct SiluObserved {
    output: String,
    ftz: Option<bool>,
}

/// `Function : NAME` headers of a `cuobjdump -sass` listing.
fn sass_kernels(listing: &str) -> impl Iterator<Item = &str> {
    listing.lines().filter_map(|l| l.trim().strip_prefix("Function : ")).map(str::trim)
}

/// Strips a 32-lane XOR butterfly off `id` (`v + shfl^o(v)` for o = 1 outermost, .., 16
/// innermost): the value the butterfly started from, if `id` is one.
fn strip_butterfly(e: &Exprs, mut id: Id) -> Option<Id> {
    for o in [1u32, 2, 4, 8, 16] {
        let isa::Node::Add(a, b) = *e.node(id) else { return None };
        let inner = [(a, b), (b, a)]
            .into_iter()
            .find(|&(v, s)| e.render(s) == format!("shfl^{o}({})", e.render(v)))?;
        id = inner.0;
    }
    Some(id)
}

/// Whether `id` is `fma(f, f, .. fma(f, f, base))` with `base` the loop-carried `acc`
/// (whose own step the loop check reads) or `0.0` (then at least one square): the
/// per-thread sum of squares, each square fused, after the loop and any unrolled tail.
fn is_square_chain(e: &Exprs, mut id: Id) -> bool {
    let mut n = 0;
    loop {
        match *e.node(id) {
            isa::Node::Fma(a, b, c) if e.render(a) == "f" && e.render(b) == "f" => {
                n += 1;
                id = c;
            }
            _ => {
                let base = e.render(id);
                return base == "acc" || (n > 0 && base == "0.0");
            }
        }
    }
}

fn observe_norm(
    name: &str,
    k: &isa::Kernel,
    shared_store: &str,
    global_store: &str,
    ftz: Option<bool>,
) -> Result<NormObserved, String> {
    let steps: Vec<String> =
        (0..k.loops.len()).flat_map(|l| k.accumulators(l)).map(|acc| k.exprs.render(acc)).collect();
    if steps.is_empty() {
        return Err(format!("{name}: no loop carries a float accumulator"));
    }
    let shared = k
        .stores
        .iter()
        .find(|st| st.op == shared_store)
        .ok_or_else(|| format!("{name}: no {shared_store} (the warp's partial)"))?;
    let partial = strip_butterfly(&k.exprs, shared.value).map(|p| {
        if is_square_chain(&k.exprs, p) {
            "squares".into()
        } else {
            k.exprs.render(p)
        }
    });
    let out = last_store(name, k, global_store)?;
    Ok(NormObserved {
        name: name.to_string(),
        steps,
        partial,
        output: k.exprs.render(out.value),
        ftz,
    })
}

/// The kernel's last store with mnemonic `op`.
fn last_store<'a>(name: &str, k: &'a isa::Kernel, op: &str) -> Result<&'a isa::Store, String> {
    k.stores.iter().rev().find(|st| st.op == op).ok_or_else(|| format!("{name}: no {op}"))
}

/// Both `rms_norm_f32<B, true>` instances: `mangled` is the name up to the template
/// arguments, `stores` the shared and global store mnemonics, and `eval` finds a kernel
/// by its name prefix and evaluates it (with its subnormal handling), or `None` when the
/// listing has no such kernel.
fn observe_norms(
    mangled: &str,
    [shared, global]: [&str; 2],
    eval: impl Fn(&str) -> Option<Result<(Option<bool>, String, isa::Kernel), String>>,
) -> Result<Vec<NormObserved>, String> {
    let mut norm = Vec::new();
    for b in RMS_BLOCKS {
        let prefix = format!("{mangled}ILi{b}ELb1ELb0ELb0E");
        let (ftz, name, k) =
            eval(&prefix).ok_or_else(|| format!("no {prefix} kernel in ggml's norm build"))??;
        norm.push(observe_norm(&name, &k, shared, global, ftz)?);
    }
    Ok(norm)
}

/// `lds+N` printed as `lds`.
fn erase_lds_offsets(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("lds+") {
        out.push_str(&rest[..i + 3]);
        rest = rest[i + 4..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// Every `soft_max_f32<true, ncols, block, float>` of [`SOFT_MAX_COLS`]: `mangled` is the
/// name up to the template arguments, `stores` the shared and global store mnemonics
/// (prefixes), `eval` as for [`observe_norms`].
fn observe_soft_maxes(
    mangled: &str,
    [shared, global]: [&str; 2],
    eval: impl Fn(&str) -> Option<Result<(Option<bool>, String, isa::Kernel), String>>,
) -> Result<Vec<SoftMaxObserved>, String> {
    let mut out = Vec::new();
    for n in SOFT_MAX_COLS {
        let b = n.min(1024);
        let prefix = format!("{mangled}ILb1ELi{n}ELi{b}EfE");
        let (ftz, name, k) = eval(&prefix)
            .ok_or_else(|| format!("no {prefix} kernel in ggml's softmax build"))??;
        // The sum's partial: the one shared store that is a sum butterfly (the maximum's
        // is a `max` butterfly, the cached values none).
        let partial = k
            .stores
            .iter()
            .filter(|st| st.op.starts_with(shared))
            .find_map(|st| strip_butterfly(&k.exprs, st.value))
            .map(|p| erase_lds_offsets(&k.exprs.render(p)));
        let render = |op: &str| -> Vec<String> {
            k.stores
                .iter()
                .filter(|st| st.op.starts_with(op))
                .map(|st| erase_lds_offsets(&k.exprs.render(st.value)))
                .collect()
        };
        let (shared, outputs) = (render(shared), render(global));
        out.push(SoftMaxObserved { name, cols: n / b, partial, shared, outputs, ftz });
    }
    Ok(out)
}

fn observe_silu(
    name: &str,
    k: &isa::Kernel,
    global_store: &str,
    ftz: Option<bool>,
) -> Result<SiluObserved, String> {
    let out = last_store(name, k, global_store)?;
    Ok(SiluObserved { output: k.exprs.render(out.value), ftz })
}

/// The angle under `?fmul.rz(T, 1/(2 pi))` and the two global stores of rotated values
/// (the others store the pass-through channels, `i0 >= n_dims`).
fn observe_rope(name: &str, k: &isa::Kernel) -> Result<RopeObserved, String> {
    let mut e = Exprs::new();
    let c = e.constant(f32::from_bits(0x3E22_F983));
    let suffix = format!(", {})", e.render(c));
    let rz_of = |v: Id| {
        k.exprs
            .subtree_forms(v)
            .into_iter()
            .find(|f| f.starts_with("?fmul.rz(") && f.ends_with(&suffix))
    };
    let rotated: Vec<&isa::Store> =
        k.stores.iter().filter(|st| st.op == "STG.E" && rz_of(st.value).is_some()).collect();
    let [a, b] = rotated[..] else {
        return Err(format!(
            "{name}: {} stores of values scaled by FMUL.RZ by 1/(2 pi), expected 2",
            rotated.len()
        ));
    };
    let forms = k.exprs.subtree_forms(a.value);
    let rz = rz_of(a.value).unwrap_or_default();
    let angle = rz["?fmul.rz(".len()..rz.len() - suffix.len()].to_string();
    if rz_of(b.value).as_deref() != Some(rz.as_str()) {
        return Err(format!("{name}: the two rotated values scale different angles"));
    }
    let angle_forms = forms.iter().filter(|f| angle.contains(f.as_str())).cloned().collect();
    Ok(RopeObserved {
        angle,
        angle_forms,
        stores: vec![k.exprs.render(a.value), k.exprs.render(b.value)],
    })
}

/// The differences between ggml's CUDA RoPE and the twin's (`rope_cache_cuda`, the
/// rotation fused or not): the angle holds `pos * ex2(lg2(theta_scale) * (i0 * 0.5))`
/// times `freq_scale` (`sym:param` are kernel arguments), and the stores are the
/// rotation of `x0`, `x1` by `cos`/`sin` of `RZ(angle * 1/(2 pi))` times `mscale`.
fn compare_rope(obs: &RopeObserved, fused: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let mut e = Exprs::new();
    let theta = {
        let ts = e.sym("param");
        let lg = e.op("mufu.lg2", &[ts]);
        let (half, i0) = (e.constant(0.5), e.leaf("i"));
        let h = e.mul(half, i0);
        let m = e.mul(lg, h);
        let pw = e.op("mufu.ex2", &[m]);
        let pos = e.leaf("i");
        let base = e.mul(pw, pos);
        let freq_scale = e.sym("param");
        e.mul(base, freq_scale)
    };
    let want_theta = e.render(theta);
    if !obs.angle_forms.contains(&want_theta) {
        bad.push(format!("angle: no {want_theta} in {}", obs.angle));
    }
    // `mscale`: `attn_factor` with `ext_factor = 0`; the listing's last write is the
    // YaRN path's `attn_factor * (1 + 0.1 * logf(1 / freq_scale))` (`logf` as
    // `MUFU.LG2 * ln 2`), which is `attn_factor` again at `freq_scale = 1`. Either form
    // is accepted; nothing else is.
    let attn = e.sym("param");
    let yarn = {
        let fs = e.sym("param");
        let inv = e.op("mufu.rcp", &[fs]);
        let lg = e.op("mufu.lg2", &[inv]);
        let ln2 = e.constant(f32::from_bits(0x3F31_7218));
        let ln = e.mul(ln2, lg);
        let (tenth, one) = (e.constant(0.1), e.constant(1.0));
        let f = e.fma(tenth, ln, one);
        let a = e.sym("param");
        e.mul(f, a)
    };
    let t = e.leaf(&obs.angle);
    let inv = e.constant(f32::from_bits(0x3E22_F983));
    let rz = e.op("fmul.rz", &[t, inv]);
    let mut wants = Vec::new();
    for mscale in [attn, yarn] {
        let (c, s) = (e.op("mufu.cos", &[rz]), e.op("mufu.sin", &[rz]));
        let (c, s) = (e.mul(c, mscale), e.mul(s, mscale));
        let (x0, x1) = (e.leaf("f"), e.leaf("f"));
        let (d0, d1) = if fused {
            let p = e.mul(x1, s);
            let np = e.neg(p);
            let q = e.mul(x1, c);
            (e.fma(x0, c, np), e.fma(x0, s, q))
        } else {
            let (a, p) = (e.mul(x0, c), e.mul(x1, s));
            let np = e.neg(p);
            let (b, q) = (e.mul(x0, s), e.mul(x1, c));
            (e.add(a, np), e.add(b, q))
        };
        wants.push([e.render(d0), e.render(d1)]);
    }
    for k in 0..2 {
        if !wants.iter().any(|w| w[k] == obs.stores[k]) {
            bad.push(format!(
                "store {k}:\n    ggml   {}\n    recipe {}",
                obs.stores[k], wants[0][k]
            ));
        }
    }
    bad
}

/// One elementwise recipe: the switches of [`GpuMath`] the twins read.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ElemRecipe {
    rms_mean: RmsMean,
    expf: Expf,
    silu_divide: Divide,
    soft_max_inverse: Divide,
    ftz: bool,
}

impl ElemRecipe {
    fn of(m: GpuMath) -> Self {
        ElemRecipe {
            rms_mean: m.rms_mean(),
            expf: m.expf(),
            silu_divide: m.silu_divide(),
            soft_max_inverse: m.soft_max_inverse(),
            ftz: m.ftz(),
        }
    }

    fn all() -> Vec<ElemRecipe> {
        let mut out = Vec::new();
        for rms_mean in [RmsMean::DivideThenAdd, RmsMean::FmaReciprocal] {
            for expf in [Expf::DeviceLibrary, Expf::FastEx2] {
                for silu_divide in [Divide::Ieee, Divide::Reciprocal] {
                    for soft_max_inverse in [Divide::Ieee, Divide::Reciprocal] {
                        for ftz in [false, true] {
                            out.push(ElemRecipe {
                                rms_mean,
                                expf,
                                silu_divide,
                                soft_max_inverse,
                                ftz,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

/// The recipe's RMSNorm output, `(scale * x) * w`, in the vendor's vocabulary.
fn rms_norm_tree(e: &mut Exprs, r: &ElemRecipe, v: &Vocab) -> Id {
    let lds = e.leaf("lds+0");
    let sum = butterfly(e, lds, 32, false);
    let n = e.leaf("i");
    let eps = e.sym(v.eps);
    let mean_eps = match r.rms_mean {
        RmsMean::DivideThenAdd => {
            let m = e.div(sum, n);
            e.add(m, eps)
        }
        RmsMean::FmaReciprocal => {
            let inv = e.op(v.rcp, &[n]);
            e.fma(inv, sum, eps)
        }
    };
    let scale = if v.rsq_scaled {
        let (one, up, down) =
            (e.constant(1.0), e.constant(2f32.powi(100)), e.constant(2f32.powi(50)));
        let s_in = e.op("sel", &[one, up]);
        let s_out = e.op("sel", &[one, down]);
        let scaled = e.mul(s_in, mean_eps);
        let r = e.op(v.rsq, &[scaled]);
        e.mul(r, s_out)
    } else {
        e.op(v.rsq, &[mean_eps])
    };
    let (x, w) = (e.leaf("f"), e.leaf("f"));
    let sx = e.mul(scale, x);
    e.mul(sx, w)
}

/// The recipe's SwiGLU output, `silu(x) * g`, in the vendor's vocabulary.
fn silu_tree(e: &mut Exprs, r: &ElemRecipe, v: &Vocab, cutoffs_inside: bool) -> Id {
    let x = e.leaf("f");
    let one = e.constant(1.0);
    let ph = {
        let c = e.constant(-f32::from_bits(0x3FB8_AA3B));
        e.mul(c, x)
    };
    let den = match r.expf {
        Expf::DeviceLibrary => {
            let (l, llo) = (
                e.constant(-f32::from_bits(0x3FB8_AA3B)),
                e.constant(-f32::from_bits(0x32A5_705F)),
            );
            let nph = e.neg(ph);
            let pl = e.fma(l, x, nph);
            let pl = e.fma(llo, x, pl);
            let n = e.op("rndne_f32", &[ph]);
            let nn = e.neg(n);
            let d = e.add(nn, ph);
            let a = e.add(d, pl);
            let p = e.op(v.ex2, &[a]);
            let ni = e.leaf("i");
            let ex = e.op("ldexp_f32", &[p, ni]);
            let inf = e.constant(f32::INFINITY);
            if cutoffs_inside {
                // `1 + expf(-x)` with `expf`'s own cut-offs: `1 + sel(0, e)` is
                // `sel(1, 1 + e)` and `1 + sel(inf, ..)` is `sel(inf, ..)` exactly
                // (`1 + 0 = 1`, `1 + inf = inf`), under the same conditions.
                let zero = e.constant(0.0);
                let inner = e.op("sel", &[zero, ex]);
                let outer = e.op("sel", &[inf, inner]);
                e.add(one, outer)
            } else {
                let sum = e.add(one, ex);
                let inner = e.op("sel", &[one, sum]);
                e.op("sel", &[inf, inner])
            }
        }
        Expf::FastEx2 => {
            let p = e.op(v.ex2, &[ph]);
            e.add(one, p)
        }
    };
    let q = match r.silu_divide {
        Divide::Ieee => e.div(x, den),
        Divide::Reciprocal => {
            let inv = e.op(v.rcp, &[den]);
            e.mul(x, inv)
        }
    };
    let g = e.leaf("f");
    e.mul(q, g)
}

/// The recipe's `expf(d)` (softmax's: the device library's form with its cut-offs to 0
/// and inf, or `ex2(d * log2 e)`), in the vendor's vocabulary.
fn expf_tree(e: &mut Exprs, r: &ElemRecipe, v: &Vocab, d: Id) -> Id {
    let log2e = e.constant(f32::from_bits(0x3FB8_AA3B));
    let ph = e.mul(log2e, d);
    match r.expf {
        Expf::DeviceLibrary => {
            let lo = e.constant(f32::from_bits(0x32A5_705F));
            let nph = e.neg(ph);
            let pl = e.fma(log2e, d, nph);
            let pl = e.fma(lo, d, pl);
            let n = e.op("rndne_f32", &[ph]);
            let nn = e.neg(n);
            let f = e.add(nn, ph);
            let a = e.add(f, pl);
            let p = e.op(v.ex2, &[a]);
            let ni = e.leaf("i");
            let ex = e.op("ldexp_f32", &[p, ni]);
            let zero = e.constant(0.0);
            let under = e.op("sel", &[zero, ex]);
            let inf = e.constant(f32::INFINITY);
            e.op("sel", &[inf, under])
        }
        Expf::FastEx2 => e.op(v.ex2, &[ph]),
    }
}

/// The recipe's softmax pieces for `cols` columns per thread, offsets erased: each
/// cached value `e = expf(lds - max)` (`max` the block's `fmaxf` butterfly over the
/// shared slots), the per-thread sum (`0.0 + e_0 + e_1 ..`, or `e_0 + e_1 ..`), and the accepted stored
/// outputs (the cached `e` read back, times `inv`, the recipe's `1 / sum` of the block's
/// sum butterfly; the kernel's sink term, which its listing shows unconditionally, may
/// join the sum: `expf(sink - max)` with the sink a loaded value or a kernel argument).
fn soft_max_trees(r: &ElemRecipe, v: &Vocab, cols: usize) -> (String, [String; 2], Vec<String>) {
    let mut e = Exprs::new();
    let slot = e.leaf("lds+0");
    let max = butterfly(&mut e, slot, 32, true);
    let nmax = e.neg(max);
    let val = e.leaf("lds+0");
    let d = e.add(nmax, val);
    let ex = expf_tree(&mut e, r, v, d);
    let mut chain = e.constant(0.0);
    for _ in 0..cols {
        chain = e.add(chain, ex);
    }
    // The same sum with `0.0 + e_0` folded to `e_0` (clang 19 folds it, clang 15 does
    // not): `0.0 + e` is `e` for every `e` but `-0.0`, and the device's `expf` never
    // returns `-0.0` (it selects `+0`, `+inf` or an `ldexp` of a positive `2^a`), so
    // both sums round alike.
    let mut folded = ex;
    for _ in 1..cols {
        folded = e.add(folded, ex);
    }
    let sum = butterfly(&mut e, slot, 32, false);
    let mut outputs = Vec::new();
    let sinks = ["f", "sym:arg0", "sym:param"].map(|l| {
        let s = e.leaf(l);
        let ds = e.add(nmax, s);
        let es = expf_tree(&mut e, r, v, ds);
        e.add(es, sum)
    });
    for total in [sum].into_iter().chain(sinks) {
        let inv = match r.soft_max_inverse {
            Divide::Ieee => {
                let one = e.constant(1.0);
                e.div(one, total)
            }
            Divide::Reciprocal => e.op(v.rcp, &[total]),
        };
        let p = e.mul(val, inv);
        outputs.push(erase_lds_offsets(&e.render(p)));
    }
    let chains = [chain, folded].map(|c| erase_lds_offsets(&e.render(c)));
    (erase_lds_offsets(&e.render(ex)), chains, outputs)
}

/// The differences between ggml's softmax kernels and the recipe (empty: they agree).
fn compare_soft_max(obs: &ElemObserved, r: &ElemRecipe, v: &Vocab) -> Vec<String> {
    let mut bad = Vec::new();
    for o in &obs.soft_max {
        let (ex, chains, outputs) = soft_max_trees(r, v, o.cols);
        let cached = o.shared.iter().filter(|s| **s == ex).count();
        if cached != o.cols {
            bad.push(format!(
                "{}: {cached} shared stores of expf(x - max), want {}\n    recipe {ex}",
                o.name, o.cols
            ));
        }
        if !o.partial.as_ref().is_some_and(|p| chains.contains(p)) {
            bad.push(format!(
                "{}: per-thread sum under the butterfly\n    ggml   {:?}\n    recipe {}",
                o.name, o.partial, chains[0]
            ));
        }
        if o.outputs.len() != o.cols {
            bad.push(format!("{}: {} stored outputs, want {}", o.name, o.outputs.len(), o.cols));
        }
        for out in &o.outputs {
            if !outputs.contains(out) {
                bad.push(format!(
                    "{}: output\n    ggml   {out}\n    recipe {}",
                    o.name, outputs[0]
                ));
            }
        }
        if o.ftz != Some(r.ftz) {
            bad.push(format!("{}: flushes subnormals {:?}, recipe {}", o.name, o.ftz, r.ftz));
        }
    }
    bad
}

/// The differences between ggml's RMSNorm kernels and the recipe (empty: they agree).
fn compare_norm(obs: &ElemObserved, r: &ElemRecipe, v: &Vocab) -> Vec<String> {
    let mut bad = Vec::new();
    let mut e = Exprs::new();
    let want = {
        let t = rms_norm_tree(&mut e, r, v);
        e.render(t)
    };
    for n in &obs.norm {
        for (l, st) in n.steps.iter().enumerate() {
            let mut e = Exprs::new();
            let mut acc = e.leaf("acc");
            let ok = (1..=16).any(|_| {
                let f = e.leaf("f");
                acc = e.fma(f, f, acc);
                e.render(acc) == *st
            });
            if !ok {
                bad.push(format!(
                    "{}: loop step {l} is not a chain of fma(x, x, acc): {st}",
                    n.name
                ));
            }
        }
        if n.partial.as_deref() != Some("squares") {
            bad.push(format!(
                "{}: the warp partial is not the 32-lane butterfly of fused squares: {:?}",
                n.name, n.partial
            ));
        }
        if n.output != want {
            bad.push(format!("{}: output\n    ggml   {}\n    recipe {want}", n.name, n.output));
        }
        if n.ftz != Some(r.ftz) {
            bad.push(format!("{}: flushes subnormals {:?}, recipe {}", n.name, n.ftz, r.ftz));
        }
    }
    bad
}

fn compare_silu(obs: &ElemObserved, r: &ElemRecipe, v: &Vocab) -> Vec<String> {
    let mut bad = Vec::new();
    let mut e = Exprs::new();
    // Clang 15 applies the device `expf`'s cut-offs to `1 + e`, clang 19 to `e`: both
    // forms round alike (`silu_tree`).
    let forms = [false, true].map(|inside| {
        let t = silu_tree(&mut e, r, v, inside);
        e.render(t)
    });
    let want = &forms[0];
    if !forms.contains(&obs.silu.output) {
        bad.push(format!("output\n    ggml   {}\n    recipe {want}", obs.silu.output));
    }
    if obs.silu.ftz != Some(r.ftz) {
        bad.push(format!("flushes subnormals {:?}, recipe {}", obs.silu.ftz, r.ftz));
    }
    bad
}

/// A target's elementwise observations, made on first use and kept for its other trials.
fn elem_once<'a, V: Vendor>(
    l: &'a OnceLock<Result<ElemObserved, String>>,
    dir: &Path,
    target: &str,
) -> Result<&'a ElemObserved, String> {
    l.get_or_init(|| V::load(dir, target).and_then(|x| V::observe_elem(&x)))
        .as_ref()
        .map_err(|e| format!("{target}: {e}"))
}

/// The elementwise trials of one target against the GPU math `math` (and, where the
/// lane reproduces the GPU's RoPE, the flavour `rope`).
fn elem_trials<V: Vendor>(
    target: &'static str,
    math: GpuMath,
    rope: Option<ElemFlavour>,
) -> Vec<Trial> {
    let mut names = vec![
        format!("ggml {target} rms_norm"),
        format!("ggml {target} swiglu"),
        format!("ggml {target} elementwise recipes are told apart"),
        format!("ggml {target} soft_max"),
    ];
    if rope.is_some() {
        names.push(format!("ggml {target} rope"));
    }
    let dir = match target_dir::<V>(target) {
        Ok(dir) => dir,
        Err(why) => return names.into_iter().map(|n| unavailable(n, why.clone())).collect(),
    };
    let shared: Arc<OnceLock<Result<ElemObserved, String>>> = Arc::new(OnceLock::new());
    let recipe = ElemRecipe::of(math);
    let (n_norm, n_silu, n_apart) = (names[0].clone(), names[1].clone(), names[2].clone());
    let (l1, l2, l3, l4, l5) =
        (shared.clone(), shared.clone(), shared.clone(), shared.clone(), shared);
    let (d1, d2, d3, d4, d5) = (dir.clone(), dir.clone(), dir.clone(), dir.clone(), dir);
    let report = move |bad: Vec<String>| -> Result<(), libtest_mimic::Failed> {
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{target} ({math:?}):\n  {}", bad.join("\n  ")).into())
        }
    };
    let mut out = vec![
        Trial::test(n_norm, move || {
            report(compare_norm(elem_once::<V>(&l1, &d1, target)?, &recipe, &V::VOCAB))
        }),
        Trial::test(n_silu, move || {
            report(compare_silu(elem_once::<V>(&l2, &d2, target)?, &recipe, &V::VOCAB))
        }),
        Trial::test(n_apart, move || {
            let obs = elem_once::<V>(&l3, &d3, target)?;
            // Each kernel pins its own switches: RMSNorm the mean (and FTZ), SwiGLU
            // the expf and the division (and FTZ), softmax the expf and `1 / sum` (and
            // FTZ).
            let all: Vec<ElemRecipe> = ElemRecipe::all()
                .into_iter()
                .filter(|r| {
                    compare_norm(obs, r, &V::VOCAB).is_empty()
                        && compare_silu(obs, r, &V::VOCAB).is_empty()
                        && compare_soft_max(obs, r, &V::VOCAB).is_empty()
                })
                .collect();
            match all[..] {
                [r] if r == recipe => Ok(()),
                _ => Err(format!(
                    "{target}: ggml's RMSNorm, SwiGLU and softmax match {} recipes together, \
                     expected exactly {math:?}'s {recipe:?}: {all:?}",
                    all.len()
                )
                .into()),
            }
        }),
    ];
    out.push(Trial::test(names[3].clone(), move || {
        report(compare_soft_max(elem_once::<V>(&l5, &d5, target)?, &recipe, &V::VOCAB))
    }));
    if let Some(fl) = rope {
        out.push(Trial::test(names[4].clone(), move || {
            let obs = elem_once::<V>(&l4, &d4, target)?;
            let r = obs.rope.as_ref().ok_or("no RoPE observed")?;
            let bad = compare_rope(r, fl.rope_rotation() == RopeRotation::FuseX0);
            if !bad.is_empty() {
                return report(bad);
            }
            // The other rotation form must not match: the check pins the fusion.
            if compare_rope(r, fl.rope_rotation() != RopeRotation::FuseX0).is_empty() {
                return Err(format!("{target}: both rotation forms match ggml's RoPE").into());
            }
            Ok(())
        }));
    }
    out
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for (target, mmvf) in [
        ("gfx1030", MMVF_RDNA2),
        ("gfx90a", MMVF_CDNA),
        ("gfx1151", MMVF_RDNA3),
        ("gfx1100", MMVF_RDNA3),
    ] {
        let cfg = lane_of(target).expect("every AMD target has a recipe");
        trials.extend(target_trials::<Amd>(target, cfg));
        trials.extend(elem_trials::<Amd>(target, GpuMath::Hip, None));
        trials.extend(mmvf_trials::<Amd>(target, mmvf));
        trials.push(rope_exec_trial(target));
        trials.push(swiglu_exec_trial(target));
    }
    for arch in ["sm_90", "sm_80"] {
        trials.extend(target_trials::<Nvidia>(arch, CUDA));
        trials.extend(elem_trials::<Nvidia>(arch, GpuMath::Cuda, Some(ElemFlavour::GpuCuda)));
        trials.extend(mmvf_trials::<Nvidia>(arch, MMVF_AMPERE));
    }
    libtest_mimic::run(&args, trials).exit();
}

// ---------------------------------------------------------------------------------
// MMVF: ggml's `mul_mat_vec_f` (the attention products) against `gpu::MmvfConfig`.

/// One `mul_mat_vec_f<T, type_acc, ncols_dst, block_size, no fusion, not multi-token>`.
#[derive(Clone, Copy, Debug)]
struct MmvfInstance {
    /// F16 matrix (`half`) or F32 (`float`).
    x_half: bool,
    acc: MmvfAcc,
    /// Activation columns (`ncols_dst`): each has its own accumulator and reduction.
    cols: usize,
    block: usize,
}

impl MmvfInstance {
    /// The mangled name's prefix (`_ZL` for hipcc's static kernels, `_Z` for nvcc's).
    fn prefix(&self, z: &str) -> String {
        let types = match (self.x_half, self.acc) {
            (true, MmvfAcc::F32) => "6__halff",
            (true, MmvfAcc::F16) => "6__halfS0_",
            (false, _) => "ff",
        };
        format!("{z}13mul_mat_vec_fI{types}Li{}ELi{}ELb0ELb0EE", self.cols, self.block)
    }
    fn label(&self) -> String {
        let t = if self.x_half { "half" } else { "float" };
        format!("<{t}, {}, cols={}, B={}>", self.acc.name(), self.cols, self.block)
    }
}

/// The instances the decoder reaches on this GPU: `K·Q` of an F16 cache (half, f32
/// accumulator) or an F32 one (float), `V·p` of an F16 cache (half, F16 accumulator);
/// blocks of one warp (no shared memory), 64 (a head of 128), 128 and 256 (256 and 512
/// cells), as far as the GPU's block sizes go; one activation column, two, and the most
/// ggml gives the kernel on this GPU for that matrix type (a prompt's small batches).
fn mmvf_instances(cfg: &MmvfConfig) -> Vec<MmvfInstance> {
    let mut blocks: Vec<usize> = [cfg.warp_size, 64, 128, 256]
        .into_iter()
        .filter(|&b| b >= cfg.warp_size && b <= cfg.max_block && b % cfg.warp_size == 0)
        .collect();
    blocks.dedup();
    let mut out = Vec::new();
    for block in blocks {
        for (x_half, acc) in [(true, MmvfAcc::F32), (true, MmvfAcc::F16), (false, MmvfAcc::F32)] {
            let most = if x_half { cfg.f16_max_cols } else { cfg.f32_max_cols };
            // Three or more columns: hipcc keeps the per-column sums in scratch memory,
            // which the listing evaluator does not follow.
            let mut cols = vec![1, 2.min(most)];
            cols.dedup();
            for cols in cols {
                out.push(MmvfInstance { x_half, acc, cols, block });
            }
        }
    }
    out
}

/// What one MMVF kernel says: every loop's accumulator step, every shared store, the
/// stored output (with several columns, thread `t` stores column `t`'s sum: the
/// selected values, each a column's), the subnormal mode.
struct MmvfObserved {
    inst: MmvfInstance,
    steps: Vec<String>,
    shared: Vec<String>,
    outputs: Vec<String>,
    ftz: Option<bool>,
}

/// The values a chain of selects (`v_cndmask`, `SEL`) chooses among, one per column. A
/// sum of two selects on the same choice (the compiler may select first and add after:
/// `sel(a0, a1) + sel(b0, b1)`) is the select of the sums, which rounds alike:
/// `sel(a0 + b0, a1 + b1)`.
fn selected(e: &mut Exprs, id: Id) -> Vec<Id> {
    match e.node(id).clone() {
        isa::Node::Float(op, args) if op == "sel" => {
            args.iter().flat_map(|&a| selected(e, a)).collect()
        }
        isa::Node::Add(a, b) => {
            let (sa, sb) = (selected(e, a), selected(e, b));
            match (sa.len(), sb.len()) {
                (1, 1) => vec![id],
                (n, m) if n == m => sa.into_iter().zip(sb).map(|(x, y)| e.add(x, y)).collect(),
                (1, _) => sb.into_iter().map(|y| e.add(sa[0], y)).collect(),
                (_, 1) => sa.into_iter().map(|x| e.add(x, sb[0])).collect(),
                _ => vec![id],
            }
        }
        _ => vec![id],
    }
}

fn observe_mmvf(
    inst: MmvfInstance,
    k: &isa::Kernel,
    [shared_op, global_op]: [&str; 2],
    ftz: Option<bool>,
) -> MmvfObserved {
    let mut steps = Vec::new();
    for l in 0..k.loops.len() {
        steps.extend(k.accumulators(l).into_iter().map(|a| k.exprs.render(a)));
    }
    // SASS prints FP16 fused multiply-adds on two pipes (`HFMA2`, `HFMA2.MMA`): the
    // same operation.
    let norm = |s: String| s.replace("?hfma2.mma(", "?hfma2(");
    let steps = steps.into_iter().map(norm).collect();
    let shared = k
        .stores
        .iter()
        .filter(|st| st.op.starts_with(shared_op))
        .map(|st| norm(k.exprs.render(st.value)))
        .collect();
    let mut e = k.exprs.clone();
    let chosen = match k.stores.iter().rev().find(|st| st.op.starts_with(global_op)) {
        Some(st) => selected(&mut e, st.value),
        None => vec![],
    };
    let outputs = chosen.into_iter().map(|id| norm(e.render(id))).collect();
    MmvfObserved { inst, steps, shared, outputs, ftz }
}

/// A recipe for MMVF: the physical warp, whether the f32 accumulator's multiply-adds
/// are fused in the one-column kernel and in those of several columns (the F16
/// accumulator's are on every target), the subnormal mode (the accumulator is the
/// instance's).
#[derive(Clone, Copy, Debug, PartialEq)]
struct MmvfRecipe {
    warp: usize,
    fused: bool,
    /// Fused in the kernels of several columns.
    fused_columns: bool,
    ftz: bool,
}

impl MmvfRecipe {
    fn of(cfg: &MmvfConfig) -> MmvfRecipe {
        MmvfRecipe {
            warp: cfg.warp_size,
            fused: cfg.fused,
            fused_columns: cfg.fused_columns,
            ftz: cfg.ftz,
        }
    }
    fn all() -> Vec<MmvfRecipe> {
        let mut out = Vec::new();
        for warp in [32, 64] {
            for fused in [true, false] {
                for fused_columns in [true, false] {
                    for ftz in [true, false] {
                        out.push(MmvfRecipe { warp, fused, fused_columns, ftz });
                    }
                }
            }
        }
        out
    }
}

/// One pair of a thread's loop, on the accumulator `v`.
fn mmvf_pair(e: &mut Exprs, inst: &MmvfInstance, fused: bool, pk: &str, v: Id) -> Id {
    match inst.acc {
        MmvfAcc::F32 => {
            let mut v = v;
            for half in ["h.lo", "h.hi"] {
                let y = e.leaf("f");
                let x = e.leaf(if inst.x_half { half } else { "f" });
                v = common::mad(e, fused, y, x, v);
            }
            v
        }
        MmvfAcc::F16 => {
            let (x, y0, y1) = (e.leaf("f"), e.leaf("f"), e.leaf("f"));
            let (h0, h1) = (e.f2h(y0), e.f2h(y1));
            let y = e.pack(h0, h1);
            // One packed FP16 fused multiply-add on every target (`fused` is the f32
            // accumulator's switch).
            let _ = fused;
            e.op(pk, &[x, y, v])
        }
    }
}

/// The differences between ggml's MMVF kernel and the recipe (empty: they agree).
fn compare_mmvf(o: &MmvfObserved, r: &MmvfRecipe, pk: &str) -> Vec<String> {
    let inst = &o.inst;
    let fused = if inst.cols > 1 { r.fused_columns } else { r.fused };
    let mut bad = Vec::new();
    if o.ftz != Some(r.ftz) {
        bad.push(format!("subnormals: ggml flushes {:?}, the recipe {}", o.ftz, r.ftz));
    }
    // Each loop step: k pairs chained (the loop may be unrolled).
    let chains: Vec<String> = {
        let mut e = Exprs::new();
        let mut v = e.leaf("acc");
        (1..=32)
            .map(|_| {
                v = mmvf_pair(&mut e, inst, fused, pk, v);
                e.render(v)
            })
            .collect()
    };
    if o.steps.is_empty() {
        bad.push("no loop carries a float accumulator".into());
    }
    for s in &o.steps {
        if !chains.contains(s) {
            bad.push(format!("loop step:\n    ggml   {s}\n    recipe {}", chains[0]));
        }
    }
    // The thread's sum after the loop (an unrolled remainder may add pairs: k >= 0),
    // and the block's reduction over the physical warp.
    let mut e = Exprs::new();
    let mut sums = Vec::new();
    match inst.acc {
        MmvfAcc::F32 => {
            let mut v = e.leaf("acc");
            sums.push(v);
            for _ in 0..32 {
                v = mmvf_pair(&mut e, inst, fused, pk, v);
                sums.push(v);
            }
        }
        MmvfAcc::F16 => {
            let (lo, hi) = (e.leaf("h?.lo"), e.leaf("h?.hi"));
            sums.push(e.add(lo, hi));
        }
    }
    let warp_sums: Vec<String> = sums
        .iter()
        .map(|&v| {
            let b = common::butterfly(&mut e, v, r.warp, false);
            e.render(b)
        })
        .collect();
    if o.outputs.is_empty() {
        bad.push("no global store".into());
    }
    if inst.block > r.warp {
        // Warp sums into zeroed slots, then warp 0's butterfly over the slots (per
        // column); every shared store is a zero or a warp's sum.
        let slot = e.leaf("lds+0");
        let b = common::butterfly(&mut e, slot, r.warp, false);
        let want = e.render(b);
        for output in o.outputs.iter().filter(|out| **out != want) {
            bad.push(format!("output:\n    ggml   {output}\n    recipe {want}"));
        }
        let sums = o.shared.iter().filter(|s| warp_sums.contains(s)).count();
        if sums == 0 || o.shared.iter().any(|s| s != "0.0" && !warp_sums.contains(s)) {
            bad.push(format!(
                "shared stores other than zeros and warp sums, or no warp sum:\n    ggml   {:?}\n    recipe {}",
                o.shared, warp_sums[0]
            ));
        }
        if !o.shared.iter().any(|s| s == "0.0") {
            bad.push("the shared slots are not zeroed".into());
        }
    } else if inst.cols > 1 && r.warp == 64 {
        // One 64-lane wavefront, several columns: gfx90a's code shuffles every column's
        // partial sum and selects each lane's column through lane-address selects before
        // the last butterfly step, which the evaluator does not read as a butterfly. Only
        // the loop steps of these kernels are compared (their other block sizes, through
        // shared memory, are compared whole).
    } else {
        for output in o.outputs.iter().filter(|out| !warp_sums.contains(out)) {
            bad.push(format!("output:\n    ggml   {output}\n    recipe {}", warp_sums[0]));
        }
    }
    bad.into_iter().map(|b| format!("{}: {b}", inst.label())).collect()
}

fn mmvf_trials<V: Vendor>(target: &'static str, cfg: MmvfConfig) -> Vec<Trial> {
    let names =
        [format!("ggml {target} mmvf"), format!("ggml {target} mmvf recipes are told apart")];
    let dir = match target_dir::<V>(target) {
        Ok(dir) => dir,
        Err(why) => return names.into_iter().map(|n| unavailable(n, why.clone())).collect(),
    };
    type Obs = OnceLock<Result<Vec<MmvfObserved>, String>>;
    let shared: Arc<Obs> = Arc::new(OnceLock::new());
    let recipe = MmvfRecipe::of(&cfg);
    let (l1, d1) = (shared.clone(), dir.clone());
    let (l2, d2) = (shared, dir);
    vec![
        Trial::test(names[0].clone(), move || {
            let obs = l1
                .get_or_init(|| V::observe_mmvf(&d1, target, &cfg))
                .as_ref()
                .map_err(|e| format!("{target}: {e}"))?;
            let bad: Vec<String> =
                obs.iter().flat_map(|o| compare_mmvf(o, &recipe, V::PK_FMA)).collect();
            if bad.is_empty() {
                Ok(())
            } else {
                Err(format!("{target} ({}, {recipe:?}):\n  {}", cfg.name, bad.join("\n  ")).into())
            }
        }),
        Trial::test(names[1].clone(), move || {
            let obs = l2
                .get_or_init(|| V::observe_mmvf(&d2, target, &cfg))
                .as_ref()
                .map_err(|e| format!("{target}: {e}"))?;
            let accepted: Vec<MmvfRecipe> = MmvfRecipe::all()
                .into_iter()
                .filter(|r| obs.iter().all(|o| compare_mmvf(o, r, V::PK_FMA).is_empty()))
                .collect();
            match accepted[..] {
                [r] if r == recipe => Ok(()),
                _ => Err(format!(
                    "{target}: ggml's MMVF kernels match {} recipes, expected exactly {}'s {recipe:?}: {accepted:?}",
                    accepted.len(),
                    cfg.name
                )
                .into()),
            }
        }),
    ]
}

// ---------------------------------------------------------------------------------
// HIP's RoPE: ggml's `rope_neox` code object executed (`isa::exec`) against
// `gpu::ocml::rope_pair_hip`.

/// `rope_neox<forward = true, has_ff = false, float, float>` as hipcc names it.
const ROPE_KERNEL: &str =
    "_ZL9rope_neoxILb1ELb0EffEvPKT1_PT2_iiiiiiiiiiiPKifff14rope_corr_dimsfPKfPKlib";

/// One thread of ggml's RoPE: the pair at rotation index `iw` (even) of head `head`
/// (of two) of one token at `pos`, rotated by `theta_scale^(iw/2)` turns of the
/// position, scaled by `freq_scale`, its `cos`/`sin` by `attn_factor`.
#[derive(Clone, Copy, Debug)]
struct RopeCase {
    pos: i32,
    theta_scale: f32,
    n_dims: usize,
    iw: usize,
    head: usize,
    freq_scale: f32,
    attn_factor: f32,
    x0: f32,
    x1: f32,
}

/// Where the interpreter puts the kernel's buffers.
const X_AT: u64 = 0x10_0000;
const DST_AT: u64 = 0x20_0000;
const POS_AT: u64 = 0x30_0000;

/// The kernel arguments of one launch, laid out as the C ABI lays out `rope_neox`'s
/// parameters (pointers 8-aligned): `x` 0, `dst` 8, `ne00, ne01, ne02, s01, s02, s03,
/// s1, s2, s3, n_dims, n_offs` 16..60, `pos` 64, `freq_scale, ext_factor, attn_factor`
/// 72..84, `corr_dims` 84, `theta_scale` 92, `freq_factors` 96, `row_indices` 104,
/// `set_rows_stride` 112, `inplace` 116. One token of two heads of `n_dims` channels,
/// all rotated (`n_offs = 0`), contiguous rows; `ext_factor = 0` (no YaRN ramp), no
/// frequency factors, no fused row copy, not in place.
fn rope_kernargs(c: &RopeCase) -> Vec<u8> {
    let mut a = vec![0u8; 256];
    let mut put = |o: usize, b: &[u8]| a[o..o + b.len()].copy_from_slice(b);
    put(0, &X_AT.to_le_bytes());
    put(8, &DST_AT.to_le_bytes());
    let hd = c.n_dims as i32;
    let ints = [hd, 2, 1, hd, 2 * hd, 2 * hd, hd, 2 * hd, 2 * hd, hd, 0];
    for (k, v) in ints.iter().enumerate() {
        put(16 + 4 * k, &v.to_le_bytes());
    }
    put(64, &POS_AT.to_le_bytes());
    for (o, v) in [(72, c.freq_scale), (76, 0.0), (80, c.attn_factor), (84, 0.0), (88, 0.0)] {
        put(o, &f32::to_le_bytes(v));
    }
    put(92, &c.theta_scale.to_le_bytes());
    a
}

/// One of ggml's kernels for one target, decoded for the interpreter
/// ([`isa::exec`]), with how its work-items are set up.
struct Executable {
    prog: isa::exec::Program,
    descriptor: isa::exec::Descriptor,
    packed_ids: bool,
    hidden_at: Option<usize>,
}

impl Executable {
    /// `kernel` from ggml's `<unit>.co` for `target`: its listing, descriptor and
    /// metadata.
    fn load(dir: &Path, target: &str, unit: &str, kernel: &str) -> Result<Self, String> {
        let file = dir.join(target).join(format!("{unit}.co"));
        let only = format!("--disassemble-symbols={kernel}");
        let listing = disassembly(target, &["-d", &only], &file)?;
        let only_kd = format!("--disassemble-symbols={kernel}.kd");
        let kd = disassembly(target, &["-D", &only_kd], &file)?;
        let bytes = isa::amdgpu_descriptor(&kd, kernel)
            .ok_or_else(|| format!("{target}: no descriptor for {kernel}"))?;
        let notes = tool_output(&amd_tool("llvm-readelf", target)?, &["--notes"], &file)?;
        Ok(Executable {
            prog: isa::exec::Program::from_listing(&listing, kernel)?,
            descriptor: isa::exec::Descriptor::from_bytes(&bytes)?,
            // gfx90a and gfx11 pack the work-item ids into v0 (10 bits each).
            packed_ids: target == "gfx90a" || target.starts_with("gfx11"),
            // Code object v5 (clang 19) reads the block size from the implicit arguments.
            hidden_at: isa::amdgpu_arg_offset(&notes, kernel, "hidden_block_count_x")
                .map(|o| o as usize),
        })
    }

    /// Runs the work-item `thread` of block `block_id` (blocks of `block`, a grid of
    /// `grid` blocks) on `kernargs` and `mem`; returns its stores.
    fn run(
        &self,
        (block, grid, block_id, thread): ([u32; 3], [u32; 3], [u32; 3], [u32; 3]),
        kernargs: Vec<u8>,
        mem: &mut isa::exec::Memory,
    ) -> Result<Vec<(u64, u64, u64)>, String> {
        let launch = isa::exec::Launch {
            descriptor: self.descriptor,
            packed_ids: self.packed_ids,
            block,
            grid_blocks: grid,
            block_id,
            thread_id: thread,
            kernargs,
            hidden_at: self.hidden_at,
        };
        self.prog.run(&launch, mem)
    }
}

/// ggml's RoPE kernel for one target, decoded for the interpreter.
struct RopeProgram(Executable);

fn rope_program(dir: &Path, target: &str) -> Result<RopeProgram, String> {
    Executable::load(dir, target, "rope", ROPE_KERNEL).map(RopeProgram)
}

impl RopeProgram {
    /// Runs the thread of `c` (`threadIdx.y = iw/2` of a block of 256, `blockIdx.x` the
    /// head) and returns its two stored outputs; the stores must be exactly the pair's
    /// two channels.
    fn run(&self, c: &RopeCase) -> Result<(f32, f32), String> {
        let hd = c.n_dims;
        let mut x = vec![0f32; 2 * hd];
        let (i0, i1) = (c.head * hd + c.iw / 2, c.head * hd + c.iw / 2 + hd / 2);
        x[i0] = c.x0;
        x[i1] = c.x1;
        let mut mem = isa::exec::Memory::default();
        mem.map(X_AT, x.iter().flat_map(|v| v.to_le_bytes()).collect());
        mem.map(DST_AT, vec![0u8; 8 * hd]);
        mem.map(POS_AT, c.pos.to_le_bytes().to_vec());
        let geometry = (
            [1, 256, 1],
            [2, (hd as u32).div_ceil(512), 1],
            [c.head as u32, 0, 0],
            [0, (c.iw / 2) as u32, 0],
        );
        let stores = self.0.run(geometry, rope_kernargs(c), &mut mem)?;
        let want = [DST_AT + 4 * i0 as u64, DST_AT + 4 * i1 as u64];
        let at: Vec<u64> = stores.iter().map(|s| s.0).collect();
        if at != want || stores.iter().any(|s| s.2 != 4) {
            return Err(format!(
                "{c:?}: stores at {at:x?}, expected one dword at each of {want:x?}"
            ));
        }
        Ok((f32::from_bits(stores[0].1 as u32), f32::from_bits(stores[1].1 as u32)))
    }
}

/// The cases: every pair of a Qwen3 head (128 channels, base 1e6) and of a 64-channel
/// head with base 1e4 at positions from 0 to past 2^17 (where `sinf`/`cosf` switch to
/// the Payne-Hanek reduction) and negative ones; then random frequency bases, scales,
/// positions up to 2^26 and `attn_factor`s.
fn rope_cases() -> Vec<RopeCase> {
    let mut rng = tiercheck_core::rng::Rng::new(0x005E_ED0F_0C31);
    let mut out = Vec::new();
    let x = |rng: &mut tiercheck_core::rng::Rng| rng.range(-4.0, 4.0);
    for (n_dims, base, positions) in [
        (
            128usize,
            1e6f32,
            &[
                0, 1, 2, 3, 17, 100, 255, 1000, 4095, 8191, 16384, 32767, 40959, 131071, 131072,
                262147, 1_000_003, -1, -300_001,
            ][..],
        ),
        (64, 1e4, &[0, 5, 511, 2048, 100_000, 2_000_000, -77][..]),
    ] {
        let theta_scale = base.powf(-2.0 / n_dims as f32);
        for (k, &pos) in positions.iter().enumerate() {
            for p in 0..n_dims / 2 {
                let (x0, x1) = (x(&mut rng), x(&mut rng));
                out.push(RopeCase {
                    pos,
                    theta_scale,
                    n_dims,
                    iw: 2 * p,
                    head: k % 2,
                    freq_scale: 1.0,
                    attn_factor: 1.0,
                    x0,
                    x1,
                });
            }
        }
    }
    for _ in 0..1500 {
        let base = 2f32.powf(rng.range(1.0, 24.0));
        let pos_bits = rng.below(27) as u32;
        let pos = (rng.next_u64() % (1u64 << pos_bits)) as i32;
        let pos = if rng.below(8) == 0 { -pos } else { pos };
        out.push(RopeCase {
            pos,
            theta_scale: base.powf(-2.0 / 128.0),
            n_dims: 128,
            iw: 2 * rng.below(64) as usize,
            head: rng.below(2) as usize,
            freq_scale: 2f32.powf(rng.range(-2.0, 2.0)),
            attn_factor: rng.range(0.5, 2.0),
            x0: x(&mut rng),
            x1: x(&mut rng),
        });
    }
    out
}

/// `ggml <target> rope executes`: every case's two stored outputs equal the twin's bit
/// for bit; and the check can tell: the other rotation forms and the CPU's angles
/// (glibc `cosf`/`sinf` of the CPU's cache at `freq_scale = attn_factor = 1`) each
/// differ from ggml's outputs somewhere.
fn check_rope_exec(dir: &Path, target: &str) -> Result<(), String> {
    use tiercheck_core::gpu::ocml;
    let prog = rope_program(dir, target)?;
    let cases = rope_cases();
    let mut bad = Vec::new();
    let (mut other_forms, mut cpu_angles, mut large) = ([0usize; 2], 0usize, 0usize);
    for c in &cases {
        let (y0, y1) = prog.run(c)?;
        let (t0, t1) = ocml::rope_pair_hip(
            c.x0,
            c.x1,
            c.pos,
            c.theta_scale,
            c.iw as i32,
            c.freq_scale,
            c.attn_factor,
        );
        if (y0.to_bits(), y1.to_bits()) != (t0.to_bits(), t1.to_bits()) {
            bad.push(format!("{c:?}: ggml ({y0:e}, {y1:e}), twin ({t0:e}, {t1:e})"));
        }
        // The same angles with the other rotations.
        let theta = c.freq_scale * (c.pos as f32 * ocml::powf(c.theta_scale, c.iw as f32 * 0.5));
        large += usize::from(theta.abs() >= 131072.0);
        let (s, co) = ocml::sincosf(theta);
        let (s, co) = (s * c.attn_factor, co * c.attn_factor);
        for (k, rot) in [RopeRotation::FuseX0, RopeRotation::Unfused].into_iter().enumerate() {
            let mut h = [c.x0, c.x1];
            tiercheck_core::elem::rope_neox(&mut h, &[[co, s]], rot);
            other_forms[k] +=
                usize::from((h[0].to_bits(), h[1].to_bits()) != (y0.to_bits(), y1.to_bits()));
        }
        if c.freq_scale == 1.0 && c.attn_factor == 1.0 {
            let base = c.theta_scale.powf(-(c.n_dims as f32) / 2.0);
            let cpu = tiercheck_core::elem::rope_cache(c.pos, c.n_dims, base)[c.iw / 2];
            let mut h = [c.x0, c.x1];
            tiercheck_core::elem::rope_neox(&mut h, &[cpu], RopeRotation::FuseCos);
            cpu_angles +=
                usize::from((h[0].to_bits(), h[1].to_bits()) != (y0.to_bits(), y1.to_bits()));
        }
    }
    if !bad.is_empty() {
        return Err(format!(
            "{target}: {} of {} RoPE threads differ from gpu::ocml::rope_pair_hip:\n  {}",
            bad.len(),
            cases.len(),
            bad[..bad.len().min(8)].join("\n  ")
        ));
    }
    if other_forms.contains(&0) || cpu_angles == 0 || large == 0 {
        return Err(format!(
            "{target}: the check cannot tell: outputs differing from the x0-fused rotation \
             {}, from the unfused one {}, from the CPU's angles {cpu_angles}; angles past \
             2^17 {large}",
            other_forms[0], other_forms[1]
        ));
    }
    Ok(())
}

fn rope_exec_trial(target: &'static str) -> Trial {
    let name = format!("ggml {target} rope executes");
    match target_dir::<Amd>(target) {
        Ok(dir) => Trial::test(name, move || check_rope_exec(&dir, target).map_err(Into::into)),
        Err(why) => unavailable(name, why),
    }
}

// ---------------------------------------------------------------------------------
// HIP's SwiGLU executed: every condition of the device `expf`'s cut-offs, which the
// trees show only as opaque selects.

/// `unary_gated_op_kernel<op_silu, float>` as hipcc names it.
const SWIGLU_KERNEL: &str = "_ZL21unary_gated_op_kernelIXadL_ZL7op_silufEEfEvPKT0_S2_PS0_llll";

/// The values SwiGLU's `x` takes here: around both cut-offs of `1 + expf(-x)` (the
/// device `expf`'s 88.72 and -103.28, one and two ulps either side), subnormals, zeros,
/// infinities, NaN, and 2,000 random values of magnitudes from 2^-20 to 2^8.
fn swiglu_inputs() -> Vec<f32> {
    let mut xs = Vec::new();
    for edge in [0x42B1_7218u32, 0x42CE_8ED0] {
        for d in -2i32..=2 {
            let e = f32::from_bits((edge as i32 + d) as u32);
            xs.extend([e, -e]);
        }
    }
    xs.extend([0.0, -0.0, 1e-40, -1e-40, f32::MIN_POSITIVE, 1e30, -1e30]);
    xs.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    let mut rng = tiercheck_core::rng::Rng::new(0x5A16);
    for _ in 0..2000 {
        let m = 2f32.powf(rng.range(-20.0, 8.0));
        xs.push(if rng.below(2) == 0 { m } else { -m });
    }
    xs
}

/// `ggml <target> swiglu executes`: ggml's SwiGLU, one work-item per element of one
/// row, stores `gpu::elem::swiglu(GpuMath::Hip, ..)`'s bits (both NaN where the input
/// is); and the check can tell: the CUDA form differs somewhere.
fn check_swiglu_exec(dir: &Path, target: &str) -> Result<(), String> {
    const X_AT: u64 = 0x10_0000;
    const G_AT: u64 = 0x20_0000;
    const DST_AT: u64 = 0x30_0000;
    let exe = Executable::load(dir, target, "unary", SWIGLU_KERNEL)?;
    let xs = swiglu_inputs();
    let n = xs.len();
    let mut rng = tiercheck_core::rng::Rng::new(0x6A7E);
    let gs: Vec<f32> = (0..n).map(|_| rng.range(-3.0, 3.0)).collect();
    let mut args = vec![0u8; 128];
    for (o, v) in [(0, X_AT), (8, G_AT), (16, DST_AT)] {
        args[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }
    // k = n elements of one row of n, both operands at the same offsets (o0 = o1 = n).
    for o in [24, 32, 40, 48] {
        args[o..o + 8].copy_from_slice(&(n as i64).to_le_bytes());
    }
    let mut mem = isa::exec::Memory::default();
    mem.map(X_AT, xs.iter().flat_map(|v| v.to_le_bytes()).collect());
    mem.map(G_AT, gs.iter().flat_map(|v| v.to_le_bytes()).collect());
    mem.map(DST_AT, vec![0u8; 4 * n]);
    let (mut bad, mut cuda_differs) = (Vec::new(), 0usize);
    let blocks = (n as u32).div_ceil(256);
    for i in 0..n {
        let geometry =
            ([256, 1, 1], [blocks, 1, 1], [i as u32 / 256, 0, 0], [i as u32 % 256, 0, 0]);
        let stores = exe.run(geometry, args.clone(), &mut mem)?;
        let [(at, bits, 4)] = stores[..] else {
            return Err(format!("{target}: element {i}: stores {stores:x?}, expected one dword"));
        };
        if at != DST_AT + 4 * i as u64 {
            return Err(format!("{target}: element {i} stored at {at:#x}"));
        }
        let y = f32::from_bits(bits as u32);
        let mut t = [0f32];
        swiglu(GpuMath::Hip, &mut t, &xs[i..=i], &gs[i..=i]);
        let same = y.to_bits() == t[0].to_bits() || (y.is_nan() && t[0].is_nan());
        if !same {
            bad.push(format!(
                "x = {:e} ({:#010x}), g = {:e}: ggml {y:e}, twin {:e}",
                xs[i],
                xs[i].to_bits(),
                gs[i],
                t[0]
            ));
        }
        let mut c = [0f32];
        swiglu(GpuMath::Cuda, &mut c, &xs[i..=i], &gs[i..=i]);
        cuda_differs +=
            usize::from(c[0].to_bits() != y.to_bits() && !(c[0].is_nan() && y.is_nan()));
    }
    if !bad.is_empty() {
        return Err(format!(
            "{target}: {} of {n} SwiGLU elements differ from gpu::elem::swiglu(Hip):\n  {}",
            bad.len(),
            bad[..bad.len().min(8)].join("\n  ")
        ));
    }
    if cuda_differs == 0 {
        return Err(format!(
            "{target}: the CUDA form matches everywhere too: the check cannot tell"
        ));
    }
    Ok(())
}

fn swiglu_exec_trial(target: &'static str) -> Trial {
    let name = format!("ggml {target} swiglu executes");
    match target_dir::<Amd>(target) {
        Ok(dir) => Trial::test(name, move || check_swiglu_exec(&dir, target).map_err(Into::into)),
        Err(why) => unavailable(name, why),
    }
}
