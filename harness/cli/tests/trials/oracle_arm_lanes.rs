//! The aarch64 lanes against ggml built by GCC for aarch64 (`ci/oracle`'s
//! `arm-dotprod` flavour, `-march=armv8.2-a+dotprod`), run under qemu-user with the
//! matching CPU model, bitwise:
//!
//! - `oracle/arm-dotprod/from_float/{q8_K,q8_0,q8_1}/aarch64-neon`: the lane's activation
//!   rules against the tier's `from_float`, 240 rows each (ties, both-sign maxima, tiny,
//!   wide range, NaN/Inf, ...);
//! - `oracle/arm-dotprod/vec_dot/<type>/aarch64-neon` (all twelve weight types): the
//!   lane's vec_dot (twin, and
//!   native on aarch64 hosts) against the tier's `vec_dot` with nrc = 1, on activations
//!   quantized by the tier, weights quantized by the reference quantizer, random and
//!   edge blocks; k includes odd block counts (the scalar tail of the legacy kernels).
//! - `oracle/arm-dotprod/matmul-repack/<type>/aarch64-neon-repack`: the lane's matmul
//!   (twin, and native on aarch64 hosts) against one `ggml_mul_mat` node with the weight
//!   in the `CPU_REPACK` buffer, k in {256, 512}, m in {1, 2, 3, 4, 5, 7, 8} (gemm groups
//!   and gemv leftovers), n in {8, 16, 24} (and 12 for the 4-row layouts), several
//!   activation kinds; weights from the reference quantizer (passed as bytes: ggml's
//!   aarch64 quantizer differs for q4_K); types q4_0, q8_0, q4_K and q6_K (layouts
//!   q4_0_4x4, q8_0_4x4, q4_K_8x4, q6_K_8x4), and iq4_nl (iq4_nl_4x4, on every aarch64
//!   build: the i8mm and SVE ones take the dotprod layout). Row counts ggml does not repack (12 for
//!   q4_K and q6_K, 10 for q4_0/q8_0) must be refused by the repack buffer and match the
//!   plain matmul, m in {1, 2, 3, 4, 5, 7} (q4_0 and q8_0 from two rows through
//!   llamafile's `tinyBLAS_Q0_ARM`).
//! - `oracle/arm-dotprod/matmul-plain/<type>/aarch64-neon` (all twelve weight types): the
//!   lane's matmul against one plain `ggml_mul_mat` node, n in {7, 8, 10, 16}, m in
//!   1..=8, k in {256, 512}: for Q4_0 and Q8_0 `tinyBLAS_Q0_ARM` from two activation
//!   rows, vec_dot for one; vec_dot for the other types. The same for
//!   `aarch64-neon-repack` on the types the dotprod build does not repack (Q4_1, Q5_0,
//!   Q5_1, Q2_K, Q3_K, IQ4_XS).
//! - `oracle/arm-i8mm/matmul-repack/<type>/aarch64-i8mm-repack`: the same against the
//!   `arm-i8mm` flavour (`-march=armv8.6-a+dotprod+i8mm`, qemu `max,sve=off`), layouts
//!   q4_K_8x8, q6_K_8x8, q4_0_4x8, q8_0_4x8. Row counts without a layout (12 for q4_K
//!   and q6_K, 10 for q4_0/q8_0) at m in {1, 2, 3, 4, 5, 7} (that build has no
//!   llamafile: at even m its plain matmul runs the `nrc == 2` tiles, as `aarch64-i8mm`).
//! - `oracle/arm-i8mm/vec_dot2/<type>/aarch64-i8mm`: the 2x2 `smmla` tile (`nrc == 2`)
//!   of q4_0, q8_0, q4_K and q6_K against the tier's `vec_dot` with `nrc = 2`, on
//!   activations quantized by the tier, through the lane's `matmul_quantized` on two
//!   weight rows and two activation rows (twin, and native on aarch64 hosts);
//! - `oracle/arm-i8mm/matmul-plain/<type>/aarch64-i8mm`: the lane's matmul against one
//!   plain `ggml_mul_mat` node of the i8mm build, n in {7, 8, 10, 16} and m in 1..=8
//!   (tiles where both are even, `nrc == 1` otherwise), k in {256, 512}.
//!
//! - `oracle/<arm-i8mm|arm-sve128|arm-sve256>/{vec_dot,matmul-plain}/<type>/<lane>`: the
//!   eight other types on each build's plain lane (Q4_1 with its `nrc == 2` tile, also
//!   `vec_dot2`; Q2_K with the SVE builds' own kernels, the rest with their NEON code),
//!   and the plain matmul of its repack lane for those it does not repack.
//!
//! Ignored with the reason without the oracle; failures under
//! `TIERCHECK_REQUIRE_ORACLE=1`.

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::quant::weights;
use tiercheck_core::{GgmlType, Kernels, WeightMatrix};
use tiercheck_lanes as lanes;
use tiercheck_model::kernel_inputs::{edge_blocks, random_blocks, Rng, RowKind};
use tiercheck_oracle::{ArmDriver, ArmTier, MulmatJob, MulmatMode, OracleConfig, OracleError};
use tiercheck_testkit::suites::{trial_name, Selection};

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_arm_lanes";

