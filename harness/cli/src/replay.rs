//! A trace replays its own run: `delta`, `identify`, `attribute` and `trace import`
//! take the model and the run settings a trace file records, so a trace made with
//! `--model m.gguf --ctx 1024 --tier-threads 2` is analysed on that model in that context
//! with no flag repeated.
//!
//! - **The model.** A trace records its model's sha256 and path (`model_sha256`,
//!   `model_path`; the capture tool records the hash). With `--model`, that file must
//!   have the recorded hash. Without it the model is looked for at its recorded path,
//!   then in the folders of `$TIERCHECK_MODELS` (colon-separated) under the recorded
//!   file name or as `<sha256>.gguf`, then as the embedded model when the hash is the
//!   embedded recipe's; each candidate's hash is checked. A missing or changed model is
//!   an error naming the trace, the hash and where it was looked for. Traces of two
//!   models are not compared. A trace that records no hash (an engine's dump, an old
//!   trace) runs on `--model`, else on the embedded model, as before.
//! - **The settings.** Context, K/V type, flash attention, tier threads, batch, ubatch,
//!   output rows and mode come from the trace where it records them. A flag naming
//!   another value than the trace records is an error: the run the flag describes is
//!   not the run the trace holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use tiercheck_gguf::tensorfile;
use tiercheck_model::embedded::{self, Recipe};
use tiercheck_model::Model;

/// The folders `$TIERCHECK_MODELS` names, where a trace's model is looked for when its
/// recorded path holds no such file.
pub const MODELS_ENV: &str = "TIERCHECK_MODELS";

/// One trace file's recorded metadata.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The file.
    pub file: PathBuf,
    /// Its metadata.
    pub meta: BTreeMap<String, String>,
}

impl Recorded {
    fn get(&self, key: &str) -> Option<&str> {
        self.meta.get(key).map(String::as_str)
    }
}

/// The recorded metadata of each argument that is a safetensors file (a lane name, an npz
/// dump or an unreadable file records nothing here; reading it later says what is wrong).
pub fn recorded<'a>(args: impl IntoIterator<Item = &'a Path>) -> Vec<Recorded> {
    args.into_iter()
        .filter(|p| p.is_file())
        .filter_map(|p| {
            tensorfile::read_metadata(p).ok().map(|meta| Recorded { file: p.to_owned(), meta })
        })
        .collect()
}

/// A flag the user gave, with the metadata key that records the same setting in a trace
/// and its value as a trace writes it.
#[derive(Clone, Debug)]
pub struct Flag {
    /// The flag (`--ctx`).
    pub flag: &'static str,
    /// Metadata keys holding the setting, the first present one read.
    pub keys: &'static [&'static str],
    /// The value, as a trace records it.
    pub value: String,
}

/// Every flag that names another value than a trace records is an error.
pub fn check_flags(traces: &[Recorded], flags: &[Flag]) -> Result<()> {
    for t in traces {
        for f in flags {
            // tiercheck's own `threads` is its matmul threads, the capture tool's the tier's.
            let own = |k: &&&str| !(**k == "threads" && t.get("producer") == Some("tiercheck"));
            let Some((key, v)) = f.keys.iter().filter(own).find_map(|k| t.get(k).map(|v| (*k, v)))
            else {
                continue;
            };
            if v != f.value {
                bail!(
                    "{} {} contradicts {}, which ran with {key} = {v} (leave the flag out: a trace replays its own settings)",
                    f.flag,
                    f.value,
                    t.file.display()
                );
            }
        }
    }
    Ok(())
}

/// The context the traces ran in: the one they record (all alike), else `None`.
pub fn recorded_ctx(traces: &[Recorded]) -> Result<Option<usize>> {
    let mut seen: Option<(usize, &Path)> = None;
    for t in traces {
        let Some(v) = t.get("n_ctx") else { continue };
        let n: usize = v.parse().map_err(|_| {
            anyhow::anyhow!("{}: metadata n_ctx = '{v}' is not a context length", t.file.display())
        })?;
        match seen {
            Some((m, other)) if m != n => bail!(
                "{} ran in a context of {m} cells, {} in one of {n}: give the context with --ctx",
                other.display(),
                t.file.display()
            ),
            _ => seen = Some((n, &t.file)),
        }
    }
    Ok(seen.map(|(n, _)| n))
}

/// The model the traces ran (module doc); `given` is `--model`.
pub fn model(traces: &[Recorded], given: Option<&Path>) -> Result<Model> {
    let mut want: Option<(&str, &Recorded)> = None;
    for t in traces {
        let Some(sha) = t.get("model_sha256") else { continue };
        match want {
            Some((w, other)) if w != sha => bail!(
                "{} ran the model with sha256 {w}, {} the model with sha256 {sha}: traces of two models are not compared",
                other.file.display(),
                t.file.display()
            ),
            _ => want = Some((sha, t)),
        }
    }
    let Some((sha, t)) = want else {
        let path = match given {
            Some(p) => p.to_owned(),
            None => embedded::ensure_model(None)?,
        };
        return Ok(Model::open(&path)?);
    };
    let file = t.file.display();
    let recorded_path = t.get("model_path").map(PathBuf::from);
    if let Some(p) = given {
        let m = Model::open(p)?;
        if m.sha256 != sha {
            bail!(
                "--model {} has sha256 {}; {file} ran the model with sha256 {sha}{}",
                p.display(),
                m.sha256,
                recorded_path.map(|r| format!(" (at {})", r.display())).unwrap_or_default()
            );
        }
        return Ok(m);
    }
    let mut looked = Vec::new();
    let mut candidates: Vec<PathBuf> = recorded_path.iter().cloned().collect();
    if let Some(dirs) = std::env::var_os(MODELS_ENV) {
        for dir in std::env::split_paths(&dirs) {
            if let Some(name) = recorded_path.as_ref().and_then(|r| r.file_name()) {
                candidates.push(dir.join(name));
            }
            candidates.push(dir.join(format!("{sha}.gguf")));
        }
    }
    for c in candidates {
        if !c.is_file() {
            looked.push(format!("{} (missing)", c.display()));
            continue;
        }
        let m = Model::open(&c)?;
        if m.sha256 == sha {
            return Ok(m);
        }
        looked.push(format!("{} (sha256 {})", c.display(), m.sha256));
    }
    let recipe = Recipe::load(&Recipe::default_path())?;
    if recipe.sha256.as_deref() == Some(sha) {
        return Ok(Model::open(&embedded::ensure_model(None)?)?);
    }
    let looked = if looked.is_empty() {
        format!("the trace records no path, and ${MODELS_ENV} names no folder")
    } else {
        format!("looked at {}", looked.join(", "))
    };
    bail!(
        "{file} ran the model with sha256 {sha}, which is not here ({looked}): pass it with --model, or put it in a folder of ${MODELS_ENV}"
    )
}
