//! The cases `device/ggml_gpu_check.cu` (ggml's own CUDA kernels, built by
//! `ci/ggml-gpu-driver`) runs on an NVIDIA GPU: inputs, and the `cuda-sm90` lane's twin
//! outputs the device must equal bit for bit ([`vectors`]). One case per op and shape:
//!
//! - `quantize_q8_1`: the fast-math activation quantizer ([`quantize_q8_1_cuda`]), the
//!   q8_1 blocks byte for byte (d and the sum in f16, the codes from `x * rcp(d)`);
//! - `mmvq`: `mul_mat_vec_q` of rows of the eleven MMVQ types
//!   ([`tiercheck_core::gpu::MMVQ_TYPES`]) with one activation column,
//!   quantized as above ([`CUDA`]: warp 32, four warps, nvcc's fusions);
//! - `rms_norm_mul`, `swiglu`, `soft_max`, `rope_neox`: the `cuda-gpu` flavour's RMSNorm
//!   times a weight, SwiGLU, an attention row's softmax (scores times the scale, an F32
//!   mask of 0 and `-inf`) and the NeoX rotation with CUDA's angles
//!   ([`tiercheck_core::gpu::elem`]);
//! - `mmvf`: `mul_mat_vec_f` of an F16 or F32 matrix times one F32 column, the attention
//!   products: `K·Q` at `GGML_PREC_F32` (an f32 accumulator), `V·p` at default precision
//!   (a `half2` accumulator for F16) ([`MMVF_AMPERE`]).
//!
//! Format (little-endian): `b"TCGG0001"`, u32 cases; per case u32 kind (1 quantize_q8_1,
//! 2 mmvq, 3 rms_norm_mul, 4 swiglu, 5 rope_neox, 6 soft_max, 7 mmvf), u32 name length and the
//! name, u32 params and an i64 each (f32 parameters as their bits), u32 inputs and per
//! input u32 dtype (0 f32, 1 bytes, 2 i32), u64 length and the bytes, then the expected
//! output the same way, then u32 alternatives and per alternative u32 name length, the
//! name and an output the same way: other recipes' outputs for the same inputs (MMVQ
//! under the other contraction variants and warp counts, the quantizer, RMSNorm,
//! SwiGLU and softmax in HIP's math, MMVF unfused, over 64 lanes or with the other
//! accumulator), which the driver names when the device differs
//! from the twin, so that one short device run says which recipe the device follows.

use crate::inputs::Rng;
use tiercheck_core::elem::{rope_neox, RopeRotation};
use tiercheck_core::fp16::{f16_bits_to_f32, f32_to_f16_bits};
use tiercheck_core::gpu::elem::{rms_norm_mul, rope_cache_cuda, soft_max_row, swiglu, GpuMath};
use tiercheck_core::gpu::{
    mmvq_gemv, quantize_q8_1_cuda, quantize_q8_1_mmvq, Combine, Contraction, MmvfAcc, MmvfConfig,
    CUDA, MMVF_AMPERE, MMVF_CDNA, MMVQ_TYPES,
};

const F32: u32 = 0;
const BYTES: u32 = 1;
const I32: u32 = 2;

struct Out {
    body: Vec<u8>,
    cases: u32,
}

impl Out {
    /// One case: its kind, name, parameters, inputs, the twin's output, and other
    /// recipes' outputs for the same inputs (named).
    fn case_with(
        &mut self,
        kind: u32,
        name: &str,
        params: &[i64],
        inputs: &[(u32, &[u8])],
        want: (u32, &[u8]),
        alternatives: &[(String, Vec<u8>)],
    ) {
        let b = &mut self.body;
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&(name.len() as u32).to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&(params.len() as u32).to_le_bytes());
        for p in params {
            b.extend_from_slice(&p.to_le_bytes());
        }
        b.extend_from_slice(&(inputs.len() as u32).to_le_bytes());
        for &(dtype, bytes) in inputs.iter().chain([&want]) {
            b.extend_from_slice(&dtype.to_le_bytes());
            b.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            b.extend_from_slice(bytes);
        }
        b.extend_from_slice(&(alternatives.len() as u32).to_le_bytes());
        for (alt, bytes) in alternatives {
            b.extend_from_slice(&(alt.len() as u32).to_le_bytes());
            b.extend_from_slice(alt.as_bytes());
            b.extend_from_slice(&want.0.to_le_bytes());
            b.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            b.extend_from_slice(bytes);
        }
        self.cases += 1;
    }
}

