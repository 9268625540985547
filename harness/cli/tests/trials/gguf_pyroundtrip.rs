//! Interop with llama.cpp's Python GGUF package (gguf-py 0.19.0), both directions:
//!
//! 1. a file from [`GgufWriter`] (every metadata kind, f32/f16/q8_0/q4_K tensors) is read by
//!    `gguf.GGUFReader` with identical values and tensor bytes;
//! 2. a file from `gguf.GGUFWriter` (arch `qwen3`, assorted keys, custom alignment, f32, f16
//!    and raw q8_0 tensors) is read by [`GgufFile`] identically to `gguf.GGUFReader`.
//!
//! Needs a Python with `gguf` and `numpy` (the oracle stage's venv, found through
//! `TIERCHECK_PYTHON` or `oracle.env`). Without it each trial is reported ignored with the
//! reason; `TIERCHECK_REQUIRE_ORACLE=1` (as CI sets) makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::{Completion, Trial};
use tiercheck_testkit::suites::{trial_name, Selection};

use serde_json::{json, Value};
use tiercheck_gguf::{GgmlType, GgufFile, GgufWriter, MetaArray, MetaValue, MetaValueType};
use tiercheck_model::embedded;
use tiercheck_oracle::OracleConfig;

/// `dump PATH`: prints what `GGUFReader` sees as JSON. Floats are given as their IEEE bit
/// patterns (f32 as u32, f64 as u64) so the comparison is exact. Nested arrays come out
/// flattened with the element types of the first element, as `ReaderField.contents()` and
/// `.types` present them.
///
/// `write PATH`: writes a reference file with `GGUFWriter`.
///
/// `model PATH`: metadata keys, scalar values and, per tensor, type, dims and the sha256
/// of its bytes and of its values dequantized by gguf-py (little-endian f32).
const SCRIPT: &str = r#"
import json, struct, sys
import numpy as np
import gguf
from gguf import GGUFValueType as VT

def dump(path):
    r = gguf.GGUFReader(path)
    fields = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        leaf = f.types[-1]
        def conv(x):
            if leaf == VT.FLOAT32:
                return struct.unpack("<I", struct.pack("<f", x))[0]
            if leaf == VT.FLOAT64:
                return struct.unpack("<Q", struct.pack("<d", x))[0]
            return x
        v = f.contents()
        v = [conv(x) for x in v] if isinstance(v, list) else conv(v)
        fields.append({"key": name, "types": [int(t) for t in f.types], "value": v})
    tensors = [{
        "name": t.name,
        "type": int(t.tensor_type),
        "dims": [int(d) for d in t.shape],
        "n_bytes": int(t.n_bytes),
        "data_offset": int(t.data_offset),
        "data": t.data.tobytes().hex(),
    } for t in r.tensors]
    json.dump({"alignment": int(r.alignment), "data_offset": int(r.data_offset),
               "fields": fields, "tensors": tensors}, sys.stdout)

def write(path):
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_custom_alignment(64)
    w.add_name("tiny-qwen3")
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -300)
    w.add_int32("t.i32", -123456)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**40))
    w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.unicode", "h\u00e9llo \u2713")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "bb", "\u00fc"])
    w.add_key_value("t.u32s", [1, 2, 3], VT.ARRAY, sub_type=VT.UINT32)
    w.add_key_value("t.bools", [True, False], VT.ARRAY, sub_type=VT.BOOL)
    w.add_array("t.floats", [0.5, 0.1])
    w.add_array("t.nested", [[1, 2], [3]])
    emb = (np.arange(24, dtype=np.float32) * 0.5 - 3.0).reshape(3, 8)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", np.linspace(-1, 1, 5).astype(np.float16))
    q = (np.arange(2 * 34) * 7 % 251).astype(np.uint8).reshape(2, 34)
    w.add_tensor("blk.0.ffn_down.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

def model(path):
    import hashlib
    r = gguf.GGUFReader(path)
    tensors = []
    for t in r.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4", copy=False)
        tensors.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "dims": [int(d) for d in t.shape],
            "n_bytes": int(t.n_bytes),
            "data_sha256": hashlib.sha256(t.data.tobytes()).hexdigest(),
            "f32_sha256": hashlib.sha256(values.tobytes()).hexdigest(),
        })
    keys = [name for name in r.fields if not name.startswith("GGUF.")]
    scalars = {k: r.fields[k].contents() for k in keys
               if isinstance(r.fields[k].contents(), (int, float, str))}
    json.dump({"keys": keys, "scalars": scalars, "tensors": tensors}, sys.stdout)

{"dump": dump, "write": write, "model": model}[sys.argv[1]](sys.argv[2])
"#;

