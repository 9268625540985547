//! Atomic file replacement: write an exclusively created temporary file in the
//! destination's directory, flush and sync it, then rename it over the destination and
//! sync the directory. A crash or error at any point leaves either the old file or the
//! new one, never a half-written file; on error the temporary file is removed.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes), |_, e| e)
}

/// Write to `path` atomically with `fill`, which receives the temporary file.
/// `io_err(operation, error)` turns a failure of the surrounding file operations
/// ("create temporary file", "sync", "rename") into the caller's error type.
pub(crate) fn write_atomic_with<E>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<(), E>,
    io_err: impl Fn(&'static str, io::Error) -> E,
) -> Result<(), E> {
    let file_name = path.file_name().ok_or_else(|| {
        io_err("create", io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let (tmp, mut file) =
        create_temp(dir, file_name).map_err(|e| io_err("create temporary file", e))?;
    let result = (|| {
        fill(&mut file)?;
        file.sync_all().map_err(|e| io_err("sync", e))?;
        drop(file);
        fs::rename(&tmp, path).map_err(|e| io_err("rename", e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    } else if let Ok(d) = File::open(dir) {
        // Persist the rename; a failure here does not undo a completed write.
        let _ = d.sync_all();
    }
    result
}

/// A new, exclusively created `.<name>.<pid>.<n>.tmp` next to the destination.
fn create_temp(dir: &Path, file_name: &std::ffi::OsStr) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last_err = None;
    for _ in 0..64 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut name = OsString::from(".");
        name.push(file_name);
        name.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_old_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let err = write_atomic_with(
            &p,
            |f| {
                f.write_all(b"partial")?;
                Err(io::Error::other("boom"))
            },
            |_, e| e,
        );
        assert!(err.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "temp file removed");
    }
}