/// The suite's trials, in the order they run.
pub fn trials(selection: &Selection) -> Vec<Trial> {
    let mut trials = Vec::new();
    let neon = lanes::find("aarch64-neon").expect("lane");
    for (ty, rule) in [
        (GgmlType::Q8_K, neon.recipe.act_k),
        (GgmlType::Q8_0, neon.recipe.act_legacy),
        (GgmlType::Q8_1, tiercheck_core::quant::ActRule::Q8_1Neon),
    ] {
        trials.push(trial(
            format!("oracle/arm-dotprod/from_float/{}/aarch64-neon", ty.name()),
            move |d| {
                let mut rng = Rng::new(0xA4C4 + ty.id() as u64);
                let mut rows = Vec::new();
                for k in [256usize, 512, 4096] {
                    for kind in RowKind::ALL {
                        for _ in 0..8 {
                            rows.push((k, kind.row(&mut rng, k)));
                        }
                    }
                }
                let mut bad = Vec::new();
                for (i, (k, x)) in rows.iter().enumerate() {
                    let theirs = d.from_float(ty.id(), *k, x).map_err(|e| e.to_string())?;
                    let ours = rule.quantize(x).map_err(|e| e.to_string())?;
                    if ours != theirs {
                        bad.push(format!("row {i} (k={k})"));
                    }
                }
                report(rows.len(), bad)
            },
        ));
    }
    for &ty in weights::QUANTIZABLE {
        trials.push(trial(
            format!("oracle/arm-dotprod/vec_dot/{}/aarch64-neon", ty.name()),
            move |d| check_vec_dot(d, ty, "aarch64-neon"),
        ));
    }
    for &ty in weights::QUANTIZABLE {
        trials.push(trial(
            format!("oracle/arm-dotprod/matmul-plain/{}/aarch64-neon", ty.name()),
            move |d| check_matmul_plain(d, ty, "aarch64-neon"),
        ));
    }
    // The types the dotprod build does not repack (and the lane multiplies): the repack
    // lane's plain path against the plain matmul (ggml's repack buffer refuses them).
    for ty in [
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::IQ4_XS,
    ] {
        trials.push(trial(
            format!("oracle/arm-dotprod/matmul-plain/{}/aarch64-neon-repack", ty.name()),
            move |d| check_matmul_plain(d, ty, "aarch64-neon-repack"),
        ));
    }
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
    ] {
        trials.push(trial(
            format!("oracle/arm-dotprod/matmul-repack/{}/aarch64-neon-repack", ty.name()),
            move |d| check_matmul_repack(d, ty),
        ));
    }
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
    ] {
        trials.push(trial_on(
            ArmTier::I8mm,
            format!("oracle/arm-i8mm/matmul-repack/{}/aarch64-i8mm-repack", ty.name()),
            move |d| {
                check_matmul_repack_i8mm(
                    d,
                    ty,
                    &tiercheck_core::arch::aarch64::i8mm_repack::AARCH64_I8MM_REPACK,
                )
            },
        ));
    }
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        trials.push(trial_on(
            ArmTier::I8mm,
            format!("oracle/arm-i8mm/vec_dot2/{}/aarch64-i8mm", ty.name()),
            move |d| check_vec_dot2(d, ty, "aarch64-i8mm"),
        ));
        trials.push(trial_on(
            ArmTier::I8mm,
            format!("oracle/arm-i8mm/matmul-plain/{}/aarch64-i8mm", ty.name()),
            move |d| check_matmul_plain(d, ty, "aarch64-i8mm"),
        ));
    }
    // ggml's SVE variants at their vector lengths (armv8.6_2 at 128 bits, armv8.6_1 at
    // 256): the nrc = 1 vec_dot (SVE kernels for Q4_0/Q8_0), the 2x2 tiles (SVE + i8mm for
    // the K-quants), one plain mul_mat node, and the repack buffer.
    let sve128 = ArmTier::Sve128;
    for (tier, plain, repacked) in [
        (
            ArmTier::Sve128,
            "aarch64-sve128",
            &tiercheck_core::arch::aarch64::sve_repack::AARCH64_SVE128_REPACK,
        ),
        (
            ArmTier::Sve256,
            "aarch64-sve256",
            &tiercheck_core::arch::aarch64::sve_repack::AARCH64_SVE256_REPACK,
        ),
    ] {
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
            let (t, b) = (ty.name(), tier.name());
            trials.push(trial_on(tier, format!("oracle/{b}/vec_dot/{t}/{plain}"), move |d| {
                check_vec_dot(d, ty, plain)
            }));
            trials.push(trial_on(tier, format!("oracle/{b}/vec_dot2/{t}/{plain}"), move |d| {
                check_vec_dot2(d, ty, plain)
            }));
            trials.push(trial_on(tier, format!("oracle/{b}/matmul-plain/{t}/{plain}"), move |d| {
                check_matmul_plain(d, ty, plain)
            }));
            trials.push(trial_on(
                tier,
                format!("oracle/{b}/matmul-repack/{t}/{}", repacked.name),
                move |d| check_matmul_repack_sve(d, ty, repacked),
            ));
        }
    }
    // The other weight types, in the NEON code of each build (Q4_1 with its `nrc == 2`
    // tile; the SVE builds' Q2_K and Q3_K have SVE kernels, not reproduced): vec_dot,
    // the tile and the plain matmul, and the repack lanes' plain path for those the
    // builds do not repack (all but Q5_K and IQ4_NL).
    let neon_types = [
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q5_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ];
    for (tier, plain, repacked) in [
        (ArmTier::I8mm, "aarch64-i8mm", "aarch64-i8mm-repack"),
        (ArmTier::Sve128, "aarch64-sve128", "aarch64-sve128-repack"),
        (ArmTier::Sve256, "aarch64-sve256", "aarch64-sve256-repack"),
    ] {
        let extra: &[GgmlType] = &[GgmlType::Q2_K, GgmlType::Q3_K];
        for &ty in neon_types.iter().chain(extra) {
            let (t, b) = (ty.name(), tier.name());
            trials.push(trial_on(tier, format!("oracle/{b}/vec_dot/{t}/{plain}"), move |d| {
                check_vec_dot(d, ty, plain)
            }));
            trials.push(trial_on(tier, format!("oracle/{b}/matmul-plain/{t}/{plain}"), move |d| {
                check_matmul_plain(d, ty, plain)
            }));
            if ty == GgmlType::Q4_1 {
                trials.push(trial_on(tier, format!("oracle/{b}/vec_dot2/{t}/{plain}"), move |d| {
                    check_vec_dot2(d, ty, plain)
                }));
            }
            if matches!(ty, GgmlType::IQ4_NL | GgmlType::Q5_K) && tier != ArmTier::I8mm {
                let lane = if tier == ArmTier::Sve128 {
                    &tiercheck_core::arch::aarch64::sve_repack::AARCH64_SVE128_REPACK
                } else {
                    &tiercheck_core::arch::aarch64::sve_repack::AARCH64_SVE256_REPACK
                };
                trials.push(trial_on(
                    tier,
                    format!("oracle/{b}/matmul-repack/{t}/{repacked}"),
                    move |d| check_matmul_repack_sve(d, ty, lane),
                ));
            }
            if !matches!(ty, GgmlType::Q5_K | GgmlType::IQ4_NL) {
                trials.push(trial_on(
                    tier,
                    format!("oracle/{b}/matmul-plain/{t}/{repacked}"),
                    move |d| check_matmul_plain(d, ty, repacked),
                ));
            }
        }
    }
    // The checks can fail: a neighbouring lane's kernels differ from each SVE build where
    // its own lane models a different order (NEON's unfused vmlaq and two vaddvq against
    // SVE-128; four lanes against eight and unfused against fused gemms at 256 bits).
    let sve256 = ArmTier::Sve256;
    for (tier, kind, ty, wrong) in [
        (sve128, "vec_dot", GgmlType::Q4_0, "aarch64-i8mm"),
        (sve128, "vec_dot", GgmlType::Q8_0, "aarch64-i8mm"),
        (sve128, "vec_dot2", GgmlType::Q4_K, "aarch64-i8mm"),
        (sve128, "vec_dot2", GgmlType::Q6_K, "aarch64-i8mm"),
        (sve256, "vec_dot", GgmlType::Q4_0, "aarch64-sve128"),
        (sve256, "vec_dot", GgmlType::Q8_0, "aarch64-sve128"),
        (sve256, "matmul-repack", GgmlType::Q4_K, "aarch64-sve128-repack"),
        // The i8mm builds' Q5_0 tail takes negative codes as unsigned bytes.
        (ArmTier::I8mm, "vec_dot", GgmlType::Q5_0, "aarch64-neon"),
        (sve128, "vec_dot", GgmlType::Q5_0, "aarch64-neon"),
        // Q2_K's SVE kernels: lane accumulators and one FADDV, four or eight lanes.
        (sve128, "vec_dot", GgmlType::Q2_K, "aarch64-neon"),
        (sve256, "vec_dot", GgmlType::Q2_K, "aarch64-sve128"),
    ] {
        let name = format!("oracle/{}/{kind}/{}/{wrong}_differs", tier.name(), ty.name());
        trials.push(trial_on(tier, name, move |d| {
            let r = match kind {
                "vec_dot2" => check_vec_dot2(d, ty, wrong),
                "vec_dot" => check_vec_dot(d, ty, wrong),
                _ => {
                    let lane = lanes::find(wrong)?;
                    let layout = tiercheck_core::arch::aarch64::i8mm_repack::arm_i8mm_layout(ty)
                        .expect("repacked");
                    check_repack_lane(d, ty, lane, layout, &[1, 2, 3, 4, 5, 7])
                }
            };
            match r {
                Err(e) if e.contains("differ from ggml") => Ok(1000),
                Err(e) => Err(e),
                Ok(n) => Err(format!("{wrong} reproduces all {n} cases of the {} build", d.tier())),
            }
        }));
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    let claims = tiercheck_testkit::claims::claim_trials(SUITE, selection, &trials);
    trials.extend(claims);
    trials
}

