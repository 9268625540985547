//! The decoder is deterministic: for every lane, two runs give identical trace bits,
//! and so do 1, 2, 3 and 4 threads (matmuls split output columns only, never a sum;
//! attention splits its (row, head) outputs, each computed whole by one thread).

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded;
use tiercheck_model::run::{self, RunSpec};
use tiercheck_model::{Arith, Attention, Decoder, Mode, Model, Residual, TapSink};

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
    let arith = Arith::Lane { kernels: chosen.kernels, elem: lanes::elem_ops(&chosen), threads };
    let dec = Decoder::new(model, arith, Residual::F32, 512, attn).unwrap();
    let spec = RunSpec { ids, steps: 6, mode, forced: Vec::new() };
    let out = run::run(&dec, &spec, TapSink::new(false, true)).unwrap();
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
    let arith = Arith::Lane { kernels: chosen.kernels, elem: lanes::elem_ops(&chosen), threads: 1 };
    let spec =
        RunSpec { ids: vec![1, 250, 1999, 42], steps: 0, mode: Mode::Prompt, forced: Vec::new() };
    let logits = |res: Residual| {
        let dec = Decoder::new(&model, arith, res, 512, Attention::LLAMA_DEFAULT).unwrap();
        let out = run::run(&dec, &spec, TapSink::new(true, false)).unwrap();
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
    let arith = Arith::Lane { kernels: chosen.kernels, elem: lanes::elem_ops(&chosen), threads: 1 };
    let dec = Decoder::new(&model, arith, Residual::F32, 512, Attention::LLAMA_DEFAULT).unwrap();
    let spec = RunSpec {
        ids: vec![1, 250, 1999, 42, 3000, 777, 64],
        steps: 0,
        mode: Mode::Prompt,
        forced: Vec::new(),
    };
    let out = run::run(&dec, &spec, TapSink::new(true, false)).unwrap();
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
