//! Where the oracle builds are: environment variables, or the `oracle.env` file that
//! `ci/oracle` writes into its cache.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tiercheck_targets::{TargetTable, X86Tier};

use super::OracleError;

/// The x86-64 target table, read once.
fn x86_table() -> Result<&'static TargetTable, OracleError> {
    static TABLE: OnceLock<Result<TargetTable, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| tiercheck_targets::load_arch("x86_64").map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| OracleError::TargetTable(e.clone()))
}

/// The `[[x86_tier]]` entry `name` of `targets/x86_64-unknown-linux-gnu.toml`: one x86
/// build of the oracle (its ISA options and the `oracle.env` keys of what `ci/oracle`
/// builds for it).
pub fn x86_tier(name: &str) -> Result<&'static X86Tier, OracleError> {
    let table = x86_table()?;
    table.x86_tier(name).ok_or_else(|| {
        OracleError::TargetTable(format!(
            "{}: no [[x86_tier]] named `{name}`",
            table.path.display()
        ))
    })
}

/// The `oracle.env` key of the x86 llama.cpp build named `name` (`haswell`, `zen4`).
pub fn llama_env(name: &str) -> Result<&'static str, OracleError> {
    let tier = x86_tier(name)?;
    tier.llama_env.as_deref().ok_or_else(|| {
        OracleError::TargetTable(format!(
            "[[x86_tier]] `{name}` has no llama.cpp build (llama_env)"
        ))
    })
}

/// The `oracle.env` key of the host build of the llama.cpp driver (`llamataps`), from the
/// `[[x86_tier]]` that has one.
pub fn llama_driver_env() -> Result<&'static str, OracleError> {
    let table = x86_table()?;
    table.x86_tiers.iter().find_map(|t| t.llama_driver_env.as_deref()).ok_or_else(|| {
        OracleError::TargetTable(format!(
            "{}: no [[x86_tier]] has llama_driver_env",
            table.path.display()
        ))
    })
}

/// The x86 CPU tiers `ci/oracle` builds a ggml library for (their facts: the
/// `[[x86_tier]]` entries of the same names, [`x86_tier`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Scalar generic kernels, no SIMD (ggml's `x64` CPU variant).
    X64,
    /// AVX2 + FMA + F16C + BMI2 (ggml's `haswell` CPU variant).
    Haswell,
}

impl Tier {
    /// Every tier, in build order.
    pub const ALL: [Tier; 2] = [Tier::X64, Tier::Haswell];

    /// The tier's name as ggml and `ci/oracle` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::X64 => "x64",
            Tier::Haswell => "haswell",
        }
    }

    /// The environment variable (and `oracle.env` key) naming the tier's library folder
    /// (its entry's `lib_env`).
    pub fn env_var(self) -> Result<&'static str, OracleError> {
        x86_tier(self.name())?.lib_env.as_deref().ok_or_else(|| {
            OracleError::TargetTable(format!(
                "[[x86_tier]] `{}` has no ggml library build (lib_env)",
                self.name()
            ))
        })
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The environment variable naming the Python interpreter that has gguf-py and numpy.
pub const PYTHON_ENV: &str = "TIERCHECK_PYTHON";
/// The environment variable naming `ci/oracle`'s cache folder.
pub const CACHE_ENV: &str = "TIERCHECK_CACHE";
/// The file name `ci/oracle` writes into its cache folder.
pub const ENV_FILE_NAME: &str = "oracle.env";
/// What to do when something is missing.
const HINT: &str = "oracle not built: run ci/oracle";

/// Which parts of the oracle are available, and why the others are not.
///
/// Each setting comes from its environment variable when that is set and not empty,
/// otherwise from `oracle.env` in `$TIERCHECK_CACHE` (default `~/.cache/tiercheck`).
/// A setting only counts as available when what it names exists: a library folder
/// with `libggml-base.so` and `libggml-cpu.so`, an existing Python file.
#[derive(Clone, Debug, Default)]
pub struct OracleConfig {
    /// Library folder of the x64 tier.
    pub x64: Option<PathBuf>,
    /// Library folder of the haswell tier.
    pub haswell: Option<PathBuf>,
    /// Python interpreter with gguf-py and numpy.
    pub python: Option<PathBuf>,
    /// The `oracle.env` file that was consulted, if one was read.
    pub env_file: Option<PathBuf>,
    problems: Vec<String>,
}

