//! The kernel case catalogue and its seeded input generator.
//!
//! A case is one (kernel, shape, input) triple, named `kernel/op/shape/caseN` with the
//! shape as `key=value` pairs: `q8_K/quantize/k=256/case0`,
//! `q4_K/dequantize/k=512,n=3/case1`, `q4_K/vec_dot/k=4096/case2`,
//! `q4_K/gemv/k=4096,n=8,m=1/case0`, `q6_K/gemm/k=512,n=7,m=5/case1`. Every lane that
//! can run a case gets one trial per case.
//!
//! Shapes reach the tails: k in {256, 512, 4096, 5120, 17408}, weight rows n in
//! {1, 3, 4, 7, 8, 9, 12, 16, 24, 33}, activation rows m in {1, ..., 9}: every row split
//! of the repacked matmuls (gemm groups of four rows, 0 to 3 leftover rows through the
//! gemv kernel, on row counts that are and are not multiples of the layouts' 4 and 8). Inputs cover
//! all-zero blocks, exact rounding ties, the maximum magnitude with both signs, huge
//! dynamic range, f16-subnormal scales, maximum/zero scale codes, and (activation
//! quantizers only) NaN and infinities.
//!
//! Inputs are shared by all lanes: f32 activations, and weights as quantized block
//! bytes (made by the reference quantizer from seeded rows, or seeded random and edge
//! blocks). [`generate`] makes them from fixed seeds, so `tiercheck golden gen-inputs`
//! rewrites `golden/inputs/` byte-identically.

use tiercheck_core::quant::weights;
use tiercheck_core::GgmlType;

use tiercheck_model::kernel_inputs::{edge_blocks, random_blocks, Rng, RowKind};

/// What a case exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Activation quantization into this format (q8_K, q8_0, q8_1).
    Quantize(GgmlType),
    /// Dequantization of weight blocks of this type.
    Dequantize(GgmlType),
    /// One weight row times one activation row.
    VecDot(GgmlType),
    /// A weight matrix times one activation row.
    Gemv(GgmlType),
    /// A weight matrix times several activation rows.
    Gemm(GgmlType),
    /// One of the decoder's elementwise or attention kernels, in the lane's flavour.
    Elem(ElemKind),
}

/// The decoder's elementwise and attention kernels with golden cases
/// (`tiercheck_core::elem`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    /// `ggml_vec_soft_max_f32` of one row against its maximum (outputs and the f64 sum).
    SoftMax,
    /// The softmax of one attention row without flash attention (`soft_max_ext` with the
    /// scale and mask applied): the probabilities, in the flavour's whole order (the
    /// CPU's f64 sum and `1/sum`, or the GPU kernel's block reduction).
    SoftMaxRow,
    /// `ggml_vec_swiglu_f32` of two rows (x, gate).
    SwiGlu,
    /// `ggml_vec_dot_f32` of two rows.
    DotF32,
    /// One output of llamafile's f32 tinyBLAS tile, two rows.
    SgemmDot,
    /// RMSNorm times a weight row (`ggml_rms_norm` then `ggml_mul`), eps 1e-6.
    RmsNorm,
    /// The NeoX RoPE rotation of one head at a case-dependent position, base 1e6.
    Rope,
    /// One output of the GPU's `mul_mat_vec_f` with an f32 accumulator (`K·Q`): GPU
    /// flavours only ([`ElemKind::gpu_only`]). Operands: [`mmvf_operands`].
    MmvfF32,
    /// One output of the GPU's `mul_mat_vec_f` with a `half2` F16 accumulator (`V·p` of
    /// an F16 cache): GPU flavours only. Operands: [`mmvf_operands`].
    MmvfF16,
    /// Flash attention, one query row over fewer than 512 cells: ggml's one-chunk path
    /// (F16 K/V, the F16 accumulator). The attention kinds run the decoder's attention
    /// ([`ATTN_GEOMETRY`], operands [`attention_operands`]); `k` is the cell count.
    AttnFaChunk,
    /// Flash attention, one query row over 512 padded cells, two tier threads: split-KV,
    /// two chunks merged.
    AttnFaSplit2,
    /// The same with four tier threads: four chunks merged.
    AttnFaSplit4,
    /// Flash attention, [`ATTN_TILED_ROWS`] query rows: the tiled path.
    AttnFaTiled,
    /// Without flash attention, an F32 cache: the `KQ` and `KQV` products and softmax.
    AttnF32,
    /// Without flash attention, an F16 cache.
    AttnF16,
}

