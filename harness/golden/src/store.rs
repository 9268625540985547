//! The golden folder on disk.
//!
//! ```text
//! golden/
//!   inputs/kernels.safetensors   the inputs of every case but the next file's (f32
//!                                activations, u8 weight blocks)
//!   inputs/kernels-more.safetensors
//!                                the weight blocks of the eight types beyond the four
//!                                every lane multiplies (each file under 5 MiB)
//!   inputs/manifest.json         sha256 of that file and of each tensor
//!   lanes/<lane>/manifest.json   expected outputs of one lane (see `manifest`)
//!   lanes/<lane>/outputs-<sha12>.safetensors
//!                                the outputs themselves, content-addressed
//! ```
//!
//! A refresh writes the new outputs file under a new name first, then replaces the
//! manifest atomically (the commit point), then removes the old outputs file. A refresh
//! killed at any point therefore leaves the previous manifest and the outputs file it
//! names intact.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use tiercheck_core::GgmlType;

use super::cases::Input;
use super::manifest::{sha256_hex, Manifest, FORMAT};
use super::output::Output;
use tiercheck_gguf::atomic_write::write_atomic;

/// Errors of the golden store. `Corrupt` means the files on disk are damaged or were
/// edited by hand; it is never a statement about a kernel.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A golden file is damaged or inconsistent.
    #[error("golden corruption in {path}: {problem}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A lane has no goldens yet.
    #[error("no goldens for lane `{lane}` in {dir}; create them with `{command}`")]
    MissingLane {
        /// The lane.
        lane: String,
        /// Where they were looked for.
        dir: PathBuf,
        /// The command that creates them.
        command: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GoldenError + '_ {
    move |source| GoldenError::Io { path: path.to_owned(), source }
}

fn corrupt(path: &Path, problem: impl Into<String>) -> GoldenError {
    GoldenError::Corrupt { path: path.to_owned(), problem: problem.into() }
}

/// The golden folder.
#[derive(Clone, Debug)]
pub struct GoldenDir {
    root: PathBuf,
}

/// Inputs manifest: the file's digest and each tensor's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct InputsManifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The command that regenerates the inputs.
    pub generator: String,
    /// sha256 of `kernels.safetensors`.
    pub file_sha256: String,
    /// sha256 of `kernels-more.safetensors`.
    #[serde(default)]
    pub more_sha256: String,
    /// Per tensor: sha256 of its bytes.
    pub tensors: BTreeMap<String, String>,
}

/// Inputs with their tensor names, as the generator makes them.
pub type NamedInputs = Vec<(String, Input)>;

/// Loaded inputs, by tensor name.
pub type Inputs = HashMap<String, Input>;