impl OracleConfig {
    /// Reads the process environment (and `oracle.env` as the fallback).
    pub fn from_env() -> OracleConfig {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Like [`OracleConfig::from_env`], with `lookup` standing in for the environment.
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> OracleConfig {
        let get = |key: &str| lookup(key).filter(|v| !v.is_empty());
        let cache = get(CACHE_ENV)
            .map(PathBuf::from)
            .or_else(|| get("HOME").map(|h| Path::new(&h).join(".cache/tiercheck")));
        let env_path = cache.map(|c| c.join(ENV_FILE_NAME));

        let file_vars: Result<Vec<(String, String)>, String> = match &env_path {
            None => Err("neither TIERCHECK_CACHE nor HOME is set".into()),
            Some(p) => std::fs::read_to_string(p)
                .map(|text| parse_env_file(&text))
                .map_err(|e| format!("{} cannot be read ({e})", p.display())),
        };
        let mut unset: Vec<&str> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let mut setting = |key: &'static str| -> Option<(String, &'static str)> {
            if let Some(v) = get(key) {
                return Some((v, "environment"));
            }
            let from_file = file_vars.as_ref().ok().and_then(|vars| {
                vars.iter().rev().find(|(k, v)| k == key && !v.is_empty()).map(|(_, v)| v.clone())
            });
            if from_file.is_none() {
                unset.push(key);
            }
            from_file.map(|v| (v, ENV_FILE_NAME))
        };

        let mut cfg = OracleConfig::default();
        for tier in Tier::ALL {
            let key = match tier.env_var() {
                Ok(key) => key,
                Err(e) => {
                    problems.push(e.to_string());
                    continue;
                }
            };
            let Some((v, from)) = setting(key) else { continue };
            let dir = PathBuf::from(v);
            match missing_libs(&dir) {
                None => match tier {
                    Tier::X64 => cfg.x64 = Some(dir),
                    Tier::Haswell => cfg.haswell = Some(dir),
                },
                Some(lib) => {
                    problems.push(format!("{key}={} (from {from}) has no {lib}", dir.display()))
                }
            }
        }
        if let Some((v, from)) = setting(PYTHON_ENV) {
            let py = PathBuf::from(v);
            if py.is_file() {
                cfg.python = Some(py);
            } else {
                problems
                    .push(format!("{PYTHON_ENV}={} (from {from}) does not exist", py.display()));
            }
        }
        if !unset.is_empty() {
            let file = match (&file_vars, &env_path) {
                (Ok(_), Some(p)) => format!("{} does not name them", p.display()),
                (Err(e), _) => e.clone(),
                (Ok(_), None) => unreachable!("a file was read without a path"),
            };
            problems.insert(0, format!("{} not set, and {file}", unset.join(", ")));
        }
        cfg.problems = problems;
        if file_vars.is_ok() {
            cfg.env_file = env_path;
        }
        cfg
    }

    /// The library folder of `tier`, if available.
    pub fn tier(&self, tier: Tier) -> Option<&Path> {
        match tier {
            Tier::X64 => self.x64.as_deref(),
            Tier::Haswell => self.haswell.as_deref(),
        }
    }

    /// Whether every tier and the Python interpreter are available.
    pub fn is_complete(&self) -> bool {
        self.problems.is_empty()
    }

    /// A human-readable reason for what is missing, or `None` when everything is there.
    pub fn missing_reason(&self) -> Option<String> {
        if self.problems.is_empty() {
            None
        } else {
            Some(format!("{HINT} ({})", self.problems.join("; ")))
        }
    }

    /// Any other `ci/oracle` setting (for example `TIERCHECK_ORACLE_LLAMA`, the folder of
    /// the llama.cpp build): the environment variable when set and not empty, else the
    /// key in the `oracle.env` that was read; an [`OracleError::Unavailable`] naming
    /// the key when neither has it or the path does not exist.
    pub fn setting(&self, key: &str) -> Result<PathBuf, OracleError> {
        let value = std::env::var(key).ok().filter(|v| !v.is_empty()).or_else(|| {
            let text = std::fs::read_to_string(self.env_file.as_deref()?).ok()?;
            parse_env_file(&text)
                .into_iter()
                .rev()
                .find(|(k, v)| k == key && !v.is_empty())
                .map(|(_, v)| v)
        });
        let Some(v) = value else {
            return Err(OracleError::Unavailable(format!(
                "{HINT} ({key} is not set in the environment or oracle.env)"
            )));
        };
        let p = PathBuf::from(v);
        if !p.exists() {
            return Err(OracleError::Unavailable(format!(
                "{HINT} ({key}={} does not exist)",
                p.display()
            )));
        }
        Ok(p)
    }

    /// The library folder of `tier`, or an [`OracleError::Unavailable`] saying why not.
    pub fn require_tier(&self, tier: Tier) -> Result<&Path, OracleError> {
        let key = tier.env_var()?;
        self.tier(tier).ok_or_else(|| self.unavailable(key))
    }

    /// The Python interpreter, or an [`OracleError::Unavailable`] saying why not.
    pub fn require_python(&self) -> Result<&Path, OracleError> {
        self.python.as_deref().ok_or_else(|| self.unavailable(PYTHON_ENV))
    }

