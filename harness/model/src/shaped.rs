//! Large generated models of real Qwen3, Qwen2.5, Llama 3.1 and Qwen3 MoE shapes, written
//! directly as quantized blocks (a 3-D expert tensor as its experts' rows one after the
//! other).
//!
//! The embedded model ([`crate::embedded`]) is drawn as f32 and quantized by the reference
//! quantizers: exact and reproducible, but at 8B parameters that is 32 GB of f32 and
//! minutes of quantization. A *shaped* model has the dimensions of a real Qwen3 (the
//! [`SHAPES`] table: hidden size, layers, heads, KV heads, head size, feed-forward
//! width, vocabulary, tied or untied output), the same tensor names, order, metadata
//! and quantization mix as the embedded model (llama.cpp's Q4_K_M by default, chosen by
//! [`model_quant::plan_tensors`]), and random *blocks*: each block's scales and quants
//! are drawn directly, so nothing but one chunk of rows is ever in memory and the file
//! streams to disk at the speed of the disk ([`GgufWriter::write_file_streaming`],
//! atomically). It is for measuring speed and memory at real sizes and for checking
//! shape-dependent code paths, not for studying a model's behaviour: its weights are not
//! a trained model's, and not the reference quantization of any f32 tensor.
//!
//! # The blocks
//!
//! Each 2-D tensor has a target standard deviation `σ` from the embedded model's
//! initialisation ([`Recipe::tensors`]: `1/sqrt(fan_in)`, times `1/sqrt(2 n_layer)` for
//! `attn_output` and `ffn_down`; `embd_std` for `token_embd`; `logit_std/sqrt(n_embd)`
//! for `output`, and for `token_embd` of a tied shape, which is also the output). Every
//! block draws a jitter `u` uniform in [0.75, 1.25) (E(u²) = 49/48) and its quants
//! uniformly; its super-scale is chosen so the dequantized values have mean about 0 and
//! standard deviation about `σ`:
//!
//! - Q4_K (`w = d·sc·q - dmin·m`): q uniform in 0..=15, sub-block scales `sc` uniform in
//!   32..=63, mins `m = round(15·sc/16)` (≤ 59) with `dmin = 8d`, so each sub-block's
//!   mean `d·(7.5·sc - 8·m)` is at most `4d` from 0; `d = σ / sqrt(21.25 · E(sc²) ·
//!   E(u²))` times `u`, E(sc²) = 2341.5. Scales and mins are packed as ggml's
//!   `get_scale_min_k4` unpacks them.
//! - Q6_K (`w = d·sc·(q - 32)`): q uniform in 0..=63 (random `ql`/`qh` bits), `sc` of
//!   random sign and magnitude uniform in 64..=127, E((q-32)²) = 341.5, E(sc²) = 9461.5.
//! - Q8_0 (`w = d·q`): q uniform in -127..=127 (never -128, which no quantizer writes),
//!   E(q²) = 5418.67.
//! - Q4_0 (`w = d·(q - 8)`): q uniform in 0..=15, E((q-8)²) = 21.5, `d` of random sign
//!   (the mean of `q - 8` is -1/2).
//!
//! `d` is computed in f64 and rounded once to f16 (for the smallest `σ` it is
//! subnormal, as the reference quantizers' is for such tensors). Norm weights are F32,
//! `1 + z·norm_noise_std` with the embedded model's Irwin–Hall `z`.
//!
//! # Reproducibility
//!
//! Row `r` of tensor `t` draws from `Rng::new(seed ^ fnv1a64(name) ^ (r+1)·φ)` (φ =
//! 0x9E3779B97F4A7C15), so the bytes do not depend on how rows are split between
//! threads: the same options give the same file on every machine and thread count.
//! The file records the options under [`RECIPE_KEY`] and the generator under
//! `tiercheck.model.generator` ([`GENERATOR`]); a cached file is reused only when both
//! match and its size is the expected one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tiercheck_core::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use tiercheck_core::rng::Rng;
use tiercheck_core::GgmlType;
use tiercheck_gguf::{GgufError, GgufFile, GgufWriter, MetaValue};

use crate::embedded::{
    default_cache_dir, EmbeddedError, Init, Recipe, TensorSpec, GENERATOR_KEY, RECIPE_KEY, SEED_KEY,
};
use crate::model_quant::{self, TensorDecl};

/// Names this generator in the file. Change it whenever the bytes for the same options
/// change.
pub const GENERATOR: &str = "tiercheck shaped-model generator v1 (random quantized blocks)";

/// The default seed.
pub const DEFAULT_SEED: u64 = 20261202;

/// A real model's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Name (`qwen3-8b`).
    pub name: &'static str,
    /// `general.architecture`: `qwen3`, `qwen2` or `llama`.
    pub arch: &'static str,
    /// Hidden size.
    pub n_embd: u32,
    /// Transformer blocks.
    pub n_layer: u32,
    /// Query heads.
    pub n_head: u32,
    /// Key/value heads.
    pub n_head_kv: u32,
    /// Per-head dimension.
    pub head_dim: u32,
    /// Feed-forward width.
    pub n_ff: u32,
    /// Vocabulary size.
    pub n_vocab: u32,
    /// Context length (the model's own).
    pub context_length: u32,
    /// Whether the output projection is the token embedding (no `output.weight`).
    pub tied: bool,
    /// qwen3moe: experts per layer, experts per token, one expert's feed-forward width.
    pub experts: Option<(u32, u32, u32)>,
}

