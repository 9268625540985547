//! ggml's aarch64 kernels, through the static `armdriver` program run under qemu-user.
//!
//! `ci/oracle` cross-builds ggml's `ggml`, `ggml-base` and `ggml-cpu` as static aarch64
//! libraries once per build of the aarch64 target table's `[[tier]]` list ([`ArmTier`])
//! and links `ci/oracle-driver/armdriver.c` against each, into
//! `<cache>/ggml-0.3.36/<tier>/bin/armdriver`; `oracle.env` names each program under its
//! tier's `env` key (`TIERCHECK_ORACLE_ARM_DOTPROD`, ...). [`ArmDriver`] runs one of them
//! under `qemu-aarch64 -L /usr/aarch64-linux-gnu` with `QEMU_CPU` set to the CPU model of
//! its tier (or directly, when `qemu-aarch64` is absent on an aarch64 host).
//! ggml's ARM feature choices are compile-time only, so the flavour decides which kernels
//! run, and the qemu CPU model only decides which instructions are legal: a flavour run on
//! a CPU model without its extensions dies of SIGILL, which comes back as an
//! [`OracleError::Driver`] naming the signal.
//!
//! Every method checks its sizes before anything runs (the type's `vec_dot_type`, `nrows`
//! and operations come from the driver's own `traits` answer, asked once per type). Data
//! goes through files in a temporary folder, which is also the driver's working folder. One
//! qemu start costs a few tens of milliseconds, so the row and case counts of
//! [`ArmDriver::from_float`] and [`ArmDriver::vec_dot`] are free, and
//! [`ArmDriver::mulmat_batch`] runs many matmuls in one process.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tiercheck_core::GgmlType;
use tiercheck_targets::{TargetTable, Tier};

use super::mulmat::parse_report;
use super::{parse_env_file, MulmatMode, MulmatResult, OracleConfig, OracleError};

/// The driver's exit codes with a meaning of their own.
const EXIT_NO_REPACK: i32 = 3;
const EXIT_UNSUPPORTED: i32 = 4;
/// The sysroot handed to qemu (`-L`); the drivers are static, so it only matters for
/// programs that are not.
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
/// What to do when something is missing.
const HINT: &str = "oracle not built: run ci/oracle";

/// The aarch64 builds of ggml that `ci/oracle` makes. Their facts (the `-march` of
/// ggml-cpu, the qemu CPU model, the `oracle.env` keys of the two drivers, the lanes they
/// prove) are the `[[tier]]` entries of `targets/aarch64-unknown-linux-gnu.toml`, read
/// through `tiercheck_targets`; the variant only names its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArmTier {
    /// NEON + dotprod kernels, llamafile's `tinyBLAS_Q0_ARM`, repack layouts q4_0_4x4,
    /// q4_K_8x4, q6_K_8x4, q8_0_4x4.
    Dotprod,
    /// Adds the i8mm (`smmla`) kernels, two weight rows per `vec_dot` call for
    /// Q4_0/Q8_0/Q4_K/Q6_K; llamafile compiled out; repack layouts q4_0_4x8, q4_K_8x8,
    /// q6_K_8x8, q8_0_4x8.
    I8mm,
    /// ggml's `armv8.6_2` variant, run at a 128-bit SVE vector length (Neoverse V2/V3):
    /// SVE vec_dot and elementwise code, the i8mm build's repack layouts.
    Sve128,
    /// ggml's `armv8.6_1` variant, run at a 256-bit SVE vector length (Neoverse V1):
    /// Q4_0 repacked as q4_0_8x8 there.
    Sve256,
}

/// The aarch64 target table, read once.
fn arm_table() -> Result<&'static TargetTable, OracleError> {
    static TABLE: OnceLock<Result<TargetTable, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| tiercheck_targets::load_arch("aarch64").map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| OracleError::TargetTable(e.clone()))
}

impl ArmTier {
    /// Every build, in build order (the order of the table's `[[tier]]` entries).
    pub const ALL: [ArmTier; 4] =
        [ArmTier::Dotprod, ArmTier::I8mm, ArmTier::Sve128, ArmTier::Sve256];

    /// The name of the tier's `[[tier]]` entry, which is also its folder name under the
    /// cache (`arm-dotprod`, `arm-i8mm`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ArmTier::Dotprod => "arm-dotprod",
            ArmTier::I8mm => "arm-i8mm",
            ArmTier::Sve128 => "arm-sve128",
            ArmTier::Sve256 => "arm-sve256",
        }
    }

    /// The tier's `[[tier]]` entry of the aarch64 target table.
    pub fn facts(self) -> Result<&'static Tier, OracleError> {
        let table = arm_table()?;
        table.tier(self.name()).ok_or_else(|| {
            OracleError::TargetTable(format!(
                "{}: no [[tier]] named `{}`",
                table.path.display(),
                self.name()
            ))
        })
    }

    /// The `-march` ggml-cpu was compiled with (`GGML_CPU_ARM_ARCH`).
    pub fn march(self) -> Result<&'static str, OracleError> {
        Ok(&self.facts()?.march)
    }

    /// The `QEMU_CPU` model that has the extensions the tier uses (SVE only for the SVE
    /// tiers, at their vector length): the `qemu_cpu` of the entry's model.
    pub fn qemu_cpu(self) -> Result<&'static str, OracleError> {
        let facts = self.facts()?;
        Ok(arm_table()?.tier_qemu_cpu(facts))
    }

    /// The environment variable (and `oracle.env` key) naming the tier's driver program
    /// (`armdriver`).
    pub fn env_var(self) -> Result<&'static str, OracleError> {
        Ok(&self.facts()?.env)
    }

    /// The environment variable (and `oracle.env` key) naming the tier's llama.cpp driver
    /// (`llamataps`).
    pub fn llama_env_var(self) -> Result<&'static str, OracleError> {
        Ok(&self.facts()?.llama_env)
    }
}

impl fmt::Display for ArmTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The features a driver's ggml-cpu was compiled for (`armdriver info`, from
/// `ggml_cpu_has_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArmFeatures {
    /// Advanced SIMD.
    pub neon: bool,
    /// `sdot`/`udot` (FEAT_DotProd).
    pub dotprod: bool,
    /// `smmla` (FEAT_I8MM).
    pub i8mm: bool,
    /// SVE.
    pub sve: bool,
    /// The SVE vector length in bytes at run time (`ggml_cpu_get_sve_cnt`; 0 without SVE).
    pub sve_bytes: u32,
    /// Fused multiply-add.
    pub fma: bool,
    /// FP16 vector arithmetic.
    pub fp16_va: bool,
    /// llamafile's sgemm (`tinyBLAS`) compiled in.
    pub llamafile: bool,
}

