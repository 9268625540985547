//! Parsing and validating GGUF files: [`GgufFile`].

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use tiercheck_core::GgmlType;

use super::error::GgufError;
use super::value::{MetaArray, MetaValue, MetaValueType, MAX_ARRAY_DEPTH};
use super::{
    align_up, tensor_byte_size, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGML_MAX_DIMS, GGUF_MAGIC,
};

/// Capacity reserved up front for a list whose declared length is untrusted; the list
/// grows past it only as items are actually parsed.
const MAX_PREALLOC: usize = 4096;

/// Smallest encoded metadata entry: empty key (8) + value type (4) + one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoded tensor info: empty name (8) + n_dims (4) + one dim (8) + type (4) +
/// offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// One tensor's description from the tensor info section, validated against the file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// The tensor name.
    pub name: String,
    /// Dimensions, ne0 (the row length, innermost) first; 1 to 4 of them, all nonzero.
    pub dims: Vec<u64>,
    /// The ggml type.
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section (a multiple of the
    /// alignment).
    pub offset: u64,
    /// Size of the data in bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of values (the product of the dimensions).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Row length (ne0).
    pub fn ne0(&self) -> u64 {
        self.dims.first().copied().unwrap_or(0)
    }

    /// Number of rows (the product of all dimensions but the first).
    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }
}

enum Backing {
    Mmap(Mmap),
    Owned(Vec<u8>),
    Shared(Arc<[u8]>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Owned(v) => v,
            Backing::Shared(a) => a,
        }
    }
}

