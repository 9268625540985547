//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz) and for the regression test
//! that replays the committed corpus (`harness/cli/tests/cli/fuzz_corpus.rs`): each takes a
//! file's bytes, runs the parser a user's file goes through, touches what a successful
//! parse returns, and gives back the error text (which names the file) or `Ok`.
//!
//! None may panic, read out of bounds or allocate by an unchecked count from the
//! input; the fuzzers run under libFuzzer's `-malloc_limit_mb` to catch the last.

use std::path::Path;

/// The name the inputs carry in error messages.
pub const GGUF_NAME: &str = "fuzz-input.gguf";
/// See [`GGUF_NAME`].
pub const TRACE_NAME: &str = "fuzz-input.safetensors";
/// See [`GGUF_NAME`].
pub const MANIFEST_NAME: &str = "fuzz-input/manifest.json";
/// See [`GGUF_NAME`].
pub const STATE_NAME: &str = "fuzz-input.state";
/// See [`GGUF_NAME`].
pub const NPZ_NAME: &str = "fuzz-input.npz";

/// A plain dump as engines write them (npz: stored or deflated members, either byte
/// order, C or Fortran order): the reader, then every array's values.
pub fn npz(data: &[u8]) -> Result<(), String> {
    let d =
        tiercheck_gguf::dump::read_bytes(Path::new(NPZ_NAME), data).map_err(|e| e.to_string())?;
    let mut n = 0usize;
    for a in d.arrays.values() {
        n = n.wrapping_add(match &a.values {
            tiercheck_gguf::dump::Values::Float(v) => v.len(),
            tiercheck_gguf::dump::Values::Int(v) => v.len(),
            tiercheck_gguf::dump::Values::Other(d) => d.len(),
        });
    }
    std::hint::black_box(n);
    Ok(())
}

/// Values dequantized per tensor after a successful parse (bounds the work per input).
const DEQUANT_MAX: usize = 4096;

/// A GGUF file: the reader; then, on success, every tensor's bytes, a dequantization of
/// its first values, and the qwen3 hyper-parameter validation a model file goes through.
pub fn gguf(data: &[u8]) -> Result<(), String> {
    let f = tiercheck_gguf::GgufFile::from_bytes(GGUF_NAME, data.to_vec())
        .map_err(|e| e.to_string())?;
    for (key, _) in f.metadata() {
        let _ = f.get(key);
    }
    for info in f.tensors() {
        let bytes = f.tensor_data(info);
        let ty = info.ty;
        let bs = ty.block_size();
        let unit = ty.type_size();
        if bs == 0 || unit == 0 {
            continue;
        }
        let blocks = (bytes.len() / unit).min(DEQUANT_MAX / bs);
        let mut out = vec![0.0f32; blocks * bs];
        let _ = tiercheck_core::blocks::dequantize(ty, &bytes[..blocks * unit], &mut out);
    }
    tiercheck_model::HParams::from_gguf(&f).map_err(|e| e.to_string())?;
    Ok(())
}

/// A trace file (safetensors with tiercheck's metadata): the loader, then every tap.
pub fn trace(data: &[u8]) -> Result<(), String> {
    let t = tiercheck_model::sequence::parse_trace(Path::new(TRACE_NAME), data)
        .map_err(|e| e.to_string())?;
    let mut n = 0usize;
    for tensor in t.taps.values() {
        n = n.wrapping_add(tensor.data.len());
    }
    std::hint::black_box(n);
    Ok(())
}

/// A saved K/V cache (llama.cpp's sequence state or session file): the reader, then the
/// checks a run applies against the embedded model's shape (8 layers of 128 K/V values,
/// F16 cache with flash attention, 512 cells).
pub fn state(data: &[u8]) -> Result<(), String> {
    let s = tiercheck_model::state::KvState::parse(Path::new(STATE_NAME), data)
        .map_err(|e| e.to_string())?;
    let mut n = 0usize;
    for (k, v) in s.k.iter().zip(&s.v) {
        n = n.wrapping_add(k.len()).wrapping_add(v.len());
    }
    std::hint::black_box(n);
    let hp = embedded_shape();
    let _ = s.check(&hp, &tiercheck_model::Attention::LLAMA_DEFAULT, 512);
    Ok(())
}

/// The hyper-parameters of the embedded model's shape (`golden/model/recipe.toml`): 8
/// layers of 8 heads, 2 KV heads of 64, n_embd 512, n_ff 1536, 3072 tokens.
pub fn embedded_shape() -> tiercheck_model::HParams {
    tiercheck_model::HParams {
        arch: "qwen3".into(),
        n_embd: 512,
        n_layer: 8,
        n_head: 8,
        n_head_kv: 2,
        head_dim: 64,
        n_ff: 1536,
        n_vocab: 3072,
        n_ctx_train: 512,
        rope_base: 1e6,
        rms_eps: 1e-6,
        moe: None,
    }
}

/// A golden lane manifest: the parser and validation `load_lane` applies, then every
/// entry's self-check digest.
pub fn manifest(data: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("{MANIFEST_NAME}: not UTF-8: {e}"))?;
    let m = crate::store::parse_manifest(Path::new(MANIFEST_NAME), text, None)
        .map_err(|e| e.to_string())?;
    for (name, entry) in &m.entries {
        std::hint::black_box(entry.expected_check(name));
    }
    Ok(())
}
