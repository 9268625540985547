//! Malformed GGUF files: each corruption must be rejected with its specific error variant,
//! name the file path when read from a file, never panic, and never allocate more than a
//! small multiple of the input for an untrusted count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

use tiercheck_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetaValueType, MAX_ARRAY_DEPTH};

// ---------------------------------------------------------------------------------------
// Allocation tracking: the largest single allocation made by the current thread.

struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with` fails only during thread teardown, when there is nothing to record.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every method forwards to the system allocator unchanged; the bookkeeping only
// touches a const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Tracking = Tracking;

/// Parses `bytes` from memory, returning the result and the largest allocation made.
fn parse_tracked(bytes: Vec<u8>) -> (Result<GgufFile, GgufError>, usize) {
    LARGEST.with(|l| l.set(0));
    let r = GgufFile::from_bytes("mem", bytes);
    (r, LARGEST.with(Cell::get))
}

// ---------------------------------------------------------------------------------------
// Hand assembly of GGUF images.

#[derive(Clone)]
struct Img(Vec<u8>);

impl Img {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut v = Vec::from(*b"GGUF");
        v.extend_from_slice(&version.to_le_bytes());
        v.extend_from_slice(&n_tensors.to_le_bytes());
        v.extend_from_slice(&n_kv.to_le_bytes());
        Img(v)
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u8(self, v: u8) -> Self {
        self.raw(&[v])
    }
    fn u32(self, v: u32) -> Self {
        self.raw(&v.to_le_bytes())
    }
    fn u64(self, v: u64) -> Self {
        self.raw(&v.to_le_bytes())
    }
    fn str(self, s: &[u8]) -> Self {
        self.u64(s.len() as u64).raw(s)
    }
    /// A key and its value type.
    fn key(self, k: &str, ty: u32) -> Self {
        self.str(k.as_bytes()).u32(ty)
    }
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
        let mut s = self.str(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            s = s.u64(d);
        }
        s.u32(ty).u64(offset)
    }
    /// Zero padding up to a multiple of `align`, then `n` data bytes.
    fn data(mut self, align: usize, n: usize) -> Self {
        let padded = self.0.len().div_ceil(align) * align;
        self.0.resize(padded + n, 0x5A);
        self
    }
    fn bytes(self) -> Vec<u8> {
        self.0
    }
}

/// A valid file with one kv and one f32[8] tensor: the base most corruptions start from.
fn one_tensor(kv_key: &str, tensor: &str, dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    Img::header(3, 1, 1).key(kv_key, 4).u32(7).tensor(tensor, dims, ty, offset).data(32, 32).bytes()
}

/// Parses the corrupted image from memory and from a file; checks that both fail the same
/// way, that the file error names the path, and that nothing big was allocated. Returns the
/// file error.
fn reject(case: &str, bytes: Vec<u8>) -> GgufError {
    let len = bytes.len();
    let (mem, largest) = parse_tracked(bytes.clone());
    let mem = mem.expect_err(case);
    assert!(
        largest <= 64 * 1024,
        "{case}: a {len}-byte input made a {largest}-byte allocation ({mem})"
    );
    assert!(mem.to_string().starts_with("mem: "), "{case}: {mem}");

    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(format!("{case}.gguf"));
    std::fs::write(&path, &bytes).unwrap();
    let err = GgufFile::open(&path).expect_err(case);
    assert_eq!(
        std::mem::discriminant(&mem),
        std::mem::discriminant(&err),
        "{case}: memory and file disagree: {mem} / {err}"
    );
    let shown = path.display().to_string();
    assert!(err.to_string().contains(&shown), "{case}: message lacks the path: {err}");
    assert_eq!(err.path(), shown);
    err
}

// ---------------------------------------------------------------------------------------
// The cases.

#[test]
fn base_images_are_valid() {
    let (f, largest) = parse_tracked(one_tensor("k", "t", &[8], 0, 0));
    let f = f.unwrap();
    assert!(largest > 0, "the allocation tracker sees the parser's allocations");
    assert_eq!(f.tensor("t").unwrap().n_bytes, 32);
    assert_eq!(f.get_u32("k").unwrap(), 7);
}

#[test]
fn bad_magic() {
    let mut b = one_tensor("k", "t", &[8], 0, 0);
    b[..4].copy_from_slice(b"GGML");
    match reject("bad_magic", b) {
        GgufError::BadMagic { found, .. } => assert_eq!(&found, b"GGML"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn unsupported_versions() {
    for v in [1u32, 4, 0, 0xFFFF_FFFF] {
        let mut b = one_tensor("k", "t", &[8], 0, 0);
        b[4..8].copy_from_slice(&v.to_le_bytes());
        match reject(&format!("version_{v}"), b) {
            GgufError::UnsupportedVersion { version, .. } => assert_eq!(version, v),
            e => panic!("{e:?}"),
        }
    }
}

#[test]
fn big_endian() {
    let mut b = one_tensor("k", "t", &[8], 0, 0);
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = reject("big_endian", b);
    assert!(e.to_string().contains("big-endian GGUF files are not supported"), "{e}");
    match e {
        GgufError::BigEndian { raw, version, .. } => assert_eq!((raw, version), (0x0300_0000, 3)),
        e => panic!("{e:?}"),
    }
}

#[test]
fn truncated_header() {
    let b = one_tensor("k", "t", &[8], 0, 0);
    for (len, field) in
        [(0, "magic"), (3, "magic"), (6, "version"), (10, "tensor count"), (23, "kv count")]
    {
        match reject(&format!("truncated_header_{len}"), b[..len].to_vec()) {
            GgufError::TruncatedHeader { what, offset, available, .. } => {
                assert!(what.contains(field), "{len}: {what}");
                assert_eq!(offset + available, len as u64);
            }
            e => panic!("{len}: {e:?}"),
        }
    }
}

#[test]
fn truncated_metadata() {
    // Two kvs: `k` = a 40-byte string (bytes 24..85), `second` = u32 (85..107). Cut where
    // the declared kv count still fits (2 × 13 bytes after the header).
    let long = [b'x'; 40];
    let b = Img::header(3, 0, 2).key("k", 8).str(&long).key("second", 4).u32(9).bytes();
    assert_eq!(b.len(), 107);
    assert!(GgufFile::from_bytes("mem", b.clone()).is_ok());
    for len in [50, 60, 84, 90, 95, 101, 106] {
        match reject(&format!("truncated_kv_{len}"), b[..len].to_vec()) {
            GgufError::TruncatedMetadata { what, offset, needed, available, .. } => {
                assert!(!what.is_empty());
                assert_eq!(offset + available, len as u64);
                assert!(needed > available);
            }
            e => panic!("{len}: {e:?}"),
        }
    }
    // A string value whose declared length runs past the end.
    let b = Img::header(3, 0, 1).key("s", 8).u64(1000).raw(b"short").bytes();
    match reject("string_past_eof", b) {
        GgufError::TruncatedMetadata { what, needed, available, .. } => {
            assert_eq!((needed, available), (1000, 5));
            assert!(what.contains("`s`"), "{what}");
        }
        e => panic!("{e:?}"),
    }
    // Cut so short that even the declared count cannot fit: reported as such.
    let b = Img::header(3, 0, 2).key("k", 4).u32(1).bytes();
    assert!(matches!(reject("kv_count_short", b), GgufError::CountTooLarge { count: 2, .. }));
}

#[test]
fn truncated_tensor_info() {
    // The kv ends at 41; this tensor info is 8 + 40 + 4 + 8 + 4 + 8 = 72 bytes (41..113).
    let name = "a_rather_long_tensor_name_for_truncation";
    let b = one_tensor("k", name, &[8], 0, 0);
    for len in [73, 85, 95, 100, 105, 112] {
        match reject(&format!("truncated_ti_{len}"), b[..len].to_vec()) {
            GgufError::TruncatedTensorInfo { .. } => {}
            e => panic!("{len}: {e:?}"),
        }
    }
}

#[test]
fn truncated_tensor_data() {
    let b = one_tensor("k", "t", &[8], 0, 0);
    let len = b.len() - 1;
    match reject("truncated_data", b[..len].to_vec()) {
        GgufError::TensorDataOutOfBounds { tensor, size, file_len, .. } => {
            assert_eq!((tensor.as_str(), size, file_len), ("t", 32, len as u64));
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn invalid_bool() {
    let b = Img::header(3, 0, 1).key("b", 7).u8(2).bytes();
    match reject("invalid_bool", b) {
        GgufError::InvalidBool { key, value, offset, .. } => {
            assert_eq!((key.as_str(), value, offset), ("b", 2, 37));
        }
        e => panic!("{e:?}"),
    }
    // Inside an array.
    let b = Img::header(3, 0, 1).key("bs", 9).u32(7).u64(3).raw(&[1, 0, 0xFF]).bytes();
    assert!(matches!(reject("invalid_bool_array", b), GgufError::InvalidBool { value: 0xFF, .. }));
}

#[test]
fn invalid_utf8() {
    let key = Img::header(3, 0, 1).str(b"ke\xFFy").u32(4).u32(1).bytes();
    match reject("bad_utf8_key", key) {
        GgufError::InvalidUtf8 { what, offset, .. } => {
            assert!(what.contains("key"), "{what}");
            assert_eq!(offset, 32);
        }
        e => panic!("{e:?}"),
    }
    let value = Img::header(3, 0, 1).key("s", 8).str(b"\xC3\x28").bytes();
    assert!(matches!(reject("bad_utf8_value", value), GgufError::InvalidUtf8 { .. }));
    let in_array =
        Img::header(3, 0, 1).key("a", 9).u32(8).u64(2).str(b"ok").str(b"\xED\xA0\x80").bytes();
    assert!(matches!(reject("bad_utf8_array", in_array), GgufError::InvalidUtf8 { .. }));
    let name =
        Img::header(3, 1, 0).str(b"\xFFname").u32(1).u64(8).u32(0).u64(0).data(32, 32).bytes();
    match reject("bad_utf8_tensor_name", name) {
        GgufError::InvalidUtf8 { what, .. } => assert!(what.contains("tensor"), "{what}"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn unknown_value_type() {
    let b = Img::header(3, 0, 1).key("x", 13).u32(0).bytes();
    match reject("unknown_value_type", b) {
        GgufError::UnknownValueType { key, type_id, offset, .. } => {
            assert_eq!((key.as_str(), type_id, offset), ("x", 13, 33));
        }
        e => panic!("{e:?}"),
    }
    let elem = Img::header(3, 0, 1).key("arr", 9).u32(0xDEAD).u64(0).bytes();
    assert!(matches!(
        reject("unknown_array_elem_type", elem),
        GgufError::UnknownValueType { type_id: 0xDEAD, .. }
    ));
}

#[test]
fn duplicate_key() {
    let b = Img::header(3, 0, 2).key("dup", 4).u32(1).key("dup", 8).str(b"x").bytes();
    match reject("duplicate_key", b) {
        GgufError::DuplicateKey { key, .. } => assert_eq!(key, "dup"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn duplicate_tensor_name() {
    let b =
        Img::header(3, 2, 0).tensor("w", &[8], 0, 0).tensor("w", &[8], 0, 32).data(32, 64).bytes();
    match reject("duplicate_tensor", b) {
        GgufError::DuplicateTensor { name, .. } => assert_eq!(name, "w"),
        e => panic!("{e:?}"),
    }
}

#[test]
fn unknown_tensor_type() {
    for id in [4u32, 31, 1000, u32::MAX] {
        match reject(&format!("tensor_type_{id}"), one_tensor("k", "t", &[8], id, 0)) {
            GgufError::UnknownTensorType { tensor, type_id, .. } => {
                assert_eq!((tensor.as_str(), type_id), ("t", id));
            }
            e => panic!("{e:?}"),
        }
    }
}

#[test]
fn n_dims_out_of_range() {
    for dims in [&[][..], &[1, 1, 1, 1, 8]] {
        let b = one_tensor("k", "t", dims, 0, 0);
        match reject(&format!("n_dims_{}", dims.len()), b) {
            GgufError::NDimsOutOfRange { n_dims, .. } => assert_eq!(n_dims as usize, dims.len()),
            e => panic!("{e:?}"),
        }
    }
    // A huge n_dims is rejected before the dims are read.
    let b = Img::header(3, 1, 0).str(b"t").u32(u32::MAX).raw(&[0; 64]).bytes();
    assert!(matches!(
        reject("n_dims_huge", b),
        GgufError::NDimsOutOfRange { n_dims: u32::MAX, .. }
    ));
}

#[test]
fn zero_dimension() {
    match reject("zero_dim", one_tensor("k", "t", &[8, 0], 0, 0)) {
        GgufError::ZeroDimension { dims, .. } => assert_eq!(dims, [8, 0]),
        e => panic!("{e:?}"),
    }
}

#[test]
fn dimension_overflow() {
    // 2^40 * 2^40 overflows u64; 2^62 * 2 = 2^63 exceeds i64::MAX; 2^61 f64 values fit the
    // element count but their byte size (2^64) overflows; u64::MAX exceeds i64::MAX.
    for (case, dims, ty) in [
        ("product", &[1u64 << 40, 1 << 40][..], 0u32),
        ("i64max", &[1 << 62, 2], 24),
        ("bytes", &[1 << 61, 1, 1, 1], 28),
        ("u64max", &[u64::MAX], 24),
    ] {
        match reject(&format!("overflow_{case}"), one_tensor("k", "t", dims, ty, 0)) {
            GgufError::DimensionOverflow { dims: d, .. } => assert_eq!(d, dims),
            e => panic!("{case}: {e:?}"),
        }
    }
}

#[test]
fn row_not_block_multiple() {
    match reject("row_q8_0", one_tensor("k", "t", &[48, 2], GgmlType::Q8_0.id(), 0)) {
        GgufError::RowNotBlockMultiple { ne0, ty, block_size, .. } => {
            assert_eq!((ne0, ty, block_size), (48, GgmlType::Q8_0, 32));
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn huge_counts_do_not_allocate() {
    let kv = Img::header(3, 0, 1 << 62).bytes();
    match reject("kv_count_2_62", kv) {
        GgufError::CountTooLarge { count, .. } => assert_eq!(count, 1 << 62),
        e => panic!("{e:?}"),
    }
    let kv_max = Img::header(3, 0, u64::MAX).key("k", 4).u32(0).bytes();
    assert!(matches!(reject("kv_count_max", kv_max), GgufError::CountTooLarge { .. }));
    let tensors = Img::header(3, 1 << 62, 0).raw(&[0; 64]).bytes();
    match reject("tensor_count_2_62", tensors) {
        GgufError::CountTooLarge { what, count, .. } => {
            assert!(what.contains("tensor"), "{what}");
            assert_eq!(count, 1 << 62);
        }
        e => panic!("{e:?}"),
    }
    // Array counts, for every element type, including arrays of arrays and strings.
    for ty in MetaValueType::ALL {
        let b = Img::header(3, 0, 1).key("a", 9).u32(ty.id()).u64(1 << 60).raw(&[0; 100]).bytes();
        match reject(&format!("array_count_{ty}"), b) {
            GgufError::CountTooLarge { count, .. } => assert_eq!(count, 1 << 60),
            e => panic!("{ty}: {e:?}"),
        }
    }
    // A string length near u64::MAX.
    let s = Img::header(3, 0, 1).key("s", 8).u64(u64::MAX - 3).bytes();
    assert!(matches!(reject("string_len_max", s), GgufError::TruncatedMetadata { .. }));
    let k = Img::header(3, 0, 1).u64(1 << 62).raw(&[b'k'; 32]).bytes();
    assert!(matches!(reject("key_len_huge", k), GgufError::TruncatedMetadata { .. }));
}

#[test]
fn misaligned_offset() {
    match reject("misaligned", one_tensor("k", "t", &[8], 0, 4)) {
        GgufError::MisalignedOffset { offset, alignment, .. } => {
            assert_eq!((offset, alignment), (4, 32))
        }
        e => panic!("{e:?}"),
    }
    // Against a custom alignment, too.
    let b = Img::header(3, 1, 1)
        .key("general.alignment", 4)
        .u32(64)
        .tensor("t", &[8], 0, 32)
        .data(64, 128)
        .bytes();
    assert!(matches!(
        reject("misaligned_64", b),
        GgufError::MisalignedOffset { alignment: 64, .. }
    ));
}

#[test]
fn tensor_data_beyond_eof() {
    for (case, offset) in [("past_end", 4096u64), ("just_past", 32), ("wraps", u64::MAX - 31)] {
        match reject(&format!("data_{case}"), one_tensor("k", "t", &[8], 0, offset)) {
            GgufError::TensorDataOutOfBounds { offset: o, .. } => assert_eq!(o, offset),
            e => panic!("{case}: {e:?}"),
        }
    }
}

#[test]
fn overlapping_tensors() {
    let b =
        Img::header(3, 2, 0).tensor("a", &[16], 0, 0).tensor("b", &[8], 0, 32).data(32, 64).bytes();
    match reject("overlap", b) {
        GgufError::OverlappingTensors { first, second, first_end, second_start, .. } => {
            assert_eq!(
                (first.as_str(), second.as_str(), first_end, second_start),
                ("a", "b", 64, 32)
            );
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn bad_alignment() {
    for a in [0u32, 3, 48, u32::MAX] {
        let b = Img::header(3, 0, 1).key("general.alignment", 4).u32(a).bytes();
        match reject(&format!("alignment_{a}"), b) {
            GgufError::InvalidAlignment { value, .. } => assert_eq!(value, a),
            e => panic!("{a}: {e:?}"),
        }
    }
    let wrong = Img::header(3, 0, 1).key("general.alignment", 10).u64(32).bytes();
    match reject("alignment_u64", wrong) {
        GgufError::AlignmentType { found, .. } => assert_eq!(found, MetaValueType::U64),
        e => panic!("{e:?}"),
    }
    let string = Img::header(3, 0, 1).key("general.alignment", 8).str(b"32").bytes();
    assert!(matches!(
        reject("alignment_string", string),
        GgufError::AlignmentType { found: MetaValueType::String, .. }
    ));
}

#[test]
fn nested_array_depth_bomb() {
    // 100 000 levels of one-element arrays of arrays: rejected at the depth limit without
    // recursing further.
    let mut img = Img::header(3, 0, 1).key("bomb", 9);
    for _ in 0..100_000 {
        img = img.u32(9).u64(1);
    }
    match reject("depth_bomb", img.u32(0).u64(0).bytes()) {
        GgufError::ArrayTooDeep { key, max_depth, .. } => {
            assert_eq!((key.as_str(), max_depth), ("bomb", MAX_ARRAY_DEPTH));
        }
        e => panic!("{e:?}"),
    }
    // Exactly at the limit is fine.
    let mut img = Img::header(3, 0, 1).key("ok", 9);
    for _ in 1..MAX_ARRAY_DEPTH {
        img = img.u32(9).u64(1);
    }
    let f = GgufFile::from_bytes("mem", img.u32(4).u64(1).u32(5).bytes()).unwrap();
    assert_eq!(f.get("ok").unwrap().depth(), MAX_ARRAY_DEPTH);
}

#[test]
fn writer_output_corrupted_in_place() {
    // Corrupt a writer-produced file at computed positions.
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "qwen3").unwrap();
    w.add_metadata("flag", true).unwrap();
    w.add_tensor("w", &[32, 2], GgmlType::Q8_0, vec![0u8; 68]).unwrap();
    let good = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes("mem", good.clone()).unwrap();
    // Layout: header 24 | key (8 + 20) | type 4 | string (8 + 5) | key (8 + 4) | type 4 | bool
    let bool_at = 24 + 28 + 4 + 13 + 12 + 4;
    assert_eq!(good[bool_at], 1);
    let mut bad = good.clone();
    bad[bool_at] = 7;
    assert!(matches!(reject("writer_bool", bad), GgufError::InvalidBool { value: 7, .. }));
    // The tensor's type id sits 12 bytes before the data offset field at the end of the infos.
    let ti_end = bool_at + 1 + 8 + 1 + 4 + 16 + 4 + 8;
    assert_eq!(good[ti_end - 12..ti_end - 8], GgmlType::Q8_0.id().to_le_bytes());
    let mut bad = good.clone();
    bad[ti_end - 12..ti_end - 8].copy_from_slice(&5u32.to_le_bytes());
    assert!(matches!(reject("writer_type", bad), GgufError::UnknownTensorType { type_id: 5, .. }));
    // Shrink the file into the tensor data.
    let data_end = (f.data_offset() + 68) as usize;
    assert!(matches!(
        reject("writer_short", good[..data_end - 1].to_vec()),
        GgufError::TensorDataOutOfBounds { .. }
    ));
}

#[test]
fn random_mutations_never_panic_or_overallocate() {
    let mut w = GgufWriter::new();
    w.add_metadata("s", "string").unwrap();
    w.add_metadata("a", vec![1u32, 2, 3]).unwrap();
    w.add_metadata("n", vec![tiercheck_gguf::MetaArray::from(vec!["x"])]).unwrap();
    w.add_tensor("t", &[256], GgmlType::Q4_K, vec![1u8; 144]).unwrap();
    let good = w.to_bytes().unwrap();
    let header_len = GgufFile::from_bytes("mem", good.clone()).unwrap().data_offset() as usize;
    let mut rng = tiercheck_core::rng::Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut next = move || rng.next_u64();
    for _ in 0..20_000 {
        let mut bad = good.clone();
        for _ in 0..1 + next() % 4 {
            let pos = (next() % header_len as u64) as usize;
            bad[pos] = match next() % 4 {
                0 => 0xFF,
                1 => 0,
                2 => bad[pos] ^ (1 << (next() % 8)),
                _ => next() as u8,
            };
        }
        let (_, largest) = parse_tracked(bad);
        assert!(largest <= 64 * 1024, "{largest}-byte allocation");
    }
}
