//! Building GGUF files: [`GgufWriter`].

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use tiercheck_core::GgmlType;

use super::error::GgufError;
use super::value::{MetaArray, MetaValue, MAX_ARRAY_DEPTH};
use super::{align_up, tensor_byte_size, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC};
use crate::atomic_write::write_atomic_with;

/// The `path` of errors raised while building, before any file is named.
const WRITER_PATH: &str = "<gguf writer>";

struct PendingTensor<'a> {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Data<'a>,
}

/// A tensor's data: held, or produced while the file is written.
enum Data<'a> {
    Bytes(Cow<'a, [u8]>),
    /// This many bytes, produced by the `fill` of [`GgufWriter::write_file_streaming`].
    Deferred(u64),
}

impl Data<'_> {
    fn len(&self) -> u64 {
        match self {
            Data::Bytes(b) => b.len() as u64,
            Data::Deferred(n) => *n,
        }
    }
}

/// Builds a GGUF file: metadata in insertion order, then tensor infos and data in insertion
/// order, each tensor's data at the next multiple of the alignment (zero padded, including
/// after the last tensor, as llama.cpp and gguf-py do).
///
/// Every `add_*`/`set_*` call validates its input, so a writer that accepted everything
/// produces a file that [`GgufFile`](super::GgufFile) accepts.
///
/// ```
/// use tiercheck_gguf::{GgufFile, GgufWriter};
/// use tiercheck_core::GgmlType;
///
/// let mut w = GgufWriter::new();
/// w.add_metadata("general.architecture", "qwen3")?
///     .add_metadata("qwen3.block_count", 2u32)?
///     .add_tensor("w", &[4, 2], GgmlType::F32, vec![0u8; 32])?;
/// let f = GgufFile::from_bytes("mem", w.to_bytes()?)?;
/// assert_eq!(f.get_u32("qwen3.block_count")?, 2);
/// # Ok::<(), tiercheck_gguf::GgufError>(())
/// ```
pub struct GgufWriter<'a> {
    version: u32,
    alignment: u32,
    metadata: Vec<(String, MetaValue)>,
    keys: HashSet<String>,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty GGUF v3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Sets the GGUF version to write: 2 or 3 (same layout; 3 is the default).
    pub fn set_version(&mut self, version: u32) -> Result<&mut Self, GgufError> {
        if !matches!(version, 2 | 3) {
            return Err(GgufError::UnsupportedVersion { path: WRITER_PATH.into(), version });
        }
        self.version = version;
        Ok(self)
    }

    /// Sets `general.alignment` (a nonzero power of two), adding the key or replacing its
    /// value in place.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self, GgufError> {
        check_alignment(&MetaValue::U32(alignment))?;
        self.alignment = alignment;
        match self.metadata.iter_mut().find(|(k, _)| k == ALIGNMENT_KEY) {
            Some((_, v)) => *v = MetaValue::U32(alignment),
            None => {
                self.keys.insert(ALIGNMENT_KEY.to_owned());
                self.metadata.push((ALIGNMENT_KEY.to_owned(), MetaValue::U32(alignment)));
            }
        }
        Ok(self)
    }

    /// The data alignment the file will use.
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// The version the file will have.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Adds a metadata entry. Fails on a duplicate key, arrays nested deeper than
    /// [`MAX_ARRAY_DEPTH`], or a `general.alignment` that is not a `uint32` nonzero power of
    /// two (which then sets the data alignment).
    pub fn add_metadata(
        &mut self,
        key: impl Into<String>,
        value: impl Into<MetaValue>,
    ) -> Result<&mut Self, GgufError> {
        let key = key.into();
        let value = value.into();
        if self.keys.contains(&key) {
            return Err(GgufError::DuplicateKey { path: WRITER_PATH.into(), key });
        }
        if value.depth() > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep {
                path: WRITER_PATH.into(),
                key,
                max_depth: MAX_ARRAY_DEPTH,
            });
        }
        if key == ALIGNMENT_KEY {
            self.alignment = check_alignment(&value)?;
        }
        self.keys.insert(key.clone());
        self.metadata.push((key, value));
        Ok(self)
    }

    /// The metadata added so far.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// Adds a tensor: `dims` ne0 (row length) first, `data` its raw bytes in ggml layout.
    /// Fails on a duplicate name, 0 or more than 4 dims, a zero dimension, a row length that
    /// is not a whole number of blocks, overflowing sizes, or `data` of the wrong length.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self, GgufError> {
        let name = name.into();
        let data = data.into();
        let expected = self.check_new_tensor(&name, dims, ty)?;
        if expected != data.len() as u64 {
            return Err(GgufError::TensorSizeMismatch {
                path: WRITER_PATH.into(),
                tensor: name,
                expected,
                actual: data.len() as u64,
            });
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor { name, dims: dims.to_vec(), ty, data: Data::Bytes(data) });
        Ok(self)
    }

    /// The checks every new tensor passes (a unique name, 1 to GGML_MAX_DIMS dims, a
    /// size that fits): its byte size.
    fn check_new_tensor(&self, name: &str, dims: &[u64], ty: GgmlType) -> Result<u64, GgufError> {
        if self.names.contains(name) {
            return Err(GgufError::DuplicateTensor { path: WRITER_PATH.into(), name: name.into() });
        }
        let n_dims = u32::try_from(dims.len()).unwrap_or(u32::MAX);
        if dims.is_empty() || dims.len() > super::GGML_MAX_DIMS {
            return Err(GgufError::NDimsOutOfRange {
                path: WRITER_PATH.into(),
                tensor: name.into(),
                n_dims,
            });
        }
        tensor_byte_size(WRITER_PATH, name, dims, ty)
    }

    /// Declares a tensor whose data is produced while the file is written, by the `fill`
    /// of [`write_file_streaming`](Self::write_file_streaming), so a file larger than
    /// memory can be written. The same checks as [`add_tensor`](Self::add_tensor) apply
    /// to the name and dims; the data's length is checked when it is produced.
    pub fn add_tensor_deferred(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ty: GgmlType,
    ) -> Result<&mut Self, GgufError> {
        let name = name.into();
        let n = self.check_new_tensor(&name, dims, ty)?;
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor { name, dims: dims.to_vec(), ty, data: Data::Deferred(n) });
        Ok(self)
    }

    /// Header, metadata, tensor infos and the padding up to the data section, plus each
    /// tensor's offset relative to the data section and the total data section length.
    fn layout(&self, path: &str) -> Result<(Vec<u8>, Vec<u64>, u64), GgufError> {
        let too_large =
            |what: &str| GgufError::TooLarge { path: path.to_owned(), what: what.to_owned() };
        let align = self.alignment;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut end = 0u64;
        for t in &self.tensors {
            let start = align_up(end, align).ok_or_else(|| too_large("tensor data"))?;
            offsets.push(start);
            end = start.checked_add(t.data.len()).ok_or_else(|| too_large("tensor data"))?;
        }
        let data_len = align_up(end, align).ok_or_else(|| too_large("tensor data"))?;

        let mut head = Vec::new();
        head.extend_from_slice(&GGUF_MAGIC);
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut head, key);
            head.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut head, value);
        }
        for (t, offset) in self.tensors.iter().zip(&offsets) {
            put_str(&mut head, &t.name);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.ty.id().to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
        }
        let data_offset =
            align_up(head.len() as u64, align).ok_or_else(|| too_large("metadata"))?;
        let data_offset = usize::try_from(data_offset).map_err(|_| too_large("metadata"))?;
        head.resize(data_offset, 0);
        Ok((head, offsets, data_len))
    }

    /// Writes the whole file to `out` (no atomicity; see [`write_file`](Self::write_file)).
    /// `path` names the destination in errors.
    pub(crate) fn write_to<W: Write>(&self, out: &mut W, path: &str) -> Result<(), GgufError> {
        self.write_to_with(out, path, &mut |i, _| Err(deferred_without_fill(&self.tensors[i].name)))
    }

    /// [`write_to`](Self::write_to), producing deferred tensors with `fill(index, out)`.
    fn write_to_with<W: Write>(
        &self,
        out: &mut W,
        path: &str,
        fill: &mut dyn FnMut(usize, &mut dyn Write) -> Result<(), GgufError>,
    ) -> Result<(), GgufError> {
        let (head, offsets, data_len) = self.layout(path)?;
        let io = |source| GgufError::Io { path: path.to_owned(), op: "write", source };
        out.write_all(&head).map_err(io)?;
        let mut pos = 0u64;
        for (i, (t, &offset)) in self.tensors.iter().zip(&offsets).enumerate() {
            write_zeros(out, offset.saturating_sub(pos)).map_err(io)?;
            match &t.data {
                Data::Bytes(b) => out.write_all(b).map_err(io)?,
                Data::Deferred(n) => {
                    let mut counted = Counting { inner: &mut *out, n: 0 };
                    fill(i, &mut counted)?;
                    if counted.n != *n {
                        return Err(GgufError::TensorSizeMismatch {
                            path: path.to_owned(),
                            tensor: t.name.clone(),
                            expected: *n,
                            actual: counted.n,
                        });
                    }
                }
            }
            pos = offset.saturating_add(t.data.len());
        }
        write_zeros(out, data_len.saturating_sub(pos)).map_err(io)?;
        Ok(())
    }

    /// The whole file in memory. Fails when a tensor was declared with
    /// [`add_tensor_deferred`](Self::add_tensor_deferred).
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut out = Vec::new();
        self.write_to(&mut out, "<memory>")?;
        Ok(out)
    }

    /// Writes the file atomically, as [`write_file`](Self::write_file), producing each
    /// tensor declared with [`add_tensor_deferred`](Self::add_tensor_deferred) by
    /// `fill(index, out)` (the tensor's index in insertion order) when its turn comes.
    /// `fill` must write exactly the tensor's byte size: anything else fails the write
    /// with [`GgufError::TensorSizeMismatch`] and leaves `path` as it was.
    pub fn write_file_streaming(
        &self,
        path: impl AsRef<Path>,
        mut fill: impl FnMut(usize, &mut dyn Write) -> Result<(), GgufError>,
    ) -> Result<(), GgufError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let io_err = |op: &'static str, source| GgufError::Io { path: shown.clone(), op, source };
        write_atomic_with(
            path,
            |file| {
                let mut w = BufWriter::with_capacity(1 << 20, file);
                self.write_to_with(&mut w, &shown, &mut fill)?;
                w.flush().map_err(|e| io_err("write", e))
            },
            io_err,
        )
    }

    /// The size of the file this writer writes, in bytes.
    pub fn file_len(&self) -> Result<u64, GgufError> {
        let (head, _, data_len) = self.layout(WRITER_PATH)?;
        Ok(head.len() as u64 + data_len)
    }

    /// The byte size of the tensor at `index` (insertion order).
    pub fn tensor_bytes(&self, index: usize) -> Option<u64> {
        self.tensors.get(index).map(|t| t.data.len())
    }

    /// Writes the file atomically: into a fresh temporary file in the same directory,
    /// flushed and synced, then renamed over `path`. On any failure the temporary file is
    /// removed and `path` is left as it was.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let io_err = |op: &'static str, source| GgufError::Io { path: shown.clone(), op, source };
        write_atomic_with(
            path,
            |file| {
                let mut w = BufWriter::new(file);
                self.write_to(&mut w, &shown)?;
                w.flush().map_err(|e| io_err("write", e))
            },
            io_err,
        )
    }
}

