//! `cuobjdump -sass` listings of NVIDIA cubins, evaluated as trees (see the parent
//! module). Predicated instructions (`@P0 ...`) are evaluated as if their predicate
//! held, like the other side of a forward branch; `BRA` to an earlier address closes a
//! loop.

use super::{evaluate, Eval, Id, Item, Kernel, Node, Store};

/// One instruction: address, mnemonic (with its dot modifiers), operands.
struct Ins {
    addr: u64,
    /// Whether a predicate guards the instruction (`@P0 ...`).
    predicated: bool,
    mn: String,
    ops: Vec<String>,
}

fn kernel_lines(listing: &str, kernel: &str) -> Result<Vec<Ins>, String> {
    let head = format!("Function : {kernel}");
    let start = listing
        .lines()
        .position(|l| l.trim() == head)
        .ok_or_else(|| format!("{kernel} not in the SASS listing"))?;
    let mut out = Vec::new();
    for line in listing.lines().skip(start + 1) {
        let t = line.trim();
        if t.starts_with("Function :") || t.starts_with("....") {
            break;
        }
        // "/*0470*/   @P0 FFMA.FTZ R5, R8, R9, R5 ;   /* 0x... */"
        let Some(rest) = t.strip_prefix("/*") else { continue };
        let Some((addr, body)) = rest.split_once("*/") else { continue };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else { continue };
        let body = body.split(';').next().unwrap_or("").trim();
        let predicated = body.starts_with('@');
        let body = match body.strip_prefix('@') {
            Some(b) => b.split_once(char::is_whitespace).map(|x| x.1).unwrap_or("").trim(),
            None => body,
        };
        let (mn, ops) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        let ops = ops.split(',').map(|o| o.trim().to_string()).filter(|o| !o.is_empty()).collect();
        out.push(Ins { addr, predicated, mn: mn.to_string(), ops });
    }
    if out.is_empty() {
        return Err(format!("{kernel}: no instructions"));
    }
    Ok(out)
}

/// The register an operand names, without its reuse flag, half selector, width or
/// sign/abs modifiers: `-|R6.reuse.H1_H1|` -> `R6`.
fn base_reg(op: &str) -> String {
    let op = op.trim_start_matches('-').trim_start_matches('!').trim_matches('|');
    op.split('.').next().unwrap_or(op).to_string()
}

/// The registers a destination writes: `R4` for a 32-bit result, `R4, R5` for `.64`
/// (`LDG.E.64`, `IMAD.WIDE`), four for `.128`.
fn dest_regs(mn: &str, op: &str) -> Vec<String> {
    let r = base_reg(op);
    let n = if mn.contains(".128") {
        4
    } else if mn.contains(".64") || mn.contains(".WIDE") {
        2
    } else {
        1
    };
    match r.strip_prefix('R').and_then(|x| x.parse::<u32>().ok()) {
        Some(i) => (0..n).map(|k| format!("R{}", i + k)).collect(),
        None => vec![r],
    }
}

/// The word `c[0x2][off]` names in the kernel's constant bank 2, if the operand is one.
fn bank2_word(op: &str, bank2: &[u32]) -> Option<u32> {
    let off = op.strip_prefix("c[0x2][0x")?.strip_suffix(']')?;
    let off = usize::from_str_radix(off, 16).ok()?;
    bank2.get(off / 4).copied()
}

/// The words of a kernel's constant bank `bank` (`.nv.constant<bank>.<kernel>`) in a
/// `cuobjdump -elf` dump: the compiler's literals that did not fit an instruction.
pub fn constant_bank(elf_dump: &str, kernel: &str, bank: u32) -> Vec<u32> {
    let head = format!(".nv.constant{bank}.{kernel}");
    let mut lines = elf_dump.lines().skip_while(|l| l.trim() != head);
    if lines.next().is_none() {
        return vec![];
    }
    let mut out = Vec::new();
    for l in lines {
        let t = l.trim();
        if t.is_empty() {
            break;
        }
        for w in t.split_whitespace() {
            match w.strip_prefix("0x").and_then(|h| u32::from_str_radix(h, 16).ok()) {
                Some(v) => out.push(v),
                None => return out,
            }
        }
    }
    out
}

