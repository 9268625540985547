//! The GGUF error type.

use tiercheck_core::GgmlType;

use super::value::MetaValueType;

/// What went wrong reading, validating or writing a GGUF file.
///
/// Every variant carries `path`: the file path (or the name given to
/// [`GgufFile::from_bytes`](super::GgufFile::from_bytes), or `<gguf writer>` for builder
/// errors), and its `Display` starts with it. Offsets are absolute byte offsets in the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// An I/O operation on the file failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What was being done (`open`, `mmap`, `write`, `rename`, ...).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The first four bytes are not `GGUF`.
    #[error(
        "{path}: bad magic {found:02x?}, not a GGUF file (expected \"GGUF\" = [47, 47, 55, 46])"
    )]
    BadMagic {
        /// The file.
        path: String,
        /// The bytes found.
        found: [u8; 4],
    },

    /// A version other than 2 or 3.
    #[error("{path}: unsupported GGUF version {version} (supported: 2, 3)")]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version read (little-endian).
        version: u32,
    },

    /// The version field only makes sense byte-swapped: a big-endian file.
    #[error(
        "{path}: big-endian GGUF files are not supported (the version field reads {raw:#010x} \
         little-endian, i.e. version {version} big-endian)"
    )]
    BigEndian {
        /// The file.
        path: String,
        /// The version field read little-endian.
        raw: u32,
        /// The version field read big-endian.
        version: u32,
    },

    /// The file ends inside the fixed header (magic, version, counts).
    #[error(
        "{path}: truncated GGUF header: {what} needs {needed} bytes at offset {offset}, \
         only {available} left"
    )]
    TruncatedHeader {
        /// The file.
        path: String,
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },

    /// The file ends inside the metadata key/value section.
    #[error(
        "{path}: truncated metadata: {what} needs {needed} bytes at offset {offset}, \
         only {available} left"
    )]
    TruncatedMetadata {
        /// The file.
        path: String,
        /// The key or value being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },

    /// The file ends inside the tensor info section.
    #[error(
        "{path}: truncated tensor info: {what} needs {needed} bytes at offset {offset}, \
         only {available} left"
    )]
    TruncatedTensorInfo {
        /// The file.
        path: String,
        /// The field being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },

    /// A declared count (metadata entries, tensors, array elements) that the rest of the
    /// file cannot hold even at the smallest encoding of each item; nothing is allocated.
    #[error(
        "{path}: {what} count {count} cannot fit in the file: at least {min_item_bytes} bytes \
         each, only {available} bytes left at offset {offset}"
    )]
    CountTooLarge {
        /// The file.
        path: String,
        /// What is counted.
        what: String,
        /// The declared count.
        count: u64,
        /// Smallest encoded size of one item.
        min_item_bytes: u64,
        /// Bytes left in the file.
        available: u64,
        /// Where the counted items start.
        offset: u64,
    },

    /// A key, string value or tensor name that is not valid UTF-8.
    #[error("{path}: invalid UTF-8 in {what} at offset {offset}")]
    InvalidUtf8 {
        /// The file.
        path: String,
        /// Which string.
        what: String,
        /// Where its bytes start.
        offset: u64,
    },

    /// A metadata value type id outside 0..=12.
    #[error("{path}: unknown metadata value type {type_id} for key `{key}` at offset {offset}")]
    UnknownValueType {
        /// The file.
        path: String,
        /// The key whose value (or array element type) it is.
        key: String,
        /// The id read.
        type_id: u32,
        /// Where the id is.
        offset: u64,
    },

    /// A bool byte other than 0 or 1.
    #[error("{path}: invalid bool byte {value:#04x} for key `{key}` at offset {offset} (must be 0 or 1)")]
    InvalidBool {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// The byte read.
        value: u8,
        /// Where it is.
        offset: u64,
    },

    /// Arrays nested deeper than [`MAX_ARRAY_DEPTH`](super::MAX_ARRAY_DEPTH).
    #[error("{path}: metadata arrays of key `{key}` are nested deeper than {max_depth} levels")]
    ArrayTooDeep {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// The limit.
        max_depth: usize,
    },

    /// The same metadata key twice.
    #[error("{path}: duplicate metadata key `{key}`")]
    DuplicateKey {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },

    /// `general.alignment` that is not a `uint32`.
    #[error("{path}: general.alignment must be a uint32, found {found}")]
    AlignmentType {
        /// The file.
        path: String,
        /// The type found.
        found: MetaValueType,
    },

    /// `general.alignment` that is zero or not a power of two.
    #[error("{path}: general.alignment {value} is not a nonzero power of two")]
    InvalidAlignment {
        /// The file.
        path: String,
        /// The value found.
        value: u32,
    },

    /// The same tensor name twice.
    #[error("{path}: duplicate tensor name `{name}`")]
    DuplicateTensor {
        /// The file.
        path: String,
        /// The name.
        name: String,
    },

    /// A dimension count outside 1..=4.
    #[error("{path}: tensor `{tensor}` has {n_dims} dimensions (must be 1..=4)")]
    NDimsOutOfRange {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// The count read.
        n_dims: u32,
    },

    /// A dimension of zero.
    #[error("{path}: tensor `{tensor}` has a zero dimension: {dims:?}")]
    ZeroDimension {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// Its dimensions (ne0 first).
        dims: Vec<u64>,
    },

    /// Dimensions whose element count exceeds `i64::MAX` or whose byte size overflows.
    #[error("{path}: tensor `{tensor}` of type {ty}: dimensions {dims:?} overflow the element count or byte size")]
    DimensionOverflow {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// Its dimensions (ne0 first).
        dims: Vec<u64>,
        /// Its type.
        ty: GgmlType,
    },

    /// A row length (ne0) that is not a whole number of the type's blocks.
    #[error("{path}: tensor `{tensor}`: row length {ne0} is not a multiple of {ty}'s block size {block_size}")]
    RowNotBlockMultiple {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// The row length.
        ne0: u64,
        /// The type.
        ty: GgmlType,
        /// The type's block size.
        block_size: usize,
    },

    /// A ggml type id that [`GgmlType::from_id`] does not know.
    #[error("{path}: tensor `{tensor}` has unknown ggml type id {type_id}")]
    UnknownTensorType {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// The id read.
        type_id: u32,
    },

    /// A tensor offset that is not a multiple of the alignment.
    #[error("{path}: tensor `{tensor}` data offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedOffset {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// Its offset, relative to the data section.
        offset: u64,
        /// The alignment.
        alignment: u32,
    },

    /// Tensor data that extends past the end of the file.
    #[error(
        "{path}: tensor `{tensor}` data ({size} bytes at data offset {offset}, data section at \
         {data_offset}) extends beyond the end of the file ({file_len} bytes)"
    )]
    TensorDataOutOfBounds {
        /// The file.
        path: String,
        /// The tensor.
        tensor: String,
        /// Its offset, relative to the data section.
        offset: u64,
        /// Its byte size.
        size: u64,
        /// Absolute offset of the data section.
        data_offset: u64,
        /// File length.
        file_len: u64,
    },

    /// Two tensors whose data ranges overlap.
    #[error(
        "{path}: tensor data overlaps: `{first}` covers [{first_start}, {first_end}) and `{second}` \
         starts at {second_start} (offsets relative to the data section)"
    )]
    OverlappingTensors {
        /// The file.
        path: String,
        /// The tensor that starts first.
        first: String,
        /// Its start.
        first_start: u64,
        /// Its end (exclusive).
        first_end: u64,
        /// The tensor that starts inside it.
        second: String,
        /// Its start.
        second_start: u64,
    },

    /// Writer: tensor bytes whose length does not match its dimensions and type.
    #[error("{path}: tensor `{tensor}`: {actual} data bytes given, its dimensions and type need {expected}")]
    TensorSizeMismatch {
        /// `<gguf writer>`.
        path: String,
        /// The tensor.
        tensor: String,
        /// Bytes the dimensions and type need.
        expected: u64,
        /// Bytes given.
        actual: u64,
    },

    /// Writer: a tensor declared with `add_tensor_deferred` written without a `fill`.
    #[error(
        "{path}: tensor `{tensor}` has deferred data: write the file with write_file_streaming"
    )]
    Deferred {
        /// `<gguf writer>`.
        path: String,
        /// The tensor.
        tensor: String,
    },

    /// A file or layout larger than this platform can address.
    #[error("{path}: {what} is too large for this platform")]
    TooLarge {
        /// The file.
        path: String,
        /// What overflowed.
        what: String,
    },

    /// A typed getter asked for a key that is absent.
    #[error("{path}: metadata key `{key}` not found")]
    KeyNotFound {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },

    /// A typed getter asked for a key holding another type.
    #[error("{path}: metadata key `{key}` is a {found}, not a {expected}")]
    WrongType {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// The type asked for.
        expected: MetaValueType,
        /// The type found.
        found: MetaValueType,
    },
}