/// One type's CPU traits in a driver's build (`armdriver traits <type id>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArmTraits {
    /// The type of the activation rows `vec_dot` takes.
    pub vec_dot_type: u32,
    /// Weight rows one `vec_dot` call handles (2 for the i8mm kernels).
    pub nrows: usize,
    /// ggml-cpu has a `from_float` for the type.
    pub from_float: bool,
    /// ggml-cpu has a `vec_dot` for the type.
    pub vec_dot: bool,
    /// `ggml_quantize_chunk` quantizes to the type without an importance matrix.
    pub quantize: bool,
}

/// One matmul of a [`ArmDriver::mulmat_batch`]: the arguments of [`ArmDriver::mulmat`].
#[derive(Clone, Copy, Debug)]
pub struct MulmatJob<'a> {
    /// Where the weight lives.
    pub mode: MulmatMode,
    /// The weight type (ggml type id).
    pub ty: u32,
    /// Values per row.
    pub k: usize,
    /// Weight rows (outputs per activation row).
    pub n: usize,
    /// Activation rows.
    pub m: usize,
    /// Threads of the CPU backend.
    pub threads: usize,
    /// `n` rows of `k` values of `ty`, plain block layout.
    pub weights: &'a [u8],
    /// `m * k` activation values.
    pub acts: &'a [f32],
}

/// How the driver program is started.
#[derive(Clone, Debug)]
enum Launcher {
    /// `qemu-aarch64 [-L sysroot] driver ...` with `QEMU_CPU` set.
    Qemu { qemu: PathBuf, sysroot: Option<PathBuf>, cpu: String },
    /// The driver itself (aarch64 host without qemu-aarch64).
    Native,
}

/// One aarch64 tier's `armdriver` program.
#[derive(Clone, Debug)]
pub struct ArmDriver {
    path: PathBuf,
    tier: ArmTier,
    launcher: Launcher,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
    traits: Arc<Mutex<HashMap<u32, ArmTraits>>>,
    /// Whether successful runs go through the run cache ([`ArmDriver::run`]).
    cached: bool,
}

