//! Edge cases of the `ref` lane's quantizers and kernels, and the accuracy bounds of
//! llama.cpp's `test-quantize-fns` (docs/NUMERICS.md §6).

use tiercheck_core::blocks::{self, BlockQ4K, BlockQ8K, BlockQ8_0, BlockQ8_1};
use tiercheck_core::quant::{weights, ActRule};
use tiercheck_core::{lane, GgmlType, KernelError, WeightMatrix};

fn q8k(x: &[f32]) -> Vec<BlockQ8K> {
    let bytes = ActRule::Q8KRef.quantize(x).unwrap();
    bytemuck::cast_slice(&bytes).to_vec()
}

#[test]
fn q8_k_all_zero_block_is_all_zero_bytes() {
    let b = ActRule::Q8KRef.quantize(&[0.0; 256]).unwrap();
    assert_eq!(b, vec![0u8; 292]);
    // negative zeros too: amax is +0
    let b = ActRule::Q8KRef.quantize(&[-0.0; 256]).unwrap();
    assert_eq!(b, vec![0u8; 292]);
}

#[test]
fn q8_k_first_maximum_wins_and_d_is_negative() {
    let mut x = vec![0.25f32; 256];
    x[3] = 5.0;
    x[10] = -5.0;
    let b = &q8k(&x)[0];
    assert_eq!(b.d(), 1.0 / (-127.0f32 / 5.0));
    assert!(b.d() < 0.0);
    assert_eq!(b.q(3), -127);
    assert_eq!(b.q(10), 127);
    // The other sign first: now the negative value maps to -127 and d > 0.
    x[3] = -5.0;
    x[10] = 5.0;
    let b = &q8k(&x)[0];
    assert!(b.d() > 0.0);
    assert_eq!(b.q(3), -127);
    assert_eq!(b.q(10), 127);
}

#[test]
fn q8_k_bsums_are_group_sums_and_ties_go_to_even() {
    // max = -127 -> iscale = 1, so q = nearest_even(x) exactly.
    let mut x: Vec<f32> = (0..256).map(|i| ((i % 7) as f32) - 3.0 + 0.5).collect();
    x[0] = -127.0;
    let b = &q8k(&x)[0];
    assert_eq!(b.d(), 1.0);
    for (i, &v) in x.iter().enumerate() {
        assert_eq!(b.q(i) as f32, v.round_ties_even(), "i = {i}");
    }
    for g in 0..16 {
        let s: i32 = (0..16).map(|j| b.q(16 * g + j) as i32).sum();
        assert_eq!(b.bsum(g) as i32, s);
    }
}

#[test]
fn q8_0_ties_round_away_from_zero_and_d_is_f16() {
    // amax = 127 -> d = 1, id = 1: q = roundf(x).
    let mut x = vec![0.0f32; 32];
    x[0] = 127.0;
    x[1] = 2.5;
    x[2] = -2.5;
    x[3] = 0.5;
    x[4] = -0.5;
    x[5] = 1.49;
    let b: Vec<BlockQ8_0> = bytemuck::cast_slice(&ActRule::Q8_0Ref.quantize(&x).unwrap()).to_vec();
    assert_eq!(b[0].d(), 1.0);
    let q: Vec<i8> = (0..6).map(|j| b[0].q(j)).collect();
    assert_eq!(q, vec![127, 3, -3, 1, -1, 1]);
    // d is rounded to f16 but id comes from the f32 d.
    let x: Vec<f32> = (0..32).map(|i| 0.001 * i as f32 + 0.0123).collect();
    let b: Vec<BlockQ8_0> = bytemuck::cast_slice(&ActRule::Q8_0Ref.quantize(&x).unwrap()).to_vec();
    let d = x[31] / 127.0;
    assert_eq!(b[0].d(), half::f16::from_f32(d).to_f32());
    assert_eq!(b[0].q(31), 127);
}

