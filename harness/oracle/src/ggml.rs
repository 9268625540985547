//! Safe bindings to one tier's ggml shared libraries (`libggml-base.so`, `libggml-cpu.so`).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use sha2::{Digest, Sha256};
use tiercheck_core::GgmlType;

use super::OracleError;

type Result<T> = std::result::Result<T, OracleError>;

/// `ggml_from_float_t`: `void (*)(const float * x, void * y, int64_t k)`.
type FromFloatFn = unsafe extern "C" fn(x: *const f32, y: *mut c_void, k: i64);
/// `ggml_to_float_t`: `void (*)(const void * x, float * y, int64_t k)`.
type ToFloatFn = unsafe extern "C" fn(x: *const c_void, y: *mut f32, k: i64);
/// `ggml_vec_dot_t`:
/// `void (*)(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc)`.
type VecDotFn = unsafe extern "C" fn(
    n: c_int,
    s: *mut f32,
    bs: usize,
    x: *const c_void,
    bx: usize,
    y: *const c_void,
    by: usize,
    nrc: c_int,
);

/// `struct ggml_type_traits_cpu` (ggml-cpu.h). `enum ggml_type` is a 4-byte unsigned
/// integer in the x86-64 System V ABI (no negative enumerators).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawTraitsCpu {
    from_float: Option<FromFloatFn>,
    vec_dot: Option<VecDotFn>,
    vec_dot_type: u32,
    nrows: i64,
}

/// `struct ggml_type_traits` (ggml.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawTraits {
    type_name: *const c_char,
    blck_size: i64,
    blck_size_interleave: i64,
    type_size: usize,
    is_quantized: bool,
    to_float: Option<ToFloatFn>,
    from_float_ref: Option<FromFloatFn>,
}

/// The entry points resolved once at load time.
#[derive(Clone, Copy)]
struct Api {
    quantize_chunk: unsafe extern "C" fn(
        ty: u32,
        src: *const f32,
        dst: *mut c_void,
        start: i64,
        nrows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize,
    quantize_init: unsafe extern "C" fn(ty: u32),
}

/// The per-type function table of one tier, copied out of ggml at load time.
#[derive(Clone, Copy)]
struct TypeEntry {
    ty: GgmlType,
    from_float: Option<FromFloatFn>,
    vec_dot: Option<VecDotFn>,
    vec_dot_type: u32,
    nrows: i64,
    to_float: Option<ToFloatFn>,
    from_float_ref: Option<FromFloatFn>,
}

/// The x86 instruction-set extensions a tier's `libggml-cpu.so` was compiled with
/// (`ggml_cpu_has_*`, which report compile-time flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// SSE3.
    pub sse3: bool,
    /// SSSE3.
    pub ssse3: bool,
    /// AVX.
    pub avx: bool,
    /// AVX2.
    pub avx2: bool,
    /// FMA3.
    pub fma: bool,
    /// F16C.
    pub f16c: bool,
    /// BMI2.
    pub bmi2: bool,
    /// AVX-512F.
    pub avx512: bool,
    /// AVX-VNNI.
    pub avx_vnni: bool,
    /// AVX-512 VBMI.
    pub avx512_vbmi: bool,
    /// AVX-512 VNNI.
    pub avx512_vnni: bool,
    /// AVX-512 BF16.
    pub avx512_bf16: bool,
    /// AMX-INT8.
    pub amx_int8: bool,
    /// Built with llamafile's sgemm (`GGML_LLAMAFILE=ON`).
    pub llamafile: bool,
}

struct Inner {
    lib_dir: PathBuf,
    /// Kept open for the lifetime of the process (see [`GgmlLib::load`]).
    _base: Library,
    cpu: Library,
    api: Api,
    types: HashMap<u32, TypeEntry>,
    features: CpuFeatures,
}

/// One tier's ggml libraries, loaded once per process and shared by every clone.
///
/// All methods validate their inputs against ggml's type table before calling into
/// ggml; a wrong length, an unknown type or an operation ggml does not offer for a type
/// is an error, never a foreign call with bad sizes.
#[derive(Clone)]
pub struct GgmlLib {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for GgmlLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgmlLib")
            .field("lib_dir", &self.inner.lib_dir)
            .field("features", &self.inner.features)
            .finish()
    }
}