impl GgufError {
    /// The file path (or name) the error is about.
    pub fn path(&self) -> &str {
        match self {
            GgufError::Io { path, .. }
            | GgufError::BadMagic { path, .. }
            | GgufError::UnsupportedVersion { path, .. }
            | GgufError::BigEndian { path, .. }
            | GgufError::TruncatedHeader { path, .. }
            | GgufError::TruncatedMetadata { path, .. }
            | GgufError::TruncatedTensorInfo { path, .. }
            | GgufError::CountTooLarge { path, .. }
            | GgufError::InvalidUtf8 { path, .. }
            | GgufError::UnknownValueType { path, .. }
            | GgufError::InvalidBool { path, .. }
            | GgufError::ArrayTooDeep { path, .. }
            | GgufError::DuplicateKey { path, .. }
            | GgufError::AlignmentType { path, .. }
            | GgufError::InvalidAlignment { path, .. }
            | GgufError::DuplicateTensor { path, .. }
            | GgufError::NDimsOutOfRange { path, .. }
            | GgufError::ZeroDimension { path, .. }
            | GgufError::DimensionOverflow { path, .. }
            | GgufError::RowNotBlockMultiple { path, .. }
            | GgufError::UnknownTensorType { path, .. }
            | GgufError::MisalignedOffset { path, .. }
            | GgufError::TensorDataOutOfBounds { path, .. }
            | GgufError::OverlappingTensors { path, .. }
            | GgufError::TensorSizeMismatch { path, .. }
            | GgufError::Deferred { path, .. }
            | GgufError::TooLarge { path, .. }
            | GgufError::KeyNotFound { path, .. }
            | GgufError::WrongType { path, .. } => path,
        }
    }
}
