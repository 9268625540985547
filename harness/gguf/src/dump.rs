//! Plain array dumps, as engines write them: a safetensors file or a numpy `.npz`
//! archive holding one array per name, with no tiercheck metadata. Float arrays (F32,
//! F16, BF16; in npz `<f4`, `<f2`) are widened to f32 exactly; integer arrays (token
//! ids: I32, I64, U32; in npz `<i4`, `<i8`, `<u4`) are kept as integers.
//!
//! The npz reader takes what `numpy.savez` and `numpy.savez_compressed` write: a ZIP
//! archive of `.npy` members, stored or deflated, format 1.0-3.0, of the dtypes above in
//! either byte order (`<` or `>`), C or Fortran order (a Fortran-order array is read
//! back into row-major order). A deflated member is inflated only up to the size its
//! ZIP entry declares, and only when that size is within what its compressed bytes can
//! hold (DEFLATE expands at most 1032:1); its `.npy` header's shape must then fit in
//! what it inflated to. A member that claims more, or inflates to more, is an error,
//! never an allocation of what it claims. Everything else (object arrays, ZIP64, other compression methods) is an error
//! naming the file and the member, never a panic. An array of another dtype is kept as
//! [`Values::Other`] (its dtype), without its values.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors};

use crate::tensorfile::TensorFileError;

/// One array of a dump.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Floats, widened exactly to f32.
    Float(Vec<f32>),
    /// Integers (token ids).
    Int(Vec<i64>),
    /// An array of a dtype this reader does not widen (float64, object, ...), named by
    /// its dtype: an engine's own array beside the taps, which an importer may ignore.
    Other(String),
}

/// One named array.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub values: Values,
}

/// A dump: arrays by name, and the string metadata a safetensors file carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dump {
    /// Arrays by name.
    pub arrays: BTreeMap<String, Array>,
    /// String metadata (safetensors `__metadata__`; empty for npz).
    pub meta: BTreeMap<String, String>,
}

fn content(path: &Path, problem: impl Into<String>) -> TensorFileError {
    TensorFileError::Content { path: path.to_owned(), problem: problem.into() }
}

/// Read a dump: an npz archive (ZIP magic `PK\x03\x04`) or a safetensors file.
pub fn read(path: &Path) -> Result<Dump, TensorFileError> {
    let bytes = std::fs::read(path)
        .map_err(|source| TensorFileError::Io { path: path.to_owned(), source })?;
    read_bytes(path, &bytes)
}

/// [`read`] on a file's bytes already in memory; `path` names it in errors.
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Dump, TensorFileError> {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        read_npz(path, bytes)
    } else {
        read_safetensors(path, bytes)
    }
}

fn read_safetensors(path: &Path, bytes: &[u8]) -> Result<Dump, TensorFileError> {
    let format = |e: safetensors::SafeTensorError| TensorFileError::Format {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let st = SafeTensors::deserialize(bytes).map_err(format)?;
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(format)?;
    let mut dump = Dump {
        meta: meta.metadata().clone().unwrap_or_default().into_iter().collect(),
        ..Dump::default()
    };
    for (name, view) in st.tensors() {
        let raw = view.data();
        let values = match view.dtype() {
            Dtype::F32 => Values::Float(
                raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            ),
            Dtype::F16 => Values::Float(
                raw.chunks_exact(2)
                    .map(|c| {
                        tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]))
                    })
                    .collect(),
            ),
            Dtype::BF16 => Values::Float(
                raw.chunks_exact(2)
                    .map(|c| {
                        tiercheck_core::fp16::bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]))
                    })
                    .collect(),
            ),
            Dtype::I32 => Values::Int(
                raw.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
            ),
            Dtype::U32 => Values::Int(
                raw.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
            ),
            Dtype::I64 => Values::Int(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            other => Values::Other(format!("{other:?}")),
        };
        dump.arrays.insert(name, Array { shape: view.shape().to_vec(), values });
    }
    Ok(dump)
}

