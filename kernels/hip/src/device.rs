//! The host side (feature `hip`): HIP's module API through `hip-sys` to load the
//! embedded code object that matches the device, copy inputs, launch, and read back.
//!
//! Every runtime call is checked; a failure becomes a message naming the call and
//! HIP's error. All device work is serialized by one lock (trials run on many
//! threads; one device, one module).

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

use hip_sys::hiprt as hip;
use tiercheck_core::arch::hip::HipTwin;
use tiercheck_core::blocks::BlockQ8_1;
use tiercheck_core::gpu::MmvqConfig;
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use crate::{mmvq_kernel, CodeObject, CODE_OBJECTS, QUANTIZE_KERNEL, TYPES};

/// `hipError_t` as text: its name and HIP's description.
fn describe(e: hip::hipError_t) -> String {
    // SAFETY: hipGetErrorString returns a pointer to a static NUL-terminated string
    // (or null) for any error value.
    let s = unsafe { hip::hipGetErrorString(e) };
    if s.is_null() {
        format!("{e:?}")
    } else {
        // SAFETY: non-null, NUL-terminated, static (see above).
        let text = unsafe { CStr::from_ptr(s) }.to_string_lossy();
        format!("{e:?} ({text})")
    }
}

fn check(e: hip::hipError_t, call: &str) -> Result<(), String> {
    if e == hip::hipError_t::hipSuccess {
        Ok(())
    } else {
        Err(format!("{call}: {}", describe(e)))
    }
}

/// The loaded module and what the device is.
struct Runtime {
    target: &'static str,
    warp: usize,
    module: hip::hipModule_t,
    functions: HashMap<String, hip::hipFunction_t>,
}

// SAFETY: the module and function handles are process-wide HIP objects, usable from
// any thread; every use goes through the `DEVICE` mutex.
unsafe impl Send for Runtime {}

static DEVICE: OnceLock<Result<Mutex<Runtime>, String>> = OnceLock::new();

fn device() -> Result<&'static Mutex<Runtime>, String> {
    DEVICE.get_or_init(|| open().map(Mutex::new)).as_ref().map_err(Clone::clone)
}

/// Find a device, load the code object its ISA accepts, resolve every kernel.
fn open() -> Result<Runtime, String> {
    let mut count: i32 = 0;
    // SAFETY: plain out-parameter.
    let e = unsafe { hip::hipGetDeviceCount(&mut count) };
    if e == hip::hipError_t::hipErrorNoDevice || (e == hip::hipError_t::hipSuccess && count == 0) {
        return Err("no HIP device: hipGetDeviceCount returned hipErrorNoDevice".to_string());
    }
    check(e, "hipGetDeviceCount")?;
    // SAFETY: device 0 exists (count > 0).
    let e = unsafe { hip::hipSetDevice(0) };
    check(e, "hipSetDevice(0)")?;
    let mut warp: i32 = 0;
    let attr = hip::hipDeviceAttribute_t::hipDeviceAttributeWarpSize;
    // SAFETY: plain out-parameter; the attribute's value is an int.
    let e = unsafe { hip::hipDeviceGetAttribute(&mut warp, attr, 0) };
    check(e, "hipDeviceGetAttribute(WarpSize)")?;
    if warp != 32 && warp != 64 {
        return Err(format!("device reports a warp size of {warp}, neither 32 nor 64"));
    }
    // The runtime refuses a code object built for another ISA, so the first one that
    // loads is the device's own (this avoids reading hipDeviceProp_t, whose layout
    // differs between HIP versions).
    let mut refusals = Vec::new();
    let mut loaded: Option<(&'static CodeObject, hip::hipModule_t)> = None;
    for co in CODE_OBJECTS {
        let mut module: hip::hipModule_t = std::ptr::null_mut();
        // SAFETY: `co.bytes` is a complete code object with 'static lifetime.
        let e = unsafe { hip::hipModuleLoadData(&mut module, co.bytes.as_ptr() as *const c_void) };
        if e == hip::hipError_t::hipSuccess {
            loaded = Some((co, module));
            break;
        }
        refusals.push(format!("{}: {}", co.target, describe(e)));
    }
    let Some((co, module)) = loaded else {
        return Err(format!(
            "the device loads none of this build's code objects ({}); rebuild with its \
             ISA in TIERCHECK_HIP_TARGETS",
            refusals.join("; ")
        ));
    };
    let mut functions = HashMap::new();
    for name in crate::kernel_names(warp as usize) {
        let c = CString::new(name.clone()).expect("kernel names have no NUL");
        let mut f: hip::hipFunction_t = std::ptr::null_mut();
        // SAFETY: `module` is loaded; `c` is NUL-terminated.
        let e = unsafe { hip::hipModuleGetFunction(&mut f, module, c.as_ptr()) };
        check(e, &format!("hipModuleGetFunction({name}) in the {} code object", co.target))?;
        functions.insert(name, f);
    }
    Ok(Runtime { target: co.target, warp: warp as usize, module, functions })
}

/// One device allocation, freed on drop.
struct Buffer {
    ptr: hip::hipDeviceptr_t,
    bytes: usize,
}

impl Buffer {
    fn new(bytes: usize) -> Result<Buffer, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-parameter; at least one byte so the pointer is never null.
        check(unsafe { hip::hipMalloc(&mut ptr, bytes.max(1)) }, "hipMalloc")?;
        Ok(Buffer { ptr, bytes })
    }

    fn from_bytes(data: &[u8]) -> Result<Buffer, String> {
        let b = Buffer::new(data.len())?;
        if !data.is_empty() {
            let src = data.as_ptr() as *mut c_void;
            // SAFETY: the allocation holds data.len() bytes; HIP only reads `src`.
            let e = unsafe { hip::hipMemcpyHtoD(b.ptr, src, data.len()) };
            check(e, "hipMemcpyHtoD")?;
        }
        Ok(b)
    }

    fn read(&self, out: &mut [u8]) -> Result<(), String> {
        assert!(out.len() <= self.bytes);
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: both regions hold out.len() bytes.
        let e = unsafe { hip::hipMemcpyDtoH(out.as_mut_ptr() as *mut c_void, self.ptr, out.len()) };
        check(e, "hipMemcpyDtoH")
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from hipMalloc and is freed once.
        let _ = unsafe { hip::hipFree(self.ptr) };
    }
}

