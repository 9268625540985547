//! Attention as llama.cpp's qwen3 graph computes it on ggml's CPU backend, for the K/V
//! cache types and attention paths a user can choose: an F32 or F16 cache (`--kv`,
//! llama.cpp's `type_k`/`type_v`, default F16), and flash attention on or off (`--fa`,
//! llama.cpp's `flash_attn_type`, whose default AUTO resolves to on for the CPU backend).
//!
//! The cache holds what llama.cpp's holds: K and V rounded to the cache type when they
//! are stored (`ggml_set_rows` into an F16 cache converts with `ggml_cpu_fp32_to_fp16`:
//! round to nearest even), V transposed (one row per head dimension over the cells)
//! without flash attention and by cell with it. The attended cells are the first
//! `n_kv` = llama.cpp's padded KV length; cells after the query's position are masked.
//!
//! Without flash attention (`ggml_mul_mat` twice, ggml's `soft_max_ext` between):
//!
//! - `KQ`: with an F32 cache, `ggml_vec_dot_f32(K_j, q)` for every cell; with F16, the
//!   queries are converted to F16 (F16's `vec_dot_type`) and each score is
//!   `ggml_vec_dot_f16(K_j, q16)` ([`ElemOps::dot_f16`]), except where the tier's
//!   tinyBLAS takes F16 activations (haswell, from two rows: the queries of a batch are
//!   permuted, so only the converted copy is contiguous): one accumulator per score
//!   ([`ElemOps::sgemm_dot`] of the widened halves).
//! - softmax: `w = kq*scale + mask`, then [`ElemOps::soft_max_row`]: on the CPU tiers
//!   the row max, [`ElemOps::soft_max`] (the f64 sum), `p *= (f32)(1/sum)`; on the GPU
//!   flavours the GPU kernel's order (an f32 block reduction, the device's `expf`).
//! - `KQV`: with F32, `ggml_vec_dot_f32(V_d, p)`, or tinyBLAS from
//!   [`ElemFlavour::sgemm_min_rows`] rows; with F16, tinyBLAS from two rows where the
//!   tier has it for F16 (haswell on `p` rounded to F16, the NEON build without FP16
//!   vector arithmetic on `p` as it is), else `ggml_vec_dot_f16(V_d, p16)`.
//!
//! On the GPU flavours ([`ElemFlavour::mmvf`]) both products are ggml's GPU
//! `mul_mat_vec_f` ([`tiercheck_core::gpu::MmvfConfig`]) on the F32 activations as they
//! are (the query is not rounded to F16): `K·Q` with an f32 accumulator (llama.cpp sets
//! its precision to F32), `V·p` with a `half2` F16 accumulator on an F16 cache and an
//! f32 one on an F32 cache; each reduced over the GPU's physical warp. Where ggml hands
//! a product to BLAS instead (batches beyond the kernel's column limit; on NVIDIA, F16
//! `K` of more than 512 cells) the MMVF order stands in, and the path says so.
//!
//! With flash attention, llama.cpp's graph (`build_attn_mha`) casts an F32 K or V to F16
//! before `ggml_flash_attn_ext`, so flash attention always reads F16 K and V: with
//! `--kv f32` the cells are rounded when read instead of when stored, the same values.
//! Then `ggml_compute_forward_flash_attn_ext_f16_one_chunk` (ggml-cpu `ops.cpp`) per
//! query row and head: the query converted to F16 (K's `vec_dot_type`); then for each
//! unmasked cell in order,
//! `s = dot(K_j, q)*scale + 0` (the mask is 0 or -inf; -inf cells are skipped), and the
//! online softmax: on a new maximum `M`, `ms = expf(M_old - M)` (the C library's
//! `expf`) scales the accumulator and `vs = 1`, else `vs = expf(s - M)`; the
//! accumulator gains `V_j * vs`; `S = S*ms + vs` (one fused multiply-add on the FMA
//! tiers: `vfmadd132ss` in haswell's library). The accumulator is F16
//! (`ggml_vec_scale_f16`: `y = f16(y*ms)`, `ggml_vec_mad_f16`: `y = f16(fma(x, vs, y))`,
//! every element rounded back to F16 after each cell). Finally the accumulator,
//! widened, times `1/S` (`ggml_vec_scale_f32`). The x64 tier (no FMA) rounds every
//! product and sum separately.
//!
//! A single query row (decode) attending at least 512 cells takes ggml's split-KV path:
//! the cells are cut into `ceil(n_kv / nth)` per thread of the tier's thread pool
//! (`nth`, llama.cpp's `-t`: this one result depends on it), each chunk runs the loop
//! above without the final division, and the chunks are merged in order:
//! `M' = fmaxf(M, M_c)`, `a = expf(M - M')`, `b = expf(M_c - M')`,
//! `VKQ = fma(VKQ, a, VKQ_c*b)`, `S = fma(S, a, S_c*b)` (haswell's library: the chunk
//! product is rounded, the running one fused), chunks with `S_c = 0` skipped; then
//! `VKQ * (1/S)`. With one thread this equals the single chunk.
//!
//! A batch of at least 64 query rows ([`FA_TILE_Q`]; on aarch64 with a head size that
//! is a whole number of f32 vectors) takes ggml's tiled flash attention instead
//! (`ggml_compute_forward_flash_attn_ext_tiled`): the query stays F32, the scores and
//! the output come from `simd_gemm` (fused multiply-add chains), and the online softmax
//! runs per KV tile of 64 cells with the tier's `ggml_vec_soft_max_f32`
//! (`Step::flash_tiled` gives the order).