fn u16_at(b: &[u8], o: usize) -> Option<usize> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize)
}

fn u32_at(b: &[u8], o: usize) -> Option<usize> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize)
}

/// One member of a ZIP archive: its name, compression method (0 stored, 8 deflated), the
/// uncompressed size its directory entry declares, and its bytes as stored.
struct Member<'b> {
    name: String,
    method: usize,
    size: usize,
    data: &'b [u8],
}

/// The members of a ZIP archive, from its central directory.
fn zip_members<'b>(path: &Path, b: &'b [u8]) -> Result<Vec<Member<'b>>, TensorFileError> {
    let bad = |what: &str| content(path, format!("not a readable npz archive: {what}"));
    // The end-of-central-directory record: the last `PK\x05\x06` (a comment may follow).
    let eocd = (0..b.len().saturating_sub(21))
        .rev()
        .find(|&i| b[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| bad("no end of central directory"))?;
    let count = u16_at(b, eocd + 10).ok_or_else(|| bad("truncated directory"))?;
    let mut at = u32_at(b, eocd + 16).ok_or_else(|| bad("truncated directory"))?;
    let mut out = Vec::new();
    for _ in 0..count {
        if !b.get(at..).is_some_and(|r| r.starts_with(b"PK\x01\x02")) {
            return Err(bad("bad central directory entry"));
        }
        let field = |o: usize, w: usize| {
            if w == 2 {
                u16_at(b, at + o)
            } else {
                u32_at(b, at + o)
            }
        };
        let (method, csize, usize_, nlen, xlen, clen, local) = (
            field(10, 2),
            field(20, 4),
            field(24, 4),
            field(28, 2),
            field(30, 2),
            field(32, 2),
            field(42, 4),
        );
        let (
            Some(method),
            Some(csize),
            Some(usize_),
            Some(nlen),
            Some(xlen),
            Some(clen),
            Some(local),
        ) = (method, csize, usize_, nlen, xlen, clen, local)
        else {
            return Err(bad("truncated directory entry"));
        };
        let name = b
            .get(at + 46..at + 46 + nlen)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .ok_or_else(|| bad("truncated member name"))?;
        if method != 0 && method != 8 {
            return Err(content(
                path,
                format!(
                    "member '{name}' is compressed by method {method}; numpy.savez stores (0) and savez_compressed deflates (8)"
                ),
            ));
        }
        if csize == 0xFFFF_FFFF || usize_ == 0xFFFF_FFFF || local == 0xFFFF_FFFF {
            return Err(content(
                path,
                format!("member '{name}': ZIP64 archives are not supported"),
            ));
        }
        let lh = local;
        if !b.get(lh..).is_some_and(|r| r.starts_with(b"PK\x03\x04")) {
            return Err(bad("bad local header"));
        }
        let (ln, lx) = (
            u16_at(b, lh + 26).ok_or_else(|| bad("truncated local header"))?,
            u16_at(b, lh + 28).ok_or_else(|| bad("truncated local header"))?,
        );
        let start = lh + 30 + ln + lx;
        let data = b
            .get(start..start + csize)
            .ok_or_else(|| content(path, format!("member '{name}' is truncated")))?;
        out.push(Member { name, method, size: usize_, data });
        at += 46 + nlen + xlen + clen;
    }
    Ok(out)
}