/// The launch bound of a kernel (`__launch_bounds__`, the threads per block: the
/// product of `EIATTR_MAX_THREADS`'s three values) in a `cuobjdump -elf` dump.
pub fn max_threads(elf_dump: &str, kernel: &str) -> Option<u64> {
    let head = format!(".nv.info.{kernel}");
    let mut lines = elf_dump.lines().skip_while(|l| l.trim() != head).skip(1);
    let mut seen = false;
    for l in lines.by_ref() {
        let t = l.trim();
        if t.starts_with(".nv") {
            return None;
        }
        if t.ends_with("EIATTR_MAX_THREADS") {
            seen = true;
        } else if seen && t.starts_with("Value:") {
            let dims: Vec<u64> = t
                .trim_start_matches("Value:")
                .split_whitespace()
                .filter_map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
                .collect();
            return (dims.len() == 3).then(|| dims.iter().product());
        }
    }
    None
}

fn is_float_arith(base: &str) -> bool {
    matches!(base, "FADD" | "FMUL" | "FFMA" | "FMNMX")
}

impl Eval {
    fn sass_src(&mut self, op: &str) -> Id {
        let (neg, rest) = match op.strip_prefix('-') {
            Some(r) if !r.starts_with(|c: char| c.is_ascii_digit()) => (true, r),
            _ => (false, op),
        };
        let (abs, rest) = match rest.strip_prefix('|').and_then(|r| r.strip_suffix('|')) {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let reg = base_reg(rest);
        let mut id = if let Some(v) = bank2_word(rest, &self.bank2) {
            // A literal the compiler placed in constant bank 2 (`c[0x2][0x0]`).
            self.e.push(Node::Const(v))
        } else if rest.starts_with("c[0x0][") {
            // A kernel parameter (constant bank 0), read as an operand.
            self.e.push(Node::Sym("param".into()))
        } else if reg == "RZ" || reg == "URZ" {
            self.e.push(Node::Const(0))
        } else if let Some(h) = rest.strip_prefix("0x") {
            let v = u64::from_str_radix(h, 16).unwrap_or(0) as u32;
            self.e.push(Node::Const(v))
        } else if let Ok(f) = op.trim_start_matches('-').parse::<f32>() {
            // A float immediate (`0.0078740157186985015869`, `-0.5`).
            let f = if op.starts_with('-') { -f } else { f };
            return self.e.push(Node::Const(f.to_bits()));
        } else {
            self.read_reg(&reg)
        };
        // `.H1_H1` / `.H0_H0` select a half of a dword; only HADD2.F32 reads them here.
        if abs {
            id = self.e.abs(id);
        }
        if neg {
            id = self.negate(id);
        }
        id
    }

    fn sass_step(&mut self, ins: &Ins, ftz: &mut (usize, usize)) {
        let mn = ins.mn.as_str();
        let base = mn.split('.').next().unwrap_or(mn);
        let ops = &ins.ops;
        if is_float_arith(base) {
            ftz.1 += 1;
            if mn.contains(".FTZ") {
                ftz.0 += 1;
            }
        }
        let rounding = [".RZ", ".RM", ".RP"].iter().find(|r| mn.contains(*r));
        let src = |ev: &mut Eval, k: usize| -> Id {
            match ops.get(k) {
                Some(o) => ev.sass_src(o),
                None => ev.e.push(Node::Sym("missing".into())),
            }
        };
        let write = |ev: &mut Eval, v: Id| {
            if let Some(d) = ops.first() {
                for r in dest_regs(mn, d) {
                    ev.regs.insert(r, v);
                }
            }
        };
        match base {
            "STG" | "ST" | "STS" => {
                if let Some(v) = ops.last() {
                    let value = self.sass_src(v);
                    self.stores.push(Store { op: mn.to_string(), value });
                }
            }
            "LDG" | "LD" | "LDS" => {
                let offset = ops
                    .get(1)
                    .and_then(|a| a.rsplit_once('+'))
                    .and_then(|(_, o)| {
                        let o = o.trim_end_matches(']');
                        i64::from_str_radix(o.trim_start_matches("0x"), 16).ok()
                    })
                    .unwrap_or(0);
                if let Some(d) = ops.first() {
                    for (k, r) in dest_regs(mn, d).into_iter().enumerate() {
                        self.loads += 1;
                        let v = self.e.push(Node::Load {
                            id: self.loads,
                            lds: base == "LDS",
                            offset: offset + 4 * k as i64,
                        });
                        self.regs.insert(r, v);
                    }
                }
            }
            // SHFL.BFLY PT, Rd, Ra, lanemask, clamp
            "SHFL" if mn.contains("BFLY") && ops.len() >= 4 => {
                let x = self.sass_src(&ops[2]);
                let mask = self.sass_src(&ops[3]);
                let lane = self.e.push(Node::Sym("lane".into()));
                let addr = self.e.push(Node::Int("bfly".into(), vec![mask, lane]));
                let v = self.e.push(Node::Shuffle { addr, x });
                for r in dest_regs(mn, &ops[1]) {
                    self.regs.insert(r, v);
                }
            }
            // A kernel parameter loaded from constant bank 0 (`ULDC UR4, c[0x0][0x190]`):
            // the same opaque value as when an instruction reads it as an operand.
            "ULDC" | "LDC" if ops.get(1).is_some_and(|o| o.starts_with("c[0x0][")) => {
                let v = self.e.push(Node::Sym("param".into()));
                write(self, v);
            }
            "MOV" | "UMOV" if ops.len() == 2 => {
                let v = src(self, 1);
                write(self, v);
            }
            "IMAD" if mn.starts_with("IMAD.MOV") && ops.len() == 4 => {
                let v = src(self, 3);
                write(self, v);
            }
            "FADD" | "FMUL" | "FFMA" if rounding.is_some() => {
                let args: Vec<Id> = (1..ops.len()).map(|k| src(self, k)).collect();
                let name = format!("{}{}", base.to_lowercase(), rounding.unwrap().to_lowercase());
                let v = self.e.push(Node::Float(name, args));
                write(self, v);
            }
            "FADD" if ops.len() == 3 => {
                let (a, b) = (src(self, 1), src(self, 2));
                let v = self.e.add(a, b);
                write(self, v);
            }
            "FMUL" if ops.len() == 3 => {
                let (a, b) = (src(self, 1), src(self, 2));
                let v = self.e.mul(a, b);
                write(self, v);
            }
            "FFMA" if ops.len() == 4 => {
                let (a, b, c) = (src(self, 1), src(self, 2), src(self, 3));
                let v = self.e.fma(a, b, c);
                write(self, v);
            }
            // FMNMX d, a, b, !PT is the maximum, with PT the minimum.
            "FMNMX" if ops.len() == 4 => {
                let (a, b) = (src(self, 1), src(self, 2));
                let v = match ops[3].as_str() {
                    "!PT" => self.e.max(a, b),
                    "PT" => self.e.push(Node::Min(a, b)),
                    _ => self.e.push(Node::Float("fmnmx".into(), vec![a, b])),
                };
                write(self, v);
            }
            // HADD2.F32 d, -RZ, Rx.H0_H0: the f16 half of Rx, exactly, as f32.
            "HADD2" if mn == "HADD2.F32" && ops.len() == 3 && base_reg(&ops[1]) == "RZ" => {
                let hi = ops[2].contains(".H1_H1");
                let x = self.read_reg(&base_reg(&ops[2]));
                let v = self.e.push(Node::H2F { hi, x });
                write(self, v);
            }
            "I2FP" | "I2F" if ops.len() == 2 => {
                let x = src(self, 1);
                let v = self.e.push(Node::I2F(x));
                write(self, v);
            }
            // F2FP.F16.F32.PACK_AB d, a, b: a to f16 in the high half, b in the low.
            // (sm_80 spells it F2FP.PACK_AB.)
            "F2FP" if mn.contains("PACK_AB") && !mn.contains("BF16") && ops.len() == 3 => {
                let (a, b) = (src(self, 1), src(self, 2));
                let (ha, hb) = (self.e.f2h(a), self.e.f2h(b));
                let v = self.e.pack(hb, ha);
                write(self, v);
            }
            // HMUL2 d, a, b (and HFMA2 d, a, b, -RZ: the product plus -0, the same
            // bits): two f16 products, one rounding each, subnormals kept (no `.FTZ`):
            // `f16(mul(a, b))` of the halves widened exactly, as on AMDGPU
            // (`v_pk_mul_f16`). A source's `.H0_H0` / `.H1_H1` feeds that half to both.
            "HMUL2" | "HFMA2"
                if (mn == "HMUL2" && ops.len() == 3)
                    || (matches!(mn, "HFMA2" | "HFMA2.MMA")
                        && ops.len() == 4
                        && ops[3] == "-RZ"
                        && !ops[1..3].iter().any(|o| base_reg(o) == "RZ")) =>
            {
                let mut lanes = [0; 2];
                for (lane, o) in lanes.iter_mut().enumerate() {
                    let mut v = [0; 2];
                    for (k, x) in v.iter_mut().enumerate() {
                        let op = &ops[1 + k];
                        let hi = if op.contains(".H1_H1") {
                            true
                        } else if op.contains(".H0_H0") {
                            false
                        } else {
                            lane == 1
                        };
                        let r = self.read_reg(&base_reg(op));
                        *x = self.e.push(Node::H2F { hi, x: r });
                        if op.starts_with('-') {
                            *x = self.e.neg(*x);
                        }
                    }
                    let p = self.e.mul(v[0], v[1]);
                    *o = self.e.f2h(p);
                }
                let v = self.e.pack(lanes[0], lanes[1]);
                write(self, v);
            }
            "MUFU" | "FRND" | "F2F" | "FSEL" | "HADD2" | "HMUL2" | "HFMA2" | "FCHK" => {
                let args: Vec<Id> = (1..ops.len()).map(|k| src(self, k)).collect();
                let v = self.e.push(Node::Float(mn.to_lowercase(), args));
                write(self, v);
            }
            "STL" | "BRA" | "EXIT" | "BAR" | "NOP" | "RET" | "CALL" | "BSYNC" | "BSSY"
            | "WARPSYNC" | "DEPBAR" | "PREEXIT" | "ACQBULK" | "CCTL" | "MEMBAR" | "ERRBAR" => {}
            _ => {
                // Integer, predicate and address arithmetic: opaque. A sign-bit
                // LOP3 with 0x7fffffff is not followed (SASS uses |x| modifiers).
                if let Some(d) = ops.first() {
                    let args: Vec<Id> = (1..ops.len()).map(|k| src(self, k)).collect();
                    let v = self.e.push(Node::Int(base.to_string(), args));
                    for r in dest_regs(mn, d) {
                        self.regs.insert(r, v);
                    }
                }
            }
        }
    }
}

/// The registers an instruction writes (for the loop-carried sets).
fn written(ins: &Ins) -> Vec<String> {
    let base = ins.mn.split('.').next().unwrap_or("");
    match base {
        "STG" | "ST" | "STS" | "STL" | "BRA" | "EXIT" | "BAR" | "NOP" | "RET" | "CALL"
        | "BSYNC" | "BSSY" | "WARPSYNC" | "DEPBAR" | "PREEXIT" => vec![],
        "SHFL" => ins.ops.get(1).map(|d| dest_regs(&ins.mn, d)).unwrap_or_default(),
        _ => ins.ops.first().map(|d| dest_regs(&ins.mn, d)).unwrap_or_default(),
    }
}

/// Evaluates `kernel` in a `cuobjdump -sass` listing; `bank2` is its constant bank 2
/// ([`constant_bank`]), which holds literals such as `0x01010101` on some targets.
pub fn sass(listing: &str, kernel: &str, bank2: &[u32]) -> Result<Kernel, String> {
    let items: Vec<Item<Ins>> = kernel_lines(listing, kernel)?
        .into_iter()
        .map(|ins| {
            let target = ins
                .mn
                .starts_with("BRA")
                .then(|| ins.ops.last())
                .flatten()
                .and_then(|o| u64::from_str_radix(o.trim_start_matches("0x"), 16).ok());
            let writes =
                written(&ins).into_iter().filter(|r| r.starts_with('R') && r != "RZ").collect();
            let base = ins.mn.split('.').next().unwrap_or("");
            let uncond = matches!(base, "BRA" | "EXIT" | "RET") && !ins.predicated;
            Item { addr: ins.addr, target, uncond, writes, ins }
        })
        .collect();
    let mut ftz = (0, 0);
    let (ev, loops) =
        evaluate(kernel, &items, Eval::new(bank2.to_vec()), |ev, ins| ev.sass_step(ins, &mut ftz))?;
    Ok(Kernel { exprs: ev.e, stores: ev.stores, loops, ftz })
}

/// The first kernel in a SASS listing whose name starts with `prefix`.
pub fn find_sass_kernel(listing: &str, prefix: &str) -> Option<String> {
    listing.lines().find_map(|l| {
        l.trim().strip_prefix("Function : ").filter(|n| n.starts_with(prefix)).map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "
\t\tFunction : k
        /*0000*/                   MOV R3, RZ ;                  /* 0x0 */
                                                                 /* 0x0 */
        /*0010*/                   LDG.E R6, desc[UR4][R2.64] ;  /* 0x0 */
        /*0020*/                   HADD2.F32 R0, -RZ, R6.H1_H1 ; /* 0x0 */
        /*0030*/                   I2FP.F32.S32 R4, R4 ;         /* 0x0 */
        /*0040*/                   FFMA.FTZ R3, R0, R4, R3 ;     /* 0x0 */
        /*0050*/               @!P0 BRA 0x10 ;                   /* 0x0 */
        /*0060*/                   SHFL.BFLY PT, R5, R3, 0x10, 0x1f ; /* 0x0 */
        /*0070*/                   FADD.FTZ R5, R3, R5 ;         /* 0x0 */
        /*0080*/                   STG.E desc[UR4][R2.64], R5 ;  /* 0x0 */
        /*0090*/                   EXIT ;                        /* 0x0 */
        /*00a0*/                   BRA 0xa0;                     /* 0x0 */
\t\t..........
";

    #[test]
    fn a_sass_loop_and_butterfly_read_as_trees() {
        let k = sass(LISTING, "k", &[]).unwrap();
        assert_eq!(k.loops.len(), 1, "the trap BRA to itself is not a loop");
        let acc = k.accumulators(0);
        assert_eq!(acc.len(), 1);
        assert_eq!(k.exprs.render(acc[0]), "fma(h.hi, i, acc)");
        assert_eq!(k.exprs.render(k.stores[0].value), "add(acc, shfl^16(acc))");
        assert_eq!(k.ftz, (2, 2));
        assert_eq!(find_sass_kernel(LISTING, "k").as_deref(), Some("k"));
    }

    /// `HMUL2` and `HFMA2.MMA d, a, b, -RZ` are two f16 products each, read back by
    /// `HADD2.F32` as `f16(mul(..))` of the widened halves; a `.H1_H1` source feeds its
    /// high half to both products.
    #[test]
    fn packed_f16_products_read_as_rounded_products() {
        let listing = "
\t\tFunction : k
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;  /* 0x0 */
        /*0010*/                   LDG.E R6, desc[UR4][R2.64] ;  /* 0x0 */
        /*0020*/                   HMUL2 R8, R4, R6 ;            /* 0x0 */
        /*0030*/                   HFMA2.MMA R9, R4, R6.H1_H1, -RZ ; /* 0x0 */
        /*0040*/                   HADD2.F32 R10, -RZ, R8.H1_H1 ; /* 0x0 */
        /*0050*/                   HADD2.F32 R11, -RZ, R9.H0_H0 ; /* 0x0 */
        /*0060*/                   FADD.FTZ R12, R10, R11 ;      /* 0x0 */
        /*0070*/                   STG.E desc[UR4][R2.64], R12 ; /* 0x0 */
        /*0080*/                   EXIT ;                        /* 0x0 */
\t\t..........
";
        let k = sass(listing, "k", &[]).unwrap();
        assert_eq!(
            k.exprs.render(k.stores[0].value),
            "add(f16(mul(h.hi, h.hi)), f16(mul(h.hi, h.lo)))"
        );
    }

    #[test]
    fn constant_bank_words_are_read_from_the_elf_dump() {
        let dump = ".nv.constant2.k\n0x01010101 0x3f000000 \n\n.nv.constant0.k\n0x1\n";
        assert_eq!(constant_bank(dump, "k", 2), vec![0x0101_0101, 0x3f00_0000]);
        assert_eq!(bank2_word("c[0x2][0x4]", &[1, 2]), Some(2));
        assert_eq!(bank2_word("c[0x0][0x4]", &[1, 2]), None);
    }

    #[test]
    fn launch_bounds_are_read_from_the_elf_dump() {
        let dump = ".nv.info.k\n\t<0x1>\n\tAttribute:\tEIATTR_CUDA_API_VERSION\n\tFormat:\t                    EIFMT_SVAL\n\tValue:\t0x87 \n\t<0x2>\n\tAttribute:\tEIATTR_MAX_THREADS\n\t                    Format:\tEIFMT_SVAL\n\tValue:\t0x80 0x1 0x1 \n.nv.info.j\n";
        assert_eq!(max_threads(dump, "k"), Some(128));
        assert_eq!(max_threads(dump, "j"), None);
        assert_eq!(max_threads(dump, "x"), None);
    }
}