#[test]
fn q8_1_s_is_f16_of_d_times_sum() {
    let x: Vec<f32> = (0..64).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37).collect();
    let b: Vec<BlockQ8_1> = bytemuck::cast_slice(&ActRule::Q8_1Ref.quantize(&x).unwrap()).to_vec();
    for (blk, xb) in b.iter().zip(x.chunks(32)) {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let sum: i32 = blk.qs.iter().map(|&q| q as i8 as i32).sum();
        assert_eq!(blk.s(), half::f16::from_f32(sum as f32 * d).to_f32());
    }
}

#[test]
fn activation_length_errors_are_values() {
    assert!(matches!(ActRule::Q8KRef.quantize(&[0.0; 100]), Err(KernelError::BadRowLength { .. })));
    assert!(matches!(ActRule::Q8_0Ref.quantize(&[0.0; 33]), Err(KernelError::BadRowLength { .. })));
}

/// llama.cpp's test data: 0.1 + 2 cos(i + offset).
fn synth(n: usize, offset: f32) -> Vec<f32> {
    (0..n).map(|i| 0.1 + 2.0 * (i as f32 + offset).cos()).collect()
}

fn dequant(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / ty.type_size() * ty.block_size();
    let mut out = vec![0.0; n];
    blocks::dequantize(ty, bytes, &mut out).unwrap();
    out
}

#[test]
fn weight_quantization_error_within_test_quantize_fns_bound() {
    // MAX_QUANTIZATION_TOTAL_ERROR = 0.002 on sqrt(sum d^2)/n, n = 4096, offset 0; 0.0075
    // for Q2_K (MAX_QUANTIZATION_TOTAL_ERROR_2BITS), 0.0040 for Q3_K (_3BITS).
    let n = 4096;
    let x = synth(n, 0.0);
    for &ty in weights::QUANTIZABLE {
        let q = weights::quantize(ty, &x, 1, n).unwrap();
        let y = dequant(ty, &q);
        let err =
            x.iter().zip(&y).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>().sqrt() / n as f64;
        let bound = match ty {
            GgmlType::Q2_K => 0.0075,
            GgmlType::Q3_K => 0.0040,
            _ => 0.002,
        };
        assert!(err <= bound, "{ty}: {err}");
    }
}

#[test]
fn vec_dot_within_test_quantize_fns_bound_of_f64_dot_of_dequantized() {
    // MAX_DOT_PRODUCT_ERROR = 0.02 on |vec_dot - reference|/n. Our reference is the f64
    // dot of the dequantized weight and dequantized activation values (the kernel's
    // exact mathematical answer), a stricter check than upstream's f32 inputs.
    let n = 4096;
    let w = synth(n, 0.0);
    let a = synth(n, 1.0);
    let lane = lane("ref").unwrap();
    for &ty in weights::QUANTIZABLE {
        let wq = weights::quantize(ty, &w, 1, n).unwrap();
        let aq = lane.portable.quantize_act(ty, &a).unwrap();
        let got = lane.portable.vec_dot(ty, &wq, &aq).unwrap();
        let atype = lane.portable.act_rule(ty).unwrap().format();
        let wd = dequant(ty, &wq);
        let ad = dequant(atype, &aq);
        let exact: f64 = wd.iter().zip(&ad).map(|(&p, &q)| p as f64 * q as f64).sum();
        let err = (got as f64 - exact).abs() / n as f64;
        assert!(err <= 0.02, "{ty}: got {got}, exact {exact}");
        // It is also close in relative terms: only float rounding separates them.
        assert!(
            (got as f64 - exact).abs() <= 1e-4 * exact.abs().max(1.0),
            "{ty}: {got} vs {exact}"
        );
        // And the upstream check against the unquantized f32 inputs.
        let f: f64 = w.iter().zip(&a).map(|(&p, &q)| p as f64 * q as f64).sum();
        // MAX_DOT_PRODUCT_ERROR_LOWBIT = 0.04 for Q2_K.
        let bound = if ty == GgmlType::Q2_K { 0.04 } else { 0.02 };
        assert!((got as f64 - f).abs() / n as f64 <= bound, "{ty}: {got} vs f32 dot {f}");
    }
}