fn report(cases: usize, bad: Vec<String>) -> Result<usize, String> {
    if bad.is_empty() {
        Ok(cases)
    } else {
        Err(format!(
            "{} of {cases} cases differ from ggml: {}",
            bad.len(),
            bad.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
        ))
    }
}

fn trial(
    name: String,
    f: impl FnOnce(&ArmDriver) -> Result<usize, String> + Send + 'static,
) -> Trial {
    trial_on(ArmTier::Dotprod, name, f)
}

fn trial_on(
    tier: ArmTier,
    name: String,
    f: impl FnOnce(&ArmDriver) -> Result<usize, String> + Send + 'static,
) -> Trial {
    tiercheck_testkit::claims::tracked(trial_name(SUITE, name), move || {
        let required = std::env::var("TIERCHECK_REQUIRE_ORACLE").is_ok_and(|v| v == "1");
        let driver = match ArmDriver::for_tier(&OracleConfig::from_env(), tier) {
            Ok(d) => d,
            Err(e) if required => {
                return Err(Failed::from(format!("TIERCHECK_REQUIRE_ORACLE=1 but {e}")))
            }
            Err(OracleError::Unavailable(e)) => {
                return Ok(Completion::ignored_with(format!(
                    "oracle unavailable ({e}); run ci/oracle"
                )))
            }
            Err(e) => return Err(Failed::from(format!("{tier}: {e}"))),
        };
        let n = f(&driver)?;
        if n < 200 {
            return Err(format!("only {n} cases ran").into());
        }
        Ok(Completion::Completed)
    })
}