impl Out {
    /// An elementwise case of two f32 inputs: the output `f(GpuMath::Cuda)` (the
    /// `cuda-gpu` flavour), and `f(GpuMath::Hip)` as the alternative "HIP's math".
    fn elementwise(
        &mut self,
        kind: u32,
        name: &str,
        params: &[i64],
        [a, b]: [&[f32]; 2],
        f: impl Fn(GpuMath) -> Vec<f32>,
    ) {
        let want = f(GpuMath::Cuda);
        let alts = [("HIP's math".to_string(), f32_bytes(&f(GpuMath::Hip)))];
        let inputs = [(F32, bytemuck::cast_slice(a)), (F32, bytemuck::cast_slice(b))];
        self.case_with(kind, name, params, &inputs, (F32, bytemuck::cast_slice(&want)), &alts);
    }
}

fn bits(v: f32) -> i64 {
    i64::from(v.to_bits())
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    bytemuck::cast_slice(v).to_vec()
}

/// Every contraction variant of the MMVQ twin (the switches of [`Contraction`]), named
/// as the drivers print them (`sums=1,combine=first,acc=1`).
pub fn contractions() -> Vec<(String, Contraction)> {
    let mut v = Vec::new();
    for sums in [true, false] {
        for (cname, combine) in [
            ("first", Combine::FuseFirst),
            ("second", Combine::FuseSecond),
            ("unfused", Combine::Unfused),
        ] {
            for acc in [true, false] {
                let c = Contraction { vec_dot_sums: sums, combine, accumulate: acc };
                v.push((format!("sums={},combine={cname},acc={}", sums as u8, acc as u8), c));
            }
        }
    }
    v
}

