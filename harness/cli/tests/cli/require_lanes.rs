//! `tiercheck_core::require` (the reading of `TIERCHECK_REQUIRE_LANES` shared by every
//! suite, including the architecture crates' tests) agrees with the harness's target
//! tables (`tiercheck::targets`, a full TOML parser) on every committed table.

use tiercheck_core::require;
use tiercheck_lanes::targets;

#[test]
fn core_reads_every_committed_table_as_the_harness_does() {
    let dir = targets::targets_dir();
    let mut tables = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let triple = path.file_stem().unwrap().to_str().unwrap().to_string();
        let table = targets::load(&dir, &triple).unwrap();
        let models = require::parse_models(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let want: Vec<(String, Vec<String>)> =
            table.models.iter().map(|m| (m.qemu_cpu.clone(), m.require.clone())).collect();
        let got: Vec<(String, Vec<String>)> =
            models.into_iter().map(|m| (m.qemu_cpu, m.require)).collect();
        assert_eq!(got, want, "{}", path.display());
        tables += 1;
    }
    assert!(tables >= 2, "found {tables} tables in {}", dir.display());
}

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