impl GoldenDir {
    /// The folder at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        GoldenDir { root: root.into() }
    }

    /// `$TIERCHECK_GOLDEN_DIR`, else the repository's `golden/` (as built; see
    /// [`tiercheck_model::golden_folder::golden_dir`]).
    pub fn from_env() -> Self {
        GoldenDir::new(tiercheck_model::golden_folder::golden_dir())
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn inputs_file(&self) -> PathBuf {
        self.root.join("inputs").join("kernels.safetensors")
    }
    fn more_inputs_file(&self) -> PathBuf {
        self.root.join("inputs").join("kernels-more.safetensors")
    }

    /// The inputs as the two files hold them: the tensors only cases of
    /// [`crate::cases::more_types`] read in the second, everything else in the first.
    pub fn split_inputs(inputs: &[(String, Input)]) -> (NamedInputs, NamedInputs) {
        let more: Vec<GgmlType> = crate::cases::more_types().collect();
        let mut base = std::collections::HashSet::new();
        for c in crate::cases::catalogue() {
            if !more.contains(&c.op.ty()) {
                base.extend(c.weight_input());
                base.extend(c.activation_input());
                base.extend(c.attention_inputs().into_iter().flat_map(|(a, b)| [a, b]));
            }
        }
        inputs.iter().cloned().partition(|(n, _)| base.contains(n))
    }
    fn inputs_manifest(&self) -> PathBuf {
        self.root.join("inputs").join("manifest.json")
    }
    /// Folder of one lane's goldens.
    pub fn lane_dir(&self, lane: &str) -> PathBuf {
        self.root.join("lanes").join(lane)
    }

    /// Serialize inputs to safetensors bytes (deterministic: sorted names, no time).
    pub fn inputs_bytes(inputs: &[(String, Input)]) -> Vec<u8> {
        let raws: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = inputs
            .iter()
            .map(|(name, inp)| match inp {
                Input::F32 { shape, data } => (
                    name.clone(),
                    Dtype::F32,
                    shape.clone(),
                    data.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                Input::Blocks { rows, data, .. } => {
                    (name.clone(), Dtype::U8, vec![*rows, data.len() / rows.max(&1)], data.clone())
                }
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = raws
            .iter()
            .map(|(n, dt, shape, raw)| {
                (n.clone(), TensorView::new(*dt, shape.clone(), raw).expect("consistent shapes"))
            })
            .collect();
        let meta = Some(HashMap::from([(
            "generator".to_string(),
            "tiercheck golden gen-inputs".to_string(),
        )]));
        safetensors::serialize(views, &meta).expect("inputs serialize")
    }

    /// Write the inputs and their manifest (each atomically, the manifest last).
    pub fn write_inputs(&self, inputs: &[(String, Input)]) -> Result<(), GoldenError> {
        let dir = self.root.join("inputs");
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let (main, more) = Self::split_inputs(inputs);
        let (bytes, more_bytes) = (Self::inputs_bytes(&main), Self::inputs_bytes(&more));
        let file = self.inputs_file();
        write_atomic(&file, &bytes).map_err(io(&file))?;
        let more_file = self.more_inputs_file();
        write_atomic(&more_file, &more_bytes).map_err(io(&more_file))?;
        let manifest = InputsManifest {
            format: FORMAT,
            generator: "tiercheck golden gen-inputs".into(),
            file_sha256: sha256_hex(&bytes),
            more_sha256: sha256_hex(&more_bytes),
            tensors: inputs.iter().map(|(n, i)| (n.clone(), sha256_hex(&input_bytes(i)))).collect(),
        };
        let mpath = self.inputs_manifest();
        let mut json = serde_json::to_string_pretty(&manifest).expect("serializes");
        json.push('\n');
        write_atomic(&mpath, json.as_bytes()).map_err(io(&mpath))
    }

    /// Read the inputs, verifying them against their manifest.
    pub fn load_inputs(&self) -> Result<Inputs, GoldenError> {
        let mpath = self.inputs_manifest();
        let text = fs::read_to_string(&mpath).map_err(io(&mpath))?;
        let manifest: InputsManifest = serde_json::from_str(&text)
            .map_err(|e| corrupt(&mpath, format!("not a valid inputs manifest: {e}")))?;
        let mut out = HashMap::new();
        for (file, want) in [
            (self.inputs_file(), &manifest.file_sha256),
            (self.more_inputs_file(), &manifest.more_sha256),
        ] {
            Self::read_inputs(&file, want, &mpath, &mut out)?;
        }
        Ok(out)
    }

    /// Read one inputs file into `out`, checking its digest against `want`.
    fn read_inputs(
        file: &Path,
        want: &str,
        mpath: &Path,
        out: &mut Inputs,
    ) -> Result<(), GoldenError> {
        let bytes = fs::read(file).map_err(io(file))?;
        let digest = sha256_hex(&bytes);
        if digest != want {
            return Err(corrupt(
                file,
                format!(
                    "sha256 {digest} differs from {want} recorded in {}; regenerate with \
                     `tiercheck golden gen-inputs`",
                    mpath.display()
                ),
            ));
        }
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| corrupt(file, format!("not valid safetensors: {e}")))?;
        for (name, view) in st.tensors() {
            let raw = view.data();
            let input = match view.dtype() {
                Dtype::F32 => Input::F32 {
                    shape: view.shape().to_vec(),
                    data: raw
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                },
                Dtype::U8 => {
                    let ty = type_of_case(&name).ok_or_else(|| {
                        corrupt(file, format!("tensor {name}: no block type in its name"))
                    })?;
                    Input::Blocks {
                        ty,
                        rows: view.shape().first().copied().unwrap_or(0),
                        data: raw.to_vec(),
                    }
                }
                other => {
                    return Err(corrupt(file, format!("tensor {name}: unexpected dtype {other:?}")))
                }
            };
            out.insert(name, input);
        }
        Ok(())
    }

    /// Load one lane's manifest and outputs, checking their integrity.
    pub fn load_lane(&self, lane: &str) -> Result<LaneGolden, GoldenError> {
        let dir = self.lane_dir(lane);
        let mpath = dir.join("manifest.json");
        if !mpath.exists() {
            return Err(GoldenError::MissingLane {
                lane: lane.to_string(),
                dir: dir.clone(),
                command: bless_command(lane, None),
            });
        }
        let text = fs::read_to_string(&mpath).map_err(io(&mpath))?;
        let manifest = parse_manifest(&mpath, &text, Some(lane))?;
        let opath = dir.join(&manifest.outputs_file);
        let bytes = fs::read(&opath).map_err(io(&opath))?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| corrupt(&opath, format!("not valid safetensors: {e}")))?;
        let mut outputs = HashMap::new();
        for (name, view) in st.tensors() {
            let entry = manifest
                .entries
                .get(&name)
                .ok_or_else(|| corrupt(&opath, format!("tensor {name} has no manifest entry")))?;
            let out = Output::from_stored(view.dtype(), view.shape(), view.data(), &entry.dtype)
                .map_err(|p| corrupt(&opath, format!("tensor {name}: {p}")))?;
            outputs.insert(name, out);
        }
        Ok(LaneGolden { manifest, outputs, manifest_path: mpath, outputs_path: opath })
    }

    /// Write a lane's outputs and manifest. The outputs file name is derived from its
    /// content; the manifest is replaced last, atomically; the previous outputs file is
    /// removed afterwards.
    pub fn write_lane(
        &self,
        lane: &str,
        mut manifest: Manifest,
        outputs: &BTreeMap<String, Output>,
    ) -> Result<(), GoldenError> {
        let dir = self.lane_dir(lane);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let raws: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = outputs
            .iter()
            .map(|(n, o)| (n.clone(), o.stored_dtype(), o.stored_shape(), o.bytes()))
            .collect();
        let views: Vec<(String, TensorView<'_>)> = raws
            .iter()
            .map(|(n, dt, s, raw)| {
                (n.clone(), TensorView::new(*dt, s.clone(), raw).expect("consistent"))
            })
            .collect();
        let bytes = safetensors::serialize(views, &None).expect("outputs serialize");
        let name = format!("outputs-{}.safetensors", &sha256_hex(&bytes)[..12]);
        let old = fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
            .map(|m| m.outputs_file);
        let opath = dir.join(&name);
        write_atomic(&opath, &bytes).map_err(io(&opath))?;
        manifest.outputs_file = name.clone();
        let mpath = dir.join("manifest.json");
        write_atomic(&mpath, manifest.to_json().as_bytes()).map_err(io(&mpath))?;
        if let Some(old) = old.filter(|o| *o != name && !o.contains('/')) {
            let _ = fs::remove_file(dir.join(old));
        }
        Ok(())
    }
}

/// Parse and validate a lane manifest's text (`mpath` names it in errors): its JSON
/// shape, format version, lane (when `lane` is given, it must be that one) and outputs
/// file name (a plain name in the same folder).
pub fn parse_manifest(
    mpath: &Path,
    text: &str,
    lane: Option<&str>,
) -> Result<Manifest, GoldenError> {
    let manifest: Manifest = serde_json::from_str(text)
        .map_err(|e| corrupt(mpath, format!("not a valid manifest: {e}")))?;
    if manifest.format != FORMAT {
        return Err(corrupt(mpath, format!("format {} (expected {FORMAT})", manifest.format)));
    }
    if let Some(lane) = lane.filter(|l| manifest.lane != *l) {
        return Err(corrupt(
            mpath,
            format!(
                "manifest is for lane `{}`, found in the folder of lane `{lane}`",
                manifest.lane
            ),
        ));
    }
    let name = &manifest.outputs_file;
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.contains("..") {
        return Err(corrupt(mpath, format!("bad outputs file name {name:?}")));
    }
    Ok(manifest)
}

/// A lane's goldens, loaded.
#[derive(Debug)]
pub struct LaneGolden {
    /// The manifest.
    pub manifest: Manifest,
    outputs: HashMap<String, Output>,
    manifest_path: PathBuf,
    outputs_path: PathBuf,
}

impl LaneGolden {
    /// The expected output of `case`, checked against its manifest entry: the entry's
    /// own `check` and the stored bits' sha256. The output is the stored part: the whole
    /// output, or the leading sample of a large one (`entry.stored < ` its length).
    /// `Ok(None)` when the lane has no entry.
    pub fn expected(
        &self,
        case: &str,
    ) -> Result<Option<(&super::manifest::Entry, &Output)>, GoldenError> {
        let Some(entry) = self.manifest.entries.get(case) else { return Ok(None) };
        if entry.check != entry.expected_check(case) {
            return Err(corrupt(
                &self.manifest_path,
                format!("entry `{case}` does not match its check digest (edited or damaged)"),
            ));
        }
        let out = self
            .outputs
            .get(case)
            .ok_or_else(|| corrupt(&self.outputs_path, format!("no stored output for `{case}`")))?;
        let digest = out.sha256();
        let full = entry.stored == out.len() && out.shape() == entry.shape;
        if digest != entry.stored_sha256
            || (full && digest != entry.sha256)
            || out.len() != entry.stored
        {
            return Err(corrupt(
                &self.outputs_path,
                format!(
                    "stored output of `{case}` ({} elements, sha256 {digest}) does not match its \
                     manifest entry ({} elements, sha256 {})",
                    out.len(),
                    entry.stored,
                    entry.stored_sha256
                ),
            ));
        }
        Ok(Some((entry, out)))
    }

    /// Paths of the manifest and outputs file.
    pub fn paths(&self) -> (&Path, &Path) {
        (&self.manifest_path, &self.outputs_path)
    }
}

/// The raw bytes of an input (f32 little-endian or block bytes).
pub fn input_bytes(i: &Input) -> Vec<u8> {
    match i {
        Input::F32 { data, .. } => data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        Input::Blocks { data, .. } => data.clone(),
    }
}

/// The block type that starts a case or weight tensor name (`q4_K/...`).
pub(crate) fn type_of_case(name: &str) -> Option<GgmlType> {
    GgmlType::from_name(name.split('/').next()?)
}

/// The exact command that refreshes goldens of `lane` (for `filter`, if given).
pub(crate) fn bless_command(lane: &str, filter: Option<&str>) -> String {
    match filter {
        Some(f) => format!("cargo run -p tiercheck -- bless --lane {lane} --filter '{f}'"),
        None => format!("cargo run -p tiercheck -- bless --lane {lane}"),
    }
}