const fn qwen3(
    name: &'static str,
    n_embd: u32,
    n_layer: u32,
    n_head: u32,
    n_ff: u32,
    tied: bool,
) -> Shape {
    Shape {
        name,
        arch: "qwen3",
        n_embd,
        n_layer,
        n_head,
        n_head_kv: 8,
        head_dim: 128,
        n_ff,
        n_vocab: 151_936,
        context_length: 40_960,
        tied,
        experts: None,
    }
}

#[allow(clippy::too_many_arguments)]
const fn qwen2_5(
    name: &'static str,
    n_embd: u32,
    n_layer: u32,
    n_head: u32,
    n_head_kv: u32,
    n_ff: u32,
    n_vocab: u32,
    tied: bool,
) -> Shape {
    Shape {
        name,
        arch: "qwen2",
        n_embd,
        n_layer,
        n_head,
        n_head_kv,
        head_dim: 128,
        n_ff,
        n_vocab,
        context_length: 32_768,
        tied,
        experts: None,
    }
}

/// The Qwen3 dense models' dimensions (their published configurations: head size 128,
/// 8 KV heads, vocabulary 151936, context 40960, RoPE base 1e6, RMS epsilon 1e-6; the
/// three smallest tie the output to the embedding), then Qwen2.5's (`qwen2`, Q/K/V
/// biases: head size 128, context 32768, RoPE base 1e6, RMS epsilon 1e-6; vocabulary
/// 151936 and a tied output for 1.5B and 3B, 152064 and untied from 7B; 0.5B's hidden
/// size 896 is not a whole number of K-quant blocks and is left out), then Llama 3.1 8B's
/// (`llama`: head size 128, vocabulary 128256, context 131072, RoPE base 500000, RMS
/// epsilon 1e-5, the generator's `rope_freqs`), then Qwen3-30B-A3B's (`qwen3moe`: 48
/// layers 2048 wide, 32 query heads on 4 KV heads of 128, 128 experts of feed-forward
/// width 768 with 8 per token, `feed_forward_length` 6144, vocabulary 151936, context
/// 40960; an F32 router).
pub const SHAPES: [Shape; 13] = [
    qwen3("qwen3-0.6b", 1024, 28, 16, 3072, true),
    qwen3("qwen3-1.7b", 2048, 28, 16, 6144, true),
    qwen3("qwen3-4b", 2560, 36, 32, 9728, true),
    qwen3("qwen3-8b", 4096, 36, 32, 12288, false),
    qwen3("qwen3-14b", 5120, 40, 40, 17408, false),
    qwen3("qwen3-32b", 5120, 64, 64, 25600, false),
    qwen2_5("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151_936, true),
    qwen2_5("qwen2.5-3b", 2048, 36, 16, 2, 11008, 151_936, true),
    qwen2_5("qwen2.5-7b", 3584, 28, 28, 4, 18944, 152_064, false),
    qwen2_5("qwen2.5-14b", 5120, 48, 40, 8, 13824, 152_064, false),
    qwen2_5("qwen2.5-32b", 5120, 64, 40, 8, 27648, 152_064, false),
    Shape {
        name: "llama3.1-8b",
        arch: "llama",
        n_embd: 4096,
        n_layer: 32,
        n_head: 32,
        n_head_kv: 8,
        head_dim: 128,
        n_ff: 14336,
        n_vocab: 128_256,
        context_length: 131_072,
        tied: false,
        experts: None,
    },
    Shape {
        name: "qwen3-30b-a3b",
        arch: "qwen3moe",
        n_embd: 2048,
        n_layer: 48,
        n_head: 32,
        n_head_kv: 4,
        head_dim: 128,
        n_ff: 6144,
        n_vocab: 151_936,
        context_length: 40_960,
        tied: false,
        experts: Some((128, 8, 768)),
    },
];

impl Shape {
    /// The shape called `name` (`qwen3-8b`, or `8b`; case-insensitive).
    pub fn find(name: &str) -> Option<Shape> {
        let n = name.to_ascii_lowercase();
        SHAPES.iter().copied().find(|s| s.name == n || s.name.strip_prefix("qwen3-") == Some(&n))
    }

    /// Every shape's name, comma separated.
    pub fn names() -> String {
        SHAPES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
    }
}

/// What [`build_shaped`] is asked to do.
#[derive(Clone, Debug)]
pub struct ShapeOptions {
    /// The shape's name (see [`SHAPES`]).
    pub shape: String,
    /// Keep only the first this many layers (default: the shape's).
    pub layers: Option<u32>,
    /// Another vocabulary size (default: the shape's).
    pub vocab: Option<u32>,
    /// Quantization scheme (`q4_k_m`, `q4_k`, `q6_k`, `q8_0`, `q4_0`).
    pub quantization: String,
    /// Seed.
    pub seed: u64,
    /// The file to write (default: `<cache>/model/<name>.gguf`, see [`ShapeOptions::file_name`]).
    pub out: Option<PathBuf>,
    /// The cache folder when `out` is not given (default [`default_cache_dir`]).
    pub cache: Option<PathBuf>,
    /// Regenerate even when a matching file exists.
    pub force: bool,
    /// Threads generating blocks (at least 1).
    pub threads: usize,
}

impl Default for ShapeOptions {
    fn default() -> Self {
        ShapeOptions {
            shape: "qwen3-8b".into(),
            layers: None,
            vocab: None,
            quantization: "q4_k_m".into(),
            seed: DEFAULT_SEED,
            out: None,
            cache: None,
            force: false,
            threads: 1,
        }
    }
}

/// A validated shaped model: its recipe (dimensions and initialisation), whether its
/// output is tied, and the tensors with their final types.
#[derive(Clone, Debug)]
pub struct ShapedModel {
    /// The dimensions and initialisation, as a recipe (its `sha256` is `None`).
    pub recipe: Recipe,
    /// Whether `output.weight` is absent (the embedding is the output).
    pub tied: bool,
    /// The tensors in file order with their initialisation.
    pub tensors: Vec<TensorSpec>,
    /// Each tensor's type in the file.
    pub types: Vec<GgmlType>,
}

fn invalid(problem: impl Into<String>) -> EmbeddedError {
    EmbeddedError::Invalid { path: "--shape".into(), problem: problem.into() }
}

impl ShapeOptions {
    /// The file name in the cache: the shape, every option that differs from the
    /// shape's, the scheme and the seed.
    pub fn file_name(&self, shape: &Shape) -> String {
        let mut n = format!("shape-{}", shape.name);
        if let Some(l) = self.layers.filter(|&l| l != shape.n_layer) {
            n.push_str(&format!("-L{l}"));
        }
        if let Some(v) = self.vocab.filter(|&v| v != shape.n_vocab) {
            n.push_str(&format!("-V{v}"));
        }
        format!("{n}-{}-s{}.gguf", self.quantization.to_ascii_lowercase(), self.seed)
    }

    /// The shape, validated with every option.
    pub fn model(&self) -> Result<ShapedModel, EmbeddedError> {
        let shape = Shape::find(&self.shape).ok_or_else(|| {
            invalid(format!("unknown shape {:?}; known: {}", self.shape, Shape::names()))
        })?;
        let n_layer = self.layers.unwrap_or(shape.n_layer);
        if n_layer == 0 || n_layer > shape.n_layer {
            return Err(invalid(format!(
                "--layers {n_layer}: {} has {} layers; keep 1 to {}",
                shape.name, shape.n_layer, shape.n_layer
            )));
        }
        let n_vocab = self.vocab.unwrap_or(shape.n_vocab);
        if n_vocab < 256 || n_vocab > i32::MAX as u32 {
            return Err(invalid(format!("--vocab {n_vocab}: must be 256 to {}", i32::MAX)));
        }
        if self.threads == 0 {
            return Err(invalid("--threads 0: at least one thread generates the blocks"));
        }
        let name = format!("tiercheck-{}-shape", shape.name);
        let mut bias = if shape.arch == "qwen2" { "bias_std = 0.5\n" } else { "" }.to_string();
        if let Some((x, used, ff)) = shape.experts {
            bias.push_str(&format!("n_expert = {x}\nn_expert_used = {used}\nn_ff_exp = {ff}\n"));
        }
        let (base, eps) =
            if shape.arch == "llama" { ("500000.0", "1e-5") } else { ("1000000.0", "1e-6") };
        let text = format!(
            "architecture = {:?}\nname = {name:?}\nn_embd = {}\nn_layer = {n_layer}\n\
             n_head = {}\nn_head_kv = {}\nhead_dim = {}\nn_ff = {}\nn_vocab = {n_vocab}\n\
             context_length = {}\nrope_freq_base = {base}\nrms_eps = {eps}\nseed = {}\n\
             embd_std = 0.5\nnorm_noise_std = 0.05\nlogit_std = 3.0\n{bias}quantization = {:?}\n\
             sha256 = \"\"\n",
            shape.arch,
            shape.n_embd,
            shape.n_head,
            shape.n_head_kv,
            shape.head_dim,
            shape.n_ff,
            shape.context_length,
            self.seed,
            self.quantization,
        );
        // The recipe's own validation (dimensions, scheme) applies; its messages name
        // the option rather than a file.
        let recipe = Recipe::parse("--shape", &text)?;
        let mut tensors = recipe.tensors();
        if shape.tied {
            tensors.retain(|t| t.name != "output.weight");
            let std = (f64::from(recipe.logit_std) / f64::from(recipe.n_embd).sqrt()) as f32;
            tensors[0].init = Init::Normal { std };
        }
        let infos: Vec<TensorDecl> = tensors
            .iter()
            .map(|t| TensorDecl { name: t.name.clone(), dims: t.dims.clone(), ty: GgmlType::F32 })
            .collect();
        let facts = model_quant::ModelFacts {
            arch: Some(shape.arch.into()),
            n_gqa: Some(recipe.n_head / recipe.n_head_kv),
            n_expert: shape.experts.map_or(1, |e| e.0),
            n_layer: Some(recipe.n_layer),
        };
        let plans = model_quant::plan_tensors("--shape", &infos, recipe.scheme, &facts)?;
        if let Some(p) = plans.iter().find(|p| p.to != GgmlType::F32 && !GENERATED.contains(&p.to))
        {
            return Err(invalid(format!(
                "--quantization {}: tensor '{}' would be {}, and shaped models generate random \
                 blocks of q4_0, q8_0, q4_K and q6_K only (schemes q4_0, q8_0, q4_k, q6_k, q4_k_m)",
                self.quantization,
                p.name,
                p.to.name()
            )));
        }
        let types = plans.iter().map(|p| p.to).collect();
        Ok(ShapedModel { recipe, tied: shape.tied, tensors, types })
    }
}

impl ShapedModel {
    /// The recipe line recorded under [`RECIPE_KEY`] (the recipe's, plus the tie).
    pub fn canonical(&self) -> String {
        format!("{} tied={}", self.recipe.canonical(), self.tied)
    }

    /// The writer of the file: metadata and every tensor declared (2-D ones deferred).
    fn writer(&self) -> Result<GgufWriter<'static>, EmbeddedError> {
        let mut w = GgufWriter::new();
        for (k, v) in self.recipe.metadata() {
            let v = match k.as_str() {
                GENERATOR_KEY => GENERATOR.into(),
                RECIPE_KEY => self.canonical().into(),
                "general.file_type" => MetaValue::U32(self.recipe.scheme.file_type()),
                _ => v,
            };
            w.add_metadata(k, v)?;
        }
        w.add_metadata("general.quantization_version", MetaValue::U32(2))?;
        for (t, &ty) in self.tensors.iter().zip(&self.types) {
            if ty == GgmlType::F32 {
                let bytes: Vec<u8> =
                    t.values(self.recipe.seed).iter().flat_map(|v| v.to_le_bytes()).collect();
                w.add_tensor(t.name.clone(), &t.dims, ty, bytes)?;
            } else {
                w.add_tensor_deferred(t.name.clone(), &t.dims, ty)?;
            }
        }
        Ok(w)
    }

    /// The file's size in bytes.
    pub fn file_bytes(&self) -> Result<u64, EmbeddedError> {
        let w = self.writer()?;
        Ok(w.file_len()?)
    }

    /// Write the model to `path` (atomically), generating with `threads` threads and
    /// calling `progress(bytes done, bytes total)` after each chunk.
    pub fn write(
        &self,
        path: &Path,
        threads: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), EmbeddedError> {
        let w = self.writer()?;
        // Progress counts the generated (deferred) tensors' bytes.
        let total: u64 = (0..self.tensors.len())
            .filter(|&i| self.types[i] != GgmlType::F32)
            .filter_map(|i| w.tensor_bytes(i))
            .sum();
        let mut done = 0u64;
        w.write_file_streaming(path, |i, out| {
            let t = &self.tensors[i];
            let ty = self.types[i];
            let Init::Normal { std } = t.init else {
                unreachable!("only 2-D weights are deferred")
            };
            // A 3-D expert tensor is its experts' matrices one after the other.
            let (k, rows) = (t.dims[0] as usize, t.dims[1..].iter().product::<u64>() as usize);
            let row_bytes = ty.row_bytes(k).expect("planned types fit the row length");
            let base = self.recipe.seed ^ fnv1a64(t.name.as_bytes());
            // Chunks of about 32 MiB, each split between the threads by rows.
            let per_chunk = ((32usize << 20) / row_bytes).max(threads).min(rows);
            let mut buf = vec![0u8; per_chunk * row_bytes];
            let mut r0 = 0;
            while r0 < rows {
                let n = per_chunk.min(rows - r0);
                let chunk = &mut buf[..n * row_bytes];
                let per_thread = n.div_ceil(threads);
                std::thread::scope(|s| {
                    for (j, part) in chunk.chunks_mut(per_thread * row_bytes).enumerate() {
                        let first = r0 + j * per_thread;
                        s.spawn(move || {
                            for (r, row) in part.chunks_exact_mut(row_bytes).enumerate() {
                                fill_row(ty, row_seed(base, first + r), f64::from(std), row);
                            }
                        });
                    }
                });
                out.write_all(chunk).map_err(|source| GgufError::Io {
                    path: path.display().to_string(),
                    op: "write",
                    source,
                })?;
                r0 += n;
                done += chunk.len() as u64;
                progress(done, total);
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// The seed of row `r` of a tensor whose stream is `base`.
fn row_seed(base: u64, r: usize) -> u64 {
    base ^ (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// FNV-1a, 64 bits (as the embedded model's per-tensor seed offset).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// E(u²) of the per-block jitter `u` uniform in [0.75, 1.25).
const JITTER_SQ: f64 = 49.0 / 48.0;

/// A uniform integer in `lo..=hi` from 32 random bits (multiply-shift).
fn uniform(bits: u32, lo: u32, hi: u32) -> u32 {
    lo + ((u64::from(bits) * u64::from(hi - lo + 1)) >> 32) as u32
}

/// Random bytes into `out`.
fn fill_bytes(rng: &mut Rng, out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let r = rng.next_u64().to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&r[..n]);
}

/// The block super-scale: `sigma / spread` times a jitter in [0.75, 1.25), as f16 bits.
fn scale(rng: &mut Rng, sigma: f64, spread: f64) -> u16 {
    let u = 0.75 + 0.5 * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64);
    f32_to_f16_bits((sigma / (spread * JITTER_SQ.sqrt()) * u) as f32)
}

/// The weight types [`fill_row`] generates.
const GENERATED: [GgmlType; 4] = [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];

/// One row of random blocks of `ty` (see the module doc) for standard deviation `sigma`.
pub fn fill_row(ty: GgmlType, seed: u64, sigma: f64, row: &mut [u8]) {
    let mut rng = Rng::new(seed);
    let rng = &mut rng;
    match ty {
        GgmlType::Q4_K => {
            for b in row.chunks_exact_mut(144) {
                let d = scale(rng, sigma, (21.25f64 * 2341.5).sqrt());
                // dmin = 8 d: exact in f16 unless it overflows, which no sigma here does.
                let dmin = f32_to_f16_bits(f16_bits_to_f32(d) * 8.0);
                b[0..2].copy_from_slice(&d.to_le_bytes());
                b[2..4].copy_from_slice(&dmin.to_le_bytes());
                let r = rng.next_u64();
                let mut sc = [0u8; 8];
                let mut m = [0u8; 8];
                for j in 0..8 {
                    sc[j] = 32 + ((r >> (5 * j)) & 31) as u8;
                    m[j] = ((15 * u32::from(sc[j]) + 8) / 16) as u8;
                }
                pack_scales_k4(&sc, &m, &mut b[4..16]);
                fill_bytes(rng, &mut b[16..144]);
            }
        }
        GgmlType::Q6_K => {
            for b in row.chunks_exact_mut(210) {
                fill_bytes(rng, &mut b[0..192]);
                let r = rng.next_u64();
                let r2 = rng.next_u64();
                for j in 0..16 {
                    let bits = if j < 8 { r >> (8 * j) } else { r2 >> (8 * (j - 8)) };
                    let mag = 64 + (bits & 63) as i32;
                    let s = if (bits >> 6) & 1 == 1 { -mag } else { mag };
                    b[192 + j] = s as i8 as u8;
                }
                let d = scale(rng, sigma, (341.5f64 * 9461.5).sqrt());
                b[208..210].copy_from_slice(&d.to_le_bytes());
            }
        }
        GgmlType::Q8_0 => {
            for b in row.chunks_exact_mut(34) {
                let d = scale(rng, sigma, (5418.0f64 + 2.0 / 3.0).sqrt());
                b[0..2].copy_from_slice(&d.to_le_bytes());
                for q in b[2..34].chunks_exact_mut(2) {
                    let r = rng.next_u64();
                    q[0] = (uniform(r as u32, 0, 254) as i32 - 127) as i8 as u8;
                    q[1] = (uniform((r >> 32) as u32, 0, 254) as i32 - 127) as i8 as u8;
                }
            }
        }
        GgmlType::Q4_0 => {
            for b in row.chunks_exact_mut(18) {
                // A random sign (as the reference quantizer's `d = max / -8`, whose sign
                // is the largest value's) cancels the mean offset of `q - 8`.
                let sign = if rng.next_u64() & 1 == 1 { 0x8000 } else { 0 };
                let d = scale(rng, sigma, 21.5f64.sqrt()) | sign;
                b[0..2].copy_from_slice(&d.to_le_bytes());
                fill_bytes(rng, &mut b[2..18]);
            }
        }
        other => unreachable!("{} is not a generated weight type", other.name()),
    }
}

/// Packs eight 6-bit scales and mins into Q4_K's 12 bytes, the inverse of ggml's
/// `get_scale_min_k4`: bytes 0..4 hold `sc[0..4]` in their low 6 bits and the top 2 bits
/// of `sc[4..8]` above; bytes 4..8 the same for the mins; bytes 8..12 the low 4 bits of
/// `sc[4+j]` (low nibble) and `m[4+j]` (high nibble).
pub fn pack_scales_k4(sc: &[u8; 8], m: &[u8; 8], out: &mut [u8]) {
    for j in 0..4 {
        out[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        out[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        out[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4);
    }
}

/// What [`build_shaped`] did.
#[derive(Clone, Debug)]
pub struct BuiltShaped {
    /// The model file.
    pub path: PathBuf,
    /// Size in bytes.
    pub bytes: u64,
    /// Whether it was generated now (false: a matching file was reused).
    pub generated: bool,
    /// Seconds spent generating (0 when reused).
    pub seconds: f64,
    /// The recipe line recorded in the file.
    pub canonical: String,
}

/// Build a shaped model (or reuse a matching file): see the module doc.
pub fn build_shaped(
    opts: &ShapeOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<BuiltShaped, EmbeddedError> {
    let model = opts.model()?;
    let shape = Shape::find(&opts.shape).expect("validated by model()");
    let path = match &opts.out {
        Some(p) => p.clone(),
        None => {
            let cache = match &opts.cache {
                Some(c) => c.clone(),
                None => default_cache_dir()?,
            };
            cache.join("model").join(opts.file_name(&shape))
        }
    };
    let canonical = model.canonical();
    let bytes = model.file_bytes()?;
    if !opts.force && reusable(&path, &canonical, bytes) {
        return Ok(BuiltShaped { path, bytes, generated: false, seconds: 0.0, canonical });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| EmbeddedError::Io {
            path: dir.display().to_string(),
            op: "create folder",
            source,
        })?;
    }
    let start = Instant::now();
    model.write(&path, opts.threads, progress)?;
    Ok(BuiltShaped {
        path,
        bytes,
        generated: true,
        seconds: start.elapsed().as_secs_f64(),
        canonical,
    })
}

/// Whether `path` is a shaped model of these options: a readable GGUF with this
/// generator, this recipe line, and the expected size.
fn reusable(path: &Path, canonical: &str, bytes: u64) -> bool {
    if std::fs::metadata(path).map(|m| m.len()).ok() != Some(bytes) {
        return false;
    }
    let Ok(f) = GgufFile::open(path) else { return false };
    f.get_str(GENERATOR_KEY).ok() == Some(GENERATOR)
        && f.get_str(RECIPE_KEY).ok() == Some(canonical)
        && f.get_u64(SEED_KEY).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequence::{self, RunSpec};
    use crate::{Arith, Attention, Decoder, Mode, Model, Residual, TapSink};
    use tiercheck_lanes::{self as lanes, Impl};

    /// A small variant of a real shape: the real widths, few layers, a small vocabulary.
    fn small(shape: &str, layers: u32, vocab: u32, dir: &Path, threads: usize) -> ShapeOptions {
        ShapeOptions {
            shape: shape.into(),
            layers: Some(layers),
            vocab: Some(vocab),
            cache: Some(dir.to_owned()),
            threads,
            ..Default::default()
        }
    }

    #[test]
    fn shapes_are_found_by_either_name_and_unknown_ones_listed() {
        assert_eq!(Shape::find("8B").unwrap().n_embd, 4096);
        assert_eq!(Shape::find("qwen3-32b").unwrap().n_layer, 64);
        let err = ShapeOptions { shape: "27b".into(), ..Default::default() }
            .model()
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown shape \"27b\"") && err.contains("qwen3-8b"), "{err}");
    }

    #[test]
    fn bad_options_are_refused_with_the_option_named() {
        let base = ShapeOptions { shape: "0.6b".into(), ..Default::default() };
        let cases: [(ShapeOptions, &str); 6] = [
            (ShapeOptions { layers: Some(0), ..base.clone() }, "--layers 0"),
            (ShapeOptions { layers: Some(29), ..base.clone() }, "has 28 layers"),
            (ShapeOptions { vocab: Some(10), ..base.clone() }, "--vocab 10"),
            (ShapeOptions { threads: 0, ..base.clone() }, "--threads 0"),
            (ShapeOptions { quantization: "iq2_xxs".into(), ..base.clone() }, "iq2_xxs"),
            (ShapeOptions { quantization: "q5_k_m".into(), ..base.clone() }, "would be q5_K"),
        ];
        for (opts, want) in cases {
            let err = opts.model().unwrap_err().to_string();
            assert!(err.starts_with("--shape") && err.contains(want), "{want}: {err}");
        }
    }

    #[test]
    fn the_file_has_the_shape_the_types_and_the_size_announced() {
        for (name, tied) in [("qwen3-8b", false), ("qwen3-1.7b", true)] {
            let m = ShapeOptions { shape: name.into(), ..Default::default() }.model().unwrap();
            let s = Shape::find(name).unwrap();
            assert_eq!(m.tied, tied);
            assert_eq!(m.tensors.iter().any(|t| t.name == "output.weight"), !tied);
            let ty = |n: &str| m.types[m.tensors.iter().position(|t| t.name == n).unwrap()];
            // llama.cpp's Q4_K_M: the output (or the tied embedding) Q6_K; attn_v and
            // ffn_down Q6_K in the first layers, Q4_K in between.
            assert_eq!(ty("token_embd.weight"), if tied { GgmlType::Q6_K } else { GgmlType::Q4_K });
            assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q4_K);
            assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q6_K);
            assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q6_K);
            assert_eq!(ty("blk.4.attn_v.weight"), GgmlType::Q4_K);
            assert_eq!(ty("blk.0.attn_norm.weight"), GgmlType::F32);
            let q = m.tensors.iter().find(|t| t.name == "blk.0.attn_q.weight").unwrap();
            assert_eq!(q.dims, vec![u64::from(s.n_embd), u64::from(s.n_head * s.head_dim)]);
            let params: u64 = m.tensors.iter().map(|t| t.dims.iter().product::<u64>()).sum();
            let bytes = m.file_bytes().unwrap();
            // Q4_K_M averages about 4.9 bits a weight.
            let bits = bytes as f64 * 8.0 / params as f64;
            assert!((4.5..5.5).contains(&bits), "{name}: {bits:.2} bits per weight");
        }
        let m = ShapeOptions::default().model().unwrap();
        let gb = m.file_bytes().unwrap() as f64 / 1e9;
        assert!((4.5..5.5).contains(&gb), "qwen3-8b q4_k_m is {gb:.2} GB");
        // Qwen2.5: the qwen2 architecture, F32 Q/K/V biases instead of Q/K norms.
        for (name, tied, gb_range) in
            [("qwen2.5-7b", false, 4.3..5.0), ("qwen2.5-1.5b", true, 0.9..1.3)]
        {
            let m = ShapeOptions { shape: name.into(), ..Default::default() }.model().unwrap();
            assert_eq!((m.recipe.architecture.as_str(), m.tied), ("qwen2", tied));
            let ty = |n: &str| m.types[m.tensors.iter().position(|t| t.name == n).unwrap()];
            assert_eq!(ty("blk.0.attn_k.bias"), GgmlType::F32);
            assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q4_K);
            assert!(!m.tensors.iter().any(|t| t.name.contains("attn_q_norm")));
            let gb = m.file_bytes().unwrap() as f64 / 1e9;
            assert!(gb_range.contains(&gb), "{name} q4_k_m is {gb:.2} GB");
        }
        // Llama 3.1 8B: the llama architecture with its RoPE factors, no norm or bias.
        let m = ShapeOptions { shape: "llama3.1-8b".into(), ..Default::default() }.model().unwrap();
        assert_eq!((m.recipe.architecture.as_str(), m.recipe.rope_freq_base), ("llama", 500000.0));
        assert!(m.tensors.iter().any(|t| t.name == "rope_freqs.weight" && t.dims == vec![64]));
        assert!(!m
            .tensors
            .iter()
            .any(|t| t.name.contains("norm.weight") && t.name.contains("attn_q")));
        let gb = m.file_bytes().unwrap() as f64 / 1e9;
        assert!((4.6..5.2).contains(&gb), "llama3.1-8b q4_k_m is {gb:.2} GB");
    }

    #[test]
    fn bytes_do_not_depend_on_the_thread_count_and_the_file_is_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let one = small("0.6b", 1, 512, tmp.path(), 1);
        let a = build_shaped(&one, &mut |_, _| {}).unwrap();
        assert!(a.generated);
        assert_eq!(
            a.path,
            tmp.path().join("model").join("shape-qwen3-0.6b-L1-V512-q4_k_m-s20261202.gguf")
        );
        let bytes_a = std::fs::read(&a.path).unwrap();
        assert_eq!(bytes_a.len() as u64, a.bytes);
        let again = build_shaped(&one, &mut |_, _| {}).unwrap();
        assert!(!again.generated, "a matching file is reused");

        let three = ShapeOptions {
            out: Some(tmp.path().join("t3.gguf")),
            ..small("0.6b", 1, 512, tmp.path(), 3)
        };
        let mut calls = 0;
        let mut last = (0, 0);
        let b = build_shaped(&three, &mut |d, t| {
            calls += 1;
            last = (d, t);
        })
        .unwrap();
        assert!(b.generated && calls > 5, "{calls} progress calls");
        assert_eq!(last.0, last.1, "progress ends at the total");
        assert_eq!(std::fs::read(&b.path).unwrap(), bytes_a, "1 and 3 threads differ");

        // Another seed gives other blocks; a damaged file is rebuilt.
        let other = ShapeOptions { seed: 7, ..one.clone() };
        let c = build_shaped(&other, &mut |_, _| {}).unwrap();
        assert_ne!(std::fs::read(&c.path).unwrap(), bytes_a);
        std::fs::write(&a.path, b"not a model").unwrap();
        assert!(build_shaped(&one, &mut |_, _| {}).unwrap().generated);
        assert_eq!(std::fs::read(&a.path).unwrap(), bytes_a);
    }

    /// Every weight's dequantized values have mean about 0 and standard deviation about
    /// the tensor's target (the formulas of the module doc), for every generated type.
    #[test]
    fn dequantized_weights_have_the_intended_scales() {
        let tmp = tempfile::tempdir().unwrap();
        for scheme in ["q4_k_m", "q8_0", "q4_0", "q6_k"] {
            let opts = ShapeOptions {
                quantization: scheme.into(),
                ..small("0.6b", 1, 1024, tmp.path(), 2)
            };
            let built = build_shaped(&opts, &mut |_, _| {}).unwrap();
            let model = opts.model().unwrap();
            let f = GgufFile::open(&built.path).unwrap();
            for spec in &model.tensors {
                let t = f.tensor(&spec.name).unwrap();
                let mut w = vec![0f32; t.dims.iter().product::<u64>() as usize];
                tiercheck_core::blocks::dequantize(t.ty, f.tensor_data(t), &mut w).unwrap();
                let n = w.len() as f64;
                let mean = w.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
                let sd = (w.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n).sqrt();
                let (want_mean, want_sd) = match spec.init {
                    Init::Normal { std } => (0.0, f64::from(std)),
                    Init::Norm { noise_std } => (1.0, f64::from(noise_std)),
                    Init::RopeFreqs => unreachable!("no shaped model is llama"),
                };
                let what = format!("{scheme} {} ({})", spec.name, t.ty.name());
                // 10% plus three standard errors of a sample deviation; the mean within
                // 5% of the deviation plus three standard errors.
                let tol = 0.1 + 3.0 / (2.0 * n).sqrt();
                assert!(
                    (sd / want_sd - 1.0).abs() < tol,
                    "{what}: sd {sd:.4e}, want {want_sd:.4e}"
                );
                assert!(
                    (mean - want_mean).abs() < want_sd * (0.05 + 3.0 / n.sqrt()),
                    "{what}: mean {mean:.3e}"
                );
            }
        }
    }

    /// Qwen3-30B-A3B's shape: 3-D expert tensors (128 experts of 768), the F32 router, the
    /// dense Q4_K_M rules (128 experts is not llama.cpp's 8-expert case), 18.6 GB.
    #[test]
    fn the_moe_shape_plans_experts_and_router() {
        let opts = ShapeOptions { shape: "qwen3-30b-a3b".into(), ..ShapeOptions::default() };
        let m = opts.model().unwrap();
        let ty = |n: &str| m.types[m.tensors.iter().position(|t| t.name == n).unwrap()];
        let dims = |n: &str| m.tensors.iter().find(|t| t.name == n).unwrap().dims.clone();
        assert_eq!(dims("blk.5.ffn_gate_exps.weight"), vec![2048, 768, 128]);
        assert_eq!(dims("blk.5.ffn_down_exps.weight"), vec![768, 2048, 128]);
        assert_eq!(ty("blk.5.ffn_gate_inp.weight"), GgmlType::F32);
        assert_eq!(ty("blk.5.attn_k.weight"), GgmlType::Q4_K);
        assert_eq!(ty("blk.5.ffn_up_exps.weight"), GgmlType::Q4_K);
        assert_eq!(ty("blk.0.ffn_down_exps.weight"), GgmlType::Q6_K);
        let gb = m.file_bytes().unwrap() as f64 / 1e9;
        assert!((gb - 18.6).abs() < 0.05, "{gb:.2} GB");
    }

    /// A small variant of a tied and an untied Qwen3 shape and of a Qwen2.5 one opens and
    /// decodes on a native and a twin lane, with finite logits that are neither flat nor saturated.
    #[test]
    fn small_variants_open_and_decode() {
        let tmp = tempfile::tempdir().unwrap();
        for shape in ["0.6b", "8b", "qwen2.5-1.5b", "llama3.1-8b"] {
            let built =
                build_shaped(&small(shape, 2, 2048, tmp.path(), 2), &mut |_, _| {}).unwrap();
            let model = Model::open(&built.path).unwrap();
            let s = Shape::find(shape).unwrap();
            assert_eq!(model.hp.n_embd, s.n_embd as usize);
            assert_eq!(model.hp.n_layer, 2);
            assert_eq!(model.hp.n_vocab, 2048);
            let mut tokens = Vec::new();
            for lane in ["ref", "aarch64-neon"] {
                let chosen = lanes::choose(lanes::find(lane).unwrap(), Impl::Auto).unwrap();
                let arith = Arith::from_chosen(&chosen, 2);
                let dec = Decoder::new(&model, arith, Residual::F32, 256, Attention::LLAMA_DEFAULT)
                    .unwrap();
                let spec = RunSpec {
                    ids: vec![1, 77, 1500, 9],
                    steps: 3,
                    mode: Mode::Decode,
                    batching: crate::sequence::Batching::LLAMA_CLI,
                    forced: Vec::new(),
                };
                let out = sequence::run(&dec, &spec, TapSink::new(true, false)).unwrap();
                let logits =
                    &out.taps.iter().rev().find(|t| t.name == "result_output").unwrap().data;
                assert!(logits.iter().all(|v| v.is_finite()), "{shape} {lane}: non-finite logits");
                let n = logits.len() as f64;
                let mean = logits.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
                let sd =
                    (logits.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n).sqrt();
                assert!((0.3..30.0).contains(&sd), "{shape} {lane}: logit spread {sd}");
                tokens.push(out.generated);
            }
            assert_eq!(tokens[0].len(), 3);
        }
    }
}