fn check_vec_dot(d: &ArmDriver, ty: GgmlType, lane_name: &str) -> Result<usize, String> {
    let lane = lanes::find(lane_name)?;
    let mut impls: Vec<(&str, &dyn Kernels)> = vec![("portable", lane.portable)];
    if let Ok(native) = lanes::native(lane) {
        impls.push(("native", native));
    }
    let act_ty = lane.portable.act_rule(ty).map_err(|e| e.to_string())?.format();
    let sizes: &[usize] =
        if ty.block_size() == 256 { &[256, 512, 1024, 4096] } else { &[32, 96, 160, 512, 4096] };
    let mut rng = Rng::new(0xD0D0 + ty.id() as u64);
    let mut cases = 0;
    let mut bad = Vec::new();
    for &k in sizes {
        let nb = k / ty.block_size();
        // One batch per k: weights and tier-quantized activations for every kind x variant.
        let (mut xs, mut ys, mut labels) = (Vec::new(), Vec::new(), Vec::new());
        for kind in RowKind::FINITE {
            let a = kind.row(&mut rng, k.max(32));
            let act = d.from_float(act_ty.id(), k, &a[..k]).map_err(|e| e.to_string())?;
            for variant in 0..6 {
                let w = match variant {
                    0 | 1 => {
                        let wx =
                            RowKind::FINITE[(variant * 4 + kind as usize) % 9].row(&mut rng, k);
                        weights::quantize(ty, &wx, 1, k).map_err(|e| e.to_string())?
                    }
                    2 | 3 => random_blocks(&mut rng, ty, nb),
                    v => edge_blocks(&mut rng, ty, nb, v),
                };
                xs.extend_from_slice(&w);
                ys.extend_from_slice(&act);
                labels.push((kind.name(), variant, w, act.clone()));
            }
        }
        let theirs = d.vec_dot(ty.id(), k, 1, &xs, &ys).map_err(|e| e.to_string())?;
        for ((kind, variant, w, act), want) in labels.iter().zip(&theirs) {
            for (name, kernels) in &impls {
                let got = kernels.vec_dot(ty, w, act).map_err(|e| e.to_string())?;
                cases += 1;
                // NaN results: compare as NaN (generated-NaN bits are not portable).
                if got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan()) {
                    bad.push(format!(
                        "{name} k={k} act={kind} weights#{variant}: got {got:e}, want {want:e}"
                    ));
                }
            }
        }
    }
    report(cases, bad)
}

