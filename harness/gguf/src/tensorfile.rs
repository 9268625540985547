//! Reading and writing f32 tensors as safetensors files (numpy/torch readable).
//!
//! Reading accepts F32, F16 and BF16 tensors and converts to f32 exactly. Every
//! problem is an error naming the file: unreadable, not safetensors, unsupported
//! dtype, a shape that does not match the expectation. Writing is atomic.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::atomic_write::write_atomic;

/// One f32 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Name in the file.
    pub name: String,
    /// Shape, outermost first (numpy order).
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f32>,
}

/// Errors reading or writing a tensor file.
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The bytes are not a valid safetensors file.
    #[error("{path}: not a valid safetensors file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// A tensor has a dtype we cannot read as f32.
    #[error("{path}: tensor '{name}' has dtype {dtype}; expected F32, F16 or BF16")]
    Dtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// The file does not hold what the caller needs.
    #[error("{path}: {problem}")]
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// All tensors of a file, sorted by name, plus the file's string metadata.
pub fn read(path: &Path) -> Result<(Vec<Tensor>, BTreeMap<String, String>), TensorFileError> {
    let bytes = std::fs::read(path)
        .map_err(|source| TensorFileError::Io { path: path.to_owned(), source })?;
    read_bytes(path, &bytes)
}

/// The string metadata of a safetensors file, read from its header alone (a trace of a
/// long run is hundreds of megabytes; its metadata a few kilobytes).
pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, String>, TensorFileError> {
    use std::io::Read;
    let io = |source| TensorFileError::Io { path: path.to_owned(), source };
    let bad = |reason: String| TensorFileError::Format { path: path.to_owned(), reason };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(|_| bad("shorter than its 8-byte header length".into()))?;
    let n = u64::from_le_bytes(n);
    // The safetensors format caps its header at 100 MB.
    if n > 100_000_000 || n > len.saturating_sub(8) {
        return Err(bad(format!("a header of {n} bytes in a file of {len}")));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(io)?;
    let json: serde_json::Value =
        serde_json::from_slice(&header).map_err(|e| bad(format!("header: {e}")))?;
    let mut out = BTreeMap::new();
    if let Some(meta) = json.get("__metadata__") {
        let Some(map) = meta.as_object() else {
            return Err(bad("__metadata__ is not an object of strings".into()));
        };
        for (k, v) in map {
            let Some(v) = v.as_str() else {
                return Err(bad(format!("__metadata__ entry '{k}' is not a string")));
            };
            out.insert(k.clone(), v.to_string());
        }
    }
    Ok(out)
}

/// [`read`] on a file's bytes already in memory; `path` names it in errors.
pub fn read_bytes(
    path: &Path,
    bytes: &[u8],
) -> Result<(Vec<Tensor>, BTreeMap<String, String>), TensorFileError> {
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| TensorFileError::Format { path: path.to_owned(), reason: e.to_string() })?;
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| TensorFileError::Format { path: path.to_owned(), reason: e.to_string() })?;
    let metadata: BTreeMap<String, String> =
        meta.metadata().clone().unwrap_or_default().into_iter().collect();
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let raw = view.data();
        let data: Vec<f32> = match view.dtype() {
            Dtype::F32 => {
                raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
            }
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|c| tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|c| tiercheck_core::fp16::bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            other => {
                return Err(TensorFileError::Dtype {
                    path: path.to_owned(),
                    name,
                    dtype: format!("{other:?}"),
                })
            }
        };
        out.push(Tensor { name, shape: view.shape().to_vec(), data });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, metadata))
}

/// The single tensor of a file, required to be 2-D `[rows, cols]` (a 1-D tensor is
/// taken as one row). Returns (tensor, rows, cols).
pub fn read_matrix(path: &Path) -> Result<(Tensor, usize, usize), TensorFileError> {
    let (mut tensors, _) = read(path)?;
    if tensors.len() != 1 {
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        return Err(TensorFileError::Content {
            path: path.to_owned(),
            problem: format!("expected exactly one tensor, found {}: {names:?}", tensors.len()),
        });
    }
    let t = tensors.remove(0);
    let (rows, cols) = match t.shape.as_slice() {
        [k] => (1, *k),
        [m, k] => (*m, *k),
        other => {
            return Err(TensorFileError::Content {
                path: path.to_owned(),
                problem: format!("tensor '{}' has shape {other:?}; expected [m, k]", t.name),
            })
        }
    };
    Ok((t, rows, cols))
}

/// Write f32 tensors and string metadata atomically.
pub fn write(
    path: &Path,
    tensors: &[Tensor],
    metadata: &BTreeMap<String, String>,
) -> Result<(), TensorFileError> {
    let raws: Vec<Vec<u8>> =
        tensors.iter().map(|t| t.data.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
    let mut views = Vec::with_capacity(tensors.len());
    let mut names = std::collections::BTreeSet::new();
    for (t, raw) in tensors.iter().zip(&raws) {
        // Two tensors of one name would make the safetensors serializer index past its
        // name list.
        if !names.insert(t.name.as_str()) {
            return Err(TensorFileError::Content {
                path: path.to_owned(),
                problem: format!("two tensors are named '{}'", t.name),
            });
        }
        let view = TensorView::new(Dtype::F32, t.shape.clone(), raw).map_err(|e| {
            TensorFileError::Content {
                path: path.to_owned(),
                problem: format!("tensor '{}': {e}", t.name),
            }
        })?;
        views.push((t.name.clone(), view));
    }
    let meta: Option<HashMap<String, String>> =
        if metadata.is_empty() { None } else { Some(metadata.clone().into_iter().collect()) };
    let bytes = safetensors::serialize(views, &meta)
        .map_err(|e| TensorFileError::Content { path: path.to_owned(), problem: e.to_string() })?;
    write_atomic(path, &bytes)
        .map_err(|source| TensorFileError::Io { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_tensors_of_one_name_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.safetensors");
        let t = Tensor { name: "a".into(), shape: vec![1, 2], data: vec![1.0, 2.0] };
        let e = write(&p, &[t.clone(), t], &BTreeMap::new()).unwrap_err().to_string();
        assert!(e.contains("two tensors are named 'a'"), "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.safetensors");
        let t = Tensor {
            name: "x".into(),
            shape: vec![2, 3],
            data: vec![1.0, -2.0, 3.5, 0.0, -0.0, 1e-40],
        };
        let meta = BTreeMap::from([("lane".to_string(), "ref".to_string())]);
        write(&p, std::slice::from_ref(&t), &meta).unwrap();
        let (back, m) = read(&p).unwrap();
        assert_eq!(m, meta);
        assert_eq!(back.len(), 1);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back[0].data), bits(&t.data));
        let (_, rows, cols) = read_matrix(&p).unwrap();
        assert_eq!((rows, cols), (2, 3));

        std::fs::write(&p, b"garbage").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("x.safetensors") && e.contains("not a valid safetensors"), "{e}");
        let missing = dir.path().join("nope.safetensors");
        assert!(read(&missing).unwrap_err().to_string().contains("nope.safetensors"));
    }
}
