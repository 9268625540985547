//! The qwen3, qwen2 and llama forward pass, op by op as llama.cpp's graph and ggml's CPU backend run it
//! (every token's logits), with the K/V cache type and attention path of
//! [`Attention`] (the float order of attention is in [`crate::attention`]).
//!
//! Float order, per step of `m` tokens at positions `p0..p0+m`:
//!
//! 1. `inp_embd`: the token rows of `token_embd.weight`, dequantized by the lane
//!    ([`Kernels::dequantize`], ggml's `get_rows`).
//! 2. Per layer `L`:
//!    - `attn_norm`: [`ElemOps::rms_norm_mul`] (on the CPU tiers [`elem::rms_norm_mul`]:
//!      f64 sum of f32 squares, `1/sqrtf(mean+eps)`, then `x*scale*w`; the GPU flavours'
//!      f32 block reduction, [`tiercheck_core::gpu::elem`]);
//!    - `Q`, `K`, `V` projections through the lane's matmul (its activation quantizer,
//!      repack and gemv/gemm choice for `m` rows);
//!    - qwen2: the Q, K and V biases added (`ggml_add`, one f32 addition per value);
//!    - per head, (qwen3) RMSNorm with `attn_q_norm` / `attn_k_norm`, then NeoX RoPE (llama:
//!      normal-mode RoPE on adjacent pairs, [`elem::rope_norm`], each pair's angle divided
//!      by `rope_freqs` where the file has them) with ggml's
//!      cache (`theta *= powf(base, -2/d)` per pair, libm `cosf`/`sinf`) and the
//!      flavour's contraction ([`elem::rope_neox`]; CUDA's own angles and fast
//!      `sinf`/`cosf`, [`ElemFlavour::rope_cache`]) — the `Qcur`/`Kcur` taps;
//!    - K and V stored in the cache (rounded to its type; V transposed without flash
//!      attention, as llama.cpp stores it);
//!    - attention over `n_kv` cells, llama.cpp's padded KV length
//!      (`max(256, roundup(used, 256))`, capped at the context), by `mul_mat` +
//!      `soft_max_ext` + `mul_mat` or by `flash_attn_ext` ([`crate::attention`]) — the
//!      `kqv_out` tap;
//!    - `attn_output` projection, plus the layer input: `ffn_inp`;
//!    - `ffn_norm`, `ffn_gate` and `ffn_up` projections, [`ElemOps::swiglu`], `ffn_down`:
//!      `ffn_out` (the SwiGLU product, `ffn_down`'s input, is the `ffn_swiglu` tap); plus
//!      `ffn_inp`: `l_out`.
//! 3. `result_norm` with `output_norm.weight`, `result_output` through `output.weight`
//!    (or the token embedding when the model ties them).
//!
//! With [`Residual::Bf16`] the residual stream (`inp_embd`, `ffn_inp`, `l_out`) is
//! rounded to bf16 after each add, as engines with a bf16 stream do; llama.cpp's CPU
//! backend keeps it in f32 ([`Residual::F32`], the default).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use tiercheck_core::elem::{self, ElemFlavour, ElemOps};
use tiercheck_core::lane::parallel::matmul_parallel;
use tiercheck_core::repack::{Prepared, Target};
use tiercheck_core::rng::splitmix64;
use tiercheck_core::{GgmlType, Kernels, WeightMatrix};
use tiercheck_lanes::Chosen;

use super::attention::{Attention, KvCache, Step};
use super::hparams::HParams;
use super::state::KvState;
use super::taps::TapSink;
use super::{Model, ModelError};

/// Data type of the residual stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Residual {
    /// f32, as ggml's CPU backend.
    F32,
    /// Rounded to bf16 after every residual add.
    Bf16,
}

impl Residual {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Residual::F32 => "f32",
            Residual::Bf16 => "bf16",
        }
    }
}

/// The arithmetic of a decoder.
#[derive(Clone, Copy)]
pub enum Arith {
    /// A lane: its kernels for matmuls and embeddings, its elementwise flavour.
    Lane {
        /// Matmul and dequantization kernels.
        kernels: &'static dyn Kernels,
        /// Elementwise and attention kernels.
        elem: &'static dyn ElemOps,
        /// Threads per matmul (results do not depend on it).
        threads: usize,
    },
    /// The architecture check: weights dequantized to f32 once, activations never
    /// quantized, every matmul output an f64 sum of exact products rounded to f32;
    /// elementwise loops of the x64 flavour. Compared with a float64 numpy forward.
    DequantF32,
}

impl Arith {
    /// The arithmetic of a chosen lane implementation: its kernels and elementwise
    /// loops, with `threads` threads per matmul.
    pub fn from_chosen(chosen: &Chosen, threads: usize) -> Arith {
        Arith::Lane { kernels: chosen.kernels, elem: chosen.elem, threads }
    }
}

