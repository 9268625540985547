//! Quantizing a whole GGUF model: which tensors, to which type, with the reference
//! quantizers of `tiercheck-core`.
//!
//! Eligible tensors are those llama.cpp's `llama-quantize` would touch in these
//! schemes: names ending in `weight` with at least two dimensions, stored as F32, F16
//! or BF16. Everything else (norms, biases, 1-D tensors) is copied unchanged, and all
//! metadata is kept except `general.file_type` and `general.quantization_version`,
//! which are set for the result.
//!
//! Schemes:
//! - uniform: every eligible tensor gets one type, named `uniform:<type>` for any
//!   quantizable type, or by the type's name alone (`q4_0`, `q4_1`, `q5_0`, `q5_1`,
//!   `q8_0`, `q3_k`, `q4_k`, `q5_k`, `q6_k`, `iq4_nl`) except where that name is one of
//!   llama-quantize's mixes below;
//! - the mixes `q2_k`, `q3_k_m`, `q4_k_m`, `q5_k_m` and `iq4_xs` (llama-quantize's
//!   `Q2_K`, `Q3_K_M`, `Q4_K_M`, `Q5_K_M`, `IQ4_XS`), following `llama_tensor_get_type_impl` (llama.cpp
//!   `llama-quant.cpp`) without an importance matrix, for any architecture but Falcon and
//!   Llama-70B-class models, whose rules differ and are refused. The default type is the scheme's (Q2_K, Q3_K, Q4_K, Q5_K, IQ4_XS);
//!   `output.weight` is Q6_K (`token_embd.weight` too when there is no `output.weight`,
//!   tied embeddings), Q8_0 when its rows are not whole blocks of the default type;
//!   attn_v: Q2_K -> Q4_K when n_head/n_head_kv >= 4 else Q3_K, Q3_K_M -> Q5_K for the
//!   first two attn_v tensors else Q4_K, IQ4_XS -> Q5_K when n_head/n_head_kv >= 4,
//!   Q4_K_M and Q5_K_M -> Q6_K on the "more bits" layers; ffn_down: Q2_K -> Q3_K, Q3_K_M
//!   -> Q5_K for i < n/16 else Q4_K, IQ4_XS -> Q5_K for i < n/8, Q4_K_M and Q5_K_M -> Q6_K
//!   on the "more bits" layers; attn_output: Q2_K -> Q3_K, Q3_K_M -> Q4_K. "More bits":
//!   `use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2`, counting each
//!   kind's tensors in file order (a mixture-of-experts model: ffn_down by the layer in
//!   its name, one expert tensor per layer). With exactly 8 experts (llama.cpp's rule for
//!   Mixtral-like models) attn_v and attn_k are Q8_0 and attn_output Q5_K in every mix.
//!   The expert router (`ffn_gate_inp.weight`) is never quantized.
//!
//! A row length that is not a whole number of blocks falls back as llama.cpp's
//! `tensor_type_fallback` does: Q2_K and Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
//! Q8_0, IQ4_XS -> IQ4_NL; where the fallback does not fit either (llama.cpp then writes
//! F16) the tensor is an error naming it.

use std::path::Path;

use tiercheck_core::blocks::dequantize;
use tiercheck_core::quant::weights;
use tiercheck_core::GgmlType;

use tiercheck_gguf::{GgufError, GgufFile, GgufWriter, MetaValue};

/// A quantization scheme for a whole model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Every eligible tensor to one type.
    Uniform(GgmlType),
    /// llama.cpp's Q2_K mix (`LLAMA_FTYPE_MOSTLY_Q2_K`).
    Q2K,
    /// llama.cpp's Q3_K_M mix.
    Q3KM,
    /// llama.cpp's Q4_K_M mix.
    Q4KM,
    /// llama.cpp's Q5_K_M mix.
    Q5KM,
    /// llama.cpp's IQ4_XS mix (`LLAMA_FTYPE_MOSTLY_IQ4_XS`).
    IQ4XS,
}

/// The names [`Scheme::parse`] accepts, for messages.
pub const SCHEME_NAMES: &str = "q2_k, q3_k_m, q4_k_m, q5_k_m, iq4_xs (llama.cpp's mixes); \
     q4_0, q4_1, q5_0, q5_1, q8_0, q3_k, q4_k, q5_k, q6_k, iq4_nl or uniform:<type> (one type \
     for every weight)";

