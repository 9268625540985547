//! The attention step against what does not come from it: a float64 evaluation of
//! grouped-query causal attention, ggml's rules for which path a step takes (tiled flash
//! attention, split-KV, tinyBLAS), and invariances ggml's arithmetic has (the thread
//! split, the F16 rounding of the query).

use super::*;
use tiercheck_core::elem::{ElemFlavour, PortableElem};

/// Deterministic values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// Grouped-query geometry: four query heads over two K/V heads of 32.
const GEOM: (usize, usize, usize) = (4, 2, 32);

struct Operands {
    k: Vec<f32>,
    v: Vec<f32>,
    q: Vec<f32>,
}

fn operands(cells: usize, m: usize, seed: u64) -> Operands {
    let (nh, nkv, hd) = GEOM;
    Operands {
        k: data(cells * nkv * hd, seed),
        v: data(cells * nkv * hd, seed + 1),
        q: data(m * nh * hd, seed + 2),
    }
}

fn case<'a>(o: &'a Operands, attn: Attention, cells: usize, m: usize) -> AttnCase<'a> {
    let (n_head, n_head_kv, head_dim) = GEOM;
    AttnCase { n_head, n_head_kv, head_dim, n_ctx: 512, attn, cells, k: &o.k, v: &o.v, q: &o.q, m }
}

fn hparams(n_head: usize, n_head_kv: usize, head_dim: usize) -> HParams {
    HParams {
        arch: "qwen3".into(),
        n_embd: n_head * head_dim,
        n_layer: 1,
        n_head,
        n_head_kv,
        head_dim,
        n_ff: 1,
        n_vocab: 1,
        n_ctx_train: 512,
        rope_base: 1e6,
        rms_eps: 1e-6,
        moe: None,
    }
}

