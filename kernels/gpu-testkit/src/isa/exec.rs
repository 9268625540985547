//! A concrete interpreter of one work-item of an AMDGPU kernel, run from its
//! `llvm-objdump -d` listing: the instructions of a per-thread kernel (no cross-lane
//! operations) executed on given kernel arguments and memory, branches followed, so
//! code the symbolic evaluator ([`super::amdgpu`]) refuses (the device library's
//! `powf`, `sinf`, `cosf`: branching, bit manipulation, Payne-Hanek loops) is read by
//! what it computes.
//!
//! # The model
//! One wavefront whose only active lane is lane 0: every vector register holds that
//! lane's value, vector compares write bit 0 of their mask (the other bits 0), and a
//! vector instruction with the lane off in `exec` writes nothing (a compare writes 0).
//! Scalar registers, `scc`, `vcc` and `exec` are the wave's. The initial registers
//! follow the kernel descriptor ([`Launch`], [`Descriptor`]): the user SGPRs it enables
//! (private segment buffer, dispatch pointer, queue pointer, kernarg pointer, dispatch
//! id, flat scratch, private segment size), then the workgroup ids it enables; the
//! work-item ids in `v0`, `v1`, `v2`, or packed into `v0` (10 bits each) on targets
//! that pack them (gfx90a).
//!
//! Memory is a set of regions; an access outside them is an error naming the address.
//! Float instructions run in f32 with subnormals kept (the kernel's mode is checked:
//! a descriptor that flushes them is refused). `v_rcp_f32`, `v_rcp_iflag_f32`,
//! `v_exp_f32` and `v_log_f32`, whose hardware results are approximations without a
//! bit-exact specification, are the models the GPU twins use: correctly rounded
//! `1/x`, `2^x`, `log2 x` (f64, rounded once). The IEEE division sequence
//! (`v_div_scale_f32` ... `v_div_fixup_f32`) is taken as the correctly rounded quotient
//! it exists to produce, as the symbolic reader reads it: `v_div_fixup_f32` returns
//! numerator / denominator, `v_div_scale_f32` scales nothing. An instruction the interpreter does not
//! know, an output modifier (`clamp`, `mul:`, `div:`) or a scratch access is an error
//! when it is *executed*: code that a run does not reach may hold anything.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::{bits, kernel_body, modifier, split, vopd};

/// The fields of an AMDGPU kernel descriptor (the 64 bytes at `<kernel>.kd`) that set
/// up a work-item's registers.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub properties: u16,
}

impl Descriptor {
    /// From the 64 descriptor bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Self, String> {
        if b.len() < 64 {
            return Err(format!("kernel descriptor of {} bytes, expected 64", b.len()));
        }
        let word = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Ok(Descriptor {
            rsrc1: word(48),
            rsrc2: word(52),
            properties: u16::from_le_bytes([b[56], b[57]]),
        })
    }

    /// Whether the kernel runs 32-wide (`ENABLE_WAVEFRONT_SIZE32`).
    pub fn wave32(&self) -> bool {
        self.properties & (1 << 10) != 0
    }
}

/// Where a work-item runs and what it is given.
#[derive(Clone, Debug)]
pub struct Launch {
    pub descriptor: Descriptor,
    /// Work-item ids are packed into `v0` (gfx90a and later CDNA).
    pub packed_ids: bool,
    pub block: [u32; 3],
    pub grid_blocks: [u32; 3],
    pub block_id: [u32; 3],
    pub thread_id: [u32; 3],
    /// The kernel arguments' bytes (zero where unused).
    pub kernargs: Vec<u8>,
    /// Code object v5's implicit arguments at this offset of the kernel arguments
    /// (`hidden_block_count_x`, the first): the block counts (3 x u32), the block sizes
    /// (3 x u16) and the sizes of the last, partial blocks (3 x u16, 0 for full ones),
    /// where the kernel reads its block size (`None`: code object v4, which reads the
    /// dispatch packet).
    pub hidden_at: Option<usize>,
}

/// Addresses the interpreter gives the dispatch packet and the kernel arguments.
const DISPATCH_AT: u64 = 0x1000;
const KERNARG_AT: u64 = 0x2000;

/// Global memory: regions at fixed addresses.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    regions: Vec<(u64, Vec<u8>)>,
}

impl Memory {
    /// Adds a region of `bytes` at `base` (regions must not overlap).
    pub fn map(&mut self, base: u64, bytes: Vec<u8>) {
        self.regions.push((base, bytes));
    }

    fn find(&mut self, addr: u64, len: u64) -> Result<&mut [u8], String> {
        for (base, bytes) in &mut self.regions {
            if addr >= *base && addr + len <= *base + bytes.len() as u64 {
                let o = (addr - *base) as usize;
                return Ok(&mut bytes[o..o + len as usize]);
            }
        }
        Err(format!("access of {len} bytes at {addr:#x} outside the mapped memory"))
    }

    pub fn read_u32(&mut self, addr: u64) -> Result<u32, String> {
        let b = self.find(addr, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn read(&mut self, addr: u64, len: u64) -> Result<u64, String> {
        let b = self.find(addr, len)?;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            v |= (x as u64) << (8 * i);
        }
        Ok(v)
    }

    fn write(&mut self, addr: u64, len: u64, v: u64) -> Result<(), String> {
        let b = self.find(addr, len)?;
        for (i, x) in b.iter_mut().enumerate() {
            *x = (v >> (8 * i)) as u8;
        }
        Ok(())
    }
}

/// One decoded operand.
#[derive(Clone, Debug, PartialEq)]
enum Opnd {
    /// Scalar registers `s[i..i+n]` (also `vcc`, `exec`, `m0`, `null`).
    S(usize, usize),
    /// Vector registers `v[i..i+n]`.
    V(usize, usize),
    /// A constant (inline integer sign-extended, float inline or literal).
    K(u32),
    /// `off`, or anything else that is not a value.
    Other(String),
}

/// An operand with its float source modifiers.
#[derive(Clone, Debug)]
struct Src {
    op: Opnd,
    neg: bool,
    abs: bool,
}

#[derive(Clone, Debug)]
struct Inst {
    addr: u64,
    size: u64,
    text: String,
    /// The mnemonic without its encoding suffix (`_e32`, `_e64`).
    mn: String,
    ops: Vec<Src>,
    mods: Vec<String>,
    /// The second half of a gfx11 dual-issue (VOPD) instruction; this one is the first.
    dual: Option<Box<Inst>>,
}

const VCC: usize = 106;
const M0: usize = 124;
const NULL: usize = 125;
const EXEC: usize = 126;

fn operand(text: &str) -> Src {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) if !r.starts_with(|c: char| c.is_ascii_digit()) => (true, r),
        _ => (false, t),
    };
    let (abs, t) = match t.strip_prefix('|').and_then(|r| r.strip_suffix('|')) {
        Some(r) => (true, r),
        None => (false, t),
    };
    let op = match t {
        "vcc" => Opnd::S(VCC, 2),
        "vcc_lo" => Opnd::S(VCC, 1),
        "vcc_hi" => Opnd::S(VCC + 1, 1),
        "exec" => Opnd::S(EXEC, 2),
        "exec_lo" => Opnd::S(EXEC, 1),
        "exec_hi" => Opnd::S(EXEC + 1, 1),
        "m0" => Opnd::S(M0, 1),
        "null" => Opnd::S(NULL, 1),
        _ => {
            if let Some(h) = t.strip_prefix("0x") {
                u64::from_str_radix(h, 16).map_or(Opnd::Other(t.into()), |v| Opnd::K(v as u32))
            } else if let Ok(i) = t.parse::<i64>() {
                Opnd::K(i as i32 as u32)
            } else if let Ok(f) = t.parse::<f32>() {
                Opnd::K(f.to_bits())
            } else {
                reg(t).unwrap_or(Opnd::Other(t.into()))
            }
        }
    };
    Src { op, neg, abs }
}

/// `v3`, `s[4:5]`.
fn reg(t: &str) -> Option<Opnd> {
    let (kind, rest) = t.split_at(1);
    let (a, n) = if let Some(r) = rest.strip_prefix('[') {
        let (a, b) = r.strip_suffix(']')?.split_once(':')?;
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        (a, b.checked_sub(a)? + 1)
    } else {
        (rest.parse().ok()?, 1)
    };
    match kind {
        "v" => Some(Opnd::V(a, n)),
        "s" => Some(Opnd::S(a, n)),
        _ => None,
    }
}

