//! Repacked (interleaved) weight layouts of ggml's CPU "extra" buffer
//! (`ggml-cpu/repack.h`, builders `make_block_q4_Kx8` / `make_block_q4_0x8` in
//! `repack.cpp`), and their exact inverses.
//!
//! A repacked weight is its own type, [`RepackedMatrix`]: only a CPU lane that reads
//! the layout accepts it, and preparing weights takes the target device as an input
//! ([`Target`]): weights staged for a GPU are never repacked (ggml's repack buffer is
//! CPU-only: it has no `get_tensor` and cannot be copied to a device).
//!
//! Layouts (every 8 consecutive weight rows form one group; a group's superblock or
//! block i of each of the 8 rows becomes one interleaved block):
//! - `q4_K_8x8` (`block_q4_Kx8`, 1152 bytes): `d[8]`, `dmin[8]` (f16), `scales[96]`, `qs[1024]`.
//!   qs chunk c (8 bytes) is bytes [(c/8)*8, (c/8)*8 + 8) of row c % 8's `qs`. scales:
//!   for each of the 8 sub-blocks s, 12 bytes packing the 8 rows' 6-bit (scale, min) of
//!   sub-block s in the `get_scale_min_k4` encoding, "row" in the role of its index.
//! - `q4_0_8x8` (`block_q4_0x8`, 144 bytes): `d[8]` (f16), `qs[128]`; qs chunk c (8 bytes) is
//!   bytes [(c/8)*8, (c/8)*8 + 8) of row c % 8's `qs`, each byte XOR 0x88 (offset-8
//!   nibbles become two's complement nibbles).
//! - `q4_K_8x4` (ARM dotprod): `block_q4_Kx8` with a 4-byte interleave: qs chunk c
//!   (4 bytes) is bytes [(c/8)*4, (c/8)*4 + 4) of row c % 8's `qs`; scales as `q4_K_8x8`.
//! - `q4_0_4x4` (`block_q4_0x4`, 72 bytes, ARM dotprod): groups of 4 rows; `d[4]`, `qs[64]`;
//!   qs chunk c (4 bytes) is bytes [(c/4)*4, (c/4)*4 + 4) of row c % 4's `qs`, XOR 0x88.
//! - `q8_0_4x4` (`block_q8_0x4`, 136 bytes, ARM dotprod): groups of 4 rows; `d[4]`,
//!   `qs[128]`; qs chunk c (4 bytes) is bytes [(c/4)*4, (c/4)*4 + 4) of row c % 4's `qs`.
//!
//! - `q4_0_4x8` (`block_q4_0x4`, ARM i8mm): as `q4_0_4x4` with an 8-byte interleave: qs
//!   chunk c (8 bytes) is bytes [(c/4)*8, (c/4)*8 + 8) of row c % 4's `qs`, XOR 0x88.
//! - `q8_0_4x8` (`block_q8_0x4`, ARM i8mm): as `q8_0_4x4` with an 8-byte interleave: qs
//!   chunk c (8 bytes) is bytes [(c/4)*8, (c/4)*8 + 8) of row c % 4's `qs`.
//! - ARM i8mm's `q4_K_8x8` is the x86 `q4_K_8x8` above, byte for byte.
//! - `q6_K_8x4` (`block_q6_Kx8`, 1680 bytes, ARM dotprod; builder `make_block_q6_Kx8`):
//!   `d[8]` (f16), `scales[128]`, `ql[1024]`, `qh[512]`. `scales[8 * j + r]` is row r's
//!   sub-block scale j; ql chunk c (4 bytes) is bytes [(c/8)*4, (c/8)*4 + 4) of row
//!   c % 8's `ql`, qh chunk c likewise of its `qh` (the same chunk size for both).
//! - `q6_K_8x8` (ARM i8mm): `block_q6_Kx8` with an 8-byte interleave of `ql` and `qh`.
//! - `iq4_nl_8x8` (`block_iq4_nlx8`, 144 bytes, x86 AVX2; builder `make_block_iq4_nlx8`):
//!   `q4_0_8x8`'s layout without the XOR (the nibbles are table indices).
//! - `iq4_nl_4x4` (`block_iq4_nlx4`, 72 bytes, ARM dotprod): `q4_0_4x4`'s layout without
//!   the XOR.
//! - `q5_K_8x4` (`block_q5_Kx8`, 1408 bytes, ARM dotprod; builder `make_block_q5_Kx8`):
//!   `d[8]`, `dmin[8]`, `scales[96]` as `q4_K_8x4`, `qh[256]`, `qs[1024]`; qs chunk c (4
//!   bytes) is bytes [(c/8)*4, (c/8)*4 + 4) of row c % 8's `qs`, qh chunk c likewise of its
//!   `qh`. `q5_K_8x8` (ARM i8mm): the same with an 8-byte interleave of `qs` and `qh`.
//!
//! A layout groups [`RepackLayout::cols`] rows (ggml's `NB_COLS`): 8 for the q4_K,
//! `q4_0_8x8`, `iq4_nl_8x8` and q6_K layouts, 4 for `q4_0_4x4`, `q8_0_4x4`, `q4_0_4x8`,
//! `q8_0_4x8` and `iq4_nl_4x4`.
//!
//! Repacking is a pure byte permutation (plus a fixed XOR), so [`RepackedMatrix::to_plain`]
//! restores the original bytes exactly.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{cast_blocks, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8_0};
use crate::error::KernelError;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;

