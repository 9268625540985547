//! The native aarch64 lanes' dot products give their portable twins' bits, on shapes the
//! golden suite does not hold: every block count from 1 to 9 (the legacy kernels' pair
//! loops with and without their scalar tail, 1 to 3 K-quant superblocks), weights of
//! the reference quantizer over several value ranges, activations quantized by the
//! lane. Per lane (`aarch64-neon`, `aarch64-i8mm`, `aarch64-sve128`, `aarch64-sve256`)
//! and weight type: `vec_dot` (the `nrc == 1` kernels, incl. the i8mm and SVE builds'
//! Q5_0 tail), the quantized activation row itself, and a 2x2 `matmul_quantized`
//! (the i8mm builds' `nrc == 2` tiles where the type has one). The twins are what the
//! oracle trials prove against ggml; these trials hold the native forms to them where
//! the oracle cannot run (the aarch64 test binary under qemu-user).
//!
//! A lane whose CPU features are absent is an ignored trial with the reason, and a
//! failure when `TIERCHECK_REQUIRE_LANES` requires it. Runs under qemu-user when
//! cross-built.

#[cfg(target_arch = "aarch64")]
mod native {
    use libtest_mimic::{Arguments, Completion, Failed, Trial};
    use tiercheck_core::quant::weights;
    use tiercheck_core::{GgmlType, Kernels, Lane, WeightMatrix};

    /// The lanes whose plain kernels are checked here.
    const LANES: &[&str] = &["aarch64-neon", "aarch64-i8mm", "aarch64-sve128", "aarch64-sve256"];

    /// xorshift64*: reproducible values without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// Uniform in [-1, 1).
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
    }

    /// `len` values of kind `kind`: uniform, one-signed with an offset (the mins of the
    /// `_1` and K types at work), wide-ranging (scales of very different size per
    /// block), and tiny (subnormal-sized products).
    fn values(rng: &mut Rng, kind: usize, len: usize) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let u = rng.unit();
                match kind {
                    0 => u,
                    1 => 0.75 + 0.25 * u,
                    2 => u * f32::powi(2.0, (i / 32 % 24) as i32 - 12),
                    _ => u * 1e-20,
                }
            })
            .collect()
    }

    fn lane(name: &str) -> &'static Lane {
        tiercheck_core::arch::LANES
            .iter()
            .copied()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("no lane {name}"))
    }

    fn native(name: &str) -> Result<&'static dyn Kernels, String> {
        let entry = tiercheck_aarch64::NATIVE
            .iter()
            .find(|n| n.lane == name)
            .ok_or_else(|| format!("no native entry for {name}"))?;
        (entry.kernels)().map_err(|e| e.to_string())
    }

    /// Whether two results are the same bits (NaN on both sides counts as equal).
    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// Every shape and input kind of `ty` on `name`: native against twin, bitwise.
    fn check(name: &str, ty: GgmlType, native: &dyn Kernels) -> Result<(), Failed> {
        let twin = lane(name).portable;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ty as u64);
        let max_blocks = if ty.block_size() == 256 { 3 } else { 9 };
        for nb in 1..=max_blocks {
            let k = nb * ty.block_size();
            for kind in 0..4 {
                let w = values(&mut rng, kind, 2 * k);
                let wq = weights::quantize(ty, &w, 2, k).map_err(|e| e.to_string())?;
                let x = values(&mut rng, (kind + 1) % 4, 2 * k);
                let a0 = twin.quantize_act(ty, &x[..k]).map_err(|e| e.to_string())?;
                let a1 = twin.quantize_act(ty, &x[k..]).map_err(|e| e.to_string())?;
                let n0 = native.quantize_act(ty, &x[..k]).map_err(|e| e.to_string())?;
                if n0 != a0 {
                    return Err(
                        format!("{ty:?} k={k} kind {kind}: quantized activations differ").into()
                    );
                }
                let row = wq.len() / 2;
                for (r, wr) in [&wq[..row], &wq[row..]].into_iter().enumerate() {
                    let t = twin.vec_dot(ty, wr, &a0).map_err(|e| e.to_string())?;
                    let n = native.vec_dot(ty, wr, &a0).map_err(|e| e.to_string())?;
                    if !same(t, n) {
                        return Err(format!(
                            "{ty:?} k={k} kind {kind} row {r}: vec_dot native {n:e} ({:#010x}), \
                             twin {t:e} ({:#010x})",
                            n.to_bits(),
                            t.to_bits()
                        )
                        .into());
                    }
                }
                let wm = WeightMatrix::new(ty, 2, k, &wq).map_err(|e| e.to_string())?;
                let act = [a0, a1].concat();
                let t = twin.matmul_quantized(&wm, &act, 2).map_err(|e| e.to_string())?;
                let n = native.matmul_quantized(&wm, &act, 2).map_err(|e| e.to_string())?;
                if t.len() != n.len() || t.iter().zip(&n).any(|(a, b)| !same(*a, *b)) {
                    return Err(format!(
                        "{ty:?} k={k} kind {kind}: 2x2 matmul native {n:?}, twin {t:?}"
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    pub fn main() -> std::process::ExitCode {
        let args = Arguments::from_args();
        let mut trials = Vec::new();
        for &name in LANES {
            for &ty in weights::QUANTIZABLE {
                trials.push(Trial::ignorable_test(
                    format!("vec_dot/{name}/{}", ty.name()),
                    move || match native(name) {
                        Ok(k) => check(name, ty, k).map(|()| Completion::Completed),
                        Err(why) => {
                            if tiercheck_testkit::require::lane_required(name)? {
                                Err(format!(
                                    "TIERCHECK_REQUIRE_LANES requires {name}, which cannot run \
                                     natively here: {why}"
                                )
                                .into())
                            } else {
                                Ok(Completion::ignored_with(why))
                            }
                        }
                    },
                ));
            }
        }
        libtest_mimic::run(&args, trials).exit_code()
    }
}

#[cfg(target_arch = "aarch64")]
fn main() -> std::process::ExitCode {
    native::main()
}

/// Other architectures have no aarch64 kernels to compare: no trials.
#[cfg(not(target_arch = "aarch64"))]
fn main() {}
