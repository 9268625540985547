//! Plain array dumps, as engines write them: a safetensors file or a numpy `.npz`
//! archive holding one array per name, with no tiercheck metadata. Float arrays (F32,
//! F16, BF16; in npz `<f4`, `<f2`) are widened to f32 exactly; integer arrays (token
//! ids: I32, I64, U32; in npz `<i4`, `<i8`, `<u4`) are kept as integers.
//!
//! The npz reader takes what `numpy.savez` writes: a ZIP archive of stored (not
//! compressed) `.npy` members, format 1.0-3.0, little-endian, C order. Everything else
//! (`numpy.savez_compressed`, Fortran order, big-endian or object arrays) is an error
//! naming the file and the member, never a panic.

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
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        read_npz(path, &bytes)
    } else {
        read_safetensors(path, &bytes)
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
            other => {
                return Err(TensorFileError::Dtype {
                    path: path.to_owned(),
                    name,
                    dtype: format!("{other:?}"),
                })
            }
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

/// The members of a stored ZIP archive, from its central directory.
fn zip_members<'b>(path: &Path, b: &'b [u8]) -> Result<Vec<(String, &'b [u8])>, TensorFileError> {
    let bad = |what: &str| content(path, format!("not a readable npz archive: {what}"));
    // The end-of-central-directory record: the last `PK\x05\x06` (a comment may follow).
    let eocd = (0..b.len().saturating_sub(21))
        .rev()
        .find(|&i| b[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| bad("no end of central directory"))?;
    let count = u16_at(b, eocd + 10).ok_or_else(|| bad("truncated directory"))?;
    let mut at = u32_at(b, eocd + 16).ok_or_else(|| bad("truncated directory"))?;
    let mut out = Vec::with_capacity(count);
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
        if method != 0 {
            return Err(content(
                path,
                format!(
                    "member '{name}' is compressed (method {method}): write the dump with numpy.savez, not savez_compressed"
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
        out.push((name, data));
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
    if value_of("fortran_order").as_deref() != Some("False") {
        return Err(bad("Fortran-order arrays are not supported (write a C-order array)".into()));
    }
    let shape_s = value_of("shape").ok_or_else(|| bad("header has no shape".into()))?;
    let shape: Vec<usize> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad(format!("bad shape ({shape_s})"))))
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().product();
    let raw = &b[hstart + hlen..];
    let width = match descr.as_str() {
        "<f4" | "<i4" | "<u4" => 4,
        "<f2" => 2,
        "<i8" => 8,
        other => {
            return Err(bad(format!(
                "dtype '{other}' is not supported (little-endian f4, f2, i4, u4, i8)"
            )))
        }
    };
    if raw.len() < n * width {
        return Err(bad(format!("{} bytes of data for {n} values of {width} bytes", raw.len())));
    }
    let raw = &raw[..n * width];
    let values = match descr.as_str() {
        "<f4" => Values::Float(
            raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        ),
        "<f2" => Values::Float(
            raw.chunks_exact(2)
                .map(|c| tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        "<i4" => Values::Int(
            raw.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
        ),
        "<u4" => Values::Int(
            raw.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
        ),
        _ => Values::Int(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
    };
    Ok(Array { shape, values })
}

fn read_npz(path: &Path, bytes: &[u8]) -> Result<Dump, TensorFileError> {
    let mut dump = Dump::default();
    for (name, data) in zip_members(path, bytes)? {
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let array = parse_npy(path, &name, data)?;
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

    #[test]
    fn bad_npz_members_are_errors_naming_the_member() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let f: Vec<u8> = [1.0f32; 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        for (member, why) in [
            (npy(">f4", "2,", &f), "dtype '>f4'"),
            (npy("<f4", "3,", &f), "bytes of data"),
            (b"not an array".to_vec(), "not a .npy array"),
        ] {
            std::fs::write(&p, npz(&[("x.npy", member)])).unwrap();
            let e = read(&p).unwrap_err().to_string();
            assert!(e.contains("d.npz") && e.contains("'x.npy'") && e.contains(why), "{e}");
        }
        let mut z = npz(&[("x.npy", npy("<f4", "2,", &f))]);
        let cd = z.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        z[cd + 10] = 8; // deflate, as numpy.savez_compressed writes
        std::fs::write(&p, &z).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("compressed") && e.contains("savez_compressed"), "{e}");
        z[cd + 10] = 0;
        let n = z.len();
        z.truncate(n - 10);
        std::fs::write(&p, &z).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("npz"), "{e}");
    }
}