/// Where prepared weights will be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A CPU lane: repacking allowed where the lane's tier does it.
    Cpu,
    /// A GPU device: weights stay in plain blocks (ggml never repacks them).
    Gpu,
}

/// An interleaved layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RepackLayout {
    /// `block_q4_Kx8` with 8-byte interleave.
    Q4K8x8,
    /// `block_q4_0x8` with 8-byte interleave.
    Q4_0_8x8,
    /// `block_q4_Kx8` with 4-byte interleave (ARM dotprod).
    Q4K8x4,
    /// `block_q4_0x4` with 4-byte interleave (ARM dotprod).
    Q4_0_4x4,
    /// `block_q8_0x4` with 4-byte interleave (ARM dotprod).
    Q8_0_4x4,
    /// `block_q4_0x4` with 8-byte interleave (ARM i8mm).
    Q4_0_4x8,
    /// `block_q8_0x4` with 8-byte interleave (ARM i8mm).
    Q8_0_4x8,
    /// `block_q6_Kx8` with 4-byte interleave (ARM dotprod).
    Q6K8x4,
    /// `block_q6_Kx8` with 8-byte interleave (ARM i8mm).
    Q6K8x8,
    /// `block_iq4_nlx8` with 8-byte interleave (x86 AVX2).
    Iq4Nl8x8,
    /// `block_iq4_nlx4` with 4-byte interleave (ARM dotprod).
    Iq4Nl4x4,
    /// `block_q5_Kx8` with 4-byte interleave (ARM dotprod).
    Q5K8x4,
    /// `block_q5_Kx8` with 8-byte interleave (ARM i8mm).
    Q5K8x8,
}

impl RepackLayout {
    /// ggml's name for the layout (`q4_K_8x8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RepackLayout::Q4K8x8 => "q4_K_8x8",
            RepackLayout::Q4_0_8x8 => "q4_0_8x8",
            RepackLayout::Q4K8x4 => "q4_K_8x4",
            RepackLayout::Q4_0_4x4 => "q4_0_4x4",
            RepackLayout::Q8_0_4x4 => "q8_0_4x4",
            RepackLayout::Q4_0_4x8 => "q4_0_4x8",
            RepackLayout::Q8_0_4x8 => "q8_0_4x8",
            RepackLayout::Q6K8x4 => "q6_K_8x4",
            RepackLayout::Q6K8x8 => "q6_K_8x8",
            RepackLayout::Iq4Nl8x8 => "iq4_nl_8x8",
            RepackLayout::Iq4Nl4x4 => "iq4_nl_4x4",
            RepackLayout::Q5K8x4 => "q5_K_8x4",
            RepackLayout::Q5K8x8 => "q5_K_8x8",
        }
    }
    /// The plain block type it interleaves.
    pub fn source(self) -> GgmlType {
        match self {
            RepackLayout::Q4K8x8 => GgmlType::Q4_K,
            RepackLayout::Q4_0_8x8 => GgmlType::Q4_0,
            RepackLayout::Q4K8x4 => GgmlType::Q4_K,
            RepackLayout::Q4_0_4x4 => GgmlType::Q4_0,
            RepackLayout::Q8_0_4x4 => GgmlType::Q8_0,
            RepackLayout::Q4_0_4x8 => GgmlType::Q4_0,
            RepackLayout::Q8_0_4x8 => GgmlType::Q8_0,
            RepackLayout::Q6K8x4 | RepackLayout::Q6K8x8 => GgmlType::Q6_K,
            RepackLayout::Iq4Nl8x8 | RepackLayout::Iq4Nl4x4 => GgmlType::IQ4_NL,
            RepackLayout::Q5K8x4 | RepackLayout::Q5K8x8 => GgmlType::Q5_K,
        }
    }
    /// Rows interleaved into one block (ggml's `NB_COLS`).
    pub fn cols(self) -> usize {
        match self {
            RepackLayout::Q4K8x8
            | RepackLayout::Q4_0_8x8
            | RepackLayout::Q4K8x4
            | RepackLayout::Q6K8x4
            | RepackLayout::Q6K8x8
            | RepackLayout::Iq4Nl8x8
            | RepackLayout::Q5K8x4
            | RepackLayout::Q5K8x8 => 8,
            RepackLayout::Q4_0_4x4
            | RepackLayout::Q8_0_4x4
            | RepackLayout::Q4_0_4x8
            | RepackLayout::Q8_0_4x8
            | RepackLayout::Iq4Nl4x4 => 4,
        }
    }
    /// Bytes taken from one row at a time (the interleave, ggml's `blck_size_interleave`).
    pub fn interleave(self) -> usize {
        match self {
            RepackLayout::Q4K8x8
            | RepackLayout::Q4_0_8x8
            | RepackLayout::Q4_0_4x8
            | RepackLayout::Q8_0_4x8
            | RepackLayout::Q6K8x8
            | RepackLayout::Iq4Nl8x8
            | RepackLayout::Q5K8x8 => 8,
            RepackLayout::Q4K8x4
            | RepackLayout::Q4_0_4x4
            | RepackLayout::Q8_0_4x4
            | RepackLayout::Q6K8x4
            | RepackLayout::Iq4Nl4x4
            | RepackLayout::Q5K8x4 => 4,
        }
    }
    /// Bytes of one interleaved block ([`RepackLayout::cols`] source blocks).
    pub fn block_bytes(self) -> usize {
        self.cols() * self.source().type_size()
    }
}