use tiercheck_core::elem::{ElemFlavour, ElemOps, F16Sgemm};
use tiercheck_core::fp16;
use tiercheck_core::gpu::MmvfAcc;

use super::hparams::HParams;
use super::ModelError;

/// Element type of the K/V cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum KvType {
    /// F32 cells.
    F32,
    /// F16 cells (llama.cpp's default).
    F16,
}

impl KvType {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
        }
    }
}

/// Whether attention is ggml's fused `flash_attn_ext`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum FlashAttn {
    /// `ggml_flash_attn_ext` (llama.cpp's default on the CPU backend).
    On,
    /// `mul_mat`, `soft_max_ext`, `mul_mat`.
    Off,
}

impl FlashAttn {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            FlashAttn::On => "on",
            FlashAttn::Off => "off",
        }
    }
}

/// Fewest query rows of one step for which ggml's CPU flash attention takes its tiled
/// path (`GGML_FA_TILE_Q`, also its query tile).
pub const FA_TILE_Q: usize = 64;

/// Cells per KV tile of the tiled path (`GGML_FA_TILE_KV`).
pub const FA_TILE_KV: usize = 64;

/// Fewest attended cells for which a single query row takes ggml's split-KV path.
pub const FA_SPLIT_KV_MIN: usize = 512;

/// The attention options of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attention {
    /// K/V cache type.
    pub kv: KvType,
    /// Flash attention.
    pub fa: FlashAttn,
    /// Threads of the tier's own thread pool (llama.cpp's `-t`): ggml's split-KV flash
    /// attention and the i8mm builds' matmul chunk plan depend on it.
    pub tier_threads: usize,
    /// Whether the tier's ggml runs NUMA-aware (llama.cpp's `--numa` on a host with
    /// several NUMA nodes): the i8mm builds' chunk plan then always chunks by thread.
    pub tier_numa: bool,
}

impl Attention {
    /// llama.cpp's defaults: F16 cache, flash attention on, one tier thread.
    pub const LLAMA_DEFAULT: Attention =
        Attention { kv: KvType::F16, fa: FlashAttn::On, tier_threads: 1, tier_numa: false };
    /// The F32 cache without flash attention.
    pub const F32_OFF: Attention =
        Attention { kv: KvType::F32, fa: FlashAttn::Off, tier_threads: 1, tier_numa: false };

    /// The tier's thread pool as its matmuls read it.
    pub fn pool(&self) -> tiercheck_core::lane::TierPool {
        tiercheck_core::lane::TierPool { threads: self.tier_threads, numa: self.tier_numa }
    }

    /// `kv=f16 fa=on`, as provenance and reports write it.
    pub fn label(&self) -> String {
        format!("kv={} fa={}", self.kv.name(), self.fa.name())
    }
}

/// The KV cache: per layer, K rows per position and V (transposed per KV head without
/// flash attention, by position with it), every value rounded to the cache type.
pub struct KvCache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    kv_dim: usize,
    head_dim: usize,
    n_ctx: usize,
    pub(crate) used: usize,
    attn: Attention,
    /// A planted fault of the lane whose decoder made this cache (negative controls).
    pub(crate) fault: Option<tiercheck_core::lane::PlantedFault>,
}

