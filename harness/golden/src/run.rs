//! Running one kernel case on one lane implementation.

use tiercheck_core::lane::Arch;
use tiercheck_core::{GgmlType, Kernels, Lane, WeightMatrix};

use tiercheck_core::elem::{self, ElemOps};
use tiercheck_core::gpu::MmvfAcc;

use super::cases::{Case, ElemKind, Input, Op};
use super::output::Output;
use super::store::Inputs;

/// The weight type whose activation rule produces `fmt` on `lane`, if any: Q4_K stands
/// for the K-quant family, Q4_0 for the legacy family.
fn family_for_format(lane: &Lane, fmt: GgmlType) -> Option<GgmlType> {
    if lane.recipe.act_k.format() == fmt {
        Some(GgmlType::Q4_K)
    } else if lane.recipe.act_legacy.format() == fmt {
        Some(GgmlType::Q4_0)
    } else {
        None
    }
}

/// `ref`'s answer to `case`: the `ref` lane's output, or, for quantizing to a format
/// whose rule `ref` does not use as its activation rule (q8_1), ggml's reference
/// quantizer of that format (`quantize_row_q8_1_ref`).
///
/// `None` for an elementwise kernel only GPU flavours have ([`ElemKind::gpu_only`]),
/// which is checked against its exact answer alone.
pub fn reference_output(case: &Case, inputs: &Inputs) -> Result<Option<Output>, String> {
    if matches!(case.op, Op::Elem(kind) if kind.gpu_only()) {
        return Ok(None);
    }
    let reference = tiercheck_lanes::find("ref")?;
    if let Op::Quantize(fmt) = case.op {
        if family_for_format(reference, fmt).is_none() {
            let rule = match fmt {
                GgmlType::Q8_1 => tiercheck_core::quant::ActRule::Q8_1Ref,
                GgmlType::Q8_0 => tiercheck_core::quant::ActRule::Q8_0Ref,
                _ => tiercheck_core::quant::ActRule::Q8KRef,
            };
            let x = f32_input(inputs, case.activation_input().as_deref().unwrap_or_default())?;
            let data = rule.quantize(x).map_err(|e| e.to_string())?;
            return Ok(Some(Output::Blocks { ty: fmt, data }));
        }
    }
    run_case(reference, reference.portable, case, inputs).map(Some)
}

/// Whether `lane` has this case at all (a lane whose activation rule produces another
/// format, or that does not multiply this weight type, has no trial for it). A GPU lane
/// multiplies every column through the same MMVQ kernel (one column, one output per
/// row), so of the [`crate::cases::more_types`] it has only the gemv cases
/// [`crate::cases::GPU_MORE_GEMV`] names (golden/'s size budget): its vec_dot is a gemv
/// of one row, its gemm one gemv per column.
pub fn applicable(lane: &Lane, case: &Case) -> bool {
    let gpu = matches!(lane.arch, Arch::AmdGpu | Arch::NvidiaGpu);
    match case.op {
        Op::Quantize(fmt) => family_for_format(lane, fmt).is_some(),
        Op::Dequantize(_) => true,
        Op::VecDot(t) | Op::Gemv(t) | Op::Gemm(t)
            if gpu && !crate::cases::WEIGHT_TYPES.contains(&t) =>
        {
            matches!(case.op, Op::Gemv(_))
                && case.index == 0
                && crate::cases::GPU_MORE_GEMV.contains(&(case.k, case.n))
                && lane.portable.act_rule(t).is_ok()
        }
        Op::VecDot(t) | Op::Gemv(t) | Op::Gemm(t) => lane.portable.act_rule(t).is_ok(),
        Op::Elem(kind) => !kind.gpu_only() || lane.recipe.elem.mmvf().is_some(),
    }
}

/// The RoPE position of an elementwise case (varies with the case index).
pub fn rope_pos(case: &Case) -> i32 {
    3 + 17 * case.index as i32
}

