use super::*;

/// Deterministic filler bytes.
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// One value of every type, including nested, empty and empty-nested arrays.
fn every_value() -> Vec<(&'static str, MetaValue)> {
    vec![
        ("t.u8", MetaValue::U8(200)),
        ("t.i8", MetaValue::I8(-100)),
        ("t.u16", MetaValue::U16(65_000)),
        ("t.i16", MetaValue::I16(-32_000)),
        ("t.u32", MetaValue::U32(4_000_000_000)),
        ("t.i32", MetaValue::I32(-2_000_000_000)),
        ("t.f32", MetaValue::F32(-1.5e-7)),
        ("t.bool_true", MetaValue::Bool(true)),
        ("t.bool_false", MetaValue::Bool(false)),
        ("t.string", "héllo, wörld ✓".into()),
        ("t.empty_string", "".into()),
        ("t.u64", MetaValue::U64(u64::MAX)),
        ("t.i64", MetaValue::I64(i64::MIN)),
        ("t.f64", MetaValue::F64(std::f64::consts::PI)),
        ("t.arr.u8", vec![0u8, 1, 255].into()),
        ("t.arr.i8", vec![-128i8, 0, 127].into()),
        ("t.arr.u16", vec![1u16, 65_535].into()),
        ("t.arr.i16", vec![-1i16, 2].into()),
        ("t.arr.u32", vec![7u32, 8, 9].into()),
        ("t.arr.i32", vec![-7i32, 8].into()),
        ("t.arr.f32", vec![0.5f32, -0.0, f32::MAX, f32::MIN_POSITIVE].into()),
        ("t.arr.bool", vec![true, false, true].into()),
        ("t.arr.string", vec!["a", "", "ccc"].into()),
        ("t.arr.u64", vec![u64::MAX, 0].into()),
        ("t.arr.i64", vec![i64::MAX, i64::MIN].into()),
        ("t.arr.f64", vec![1e300f64, -1e-300].into()),
        ("t.arr.empty_u32", MetaValue::Array(MetaArray::empty(MetaValueType::U32))),
        ("t.arr.empty_string", MetaValue::Array(MetaArray::empty(MetaValueType::String))),
        ("t.arr.empty_array", MetaValue::Array(MetaArray::empty(MetaValueType::Array))),
        (
            "t.arr.nested",
            vec![
                MetaArray::from(vec![1u32, 2]),
                MetaArray::from(vec!["x", "y"]),
                MetaArray::empty(MetaValueType::F64),
                MetaArray::Array(vec![MetaArray::from(vec![true]), MetaArray::from(vec![-3i64])]),
            ]
            .into(),
        ),
    ]
}

/// An array nested `depth` levels deep (depth 1: `[7]`).
fn nested(depth: usize) -> MetaArray {
    let mut a = MetaArray::from(vec![7u8]);
    for _ in 1..depth {
        a = MetaArray::Array(vec![a]);
    }
    a
}

fn writer_with_everything<'a>(version: u32, alignment: Option<u32>) -> GgufWriter<'a> {
    let mut w = GgufWriter::new();
    w.set_version(version).unwrap();
    if let Some(a) = alignment {
        w.set_alignment(a).unwrap();
    }
    for (k, v) in every_value() {
        w.add_metadata(k, v).unwrap();
    }
    w.add_metadata("t.deepest", nested(MAX_ARRAY_DEPTH)).unwrap();
    w.add_tensor("f32", &[7], GgmlType::F32, bytes(28, 1)).unwrap();
    w.add_tensor("f16", &[5, 3], GgmlType::F16, bytes(30, 2)).unwrap();
    w.add_tensor("q8_0", &[64, 3], GgmlType::Q8_0, bytes(3 * 2 * 34, 3)).unwrap();
    w.add_tensor("q4_K", &[256, 2, 1, 2], GgmlType::Q4_K, bytes(4 * 144, 4)).unwrap();
    w.add_tensor("i32", &[1, 1, 3], GgmlType::I32, bytes(12, 5)).unwrap();
    w.add_tensor("bf16", &[1], GgmlType::BF16, bytes(2, 6)).unwrap();
    w
}

