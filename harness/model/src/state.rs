//! llama.cpp's saved K/V cache: a run can begin from the cells a llama.cpp process
//! saved, instead of evaluating the prompt that filled them. That is how a decode step
//! at thousands of cells is checked without evaluating thousands of prompt rows first,
//! and how a user replays the steps after a prompt that llama-server saved.
//!
//! Two files hold one, both little-endian, read here field by field as llama.cpp 0c1e570
//! (llama-cpp-python 0.3.36's tree) writes them (`llama_kv_cache::state_write`,
//! `state_write_meta`, `state_write_data`):
//!
//! - a **sequence state** (`llama_state_seq_save_file`; llama-server's slot save; the
//!   capture tool's `--state-out`): `u32` magic `ggsq` (0x67677371), `u32` version 3,
//!   `u32` token count and that many `i32` tokens, then the cache of one sequence;
//! - a **whole-context state** (`llama_state_save_file`; llama-completion's --prompt-cache): `u32` magic
//!   `ggsn` (0x6767736e), `u32` version 10, the tokens as above, the architecture name
//!   (`u32` length and bytes), then the cache of every sequence.
//!
//! The cache: `u32` stream count; per stream `u32` cell count and, when not zero, per
//! cell `i32` position, `u32` sequence count and that many `i32` sequence ids; then
//! `u32` v_trans (1 without flash attention: V stored transposed), `u32` layer count;
//! per layer `i32` K type (a ggml type: 0 F32, 1 F16), `u64` bytes per row and one row
//! per cell; then V: without v_trans as K, with it per layer `i32` type, `u32` bytes
//! per element, `u32` row width, and for each of the width's components its value in
//! every cell.
//!
//! What a run can start from: one stream holding cells (the others empty), every cell
//! of one sequence at positions `0..n` in order (llama.cpp then loads them into cells
//! `0..n`, as if a prompt of `n` tokens had filled them), F16 or F32 K and V of the
//! same type, the model's layer count and K/V width, and no extra per-cell data
//! (M-RoPE models write some; no such model runs here). Anything else is refused with
//! the file and the problem.

use std::path::{Path, PathBuf};

use tiercheck_core::fp16;

use super::attention::{Attention, FlashAttn, KvType};
use super::hparams::HParams;
use super::ModelError;

/// `ggsq`: a sequence state file.
pub const SEQ_MAGIC: u32 = 0x6767_7371;
/// The sequence state version this reader knows.
pub const SEQ_VERSION: u32 = 3;
/// `ggsn`: a whole-context state file.
pub const CONTEXT_MAGIC: u32 = 0x6767_736e;
/// The whole-context state version this reader knows.
pub const CONTEXT_VERSION: u32 = 10;

/// Which file a state came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateFile {
    /// `llama_state_seq_save_file`.
    Sequence,
    /// `llama_state_save_file`, with the architecture it names.
    Context {
        /// The model architecture recorded in the file (`qwen3`).
        arch: String,
    },
}

/// A saved K/V cache, read and checked.
#[derive(Clone, Debug)]
pub struct KvState {
    /// Where it was read from.
    pub path: PathBuf,
    /// sha256 of the file's bytes (lowercase hex).
    pub sha256: String,
    /// Which kind of file.
    pub file: StateFile,
    /// The tokens the file records (what filled the cells, as its writer says).
    pub tokens: Vec<u32>,
    /// Cells, at positions `0..cells`.
    pub cells: usize,
    /// The cache's element type (K and V alike).
    pub kv: KvType,
    /// Whether V is stored transposed (llama.cpp without flash attention).
    pub v_trans: bool,
    /// Layers.
    pub n_layer: usize,
    /// Values per cell and layer of K (and of V).
    pub kv_dim: usize,
    /// K per layer: `cells` rows of `kv_dim`, widened to f32.
    pub k: Vec<Vec<f32>>,
    /// V per layer, by cell like K (un-transposed), widened to f32.
    pub v: Vec<Vec<f32>>,
}

/// One stream's cache: cells, V transposed, element type, K/V width, K and V per layer.
type Stream = (usize, bool, KvType, usize, Vec<Vec<f32>>, Vec<Vec<f32>>);

/// A cursor over a state file's bytes that names the file and the field in its errors.
struct Reader<'a> {
    path: &'a Path,
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, problem: impl std::fmt::Display) -> ModelError {
        ModelError::Request(format!("{}: {problem}", self.path.display()))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            self.err(format!(
                "truncated: {what} needs {n} bytes at byte {}, the file has {}",
                self.at,
                self.b.len()
            ))
        })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, ModelError> {
        Ok(self.u32(what)? as i32)
    }

    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
}

