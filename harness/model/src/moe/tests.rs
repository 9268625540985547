//! The routing's own invariants; its equality with libstdc++'s `std::sort` and with
//! llama.cpp's routing are trials against those builds.

use super::*;

/// With distinct values the permutation is the descending order, whatever path (insertion
/// sort below 17, introsort above, heap sort past the depth limit) ran.
#[test]
fn distinct_values_sort_descending_on_every_path() {
    for n in [0usize, 1, 2, 5, 16, 17, 31, 64, 128, 300] {
        let vals: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1009) as f32 + i as f32 * 1e-3).collect();
        let order = std_sort_by(n, |a, b| vals[a] > vals[b]);
        let mut want: Vec<usize> = (0..n).collect();
        want.sort_by(|&a, &b| vals[b].total_cmp(&vals[a]));
        assert_eq!(order, want, "n = {n}");
    }
    // The heap sort alone (reached past the depth limit) sorts too.
    let vals: Vec<f32> = (0..40).map(|i| ((i * 37) % 41) as f32).collect();
    let mut v: Vec<usize> = (0..40).collect();
    heap_sort(&mut v, 0, 40, &|a: usize, b: usize| vals[a] > vals[b]);
    assert!(v.windows(2).all(|w| vals[w[0]] >= vals[w[1]]), "{v:?}");
}

/// Equal values are not kept in index order by every path: the sort is not stable, which
/// is why the tie order is reproduced rather than assumed.
#[test]
fn ties_are_not_kept_in_index_order() {
    let vals: Vec<f32> = (0..40).map(|i| (i % 3) as f32).collect();
    let order = std_sort_by(40, |a, b| vals[a] > vals[b]);
    assert!(order.windows(2).all(|w| vals[w[0]] >= vals[w[1]]));
    let stable: Vec<usize> = {
        let mut v: Vec<usize> = (0..40).collect();
        v.sort_by(|&a, &b| vals[b].total_cmp(&vals[a]));
        v
    };
    assert_ne!(order, stable);
}

/// The weights are the selected probabilities, their sum in f64 rounded once, each
/// divided by the (clamped) sum.
#[test]
fn route_normalises_by_the_clamped_sum() {
    let probs = [0.1f32, 0.4, 0.2, 0.3];
    let r = route(&probs, 2);
    assert_eq!(r.experts, vec![1, 3]);
    assert_eq!(r.weights, vec![0.4, 0.3]);
    assert_eq!(r.sum, (0.4f32 as f64 + 0.3f32 as f64) as f32);
    assert_eq!(r.norm, vec![0.4 / r.sum, 0.3 / r.sum]);
    let tiny = route(&[0.0f32, 1e-9, 0.0], 1);
    assert_eq!(tiny.norm, vec![1e-9 / MIN_WEIGHT_SUM]);
}