/// A decoded kernel, ready to run.
pub struct Program {
    name: String,
    insts: Vec<Inst>,
    at: HashMap<u64, usize>,
}

impl Program {
    /// Decodes `kernel` from an `llvm-objdump -d` listing.
    pub fn from_listing(listing: &str, kernel: &str) -> Result<Self, String> {
        let mut insts = Vec::new();
        let decode = |addr: u64, size: u64, text: &str| {
            let (mn, ops, mods) = split(text);
            let mn = mn.trim_end_matches("_e32").trim_end_matches("_e64").to_string();
            Inst {
                addr,
                size,
                text: text.to_string(),
                mn,
                ops: ops.iter().map(|o| operand(o)).collect(),
                mods,
                dual: None,
            }
        };
        for (addr, size, text) in kernel_body(listing, kernel, true)? {
            insts.push(match vopd(text) {
                Some((x, y)) => Inst {
                    text: text.to_string(),
                    dual: Some(Box::new(decode(addr, size, &y))),
                    ..decode(addr, size, &x)
                },
                None => decode(addr, size, text),
            });
        }
        let at = insts.iter().enumerate().map(|(i, x)| (x.addr, i)).collect();
        Ok(Program { name: kernel.to_string(), insts, at })
    }

    /// Runs one work-item to `s_endpgm`. Returns the global stores it made, in order
    /// (`address`, value, bytes), and leaves them in `mem`.
    pub fn run(&self, launch: &Launch, mem: &mut Memory) -> Result<Vec<(u64, u64, u64)>, String> {
        let regions = mem.regions.len();
        let out = self.execute(launch, mem);
        mem.regions.truncate(regions);
        out
    }

    fn execute(&self, launch: &Launch, mem: &mut Memory) -> Result<Vec<(u64, u64, u64)>, String> {
        let mut w = Wave::new(launch, mem)?;
        let mut pc = 0usize;
        for _ in 0..1_000_000 {
            let Some(ins) = self.insts.get(pc) else {
                return Err(format!("{}: ran past the end of the kernel", self.name));
            };
            let r = w.step(ins);
            match r.map_err(|e| format!("{}: at {:#x} `{}`: {e}", self.name, ins.addr, ins.text))? {
                Flow::Next => pc += 1,
                Flow::End => return Ok(std::mem::take(&mut w.stores)),
                Flow::Jump(simm) => {
                    let target = (ins.addr as i64 + ins.size as i64 + 4 * simm as i64) as u64;
                    pc = *self.at.get(&target).ok_or_else(|| {
                        format!(
                            "{}: branch at {:#x} to {target:#x}, no instruction there",
                            self.name, ins.addr
                        )
                    })?;
                }
            }
        }
        Err(format!("{}: no s_endpgm after a million instructions", self.name))
    }
}

enum Flow {
    Next,
    End,
    Jump(i16),
}

struct Wave<'m> {
    s: [u32; 128],
    v: Vec<u32>,
    scc: bool,
    wave64: bool,
    mem: &'m mut Memory,
    stores: Vec<(u64, u64, u64)>,
}

/// The dispatch packet's bytes for a launch (HSA's `hsa_kernel_dispatch_packet_t`:
/// workgroup sizes at 4, 6, 8, grid sizes in work-items at 12, 16, 20).
fn dispatch_packet(l: &Launch) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    for d in 0..3 {
        p[4 + 2 * d..6 + 2 * d].copy_from_slice(&(l.block[d] as u16).to_le_bytes());
        let grid = l.block[d] * l.grid_blocks[d];
        p[12 + 4 * d..16 + 4 * d].copy_from_slice(&grid.to_le_bytes());
    }
    p[40..48].copy_from_slice(&KERNARG_AT.to_le_bytes());
    p
}

impl<'m> Wave<'m> {
    fn new(l: &Launch, mem: &'m mut Memory) -> Result<Self, String> {
        let d = l.descriptor;
        if (d.rsrc1 >> 16) & 3 != 3 {
            return Err(format!(
                "f32 denormal mode {} (the interpreter keeps subnormals: mode 3)",
                (d.rsrc1 >> 16) & 3
            ));
        }
        mem.map(DISPATCH_AT, dispatch_packet(l));
        let mut args = l.kernargs.clone();
        args.resize(args.len().max(512), 0);
        if let Some(h) = l.hidden_at {
            if h + 24 > args.len() {
                return Err(format!("implicit arguments at {h} past the kernel arguments"));
            }
            for d in 0..3 {
                args[h + 4 * d..h + 4 * d + 4].copy_from_slice(&l.grid_blocks[d].to_le_bytes());
                args[h + 12 + 2 * d..h + 14 + 2 * d]
                    .copy_from_slice(&(l.block[d] as u16).to_le_bytes());
                args[h + 18 + 2 * d..h + 20 + 2 * d].copy_from_slice(&0u16.to_le_bytes());
            }
        }
        mem.map(KERNARG_AT, args);
        let mut w = Wave {
            s: [0; 128],
            v: vec![0; 512],
            scc: false,
            wave64: !d.wave32(),
            mem,
            stores: Vec::new(),
        };
        let mut sg = 0usize;
        let props = d.properties;
        let mut pair = |w: &mut Wave, v: u64| {
            w.s[sg] = v as u32;
            w.s[sg + 1] = (v >> 32) as u32;
            sg += 2;
        };
        if props & 1 != 0 {
            // Private segment buffer: four SGPRs, unused without scratch.
            pair(&mut w, 0);
            pair(&mut w, 0);
        }
        if props & 2 != 0 {
            pair(&mut w, DISPATCH_AT);
        }
        if props & 4 != 0 {
            pair(&mut w, 0);
        }
        if props & 8 != 0 {
            pair(&mut w, KERNARG_AT);
        }
        if props & 16 != 0 {
            pair(&mut w, 0);
        }
        if props & 32 != 0 {
            pair(&mut w, 0);
        }
        if props & 64 != 0 {
            sg += 1;
        }
        let user = ((d.rsrc2 >> 1) & 31) as usize;
        if sg > user {
            return Err(format!("the descriptor enables {sg} user SGPRs but counts {user}"));
        }
        let mut sg = user;
        for dim in 0..3 {
            if d.rsrc2 & (1 << (7 + dim)) != 0 {
                w.s[sg] = l.block_id[dim];
                sg += 1;
            }
        }
        let ids = (d.rsrc2 >> 11) & 3;
        if l.packed_ids {
            w.v[0] = l.thread_id[0] | (l.thread_id[1] << 10) | (l.thread_id[2] << 20);
        } else {
            for dim in 0..=ids as usize {
                w.v[dim] = l.thread_id[dim];
            }
        }
        w.s[EXEC] = 1;
        Ok(w)
    }

    fn active(&self) -> bool {
        self.s[EXEC] & 1 != 0
    }

    fn read(&self, s: &Src, comp: usize) -> Result<u32, String> {
        let v = match &s.op {
            Opnd::S(i, _) => {
                if *i == NULL {
                    0
                } else {
                    self.s[i + comp]
                }
            }
            Opnd::V(i, _) => self.v[i + comp],
            Opnd::K(k) => {
                if comp == 0 {
                    *k
                } else if *k as i32 >= -16 && (*k as i32) < 0 {
                    // The high word of a sign-extended negative inline integer.
                    u32::MAX
                } else {
                    0
                }
            }
            Opnd::Other(t) => return Err(format!("operand {t:?} is not a value")),
        };
        let v = if s.abs { v & 0x7FFF_FFFF } else { v };
        Ok(if s.neg { v ^ 0x8000_0000 } else { v })
    }

    fn read64(&self, s: &Src) -> Result<u64, String> {
        Ok(self.read(s, 0)? as u64 | (self.read(s, 1)? as u64) << 32)
    }

    fn write(&mut self, d: &Src, comp: usize, v: u32) -> Result<(), String> {
        match d.op {
            Opnd::S(i, _) => {
                if i != NULL {
                    self.s[i + comp] = v;
                }
            }
            Opnd::V(i, _) => {
                if self.active() {
                    self.v[i + comp] = v;
                }
            }
            _ => return Err(format!("cannot write {:?}", d.op)),
        }
        Ok(())
    }

