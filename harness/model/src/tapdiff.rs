//! Comparing two traces tap by tap.

use std::collections::BTreeMap;

use super::sequence::Trace;

/// How one tap of one step differs between two traces.
#[derive(Clone, Debug, PartialEq)]
pub struct TapDiff {
    /// Step.
    pub step: usize,
    /// Tap name.
    pub name: String,
    /// Values compared.
    pub n: usize,
    /// Values whose bits differ.
    pub n_diff: usize,
    /// Largest absolute difference.
    pub max_abs: f64,
    /// `||a - b|| / ||b||` (L2; 0 when both are zero).
    pub rel_l2: f64,
}

impl TapDiff {
    /// Whether every value is bitwise equal.
    pub fn bitwise(&self) -> bool {
        self.n_diff == 0
    }
}

/// Compare two f32 slices.
pub fn diff(step: usize, name: &str, a: &[f32], b: &[f32]) -> TapDiff {
    let mut n_diff = 0;
    let (mut max_abs, mut num, mut den) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        if x.to_bits() != y.to_bits() {
            n_diff += 1;
        }
        let d = x as f64 - y as f64;
        max_abs = max_abs.max(d.abs());
        num += d * d;
        den += (y as f64) * (y as f64);
    }
    let rel_l2 = if den > 0.0 {
        (num / den).sqrt()
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    TapDiff { step, name: name.to_string(), n: a.len().min(b.len()), n_diff, max_abs, rel_l2 }
}

/// Compare every tap present in both traces (same step, same name, same shape).
/// Returns the diffs and the `(step, name)` keys present in only one of them or with
/// different shapes.
pub fn compare(a: &Trace, b: &Trace) -> (Vec<TapDiff>, Vec<String>) {
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for (key, ta) in &a.taps {
        match b.taps.get(key) {
            Some(tb) if tb.shape == ta.shape => out.push(diff(key.0, &key.1, &ta.data, &tb.data)),
            Some(tb) => unmatched
                .push(format!("{:03}/{}: shapes {:?} vs {:?}", key.0, key.1, ta.shape, tb.shape)),
            None => unmatched.push(format!("{:03}/{}: only in the first trace", key.0, key.1)),
        }
    }
    for key in b.taps.keys() {
        if !a.taps.contains_key(key) {
            unmatched.push(format!("{:03}/{}: only in the second trace", key.0, key.1));
        }
    }
    (out, unmatched)
}

/// Tap name without its layer suffix (`attn_norm-3` -> `attn_norm`).
pub fn tap_kind(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((kind, l)) if l.parse::<usize>().is_ok() => kind,
        _ => name,
    }
}

/// Per tap kind (layer suffix dropped): the worst `rel_l2`, the count of diffs and how
/// many were bitwise equal.
pub fn summarize(diffs: &[TapDiff]) -> BTreeMap<String, (f64, usize, usize)> {
    let mut m: BTreeMap<String, (f64, usize, usize)> = BTreeMap::new();
    for d in diffs {
        let e = m.entry(tap_kind(&d.name).to_string()).or_insert((0.0, 0, 0));
        e.0 = e.0.max(d.rel_l2);
        e.1 += 1;
        e.2 += d.bitwise() as usize;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_counts_bits_and_norms() {
        let d = diff(0, "x", &[1.0, 2.0, -0.0], &[1.0, 2.5, 0.0]);
        assert_eq!(d.n_diff, 2);
        assert_eq!(d.max_abs, 0.5);
        assert!((d.rel_l2 - 0.5 / (1.0f64 + 6.25).sqrt()).abs() < 1e-12);
        assert!(diff(0, "x", &[1.0], &[1.0]).bitwise());
        assert_eq!(tap_kind("l_out-12"), "l_out");
        assert_eq!(tap_kind("result_output"), "result_output");
    }
}