/// A ggml cache type this reader widens: `(type, bytes per element)`.
fn cache_type(r: &Reader<'_>, ty: i32, what: &str) -> Result<(KvType, usize), ModelError> {
    match ty {
        0 => Ok((KvType::F32, 4)),
        1 => Ok((KvType::F16, 2)),
        other => Err(r.err(format!(
            "{what} is of ggml type {other}; only F32 (0) and F16 (1) caches are reproduced"
        ))),
    }
}

fn widen(kv: KvType, bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    let n = match kv {
        KvType::F32 => 4,
        KvType::F16 => 2,
    };
    bytes.chunks_exact(n).map(move |c| match kv {
        KvType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        KvType::F16 => fp16::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])),
    })
}

impl KvState {
    /// Read and check a sequence state or whole-context state file.
    pub fn read(path: &Path) -> Result<KvState, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| {
            ModelError::Request(format!("{}: cannot read the state file: {e}", path.display()))
        })?;
        Self::parse(path, &bytes)
    }

    /// [`KvState::read`] on bytes already in memory; `path` names them in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<KvState, ModelError> {
        use sha2::{Digest, Sha256};
        let mut r = Reader { path, b: bytes, at: 0 };
        let magic = r.u32("the magic")?;
        let version = r.u32("the version")?;
        let context = match (magic, version) {
            (SEQ_MAGIC, SEQ_VERSION) => false,
            (CONTEXT_MAGIC, CONTEXT_VERSION) => true,
            (SEQ_MAGIC, v) | (CONTEXT_MAGIC, v) => {
                return Err(r.err(format!(
                    "state file version {v}; this reader knows sequence states of version {SEQ_VERSION} and whole-context states of version {CONTEXT_VERSION} (llama.cpp 0c1e570)"
                )))
            }
            (m, _) => {
                return Err(r.err(format!(
                    "not a llama.cpp state file (magic {m:#010x}; a sequence state starts with 'ggsq', a whole-context state with 'ggsn')"
                )))
            }
        };
        let n_tokens = r.u32("the token count")? as usize;
        let raw = r.take(n_tokens.saturating_mul(4), "the tokens")?;
        let mut tokens = Vec::with_capacity(n_tokens);
        for c in raw.chunks_exact(4) {
            let t = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if t < 0 {
                return Err(r.err(format!("token {t} is negative")));
            }
            tokens.push(t as u32);
        }
        let file = if context {
            let n = r.u32("the architecture name's length")? as usize;
            let s = r.take(n, "the architecture name")?;
            let arch = String::from_utf8_lossy(s).into_owned();
            StateFile::Context { arch }
        } else {
            StateFile::Sequence
        };
        let n_stream = r.u32("the stream count")?;
        if n_stream == 0 {
            return Err(r.err("the cache has no stream"));
        }
        let mut found: Option<Stream> = None;
        for s in 0..n_stream {
            let cells = r.u32("a stream's cell count")? as usize;
            if cells == 0 {
                continue;
            }
            if found.is_some() {
                return Err(r.err(format!(
                    "stream {s} holds cells too: only a cache of one sequence is reproduced"
                )));
            }
            let mut seq = None;
            for c in 0..cells {
                let pos = r.i32("a cell's position")?;
                let n_seq = r.u32("a cell's sequence count")?;
                if n_seq != 1 {
                    return Err(r.err(format!(
                        "cell {c} belongs to {n_seq} sequences: only a cache of one sequence is reproduced"
                    )));
                }
                let id = r.i32("a cell's sequence id")?;
                if *seq.get_or_insert(id) != id {
                    return Err(r.err(format!(
                        "cell {c} belongs to sequence {id}, cell 0 to {}: only a cache of one sequence is reproduced",
                        seq.unwrap_or(id)
                    )));
                }
                if pos != c as i32 {
                    return Err(r.err(format!(
                        "cell {c} is at position {pos}: a run starts only from cells at positions 0, 1, 2, ... in order"
                    )));
                }
            }
            let v_trans = match r.u32("v_trans")? {
                0 => false,
                1 => true,
                v => return Err(r.err(format!("v_trans is {v}, not 0 or 1"))),
            };
            let n_layer = r.u32("the layer count")? as usize;
            if n_layer == 0 {
                return Err(r.err("the cache has no layer"));
            }
            let mut kind: Option<KvType> = None;
            let mut kv_dim = 0usize;
            // (No capacity from the file's counts: each layer's data is taken first.)
            let mut k = Vec::new();
            for il in 0..n_layer {
                let ty = r.i32("a layer's K type")?;
                let (t, el) = cache_type(&r, ty, &format!("layer {il}'s K"))?;
                let row = r.u64("a layer's K row size")? as usize;
                if row == 0 || !row.is_multiple_of(el) {
                    return Err(r.err(format!("layer {il}'s K rows are {row} bytes")));
                }
                if il == 0 {
                    kv_dim = row / el;
                    kind = Some(t);
                } else if Some(t) != kind || row / el != kv_dim {
                    return Err(r.err(format!(
                        "layer {il}'s K is {} x {} where layer 0's is {} x {kv_dim}",
                        t.name(),
                        row / el,
                        kind.map_or("?", |k| k.name())
                    )));
                }
                let data = r.take(row.saturating_mul(cells), &format!("layer {il}'s K"))?;
                k.push(widen(t, data).collect::<Vec<f32>>());
            }
            let kind = kind.expect("one layer at least");
            let mut v = Vec::new();
            for il in 0..n_layer {
                let ty = r.i32("a layer's V type")?;
                let (t, el) = cache_type(&r, ty, &format!("layer {il}'s V"))?;
                if t != kind {
                    return Err(r.err(format!(
                        "layer {il}'s V is {} and K is {}: only caches with one type for both are reproduced",
                        t.name(),
                        kind.name()
                    )));
                }
                if v_trans {
                    let el_size = r.u32("a layer's V element size")? as usize;
                    let width = r.u32("a layer's V width")? as usize;
                    if el_size != el || width != kv_dim {
                        return Err(r.err(format!(
                            "layer {il}'s V has {width} components of {el_size} bytes, K rows {kv_dim} of {el}"
                        )));
                    }
                    let n = el.saturating_mul(cells).saturating_mul(width);
                    let data = r.take(n, &format!("layer {il}'s V"))?;
                    let t_vals: Vec<f32> = widen(t, data).collect();
                    // Stored component by component over the cells: back to by cell.
                    let mut by_cell = vec![0.0f32; cells * width];
                    for (j, comp) in t_vals.chunks_exact(cells).enumerate() {
                        for (c, &x) in comp.iter().enumerate() {
                            by_cell[c * width + j] = x;
                        }
                    }
                    v.push(by_cell);
                } else {
                    let row = r.u64("a layer's V row size")? as usize;
                    if row != el * kv_dim {
                        return Err(r.err(format!(
                            "layer {il}'s V rows are {row} bytes, K rows {}",
                            el * kv_dim
                        )));
                    }
                    let data = r.take(row.saturating_mul(cells), &format!("layer {il}'s V"))?;
                    v.push(widen(t, data).collect());
                }
            }
            found = Some((cells, v_trans, kind, kv_dim, k, v));
        }
        if r.at != bytes.len() {
            return Err(r.err(format!(
                "{} bytes after the cache (byte {} of {})",
                bytes.len() - r.at,
                r.at,
                bytes.len()
            )));
        }
        let Some((cells, v_trans, kv, kv_dim, k, v)) = found else {
            return Err(r.err("the cache holds no cells"));
        };
        Ok(KvState {
            path: path.to_owned(),
            sha256: super::hex(&Sha256::digest(bytes)),
            file,
            tokens,
            cells,
            kv,
            v_trans,
            n_layer: k.len(),
            kv_dim,
            k,
            v,
        })
    }

    /// The attention setting llama.cpp saved this cache under: its type, and flash
    /// attention on exactly when V is not transposed.
    pub fn fa(&self) -> FlashAttn {
        if self.v_trans {
            FlashAttn::Off
        } else {
            FlashAttn::On
        }
    }

    /// Whether a run of `hp` in a context of `n_ctx` cells with `attn` can start from
    /// this cache: the model's layer count and K/V width, the attention setting it was
    /// saved under, and room for one more cell.
    pub fn check(&self, hp: &HParams, attn: &Attention, n_ctx: usize) -> Result<(), ModelError> {
        let p = self.path.display();
        let kv_dim = hp.n_head_kv * hp.head_dim;
        if let StateFile::Context { arch } = &self.file {
            if arch != "qwen3" {
                return Err(ModelError::Request(format!(
                    "{p}: the whole-context state was saved by a {arch} model, not a qwen3 one"
                )));
            }
        }
        if self.n_layer != hp.n_layer || self.kv_dim != kv_dim {
            return Err(ModelError::Request(format!(
                "{p}: the cache has {} layers of {} K/V values per cell; the model has {} of {kv_dim}",
                self.n_layer, self.kv_dim, hp.n_layer
            )));
        }
        if self.kv != attn.kv || self.fa() != attn.fa {
            return Err(ModelError::Request(format!(
                "{p}: the cache was saved with kv={} fa={} (V {}transposed); the run asks {}: pass --kv {} --fa {}",
                self.kv.name(),
                self.fa().name(),
                if self.v_trans { "" } else { "not " },
                attn.label(),
                self.kv.name(),
                self.fa().name()
            )));
        }
        if self.cells >= n_ctx {
            return Err(ModelError::Request(format!(
                "{p}: the cache holds {} cells; a context of {n_ctx} leaves no room for another",
                self.cells
            )));
        }
        Ok(())
    }

    /// Provenance of a run that started from this cache: `state_sha256`, `state_cells`,
    /// `state_path` (the keys the capture tool writes too).
    pub fn provenance(&self, m: &mut std::collections::BTreeMap<String, String>) {
        m.insert("state_sha256".into(), self.sha256.clone());
        m.insert("state_cells".into(), self.cells.to_string());
        m.insert("state_path".into(), self.path.display().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sequence state laid out field by field as the module doc says (independently
    /// of the parser): one stream, `cells` cells of sequence 0, F16 K and V.
    fn seq_file(cells: usize, layers: usize, dim: usize, v_trans: bool) -> Vec<u8> {
        let mut b = Vec::new();
        let u32_ = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        u32_(&mut b, 0x6767_7371);
        u32_(&mut b, 3);
        u32_(&mut b, cells as u32);
        for t in 0..cells {
            u32_(&mut b, 100 + t as u32);
        }
        u32_(&mut b, 1);
        u32_(&mut b, cells as u32);
        for c in 0..cells {
            u32_(&mut b, c as u32);
            u32_(&mut b, 1);
            u32_(&mut b, 0);
        }
        u32_(&mut b, v_trans as u32);
        u32_(&mut b, layers as u32);
        // Value of layer l, cell c, component j: (l*1000 + c*10 + j) as f16 (exact).
        let val = |l: usize, c: usize, j: usize| {
            fp16::f32_to_f16_bits_hw((l * 1000 + c * 10 + j) as f32).to_le_bytes()
        };
        for l in 0..layers {
            u32_(&mut b, 1);
            b.extend_from_slice(&((2 * dim) as u64).to_le_bytes());
            for c in 0..cells {
                for j in 0..dim {
                    b.extend_from_slice(&val(l, c, j));
                }
            }
        }
        for l in 0..layers {
            u32_(&mut b, 1);
            if v_trans {
                u32_(&mut b, 2);
                u32_(&mut b, dim as u32);
                for j in 0..dim {
                    for c in 0..cells {
                        b.extend_from_slice(&val(l, c, j));
                    }
                }
            } else {
                b.extend_from_slice(&((2 * dim) as u64).to_le_bytes());
                for c in 0..cells {
                    for j in 0..dim {
                        b.extend_from_slice(&val(l, c, j));
                    }
                }
            }
        }
        b
    }

    #[test]
    fn reads_both_v_layouts_by_cell() {
        for v_trans in [false, true] {
            let s = KvState::parse(Path::new("s.bin"), &seq_file(3, 2, 4, v_trans)).unwrap();
            assert_eq!((s.cells, s.n_layer, s.kv_dim, s.kv), (3, 2, 4, KvType::F16));
            assert_eq!(s.tokens, vec![100, 101, 102]);
            assert_eq!(s.fa(), if v_trans { FlashAttn::Off } else { FlashAttn::On });
            // layer 1, cell 2, component 3
            assert_eq!(s.k[1][2 * 4 + 3], 1023.0);
            assert_eq!(s.v[1][2 * 4 + 3], 1023.0);
            assert_eq!(s.v[0][4 + 2], 12.0);
        }
    }

    #[test]
    fn every_truncation_and_extra_byte_is_an_error_naming_the_file() {
        let good = seq_file(2, 2, 4, true);
        for n in 0..good.len() {
            let e = KvState::parse(Path::new("cut.bin"), &good[..n]).unwrap_err().to_string();
            assert!(e.starts_with("cut.bin: "), "{e}");
        }
        let mut long = good.clone();
        long.push(0);
        let e = KvState::parse(Path::new("x.bin"), &long).unwrap_err().to_string();
        assert!(e.contains("1 bytes after the cache"), "{e}");
    }

    #[test]
    fn refuses_what_a_run_cannot_start_from() {
        let good = seq_file(2, 1, 4, false);
        let at_cells = 4 + 4 + 4 + 2 * 4 + 4 + 4;
        let cases: Vec<(usize, u32, &str)> = vec![
            (0, 0x1234, "not a llama.cpp state file"),
            (4, 2, "version 2"),
            (at_cells - 8, 0, "no stream"),
            (at_cells + 12, 5, "at position 5"),
            (at_cells + 16, 2, "belongs to 2 sequences"),
            (at_cells + 24, 7, "v_trans is 7"),
            (at_cells + 24 + 8, 8, "ggml type 8"),
        ];
        for (at, v, want) in cases {
            let mut b = good.clone();
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            let e = KvState::parse(Path::new("bad.bin"), &b).unwrap_err().to_string();
            assert!(e.contains(want), "patch {at}={v}: {e}");
        }
    }
}
