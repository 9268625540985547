//! Writes the test vectors that `device/gpu_check.cu` (the C++ driver `ci/gpu-check`
//! builds with nvcc on an NVIDIA machine, or with hipcc) checks a GPU against: for a
//! set of cases, the weights, one activation row, the portable twin's q8_1 blocks of
//! that row, and the twin's MMVQ outputs (warp 32) under every combination of the
//! `tiercheck_core::gpu::Contraction` switches, so that the driver can say which fusion the device's
//! compiler chose, not only whether one guess matched.
//!
//! ```text
//! cargo run -p tiercheck-hip --example gpu_vectors -- OUT.bin
//! ```
//!
//! Format (little-endian): `b"TCVEC001"`, u32 cases, u32 variants, then per variant a
//! 32-byte NUL-padded name; then per case: u32 type (its index in `tiercheck_hip::TYPES`:
//! 0 q4_K, 1 q6_K, 2 q8_0, 3 q4_1, 4 q5_0, 5 q5_1, 6 q2_K, 7 q3_K, 8 q5_K, 9 iq4_nl,
//! 10 iq4_xs), u32 k,
//! u32 rows, u32 nwarps, u32 weight bytes, the weights, k f32 activations,
//! k/32 q8_1 blocks (36 bytes each), and per variant `rows` f32 outputs.

use tiercheck_core::gpu::{mmvq_gemv, quantize_q8_1_mmvq};
use tiercheck_core::GgmlType;
use tiercheck_gpu_testkit::inputs::Rng;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out_path] = args.as_slice() else {
        eprintln!("usage: gpu_vectors OUT.bin");
        std::process::exit(2);
    };
    let variants = tiercheck_gpu_testkit::ggml_cases::contractions();
    let types: Vec<(GgmlType, u32)> =
        tiercheck_hip::TYPES.iter().enumerate().map(|(i, &(t, _))| (t, i as u32)).collect();
    let shapes = [(256usize, 1usize), (512, 7), (4352, 33), (5120, 3)];
    let nwarps_set = [1usize, 4];

    let mut body = Vec::new();
    let mut cases = 0u32;
    for &(ty, code) in &types {
        for &(k, rows) in &shapes {
            let mut rng = Rng::for_case(k, rows);
            let w = rng.weights(ty, rows, k).expect("reference quantizer");
            let row_bytes = w.len() / rows;
            for &nwarps in &nwarps_set {
                for _set in 0..2 {
                    let x = rng.activations(k);
                    let act = quantize_q8_1_mmvq(&x);
                    for v in [code, k as u32, rows as u32, nwarps as u32, w.len() as u32] {
                        body.extend_from_slice(&v.to_le_bytes());
                    }
                    body.extend_from_slice(&w);
                    body.extend_from_slice(bytemuck::cast_slice(&x));
                    body.extend_from_slice(bytemuck::cast_slice(&act));
                    for (_, c) in &variants {
                        for r in 0..rows {
                            let row = &w[r * row_bytes..(r + 1) * row_bytes];
                            let y = mmvq_gemv(ty, row, &act, 32, nwarps, *c).expect("twin");
                            body.extend_from_slice(&y.to_le_bytes());
                        }
                    }
                    cases += 1;
                }
            }
        }
    }
    let mut head = b"TCVEC001".to_vec();
    head.extend_from_slice(&cases.to_le_bytes());
    head.extend_from_slice(&(variants.len() as u32).to_le_bytes());
    for (name, _) in &variants {
        let mut n = [0u8; 32];
        n[..name.len()].copy_from_slice(name.as_bytes());
        head.extend_from_slice(&n);
    }
    head.extend_from_slice(&body);
    if let Err(e) = tiercheck_gpu_testkit::inputs::write_atomically(out_path, &head) {
        eprintln!("gpu_vectors: cannot write {out_path}: {e}");
        std::process::exit(1);
    }
    println!("gpu_vectors: {cases} cases x {} contraction variants -> {out_path}", variants.len());
}