fn to_i32(v: usize, what: &str) -> Result<i32, String> {
    i32::try_from(v).map_err(|_| format!("{what} {v} exceeds the kernels' int range"))
}

impl Runtime {
    /// Launch `name` with `args` (each a pointer to the argument's value), then wait.
    fn launch(
        &self,
        name: &str,
        grid: u32,
        block: (u32, u32),
        args: &mut [*mut c_void],
    ) -> Result<(), String> {
        let f = *self
            .functions
            .get(name)
            .ok_or_else(|| format!("kernel {name} is not in the {} code object", self.target))?;
        // SAFETY: `f` is a kernel of the loaded module whose parameters match `args`
        // (the callers below pass exactly the kernel's signature); the grid is
        // non-empty; the default stream.
        let e = unsafe {
            hip::hipModuleLaunchKernel(
                f,
                grid,
                1,
                1,
                block.0,
                block.1,
                1,
                0,
                std::ptr::null_mut(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(e, &format!("hipModuleLaunchKernel({name})"))?;
        // SAFETY: no arguments.
        let e = unsafe { hip::hipDeviceSynchronize() };
        check(e, &format!("{name}: hipDeviceSynchronize"))
    }

    /// `tc_quantize_q8_1` on one activation row: the q8_1 blocks' bytes.
    fn quantize(&self, x: &[f32]) -> Result<Vec<u8>, String> {
        let nblocks = x.len().div_ceil(32);
        let mut out = vec![0u8; nblocks * std::mem::size_of::<BlockQ8_1>()];
        if nblocks == 0 {
            return Ok(out);
        }
        let dx = Buffer::from_bytes(bytemuck::cast_slice(x))?;
        let dy = Buffer::new(out.len())?;
        let (mut px, mut py) = (dx.ptr, dy.ptr);
        let mut ne00 = to_i32(x.len(), "row length")?;
        let mut nb = to_i32(nblocks, "q8_1 blocks")?;
        let threads = nblocks * 32;
        let grid = u32::try_from(threads.div_ceil(256)).map_err(|_| "grid too large")?;
        let mut args = [
            &mut px as *mut _ as *mut c_void,
            &mut py as *mut _ as *mut c_void,
            &mut ne00 as *mut _ as *mut c_void,
            &mut nb as *mut _ as *mut c_void,
        ];
        self.launch(QUANTIZE_KERNEL, grid, (256, 1), &mut args)?;
        dy.read(&mut out)?;
        Ok(out)
    }

    /// `tc_mmvq_*` over `nrows` weight rows (`w`) against one q8_1 column (`act`).
    fn gemv(
        &self,
        cfg: &MmvqConfig,
        ty: GgmlType,
        w: &[u8],
        nrows: usize,
        act: &[u8],
    ) -> Result<Vec<f32>, KernelError> {
        let dev = |e: String| KernelError::Device(e);
        let spelling = TYPES
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|&(_, s)| s)
            .ok_or(KernelError::Unsupported { op: cfg.name, ty: ty.name() })?;
        let unit = ty.type_size();
        if nrows == 0 || !w.len().is_multiple_of(nrows) || !(w.len() / nrows).is_multiple_of(unit) {
            return Err(KernelError::BadLength { what: ty.name(), len: w.len(), unit });
        }
        let blocks_per_row = w.len() / nrows / unit;
        let want = blocks_per_row * (ty.block_size() / 32) * std::mem::size_of::<BlockQ8_1>();
        if act.len() != want {
            return Err(KernelError::ShapeMismatch {
                what: "device mmvq q8_1 activation bytes",
                expected: want,
                got: act.len(),
            });
        }
        let mut out = vec![0.0f32; nrows];
        if blocks_per_row == 0 {
            return Ok(out); // the kernel would add nothing: every output is 0
        }
        let name = mmvq_kernel(spelling, cfg.warp_size, cfg.nwarps(ty));
        let dw = Buffer::from_bytes(w).map_err(dev)?;
        let da = Buffer::from_bytes(act).map_err(dev)?;
        let dd = Buffer::new(nrows * 4).map_err(dev)?;
        let (mut pw, mut pa, mut pd) = (dw.ptr, da.ptr, dd.ptr);
        let mut bpr = to_i32(blocks_per_row, "blocks per row").map_err(dev)?;
        let mut args = [
            &mut pw as *mut _ as *mut c_void,
            &mut pa as *mut _ as *mut c_void,
            &mut pd as *mut _ as *mut c_void,
            &mut bpr as *mut _ as *mut c_void,
        ];
        let grid = u32::try_from(nrows).map_err(|_| dev("too many rows".to_string()))?;
        let block = (cfg.warp_size as u32, cfg.nwarps(ty) as u32);
        self.launch(&name, grid, block, &mut args).map_err(dev)?;
        dd.read(bytemuck::cast_slice_mut(&mut out)).map_err(dev)?;
        Ok(out)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // SAFETY: loaded once, unloaded once (statics are not dropped in practice).
        let _ = unsafe { hip::hipModuleUnload(self.module) };
    }
}

/// A HIP twin's kernels on the device: the twin's MMVQ configuration run by the device
/// code, the twin's activation rules.
#[derive(Debug)]
pub(crate) struct DeviceLane {
    cfg: MmvqConfig,
    twin: &'static HipTwin,
}

/// The device lane of `twin`, made once per twin and kept for the process.
fn device_lane(twin: &'static HipTwin) -> &'static DeviceLane {
    static MADE: Mutex<Vec<&'static DeviceLane>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = made.iter().find(|d| std::ptr::eq(d.twin, twin)) {
        return d;
    }
    let d: &'static DeviceLane = Box::leak(Box::new(DeviceLane { cfg: twin.0, twin }));
    made.push(d);
    d
}

fn with_device<T>(f: impl FnOnce(&Runtime) -> Result<T, KernelError>) -> Result<T, KernelError> {
    let m = device().map_err(KernelError::Device)?;
    let rt = m.lock().unwrap_or_else(|p| p.into_inner());
    f(&rt)
}

impl Kernels for DeviceLane {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        self.twin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.act_rule(wtype)?;
        with_device(|rt| rt.quantize(x).map_err(KernelError::Device))
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.act_rule(wtype)?;
        with_device(|rt| rt.gemv(&self.cfg, wtype, w_row, 1, act)).map(|v| v[0])
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        tiercheck_core::weight_matrix::check_activations(x, m, w.k())?;
        self.act_rule(w.ty())?;
        let n = w.n();
        let mut out = vec![0.0f32; m * n];
        if w.k() == 0 || n == 0 {
            return Ok(out);
        }
        with_device(|rt| {
            for (i, xi) in x.chunks_exact(w.k()).enumerate() {
                let act = rt.quantize(xi).map_err(KernelError::Device)?;
                let col = rt.gemv(&self.cfg, w.ty(), w.data(), n, &act)?;
                out[i * n..(i + 1) * n].copy_from_slice(&col);
            }
            Ok(())
        })?;
        Ok(out)
    }
}

/// The device implementation of `twin`, or why there is none.
pub(crate) fn kernels(twin: &'static HipTwin) -> Result<&'static dyn Kernels, String> {
    let dl = device_lane(twin);
    let m = device()?;
    let rt = m.lock().unwrap_or_else(|p| p.into_inner());
    if dl.cfg.warp_size > rt.warp {
        return Err(format!(
            "`{}` needs {}-wide warps; the device ({}) runs {}",
            dl.cfg.name, dl.cfg.warp_size, rt.target, rt.warp
        ));
    }
    Ok(dl)
}

/// The device's ISA and wavefront, or why there is none.
pub(crate) fn summary() -> Result<String, String> {
    let m = device()?;
    let rt = m.lock().unwrap_or_else(|p| p.into_inner());
    Ok(format!("HIP device 0: {} code object loaded, {}-wide wavefront", rt.target, rt.warp))
}