/// `block_q4_Kx8` (1152 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4Kx8 {
    /// Eight f16 scales.
    pub d: [[u8; 2]; 8],
    /// Eight f16 min scales.
    pub dmin: [[u8; 2]; 8],
    /// 8 sub-blocks x 12 bytes of packed 6-bit scales and mins.
    pub scales: [u8; 96],
    /// Interleaved quants.
    pub qs: [u8; 1024],
}
const _: () = assert!(core::mem::size_of::<BlockQ4Kx8>() == 1152);

/// `block_q5_Kx8` (1408 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5Kx8 {
    /// Eight f16 scales.
    pub d: [[u8; 2]; 8],
    /// Eight f16 min scales.
    pub dmin: [[u8; 2]; 8],
    /// 8 sub-blocks x 12 bytes of packed 6-bit scales and mins (as `block_q4_Kx8`).
    pub scales: [u8; 96],
    /// Interleaved high bits (the rows' `qh`, the same chunk size as `qs`).
    pub qh: [u8; 256],
    /// Interleaved low nibbles.
    pub qs: [u8; 1024],
}
const _: () = assert!(core::mem::size_of::<BlockQ5Kx8>() == 1408);

/// `block_q4_0x8` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0x8 {
    /// Eight f16 scales.
    pub d: [[u8; 2]; 8],
    /// Interleaved quants, XOR 0x88.
    pub qs: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_0x8>() == 144);

/// `block_iq4_nlx8` (144 bytes): [`BlockQ4_0x8`]'s layout without the XOR.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIq4Nlx8 {
    /// Eight f16 scales.
    pub d: [[u8; 2]; 8],
    /// Interleaved table indices (8-byte interleave), as stored.
    pub qs: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockIq4Nlx8>() == 144);

/// `block_iq4_nlx4` (72 bytes): [`BlockQ4_0x4`]'s 4-byte interleave without the XOR.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIq4Nlx4 {
    /// Four f16 scales.
    pub d: [[u8; 2]; 4],
    /// Interleaved table indices (4-byte interleave), as stored.
    pub qs: [u8; 64],
}
const _: () = assert!(core::mem::size_of::<BlockIq4Nlx4>() == 72);

/// `block_q4_0x4` (72 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0x4 {
    /// Four f16 scales.
    pub d: [[u8; 2]; 4],
    /// Interleaved quants (4-byte interleave), XOR 0x88.
    pub qs: [u8; 64],
}
const _: () = assert!(core::mem::size_of::<BlockQ4_0x4>() == 72);

/// `block_q8_0x4` (136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0x4 {
    /// Four f16 scales.
    pub d: [[u8; 2]; 4],
    /// Interleaved quants (4-byte interleave).
    pub qs: [u8; 128],
}
const _: () = assert!(core::mem::size_of::<BlockQ8_0x4>() == 136);

/// `block_q6_Kx8` (1680 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ6Kx8 {
    /// Eight f16 scales.
    pub d: [[u8; 2]; 8],
    /// Sub-block scales (i8): `scales[8 * j + r]` is row r's scale j.
    pub scales: [u8; 128],
    /// Interleaved low 4 bits.
    pub ql: [u8; 1024],
    /// Interleaved high 2 bits.
    pub qh: [u8; 512],
}
const _: () = assert!(core::mem::size_of::<BlockQ6Kx8>() == 1680);

impl BlockQ6Kx8 {
    /// Interleave 8 `block_q6_K` (one per row) with `il`-byte chunks (`make_block_q6_Kx8`).
    pub fn from_rows(rows: [&BlockQ6K; 8], il: usize) -> Self {
        let mut out = BlockQ6Kx8 { d: [[0; 2]; 8], scales: [0; 128], ql: [0; 1024], qh: [0; 512] };
        for (r, b) in rows.iter().enumerate() {
            out.d[r] = b.d;
            for j in 0..16 {
                out.scales[8 * j + r] = b.scales[j];
            }
            for o in 0..128 {
                out.ql[interleaved_index(8, il, r, o)] = b.ql[o];
            }
            for o in 0..64 {
                out.qh[interleaved_index(8, il, r, o)] = b.qh[o];
            }
        }
        out
    }

    /// Row `r`'s plain `block_q6_K`, from an `il`-byte interleave (the exact inverse).
    pub fn row(&self, r: usize, il: usize) -> BlockQ6K {
        let mut b = BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: self.d[r] };
        for j in 0..16 {
            b.scales[j] = self.scales[8 * j + r];
        }
        deinterleave(&self.ql, &mut b.ql, il, r);
        deinterleave(&self.qh, &mut b.qh, il, r);
        b
    }
}