/// The input rows of an elementwise case.
pub fn elem_rows<'a>(case: &Case, inputs: &'a Inputs) -> Result<Vec<&'a [f32]>, String> {
    if let Some((kv, q)) = case.attention_inputs() {
        let (kv, q) = (f32_input(inputs, &kv)?, f32_input(inputs, &q)?);
        return crate::cases::attention_operands(case, kv, q)
            .map(|r| r.to_vec())
            .ok_or_else(|| format!("{}: its input tensors are too short", case.name));
    }
    let x = f32_input(inputs, case.activation_input().as_deref().unwrap_or_default())?;
    if x.len() != case.m * case.k {
        return Err(format!(
            "input of {} has {} values, want {}",
            case.name,
            x.len(),
            case.m * case.k
        ));
    }
    Ok(x.chunks(case.k.max(1)).collect())
}

/// Run an elementwise case with `ops` (a flavour's portable or native kernels). Outputs:
/// soft_max its k values and the f64 sum as two f32 (`hi = sum as f32`, `lo = (sum -
/// hi) as f32`); soft_max_row, swiglu, rms_norm and rope their k values; the dots one
/// value.
pub fn run_elem(ops: &dyn ElemOps, case: &Case, inputs: &Inputs) -> Result<Output, String> {
    let Op::Elem(kind) = case.op else { return Err(format!("{} is not elementwise", case.name)) };
    let rows = elem_rows(case, inputs)?;
    let k = case.k;
    let data = match kind {
        ElemKind::SoftMax => {
            let x = rows[0];
            let max = x.iter().copied().fold(f32::NEG_INFINITY, |a, b| if a > b { a } else { b });
            let mut y = vec![0.0f32; k];
            let sum = ops.soft_max(&mut y, x, max);
            let hi = sum as f32;
            y.push(hi);
            y.push((sum - hi as f64) as f32);
            y
        }
        ElemKind::SoftMaxRow => {
            let mut y = vec![0.0f32; k];
            ops.soft_max_row(&mut y, &crate::cases::soft_max_row_scores(rows[0]));
            y
        }
        ElemKind::SwiGlu => {
            let mut y = vec![0.0f32; k];
            ops.swiglu(&mut y, rows[0], rows[1]);
            y
        }
        ElemKind::DotF32 => vec![ops.dot_f32(rows[0], rows[1])],
        ElemKind::SgemmDot => vec![ops.sgemm_dot(rows[0], rows[1])],
        ElemKind::RmsNorm => {
            let mut y = vec![0.0f32; k];
            ops.rms_norm_mul(&mut y, rows[0], rows[1], 1e-6);
            y
        }
        ElemKind::MmvfF32 | ElemKind::MmvfF16 => {
            let fl = ops.flavour();
            let cfg = fl
                .mmvf()
                .ok_or_else(|| format!("{}: the {} flavour has no MMVF", case.name, fl.name()))?;
            let acc = if kind == ElemKind::MmvfF16 { MmvfAcc::F16 } else { MmvfAcc::F32 };
            let (x, y) = crate::cases::mmvf_operands(kind, &rows);
            vec![cfg.dot(acc, &x, &y)]
        }
        ElemKind::Rope => {
            let mut y = rows[0].to_vec();
            let fl = ops.flavour();
            elem::rope_neox(&mut y, &fl.rope_cache(rope_pos(case), k, 1e6), fl.rope_rotation());
            y
        }
        ElemKind::AttnFaChunk
        | ElemKind::AttnFaSplit2
        | ElemKind::AttnFaSplit4
        | ElemKind::AttnFaTiled
        | ElemKind::AttnF32
        | ElemKind::AttnF16 => {
            let (n_head, n_head_kv, head_dim) = crate::cases::ATTN_GEOMETRY;
            let c = tiercheck_model::attention::AttnCase {
                n_head,
                n_head_kv,
                head_dim,
                n_ctx: 512,
                attn: kind.attention().expect("an attention kind"),
                cells: k,
                k: rows[0],
                v: rows[1],
                q: rows[2],
                m: case.m,
            };
            tiercheck_model::attention::attend_case(ops, &c).map_err(|e| e.to_string())?
        }
    };
    let n = data.len();
    Ok(Output::F32 { shape: vec![n], data })
}

