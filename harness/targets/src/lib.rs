//! Target tables (`targets/<triple>.toml`): which lanes exist on a target, which CPU
//! models (qemu-user models, or the host itself) serve them, and which builds of the
//! oracle (`ci/oracle`) prove which lanes. Each fact is written once, in the table:
//!
//! - `ci/test` reads the models through `tiercheck targets --shell` and `--lanes-shell`;
//! - `ci/oracle` reads the oracle builds (`[[tier]]` on aarch64, `[[x86_tier]]` on
//!   x86-64) through `tiercheck targets --tiers-shell`, which prints them as bash arrays;
//! - the golden harness reads the required lanes through [`required_lanes_for`];
//! - the oracle bindings (`tiercheck-oracle`) read each aarch64 build's `-march`, qemu CPU
//!   model and `oracle.env` keys, and each x86 build's keys, through [`load_arch`].
//!
//! The crate depends on no kernel crate, so the oracle bindings and the tests can use it
//! without linking the lanes. Whether the lanes a table names exist in the lane registry
//! is checked by `tiercheck_lanes::check_target_lanes`, which knows the registry.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One CPU model a target's suite runs on.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Short name.
    pub name: String,
    /// `QEMU_CPU` value; empty for the host itself.
    pub qemu_cpu: String,
    /// Native lanes that must run on this model (their ignores become failures).
    pub require: Vec<String>,
    /// Free text.
    #[serde(default)]
    pub note: Option<String>,
}

/// The fields `armdriver info` prints (`ci/oracle-driver/armdriver.c`), the only keys a
/// tier's [`Tier::info`] may name.
pub const INFO_FIELDS: [&str; 8] =
    ["neon", "dotprod", "i8mm", "sve", "sve_cnt", "fma", "fp16_va", "llamafile"];

/// One build of the oracle for this target (`[[tier]]`): the vendored llama.cpp (which
/// contains ggml) cross-built by `ci/oracle` with one `-march`, into
/// `<cache>/ggml-<version>/<name>/`, with its two driver programs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// The build's folder name under the cache (`arm-dotprod`, ...); also its name in
    /// trial names (`oracle/<name>/...`, `llama_cpp/<name>/...`).
    pub name: String,
    /// The `-march` ggml-cpu is compiled with (`GGML_CPU_ARM_ARCH`); ggml-base stays at
    /// the toolchain's default.
    pub march: String,
    /// The `[[model]]` whose `qemu_cpu` runs the build's programs (see
    /// [`TargetTable::tier_qemu_cpu`]).
    pub model: String,
    /// What `armdriver info` must report on that model: `field=value` words, each field
    /// one of [`INFO_FIELDS`] at most once (`sve_cnt` is the SVE vector length in bytes,
    /// the others 0 or 1).
    pub info: Vec<String>,
    /// The `oracle.env` key (and environment variable) naming the build's kernel driver
    /// (`armdriver`).
    pub env: String,
    /// The `oracle.env` key naming the build's llama.cpp driver (`llamataps`).
    pub llama_env: String,
    /// The lanes proven against this build: the lanes whose oracle trials
    /// (`oracle/<name>/...`, `llama_cpp/<name>/...`) compare them with it.
    pub proves: Vec<String>,
}

impl Tier {
    /// [`Tier::info`] as `armdriver info` prints it: the words, space-separated.
    pub fn info_words(&self) -> String {
        self.info.join(" ")
    }

    /// The value [`Tier::info`] expects for `field`, if it names the field.
    pub fn info_value(&self, field: &str) -> Option<u32> {
        self.info.iter().find_map(|w| {
            let (f, v) = w.split_once('=')?;
            (f == field).then(|| v.parse().ok()).flatten()
        })
    }
}