/// Row `r`'s plain bytes out of an 8-row interleave of `il` bytes: `plain[o]` =
/// `inter[interleaved_index(8, il, r, o)]`, copied `il` bytes at a time.
#[inline]
fn deinterleave(inter: &[u8], plain: &mut [u8], il: usize, r: usize) {
    #[inline(always)]
    fn by<const IL: usize>(inter: &[u8], plain: &mut [u8], r: usize) {
        for (c, dst) in plain.chunks_exact_mut(IL).enumerate() {
            let at = (c * 8 + r) * IL;
            let src: &[u8; IL] = inter[at..at + IL].try_into().expect("IL bytes");
            let dst: &mut [u8; IL] = dst.try_into().expect("IL bytes");
            *dst = *src;
        }
    }
    match il {
        4 => by::<4>(inter, plain, r),
        8 => by::<8>(inter, plain, r),
        _ => {
            for (o, dst) in plain.iter_mut().enumerate() {
                *dst = inter[interleaved_index(8, il, r, o)];
            }
        }
    }
}

/// Index in an interleaved `qs` of plain byte `o` of row `r`, for `cols` rows and an
/// interleave of `il` bytes.
#[inline]
pub fn interleaved_index(cols: usize, il: usize, r: usize, o: usize) -> usize {
    ((o / il) * cols + r) * il + o % il
}

impl BlockQ4Kx8 {
    /// (scale, min) of row `r` (0..8), sub-block `s` (0..8).
    #[inline]
    pub fn scale_min(&self, r: usize, s: usize) -> (u8, u8) {
        let q: &[u8; 12] = self.scales[12 * s..12 * s + 12].try_into().expect("12 bytes");
        scale_min_k4(r, q)
    }
    /// The plain `qs` byte `o` (0..128) of row `r`.
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> u8 {
        self.qs[((o / 8) * 8 + r) * 8 + o % 8]
    }
    /// The plain `qs` byte `o` (0..128) of row `r` in the 4-byte interleave (`q4_K_8x4`).
    #[inline]
    pub fn q_il4(&self, r: usize, o: usize) -> u8 {
        self.qs[interleaved_index(8, 4, r, o)]
    }
}

impl BlockQ5Kx8 {
    /// (scale, min) of row `r` (0..8), sub-block `s` (0..8).
    #[inline]
    pub fn scale_min(&self, r: usize, s: usize) -> (u8, u8) {
        let q: &[u8; 12] = self.scales[12 * s..12 * s + 12].try_into().expect("12 bytes");
        scale_min_k4(r, q)
    }
    /// Row `r`'s plain block, for interleave `il` (4 or 8).
    pub fn row(&self, r: usize, il: usize) -> crate::blocks::BlockQ5K {
        let mut pb = crate::blocks::BlockQ5K {
            d: self.d[r],
            dmin: self.dmin[r],
            scales: [0; 12],
            qh: [0; 32],
            qs: [0; 128],
        };
        for o in 0..128 {
            pb.qs[o] = self.qs[interleaved_index(8, il, r, o)];
        }
        for o in 0..32 {
            pb.qh[o] = self.qh[interleaved_index(8, il, r, o)];
        }
        let sm: [(u8, u8); 8] = core::array::from_fn(|s| self.scale_min(r, s));
        for j in 0..4 {
            pb.scales[j] = sm[j].0 | ((sm[j + 4].0 >> 4) << 6);
            pb.scales[j + 4] = sm[j].1 | ((sm[j + 4].1 >> 4) << 6);
            pb.scales[j + 8] = (sm[j + 4].0 & 15) | ((sm[j + 4].1 & 15) << 4);
        }
        pb
    }
}

impl BlockQ4_0x4 {
    /// The plain `qs` byte `o` (0..16) of row `r` (0..4), the XOR undone.
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> u8 {
        self.qs[interleaved_index(4, 4, r, o)] ^ 0x88
    }
    /// As [`BlockQ4_0x4::q`] in the 8-byte interleave (`q4_0_4x8`).
    #[inline]
    pub fn q_il8(&self, r: usize, o: usize) -> u8 {
        self.qs[interleaved_index(4, 8, r, o)] ^ 0x88
    }
}

impl BlockQ8_0x4 {
    /// The plain quant `o` (0..32) of row `r` (0..4).
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> i8 {
        self.qs[interleaved_index(4, 4, r, o)] as i8
    }
    /// As [`BlockQ8_0x4::q`] in the 8-byte interleave (`q8_0_4x8`).
    #[inline]
    pub fn q_il8(&self, r: usize, o: usize) -> i8 {
        self.qs[interleaved_index(4, 8, r, o)] as i8
    }
}

impl BlockQ4_0x8 {
    /// The plain `qs` byte `o` (0..16) of row `r` (the XOR undone).
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> u8 {
        self.qs[((o / 8) * 8 + r) * 8 + o % 8] ^ 0x88
    }
}

impl BlockIq4Nlx4 {
    /// The plain `qs` byte `o` (0..16) of row `r` (0..4).
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> u8 {
        self.qs[interleaved_index(4, 4, r, o)]
    }
}

impl BlockIq4Nlx8 {
    /// The plain `qs` byte `o` (0..16) of row `r`.
    #[inline]
    pub fn q(&self, r: usize, o: usize) -> u8 {
        self.qs[((o / 8) * 8 + r) * 8 + o % 8]
    }
}