fn check_everything(f: &GgufFile, version: u32, alignment: u32) {
    assert_eq!(f.version(), version);
    assert_eq!(f.alignment(), alignment);
    assert!(f.data_offset().is_multiple_of(u64::from(alignment)));
    let mut expected = every_value();
    expected.push(("t.deepest", MetaValue::Array(nested(MAX_ARRAY_DEPTH))));
    let got: Vec<_> = f.metadata().iter().filter(|(k, _)| k != ALIGNMENT_KEY).collect();
    assert_eq!(got.len(), expected.len());
    for ((gk, gv), (ek, ev)) in got.iter().zip(&expected) {
        assert_eq!(gk, ek);
        assert_eq!(gv, ev, "key {ek}");
        assert_eq!(f.get(ek), Some(ev));
    }
    let expect_tensors: [(&str, &[u64], GgmlType, Vec<u8>); 6] = [
        ("f32", &[7], GgmlType::F32, bytes(28, 1)),
        ("f16", &[5, 3], GgmlType::F16, bytes(30, 2)),
        ("q8_0", &[64, 3], GgmlType::Q8_0, bytes(204, 3)),
        ("q4_K", &[256, 2, 1, 2], GgmlType::Q4_K, bytes(576, 4)),
        ("i32", &[1, 1, 3], GgmlType::I32, bytes(12, 5)),
        ("bf16", &[1], GgmlType::BF16, bytes(2, 6)),
    ];
    assert_eq!(f.tensors().len(), expect_tensors.len());
    for (t, (name, dims, ty, data)) in f.tensors().iter().zip(&expect_tensors) {
        assert_eq!(t.name, *name);
        assert_eq!(t.dims, *dims);
        assert_eq!(t.ty, *ty);
        assert_eq!(t.n_bytes, data.len() as u64);
        assert!(t.offset.is_multiple_of(u64::from(alignment)));
        assert_eq!(f.tensor_data(t), &data[..], "tensor {name}");
        assert_eq!(f.tensor(name), Some(t));
        assert_eq!(f.tensor_bytes(name), Some(&data[..]));
    }
    assert!((f.as_bytes().len() as u64).is_multiple_of(u64::from(alignment)), "trailing padding");
}

#[test]
fn round_trip_every_type_v2_and_v3() {
    for version in [2, 3] {
        let w = writer_with_everything(version, None);
        let image = w.to_bytes().unwrap();
        assert_eq!(&image[..4], b"GGUF");
        assert_eq!(image[4..8], version.to_le_bytes());
        let f = GgufFile::from_bytes("mem", image).unwrap();
        check_everything(&f, version, DEFAULT_ALIGNMENT);
        assert!(f.get(ALIGNMENT_KEY).is_none());
    }
}

#[test]
fn round_trip_custom_alignments() {
    for alignment in [1, 2, 8, 64, 4096] {
        let w = writer_with_everything(3, Some(alignment));
        let f = GgufFile::from_shared("mem", w.to_bytes().unwrap().into()).unwrap();
        check_everything(&f, 3, alignment);
        assert_eq!(f.get_u32(ALIGNMENT_KEY).unwrap(), alignment);
    }
    // Setting it as plain metadata works too, and set_alignment replaces it in place.
    let mut w = GgufWriter::new();
    w.add_metadata(ALIGNMENT_KEY, 16u32).unwrap();
    assert_eq!(w.alignment(), 16);
    w.add_metadata("after", 1u8).unwrap();
    w.set_alignment(128).unwrap();
    assert_eq!(w.metadata()[0], (ALIGNMENT_KEY.to_owned(), MetaValue::U32(128)));
    w.add_tensor("t", &[3], GgmlType::F32, vec![1u8; 12]).unwrap();
    let f = GgufFile::from_bytes("mem", w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.alignment(), 128);
    assert!(f.data_offset().is_multiple_of(128));
}

