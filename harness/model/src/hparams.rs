//! Hyper-parameters of a qwen3 or qwen2 GGUF model, read from its metadata and checked
//! against its tensors.

use tiercheck_core::GgmlType;

use super::ModelError;
use tiercheck_gguf::{GgufFile, MetaValue};

/// What the decoder needs to know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    /// `general.architecture`: one of [`ARCHITECTURES`].
    pub arch: String,
    /// Hidden size.
    pub n_embd: usize,
    /// Number of layers.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention).
    pub n_head_kv: usize,
    /// Size of one head (key and value length).
    pub head_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size (rows of `token_embd.weight`).
    pub n_vocab: usize,
    /// Training context length.
    pub n_ctx_train: usize,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// qwen3moe: the routed experts (`None` for a dense feed-forward).
    pub moe: Option<MoeParams>,
}

/// The mixture-of-experts feed-forward of a `qwen3moe` model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeParams {
    /// Experts per layer (`expert_count`).
    pub n_expert: usize,
    /// Experts each token is routed to (`expert_used_count`).
    pub n_expert_used: usize,
    /// Feed-forward width of one expert (`expert_feed_forward_length`; llama.cpp's
    /// default without the key: `feed_forward_length / expert_used_count`).
    pub n_ff_exp: usize,
}

/// The most experts llama.cpp loads (`LLAMA_MAX_EXPERTS`).
pub const MAX_EXPERTS: usize = 512;

/// The architectures the decoder runs: `qwen3` (per-head Q/K RMSNorm before RoPE),
/// `qwen2` (Qwen2 and Qwen2.5: Q/K/V biases, no Q/K norm), both NeoX RoPE, and `llama`
/// (Llama 3.x: normal-mode RoPE on adjacent pairs, Llama 3.1's `rope_freqs` when the
/// file has them, no norm or bias); all SwiGLU; and `qwen3moe` (qwen3's attention, a
/// routed mixture of SwiGLU experts in place of the dense feed-forward).
pub const ARCHITECTURES: [&str; 4] = ["qwen3", "qwen2", "llama", "qwen3moe"];

fn bad(path: &str, problem: impl Into<String>) -> ModelError {
    ModelError::Invalid { path: path.to_string(), problem: problem.into() }
}

fn get_usize(f: &GgufFile, key: &str) -> Result<Option<usize>, ModelError> {
    match f.get(key) {
        None => Ok(None),
        Some(v) => match v.to_u64() {
            Some(x) if x > 0 && x <= (1 << 24) => Ok(Some(x as usize)),
            Some(x) => Err(bad(f.path(), format!("metadata '{key}' = {x} is out of range"))),
            None => Err(bad(
                f.path(),
                format!("metadata '{key}' is {}, expected an integer", v.value_type().name()),
            )),
        },
    }
}

fn need_usize(f: &GgufFile, key: &str) -> Result<usize, ModelError> {
    get_usize(f, key)?.ok_or_else(|| bad(f.path(), format!("missing metadata key '{key}'")))
}

fn get_float(f: &GgufFile, key: &str) -> Result<Option<f32>, ModelError> {
    match f.get(key) {
        None => Ok(None),
        Some(MetaValue::F32(x)) => Ok(Some(*x)),
        Some(MetaValue::F64(x)) => Ok(Some(*x as f32)),
        Some(v) => Err(bad(
            f.path(),
            format!("metadata '{key}' is {}, expected a float", v.value_type().name()),
        )),
    }
}