/// Validates a `general.alignment` value and returns it.
fn check_alignment(value: &MetaValue) -> Result<u32, GgufError> {
    match value {
        MetaValue::U32(a) if a.is_power_of_two() => Ok(*a),
        MetaValue::U32(a) => {
            Err(GgufError::InvalidAlignment { path: WRITER_PATH.into(), value: *a })
        }
        other => {
            Err(GgufError::AlignmentType { path: WRITER_PATH.into(), found: other.value_type() })
        }
    }
}

fn deferred_without_fill(name: &str) -> GgufError {
    GgufError::Deferred { path: WRITER_PATH.into(), tensor: name.to_owned() }
}

/// Counts the bytes written through it.
struct Counting<'w, W: Write + ?Sized> {
    inner: &'w mut W,
    n: u64,
}

impl<W: Write + ?Sized> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn write_zeros<W: Write>(out: &mut W, mut n: u64) -> io::Result<()> {
    const ZEROS: [u8; 256] = [0; 256];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..k])?;
        n -= k as u64;
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::Bool(v) => out.push(u8::from(*v)),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(a) => put_array(out, a),
        MetaValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, a: &MetaArray) {
    out.extend_from_slice(&a.elem_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        MetaArray::U8(v) => out.extend_from_slice(v),
        MetaArray::I8(v) => each!(v),
        MetaArray::U16(v) => each!(v),
        MetaArray::I16(v) => each!(v),
        MetaArray::U32(v) => each!(v),
        MetaArray::I32(v) => each!(v),
        MetaArray::F32(v) => each!(v),
        MetaArray::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        MetaArray::String(v) => v.iter().for_each(|s| put_str(out, s)),
        MetaArray::Array(v) => v.iter().for_each(|inner| put_array(out, inner)),
        MetaArray::U64(v) => each!(v),
        MetaArray::I64(v) => each!(v),
        MetaArray::F64(v) => each!(v),
    }
}