    fn write64(&mut self, d: &Src, v: u64) -> Result<(), String> {
        self.write(d, 0, v as u32)?;
        self.write(d, 1, (v >> 32) as u32)
    }

    /// Writes a lane mask (a compare's or a carry's): bit 0 is this lane, the rest 0.
    fn write_mask(&mut self, d: &Src, bit: bool) -> Result<(), String> {
        let bit = bit && self.active();
        match d.op {
            Opnd::S(i, n) => {
                if i != NULL {
                    self.s[i] = bit as u32;
                    if n == 2 || (self.wave64 && n == 1 && (i == VCC || i == EXEC)) {
                        self.s[i + 1] = 0;
                    }
                }
                Ok(())
            }
            _ => Err(format!("a lane mask cannot go to {:?}", d.op)),
        }
    }

    fn mask_bit(&self, s: &Src) -> Result<bool, String> {
        Ok(self.read(s, 0)? & 1 != 0)
    }

    fn exec_mask(&self) -> u64 {
        self.s[EXEC] as u64 | if self.wave64 { (self.s[EXEC + 1] as u64) << 32 } else { 0 }
    }

    fn vcc_mask(&self) -> u64 {
        self.s[VCC] as u64 | if self.wave64 { (self.s[VCC + 1] as u64) << 32 } else { 0 }
    }

    fn step(&mut self, ins: &Inst) -> Result<Flow, String> {
        if let Some(y) = &ins.dual {
            // Both halves read the registers as they were before the pair.
            let Some(Opnd::V(d, 1)) = ins.ops.first().map(|s| &s.op) else {
                return Err("a dual-issue half without one vector destination".into());
            };
            let before = self.v[*d];
            let single = Inst { dual: None, ..ins.clone() };
            self.step(&single)?;
            let x = std::mem::replace(&mut self.v[*d], before);
            self.step(y)?;
            self.v[*d] = x;
            return Ok(Flow::Next);
        }
        for m in &ins.mods {
            if m == "clamp" || m.starts_with("mul:") || m.starts_with("div:") {
                return Err(format!("output modifier {m} is not modelled"));
            }
        }
        let mn = ins.mn.as_str();
        let o = &ins.ops;
        let op = |k: usize| o.get(k).ok_or_else(|| format!("operand {k} missing"));
        if mn.starts_with("s_") {
            return self.scalar(mn, ins);
        }
        if mn.starts_with("global_") || mn.starts_with("flat_") {
            return self.memory(mn, ins).map(|_| Flow::Next);
        }
        if !mn.starts_with("v_") {
            return Err("not modelled".into());
        }
        if let Some(cmp) = mn.strip_prefix("v_cmpx_") {
            // gfx10 writes only `exec`; gfx9 also the named mask (`vcc`, an SGPR pair).
            let first = usize::from(o.len() == 3);
            let r = self.compare(cmp, op(first)?, op(first + 1)?)?;
            if first == 1 {
                self.write_mask(op(0)?, r)?;
            }
            let bit = r && self.active();
            self.s[EXEC] = bit as u32;
            self.s[EXEC + 1] = 0;
            return Ok(Flow::Next);
        }
        if let Some(cmp) = mn.strip_prefix("v_cmp_") {
            let r = self.compare(cmp, op(1)?, op(2)?)?;
            self.write_mask(op(0)?, r)?;
            return Ok(Flow::Next);
        }
        // Carry-producing integer additions: dst, carry out, a, b[, carry in].
        let carry = match mn {
            "v_add_co_u32" | "v_add_co_ci_u32" | "v_addc_co_u32" => Some(0),
            "v_sub_co_u32" | "v_sub_co_ci_u32" | "v_subb_co_u32" => Some(1),
            "v_subrev_co_u32" | "v_subrev_co_ci_u32" | "v_subbrev_co_u32" => Some(2),
            _ => None,
        };
        if let Some(kind) = carry {
            let (a, b) = (self.read(op(2)?, 0)? as u64, self.read(op(3)?, 0)? as u64);
            let cin = if o.len() > 4 { self.mask_bit(op(4)?)? as u64 } else { 0 };
            let (a, b) = if kind == 2 { (b, a) } else { (a, b) };
            let (r, c) = if kind == 0 {
                let r = a + b + cin;
                (r as u32, r >> 32 != 0)
            } else {
                let r = a.wrapping_sub(b).wrapping_sub(cin);
                (r as u32, b + cin > a)
            };
            self.write(op(0)?, 0, r)?;
            self.write_mask(op(1)?, c)?;
            return Ok(Flow::Next);
        }
        if matches!(mn, "v_mad_u64_u32" | "v_mad_i64_i32") {
            let (a, b, c) = (self.read(op(2)?, 0)?, self.read(op(3)?, 0)?, self.read64(op(4)?)?);
            let p = if mn == "v_mad_u64_u32" {
                (a as u64 * b as u64).wrapping_add(c)
            } else {
                ((a as i32 as i64 * b as i32 as i64) as u64).wrapping_add(c)
            };
            self.write64(op(0)?, p)?;
            self.write_mask(op(1)?, false)?;
            return Ok(Flow::Next);
        }
        if matches!(mn, "v_lshlrev_b64" | "v_lshrrev_b64" | "v_ashrrev_i64") {
            let sh = self.read(op(1)?, 0)? & 63;
            let x = self.read64(op(2)?)?;
            let r = match mn {
                "v_lshlrev_b64" => x << sh,
                "v_lshrrev_b64" => x >> sh,
                _ => ((x as i64) >> sh) as u64,
            };
            if self.active() {
                self.write64(op(0)?, r)?;
            }
            return Ok(Flow::Next);
        }
        if mn == "v_div_scale_f32" {
            // The division sequence (`v_div_scale`, `v_rcp`, fused refinements,
            // `v_div_fmas`, `v_div_fixup`) is taken as what it is for: the correctly
            // rounded quotient, which `v_div_fixup_f32` returns. No operand is scaled.
            let v = self.read(op(2)?, 0)?;
            self.write(op(0)?, 0, v)?;
            self.write_mask(op(1)?, false)?;
            return Ok(Flow::Next);
        }
        if mn == "v_readfirstlane_b32" {
            let v = self.read(op(1)?, 0)?;
            self.write(op(0)?, 0, v)?;
            return Ok(Flow::Next);
        }
        if mn == "v_cndmask_b32" {
            let sel = if o.len() > 3 { self.mask_bit(op(3)?)? } else { self.s[VCC] & 1 != 0 };
            let v = if sel { self.read(op(2)?, 0)? } else { self.read(op(1)?, 0)? };
            self.write(op(0)?, 0, v)?;
            return Ok(Flow::Next);
        }
        if let Some(p) = mn.strip_prefix("v_pk_") {
            return self.packed(p, ins).map(|_| Flow::Next);
        }
        if !self.active() {
            // Every remaining vector instruction writes only its vector destination.
            return Ok(Flow::Next);
        }
        let v = self.valu(mn, ins)?;
        self.write(op(0)?, 0, v)?;
        Ok(Flow::Next)
    }

    /// A packed f32 instruction (`v_pk_add_f32`, `v_pk_mul_f32`, `v_pk_fma_f32`,
    /// `v_pk_mov_b32`; gfx90a): two f32 lanes in a register pair. `op_sel` picks the
    /// half each source gives the low result (default low), `op_sel_hi` the high
    /// result's (default high); `neg_lo`/`neg_hi` negate a source for one result.
    fn packed(&mut self, p: &str, ins: &Inst) -> Result<(), String> {
        let o = &ins.ops;
        let n = o.len() - 1;
        let flags = |name: &str, default: bool| bits(modifier(&ins.mods, name), n, default);
        let (sel, sel_hi) = (flags("op_sel", false), flags("op_sel_hi", true));
        let (neg_lo, neg_hi) = (flags("neg_lo", false), flags("neg_hi", false));
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for k in 0..n {
            let s = &o[k + 1];
            let half = |h: bool| -> Result<u32, String> {
                match s.op {
                    Opnd::K(c) => Ok(c),
                    _ => self.read(s, h as usize),
                }
            };
            lo.push(half(sel[k])? ^ if neg_lo[k] { 0x8000_0000 } else { 0 });
            hi.push(half(sel_hi[k])? ^ if neg_hi[k] { 0x8000_0000 } else { 0 });
        }
        let f = |v: &[u32], k: usize| f32::from_bits(v[k]);
        let calc = |v: &[u32]| -> Result<u32, String> {
            Ok(match p {
                "add_f32" => (f(v, 0) + f(v, 1)).to_bits(),
                "mul_f32" => (f(v, 0) * f(v, 1)).to_bits(),
                "fma_f32" => f(v, 0).mul_add(f(v, 1), f(v, 2)).to_bits(),
                _ => return Err("not modelled".into()),
            })
        };
        let (rl, rh) = if p == "mov_b32" {
            // lo from src0's selected half, hi from src1's (op_sel only).
            let (a, b) = (&o[1], &o[2]);
            (
                self.read(a, sel[0] as usize)?,
                self.read(b, sel.get(1).copied().unwrap_or(false) as usize)?,
            )
        } else {
            (calc(&lo)?, calc(&hi)?)
        };
        if self.active() {
            self.write(&o[0], 0, rl)?;
            self.write(&o[0], 1, rh)?;
        }
        Ok(())
    }