/// A parsed, fully validated GGUF v2/v3 file: metadata in file order, tensor infos in file
/// order, and access to the tensor bytes (memory-mapped when opened from a path).
///
/// A file opened with [`open`](Self::open) must not be truncated or rewritten while the
/// `GgufFile` is alive (the usual contract of memory-mapped model files).
pub struct GgufFile {
    path: String,
    backing: Backing,
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u32,
    data_offset: u64,
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("len", &self.backing.bytes().len())
            .field("version", &self.version)
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

macro_rules! getters {
    ($($(#[$doc:meta])* $fn:ident -> $t:ty, $variant:ident, $ty:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&self, key: &str) -> Result<$t, GgufError> {
                match self.require(key)? {
                    MetaValue::$variant(v) => Ok(v.clone()),
                    other => Err(self.wrong_type(key, MetaValueType::$ty, other)),
                }
            }
        )*
    };
}

impl GgufFile {
    /// Opens, memory-maps and validates a GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let io = |op: &'static str| {
            let name = name.clone();
            move |source| GgufError::Io { path: name, op, source }
        };
        let file = File::open(path).map_err(io("open"))?;
        let len = file.metadata().map_err(io("stat"))?.len();
        if usize::try_from(len).is_err() {
            return Err(GgufError::TooLarge { path: name, what: format!("file of {len} bytes") });
        }
        let backing = if len == 0 {
            // Mapping an empty file fails on some platforms; there is nothing to map.
            Backing::Owned(Vec::new())
        } else {
            // SAFETY: the mapping is read-only and private to this value. Memory-mapping is
            // only sound while no one truncates or rewrites the file underneath us; like every
            // mmap-based model loader we require that GGUF files are not modified while open
            // (documented on `GgufFile` and in the module docs). All reads go through bounds-checked slices of the
            // mapping, whose length is fixed at map time.
            let map = unsafe { Mmap::map(&file) }.map_err(io("mmap"))?;
            Backing::Mmap(map)
        };
        Self::parse(name, backing)
    }

    /// Parses and validates a GGUF image held in memory; `name` stands in for the path in
    /// error messages.
    pub fn from_bytes(name: impl Into<String>, bytes: Vec<u8>) -> Result<Self, GgufError> {
        Self::parse(name.into(), Backing::Owned(bytes))
    }

    /// Like [`from_bytes`](Self::from_bytes), for a shared buffer.
    pub fn from_shared(name: impl Into<String>, bytes: Arc<[u8]>) -> Result<Self, GgufError> {
        Self::parse(name.into(), Backing::Shared(bytes))
    }

    fn parse(path: String, backing: Backing) -> Result<Self, GgufError> {
        let parsed = parse(&path, backing.bytes())?;
        Ok(GgufFile {
            path,
            backing,
            version: parsed.version,
            metadata: parsed.metadata,
            key_index: parsed.key_index,
            tensors: parsed.tensors,
            tensor_index: parsed.tensor_index,
            alignment: parsed.alignment,
            data_offset: parsed.data_offset,
        })
    }

    /// The path (or name) given when opening.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, or 32).
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// Absolute offset of the data section: the end of the tensor infos rounded up to the
    /// alignment.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// All metadata entries in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// The value of a metadata key.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.key_index.get(key).and_then(|&i| self.metadata.get(i)).map(|(_, v)| v)
    }

    fn require(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.get(key)
            .ok_or_else(|| GgufError::KeyNotFound { path: self.path.clone(), key: key.to_owned() })
    }

    fn wrong_type(&self, key: &str, expected: MetaValueType, found: &MetaValue) -> GgufError {
        GgufError::WrongType {
            path: self.path.clone(),
            key: key.to_owned(),
            expected,
            found: found.value_type(),
        }
    }

    getters! {
        /// A `uint8` value; `KeyNotFound` or `WrongType` otherwise.
        get_u8 -> u8, U8, U8;
        /// An `int8` value.
        get_i8 -> i8, I8, I8;
        /// A `uint16` value.
        get_u16 -> u16, U16, U16;
        /// An `int16` value.
        get_i16 -> i16, I16, I16;
        /// A `uint32` value.
        get_u32 -> u32, U32, U32;
        /// An `int32` value.
        get_i32 -> i32, I32, I32;
        /// A `float32` value.
        get_f32 -> f32, F32, F32;
        /// A `bool` value.
        get_bool -> bool, Bool, Bool;
        /// A `uint64` value.
        get_u64 -> u64, U64, U64;
        /// An `int64` value.
        get_i64 -> i64, I64, I64;
        /// A `float64` value.
        get_f64 -> f64, F64, F64;
    }

    /// A `string` value.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            MetaValue::String(s) => Ok(s),
            other => Err(self.wrong_type(key, MetaValueType::String, other)),
        }
    }

    /// An `array` value.
    pub fn get_array(&self, key: &str) -> Result<&MetaArray, GgufError> {
        match self.require(key)? {
            MetaValue::Array(a) => Ok(a),
            other => Err(self.wrong_type(key, MetaValueType::Array, other)),
        }
    }

    /// All tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor info of `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).and_then(|&i| self.tensors.get(i))
    }

    /// The data bytes of a tensor of this file (`info.n_bytes` long). An info that does not
    /// belong to this file and points outside it yields an empty slice.
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let range = self.data_offset.checked_add(info.offset).and_then(|start| {
            let end = start.checked_add(info.n_bytes)?;
            Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
        });
        range.and_then(|r| self.backing.bytes().get(r)).unwrap_or(&[])
    }

    /// Release this process's resident pages of a tensor's bytes, for a caller that has
    /// made its own copy (a repacked or dequantized weight) and no longer reads them: the
    /// pages leave the process's resident set (the kernel's page cache keeps the file, so
    /// a later read faults them back in with the same bytes), as ggml unmaps the mapped
    /// fragments it has copied out. Only for a memory-mapped file; otherwise nothing
    /// happens. Returns whether pages were released.
    pub fn release_tensor(&self, info: &TensorInfo) -> bool {
        let Backing::Mmap(map) = &self.backing else { return false };
        let Some(start) = self.data_offset.checked_add(info.offset) else { return false };
        let (Ok(start), Ok(len)) = (usize::try_from(start), usize::try_from(info.n_bytes)) else {
            return false;
        };
        if len == 0 || start.checked_add(len).is_none_or(|end| end > map.len()) {
            return false;
        }
        // SAFETY: the map is a read-only mapping of a file, so MADV_DONTNEED never loses
        // data: it drops this process's page-table entries and the next access reads the
        // file's page again; no `&mut` to the map exists, and the bytes any live `&[u8]`
        // sees stay the same (the file must not change while open, as for every read).
        unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) }
            .is_ok()
    }

    /// The data bytes of the tensor `name`.
    pub fn tensor_bytes(&self, name: &str) -> Option<&[u8]> {
        self.tensor(name).map(|t| self.tensor_data(t))
    }
}

