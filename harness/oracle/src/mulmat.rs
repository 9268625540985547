//! ggml's matmul paths, plain and repacked, through the `mulmat` driver program.
//!
//! `ci/oracle` builds `ci/oracle-driver/mulmat.c` once per tier, against that tier's
//! libraries, into `<tier folder>/bin/mulmat` (next to the tier's `lib/`). The driver runs
//! ONE `ggml_mul_mat` node on ggml's CPU backend the way llama.cpp does: the weight goes
//! into the default CPU buffer ([`MulmatMode::Plain`]) or into the CPU extra buffer type
//! `CPU_REPACK` ([`MulmatMode::Repack`]), where storing it rewrites it into the tier's
//! interleaved layout and the repacked gemv/gemm kernels run. This covers what the
//! in-process bindings ([`super::GgmlLib`]) cannot reach: the backend's own choice of
//! kernels for a whole matrix (llamafile's tinyBLAS, the x86 tiled K-quant path, repack).
//!
//! The driver is a separate process, so each tier runs its own libraries in isolation;
//! data goes through files in a temporary folder. A call takes a few milliseconds.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tiercheck_core::GgmlType;

use super::{OracleConfig, OracleError, Tier};

/// The driver's exit code for "no repack layout for this type on this build".
const EXIT_NO_REPACK: i32 = 3;

/// Where the weight matrix lives, which decides the kernels ggml runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MulmatMode {
    /// The default CPU buffer: ggml's plain matmul (`vec_dot` per row pair, or llamafile's
    /// tinyBLAS, or the x86 tiled path, as ggml decides).
    Plain,
    /// The `CPU_REPACK` extra buffer type: the weight is repacked when stored and the
    /// repacked gemv/gemm kernels run.
    Repack,
}

impl MulmatMode {
    /// The driver's spelling of the mode.
    pub fn name(self) -> &'static str {
        match self {
            MulmatMode::Plain => "plain",
            MulmatMode::Repack => "repack",
        }
    }
}

/// What one driver run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct MulmatResult {
    /// `m` rows of `n` values: `out[i * n + j]` = weight row `j` times activation row `i`.
    pub out: Vec<f32>,
    /// Whether ggml stored the weight repacked (`tensor->extra != NULL`).
    pub repacked: bool,
    /// The name of the weight's buffer type (`CPU` or `CPU_REPACK`).
    pub buft: String,
    /// The repack layout ggml chose (`q4_K_8x8`, `q4_0_8x8`, ...), when it repacked.
    pub layout: Option<String>,
}