enum Linear<'m> {
    Lane(Prepared<'m>),
    F32 { n: usize, k: usize, w: Vec<f32> },
}

struct Layer<'m> {
    attn_norm: Vec<f32>,
    wq: Linear<'m>,
    wk: Linear<'m>,
    wv: Linear<'m>,
    wo: Linear<'m>,
    /// qwen3's per-head Q and K norm weights (empty without them).
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    /// qwen2's Q, K and V biases (empty without them).
    bq: Vec<f32>,
    bk: Vec<f32>,
    bv: Vec<f32>,
    ffn_norm: Vec<f32>,
    ffn: Ffn<'m>,
}

/// A layer's feed-forward.
enum Ffn<'m> {
    /// SwiGLU: gate, up and down projections.
    Dense { gate: Linear<'m>, up: Linear<'m>, down: Linear<'m> },
    /// qwen3moe: the F32 router (`n_expert` rows of `n_embd`) and each expert's gate, up
    /// and down projections.
    Moe { router: Vec<f32>, gate: Vec<Linear<'m>>, up: Vec<Linear<'m>>, down: Vec<Linear<'m>> },
}

impl Ffn<'_> {
    fn linears(&self) -> Vec<&Linear<'_>> {
        match self {
            Ffn::Dense { gate, up, down } => vec![gate, up, down],
            Ffn::Moe { gate, up, down, .. } => gate.iter().chain(up).chain(down).collect(),
        }
    }
}

/// A model ready to run on one lane.
pub struct Decoder<'m> {
    /// Hyper-parameters.
    pub hp: &'m HParams,
    embd_ty: GgmlType,
    embd: &'m [u8],
    layers: Vec<Layer<'m>>,
    /// llama: Llama 3.1's RoPE frequency factors (`rope_freqs.weight`), empty without.
    rope_freqs: Vec<f32>,
    out_norm: Vec<f32>,
    output: Linear<'m>,
    arith: Arith,
    elem: &'static dyn ElemOps,
    residual: Residual,
    n_ctx: usize,
    attn: Attention,
    paths: Mutex<BTreeSet<String>>,
    dither: Option<u64>,
    fault: Option<tiercheck_core::lane::PlantedFault>,
    state: Option<Arc<KvState>>,
}

fn kerr(what: impl Into<String>) -> impl FnOnce(tiercheck_core::KernelError) -> ModelError {
    let what = what.into();
    move |source| ModelError::Kernel { what, source }
}