/// One x86-64 build of the oracle (`[[x86_tier]]`): ggml's libraries and/or llama.cpp,
/// built by `ci/oracle` for this host with one set of ggml's cmake ISA options, into
/// `<cache>/ggml-<version>/<name>/` (ggml) and `.../llama-<name>/` (llama.cpp).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct X86Tier {
    /// ggml's name of the CPU variant (`x64`, `haswell`, `zen4`); the folder names and
    /// the name in trial names (`oracle/<name>/...`, `llama_cpp/<name>/...`).
    pub name: String,
    /// ggml's ISA options turned on (`-DGGML_<option>=ON`), in the order passed to cmake.
    pub ggml_on: Vec<String>,
    /// ggml's ISA options turned off (`-DGGML_<option>=OFF`), passed after `ggml_on`.
    pub ggml_off: Vec<String>,
    /// The `oracle.env` key naming the folder of this build's ggml libraries
    /// (`libggml-base.so`, `libggml-cpu.so`); absent when no ggml-only build is made.
    #[serde(default)]
    pub lib_env: Option<String>,
    /// The `oracle.env` key naming the folder of this build's llama.cpp libraries
    /// (`libllama.so` and its ggml); absent when llama.cpp is not built for it.
    #[serde(default)]
    pub llama_env: Option<String>,
    /// The `oracle.env` key naming the llama.cpp driver (`llamataps`) built against this
    /// build's `libllama.so` (one build has it).
    #[serde(default)]
    pub llama_driver_env: Option<String>,
    /// The lanes proven against this build.
    pub proves: Vec<String>,
}

impl X86Tier {
    /// The cmake options, as passed: every `ggml_on` option, then every `ggml_off` one.
    pub fn cmake_flags(&self) -> Vec<String> {
        let on = self.ggml_on.iter().map(|f| format!("-DGGML_{f}=ON"));
        on.chain(self.ggml_off.iter().map(|f| format!("-DGGML_{f}=OFF"))).collect()
    }

    /// Whether the build has the ISA option `option` on.
    pub fn has(&self, option: &str) -> bool {
        self.ggml_on.iter().any(|f| f == option)
    }
}

/// A target table.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetTable {
    /// The file it was read from (not part of the file).
    #[serde(skip)]
    pub path: PathBuf,
    /// Target triple; must match the file name.
    pub triple: String,
    /// Test runner for cross targets.
    #[serde(default)]
    pub runner: Option<String>,
    /// Lanes with a native implementation or a meaning on this target.
    pub lanes: Vec<String>,
    /// The model of each lane's own tier (`lane = "model name"`): the CPU model a lane
    /// runs on when the tool runs it under qemu (`tiercheck matrix`, the decoder stage of
    /// CI). A lane not listed takes the first model that requires it.
    #[serde(default)]
    pub tier_model: BTreeMap<String, String>,
    /// CPU models.
    #[serde(rename = "model", default)]
    pub models: Vec<Model>,
    /// The oracle's builds for this target, in build order (none on a target whose
    /// oracle builds are not described here).
    #[serde(rename = "tier", default)]
    pub tiers: Vec<Tier>,
    /// The oracle's x86-64 builds, in build order (`[[x86_tier]]`, x86-64 tables only).
    #[serde(rename = "x86_tier", default)]
    pub x86_tiers: Vec<X86Tier>,
}

impl TargetTable {
    /// The CPU model of `lane`'s own tier (see [`TargetTable::tier_model`]), if the table
    /// has one for it.
    pub fn model_for(&self, lane: &str) -> Option<&Model> {
        match self.tier_model.get(lane) {
            Some(name) => self.models.iter().find(|m| &m.name == name),
            None => self.models.iter().find(|m| m.require.iter().any(|r| r == lane)),
        }
    }

    /// The oracle build named `name`.
    pub fn tier(&self, name: &str) -> Option<&Tier> {
        self.tiers.iter().find(|t| t.name == name)
    }

    /// The x86 oracle build named `name`.
    pub fn x86_tier(&self, name: &str) -> Option<&X86Tier> {
        self.x86_tiers.iter().find(|t| t.name == name)
    }

