//! Conformance checks of a native [`ElemOps`] (the architecture crates' SIMD
//! elementwise kernels) against its portable twin, shared by those crates' tests
//! (`kernels/x86_64/tests/elem_avx2.rs`, `kernels/aarch64/tests/elem_neon.rs`,
//! `elem_sve128.rs`, `elem_sve256.rs`).
//!
//! Each check feeds both implementations the same edge and random inputs and panics
//! with a precise report (element, input and both results in hex) at the first bit
//! that differs; it returns a one-line summary of what it compared. Results that are
//! NaN on both sides count as equal (NaN payloads are not part of the contract).

use tiercheck_core::elem::{portable, ElemFlavour, ElemOps};

/// Test inputs from the project's seeded generator ([`tiercheck_core::rng::Rng`]).
struct Rng(tiercheck_core::rng::Rng);

impl Rng {
    fn seeded(seed: u64) -> Self {
        Rng(tiercheck_core::rng::Rng::new(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// Any non-NaN f32 bit pattern (infinities included).
    fn any_f32(&mut self) -> f32 {
        loop {
            let v = f32::from_bits(self.next() as u32);
            if !v.is_nan() {
                return v;
            }
        }
    }

    /// Uniform magnitude spread over many binades, random sign.
    fn wide(&mut self) -> f32 {
        let m = self.uniform(1.0, 2.0);
        let e = (self.next() % 24) as i32 - 12;
        let s = if self.next() & 1 == 0 { 1.0 } else { -1.0 };
        s * m * 2f32.powi(e)
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// Bitwise equality, NaN equal to NaN.
fn same32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn assert_same_slices(what: &str, native: &[f32], twin: &[f32], input: &[f32]) {
    for (i, (&a, &b)) in native.iter().zip(twin).enumerate() {
        assert!(
            same32(a, b),
            "{what}: element {i} (input {:e} = {:#010x}): native {a:e} ({:#010x}) != portable {b:e} ({:#010x})",
            input[i],
            input[i].to_bits(),
            a.to_bits(),
            b.to_bits()
        );
    }
}

/// Inputs for `expf` / `silu`: exact edges, sweeps over the range limits, ulp walks
/// across the thresholds, random values.
fn expf_inputs(rng: &mut Rng) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e4,
        -1e4,
        1e10,
        -1e10,
        1e30,
        -1e30,
        88.37626,
        88.38,
        88.72283,
        88.7229,
        89.0,
        -87.33655,
        -87.3366,
        -103.97,
        -103.972_08,
        -104.0,
        126.0,
        -126.0,
        192.0,
        -192.0,
    ];
    // Sweeps over ±80..±140 (the |n| > 126 and |n| > 192 limits, overflow, subnormal
    // results and the flush to zero).
    let mut x = 80.0f32;
    while x < 140.0 {
        v.push(x);
        v.push(-x);
        x += 0.01;
    }
    // Ulp walks across the thresholds.
    for centre in [
        88.72283f32,
        87.33655,
        103.97208,
        87.68,
        87.34,
        133.08,
        133.4,
        126.0 * core::f32::consts::LN_2,
        192.0 * core::f32::consts::LN_2,
        0.0,
    ] {
        for s in [1.0f32, -1.0] {
            let c = (s * centre).to_bits() as i64;
            for d in -300i64..=300 {
                let b = c + d;
                if (0..=u32::MAX as i64).contains(&b) {
                    let f = f32::from_bits(b as u32);
                    if !f.is_nan() {
                        v.push(f);
                    }
                }
            }
        }
    }
    // Random values in the interesting range, over many binades, and any bit pattern.
    for _ in 0..20_000 {
        v.push(rng.uniform(-120.0, 120.0));
    }
    for _ in 0..10_000 {
        v.push(rng.wide());
    }
    for _ in 0..10_000 {
        v.push(rng.any_f32());
    }
    v
}

/// `ggml_v_expf` (through `soft_max` with `max = 0`) and `ggml_v_silu` (through
/// `swiglu`) on edges, threshold walks and random values, sorted and shuffled, at every
/// lane offset.
pub fn expf_and_silu(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let mut rng = Rng::seeded(0x5EED_E1E0);
    let sorted = expf_inputs(&mut rng);
    let mut shuffled = sorted.clone();
    rng.shuffle(&mut shuffled);
    let mut compared = 0usize;
    let mut nan_pairs = 0usize;
    // Sorted (mostly uniform vectors: the early return) and shuffled (mixed vectors:
    // the blend), at every offset so each value meets every lane.
    for xs in [&sorted, &shuffled] {
        for off in 0..flavour.width() {
            let x = &xs[off..];
            let (mut yn, mut yt) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            let sn = native.soft_max(&mut yn, x, 0.0);
            let st = twin.soft_max(&mut yt, x, 0.0);
            assert_same_slices("expf (soft_max, max 0)", &yn, &yt, x);
            assert!(same64(sn, st), "expf sum: native {sn:e} != portable {st:e}");
            compared += x.len();

            let g: Vec<f32> = (0..x.len()).map(|_| rng.uniform(-3.0, 3.0)).collect();
            native.swiglu(&mut yn, x, &g);
            twin.swiglu(&mut yt, x, &g);
            assert_same_slices("silu (swiglu)", &yn, &yt, x);
            nan_pairs += yn.iter().filter(|v| v.is_nan()).count();
            let ones = vec![1.0f32; x.len()];
            native.swiglu(&mut yn, x, &ones);
            twin.swiglu(&mut yt, x, &ones);
            assert_same_slices("silu (swiglu, g = 1)", &yn, &yt, x);
            compared += 2 * x.len();
        }
    }
    format!(
        "{}: expf/silu: {} values ({} distinct inputs), {} NaN silu results on both sides",
        flavour.name(),
        compared,
        sorted.len(),
        nan_pairs
    )
}

/// `soft_max` of every length 1..=70 (the scalar tails), with and without a `-inf`
/// suffix, with the row maximum and with another maximum.
pub fn soft_max_every_length(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let mut rng = Rng::seeded(0x50F7_3A11);
    let (mut calls, mut values) = (0usize, 0usize);
    for n in 1..=70usize {
        for trial in 0..40 {
            let scale = [1.0f32, 5.0, 20.0, 60.0][trial % 4];
            let mut x: Vec<f32> = (0..n).map(|_| rng.uniform(-scale, scale)).collect();
            if trial % 2 == 1 {
                // The causal mask: a -inf suffix (at least one element left).
                let cut = 1 + (rng.next() as usize) % n;
                for v in &mut x[cut..] {
                    *v = f32::NEG_INFINITY;
                }
            }
            let max = if trial % 5 == 4 {
                rng.uniform(-scale, scale)
            } else {
                x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
            };
            let (mut yn, mut yt) = (vec![0.0; n], vec![0.0; n]);
            let sn = native.soft_max(&mut yn, &x, max);
            let st = twin.soft_max(&mut yt, &x, max);
            assert_same_slices(&format!("soft_max n={n} trial={trial}"), &yn, &yt, &x);
            assert!(same64(sn, st), "soft_max n={n} trial={trial}: sum {sn:e} != {st:e}");
            calls += 1;
            values += n;
        }
    }
    format!("{}: soft_max: {calls} rows, {values} values and {calls} sums", flavour.name())
}

/// `swiglu` of every length 0..=70.
pub fn swiglu_every_length(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let mut rng = Rng::seeded(0x5716_1100);
    let (mut calls, mut values) = (0usize, 0usize);
    for n in 0..=70usize {
        for _ in 0..20 {
            let x: Vec<f32> = (0..n).map(|_| rng.uniform(-30.0, 30.0)).collect();
            let g: Vec<f32> = (0..n).map(|_| rng.wide()).collect();
            let (mut yn, mut yt) = (vec![0.0; n], vec![0.0; n]);
            native.swiglu(&mut yn, &x, &g);
            twin.swiglu(&mut yt, &x, &g);
            assert_same_slices(&format!("swiglu n={n}"), &yn, &yt, &x);
            calls += 1;
            values += n;
        }
    }
    format!("{}: swiglu: {calls} rows, {values} values", flavour.name())
}

/// `ggml_vec_dot_f32` of every length 0..=200 (the leftover loop).
pub fn dot_f32_every_length(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let mut rng = Rng::seeded(0xD07F_3200);
    let mut calls = 0usize;
    for n in 0..=200usize {
        for trial in 0..30 {
            let (x, y): (Vec<f32>, Vec<f32>) = match trial % 3 {
                0 => (
                    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect(),
                    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect(),
                ),
                1 => ((0..n).map(|_| rng.wide()).collect(), (0..n).map(|_| rng.wide()).collect()),
                // Softmax weights times values (the V·softmax shape), some zero.
                _ => {
                    (
                        (0..n)
                            .map(|_| {
                                if rng.next().is_multiple_of(4) {
                                    0.0
                                } else {
                                    rng.uniform(0.0, 1.0)
                                }
                            })
                            .collect(),
                        (0..n).map(|_| rng.uniform(-4.0, 4.0)).collect(),
                    )
                }
            };
            let a = native.dot_f32(&x, &y);
            let b = twin.dot_f32(&x, &y);
            assert!(
                same32(a, b),
                "dot_f32 n={n} trial={trial}: native {a:e} ({:#010x}) != portable {b:e} ({:#010x})",
                a.to_bits(),
                b.to_bits()
            );
            calls += 1;
        }
    }
    format!("{}: dot_f32: {calls} dot products (lengths 0..=200)", flavour.name())
}

/// `ggml_vec_dot_f16` of every length 0..=300 (several steps, the whole-vector leftovers
/// and the remainder), on values exactly representable in F16 (as the F16 cache holds).
pub fn dot_f16_every_length(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let mut rng = Rng::seeded(0xD07F_1600);
    let f16 =
        |v: f32| tiercheck_core::fp16::f16_bits_to_f32(tiercheck_core::fp16::f32_to_f16_bits(v));
    let mut calls = 0usize;
    for n in 0..=300usize {
        for trial in 0..6 {
            let (x, y): (Vec<f32>, Vec<f32>) = if trial % 2 == 0 {
                (
                    (0..n).map(|_| f16(rng.uniform(-2.0, 2.0))).collect(),
                    (0..n).map(|_| f16(rng.uniform(-2.0, 2.0))).collect(),
                )
            } else {
                (
                    (0..n).map(|_| f16(rng.uniform(-60.0, 60.0))).collect(),
                    (0..n).map(|_| f16(rng.uniform(-0.01, 0.01))).collect(),
                )
            };
            let a = native.dot_f16(&x, &y);
            let b = twin.dot_f16(&x, &y);
            assert!(
                same32(a, b),
                "dot_f16 n={n} trial={trial}: native {a:e} ({:#010x}) != portable {b:e} ({:#010x})",
                a.to_bits(),
                b.to_bits()
            );
            calls += 1;
        }
    }
    format!("{}: dot_f16: {calls} dot products (lengths 0..=300)", flavour.name())
}

/// The tinyBLAS dot on whole SIMD blocks, 1 to 64 of them.
pub fn sgemm_dot(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    let twin = portable(flavour);
    let w = flavour.width();
    let mut rng = Rng::seeded(0x59E3_3D07);
    let mut calls = 0usize;
    for blocks in 1..=64usize {
        let n = blocks * w;
        for trial in 0..20 {
            let (x, y): (Vec<f32>, Vec<f32>) = if trial % 2 == 0 {
                (
                    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect(),
                    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect(),
                )
            } else {
                ((0..n).map(|_| rng.wide()).collect(), (0..n).map(|_| rng.wide()).collect())
            };
            let a = native.sgemm_dot(&x, &y);
            let b = twin.sgemm_dot(&x, &y);
            assert!(
                same32(a, b),
                "sgemm_dot n={n} trial={trial}: native {a:e} ({:#010x}) != portable {b:e} ({:#010x})",
                a.to_bits(),
                b.to_bits()
            );
            calls += 1;
        }
    }
    format!("{}: sgemm_dot: {calls} dot products (lengths {w}..={})", flavour.name(), 64 * w)
}

/// The comparison can fail: `native` differs from every other flavour's twin.
pub fn differs_from_other_flavours(native: &dyn ElemOps, flavour: ElemFlavour) -> String {
    assert_eq!(native.flavour(), flavour);
    let mut rng = Rng::seeded(0x0DD_F1A5);
    let x: Vec<f32> = (0..4096).map(|_| rng.uniform(-20.0, 20.0)).collect();
    let y: Vec<f32> = (0..4096).map(|_| rng.uniform(-1.0, 1.0)).collect();
    for other in ElemFlavour::ALL {
        if other.loops() == flavour.loops() {
            continue;
        }
        let twin = portable(other);
        let (mut yn, mut yt) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        native.soft_max(&mut yn, &x, 20.0);
        twin.soft_max(&mut yt, &x, 20.0);
        let softmax_differs = yn.iter().zip(&yt).any(|(a, b)| a.to_bits() != b.to_bits());
        let dot_differs = (1..64).any(|k| {
            native.dot_f32(&x[..k * 61], &y[..k * 61]).to_bits()
                != twin.dot_f32(&x[..k * 61], &y[..k * 61]).to_bits()
        });
        assert!(softmax_differs || dot_differs, "native equals the {} twin", other.name());
    }
    format!("{}: differs from every other flavour's twin", flavour.name())
}

/// One conformance check: native kernels and their flavour in, a summary out (it
/// panics at the first difference).
pub type Check = fn(&dyn ElemOps, ElemFlavour) -> String;

/// The seven checks, by name (the trial names of [`crate::elem_conformance_main!`], less
/// the tinyBLAS one for flavours without tinyBLAS, [`checks_for`]).
pub const CHECKS: [(&str, Check); 7] = [
    ("expf_and_silu_match_the_twin", expf_and_silu),
    ("soft_max_every_length_matches_the_twin", soft_max_every_length),
    ("swiglu_every_length_matches_the_twin", swiglu_every_length),
    ("dot_f32_every_length_matches_the_twin", dot_f32_every_length),
    ("dot_f16_every_length_matches_the_twin", dot_f16_every_length),
    // Only for flavours whose tier calls tinyBLAS (`ElemFlavour::sgemm_min_rows`).
    (SGEMM_CHECK, sgemm_dot),
    // The comparison can fail: the native kernels differ from another flavour's twin.
    ("native_differs_from_other_flavours", differs_from_other_flavours),
];

/// The name of the tinyBLAS check, which exists only for flavours that call tinyBLAS.
pub const SGEMM_CHECK: &str = "sgemm_dot_matches_the_twin";

/// The checks that apply to `flavour`: all of [`CHECKS`], less the tinyBLAS one where the
/// tier never calls tinyBLAS (its kernels have no tinyBLAS dot to compare).
pub fn checks_for(flavour: ElemFlavour) -> Vec<(&'static str, Check)> {
    CHECKS
        .iter()
        .copied()
        .filter(|&(name, _)| name != SGEMM_CHECK || flavour.sgemm_min_rows().is_some())
        .collect()
}

/// What a conformance trial does on this machine.
pub enum Verdict {
    /// Run the checks on these native kernels.
    Run(&'static dyn ElemOps),
    /// Report the trial ignored, with this reason (the CPU lacks the kernels' features
    /// and no required lane uses the flavour).
    Ignore(String),
}

/// The lanes whose recipe runs `flavour`'s loops for the decoder's elementwise ops
/// (a flavour that differs only in its matmul choice shares the loops, [`ElemFlavour::loops`]).
pub fn lanes_using(flavour: ElemFlavour) -> Vec<&'static str> {
    tiercheck_core::LANES
        .iter()
        .filter(|l| l.recipe.elem.loops() == flavour.loops())
        .map(|l| l.name)
        .collect()
}

/// Decide a conformance trial: `native` is the architecture crate's kernels for
/// `flavour`, or why this CPU has none. Without them the trial is ignored with that
/// reason, unless `TIERCHECK_REQUIRE_LANES` ([`crate::require`]) requires a lane that
/// uses the flavour: then it is an error naming that lane.
pub fn verdict(
    flavour: ElemFlavour,
    native: Result<&'static dyn ElemOps, String>,
) -> Result<Verdict, String> {
    let required = crate::require::required_lanes()?;
    match native {
        Ok(n) => {
            if n.flavour() != flavour {
                return Err(format!(
                    "the native kernels implement {}, not {}",
                    n.flavour().name(),
                    flavour.name()
                ));
            }
            Ok(Verdict::Run(n))
        }
        Err(why) => {
            match lanes_using(flavour).into_iter().find(|l| required.iter().any(|r| r == l)) {
                Some(lane) => Err(format!(
                    "TIERCHECK_REQUIRE_LANES requires {lane}, whose elementwise flavour {} cannot \
                 run natively here: {why}",
                    flavour.name()
                )),
                None => Ok(Verdict::Ignore(why)),
            }
        }
    }
}

/// The `main` of an architecture crate's conformance test (a `harness = false` test
/// target with `libtest-mimic` as a dev-dependency): one trial
/// `elem/<flavour>/<check>` per entry of [`CHECKS`]. `$native` is an expression giving
/// `Result<&'static dyn ElemOps, String>` (the kernels, or why this CPU has none); see
/// [`verdict`] for when a trial runs, is ignored, or fails.
#[macro_export]
macro_rules! elem_conformance_main {
    ($flavour:expr, $native:expr) => {
        fn main() -> ::std::process::ExitCode {
            let args = ::libtest_mimic::Arguments::from_args();
            let flavour: ::tiercheck_core::elem::ElemFlavour = $flavour;
            let trials = $crate::elem_conformance::checks_for($flavour)
                .into_iter()
                .map(|(name, check)| {
                    ::libtest_mimic::Trial::ignorable_test(
                        format!("elem/{}/{name}", flavour.name()),
                        move || {
                            let native: Result<
                                &'static dyn ::tiercheck_core::elem::ElemOps,
                                String,
                            > = $native;
                            match $crate::elem_conformance::verdict(flavour, native)? {
                                $crate::elem_conformance::Verdict::Run(n) => {
                                    check(n, flavour);
                                    Ok(::libtest_mimic::Completion::Completed)
                                }
                                $crate::elem_conformance::Verdict::Ignore(why) => {
                                    Ok(::libtest_mimic::Completion::ignored_with(why))
                                }
                            }
                        },
                    )
                })
                .collect();
            ::libtest_mimic::run(&args, trials).exit_code()
        }
    };
}
