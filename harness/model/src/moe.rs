//! The routing of a `qwen3moe` feed-forward as llama.cpp's graph (`build_moe_ffn` with
//! softmax gating and normalised weights) and ggml's CPU backend compute it, per token:
//!
//! 1. `ffn_moe_logits`: the router `ffn_gate_inp` (F32, `n_expert` rows) times the
//!    `ffn_norm` row. ggml's `mul_mat` of two F32 matrices: llamafile's tinyBLAS f32 tile
//!    where the tier has one, the graph has at least [`ElemFlavour::sgemm_min_rows`]
//!    rows, the row length is whole vectors and the expert count a multiple of 4
//!    ([`ElemOps::sgemm_dot`]: one vector accumulator, fused multiply-adds, one horizontal
//!    sum); otherwise `ggml_vec_dot_f32` ([`ElemOps::dot_f32`]).
//! 2. `ffn_moe_probs`: `ggml_soft_max` of the logits ([`ElemOps::soft_max_row`]: the
//!    maximum, `exp(x - max)` with the f64 sum, then times `(float)(1/sum)`).
//! 3. `ffn_moe_topk`: `ggml_argsort_top_k`: `ggml_compute_forward_argsort_f32` sorts the
//!    indices `0..n_expert` by descending probability with `std::sort` (libstdc++'s
//!    introsort, not stable) and the first `n_expert_used` are the experts; equal
//!    probabilities are ordered as that sort leaves them ([`std_sort_by`]).
//! 4. `ffn_moe_weights`: those experts' probabilities; `ffn_moe_weights_sum`: their f64
//!    sum rounded to f32 (`ggml_sum_rows`), clamped below at 2^-14; `ffn_moe_weights_norm`:
//!    each weight divided by it (one f32 division).
//! 5. The experts (`MUL_MAT_ID`, [`crate::decoder`]): per expert, the tokens routed to it
//!    in token order; `ffn_moe_up`, `ffn_moe_gate`, `ffn_moe_swiglu`, `ffn_moe_down` per
//!    (token, slot); `ffn_moe_weighted`: each down row times its normalised weight (one
//!    f32 product); `ffn_moe_out`: the slots' weighted rows added in slot order, one f32
//!    addition at a time from slot 0.

use tiercheck_core::elem::{ElemFlavour, ElemOps};

/// The routing of one token.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// The selected experts, in the sort's order.
    pub experts: Vec<usize>,
    /// Their probabilities (`ffn_moe_weights`).
    pub weights: Vec<f32>,
    /// The weights' sum (`ffn_moe_weights_sum`, before the clamp).
    pub sum: f32,
    /// The normalised weights (`ffn_moe_weights_norm`).
    pub norm: Vec<f32>,
}

/// The smallest weight sum llama.cpp divides by (2^-14, the smallest normal F16, which
/// llama.cpp writes as 6.103515625e-5).
pub const MIN_WEIGHT_SUM: f32 = 1.0 / 16384.0;

/// Router logits of `m` rows `x` (each `k` wide) against the F32 router `w` (`n_expert`
/// rows of `k`): `ggml_mul_mat` as the tier computes it (see the module doc).
pub fn router_logits(
    elem: &dyn ElemOps,
    w: &[f32],
    n_expert: usize,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let k = w.len() / n_expert.max(1);
    let fl: ElemFlavour = elem.flavour();
    let tiled = fl.sgemm_min_rows().is_some_and(|min| m >= min)
        && k.is_multiple_of(fl.width())
        && n_expert.is_multiple_of(4);
    let mut out = vec![0.0f32; m * n_expert];
    for (row, xi) in out.chunks_exact_mut(n_expert).zip(x.chunks_exact(k)) {
        for (o, wj) in row.iter_mut().zip(w.chunks_exact(k)) {
            *o = if tiled { elem.sgemm_dot(wj, xi) } else { elem.dot_f32(wj, xi) };
        }
    }
    out
}

/// The routing of one token from its softmax probabilities `probs`, `used` experts.
pub fn route(probs: &[f32], used: usize) -> Route {
    let order = std_sort_by(probs.len(), |a, b| probs[a] > probs[b]);
    weighted(probs, order[..used].to_vec())
}

/// The route through `experts`: their probabilities, the f64 sum rounded to f32, each
/// divided by the clamped sum.
fn weighted(probs: &[f32], experts: Vec<usize>) -> Route {
    let weights: Vec<f32> = experts.iter().map(|&e| probs[e]).collect();
    let sum = weights.iter().map(|&w| w as f64).sum::<f64>() as f32;
    let clamped = sum.max(MIN_WEIGHT_SUM);
    let norm = weights.iter().map(|&w| w / clamped).collect();
    Route { experts, weights, sum, norm }
}

/// [`route`] with the last selected expert swapped for the best unselected one (a planted
/// routing fault, [`tiercheck_core::lane::PlantedFault::SwapExpert`]); the weights are the
/// experts' own probabilities, normalised as usual. Unchanged when every expert is used.
pub fn route_swapped(probs: &[f32], used: usize) -> Route {
    if used >= probs.len() {
        return route(probs, used);
    }
    let order = std_sort_by(probs.len(), |a, b| probs[a] > probs[b]);
    let mut experts: Vec<usize> = order[..used].to_vec();
    experts[used - 1] = order[used];
    weighted(probs, experts)
}