impl Scheme {
    /// Parse a scheme name ([`SCHEME_NAMES`], case-insensitive).
    pub fn parse(s: &str) -> Option<Scheme> {
        let s = s.to_ascii_lowercase();
        let uniform = |name: &str| {
            let ty = GgmlType::from_name(name)?;
            weights::QUANTIZABLE.contains(&ty).then_some(Scheme::Uniform(ty))
        };
        match s.as_str() {
            "q2_k" => Some(Scheme::Q2K),
            "q3_k_m" => Some(Scheme::Q3KM),
            "q4_k_m" => Some(Scheme::Q4KM),
            "q5_k_m" => Some(Scheme::Q5KM),
            "iq4_xs" => Some(Scheme::IQ4XS),
            _ => uniform(s.strip_prefix("uniform:").unwrap_or(&s)),
        }
    }

    /// The type of the tensors no rule singles out.
    pub fn default_type(self) -> GgmlType {
        match self {
            Scheme::Uniform(ty) => ty,
            Scheme::Q2K => GgmlType::Q2_K,
            Scheme::Q3KM => GgmlType::Q3_K,
            Scheme::Q4KM => GgmlType::Q4_K,
            Scheme::Q5KM => GgmlType::Q5_K,
            Scheme::IQ4XS => GgmlType::IQ4_XS,
        }
    }

    /// llama.cpp's `llama_ftype` for `general.file_type` (a uniform K-quant without an
    /// ftype of its own takes its `_S` mix's label, as the closest).
    pub(crate) fn file_type(self) -> u32 {
        match self {
            Scheme::Uniform(ty) => match ty {
                GgmlType::Q4_0 => 2,
                GgmlType::Q4_1 => 3,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q5_1 => 9,
                GgmlType::Q2_K => 21, // Q2_K_S
                GgmlType::Q3_K => 11, // Q3_K_S
                GgmlType::Q4_K => 14, // Q4_K_S
                GgmlType::Q5_K => 16, // Q5_K_S
                GgmlType::IQ4_NL => 25,
                GgmlType::IQ4_XS => 30,
                _ => 18, // Q6_K
            },
            Scheme::Q2K => 10,
            Scheme::Q3KM => 12,
            Scheme::Q4KM => 15,
            Scheme::Q5KM => 17,
            Scheme::IQ4XS => 30,
        }
    }
}

/// What the mixes need to know of the model besides its tensors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelFacts {
    /// `general.architecture`.
    pub arch: Option<String>,
    /// `n_head / n_head_kv` (llama.cpp's `n_gqa()`).
    pub n_gqa: Option<u32>,
    /// `<arch>.expert_count` (absent: 1).
    pub n_expert: u32,
    /// `<arch>.block_count`.
    pub n_layer: Option<u32>,
}

impl ModelFacts {
    /// The facts in a GGUF file's metadata.
    pub fn of(file: &GgufFile) -> ModelFacts {
        let arch = file.get("general.architecture").and_then(|v| v.as_str()).map(String::from);
        let num = |key: &str| -> Option<u32> {
            let a = arch.as_deref()?;
            file.get(&format!("{a}.{key}"))
                .and_then(|v| v.to_u64())
                .and_then(|v| u32::try_from(v).ok())
        };
        // No head_count_kv key: one kv head per head (llama.cpp's default). A key that is
        // not one integer (a per-layer array) leaves n_gqa unknown.
        let kv_key = arch.as_deref().map(|a| format!("{a}.attention.head_count_kv"));
        let has_kv = kv_key.is_some_and(|k| file.get(&k).is_some());
        let n_gqa = match (num("attention.head_count"), num("attention.head_count_kv")) {
            (Some(h), Some(kv)) if kv > 0 => Some(h / kv),
            (Some(_), None) if !has_kv => Some(1),
            _ => None,
        };
        ModelFacts {
            n_gqa,
            n_expert: num("expert_count").unwrap_or(1).max(1),
            n_layer: num("block_count"),
            arch,
        }
    }
}