/// The attention cases' geometry: query heads, K/V heads (grouped-query, two queries per
/// K/V head) and head size, in a context of 512 cells.
pub const ATTN_GEOMETRY: (usize, usize, usize) = (2, 1, 32);

/// Query rows of the tiled attention case: past ggml's 64-row threshold, and more values
/// (65 x 64) than an outputs file keeps whole.
pub const ATTN_TILED_ROWS: usize = 65;

impl ElemKind {
    /// Every kind.
    pub const ALL: [ElemKind; 15] = [
        ElemKind::SoftMax,
        ElemKind::SoftMaxRow,
        ElemKind::SwiGlu,
        ElemKind::DotF32,
        ElemKind::SgemmDot,
        ElemKind::RmsNorm,
        ElemKind::Rope,
        ElemKind::MmvfF32,
        ElemKind::MmvfF16,
        ElemKind::AttnFaChunk,
        ElemKind::AttnFaSplit2,
        ElemKind::AttnFaSplit4,
        ElemKind::AttnFaTiled,
        ElemKind::AttnF32,
        ElemKind::AttnF16,
    ];
    /// The name in case names.
    pub fn name(self) -> &'static str {
        match self {
            ElemKind::SoftMax => "soft_max",
            ElemKind::SoftMaxRow => "soft_max_row",
            ElemKind::SwiGlu => "swiglu",
            ElemKind::DotF32 => "dot_f32",
            ElemKind::SgemmDot => "sgemm_dot",
            ElemKind::RmsNorm => "rms_norm",
            ElemKind::Rope => "rope",
            ElemKind::MmvfF32 => "mmvf_f32acc",
            ElemKind::MmvfF16 => "mmvf_f16acc",
            ElemKind::AttnFaChunk => "attn_fa_chunk",
            ElemKind::AttnFaSplit2 => "attn_fa_split2",
            ElemKind::AttnFaSplit4 => "attn_fa_split4",
            ElemKind::AttnFaTiled => "attn_fa_tiled",
            ElemKind::AttnF32 => "attn_f32",
            ElemKind::AttnF16 => "attn_f16",
        }
    }
    /// The attention options of an attention kind (`None` for the others).
    pub fn attention(self) -> Option<tiercheck_model::Attention> {
        use tiercheck_model::{Attention, FlashAttn, KvType};
        let fa = |threads| Attention { tier_threads: threads, ..Attention::LLAMA_DEFAULT };
        Some(match self {
            ElemKind::AttnFaChunk | ElemKind::AttnFaTiled => fa(1),
            ElemKind::AttnFaSplit2 => fa(2),
            ElemKind::AttnFaSplit4 => fa(4),
            ElemKind::AttnF32 => Attention::F32_OFF,
            ElemKind::AttnF16 => {
                Attention { kv: KvType::F16, fa: FlashAttn::Off, ..Attention::F32_OFF }
            }
            _ => return None,
        })
    }
    /// Whether only GPU flavours (those with [`ElemFlavour::mmvf`]) have this kernel.
    ///
    /// [`ElemFlavour::mmvf`]: tiercheck_core::elem::ElemFlavour::mmvf
    pub fn gpu_only(self) -> bool {
        matches!(self, ElemKind::MmvfF32 | ElemKind::MmvfF16)
    }
    /// Input rows: one (soft_max, soft_max_row, rope) or two (the second operand); for an
    /// attention kind, its query rows.
    pub fn rows(self) -> usize {
        match self {
            ElemKind::AttnFaTiled => ATTN_TILED_ROWS,
            ElemKind::SoftMax
            | ElemKind::SoftMaxRow
            | ElemKind::Rope
            | ElemKind::AttnFaChunk
            | ElemKind::AttnFaSplit2
            | ElemKind::AttnFaSplit4
            | ElemKind::AttnF32
            | ElemKind::AttnF16 => 1,
            _ => 2,
        }
    }
    /// Row lengths: vector tails (lengths not a multiple of 4 or 8, below one step) and
    /// model sizes; tinyBLAS lengths are whole vectors (of 16 floats, the widest tier).
    fn lengths(self) -> &'static [usize] {
        match self {
            ElemKind::SoftMax => &[7, 64, 256, 333],
            // soft_max's rows, masked (they share its input tensors): two GPU warps, a
            // templated kernel (256) and the generic one with idle threads (333).
            ElemKind::SoftMaxRow => &[64, 256, 333],
            ElemKind::SwiGlu => &[5, 64, 100, 4096],
            ElemKind::DotF32 => &[3, 16, 77, 256, 4096],
            ElemKind::SgemmDot => &[16, 64, 256],
            ElemKind::RmsNorm => &[64, 1024],
            ElemKind::Rope => &[64, 128],
            // dot_f32's even rows (they share its input tensors): one warp with idle
            // lanes (16), one pair per thread (256) and chains of 8 or 16 pairs (4096).
            ElemKind::MmvfF32 | ElemKind::MmvfF16 => &[16, 256, 4096],
            // Cells: one chunk (padded to 256), split-KV (padded to 512; 300 cells in
            // chunks of 256 and 128: the last chunks partly or wholly masked), the tiled
            // path over three KV tiles of 64 (the last one partial).
            ElemKind::AttnFaChunk => &[200],
            ElemKind::AttnFaSplit2 | ElemKind::AttnFaSplit4 => &[300],
            ElemKind::AttnFaTiled => &[130],
            ElemKind::AttnF32 | ElemKind::AttnF16 => &[300],
        }
    }
    /// Cases per length: three, two for the attention kinds (golden/ size budget).
    fn cases(self) -> usize {
        if self.attention().is_some() {
            2
        } else {
            3
        }
    }
}