fn f32_input<'a>(inputs: &'a Inputs, name: &str) -> Result<&'a [f32], String> {
    match inputs.get(name) {
        Some(Input::F32 { data, .. }) => Ok(data),
        Some(_) => Err(format!("input {name} is not f32")),
        None => Err(format!("input {name} missing; regenerate with `tiercheck golden gen-inputs`")),
    }
}

fn block_input<'a>(inputs: &'a Inputs, name: &str) -> Result<&'a [u8], String> {
    match inputs.get(name) {
        Some(Input::Blocks { data, .. }) => Ok(data),
        Some(_) => Err(format!("input {name} is not block bytes")),
        None => Err(format!("input {name} missing; regenerate with `tiercheck golden gen-inputs`")),
    }
}

/// The activation quantized by `kernels` for weights of `wtype`, as the lane would.
pub(crate) fn quantized_activation(
    kernels: &dyn Kernels,
    wtype: GgmlType,
    x: &[f32],
) -> Result<Vec<u8>, String> {
    kernels.quantize_act(wtype, x).map_err(|e| e.to_string())
}

/// Run `case` with `kernels` (an implementation of `lane`). NaN values of f32 outputs
/// are canonicalized to `0x7FC00000`: the sign and payload of a NaN that an operation
/// *generates* (inf - inf, 0 * inf) differ between architectures (x86's default NaN is
/// `0xFFC00000`, aarch64's `0x7FC00000`), so they are not part of any lane's contract;
/// every other bit is.
pub fn run_case(
    lane: &Lane,
    kernels: &dyn Kernels,
    case: &Case,
    inputs: &Inputs,
) -> Result<Output, String> {
    Ok(match run_case_raw(lane, kernels, case, inputs)? {
        Output::F32 { shape, data } => Output::F32 {
            shape,
            data: data
                .into_iter()
                .map(|v| if v.is_nan() { f32::from_bits(0x7FC0_0000) } else { v })
                .collect(),
        },
        blocks => blocks,
    })
}

fn run_case_raw(
    lane: &Lane,
    kernels: &dyn Kernels,
    case: &Case,
    inputs: &Inputs,
) -> Result<Output, String> {
    let x_name = case.activation_input();
    let w_name = case.weight_input();
    match case.op {
        Op::Elem(_) => run_elem(elem::portable(lane.recipe.elem), case, inputs),
        Op::Quantize(fmt) => {
            let family = family_for_format(lane, fmt)
                .ok_or_else(|| format!("lane {} has no {} activations", lane.name, fmt.name()))?;
            let x = f32_input(inputs, x_name.as_deref().unwrap_or_default())?;
            let data = kernels.quantize_act(family, x).map_err(|e| e.to_string())?;
            Ok(Output::Blocks { ty: fmt, data })
        }
        Op::Dequantize(ty) => {
            let w = block_input(inputs, w_name.as_deref().unwrap_or_default())?;
            let mut out = vec![0.0f32; case.n * case.k];
            kernels.dequantize(ty, w, &mut out).map_err(|e| e.to_string())?;
            Ok(Output::F32 { shape: vec![case.n, case.k], data: out })
        }
        Op::VecDot(ty) => {
            let w = block_input(inputs, w_name.as_deref().unwrap_or_default())?;
            let x = f32_input(inputs, x_name.as_deref().unwrap_or_default())?;
            let act = quantized_activation(kernels, ty, x)?;
            let s = kernels.vec_dot(ty, w, &act).map_err(|e| e.to_string())?;
            Ok(Output::F32 { shape: vec![1], data: vec![s] })
        }
        Op::Gemv(ty) | Op::Gemm(ty) => {
            let w = block_input(inputs, w_name.as_deref().unwrap_or_default())?;
            let x = f32_input(inputs, x_name.as_deref().unwrap_or_default())?;
            let wm = WeightMatrix::new(ty, case.n, case.k, w).map_err(|e| e.to_string())?;
            let y = kernels.matmul(&wm, x, case.m).map_err(|e| e.to_string())?;
            Ok(Output::F32 { shape: vec![case.m, case.n], data: y })
        }
    }
}