#[test]
fn layout_matches_gguf_py() {
    // Tensors are laid out in order, each padded to the alignment, the data section
    // starting right after the padded tensor infos.
    let mut w = GgufWriter::new();
    w.add_tensor("a", &[3], GgmlType::F32, vec![1u8; 12]).unwrap();
    w.add_tensor("b", &[1], GgmlType::F16, vec![2u8; 2]).unwrap();
    let image = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes("mem", image.clone()).unwrap();
    let header = 24 + (8 + 1 + 4 + 8 + 4 + 8) * 2;
    assert_eq!(f.data_offset(), 96);
    assert!(header <= 96);
    assert_eq!(f.tensors()[0].offset, 0);
    assert_eq!(f.tensors()[1].offset, 32);
    assert_eq!(image.len(), 96 + 64);
    assert!(image[header..96].iter().all(|&b| b == 0));
    assert!(image[96 + 12..96 + 32].iter().all(|&b| b == 0));
}

#[test]
fn empty_file_round_trips() {
    let image = GgufWriter::new().to_bytes().unwrap();
    assert_eq!(image.len(), 32, "24-byte header padded to 32");
    let f = GgufFile::from_bytes("mem", image).unwrap();
    assert!(f.metadata().is_empty() && f.tensors().is_empty());
    // A bare 24-byte header (no padding) is also accepted.
    let mut bare = Vec::from(*b"GGUF");
    bare.extend_from_slice(&3u32.to_le_bytes());
    bare.extend_from_slice(&[0u8; 16]);
    assert!(GgufFile::from_bytes("mem", bare).is_ok());
}

