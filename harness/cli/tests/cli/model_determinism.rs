//! The decoder is deterministic: for every lane, two runs give identical trace bits,
//! and so do 1, 2, 3 and 4 threads (matmuls split output columns only, never a sum;
//! attention splits its (row, head) outputs, each computed whole by one thread).

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded;
use tiercheck_model::sequence::{self, RunSpec};
use tiercheck_model::{Arith, Attention, Batching, Decoder, Mode, Model, Residual, TapSink};

fn digests(
    model: &Model,
    lane: &str,
    threads: usize,
    mode: Mode,
) -> (Vec<u32>, Vec<(String, String)>) {
    digests_with(
        model,
        lane,
        threads,
        mode,
        Attention::LLAMA_DEFAULT,
        vec![17, 2045, 388, 901, 5, 6],
    )
}

fn digests_with(
    model: &Model,
    lane: &str,
    threads: usize,
    mode: Mode,
    attn: Attention,
    ids: Vec<u32>,
) -> (Vec<u32>, Vec<(String, String)>) {
    let chosen = lanes::choose(lanes::find(lane).unwrap(), Impl::Auto).unwrap();
    let arith = Arith::from_chosen(&chosen, threads);
    let dec = Decoder::new(model, arith, Residual::F32, 512, attn).unwrap();
    let spec = RunSpec { ids, steps: 6, mode, batching: Batching::LLAMA_CLI, forced: Vec::new() };
    let out = sequence::run(&dec, &spec, TapSink::new(false, true)).unwrap();
    (out.generated, out.digests.into_iter().collect())
}

/// The guarantee (docs/CORRECTNESS.md, "Hardening"): for every lane, two runs and 1, 2, 3 or 4
/// threads give the same tokens and the same bits at every tap, in both modes.
#[test]
fn every_lane_is_invariant_under_reruns_and_thread_counts() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    for lane in tiercheck_core::LANES.iter().map(|l| l.name) {
        for mode in [Mode::Prompt, Mode::Decode] {
            let a = digests(&model, lane, 1, mode);
            assert_eq!(a.0.len(), 6);
            assert!(a.1.len() > 70, "{} taps hashed", a.1.len());
            let again = digests(&model, lane, 1, mode);
            assert_eq!(a, again, "{lane} {mode:?}: two runs differ");
            for threads in [2, 3, 4] {
                let b = digests(&model, lane, threads, mode);
                assert_eq!(a, b, "{lane} {mode:?}: 1 and {threads} threads differ");
            }
        }
    }
}

/// Every attention path with its (row, head) outputs split over threads: without flash
/// attention (F32 cache), flash attention in one chunk (a short prompt, then decode
/// steps) and the tiled flash attention (a prompt of at least 64 rows), on a lane of each
/// elementwise family.
#[test]
fn attention_split_over_threads_gives_the_same_bits_on_every_path() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let long: Vec<u32> = (0..70).map(|i| (17 + 97 * i) % 2000).collect();
    for lane in ["ref", "x86_64-avx2", "aarch64-neon", "aarch64-sve256"] {
        for attn in [Attention::LLAMA_DEFAULT, Attention::F32_OFF] {
            for ids in [vec![17, 2045, 388, 901, 5, 6], long.clone()] {
                let a = digests_with(&model, lane, 1, Mode::Prompt, attn, ids.clone());
                for threads in [2, 3] {
                    let b = digests_with(&model, lane, threads, Mode::Prompt, attn, ids.clone());
                    assert_eq!(
                        a,
                        b,
                        "{lane} {attn:?} {} ids: 1 and {threads} threads differ",
                        ids.len()
                    );
                }
            }
        }
    }
}

#[test]
fn bf16_residual_changes_the_bits_and_stays_close() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let chosen = lanes::choose(lanes::find("ref").unwrap(), Impl::Auto).unwrap();
    let arith = Arith::from_chosen(&chosen, 1);
    let spec = RunSpec {
        ids: vec![1, 250, 1999, 42],
        steps: 0,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        forced: Vec::new(),
    };
    let logits = |res: Residual| {
        let dec = Decoder::new(&model, arith, res, 512, Attention::LLAMA_DEFAULT).unwrap();
        let out = sequence::run(&dec, &spec, TapSink::new(true, false)).unwrap();
        out.taps.into_iter().find(|t| t.name == "result_output").unwrap().data
    };
    let (f, b) = (logits(Residual::F32), logits(Residual::Bf16));
    let d = tiercheck_model::tapdiff::diff(0, "result_output", &b, &f);
    assert!(d.n_diff > 0, "bf16 residual made no difference");
    // bf16 keeps 8 significant bits: the stream moves by ~2^-9 relative per rounding;
    // through 8 layers the logits stay within a few percent.
    assert!(d.rel_l2 < 0.1, "bf16 residual moved logits by {:.3e}", d.rel_l2);
}

/// The embedded model's initialization keeps activations in a realistic range over all
/// layers: the residual stream's RMS neither collapses nor explodes, and the logits
/// have a spread of a few units (a greedy choice that is neither random nor certain).
#[test]
fn embedded_model_activations_stay_in_a_realistic_range() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let chosen = lanes::choose(lanes::find("ref").unwrap(), Impl::Auto).unwrap();
    let arith = Arith::from_chosen(&chosen, 1);
    let dec = Decoder::new(&model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT).unwrap();
    let spec = RunSpec {
        ids: vec![1, 250, 1999, 42, 3000, 777, 64],
        steps: 0,
        mode: Mode::Prompt,
        batching: Batching::EVERY_ROW,
        forced: Vec::new(),
    };
    let out = sequence::run(&dec, &spec, TapSink::new(true, false)).unwrap();
    let rms = |name: &str| {
        let t = out.taps.iter().find(|t| t.name == name).unwrap();
        (t.data.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / t.data.len() as f64).sqrt()
    };
    let e = rms("inp_embd");
    for l in 0..model.hp.n_layer {
        let r = rms(&format!("l_out-{l}"));
        assert!(r > 0.5 * e && r < 8.0 * e, "layer {l}: l_out rms {r:.3} vs embedding {e:.3}");
        let f = rms(&format!("ffn_out-{l}"));
        assert!(f > 1e-3 * r && f < r, "layer {l}: ffn_out rms {f:.3} vs stream {r:.3}");
    }
    let logits = rms("result_output");
    assert!((1.0..10.0).contains(&logits), "logit rms {logits:.3}");
}