impl Op {
    /// The type named first in the case name.
    pub fn ty(self) -> GgmlType {
        match self {
            Op::Quantize(t) | Op::Dequantize(t) | Op::VecDot(t) | Op::Gemv(t) | Op::Gemm(t) => t,
            Op::Elem(_) => GgmlType::F32,
        }
    }
    /// The op's name in case names.
    pub fn name(self) -> &'static str {
        match self {
            Op::Quantize(_) => "quantize",
            Op::Dequantize(_) => "dequantize",
            Op::VecDot(_) => "vec_dot",
            Op::Gemv(_) => "gemv",
            Op::Gemm(_) => "gemm",
            Op::Elem(k) => k.name(),
        }
    }
}

/// One kernel case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// `kernel/op/shape/caseN`.
    pub name: String,
    /// The operation.
    pub op: Op,
    /// Values per row.
    pub k: usize,
    /// Weight rows (1 for quantize and vec_dot).
    pub n: usize,
    /// Activation rows (1 for quantize, dequantize and vec_dot).
    pub m: usize,
    /// Case index within the shape.
    pub index: usize,
}

impl Case {
    fn new(op: Op, k: usize, n: usize, m: usize, index: usize) -> Case {
        let shape = match op {
            Op::Quantize(_) | Op::VecDot(_) => format!("k={k}"),
            Op::Dequantize(_) => format!("k={k},n={n}"),
            Op::Gemv(_) | Op::Gemm(_) => format!("k={k},n={n},m={m}"),
            Op::Elem(_) => format!("k={k}"),
        };
        let family = if let Op::Elem(_) = op { "elem" } else { op.ty().name() };
        let name = format!("{family}/{}/{shape}/case{index}", op.name());
        Case { name, op, k, n, m, index }
    }

    /// Name of the weight input tensor (`<case>/w`), if the case has weights.
    pub(crate) fn weight_input(&self) -> Option<String> {
        match self.op {
            Op::Quantize(_) | Op::Elem(_) => None,
            _ => Some(format!("{}/w", self.name)),
        }
    }

    /// For an attention case: the stored tensors its operands are cut from, K and V from
    /// the first, Q from the second ([`attention_operands`]).
    pub fn attention_inputs(&self) -> Option<(String, String)> {
        match self.op {
            Op::Elem(kind) if kind.attention().is_some() => {
                Some(("x/gemm/k=17408,m=2/case0".into(), "x/gemv/k=17408,m=1/case0".into()))
            }
            _ => None,
        }
    }