    /// The `QEMU_CPU` value that runs `tier`'s programs: its model's.
    pub fn tier_qemu_cpu(&self, tier: &Tier) -> &str {
        // `parse` checked that the model exists.
        self.models.iter().find(|m| m.name == tier.model).map_or("", |m| m.qemu_cpu.as_str())
    }

    /// An error about this table (naming its file).
    pub fn invalid(&self, problem: impl Into<String>) -> TargetError {
        TargetError::Invalid { path: self.path.clone(), problem: problem.into() }
    }

    /// Checks every lane the table names against `known` (the lane registry, which this
    /// crate does not link): an unknown lane is an error naming the file.
    pub fn check_lanes(&self, known: impl Fn(&str) -> bool) -> Result<(), TargetError> {
        match self.lanes.iter().find(|l| !known(l)) {
            Some(l) => Err(self.invalid(format!("unknown lane `{l}`"))),
            None => Ok(()),
        }
    }

    /// The oracle builds as bash assignments that `eval` reads back: the array
    /// `<prefix>TIERS` of the build names in order, and one associative array per fact,
    /// keyed by build name: `<prefix>MARCH`, `<prefix>QEMU_CPU`, `<prefix>INFO` (the
    /// `armdriver info` words), `<prefix>ENV`, `<prefix>LLAMA_ENV` and `<prefix>PROVES`
    /// (space-separated lanes), declared global (`declare -gA`) so that an `eval` inside
    /// a function sets them for the whole script. Every word is single-quoted.
    ///
    /// An x86-64 table's builds print as `<prefix>TIERS` and the associative arrays
    /// `<prefix>CMAKE` (the cmake options, space-separated), `<prefix>LIB_ENV`,
    /// `<prefix>LLAMA_ENV`, `<prefix>LLAMA_DRIVER_ENV` (empty where the build has none)
    /// and `<prefix>PROVES`.
    pub fn tiers_shell(&self, prefix: &str) -> String {
        if !self.x86_tiers.is_empty() {
            return self.x86_tiers_shell(prefix);
        }
        let names: Vec<String> = self.tiers.iter().map(|t| shell_quote(&t.name)).collect();
        let mut out = format!("{prefix}TIERS=({})\n", names.join(" "));
        let facts: Vec<[String; 6]> = self.tiers.iter().map(|t| self.shell_facts(t)).collect();
        for (i, var) in SHELL_VARS.iter().enumerate() {
            let items: Vec<String> = self
                .tiers
                .iter()
                .zip(&facts)
                .map(|(t, f)| format!("[{}]={}", shell_quote(&t.name), shell_quote(&f[i])))
                .collect();
            out.push_str(&format!("declare -gA {prefix}{var}=({})\n", items.join(" ")));
        }
        out
    }
}

/// The variable names (after the prefix) of [`TargetTable::tiers_shell`]'s associative
/// arrays.
const SHELL_VARS: [&str; 6] = ["MARCH", "QEMU_CPU", "INFO", "ENV", "LLAMA_ENV", "PROVES"];

impl TargetTable {
    /// One build's values of [`SHELL_VARS`], in that order.
    fn shell_facts(&self, t: &Tier) -> [String; 6] {
        [
            t.march.clone(),
            self.tier_qemu_cpu(t).to_string(),
            t.info_words(),
            t.env.clone(),
            t.llama_env.clone(),
            t.proves.join(" "),
        ]
    }
}

/// The variable names (after the prefix) of an x86-64 table's associative arrays.
const X86_SHELL_VARS: [&str; 5] = ["CMAKE", "LIB_ENV", "LLAMA_ENV", "LLAMA_DRIVER_ENV", "PROVES"];

impl X86Tier {
    /// The build's values of [`X86_SHELL_VARS`], in that order (an absent key is empty).
    fn shell_facts(&self) -> [String; 5] {
        let key = |k: &Option<String>| k.clone().unwrap_or_default();
        [
            self.cmake_flags().join(" "),
            key(&self.lib_env),
            key(&self.llama_env),
            key(&self.llama_driver_env),
            self.proves.join(" "),
        ]
    }
}