/// One repacked-matmul case: weights (reference quantizer), activations, and the mode
/// ggml runs it in.
struct MatmulCase {
    label: String,
    mode: MulmatMode,
    k: usize,
    n: usize,
    m: usize,
    w: Vec<u8>,
    x: Vec<f32>,
    /// The layout ggml must report (`None`: the repack buffer must refuse the weight).
    layout: Option<&'static str>,
}

fn check_matmul_repack(d: &ArmDriver, ty: GgmlType) -> Result<usize, String> {
    let layout = tiercheck_core::arch::aarch64::neon_repack::arm_dotprod_layout(ty)
        .expect("a repacked type");
    let plain_ms: &[usize] = &[1, 2, 3, 4, 5, 7];
    check_repack_lane(
        d,
        ty,
        &tiercheck_core::arch::aarch64::neon_repack::AARCH64_NEON_REPACK,
        layout,
        plain_ms,
    )
}

fn check_matmul_repack_i8mm(
    d: &ArmDriver,
    ty: GgmlType,
    lane: &'static tiercheck_core::lane::Lane,
) -> Result<usize, String> {
    let layout =
        tiercheck_core::arch::aarch64::i8mm_repack::arm_i8mm_layout(ty).expect("a repacked type");
    check_repack_lane(d, ty, lane, layout, &[1, 2, 3, 4, 5, 7])
}