/// Files of one driver run, in a temporary folder that is also the working folder (where
/// qemu would drop a core file).
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Result<Scratch, OracleError> {
        let dir = tempfile::Builder::new()
            .prefix("tiercheck-armdriver-")
            .tempdir()
            .map_err(|e| io("creating a temporary folder", e))?;
        Ok(Scratch { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, OracleError> {
        let p = self.path(name);
        std::fs::write(&p, bytes).map_err(|e| io(&format!("writing {}", p.display()), e))?;
        Ok(p)
    }

    fn read(&self, name: &str) -> Result<Vec<u8>, OracleError> {
        let p = self.path(name);
        std::fs::read(&p)
            .map_err(|e| io(&format!("reading the driver's output {}", p.display()), e))
    }
}

/// How one run ended.
struct RunOutput {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl ArmDriver {
    /// The driver `ci/oracle` built for `tier`: the program named by the tier's
    /// [`env_var`](ArmTier::env_var), from the environment or else from the `oracle.env`
    /// that `config` read.
    ///
    /// Fails with [`OracleError::Unavailable`] when the driver is not built, or when there
    /// is no way to run it (no `qemu-aarch64` on `PATH` and the host is not aarch64).
    pub fn for_tier(config: &OracleConfig, tier: ArmTier) -> Result<ArmDriver, OracleError> {
        let key = tier.env_var()?;
        let from_env = std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let path = match from_env {
            Some(p) => p,
            None => {
                let Some(file) = config.env_file.as_deref() else {
                    return Err(OracleError::Unavailable(format!(
                        "{HINT} ({key} not set, and no oracle.env was found in \
                         $TIERCHECK_CACHE or ~/.cache/tiercheck)"
                    )));
                };
                let text = std::fs::read_to_string(file)
                    .map_err(|e| io(&format!("reading {}", file.display()), e))?;
                let found = parse_env_file(&text)
                    .into_iter()
                    .rev()
                    .find(|(k, v)| k == key && !v.is_empty())
                    .map(|(_, v)| PathBuf::from(v));
                found.ok_or_else(|| {
                    OracleError::Unavailable(format!(
                        "{HINT} ({key} not set, and {} does not name it)",
                        file.display()
                    ))
                })?
            }
        };
        if !path.is_file() {
            return Err(OracleError::Unavailable(format!(
                "{HINT} (no armdriver for tier {tier} at {})",
                path.display()
            )));
        }
        ArmDriver::new(path, tier)
    }

    /// The driver program at `path`, built for `tier`, run on the tier's qemu CPU model.
    pub fn new(path: impl Into<PathBuf>, tier: ArmTier) -> Result<ArmDriver, OracleError> {
        let launcher = match find_in_path("qemu-aarch64") {
            Some(qemu) => Launcher::Qemu {
                qemu,
                sysroot: Some(PathBuf::from(SYSROOT)).filter(|p| p.is_dir()),
                cpu: tier.qemu_cpu()?.to_string(),
            },
            None if cfg!(target_arch = "aarch64") => Launcher::Native,
            None => {
                return Err(OracleError::Unavailable(format!(
                    "{HINT} (qemu-aarch64 is not on PATH; ci/oracle installs qemu-user)"
                )))
            }
        };
        Ok(ArmDriver {
            path: path.into(),
            tier,
            launcher,
            env: Vec::new(),
            timeout: Duration::from_secs(600),
            traits: Arc::default(),
            cached: true,
        })
    }

    /// The driver program.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The flavour the driver was built as.
    pub fn tier(&self) -> ArmTier {
        self.tier
    }

    /// The qemu CPU model the driver runs on, or `None` when it runs natively.
    pub fn qemu_cpu(&self) -> Option<&str> {
        match &self.launcher {
            Launcher::Qemu { cpu, .. } => Some(cpu),
            Launcher::Native => None,
        }
    }

    /// Runs the driver on another qemu CPU model (`QEMU_CPU`), e.g. one that lacks the
    /// tier's extensions as a negative control. `None` when the driver runs natively.
    pub fn with_qemu_cpu(mut self, model: &str) -> Option<ArmDriver> {
        match &mut self.launcher {
            Launcher::Qemu { cpu, .. } => *cpu = model.to_string(),
            Launcher::Native => return None,
        }
        Some(self)
    }

    /// Sets an environment variable for the driver's runs (by default every inherited
    /// `GGML_*` and `QEMU_*` variable is removed).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs the driver every time, never through the run cache (successful runs under
    /// qemu are otherwise kept under `<cache>/oracle-runs`, keyed by everything they read).
    pub fn without_cache(mut self) -> Self {
        self.cached = false;
        self
    }

    /// The longest one run may take before it is killed and reported as an error
    /// (default 600 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The features the driver's ggml-cpu was compiled for.
    pub fn info(&self) -> Result<ArmFeatures, OracleError> {
        let scratch = Scratch::new()?;
        let out = self.run_ok(&scratch, &["info".into()])?;
        let line = out.stdout.lines().next().unwrap_or("");
        let mut f = ArmFeatures::default();
        let mut seen = 0;
        for field in line.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else { continue };
            if key == "sve_cnt" {
                f.sve_bytes = value
                    .parse()
                    .map_err(|_| self.unexpected(&out, "a byte count after sve_cnt="))?;
                continue;
            }
            let on = value == "1";
            let slot = match key {
                "neon" => &mut f.neon,
                "dotprod" => &mut f.dotprod,
                "i8mm" => &mut f.i8mm,
                "sve" => &mut f.sve,
                "fma" => &mut f.fma,
                "fp16_va" => &mut f.fp16_va,
                "llamafile" => &mut f.llamafile,
                _ => continue,
            };
            *slot = on;
            seen += 1;
        }
        if seen != 7 {
            return Err(self.unexpected(&out, "an info line with 7 features"));
        }
        Ok(f)
    }

    /// The CPU traits of type `ty` (ggml type id) in the driver's build; asked once per type
    /// and remembered.
    pub fn traits(&self, ty: u32) -> Result<ArmTraits, OracleError> {
        GgmlType::from_id(ty).ok_or(OracleError::UnknownType(ty))?;
        if let Some(t) = self.traits.lock().unwrap_or_else(|e| e.into_inner()).get(&ty) {
            return Ok(*t);
        }
        let scratch = Scratch::new()?;
        let out = self.run_ok(&scratch, &["traits".into(), ty.to_string()])?;
        let line = out.stdout.lines().next().unwrap_or("");
        let fields: HashMap<&str, &str> =
            line.split_whitespace().filter_map(|f| f.split_once('=')).collect();
        let num = |key: &str| fields.get(key).and_then(|v| v.parse::<u64>().ok());
        let flag = |key: &str| match fields.get(key) {
            Some(&"1") => Some(true),
            Some(&"0") => Some(false),
            _ => None,
        };
        let parsed = (|| {
            Some(ArmTraits {
                vec_dot_type: u32::try_from(num("vec_dot_type")?).ok()?,
                nrows: usize::try_from(num("nrows")?).ok()?,
                from_float: flag("from_float")?,
                vec_dot: flag("vec_dot")?,
                quantize: flag("quantize")?,
            })
        })();
        let t = parsed.ok_or_else(|| self.unexpected(&out, "a traits line"))?;
        self.traits.lock().unwrap_or_else(|e| e.into_inner()).insert(ty, t);
        Ok(t)
    }

    /// `ggml_get_type_traits_cpu(ty)->from_float` on every row of `x`: `x` holds whole rows
    /// of `k` values (any number of them, `k` a whole number of `ty` blocks); the result is
    /// those rows quantized, one after the other. For the activation types (Q8_0, Q8_1,
    /// Q8_K) this is the activation quantizer the tier's matmul runs.
    pub fn from_float(&self, ty: u32, k: usize, x: &[f32]) -> Result<Vec<u8>, OracleError> {
        let gty = GgmlType::from_id(ty).ok_or(OracleError::UnknownType(ty))?;
        let row = row_bytes(gty, k)?;
        if !x.len().is_multiple_of(k) {
            return Err(invalid(format!(
                "from_float: {} values are not a whole number of rows of {k}",
                x.len()
            )));
        }
        let rows = x.len() / k;
        let want = row.checked_mul(rows).ok_or_else(|| invalid("output size overflows"))?;
        if !self.traits(ty)?.from_float {
            return Err(OracleError::Unsupported { ty: gty.name(), what: "from_float".into() });
        }
        let scratch = Scratch::new()?;
        let input = scratch.write("in.f32", &f32_bytes(x))?;
        let output = scratch.path("out.bin");
        self.run_ok(
            &scratch,
            &[
                "from_float".into(),
                ty.to_string(),
                k.to_string(),
                path_arg(&input)?,
                path_arg(&output)?,
            ],
        )?;
        let out = scratch.read("out.bin")?;
        check_len(&out, want)?;
        Ok(out)
    }

    /// `ggml_quantize_chunk(ty, x, out, 0, nrows, k, NULL)`: ggml-base's reference weight
    /// quantizer as the aarch64 build compiled it. `x` holds `nrows * k` values.
    pub fn quantize(
        &self,
        ty: u32,
        nrows: usize,
        k: usize,
        x: &[f32],
    ) -> Result<Vec<u8>, OracleError> {
        let gty = GgmlType::from_id(ty).ok_or(OracleError::UnknownType(ty))?;
        let row = row_bytes(gty, k)?;
        let n = nrows.checked_mul(k).ok_or_else(|| invalid("input size overflows"))?;
        if x.len() != n {
            return Err(invalid(format!("quantize: {} values for {nrows} rows of {k}", x.len())));
        }
        let want = row.checked_mul(nrows).ok_or_else(|| invalid("output size overflows"))?;
        if !self.traits(ty)?.quantize {
            return Err(OracleError::Unsupported {
                ty: gty.name(),
                what: "ggml_quantize_chunk without an importance matrix".into(),
            });
        }
        let scratch = Scratch::new()?;
        let input = scratch.write("in.f32", &f32_bytes(x))?;
        let output = scratch.path("out.bin");
        self.run_ok(
            &scratch,
            &[
                "quantize".into(),
                ty.to_string(),
                nrows.to_string(),
                k.to_string(),
                path_arg(&input)?,
                path_arg(&output)?,
            ],
        )?;
        let out = scratch.read("out.bin")?;
        check_len(&out, want)?;
        Ok(out)
    }

    /// The tier's `vec_dot` for weight type `ty` over many cases at once.
    ///
    /// Case `c` takes `nrc` weight rows of `k` values of `ty` (`x`, contiguous, case after
    /// case) and `nrc` activation rows of `k` values of the type's `vec_dot_type` (`y`, the
    /// same way); the number of cases comes from `x.len()`.
    /// - `nrc = 1`: one value per case, `vec_dot(k, &s, 0, x, 0, y, 0, 1)`.
    /// - `nrc = 2` (types whose [`ArmTraits::nrows`] is 2: the i8mm build's Q4_0, Q8_0, Q4_K,
    ///   Q6_K): four values per case, the 2x2 tile `vec_dot(k, s, 2, x, bx, y, by, 2)` with
    ///   `bx`/`by` the weight/activation row sizes, as ggml writes it:
    ///   `s[2 * j + i]` = weight row `i` times activation row `j`, i.e.
    ///   `[x0.y0, x1.y0, x0.y1, x1.y1]` (the layout of a 2x2 block of a matmul output,
    ///   activation rows outer).
    pub fn vec_dot(
        &self,
        ty: u32,
        k: usize,
        nrc: usize,
        x: &[u8],
        y: &[u8],
    ) -> Result<Vec<f32>, OracleError> {
        let gty = GgmlType::from_id(ty).ok_or(OracleError::UnknownType(ty))?;
        if nrc != 1 && nrc != 2 {
            return Err(invalid(format!("nrc must be 1 or 2, not {nrc}")));
        }
        let bx = row_bytes(gty, k)?;
        let t = self.traits(ty)?;
        if !t.vec_dot {
            return Err(OracleError::Unsupported { ty: gty.name(), what: "vec_dot".into() });
        }
        if nrc > t.nrows {
            return Err(OracleError::Unsupported {
                ty: gty.name(),
                what: format!(
                    "vec_dot with nrc = {nrc} in {} (its kernel does {} row(s) per call)",
                    self.tier, t.nrows
                ),
            });
        }
        let vdt =
            GgmlType::from_id(t.vec_dot_type).ok_or(OracleError::UnknownType(t.vec_dot_type))?;
        let by = row_bytes(vdt, k)?;
        if !x.len().is_multiple_of(nrc * bx) {
            return Err(invalid(format!(
                "vec_dot: {} weight bytes are not a whole number of cases of {nrc} {} rows of \
                 {bx} bytes",
                x.len(),
                gty.name()
            )));
        }
        let cases = x.len() / (nrc * bx);
        if y.len() != cases * nrc * by {
            return Err(invalid(format!(
                "vec_dot: {} activation bytes, expected {} ({cases} cases of {nrc} {} rows of \
                 {by} bytes)",
                y.len(),
                cases * nrc * by,
                vdt.name()
            )));
        }
        let scratch = Scratch::new()?;
        let (xp, yp) = (scratch.write("x.bin", x)?, scratch.write("y.bin", y)?);
        let op = scratch.path("out.f32");
        self.run_ok(
            &scratch,
            &[
                "vec_dot".into(),
                ty.to_string(),
                k.to_string(),
                nrc.to_string(),
                path_arg(&xp)?,
                path_arg(&yp)?,
                path_arg(&op)?,
            ],
        )?;
        let out = scratch.read("out.f32")?;
        check_len(&out, cases * nrc * nrc * 4)?;
        Ok(bytes_f32(&out))
    }

    /// One `ggml_mul_mat` node on the tier's CPU backend: `Y = W x` for `n` weight rows of
    /// `k` values of type `ty` (`weights`, plain block layout) and `m` activation rows
    /// (`acts`), on `threads` threads, with the weight placed as `mode` says; the same
    /// request and result as [`MulmatDriver::run`](super::MulmatDriver::run) on x86.
    ///
    /// In [`MulmatMode::Repack`] a type without a repack layout in this build (for `n`
    /// rows) gives [`OracleError::NoRepackLayout`].
    #[allow(clippy::too_many_arguments)]
    pub fn mulmat(
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
        let job = MulmatJob { mode, ty, k, n, m, threads, weights, acts };
        check_job(&job)?;
        let scratch = Scratch::new()?;
        let args = write_job(&scratch, &job, 0)?;
        let out = self.run(&scratch, &args)?;
        if !out.status.success() {
            return Err(self.failure(&out, Some(&job)));
        }
        let (repacked, buft, layout) = parse_report(&out.stdout)
            .ok_or_else(|| self.unexpected(&out, "a repacked=... report line"))?;
        let values = read_job_output(&scratch, &job, 0)?;
        Ok(MulmatResult { out: values, repacked, buft, layout })
    }

    /// Runs every job of `jobs` in ONE driver process (its `batch` mode), in order. The
    /// outer error is for the process (it could not start, died, or answered garbage);
    /// each job has its own result, as [`ArmDriver::mulmat`] would give it.
    pub fn mulmat_batch(
        &self,
        jobs: &[MulmatJob<'_>],
    ) -> Result<Vec<Result<MulmatResult, OracleError>>, OracleError> {
        let mut results: Vec<Option<Result<MulmatResult, OracleError>>> =
            jobs.iter().map(|j| check_job(j).err().map(Err)).collect();
        let scratch = Scratch::new()?;
        let mut requests = String::new();
        let mut line_of = Vec::new(); // request line -> job index
        for (i, job) in jobs.iter().enumerate() {
            if results[i].is_some() {
                continue;
            }
            let args = write_job(&scratch, job, i)?;
            requests.push_str(&args.join(" "));
            requests.push('\n');
            line_of.push(i);
        }
        if !line_of.is_empty() {
            let req = scratch.write("requests.txt", requests.as_bytes())?;
            let out = self.run_ok(&scratch, &["batch".into(), path_arg(&req)?])?;
            let mut answered = 0;
            for line in out.stdout.lines() {
                let mut parts = line.splitn(3, ' ');
                let (Some(no), Some(rc), text) = (parts.next(), parts.next(), parts.next()) else {
                    return Err(self.unexpected(&out, "batch answer lines"));
                };
                let (Ok(no), Ok(rc)) = (no.parse::<usize>(), rc.parse::<i32>()) else {
                    return Err(self.unexpected(&out, "batch answer lines"));
                };
                let Some(&i) = no.checked_sub(1).and_then(|l| line_of.get(l)) else {
                    return Err(self.unexpected(&out, "answers to the lines sent"));
                };
                let job = &jobs[i];
                let text = text.unwrap_or("").trim().to_string();
                results[i] = Some(if rc == 0 {
                    match parse_report(&text) {
                        Some((repacked, buft, layout)) => read_job_output(&scratch, job, i)
                            .map(|values| MulmatResult { out: values, repacked, buft, layout }),
                        None => Err(self.unexpected(&out, "a repacked=... report")),
                    }
                } else {
                    Err(self.job_failure(rc, text, job, &out.stderr))
                });
                answered += 1;
            }
            if answered != line_of.len() {
                return Err(self.unexpected(&out, "one answer per request"));
            }
        }
        Ok(results.into_iter().map(|r| r.expect("every job answered")).collect())
    }

    /// [`ArmDriver::run_fresh`] through the run cache: under qemu, a successful run is
    /// kept under `<cache>/oracle-runs/<key>/` (its stdout, stderr and the files it
    /// wrote into `scratch`), the key the sha256 of everything the run reads: the
    /// driver's bytes, qemu-aarch64's bytes, the CPU model, the environment set for it,
    /// the arguments (the scratch folder's path replaced by a fixed name) and every file
    /// in `scratch` with its bytes. A later identical run restores those files and
    /// output instead of starting qemu. Runs that fail, and native runs (an aarch64
    /// host, the fake drivers of the unit tests), are never kept.
    /// `TIERCHECK_ORACLE_CACHE=off` turns the cache off; the premise (a run is a
    /// function of its inputs) is checked by `oracle/arm/driver_cache_recomputes_bitwise`
    /// in `oracle_arm.rs`.
    fn run(&self, scratch: &Scratch, args: &[String]) -> Result<RunOutput, OracleError> {
        let Some(key) = self.cache_key(scratch, args) else {
            return self.run_fresh(scratch, args);
        };
        let dir = run_cache_dir().map(|d| d.join(&key));
        if let Some(dir) = dir.as_deref().filter(|d| d.join("done").is_file()) {
            if let Some(out) = restore_run(dir, scratch) {
                return Ok(out);
            }
        }
        let before = scratch_files(scratch.dir.path());
        let out = self.run_fresh(scratch, args)?;
        if let (Some(dir), Some(before), true) = (dir, before, out.status.success()) {
            if let Err(e) = store_run(&dir, scratch, &before, args, &out) {
                eprintln!("oracle run cache: cannot store {}: {e}", dir.display());
            }
        }
        Ok(out)
    }

    /// The run cache key of `args` in `scratch` (see [`ArmDriver::run`]); `None` when the
    /// run is not cached.
    fn cache_key(&self, scratch: &Scratch, args: &[String]) -> Option<String> {
        if std::env::var("TIERCHECK_ORACLE_CACHE").is_ok_and(|v| v == "off") {
            return None;
        }
        self.run_key(scratch, args)
    }

    /// [`ArmDriver::cache_key`] whatever `TIERCHECK_ORACLE_CACHE` says.
    fn run_key(&self, scratch: &Scratch, args: &[String]) -> Option<String> {
        use sha2::{Digest, Sha256};
        if !self.cached {
            return None;
        }
        let Launcher::Qemu { qemu, sysroot, cpu } = &self.launcher else { return None };
        let mut h = Sha256::new();
        h.update(b"tiercheck armdriver run v1\n");
        h.update(file_digest(&self.path)?.as_bytes());
        h.update(file_digest(qemu)?.as_bytes());
        h.update(format!("\nsysroot {sysroot:?}\ncpu {cpu}\n").as_bytes());
        for (k, v) in &self.env {
            h.update(format!("env {k:?}={v:?}\n").as_bytes());
        }
        let root = scratch.dir.path().to_string_lossy().into_owned();
        for a in args {
            h.update(format!("arg {}\n", a.replace(&root, "<scratch>")).as_bytes());
        }
        for (name, _) in scratch_files(scratch.dir.path())? {
            // An earlier run's own output files are not an input.
            if name == "stdout.txt" || name == "stderr.txt" {
                continue;
            }
            // A request file names other files of the folder by their paths.
            let bytes = std::fs::read(scratch.path(&name)).ok()?;
            let bytes = replace_bytes(&bytes, root.as_bytes(), b"<scratch>");
            let digest: String =
                Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
            h.update(format!("file {name} {digest}\n").as_bytes());
        }
        Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Starts the driver with `args` in `scratch`, waits (up to the timeout) and collects
    /// its output.
    fn run_fresh(&self, scratch: &Scratch, args: &[String]) -> Result<RunOutput, OracleError> {
        let mut cmd = match &self.launcher {
            Launcher::Qemu { qemu, sysroot, cpu } => {
                let mut c = Command::new(qemu);
                if let Some(root) = sysroot {
                    c.arg("-L").arg(root);
                }
                c.arg(&self.path);
                c.env("QEMU_CPU", cpu);
                c
            }
            Launcher::Native => Command::new(&self.path),
        };
        cmd.args(args);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("GGML_") || (k.starts_with("QEMU_") && k != "QEMU_CPU") {
                cmd.env_remove(&key);
            }
        }
        if matches!(self.launcher, Launcher::Native) {
            cmd.env_remove("QEMU_CPU");
        }
        // An abort should not try to attach a debugger for a backtrace.
        cmd.env("GGML_NO_BACKTRACE", "1");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let (out_path, err_path) = (scratch.path("stdout.txt"), scratch.path("stderr.txt"));
        let stdout = File::create(&out_path).map_err(|e| io("creating the stdout file", e))?;
        let stderr = File::create(&err_path).map_err(|e| io("creating the stderr file", e))?;
        cmd.current_dir(scratch.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let mut child = cmd.spawn().map_err(|e| io(&format!("starting {}", self.describe()), e))?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        let status = loop {
            if let Some(status) =
                child.try_wait().map_err(|e| io(&format!("waiting for {}", self.describe()), e))?
            {
                break status;
            }
            if start.elapsed() >= self.timeout {
                // Kill our own child only; its exit is collected right after.
                let _ = child.kill();
                let _ = child.wait();
                let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
                return Err(OracleError::Driver {
                    driver: self.path.clone(),
                    status: format!(
                        "killed after the {} s timeout ({})",
                        self.timeout.as_secs_f64(),
                        self.describe()
                    ),
                    stderr: stderr.trim().to_string(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        };
        let read = |p: &Path| std::fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned());
        Ok(RunOutput {
            status,
            stdout: read(&out_path).map_err(|e| io("reading the driver's stdout", e))?,
            stderr: read(&err_path).map_err(|e| io("reading the driver's stderr", e))?,
        })
    }

    /// [`ArmDriver::run`], with any unsuccessful end turned into an error.
    fn run_ok(&self, scratch: &Scratch, args: &[String]) -> Result<RunOutput, OracleError> {
        let out = self.run(scratch, args)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(self.failure(&out, None))
        }
    }

    /// The error for a run that did not succeed.
    fn failure(&self, out: &RunOutput, job: Option<&MulmatJob<'_>>) -> OracleError {
        use std::os::unix::process::ExitStatusExt;
        let stderr = out.stderr.trim().to_string();
        match (out.status.code(), out.status.signal()) {
            (Some(code), _) => match job {
                Some(job) => self.job_failure(code, stderr, job, ""),
                None => self.code_failure(code, stderr, None),
            },
            (None, Some(sig)) => OracleError::Driver {
                driver: self.path.clone(),
                status: format!("killed by signal {sig}{} ({})", signal_name(sig), self.describe()),
                stderr,
            },
            (None, None) => OracleError::Driver {
                driver: self.path.clone(),
                status: format!("{} ({})", out.status, self.describe()),
                stderr,
            },
        }
    }

    /// The error for a mulmat request that exited with `code`.
    fn job_failure(
        &self,
        code: i32,
        message: String,
        job: &MulmatJob<'_>,
        stderr: &str,
    ) -> OracleError {
        let name = GgmlType::from_id(job.ty).map_or("?", |t| t.name());
        if code == EXIT_NO_REPACK && job.mode == MulmatMode::Repack {
            return OracleError::NoRepackLayout { ty: name, n: job.n, detail: message };
        }
        let mut msg = message;
        if !stderr.trim().is_empty() {
            msg = format!("{msg}; stderr: {}", stderr.trim());
        }
        self.code_failure(code, msg, Some(name))
    }

    fn code_failure(&self, code: i32, stderr: String, ty: Option<&'static str>) -> OracleError {
        if code == EXIT_UNSUPPORTED {
            if let Some(ty) = ty {
                return OracleError::Unsupported { ty, what: stderr };
            }
        }
        OracleError::Driver {
            driver: self.path.clone(),
            status: format!("exit code {code} ({})", self.describe()),
            stderr,
        }
    }

    /// The error for output the driver should not have produced.
    fn unexpected(&self, out: &RunOutput, wanted: &str) -> OracleError {
        OracleError::Driver {
            driver: self.path.clone(),
            status: format!("unexpected output, wanted {wanted} ({})", self.describe()),
            stderr: format!("stdout {:?}, stderr {:?}", out.stdout.trim(), out.stderr.trim()),
        }
    }

    /// How the driver runs, for messages.
    fn describe(&self) -> String {
        match &self.launcher {
            Launcher::Qemu { qemu, cpu, .. } => {
                format!("tier {} under {} with QEMU_CPU={cpu}", self.tier, qemu.display())
            }
            Launcher::Native => format!("tier {} run natively", self.tier),
        }
    }
}

/// Checks one matmul request's sizes (the same rules as the x86 driver).
fn check_job(job: &MulmatJob<'_>) -> Result<(), OracleError> {
    let gty = GgmlType::from_id(job.ty).ok_or(OracleError::UnknownType(job.ty))?;
    for (what, v) in [("k", job.k), ("n", job.n), ("m", job.m), ("threads", job.threads)] {
        if v == 0 {
            return Err(invalid(format!("{what} must be at least 1")));
        }
    }
    let row = row_bytes(gty, job.k)?;
    let want_w = row.checked_mul(job.n).ok_or_else(|| invalid("weight size overflows"))?;
    if job.weights.len() != want_w {
        return Err(invalid(format!(
            "weights: {} bytes, expected {want_w} ({} rows of {} {} values)",
            job.weights.len(),
            job.n,
            job.k,
            gty.name()
        )));
    }
    let want_x = job.m.checked_mul(job.k).ok_or_else(|| invalid("activation size overflows"))?;
    if job.acts.len() != want_x {
        return Err(invalid(format!(
            "activations: {} values, expected {want_x} ({} rows of {})",
            job.acts.len(),
            job.m,
            job.k
        )));
    }
    job.m
        .checked_mul(job.n)
        .and_then(|v| v.checked_mul(4))
        .ok_or_else(|| invalid("output size overflows"))?;
    Ok(())
}

/// Writes job `i`'s inputs and returns its driver arguments.
fn write_job(scratch: &Scratch, job: &MulmatJob<'_>, i: usize) -> Result<Vec<String>, OracleError> {
    let w = scratch.write(&format!("w{i}.bin"), job.weights)?;
    let x = scratch.write(&format!("x{i}.f32"), &f32_bytes(job.acts))?;
    let o = scratch.path(&format!("out{i}.f32"));
    let mut args = vec!["mulmat".to_string(), job.mode.name().to_string()];
    for v in [job.ty as usize, job.k, job.n, job.m, job.threads] {
        args.push(v.to_string());
    }
    for p in [&w, &x, &o] {
        let s = path_arg(p)?;
        if s.contains(char::is_whitespace) {
            return Err(invalid(format!("temporary path {s:?} has blanks")));
        }
        args.push(s);
    }
    Ok(args)
}

fn read_job_output(
    scratch: &Scratch,
    job: &MulmatJob<'_>,
    i: usize,
) -> Result<Vec<f32>, OracleError> {
    let raw = scratch.read(&format!("out{i}.f32"))?;
    check_len(&raw, job.m * job.n * 4)?;
    Ok(bytes_f32(&raw))
}

/// Bytes of one row of `k` values of `ty`, or an error when `k` is 0 or not a whole number
/// of blocks.
/// `<cache>/oracle-runs` (`$TIERCHECK_CACHE`, else `~/.cache/tiercheck`).
fn run_cache_dir() -> Option<PathBuf> {
    let get = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = get(super::config::CACHE_ENV)
        .or_else(|| get("HOME").map(|h| h.join(".cache/tiercheck")))?;
    Some(cache.join("oracle-runs"))
}

/// sha256 of a file's bytes (lowercase hex), computed once per path and process (the
/// drivers and qemu do not change while a test runs).
fn file_digest(path: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    static DONE: std::sync::OnceLock<Mutex<HashMap<PathBuf, String>>> = std::sync::OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    if let Some(d) = done.lock().ok()?.get(path) {
        return Some(d.clone());
    }
    let bytes = std::fs::read(path).ok()?;
    let d: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    done.lock().ok()?.insert(path.to_owned(), d.clone());
    Some(d)
}

/// `bytes` with every occurrence of `from` replaced by `to`.
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if !from.is_empty() && bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The regular files directly in `dir` with the sha256 of their bytes, sorted by name.
fn scratch_files(dir: &Path) -> Option<Vec<(String, String)>> {
    use sha2::{Digest, Sha256};
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).ok()? {
        let e = e.ok()?;
        if !e.file_type().ok()?.is_file() {
            return None; // a folder or link in the scratch folder: not a run we key
        }
        let name = e.file_name().into_string().ok()?;
        let bytes = std::fs::read(e.path()).ok()?;
        files.push((name, Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()));
    }
    files.sort();
    Some(files)
}

/// Keeps a successful run: the files it created or changed in `scratch` (`before`
/// lists them as they were), its stdout and stderr (and its arguments, for a reader of
/// the cache), written into a temporary folder
/// beside `dir` and renamed to `dir` whole, so a reader sees a complete entry or none.
fn store_run(
    dir: &Path,
    scratch: &Scratch,
    before: &[(String, String)],
    args: &[String],
    out: &RunOutput,
) -> std::io::Result<()> {
    let parent = dir.parent().expect("a cache entry has a parent");
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new().prefix(".partial-").tempdir_in(parent)?;
    let files = tmp.path().join("files");
    std::fs::create_dir(&files)?;
    let after = scratch_files(scratch.dir.path())
        .ok_or_else(|| std::io::Error::other("the scratch folder cannot be listed"))?;
    for (name, digest) in &after {
        if ["stdout.txt", "stderr.txt"].contains(&name.as_str()) {
            continue;
        }
        if before.iter().any(|(n, d)| n == name && d == digest) {
            continue;
        }
        std::fs::copy(scratch.path(name), files.join(name))?;
    }
    // What ran, for a reader of the cache (not part of what is restored).
    std::fs::write(tmp.path().join("args"), args.join("\n"))?;
    std::fs::write(tmp.path().join("stdout"), &out.stdout)?;
    std::fs::write(tmp.path().join("stderr"), &out.stderr)?;
    std::fs::write(tmp.path().join("done"), b"")?;
    let tmp = tmp.keep();
    if let Err(e) = std::fs::rename(&tmp, dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        if !dir.join("done").is_file() {
            return Err(e);
        }
    }
    Ok(())
}

/// A kept run's output, with its files copied back into `scratch`; `None` when the
/// entry cannot be read whole (the run then happens again).
fn restore_run(dir: &Path, scratch: &Scratch) -> Option<RunOutput> {
    use std::os::unix::process::ExitStatusExt;
    for e in std::fs::read_dir(dir.join("files")).ok()? {
        let e = e.ok()?;
        std::fs::copy(e.path(), scratch.path(&e.file_name().into_string().ok()?)).ok()?;
    }
    Some(RunOutput {
        status: ExitStatus::from_raw(0),
        stdout: std::fs::read_to_string(dir.join("stdout")).ok()?,
        stderr: std::fs::read_to_string(dir.join("stderr")).ok()?,
    })
}

fn row_bytes(ty: GgmlType, k: usize) -> Result<usize, OracleError> {
    if k == 0 {
        return Err(invalid("k must be at least 1"));
    }
    ty.row_bytes(k).ok_or_else(|| {
        invalid(format!(
            "k = {k} is not a whole number of {}-value {} blocks",
            ty.block_size(),
            ty.name()
        ))
    })
}

fn check_len(out: &[u8], want: usize) -> Result<(), OracleError> {
    if out.len() == want {
        Ok(())
    } else {
        Err(OracleError::SizeMismatch { expected: want, got: out.len() })
    }
}

fn path_arg(p: &Path) -> Result<String, OracleError> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| invalid(format!("temporary path {} is not UTF-8", p.display())))
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The first executable file called `name` in one of `PATH`'s folders.
fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| {
        p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => " (SIGILL: an instruction this CPU model lacks)",
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        _ => "",
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

    fn fake() -> ArmDriver {
        ArmDriver {
            path: PathBuf::from("/nonexistent/armdriver"),
            tier: ArmTier::Dotprod,
            launcher: Launcher::Native,
            env: Vec::new(),
            timeout: Duration::from_secs(1),
            traits: Arc::default(),
            cached: true,
        }
    }

    /// A kept run gives back what the run wrote, and its key ignores the scratch
    /// folder's own path (in the arguments and in the request files that name it) but
    /// not a byte of the inputs; a run that fails is not kept.
    #[test]
    fn the_run_cache_keys_inputs_and_restores_outputs() {
        let cache = tempfile::tempdir().unwrap();
        let qemu_dir = tempfile::tempdir().unwrap();
        // A stand-in for qemu-aarch64 (only its bytes are read for the key).
        let qemu = qemu_dir.path().join("qemu-aarch64");
        std::fs::write(&qemu, "not qemu").unwrap();
        let mut d = fake();
        d.path = qemu.clone();
        d.launcher = Launcher::Qemu { qemu, sysroot: None, cpu: "max".into() };
        let key_for = |req: &[u8]| {
            let s = Scratch::new().unwrap();
            let root = s.dir.path().display().to_string();
            s.write("requests.txt", &[root.as_bytes(), req].concat()).unwrap();
            let arg = s.path("requests.txt").display().to_string();
            (d.run_key(&s, &["batch".into(), arg]).unwrap(), s)
        };
        let (k1, s1) = key_for(b"/w0.bin 1 2 3");
        let (k2, _s2) = key_for(b"/w0.bin 1 2 3");
        let (k3, _s3) = key_for(b"/w0.bin 1 2 4");
        assert_eq!(k1, k2, "the scratch path is part of the key");
        assert_ne!(k1, k3, "an input byte is not part of the key");
        // Store a run that wrote out0.f32, and restore it into a fresh folder.
        let before = scratch_files(s1.dir.path()).unwrap();
        s1.write("out0.f32", &[1, 2, 3, 4]).unwrap();
        s1.write("stdout.txt", b"ok").unwrap();
        let out = RunOutput {
            status: std::os::unix::process::ExitStatusExt::from_raw(0),
            stdout: "1 0 repacked=0".into(),
            stderr: String::new(),
        };
        let entry = cache.path().join(&k1);
        store_run(&entry, &s1, &before, &["batch".into()], &out).unwrap();
        let fresh = Scratch::new().unwrap();
        let back = restore_run(&entry, &fresh).unwrap();
        assert_eq!(back.stdout, out.stdout);
        assert!(back.status.success());
        assert_eq!(std::fs::read(fresh.path("out0.f32")).unwrap(), [1, 2, 3, 4]);
        // The request (an input, unchanged) and the run's stdout file are not kept.
        assert!(!entry.join("files/requests.txt").exists());
        assert!(!entry.join("files/stdout.txt").exists());
        // Without qemu (a native run) or with the cache bypassed there is no key.
        assert!(fake().run_key(&s1, &[]).is_none());
        assert!(d.clone().without_cache().run_key(&s1, &[]).is_none());
    }

    /// A driver that is a shell script (run natively).
    fn script(dir: &Path, body: &str) -> ArmDriver {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("armdriver");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        ArmDriver { path, ..fake() }
    }

    #[test]
    fn a_hung_driver_is_killed_at_the_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let d = script(tmp.path(), "exec sleep 30").with_timeout(Duration::from_millis(300));
        let t0 = Instant::now();
        let e = d.info().unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(
            matches!(&e, OracleError::Driver { status, .. } if status.contains("timeout")),
            "{e}"
        );
    }

    #[test]
    fn signals_and_exit_codes_become_errors_with_stderr() {
        let tmp = tempfile::tempdir().unwrap();
        let e = script(tmp.path(), "echo oops >&2; kill -ILL $$").info().unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("signal 4") && msg.contains("SIGILL") && msg.contains("oops"),
            "{msg}"
        );
        assert!(msg.contains("armdriver"), "{msg}");
        let e = script(tmp.path(), "echo bad request >&2; exit 2").info().unwrap_err();
        assert!(e.to_string().contains("exit code 2") && e.to_string().contains("bad request"));
        let e = script(tmp.path(), "echo garbage").info().unwrap_err();
        assert!(e.to_string().contains("unexpected output"), "{e}");
        let d =
            script(tmp.path(), "echo neon=1 dotprod=1 i8mm=0 sve=0 fma=1 fp16_va=0 llamafile=1");
        let f = d.info().unwrap();
        assert!(f.neon && f.dotprod && !f.i8mm && f.llamafile);
    }

    /// Every variant names an entry of the table, and every entry has a variant, in the
    /// table's order; the facts come from the entry.
    #[test]
    fn tiers_are_the_tables_builds() {
        let table = arm_table().unwrap();
        let names: Vec<&str> = table.tiers.iter().map(|t| t.name.as_str()).collect();
        let ours: Vec<&str> = ArmTier::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(ours, names, "ArmTier::ALL and the [[tier]] entries of {:?}", table.path);
        assert_eq!(ArmTier::Dotprod.name(), "arm-dotprod");
        assert_eq!(ArmTier::I8mm.qemu_cpu().unwrap(), "max,sve=off");
        assert_eq!(ArmTier::I8mm.env_var().unwrap(), "TIERCHECK_ORACLE_ARM_I8MM");
        assert_eq!(ArmTier::Sve128.llama_env_var().unwrap(), "TIERCHECK_ORACLE_LLAMA_ARM_SVE128");
        assert_eq!(ArmTier::Dotprod.march().unwrap(), "armv8.2-a+dotprod");
        assert_eq!(ArmTier::Sve256.facts().unwrap().info_value("sve_cnt"), Some(32));
    }

    #[test]
    fn sizes_are_checked_before_running() {
        let d = fake();
        let (q4k, q8k) = (GgmlType::Q4_K.id(), GgmlType::Q8_K.id());
        let bad = |r: Result<Vec<u8>, OracleError>| matches!(r, Err(OracleError::InvalidInput(_)));
        assert!(bad(d.from_float(q8k, 0, &[])));
        assert!(bad(d.from_float(q8k, 100, &[0.0; 100])));
        assert!(bad(d.from_float(q8k, 256, &[0.0; 300])));
        assert!(bad(d.quantize(q4k, 2, 256, &[0.0; 256])));
        assert!(bad(d.quantize(q4k, 1, 128, &[0.0; 128])));
        assert!(matches!(d.from_float(4, 32, &[0.0; 32]), Err(OracleError::UnknownType(4))));
        assert!(matches!(
            d.vec_dot(q4k, 256, 3, &[0; 144], &[0; 292]),
            Err(OracleError::InvalidInput(_))
        ));

        let w = vec![0u8; 144 * 8];
        let x = vec![0.0f32; 256 * 2];
        let job = |w: &'static [u8], x: &'static [f32], k, n, m, threads| MulmatJob {
            mode: MulmatMode::Plain,
            ty: q4k,
            k,
            n,
            m,
            threads,
            weights: w,
            acts: x,
        };
        let (w, x): (&'static [u8], &'static [f32]) = (w.leak(), x.leak());
        for j in [
            job(&w[1..], x, 256, 8, 2, 1),
            job(w, &x[1..], 256, 8, 2, 1),
            job(w, x, 128, 8, 2, 1),
            job(w, x, 256, 8, 2, 0),
            job(&[], x, 256, 0, 2, 1),
        ] {
            assert!(matches!(check_job(&j), Err(OracleError::InvalidInput(_))), "{j:?}");
        }
        assert!(check_job(&job(w, x, 256, 8, 2, 1)).is_ok());
        // Valid sizes reach the (missing) program.
        assert!(matches!(
            d.mulmat(MulmatMode::Plain, q4k, 256, 8, 2, 1, w, x),
            Err(OracleError::Io { .. })
        ));
    }
}