    /// Name of the activation input tensor, if the case has activations. Activations
    /// do not depend on the weight type, so cases of every type with the same op, k, m
    /// and index share one tensor: `x/<op>/k=<k>,m=<m>/case<i>` (a quantize case is one
    /// row, m = 1).
    pub(crate) fn activation_input(&self) -> Option<String> {
        // soft_max_row reads soft_max's rows (and masks them: [`soft_max_row_scores`]).
        let op = match self.op {
            Op::Dequantize(_) => return None,
            Op::Elem(kind) if kind.attention().is_some() => return None,
            Op::Elem(ElemKind::SoftMaxRow) => ElemKind::SoftMax.name(),
            // The MMVF cases read dot_f32's rows ([`mmvf_operands`]).
            Op::Elem(ElemKind::MmvfF32 | ElemKind::MmvfF16) => ElemKind::DotF32.name(),
            op => op.name(),
        };
        Some(format!("x/{op}/k={},m={}/case{}", self.k, self.m, self.index))
    }
}

/// Activation formats with quantize cases.
pub(crate) const ACT_FORMATS: &[GgmlType] = &[GgmlType::Q8_K, GgmlType::Q8_0, GgmlType::Q8_1];
/// Weight types with dequantize, vec_dot, gemv and gemm cases on the full shape set: the
/// four every lane multiplies.
pub const WEIGHT_TYPES: &[GgmlType] = tiercheck_core::lane::WEIGHT_TYPES;

/// The other eight quantizable types (every CPU lane multiplies them on the shorter
/// shape set below, which keeps golden/ within its 20 MB budget and still covers every
/// row split, the tiled path and tinyBLAS; the GPU lanes on two gemv shapes,
/// [`GPU_MORE_GEMV`]).
pub fn more_types() -> impl Iterator<Item = GgmlType> {
    tiercheck_core::quant::weights::QUANTIZABLE
        .iter()
        .copied()
        .filter(|t| !WEIGHT_TYPES.contains(t))
}

/// Activation kinds for quantize cases, one per case index.
const QUANTIZE_KINDS: [RowKind; 8] = [
    RowKind::Normal,
    RowKind::Ties,
    RowKind::ZeroBlocks,
    RowKind::BothSignsMax,
    RowKind::WideRange,
    RowKind::Tiny,
    RowKind::Outlier,
    RowKind::NonFinite,
];

const VEC_DOT_K: [usize; 5] = [256, 512, 4096, 5120, 17408];
const GEMV_SHAPES: [(usize, usize); 8] =
    [(256, 1), (256, 3), (512, 4), (512, 7), (4096, 8), (4096, 9), (5120, 16), (17408, 3)];
/// Row splits of the repacked matmuls are covered: with n a multiple of 8 (and so of 4),
/// m = 4, 5, 6, 7, 8 leave 0, 1, 2, 3, 0 rows to the gemv kernel after the groups of four
/// that go through the gemm kernel; n = 12 is a 4-row layout only (8-row layouts stay
/// plain there), with two gemm groups and one leftover at m = 9.
const GEMM_SHAPES: [(usize, usize, usize); 11] = [
    (256, 4, 2),
    (256, 9, 3),
    (512, 8, 4),
    (512, 7, 5),
    (4096, 16, 8),
    (5120, 33, 5),
    (17408, 1, 2),
    (256, 8, 5),
    (512, 16, 7),
    (256, 24, 6),
    (256, 12, 9),
];
const DEQUANT_SHAPES: [(usize, usize); 3] = [(256, 1), (512, 3), (4096, 4)];

/// The shorter shape set of [`more_types`]: k up to 4096 (vec_dot; matmuls up to 512)
/// and weight rows up to 24 (one
/// dequantized row: dequantizers are checked bitwise against ggml's by `oracle_ref`), the
/// same row splits (m = 4..9 on n = 8, 16, 24: leftovers 0 to 3 after the groups of four;
/// n = 12 with m = 9; n = 7 and 9: no repacked layout), m = 8 and 9 for the x86 tiled
/// path, m >= 2 for llamafile's tinyBLAS.
const MORE_VEC_DOT_K: [usize; 3] = [256, 512, 4096];
const MORE_GEMV_SHAPES: [(usize, usize); 4] = [(256, 1), (256, 3), (512, 4), (512, 7)];
/// The (k, n) of the gemv cases of [`more_types`] a GPU lane has (the first case of
/// each): one superblock and three rows, two superblocks (sixteen legacy blocks) and
/// seven rows.
pub const GPU_MORE_GEMV: [(usize, usize); 2] = [(256, 3), (512, 7)];
const MORE_GEMM_SHAPES: [(usize, usize, usize); 9] = [
    (256, 4, 2),
    (256, 9, 3),
    (512, 8, 4),
    (512, 7, 5),
    (256, 8, 5),
    (256, 24, 6),
    (512, 16, 7),
    (256, 16, 8),
    (256, 12, 9),
];
const MORE_DEQUANT_SHAPES: [(usize, usize); 1] = [(256, 1)];