/// An SVE lane's repacked matmul: the layout its scheme picks for 16 rows.
fn check_matmul_repack_sve(
    d: &ArmDriver,
    ty: GgmlType,
    lane: &'static tiercheck_core::lane::Lane,
) -> Result<usize, String> {
    let (layout, narrow) = if lane.name == "aarch64-sve256-repack" {
        use tiercheck_core::arch::aarch64::sve_repack::sve256_layout;
        // The no-layout row count of an 8-column layout is 12 (check_repack_lane_with).
        let main = sve256_layout(ty, 16);
        (main, main.filter(|l| l.cols() == 8).and_then(|_| sve256_layout(ty, 12)))
    } else {
        (tiercheck_core::arch::aarch64::i8mm_repack::arm_i8mm_layout(ty), None)
    };
    let layout = layout.expect("a repacked type");
    check_repack_lane_with(d, ty, lane, layout, narrow, &[1, 2, 3, 4, 5, 7])
}

fn check_repack_lane(
    d: &ArmDriver,
    ty: GgmlType,
    lane: &'static tiercheck_core::lane::Lane,
    layout: tiercheck_core::repack::RepackLayout,
    plain_ms: &[usize],
) -> Result<usize, String> {
    check_repack_lane_with(d, ty, lane, layout, None, plain_ms)
}

/// `narrow`: the layout the tier falls back to for the row count the main layout does
/// not divide (ggml's q4_0_8x8, then q4_0_4x8, at 256-bit SVE); `None`: that count stays
/// plain.
fn check_repack_lane_with(
    d: &ArmDriver,
    ty: GgmlType,
    lane: &'static tiercheck_core::lane::Lane,
    layout: tiercheck_core::repack::RepackLayout,
    narrow: Option<tiercheck_core::repack::RepackLayout>,
    plain_ms: &[usize],
) -> Result<usize, String> {
    let mut impls: Vec<(&str, &dyn Kernels)> = vec![("portable", lane.portable)];
    if let Ok(native) = lanes::native(lane) {
        impls.push(("native", native));
    }
    let mut rng = Rng::new(0x4E9A + ty.id() as u64 + 0x100 * (layout.interleave() as u64 - 4));
    let mut cases = Vec::new();
    let mut ns = vec![8usize, 16, 24];
    if layout.cols() == 4 {
        ns.push(12);
    }
    let kinds =
        [RowKind::Normal, RowKind::Outlier, RowKind::Ties, RowKind::ZeroBlocks, RowKind::Tiny];
    for k in [256usize, 512] {
        for &n in &ns {
            for m in [1usize, 2, 3, 4, 5, 7, 8] {
                for (v, kind) in kinds.iter().enumerate() {
                    let wkind = RowKind::FINITE[(v + n + m) % RowKind::FINITE.len()];
                    let wx: Vec<f32> = (0..n).flat_map(|_| wkind.row(&mut rng, k)).collect();
                    let w = weights::quantize(ty, &wx, n, k).map_err(|e| e.to_string())?;
                    let x: Vec<f32> = (0..m).flat_map(|_| kind.row(&mut rng, k)).collect();
                    cases.push(MatmulCase {
                        label: format!("k={k} n={n} m={m} act={} w={}", kind.name(), wkind.name()),
                        mode: MulmatMode::Repack,
                        k,
                        n,
                        m,
                        w,
                        x,
                        layout: Some(layout.name()),
                    });
                }
            }
        }
        // Row counts without a layout: refused by the repack buffer, plain in ggml.
        let n = if layout.cols() == 8 { 12 } else { 10 };
        for &m in plain_ms {
            for kind in [RowKind::Normal, RowKind::Ties] {
                let wx: Vec<f32> = (0..n).flat_map(|_| RowKind::Normal.row(&mut rng, k)).collect();
                let w = weights::quantize(ty, &wx, n, k).map_err(|e| e.to_string())?;
                let x: Vec<f32> = (0..m).flat_map(|_| kind.row(&mut rng, k)).collect();
                // With a fallback layout the row count is repacked: only the repack
                // buffer's result is this lane's.
                let modes: &[MulmatMode] = if narrow.is_some() {
                    &[MulmatMode::Repack]
                } else {
                    &[MulmatMode::Repack, MulmatMode::Plain]
                };
                for &mode in modes {
                    cases.push(MatmulCase {
                        label: format!("k={k} n={n} m={m} act={} {mode:?}", kind.name()),
                        mode,
                        k,
                        n,
                        m,
                        w: w.clone(),
                        x: x.clone(),
                        layout: match mode {
                            MulmatMode::Repack => narrow.map(|l| l.name()),
                            _ => None,
                        },
                    });
                }
            }
        }
    }
    let jobs: Vec<MulmatJob<'_>> = cases
        .iter()
        .map(|c| MulmatJob {
            mode: c.mode,
            ty: ty.id(),
            k: c.k,
            n: c.n,
            m: c.m,
            threads: 1 + c.m % 2,
            weights: &c.w,
            acts: &c.x,
        })
        .collect();
    let results = d.mulmat_batch(&jobs).map_err(|e| e.to_string())?;
    let mut count = 0;
    let mut bad = Vec::new();
    for (c, res) in cases.iter().zip(results) {
        let want = match (c.mode, c.layout, res) {
            (MulmatMode::Repack, None, Err(OracleError::NoRepackLayout { .. })) => continue,
            (MulmatMode::Repack, None, other) => {
                bad.push(format!("{}: expected no repack layout, got {other:?}", c.label));
                continue;
            }
            (_, _, Err(e)) => return Err(format!("{}: {e}", c.label)),
            (_, want_layout, Ok(r)) => {
                if want_layout.is_some() && (!r.repacked || r.layout.as_deref() != want_layout) {
                    bad.push(format!("{}: expected layout {want_layout:?}, got {r:?}", c.label));
                    continue;
                }
                r.out
            }
        };
        let w = WeightMatrix::new(ty, c.n, c.k, &c.w).map_err(|e| e.to_string())?;
        for (name, kernels) in &impls {
            let got = kernels.matmul(&w, &c.x, c.m).map_err(|e| e.to_string())?;
            count += 1;
            let diff = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()));
            if got.len() != want.len() {
                bad.push(format!("{name} {}: {} outputs, want {}", c.label, got.len(), want.len()));
            } else if let Some(i) = diff {
                bad.push(format!(
                    "{name} {}: output {i} (row {}, col {}) got {:e}, want {:e}",
                    c.label,
                    i / c.n,
                    i % c.n,
                    got[i],
                    want[i]
                ));
            }
        }
    }
    report(count, bad)
}