/// Encode 8 (scale, min) pairs, one per row, as one 12-byte `get_scale_min_k4` group.
fn pack_scale_min(s: [u8; 8], m: [u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for r in 0..4 {
        q[r] = (s[r] & 63) | ((s[r + 4] & 48) << 2);
        q[r + 4] = (m[r] & 63) | ((m[r + 4] & 48) << 2);
        q[r + 8] = (s[r + 4] & 15) | ((m[r + 4] & 15) << 4);
    }
    q
}

/// Weights repacked for a CPU lane.
#[derive(Clone, Debug)]
pub struct RepackedMatrix {
    layout: RepackLayout,
    n: usize,
    k: usize,
    /// The repacked bytes, shared by the views [`RepackedMatrix::rows`] makes (a worker
    /// thread's slice of the rows costs no copy).
    data: std::sync::Arc<Vec<u8>>,
    /// Where this matrix's bytes start in `data`.
    start: usize,
}

/// Two matrices are equal when their layout, shape and bytes are (views included).
impl PartialEq for RepackedMatrix {
    fn eq(&self, other: &Self) -> bool {
        (self.layout, self.n, self.k) == (other.layout, other.n, other.k)
            && self.data() == other.data()
    }
}
impl Eq for RepackedMatrix {}

impl RepackedMatrix {
    /// Repack `w` (plain blocks) into `layout`. Requires the layout's source type and a
    /// row count divisible by [`RepackLayout::cols`] (as ggml's
    /// `ggml_repack_get_optimal_repack_type`).
    pub fn from_plain(w: &WeightMatrix<'_>, layout: RepackLayout) -> Result<Self, KernelError> {
        if w.ty() != layout.source() {
            return Err(KernelError::Unsupported { op: layout.name(), ty: w.ty().name() });
        }
        let cols = layout.cols();
        if !w.n().is_multiple_of(cols) {
            return Err(KernelError::ShapeMismatch {
                what: "rows to repack (a multiple of the layout's row group)",
                expected: w.n().div_ceil(cols) * cols,
                got: w.n(),
            });
        }
        let nb = w.k() / layout.source().block_size();
        let il = layout.interleave();
        let mut data = Vec::with_capacity(w.n() / cols * nb * layout.block_bytes());
        for g in 0..w.n() / cols {
            match layout {
                RepackLayout::Q4K8x8 | RepackLayout::Q4K8x4 => {
                    let rows: Vec<&[BlockQ4K]> = (0..8)
                        .map(|r| cast_blocks(GgmlType::Q4_K, w.row(8 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockQ4Kx8 {
                            d: [[0; 2]; 8],
                            dmin: [[0; 2]; 8],
                            scales: [0; 96],
                            qs: [0; 1024],
                        };
                        for r in 0..8 {
                            out.d[r] = rows[r][b].d;
                            out.dmin[r] = rows[r][b].dmin;
                        }
                        for c in 0..1024 / il {
                            let (r, off) = (c % 8, (c / 8) * il);
                            out.qs[il * c..il * c + il]
                                .copy_from_slice(&rows[r][b].qs[off..off + il]);
                        }
                        for s in 0..8 {
                            let mut sc = [0u8; 8];
                            let mut mn = [0u8; 8];
                            for r in 0..8 {
                                (sc[r], mn[r]) = scale_min_k4(s, &rows[r][b].scales);
                            }
                            out.scales[12 * s..12 * s + 12]
                                .copy_from_slice(&pack_scale_min(sc, mn));
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Q4_0_8x8 => {
                    let rows: Vec<&[BlockQ4_0]> = (0..8)
                        .map(|r| cast_blocks(GgmlType::Q4_0, w.row(8 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockQ4_0x8 { d: [[0; 2]; 8], qs: [0; 128] };
                        for r in 0..8 {
                            out.d[r] = rows[r][b].d;
                        }
                        for c in 0..16 {
                            let (r, off) = (c % 8, (c / 8) * 8);
                            for i in 0..8 {
                                out.qs[8 * c + i] = rows[r][b].qs[off + i] ^ 0x88;
                            }
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Iq4Nl8x8 => {
                    let rows: Vec<&[crate::blocks::BlockIq4Nl]> = (0..8)
                        .map(|r| cast_blocks(GgmlType::IQ4_NL, w.row(8 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockIq4Nlx8 { d: [[0; 2]; 8], qs: [0; 128] };
                        for r in 0..8 {
                            out.d[r] = rows[r][b].d;
                        }
                        for c in 0..16 {
                            let (r, off) = (c % 8, (c / 8) * 8);
                            out.qs[8 * c..8 * c + 8].copy_from_slice(&rows[r][b].qs[off..off + 8]);
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Q5K8x4 | RepackLayout::Q5K8x8 => {
                    let rows: Vec<&[crate::blocks::BlockQ5K]> = (0..8)
                        .map(|r| cast_blocks(GgmlType::Q5_K, w.row(8 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockQ5Kx8 {
                            d: [[0; 2]; 8],
                            dmin: [[0; 2]; 8],
                            scales: [0; 96],
                            qh: [0; 256],
                            qs: [0; 1024],
                        };
                        for r in 0..8 {
                            out.d[r] = rows[r][b].d;
                            out.dmin[r] = rows[r][b].dmin;
                            for o in 0..128 {
                                out.qs[interleaved_index(8, il, r, o)] = rows[r][b].qs[o];
                            }
                            for o in 0..32 {
                                out.qh[interleaved_index(8, il, r, o)] = rows[r][b].qh[o];
                            }
                        }
                        for s in 0..8 {
                            let mut sc = [0u8; 8];
                            let mut mn = [0u8; 8];
                            for r in 0..8 {
                                (sc[r], mn[r]) = scale_min_k4(s, &rows[r][b].scales);
                            }
                            out.scales[12 * s..12 * s + 12]
                                .copy_from_slice(&pack_scale_min(sc, mn));
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Iq4Nl4x4 => {
                    let rows: Vec<&[crate::blocks::BlockIq4Nl]> = (0..4)
                        .map(|r| cast_blocks(GgmlType::IQ4_NL, w.row(4 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockIq4Nlx4 { d: [[0; 2]; 4], qs: [0; 64] };
                        for r in 0..4 {
                            out.d[r] = rows[r][b].d;
                            for o in 0..16 {
                                out.qs[interleaved_index(4, 4, r, o)] = rows[r][b].qs[o];
                            }
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Q4_0_4x4 | RepackLayout::Q4_0_4x8 => {
                    let rows: Vec<&[BlockQ4_0]> = (0..4)
                        .map(|r| cast_blocks(GgmlType::Q4_0, w.row(4 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockQ4_0x4 { d: [[0; 2]; 4], qs: [0; 64] };
                        for r in 0..4 {
                            out.d[r] = rows[r][b].d;
                            for o in 0..16 {
                                out.qs[interleaved_index(4, il, r, o)] = rows[r][b].qs[o] ^ 0x88;
                            }
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Q6K8x4 | RepackLayout::Q6K8x8 => {
                    let rows: Vec<&[BlockQ6K]> = (0..8)
                        .map(|r| cast_blocks(GgmlType::Q6_K, w.row(8 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let out = BlockQ6Kx8::from_rows(core::array::from_fn(|r| &rows[r][b]), il);
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
                RepackLayout::Q8_0_4x4 | RepackLayout::Q8_0_4x8 => {
                    let rows: Vec<&[BlockQ8_0]> = (0..4)
                        .map(|r| cast_blocks(GgmlType::Q8_0, w.row(4 * g + r)))
                        .collect::<Result<_, _>>()?;
                    for b in 0..nb {
                        let mut out = BlockQ8_0x4 { d: [[0; 2]; 4], qs: [0; 128] };
                        for r in 0..4 {
                            out.d[r] = rows[r][b].d;
                            for o in 0..32 {
                                out.qs[interleaved_index(4, il, r, o)] = rows[r][b].qs[o];
                            }
                        }
                        data.extend_from_slice(bytemuck::bytes_of(&out));
                    }
                }
            }
        }
        Ok(RepackedMatrix { layout, n: w.n(), k: w.k(), data: std::sync::Arc::new(data), start: 0 })
    }

    /// The exact inverse: the plain block bytes this was made from.
    pub fn to_plain(&self) -> Vec<u8> {
        let nb = self.k / self.layout.source().block_size();
        let row_bytes = nb * self.layout.source().type_size();
        let mut out = vec![0u8; self.n * row_bytes];
        let tsz = self.layout.source().type_size();
        let cols = self.layout.cols();
        for g in 0..self.n / cols {
            for b in 0..nb {
                let blk = &self.data()[(g * nb + b) * self.layout.block_bytes()..]
                    [..self.layout.block_bytes()];
                for r in 0..cols {
                    let dst = &mut out[(cols * g + r) * row_bytes + b * tsz..][..tsz];
                    match self.layout {
                        RepackLayout::Q4K8x8 | RepackLayout::Q4K8x4 => {
                            let x: &BlockQ4Kx8 = bytemuck::from_bytes(blk);
                            let mut pb = BlockQ4K {
                                d: x.d[r],
                                dmin: x.dmin[r],
                                scales: [0; 12],
                                qs: [0; 128],
                            };
                            for o in 0..128 {
                                pb.qs[o] = if self.layout == RepackLayout::Q4K8x8 {
                                    x.q(r, o)
                                } else {
                                    x.q_il4(r, o)
                                };
                            }
                            // Re-encode this row's 8 (scale, min) pairs in q4_K's packing.
                            let sm: Vec<(u8, u8)> = (0..8).map(|s| x.scale_min(r, s)).collect();
                            for j in 0..4 {
                                pb.scales[j] = sm[j].0 | ((sm[j + 4].0 >> 4) << 6);
                                pb.scales[j + 4] = sm[j].1 | ((sm[j + 4].1 >> 4) << 6);
                                pb.scales[j + 8] = (sm[j + 4].0 & 15) | ((sm[j + 4].1 & 15) << 4);
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Q4_0_8x8 => {
                            let x: &BlockQ4_0x8 = bytemuck::from_bytes(blk);
                            let mut pb = BlockQ4_0 { d: x.d[r], qs: [0; 16] };
                            for o in 0..16 {
                                pb.qs[o] = x.q(r, o);
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Q5K8x4 | RepackLayout::Q5K8x8 => {
                            let x: &BlockQ5Kx8 = bytemuck::from_bytes(blk);
                            let pb = x.row(r, self.layout.interleave());
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Iq4Nl4x4 => {
                            let x: &BlockIq4Nlx4 = bytemuck::from_bytes(blk);
                            let mut pb = crate::blocks::BlockIq4Nl { d: x.d[r], qs: [0; 16] };
                            for o in 0..16 {
                                pb.qs[o] = x.q(r, o);
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Iq4Nl8x8 => {
                            let x: &BlockIq4Nlx8 = bytemuck::from_bytes(blk);
                            let mut pb = crate::blocks::BlockIq4Nl { d: x.d[r], qs: [0; 16] };
                            for o in 0..16 {
                                pb.qs[o] = x.q(r, o);
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Q4_0_4x4 | RepackLayout::Q4_0_4x8 => {
                            let x: &BlockQ4_0x4 = bytemuck::from_bytes(blk);
                            let mut pb = BlockQ4_0 { d: x.d[r], qs: [0; 16] };
                            for o in 0..16 {
                                pb.qs[o] = if self.layout == RepackLayout::Q4_0_4x4 {
                                    x.q(r, o)
                                } else {
                                    x.q_il8(r, o)
                                };
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Q6K8x4 | RepackLayout::Q6K8x8 => {
                            let x: &BlockQ6Kx8 = bytemuck::from_bytes(blk);
                            let pb = x.row(r, self.layout.interleave());
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                        RepackLayout::Q8_0_4x4 | RepackLayout::Q8_0_4x8 => {
                            let x: &BlockQ8_0x4 = bytemuck::from_bytes(blk);
                            let mut pb = BlockQ8_0 { d: x.d[r], qs: [0; 32] };
                            for o in 0..32 {
                                pb.qs[o] = if self.layout == RepackLayout::Q8_0_4x4 {
                                    x.q(r, o)
                                } else {
                                    x.q_il8(r, o)
                                } as u8;
                            }
                            dst.copy_from_slice(bytemuck::bytes_of(&pb));
                        }
                    }
                }
            }
        }
        out
    }

    /// The layout.
    pub fn layout(&self) -> RepackLayout {
        self.layout
    }
    /// Rows.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Values per row.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Interleaved blocks of row group `g` (rows `cols*g..cols*(g+1)`, cols =
    /// [`RepackLayout::cols`]), as bytes.
    pub fn group(&self, g: usize) -> &[u8] {
        let per = self.k / self.layout.source().block_size() * self.layout.block_bytes();
        &self.data()[g * per..(g + 1) * per]
    }
    /// All bytes.
    pub fn data(&self) -> &[u8] {
        let per = self.k / self.layout.source().block_size() * self.layout.block_bytes();
        &self.data[self.start..self.start + self.n / self.layout.cols() * per]
    }

    /// Rows `start..end` (both multiples of [`RepackLayout::cols`]) as their own matrix: a
    /// view of the same bytes, not a copy.
    pub fn rows(&self, start: usize, end: usize) -> Result<RepackedMatrix, KernelError> {
        let cols = self.layout.cols();
        if !start.is_multiple_of(cols) || !end.is_multiple_of(cols) || start > end || end > self.n {
            return Err(KernelError::ShapeMismatch {
                what: "repacked row range",
                expected: self.n,
                got: end,
            });
        }
        let per = self.k / self.layout.source().block_size() * self.layout.block_bytes();
        Ok(RepackedMatrix {
            layout: self.layout,
            n: end - start,
            k: self.k,
            data: std::sync::Arc::clone(&self.data),
            start: self.start + start / cols * per,
        })
    }
}

/// Weights ready for a lane's matmul: plain blocks or a repacked layout.
#[derive(Clone, Debug)]
pub enum Prepared<'a> {
    /// ggml's plain blocks.
    Plain(WeightMatrix<'a>),
    /// An interleaved layout (CPU lanes that read it only).
    Repacked(RepackedMatrix),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::weights;

    fn sample(ty: GgmlType, n: usize, k: usize) -> Vec<u8> {
        let x: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.01).collect();
        weights::quantize(ty, &x, n, k).unwrap()
    }

    #[test]
    fn repack_is_an_exact_permutation_with_an_inverse() {
        for (ty, layout) in [
            (GgmlType::Q4_K, RepackLayout::Q4K8x8),
            (GgmlType::Q4_0, RepackLayout::Q4_0_8x8),
            (GgmlType::Q4_K, RepackLayout::Q4K8x4),
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x4),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x4),
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x8),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x8),
            (GgmlType::Q6_K, RepackLayout::Q6K8x4),
            (GgmlType::Q6_K, RepackLayout::Q6K8x8),
            (GgmlType::IQ4_NL, RepackLayout::Iq4Nl8x8),
            (GgmlType::IQ4_NL, RepackLayout::Iq4Nl4x4),
            (GgmlType::Q5_K, RepackLayout::Q5K8x4),
            (GgmlType::Q5_K, RepackLayout::Q5K8x8),
        ] {
            let (n, k) = (16, 512);
            let bytes = sample(ty, n, k);
            let w = WeightMatrix::new(ty, n, k, &bytes).unwrap();
            let r = RepackedMatrix::from_plain(&w, layout).unwrap();
            assert_eq!(r.data().len(), bytes.len());
            assert_eq!(r.to_plain(), bytes);
            // a permutation: same multiset of quant bytes (XOR undone for q4_0)
            assert_ne!(r.data(), &bytes[..]);
        }
    }

    #[test]
    fn repack_checks_type_and_row_count() {
        let bytes = sample(GgmlType::Q4_K, 12, 256);
        let w = WeightMatrix::new(GgmlType::Q4_K, 12, 256, &bytes).unwrap();
        assert!(RepackedMatrix::from_plain(&w, RepackLayout::Q4K8x8).is_err());
        assert!(RepackedMatrix::from_plain(&w, RepackLayout::Q4_0_8x8).is_err());
        assert!(RepackedMatrix::from_plain(&w, RepackLayout::Q4K8x4).is_err());
        assert!(RepackedMatrix::from_plain(&w, RepackLayout::Q6K8x4).is_err());
        let bytes = sample(GgmlType::Q6_K, 12, 256);
        let w = WeightMatrix::new(GgmlType::Q6_K, 12, 256, &bytes).unwrap();
        assert!(RepackedMatrix::from_plain(&w, RepackLayout::Q6K8x8).is_err());
        // 4-row layouts take 12 rows, not 6
        for (ty, layout) in [
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x4),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x4),
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x8),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x8),
        ] {
            let bytes = sample(ty, 12, 256);
            let w = WeightMatrix::new(ty, 12, 256, &bytes).unwrap();
            let r = RepackedMatrix::from_plain(&w, layout).unwrap();
            assert_eq!(r.to_plain(), bytes);
            assert_eq!(r.rows(4, 12).unwrap().to_plain(), &bytes[bytes.len() / 3..]);
            let bytes = sample(ty, 6, 256);
            let w = WeightMatrix::new(ty, 6, 256, &bytes).unwrap();
            assert!(RepackedMatrix::from_plain(&w, layout).is_err());
        }
    }

    #[test]
    fn q6_k_layouts_match_ggml_builder() {
        // make_block_q6_Kx8(in, il): d[i] = in[i].d; ql chunk i (il bytes, i < 1024/il)
        // = in[i % 8].ql[(i/8)*il ..]; qh chunk i (i < 512/il) likewise from qh;
        // scales[j*8 + i] = in[i].scales[j]. Plain block_q6_K: ql 0..128, qh 128..192,
        // scales 192..208, d 208..210; block_q6_Kx8: d 0..16, scales 16..144,
        // ql 144..1168, qh 1168..1680.
        for layout in [RepackLayout::Q6K8x4, RepackLayout::Q6K8x8] {
            let il = layout.interleave();
            let bytes = sample(GgmlType::Q6_K, 8, 256);
            let w = WeightMatrix::new(GgmlType::Q6_K, 8, 256, &bytes).unwrap();
            let out = RepackedMatrix::from_plain(&w, layout).unwrap();
            let out = out.data();
            assert_eq!(out.len(), 1680);
            let src = |row: usize, off: usize| bytes[row * 210 + off];
            for i in 0..8 {
                assert_eq!(&out[2 * i..2 * i + 2], &[src(i, 208), src(i, 209)]);
                for j in 0..16 {
                    assert_eq!(out[16 + j * 8 + i], src(i, 192 + j));
                }
            }
            for i in 0..1024 / il {
                for b in 0..il {
                    assert_eq!(out[144 + i * il + b], src(i % 8, (i / 8) * il + b), "ql {i}");
                }
            }
            for i in 0..512 / il {
                for b in 0..il {
                    assert_eq!(out[1168 + i * il + b], src(i % 8, 128 + (i / 8) * il + b));
                }
            }
        }
    }

    #[test]
    fn arm_layouts_match_ggml_builders() {
        // make_block_q4_0x4 / make_block_q8_0x4 / make_block_q4_Kx8 with interleave il:
        // output chunk i is bytes [(i/N)*il, +il) of source block i % N.
        for (ty, layout) in [
            (GgmlType::Q4_K, RepackLayout::Q4K8x4),
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x4),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x4),
            (GgmlType::Q4_K, RepackLayout::Q4K8x8),
            (GgmlType::Q4_0, RepackLayout::Q4_0_4x8),
            (GgmlType::Q8_0, RepackLayout::Q8_0_4x8),
        ] {
            let (n, il) = (layout.cols(), layout.interleave());
            let bytes = sample(ty, n, ty.block_size());
            let w = WeightMatrix::new(ty, n, ty.block_size(), &bytes).unwrap();
            let r = RepackedMatrix::from_plain(&w, layout).unwrap();
            let tsz = ty.type_size();
            let (dsz, qoff) = match ty {
                GgmlType::Q4_K => (4 * n, 4),
                _ => (2 * n, 2),
            };
            let qs_len = tsz - qoff - if ty == GgmlType::Q4_K { 12 } else { 0 };
            let qs_src = qoff + if ty == GgmlType::Q4_K { 12 } else { 0 };
            let qs_dst = dsz + if ty == GgmlType::Q4_K { 96 } else { 0 };
            let xor = if ty == GgmlType::Q4_0 { 0x88 } else { 0 };
            for i in 0..qs_len * n / il {
                for b in 0..il {
                    let src = bytes[(i % n) * tsz + qs_src + (i / n) * il + b];
                    assert_eq!(r.data()[qs_dst + il * i + b], src ^ xor, "{layout:?} chunk {i}");
                }
            }
        }
    }
}
