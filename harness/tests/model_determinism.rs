//! The decoder is deterministic: two runs of one lane give identical trace bits, and so
//! do 1 and 2 threads (matmuls split output columns only, never a sum).

use tiercheck::embedded;
use tiercheck::lanes::{self, Impl};
use tiercheck::model::run::{self, RunSpec, TapSink};
use tiercheck::model::{Arith, Decoder, Mode, Model, Residual};

fn digests(
    model: &Model,
    lane: &str,
    threads: usize,
    mode: Mode,
) -> (Vec<u32>, Vec<(String, String)>) {
    let chosen = lanes::choose(lanes::find(lane).unwrap(), Impl::Auto).unwrap();
    let arith = Arith::Lane { kernels: chosen.kernels, elem: lanes::elem_ops(&chosen), threads };
    let dec = Decoder::new(model, arith, Residual::F32, 512).unwrap();
    let spec = RunSpec { ids: vec![17, 2045, 388, 901, 5, 6], steps: 6, mode };
    let out = run::run(&dec, &spec, TapSink::new(false, true)).unwrap();
    (out.generated, out.digests.into_iter().collect())
}

#[test]
fn repeated_runs_and_thread_counts_give_identical_bits() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    for lane in ["ref", "x86_64-avx2-repack", "aarch64-i8mm-repack"] {
        for mode in [Mode::Prompt, Mode::Decode] {
            let a = digests(&model, lane, 1, mode);
            let b = digests(&model, lane, 1, mode);
            let c = digests(&model, lane, 2, mode);
            assert_eq!(a.0.len(), 6);
            assert!(a.1.len() > 70, "{} taps hashed", a.1.len());
            assert_eq!(a, b, "{lane} {mode:?}: two runs differ");
            assert_eq!(a, c, "{lane} {mode:?}: 1 and 2 threads differ");
        }
    }
}

#[test]
fn bf16_residual_changes_the_bits_and_stays_close() {
    let model = Model::open(&embedded::ensure_model(None).unwrap()).unwrap();
    let chosen = lanes::choose(lanes::find("ref").unwrap(), Impl::Auto).unwrap();
    let arith = Arith::Lane { kernels: chosen.kernels, elem: lanes::elem_ops(&chosen), threads: 1 };
    let spec = RunSpec { ids: vec![1, 250, 1999, 42], steps: 0, mode: Mode::Prompt };
    let logits = |res: Residual| {
        let dec = Decoder::new(&model, arith, res, 512).unwrap();
        let out = run::run(&dec, &spec, TapSink::new(true, false)).unwrap();
        out.taps.into_iter().find(|t| t.name == "result_output").unwrap().data
    };
    let (f, b) = (logits(Residual::F32), logits(Residual::Bf16));
    let d = tiercheck::model::tapdiff::diff(0, "result_output", &b, &f);
    assert!(d.n_diff > 0, "bf16 residual made no difference");
    // bf16 keeps 8 significant bits: the stream moves by ~2^-9 relative per rounding;
    // through 8 layers the logits stay within a few percent.
    assert!(d.rel_l2 < 0.1, "bf16 residual moved logits by {:.3e}", d.rel_l2);
}