impl KvCache {
    /// An empty (zeroed) cache for `n_ctx` positions; an error naming the size when the
    /// memory for it cannot be had.
    pub fn new(hp: &HParams, n_ctx: usize, attn: Attention) -> Result<KvCache, ModelError> {
        let kv_dim = hp.n_head_kv * hp.head_dim;
        let per_layer = n_ctx.checked_mul(kv_dim);
        let too_big = || {
            let gib = (n_ctx as f64) * (kv_dim as f64) * (hp.n_layer as f64) * 8.0
                / f64::from(1u32 << 30);
            ModelError::Request(format!(
                "a context of {n_ctx} cells needs {gib:.1} GiB for the K/V cache ({} layers of {kv_dim} K and V values per cell, held as f32), more than this process can allocate",
                hp.n_layer
            ))
        };
        let zeroed = || -> Result<Vec<f32>, ModelError> {
            let n = per_layer.ok_or_else(too_big)?;
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| too_big())?;
            v.resize(n, 0.0);
            Ok(v)
        };
        let mut k = Vec::with_capacity(hp.n_layer);
        let mut v = Vec::with_capacity(hp.n_layer);
        for _ in 0..hp.n_layer {
            k.push(zeroed()?);
            v.push(zeroed()?);
        }
        Ok(KvCache { k, v, kv_dim, head_dim: hp.head_dim, n_ctx, used: 0, attn, fault: None })
    }

    /// Fill the first `cells` cells with a saved cache (`k[layer]`, `v[layer]`: the
    /// cells' rows one after another, as `crate::state::KvState` holds them after its
    /// checks), each cell stored as a computed one is: llama.cpp loads a saved cache into
    /// cells `0..n` bit for bit, and flash attention reads an F32 cache rounded to F16
    /// either way.
    pub fn load(&mut self, cells: usize, k: &[Vec<f32>], v: &[Vec<f32>]) {
        let d = self.kv_dim;
        for (il, (kl, vl)) in k.iter().zip(v).enumerate() {
            for c in 0..cells {
                let (kc, vc) = (&kl[c * d..(c + 1) * d], &vl[c * d..(c + 1) * d]);
                self.store(il, c, kc, vc);
            }
        }
        self.used = cells;
    }

    /// Store layer `il`'s K and V rows (`kv_dim` values each) for position `pos`,
    /// rounded to F16 where attention reads F16 (an F16 cache, or flash attention,
    /// which casts an F32 cache to F16).
    pub fn store(&mut self, il: usize, pos: usize, k: &[f32], v: &[f32]) {
        let (d, hd, n_ctx) = (self.kv_dim, self.head_dim, self.n_ctx);
        let f16 = self.attn.kv == KvType::F16 || self.attn.fa == FlashAttn::On;
        let round = |x: f32| if f16 { round16(x) } else { x };
        let stale = matches!(self.fault,
            Some(tiercheck_core::lane::PlantedFault::StaleK { layer, pos: p }) if layer == il && p == pos);
        if !stale {
            for (dst, &x) in self.k[il][pos * d..(pos + 1) * d].iter_mut().zip(k) {
                *dst = round(x);
            }
        }
        let by_cell = self.attn.fa == FlashAttn::On;
        for (c, &val) in v.iter().enumerate() {
            let (g, dd) = (c / hd, c % hd);
            let at = if by_cell { pos * d + c } else { (g * hd + dd) * n_ctx + pos };
            self.v[il][at] = round(val);
        }
    }

    fn k_row(&self, il: usize, pos: usize, g: usize) -> &[f32] {
        let o = pos * self.kv_dim + g * self.head_dim;
        &self.k[il][o..o + self.head_dim]
    }

    /// V of head `g`, dimension `d`, over cells `0..n_kv` (no flash attention).
    fn v_col(&self, il: usize, g: usize, d: usize, n_kv: usize) -> &[f32] {
        let o = (g * self.head_dim + d) * self.n_ctx;
        &self.v[il][o..o + n_kv]
    }

    /// V of head `g` at cell `pos` (flash attention).
    fn v_row(&self, il: usize, pos: usize, g: usize) -> &[f32] {
        let o = pos * self.kv_dim + g * self.head_dim;
        &self.v[il][o..o + self.head_dim]
    }
}

/// One layer's attention step on given K, V and Q, as the decoder computes it: the
/// kernel-level cases of the golden suite.
#[derive(Clone, Copy, Debug)]
pub struct AttnCase<'a> {
    /// Query heads.
    pub n_head: usize,
    /// K/V heads (`n_head` a multiple of it: grouped-query attention).
    pub n_head_kv: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// Context length (a multiple of 256: the padded KV length depends on it).
    pub n_ctx: usize,
    /// Cache type, flash attention and the tier's thread count (split-KV).
    pub attn: Attention,
    /// Cells in the cache (the query rows are its last `m` positions).
    pub cells: usize,
    /// K rows, `cells x n_head_kv x head_dim`, stored as the decoder stores them (rounded
    /// to F16 for an F16 cache or flash attention).
    pub k: &'a [f32],
    /// V rows, the same shape.
    pub v: &'a [f32],
    /// Query rows, `m x n_head x head_dim`.
    pub q: &'a [f32],
    /// Query rows.
    pub m: usize,
}