/// One `.npy` member: its header's dtype, order and shape, then the values.
fn parse_npy(path: &Path, member: &str, b: &[u8]) -> Result<Array, TensorFileError> {
    let bad = |what: String| content(path, format!("member '{member}': {what}"));
    if !b.starts_with(b"\x93NUMPY") || b.len() < 10 {
        return Err(bad("not a .npy array".into()));
    }
    let (hlen, hstart) = match b[6] {
        1 => (u16_at(b, 8).unwrap_or(0), 10),
        2 | 3 => (u32_at(b, 8).unwrap_or(0), 12),
        v => return Err(bad(format!(".npy format version {v} is not supported"))),
    };
    let header = b
        .get(hstart..hstart + hlen)
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .ok_or_else(|| bad("truncated header".into()))?;
    let value_of = |key: &str| -> Option<String> {
        let i = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[i..].trim_start().strip_prefix(':')?.trim_start();
        if let Some(r) = rest.strip_prefix('\'') {
            Some(r[..r.find('\'')?].to_string())
        } else if let Some(r) = rest.strip_prefix('(') {
            Some(r[..r.find(')')?].to_string())
        } else {
            Some(rest.split([',', '}']).next()?.trim().to_string())
        }
    };
    let descr = value_of("descr").ok_or_else(|| bad("header has no descr".into()))?;
    let fortran = match value_of("fortran_order").as_deref() {
        Some("False") => false,
        Some("True") => true,
        _ => return Err(bad("header has no fortran_order".into())),
    };
    let shape_s = value_of("shape").ok_or_else(|| bad("header has no shape".into()))?;
    let shape: Vec<usize> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad(format!("bad shape ({shape_s})"))))
        .collect::<Result<_, _>>()?;
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some((kind, width, big)) = npy_dtype(&descr) else {
        return Ok(Array { shape, values: Values::Other(descr) });
    };
    let raw = &b[hstart + hlen..];
    let Some(bytes) = n.and_then(|n| n.checked_mul(width)).filter(|&x| x <= raw.len()) else {
        return Err(bad(format!(
            "{} bytes of data for shape ({shape_s}) of {width}-byte values",
            raw.len()
        )));
    };
    let n = bytes / width;
    let raw = &raw[..bytes];
    // Each value's bytes in little-endian order.
    let word = |i: usize| -> [u8; 8] {
        let mut w = [0u8; 8];
        w[..width].copy_from_slice(&raw[i * width..(i + 1) * width]);
        if big {
            w[..width].reverse();
        }
        w
    };
    // Row-major position of the i-th stored value (column-major when Fortran order).
    let mut order: Vec<usize> = (0..n).collect();
    if fortran && shape.len() > 1 {
        for (i, slot) in order.iter_mut().enumerate() {
            // Column-major: the first index varies fastest.
            let (mut rest, mut flat) = (i, 0usize);
            for (d, &dim) in shape.iter().enumerate() {
                let stride: usize = shape[d + 1..].iter().product();
                flat += rest % dim * stride;
                rest /= dim;
            }
            *slot = flat;
        }
    }
    let values = match kind {
        'f' => {
            let mut v = vec![0.0f32; n];
            for (i, &at) in order.iter().enumerate() {
                let w = word(i);
                v[at] = if width == 4 {
                    f32::from_le_bytes([w[0], w[1], w[2], w[3]])
                } else {
                    tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([w[0], w[1]]))
                };
            }
            Values::Float(v)
        }
        _ => {
            let mut v = vec![0i64; n];
            for (i, &at) in order.iter().enumerate() {
                let w = word(i);
                v[at] = match (kind, width) {
                    ('i', 4) => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i64,
                    ('u', 4) => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i64,
                    _ => i64::from_le_bytes(w),
                };
            }
            Values::Int(v)
        }
    };
    Ok(Array { shape, values })
}

/// A `.npy` dtype this reader takes: (kind `f`/`i`/`u`, bytes, big-endian).
fn npy_dtype(descr: &str) -> Option<(char, usize, bool)> {
    let (big, rest) = match descr.as_bytes().first()? {
        b'<' | b'=' => (false, &descr[1..]),
        b'>' => (true, &descr[1..]),
        _ => return None,
    };
    Some(match rest {
        "f4" => ('f', 4, big),
        "f2" => ('f', 2, big),
        "i4" => ('i', 4, big),
        "u4" => ('u', 4, big),
        "i8" => ('i', 8, big),
        _ => return None,
    })
}