/// Tiers loaded so far (by canonical folder) and the ggml-base they all bind to.
#[derive(Default)]
struct Registry {
    tiers: HashMap<PathBuf, Arc<Inner>>,
    base: Option<(PathBuf, [u8; 32])>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

/// Types `ggml_quantize_chunk` handles without an importance matrix.
const QUANTIZE_CHUNK_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ2_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Whether ggml's quantizer for `ty` runs grid searches that abort on NaN or infinity.
fn needs_finite_input(ty: GgmlType) -> bool {
    ty.name().starts_with("iq")
}

/// A 64-byte-aligned scratch buffer, so ggml never sees a misaligned block pointer.
struct Aligned {
    chunks: Vec<[u64; 8]>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        Aligned { chunks: vec![[0u64; 8]; len.div_ceil(64)], len }
    }

    fn copy_of(bytes: &[u8]) -> Aligned {
        let mut a = Aligned::zeroed(bytes.len());
        a.as_mut_bytes().copy_from_slice(bytes);
        a
    }

    fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<[u64; 8], u8>(&self.chunks)[..self.len]
    }

    fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<[u64; 8], u8>(&mut self.chunks)[..self.len]
    }

    fn as_ptr(&self) -> *const c_void {
        self.chunks.as_ptr().cast()
    }

    fn as_mut_ptr(&mut self) -> *mut c_void {
        self.chunks.as_mut_ptr().cast()
    }
}

fn invalid(msg: impl Into<String>) -> OracleError {
    OracleError::InvalidInput(msg.into())
}

fn to_i64(v: usize, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| invalid(format!("{what} = {v} does not fit in int64_t")))
}

/// Bytes of `n` values of `ty`, requiring whole blocks.
fn row_bytes(ty: GgmlType, n: usize, what: &str) -> Result<usize> {
    ty.row_bytes(n).ok_or_else(|| {
        invalid(format!(
            "{what}: {n} values of {} are not a whole number of {}-value blocks",
            ty.name(),
            ty.block_size()
        ))
    })
}