/// What happens to one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    /// Tensor name.
    pub name: String,
    /// Type in the input.
    pub from: GgmlType,
    /// Type in the output (equal to `from` when copied).
    pub to: GgmlType,
    /// Why, in a few words.
    pub reason: String,
}

/// Errors of model quantization.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    /// Reading or writing GGUF failed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The model cannot be quantized with the scheme asked for.
    #[error("{path}: {problem}")]
    Model {
        /// The input file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// A tensor cannot be quantized as asked.
    #[error("{path}: tensor '{tensor}': {problem}")]
    Tensor {
        /// The input file.
        path: String,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        problem: String,
    },
}

/// The layer of a `blk.N.` tensor name.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64) % 3 == 2
}

fn eligible(name: &str, dims: &[u64]) -> bool {
    name.ends_with("weight") && dims.len() >= 2 && !name.contains("ffn_gate_inp.weight")
}

/// Decide the output type of every tensor.
pub fn plan(file: &GgufFile, scheme: Scheme) -> Result<Vec<TensorPlan>, QuantizeError> {
    let decls: Vec<TensorDecl> = file
        .tensors()
        .iter()
        .map(|t| TensorDecl { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty })
        .collect();
    plan_tensors(file.path(), &decls, scheme, &ModelFacts::of(file))
}

/// A tensor as [`plan_tensors`] sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorDecl {
    /// Its name.
    pub name: String,
    /// ggml dims, ne0 first.
    pub dims: Vec<u64>,
    /// Its type in the input.
    pub ty: GgmlType,
}

