//! `tiercheck_testkit::require` (the reading of `TIERCHECK_REQUIRE_LANES` shared by every
//! suite, including the architecture crates' tests) agrees with the harness's target
//! tables (`tiercheck_targets`, a full TOML parser) on every committed table.

use tiercheck_targets as targets;
use tiercheck_testkit::require;

#[test]
fn auto_resolves_as_the_harness_does_for_this_target() {
    assert_eq!(require::triple(), targets::TRIPLE);
    assert_eq!(
        require::targets_dir().canonicalize().unwrap(),
        targets::targets_dir().canonicalize().unwrap()
    );
    let table = targets::load(&targets::targets_dir(), targets::TRIPLE).unwrap();
    for m in &table.models {
        let cpu = Some(m.qemu_cpu.as_str()).filter(|c| !c.is_empty());
        assert_eq!(
            require::resolve("auto", &m.qemu_cpu).unwrap(),
            targets::required_lanes_for(targets::TRIPLE, cpu).unwrap(),
            "model {}",
            m.name
        );
    }
    assert!(require::resolve("auto", "no-such-model").is_err());
    assert_eq!(require::resolve("x86_64-avx2, ref", "").unwrap(), ["x86_64-avx2", "ref"]);
}

/// Every lane a committed table names (`lanes`, the models' `require`, `tier_model`, the
/// oracle builds' `proves`) is a lane of the registry.
#[test]
fn every_lane_a_table_names_is_in_the_registry() {
    let dir = targets::targets_dir();
    let mut named = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let triple = path.file_stem().unwrap().to_str().unwrap().to_string();
        let table = targets::load(&dir, &triple).unwrap();
        tiercheck_lanes::check_target_lanes(&table).unwrap();
        let names = table
            .lanes
            .iter()
            .chain(table.models.iter().flat_map(|m| &m.require))
            .chain(table.tier_model.keys())
            .chain(table.tiers.iter().flat_map(|t| &t.proves));
        for name in names {
            assert!(
                tiercheck_core::lane(name).is_some(),
                "{}: `{name}` is not a lane",
                path.display()
            );
            named += 1;
        }
    }
    assert!(named > 20, "only {named} lane names in {}", dir.display());
}

/// An oracle build's trials are named `oracle/<build>/...` (kernels) and
/// `llama_cpp/<build>/...` (the decoder).
fn trial_of(trial: &str, build: &str) -> bool {
    ["oracle", "llama_cpp"].iter().any(|kind| {
        trial
            .strip_prefix(kind)
            .and_then(|t| t.strip_prefix('/'))
            .is_some_and(|t| t.strip_prefix(build).is_some_and(|rest| rest.starts_with('/')))
    })
}

/// The aarch64 table's `proves` lists are the lanes' own claims: a lane a build proves is
/// `Status::Proven` with a proof among that build's trials, and every lane with a proof
/// among a build's trials is in that build's `proves`.
#[test]
fn oracle_builds_prove_the_lanes_whose_claims_name_them() {
    let table = targets::load_arch("aarch64").unwrap();
    assert!(!table.tiers.is_empty(), "{}: no [[tier]]", table.path.display());
    for tier in &table.tiers {
        for name in &tier.proves {
            let lane = tiercheck_core::lane(name).unwrap();
            let proofs = lane.status.proofs();
            assert!(
                proofs.iter().any(|p| p.trials.iter().any(|t| trial_of(t, &tier.name))),
                "{}: build `{}` proves `{name}`, whose status ({}) names none of its trials",
                table.path.display(),
                tier.name,
                lane.status
            );
        }
        for lane in tiercheck_core::LANES {
            let claims = lane.status.proofs().iter().flat_map(|p| p.trials.iter());
            if claims.clone().any(|t| trial_of(t, &tier.name)) {
                assert!(
                    tier.proves.iter().any(|p| p == lane.name),
                    "{}: `{}` claims trials of build `{}` ({:?}), which does not list it in \
                     `proves`",
                    table.path.display(),
                    lane.name,
                    tier.name,
                    claims.filter(|t| trial_of(t, &tier.name)).collect::<Vec<_>>()
                );
            }
        }
    }
    assert!(trial_of("oracle/arm-i8mm/vec_dot2", "arm-i8mm"));
    assert!(!trial_of("oracle/arm-i8mm-x/vec_dot2", "arm-i8mm"));
    assert!(!trial_of("llama_cpp/arm-i8mm", "arm-i8mm"));
}

/// The build a proof is against, when it names an x86 build: `ggml <build>...` or
/// `llama.cpp <build>...` (the build's name is the second word).
fn x86_build_of(against: &str) -> Option<&str> {
    let mut words = against.split([' ', ',']);
    let kind = words.next()?;
    (kind == "ggml" || kind == "llama.cpp").then(|| words.next()).flatten()
}

/// The x86-64 table's `proves` lists are the lanes' own claims: a lane an x86 build proves
/// has a proof against that build, and every lane with a proof against an x86 build of the
/// table is in that build's `proves`.
#[test]
fn x86_oracle_builds_prove_the_lanes_whose_claims_name_them() {
    let table = targets::load_arch("x86_64").unwrap();
    assert!(!table.x86_tiers.is_empty(), "{}: no [[x86_tier]]", table.path.display());
    for tier in &table.x86_tiers {
        for name in &tier.proves {
            let lane = tiercheck_core::lane(name).unwrap();
            assert!(
                lane.status.proofs().iter().any(|p| x86_build_of(p.against) == Some(&tier.name)),
                "{}: build `{}` proves `{name}`, whose status ({}) names no proof against it",
                table.path.display(),
                tier.name,
                lane.status
            );
        }
    }
    for lane in tiercheck_core::LANES {
        for proof in lane.status.proofs() {
            let Some(build) = x86_build_of(proof.against) else { continue };
            let Some(tier) = table.x86_tier(build) else { continue };
            assert!(
                tier.proves.iter().any(|p| p == lane.name),
                "{}: `{}` is proven against `{}`, which does not list it in `proves`",
                table.path.display(),
                lane.name,
                proof.against
            );
        }
    }
    assert_eq!(x86_build_of("llama.cpp haswell, repack off"), Some("haswell"));
    assert_eq!(x86_build_of("ggml x64 (generic C, no FMA)"), Some("x64"));
    assert_eq!(x86_build_of("a build"), None);
}
