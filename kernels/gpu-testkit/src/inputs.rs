//! Deterministic inputs for device-versus-twin checks (the `hip` test binary and the
//! `gpu_vectors` example share them): weights from the reference quantizers and
//! activation rows that reach the q8_1 quantizer's edge cases.

use tiercheck_core::{GgmlType, KernelError};

/// Inputs drawn from the project's seeded generator ([`tiercheck_core::rng::Rng`]).
#[derive(Clone, Debug)]
pub struct Rng(pub tiercheck_core::rng::Rng);

impl Rng {
    /// The generator for a case of `k` values and `rows` rows (fixed seeds, so every
    /// machine builds the same inputs).
    pub fn for_case(k: usize, rows: usize) -> Rng {
        let seed = 0x9e37_79b9_7f4a_7c15 ^ (k as u64).wrapping_mul(31).wrapping_add(rows as u64);
        Rng(tiercheck_core::rng::Rng::new(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [-1, 1).
    pub fn sym(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `rows` rows of `k` uniform values quantized to `ty` by the reference quantizer.
    pub fn weights(&mut self, ty: GgmlType, rows: usize, k: usize) -> Result<Vec<u8>, KernelError> {
        let w: Vec<f32> = (0..k * rows).map(|_| self.sym()).collect();
        tiercheck_core::quant::weights::quantize(ty, &w, rows, k)
    }

    /// An activation row: per block of 32 a random magnitude (2^-12 .. 2^7), and now
    /// and then an all-zero block, a block of values near 1e-38 (d becomes an f32
    /// subnormal and f16 flushes it to 0), or one outlier 40x the block's scale.
    pub fn activations(&mut self, k: usize) -> Vec<f32> {
        let mut x = vec![0.0f32; k];
        for b in x.chunks_mut(32) {
            let kind = self.next_u64() % 8;
            let scale = 2f32.powi((self.next_u64() % 20) as i32 - 12);
            for v in b.iter_mut() {
                *v = match kind {
                    0 => 0.0,
                    1 => self.sym() * 1e-38,
                    _ => self.sym() * scale,
                };
            }
            if kind == 2 {
                let i = (self.next_u64() % 32) as usize;
                b[i] = 40.0 * scale;
            }
        }
        x
    }
}

/// Writes `bytes` to `path` whole: to `<path>.tmp` first, then renamed, so a reader never
/// sees a half-written vectors file (the temporary file is removed on failure).
pub fn write_atomically(path: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp");
    let res = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}