    fn unavailable(&self, key: &str) -> OracleError {
        let why = self
            .problems
            .iter()
            .find(|p| p.contains(key))
            .cloned()
            .unwrap_or_else(|| format!("{key} is not available"));
        OracleError::Unavailable(format!("{HINT} ({why})"))
    }
}

/// The first of the two libraries a tier folder must hold that is missing from `dir`.
fn missing_libs(dir: &Path) -> Option<&'static str> {
    ["libggml-base.so", "libggml-cpu.so"].into_iter().find(|lib| !dir.join(lib).is_file())
}

/// Parses `KEY=VALUE` lines (blank lines and `#` comments skipped, an optional
/// `export ` prefix and one pair of surrounding quotes removed).
pub fn parse_env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (k, v) = line.split_once('=')?;
            let v = v.trim();
            let v = ['"', '\'']
                .iter()
                .find_map(|q| v.strip_prefix(*q).and_then(|s| s.strip_suffix(*q)))
                .unwrap_or(v);
            Some((k.trim().to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    fn fake_tier(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("libggml-base.so"), b"").unwrap();
        std::fs::write(dir.join("libggml-cpu.so"), b"").unwrap();
    }

    #[test]
    fn parses_env_lines() {
        let vars = parse_env_file("# c\n\nA=1\nexport B='two words'\nC=\"x\"\nbad\n");
        assert_eq!(
            vars,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into())
            ]
        );
    }

    #[test]
    fn the_keys_are_the_x86_tables() {
        assert_eq!(Tier::X64.env_var().unwrap(), "TIERCHECK_ORACLE_X64");
        assert_eq!(Tier::Haswell.env_var().unwrap(), "TIERCHECK_ORACLE_HASWELL");
        assert_eq!(llama_env("haswell").unwrap(), "TIERCHECK_ORACLE_LLAMA");
        assert_eq!(llama_env("zen4").unwrap(), "TIERCHECK_ORACLE_LLAMA_ZEN4");
        assert_eq!(llama_driver_env().unwrap(), "TIERCHECK_ORACLE_LLAMA_DRIVER");
        assert!(llama_env("x64").unwrap_err().to_string().contains("no llama.cpp build"));
        assert!(x86_tier("nehalem").is_err());
        assert!(x86_tier("zen4").unwrap().has("AVX512"));
    }

    #[test]
    fn missing_everything_gives_a_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = OracleConfig::from_lookup(lookup(&[(
            "TIERCHECK_CACHE",
            tmp.path().join("nope").to_str().unwrap(),
        )]));
        assert!(!cfg.is_complete());
        let why = cfg.missing_reason().unwrap();
        assert!(why.contains("run ci/oracle"), "{why}");
        assert!(why.contains("TIERCHECK_ORACLE_X64"), "{why}");
        assert!(cfg.require_tier(Tier::Haswell).is_err());
    }

    #[test]
    fn env_file_is_the_fallback_and_env_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        fake_tier(&a);
        fake_tier(&b);
        let py = tmp.path().join("python");
        std::fs::write(&py, b"").unwrap();
        std::fs::write(
            tmp.path().join(ENV_FILE_NAME),
            format!(
                "TIERCHECK_ORACLE_X64={}\nTIERCHECK_ORACLE_HASWELL={}\nTIERCHECK_PYTHON={}\n",
                a.display(),
                a.display(),
                py.display()
            ),
        )
        .unwrap();
        let cfg = OracleConfig::from_lookup(lookup(&[
            ("TIERCHECK_CACHE", tmp.path().to_str().unwrap()),
            ("TIERCHECK_ORACLE_HASWELL", b.to_str().unwrap()),
        ]));
        assert!(cfg.is_complete(), "{:?}", cfg.missing_reason());
        assert_eq!(cfg.tier(Tier::X64), Some(a.as_path()));
        assert_eq!(cfg.tier(Tier::Haswell), Some(b.as_path()));
        assert_eq!(cfg.python.as_deref(), Some(py.as_path()));
        assert_eq!(cfg.env_file, Some(tmp.path().join(ENV_FILE_NAME)));
    }

    #[test]
    fn a_folder_without_the_libraries_is_unavailable() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = OracleConfig::from_lookup(lookup(&[
            ("TIERCHECK_CACHE", tmp.path().to_str().unwrap()),
            ("TIERCHECK_ORACLE_X64", tmp.path().to_str().unwrap()),
        ]));
        assert!(cfg.tier(Tier::X64).is_none());
        let why = cfg.require_tier(Tier::X64).unwrap_err().to_string();
        assert!(why.contains("has no libggml-base.so"), "{why}");
    }
}