#[test]
fn matmul_is_vec_dot_per_row_pair_and_checks_shapes() {
    let (n, k, m) = (3, 512, 2);
    let w = synth(n * k, 0.3);
    let x = synth(m * k, 2.0);
    let lane = lane("ref").unwrap();
    for &ty in weights::QUANTIZABLE {
        let wq = weights::quantize(ty, &w, n, k).unwrap();
        let wm = WeightMatrix::new(ty, n, k, &wq).unwrap();
        let y = lane.portable.matmul(&wm, &x, m).unwrap();
        for i in 0..m {
            let aq = lane.portable.quantize_act(ty, &x[i * k..(i + 1) * k]).unwrap();
            for j in 0..n {
                let d = lane.portable.vec_dot(ty, wm.row(j), &aq).unwrap();
                assert_eq!(y[i * n + j].to_bits(), d.to_bits());
            }
        }
        assert!(lane.portable.matmul(&wm, &x[1..], m).is_err());
        assert!(WeightMatrix::new(ty, n + 1, k, &wq).is_err());
    }
}

#[test]
fn q4_k_zero_and_constant_rows_quantize_sensibly() {
    let z = weights::quantize(GgmlType::Q4_K, &[0.0; 256], 1, 256).unwrap();
    assert!(dequant(GgmlType::Q4_K, &z).iter().all(|&v| v == 0.0));
    let c = weights::quantize(GgmlType::Q4_K, &[0.75; 256], 1, 256).unwrap();
    let b: &BlockQ4K = &bytemuck::cast_slice::<u8, BlockQ4K>(&c)[0];
    assert!(b.d() > 0.0);
    for v in dequant(GgmlType::Q4_K, &c) {
        assert!((v - 0.75).abs() < 0.75 / 15.0, "{v}");
    }
    let z = weights::quantize(GgmlType::Q6_K, &[0.0; 256], 1, 256).unwrap();
    assert_eq!(z, vec![0u8; 210]);
}

#[test]
fn unsupported_types_are_errors() {
    assert!(matches!(
        weights::quantize(GgmlType::IQ2_XXS, &[0.0; 256], 1, 256),
        Err(KernelError::Unsupported { .. })
    ));
    let mut out = [0.0f32; 256];
    assert!(matches!(
        blocks::dequantize(GgmlType::IQ2_XXS, &[0u8; 66], &mut out),
        Err(KernelError::Unsupported { .. })
    ));
    // A codec a lane does not multiply: its vec_dot and activation rule refuse it (every
    // CPU lane multiplies the twelve quantizable types; the GPU lanes the eleven of
    // their MMVQ, all but Q4_0). A repacked lane refuses the types its scheme lists as
    // unreproduced, though its plain lane multiplies them (checked below on a scheme
    // built for it).
    let hip = lane("hip-wave32").unwrap();
    let w = weights::quantize(GgmlType::Q4_0, &[0.0; 256], 1, 256).unwrap();
    let neon = lane("aarch64-neon").unwrap().portable;
    let a = neon.quantize_act(GgmlType::Q4_0, &[0.0; 256]).unwrap();
    assert!(hip.portable.vec_dot(GgmlType::Q4_0, &w, &a).is_err());
    assert!(hip.portable.act_rule(GgmlType::Q4_0).is_err());
    for &ty in weights::QUANTIZABLE.iter().filter(|&&t| t != GgmlType::Q4_0) {
        assert!(hip.portable.act_rule(ty).is_ok(), "hip-wave32 {ty}");
    }
    use tiercheck_core::lane::Arch;
    let cpu = |l: &&&tiercheck_core::Lane| !matches!(l.arch, Arch::AmdGpu | Arch::NvidiaGpu);
    for l in tiercheck_core::LANES.iter().filter(cpu) {
        for &ty in weights::QUANTIZABLE {
            assert!(l.portable.act_rule(ty).is_ok(), "{} {ty}", l.name);
        }
    }
    use tiercheck_core::Kernels;
    let plain = lane("x86_64-avx2").unwrap().portable;
    let scheme = tiercheck_core::arch::x86_64::avx2_repack::scheme(
        tiercheck_core::arch::x86_64::avx2_repack::group,
    );
    let refusing = tiercheck_core::lane::RepackedLane {
        plain,
        scheme: tiercheck_core::lane::RepackScheme { unreproduced: &[GgmlType::IQ4_NL], ..scheme },
    };
    assert!(plain.act_rule(GgmlType::IQ4_NL).is_ok());
    assert!(refusing.act_rule(GgmlType::IQ4_NL).is_err());
    assert!(refusing.act_rule(GgmlType::Q5_K).is_ok());
    let repack = lane("x86_64-avx2-repack").unwrap().portable;
    assert!(repack.act_rule(GgmlType::IQ4_NL).is_ok());
    for &ty in weights::QUANTIZABLE {
        assert!(lane("ref").unwrap().portable.act_rule(ty).is_ok(), "{ty}");
    }
}