/// The Python with gguf-py, from the oracle configuration (`TIERCHECK_PYTHON` or the
/// oracle.env that ci/oracle writes), or why there is none.
fn python() -> Result<PathBuf, String> {
    OracleConfig::from_env().require_python().map(Path::to_owned).map_err(|e| e.to_string())
}

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "gguf_pyroundtrip";

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    let trials = vec![
        trial("gguf-py/gguf_py_writer_is_read_by_us", gguf_py_writer_is_read_by_us),
        trial("gguf-py/our_writer_is_read_by_gguf_py", our_writer_is_read_by_gguf_py),
        trial("gguf-py/embedded_model_is_read_by_gguf_py", embedded_model_is_read_by_gguf_py),
    ];
    trials
}

/// A trial that needs gguf-py: ignored at run time with the reason when it is missing,
/// a failure instead under `TIERCHECK_REQUIRE_ORACLE=1`.
fn trial(name: &str, f: fn(&Path)) -> Trial {
    Trial::ignorable_test(trial_name(SUITE, name), move || match python() {
        Ok(py) => {
            f(&py);
            Ok(Completion::Completed)
        }
        Err(why) if std::env::var("TIERCHECK_REQUIRE_ORACLE").as_deref() == Ok("1") => {
            Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but gguf-py is unavailable: {why}").into())
        }
        Err(why) => {
            Ok(Completion::ignored_with(format!("gguf-py unavailable ({why}); run ci/oracle")))
        }
    })
}

fn run_py(python: &Path, mode: &str, path: &Path) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(mode)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "python {mode} {} failed ({}):\n{}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn py_dump(python: &Path, path: &Path) -> Value {
    serde_json::from_str(&run_py(python, "dump", path)).expect("python dump is JSON")
}

/// The value types of `v` the way gguf-py lists them: the type, then for a non-empty array
/// the types of its first element.
fn py_types(v: &MetaValue, out: &mut Vec<u32>) {
    out.push(v.value_type().id());
    if let Some(first) = v.as_array().and_then(|a| a.get(0)) {
        py_types(&first, out);
    }
}

/// The leaf values of `v` (nested arrays flattened) as gguf-py's `contents()` gives them,
/// floats as bit patterns.
fn py_leaves(v: &MetaValue, out: &mut Vec<Value>) {
    match v {
        MetaValue::U8(x) => out.push(json!(x)),
        MetaValue::I8(x) => out.push(json!(x)),
        MetaValue::U16(x) => out.push(json!(x)),
        MetaValue::I16(x) => out.push(json!(x)),
        MetaValue::U32(x) => out.push(json!(x)),
        MetaValue::I32(x) => out.push(json!(x)),
        MetaValue::F32(x) => out.push(json!(x.to_bits())),
        MetaValue::Bool(x) => out.push(json!(x)),
        MetaValue::String(x) => out.push(json!(x)),
        MetaValue::U64(x) => out.push(json!(x)),
        MetaValue::I64(x) => out.push(json!(x)),
        MetaValue::F64(x) => out.push(json!(x.to_bits())),
        MetaValue::Array(a) => a.iter().for_each(|e| py_leaves(&e, out)),
    }
}

fn py_value(v: &MetaValue) -> Value {
    let mut leaves = Vec::new();
    py_leaves(v, &mut leaves);
    match v {
        MetaValue::Array(_) => Value::Array(leaves),
        _ => leaves.pop().unwrap_or(Value::Null),
    }
}

/// A tensor as compared: name, dims, type, absolute data offset, bytes.
type TensorView<'a> = (&'a str, &'a [u64], GgmlType, u64, &'a [u8]);

struct Expected<'a> {
    alignment: u32,
    data_offset: u64,
    metadata: &'a [(String, MetaValue)],
    tensors: Vec<TensorView<'a>>,
}

impl<'a> Expected<'a> {
    fn of(f: &'a GgufFile) -> Self {
        Expected {
            alignment: f.alignment(),
            data_offset: f.data_offset(),
            metadata: f.metadata(),
            tensors: f
                .tensors()
                .iter()
                .map(|t| {
                    (
                        t.name.as_str(),
                        &t.dims[..],
                        t.ty,
                        f.data_offset() + t.offset,
                        f.tensor_data(t),
                    )
                })
                .collect(),
        }
    }
}