/// The permutation of `0..n` libstdc++'s `std::sort(first, last, comp)` leaves, `less`
/// being `comp` on two indices: introsort (`__introsort_loop` with a depth limit of
/// `2 * floor(log2 n)`, median-of-three pivot moved to the front, unguarded partition,
/// heap sort past the depth limit) down to runs of 16, then `__final_insertion_sort`.
/// With a comparator that is not a strict weak order's tie-breaker, equal elements end
/// where this sequence of moves puts them; that is the order ggml's argsort gives.
pub fn std_sort_by(n: usize, less: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    if n > 1 {
        let depth = 2 * (usize::BITS - 1 - n.leading_zeros()) as usize;
        introsort_loop(&mut v, 0, n, depth, &less);
        final_insertion_sort(&mut v, 0, n, &less);
    }
    v
}

const THRESHOLD: usize = 16;

fn introsort_loop(
    v: &mut [usize],
    first: usize,
    mut last: usize,
    mut depth: usize,
    less: &impl Fn(usize, usize) -> bool,
) {
    while last - first > THRESHOLD {
        if depth == 0 {
            heap_sort(v, first, last, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, first, last, less);
        introsort_loop(v, cut, last, depth, less);
        last = cut;
    }
}

fn partition_pivot(
    v: &mut [usize],
    first: usize,
    last: usize,
    less: &impl Fn(usize, usize) -> bool,
) -> usize {
    let mid = first + (last - first) / 2;
    move_median_to_first(v, first, first + 1, mid, last - 1, less);
    unguarded_partition(v, first + 1, last, first, less)
}

fn move_median_to_first(
    v: &mut [usize],
    result: usize,
    a: usize,
    b: usize,
    c: usize,
    less: &impl Fn(usize, usize) -> bool,
) {
    let l = |i: usize, j: usize| less(v[i], v[j]);
    let pick = if l(a, b) {
        if l(b, c) {
            b
        } else if l(a, c) {
            c
        } else {
            a
        }
    } else if l(a, c) {
        a
    } else if l(b, c) {
        c
    } else {
        b
    };
    v.swap(result, pick);
}

fn unguarded_partition(
    v: &mut [usize],
    mut first: usize,
    mut last: usize,
    pivot: usize,
    less: &impl Fn(usize, usize) -> bool,
) -> usize {
    loop {
        while less(v[first], v[pivot]) {
            first += 1;
        }
        last -= 1;
        while less(v[pivot], v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort(
    v: &mut [usize],
    first: usize,
    last: usize,
    less: &impl Fn(usize, usize) -> bool,
) {
    if last - first > THRESHOLD {
        insertion_sort(v, first, first + THRESHOLD, less);
        for i in first + THRESHOLD..last {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, first, last, less);
    }
}

fn insertion_sort(
    v: &mut [usize],
    first: usize,
    last: usize,
    less: &impl Fn(usize, usize) -> bool,
) {
    if first == last {
        return;
    }
    for i in first + 1..last {
        if less(v[i], v[first]) {
            let val = v[i];
            v.copy_within(first..i, first + 1);
            v[first] = val;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert(v: &mut [usize], mut last: usize, less: &impl Fn(usize, usize) -> bool) {
    let val = v[last];
    let mut next = last - 1;
    while less(val, v[next]) {
        v[last] = v[next];
        last = next;
        next -= 1;
    }
    v[last] = val;
}

/// `std::__partial_sort(first, last, last)`: `__make_heap`, then `__sort_heap`.
fn heap_sort(v: &mut [usize], first: usize, last: usize, less: &impl Fn(usize, usize) -> bool) {
    let s = &mut v[first..last];
    let len = s.len();
    if len >= 2 {
        let mut parent = (len - 2) / 2;
        loop {
            let value = s[parent];
            adjust_heap(s, parent, len, value, less);
            if parent == 0 {
                break;
            }
            parent -= 1;
        }
    }
    let mut end = len;
    while end > 1 {
        end -= 1;
        // __pop_heap(first, end, end): the top goes to `end`, the old value there sifts in.
        let value = s[end];
        s[end] = s[0];
        adjust_heap(s, 0, end, value, less);
    }
}

fn adjust_heap(
    s: &mut [usize],
    mut hole: usize,
    len: usize,
    value: usize,
    less: &impl Fn(usize, usize) -> bool,
) {
    let top = hole;
    let mut second = hole;
    while second < len.saturating_sub(1) / 2 {
        second = 2 * (second + 1);
        if less(s[second], s[second - 1]) {
            second -= 1;
        }
        s[hole] = s[second];
        hole = second;
    }
    if len & 1 == 0 && len >= 2 && second == (len - 2) / 2 {
        second = 2 * (second + 1);
        s[hole] = s[second - 1];
        hole = second - 1;
    }
    // __push_heap(first, hole, top, value)
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(s[parent], value) {
            break;
        }
        s[hole] = s[parent];
        hole = parent;
    }
    s[hole] = value;
}

#[cfg(test)]
mod tests;