/// The whole vectors file: the header and every case.
pub fn vectors() -> Vec<u8> {
    let mut out = Out { body: Vec::new(), cases: 0 };

    for k in [256usize, 4096, 5120, 17408] {
        let mut rng = Rng::for_case(k, 0);
        for set in 0..2 {
            let x = rng.activations(k);
            let q = quantize_q8_1_cuda(&x);
            let ieee = quantize_q8_1_mmvq(&x);
            let alts = [(
                "HIP's quantizer (IEEE divisions)".to_string(),
                bytemuck::cast_slice(&ieee).to_vec(),
            )];
            let name = format!("quantize_q8_1 k={k} set{set}");
            out.case_with(
                1,
                &name,
                &[k as i64],
                &[(F32, bytemuck::cast_slice(&x))],
                (BYTES, bytemuck::cast_slice(&q)),
                &alts,
            );
        }
    }
    for ty in MMVQ_TYPES {
        for (k, n) in [(256usize, 1usize), (512, 7), (4352, 33), (5120, 3), (17408, 5)] {
            let mut rng = Rng::for_case(k, n);
            let w = rng.weights(ty, n, k).expect("reference quantizer");
            for set in 0..2 {
                let x = rng.activations(k);
                let act = quantize_q8_1_cuda(&x);
                let mut y = vec![0.0f32; n];
                CUDA.gemv_rows(ty, &w, &act, &mut y).expect("twin");
                // The other warp counts and contraction variants, on the same q8_1 codes.
                let row = w.len() / n;
                let mut alts = Vec::new();
                for nwarps in [1usize, 2, 4, 8] {
                    for (cname, c) in contractions() {
                        if nwarps == CUDA.nwarps(ty) && c == CUDA.contraction {
                            continue;
                        }
                        let ya: Vec<f32> = w
                            .chunks(row)
                            .map(|r| mmvq_gemv(ty, r, &act, 32, nwarps, c).expect("twin"))
                            .collect();
                        alts.push((format!("nwarps={nwarps},{cname}"), f32_bytes(&ya)));
                    }
                }
                let name = format!("mmvq {} k={k} n={n} set{set}", ty.name());
                out.case_with(
                    2,
                    &name,
                    &[i64::from(ty.id()), k as i64, n as i64],
                    &[(BYTES, &w), (F32, bytemuck::cast_slice(&x))],
                    (F32, bytemuck::cast_slice(&y)),
                    &alts,
                );
            }
        }
    }
    for (n, rows) in [(128usize, 4usize), (1000, 1), (1024, 2), (5120, 2)] {
        let mut rng = Rng::for_case(n, rows);
        let x: Vec<f32> = (0..n * rows).map(|_| rng.sym() * 3.0).collect();
        let w: Vec<f32> = (0..n).map(|_| 1.0 + rng.sym() * 0.5).collect();
        let eps = 1e-6f32;
        let name = format!("rms_norm_mul n={n} rows={rows}");
        out.elementwise(3, &name, &[n as i64, rows as i64, bits(eps)], [&x, &w], |math| {
            let mut y = vec![0.0f32; n * rows];
            for (yr, xr) in y.chunks_mut(n).zip(x.chunks(n)) {
                rms_norm_mul(math, yr, xr, &w, eps);
            }
            y
        });
    }
    for n in [100usize, 4096, 17408] {
        let mut rng = Rng::for_case(n, 1);
        // Model-scale inputs and the cut-offs: subnormal and overflowing exponentials.
        let mut x: Vec<f32> = (0..n).map(|_| rng.sym() * 12.0).collect();
        x[..4].copy_from_slice(&[-90.0, -100.0, 95.0, 0.0]);
        let g: Vec<f32> = (0..n).map(|_| rng.sym() * 4.0).collect();
        out.elementwise(4, &format!("swiglu n={n}"), &[n as i64], [&x, &g], |math| {
            let mut y = vec![0.0f32; n];
            swiglu(math, &mut y, &x, &g);
            y
        });
    }
    {
        let (hd, heads) = (128usize, 4usize);
        let pos: Vec<i32> = vec![0, 1, 17, 511, 4095, 30000];
        let base = 1e6f32;
        let mut rng = Rng::for_case(hd, heads);
        let x: Vec<f32> = (0..hd * heads * pos.len()).map(|_| rng.sym() * 4.0).collect();
        let mut y = x.clone();
        for (t, &p) in pos.iter().enumerate() {
            let cache = rope_cache_cuda(p, hd, base);
            for h in 0..heads {
                let at = (t * heads + h) * hd;
                rope_neox(&mut y[at..at + hd], &cache, RopeRotation::FuseX0);
            }
        }
        out.case_with(
            5,
            &format!("rope_neox head_dim={hd} heads={heads} tokens={}", pos.len()),
            &[hd as i64, heads as i64, pos.len() as i64, hd as i64, bits(base)],
            &[(F32, bytemuck::cast_slice(&x)), (I32, bytemuck::cast_slice(&pos))],
            (F32, bytemuck::cast_slice(&y)),
            &[],
        );
    }
    for (n_kv, rows) in [(256usize, 3usize), (512, 2), (768, 2), (1024, 1), (2048, 2), (4096, 1)] {
        let mut rng = Rng::for_case(n_kv, rows);
        let scale = 1.0 / (128f32).sqrt();
        let kq: Vec<f32> = (0..n_kv * rows).map(|_| rng.sym() * 60.0).collect();
        // A causal mask over a padded cache: row r sees its first `n_kv/2 + 7r` cells.
        let mask: Vec<f32> = (0..n_kv * rows)
            .map(|i| if i % n_kv < n_kv / 2 + 7 * (i / n_kv) { 0.0 } else { f32::NEG_INFINITY })
            .collect();
        let name = format!("soft_max n_kv={n_kv} rows={rows}");
        out.elementwise(6, &name, &[n_kv as i64, rows as i64, bits(scale)], [&kq, &mask], |math| {
            let mut p = vec![0.0f32; n_kv * rows];
            for ((pr, kr), mr) in p.chunks_mut(n_kv).zip(kq.chunks(n_kv)).zip(mask.chunks(n_kv)) {
                // The kernel's `x*scale + mask` (any fusion gives these values, mask 0 or
                // -inf).
                let w: Vec<f32> = kr.iter().zip(mr).map(|(&a, &m)| a * scale + m).collect();
                soft_max_row(math, pr, &w);
            }
            p
        });
    }

    // The attention products of one token: K·Q (a head of 128 against 256 or 512 cells,
    // at F32 precision) and V·p (256 .. 4096 cells into a head of 128, default
    // precision), for an F16 cache and an F32 one. (NVIDIA takes MMVF for an F16 K·Q only
    // up to 512 cells.)
    for (f16, f32_prec, k, n) in [
        (true, true, 128usize, 256usize),
        (true, true, 128, 512),
        (true, false, 256, 128),
        (true, false, 512, 128),
        (true, false, 4096, 16),
        (false, true, 128, 256),
        (false, false, 256, 128),
        (false, false, 1024, 8),
    ] {
        let mut rng = Rng::for_case(k, n + f16 as usize);
        let w: Vec<f32> = (0..k * n)
            .map(|_| {
                let v = rng.sym() * 3.0;
                if f16 {
                    f16_bits_to_f32(f32_to_f16_bits(v))
                } else {
                    v
                }
            })
            .collect();
        // K·Q: a query of model scale; V·p: probabilities (a few large, many small, the
        // last quarter masked to 0).
        let x: Vec<f32> = (0..k)
            .map(|i| {
                if f32_prec {
                    rng.sym() * 4.0
                } else if i >= k - k / 4 {
                    0.0
                } else {
                    let u = rng.sym().abs();
                    u * u * u * 0.2
                }
            })
            .collect();
        let acc = if f16 && !f32_prec { MmvfAcc::F16 } else { MmvfAcc::F32 };
        let run = |cfg: &MmvfConfig, acc: MmvfAcc| -> Vec<f32> {
            w.chunks(k).map(|row| cfg.dot(acc, row, &x)).collect()
        };
        let want = run(&MMVF_AMPERE, acc);
        let mut alts = vec![
            (
                "unfused".to_string(),
                f32_bytes(&run(&MmvfConfig { fused: false, ..MMVF_AMPERE }, acc)),
            ),
            (
                "64-lane warps".to_string(),
                f32_bytes(&run(&MmvfConfig { warp_size: 64, ..MMVF_AMPERE }, acc)),
            ),
            ("cdna order".to_string(), f32_bytes(&run(&MMVF_CDNA, acc))),
        ];
        if f16 {
            let other = if acc == MmvfAcc::F16 { MmvfAcc::F32 } else { MmvfAcc::F16 };
            alts.push((
                format!("{} accumulator", other.name()),
                f32_bytes(&run(&MMVF_AMPERE, other)),
            ));
        }
        let wbytes: Vec<u8> = if f16 {
            w.iter().flat_map(|&v| f32_to_f16_bits(v).to_le_bytes()).collect()
        } else {
            f32_bytes(&w)
        };
        let name = format!(
            "mmvf {} k={k} rows={n} {}",
            if f16 { "f16" } else { "f32" },
            if f32_prec { "prec=f32" } else { "prec=default" }
        );
        out.case_with(
            7,
            &name,
            &[f16 as i64, k as i64, n as i64, f32_prec as i64],
            &[(BYTES, &wbytes), (F32, bytemuck::cast_slice(&x))],
            (F32, bytemuck::cast_slice(&want)),
            &alts,
        );
    }

    let mut file = b"TCGG0001".to_vec();
    file.extend_from_slice(&out.cases.to_le_bytes());
    file.extend_from_slice(&out.body);
    file
}