fn f32_tensor(model: &Model, name: &str) -> Result<Vec<f32>, ModelError> {
    let t = model.file.tensor(name).ok_or_else(|| ModelError::Invalid {
        path: model.path.display().to_string(),
        problem: format!("missing tensor '{name}'"),
    })?;
    let bytes = model.file.tensor_data(t);
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The next float from `x` toward `to` (one ulp; zero steps to the smallest subnormal).
fn next_toward(x: f32, to: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    if to > x {
        x.next_up()
    } else {
        x.next_down()
    }
}

impl<'m> Decoder<'m> {
    /// Prepare `model` for `arith` (repacking weights where the lane's tier does) with a
    /// context of `n_ctx` positions (a multiple of 256, as llama.cpp pads it) and the
    /// attention options `attn`.
    pub fn new(
        model: &'m Model,
        arith: Arith,
        residual: Residual,
        n_ctx: usize,
        attn: Attention,
    ) -> Result<Decoder<'m>, ModelError> {
        let hp = &model.hp;
        if n_ctx == 0 || !n_ctx.is_multiple_of(256) {
            return Err(ModelError::Request(format!(
                "context length {n_ctx} must be a positive multiple of 256 (llama.cpp pads its KV cache so)"
            )));
        }
        if attn.tier_threads == 0 {
            return Err(ModelError::Request("the tier's thread count must be at least 1".into()));
        }
        let f = &model.file;
        let tied = f.tensor("output.weight").is_none();
        // Tensor `name`, or expert `e` of the 3-D expert tensor `name` (its `e`-th matrix).
        let linear_of = |name: &str, expert: Option<usize>| -> Result<Linear<'m>, ModelError> {
            let t = f.tensor(name).expect("checked by HParams");
            let (k, n) = (t.dims[0] as usize, t.dims[1] as usize);
            let mut data = f.tensor_data(t);
            if let Some(e) = expert {
                let bytes = data.len() / t.dims[2] as usize;
                data = &data[e * bytes..(e + 1) * bytes];
            }
            // The embedding's rows are read by get_rows even when the output is tied; an
            // expert tensor is released after its last expert.
            let last_expert = expert.is_none_or(|e| e + 1 == t.dims[2] as usize);
            let release = name != "token_embd.weight" && last_expert;
            if t.ty == GgmlType::F32 || matches!(arith, Arith::DequantF32) {
                let mut w = vec![0.0f32; n * k];
                tiercheck_core::blocks::dequantize(t.ty, data, &mut w)
                    .map_err(kerr(format!("dequantize {name}")))?;
                if release {
                    f.release_tensor(t);
                }
                return Ok(Linear::F32 { n, k, w });
            }
            let Arith::Lane { kernels, .. } = arith else { unreachable!() };
            if kernels.act_rule(t.ty).is_err() {
                return Err(ModelError::Request(format!(
                    "{}: tensor '{name}' is {}, which the chosen lane does not multiply \
                     (`tiercheck lanes` lists each lane's weight types; `ref` multiplies all)",
                    f.path(),
                    t.ty.name()
                )));
            }
            let w = WeightMatrix::new(t.ty, n, k, data).map_err(kerr(name))?;
            let p = kernels.prepare(w, Target::Cpu).map_err(kerr(format!("prepare {name}")))?;
            // A repacked copy is all the lane reads: release the mapped plain pages (the
            // resident set stays near the file plus the repacked copies, not both; every
            // expert of a tensor repacks alike).
            if release && matches!(p, Prepared::Repacked(_)) {
                f.release_tensor(t);
            }
            Ok(Linear::Lane(p))
        };
        let linear = |name: &str| linear_of(name, None);
        let layer = |l: usize| -> Result<Layer<'m>, ModelError> {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            let norm = |s: &str| {
                if hp.qk_norm() {
                    f32_tensor(model, &b(s))
                } else {
                    Ok(Vec::new())
                }
            };
            let bias = |s: &str| {
                if hp.qkv_bias() {
                    f32_tensor(model, &format!("blk.{l}.{s}.bias"))
                } else {
                    Ok(Vec::new())
                }
            };
            Ok(Layer {
                attn_norm: f32_tensor(model, &b("attn_norm"))?,
                wq: linear(&b("attn_q"))?,
                wk: linear(&b("attn_k"))?,
                wv: linear(&b("attn_v"))?,
                wo: linear(&b("attn_output"))?,
                q_norm: norm("attn_q_norm")?,
                k_norm: norm("attn_k_norm")?,
                bq: bias("attn_q")?,
                bk: bias("attn_k")?,
                bv: bias("attn_v")?,
                ffn_norm: f32_tensor(model, &b("ffn_norm"))?,
                ffn: match hp.moe {
                    None => Ffn::Dense {
                        gate: linear(&b("ffn_gate"))?,
                        up: linear(&b("ffn_up"))?,
                        down: linear(&b("ffn_down"))?,
                    },
                    Some(moe) => {
                        let experts = |s: &str| {
                            (0..moe.n_expert)
                                .map(|e| linear_of(&b(s), Some(e)))
                                .collect::<Result<Vec<_>, _>>()
                        };
                        Ffn::Moe {
                            router: f32_tensor(model, &b("ffn_gate_inp"))?,
                            gate: experts("ffn_gate_exps")?,
                            up: experts("ffn_up_exps")?,
                            down: experts("ffn_down_exps")?,
                        }
                    }
                },
            })
        };
        // Layers are prepared in parallel (repacking is a pure function of each tensor's
        // bytes); the first error in layer order is the one reported.
        let threads = match arith {
            Arith::Lane { threads, .. } => threads.clamp(1, hp.n_layer.max(1)),
            Arith::DequantF32 => 1,
        };
        let mut slots: Vec<Option<Result<Layer<'m>, ModelError>>> =
            (0..hp.n_layer).map(|_| None).collect();
        std::thread::scope(|s| {
            let per = hp.n_layer.div_ceil(threads).max(1);
            for (j, part) in slots.chunks_mut(per).enumerate() {
                let layer = &layer;
                s.spawn(move || {
                    for (i, slot) in part.iter_mut().enumerate() {
                        *slot = Some(layer(j * per + i));
                    }
                });
            }
        });
        let layers = slots
            .into_iter()
            .map(|r| r.expect("every layer prepared"))
            .collect::<Result<Vec<_>, _>>()?;
        let output = if tied { linear("token_embd.weight")? } else { linear("output.weight")? };
        let embd = f.tensor("token_embd.weight").expect("checked by HParams");
        let elem: &'static dyn ElemOps = match arith {
            Arith::Lane { elem, .. } => elem,
            Arith::DequantF32 => elem::portable(ElemFlavour::X64),
        };
        if let Some(why) = unsupported(model, elem.flavour()) {
            return Err(ModelError::Request(why));
        }
        let rope_freqs = if f.tensor("rope_freqs.weight").is_some() {
            f32_tensor(model, "rope_freqs.weight")?
        } else {
            Vec::new()
        };
        Ok(Decoder {
            hp,
            embd_ty: embd.ty,
            embd: f.tensor_data(embd),
            layers,
            rope_freqs,
            out_norm: f32_tensor(model, "output_norm.weight")?,
            output,
            arith,
            elem,
            residual,
            n_ctx,
            attn,
            paths: Mutex::new(BTreeSet::new()),
            dither: None,
            fault: match arith {
                Arith::Lane { kernels, .. } => kernels.planted_fault(),
                Arith::DequantF32 => None,
            },
            state: None,
        })
    }

    /// Perturb the residual stream after layer 0 by a seeded one-ulp dither (`None`:
    /// off). Each value of `l_out-0` moves one ulp down, stays, or moves one ulp up,
    /// chosen by a hash of (seed, position, index), so the perturbation of a token does
    /// not depend on how tokens are batched. This is the minimal perturbation that
    /// defines the noise floor of divergence analysis.
    pub fn set_dither(&mut self, seed: Option<u64>) {
        self.dither = seed;
    }

    fn apply_dither(&self, x: &mut [f32], pos0: usize) {
        let Some(seed) = self.dither else { return };
        let e = self.hp.n_embd;
        for (r, row) in x.chunks_exact_mut(e).enumerate() {
            for (i, v) in row.iter_mut().enumerate() {
                let h = splitmix64(seed ^ splitmix64(((pos0 + r) as u64) << 32 | i as u64));
                *v = match h % 3 {
                    0 => next_toward(*v, f32::NEG_INFINITY),
                    1 => *v,
                    _ => next_toward(*v, f32::INFINITY),
                };
            }
        }
    }

    /// Context length.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The elementwise flavour in use.
    pub(crate) fn elem_flavour(&self) -> ElemFlavour {
        self.elem.flavour()
    }

    /// Which kernel path each matmul took so far: `type layout m=rows path` lines.
    pub fn matmul_paths(&self) -> Vec<String> {
        self.paths.lock().map(|p| p.iter().cloned().collect()).unwrap_or_default()
    }

    /// Whether any weight was repacked for this lane.
    pub fn repacked(&self) -> bool {
        let all = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo].into_iter().chain(l.ffn.linears()));
        all.chain(std::iter::once(&self.output))
            .any(|w| matches!(w, Linear::Lane(Prepared::Repacked(_))))
    }

    /// Start every run from a cache llama.cpp saved (`None`: from an empty cache),
    /// checked against the model, the attention options and the context.
    pub fn set_state(&mut self, state: Option<Arc<KvState>>) -> Result<(), ModelError> {
        if let Some(s) = &state {
            s.check(self.hp, &self.attn, self.n_ctx)?;
        }
        self.state = state;
        Ok(())
    }

    /// The saved cache runs start from, if any.
    pub fn state(&self) -> Option<&Arc<KvState>> {
        self.state.as_ref()
    }

    /// A fresh KV cache for this decoder: empty, or holding the saved cells runs start
    /// from ([`Decoder::set_state`]).
    pub fn new_cache(&self) -> Result<KvCache, ModelError> {
        let mut c = KvCache::new(self.hp, self.n_ctx, self.attn)?;
        c.fault = self.fault;
        if let Some(s) = &self.state {
            c.load(s.cells, &s.k, &s.v);
        }
        Ok(c)
    }

    /// The attention options.
    pub fn attention(&self) -> Attention {
        self.attn
    }

    fn matmul(
        &self,
        w: &Linear<'_>,
        x: &[f32],
        m: usize,
        what: &str,
    ) -> Result<Vec<f32>, ModelError> {
        match w {
            Linear::F32 { n, k, w } => {
                let mut out = vec![0.0f32; m * n];
                for (i, xi) in x.chunks_exact(*k).enumerate() {
                    for j in 0..*n {
                        let row = &w[j * k..(j + 1) * k];
                        let s: f64 = row.iter().zip(xi).map(|(a, b)| *a as f64 * *b as f64).sum();
                        out[i * n + j] = s as f32;
                    }
                }
                self.note_path("f32", "dense", m, "f64-dot");
                Ok(out)
            }
            Linear::Lane(p) => {
                let Arith::Lane { kernels, threads, .. } = self.arith else { unreachable!() };
                let (ty, layout, path) = match p {
                    Prepared::Plain(w) => (w.ty().name(), "plain", kernels.plain_path(w.ty(), m)),
                    Prepared::Repacked(r) => (
                        r.layout().source().name(),
                        r.layout().name(),
                        match (m / 4, m % 4) {
                            (0, _) => "gemv",
                            (_, 0) => "gemm",
                            _ => "gemm+gemv",
                        },
                    ),
                };
                self.note_path(ty, layout, m, path);
                matmul_parallel(kernels, p, x, m, threads, self.attn.pool()).map_err(kerr(what))
            }
        }
    }

    fn note_path(&self, ty: &str, layout: &str, m: usize, path: &str) {
        if let Ok(mut p) = self.paths.lock() {
            p.insert(format!("{ty} {layout} m={m} {path}"));
        }
    }

    fn round_residual(&self, x: &mut [f32]) {
        if self.residual == Residual::Bf16 {
            for v in x {
                *v = elem::round_bf16(*v);
            }
        }
    }

    /// Embedding rows of `tokens` (`inp_embd`: the token rows of `token_embd.weight`,
    /// dequantized by the lane).
    pub fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let e = self.hp.n_embd;
        let row_bytes = self.embd_ty.row_bytes(e).expect("checked by HParams");
        let mut x = vec![0.0f32; tokens.len() * e];
        for (i, &t) in tokens.iter().enumerate() {
            if t as usize >= self.hp.n_vocab {
                return Err(ModelError::Request(format!(
                    "token id {t} is out of range (vocabulary of {})",
                    self.hp.n_vocab
                )));
            }
            let bytes = &self.embd[t as usize * row_bytes..(t as usize + 1) * row_bytes];
            let out = &mut x[i * e..(i + 1) * e];
            match self.arith {
                Arith::Lane { kernels, .. } => {
                    kernels.dequantize(self.embd_ty, bytes, out).map_err(kerr("get_rows"))?
                }
                Arith::DequantF32 => tiercheck_core::blocks::dequantize(self.embd_ty, bytes, out)
                    .map_err(kerr("get_rows"))?,
            }
        }
        self.round_residual(&mut x);
        Ok(x)
    }

    /// Evaluate `tokens` at positions `pos0..` as one graph (one llama.cpp ubatch) whose
    /// output rows are `outputs` (ascending indices into `tokens`); returns the logits of
    /// the output rows. As llama.cpp's graph with `inp_out_ids`, the last layer keeps
    /// only the output rows after its attention output projection, so its `ffn_inp`,
    /// `ffn_norm`, `ffn_swiglu`, `ffn_out`, `l_out` and the head see those rows alone
    /// (and take the kernels of that row count); with no output row they are not
    /// computed and their taps get no rows.
    pub(crate) fn eval(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        pos0: usize,
        taps: &mut TapSink,
        outputs: &[usize],
    ) -> Result<Vec<f32>, ModelError> {
        let m = tokens.len();
        if m == 0 {
            return Err(ModelError::Request("no tokens to evaluate".into()));
        }
        if pos0 + m > self.n_ctx {
            return Err(ModelError::Request(format!(
                "positions {pos0}..{} exceed the context length {}",
                pos0 + m,
                self.n_ctx
            )));
        }
        check_outputs(outputs, m)?;
        let mut x = self.embed(tokens)?;
        taps.put("inp_embd", m, &x);
        let last = self.hp.n_layer - 1;
        for il in 0..self.hp.n_layer {
            let out = if il == last { Some(outputs) } else { None };
            x = self.eval_layer_out(il, cache, &x, pos0, m, out, taps)?;
            if il == 0 {
                self.apply_dither(&mut x, pos0);
            }
        }
        if outputs.is_empty() {
            return Ok(Vec::new());
        }
        self.head(&x, outputs.len(), taps)
    }

    /// The final norm and output projection of `m` rows.
    pub fn head(&self, x: &[f32], m: usize, taps: &mut TapSink) -> Result<Vec<f32>, ModelError> {
        let e = self.hp.n_embd;
        let mut normed = vec![0.0f32; m * e];
        for (y, xi) in normed.chunks_exact_mut(e).zip(x.chunks_exact(e)) {
            self.elem.rms_norm_mul(y, xi, &self.out_norm, self.hp.rms_eps);
        }
        taps.put("result_norm", m, &normed);
        let logits = self.matmul(&self.output, &normed, m, "output")?;
        taps.put("result_output", m, &logits);
        Ok(logits)
    }

    /// One layer on `m` rows `x` at positions `pos0..pos0+m`; returns `l_out`. The KV
    /// cache of layer `il` must hold positions `0..pos0` already (from earlier steps,
    /// or filled by [`KvCache::store`] for a layer-local check).
    pub fn eval_layer(
        &self,
        il: usize,
        cache: &mut KvCache,
        x: &[f32],
        pos0: usize,
        m: usize,
        taps: &mut TapSink,
    ) -> Result<Vec<f32>, ModelError> {
        self.eval_layer_out(il, cache, x, pos0, m, None, taps)
    }

    /// [`Decoder::eval_layer`], pruned to the rows `outputs` after the attention output
    /// projection when given (llama.cpp's `get_rows(inp_out_ids)` of the last layer):
    /// `ffn_inp` and everything after it, and the returned `l_out`, hold those rows only.
    #[allow(clippy::too_many_arguments)]
    pub fn eval_layer_out(
        &self,
        il: usize,
        cache: &mut KvCache,
        x: &[f32],
        pos0: usize,
        m: usize,
        outputs: Option<&[usize]>,
        taps: &mut TapSink,
    ) -> Result<Vec<f32>, ModelError> {
        if let Some(o) = outputs {
            check_outputs(o, m)?;
        }
        let hp = self.hp;
        let (e, hd, nh, nkv) = (hp.n_embd, hp.head_dim, hp.n_head, hp.n_head_kv);
        let ly = &self.layers[il];
        let tag = |s: &str| format!("{s}-{il}");
        let fl = self.elem.flavour();

        let mut cur = vec![0.0f32; m * e];
        for (y, xi) in cur.chunks_exact_mut(e).zip(x.chunks_exact(e)) {
            self.elem.rms_norm_mul(y, xi, &ly.attn_norm, hp.rms_eps);
        }
        taps.put(&tag("attn_norm"), m, &cur);

        let mut q = self.matmul(&ly.wq, &cur, m, &tag("attn_q"))?;
        let mut k = self.matmul(&ly.wk, &cur, m, &tag("attn_k"))?;
        let mut v = self.matmul(&ly.wv, &cur, m, &tag("attn_v"))?;
        // qwen2: ggml_add of the bias to every row (one f32 addition per value).
        for (rows, bias) in [(&mut q, &ly.bq), (&mut k, &ly.bk), (&mut v, &ly.bv)] {
            if !bias.is_empty() {
                for row in rows.chunks_exact_mut(bias.len()) {
                    row.iter_mut().zip(bias.iter()).for_each(|(x, b)| *x += b);
                }
            }
        }
        for i in 0..m {
            let pos = (pos0 + i) as i32;
            let rope = if self.rope_freqs.is_empty() {
                fl.rope_cache(pos, hd, hp.rope_base)
            } else {
                elem::rope_cache_ff(pos, hd, hp.rope_base, &self.rope_freqs)
            };
            for (rows, heads, norm) in [(&mut q, nh, &ly.q_norm), (&mut k, nkv, &ly.k_norm)] {
                let row = &mut rows[i * heads * hd..(i + 1) * heads * hd];
                for h in row.chunks_exact_mut(hd) {
                    if !norm.is_empty() {
                        let src = h.to_vec();
                        self.elem.rms_norm_mul(h, &src, norm, hp.rms_eps);
                    }
                    if hp.rope_normal() {
                        elem::rope_norm(h, &rope, fl.rope_norm_rotation());
                    } else {
                        elem::rope_neox(h, &rope, fl.rope_rotation());
                    }
                }
            }
        }
        taps.put(&tag("Qcur"), m, &q);
        taps.put(&tag("Kcur"), m, &k);
        taps.put(&tag("Vcur"), m, &v);

        let kvd = nkv * hd;
        for i in 0..m {
            cache.store(il, pos0 + i, &k[i * kvd..(i + 1) * kvd], &v[i * kvd..(i + 1) * kvd]);
        }
        cache.used = cache.used.max(pos0 + m);
        let threads = match self.arith {
            Arith::Lane { threads, .. } => threads,
            Arith::DequantF32 => 1,
        };
        let step = Step { hp: self.hp, elem: self.elem, n_ctx: self.n_ctx, threads };
        self.note_path(self.attn.kv.name(), "attention", m, &step.path(cache, m));
        let kqv = step.attend(il, cache, &q, pos0, m);
        taps.put(&tag("kqv_out"), m, &kqv);

        let mut attn = self.matmul(&ly.wo, &kqv, m, &tag("attn_output"))?;
        // llama.cpp's last layer: get_rows(inp_out_ids) of the projection and of the
        // layer input; the rest of the layer runs on those rows.
        let pruned_x;
        let (x, m) = match outputs {
            None => (x, m),
            Some(o) => {
                attn = select_rows(&attn, e, o);
                pruned_x = select_rows(x, e, o);
                (&pruned_x[..], o.len())
            }
        };
        if m == 0 {
            return Ok(Vec::new());
        }
        let mut ffn_inp: Vec<f32> = attn.iter().zip(x).map(|(a, b)| a + b).collect();
        self.round_residual(&mut ffn_inp);
        taps.put(&tag("ffn_inp"), m, &ffn_inp);

        let mut normed = vec![0.0f32; m * e];
        for (y, xi) in normed.chunks_exact_mut(e).zip(ffn_inp.chunks_exact(e)) {
            self.elem.rms_norm_mul(y, xi, &ly.ffn_norm, hp.rms_eps);
        }
        taps.put(&tag("ffn_norm"), m, &normed);
        let ffn_out = match &ly.ffn {
            Ffn::Dense { gate, up, down } => {
                let gate = self.matmul(gate, &normed, m, &tag("ffn_gate"))?;
                let up = self.matmul(up, &normed, m, &tag("ffn_up"))?;
                let ff = hp.n_ff;
                let mut h = vec![0.0f32; m * ff];
                for i in 0..m {
                    let r = i * ff..(i + 1) * ff;
                    self.elem.swiglu(&mut h[r.clone()], &gate[r.clone()], &up[r]);
                }
                taps.put(&tag("ffn_swiglu"), m, &h);
                let ffn_out = self.matmul(down, &h, m, &tag("ffn_down"))?;
                taps.put(&tag("ffn_out"), m, &ffn_out);
                ffn_out
            }
            Ffn::Moe { router, gate, up, down } => {
                let ex = Experts { router, gate, up, down };
                // The rows' positions (the output rows' in a pruned last layer).
                let positions: Vec<usize> = match outputs {
                    Some(o) => o.iter().map(|&r| pos0 + r).collect(),
                    None => (pos0..pos0 + m).collect(),
                };
                self.moe_ffn(il, &ex, &normed, &positions, taps)?
            }
        };
        let mut l_out: Vec<f32> = ffn_out.iter().zip(&ffn_inp).map(|(a, b)| a + b).collect();
        self.round_residual(&mut l_out);
        taps.put(&tag("l_out"), m, &l_out);
        Ok(l_out)
    }

    /// The mixture-of-experts feed-forward of layer `il` on `m` rows `normed` (the
    /// `ffn_norm` rows): routing ([`crate::moe`]), each expert on the rows routed to it,
    /// the weighted sum; returns `ffn_moe_out`.
    fn moe_ffn(
        &self,
        il: usize,
        ex: &Experts<'_, '_>,
        normed: &[f32],
        positions: &[usize],
        taps: &mut TapSink,
    ) -> Result<Vec<f32>, ModelError> {
        let m = positions.len();
        let hp = self.hp;
        let moe = hp.moe.expect("a mixture-of-experts layer");
        let (e, n_x, used, ff) = (hp.n_embd, moe.n_expert, moe.n_expert_used, moe.n_ff_exp);
        let tag = |s: &str| format!("{s}-{il}");
        let logits = match self.arith {
            Arith::Lane { .. } => crate::moe::router_logits(self.elem, ex.router, n_x, normed, m),
            Arith::DequantF32 => normed
                .chunks_exact(e)
                .flat_map(|xi| {
                    ex.router.chunks_exact(e).map(move |w| {
                        w.iter().zip(xi).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() as f32
                    })
                })
                .collect(),
        };
        taps.put(&tag("ffn_moe_logits"), m, &logits);
        let mut probs = vec![0.0f32; m * n_x];
        for (p, l) in probs.chunks_exact_mut(n_x).zip(logits.chunks_exact(n_x)) {
            self.elem.soft_max_row(p, l);
        }
        taps.put(&tag("ffn_moe_probs"), m, &probs);
        let mut routes: Vec<crate::moe::Route> =
            probs.chunks_exact(n_x).map(|p| crate::moe::route(p, used)).collect();
        if let Some(tiercheck_core::lane::PlantedFault::SwapExpert { layer, pos }) = self.fault {
            if let Some(t) = positions.iter().position(|&p| p == pos).filter(|_| layer == il) {
                routes[t] = crate::moe::route_swapped(&probs[t * n_x..(t + 1) * n_x], used);
            }
        }
        let flat = |f: &dyn Fn(&crate::moe::Route) -> Vec<f32>| -> Vec<f32> {
            routes.iter().flat_map(f).collect()
        };
        taps.put(
            &tag("ffn_moe_topk"),
            m,
            &flat(&|r| r.experts.iter().map(|&x| x as f32).collect()),
        );
        taps.put(&tag("ffn_moe_weights"), m, &flat(&|r| r.weights.clone()));
        taps.put(&tag("ffn_moe_weights_sum"), m, &flat(&|r| vec![r.sum]));
        taps.put(&tag("ffn_moe_weights_norm"), m, &flat(&|r| r.norm.clone()));
        // MUL_MAT_ID: per expert in index order, the (token, slot) pairs routed to it in
        // token order; every output row is the expert's matmul of that token's row.
        let mut up_out = vec![0.0f32; m * used * ff];
        let mut gate_out = vec![0.0f32; m * used * ff];
        let mut groups: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n_x];
        for (t, r) in routes.iter().enumerate() {
            for (s, &x) in r.experts.iter().enumerate() {
                groups[x].push((t, s));
            }
        }
        for (x, rows) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let xs: Vec<f32> = rows
                .iter()
                .flat_map(|&(t, _)| normed[t * e..(t + 1) * e].iter().copied())
                .collect();
            let u = self.matmul_id(&ex.up[x], &xs, rows.len(), &tag("ffn_moe_up"))?;
            let g = self.matmul_id(&ex.gate[x], &xs, rows.len(), &tag("ffn_moe_gate"))?;
            for (j, &(t, s)) in rows.iter().enumerate() {
                let o = (t * used + s) * ff;
                up_out[o..o + ff].copy_from_slice(&u[j * ff..(j + 1) * ff]);
                gate_out[o..o + ff].copy_from_slice(&g[j * ff..(j + 1) * ff]);
            }
        }
        taps.put(&tag("ffn_moe_up"), m, &up_out);
        taps.put(&tag("ffn_moe_gate"), m, &gate_out);
        let mut h = vec![0.0f32; m * used * ff];
        for ((y, g), u) in
            h.chunks_exact_mut(ff).zip(gate_out.chunks_exact(ff)).zip(up_out.chunks_exact(ff))
        {
            self.elem.swiglu(y, g, u);
        }
        taps.put(&tag("ffn_moe_swiglu"), m, &h);
        let mut down_out = vec![0.0f32; m * used * e];
        for (x, rows) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let hs: Vec<f32> = rows
                .iter()
                .flat_map(|&(t, s)| h[(t * used + s) * ff..(t * used + s + 1) * ff].iter().copied())
                .collect();
            let d = self.matmul_id(&ex.down[x], &hs, rows.len(), &tag("ffn_moe_down"))?;
            for (j, &(t, s)) in rows.iter().enumerate() {
                let o = (t * used + s) * e;
                down_out[o..o + e].copy_from_slice(&d[j * e..(j + 1) * e]);
            }
        }
        taps.put(&tag("ffn_moe_down"), m, &down_out);
        let mut weighted = down_out;
        for (t, r) in routes.iter().enumerate() {
            for (s, &w) in r.norm.iter().enumerate() {
                let o = (t * used + s) * e;
                weighted[o..o + e].iter_mut().for_each(|v| *v *= w);
            }
        }
        taps.put(&tag("ffn_moe_weighted"), m, &weighted);
        let mut out = vec![0.0f32; m * e];
        for (t, row) in out.chunks_exact_mut(e).enumerate() {
            row.copy_from_slice(&weighted[t * used * e..(t * used + 1) * e]);
            for s in 1..used {
                let o = (t * used + s) * e;
                row.iter_mut().zip(&weighted[o..o + e]).for_each(|(a, b)| *a += b);
            }
        }
        taps.put(&tag("ffn_moe_out"), m, &out);
        Ok(out)
    }

    /// One expert's `MUL_MAT_ID` on the `m` rows `x` routed to it: repacked weights by
    /// the repacked gemv one row at a time (`forward_mul_mat_id` of ggml-cpu's repack);
    /// plain weights by the kernel the tier's `mul_mat_id` takes
    /// ([`Kernels::id_takes_plain_gemm`]: all rows together, or `vec_dot` row by row).
    fn matmul_id(
        &self,
        w: &Linear<'_>,
        x: &[f32],
        m: usize,
        what: &str,
    ) -> Result<Vec<f32>, ModelError> {
        let together = match (w, self.arith) {
            (Linear::F32 { .. }, _) => true,
            (Linear::Lane(Prepared::Plain(p)), Arith::Lane { kernels, .. }) => {
                kernels.id_takes_plain_gemm(p.ty(), m)
            }
            _ => false,
        };
        if together {
            return self.matmul(w, x, m, what);
        }
        let k = x.len() / m.max(1);
        let mut out = Vec::new();
        for row in x.chunks_exact(k) {
            out.extend(self.matmul(w, row, 1, what)?);
        }
        Ok(out)
    }
}