fn impls_of(name: &str) -> Result<Vec<(&'static str, &'static dyn Kernels)>, String> {
    let lane = lanes::find(name)?;
    let mut impls: Vec<(&str, &dyn Kernels)> = vec![("portable", lane.portable)];
    if let Ok(native) = lanes::native(lane) {
        impls.push(("native", native));
    }
    Ok(impls)
}

fn check_vec_dot2(d: &ArmDriver, ty: GgmlType, lane_name: &str) -> Result<usize, String> {
    let impls = impls_of(lane_name)?;
    let lane = lanes::find(lane_name)?;
    let act_ty = lane.portable.act_rule(ty).map_err(|e| e.to_string())?.format();
    let sizes: &[usize] = if ty.block_size() == 256 { &[256, 512, 1024] } else { &[32, 96, 512] };
    let mut rng = Rng::new(0xD2D2 + ty.id() as u64);
    let (mut cases, mut bad) = (0, Vec::new());
    for &k in sizes {
        let nb = k / ty.block_size();
        let (mut xs, mut ys, mut labels) = (Vec::new(), Vec::new(), Vec::new());
        for (c, kind) in RowKind::FINITE.iter().enumerate() {
            for variant in 0..4 {
                // Two weight rows (quantized rows, random or edge blocks) and two
                // activation rows of different kinds, quantized by the tier.
                let w: Vec<u8> = (0..2)
                    .flat_map(|r| match (variant + r) % 4 {
                        0 | 1 => {
                            let wx = RowKind::FINITE[(c + 3 * r + variant) % 9].row(&mut rng, k);
                            weights::quantize(ty, &wx, 1, k).expect("quantize")
                        }
                        2 => random_blocks(&mut rng, ty, nb),
                        v => edge_blocks(&mut rng, ty, nb, v + r),
                    })
                    .collect();
                let mut act = Vec::new();
                for r in 0..2 {
                    let a = RowKind::FINITE[(c + r * 5) % 9].row(&mut rng, k.max(32));
                    act.extend(d.from_float(act_ty.id(), k, &a[..k]).map_err(|e| e.to_string())?);
                }
                xs.extend_from_slice(&w);
                ys.extend_from_slice(&act);
                labels.push((kind.name(), variant, w, act));
            }
        }
        let theirs = d.vec_dot(ty.id(), k, 2, &xs, &ys).map_err(|e| e.to_string())?;
        for ((kind, variant, w, act), want) in labels.iter().zip(theirs.chunks_exact(4)) {
            let wm = WeightMatrix::new(ty, 2, k, w).map_err(|e| e.to_string())?;
            for (name, kernels) in &impls {
                // `[x0.y0, x1.y0, x0.y1, x1.y1]`: the matmul's out[i * n + j] order.
                let got = kernels.matmul_quantized(&wm, act, 2).map_err(|e| e.to_string())?;
                cases += 1;
                if let Some(i) = (0..4).find(|&i| {
                    got[i].to_bits() != want[i].to_bits() && !(got[i].is_nan() && want[i].is_nan())
                }) {
                    bad.push(format!(
                        "{name} k={k} act={kind} weights#{variant}: tile value {i} got {:e}, want {:e}",
                        got[i], want[i]
                    ));
                }
            }
        }
    }
    report(cases * 4, bad)
}