    /// A vector compare `cmp` (`gt_f32`, `le_u32`, `class_f32`, ...) of lane 0.
    fn compare(&self, cmp: &str, a: &Src, b: &Src) -> Result<bool, String> {
        let (c, ty) = cmp.rsplit_once('_').ok_or("compare without a type")?;
        let (ua, ub) = (self.read(a, 0)?, self.read(b, 0)?);
        match ty {
            "f32" => {
                let (x, y) = (f32::from_bits(ua), f32::from_bits(ub));
                if c == "class" {
                    return Ok(ub & class_bit(x) != 0);
                }
                float_compare(c, x, y)
            }
            "u64" | "i64" => {
                let (x, y) = (self.read64(a)?, self.read64(b)?);
                let (x, y) = if ty == "i64" {
                    (x as i64 as i128, y as i64 as i128)
                } else {
                    (x as i128, y as i128)
                };
                int_compare(c, x, y)
            }
            "u32" | "i32" => {
                let (x, y) = if ty == "i32" {
                    (ua as i32 as i128, ub as i32 as i128)
                } else {
                    (ua as i128, ub as i128)
                };
                int_compare(c, x, y)
            }
            _ => Err(format!("compare type {ty} not modelled")),
        }
    }

    /// A vector ALU instruction's 32-bit result on lane 0.
    fn valu(&self, mn: &str, ins: &Inst) -> Result<u32, String> {
        let o = &ins.ops;
        let n = o.len();
        let u = |k: usize| -> Result<u32, String> {
            self.read(o.get(k).ok_or_else(|| format!("operand {k} missing"))?, 0)
        };
        let f = |k: usize| -> Result<f32, String> { u(k).map(f32::from_bits) };
        let fb = |x: f32| Ok(x.to_bits());
        match mn {
            "v_mov_b32" => u(1),
            "v_add_f32" => fb(f(1)? + f(2)?),
            "v_sub_f32" => fb(f(1)? - f(2)?),
            "v_subrev_f32" => fb(f(2)? - f(1)?),
            "v_mul_f32" => fb(f(1)? * f(2)?),
            "v_fma_f32" => fb(f(1)?.mul_add(f(2)?, f(3)?)),
            "v_fmac_f32" => fb(f(1)?.mul_add(f(2)?, f(0)?)),
            "v_fmaak_f32" => fb(f(1)?.mul_add(f(2)?, f(3)?)),
            // See `v_div_scale_f32`: no scaling, so the fused step of the sequence, and
            // the IEEE quotient numerator (src2) / denominator (src1) at the end.
            "v_div_fmas_f32" => fb(f(1)?.mul_add(f(2)?, f(3)?)),
            "v_div_fixup_f32" => fb(f(3)? / f(2)?),
            "v_fmamk_f32" => fb(f(1)?.mul_add(f(2)?, f(3)?)),
            "v_max_f32" => fb(f(1)?.max(f(2)?)),
            "v_min_f32" => fb(f(1)?.min(f(2)?)),
            "v_ldexp_f32" => fb(ldexp(f(1)?, u(2)? as i32)),
            "v_frexp_mant_f32" => fb(frexp(f(1)?).0),
            "v_frexp_exp_i32_f32" => Ok(frexp(f(1)?).1 as u32),
            "v_fract_f32" => {
                let x = f(1)?;
                fb(if x.is_finite() {
                    (x - x.floor()).min(f32::from_bits(0x3F7F_FFFF))
                } else {
                    f32::NAN
                })
            }
            "v_rndne_f32" => fb(f(1)?.round_ties_even()),
            "v_trunc_f32" => fb(f(1)?.trunc()),
            "v_floor_f32" => fb(f(1)?.floor()),
            "v_ceil_f32" => fb(f(1)?.ceil()),
            "v_cvt_f32_i32" => fb(u(1)? as i32 as f32),
            "v_cvt_f32_u32" => fb(u(1)? as f32),
            "v_cvt_i32_f32" => Ok(f(1)? as i32 as u32),
            "v_cvt_u32_f32" => Ok(f(1)? as u32),
            "v_rcp_f32" | "v_rcp_iflag_f32" => fb((1.0 / f(1)? as f64) as f32),
            "v_exp_f32" => fb((f(1)? as f64).exp2() as f32),
            "v_log_f32" => fb((f(1)? as f64).log2() as f32),
            "v_add_nc_u32" | "v_add_u32" => Ok(u(1)?.wrapping_add(u(2)?)),
            "v_sub_nc_u32" | "v_sub_u32" => Ok(u(1)?.wrapping_sub(u(2)?)),
            "v_subrev_nc_u32" | "v_subrev_u32" => Ok(u(2)?.wrapping_sub(u(1)?)),
            "v_mul_lo_u32" => Ok(u(1)?.wrapping_mul(u(2)?)),
            "v_mul_hi_u32" => Ok(((u(1)? as u64 * u(2)? as u64) >> 32) as u32),
            "v_mul_hi_i32" => Ok(((u(1)? as i32 as i64 * u(2)? as i32 as i64) >> 32) as u32),
            "v_mul_u32_u24" => Ok((u(1)? & 0xFF_FFFF).wrapping_mul(u(2)? & 0xFF_FFFF)),
            "v_mul_i32_i24" => Ok((i24(u(1)?).wrapping_mul(i24(u(2)?))) as u32),
            "v_mad_u32_u24" => {
                Ok((u(1)? & 0xFF_FFFF).wrapping_mul(u(2)? & 0xFF_FFFF).wrapping_add(u(3)?))
            }
            "v_mad_i32_i24" => Ok((i24(u(1)?).wrapping_mul(i24(u(2)?)) as u32).wrapping_add(u(3)?)),
            "v_and_b32" => Ok(u(1)? & u(2)?),
            "v_or_b32" => Ok(u(1)? | u(2)?),
            "v_xor_b32" => Ok(u(1)? ^ u(2)?),
            "v_not_b32" => Ok(!u(1)?),
            "v_bfrev_b32" => Ok(u(1)?.reverse_bits()),
            "v_xor3_b32" => Ok(u(1)? ^ u(2)? ^ u(3)?),
            "v_or3_b32" => Ok(u(1)? | u(2)? | u(3)?),
            "v_and_or_b32" => Ok((u(1)? & u(2)?) | u(3)?),
            "v_lshl_or_b32" => Ok((u(1)? << (u(2)? & 31)) | u(3)?),
            "v_lshl_add_u32" => Ok((u(1)? << (u(2)? & 31)).wrapping_add(u(3)?)),
            "v_add_lshl_u32" => Ok(u(1)?.wrapping_add(u(2)?) << (u(3)? & 31)),
            "v_add3_u32" => Ok(u(1)?.wrapping_add(u(2)?).wrapping_add(u(3)?)),
            "v_lshrrev_b32" => Ok(u(2)? >> (u(1)? & 31)),
            "v_lshlrev_b32" => Ok(u(2)? << (u(1)? & 31)),
            "v_ashrrev_i32" => Ok(((u(2)? as i32) >> (u(1)? & 31)) as u32),
            "v_alignbit_b32" => {
                Ok(((((u(1)? as u64) << 32) | u(2)? as u64) >> (u(3)? & 31)) as u32)
            }
            "v_alignbyte_b32" => {
                Ok(((((u(1)? as u64) << 32) | u(2)? as u64) >> (8 * (u(3)? & 3))) as u32)
            }
            "v_bfi_b32" => {
                let m = u(1)?;
                Ok((m & u(2)?) | (!m & u(3)?))
            }
            "v_bfe_u32" => Ok(bfe(u(1)?, u(2)?, u(3)?)),
            "v_bfe_i32" => {
                let w = u(3)? & 31;
                let x = bfe(u(1)?, u(2)?, w);
                Ok(if w == 0 { 0 } else { (((x << (32 - w)) as i32) >> (32 - w)) as u32 })
            }
            "v_ffbh_u32" | "v_clz_i32_u32" => {
                let x = u(1)?;
                Ok(if x == 0 { u32::MAX } else { x.leading_zeros() })
            }
            "v_ffbl_b32" | "v_ctz_i32_b32" => {
                let x = u(1)?;
                Ok(if x == 0 { u32::MAX } else { x.trailing_zeros() })
            }
            "v_min_u32" => Ok(u(1)?.min(u(2)?)),
            "v_max_u32" => Ok(u(1)?.max(u(2)?)),
            "v_min_i32" => Ok((u(1)? as i32).min(u(2)? as i32) as u32),
            "v_max_i32" => Ok((u(1)? as i32).max(u(2)? as i32) as u32),
            _ => Err(format!("not modelled ({n} operands)")),
        }
    }