/// [`plan`] for a list of tensors (in file order) of a model with `facts`; `path` names
/// the file in errors.
pub fn plan_tensors(
    path: &str,
    tensors: &[TensorDecl],
    scheme: Scheme,
    facts: &ModelFacts,
) -> Result<Vec<TensorPlan>, QuantizeError> {
    let refuse = |problem: String| QuantizeError::Model { path: path.to_string(), problem };
    let eight_experts = facts.n_expert == 8;
    if !matches!(scheme, Scheme::Uniform(_)) {
        match facts.arch.as_deref() {
            Some("falcon") => {
                return Err(refuse(
                    "Falcon has mix rules of its own that tiercheck does not \
                                   reproduce; use a uniform scheme"
                        .into(),
                ))
            }
            Some("llama") if facts.n_layer == Some(80) => {
                return Err(refuse(
                    "an 80-layer llama is llama.cpp's 70B class, whose attn_v \
                                   rule tiercheck does not reproduce; use a uniform scheme"
                        .into(),
                ))
            }
            _ => {}
        }
    }
    let n_gqa = || {
        facts.n_gqa.ok_or_else(|| {
            refuse(format!(
                "the {scheme:?} mix depends on n_head/n_head_kv, and the metadata has no \
                 <arch>.attention.head_count"
            ))
        })
    };
    let has_output = tensors.iter().any(|t| t.name == "output.weight");
    let n_attn_v = tensors.iter().filter(|t| t.name.contains("attn_v.weight")).count();
    let n_ffn_down = tensors.iter().filter(|t| t.name.contains("ffn_down")).count();
    let (mut i_attn_v, mut i_ffn_down) = (0usize, 0usize);
    let mut plans = Vec::with_capacity(tensors.len());
    for t in tensors {
        let copy = |reason: &str| TensorPlan {
            name: t.name.clone(),
            from: t.ty,
            to: t.ty,
            reason: reason.to_string(),
        };
        if !eligible(&t.name, &t.dims) {
            plans.push(copy("kept (not a 2-D weight)"));
            continue;
        }
        if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
            return Err(QuantizeError::Tensor {
                path: path.to_string(),
                tensor: t.name.clone(),
                problem: format!(
                    "already {}; tiercheck quantizes from f32, f16 or bf16 only",
                    t.ty.name()
                ),
            });
        }
        if t.name.contains("attn_qkv") && !matches!(scheme, Scheme::Uniform(_)) {
            return Err(QuantizeError::Tensor {
                path: path.to_string(),
                tensor: t.name.clone(),
                problem: "a fused attn_qkv tensor: its rules in llama.cpp's mixes are not \
                          reproduced"
                    .to_string(),
            });
        }
        let default = scheme.default_type();
        let is_output = t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
        let (mut to, mut reason) = if let Scheme::Uniform(ty) = scheme {
            (ty, "uniform".to_string())
        } else if is_output {
            if (t.dims[0] as usize).is_multiple_of(default.block_size()) {
                (GgmlType::Q6_K, "output".to_string())
            } else {
                (GgmlType::Q8_0, "output, rows not whole blocks".to_string())
            }
        } else if t.name.contains("attn_v.weight") {
            let (i, n) = (i_attn_v, n_attn_v);
            i_attn_v += 1;
            let ty = match scheme {
                Scheme::Q2K if n_gqa()? >= 4 => GgmlType::Q4_K,
                Scheme::Q2K => GgmlType::Q3_K,
                Scheme::Q3KM if i < 2 => GgmlType::Q5_K,
                Scheme::Q3KM => GgmlType::Q4_K,
                Scheme::IQ4XS if n_gqa()? >= 4 => GgmlType::Q5_K,
                Scheme::Q4KM | Scheme::Q5KM if use_more_bits(i, n) => GgmlType::Q6_K,
                _ => default,
            };
            let ty = if eight_experts { GgmlType::Q8_0 } else { ty };
            (ty, format!("attn_v {i} of {n}"))
        } else if t.name.contains("attn_k.weight") && eight_experts {
            (GgmlType::Q8_0, "attn_k, 8 experts".to_string())
        } else if t.name.contains("ffn_down") {
            let (mut i, n) = (i_ffn_down, n_ffn_down);
            i_ffn_down += 1;
            if facts.n_expert > 1 {
                // llama.cpp reads the layer from the name (experts may be out of order).
                i = layer_of(&t.name).ok_or_else(|| QuantizeError::Tensor {
                    path: path.to_string(),
                    tensor: t.name.clone(),
                    problem: "no layer number in the name (blk.N.)".into(),
                })?;
            }
            let ty = match scheme {
                Scheme::Q2K => GgmlType::Q3_K,
                Scheme::Q3KM if i < n / 16 => GgmlType::Q5_K,
                Scheme::Q3KM => GgmlType::Q4_K,
                Scheme::IQ4XS if i < n / 8 => GgmlType::Q5_K,
                Scheme::Q4KM | Scheme::Q5KM if use_more_bits(i, n) => GgmlType::Q6_K,
                _ => default,
            };
            (ty, format!("ffn_down {i} of {n}"))
        } else if t.name.contains("attn_output.weight") {
            let ty = match scheme {
                _ if eight_experts => GgmlType::Q5_K,
                Scheme::Q2K => GgmlType::Q3_K,
                Scheme::Q3KM => GgmlType::Q4_K,
                _ => default,
            };
            (ty, "attn_output".to_string())
        } else {
            (default, "default".to_string())
        };
        if to != default && !matches!(scheme, Scheme::Uniform(_)) {
            reason = format!("{reason} -> {}", to.name());
        }
        let ne0 = t.dims[0] as usize;
        if !ne0.is_multiple_of(to.block_size()) {
            let fallback = match to {
                GgmlType::Q2_K | GgmlType::Q3_K => Some(GgmlType::Q4_0),
                GgmlType::Q4_K => Some(GgmlType::Q5_0),
                GgmlType::Q5_K => Some(GgmlType::Q5_1),
                GgmlType::Q6_K => Some(GgmlType::Q8_0),
                GgmlType::IQ4_XS => Some(GgmlType::IQ4_NL),
                _ => None,
            }
            .filter(|f| ne0.is_multiple_of(f.block_size()));
            match fallback {
                Some(f) => {
                    reason = format!(
                        "{reason}; row length {ne0} not a multiple of {}, fell back",
                        to.block_size()
                    );
                    to = f;
                }
                None => {
                    return Err(QuantizeError::Tensor {
                        path: path.to_string(),
                        tensor: t.name.clone(),
                        problem: format!(
                            "row length {ne0} is not a multiple of {} (block size of {}), nor of \
                             its fallback's (llama.cpp would write F16, which tiercheck does not)",
                            to.block_size(),
                            to.name()
                        ),
                    })
                }
            }
        }
        plans.push(TensorPlan { name: t.name.clone(), from: t.ty, to, reason });
    }
    Ok(plans)
}

