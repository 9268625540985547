//! The native `x86_64-avx2-repack` lane: repacked q4_K / q4_0 8x8 gemv and gemm with
//! AVX2 intrinsics ([`mod@kernels`]); plain weights take the native `x86_64-avx2` path.
//! The repack itself and the gemm rows' q8_K quantizer (`ActRule::Q8KX86x4`) are the
//! shared portable code in both implementations. Twin:
//! `tiercheck_core::lane::X86_64_AVX2_REPACK`.

pub mod kernels;

use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{prepare_x86, repacked_act_rule, row_path, Avx2RepackTwin, RowPath};
use tiercheck_core::matrix::check_activations;
use tiercheck_core::quant::ActRule;
use tiercheck_core::repack::{
    BlockQ4Kx8, BlockQ4_0x8, Prepared, RepackLayout, RepackedMatrix, Target,
};
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use crate::avx2;

/// Native kernels of the repack lane; only [`kernels()`] hands one out.
#[derive(Debug)]
pub struct Avx2RepackNative {
    _proof: (),
}

static NATIVE: Avx2RepackNative = Avx2RepackNative { _proof: () };

/// The native kernels, if this CPU has AVX2, FMA and F16C.
pub fn kernels() -> Option<&'static Avx2RepackNative> {
    avx2::is_available().then_some(&NATIVE)
}

impl Avx2RepackNative {
    fn plain(&self) -> &'static avx2::Avx2Native {
        avx2::kernels().expect("an Avx2RepackNative exists only when AVX2 is available")
    }

    fn matmul_repacked(
        &self,
        r: &RepackedMatrix,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        check_activations(x, m, r.k())?;
        let n = r.n();
        let mut out = vec![0.0f32; m * n];
        for (i, xi) in x.chunks_exact(r.k().max(1)).enumerate().take(m) {
            let path = row_path(i, m);
            let rule = repacked_act_rule(r.layout(), path);
            let act = if rule == ActRule::Q8_0X86 {
                self.plain().quantize_act(GgmlType::Q4_0, xi)?
            } else {
                rule.quantize(xi)?
            };
            for g in 0..n / 8 {
                let cols = match r.layout() {
                    RepackLayout::Q4K8x8 => {
                        let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(r.group(g));
                        let y = cast_blocks(GgmlType::Q8_K, &act)?;
                        // SAFETY: this struct exists only when AVX2, FMA and F16C are present.
                        unsafe {
                            match path {
                                RowPath::Gemm => kernels::gemm_q4_k_8x8(blocks, y),
                                RowPath::Gemv => kernels::gemv_q4_k_8x8(blocks, y),
                            }
                        }
                    }
                    RepackLayout::Q4_0_8x8 => {
                        let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(r.group(g));
                        let y = cast_blocks(GgmlType::Q8_0, &act)?;
                        // SAFETY: this struct exists only when AVX2, FMA and F16C are present.
                        unsafe { kernels::gemv_q4_0_8x8(blocks, y) }
                    }
                    other => {
                        return Err(KernelError::Unsupported {
                            op: "x86_64-avx2-repack matmul",
                            ty: other.name(),
                        })
                    }
                };
                out[i * n + 8 * g..i * n + 8 * g + 8].copy_from_slice(&cols);
            }
        }
        Ok(out)
    }
}

impl Kernels for Avx2RepackNative {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        Avx2RepackTwin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.plain().quantize_act(wtype, x)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.plain().vec_dot(wtype, w_row, act)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        prepare_x86(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            Prepared::Plain(w) => self.plain().matmul(w, x, m),
            Prepared::Repacked(r) => self.matmul_repacked(r, x, m),
        }
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        let prepared = self.prepare(*w, Target::Cpu)?;
        self.matmul_prepared(&prepared, x, m)
    }
}