    fn scalar(&mut self, mn: &str, ins: &Inst) -> Result<Flow, String> {
        let o = &ins.ops;
        let op = |k: usize| o.get(k).ok_or_else(|| format!("operand {k} missing"));
        let wide = mn.ends_with("_b64") || mn.ends_with("_u64") || mn.ends_with("_i64");
        let val = |w: &Self, k: usize| -> Result<u64, String> {
            let s = op(k)?;
            if wide {
                w.read64(s)
            } else {
                w.read(s, 0).map(|v| v as u64)
            }
        };
        let put = |w: &mut Self, v: u64| -> Result<(), String> {
            if wide {
                w.write64(op(0)?, v)
            } else {
                w.write(op(0)?, 0, v as u32)
            }
        };
        match mn {
            "s_endpgm" => return Ok(Flow::End),
            "s_waitcnt" | "s_waitcnt_vscnt" | "s_clause" | "s_nop" | "s_delay_alu"
            | "s_inst_prefetch" | "s_setprio" | "s_sendmsg" | "s_waitcnt_depctr"
            | "s_waitcnt_vmcnt" | "s_waitcnt_lgkmcnt" | "s_waitcnt_expcnt" => {}
            "s_branch" => return Ok(Flow::Jump(branch_offset(ins)?)),
            _ if mn.starts_with("s_cbranch_") => {
                let take = match &mn["s_cbranch_".len()..] {
                    "scc0" => !self.scc,
                    "scc1" => self.scc,
                    "vccz" => self.vcc_mask() == 0,
                    "vccnz" => self.vcc_mask() != 0,
                    "execz" => self.exec_mask() == 0,
                    "execnz" => self.exec_mask() != 0,
                    c => return Err(format!("branch condition {c} not modelled")),
                };
                if take {
                    return Ok(Flow::Jump(branch_offset(ins)?));
                }
            }
            _ if mn.starts_with("s_load_dword") => {
                let words = match &mn["s_load_dword".len()..] {
                    "" => 1,
                    "x2" => 2,
                    "x4" => 4,
                    "x8" => 8,
                    "x16" => 16,
                    w => return Err(format!("s_load_dword{w} not modelled")),
                };
                let base = self.read64(op(1)?)?;
                let off = self.read(op(2)?, 0)? as u64;
                for k in 0..words {
                    let v = self.mem.read_u32(base + off + 4 * k as u64)?;
                    self.write(op(0)?, k, v)?;
                }
            }
            "s_mov_b32" | "s_mov_b64" | "s_movk_i32" => {
                let v = val(self, 1)?;
                let v = if mn == "s_movk_i32" { v as u16 as i16 as i32 as u32 as u64 } else { v };
                put(self, v)?;
            }
            "s_add_u32" | "s_addc_u32" => {
                let c = if mn == "s_addc_u32" { self.scc as u64 } else { 0 };
                let r = val(self, 1)? + val(self, 2)? + c;
                self.scc = r >> 32 != 0;
                put(self, r & 0xFFFF_FFFF)?;
            }
            "s_sub_u32" | "s_subb_u32" => {
                let c = if mn == "s_subb_u32" { self.scc as u64 } else { 0 };
                let (a, b) = (val(self, 1)?, val(self, 2)?);
                self.scc = b + c > a;
                put(self, a.wrapping_sub(b).wrapping_sub(c) & 0xFFFF_FFFF)?;
            }
            "s_add_i32" | "s_sub_i32" => {
                let (a, b) = (val(self, 1)? as u32 as i32, val(self, 2)? as u32 as i32);
                let (r, ov) =
                    if mn == "s_add_i32" { a.overflowing_add(b) } else { a.overflowing_sub(b) };
                self.scc = ov;
                put(self, r as u32 as u64)?;
            }
            // gfx1150's scalar float instructions.
            "s_cvt_f32_i32" => put(self, (val(self, 1)? as u32 as i32 as f32).to_bits() as u64)?,
            "s_cvt_f32_u32" => put(self, (val(self, 1)? as u32 as f32).to_bits() as u64)?,
            "s_cvt_i32_f32" => {
                put(self, (f32::from_bits(val(self, 1)? as u32) as i32) as u32 as u64)?
            }
            "s_cvt_u32_f32" => put(self, (f32::from_bits(val(self, 1)? as u32) as u32) as u64)?,
            "s_add_f32" | "s_sub_f32" | "s_mul_f32" | "s_max_f32" | "s_min_f32" | "s_fmac_f32"
            | "s_fmaak_f32" | "s_fmamk_f32" => {
                let f = |w: &Self, k: usize| val(w, k).map(|v| f32::from_bits(v as u32));
                let r = match mn {
                    "s_add_f32" => f(self, 1)? + f(self, 2)?,
                    "s_sub_f32" => f(self, 1)? - f(self, 2)?,
                    "s_mul_f32" => f(self, 1)? * f(self, 2)?,
                    "s_max_f32" => f(self, 1)?.max(f(self, 2)?),
                    "s_min_f32" => f(self, 1)?.min(f(self, 2)?),
                    "s_fmac_f32" => f(self, 1)?.mul_add(f(self, 2)?, f(self, 0)?),
                    // fmaak: src0 * src1 + K; fmamk: src0 * K + src1 (K the literal).
                    _ => f(self, 1)?.mul_add(f(self, 2)?, f(self, 3)?),
                };
                put(self, r.to_bits() as u64)?;
            }
            "s_rndne_f32" | "s_trunc_f32" | "s_floor_f32" | "s_ceil_f32" => {
                let x = f32::from_bits(val(self, 1)? as u32);
                let r = match mn {
                    "s_rndne_f32" => x.round_ties_even(),
                    "s_trunc_f32" => x.trunc(),
                    "s_floor_f32" => x.floor(),
                    _ => x.ceil(),
                };
                put(self, r.to_bits() as u64)?;
            }
            _ if mn.starts_with("s_cmp_") && mn.ends_with("_f32") => {
                let c = &mn["s_cmp_".len()..mn.len() - 4];
                let (x, y) =
                    (f32::from_bits(val(self, 0)? as u32), f32::from_bits(val(self, 1)? as u32));
                self.scc = float_compare(c, x, y)?;
            }
            "s_abs_i32" => {
                let v = (val(self, 1)? as u32 as i32).wrapping_abs() as u32;
                self.scc = v != 0;
                put(self, v as u64)?;
            }
            "s_brev_b32" => {
                let v = (val(self, 1)? as u32).reverse_bits();
                put(self, v as u64)?;
            }
            "s_mul_i32" => {
                let r = (val(self, 1)? as u32).wrapping_mul(val(self, 2)? as u32);
                put(self, r as u64)?;
            }
            "s_mul_hi_u32" => {
                let r = (val(self, 1)? * val(self, 2)?) >> 32;
                put(self, r)?;
            }
            "s_lshl_b32" | "s_lshr_b32" | "s_ashr_i32" | "s_lshl_b64" | "s_lshr_b64"
            | "s_ashr_i64" => {
                let x = val(self, 1)?;
                let sh = self.read(op(2)?, 0)? & if wide { 63 } else { 31 };
                let bits = if wide { 64 } else { 32 };
                let r = match &mn[2..6] {
                    "lshl" => x << sh,
                    "lshr" => x >> sh,
                    _ => {
                        if wide {
                            ((x as i64) >> sh) as u64
                        } else {
                            ((x as u32 as i32) >> sh) as u32 as u64
                        }
                    }
                };
                let r = if bits == 32 { r & 0xFFFF_FFFF } else { r };
                self.scc = r != 0;
                put(self, r)?;
            }
            _ if mn.ends_with("_saveexec_b32") || mn.ends_with("_saveexec_b64") => {
                let src = val(self, 1)?;
                let exec = self.exec_mask();
                let new = match mn.split('_').nth(1).unwrap_or("") {
                    "and" => src & exec,
                    "or" => src | exec,
                    "xor" => src ^ exec,
                    "andn2" => src & !exec,
                    "orn2" => src | !exec,
                    o => return Err(format!("s_{o}_saveexec not modelled")),
                };
                let new = if self.wave64 { new } else { new & 0xFFFF_FFFF };
                put(self, exec)?;
                self.s[EXEC] = new as u32;
                self.s[EXEC + 1] = (new >> 32) as u32;
                self.scc = new != 0;
            }
            _ if mn.starts_with("s_cselect_") => {
                let v = if self.scc { val(self, 1)? } else { val(self, 2)? };
                put(self, v)?;
            }
            _ if mn.starts_with("s_cmp_") => {
                let (c, ty) =
                    mn["s_cmp_".len()..].split_once('_').ok_or("compare without a type")?;
                let (a, b) = (val(self, 0)?, val(self, 1)?);
                let (a, b) = match ty {
                    "i32" => (a as u32 as i32 as i128, b as u32 as i32 as i128),
                    "u32" => (a as i128, b as i128),
                    "u64" => {
                        let (a, b) = (self.read64(op(0)?)?, self.read64(op(1)?)?);
                        self.scc = match c {
                            "eq" => a == b,
                            "lg" | "ne" => a != b,
                            _ => return Err(format!("64-bit compare {c} not modelled")),
                        };
                        return Ok(Flow::Next);
                    }
                    t => return Err(format!("compare type {t} not modelled")),
                };
                self.scc = int_compare(c, a, b)?;
            }
            "s_bitcmp0_b32" | "s_bitcmp1_b32" => {
                let bit = (val(self, 0)? >> (val(self, 1)? & 31)) & 1;
                self.scc = (bit == 1) == (mn == "s_bitcmp1_b32");
            }
            "s_min_u32" | "s_max_u32" | "s_min_i32" | "s_max_i32" => {
                let (a, b) = (val(self, 1)? as u32, val(self, 2)? as u32);
                let (ka, kb) = if mn.ends_with("i32") {
                    (a as i32 as i64, b as i32 as i64)
                } else {
                    (a as i64, b as i64)
                };
                let first = if mn.starts_with("s_min") { ka < kb } else { ka > kb };
                self.scc = first;
                put(self, if first { a } else { b } as u64)?;
            }
            "s_bfe_u32" | "s_bfe_i32" => {
                let (x, ctl) = (val(self, 1)? as u32, val(self, 2)? as u32);
                let (off, w) = (ctl & 31, (ctl >> 16) & 127);
                let mut r = if w == 0 { 0 } else { bfe(x, off, w.min(32)) };
                if mn == "s_bfe_i32" && w > 0 && w < 32 {
                    r = (((r << (32 - w)) as i32) >> (32 - w)) as u32;
                }
                self.scc = r != 0;
                put(self, r as u64)?;
            }
            _ => {
                // The bitwise logic family: s_and_b32, s_andn2_b64, s_not_b32, ...
                let Some((name, _)) = mn[2..].rsplit_once('_') else {
                    return Err("not modelled".into());
                };
                let r = match name {
                    "not" => !val(self, 1)?,
                    "and" => val(self, 1)? & val(self, 2)?,
                    "or" => val(self, 1)? | val(self, 2)?,
                    "xor" => val(self, 1)? ^ val(self, 2)?,
                    "andn2" => val(self, 1)? & !val(self, 2)?,
                    "orn2" => val(self, 1)? | !val(self, 2)?,
                    "nand" => !(val(self, 1)? & val(self, 2)?),
                    "nor" => !(val(self, 1)? | val(self, 2)?),
                    "xnor" => !(val(self, 1)? ^ val(self, 2)?),
                    _ => return Err("not modelled".into()),
                };
                let r = if wide { r } else { r & 0xFFFF_FFFF };
                self.scc = r != 0;
                put(self, r)?;
            }
        }
        Ok(Flow::Next)
    }