/// Quantize `input` into `out` (written atomically). Returns the plan that was applied.
pub fn quantize_file(
    input: &GgufFile,
    out: &Path,
    scheme: Scheme,
) -> Result<Vec<TensorPlan>, QuantizeError> {
    let (w, plans) = quantize(input, scheme)?;
    w.write_file(out)?;
    Ok(plans)
}

/// Quantize `input` in memory: the writer of the result (unwritten; tensors kept as they
/// are borrow from `input`) and the plan that was applied. [`quantize_file`] is this
/// followed by an atomic write.
pub fn quantize(
    input: &GgufFile,
    scheme: Scheme,
) -> Result<(GgufWriter<'_>, Vec<TensorPlan>), QuantizeError> {
    let plans = plan(input, scheme)?;
    let mut w = GgufWriter::new();
    w.set_version(input.version())?;
    for (k, v) in input.metadata() {
        if k == "general.file_type" || k == "general.quantization_version" {
            continue;
        }
        w.add_metadata(k.clone(), v.clone())?;
    }
    w.add_metadata("general.quantization_version", MetaValue::U32(2))?;
    w.add_metadata("general.file_type", MetaValue::U32(scheme.file_type()))?;
    for (t, p) in input.tensors().iter().zip(&plans) {
        let data = input.tensor_data(t);
        if p.to == p.from {
            w.add_tensor(t.name.clone(), &t.dims, t.ty, data)?;
            continue;
        }
        let n = t.n_elements() as usize;
        let mut values = vec![0.0f32; n];
        dequantize(t.ty, data, &mut values).map_err(|e| QuantizeError::Tensor {
            path: input.path().to_string(),
            tensor: t.name.clone(),
            problem: e.to_string(),
        })?;
        let ne0 = t.ne0() as usize;
        let q =
            weights::quantize(p.to, &values, n / ne0, ne0).map_err(|e| QuantizeError::Tensor {
                path: input.path().to_string(),
                tensor: t.name.clone(),
                problem: e.to_string(),
            })?;
        w.add_tensor(t.name.clone(), &t.dims, p.to, q)?;
    }
    Ok((w, plans))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A qwen3-like tensor list: `n` layers of attn_q/k/v/output and ffn_gate/up/down
    /// (rows of `row` values), norms, the embedding and an output.
    fn tensors(n: usize, row: u64) -> Vec<TensorDecl> {
        let mut t = vec![TensorDecl {
            name: "token_embd.weight".into(),
            dims: vec![row, 64],
            ty: GgmlType::F32,
        }];
        for l in 0..n {
            for k in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
            {
                t.push(TensorDecl {
                    name: format!("blk.{l}.{k}.weight"),
                    dims: vec![row, row],
                    ty: GgmlType::F32,
                });
            }
            t.push(TensorDecl {
                name: format!("blk.{l}.attn_norm.weight"),
                dims: vec![row],
                ty: GgmlType::F32,
            });
        }
        t.push(TensorDecl { name: "output.weight".into(), dims: vec![row, 64], ty: GgmlType::F32 });
        t
    }

    fn facts(n_gqa: u32) -> ModelFacts {
        ModelFacts {
            arch: Some("qwen3".into()),
            n_gqa: Some(n_gqa),
            n_expert: 1,
            n_layer: Some(16),
        }
    }

    /// The type of `name` in the plan.
    fn ty(plans: &[TensorPlan], name: &str) -> GgmlType {
        plans.iter().find(|p| p.name == name).unwrap().to
    }

    #[test]
    fn mixes_follow_the_rules_written_in_the_module_doc() {
        let t = tensors(16, 256);
        // Q3_K_M: attn_v Q5_K for the first two, then Q4_K; ffn_down Q5_K below n/16 = 1,
        // then Q4_K; attn_output Q4_K; the rest Q3_K; output Q6_K; norms kept.
        let p = plan_tensors("m", &t, Scheme::Q3KM, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.1.attn_v.weight"), GgmlType::Q5_K);
        assert_eq!(ty(&p, "blk.2.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(ty(&p, "blk.0.ffn_down.weight"), GgmlType::Q5_K);
        assert_eq!(ty(&p, "blk.1.ffn_down.weight"), GgmlType::Q4_K);
        assert_eq!(ty(&p, "blk.5.attn_output.weight"), GgmlType::Q4_K);
        assert_eq!(ty(&p, "blk.5.ffn_up.weight"), GgmlType::Q3_K);
        assert_eq!(ty(&p, "output.weight"), GgmlType::Q6_K);
        assert_eq!(ty(&p, "token_embd.weight"), GgmlType::Q3_K);
        assert_eq!(ty(&p, "blk.0.attn_norm.weight"), GgmlType::F32);
        // Q2_K: attn_v by n_gqa, ffn_down and attn_output Q3_K.
        let p = plan_tensors("m", &t, Scheme::Q2K, &facts(4)).unwrap();
        assert_eq!(ty(&p, "blk.9.attn_v.weight"), GgmlType::Q4_K);
        let p = plan_tensors("m", &t, Scheme::Q2K, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.9.attn_v.weight"), GgmlType::Q3_K);
        assert_eq!(ty(&p, "blk.9.ffn_down.weight"), GgmlType::Q3_K);
        assert_eq!(ty(&p, "blk.9.attn_output.weight"), GgmlType::Q3_K);
        assert_eq!(ty(&p, "blk.9.attn_q.weight"), GgmlType::Q2_K);
        // IQ4_XS: attn_v Q5_K when n_gqa >= 4; ffn_down Q5_K below n/8 = 2.
        let p = plan_tensors("m", &t, Scheme::IQ4XS, &facts(4)).unwrap();
        assert_eq!(ty(&p, "blk.3.attn_v.weight"), GgmlType::Q5_K);
        assert_eq!(ty(&p, "blk.1.ffn_down.weight"), GgmlType::Q5_K);
        assert_eq!(ty(&p, "blk.2.ffn_down.weight"), GgmlType::IQ4_XS);
        let p = plan_tensors("m", &t, Scheme::IQ4XS, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.3.attn_v.weight"), GgmlType::IQ4_XS);
        // Q5_K_M: the more-bits layers of 16: 0, 1, 4, 7, 10, 13, 14, 15.
        let p = plan_tensors("m", &t, Scheme::Q5KM, &facts(2)).unwrap();
        let six: Vec<usize> = (0..16)
            .filter(|l| ty(&p, &format!("blk.{l}.ffn_down.weight")) == GgmlType::Q6_K)
            .collect();
        assert_eq!(six, [0, 1, 4, 7, 10, 13, 14, 15]);
        assert_eq!(ty(&p, "blk.2.attn_q.weight"), GgmlType::Q5_K);
    }

    #[test]
    fn rows_that_are_not_whole_blocks_fall_back_as_llama_cpp() {
        // 32-value rows: Q4_K -> Q5_0, Q5_K -> Q5_1, Q3_K/Q2_K -> Q4_0, Q6_K -> Q8_0,
        // IQ4_XS -> IQ4_NL; the output (not whole blocks of the default) is Q8_0.
        let t = tensors(8, 96);
        let p = plan_tensors("m", &t, Scheme::Q4KM, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.2.attn_q.weight"), GgmlType::Q5_0);
        assert_eq!(ty(&p, "blk.0.attn_v.weight"), GgmlType::Q8_0);
        assert_eq!(ty(&p, "output.weight"), GgmlType::Q8_0);
        let p = plan_tensors("m", &t, Scheme::Q5KM, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.2.attn_q.weight"), GgmlType::Q5_1);
        let p = plan_tensors("m", &t, Scheme::Q3KM, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.2.attn_q.weight"), GgmlType::Q4_0);
        let p = plan_tensors("m", &t, Scheme::IQ4XS, &facts(2)).unwrap();
        assert_eq!(ty(&p, "blk.2.attn_q.weight"), GgmlType::IQ4_NL);
        // Rows of 48: no 32-value fallback fits either (llama.cpp would write F16).
        let e = plan_tensors("m.gguf", &tensors(8, 48), Scheme::Q4KM, &facts(2)).unwrap_err();
        assert!(e.to_string().contains("m.gguf: tensor 'token_embd.weight'"), "{e}");
    }

    /// With 8 experts (any mix): attn_v and attn_k Q8_0, attn_output Q5_K; ffn_down by the
    /// layer in its name; the router stays F32. With another count the dense rules hold.
    #[test]
    fn eight_expert_rules_and_the_router() {
        let mut t = tensors(8, 256);
        for l in 0..8 {
            t.push(TensorDecl {
                name: format!("blk.{l}.ffn_gate_inp.weight"),
                dims: vec![256, 8],
                ty: GgmlType::F32,
            });
        }
        for scheme in [Scheme::Q4KM, Scheme::Q2K, Scheme::IQ4XS] {
            let p = plan_tensors("m", &t, scheme, &ModelFacts { n_expert: 8, ..facts(2) }).unwrap();
            assert_eq!(ty(&p, "blk.3.attn_v.weight"), GgmlType::Q8_0);
            assert_eq!(ty(&p, "blk.3.attn_k.weight"), GgmlType::Q8_0);
            assert_eq!(ty(&p, "blk.3.attn_output.weight"), GgmlType::Q5_K);
            assert_eq!(ty(&p, "blk.3.ffn_gate_inp.weight"), GgmlType::F32);
        }
        let p =
            plan_tensors("m", &t, Scheme::Q4KM, &ModelFacts { n_expert: 8, ..facts(2) }).unwrap();
        assert_eq!(ty(&p, "blk.0.ffn_down.weight"), GgmlType::Q6_K);
        assert_eq!(ty(&p, "blk.1.ffn_down.weight"), GgmlType::Q4_K);
        let p =
            plan_tensors("m", &t, Scheme::Q4KM, &ModelFacts { n_expert: 4, ..facts(2) }).unwrap();
        assert_eq!(ty(&p, "blk.3.attn_k.weight"), GgmlType::Q4_K);
        assert_eq!(ty(&p, "blk.3.attn_output.weight"), GgmlType::Q4_K);
        assert_eq!(ty(&p, "blk.3.ffn_gate_inp.weight"), GgmlType::F32);
    }

    #[test]
    fn mixes_whose_rules_are_not_reproduced_are_refused() {
        let t = tensors(8, 256);
        let refused = |f: ModelFacts, want: &str| {
            let e = plan_tensors("m.gguf", &t, Scheme::Q4KM, &f).unwrap_err().to_string();
            assert!(e.starts_with("m.gguf: ") && e.contains(want), "{e}");
        };
        refused(ModelFacts { arch: Some("falcon".into()), ..facts(2) }, "Falcon");
        refused(ModelFacts { arch: Some("llama".into()), n_layer: Some(80), ..facts(2) }, "70B");
        let e = plan_tensors("m", &t, Scheme::Q2K, &ModelFacts { n_gqa: None, ..facts(2) })
            .unwrap_err()
            .to_string();
        assert!(e.contains("head_count"), "{e}");
        // A uniform scheme has no such rules.
        assert!(plan_tensors(
            "m",
            &t,
            Scheme::Uniform(GgmlType::Q5_0),
            &ModelFacts { n_expert: 8, ..facts(2) }
        )
        .is_ok());
        for (name, want) in [
            ("q5_k_m", Some(Scheme::Q5KM)),
            ("IQ4_XS", Some(Scheme::IQ4XS)),
            ("uniform:iq4_xs", Some(Scheme::Uniform(GgmlType::IQ4_XS))),
            ("q5_0", Some(Scheme::Uniform(GgmlType::Q5_0))),
            ("uniform:f32", None),
            ("iq2_xxs", None),
            ("uniform:", None),
        ] {
            assert_eq!(Scheme::parse(name), want, "{name}");
        }
    }

    #[test]
    fn more_bits_layers_match_llama_cpp_for_8_and_64_layers() {
        let pick = |n| (0..n).filter(|&i| use_more_bits(i, n)).collect::<Vec<_>>();
        // n = 8: n/8 = 1, 7n/8 = 7: layers 0, 7, and i with (i-1)%3 == 2: 3, 6.
        assert_eq!(pick(8), vec![0, 3, 6, 7]);
        // n = 64: 0..8, 56..64, and 8 + 3j + 2 in between.
        let p = pick(64);
        assert!(p.starts_with(&[0, 1, 2, 3, 4, 5, 6, 7, 10, 13]));
        assert!(p.ends_with(&[52, 55, 56, 57, 58, 59, 60, 61, 62, 63]));
    }
}