/// A deflated member's `.npy` bytes, inflated no further than its header declares.
fn inflate_member(path: &Path, m: &Member<'_>) -> Result<Vec<u8>, TensorFileError> {
    use miniz_oxide::inflate::{decompress_to_vec_with_limit, TINFLStatus};
    let bad = |what: String| content(path, format!("member '{}': {what}", m.name));
    // DEFLATE expands at most 1032:1 (258 bytes from a 2-bit code, plus block overhead).
    let most = m.data.len().saturating_mul(1032).saturating_add(1024);
    if m.size > most {
        return Err(bad(format!(
            "declares {} bytes, more than its {} compressed bytes can hold",
            m.size,
            m.data.len()
        )));
    }
    let all = match decompress_to_vec_with_limit(m.data, m.size) {
        Ok(v) => v,
        Err(e) if e.status == TINFLStatus::HasMoreOutput => {
            return Err(bad(format!("inflates to more than the {} bytes it declares", m.size)))
        }
        Err(e) => return Err(bad(format!("not a readable deflate stream ({e})"))),
    };
    if all.len() != m.size {
        return Err(bad(format!(
            "inflates to {} bytes, not the {} it declares",
            all.len(),
            m.size
        )));
    }
    Ok(all)
}

fn read_npz(path: &Path, bytes: &[u8]) -> Result<Dump, TensorFileError> {
    let mut dump = Dump::default();
    for m in zip_members(path, bytes)? {
        let key = m.name.strip_suffix(".npy").unwrap_or(&m.name).to_string();
        let array = if m.method == 8 {
            let data = inflate_member(path, &m)?;
            parse_npy(path, &m.name, &data)?
        } else {
            parse_npy(path, &m.name, m.data)?
        };
        dump.arrays.insert(key, array);
    }
    Ok(dump)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored ZIP of `.npy` members, as `numpy.savez` writes it.
    fn npz(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut dir = Vec::new();
        for (name, data) in members {
            let off = out.len() as u32;
            out.extend_from_slice(b"PK\x03\x04");
            out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&0u32.to_le_bytes()); // crc (not checked)
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            dir.extend_from_slice(b"PK\x01\x02");
            dir.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            dir.extend_from_slice(&0u32.to_le_bytes());
            dir.extend_from_slice(&(data.len() as u32).to_le_bytes());
            dir.extend_from_slice(&(data.len() as u32).to_le_bytes());
            dir.extend_from_slice(&(name.len() as u16).to_le_bytes());
            dir.extend_from_slice(&[0; 12]);
            dir.extend_from_slice(&off.to_le_bytes());
            dir.extend_from_slice(name.as_bytes());
        }
        let at = out.len() as u32;
        out.extend_from_slice(&dir);
        out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(dir.len() as u32).to_le_bytes());
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({shape}), }}");
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn arrays_of_other_dtypes_are_named_by_their_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let f: Vec<u8> = [1.0f64; 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(
            &p,
            npz(&[("x.npy", npy("<f8", "2,", &f)), ("o.npy", npy("|O", "1,", &[]))]),
        )
        .unwrap();
        let d = read(&p).unwrap();
        assert_eq!(d.arrays["x"].values, Values::Other("<f8".into()));
        assert_eq!(d.arrays["o"].values, Values::Other("|O".into()));
    }

    #[test]
    fn npz_members_are_read_with_their_shapes_and_dtypes() {
        let f: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let ids: Vec<u8> = [17i64, 2045].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bytes =
            npz(&[("l_out-0.npy", npy("<f4", "2, 2", &f)), ("ids.npy", npy("<i8", "2,", &ids))]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        std::fs::write(&p, &bytes).unwrap();
        let d = read(&p).unwrap();
        assert_eq!(d.arrays["l_out-0"].shape, vec![2, 2]);
        assert_eq!(d.arrays["l_out-0"].values, Values::Float(vec![1.5, -2.0, 0.25, 8.0]));
        assert_eq!(d.arrays["ids"].values, Values::Int(vec![17, 2045]));
    }

    /// Big-endian and Fortran-order members are the same arrays as little-endian C-order
    /// ones; a deflated member is its inflated bytes.
    #[test]
    fn byte_orders_memory_orders_and_deflate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let vals = [1.5f32, -2.0, 0.25, 8.0, 3.0, -0.5];
        let le: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let be: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
        // The 2 x 3 array [[1.5, -2, 0.25], [8, 3, -0.5]] stored column by column.
        let f_order: Vec<u8> =
            [0usize, 3, 1, 4, 2, 5].iter().flat_map(|&i| vals[i].to_le_bytes()).collect();
        let mut fortran = npy("<f4", "2, 3", &f_order);
        let at = fortran.windows(5).position(|w| w == b"False").unwrap();
        fortran[at..at + 5].copy_from_slice(b"True ");
        let plain = npy("<f4", "2, 3", &le);
        let deflated = miniz_oxide::deflate::compress_to_vec(&plain, 6);
        let mut z = npz(&[
            ("a.npy", plain.clone()),
            ("b.npy", npy(">f4", "2, 3", &be)),
            ("c.npy", fortran),
            ("d.npy", deflated.clone()),
        ]);
        // Mark d.npy deflated, with its inflated size, in the central directory.
        let cds: Vec<usize> =
            z.windows(4).enumerate().filter(|(_, w)| *w == b"PK\x01\x02").map(|(i, _)| i).collect();
        let d = cds[3];
        z[d + 10] = 8;
        z[d + 24..d + 28].copy_from_slice(&(plain.len() as u32).to_le_bytes());
        std::fs::write(&p, &z).unwrap();
        let got = read(&p).unwrap();
        for name in ["a", "b", "c", "d"] {
            assert_eq!(got.arrays[name].shape, vec![2, 3], "{name}");
            assert_eq!(got.arrays[name].values, Values::Float(vals.to_vec()), "{name}");
        }
        // A deflated member that claims far more than its bytes can hold, or inflates
        // to more than it declares, is refused.
        for (size, why) in [(u32::MAX - 1, "more than its"), (8, "inflates to more")] {
            z[d + 24..d + 28].copy_from_slice(&size.to_le_bytes());
            std::fs::write(&p, &z).unwrap();
            let e = read(&p).unwrap_err().to_string();
            assert!(e.contains("'d.npy'") && e.contains(why), "{e}");
        }
    }

    #[test]
    fn bad_npz_members_are_errors_naming_the_member() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let f: Vec<u8> = [1.0f32; 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        for (member, why) in [
            (npy("<f4", "3,", &f), "bytes of data"),
            (npy("<f4", "4611686018427387904, 8", &f), "bytes of data"),
            (b"not an array".to_vec(), "not a .npy array"),
        ] {
            std::fs::write(&p, npz(&[("x.npy", member)])).unwrap();
            let e = read(&p).unwrap_err().to_string();
            assert!(e.contains("d.npz") && e.contains("'x.npy'") && e.contains(why), "{e}");
        }
        let mut z = npz(&[("x.npy", npy("<f4", "2,", &f))]);
        let cd = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        z[cd + 10] = 8; // deflate, as numpy.savez_compressed writes: these bytes are not
        std::fs::write(&p, &z).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("'x.npy'") && (e.contains("deflate") || e.contains("inflates")), "{e}");
        z[cd + 10] = 12; // bzip2
        std::fs::write(&p, &z).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("method 12"), "{e}");
        z[cd + 10] = 0;
        let n = z.len();
        z.truncate(n - 10);
        std::fs::write(&p, &z).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("npz"), "{e}");
    }
}
