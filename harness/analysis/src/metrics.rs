//! Divergence metrics between two tensors and between two logit rows.

use serde::{Deserialize, Serialize};

/// How two tensors differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// `||a - b|| / ||b||` (L2; 0 when both are zero, infinite when only `b` is).
    pub rel_l2: f64,
    /// Cosine similarity (1 when both are zero).
    pub cosine: f64,
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Values whose bits differ.
    pub n_diff: usize,
    /// Values compared.
    pub n: usize,
}

/// Running sums for [`Stat`] over several slices.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Acc {
    dd: f64,
    aa: f64,
    bb: f64,
    ab: f64,
    max_abs: f64,
    n_diff: usize,
    n: usize,
}

impl Acc {
    /// Add a pair of equally long slices.
    pub fn add(&mut self, a: &[f32], b: &[f32]) {
        for (&x, &y) in a.iter().zip(b) {
            let (x64, y64) = (x as f64, y as f64);
            let d = x64 - y64;
            self.dd += d * d;
            self.aa += x64 * x64;
            self.bb += y64 * y64;
            self.ab += x64 * y64;
            self.max_abs = self.max_abs.max(d.abs());
            self.n_diff += (x.to_bits() != y.to_bits()) as usize;
            self.n += 1;
        }
    }

    /// The statistics so far.
    pub fn stat(&self) -> Stat {
        let rel_l2 = if self.bb > 0.0 {
            (self.dd / self.bb).sqrt()
        } else if self.dd > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let cosine = if self.aa > 0.0 && self.bb > 0.0 {
            self.ab / (self.aa.sqrt() * self.bb.sqrt())
        } else if self.aa == 0.0 && self.bb == 0.0 {
            1.0
        } else {
            0.0
        };
        Stat { rel_l2, cosine, max_abs: self.max_abs, n_diff: self.n_diff, n: self.n }
    }
}

/// [`Stat`] of one pair of slices.
pub fn stat(a: &[f32], b: &[f32]) -> Stat {
    let mut acc = Acc::default();
    acc.add(a, b);
    acc.stat()
}

/// Softmax of a logit row in f64 (max subtracted).
pub fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = logits.iter().map(|&l| (l as f64 - max).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

/// `KL(p || q)` in nats for two logit rows (`p` from `reference`).
pub fn kld(reference: &[f32], other: &[f32]) -> f64 {
    let (p, q) = (softmax(reference), softmax(other));
    p.iter()
        .zip(&q)
        .filter(|(pi, _)| **pi > 0.0)
        .map(|(pi, qi)| pi * (pi / qi.max(1e-300)).ln())
        .sum()
}

/// Rank (0 = best) of `token` in a logit row: how many logits are larger, plus equal
/// logits at lower ids (greedy's tie rule).
pub(crate) fn rank(logits: &[f32], token: u32) -> usize {
    let v = logits[token as usize];
    logits.iter().enumerate().filter(|(i, &l)| l > v || (l == v && (*i as u32) < token)).count()
}

/// Mean, median, 99th percentile and maximum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Summarize values (all zero for none).
pub fn summary(values: &[f64]) -> Summary {
    if values.is_empty() {
        return Summary::default();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Summary {
        mean: v.iter().sum::<f64>() / v.len() as f64,
        median: at(0.5),
        p99: at(0.99),
        max: v[v.len() - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_kld_rank_summary() {
        let s = stat(&[1.0, 0.0], &[1.0, 0.0]);
        assert_eq!((s.rel_l2, s.cosine, s.n_diff), (0.0, 1.0, 0));
        let s = stat(&[0.0, 1.0], &[1.0, 0.0]);
        assert!((s.rel_l2 - 2f64.sqrt()).abs() < 1e-12 && s.cosine == 0.0 && s.n_diff == 2);
        assert_eq!(kld(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 0.0);
        assert!(kld(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) > 0.5);
        assert_eq!(rank(&[0.5, 2.0, 2.0, 1.0], 2), 1);
        assert_eq!(rank(&[0.5, 2.0, 2.0, 1.0], 1), 0);
        let m = summary(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((m.median, m.max, m.mean), (2.0, 10.0, 4.0));
    }
}