/// The lane's matmul against one plain `ggml_mul_mat` node of the driver's build.
fn check_matmul_plain(d: &ArmDriver, ty: GgmlType, lane: &str) -> Result<usize, String> {
    let impls = impls_of(lane)?;
    let mut rng = Rng::new(0x9A1A + ty.id() as u64);
    let mut cases = Vec::new();
    for k in [256usize, 512] {
        for n in [7usize, 8, 10, 16] {
            for m in 1usize..=8 {
                let kind = RowKind::FINITE[(n + m) % RowKind::FINITE.len()];
                let wkind = RowKind::FINITE[(n + 2 * m + k / 256) % RowKind::FINITE.len()];
                let wx: Vec<f32> = (0..n).flat_map(|_| wkind.row(&mut rng, k)).collect();
                let w = weights::quantize(ty, &wx, n, k).map_err(|e| e.to_string())?;
                let x: Vec<f32> = (0..m).flat_map(|_| kind.row(&mut rng, k)).collect();
                cases.push(MatmulCase {
                    label: format!("k={k} n={n} m={m} act={} w={}", kind.name(), wkind.name()),
                    mode: MulmatMode::Plain,
                    k,
                    n,
                    m,
                    w,
                    x,
                    layout: None,
                });
            }
        }
    }
    let jobs: Vec<MulmatJob<'_>> = cases
        .iter()
        .map(|c| MulmatJob {
            mode: c.mode,
            ty: ty.id(),
            k: c.k,
            n: c.n,
            m: c.m,
            threads: 1,
            weights: &c.w,
            acts: &c.x,
        })
        .collect();
    let results = d.mulmat_batch(&jobs).map_err(|e| e.to_string())?;
    let (mut count, mut bad) = (0, Vec::new());
    for (c, res) in cases.iter().zip(results) {
        let want = res.map_err(|e| format!("{}: {e}", c.label))?.out;
        let w = WeightMatrix::new(ty, c.n, c.k, &c.w).map_err(|e| e.to_string())?;
        for (name, kernels) in &impls {
            let got = kernels.matmul(&w, &c.x, c.m).map_err(|e| e.to_string())?;
            count += got.len();
            if let Some(i) = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
            {
                bad.push(format!(
                    "{name} {}: output {i} (row {}, col {}) got {:e}, want {:e}",
                    c.label,
                    i / c.n,
                    i % c.n,
                    got[i],
                    want[i]
                ));
            } else if got.len() != want.len() {
                bad.push(format!("{name} {}: {} outputs, want {}", c.label, got.len(), want.len()));
            }
        }
    }
    report(count, bad)
}