/// One tier's `mulmat` driver program.
#[derive(Clone, Debug)]
pub struct MulmatDriver {
    path: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl MulmatDriver {
    /// The driver `ci/oracle` built for `tier`: `<lib dir>/../bin/mulmat`, where the lib
    /// dir is the tier's library folder named by `config`.
    ///
    /// Fails with [`OracleError::Unavailable`] when the tier or its driver is not built,
    /// and with [`OracleError::HostLacksFeature`] when the tier needs instructions this
    /// CPU lacks (the driver would die of an illegal instruction).
    pub fn for_tier(config: &OracleConfig, tier: Tier) -> Result<MulmatDriver, OracleError> {
        let lib = config.require_tier(tier)?;
        let path = lib.parent().unwrap_or(lib).join("bin").join("mulmat");
        if !path.is_file() {
            return Err(OracleError::Unavailable(format!(
                "oracle not built: run ci/oracle (no mulmat driver for tier {tier} at {})",
                path.display()
            )));
        }
        if let Some(feature) = missing_host_feature(tier) {
            return Err(OracleError::HostLacksFeature { lib_dir: lib.to_path_buf(), feature });
        }
        Ok(MulmatDriver::new(path))
    }

    /// A driver at an explicit path.
    pub fn new(path: impl Into<PathBuf>) -> MulmatDriver {
        MulmatDriver { path: path.into(), env: Vec::new() }
    }

    /// The driver program.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets an environment variable for the driver's runs.
    ///
    /// By default the driver runs without any inherited `GGML_*` variable (some of them
    /// switch kernels, e.g. `GGML_CPU_TILED_MM`), so results do not depend on the caller's
    /// environment; this is how to set one on purpose (`GGML_CPU_TILED_MM=0`).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `Y = W x` for `n` weight rows of `k` values of type `ty` (ggml type id; plain
    /// block layout in `weights`) and `m` activation rows (`acts`, `m * k` values) on
    /// `threads` threads, with the weight placed as `mode` says.
    ///
    /// Sizes are checked before anything runs. In [`MulmatMode::Repack`], a type that has
    /// no repack layout in this tier's build (for `n` rows) gives
    /// [`OracleError::NoRepackLayout`]; any other driver failure gives
    /// [`OracleError::Driver`] with its stderr.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        mode: MulmatMode,
        ty: u32,
        k: usize,
        n: usize,
        m: usize,
        threads: usize,
        weights: &[u8],
        acts: &[f32],
    ) -> Result<MulmatResult, OracleError> {
        let gty = GgmlType::from_id(ty).ok_or(OracleError::UnknownType(ty))?;
        for (what, v) in [("k", k), ("n", n), ("m", m), ("threads", threads)] {
            if v == 0 {
                return Err(invalid(format!("{what} must be at least 1")));
            }
        }
        let row_bytes = gty.row_bytes(k).ok_or_else(|| {
            invalid(format!(
                "k = {k} is not a whole number of {}-value {} blocks",
                gty.block_size(),
                gty.name()
            ))
        })?;
        let want_w = row_bytes.checked_mul(n).ok_or_else(|| invalid("weight size overflows"))?;
        if weights.len() != want_w {
            return Err(invalid(format!(
                "weights: {} bytes, expected {want_w} ({n} rows of {k} {} values)",
                weights.len(),
                gty.name()
            )));
        }
        let want_x = m.checked_mul(k).ok_or_else(|| invalid("activation size overflows"))?;
        if acts.len() != want_x {
            return Err(invalid(format!(
                "activations: {} values, expected {want_x} ({m} rows of {k})",
                acts.len()
            )));
        }
        let want_out = m.checked_mul(n).ok_or_else(|| invalid("output size overflows"))?;

        let dir = tempfile::Builder::new()
            .prefix("tiercheck-mulmat-")
            .tempdir()
            .map_err(|e| io("creating a temporary folder", e))?;
        let (wpath, xpath, opath) =
            (dir.path().join("w.bin"), dir.path().join("x.bin"), dir.path().join("out.bin"));
        std::fs::write(&wpath, weights).map_err(|e| io("writing the weights file", e))?;
        let xbytes: Vec<u8> = acts.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&xpath, xbytes).map_err(|e| io("writing the activations file", e))?;

        let mut cmd = Command::new(&self.path);
        cmd.arg(mode.name());
        for v in [ty as usize, k, n, m, threads] {
            cmd.arg(v.to_string());
        }
        cmd.arg(&wpath).arg(&xpath).arg(&opath);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GGML_") {
                cmd.env_remove(&key);
            }
        }
        // An abort should not try to attach a debugger for a backtrace.
        cmd.env("GGML_NO_BACKTRACE", "1");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let output =
            cmd.output().map_err(|e| io(&format!("running {}", self.path.display()), e))?;
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if !output.status.success() {
            return Err(self.failure(&output, stderr, mode, gty, n));
        }

        let stdout = String::from_utf8_lossy(&output.stdout);
        let (repacked, buft, layout) =
            parse_report(&stdout).ok_or_else(|| OracleError::Driver {
                driver: self.path.clone(),
                status: "unexpected output".into(),
                stderr: format!("stdout {:?}, stderr {stderr:?}", stdout.trim()),
            })?;
        let raw = std::fs::read(&opath).map_err(|e| io("reading the driver's output", e))?;
        if raw.len() != want_out * 4 {
            return Err(OracleError::SizeMismatch { expected: want_out * 4, got: raw.len() });
        }
        let out =
            raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(MulmatResult { out, repacked, buft, layout })
    }

    fn failure(
        &self,
        output: &Output,
        stderr: String,
        mode: MulmatMode,
        ty: GgmlType,
        n: usize,
    ) -> OracleError {
        use std::os::unix::process::ExitStatusExt;
        let code = output.status.code();
        if code == Some(EXIT_NO_REPACK) && mode == MulmatMode::Repack {
            return OracleError::NoRepackLayout { ty: ty.name(), n, detail: stderr };
        }
        let status = match (code, output.status.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => output.status.to_string(),
        };
        OracleError::Driver { driver: self.path.clone(), status, stderr }
    }
}

