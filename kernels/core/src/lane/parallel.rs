//! Multithreaded matmul that splits the work by output columns (weight rows) only.
//!
//! Every output value is computed by exactly one thread with the lane's own
//! single-threaded kernel, over the whole of k, so the result is bitwise independent of
//! the thread count (as in ggml, whose threads split `src0` rows into chunks). Chunks
//! of repacked weights are whole groups of 8 rows; chunks of plain weights are whole
//! units of [`Kernels::plain_split`] (pairs for the i8mm tiles), and weights it keeps
//! whole run on one thread. Each thread quantizes the activation rows itself
//! (deterministic, so every thread sees the same codes).

use super::{Kernels, TierPool};
use crate::error::KernelError;
use crate::repack::Prepared;
use crate::weight_matrix::check_activations;

/// `kernels.matmul_prepared_tier(w, x, m, tier)` on `threads` threads (1 = the
/// calling thread).
pub fn matmul_parallel(
    kernels: &dyn Kernels,
    w: &Prepared<'_>,
    x: &[f32],
    m: usize,
    threads: usize,
    tier: TierPool,
) -> Result<Vec<f32>, KernelError> {
    let (n, k, unit) = match w {
        Prepared::Plain(p) => match kernels.plain_split(p.ty(), p.n(), m) {
            Some(u) => (p.n(), p.k(), u.max(1)),
            None => return kernels.matmul_prepared_tier(w, x, m, tier),
        },
        Prepared::Repacked(r) => (r.n(), r.k(), 8),
    };
    check_activations(x, m, k)?;
    let threads = threads.max(1);
    let units = n / unit;
    if threads == 1 || units <= 1 {
        return kernels.matmul_prepared_tier(w, x, m, tier);
    }
    // Contiguous ranges of whole units, as even as possible.
    let per = units.div_ceil(threads);
    let ranges: Vec<(usize, usize)> = (0..threads)
        .map(|t| (t * per * unit, ((t + 1) * per * unit).min(n)))
        .filter(|(a, b)| a < b)
        .collect();
    let parts: Vec<Result<Vec<f32>, KernelError>> = std::thread::scope(|s| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(a, b)| {
                s.spawn(move || {
                    let sub = match w {
                        Prepared::Plain(p) => Prepared::Plain(p.rows(a, b)?),
                        Prepared::Repacked(r) => Prepared::Repacked(r.rows(a, b)?),
                    };
                    kernels.matmul_prepared_tier(&sub, x, m, tier)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("matmul worker panicked")).collect()
    });
    let mut out = vec![0.0f32; m * n];
    for (&(a, b), part) in ranges.iter().zip(parts) {
        let part = part?;
        let cols = b - a;
        for i in 0..m {
            out[i * n + a..i * n + b].copy_from_slice(&part[i * cols..(i + 1) * cols]);
        }
    }
    Ok(out)
}