/// One layer's experts, borrowed.
struct Experts<'a, 'm> {
    router: &'a [f32],
    gate: &'a [Linear<'m>],
    up: &'a [Linear<'m>],
    down: &'a [Linear<'m>],
}

/// Why a lane whose elementwise flavour is `fl` cannot run `model`, or `None` where it
/// can: the GPU lanes do not model ggml's GPU RoPE with Llama 3.1's frequency factors,
/// nor its mixture-of-experts path (the GPU backends' fused top-k routing kernel and
/// their `MUL_MAT_ID`).
pub fn unsupported(model: &Model, fl: ElemFlavour) -> Option<String> {
    fl.gpu_math()?;
    if model.file.tensor("rope_freqs.weight").is_some() {
        return Some(format!(
            "{}: rope_freqs.weight (Llama 3.1's RoPE frequency factors): the GPU lanes do not \
             model ggml's GPU RoPE with frequency factors",
            model.file.path()
        ));
    }
    model.hp.moe.map(|_| {
        format!(
            "{}: a mixture-of-experts model ({}): the GPU lanes do not model ggml's GPU \
             expert routing (the fused softmax/top-k kernel) nor its MUL_MAT_ID",
            model.file.path(),
            model.hp.arch
        )
    })
}

/// The rows `rows` of the `width`-wide row-major `x`, in that order.
fn select_rows(x: &[f32], width: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for &r in rows {
        out.extend_from_slice(&x[r * width..(r + 1) * width]);
    }
    out
}

/// Output rows must ascend strictly and lie inside the `m` rows of the graph.
fn check_outputs(outputs: &[usize], m: usize) -> Result<(), ModelError> {
    let ascending = outputs.windows(2).all(|w| w[0] < w[1]);
    if !ascending || outputs.last().is_some_and(|&r| r >= m) {
        return Err(ModelError::Request(format!(
            "output rows {outputs:?} must ascend strictly and lie below the {m} rows of the graph"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