impl TargetTable {
    /// [`TargetTable::tiers_shell`] of an x86-64 table.
    fn x86_tiers_shell(&self, prefix: &str) -> String {
        let names: Vec<String> = self.x86_tiers.iter().map(|t| shell_quote(&t.name)).collect();
        let mut out = format!("{prefix}TIERS=({})\n", names.join(" "));
        let facts: Vec<[String; 5]> = self.x86_tiers.iter().map(X86Tier::shell_facts).collect();
        for (i, var) in X86_SHELL_VARS.iter().enumerate() {
            let items: Vec<String> = self
                .x86_tiers
                .iter()
                .zip(&facts)
                .map(|(t, f)| format!("[{}]={}", shell_quote(&t.name), shell_quote(&f[i])))
                .collect();
            out.push_str(&format!("declare -gA {prefix}{var}=({})\n", items.join(" ")));
        }
        out
    }
}

/// `s` as one bash word: single-quoted, a `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Errors reading a target table.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid table.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// The target triple this binary was built for.
pub const TRIPLE: &str = env!("TIERCHECK_TARGET");

/// The repository's `targets/` folder (as built), or `$TIERCHECK_TARGETS_DIR`.
pub fn targets_dir() -> PathBuf {
    match std::env::var_os("TIERCHECK_TARGETS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../targets")),
    }
}

/// Read and validate `dir/<triple>.toml`.
pub fn load(dir: &Path, triple: &str) -> Result<TargetTable, TargetError> {
    let path = dir.join(format!("{triple}.toml"));
    let text = std::fs::read_to_string(&path)
        .map_err(|source| TargetError::Io { path: path.clone(), source })?;
    parse(&path, &text)
}

/// A non-empty word of ASCII letters and digits and the characters of `extra`.
fn plain_word(s: &str, extra: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// Parse and validate a table's text (`path` names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<TargetTable, TargetError> {
    let invalid = |problem: String| TargetError::Invalid { path: path.to_owned(), problem };
    let mut t: TargetTable = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    t.path = path.to_owned();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if t.triple != stem {
        return Err(invalid(format!(
            "triple `{}` does not match the file name `{stem}`",
            t.triple
        )));
    }
    let mut lanes = HashSet::new();
    for l in &t.lanes {
        if !lanes.insert(l) {
            return Err(invalid(format!("lane `{l}` is listed twice in `lanes`")));
        }
    }
    if t.models.is_empty() {
        return Err(invalid("no [[model]] entries".into()));
    }
    let mut names = HashSet::new();
    for m in &t.models {
        if !names.insert(&m.name) {
            return Err(invalid(format!("duplicate model `{}`", m.name)));
        }
        for l in &m.require {
            if !t.lanes.contains(l) {
                return Err(invalid(format!(
                    "model `{}` requires `{l}`, which is not in `lanes`",
                    m.name
                )));
            }
        }
    }
    for (lane, model) in &t.tier_model {
        if !t.lanes.contains(lane) {
            return Err(invalid(format!("tier_model names `{lane}`, which is not in `lanes`")));
        }
        match t.models.iter().find(|m| &m.name == model) {
            None => {
                return Err(invalid(format!("tier_model `{lane}`: no [[model]] named `{model}`")))
            }
            Some(m) if !m.require.contains(lane) => {
                return Err(invalid(format!(
                    "tier_model `{lane}`: model `{model}` does not require `{lane}`"
                )))
            }
            Some(_) => {}
        }
    }
    check_x86_tiers(&t).map_err(&invalid)?;
    check_tiers(&t).map_err(invalid)?;
    Ok(t)
}