    /// `global_load/store_*` and `flat_load/store_*`.
    fn memory(&mut self, mn: &str, ins: &Inst) -> Result<(), String> {
        let o = &ins.ops;
        let op = |k: usize| o.get(k).ok_or_else(|| format!("operand {k} missing"));
        let off = modifier(&ins.mods, "offset")
            .map(|v| v.parse::<i64>().map_err(|_| format!("offset {v:?}")))
            .transpose()?
            .unwrap_or(0);
        let kind = mn.split_once('_').map(|(_, k)| k).unwrap_or("");
        let (store, width) = match kind {
            k if k.starts_with("load_") => (false, &k[5..]),
            k if k.starts_with("store_") => (true, &k[6..]),
            k => return Err(format!("memory operation {k} not modelled")),
        };
        let (bytes, signed) = match width {
            "dword" => (4, false),
            "dwordx2" => (8, false),
            "dwordx3" => (12, false),
            "dwordx4" => (16, false),
            "ubyte" | "byte" => (1, false),
            "sbyte" => (1, true),
            "ushort" | "short" => (2, false),
            "sshort" => (2, true),
            w => return Err(format!("width {w} not modelled")),
        };
        // Address: a 64-bit vector pair with `off`, or a 32-bit vector offset plus a
        // scalar base (`saddr`).
        let (vaddr, saddr) = if store { (op(0)?, o.get(2)) } else { (op(1)?, o.get(2)) };
        let base = match saddr.map(|s| &s.op) {
            Some(Opnd::S(..)) if !mn.starts_with("flat_") => {
                self.read64(saddr.ok_or("no saddr")?)?.wrapping_add(self.read(vaddr, 0)? as u64)
            }
            _ => self.read64(vaddr)?,
        };
        if !self.active() {
            return Ok(());
        }
        let addr = (base as i64 + off) as u64;
        if store {
            let data = op(1)?;
            let mut k = 0;
            while k * 4 < bytes {
                let len = (bytes - 4 * k).min(4) as u64;
                let v = self.read(data, k)? as u64
                    & if len == 4 { u32::MAX as u64 } else { (1 << (8 * len)) - 1 };
                self.mem.write(addr + 4 * k as u64, len, v)?;
                self.stores.push((addr + 4 * k as u64, v, len));
                k += 1;
            }
        } else {
            let mut k = 0;
            while k * 4 < bytes {
                let len = (bytes - 4 * k).min(4) as u64;
                let mut v = self.mem.read(addr + 4 * k as u64, len)? as u32;
                if signed {
                    let sh = 32 - 8 * len as u32;
                    v = (((v << sh) as i32) >> sh) as u32;
                }
                self.write(op(0)?, k, v)?;
                k += 1;
            }
        }
        Ok(())
    }
}

fn branch_offset(ins: &Inst) -> Result<i16, String> {
    match ins.ops.first().map(|s| &s.op) {
        Some(Opnd::K(k)) => Ok(*k as u16 as i16),
        _ => Err("branch without an offset".into()),
    }
}