/// Parses the driver's report line `repacked=<0|1> buft=<name>[ layout=<name>]`.
pub(super) fn parse_report(stdout: &str) -> Option<(bool, String, Option<String>)> {
    let line = stdout.lines().find(|l| l.starts_with("repacked="))?;
    let (mut repacked, mut buft, mut layout) = (None, None, None);
    for field in line.split_whitespace() {
        match field.split_once('=')? {
            ("repacked", "0") => repacked = Some(false),
            ("repacked", "1") => repacked = Some(true),
            ("buft", v) if !v.is_empty() => buft = Some(v.to_string()),
            ("layout", v) if !v.is_empty() => layout = Some(v.to_string()),
            _ => {}
        }
    }
    Some((repacked?, buft?, layout))
}

/// The first instruction-set extension `tier` needs that this CPU lacks.
fn missing_host_feature(tier: Tier) -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        if tier == Tier::Haswell {
            let have = [
                ("avx", tiercheck_core::detect::cpu_has("avx")),
                ("avx2", tiercheck_core::detect::cpu_has("avx2")),
                ("fma", tiercheck_core::detect::cpu_has("fma")),
                ("f16c", tiercheck_core::detect::cpu_has("f16c")),
                ("bmi2", tiercheck_core::detect::cpu_has("bmi2")),
            ];
            return have.into_iter().find(|(_, ok)| !ok).map(|(f, _)| f);
        }
        None
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = tier;
        Some("x86-64")
    }
}

fn invalid(msg: impl Into<String>) -> OracleError {
    OracleError::InvalidInput(msg.into())
}

fn io(context: &str, source: std::io::Error) -> OracleError {
    OracleError::Io { context: context.to_string(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_report_line() {
        assert_eq!(
            parse_report("repacked=1 buft=CPU_REPACK layout=q4_K_8x8\n"),
            Some((true, "CPU_REPACK".into(), Some("q4_K_8x8".into())))
        );
        assert_eq!(parse_report("noise\nrepacked=0 buft=CPU\n"), Some((false, "CPU".into(), None)));
        assert_eq!(parse_report("repacked=2 buft=CPU\n"), None);
        assert_eq!(parse_report("repacked=1\n"), None);
        assert_eq!(parse_report(""), None);
    }

    #[test]
    fn sizes_are_checked_before_running() {
        let d = MulmatDriver::new("/nonexistent/mulmat");
        let q4k = GgmlType::Q4_K.id();
        let w = vec![0u8; 144 * 8];
        let x = vec![0.0f32; 256 * 2];
        let bad =
            |r: Result<MulmatResult, OracleError>| matches!(r, Err(OracleError::InvalidInput(_)));
        assert!(bad(d.run(MulmatMode::Plain, q4k, 256, 8, 2, 1, &w[1..], &x)));
        assert!(bad(d.run(MulmatMode::Plain, q4k, 256, 8, 2, 1, &w, &x[1..])));
        assert!(bad(d.run(MulmatMode::Plain, q4k, 128, 8, 2, 1, &w, &x)));
        assert!(bad(d.run(MulmatMode::Plain, q4k, 256, 8, 2, 0, &w, &x)));
        assert!(bad(d.run(MulmatMode::Plain, q4k, 256, 0, 2, 1, &[], &x)));
        assert!(matches!(
            d.run(MulmatMode::Plain, 4, 256, 8, 2, 1, &w, &x),
            Err(OracleError::UnknownType(4))
        ));
        // Valid sizes reach the (missing) program.
        assert!(matches!(
            d.run(MulmatMode::Plain, q4k, 256, 8, 2, 1, &w, &x),
            Err(OracleError::Io { .. })
        ));
    }
}