/// [`AttnCase`] through the decoder's attention with the elementwise kernels `elem`: the
/// path the decoder would take for it (flash attention's one chunk, split-KV or tiled
/// form, or the two products without it). The output is `m x n_head x head_dim`.
pub fn attend_case(elem: &dyn ElemOps, c: &AttnCase<'_>) -> Result<Vec<f32>, ModelError> {
    attend_case_on(elem, c, 1)
}

/// [`attend_case`] with the (query row, head) outputs split over `threads` threads.
fn attend_case_on(
    elem: &dyn ElemOps,
    c: &AttnCase<'_>,
    threads: usize,
) -> Result<Vec<f32>, ModelError> {
    let bad = |what: String| Err(ModelError::Request(format!("attention case: {what}")));
    let kv_dim = c.n_head_kv * c.head_dim;
    if c.n_head_kv == 0 || c.head_dim == 0 || !c.n_head.is_multiple_of(c.n_head_kv) {
        return bad(format!("{} heads over {} K/V heads of {}", c.n_head, c.n_head_kv, c.head_dim));
    }
    if c.m == 0 || c.m > c.cells || c.cells > c.n_ctx || !c.n_ctx.is_multiple_of(256) {
        return bad(format!("{} rows, {} cells, context {}", c.m, c.cells, c.n_ctx));
    }
    if c.k.len() != c.cells * kv_dim
        || c.v.len() != c.cells * kv_dim
        || c.q.len() != c.m * c.n_head * c.head_dim
    {
        return bad(format!(
            "{} K, {} V, {} Q values for {} cells and {} rows",
            c.k.len(),
            c.v.len(),
            c.q.len(),
            c.cells,
            c.m
        ));
    }
    let hp = HParams {
        arch: "qwen3".into(),
        n_embd: c.n_head * c.head_dim,
        n_layer: 1,
        n_head: c.n_head,
        n_head_kv: c.n_head_kv,
        head_dim: c.head_dim,
        n_ff: 1,
        n_vocab: 1,
        n_ctx_train: c.n_ctx,
        rope_base: 1e6,
        rms_eps: 1e-6,
        moe: None,
    };
    let mut cache = KvCache::new(&hp, c.n_ctx, c.attn)?;
    cache.load(c.cells, &[c.k.to_vec()], &[c.v.to_vec()]);
    let step = Step { hp: &hp, elem, n_ctx: c.n_ctx, threads };
    Ok(step.attend(0, &cache, c.q, c.cells - c.m, c.m))
}

/// llama.cpp's padded KV length for `used` filled cells in a cache of `n_ctx`.
pub fn padded_n_kv(used: usize, n_ctx: usize) -> usize {
    let pad = used.div_ceil(256) * 256;
    n_ctx.min(pad.max(256))
}

fn round16(x: f32) -> f32 {
    fp16::f16_bits_to_f32(fp16::f32_to_f16_bits_hw(x))
}

/// What attention computes for one step: the geometry and the flavour.
pub(crate) struct Step<'a> {
    pub hp: &'a HParams,
    pub elem: &'a dyn ElemOps,
    pub n_ctx: usize,
    /// Threads for the heads (each (row, head) output is computed alone, in the same
    /// operations whichever thread takes it, so the results do not depend on this).
    pub threads: usize,
}

/// Below this many multiply-adds (rows x heads x cells x head size) a step's attention
/// runs on one thread: spawning costs more than it saves.
const PARALLEL_MIN_WORK: usize = 1 << 18;