/// The `[[tier]]` entries: unique names and `oracle.env` keys, words the shell and
/// `ci/oracle`'s paths take as they are, a model that exists, `info` fields the driver
/// prints, and proved lanes that are in `lanes`, proven by one build only, and run on
/// that build's model as their own tier's model.
fn check_tiers(t: &TargetTable) -> Result<(), String> {
    let mut names = HashSet::new();
    let mut keys = HashSet::new();
    let mut proved: BTreeMap<&str, &str> = BTreeMap::new();
    for tier in &t.tiers {
        let n = &tier.name;
        check_build_name("tier", n, &mut names)?;
        if !plain_word(&tier.march, "-_.+") {
            return Err(format!("tier `{n}`: march `{}` is not a -march value", tier.march));
        }
        if !t.models.iter().any(|m| m.name == tier.model) {
            return Err(format!("tier `{n}`: no [[model]] named `{}`", tier.model));
        }
        for key in [&tier.env, &tier.llama_env] {
            if !env_name(key) {
                return Err(format!(
                    "tier `{n}`: `{key}` is not an environment variable name (A-Z, 0-9, _)"
                ));
            }
            if !keys.insert(key) {
                return Err(format!("tier `{n}`: oracle.env key `{key}` is used twice"));
            }
        }
        if tier.info.is_empty() {
            return Err(format!("tier `{n}`: `info` is empty"));
        }
        let mut fields = HashSet::new();
        for word in &tier.info {
            let Some((field, value)) = word.split_once('=') else {
                return Err(format!("tier `{n}`: info `{word}` is not `field=value`"));
            };
            if !INFO_FIELDS.contains(&field) {
                return Err(format!(
                    "tier `{n}`: info field `{field}` is not one armdriver prints ({})",
                    INFO_FIELDS.join(", ")
                ));
            }
            if !fields.insert(field) {
                return Err(format!("tier `{n}`: info field `{field}` is given twice"));
            }
            let ok = match field {
                "sve_cnt" => value.parse::<u32>().is_ok_and(|v| v.is_power_of_two() || v == 0),
                _ => value == "0" || value == "1",
            };
            if !ok {
                return Err(format!(
                    "tier `{n}`: info `{word}`: `{field}` takes {}",
                    if field == "sve_cnt" {
                        "a byte count (0 or a power of two)"
                    } else {
                        "0 or 1"
                    }
                ));
            }
        }
        check_proves("tier", n, &tier.proves, t, &mut proved)?;
        for lane in &tier.proves {
            match t.model_for(lane) {
                Some(m) if m.name == tier.model => {}
                Some(m) => {
                    return Err(format!(
                        "tier `{n}` runs on model `{}`, but `{lane}`'s own tier model is `{}`",
                        tier.model, m.name
                    ))
                }
                None => {
                    return Err(format!("tier `{n}` proves `{lane}`, which no [[model]] requires"))
                }
            }
        }
    }
    Ok(())
}

/// An oracle build's name (`kind` is `tier` or `x86_tier`): a folder name, unique.
fn check_build_name<'a>(
    kind: &str,
    n: &'a String,
    names: &mut HashSet<&'a String>,
) -> Result<(), String> {
    if !plain_word(n, "-_.") || n.starts_with(['-', '.']) {
        return Err(format!(
            "{kind} name `{n}` must be ASCII letters, digits, `-`, `_` and `.` (it is a folder name)"
        ));
    }
    if !names.insert(n) {
        return Err(format!("duplicate {kind} `{n}`"));
    }
    Ok(())
}

/// An oracle build's `proves`: not empty, lanes of the table, each proved by one build.
fn check_proves<'a>(
    kind: &str,
    n: &'a str,
    proves: &'a [String],
    t: &TargetTable,
    proved: &mut BTreeMap<&'a str, &'a str>,
) -> Result<(), String> {
    if proves.is_empty() {
        return Err(format!("{kind} `{n}`: `proves` is empty"));
    }
    for lane in proves {
        if !t.lanes.contains(lane) {
            return Err(format!("{kind} `{n}` proves `{lane}`, which is not in `lanes`"));
        }
        if let Some(other) = proved.insert(lane, n) {
            return Err(format!("lane `{lane}` is proved by two tiers, `{other}` and `{n}`"));
        }
    }
    Ok(())
}