struct Parsed {
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u32,
    data_offset: u64,
}

#[derive(Clone, Copy)]
enum Section {
    Header,
    Metadata,
    TensorInfo,
}

/// A bounds-checked little-endian reader over the file bytes.
struct Cursor<'a> {
    path: &'a str,
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn truncated(&self, section: Section, what: String, needed: u64) -> GgufError {
        let (path, offset, available) =
            (self.path.to_owned(), self.offset(), self.remaining() as u64);
        match section {
            Section::Header => GgufError::TruncatedHeader { path, what, offset, needed, available },
            Section::Metadata => {
                GgufError::TruncatedMetadata { path, what, offset, needed, available }
            }
            Section::TensorInfo => {
                GgufError::TruncatedTensorInfo { path, what, offset, needed, available }
            }
        }
    }

    /// The next `n` bytes; `what` names them in the error when the file is too short.
    fn take(
        &mut self,
        n: u64,
        section: Section,
        what: &dyn Fn() -> String,
    ) -> Result<&'a [u8], GgufError> {
        let bytes = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .and_then(|n| self.buf.get(self.pos..self.pos + n));
        match bytes {
            Some(b) => {
                self.pos += b.len();
                Ok(b)
            }
            None => Err(self.truncated(section, what(), n)),
        }
    }

    fn array<const N: usize>(
        &mut self,
        section: Section,
        what: &dyn Fn() -> String,
    ) -> Result<[u8; N], GgufError> {
        let b = self.take(N as u64, section, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    fn u32(&mut self, section: Section, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        self.array(section, what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, section: Section, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        self.array(section, what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    fn string(&mut self, section: Section, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(section, &|| format!("length of {}", what()))?;
        let start = self.offset();
        let bytes = self.take(len, section, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(GgufError::InvalidUtf8 {
                path: self.path.to_owned(),
                what: what(),
                offset: start,
            }),
        }
    }

    /// Fails unless `count` items of at least `min_item_bytes` each fit in the rest of the
    /// file; returns the count as `usize` (then necessarily at most the file length).
    fn check_count(
        &self,
        count: u64,
        min_item_bytes: u64,
        what: &dyn Fn() -> String,
    ) -> Result<usize, GgufError> {
        let fits = count.checked_mul(min_item_bytes).is_some_and(|n| n <= self.remaining() as u64);
        match usize::try_from(count) {
            Ok(n) if fits => Ok(n),
            _ => Err(GgufError::CountTooLarge {
                path: self.path.to_owned(),
                what: what(),
                count,
                min_item_bytes,
                available: self.remaining() as u64,
                offset: self.offset(),
            }),
        }
    }

    fn value(
        &mut self,
        ty: MetaValueType,
        key: &str,
        depth: usize,
    ) -> Result<MetaValue, GgufError> {
        let sec = Section::Metadata;
        let what = || format!("value of key `{key}`");
        Ok(match ty {
            MetaValueType::U8 => MetaValue::U8(u8::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::I8 => MetaValue::I8(i8::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::U32 => MetaValue::U32(u32::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::U64 => MetaValue::U64(u64::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.array(sec, &what)?)),
            MetaValueType::Bool => {
                let offset = self.offset();
                let [b] = self.array(sec, &what)?;
                MetaValue::Bool(self.bool(b, key, offset)?)
            }
            MetaValueType::String => MetaValue::String(self.string(sec, &what)?),
            MetaValueType::Array => MetaValue::Array(self.meta_array(key, depth + 1)?),
        })
    }

    fn bool(&self, b: u8, key: &str, offset: u64) -> Result<bool, GgufError> {
        match b {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(GgufError::InvalidBool {
                path: self.path.to_owned(),
                key: key.to_owned(),
                value,
                offset,
            }),
        }
    }

    /// An array value (element type, count, elements) at nesting level `depth` (1 for an
    /// array that is itself a key's value).
    fn meta_array(&mut self, key: &str, depth: usize) -> Result<MetaArray, GgufError> {
        let sec = Section::Metadata;
        let type_offset = self.offset();
        let type_id = self.u32(sec, &|| format!("array element type of key `{key}`"))?;
        let elem = MetaValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            path: self.path.to_owned(),
            key: key.to_owned(),
            type_id,
            offset: type_offset,
        })?;
        if elem == MetaValueType::Array && depth >= MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep {
                path: self.path.to_owned(),
                key: key.to_owned(),
                max_depth: MAX_ARRAY_DEPTH,
            });
        }
        let count = self.u64(sec, &|| format!("array length of key `{key}`"))?;
        let n = self.check_count(count, elem.min_encoded_size(), &|| {
            format!("array element ({elem}) of key `{key}`")
        })?;
        let what = || format!("array elements of key `{key}`");

        macro_rules! numeric {
            ($variant:ident, $t:ty) => {{
                const SIZE: usize = std::mem::size_of::<$t>();
                let bytes = self.take((n * SIZE) as u64, sec, &what)?;
                MetaArray::$variant(
                    bytes
                        .chunks_exact(SIZE)
                        .map(|c| {
                            let mut a = [0u8; SIZE];
                            a.copy_from_slice(c);
                            <$t>::from_le_bytes(a)
                        })
                        .collect(),
                )
            }};
        }

        Ok(match elem {
            MetaValueType::U8 => MetaArray::U8(self.take(n as u64, sec, &what)?.to_vec()),
            MetaValueType::I8 => numeric!(I8, i8),
            MetaValueType::U16 => numeric!(U16, u16),
            MetaValueType::I16 => numeric!(I16, i16),
            MetaValueType::U32 => numeric!(U32, u32),
            MetaValueType::I32 => numeric!(I32, i32),
            MetaValueType::F32 => numeric!(F32, f32),
            MetaValueType::U64 => numeric!(U64, u64),
            MetaValueType::I64 => numeric!(I64, i64),
            MetaValueType::F64 => numeric!(F64, f64),
            MetaValueType::Bool => {
                let start = self.offset();
                let bytes = self.take(n as u64, sec, &what)?;
                let mut out = Vec::with_capacity(n);
                for (i, &b) in bytes.iter().enumerate() {
                    out.push(self.bool(b, key, start + i as u64)?);
                }
                MetaArray::Bool(out)
            }
            MetaValueType::String => {
                let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
                for i in 0..n {
                    out.push(self.string(sec, &|| format!("string {i} of array key `{key}`"))?);
                }
                MetaArray::String(out)
            }
            MetaValueType::Array => {
                let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
                for _ in 0..n {
                    out.push(self.meta_array(key, depth + 1)?);
                }
                MetaArray::Array(out)
            }
        })
    }
}

/// Parses and validates a whole GGUF image.
fn parse(path: &str, buf: &[u8]) -> Result<Parsed, GgufError> {
    let mut cur = Cursor { path, buf, pos: 0 };
    let err_path = || path.to_owned();

    // Header.
    let magic: [u8; 4] = cur.array(Section::Header, &|| "magic".into())?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { path: err_path(), found: magic });
    }
    let version = cur.u32(Section::Header, &|| "version".into())?;
    match version {
        2 | 3 => {}
        v if v & 0xFFFF == 0 && v != 0 => {
            return Err(GgufError::BigEndian { path: err_path(), raw: v, version: v.swap_bytes() })
        }
        v => return Err(GgufError::UnsupportedVersion { path: err_path(), version: v }),
    }
    let tensor_count = cur.u64(Section::Header, &|| "tensor count".into())?;
    let kv_count = cur.u64(Section::Header, &|| "metadata kv count".into())?;

    // Metadata.
    let n_kv = cur.check_count(kv_count, MIN_KV_BYTES, &|| "metadata entry".into())?;
    let mut metadata: Vec<(String, MetaValue)> = Vec::with_capacity(n_kv.min(MAX_PREALLOC));
    let mut key_index = HashMap::with_capacity(n_kv.min(MAX_PREALLOC));
    for i in 0..n_kv {
        let key = cur.string(Section::Metadata, &|| format!("key of metadata entry {i}"))?;
        if key_index.contains_key(&key) {
            return Err(GgufError::DuplicateKey { path: err_path(), key });
        }
        let type_offset = cur.offset();
        let type_id = cur.u32(Section::Metadata, &|| format!("value type of key `{key}`"))?;
        let ty = MetaValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            path: err_path(),
            key: key.clone(),
            type_id,
            offset: type_offset,
        })?;
        let value = cur.value(ty, &key, 0)?;
        key_index.insert(key.clone(), metadata.len());
        metadata.push((key, value));
    }

    let alignment = match key_index.get(ALIGNMENT_KEY).and_then(|&i| metadata.get(i)) {
        None => DEFAULT_ALIGNMENT,
        Some((_, MetaValue::U32(a))) => {
            if !a.is_power_of_two() {
                return Err(GgufError::InvalidAlignment { path: err_path(), value: *a });
            }
            *a
        }
        Some((_, other)) => {
            return Err(GgufError::AlignmentType { path: err_path(), found: other.value_type() })
        }
    };

    // Tensor infos.
    let n_tensors =
        cur.check_count(tensor_count, MIN_TENSOR_INFO_BYTES, &|| "tensor info".into())?;
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors.min(MAX_PREALLOC));
    let mut tensor_index = HashMap::with_capacity(n_tensors.min(MAX_PREALLOC));
    let sec = Section::TensorInfo;
    for i in 0..n_tensors {
        let name = cur.string(sec, &|| format!("name of tensor {i}"))?;
        let n_dims = cur.u32(sec, &|| format!("n_dims of tensor `{name}`"))?;
        if n_dims == 0 || n_dims as usize > GGML_MAX_DIMS {
            return Err(GgufError::NDimsOutOfRange { path: err_path(), tensor: name, n_dims });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(cur.u64(sec, &|| format!("dimension {d} of tensor `{name}`"))?);
        }
        let type_id = cur.u32(sec, &|| format!("type of tensor `{name}`"))?;
        let offset = cur.u64(sec, &|| format!("data offset of tensor `{name}`"))?;
        let Some(ty) = GgmlType::from_id(type_id) else {
            return Err(GgufError::UnknownTensorType { path: err_path(), tensor: name, type_id });
        };
        let n_bytes = tensor_byte_size(path, &name, &dims, ty)?;
        if !offset.is_multiple_of(u64::from(alignment)) {
            return Err(GgufError::MisalignedOffset {
                path: err_path(),
                tensor: name,
                offset,
                alignment,
            });
        }
        if tensor_index.contains_key(&name) {
            return Err(GgufError::DuplicateTensor { path: err_path(), name });
        }
        tensor_index.insert(name.clone(), tensors.len());
        tensors.push(TensorInfo { name, dims, ty, offset, n_bytes });
    }

    // Data section.
    let data_offset = align_up(cur.offset(), alignment).ok_or_else(|| GgufError::TooLarge {
        path: err_path(),
        what: "data section offset".into(),
    })?;
    let file_len = buf.len() as u64;
    for t in &tensors {
        let end = data_offset.checked_add(t.offset).and_then(|s| s.checked_add(t.n_bytes));
        if end.is_none_or(|end| end > file_len) {
            return Err(GgufError::TensorDataOutOfBounds {
                path: err_path(),
                tensor: t.name.clone(),
                offset: t.offset,
                size: t.n_bytes,
                data_offset,
                file_len,
            });
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        if let [a, b] = pair {
            // In bounds above, so the sum cannot overflow.
            let a_end = a.offset.saturating_add(a.n_bytes);
            if a_end > b.offset {
                return Err(GgufError::OverlappingTensors {
                    path: err_path(),
                    first: a.name.clone(),
                    first_start: a.offset,
                    first_end: a_end,
                    second: b.name.clone(),
                    second_start: b.offset,
                });
            }
        }
    }

    Ok(Parsed { version, metadata, key_index, tensors, tensor_index, alignment, data_offset })
}