impl Step<'_> {
    /// `out` (m rows of `n_head` outputs of `head_dim`) filled by `f(scratch, i, h, o)`
    /// for every query row `i` and head `h`, the (i, h) outputs split over up to
    /// `self.threads` threads in contiguous runs; `init` makes one scratch per thread.
    fn per_head<S>(
        &self,
        m: usize,
        n_kv: usize,
        init: impl Fn() -> S + Sync,
        f: impl Fn(&mut S, usize, usize, &mut [f32]) + Sync,
    ) -> Vec<f32> {
        let (hd, nh) = (self.hp.head_dim, self.hp.n_head);
        let mut out = vec![0.0f32; m * nh * hd];
        let jobs = m * nh;
        let work = jobs.saturating_mul(n_kv).saturating_mul(hd);
        let threads = if work < PARALLEL_MIN_WORK { 1 } else { self.threads.clamp(1, jobs.max(1)) };
        let run = |first: usize, part: &mut [f32]| {
            let mut scratch = init();
            for (k, o) in part.chunks_exact_mut(hd).enumerate() {
                let job = first + k;
                f(&mut scratch, job / nh, job % nh, o);
            }
        };
        if threads == 1 {
            run(0, &mut out);
            return out;
        }
        let per = jobs.div_ceil(threads);
        std::thread::scope(|sc| {
            for (t, part) in out.chunks_mut(per * hd).enumerate() {
                let run = &run;
                sc.spawn(move || run(t * per, part));
            }
        });
        out
    }

    /// Which path the step takes, as the decoder's `matmul_paths` records it.
    pub fn path(&self, cache: &KvCache, m: usize) -> String {
        let fl = self.elem.flavour();
        let n_kv = padded_n_kv(cache.used, self.n_ctx);
        let kind = cache.attn.kv.name();
        match cache.attn.fa {
            FlashAttn::On => {
                if self.tiled(m) {
                    "flash-attn tiled".into()
                } else if m == 1 && n_kv >= FA_SPLIT_KV_MIN && cache.attn.tier_threads > 1 {
                    format!("flash-attn split-kv nth={}", cache.attn.tier_threads)
                } else {
                    "flash-attn one-chunk".into()
                }
            }
            FlashAttn::Off => {
                let (kq, kqv) = self.mul_mat_paths(cache.attn.kv, fl, m, n_kv);
                format!("kq {}, kqv {} ({kind} cache)", kq.name(), kqv.name())
            }
        }
    }

    /// The products `KQ` and `KQV` of a step of `m` rows without flash attention.
    fn mul_mat_paths(
        &self,
        kv: KvType,
        fl: ElemFlavour,
        m: usize,
        n_kv: usize,
    ) -> (Product, Product) {
        let hd = self.hp.head_dim;
        if let Some(gpu) = fl.mmvf() {
            // K·Q: `K` is n_kv rows of head_dim per KV head, at GGML_PREC_F32; V·p: `V^T`
            // is head_dim rows of n_kv, at default precision (an F16 accumulator for an
            // F16 cache on every modelled GPU).
            let f16 = kv == KvType::F16;
            let mats = self.hp.n_head_kv;
            let pick = |ncols: usize, rows: usize, acc: MmvfAcc| {
                if gpu.takes(f16, ncols, rows, mats, m) {
                    Product::Mmvf(acc)
                } else {
                    Product::GpuBlas(acc)
                }
            };
            let kqv_acc = if f16 { MmvfAcc::F16 } else { MmvfAcc::F32 };
            return (pick(hd, n_kv, MmvfAcc::F32), pick(n_kv, hd, kqv_acc));
        }
        let w = fl.width();
        match kv {
            KvType::F32 => {
                let sgemm = fl.sgemm_min_rows().is_some_and(|min| m >= min)
                    && n_kv.is_multiple_of(w)
                    && hd.is_multiple_of(4);
                (Product::DotF32, if sgemm { Product::TinyF32 } else { Product::DotF32 })
            }
            KvType::F16 => {
                // tinyBLAS: two activation rows at least, the inner length whole vectors,
                // the output rows a multiple of 4.
                let tb =
                    |k: usize, rows: usize| m >= 2 && k.is_multiple_of(w) && rows.is_multiple_of(4);
                let kq = match fl.sgemm_f16() {
                    Some(F16Sgemm::F16Activations) if tb(hd, n_kv) => Product::TinyF16xF16,
                    _ => Product::DotF16,
                };
                let kqv = match fl.sgemm_f16() {
                    Some(F16Sgemm::F16Activations) if tb(n_kv, hd) => Product::TinyF16xF16,
                    Some(F16Sgemm::F32Activations) if tb(n_kv, hd) => Product::TinyF16xF32,
                    _ => Product::DotF16,
                };
                (kq, kqv)
            }
        }
    }

    /// Causal grouped-query attention of `m` query rows (positions `pos0..`) of layer
    /// `il` against the cache, which already holds their K and V.
    pub fn attend(&self, il: usize, cache: &KvCache, q: &[f32], pos0: usize, m: usize) -> Vec<f32> {
        match cache.attn.fa {
            FlashAttn::Off => self.mul_mat(il, cache, q, pos0, m),
            FlashAttn::On if self.tiled(m) => self.flash_tiled(il, cache, q, pos0, m),
            FlashAttn::On => self.flash(il, cache, q, pos0, m),
        }
    }

    fn mul_mat(&self, il: usize, cache: &KvCache, q: &[f32], pos0: usize, m: usize) -> Vec<f32> {
        let hp = self.hp;
        let (hd, nh) = (hp.head_dim, hp.n_head);
        let group = nh / hp.n_head_kv;
        let n_kv = padded_n_kv(cache.used, self.n_ctx);
        let scale = 1.0f32 / (hd as f32).sqrt();
        let kv = cache.attn.kv;
        let (kq_path, kqv_path) = self.mul_mat_paths(kv, self.elem.flavour(), m, n_kv);
        let e = self.elem;
        let mmvf = e.flavour().mmvf();
        let gpu = |acc: MmvfAcc, x: &[f32], y: &[f32]| match mmvf {
            Some(cfg) => cfg.dot_in(acc, m, x, y),
            None => unreachable!("an MMVF product on a CPU flavour"),
        };
        let init =
            || (vec![0.0f32; n_kv], vec![0.0f32; n_kv], vec![0.0f32; n_kv], vec![0.0f32; hd]);
        self.per_head(m, n_kv, init, |(wp, dp, dp16, q16), i, h, o| {
            let p = pos0 + i;
            let g = h / group;
            let qh = &q[(i * nh + h) * hd..(i * nh + h + 1) * hd];
            for (d, s) in q16.iter_mut().zip(qh) {
                *d = round16(*s);
            }
            for (j, slot) in wp.iter_mut().enumerate() {
                *slot = if j <= p {
                    let k = cache.k_row(il, j, g);
                    let kq = match kq_path {
                        Product::DotF16 => e.dot_f16(k, q16),
                        Product::TinyF16xF16 => e.sgemm_dot(k, q16),
                        Product::Mmvf(acc) | Product::GpuBlas(acc) => gpu(acc, k, qh),
                        _ => e.dot_f32(k, qh),
                    };
                    // ggml_vec_scale_f32 then `wp += slope*mask` with mask 0.
                    kq * scale + 0.0
                } else {
                    f32::NEG_INFINITY
                };
            }
            e.soft_max_row(dp, wp);
            for (v, v16) in dp.iter().zip(dp16.iter_mut()) {
                *v16 = round16(*v);
            }
            for (d, od) in o.iter_mut().enumerate() {
                let vcol = cache.v_col(il, g, d, n_kv);
                *od = match kqv_path {
                    Product::TinyF32 | Product::TinyF16xF32 => e.sgemm_dot(vcol, dp),
                    Product::TinyF16xF16 => e.sgemm_dot(vcol, dp16),
                    Product::DotF16 => e.dot_f16(vcol, dp16),
                    Product::DotF32 => e.dot_f32(vcol, dp),
                    Product::Mmvf(acc) | Product::GpuBlas(acc) => gpu(acc, vcol, dp),
                };
            }
        })
    }

    /// Whether ggml takes its tiled flash attention for a step of `m` query rows: at
    /// least [`FA_TILE_Q`] rows, and on aarch64 (not on x86) a head size that is a whole
    /// number of f32 vectors.
    fn tiled(&self, m: usize) -> bool {
        let fl = self.elem.flavour();
        // ggml's condition is `DV % GGML_F32_EPR` (NEON) or `DV % svcntw()` (SVE): the
        // flavour's vector width either way.
        let aarch64 = fl.is_aarch64();
        m >= FA_TILE_Q && (!aarch64 || self.hp.head_dim.is_multiple_of(fl.width()))
    }

    /// `ggml_compute_forward_flash_attn_ext_tiled`, per query row (its results do not
    /// depend on which rows share a tile): the query in F32, K and V widened from F16; per
    /// KV tile of [`FA_TILE_KV`] cells holding an unmasked one, the scores by `simd_gemm`
    /// (one fused multiply-add chain over the head dimension from 0), `*scale`, `+mask`;
    /// the tile's max; on a new running max `M` the accumulator and `S` times
    /// `expf(M_old - M)`; `S += ggml_vec_soft_max_f32(tile, M)` (its f64 sum added in f64,
    /// rounded to f32); the accumulator gains the tile's `V·p` by `simd_gemm` (one fused
    /// chain per output over the tile's cells, continuing across tiles); at the end
    /// `acc * (1/S)`. The x64 tier's scalar `simd_gemm` rounds products and sums apart.
    fn flash_tiled(
        &self,
        il: usize,
        cache: &KvCache,
        q: &[f32],
        pos0: usize,
        m: usize,
    ) -> Vec<f32> {
        let hp = self.hp;
        let (hd, nh) = (hp.head_dim, hp.n_head);
        let group = nh / hp.n_head_kv;
        let n_kv = padded_n_kv(cache.used, self.n_ctx);
        let scale = 1.0f32 / (hd as f32).sqrt();
        let e = self.elem;
        let fused = e.flavour().fused();
        let init = || (vec![0.0f32; FA_TILE_KV], vec![0.0f32; FA_TILE_KV]);
        self.per_head(m, n_kv, init, |(kq, ex), i, h, o| {
            let p = pos0 + i;
            let g = h / group;
            let qh = &q[(i * nh + h) * hd..(i * nh + h + 1) * hd];
            let (mut mx, mut s_sum) = (f32::NEG_INFINITY, 0.0f32);
            let mut acc = vec![0.0f32; hd];
            for t in (0..n_kv).step_by(FA_TILE_KV) {
                if t > p {
                    // Every cell of the tile is masked for this row.
                    continue;
                }
                let cells = FA_TILE_KV.min(n_kv - t);
                for (tk, slot) in kq.iter_mut().enumerate() {
                    let j = t + tk;
                    *slot = if tk >= cells {
                        f32::NEG_INFINITY
                    } else {
                        let k = cache.k_row(il, j, g);
                        let mut d = 0.0f32;
                        for (a, b) in k.iter().zip(qh) {
                            d = madd(*a, *b, d, fused);
                        }
                        let mask = if j <= p { 0.0 } else { f32::NEG_INFINITY };
                        d * scale + mask
                    };
                }
                let mut tile_max = f32::NEG_INFINITY;
                for &v in kq.iter() {
                    tile_max = if tile_max > v { tile_max } else { v };
                }
                if tile_max == f32::NEG_INFINITY {
                    continue;
                }
                let mn = mx.max(tile_max);
                if mn > mx {
                    let ms = (mx - mn).exp();
                    for a in acc.iter_mut() {
                        *a *= ms;
                    }
                    s_sum *= ms;
                }
                mx = mn;
                let sum = e.soft_max(ex, kq, mn);
                s_sum = (s_sum as f64 + sum) as f32;
                for (tk, &w) in ex.iter().enumerate().take(cells) {
                    let v = cache.v_row(il, t + tk, g);
                    for (a, &x) in acc.iter_mut().zip(v) {
                        *a = madd(x, w, *a, fused);
                    }
                }
            }
            finish(o, &acc, s_sum);
        })
    }

    fn flash(&self, il: usize, cache: &KvCache, q: &[f32], pos0: usize, m: usize) -> Vec<f32> {
        let hp = self.hp;
        let (hd, nh) = (hp.head_dim, hp.n_head);
        let group = nh / hp.n_head_kv;
        let n_kv = padded_n_kv(cache.used, self.n_ctx);
        let scale = 1.0f32 / (hd as f32).sqrt();
        let nth = cache.attn.tier_threads.max(1);
        let split = m == 1 && n_kv >= FA_SPLIT_KV_MIN;
        let fused = self.elem.flavour().fused();
        self.per_head(
            m,
            n_kv,
            || vec![0.0f32; hd],
            |qc, i, h, o| {
                let p = pos0 + i;
                let g = h / group;
                let qh = &q[(i * nh + h) * hd..(i * nh + h + 1) * hd];
                for (d, s) in qc.iter_mut().zip(qh) {
                    *d = round16(*s);
                }
                if !split {
                    let c = self.chunk(il, cache, qc, g, 0..n_kv, p, scale);
                    finish(o, &c.vkq, c.s);
                    return;
                }
                // Split-KV: chunks of ceil(n_kv/nth) cells, merged in order.
                let cs = n_kv.div_ceil(nth);
                let (mut mf, mut sf) = (f32::NEG_INFINITY, 0.0f32);
                let mut vf = vec![0.0f32; hd];
                for t in 0..nth {
                    let start = t * cs;
                    if start >= n_kv {
                        continue;
                    }
                    let c = self.chunk(il, cache, qc, g, start..(start + cs).min(n_kv), p, scale);
                    if c.s == 0.0 {
                        continue;
                    }
                    let mn = mf.max(c.m);
                    let a = (mf - mn).exp();
                    let b = (c.m - mn).exp();
                    for (f, x) in vf.iter_mut().zip(&c.vkq) {
                        *f = madd(*f, a, *x * b, fused);
                    }
                    sf = madd(sf, a, c.s * b, fused);
                    mf = mn;
                }
                if sf != 0.0 {
                    finish(o, &vf, sf);
                } else {
                    o.copy_from_slice(&vf);
                }
            },
        )
    }

    /// One chunk of cells of `one_chunk`: the running max, sum and the accumulator
    /// widened to f32 (not yet divided by the sum).
    #[allow(clippy::too_many_arguments)]
    fn chunk(
        &self,
        il: usize,
        cache: &KvCache,
        qc: &[f32],
        g: usize,
        cells: std::ops::Range<usize>,
        p: usize,
        scale: f32,
    ) -> Chunk {
        let e = self.elem;
        let fused = e.flavour().fused();
        let f16_arith = e.flavour().f16_arith();
        let hd = self.hp.head_dim;
        let (mut s_sum, mut mx) = (0.0f32, f32::NEG_INFINITY);
        let mut acc = vec![0.0f32; hd];
        for j in cells {
            if j > p {
                // Masked (-inf): skipped.
                continue;
            }
            let k = cache.k_row(il, j, g);
            let s = e.dot_f16(k, qc) * scale + 0.0;
            let (mut ms, mut vs) = (1.0f32, 1.0f32);
            if s > mx {
                let old = mx;
                mx = s;
                ms = (old - mx).exp();
                // FP16 arithmetic: `ms` rounded to F16, the F16 x F16 product (exact in
                // f32) rounded once to F16.
                let ms = if f16_arith { round16(ms) } else { ms };
                for y in acc.iter_mut() {
                    *y = round16(*y * ms);
                }
            } else {
                vs = (s - mx).exp();
            }
            let v = cache.v_row(il, j, g);
            if f16_arith {
                let vs16 = round16(vs) as f64;
                for (y, &x) in acc.iter_mut().zip(v) {
                    *y = fp16::round_f64_to_f16((x as f64).mul_add(vs16, *y as f64));
                }
            } else {
                for (y, &x) in acc.iter_mut().zip(v) {
                    *y = round16(madd(x, vs, *y, fused));
                }
            }
            s_sum = madd(s_sum, ms, vs, fused);
        }
        Chunk { m: mx, s: s_sum, vkq: acc }
    }
}