/// Asserts that gguf-py's view `py` matches `ours` exactly.
fn assert_same(ours: &Expected<'_>, py: &Value) {
    assert_eq!(py["alignment"], json!(ours.alignment));
    assert_eq!(py["data_offset"], json!(ours.data_offset));
    let fields = py["fields"].as_array().expect("fields");
    assert_eq!(fields.len(), ours.metadata.len(), "number of metadata keys");
    for (field, (key, value)) in fields.iter().zip(ours.metadata) {
        assert_eq!(field["key"], json!(key));
        let mut types = Vec::new();
        py_types(value, &mut types);
        assert_eq!(field["types"], json!(types), "types of {key}");
        assert_eq!(field["value"], py_value(value), "value of {key}");
    }
    let tensors = py["tensors"].as_array().expect("tensors");
    assert_eq!(tensors.len(), ours.tensors.len(), "number of tensors");
    for (t, &(name, dims, ty, offset, data)) in tensors.iter().zip(&ours.tensors) {
        assert_eq!(t["name"], json!(name));
        assert_eq!(t["type"], json!(ty.id()), "type of {name}");
        assert_eq!(t["dims"], json!(dims), "dims of {name}");
        assert_eq!(t["n_bytes"], json!(data.len()), "n_bytes of {name}");
        assert_eq!(t["data_offset"], json!(offset), "data offset of {name}");
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        assert!(t["data"] == json!(hex), "data of {name} differs");
    }
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed)).collect()
}

fn our_writer_is_read_by_gguf_py(python: &Path) {
    let dir = tempfile::tempdir().unwrap();
    for (version, alignment) in [(3, None), (2, Some(128))] {
        let mut w = GgufWriter::new();
        w.set_version(version).unwrap();
        if let Some(a) = alignment {
            w.set_alignment(a).unwrap();
        }
        w.add_metadata("general.architecture", "qwen3").unwrap();
        w.add_metadata("t.u8", 255u8).unwrap();
        w.add_metadata("t.i8", -128i8).unwrap();
        w.add_metadata("t.u16", 65_535u16).unwrap();
        w.add_metadata("t.i16", -32_768i16).unwrap();
        w.add_metadata("t.u32", u32::MAX).unwrap();
        w.add_metadata("t.i32", i32::MIN).unwrap();
        w.add_metadata("t.f32", 0.1f32).unwrap();
        w.add_metadata("t.bool", true).unwrap();
        w.add_metadata("t.bool_false", false).unwrap();
        w.add_metadata("t.string", "h\u{e9}llo \u{2713} \u{1F600}").unwrap();
        w.add_metadata("t.empty_string", "").unwrap();
        w.add_metadata("t.u64", u64::MAX).unwrap();
        w.add_metadata("t.i64", i64::MIN).unwrap();
        w.add_metadata("t.f64", -1e-300f64).unwrap();
        w.add_metadata("a.u8", vec![0u8, 7, 255]).unwrap();
        w.add_metadata("a.i8", vec![-1i8, 1]).unwrap();
        w.add_metadata("a.u16", vec![1u16, 2]).unwrap();
        w.add_metadata("a.i16", vec![-3i16]).unwrap();
        w.add_metadata("a.u32", vec![1u32, 2, 3]).unwrap();
        w.add_metadata("a.i32", vec![-4i32, 5]).unwrap();
        w.add_metadata("a.f32", vec![0.5f32, -2.25, f32::MIN_POSITIVE]).unwrap();
        w.add_metadata("a.bool", vec![true, false, true]).unwrap();
        w.add_metadata("a.string", vec!["<s>", "", "\u{fc}ber"]).unwrap();
        w.add_metadata("a.u64", vec![u64::MAX, 1]).unwrap();
        w.add_metadata("a.i64", vec![i64::MIN, i64::MAX]).unwrap();
        w.add_metadata("a.f64", vec![0.1f64, 1e300]).unwrap();
        w.add_metadata("a.empty_u32", MetaArray::empty(MetaValueType::U32)).unwrap();
        w.add_metadata("a.empty_string", MetaArray::empty(MetaValueType::String)).unwrap();
        w.add_metadata("a.nested_u32", vec![MetaArray::from(vec![1u32, 2]), vec![3u32].into()])
            .unwrap();
        w.add_metadata("a.nested_str", vec![MetaArray::from(vec!["a"]), vec!["b", "c"].into()])
            .unwrap();
        w.add_metadata(
            "a.nested3_f32",
            vec![MetaArray::Array(vec![vec![1.5f32].into(), vec![-0.0f32, 2.0].into()])],
        )
        .unwrap();
        w.add_tensor("f32", &[7, 2], GgmlType::F32, bytes(56, 1)).unwrap();
        w.add_tensor("f16", &[5], GgmlType::F16, bytes(10, 2)).unwrap();
        w.add_tensor("q8_0", &[64, 3], GgmlType::Q8_0, bytes(3 * 2 * 34, 3)).unwrap();
        w.add_tensor("q4_K", &[512, 2, 2], GgmlType::Q4_K, bytes(2 * 2 * 2 * 144, 4)).unwrap();

        let path = dir.path().join(format!("ours_v{version}.gguf"));
        w.write_file(&path).unwrap();
        let py = py_dump(python, &path);
        let ours = GgufFile::open(&path).unwrap();
        // What we wrote is what we read back ...
        assert_eq!(ours.metadata(), w.metadata());
        // ... and what gguf-py reads.
        assert_same(&Expected::of(&ours), &py);
        let names: Vec<_> = ours.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["f32", "f16", "q8_0", "q4_K"]);
        assert_eq!(ours.tensor_bytes("q4_K"), Some(&bytes(1152, 4)[..]));
    }
}