#[test]
fn typed_getters() {
    let w = writer_with_everything(3, None);
    let f = GgufFile::from_bytes("model.gguf", w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.get_u8("t.u8").unwrap(), 200);
    assert_eq!(f.get_i8("t.i8").unwrap(), -100);
    assert_eq!(f.get_u16("t.u16").unwrap(), 65_000);
    assert_eq!(f.get_i16("t.i16").unwrap(), -32_000);
    assert_eq!(f.get_u32("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_i32("t.i32").unwrap(), -2_000_000_000);
    assert_eq!(f.get_f32("t.f32").unwrap(), -1.5e-7);
    assert!(f.get_bool("t.bool_true").unwrap());
    assert_eq!(f.get_str("t.string").unwrap(), "héllo, wörld ✓");
    assert_eq!(f.get_u64("t.u64").unwrap(), u64::MAX);
    assert_eq!(f.get_i64("t.i64").unwrap(), i64::MIN);
    assert_eq!(f.get_f64("t.f64").unwrap(), std::f64::consts::PI);
    let arr = f.get_array("t.arr.string").unwrap();
    assert_eq!(arr.as_strings().unwrap(), ["a", "", "ccc"]);
    assert_eq!(arr.get(2), Some(MetaValue::from("ccc")));
    assert_eq!(f.get("t.u32").and_then(MetaValue::to_u64), Some(4_000_000_000));
    assert_eq!(f.get("t.i8").and_then(MetaValue::to_u64), None);

    match f.get_u64("t.u32") {
        Err(GgufError::WrongType { path, key, expected, found }) => {
            assert_eq!((path.as_str(), key.as_str()), ("model.gguf", "t.u32"));
            assert_eq!((expected, found), (MetaValueType::U64, MetaValueType::U32));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(f.get_str("nope"), Err(GgufError::KeyNotFound { .. })));
    let msg = f.get_str("t.u8").unwrap_err().to_string();
    assert!(msg.contains("model.gguf") && msg.contains("t.u8"), "{msg}");
}

#[test]
fn writer_rejects_bad_input() {
    let mut w = GgufWriter::new();
    w.add_metadata("k", 1u32).unwrap();
    assert!(matches!(w.add_metadata("k", 2u32), Err(GgufError::DuplicateKey { .. })));
    assert!(matches!(w.set_version(1), Err(GgufError::UnsupportedVersion { version: 1, .. })));
    assert!(matches!(w.set_version(4), Err(GgufError::UnsupportedVersion { version: 4, .. })));
    assert!(matches!(w.set_alignment(0), Err(GgufError::InvalidAlignment { value: 0, .. })));
    assert!(matches!(w.set_alignment(48), Err(GgufError::InvalidAlignment { value: 48, .. })));
    assert!(matches!(
        w.add_metadata(ALIGNMENT_KEY, 32u64),
        Err(GgufError::AlignmentType { found: MetaValueType::U64, .. })
    ));
    assert!(matches!(
        w.add_metadata("deep", nested(MAX_ARRAY_DEPTH + 1)),
        Err(GgufError::ArrayTooDeep { .. })
    ));
    let f32 = GgmlType::F32;
    w.add_tensor("t", &[2], f32, vec![0u8; 8]).unwrap();
    assert!(matches!(
        w.add_tensor("t", &[2], f32, vec![0u8; 8]),
        Err(GgufError::DuplicateTensor { .. })
    ));
    assert!(matches!(w.add_tensor("a", &[], f32, vec![]), Err(GgufError::NDimsOutOfRange { .. })));
    assert!(matches!(
        w.add_tensor("a", &[1, 1, 1, 1, 1], f32, vec![0u8; 4]),
        Err(GgufError::NDimsOutOfRange { n_dims: 5, .. })
    ));
    assert!(matches!(
        w.add_tensor("a", &[2, 0], f32, vec![]),
        Err(GgufError::ZeroDimension { .. })
    ));
    assert!(matches!(
        w.add_tensor("a", &[1 << 40, 1 << 40], f32, vec![]),
        Err(GgufError::DimensionOverflow { .. })
    ));
    assert!(matches!(
        w.add_tensor("a", &[48], GgmlType::Q8_0, vec![0u8; 51]),
        Err(GgufError::RowNotBlockMultiple { ne0: 48, block_size: 32, .. })
    ));
    assert!(matches!(
        w.add_tensor("a", &[3], f32, vec![0u8; 11]),
        Err(GgufError::TensorSizeMismatch { expected: 12, actual: 11, .. })
    ));
    // Nothing rejected was kept.
    let f = GgufFile::from_bytes("mem", w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.metadata().len(), 1);
    assert_eq!(f.tensors().len(), 1);
}

#[test]
fn borrowed_tensor_data() {
    let data = bytes(64, 9);
    let mut w = GgufWriter::new();
    w.add_tensor("w", &[16], GgmlType::F32, &data[..]).unwrap();
    let f = GgufFile::from_bytes("mem", w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.tensor_bytes("w"), Some(&data[..]));
}

#[test]
fn write_file_is_atomic_and_mmap_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.gguf");
    writer_with_everything(3, Some(64)).write_file(&path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    check_everything(&f, 3, 64);
    assert_eq!(f.path(), path.display().to_string());
    // Only the destination remains: no temporary file left behind.
    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["out.gguf"]);

    // A failing write (the destination is a directory, so the rename fails) leaves the
    // destination untouched and removes the temporary file.
    let blocker = dir.path().join("blocker");
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("x"), b"keep").unwrap();
    let err = writer_with_everything(3, None).write_file(&blocker).unwrap_err();
    assert!(matches!(err, GgufError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("blocker"), "{err}");
    assert_eq!(std::fs::read(blocker.join("x")).unwrap(), b"keep");
    let mut names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["blocker", "out.gguf"]);

    // Writing into a missing directory fails cleanly.
    let missing = dir.path().join("no/such/dir/x.gguf");
    assert!(matches!(
        writer_with_everything(3, None).write_file(&missing),
        Err(GgufError::Io { .. })
    ));
}

#[test]
fn open_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let err = GgufFile::open(&missing).unwrap_err();
    assert!(matches!(err, GgufError::Io { op: "open", .. }));
    assert!(err.to_string().contains("missing.gguf"), "{err}");
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let err = GgufFile::open(&empty).unwrap_err();
    assert!(matches!(err, GgufError::TruncatedHeader { .. }), "{err:?}");
    assert!(err.to_string().contains("empty.gguf"), "{err}");
    assert_eq!(err.path(), empty.display().to_string());
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let image = writer_with_everything(3, None).to_bytes().unwrap();
    let f = GgufFile::from_bytes("mem", image.clone()).unwrap();
    let last_tensor_end =
        f.tensors().iter().map(|t| f.data_offset() + t.offset + t.n_bytes).max().unwrap() as usize;
    for len in 0..image.len() {
        let r = GgufFile::from_bytes("mem", image[..len].to_vec());
        assert_eq!(r.is_ok(), len >= last_tensor_end, "len {len}: {r:?}");
    }
}

