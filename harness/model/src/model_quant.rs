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
//! - uniform (`q4_0`, `q8_0`, `q4_k`, `q6_k`): every eligible tensor gets that type;
//! - `q4_k_m`, following `llama_tensor_get_type_impl` (llama.cpp `llama-quant.cpp`):
//!   default Q4_K; `output.weight` Q6_K (and `token_embd.weight` too when there is no
//!   `output.weight`, i.e. tied embeddings); `attn_v` and `ffn_down` Q6_K on the
//!   "more bits" layers, `use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
//!   (i - n/8) % 3 == 2`, counting each kind's tensors in file order; Q4_K elsewhere.
//!   A row length not divisible by 256 falls back as llama.cpp does (Q6_K -> Q8_0);
//!   a fallback we cannot produce (Q4_K -> Q5_0) is an error naming the tensor.

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
    /// llama.cpp's Q4_K_M mix.
    Q4KM,
}

impl Scheme {
    /// Parse `q4_0`, `q8_0`, `q4_k`, `q6_k`, `q4_k_m` (case-insensitive).
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "q4_0" => Some(Scheme::Uniform(GgmlType::Q4_0)),
            "q8_0" => Some(Scheme::Uniform(GgmlType::Q8_0)),
            "q4_k" => Some(Scheme::Uniform(GgmlType::Q4_K)),
            "q6_k" => Some(Scheme::Uniform(GgmlType::Q6_K)),
            "q4_k_m" => Some(Scheme::Q4KM),
            _ => None,
        }
    }

    /// llama.cpp's `llama_ftype` for `general.file_type`.
    pub(crate) fn file_type(self) -> u32 {
        match self {
            Scheme::Uniform(GgmlType::Q4_0) => 2,
            Scheme::Uniform(GgmlType::Q8_0) => 7,
            // No uniform Q4_K ftype exists; Q4_K_S (14) is the closest label.
            Scheme::Uniform(GgmlType::Q4_K) => 14,
            Scheme::Uniform(_) => 18, // Q6_K
            Scheme::Q4KM => 15,
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

fn use_more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64) % 3 == 2
}

fn eligible(name: &str, dims: &[u64]) -> bool {
    name.ends_with("weight") && dims.len() >= 2
}

/// Decide the output type of every tensor.
pub fn plan(file: &GgufFile, scheme: Scheme) -> Result<Vec<TensorPlan>, QuantizeError> {
    let decls: Vec<TensorDecl> = file
        .tensors()
        .iter()
        .map(|t| TensorDecl { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty })
        .collect();
    plan_tensors(file.path(), &decls, scheme)
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

/// [`plan`] for a list of tensors (in file order); `path` names the file in errors.
pub fn plan_tensors(
    path: &str,
    tensors: &[TensorDecl],
    scheme: Scheme,
) -> Result<Vec<TensorPlan>, QuantizeError> {
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
        let (mut to, mut reason) = match scheme {
            Scheme::Uniform(ty) => (ty, "uniform".to_string()),
            Scheme::Q4KM => {
                if t.name == "output.weight" || (!has_output && t.name == "token_embd.weight") {
                    (GgmlType::Q6_K, "output (q4_k_m)".to_string())
                } else if t.name.contains("attn_v.weight") {
                    let more = use_more_bits(i_attn_v, n_attn_v);
                    i_attn_v += 1;
                    if more {
                        (GgmlType::Q6_K, "attn_v, more-bits layer".to_string())
                    } else {
                        (GgmlType::Q4_K, "attn_v".to_string())
                    }
                } else if t.name.contains("ffn_down") {
                    let more = use_more_bits(i_ffn_down, n_ffn_down);
                    i_ffn_down += 1;
                    if more {
                        (GgmlType::Q6_K, "ffn_down, more-bits layer".to_string())
                    } else {
                        (GgmlType::Q4_K, "ffn_down".to_string())
                    }
                } else if t.name.contains("attn_qkv") {
                    return Err(QuantizeError::Tensor {
                        path: path.to_string(),
                        tensor: t.name.clone(),
                        problem: "fused attn_qkv needs Q5_K in q4_k_m, which tiercheck cannot \
                                  quantize"
                            .to_string(),
                    });
                } else {
                    (GgmlType::Q4_K, "default".to_string())
                }
            }
        };
        let ne0 = t.dims[0] as usize;
        if !ne0.is_multiple_of(to.block_size()) {
            let fallback = match to {
                GgmlType::Q6_K if ne0.is_multiple_of(32) => Some(GgmlType::Q8_0),
                _ => None,
            };
            match fallback {
                Some(f) => {
                    reason = format!("{reason}; row length {ne0} not a multiple of 256, fell back");
                    to = f;
                }
                None => {
                    return Err(QuantizeError::Tensor {
                        path: path.to_string(),
                        tensor: t.name.clone(),
                        problem: format!(
                            "row length {ne0} is not a multiple of {} (block size of {})",
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
    use super::use_more_bits;

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