fn file_digest(path: &Path) -> Result<[u8; 32]> {
    let bytes = std::fs::read(path).map_err(|source| OracleError::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    Ok(Sha256::digest(&bytes).into())
}

impl GgmlLib {
    /// Loads the tier whose `libggml-base.so` and `libggml-cpu.so` are in `lib_dir`.
    ///
    /// Both libraries are opened with `RTLD_NOW | RTLD_LOCAL`, base first, so several tiers
    /// can live in one process: with `RTLD_LOCAL` a tier's own calls between its exported
    /// functions (a SIMD kernel falling back to `..._generic`, say) resolve inside that
    /// tier's `libggml-cpu.so`, never in another tier's. The dynamic loader matches
    /// `libggml-cpu.so`'s dependency `libggml-base.so.0` by SONAME, however, so every tier
    /// binds to the first `libggml-base.so` loaded in the process; that is harmless
    /// because the tiers' ggml-base builds are byte-identical (no ISA flag reaches
    /// ggml-base), and enforced: a tier whose `libggml-base.so` differs from the one
    /// already loaded is refused with [`OracleError::BaseMismatch`]. All symbols are looked
    /// up through the `libggml-cpu.so` handle, so a tier's base functions are the very ones
    /// its CPU kernels call.
    ///
    /// Loading the same folder again returns the instance already loaded; the libraries
    /// stay loaded until the process exits. `ggml_cpu_init()` runs once per tier, after a
    /// check that this CPU has every instruction-set extension the tier was built with.
    pub fn load(lib_dir: &Path) -> Result<GgmlLib> {
        let canonical = lib_dir.canonicalize().map_err(|source| OracleError::Io {
            context: format!("ggml library folder {}", lib_dir.display()),
            source,
        })?;
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(inner) = reg.tiers.get(&canonical) {
            return Ok(GgmlLib { inner: inner.clone() });
        }

        let base_path = canonical.join("libggml-base.so");
        let cpu_path = canonical.join("libggml-cpu.so");
        let digest = file_digest(&base_path)?;
        if let Some((loaded, d)) = &reg.base {
            if *d != digest {
                return Err(OracleError::BaseMismatch {
                    lib_dir: canonical,
                    loaded: loaded.clone(),
                });
            }
        }

        let open = |path: &Path| {
            // SAFETY: these are ggml's own shared libraries, built by ci/oracle; their
            // initialisers only set up ggml's static state and have no preconditions.
            unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
                .map_err(|source| OracleError::Load { path: path.to_path_buf(), source })
        };
        let base = open(&base_path)?;
        let cpu = open(&cpu_path)?;
        let inner = Self::init(canonical.clone(), base, cpu)?;
        let inner = Arc::new(inner);
        if reg.base.is_none() {
            reg.base = Some((canonical.clone(), digest));
        }
        reg.tiers.insert(canonical, inner.clone());
        Ok(GgmlLib { inner })
    }

    fn init(lib_dir: PathBuf, base: Library, cpu: Library) -> Result<Inner> {
        macro_rules! sym {
            ($name:literal: $ty:ty) => {{
                // SAFETY: `$ty` is the exact C signature of this ggml function as declared
                // in ggml.h / ggml-cpu.h of the ggml version these bindings target; the
                // pointer is only used while `cpu` (which keeps it mapped) is alive.
                let s = unsafe { cpu.get::<$ty>(concat!($name, "\0").as_bytes()) };
                *s.map_err(|source| OracleError::MissingSymbol {
                    lib_dir: lib_dir.clone(),
                    symbol: $name.to_string(),
                    source,
                })?
            }};
        }
        let blck_size = sym!("ggml_blck_size": unsafe extern "C" fn(u32) -> i64);
        let type_size = sym!("ggml_type_size": unsafe extern "C" fn(u32) -> usize);
        let type_traits =
            sym!("ggml_get_type_traits": unsafe extern "C" fn(u32) -> *const RawTraits);
        let cpu_init = sym!("ggml_cpu_init": unsafe extern "C" fn());
        let traits_cpu =
            sym!("ggml_get_type_traits_cpu": unsafe extern "C" fn(u32) -> *const RawTraitsCpu);
        let api = Api {
            quantize_chunk: sym!("ggml_quantize_chunk": unsafe extern "C" fn(u32, *const f32, *mut c_void, i64, i64, i64, *const f32) -> usize),
            quantize_init: sym!("ggml_quantize_init": unsafe extern "C" fn(u32)),
        };

        macro_rules! has {
            ($name:literal) => {{
                let f = sym!($name: unsafe extern "C" fn() -> c_int);
                // SAFETY: `ggml_cpu_has_*` take no arguments and return a compile-time
                // constant; they use no instruction the host could lack.
                unsafe { f() != 0 }
            }};
        }
        let features = CpuFeatures {
            sse3: has!("ggml_cpu_has_sse3"),
            ssse3: has!("ggml_cpu_has_ssse3"),
            avx: has!("ggml_cpu_has_avx"),
            avx2: has!("ggml_cpu_has_avx2"),
            fma: has!("ggml_cpu_has_fma"),
            f16c: has!("ggml_cpu_has_f16c"),
            bmi2: has!("ggml_cpu_has_bmi2"),
            avx512: has!("ggml_cpu_has_avx512"),
            avx_vnni: has!("ggml_cpu_has_avx_vnni"),
            avx512_vbmi: has!("ggml_cpu_has_avx512_vbmi"),
            avx512_vnni: has!("ggml_cpu_has_avx512_vnni"),
            avx512_bf16: has!("ggml_cpu_has_avx512_bf16"),
            amx_int8: has!("ggml_cpu_has_amx_int8"),
            llamafile: has!("ggml_cpu_has_llamafile"),
        };
        check_host(&lib_dir, &features)?;

        // The library's type table must agree with tiercheck-core's (ggml 0.25.3).
        let mut types = HashMap::new();
        for &ty in GgmlType::ALL {
            let id = ty.id();
            // SAFETY: `id` is a valid `enum ggml_type` (< GGML_TYPE_COUNT), so these
            // functions index ggml's static type table in bounds and return a pointer
            // into it (never null) that lives as long as the library.
            let (blck, size, raw) = unsafe { (blck_size(id), type_size(id), *type_traits(id)) };
            let name = if raw.type_name.is_null() {
                String::new()
            } else {
                // SAFETY: a non-null `type_name` points to a static NUL-terminated string.
                unsafe { CStr::from_ptr(raw.type_name) }.to_string_lossy().into_owned()
            };
            if blck != ty.block_size() as i64 || size != ty.type_size() || name != ty.name() {
                return Err(OracleError::VersionMismatch {
                    lib_dir,
                    detail: format!(
                        "type {id}: ggml says {name:?}, block {blck}, {size} bytes; expected \
                         {:?}, block {}, {} bytes",
                        ty.name(),
                        ty.block_size(),
                        ty.type_size()
                    ),
                });
            }
            types.insert(
                id,
                TypeEntry {
                    ty,
                    from_float: None,
                    vec_dot: None,
                    vec_dot_type: 0,
                    nrows: 0,
                    to_float: raw.to_float,
                    from_float_ref: raw.from_float_ref,
                },
            );
        }

        // SAFETY: no preconditions; it initialises ggml-cpu's lookup tables (idempotent)
        // and the host was checked above to support every instruction the tier uses.
        unsafe { cpu_init() };
        for entry in types.values_mut() {
            // SAFETY: the id is a valid type (< GGML_TYPE_COUNT); the function returns a
            // pointer into ggml-cpu's static traits table, never null.
            let raw = unsafe { *traits_cpu(entry.ty.id()) };
            entry.from_float = raw.from_float;
            entry.vec_dot = raw.vec_dot;
            entry.vec_dot_type = raw.vec_dot_type;
            entry.nrows = raw.nrows;
            if entry.vec_dot.is_some() && GgmlType::from_id(raw.vec_dot_type).is_none() {
                return Err(OracleError::VersionMismatch {
                    lib_dir,
                    detail: format!(
                        "{} has unknown vec_dot_type {}",
                        entry.ty.name(),
                        raw.vec_dot_type
                    ),
                });
            }
        }

        Ok(Inner { lib_dir, _base: base, cpu, api, types, features })
    }

    /// The folder this tier was loaded from (canonical path).
    pub fn lib_dir(&self) -> &Path {
        &self.inner.lib_dir
    }

    /// The instruction-set extensions this tier's `libggml-cpu.so` was built with.
    pub fn cpu_features(&self) -> CpuFeatures {
        self.inner.features
    }

    fn entry(&self, ty: u32) -> Result<&TypeEntry> {
        self.inner.types.get(&ty).ok_or(OracleError::UnknownType(ty))
    }

    /// `traits_cpu(ty)->vec_dot_type`: the type the second operand of
    /// [`GgmlLib::vec_dot`] must be in (what [`GgmlLib::from_float`] of it produces).
    /// Errors for a type without a `vec_dot`.
    pub fn vec_dot_type(&self, ty: u32) -> Result<u32> {
        let e = self.entry(ty)?;
        match e.vec_dot {
            Some(_) => Ok(e.vec_dot_type),
            None => Err(unsupported(e.ty, "vec_dot")),
        }
    }

    /// `traits_cpu(ty)->nrows`: rows one `vec_dot` call processes at once (1 on x86).
    pub fn nrows(&self, ty: u32) -> Result<usize> {
        let e = self.entry(ty)?;
        usize::try_from(e.nrows).map_err(|_| invalid(format!("negative nrows {}", e.nrows)))
    }

    /// `ggml_quantize_chunk(ty, src, dst, 0, nrows, n_per_row, NULL)`: ggml's reference
    /// weight quantizer (in ggml-base), byte for byte what `llama_model_quantize` writes
    /// without an importance matrix. `src` holds `nrows * n_per_row` values and
    /// `n_per_row` must be a whole number of blocks.
    ///
    /// Types that need an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S) and types ggml
    /// cannot quantize to (Q8_K, Q8_1, integers) are refused, and so are NaN or infinite
    /// values for the IQ types (their grid searches abort on them).
    pub fn quantize_chunk(
        &self,
        ty: u32,
        src: &[f32],
        nrows: usize,
        n_per_row: usize,
    ) -> Result<Vec<u8>> {
        let t = self.entry(ty)?.ty;
        if !QUANTIZE_CHUNK_TYPES.contains(&t) {
            return Err(unsupported(t, "ggml_quantize_chunk without an importance matrix"));
        }
        let n = nrows
            .checked_mul(n_per_row)
            .ok_or_else(|| invalid(format!("{nrows} rows of {n_per_row} overflow")))?;
        if src.len() != n {
            return Err(invalid(format!(
                "quantize_chunk: {} source values for {nrows} rows of {n_per_row}",
                src.len()
            )));
        }
        let row = row_bytes(t, n_per_row, "quantize_chunk row")?;
        let total = row
            .checked_mul(nrows)
            .ok_or_else(|| invalid(format!("{nrows} rows of {row} bytes overflow")))?;
        if n == 0 {
            return Ok(Vec::new());
        }
        check_finite(t, src)?;
        let (nrows_i, npr_i) = (to_i64(nrows, "nrows")?, to_i64(n_per_row, "n_per_row")?);
        let mut dst = Aligned::zeroed(total);
        // SAFETY: `ty` is a valid type that ggml_quantize_chunk handles without an
        // importance matrix; `src` holds exactly nrows * n_per_row floats; `dst` holds
        // nrows * ggml_row_size(ty, n_per_row) bytes (the row size checked against ggml's
        // own type table at load), 64-byte aligned; start = 0; n_per_row is a whole
        // number of blocks, so none of ggml's asserts can fire.
        let written = unsafe {
            (self.inner.api.quantize_chunk)(
                ty,
                src.as_ptr(),
                dst.as_mut_ptr(),
                0,
                nrows_i,
                npr_i,
                std::ptr::null(),
            )
        };
        if written != total {
            return Err(OracleError::SizeMismatch { expected: total, got: written });
        }
        Ok(dst.as_bytes().to_vec())
    }

    /// `traits_cpu(ty)->from_float(src, dst, k)`: this tier's quantizer for `ty`, the
    /// activation quantizer when `ty` is a `vec_dot_type` (Q8_0, Q8_1, Q8_K).
    /// `src.len()` must be a whole number of blocks.
    pub fn from_float(&self, ty: u32, src: &[f32]) -> Result<Vec<u8>> {
        let e = *self.entry(ty)?;
        let f = e.from_float.ok_or_else(|| unsupported(e.ty, "from_float in ggml-cpu"))?;
        self.call_from_float(e.ty, f, src)
    }

    /// `ggml_get_type_traits(ty)->from_float_ref(src, dst, k)`: ggml-base's reference
    /// quantizer for one row (none exists for Q8_K).
    pub fn from_float_ref(&self, ty: u32, src: &[f32]) -> Result<Vec<u8>> {
        let e = *self.entry(ty)?;
        let f = e.from_float_ref.ok_or_else(|| unsupported(e.ty, "from_float_ref"))?;
        self.call_from_float(e.ty, f, src)
    }

    /// The exported `quantize_row_<ty>_generic` of this tier (Q8_0, Q8_1, Q8_K): the
    /// generic C activation quantizer as this tier's compiler flags built it.
    pub fn from_float_generic(&self, ty: u32, src: &[f32]) -> Result<Vec<u8>> {
        let t = self.entry(ty)?.ty;
        let f: FromFloatFn = self.lookup(&format!("quantize_row_{}_generic", t.name()))?;
        self.call_from_float(t, f, src)
    }

    fn call_from_float(&self, t: GgmlType, f: FromFloatFn, src: &[f32]) -> Result<Vec<u8>> {
        let total = row_bytes(t, src.len(), "from_float")?;
        if src.is_empty() {
            return Ok(Vec::new());
        }
        check_finite(t, src)?;
        let k = to_i64(src.len(), "k")?;
        // SAFETY: no preconditions; initialises the IQ grids `t` may need (no-op otherwise).
        unsafe { (self.inner.api.quantize_init)(t.id()) };
        let mut dst = Aligned::zeroed(total);
        // SAFETY: `f` converts `k` floats into `k / block_size(t)` blocks of `t`; `src`
        // holds k floats, `dst` exactly that many block bytes (64-byte aligned), and k is a
        // whole number of blocks.
        unsafe { f(src.as_ptr(), dst.as_mut_ptr(), k) };
        Ok(dst.as_bytes().to_vec())
    }

    /// `ggml_get_type_traits(ty)->to_float`: ggml-base's dequantizer. `src.len()` must be
    /// a whole number of blocks of `ty`.
    pub fn dequantize(&self, ty: u32, src: &[u8]) -> Result<Vec<f32>> {
        let e = *self.entry(ty)?;
        let f = e.to_float.ok_or_else(|| unsupported(e.ty, "to_float"))?;
        let size = e.ty.type_size();
        if !src.len().is_multiple_of(size) {
            return Err(invalid(format!(
                "dequantize: {} bytes are not a whole number of {size}-byte {} blocks",
                src.len(),
                e.ty.name()
            )));
        }
        let k = src.len() / size * e.ty.block_size();
        if k == 0 {
            return Ok(Vec::new());
        }
        let k_i = to_i64(k, "k")?;
        let x = Aligned::copy_of(src);
        let mut out = vec![0f32; k];
        // SAFETY: `x` holds k / block_size whole blocks of `ty` (64-byte aligned) and `out`
        // holds k floats; any bit pattern is a valid block to dequantize.
        unsafe { f(x.as_ptr(), out.as_mut_ptr(), k_i) };
        Ok(out)
    }

    /// `traits_cpu(ty)->vec_dot(n, &s, 0, x, 0, y, 0, 1)`: this tier's dot product of one
    /// row `x` of `n` values of `ty` with one row `y` of `n` values of
    /// [`vec_dot_type(ty)`](GgmlLib::vec_dot_type).
    pub fn vec_dot(&self, ty: u32, n: usize, x: &[u8], y: &[u8]) -> Result<f32> {
        let e = *self.entry(ty)?;
        let f = e.vec_dot.ok_or_else(|| unsupported(e.ty, "vec_dot"))?;
        self.call_vec_dot(e, f, n, x, y)
    }

    /// The symbol [`GgmlLib::vec_dot_generic`] calls for `ty`:
    /// `ggml_vec_dot_<ty>_<vec_dot_type>_generic`, e.g. `ggml_vec_dot_q4_K_q8_K_generic`.
    pub fn vec_dot_generic_symbol(&self, ty: u32) -> Result<String> {
        let e = self.entry(ty)?;
        let vdt = GgmlType::from_id(self.vec_dot_type(ty)?).ok_or(OracleError::UnknownType(ty))?;
        Ok(format!("ggml_vec_dot_{}_{}_generic", e.ty.name(), vdt.name()))
    }

    /// Like [`GgmlLib::vec_dot`], through this tier's exported generic C kernel
    /// ([`vec_dot_generic_symbol`](GgmlLib::vec_dot_generic_symbol)); an error when the
    /// tier does not export it. The x64 tier's generic kernels are compiled without FMA,
    /// the haswell tier's with FMA contraction, so the two can differ.
    pub fn vec_dot_generic(&self, ty: u32, n: usize, x: &[u8], y: &[u8]) -> Result<f32> {
        let e = *self.entry(ty)?;
        let f: VecDotFn = self.lookup(&self.vec_dot_generic_symbol(ty)?)?;
        self.call_vec_dot(e, f, n, x, y)
    }

    /// Whether this tier exports `name` (searched in `libggml-cpu.so` and its
    /// dependencies).
    pub fn has_symbol(&self, name: &str) -> bool {
        if name.contains('\0') {
            return false;
        }
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        // SAFETY: the symbol is only checked for existence; the `*const c_void` is never
        // dereferenced or called.
        let sym = unsafe { self.inner.cpu.get::<*const c_void>(&bytes) };
        sym.is_ok()
    }

    /// Looks up a function by name; only used with names whose C type is `T` (the
    /// `_generic` kernel families, which share their family's typedef).
    fn lookup<T: Copy>(&self, name: &str) -> Result<T> {
        if name.contains('\0') {
            return Err(invalid(format!("symbol name {name:?} contains NUL")));
        }
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        // SAFETY: callers only request `quantize_row_*_generic` as `ggml_from_float_t`
        // and `ggml_vec_dot_*_generic` as `ggml_vec_dot_t`, their C types; the library
        // stays loaded for as long as `self` (and in fact the process) lives.
        let sym = unsafe { self.inner.cpu.get::<T>(&bytes) }.map_err(|source| {
            OracleError::MissingSymbol {
                lib_dir: self.inner.lib_dir.clone(),
                symbol: name.to_string(),
                source,
            }
        })?;
        Ok(*sym)
    }

    fn call_vec_dot(&self, e: TypeEntry, f: VecDotFn, n: usize, x: &[u8], y: &[u8]) -> Result<f32> {
        let vdt =
            GgmlType::from_id(e.vec_dot_type).ok_or(OracleError::UnknownType(e.vec_dot_type))?;
        if n == 0 {
            return Err(invalid("vec_dot: n must be positive"));
        }
        let n_c = c_int::try_from(n).map_err(|_| invalid(format!("vec_dot: n = {n} too large")))?;
        let x_len = row_bytes(e.ty, n, "vec_dot x")?;
        let y_len = row_bytes(vdt, n, "vec_dot y")?;
        if x.len() != x_len || y.len() != y_len {
            return Err(invalid(format!(
                "vec_dot: {n} values need {x_len} bytes of {} and {y_len} bytes of {}, got {} and {}",
                e.ty.name(),
                vdt.name(),
                x.len(),
                y.len()
            )));
        }
        let (xa, ya) = (Aligned::copy_of(x), Aligned::copy_of(y));
        let mut s = 0f32;
        // SAFETY: `f` is a vec_dot kernel for (ty, vec_dot_type(ty)); `xa` and `ya` hold
        // exactly one row of n values of each (whole blocks, 64-byte aligned); with
        // nrc = 1 the strides bs/bx/by are unused and exactly one float is written to `s`.
        unsafe { f(n_c, &mut s, 0, xa.as_ptr(), 0, ya.as_ptr(), 0, 1) };
        Ok(s)
    }
}

fn unsupported(ty: GgmlType, what: &str) -> OracleError {
    OracleError::Unsupported { ty: ty.name(), what: what.to_string() }
}

fn check_finite(t: GgmlType, src: &[f32]) -> Result<()> {
    if needs_finite_input(t) {
        if let Some(i) = src.iter().position(|v| !v.is_finite()) {
            return Err(invalid(format!(
                "{} quantization of a non-finite value (index {i}) aborts in ggml",
                t.name()
            )));
        }
    }
    Ok(())
}

/// Refuses a tier built with an instruction-set extension this CPU lacks (it would die
/// with SIGILL inside ggml). AMX is not checked (its detection is unstable in Rust); an
/// AMX build also needs AVX-512, which is.
#[cfg(target_arch = "x86_64")]
fn check_host(lib_dir: &Path, f: &CpuFeatures) -> Result<()> {
    let needs = [
        (f.sse3, "sse3", tiercheck_core::detect::cpu_has("sse3")),
        (f.ssse3, "ssse3", tiercheck_core::detect::cpu_has("ssse3")),
        (f.avx, "avx", tiercheck_core::detect::cpu_has("avx")),
        (f.avx2, "avx2", tiercheck_core::detect::cpu_has("avx2")),
        (f.fma, "fma", tiercheck_core::detect::cpu_has("fma")),
        (f.f16c, "f16c", tiercheck_core::detect::cpu_has("f16c")),
        (f.bmi2, "bmi2", tiercheck_core::detect::cpu_has("bmi2")),
        (f.avx512, "avx512f", tiercheck_core::detect::cpu_has("avx512f")),
        (f.avx_vnni, "avxvnni", tiercheck_core::detect::cpu_has("avxvnni")),
        (f.avx512_vbmi, "avx512vbmi", tiercheck_core::detect::cpu_has("avx512vbmi")),
        (f.avx512_vnni, "avx512vnni", tiercheck_core::detect::cpu_has("avx512vnni")),
        (f.avx512_bf16, "avx512bf16", tiercheck_core::detect::cpu_has("avx512bf16")),
    ];
    match needs.iter().find(|(built, _, host)| *built && !*host) {
        Some((_, feature, _)) => {
            Err(OracleError::HostLacksFeature { lib_dir: lib_dir.to_path_buf(), feature })
        }
        None => Ok(()),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn check_host(_lib_dir: &Path, _f: &CpuFeatures) -> Result<()> {
    Ok(())
}