/// A lane's trace of `ids` in prompt mode with `batching` (every tap kept).
fn prompt_trace(model: &Model, lane: &str, ids: &[u32], batching: Batching) -> sequence::RunOutput {
    let chosen = lanes::choose(lanes::find(lane).unwrap(), Impl::Auto).unwrap();
    let arith = Arith::from_chosen(&chosen, 2);
    let dec = Decoder::new(model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT).unwrap();
    let spec =
        RunSpec { ids: ids.to_vec(), steps: 0, mode: Mode::Prompt, batching, forced: Vec::new() };
    sequence::run(&dec, &spec, TapSink::new(true, false)).unwrap()
}

/// A prompt evaluated as ubatches of one row is the same computation as decode mode (one
/// token per step), on every lane: each graph's rows take the kernels of their own row
/// count and attend the K/V cache of the graphs before them. The prompt step's taps are
/// decode mode's steps' rows, in order, bit for bit; its record lists the seven graphs.
#[test]
fn ubatches_of_one_row_are_decode_mode() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let ids = [17, 2045, 388, 901, 5, 6, 3000];
    let one = Batching { n_batch: 4, n_ubatch: 1, logits: tiercheck_model::Logits::All };
    for lane in tiercheck_core::LANES.iter().map(|l| l.name) {
        let p = prompt_trace(&model, lane, &ids, one);
        assert_eq!(p.steps.len(), 1);
        assert_eq!(p.steps[0].ubatches, vec![1; 7], "{lane}");
        let chosen = lanes::choose(lanes::find(lane).unwrap(), Impl::Auto).unwrap();
        let arith = Arith::from_chosen(&chosen, 1);
        let dec =
            Decoder::new(&model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT).unwrap();
        let spec = RunSpec {
            ids: ids.to_vec(),
            steps: 0,
            mode: Mode::Decode,
            batching: Batching::LLAMA_CLI,
            forced: Vec::new(),
        };
        let d = sequence::run(&dec, &spec, TapSink::new(true, false)).unwrap();
        assert_eq!(d.steps.len(), 7);
        for t in &p.taps {
            let rows: Vec<u32> = d
                .taps
                .iter()
                .filter(|x| x.name == t.name)
                .flat_map(|x| x.data.iter().map(|v| v.to_bits()))
                .collect();
            let mine: Vec<u32> = t.data.iter().map(|v| v.to_bits()).collect();
            assert_eq!(mine, rows, "{lane}: tap {} differs from decode mode", t.name);
        }
        assert_eq!(p.steps[0].emitted, d.steps[6].emitted, "{lane}");
    }
}

/// `--logits last` prunes the last layer after its attention output projection: the
/// taps before that point are those of `--logits all`; the pruned taps (the last layer's
/// `ffn_inp` on, the head) have one row. On `ref`, whose matmul computes each row alone,
/// that row equals the last row of `--logits all`; on the haswell lane, whose plain Q4_K
/// and Q6_K matmuls take the tiled path from 8 rows, the last layer's `ffn_out` (a
/// one-row gemv when pruned) differs from it, so the pruning reaches the kernels.
#[test]
fn logits_last_prunes_the_last_layer_to_the_output_row() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let ids: Vec<u32> = (0..20).map(|i| (i * 149 + 7) % 3072).collect();
    let n_layer = model.hp.n_layer;
    let last = Batching::LLAMA_CLI;
    let all = Batching { logits: tiercheck_model::Logits::All, ..last };
    for (lane, row_independent) in [("ref", true), ("x86_64-avx2", false)] {
        let (l, a) =
            (prompt_trace(&model, lane, &ids, last), prompt_trace(&model, lane, &ids, all));
        assert_eq!(l.steps[0].outputs, Some(vec![19]));
        assert_eq!(a.steps[0].outputs, None);
        let mut pruned = 0;
        let mut differs = Vec::new();
        for t in &l.taps {
            let full = a.taps.iter().find(|x| x.name == t.name).unwrap();
            let width = full.data.len() / full.rows;
            if sequence::is_pruned(&t.name, n_layer) {
                pruned += 1;
                assert_eq!(t.rows, 1, "{lane}: {}", t.name);
                let tail = &full.data[(full.rows - 1) * width..];
                if t.data.iter().zip(tail).any(|(x, y)| x.to_bits() != y.to_bits()) {
                    differs.push(t.name.clone());
                }
            } else {
                assert_eq!(t.rows, 20, "{lane}: {}", t.name);
                assert!(
                    t.data.iter().zip(&full.data).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{lane}: unpruned tap {} differs",
                    t.name
                );
            }
        }
        assert_eq!(pruned, 7, "{lane}: pruned taps");
        if row_independent {
            assert!(differs.is_empty(), "{lane}: pruned rows differ: {differs:?}");
        } else {
            assert!(
                differs.contains(&format!("ffn_out-{}", n_layer - 1)),
                "{lane}: the pruned ffn_out equals the tiled path's row: {differs:?}"
            );
        }
    }
}