/// Causal grouped-query attention in float64 on the case's own (unrounded) values:
/// query row `i` sits at position `cells - m + i` and sees cells `0..=` that position;
/// head `h` reads K/V head `h / (n_head / n_head_kv)`. Also returns, per output,
/// `sum_j p_j |v_j|`, the scale of its rounding error.
fn reference(c: &AttnCase<'_>) -> (Vec<f64>, Vec<f64>) {
    let (nh, hd) = (c.n_head, c.head_dim);
    let kv_dim = c.n_head_kv * hd;
    let group = nh / c.n_head_kv;
    let scale = 1.0 / (hd as f64).sqrt();
    let (mut out, mut mag) = (Vec::new(), Vec::new());
    for i in 0..c.m {
        let p = c.cells - c.m + i;
        for h in 0..nh {
            let g = h / group;
            let q = &c.q[(i * nh + h) * hd..(i * nh + h + 1) * hd];
            let s: Vec<f64> = (0..=p)
                .map(|j| {
                    let k = &c.k[j * kv_dim + g * hd..j * kv_dim + (g + 1) * hd];
                    k.iter().zip(q).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * scale
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
            let total: f64 = e.iter().sum();
            for d in 0..hd {
                let (mut o, mut a) = (0.0, 0.0);
                for (j, w) in e.iter().enumerate() {
                    let v = c.v[j * kv_dim + g * hd + d] as f64;
                    o += w / total * v;
                    a += w / total * v.abs();
                }
                out.push(o);
                mag.push(a);
            }
        }
    }
    (out, mag)
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn grouped_causal_attention_matches_float64() {
    // Without flash attention on an F32 cache nothing is rounded to F16: every lane's
    // loops agree with float64 to well within 1e-4 of each output's scale. Three query
    // rows (the causal mask differs per row) over 40 cells, two K/V heads.
    let (cells, m) = (40, 3);
    let o = operands(cells, m, 7);
    for fl in [ElemFlavour::X64, ElemFlavour::Avx2, ElemFlavour::Neon, ElemFlavour::Sve256] {
        let c = case(&o, Attention::F32_OFF, cells, m);
        let got = attend_case(&PortableElem(fl), &c).unwrap();
        let (want, mag) = reference(&c);
        assert_eq!(got.len(), want.len());
        for (n, ((g, w), a)) in got.iter().zip(&want).zip(&mag).enumerate() {
            let err = (*g as f64 - w).abs();
            assert!(err <= 1e-4 * a + 1e-7, "{fl:?} output {n}: {g} against {w} (scale {a})");
        }
    }
}

#[test]
fn flash_attention_matches_float64_within_f16_rounding() {
    // Flash attention reads K, V and the query rounded to F16 and accumulates in F16:
    // within 1e-2 of each output's scale, on every path (one chunk, split-KV, tiled).
    for (cells, m, tt) in [(40, 3, 1), (300, 1, 2), (300, 1, 4), (130, 65, 1)] {
        let o = operands(cells, m, 11);
        let attn = Attention { tier_threads: tt, ..Attention::LLAMA_DEFAULT };
        let c = case(&o, attn, cells, m);
        for fl in [ElemFlavour::X64, ElemFlavour::Avx2, ElemFlavour::Neon] {
            let got = attend_case(&PortableElem(fl), &c).unwrap();
            let (want, mag) = reference(&c);
            for (n, ((g, w), a)) in got.iter().zip(&want).zip(&mag).enumerate() {
                let err = (*g as f64 - w).abs();
                assert!(
                    err <= 1e-2 * a + 1e-6,
                    "{fl:?} {cells} cells, {m} rows, {tt} threads, output {n}: {g} against {w}"
                );
            }
        }
    }
}

#[test]
fn outputs_do_not_depend_on_the_thread_split() {
    // 8 rows x 4 heads x 256 cells x 32: enough work for the heads to be split over
    // threads; each (row, head) output is computed alone, whichever thread takes it.
    let (cells, m) = (200, 8);
    let o = operands(cells, m, 3);
    for attn in [Attention::F32_OFF, Attention::LLAMA_DEFAULT] {
        let c = case(&o, attn, cells, m);
        let e = PortableElem(ElemFlavour::Avx2);
        let one = attend_case_on(&e, &c, 1).unwrap();
        for t in [2, 3, 5] {
            assert_eq!(bits(&attend_case_on(&e, &c, t).unwrap()), bits(&one), "{t} threads");
        }
    }
}

#[test]
fn split_kv_is_for_one_query_row_only() {
    // ggml splits the cells over the tier's threads only for a single query row: two
    // rows over 512 padded cells give the same bits at one, two and four tier threads,
    // and one row does not (the merge rounds differently).
    let cells = 300;
    let e = PortableElem(ElemFlavour::Avx2);
    let run = |m: usize, tt: usize| {
        let o = operands(cells, m, 5);
        let attn = Attention { tier_threads: tt, ..Attention::LLAMA_DEFAULT };
        bits(&attend_case(&e, &case(&o, attn, cells, m)).unwrap())
    };
    assert_eq!(run(2, 2), run(2, 1));
    assert_eq!(run(2, 4), run(2, 1));
    assert_ne!(run(1, 2), run(1, 1));
}

#[test]
fn the_f16_product_reads_the_query_rounded_to_f16() {
    // Without flash attention on an F16 cache, ggml converts the query to F16 for K·Q
    // (vec_dot_f16, or tinyBLAS's F16 tile from two rows on AVX2): a query moved within
    // the F16 rounding interval of each value (mirrored across the F16 value it rounds
    // to, up to half an F16 step: far more than the probabilities' own F16 rounding
    // absorbs) gives the same bits.
    let (cells, m) = (40, 2);
    let o = operands(cells, m, 9);
    let nudged: Vec<f32> =
        o.q.iter()
            .map(|&x| {
                let r = round16(x);
                let y = r - (x - r) * 0.9;
                assert_eq!(round16(y), r, "{x} mirrored to {y}");
                y
            })
            .collect();
    let changed = nudged.iter().zip(&o.q).filter(|(a, b)| a != b).count();
    assert!(changed > o.q.len() / 2, "{changed} of {} query values moved", o.q.len());
    let p = Operands { k: o.k.clone(), v: o.v.clone(), q: nudged };
    let attn = Attention { kv: KvType::F16, fa: FlashAttn::Off, ..Attention::F32_OFF };
    for fl in [ElemFlavour::X64, ElemFlavour::Avx2, ElemFlavour::Neon] {
        let e = PortableElem(fl);
        let a = attend_case(&e, &case(&o, attn, cells, m)).unwrap();
        let b = attend_case(&e, &case(&p, attn, cells, m)).unwrap();
        assert_eq!(bits(&a), bits(&b), "{fl:?}");
    }
}

/// The path a step of `m` rows takes over `cells` cells, as `Step::path` names it.
fn path_of(fl: ElemFlavour, head_dim: usize, attn: Attention, cells: usize, m: usize) -> String {
    let hp = hparams(4, 2, head_dim);
    let e = PortableElem(fl);
    let mut cache = KvCache::new(&hp, 512, attn).unwrap();
    let kv = vec![0.0f32; cells * 2 * head_dim];
    cache.load(cells, std::slice::from_ref(&kv), std::slice::from_ref(&kv));
    Step { hp: &hp, elem: &e, n_ctx: 512, threads: 1 }.path(&cache, m)
}

#[test]
fn paths_follow_ggml_rules() {
    let fa = Attention::LLAMA_DEFAULT;
    let fa2 = Attention { tier_threads: 2, ..fa };
    // Tiled flash attention from 64 rows; on aarch64 only with a head size that is a
    // whole number of vectors (36 is not, for SVE-256's 8 lanes nor NEON's 4).
    assert_eq!(path_of(ElemFlavour::Avx2, 36, fa, 100, 64), "flash-attn tiled");
    assert_eq!(path_of(ElemFlavour::Avx2, 36, fa, 100, 63), "flash-attn one-chunk");
    assert_eq!(path_of(ElemFlavour::Sve256, 32, fa, 100, 64), "flash-attn tiled");
    assert_eq!(path_of(ElemFlavour::Sve256, 36, fa, 100, 64), "flash-attn one-chunk");
    assert_eq!(path_of(ElemFlavour::Neon, 34, fa, 100, 64), "flash-attn one-chunk");
    // Split-KV: one row, 512 padded cells or more, more than one tier thread.
    assert_eq!(path_of(ElemFlavour::Avx2, 32, fa2, 300, 1), "flash-attn split-kv nth=2");
    assert_eq!(path_of(ElemFlavour::Avx2, 32, fa2, 300, 2), "flash-attn one-chunk");
    assert_eq!(path_of(ElemFlavour::Avx2, 32, fa2, 200, 1), "flash-attn one-chunk");
    assert_eq!(path_of(ElemFlavour::Avx2, 32, fa, 300, 1), "flash-attn one-chunk");
    // Without flash attention on an F16 cache: tinyBLAS from two rows where the inner
    // length is whole vectors and the output rows a multiple of 4; AVX2 multiplies F16
    // by F16 (the probabilities rounded), NEON F16 by the F32 probabilities, and K·Q on
    // NEON stays vec_dot_f16.
    let f16 = Attention { kv: KvType::F16, fa: FlashAttn::Off, ..Attention::F32_OFF };
    let p = |fl, m| path_of(fl, 32, f16, 40, m);
    assert_eq!(p(ElemFlavour::Avx2, 1), "kq vec_dot_f16, kqv vec_dot_f16 (f16 cache)");
    assert_eq!(p(ElemFlavour::Avx2, 2), "kq tinyblas-f16xf16, kqv tinyblas-f16xf16 (f16 cache)");
    assert_eq!(p(ElemFlavour::Neon, 1), "kq vec_dot_f16, kqv vec_dot_f16 (f16 cache)");
    assert_eq!(p(ElemFlavour::Neon, 2), "kq vec_dot_f16, kqv tinyblas-f16xf32 (f16 cache)");
    assert_eq!(p(ElemFlavour::X64, 2), "kq vec_dot_f16, kqv vec_dot_f16 (f16 cache)");
    // A head size of 36 is not whole AVX2 vectors: K·Q stays vec_dot_f16.
    assert_eq!(
        path_of(ElemFlavour::Avx2, 36, f16, 40, 2),
        "kq vec_dot_f16, kqv tinyblas-f16xf16 (f16 cache)"
    );
}

#[test]
fn attend_case_refuses_what_it_cannot_mean() {
    // Each refused case breaks one condition and keeps every other one (the lengths
    // agree with the shapes claimed), so each condition is checked on its own.
    let o = operands(40, 2, 1);
    let e = PortableElem(ElemFlavour::X64);
    let good = case(&o, Attention::F32_OFF, 40, 2);
    assert!(attend_case(&e, &good).is_ok());
    // As many rows as cells, and as many cells as the context: accepted.
    let full = operands(16, 16, 2);
    assert!(attend_case(&e, &case(&full, Attention::F32_OFF, 16, 16)).is_ok());
    let at_ctx = operands(512, 1, 3);
    assert!(attend_case(&e, &case(&at_ctx, Attention::F32_OFF, 512, 1)).is_ok());
    let past_ctx = operands(513, 1, 4);
    let many_rows = operands(40, 41, 5);
    let none: &[f32] = &[];
    let bad: Vec<(&str, AttnCase<'_>)> = vec![
        ("no head size", AttnCase { head_dim: 0, k: none, v: none, q: none, ..good }),
        ("no K/V heads", AttnCase { n_head_kv: 0, k: none, v: none, ..good }),
        (
            "heads not a multiple of K/V heads",
            AttnCase { n_head: 3, q: &o.q[..2 * 3 * 32], ..good },
        ),
        ("no rows", AttnCase { m: 0, q: none, ..good }),
        ("more rows than cells", case(&many_rows, Attention::F32_OFF, 40, 41)),
        ("more cells than the context", case(&past_ctx, Attention::F32_OFF, 513, 1)),
        ("a context not a multiple of 256", AttnCase { n_ctx: 300, ..good }),
        ("K short", AttnCase { k: &o.k[..o.k.len() - 1], ..good }),
        ("V short", AttnCase { v: &o.v[..o.v.len() - 1], ..good }),
        ("Q short", AttnCase { q: &o.q[..o.q.len() - 1], ..good }),
    ];
    for (what, c) in bad {
        match attend_case(&e, &c) {
            Err(ModelError::Request(msg)) => assert!(msg.starts_with("attention case"), "{msg}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}