/// A float compare (`lt`, `nge`, `o`, ...): `None` from `partial_cmp` is unordered (a
/// NaN), for which the `n..` compares and `u` are true.
fn float_compare(c: &str, x: f32, y: f32) -> Result<bool, String> {
    let ord = x.partial_cmp(&y);
    let (lt, eq, gt) =
        (ord == Some(Ordering::Less), ord == Some(Ordering::Equal), ord == Some(Ordering::Greater));
    Ok(match c {
        "f" => false,
        "lt" => lt,
        "eq" => eq,
        "le" => lt || eq,
        "gt" => gt,
        "lg" => lt || gt,
        "ge" => gt || eq,
        "o" => ord.is_some(),
        "u" => ord.is_none(),
        "nge" => !(gt || eq),
        "nlg" => !(lt || gt),
        "ngt" => !gt,
        "nle" => !(lt || eq),
        "neq" => !eq,
        "nlt" => !lt,
        "tru" => true,
        _ => return Err(format!("float compare {c} not modelled")),
    })
}

fn int_compare(c: &str, x: i128, y: i128) -> Result<bool, String> {
    Ok(match c {
        "f" => false,
        "lt" => x < y,
        "eq" => x == y,
        "le" => x <= y,
        "gt" => x > y,
        "ne" | "lg" => x != y,
        "ge" => x >= y,
        "t" => true,
        _ => return Err(format!("integer compare {c} not modelled")),
    })
}

/// The `v_cmp_class_f32` bit of `x`: 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal,
/// 4 -subnormal, 5 -0, 6 +0, 7 +subnormal, 8 +normal, 9 +inf.
fn class_bit(x: f32) -> u32 {
    let neg = x.is_sign_negative();
    let k = if x.is_nan() {
        if x.to_bits() & 0x0040_0000 != 0 {
            1
        } else {
            0
        }
    } else if x.is_infinite() {
        if neg {
            2
        } else {
            9
        }
    } else if x == 0.0 {
        if neg {
            5
        } else {
            6
        }
    } else if x.is_subnormal() {
        if neg {
            4
        } else {
            7
        }
    } else if neg {
        3
    } else {
        8
    };
    1 << k
}

fn i24(x: u32) -> i32 {
    ((x << 8) as i32) >> 8
}

fn bfe(x: u32, off: u32, w: u32) -> u32 {
    let w = w & 31;
    if w == 0 {
        return 0;
    }
    (x >> (off & 31)) & ((1u32 << w) - 1)
}

/// `v_frexp_mant_f32` and `v_frexp_exp_i32_f32`: `x = m 2^e`, `m` in `[0.5, 1)`;
/// zero, infinities and NaN give `(x, 0)`.
fn frexp(x: f32) -> (f32, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let d = x as f64;
    let e = ((d.to_bits() >> 52) & 0x7FF) as i32 - 1022;
    ((d / 2f64.powi(e)) as f32, e)
}