fn gguf_py_writer_is_read_by_us(python: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("py.gguf");
    run_py(python, "write", &path);
    let py = py_dump(python, &path);
    let f = GgufFile::open(&path).unwrap();
    assert_same(&Expected::of(&f), &py);

    // Spot checks against what the script wrote.
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.get_str("general.architecture").unwrap(), "qwen3");
    assert_eq!(f.get_str("general.name").unwrap(), "tiny-qwen3");
    assert_eq!(f.get_u32("qwen3.block_count").unwrap(), 2);
    assert_eq!(f.get_u32("qwen3.context_length").unwrap(), 4096);
    assert_eq!(f.get_f32("qwen3.attention.layer_norm_rms_epsilon").unwrap(), 1e-6);
    assert_eq!(f.get_u64("t.u64").unwrap(), (1 << 63) + 5);
    assert_eq!(f.get_i64("t.i64").unwrap(), -(1 << 40));
    assert_eq!(f.get_f64("t.f64").unwrap(), 0.1);
    assert!(f.get_bool("t.bool").unwrap());
    assert_eq!(f.get_str("t.unicode").unwrap(), "h\u{e9}llo \u{2713}");
    let tokens = f.get_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.as_strings().unwrap(), ["<s>", "a", "bb", "\u{fc}"]);
    assert_eq!(f.get_array("t.u32s").unwrap(), &MetaArray::U32(vec![1, 2, 3]));
    assert_eq!(f.get_array("t.floats").unwrap(), &MetaArray::F32(vec![0.5, 0.1]));
    assert_eq!(
        f.get_array("t.nested").unwrap(),
        &MetaArray::Array(vec![MetaArray::I32(vec![1, 2]), MetaArray::I32(vec![3])])
    );

    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!((emb.ty, &emb.dims[..]), (GgmlType::F32, &[8u64, 3][..]));
    let values: Vec<f32> = f
        .tensor_data(emb)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let expect: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    assert_eq!(values, expect);
    let norm = f.tensor("output_norm.weight").unwrap();
    assert_eq!((norm.ty, &norm.dims[..]), (GgmlType::F16, &[5u64][..]));
    let q = f.tensor("blk.0.ffn_down.weight").unwrap();
    assert_eq!((q.ty, &q.dims[..], q.n_bytes), (GgmlType::Q8_0, &[32u64, 2][..], 68));
    let expect: Vec<u8> = (0..68u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(f.tensor_data(q), &expect[..]);
    for t in f.tensors() {
        assert!((f.data_offset() + t.offset).is_multiple_of(64));
    }
}

/// The embedded model (built into the cache by `ensure_model`) reads in gguf-py with our
/// keys, scalar values, types, shapes and bytes, and gguf-py's dequantization of every
/// tensor equals ours bit for bit.
fn embedded_model_is_read_by_gguf_py(python: &Path) {
    let path = embedded::ensure_model(None).unwrap();
    let ours = GgufFile::open(&path).unwrap();
    let py: Value = serde_json::from_str(&run_py(python, "model", &path)).expect("JSON");
    let keys: Vec<&str> = ours.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(py["keys"], json!(keys));
    for (key, value) in ours.metadata() {
        let want = match value {
            MetaValue::String(s) => json!(s),
            MetaValue::F32(x) => json!(f64::from(*x)),
            v => match v.to_u64() {
                Some(n) => json!(n),
                None => continue,
            },
        };
        assert_eq!(py["scalars"][key], want, "{key}");
    }
    let tensors = py["tensors"].as_array().expect("tensors");
    assert_eq!(tensors.len(), ours.tensors().len());
    for (t, info) in tensors.iter().zip(ours.tensors()) {
        let name = &info.name;
        assert_eq!(t["name"], json!(name));
        assert_eq!(t["type"], json!(info.ty.id()), "type of {name}");
        // `ReaderTensor.shape` is in ggml order, ne0 first.
        assert_eq!(t["dims"], json!(info.dims), "dims of {name}");
        let data = ours.tensor_data(info);
        assert_eq!(t["n_bytes"], json!(data.len()), "n_bytes of {name}");
        assert_eq!(t["data_sha256"], json!(embedded::sha256_hex(data)), "bytes of {name}");
        let mut values = vec![0f32; info.n_elements() as usize];
        tiercheck_core::blocks::dequantize(info.ty, data, &mut values).unwrap();
        let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            t["f32_sha256"],
            json!(embedded::sha256_hex(&f32_bytes)),
            "dequantized values of {name}"
        );
    }
}