/// Whether `key` can be an environment variable's name (A-Z, 0-9, `_`, not a digit first).
fn env_name(key: &str) -> bool {
    plain_word(key, "_")
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| !c.is_ascii_lowercase())
}

/// The `[[x86_tier]]` entries: only in an x86-64 table (and `[[tier]]` only in an
/// aarch64 one), unique folder-safe names, ISA options that are cmake words and each
/// given once, at least one thing built, unique `oracle.env` keys, one llama.cpp driver
/// at most and only beside a llama.cpp build, proved lanes in `lanes` and proven by one
/// build only.
fn check_x86_tiers(t: &TargetTable) -> Result<(), String> {
    let x86 = t.triple.starts_with("x86_64-");
    if !t.tiers.is_empty() && !t.triple.starts_with("aarch64-") {
        return Err(
            "[[tier]] describes aarch64 builds (-march, qemu model); this table is not aarch64's"
                .into(),
        );
    }
    if !t.x86_tiers.is_empty() && !x86 {
        return Err("[[x86_tier]] describes x86-64 builds; this table is not x86-64's".into());
    }
    let mut names = HashSet::new();
    let mut keys = HashSet::new();
    let mut proved: BTreeMap<&str, &str> = BTreeMap::new();
    let mut driver: Option<&str> = None;
    for tier in &t.x86_tiers {
        let n = &tier.name;
        check_build_name("x86_tier", n, &mut names)?;
        let mut options = HashSet::new();
        for f in tier.ggml_on.iter().chain(&tier.ggml_off) {
            if !env_name(f) {
                return Err(format!(
                    "x86_tier `{n}`: `{f}` is not a ggml cmake option (GGML_<A-Z0-9_>)"
                ));
            }
            if !options.insert(f) {
                return Err(format!("x86_tier `{n}`: option `{f}` is given twice"));
            }
        }
        let present: Vec<&String> = [&tier.lib_env, &tier.llama_env, &tier.llama_driver_env]
            .into_iter()
            .flatten()
            .collect();
        if tier.lib_env.is_none() && tier.llama_env.is_none() {
            return Err(format!(
                "x86_tier `{n}`: builds nothing (neither `lib_env` nor `llama_env`)"
            ));
        }
        for key in present {
            if !env_name(key) {
                return Err(format!(
                    "x86_tier `{n}`: `{key}` is not an environment variable name (A-Z, 0-9, _)"
                ));
            }
            if !keys.insert(key) {
                return Err(format!("x86_tier `{n}`: oracle.env key `{key}` is used twice"));
            }
        }
        if tier.llama_driver_env.is_some() {
            if tier.llama_env.is_none() {
                return Err(format!(
                    "x86_tier `{n}`: a llama.cpp driver needs a llama.cpp build (`llama_env`)"
                ));
            }
            if let Some(other) = driver.replace(n) {
                return Err(format!(
                    "the llama.cpp driver is built twice, for `{other}` and `{n}`"
                ));
            }
        }
        check_proves("x86_tier", n, &tier.proves, t, &mut proved)?;
    }
    Ok(())
}

/// The target table of the CPU architecture `arch` (`x86_64`, `aarch64`) on Linux.
pub fn load_arch(arch: &str) -> Result<TargetTable, TargetError> {
    load(&targets_dir(), &format!("{arch}-unknown-linux-gnu"))
}

/// The lanes that must run natively here, from this build's target table and the
/// `QEMU_CPU` in effect (empty: the host model). `None` when no table or model applies.
pub fn required_lanes_for(triple: &str, qemu_cpu: Option<&str>) -> Option<Vec<String>> {
    let table = load(&targets_dir(), triple).ok()?;
    let cpu = qemu_cpu.unwrap_or("");
    table.models.iter().find(|m| m.qemu_cpu == cpu).map(|m| m.require.clone())
}

#[cfg(test)]
mod tests;
