//! The structure docs/ARCHITECTURE.md states, checked on the sources (read as text, as a
//! reader would): no import cycle between the modules of any crate, no host-specific code
//! in the specification crate, CPU features asked in one place, and no test tooling among
//! the product's dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Every workspace member's folder (`kernels/*`, `harness/*` with a Cargo.toml).
fn members() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for group in ["kernels", "harness"] {
        for e in std::fs::read_dir(repo().join(group)).unwrap() {
            let p = e.unwrap().path();
            if p.join("Cargo.toml").is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 14, "found {} crates", out.len());
    out
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A source file's code: comments removed, and the code of its `#[cfg(test)]` modules.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Test-only files of a crate's `src/` (modules declared under `#[cfg(test)]`).
fn test_only(path: &Path) -> bool {
    let name = path.file_name().unwrap().to_str().unwrap();
    matches!(name, "tests.rs" | "testing.rs" | "agreement.rs")
}

/// A cycle among `edges`, if any (as the list of its nodes).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[from..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The imports between the top-level modules of one crate (`crate::x` in module `y`'s
/// code is an edge `y -> x`).
fn module_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in rust_files(src) {
        if test_only(&f) {
            continue;
        }
        let rel = f.strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_str().unwrap();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let code = code(&f);
        let e = edges.entry(top.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                e.insert(name);
            }
        }
    }
    let known: BTreeSet<String> = edges.keys().cloned().collect();
    for targets in edges.values_mut() {
        targets.retain(|t| known.contains(t));
    }
    edges
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut checked = 0;
    for m in members() {
        let edges = module_edges(&m.join("src"));
        if let Some(c) = find_cycle(&edges) {
            panic!("{}: import cycle {}", m.display(), c.join(" -> "));
        }
        checked += edges.len();
    }
    assert!(checked > 50, "only {checked} modules read");
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("d".into());
    assert_eq!(find_cycle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "c", "a"]);
}

#[test]
fn the_specification_crate_has_no_host_specific_code() {
    let src = repo().join("kernels/core/src");
    for f in rust_files(&src) {
        let text = code(&f);
        for bad in ["#[target_feature", "core::arch::x86_64", "core::arch::aarch64", "asm!("] {
            assert!(!text.contains(bad), "{}: contains {bad}", f.display());
        }
    }
}

#[test]
fn cpu_features_are_asked_in_one_place() {
    let detect = repo().join("kernels/core/src/detect.rs");
    for m in members() {
        for f in rust_files(&m) {
            if f == detect {
                continue;
            }
            let code = code(&f);
            // (Spelt in two parts so that this file does not name the macros itself.)
            for arch in ["x86", "aarch64"] {
                let macro_name = format!("is_{arch}_{}", "feature_detected!");
                assert!(
                    !code.contains(&macro_name),
                    "{}: {macro_name} (ask tiercheck_core::detect::cpu_has)",
                    f.display()
                );
            }
        }
    }
}

/// The workspace crates a member depends on in `[dependencies]` (and its target-specific
/// dependency tables), not in `[dev-dependencies]`.
fn normal_deps(member: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(member.join("Cargo.toml")).unwrap();
    let mut out = BTreeSet::new();
    let mut normal = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            normal = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
            continue;
        }
        if normal {
            if let Some(name) = line.split(['.', '=', ' ']).next().filter(|n| !n.is_empty()) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[test]
fn the_product_links_no_test_tooling() {
    let by_name: BTreeMap<String, PathBuf> = members()
        .into_iter()
        .map(|m| {
            let text = std::fs::read_to_string(m.join("Cargo.toml")).unwrap();
            let name = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = "))
                .unwrap()
                .trim_matches('"')
                .to_string();
            (name, m)
        })
        .collect();
    let mut seen = BTreeSet::new();
    let mut todo = vec!["tiercheck".to_string()];
    while let Some(c) = todo.pop() {
        if !seen.insert(c.clone()) {
            continue;
        }
        if let Some(dir) = by_name.get(&c) {
            todo.extend(normal_deps(dir));
        }
    }
    assert!(seen.contains("tiercheck-core") && seen.contains("tiercheck-accel"), "{seen:?}");
    for tooling in
        ["tiercheck-testkit", "tiercheck-gpu-testkit", "tiercheck-oracle", "libtest-mimic"]
    {
        assert!(!seen.contains(tooling), "the tiercheck binary depends on {tooling}: {seen:?}");
    }
}