#[test]
fn q8_k_dequantizes_to_d_times_q() {
    // ggml registers no q8_K to_float, so this is checked against the definition
    // (`dequantize_row_q8_K`: y = d * q, one rounding).
    let x: Vec<f32> = (0..512).map(|i| ((i * 7919 % 255) as f32 - 127.0) * 0.013).collect();
    let q = ActRule::Q8KRef.quantize(&x).unwrap();
    let y = dequant(GgmlType::Q8_K, &q);
    for (bi, b) in bytemuck::cast_slice::<u8, BlockQ8K>(&q).iter().enumerate() {
        for j in 0..256 {
            assert_eq!(y[256 * bi + j].to_bits(), (b.d() * b.q(j) as f32).to_bits());
        }
    }
}

/// Declared behaviour for non-finite activations: no special case; the bits are what
/// ggml's reference functions produce (the oracle trials check them against ggml for
/// NaN and +-Inf rows). Pinned here: the facts that follow from the C code.
#[test]
fn non_finite_activations_follow_ggml_reference_semantics() {
    // q8_K, one +Inf: amax = max = +Inf, iscale = -127/Inf = -0, so every finite value
    // rounds to code 0; -0 * Inf = NaN, and nearest_int's bit trick maps that NaN to 0;
    // d = 1/iscale = -Inf.
    let mut x = vec![1.0f32; 256];
    x[7] = f32::INFINITY;
    let b = &q8k(&x)[0];
    assert_eq!(b.d(), f32::NEG_INFINITY);
    assert!((0..256).all(|j| b.q(j) == 0));
    // q8_K, one NaN: NaN never wins the strict `>` of the max search, so the block is
    // quantized from its finite values, and the NaN itself becomes code 0.
    let mut x: Vec<f32> = (0..256).map(|i| i as f32 - 100.0).collect();
    x[3] = f32::NAN;
    let b = &q8k(&x)[0];
    assert_eq!(b.q(3), 0);
    // 155 (the last value) has the largest magnitude.
    assert_eq!(b.q(255), -127);
    // q8_0: `MAX(amax, |v|)` keeps a NaN only until the next comparison, so a NaN at
    // the end of a block poisons d, one in the middle does not.
    let mut x = vec![1.0f32; 32];
    x[31] = f32::NAN;
    let q: Vec<BlockQ8_0> = bytemuck::cast_slice(&ActRule::Q8_0Ref.quantize(&x).unwrap()).to_vec();
    assert!(q[0].d().is_nan());
    x[31] = 1.0;
    x[10] = f32::NAN;
    let q: Vec<BlockQ8_0> = bytemuck::cast_slice(&ActRule::Q8_0Ref.quantize(&x).unwrap()).to_vec();
    assert_eq!(q[0].d(), half::f16::from_f32(1.0 / 127.0).to_f32());
    assert_eq!(q[0].q(10), 0, "roundf(NaN) converts to code 0, as cvttss2si's low byte");
}