impl HParams {
    /// Read and validate the hyper-parameters of `f`.
    pub fn from_gguf(f: &GgufFile) -> Result<HParams, ModelError> {
        let p = f.path();
        let arch = f
            .get_str("general.architecture")
            .map_err(|_| bad(p, "missing or non-string 'general.architecture'"))?
            .to_string();
        if !ARCHITECTURES.contains(&arch.as_str()) {
            return Err(bad(
                p,
                format!(
                    "architecture '{arch}' is not supported (the decoder runs {})",
                    ARCHITECTURES.join(", ")
                ),
            ));
        }
        let k = |s: &str| format!("{arch}.{s}");
        let n_embd = need_usize(f, &k("embedding_length"))?;
        let n_layer = need_usize(f, &k("block_count"))?;
        let n_head = need_usize(f, &k("attention.head_count"))?;
        let n_head_kv = get_usize(f, &k("attention.head_count_kv"))?.unwrap_or(n_head);
        let n_ff = need_usize(f, &k("feed_forward_length"))?;
        let n_ctx_train = need_usize(f, &k("context_length"))?;
        // Each layer has 11 tensors (qwen3) or 12 (qwen2); a block_count the tensor table
        // cannot hold is wrong (and the tensor check below would otherwise list up to 2^24
        // layers' names).
        let per_layer = match arch.as_str() {
            "qwen2" | "qwen3moe" => 12,
            "llama" => 9,
            _ => 11,
        };
        if n_layer.saturating_mul(per_layer) > f.tensors().len() {
            return Err(bad(
                p,
                format!(
                    "{arch}.block_count {n_layer} needs {} layer tensors; the file has {} tensors",
                    n_layer.saturating_mul(per_layer),
                    f.tensors().len()
                ),
            ));
        }
        if !n_embd.is_multiple_of(n_head) && f.get(&k("attention.key_length")).is_none() {
            return Err(bad(p, format!("embedding_length {n_embd} is not a multiple of head_count {n_head} and no key_length is given")));
        }
        let head_dim = get_usize(f, &k("attention.key_length"))?.unwrap_or(n_embd / n_head);
        let v_len = get_usize(f, &k("attention.value_length"))?.unwrap_or(head_dim);
        if v_len != head_dim {
            return Err(bad(p, format!("key_length {head_dim} != value_length {v_len}")));
        }
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(bad(
                p,
                format!("head_count {n_head} is not a multiple of head_count_kv {n_head_kv}"),
            ));
        }
        if !head_dim.is_multiple_of(4) {
            return Err(bad(p, format!("head size {head_dim} is not a multiple of 4")));
        }
        if arch == "llama" && !head_dim.is_multiple_of(8) {
            return Err(bad(
                p,
                format!(
                    "head size {head_dim}: llama's RoPE is reproduced for whole steps of four \
                     pairs (a head size a multiple of 8); ggml's scalar tail is not"
                ),
            ));
        }
        if let Some(n_rot) = get_usize(f, &k("rope.dimension_count"))? {
            if n_rot != head_dim {
                return Err(bad(
                    p,
                    format!("rope.dimension_count {n_rot} != head size {head_dim}: partial rotation is not reproduced"),
                ));
            }
        }
        // Settings that change llama.cpp's arithmetic and that the decoder does not model.
        if let Ok(t) = f.get_str(&k("rope.scaling.type")) {
            // Linear scaling changes the angles only through its factor (checked below).
            if t != "none" && t != "linear" {
                return Err(bad(p, format!("rope.scaling.type '{t}' is not reproduced")));
            }
        }
        for key in ["rope.scaling.factor", "attention.scale"] {
            if let Some(v) = get_float(f, &k(key))? {
                if v != 0.0 && v != 1.0 {
                    return Err(bad(p, format!("{key} {v} is not reproduced")));
                }
            }
        }
        let rope_base = get_float(f, &k("rope.freq_base"))?.unwrap_or(10000.0);
        let rms_eps = get_float(f, &k("attention.layer_norm_rms_epsilon"))?.ok_or_else(|| {
            bad(p, format!("missing metadata key '{}'", k("attention.layer_norm_rms_epsilon")))
        })?;
        if !(rope_base.is_finite() && rope_base > 0.0) {
            return Err(bad(p, format!("rope.freq_base {rope_base} is not a positive number")));
        }
        if !(rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(bad(p, format!("layer_norm_rms_epsilon {rms_eps} is invalid")));
        }
        let embd = f
            .tensor("token_embd.weight")
            .ok_or_else(|| bad(p, "missing tensor 'token_embd.weight'"))?;
        if embd.dims.len() != 2 || embd.dims[0] as usize != n_embd {
            return Err(bad(
                p,
                format!("token_embd.weight has dims {:?}, expected [{n_embd}, n_vocab]", embd.dims),
            ));
        }
        let n_vocab = embd.dims[1] as usize;
        let moe = if arch == "qwen3moe" {
            let n_expert = need_usize(f, &k("expert_count"))?;
            let n_expert_used = need_usize(f, &k("expert_used_count"))?;
            if n_expert > MAX_EXPERTS {
                return Err(bad(
                    p,
                    format!("expert_count {n_expert} is above llama.cpp's {MAX_EXPERTS}"),
                ));
            }
            if n_expert_used > n_expert {
                return Err(bad(
                    p,
                    format!("expert_used_count {n_expert_used} is above expert_count {n_expert}"),
                ));
            }
            let n_ff_exp = match get_usize(f, &k("expert_feed_forward_length"))? {
                Some(v) => v,
                None => n_ff / n_expert_used,
            };
            if n_ff_exp == 0 {
                return Err(bad(p, format!("the expert feed-forward width of {arch} is 0")));
            }
            Some(MoeParams { n_expert, n_expert_used, n_ff_exp })
        } else {
            None
        };
        if let Some(v) = get_usize(f, &k("vocab_size"))? {
            if v != n_vocab {
                return Err(bad(p, format!("{arch}.vocab_size {v} != token_embd rows {n_vocab}")));
            }
        }
        let hp = HParams {
            arch,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx_train,
            rope_base,
            rms_eps,
            moe,
        };
        hp.check_tensors(f)?;
        Ok(hp)
    }

    /// Whether each head's Q and K are RMS-normed before RoPE (`attn_q_norm`,
    /// `attn_k_norm`: qwen3).
    pub fn qk_norm(&self) -> bool {
        self.arch == "qwen3" || self.arch == "qwen3moe"
    }

    /// Whether the Q, K and V projections add a bias (`attn_q.bias`, ...: qwen2).
    pub fn qkv_bias(&self) -> bool {
        self.arch == "qwen2"
    }

    /// Whether RoPE rotates adjacent pairs (normal mode: llama) rather than the two halves
    /// of a head (NeoX mode: qwen3, qwen2).
    pub fn rope_normal(&self) -> bool {
        self.arch == "llama"
    }

    /// Every tensor the decoder reads, with its expected dims `[ne0, ne1]` (or `[ne0]`).
    pub(crate) fn expected_tensors(&self) -> Vec<(String, Vec<u64>)> {
        let (e, q, kv, ff) = (
            self.n_embd as u64,
            (self.n_head * self.head_dim) as u64,
            (self.n_head_kv * self.head_dim) as u64,
            self.n_ff as u64,
        );
        let hd = self.head_dim as u64;
        let mut v = vec![("token_embd.weight".to_string(), vec![e, self.n_vocab as u64])];
        for l in 0..self.n_layer {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            v.push((b("attn_norm"), vec![e]));
            v.push((b("attn_q"), vec![e, q]));
            v.push((b("attn_k"), vec![e, kv]));
            v.push((b("attn_v"), vec![e, kv]));
            v.push((b("attn_output"), vec![q, e]));
            if self.qk_norm() {
                v.push((b("attn_q_norm"), vec![hd]));
                v.push((b("attn_k_norm"), vec![hd]));
            }
            if self.qkv_bias() {
                let bias = |s: &str| format!("blk.{l}.{s}.bias");
                v.push((bias("attn_q"), vec![q]));
                v.push((bias("attn_k"), vec![kv]));
                v.push((bias("attn_v"), vec![kv]));
            }
            v.push((b("ffn_norm"), vec![e]));
            match self.moe {
                None => {
                    v.push((b("ffn_gate"), vec![e, ff]));
                    v.push((b("ffn_up"), vec![e, ff]));
                    v.push((b("ffn_down"), vec![ff, e]));
                }
                Some(m) => {
                    let (x, fx) = (m.n_expert as u64, m.n_ff_exp as u64);
                    v.push((b("ffn_gate_inp"), vec![e, x]));
                    v.push((b("ffn_gate_exps"), vec![e, fx, x]));
                    v.push((b("ffn_up_exps"), vec![e, fx, x]));
                    v.push((b("ffn_down_exps"), vec![fx, e, x]));
                }
            }
        }
        v.push(("output_norm.weight".to_string(), vec![e]));
        v
    }

    fn check_tensors(&self, f: &GgufFile) -> Result<(), ModelError> {
        let p = f.path();
        let mut want = self.expected_tensors();
        if f.tensor("output.weight").is_some() {
            want.push(("output.weight".to_string(), vec![self.n_embd as u64, self.n_vocab as u64]));
        }
        if f.tensor("rope_freqs.weight").is_some() {
            if !self.rope_normal() {
                return Err(bad(
                    p,
                    format!("rope_freqs.weight in a {} model is not reproduced", self.arch),
                ));
            }
            want.push(("rope_freqs.weight".to_string(), vec![self.head_dim as u64 / 2]));
        }
        for (name, dims) in want {
            let t = f.tensor(&name).ok_or_else(|| bad(p, format!("missing tensor '{name}'")))?;
            if t.dims != dims {
                return Err(bad(
                    p,
                    format!("tensor '{name}' has dims {:?}, expected {dims:?}", t.dims),
                ));
            }
            let ok = if dims.len() == 1 {
                t.ty == GgmlType::F32
            } else if name.ends_with("ffn_gate_inp.weight") {
                // llama-quantize keeps the router in F32; another type would take another
                // matmul path, which is not reproduced.
                if t.ty != GgmlType::F32 {
                    return Err(bad(
                        p,
                        format!(
                            "tensor '{name}' (the expert router) is {}; the decoder reproduces an \
                             F32 router, as llama-quantize writes it",
                            t.ty.name()
                        ),
                    ));
                }
                true
            } else {
                name == "token_embd.weight"
                    || tiercheck_core::quant::weights::QUANTIZABLE.contains(&t.ty)
                    || t.ty == GgmlType::F32
            };
            if !ok {
                return Err(bad(
                    p,
                    format!(
                        "tensor '{name}' is {}; the decoder reads q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs (or f32) weights and f32 norms",
                        t.ty.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercheck_gguf::GgufWriter;

    /// A complete tiny qwen3 file (1 layer, 32 wide, 2+1 heads of 16), with `edit`
    /// applied to the metadata list before writing.
    fn tiny(
        edit: impl FnOnce(&mut Vec<(String, MetaValue)>),
        skip_tensor: Option<&str>,
    ) -> Result<HParams, ModelError> {
        tiny_of("qwen3", "qwen3", edit, skip_tensor, &[])
    }

    /// [`tiny`] with `arch` in the metadata, the tensors `tensors` expects and the F32
    /// tensors `extra`.
    fn tiny_of(
        arch: &str,
        tensors: &str,
        edit: impl FnOnce(&mut Vec<(String, MetaValue)>),
        skip_tensor: Option<&str>,
        extra: &[(&str, u64)],
    ) -> Result<HParams, ModelError> {
        let k = |s: &str| format!("{arch}.{s}");
        let mut meta: Vec<(String, MetaValue)> = vec![
            ("general.architecture".into(), MetaValue::String(arch.into())),
            (k("embedding_length"), MetaValue::U32(32)),
            (k("block_count"), MetaValue::U32(1)),
            (k("attention.head_count"), MetaValue::U32(2)),
            (k("attention.head_count_kv"), MetaValue::U32(1)),
            (k("attention.key_length"), MetaValue::U32(16)),
            (k("feed_forward_length"), MetaValue::U32(64)),
            (k("context_length"), MetaValue::U32(256)),
            (k("rope.freq_base"), MetaValue::F32(1e6)),
            (k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-6)),
        ];
        if arch == "qwen3moe" {
            meta.push((k("expert_count"), MetaValue::U32(4)));
            meta.push((k("expert_used_count"), MetaValue::U32(2)));
            meta.push((k("expert_feed_forward_length"), MetaValue::U32(32)));
        }
        edit(&mut meta);
        let mut w = GgufWriter::new();
        for (k, v) in meta {
            w.add_metadata(k, v).unwrap();
        }
        let hp = HParams {
            arch: tensors.into(),
            n_embd: 32,
            n_layer: 1,
            n_head: 2,
            n_head_kv: 1,
            head_dim: 16,
            n_ff: 64,
            n_vocab: 10,
            n_ctx_train: 256,
            rope_base: 1e6,
            rms_eps: 1e-6,
            moe: (tensors == "qwen3moe").then_some(MoeParams {
                n_expert: 4,
                n_expert_used: 2,
                n_ff_exp: 32,
            }),
        };
        for (name, dims) in hp.expected_tensors() {
            if Some(name.as_str()) == skip_tensor {
                continue;
            }
            let n: u64 = dims.iter().product();
            w.add_tensor(name, &dims, GgmlType::F32, vec![0u8; n as usize * 4]).unwrap();
        }
        for &(name, n) in extra {
            w.add_tensor(name, &[n], GgmlType::F32, vec![0u8; n as usize * 4]).unwrap();
        }
        let f = GgufFile::from_bytes("tiny.gguf", w.to_bytes().unwrap()).unwrap();
        HParams::from_gguf(&f)
    }

    /// A llama file (no norms, no biases) reads, with or without `rope_freqs`; the factors
    /// in another architecture, of the wrong length, or a head size that leaves ggml's
    /// scalar RoPE tail, are refused.
    #[test]
    fn reads_llama_and_refuses_what_its_rope_does_not_reproduce() {
        let hp = tiny_of("llama", "llama", |_| {}, None, &[]).unwrap();
        assert!(hp.rope_normal() && !hp.qk_norm() && !hp.qkv_bias());
        let with_ff =
            |arch: &str, n: u64| tiny_of(arch, arch, |_| {}, None, &[("rope_freqs.weight", n)]);
        assert!(with_ff("llama", 8).is_ok());
        assert!(err(with_ff("llama", 7)).contains("'rope_freqs.weight' has dims [7]"));
        assert!(err(with_ff("qwen2", 8)).contains("rope_freqs.weight in a qwen2 model"));
        let narrow = |m: &mut Vec<(String, MetaValue)>| {
            m.retain(|(k, _)| k != "llama.attention.key_length");
            m.push(("llama.attention.key_length".into(), MetaValue::U32(12)));
        };
        assert!(err(tiny_of("llama", "llama", narrow, None, &[])).contains("head size 12"));
        let scaled = |m: &mut Vec<(String, MetaValue)>| {
            m.push(("llama.rope.scaling.type".into(), MetaValue::String("yarn".into())));
        };
        assert!(
            err(tiny_of("llama", "llama", scaled, None, &[])).contains("rope.scaling.type 'yarn'")
        );
    }

    /// A qwen2 file (Q, K and V biases, no Q/K norms) reads; one without a bias, or with
    /// a qwen3 file's tensors, is refused naming the missing tensor.
    #[test]
    fn reads_qwen2_and_refuses_its_missing_biases() {
        let hp = tiny_of("qwen2", "qwen2", |_| {}, None, &[]).unwrap();
        assert_eq!((hp.arch.as_str(), hp.qkv_bias(), hp.qk_norm()), ("qwen2", true, false));
        assert!(err(tiny_of("qwen2", "qwen2", |_| {}, Some("blk.0.attn_k.bias"), &[]))
            .contains("missing tensor 'blk.0.attn_k.bias'"));
        assert!(err(tiny_of("qwen2", "qwen3", |_| {}, None, &[]))
            .contains("missing tensor 'blk.0.attn_q.bias'"));
        assert!(err(tiny_of("qwen3", "qwen2", |_| {}, None, &[]))
            .contains("missing tensor 'blk.0.attn_q_norm.weight'"));
    }

    /// A qwen3moe file (qwen3's norms, a router and three 3-D expert tensors per layer)
    /// reads; inconsistent expert counts and a dense file's tensors are refused.
    #[test]
    fn reads_qwen3moe_and_refuses_inconsistent_experts() {
        let hp = tiny_of("qwen3moe", "qwen3moe", |_| {}, None, &[]).unwrap();
        assert_eq!(hp.moe, Some(MoeParams { n_expert: 4, n_expert_used: 2, n_ff_exp: 32 }));
        assert!(hp.qk_norm() && !hp.qkv_bias() && !hp.rope_normal());
        let set = |k: &'static str, v: u32| {
            move |m: &mut Vec<(String, MetaValue)>| {
                m.retain(|(key, _)| key != k);
                m.push((k.into(), MetaValue::U32(v)));
            }
        };
        let r = tiny_of("qwen3moe", "qwen3moe", set("qwen3moe.expert_used_count", 5), None, &[]);
        assert!(err(r).contains("expert_used_count 5 is above expert_count 4"));
        let r = tiny_of("qwen3moe", "qwen3moe", set("qwen3moe.expert_count", 600), None, &[]);
        assert!(err(r).contains("expert_count 600"));
        let r = tiny_of("qwen3moe", "qwen3moe", |_| {}, Some("blk.0.ffn_gate_inp.weight"), &[]);
        assert!(err(r).contains("missing tensor 'blk.0.ffn_gate_inp.weight'"));
        let r = tiny_of("qwen3moe", "qwen3", |_| {}, None, &[]);
        assert!(err(r).contains("ffn_gate_inp"));
    }

    fn err(r: Result<HParams, ModelError>) -> String {
        let e = r.expect_err("should be refused").to_string();
        assert!(e.starts_with("tiny.gguf: "), "{e}");
        e
    }

    #[test]
    fn reads_a_complete_file() {
        let hp = tiny(|_| {}, None).unwrap();
        assert_eq!(
            (hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_vocab),
            (32, 2, 1, 16, 10)
        );
    }

    #[test]
    fn refuses_missing_wrong_and_inconsistent_metadata() {
        let set = |k: &'static str, v: MetaValue| {
            move |m: &mut Vec<(String, MetaValue)>| {
                m.retain(|(key, _)| key != k);
                m.push((k.into(), v));
            }
        };
        let drop =
            |k: &'static str| move |m: &mut Vec<(String, MetaValue)>| m.retain(|(key, _)| key != k);
        assert!(err(tiny(set("general.architecture", MetaValue::String("gemma3".into())), None))
            .contains("not supported"));
        assert!(err(tiny(drop("qwen3.block_count"), None))
            .contains("missing metadata key 'qwen3.block_count'"));
        assert!(err(tiny(drop("qwen3.attention.layer_norm_rms_epsilon"), None))
            .contains("layer_norm_rms_epsilon"));
        assert!(err(tiny(set("qwen3.attention.head_count", MetaValue::String("2".into())), None))
            .contains("expected an integer"));
        assert!(err(tiny(set("qwen3.attention.head_count_kv", MetaValue::U32(3)), None))
            .contains("not a multiple"));
        assert!(err(tiny(set("qwen3.attention.value_length", MetaValue::U32(8)), None))
            .contains("value_length"));
        assert!(err(tiny(set("qwen3.rope.freq_base", MetaValue::F32(-1.0)), None))
            .contains("freq_base"));
        assert!(
            err(tiny(set("qwen3.vocab_size", MetaValue::U32(11)), None)).contains("vocab_size 11")
        );
        // Metadata that disagrees with the tensors.
        assert!(err(tiny(set("qwen3.feed_forward_length", MetaValue::U32(32)), None))
            .contains("blk.0.ffn_gate.weight"));
        assert!(err(tiny(|_| {}, Some("blk.0.attn_k_norm.weight")))
            .contains("missing tensor 'blk.0.attn_k_norm.weight'"));
    }
}