#[test]
fn single_byte_corruptions_never_panic() {
    let image = writer_with_everything(3, None).to_bytes().unwrap();
    let f = GgufFile::from_bytes("mem", image.clone()).unwrap();
    let header_end = f.data_offset() as usize;
    for pos in 0..header_end {
        for val in [0x00, 0x01, 0x07, 0x0d, 0x7f, 0x80, 0xc3, 0xff] {
            let mut bad = image.clone();
            bad[pos] = val;
            let _ = GgufFile::from_bytes("mem", bad);
        }
    }
}

#[test]
fn tensors_out_of_order_with_gaps_are_accepted_and_overlaps_rejected() {
    // Hand-built: two f32[8] tensors (32 bytes each) listed in reverse data order.
    let build = |off_a: u64, off_b: u64| {
        let mut v = Vec::from(*b"GGUF");
        v.extend_from_slice(&3u32.to_le_bytes());
        v.extend_from_slice(&2u64.to_le_bytes());
        v.extend_from_slice(&0u64.to_le_bytes());
        for (name, off) in [("a", off_a), ("b", off_b)] {
            v.extend_from_slice(&1u64.to_le_bytes());
            v.extend_from_slice(name.as_bytes());
            v.extend_from_slice(&1u32.to_le_bytes());
            v.extend_from_slice(&8u64.to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
            v.extend_from_slice(&off.to_le_bytes());
        }
        v.resize(96 + 128, 0xAB);
        v
    };
    let f = GgufFile::from_bytes("mem", build(96, 0)).unwrap();
    assert_eq!(f.data_offset(), 96);
    assert_eq!(f.tensor("a").unwrap().offset, 96);
    // Adjacent, not overlapping.
    assert!(GgufFile::from_bytes("mem", build(32, 0)).is_ok());
    match GgufFile::from_bytes("mem", build(64, 64)) {
        Err(GgufError::OverlappingTensors { first_start: 64, second_start: 64, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn streaming_write_equals_the_in_memory_file_and_checks_lengths() {
    let a = bytes(4 * 3 * 4, 1);
    let b = bytes(34 * 2, 7);
    let mut held = GgufWriter::new();
    held.add_metadata("general.architecture", "qwen3").unwrap();
    held.add_tensor("a", &[4, 3], GgmlType::F32, a.clone()).unwrap();
    held.add_tensor("b", &[32, 2], GgmlType::Q8_0, b.clone()).unwrap();
    let mut deferred = GgufWriter::new();
    deferred.add_metadata("general.architecture", "qwen3").unwrap();
    deferred.add_tensor("a", &[4, 3], GgmlType::F32, a.clone()).unwrap();
    deferred.add_tensor_deferred("b", &[32, 2], GgmlType::Q8_0).unwrap();
    assert_eq!(deferred.tensor_bytes(1), Some(68));
    assert!(matches!(deferred.to_bytes(), Err(GgufError::Deferred { .. })));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.gguf");
    let mut calls = Vec::new();
    deferred
        .write_file_streaming(&p, |i, out| {
            calls.push(i);
            // In two pieces: the writer counts bytes, not calls.
            out.write_all(&b[..10]).unwrap();
            out.write_all(&b[10..]).unwrap();
            Ok(())
        })
        .unwrap();
    assert_eq!(calls, vec![1]);
    assert_eq!(std::fs::read(&p).unwrap(), held.to_bytes().unwrap());
    // A fill that writes too little (or too much) fails and leaves the old file.
    for n in [67, 69] {
        let err = deferred
            .write_file_streaming(&p, |_, out| {
                out.write_all(&vec![0u8; n]).unwrap();
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(err, GgufError::TensorSizeMismatch { expected: 68, actual, .. } if actual == n as u64),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), held.to_bytes().unwrap());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    // The declared tensor is validated like a held one.
    let mut w = GgufWriter::new();
    assert!(w.add_tensor_deferred("c", &[33, 2], GgmlType::Q8_0).is_err());
    assert!(w.add_tensor_deferred("c", &[], GgmlType::F32).is_err());
    w.add_tensor_deferred("c", &[32], GgmlType::Q8_0).unwrap();
    assert!(w.add_tensor_deferred("c", &[32], GgmlType::Q8_0).is_err());
}