/// Every case, sorted by name.
pub fn catalogue() -> Vec<Case> {
    let mut cases = Vec::new();
    for &f in ACT_FORMATS {
        for k in [256, 4096, 17408] {
            // The longest rows get the first two kinds only (golden/ size budget).
            let kinds = if k == 17408 { 2 } else { QUANTIZE_KINDS.len() };
            for i in 0..kinds {
                cases.push(Case::new(Op::Quantize(f), k, 1, 1, i));
            }
        }
    }
    for &t in WEIGHT_TYPES {
        for (k, n) in DEQUANT_SHAPES {
            for i in 0..3 {
                cases.push(Case::new(Op::Dequantize(t), k, n, 1, i));
            }
        }
        for k in VEC_DOT_K {
            for i in 0..if k == 17408 { 2 } else { 3 } {
                cases.push(Case::new(Op::VecDot(t), k, 1, 1, i));
            }
        }
        for (k, n) in GEMV_SHAPES {
            for i in 0..2 {
                cases.push(Case::new(Op::Gemv(t), k, n, 1, i));
            }
        }
        for (k, n, m) in GEMM_SHAPES {
            for i in 0..2 {
                cases.push(Case::new(Op::Gemm(t), k, n, m, i));
            }
        }
    }
    for t in more_types() {
        for (k, n) in MORE_DEQUANT_SHAPES {
            for i in 0..3 {
                cases.push(Case::new(Op::Dequantize(t), k, n, 1, i));
            }
        }
        for k in MORE_VEC_DOT_K {
            for i in 0..3 {
                cases.push(Case::new(Op::VecDot(t), k, 1, 1, i));
            }
        }
        for (k, n) in MORE_GEMV_SHAPES {
            for i in 0..2 {
                cases.push(Case::new(Op::Gemv(t), k, n, 1, i));
            }
        }
        for (k, n, m) in MORE_GEMM_SHAPES {
            for i in 0..2 {
                cases.push(Case::new(Op::Gemm(t), k, n, m, i));
            }
        }
    }
    for kind in ElemKind::ALL {
        for &k in kind.lengths() {
            for i in 0..kind.cases() {
                cases.push(Case::new(Op::Elem(kind), k, 1, kind.rows(), i));
            }
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

/// A generated input tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// f32 values with a shape (outermost first).
    F32 {
        /// Shape.
        shape: Vec<usize>,
        /// Values.
        data: Vec<f32>,
    },
    /// Raw block bytes of `n` rows.
    Blocks {
        /// Block type.
        ty: GgmlType,
        /// Rows.
        rows: usize,
        /// Bytes.
        data: Vec<u8>,
    },
}

/// The scores an `elem/soft_max_row` case runs on: its (soft_max) input row with the
/// causal mask of an attention row applied, the last third of the cells `-inf`.
pub fn soft_max_row_scores(x: &[f32]) -> Vec<f32> {
    let used = x.len() - x.len() / 3;
    x.iter().enumerate().map(|(j, &v)| if j < used { v } else { f32::NEG_INFINITY }).collect()
}

/// The operands of an MMVF case from its two input rows (dot_f32's): the F32-accumulator
/// case multiplies them as they are; the F16-accumulator case clamps both rows to ±8
/// and reads the first as an F16 matrix row, rounded to F16 (the wide-range rows' tiny
/// values become F16 subnormals or zeros), so that no F16 product or partial sum (16
/// pairs per thread at most) can overflow.
pub fn mmvf_operands(kind: ElemKind, rows: &[&[f32]]) -> (Vec<f32>, Vec<f32>) {
    match kind {
        ElemKind::MmvfF16 => (
            rows[0]
                .iter()
                .map(|v| tiercheck_core::fp16::round_to_f16(v.clamp(-8.0, 8.0)))
                .collect(),
            rows[1].iter().map(|v| v.clamp(-8.0, 8.0)).collect(),
        ),
        _ => (rows[0].to_vec(), rows[1].to_vec()),
    }
}

/// The operands of an attention case, cut from its two stored tensors
/// ([`Case::attention_inputs`]): K (`cells x 32`), then V (the same), from the first
/// (normal rows, then tie rows), Q (`m x 64`) from the second; case i starts 8000 values
/// (K and V) and 4200 values (Q) further in. `None` where a tensor is too short.
pub fn attention_operands<'a>(case: &Case, kv: &'a [f32], q: &'a [f32]) -> Option<[&'a [f32]; 3]> {
    let (nh, nkv, hd) = ATTN_GEOMETRY;
    let n = case.k * nkv * hd;
    let (ko, qo) = (8000 * case.index, 4200 * case.index);
    let nq = case.m * nh * hd;
    Some([kv.get(ko..ko + n)?, kv.get(ko + n..ko + 2 * n)?, q.get(qo..qo + nq)?])
}

/// A stable 64-bit seed for a case's input, from its name (FNV-1a).
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// The weight blocks of a case: index 0 quantizes seeded normal rows with the
/// reference quantizer, index 1 is edge blocks (random quants under an extreme f16
/// scale and extreme scale codes, the variant picked by the shape), index 2 quantizes
/// rows with all-zero blocks, index 3 and above are random blocks.
fn weights_for(case: &Case, rng: &mut Rng) -> Vec<u8> {
    let ty = case.op.ty();
    let nb = case.k / ty.block_size() * case.n;
    let quantized = |kind: RowKind, rng: &mut Rng| {
        let x: Vec<f32> = (0..case.n).flat_map(|_| kind.row(rng, case.k)).collect();
        weights::quantize(ty, &x, case.n, case.k).expect("catalogue shapes are whole blocks")
    };
    match case.index {
        0 => quantized(RowKind::Normal, rng),
        1 => edge_blocks(rng, ty, nb, case.k / 256 + case.n),
        2 => quantized(RowKind::ZeroBlocks, rng),
        _ => random_blocks(rng, ty, nb),
    }
}

/// The activation rows of a case, seeded by the shared activation tensor's name.
fn activations_for(case: &Case, name: &str) -> Vec<f32> {
    let mut rng = Rng::new(seed_of(name));
    if let Op::Quantize(_) = case.op {
        return QUANTIZE_KINDS[case.index % QUANTIZE_KINDS.len()].row(&mut rng, case.k);
    }
    if let Op::Elem(kind) = case.op {
        // Row kinds by case index; the second operand of swiglu, the dots and RMSNorm
        // (gate, other row, norm weight) always a normal row.
        // Wide-range rows only where no f32 square or product can overflow.
        let kinds = match kind {
            ElemKind::RmsNorm | ElemKind::Rope => [RowKind::Normal, RowKind::Ties, RowKind::Tiny],
            _ => [RowKind::Normal, RowKind::WideRange, RowKind::Ties],
        };
        let first = kinds[case.index % kinds.len()].row(&mut rng, case.k);
        let first: Vec<f32> = match kind {
            // Attention scores and SiLU inputs of model scale, large enough to reach
            // expf's clamps at the wide-range rows.
            ElemKind::SoftMax | ElemKind::SoftMaxRow | ElemKind::SwiGlu => {
                first.iter().map(|v| v * 8.0).collect()
            }
            _ => first,
        };
        let mut out = first;
        if kind.rows() == 2 {
            out.extend(RowKind::Normal.row(&mut rng, case.k));
        }
        return out;
    }
    let kinds = [RowKind::Normal, RowKind::Ties, RowKind::BothSignsMax, RowKind::WideRange];
    (0..case.m).flat_map(|r| kinds[(case.index + r) % kinds.len()].row(&mut rng, case.k)).collect()
}

/// The inputs of one case, as (tensor name, tensor).
pub(crate) fn inputs_of(case: &Case) -> Vec<(String, Input)> {
    let mut out = Vec::new();
    if let Some(name) = case.weight_input() {
        let mut rng = Rng::new(seed_of(&case.name));
        let w = weights_for(case, &mut rng);
        out.push((name, Input::Blocks { ty: case.op.ty(), rows: case.n, data: w }));
    }
    if let Some(name) = case.activation_input() {
        let x = activations_for(case, &name);
        out.push((name, Input::F32 { shape: vec![case.m, case.k], data: x }));
    }
    out
}

/// Every input of every case, sorted by tensor name.
pub fn generate() -> Vec<(String, Input)> {
    let mut all: Vec<(String, Input)> = catalogue().iter().flat_map(inputs_of).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    // Shared activation tensors appear once per weight type, identical each time.
    all.dedup_by(|a, b| a.0 == b.0);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_reaches_every_tail_value_and_names_are_unique() {
        let cases = catalogue();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
        for k in [256, 512, 4096, 5120, 17408] {
            assert!(cases.iter().any(|c| c.k == k && matches!(c.op, Op::Gemv(_) | Op::Gemm(_))));
        }
        for n in [1, 3, 4, 7, 8, 9, 16, 33] {
            assert!(cases.iter().any(|c| c.n == n && matches!(c.op, Op::Gemv(_) | Op::Gemm(_))));
        }
        for m in [1, 2, 3, 4, 5, 8] {
            assert!(cases.iter().any(|c| c.m == m && matches!(c.op, Op::Gemv(_) | Op::Gemm(_))));
        }
        assert!(cases.iter().any(|c| c.name == "q4_K/gemv/k=4096,n=8,m=1/case0"));
        // Every row split of both row groups, per weight type: leftover rows 0..4 on a
        // repacked row count (a multiple of 4 and 8), and n a multiple of 4 but not 8.
        for t in WEIGHT_TYPES.iter().copied().chain(more_types()) {
            assert!(cases.iter().any(|c| c.op == Op::Gemm(t) && c.m >= 8), "{t:?}: tiled");
            assert!(cases.iter().any(|c| c.op == Op::Dequantize(t)), "{t:?}");
            assert!(cases.iter().any(|c| c.op == Op::VecDot(t)), "{t:?}");
            let gemm = |f: &dyn Fn(&Case) -> bool| {
                cases.iter().any(|c| c.op == Op::Gemm(t) && c.m >= 4 && f(c))
            };
            for left in 0..4 {
                assert!(gemm(&|c| c.n % 8 == 0 && c.m % 4 == left), "{t:?} leftover {left}");
            }
            assert!(gemm(&|c| c.n % 4 == 0 && c.n % 8 != 0 && c.m > 8));
            assert!(gemm(&|c| c.n % 4 != 0));
        }
    }

    #[test]
    fn attention_cases_reach_each_path() {
        use tiercheck_model::attention::{padded_n_kv, FA_SPLIT_KV_MIN, FA_TILE_Q};
        let cases = catalogue();
        let of = |k: ElemKind| cases.iter().filter(move |c| c.op == Op::Elem(k));
        for kind in ElemKind::ALL.into_iter().filter(|k| k.attention().is_some()) {
            assert_eq!(of(kind).count(), 2, "{kind:?}");
        }
        for c in of(ElemKind::AttnFaTiled) {
            assert!(c.m >= FA_TILE_Q && c.m * 64 > crate::manifest::STORE_FULL_MAX);
            // Three KV tiles of 64, the last one partial.
            assert!(c.k > 2 * 64 && c.k < 3 * 64);
        }
        for k in [ElemKind::AttnFaSplit2, ElemKind::AttnFaSplit4, ElemKind::AttnF32] {
            for c in of(k) {
                assert!(c.m == 1 && padded_n_kv(c.k, 512) >= FA_SPLIT_KV_MIN, "{c:?}");
            }
        }
        for c in of(ElemKind::AttnFaChunk) {
            assert!(c.m == 1 && padded_n_kv(c.k, 512) < FA_SPLIT_KV_MIN, "{c:?}");
        }
        // Every attention case's operands fit in its stored tensors.
        let (kv, q) = (vec![0.0f32; 2 * 17408], vec![0.0f32; 17408]);
        for c in cases.iter().filter(|c| c.attention_inputs().is_some()) {
            assert!(attention_operands(c, &kv, &q).is_some(), "{}", c.name);
        }
    }

    #[test]
    fn inputs_are_deterministic() {
        let c = &catalogue()[7];
        assert_eq!(inputs_of(c), inputs_of(c));
    }
}