/// `v_ldexp_f32`: `x 2^n`, rounded once.
fn ldexp(x: f32, n: i32) -> f32 {
    let n = n.clamp(-400, 400);
    (x as f64 * 2f64.powi(n / 2) * 2f64.powi(n - n / 2)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor with only the kernarg pointer (`s[0:1]`) and subnormals kept.
    fn descriptor(wave32: bool) -> Descriptor {
        Descriptor {
            rsrc1: 3 << 16,
            rsrc2: 2 << 1,
            properties: 8 | if wave32 { 1 << 10 } else { 0 },
        }
    }

    fn launch(wave32: bool, kernargs: Vec<u8>) -> Launch {
        Launch {
            descriptor: descriptor(wave32),
            packed_ids: false,
            block: [1, 1, 1],
            grid_blocks: [1, 1, 1],
            block_id: [0; 3],
            thread_id: [0; 3],
            kernargs,
            hidden_at: None,
        }
    }

    /// A loop over `i < n` whose body skips odd `i` by a branch, `acc = fma(float(i), 2,
    /// acc)` (`v_fmamk`: `src0 * K + src1`), then a divergent `if` whose lane is off:
    /// its write must not land. The backward branch at 0x138 returns to 0x11c
    /// (0x13c - 4 * 8), the forward one at 0x124 skips the 8-byte `v_fmamk`.
    const LOOP: &str = "
0000000000000100 <k>:
\ts_load_dwordx2 s[4:5], s[0:1], 0x0                       // 000000000100: F4040100 FA000000
\ts_load_dword s6, s[0:1], 0x8                             // 000000000108: F4000180 FA000008
\ts_waitcnt lgkmcnt(0)                                     // 000000000110: BF8CC07F
\tv_mov_b32_e32 v1, 0                                      // 000000000114: 7E020280
\ts_mov_b32 s7, 0                                          // 000000000118: BE870380
\tv_cvt_f32_u32_e32 v2, s7                                 // 00000000011C: 7E040C07
\ts_bitcmp1_b32 s7, 0                                      // 000000000120: BF0D8007
\ts_cbranch_scc1 2                                         // 000000000124: BF850002
\tv_fmamk_f32 v1, v2, 0x40000000, v1                       // 000000000128: 58020302 40000000
\ts_add_i32 s7, s7, 1                                      // 000000000130: 81078107
\ts_cmp_lt_u32 s7, s6                                      // 000000000134: BF0A0607
\ts_cbranch_scc1 65528                                     // 000000000138: BF85FFF8
\tv_mov_b32_e32 v3, s4                                     // 00000000013C: 7E060204
\tv_mov_b32_e32 v4, s5                                     // 000000000140: 7E080205
\tv_cmp_gt_f32_e32 vcc_lo, 0, v1                           // 000000000144: 7C080280
\ts_and_saveexec_b32 s8, vcc_lo                            // 000000000148: BE883C6A
\tv_mov_b32_e32 v1, -1.0                                   // 00000000014C: 7E0202F3
\ts_or_b32 exec_lo, exec_lo, s8                            // 000000000150: 887E087E
\tglobal_store_dword v[3:4], v1, off                       // 000000000154: DC708000 007D0103
\ts_endpgm                                                 // 00000000015C: BF810000
";

    #[test]
    fn a_loop_a_skipped_body_and_a_masked_write() {
        let prog = Program::from_listing(LOOP, "k").unwrap();
        for (n, want) in [(5u32, 12.0f32), (1, 0.0), (8, 24.0)] {
            let mut args = vec![0u8; 16];
            args[..8].copy_from_slice(&0x9000u64.to_le_bytes());
            args[8..12].copy_from_slice(&n.to_le_bytes());
            let mut mem = Memory::default();
            mem.map(0x9000, vec![0; 4]);
            let stores = prog.run(&launch(true, args), &mut mem).unwrap();
            assert_eq!(stores, vec![(0x9000, want.to_bits() as u64, 4)], "n = {n}");
            assert_eq!(mem.read_u32(0x9000).unwrap(), want.to_bits());
        }
    }

    /// A straight-line listing of `lines` (each given 8 bytes), stored as `v[200:201]`
    /// points: the test's stores name what they check.
    fn run_lines(lines: &[&str], wave32: bool) -> Vec<u32> {
        let mut text = String::from("\n0000000000000100 <k>:\n");
        let mut addr = 0x100;
        let all = ["v_mov_b32_e32 v200, 0x9000", "v_mov_b32_e32 v201, 0"]
            .iter()
            .chain(lines)
            .chain(&["s_endpgm"]);
        for l in all {
            text += &format!("\t{l:56} // {addr:012X}: 00000000 00000000\n");
            addr += 8;
        }
        let prog = Program::from_listing(&text, "k").unwrap();
        let mut mem = Memory::default();
        mem.map(0x9000, vec![0; 256]);
        let stores = prog.run(&launch(wave32, vec![0; 16]), &mut mem).unwrap();
        stores.iter().map(|s| s.1 as u32).collect()
    }

    #[test]
    fn integer_and_bit_instructions() {
        let out = run_lines(
            &[
                "v_mov_b32_e32 v1, 0x89abcdef",
                "v_mov_b32_e32 v2, 0x01234567",
                "v_alignbit_b32 v3, v1, v2, 8",
                "global_store_dword v[200:201], v3, off",
                "v_bfe_u32 v3, v1, 4, 12",
                "global_store_dword v[200:201], v3, off offset:4",
                "v_ffbh_u32_e32 v3, v2",
                "global_store_dword v[200:201], v3, off offset:8",
                "v_mov_b32_e32 v4, 0xffffffff",
                "v_mov_b32_e32 v5, 7",
                "v_mad_u64_u32 v[6:7], null, v4, v4, v[4:5]",
                "global_store_dwordx2 v[200:201], v[6:7], off offset:12",
                "v_add_co_u32 v8, vcc_lo, v4, 2",
                "v_add_co_ci_u32_e32 v9, vcc_lo, 0, v5, vcc_lo",
                "global_store_dwordx2 v[200:201], v[8:9], off offset:20",
                "v_bfi_b32 v3, 0xffff0000, v1, v2",
                "global_store_dword v[200:201], v3, off offset:28",
                "v_mad_i32_i24 v3, v4, 5, 3",
                "global_store_dword v[200:201], v3, off offset:32",
                "s_mov_b32 s10, 3",
                "s_mov_b32 s11, 0x80000000",
                "s_lshl_b64 s[12:13], s[10:11], 31",
                "v_mov_b32_e32 v3, s12",
                "v_mov_b32_e32 v10, s13",
                "global_store_dwordx2 v[200:201], v[3:4], off offset:36",
                "global_store_dword v[200:201], v10, off offset:44",
            ],
            true,
        );
        // alignbit: ({v1:v2} >> 8) low word; bfe: bits 4..16 of v1; ffbh: leading zeros.
        assert_eq!(out[0], 0xef01_2345);
        assert_eq!(out[1], 0xcde);
        assert_eq!(out[2], 7);
        // (2^32-1)^2 + (7 * 2^32 + 2^32 - 1) = 2^64 - 2^33 + 1 + 2^35 - 1 (mod 2^64).
        let m = (0xffff_ffffu64 * 0xffff_ffff).wrapping_add((7u64 << 32) | 0xffff_ffff);
        assert_eq!((out[3], out[4]), (m as u32, (m >> 32) as u32));
        // 0xffffffff + 2 carries into the high word: 7 + 0 + 1.
        assert_eq!((out[5], out[6]), (1, 8));
        assert_eq!(out[7], 0x89ab_4567);
        // -1 * 5 + 3 in 24-bit signed arithmetic.
        assert_eq!(out[8], (-2i32) as u32);
        // (0x80000000_00000003 << 31): low word 0x80000000, high word 1.
        assert_eq!((out[9], out[11]), (0x8000_0000, 1));
    }

    #[test]
    fn float_instructions_and_modifiers() {
        let out = run_lines(
            &[
                "v_mov_b32_e32 v1, 0x3fc00000",
                "v_mov_b32_e32 v2, 0x40400000",
                "v_fmaak_f32 v3, v1, v2, 0x3f800000",
                "global_store_dword v[200:201], v3, off",
                "v_fmamk_f32 v3, v1, 0x40800000, v2",
                "global_store_dword v[200:201], v3, off offset:4",
                "v_fma_f32 v3, -v1, |v2|, 1.0",
                "global_store_dword v[200:201], v3, off offset:8",
                "v_frexp_mant_f32_e32 v3, v2",
                "v_frexp_exp_i32_f32_e32 v4, v2",
                "global_store_dwordx2 v[200:201], v[3:4], off offset:12",
                "v_ldexp_f32 v3, v1, -3",
                "global_store_dword v[200:201], v3, off offset:20",
                "v_cmp_class_f32_e64 s4, v1, 0x100",
                "v_cndmask_b32_e64 v3, 0, -v2, s4",
                "global_store_dword v[200:201], v3, off offset:24",
                "v_pk_add_f32 v[6:7], v[1:2], v[1:2] neg_lo:[0,1]",
                "global_store_dwordx2 v[200:201], v[6:7], off offset:28",
                "v_pk_mul_f32 v[6:7], v[1:2], v[1:2] op_sel:[1,0] op_sel_hi:[0,1]",
                "global_store_dwordx2 v[200:201], v[6:7], off offset:36",
                "v_fract_f32_e32 v3, -v1",
                "global_store_dword v[200:201], v3, off offset:44",
            ],
            false,
        );
        let f: Vec<f32> = out.iter().map(|&b| f32::from_bits(b)).collect();
        assert_eq!(f[0], 1.5 * 3.0 + 1.0);
        assert_eq!(f[1], 1.5 * 4.0 + 3.0);
        assert_eq!(f[2], -1.5 * 3.0 + 1.0);
        assert_eq!((f[3], out[4]), (0.75, 2));
        assert_eq!(f[5], 1.5 / 8.0);
        // 1.5 is a positive normal (class bit 8): the negated second source.
        assert_eq!(f[6], -3.0);
        // Low lane: 1.5 + -1.5; high lane: 3 + 3.
        assert_eq!((f[7], f[8]), (0.0, 6.0));
        // op_sel: the low result takes src0's high half (3) and src1's low (1.5); the high
        // result src0's low (1.5, op_sel_hi 0) and src1's high (3).
        assert_eq!((f[9], f[10]), (4.5, 4.5));
        assert_eq!(f[11], 0.5);
    }

    /// gfx11: a dual-issue pair reads the registers as they were before it (here the
    /// second half reads `v1`, which the first half writes), and the renamed memory and
    /// scalar instructions run as their earlier forms.
    #[test]
    fn gfx11_dual_issue_and_names() {
        let listing = super::super::gfx11_names(
            "\n0000000000000100 <k>:
\tv_mov_b32_e32 v1, 2.0 // 000000000100: 00000000 00000000
\tv_mov_b32_e32 v2, 0x9000 // 000000000108: 00000000 00000000
\tv_mov_b32_e32 v3, 0 // 000000000110: 00000000 00000000
\tv_dual_mul_f32 v1, v1, v1 :: v_dual_add_f32 v4, v1, 1.0 // 000000000118: 00000000 00000000
\ts_mov_b32 s4, 1 // 000000000120: 00000000 00000000
\ts_and_not1_saveexec_b32 s5, s4 // 000000000128: 00000000 00000000
\tglobal_store_b64 v[2:3], v[0:1], off // 000000000130: 00000000 00000000
\ts_or_b32 exec_lo, exec_lo, s5 // 000000000138: 00000000 00000000
\tglobal_store_b64 v[2:3], v[4:5], off offset:8 // 000000000140: 00000000 00000000
\ts_endpgm // 000000000148: 00000000
",
        );
        assert!(
            listing.contains("s_andn2_saveexec_b32") && listing.contains("global_store_dwordx2")
        );
        let prog = Program::from_listing(&listing, "k").unwrap();
        let mut mem = Memory::default();
        mem.map(0x9000, vec![0; 16]);
        let stores = prog.run(&launch(true, vec![0; 16]), &mut mem).unwrap();
        // `s4 & !exec` is 0: the first store is masked off; exec restored, the second
        // stores v4 = 2 + 1 (the old v1), not 4 + 1.
        assert_eq!(stores.len(), 2, "{stores:?}");
        assert_eq!(stores[0], (0x9008, 3.0f32.to_bits() as u64, 4));
        let v1 = mem.read_u32(0x9000).unwrap();
        assert_eq!(v1, 0, "the masked store wrote");
    }

    #[test]
    fn an_unknown_executed_instruction_is_an_error_naming_it() {
        let text = "\n0000000000000100 <k>:\n\tv_sin_f32_e32 v1, v2 // 000000000100: 7E026B02\n\ts_endpgm // 000000000104: BF810000\n";
        let prog = Program::from_listing(text, "k").unwrap();
        let err = prog.run(&launch(true, vec![0; 16]), &mut Memory::default()).unwrap_err();
        assert!(err.contains("v_sin_f32_e32 v1, v2") && err.contains("not modelled"), "{err}");
        // A store outside the mapped memory names the address.
        let text = "\n0000000000000100 <k>:\n\tv_mov_b32_e32 v1, 0x40 // 000000000100: 00000000\n\tv_mov_b32_e32 v2, 0 // 000000000104: 00000000\n\tglobal_store_dword v[1:2], v1, off // 000000000108: 00000000 00000000\n\ts_endpgm // 000000000110: BF810000\n";
        let prog = Program::from_listing(text, "k").unwrap();
        let err = prog.run(&launch(true, vec![0; 16]), &mut Memory::default()).unwrap_err();
        assert!(err.contains("0x40"), "{err}");
        // A kernel that flushes subnormals is refused.
        let mut l = launch(true, vec![0; 16]);
        l.descriptor.rsrc1 = 0;
        let err = prog.run(&l, &mut Memory::default()).unwrap_err();
        assert!(err.contains("denormal"), "{err}");
    }
}