/// How `mul_mat` multiplies one attention product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Product {
    /// `ggml_vec_dot_f32` per output.
    DotF32,
    /// `ggml_vec_dot_f16` per output, the activations rounded to F16.
    DotF16,
    /// tinyBLAS's f32 tile.
    TinyF32,
    /// tinyBLAS's F16 tile on activations rounded to F16.
    TinyF16xF16,
    /// tinyBLAS's F16 tile on the F32 activations.
    TinyF16xF32,
    /// The GPU's `mul_mat_vec_f` with this accumulator (the F32 activations as they are).
    Mmvf(MmvfAcc),
    /// A product ggml hands to the GPU's BLAS or tiled kernels: not reproduced; the MMVF
    /// order with this accumulator stands in.
    GpuBlas(MmvfAcc),
}

impl Product {
    fn name(self) -> &'static str {
        match self {
            Product::DotF32 => "vec_dot_f32",
            Product::DotF16 => "vec_dot_f16",
            Product::TinyF32 => "tinyblas-f32",
            Product::TinyF16xF16 => "tinyblas-f16xf16",
            Product::TinyF16xF32 => "tinyblas-f16xf32",
            Product::Mmvf(MmvfAcc::F32) => "mmvf-f32acc",
            Product::Mmvf(MmvfAcc::F16) => "mmvf-f16acc",
            Product::GpuBlas(_) => "gpu-blas (not reproduced: mmvf order stands in)",
        }
    }
}

struct Chunk {
    m: f32,
    s: f32,
    vkq: Vec<f32>,
}

/// `a*b + c`, fused on the FMA tiers.
#[inline]
fn madd(a: f32, b: f32, c: f32, fused: bool) -> f32 {
    if fused {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `V /= S`: `ggml_vec_scale_f32` by `1/S` (0 when `S` is 0).
fn finish(o: &mut [f32], acc: &[f32], s: f32) {
    let inv = if s == 0.0 { 0.0 } else { 1.0 / s };
    for (d, a) in o.iter_mut().zip(acc) {
        *d = a * inv;
    }
}

#[cfg(test)]
mod tests;
