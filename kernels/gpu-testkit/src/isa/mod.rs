//! The float operations of a compiled GPU kernel, read from its disassembly as
//! expression trees: which products are fused, in which order values are added, which
//! lanes a shuffle reads. The tests use it on ggml's own MMVQ and `quantize_q8_1`
//! code objects and compare the trees with the ones the twins' recipes
//! ([`tiercheck_core::gpu::Contraction`], warp size, warps per block) describe.
//!
//! # How a listing is evaluated
//! [`amdgpu`] reads `llvm-objdump -d` output of an AMDGPU code object: every
//! instruction is evaluated symbolically in program order, each register holding the
//! expression of its last write ([`Exprs`]). GPU code is mostly straight-line: a
//! divergent `if` is exec-masked code, not a jump, so evaluating both sides in order
//! is what the lanes that execute them compute. A *backward* branch closes a loop: its
//! body is evaluated once with every register it writes replaced by a loop-carried
//! symbol, so the accumulator's body expression reads `acc` (its value from the
//! previous iteration), and after the loop every such register reads `acc` again (its
//! value after the last iteration). Back edges to one header close one loop, whose body
//! runs to the last of them. Nested loops are refused. A *detour* is no loop: a block
//! control cannot fall into, entered by a forward branch from before the point its
//! unconditional backward branch returns to (a slow path laid out of line, such as a
//! 64-bit integer division of an index); it is evaluated where it lies, in program
//! order, which no float tree reads when the detour is integer arithmetic.
//!
//! Float instructions become [`Node`]s: `v_add/sub/mul/fma/fmac/fma_mix/pk_fma/pk_mul`,
//! `max/min`, the f16/int conversions, `v_div_fixup_f32` (the last step of the
//! correctly rounded division sequence, read as one `div`) and `ds_bpermute_b32`
//! (a cross-lane read whose lane the address says). Integer and bit instructions are
//! opaque [`Node::Int`] nodes: their values do not matter here, only which loads and
//! constants they reach (a `dp4a` with `0x01010101` is the sum of the other operand's
//! bytes; a shuffle's `xor` constant is its butterfly offset). A float instruction
//! the evaluator does not know becomes [`Node::Float`] and prints as `?name(...)`, so
//! it can never match a recipe by accident.
//!
//! [`sass()`] reads `cuobjdump -sass` output of an NVIDIA cubin the same way (`FADD`,
//! `FMUL`, `FFMA`, `FMNMX`, `HADD2.F32` conversions, `I2FP`, `SHFL.BFLY`, `LDS`/`STS`,
//! `LDG`/`STG`), and counts which float instructions flush subnormals (`.FTZ`).
//!
//! # Canonical form
//! [`Exprs::render`] prints a tree in a form where two trees print alike exactly when
//! they round alike: the two operands of an addition, of a product, of a maximum and
//! the two factors of an fma are sorted (IEEE addition and multiplication commute,
//! bit for bit); a negation is moved onto the product or sum it negates (`-a*b` and
//! `a*-b` round alike); `max(x, x)` (a canonicalization) is `x`. Association is kept:
//! `add(add(a, b), c)` and `add(a, add(b, c))` print differently. Leaves print by
//! what they are: `h.lo` / `h.hi` (an f16 half of a loaded dword, converted exactly),
//! `i` / `i1` (an integer converted to float; `i1` when it is built from a byte sum,
//! a `dp4a` with `0x01010101`), `f` (a loaded f32), `lds+N` (shared memory at byte
//! offset N), `acc` (a loop-carried value), and constants by their f32 value.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

pub mod exec;
mod sass;
pub use sass::{constant_bank, find_sass_kernel, max_threads, sass};

/// An expression's index in [`Exprs`].
pub type Id = usize;

/// One node of an expression tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A named leaf (expected trees are built from these).
    Leaf(String),
    /// An opaque value: a kernel argument, a register read before any write.
    Sym(String),
    /// A 32-bit constant (its bits).
    Const(u32),
    /// One dword of a global load (`lds == false`) or of a shared-memory read at
    /// byte `offset`.
    Load { id: usize, lds: bool, offset: i64 },
    /// A loop-carried register (inside the body: the previous iteration's value;
    /// after the loop: the last iteration's).
    Carried(String),
    /// An integer or bit operation, opaque.
    Int(String, Vec<Id>),
    /// `a + b` (one rounding).
    Add(Id, Id),
    /// `a * b` (one rounding).
    Mul(Id, Id),
    /// `a * b + c` with one rounding.
    Fma(Id, Id, Id),
    /// `-a`.
    Neg(Id),
    /// `|a|`.
    Abs(Id),
    /// `max(a, b)` (IEEE maxNum).
    Max(Id, Id),
    /// `min(a, b)`.
    Min(Id, Id),
    /// `num / den`, correctly rounded.
    Div(Id, Id),
    /// An integer converted to f32.
    I2F(Id),
    /// The low (`hi == false`) or high f16 half of a dword, converted to f32.
    H2F { hi: bool, x: Id },
    /// f32 rounded to f16.
    F2H(Id),
    /// Two f16 values (each an [`Node::F2H`] or an f16 bit pattern) packed into a
    /// dword (low, high).
    Pack(Id, Id),
    /// A value read from another lane (`ds_bpermute_b32`, DPP); `addr` is the lane
    /// address expression.
    Shuffle { addr: Id, x: Id },
    /// A float operation the evaluator does not model.
    Float(String, Vec<Id>),
}

/// An arena of expression trees.
#[derive(Clone, Debug, Default)]
pub struct Exprs {
    nodes: Vec<Node>,
}

impl Exprs {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node of `id`.
    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }

    fn push(&mut self, n: Node) -> Id {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    /// A named leaf.
    pub fn leaf(&mut self, name: &str) -> Id {
        self.push(Node::Leaf(name.to_string()))
    }
    /// A constant f32.
    pub fn constant(&mut self, v: f32) -> Id {
        self.push(Node::Const(v.to_bits()))
    }
    /// `a + b`.
    pub fn add(&mut self, a: Id, b: Id) -> Id {
        self.push(Node::Add(a, b))
    }
    /// `a * b`.
    pub fn mul(&mut self, a: Id, b: Id) -> Id {
        self.push(Node::Mul(a, b))
    }
    /// `fma(a, b, c)`.
    pub fn fma(&mut self, a: Id, b: Id, c: Id) -> Id {
        self.push(Node::Fma(a, b, c))
    }
    /// `-a`.
    pub fn neg(&mut self, a: Id) -> Id {
        self.push(Node::Neg(a))
    }
    /// `|a|`.
    pub fn abs(&mut self, a: Id) -> Id {
        self.push(Node::Abs(a))
    }
    /// `max(a, b)`.
    pub fn max(&mut self, a: Id, b: Id) -> Id {
        self.push(Node::Max(a, b))
    }
    /// `a / b`.
    pub fn div(&mut self, a: Id, b: Id) -> Id {
        self.push(Node::Div(a, b))
    }
    /// f32 to f16.
    pub fn f2h(&mut self, a: Id) -> Id {
        self.push(Node::F2H(a))
    }
    /// Two f16 in one dword.
    pub fn pack(&mut self, lo: Id, hi: Id) -> Id {
        self.push(Node::Pack(lo, hi))
    }
    /// A float operation the evaluator keeps opaque, by name (printed `?name(args)`):
    /// `rsq_f32`, `exp_f32`, `mufu.rcp`, `sel`, ...
    pub fn op(&mut self, name: &str, args: &[Id]) -> Id {
        self.push(Node::Float(name.to_string(), args.to_vec()))
    }
    /// An opaque value by name (printed `sym:name`), such as a kernel argument.
    pub fn sym(&mut self, name: &str) -> Id {
        self.push(Node::Sym(name.to_string()))
    }
    /// A butterfly read of lane `lane ^ offset` (printed `shfl^offset(x)`).
    pub fn shfl_xor(&mut self, x: Id, offset: u32) -> Id {
        let lane = self.push(Node::Sym("lane".into()));
        let k = self.push(Node::Const(offset));
        let addr = self.push(Node::Int("v_xor_b32".into(), vec![k, lane]));
        self.push(Node::Shuffle { addr, x })
    }

    /// Whether `id`'s tree contains a node for which `f` holds.
    pub fn any(&self, id: Id, f: &dyn Fn(&Node) -> bool) -> bool {
        let mut stack = vec![id];
        let mut seen = HashSet::new();
        while let Some(i) = stack.pop() {
            if !seen.insert(i) {
                continue;
            }
            let n = &self.nodes[i];
            if f(n) {
                return true;
            }
            stack.extend(children(n));
        }
        false
    }

    /// The canonical forms of every subtree of `id` (the tree itself included).
    pub fn subtree_forms(&self, id: Id) -> Vec<String> {
        let mut memo = HashMap::new();
        let mut stack = vec![id];
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        while let Some(i) = stack.pop() {
            if seen.insert(i) {
                out.push(self.render_in(i, &mut memo));
                stack.extend(children(&self.nodes[i]));
            }
        }
        out
    }

    /// The canonical form of `id`'s tree (see the module doc).
    pub fn render(&self, id: Id) -> String {
        let mut memo = HashMap::new();
        self.render_in(id, &mut memo)
    }

    fn int_class(&self, id: Id) -> &'static str {
        let ones = self.any(id, &|n| match n {
            Node::Int(op, args) if op.starts_with("v_dot4") || op == "IDP" => {
                args.iter().any(|&a| matches!(self.nodes[a], Node::Const(0x0101_0101)))
            }
            _ => false,
        });
        if ones {
            "i1"
        } else {
            "i"
        }
    }

    /// The half an `H2F` reads, seeing through `x >> 16` and `x & 0xffff`.
    fn half(&self, hi: bool, x: Id) -> String {
        match &self.nodes[x] {
            Node::Int(op, args) if op == "v_lshrrev_b32" && args.len() == 2 => {
                if matches!(self.nodes[args[0]], Node::Const(16)) && !hi {
                    return self.half(true, args[1]);
                }
                format!("h?{}", if hi { ".hi" } else { ".lo" })
            }
            Node::Int(op, args) if op == "v_and_b32" && args.len() == 2 && !hi => {
                if matches!(self.nodes[args[0]], Node::Const(0xffff)) {
                    return self.half(false, args[1]);
                }
                "h?.lo".into()
            }
            Node::Pack(lo, h) => {
                // A dword packed from two f16 values: the half is that value.
                self.render(if hi { *h } else { *lo })
            }
            Node::Load { lds: false, .. } => if hi { "h.hi" } else { "h.lo" }.into(),
            _ => format!("h?{}", if hi { ".hi" } else { ".lo" }),
        }
    }

    /// The butterfly offset of a shuffle address: the constant of an `xor` in it.
    fn xor_offset(&self, addr: Id) -> Option<u32> {
        let mut stack = vec![addr];
        while let Some(i) = stack.pop() {
            if let Node::Int(op, args) = &self.nodes[i] {
                if op.starts_with("v_xor_b32") || op == "bfly" {
                    for &a in args {
                        if let Node::Const(c) = self.nodes[a] {
                            return Some(c);
                        }
                    }
                }
            }
            stack.extend(children(&self.nodes[i]));
        }
        None
    }

    /// Strips negations: (sign, inner).
    fn unneg(&self, mut id: Id) -> (bool, Id) {
        let mut neg = false;
        while let Node::Neg(a) = self.nodes[id] {
            neg = !neg;
            id = a;
        }
        (neg, id)
    }

    /// A factor of a product as (negated, rendered magnitude): negations stripped, and a
    /// negative constant as the negation of its magnitude (`-8 * x` and `-(8 * x)`
    /// round alike).
    fn factor(&self, id: Id, memo: &mut HashMap<Id, String>) -> (bool, String) {
        let (neg, inner) = self.unneg(id);
        if let Node::Const(b) = self.nodes[inner] {
            if b & 0x8000_0000 != 0 && !f32::from_bits(b).is_nan() {
                let abs = Exprs { nodes: vec![Node::Const(b & 0x7fff_ffff)] };
                return (!neg, abs.render(0));
            }
        }
        (neg, self.render_in(inner, memo))
    }

    fn render_in(&self, id: Id, memo: &mut HashMap<Id, String>) -> String {
        if let Some(s) = memo.get(&id) {
            return s.clone();
        }
        let s = match &self.nodes[id] {
            Node::Leaf(n) => n.clone(),
            Node::Sym(n) => format!("sym:{n}"),
            Node::Const(b) => {
                let f = f32::from_bits(*b);
                if f.is_finite() && f.abs() >= 1e-30 || *b == 0 {
                    format!("{f:?}")
                } else if *b == 0x8000_0000 {
                    "-0.0".into()
                } else {
                    format!("{b:#x}")
                }
            }
            Node::Load { lds: true, offset, .. } => format!("lds+{offset}"),
            Node::Load { lds: false, .. } => "f".into(),
            Node::Carried(_) => "acc".into(),
            Node::Int(..) => self.int_class(id).into(),
            Node::I2F(x) => self.int_class(*x).into(),
            Node::H2F { hi, x } => self.half(*hi, *x),
            Node::F2H(x) => format!("f16({})", self.render_in(*x, memo)),
            Node::Pack(a, b) => {
                format!("pack({}, {})", self.render_in(*a, memo), self.render_in(*b, memo))
            }
            Node::Shuffle { addr, x } => match self.xor_offset(*addr) {
                Some(o) => format!("shfl^{o}({})", self.render_in(*x, memo)),
                None => format!("shfl?({})", self.render_in(*x, memo)),
            },
            Node::Neg(_) => {
                let (neg, inner) = self.unneg(id);
                let r = self.render_in(inner, memo);
                if neg {
                    format!("-{r}")
                } else {
                    r
                }
            }
            Node::Abs(a) => {
                let (_, inner) = self.unneg(*a);
                format!("abs({})", self.render_in(inner, memo))
            }
            // x + (-0) is x, bit for bit (SASS writes fabsf as `|x| + -RZ`).
            Node::Add(a, b) if matches!(self.nodes[*b], Node::Const(0x8000_0000)) => {
                self.render_in(*a, memo)
            }
            Node::Add(a, b) if matches!(self.nodes[*a], Node::Const(0x8000_0000)) => {
                self.render_in(*b, memo)
            }
            Node::Add(a, b) => {
                let mut v = [self.render_in(*a, memo), self.render_in(*b, memo)];
                v.sort();
                format!("add({}, {})", v[0], v[1])
            }
            Node::Mul(a, b) => {
                let (na, a) = self.factor(*a, memo);
                let (nb, b) = self.factor(*b, memo);
                let mut v = [a, b];
                v.sort();
                format!("{}mul({}, {})", if na != nb { "-" } else { "" }, v[0], v[1])
            }
            Node::Fma(a, b, c) => {
                let (na, a) = self.factor(*a, memo);
                let (nb, b) = self.factor(*b, memo);
                let mut v = [a, b];
                v.sort();
                let c = self.render_in(*c, memo);
                format!("fma({}{}, {}, {c})", if na != nb { "-" } else { "" }, v[0], v[1])
            }
            Node::Max(a, b) | Node::Min(a, b) => {
                let name = if matches!(self.nodes[id], Node::Max(..)) { "max" } else { "min" };
                let ra = self.render_in(*a, memo);
                let rb = self.render_in(*b, memo);
                if ra == rb {
                    ra
                } else {
                    let mut v = [ra, rb];
                    v.sort();
                    format!("{name}({}, {})", v[0], v[1])
                }
            }
            Node::Div(a, b) => {
                format!("div({}, {})", self.render_in(*a, memo), self.render_in(*b, memo))
            }
            Node::Float(name, args) => {
                let mut s = format!("?{name}(");
                for (k, &a) in args.iter().enumerate() {
                    if k > 0 {
                        s.push_str(", ");
                    }
                    let r = self.render_in(a, memo);
                    let _ = write!(s, "{r}");
                }
                s.push(')');
                s
            }
        };
        memo.insert(id, s.clone());
        s
    }
}

fn children(n: &Node) -> Vec<Id> {
    match n {
        Node::Leaf(_) | Node::Sym(_) | Node::Const(_) | Node::Load { .. } | Node::Carried(_) => {
            vec![]
        }
        Node::Int(_, a) | Node::Float(_, a) => a.clone(),
        Node::Add(a, b)
        | Node::Mul(a, b)
        | Node::Max(a, b)
        | Node::Min(a, b)
        | Node::Div(a, b)
        | Node::Pack(a, b) => vec![*a, *b],
        Node::Fma(a, b, c) => vec![*a, *b, *c],
        Node::Neg(a) | Node::Abs(a) | Node::I2F(a) | Node::F2H(a) => vec![*a],
        Node::H2F { x, .. } => vec![*x],
        Node::Shuffle { addr, x } => vec![*addr, *x],
    }
}

/// A store the kernel performs.
#[derive(Clone, Debug)]
pub struct Store {
    /// The mnemonic (`global_store_dword`, `global_store_byte`, `ds_write_b32`, ...).
    pub op: String,
    /// The stored value.
    pub value: Id,
}

/// One loop's carried values.
#[derive(Clone, Debug)]
pub struct Loop {
    /// Every register the body writes, with its value at the end of the body (in
    /// terms of the carried values).
    pub carried: Vec<(String, Id)>,
}

/// A kernel's disassembly, evaluated.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The trees.
    pub exprs: Exprs,
    /// The stores, in program order.
    pub stores: Vec<Store>,
    /// The loops, in program order.
    pub loops: Vec<Loop>,
    /// Float arithmetic instructions (add, multiply, fma, min/max) that flush
    /// subnormal inputs and results to zero (SASS `.FTZ`), and all of them. AMDGPU
    /// code sets the denormal mode per kernel, not per instruction: 0 and 0 there.
    pub ftz: (usize, usize),
}

impl Kernel {
    /// The float values a loop carries from one iteration to the next: the registers
    /// whose end-of-body value is float arithmetic on their own carried value.
    pub fn accumulators(&self, l: usize) -> Vec<Id> {
        let Some(lp) = self.loops.get(l) else { return vec![] };
        lp.carried
            .iter()
            .filter(|(r, v)| is_float(self.exprs.node(*v)) && self.float_reads(*v, r))
            .map(|(_, v)| *v)
            .collect()
    }
}

impl Kernel {
    /// Whether `id`'s float arithmetic reads the carried value of `reg` as a float
    /// operand (not through an integer, a conversion or a shuffle's address).
    fn float_reads(&self, id: Id, reg: &str) -> bool {
        let mut stack = vec![id];
        let mut seen = HashSet::new();
        while let Some(i) = stack.pop() {
            if !seen.insert(i) {
                continue;
            }
            match self.exprs.node(i) {
                Node::Carried(c) if c == reg => return true,
                Node::Int(..) | Node::I2F(_) | Node::H2F { .. } => {}
                Node::Shuffle { x, .. } => stack.push(*x),
                n => stack.extend(children(n)),
            }
        }
        false
    }
}

fn is_float(n: &Node) -> bool {
    matches!(
        n,
        Node::Add(..)
            | Node::Mul(..)
            | Node::Fma(..)
            | Node::Neg(_)
            | Node::Max(..)
            | Node::Min(..)
            | Node::Div(..)
            | Node::Float(..)
    )
}

/// The body of `kernel` in an `llvm-objdump -d` listing: its instructions, each with
/// its address and size in bytes.
fn kernel_lines<'a>(listing: &'a str, kernel: &str) -> Result<Vec<(u64, u64, &'a str)>, String> {
    kernel_body(listing, kernel, false)
}

/// The instructions of `kernel` up to its first `s_endpgm` or, with `whole`, up to the
/// next symbol (blocks laid out after the `s_endpgm` included).
fn kernel_body<'a>(
    listing: &'a str,
    kernel: &str,
    whole: bool,
) -> Result<Vec<(u64, u64, &'a str)>, String> {
    let head = format!("<{kernel}>:");
    let start = listing.find(&head).ok_or_else(|| format!("{kernel} not in the disassembly"))?;
    let mut out = Vec::new();
    for line in listing[start + head.len()..].lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.ends_with(">:") || t == "..." {
            // The next symbol, or zero padding after the kernel.
            break;
        }
        let (ins, comment) = match t.split_once("//") {
            Some((i, c)) => (i.trim(), c.trim()),
            None => (t, ""),
        };
        if ins.is_empty() {
            continue;
        }
        // The comment is "<address>: <word> <word> ...", a branch's followed by its
        // target as `<symbol+offset>` (not an instruction word).
        let (addr, words) = comment.split_once(':').unwrap_or(("", ""));
        let addr = u64::from_str_radix(addr.trim(), 16)
            .map_err(|_| format!("{kernel}: no address on the line {t:?}"))?;
        let words = words.split('<').next().unwrap_or("");
        let size = 4 * words.split_whitespace().count() as u64;
        out.push((addr, size, ins));
        if ins.starts_with("s_endpgm") && !whole {
            return Ok(out);
        }
    }
    if whole && out.iter().any(|(_, _, i)| i.starts_with("s_endpgm")) {
        return Ok(out);
    }
    Err(format!("{kernel}: no s_endpgm"))
}

/// Splits an instruction into its mnemonic, operands and modifiers (`name:value`
/// words, and bare words such as `off`, `glc`, `clamp`).
fn split(ins: &str) -> (&str, Vec<String>, Vec<String>) {
    let (mn, rest) = ins.split_once(char::is_whitespace).unwrap_or((ins, ""));
    let mut ops = Vec::new();
    let mut mods = Vec::new();
    // Operands are comma separated; the last one is followed by space-separated
    // modifiers. Brackets ([..]) never contain spaces in llvm-objdump output except
    // after commas inside op_sel lists, which have none.
    let mut depth = 0;
    let mut cur = String::new();
    let mut parts = Vec::new();
    for ch in rest.chars() {
        match ch {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    if !cur.trim().is_empty() {
        parts.push(cur);
    }
    let n = parts.len();
    for (k, p) in parts.into_iter().enumerate() {
        let p = p.trim().to_string();
        if k + 1 == n {
            let mut words = p.split_whitespace();
            if let Some(first) = words.next() {
                if is_modifier(first) {
                    mods.push(first.to_string());
                } else {
                    ops.push(first.to_string());
                }
            }
            mods.extend(words.map(str::to_string));
        } else {
            ops.push(p);
        }
    }
    (mn, ops, mods)
}

/// `offset:36`, `op_sel_hi:[0,1]`, `dst_sel:DWORD` (not a register range `v[8:9]`).
fn is_modifier(word: &str) -> bool {
    word.split_once(':').is_some_and(|(key, _)| {
        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The registers an operand names: `v3` -> [v3], `v[4:5]` -> [v4, v5].
fn regs(op: &str) -> Vec<String> {
    let op = op.trim_start_matches('-').trim_matches('|');
    for p in ["v", "s", "a"] {
        if let Some(r) = op.strip_prefix(p).and_then(|r| r.strip_prefix('[')) {
            if let Some((a, b)) = r.trim_end_matches(']').split_once(':') {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    return (a..=b).map(|i| format!("{p}{i}")).collect();
                }
            }
        }
    }
    vec![op.to_string()]
}

fn modifier<'a>(mods: &'a [String], name: &str) -> Option<&'a str> {
    mods.iter().find_map(|m| m.strip_prefix(name).and_then(|v| v.strip_prefix(':')))
}

/// `[1,0,0]` -> [true, false, false].
fn bits(v: Option<&str>, n: usize, default: bool) -> Vec<bool> {
    match v {
        Some(v) => {
            let mut b: Vec<bool> = v
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|x| x.trim() == "1")
                .collect();
            b.resize(n, default);
            b
        }
        None => vec![default; n],
    }
}

struct Eval {
    e: Exprs,
    regs: HashMap<String, Id>,
    loads: usize,
    stores: Vec<Store>,
    /// SASS only: the kernel's constant bank 2.
    bank2: Vec<u32>,
}

impl Eval {
    fn read_reg(&mut self, r: &str) -> Id {
        if let Some(&id) = self.regs.get(r) {
            return id;
        }
        let id = self.e.push(Node::Sym(r.to_string()));
        self.regs.insert(r.to_string(), id);
        id
    }

    /// The value of a source operand; `comp` picks a dword of a register tuple.
    fn src(&mut self, op: &str, comp: usize) -> Id {
        let op = op.trim();
        let (neg, op) = match op.strip_prefix('-') {
            // A negative inline integer constant, not a negation.
            Some(r) if r.chars().next().is_some_and(|c| c.is_ascii_digit()) => (false, op),
            Some(r) => (true, r),
            None => (false, op),
        };
        let (abs, op) = match op.strip_prefix('|').and_then(|r| r.strip_suffix('|')) {
            Some(r) => (true, r),
            None => (false, op),
        };
        let mut id = if let Some(h) = op.strip_prefix("0x") {
            let v = u64::from_str_radix(h, 16).unwrap_or(0) as u32;
            self.e.push(Node::Const(v))
        } else if let Ok(i) = op.parse::<i64>() {
            self.e.push(Node::Const(i as i32 as u32))
        } else if let Ok(f) = op.parse::<f32>() {
            self.e.push(Node::Const(f.to_bits()))
        } else {
            let rs = regs(op);
            let r = rs.get(comp).or(rs.first()).cloned().unwrap_or_default();
            self.read_reg(&r)
        };
        if abs {
            id = self.e.abs(id);
        }
        if neg {
            id = self.negate(id);
        }
        id
    }

    /// `-x`, folded into the constant when `x` is one (`-0` is the constant -0.0).
    fn negate(&mut self, id: Id) -> Id {
        match *self.e.node(id) {
            Node::Const(b) => self.e.push(Node::Const(b ^ 0x8000_0000)),
            _ => self.e.neg(id),
        }
    }

    fn write(&mut self, dst: &str, comp: usize, v: Id) {
        let rs = regs(dst);
        if let Some(r) = rs.get(comp) {
            if r != "null" && !r.starts_with("exec") {
                self.regs.insert(r.clone(), v);
            }
        }
    }

    fn write_all(&mut self, dst: &str, v: Id) {
        for r in regs(dst) {
            if r != "null" && !r.starts_with("exec") {
                self.regs.insert(r, v);
            }
        }
    }

    fn int_op(&mut self, name: &str, srcs: &[String]) -> Id {
        let mut args = Vec::new();
        for s in srcs {
            for k in 0..regs(s).len().max(1) {
                args.push(self.src(s, k));
            }
        }
        self.e.push(Node::Int(name.to_string(), args))
    }

    /// A dual-issue pair: both halves read the registers as they were before the pair
    /// (the second half never reads the first one's destination, but this does not rely
    /// on it).
    fn step_dual(&mut self, x: &str, y: &str) {
        let wx = written(x);
        let before: Vec<Option<Id>> = wx.iter().map(|r| self.regs.get(r).copied()).collect();
        self.step(x);
        let after: Vec<Option<Id>> = wx.iter().map(|r| self.regs.get(r).copied()).collect();
        for (r, v) in wx.iter().zip(&before) {
            match v {
                Some(v) => self.regs.insert(r.clone(), *v),
                None => self.regs.remove(r),
            };
        }
        self.step(y);
        for (r, v) in wx.iter().zip(after) {
            if let Some(v) = v {
                self.regs.insert(r.clone(), v);
            }
        }
    }

    fn step(&mut self, ins: &str) {
        let (mn, ops, mods) = split(ins);
        let base = mn
            .trim_end_matches("_e32")
            .trim_end_matches("_e64")
            .trim_end_matches("_sdwa")
            .trim_end_matches("_dpp");
        let dpp = mn.ends_with("_dpp");
        // Scalar instructions: only constants are followed (a float constant is
        // sometimes kept in an SGPR); everything else is opaque.
        if let Some(rest) = base.strip_prefix("s_") {
            if rest.starts_with("mov_b32") && ops.len() == 2 {
                let v = self.src(&ops[1], 0);
                self.write(&ops[0], 0, v);
            } else if rest.starts_with("load") || rest.starts_with("buffer_load") {
                if let Some(d) = ops.first() {
                    for (k, r) in regs(d).into_iter().enumerate() {
                        let v = self.e.push(Node::Sym(format!("arg{k}")));
                        self.regs.insert(r, v);
                    }
                }
            } else if let Some(d) = ops.first() {
                // s_cbranch/s_waitcnt etc. have no register destination.
                if d.starts_with('s') || d.starts_with("vcc") {
                    let args: Vec<String> = ops[1..].to_vec();
                    let v = self.int_op(base, &args);
                    self.write_all(d, v);
                }
            }
            return;
        }
        if ops.is_empty() {
            return;
        }
        // Memory.
        if base.starts_with("global_load")
            || base.starts_with("buffer_load")
            || base.starts_with("flat_load")
        {
            let d = &ops[0];
            let n = regs(d).len();
            for k in 0..n {
                self.loads += 1;
                let v = self.e.push(Node::Load { id: self.loads, lds: false, offset: 0 });
                self.write(d, k, v);
            }
            return;
        }
        if base.starts_with("ds_read") || base.starts_with("ds_load") {
            let d = &ops[0];
            let n = regs(d).len();
            let off = |name: &str| -> i64 {
                modifier(&mods, name).and_then(|v| v.parse().ok()).unwrap_or(0)
            };
            let two = base.contains("read2") || base.contains("load_2addr");
            for k in 0..n {
                let offset = if two {
                    let width = if base.ends_with("b64") { 8 } else { 4 };
                    let per = n / 2;
                    let o = if k < per.max(1) { off("offset0") } else { off("offset1") };
                    o * width + ((k % per.max(1)) as i64) * 4
                } else {
                    off("offset") + 4 * k as i64
                };
                self.loads += 1;
                let v = self.e.push(Node::Load { id: self.loads, lds: true, offset });
                self.write(d, k, v);
            }
            return;
        }
        if base.starts_with("ds_bpermute") && ops.len() >= 3 {
            let addr = self.src(&ops[1], 0);
            let x = self.src(&ops[2], 0);
            let v = self.e.push(Node::Shuffle { addr, x });
            self.write(&ops[0], 0, v);
            return;
        }
        if base.starts_with("ds_write") || base.starts_with("ds_store") {
            for s in &ops[1..] {
                let value = self.src(s, 0);
                self.stores.push(Store { op: base.to_string(), value });
            }
            return;
        }
        if base.starts_with("global_store")
            || base.starts_with("buffer_store")
            || base.starts_with("flat_store")
        {
            if ops.len() >= 2 {
                for k in 0..regs(&ops[1]).len() {
                    let value = self.src(&ops[1], k);
                    self.stores.push(Store { op: base.to_string(), value });
                }
            }
            return;
        }
        if !base.starts_with("v_") {
            // Other memory or control instructions (barriers, cache invalidations, ...).
            return;
        }
        // Destinations.
        let ndst = if base.starts_with("v_cmpx") {
            0
        } else if (base.contains("_co_")
            || base.starts_with("v_mad_u64_u32")
            || base.starts_with("v_mad_i64_i32")
            || base.starts_with("v_div_scale"))
            && ops.len() >= 3
        {
            2
        } else {
            1
        };
        let (dsts, srcs) = ops.split_at(ndst.min(ops.len()));
        let dst = dsts.first().cloned().unwrap_or_default();
        let s = |ev: &mut Eval, k: usize| -> Id {
            let mut v = ev.src(&srcs[k], 0);
            if dpp && k == 0 {
                let ctrl = mods.join(" ");
                let addr = ev.e.push(Node::Sym(format!("dpp {ctrl}")));
                v = ev.e.push(Node::Shuffle { addr, x: v });
            }
            v
        };
        let n = srcs.len();
        let v = match base {
            "v_mov_b32" if n == 1 => s(self, 0),
            "v_add_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.add(a, b)
            }
            "v_sub_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                let nb = self.e.neg(b);
                self.e.add(a, nb)
            }
            "v_subrev_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                let na = self.e.neg(a);
                self.e.add(b, na)
            }
            "v_mul_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.mul(a, b)
            }
            "v_fma_f32" if n == 3 => {
                let (a, b, c) = (s(self, 0), s(self, 1), s(self, 2));
                self.e.fma(a, b, c)
            }
            "v_fmac_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                let c = self.src(&dst, 0);
                self.e.fma(a, b, c)
            }
            "v_fmaak_f32" if n == 3 => {
                let (a, b, c) = (s(self, 0), s(self, 1), s(self, 2));
                self.e.fma(a, b, c)
            }
            "v_fmamk_f32" if n == 3 => {
                let (a, k, b) = (s(self, 0), s(self, 1), s(self, 2));
                self.e.fma(a, k, b)
            }
            // The legacy multiply-add: a rounded product, then a rounded sum.
            "v_mac_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                let c = self.src(&dst, 0);
                let p = self.e.mul(a, b);
                self.e.add(p, c)
            }
            "v_mad_f32" if n == 3 => {
                let (a, b, c) = (s(self, 0), s(self, 1), s(self, 2));
                let p = self.e.mul(a, b);
                self.e.add(p, c)
            }
            "v_max_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.max(a, b)
            }
            "v_min_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.push(Node::Min(a, b))
            }
            "v_fma_mix_f32" if n == 3 => {
                let hi16 = bits(modifier(&mods, "op_sel_hi"), 3, false);
                let sel = bits(modifier(&mods, "op_sel"), 3, false);
                let mut v = [0; 3];
                for k in 0..3 {
                    let x = s(self, k);
                    v[k] = if hi16[k] { self.f16_of(x, sel[k]) } else { x };
                }
                self.e.fma(v[0], v[1], v[2])
            }
            "v_pk_fma_f32" | "v_pk_mul_f32" | "v_pk_add_f32" => {
                self.packed(base, &dst, srcs, &mods);
                return;
            }
            "v_pk_mul_f16" if n == 2 && !mods.iter().any(|m| m.starts_with("clamp")) => {
                self.packed_f16_mul(&dst, srcs, &mods);
                return;
            }
            "v_cvt_f32_i32" | "v_cvt_f32_u32" if n == 1 => {
                let x = s(self, 0);
                self.e.push(Node::I2F(x))
            }
            "v_cvt_f32_f16" if n == 1 => {
                let x = s(self, 0);
                let hi = modifier(&mods, "src0_sel") == Some("WORD_1")
                    || bits(modifier(&mods, "op_sel"), 1, false)[0];
                self.f16_of(x, hi)
            }
            "v_cvt_f16_f32" if n == 1 => {
                let x = s(self, 0);
                self.e.f2h(x)
            }
            "v_pack_b32_f16" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.pack(a, b)
            }
            "v_cvt_pkrtz_f16_f32" if n == 2 => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.push(Node::Float("cvt_pkrtz".into(), vec![a, b]))
            }
            "v_div_fixup_f32" if n == 3 => {
                let (den, num) = (s(self, 1), s(self, 2));
                self.e.div(num, den)
            }
            // A select between two floats (a float literal or float arithmetic on
            // either side; integer masks such as 0 / -1 stay opaque): `sel(a, b)`, the
            // condition not modelled.
            "v_cndmask_b32" if n >= 2 && self.float_select(srcs) => {
                let (a, b) = (s(self, 0), s(self, 1));
                self.e.push(Node::Float("sel".into(), vec![a, b]))
            }
            _ if base.contains("f32") || base.contains("f16") => {
                let args: Vec<Id> = (0..n).map(|k| s(self, k)).collect();
                if base.starts_with("v_cmp") || base.starts_with("v_cvt_i32") {
                    self.e.push(Node::Int(base.to_string(), args))
                } else {
                    self.e.push(Node::Float(base.trim_start_matches("v_").to_string(), args))
                }
            }
            // fabsf and negation as sign-bit operations: exactly |x| and -x.
            "v_and_b32" | "v_xor_b32" if n == 2 && self.sign_mask(&srcs[0]) => {
                let x = s(self, 1);
                if base == "v_and_b32" {
                    self.e.abs(x)
                } else {
                    self.e.neg(x)
                }
            }
            _ => {
                let v = self.int_op(base, srcs);
                self.write_all(&dst, v);
                if let Some(d2) = dsts.get(1) {
                    self.write_all(d2, v);
                }
                return;
            }
        };
        self.write(&dst, 0, v);
        if let Some(d2) = dsts.get(1) {
            let f = self.e.push(Node::Sym("flags".into()));
            self.write_all(d2, f);
        }
    }

    /// Whether a `v_cndmask_b32` selects between floats: a float literal or float
    /// arithmetic among its two value sources.
    fn float_select(&mut self, srcs: &[String]) -> bool {
        (0..2).any(|k| {
            if srcs[k].contains('.') {
                return true;
            }
            let v = self.src(&srcs[k], 0);
            is_float(self.e.node(v))
        })
    }

    /// Whether a source is the constant that clears (`and`, 0x7fffffff) or flips
    /// (`xor`, 0x80000000) the sign bit.
    fn sign_mask(&self, op: &str) -> bool {
        matches!(op, "0x7fffffff" | "0x80000000")
    }

    /// The f16 half (`hi`) of the dword `x`, converted to f32.
    fn f16_of(&mut self, x: Id, hi: bool) -> Id {
        self.e.push(Node::H2F { hi, x })
    }

    /// `v_pk_mul_f16 d, a, b`: two f16 products in one dword; the low half multiplies
    /// each source's half `op_sel[i]`, the high half its half `op_sel_hi[i]` (default:
    /// low with low, high with high), `neg_lo`/`neg_hi` negating a source's half. The
    /// product of two f16 values is exact in f32 (22 significant bits, exponents far
    /// inside f32's range), so the f16 product, one rounding to f16, is
    /// `f16(mul(a, b))` of the halves widened exactly: that is the tree it becomes
    /// (`Pack` of two `F2H` of `Mul`). Whether f16 subnormals are kept is the kernel
    /// descriptor's `FLOAT_DENORM_MODE_16_64` ([`amdgpu_denorm_mode_f16_f64`]).
    fn packed_f16_mul(&mut self, dst: &str, srcs: &[String], mods: &[String]) {
        let sel = bits(modifier(mods, "op_sel"), 2, false);
        let sel_hi = bits(modifier(mods, "op_sel_hi"), 2, true);
        let neg_lo = bits(modifier(mods, "neg_lo"), 2, false);
        let neg_hi = bits(modifier(mods, "neg_hi"), 2, false);
        let mut out = [0; 2];
        for (lane, o) in out.iter_mut().enumerate() {
            let mut v = [0; 2];
            for (k, x) in v.iter_mut().enumerate() {
                let hi = if lane == 0 { sel[k] } else { sel_hi[k] };
                let r = self.src(&srcs[k], 0);
                *x = self.f16_of(r, hi);
                if (lane == 0 && neg_lo[k]) || (lane == 1 && neg_hi[k]) {
                    *x = self.e.neg(*x);
                }
            }
            let p = self.e.mul(v[0], v[1]);
            *o = self.e.f2h(p);
        }
        let v = self.e.pack(out[0], out[1]);
        self.write(dst, 0, v);
    }

    /// `v_pk_{fma,mul,add}_f32`: two f32 lanes in register pairs; lane 0 reads each
    /// source's dword `op_sel[i]`, lane 1 its dword `op_sel_hi[i]`.
    fn packed(&mut self, base: &str, dst: &str, srcs: &[String], mods: &[String]) {
        let n = srcs.len();
        let sel = bits(modifier(mods, "op_sel"), n, false);
        let sel_hi = bits(modifier(mods, "op_sel_hi"), n, true);
        let neg_lo = bits(modifier(mods, "neg_lo"), n, false);
        let neg_hi = bits(modifier(mods, "neg_hi"), n, false);
        let mut out = [0; 2];
        for (lane, o) in out.iter_mut().enumerate() {
            let mut v = Vec::with_capacity(n);
            for k in 0..n {
                let comp = if lane == 0 { sel[k] } else { sel_hi[k] } as usize;
                let mut x = self.src(&srcs[k], comp);
                if (lane == 0 && neg_lo[k]) || (lane == 1 && neg_hi[k]) {
                    x = self.e.neg(x);
                }
                v.push(x);
            }
            *o = match (base, n) {
                ("v_pk_fma_f32", 3) => self.e.fma(v[0], v[1], v[2]),
                ("v_pk_mul_f32", 2) => self.e.mul(v[0], v[1]),
                ("v_pk_add_f32", 2) => self.e.add(v[0], v[1]),
                _ => self.e.push(Node::Float(base.to_string(), v)),
            };
        }
        self.write(dst, 0, out[0]);
        self.write(dst, 1, out[1]);
    }
}

/// Branch target of `s_cbranch_*` / `s_branch` with a 16-bit word offset.
fn branch_target(ins: &str, addr: u64, size: u64) -> Option<u64> {
    let (mn, ops, _) = split(ins);
    if !(mn.starts_with("s_cbranch") || mn == "s_branch") {
        return None;
    }
    let imm: i64 = ops.first()?.parse().ok()?;
    let simm = imm as u16 as i16 as i64;
    Some((addr as i64 + size as i64 + 4 * simm) as u64)
}

/// The registers an instruction writes (for the loop-carried sets).
fn written(ins: &str) -> Vec<String> {
    let (mn, ops, _) = split(ins);
    if mn.starts_with("v_cmpx") || ops.is_empty() {
        return vec![];
    }
    if mn.starts_with("global_store")
        || mn.starts_with("ds_write")
        || mn.starts_with("ds_store")
        || mn.starts_with("buffer_store")
        || mn.starts_with("s_cbranch")
        || mn.starts_with("s_branch")
        || mn.starts_with("s_waitcnt")
    {
        return vec![];
    }
    let mut out = regs(&ops[0]);
    if (mn.contains("_co_") || mn.starts_with("v_mad_u64") || mn.starts_with("v_div_scale"))
        && ops.len() >= 3
    {
        out.extend(regs(&ops[1]));
    }
    out.retain(|r| r != "null" && !r.starts_with("exec"));
    out
}

/// The two halves of a gfx11 dual-issue (VOPD) instruction, `v_dual_X ... :: v_dual_Y
/// ...`, as the plain instructions `v_X ...` and `v_Y ...`; `v_dual_cndmask_b32`
/// selects by `vcc_lo`, which the plain form names.
pub(crate) fn vopd(ins: &str) -> Option<(String, String)> {
    let (x, y) = ins.split_once(" :: ")?;
    let plain = |h: &str| {
        let h = h.trim();
        let mut p = format!("v_{}", h.strip_prefix("v_dual_").unwrap_or(h));
        if p.starts_with("v_cndmask_b32") && split(&p).1.len() == 3 {
            p.push_str(", vcc_lo");
        }
        p
    };
    Some((plain(x), plain(y)))
}

/// One instruction as [`evaluate`] sees it: its address, the target of a branch, the
/// registers it writes, and the instruction itself.
struct Item<T> {
    addr: u64,
    target: Option<u64>,
    /// Whether control never falls through to the next instruction (`s_branch`,
    /// `s_endpgm`; SASS `BRA`, `EXIT`, `RET` without a predicate).
    uncond: bool,
    writes: Vec<String>,
    ins: T,
}

/// Evaluates `items` in program order with `step`, closing a loop at every backward
/// branch (see the module doc): the registers a loop body writes read as carried
/// values inside it and after it.
fn evaluate<T>(
    kernel: &str,
    items: &[Item<T>],
    mut ev: Eval,
    mut step: impl FnMut(&mut Eval, &T),
) -> Result<(Eval, Vec<Loop>), String> {
    // A detour: a block that control cannot fall into (it follows an unconditional
    // transfer), entered by a forward branch from before some point `t` of the body and
    // left by an unconditional backward branch to `t`. Compilers lay slow paths out that
    // way (a 64-bit integer division of an index, say); its backward branch returns
    // from the detour, it closes no loop. A loop's back edge is reached from inside
    // the loop (by falling through or from a branch after its header).
    let detour_return = |k: usize, t: u64| {
        let start = items[..k].iter().rposition(|i| i.uncond).map_or(0, |j| j + 1);
        let d = items[start].addr;
        items[k].uncond && d > t && items[..start].iter().any(|i| i.addr < t && i.target == Some(d))
    };
    let mut loops: Vec<(u64, u64)> = items
        .iter()
        .enumerate()
        .filter_map(|(k, i)| {
            i.target.filter(|&t| t < i.addr && !detour_return(k, t)).map(|t| (t, i.addr))
        })
        .collect();
    // Several back edges to one header are one loop (a rotated loop whose body ends in
    // a divergent if/else jumps back from each side): its body runs to the last of them.
    loops.sort();
    loops.dedup_by(|later, first| {
        if later.0 == first.0 {
            first.1 = first.1.max(later.1);
            true
        } else {
            false
        }
    });
    for w in loops.windows(2) {
        if w[1].0 <= w[0].1 {
            return Err(format!("{kernel}: nested or overlapping loops are not evaluated"));
        }
    }
    let mut out = Vec::new();
    let mut open: Option<(u64, Vec<String>)> = None;
    for item in items {
        if let Some(&(h, b)) = loops.iter().find(|&&(h, _)| h == item.addr) {
            let mut set: Vec<String> = items
                .iter()
                .filter(|i| i.addr >= h && i.addr <= b)
                .flat_map(|i| i.writes.iter().cloned())
                .collect();
            set.sort();
            set.dedup();
            ev.carry(&set);
            open = Some((b, set));
        }
        step(&mut ev, &item.ins);
        if let Some((b, set)) = &open {
            if *b == item.addr {
                let carried: Vec<(String, Id)> =
                    set.iter().map(|r| (r.clone(), ev.read_reg(r))).collect();
                out.push(Loop { carried });
                ev.carry(set);
                open = None;
            }
        }
    }
    Ok((ev, out))
}

impl Eval {
    fn new(bank2: Vec<u32>) -> Self {
        Eval { e: Exprs::new(), regs: HashMap::new(), loads: 0, stores: Vec::new(), bank2 }
    }

    /// Every register of `set` now holds its loop-carried value.
    fn carry(&mut self, set: &[String]) {
        for r in set {
            let v = self.e.push(Node::Carried(r.clone()));
            self.regs.insert(r.clone(), v);
        }
    }
}

/// The f32 denormal mode in `kernel`'s descriptor (the 64-byte `<kernel>.kd` object,
/// printed as `.byte` lines by `llvm-objdump -D`): `COMPUTE_PGM_RSRC1` (bytes 48..52,
/// little-endian) bits 16..17, `FLOAT_DENORM_MODE_32`. 3 keeps subnormal inputs and
/// results, 0 flushes both (1, 2: only outputs or only inputs kept).
pub fn amdgpu_denorm_mode_f32(listing: &str, kernel: &str) -> Option<u32> {
    let bytes = amdgpu_descriptor(listing, kernel)?;
    let rsrc1 = u32::from_le_bytes([bytes[48], bytes[49], bytes[50], bytes[51]]);
    Some((rsrc1 >> 16) & 3)
}

/// The f16/f64 denormal mode in the kernel descriptor of `kernel`: `COMPUTE_PGM_RSRC1`
/// bits 18..19, `FLOAT_DENORM_MODE_16_64`, with the same values as
/// [`amdgpu_denorm_mode_f32`]'s (3: f16 and f64 subnormals kept).
pub fn amdgpu_denorm_mode_f16_f64(listing: &str, kernel: &str) -> Option<u32> {
    let bytes = amdgpu_descriptor(listing, kernel)?;
    let rsrc1 = u32::from_le_bytes([bytes[48], bytes[49], bytes[50], bytes[51]]);
    Some((rsrc1 >> 18) & 3)
}

/// A gfx11 listing with its memory instructions under the names earlier ISAs give them
/// (`global_store_b32` -> `global_store_dword`, `ds_store_b32` -> `ds_write_b32`,
/// `s_load_b64` -> `s_load_dwordx2`, ...), so one reader serves every target; the
/// instructions are the same, only renamed in gfx11's assembly syntax.
pub fn gfx11_names(listing: &str) -> String {
    const RENAMES: [(&str, &str); 27] = [
        ("global_load_b32", "global_load_dword"),
        ("global_load_b64", "global_load_dwordx2"),
        ("global_load_b96", "global_load_dwordx3"),
        ("global_load_b128", "global_load_dwordx4"),
        ("global_load_u8", "global_load_ubyte"),
        ("global_load_i8", "global_load_sbyte"),
        ("global_load_u16", "global_load_ushort"),
        ("global_load_i16", "global_load_sshort"),
        ("global_store_b32", "global_store_dword"),
        ("global_store_b64", "global_store_dwordx2"),
        ("global_store_b96", "global_store_dwordx3"),
        ("global_store_b128", "global_store_dwordx4"),
        ("global_store_b8", "global_store_byte"),
        ("global_store_b16", "global_store_short"),
        ("s_load_b32", "s_load_dword"),
        ("s_load_b64", "s_load_dwordx2"),
        ("s_load_b128", "s_load_dwordx4"),
        ("s_load_b256", "s_load_dwordx8"),
        ("s_load_b512", "s_load_dwordx16"),
        ("ds_store_b32", "ds_write_b32"),
        ("ds_store_b64", "ds_write_b64"),
        ("ds_store_2addr_b32", "ds_write2_b32"),
        ("ds_store_2addr_stride64_b32", "ds_write2st64_b32"),
        ("ds_load_b32", "ds_read_b32"),
        ("ds_load_b64", "ds_read_b64"),
        ("ds_load_2addr_b32", "ds_read2_b32"),
        ("ds_load_2addr_stride64_b32", "ds_read2st64_b32"),
    ];
    let mut out = String::with_capacity(listing.len() + listing.len() / 16);
    for line in listing.lines() {
        let t = line.trim_start();
        let word = t.split_whitespace().next().unwrap_or("");
        // gfx11 spells `andn2`/`orn2` as `and_not1`/`or_not1` (`s_and_not1_saveexec_b32`).
        let scalar = [("s_and_not1_", "s_andn2_"), ("s_or_not1_", "s_orn2_")].iter().find_map(
            |(new, old)| word.strip_prefix(new).map(|rest| (word, format!("{old}{rest}"))),
        );
        match RENAMES
            .iter()
            .find(|(new, _)| *new == word)
            .map(|(n, o)| (*n, o.to_string()))
            .or(scalar)
        {
            Some((new, old)) => {
                out.push_str(&line[..line.len() - t.len()]);
                out.push_str(&old);
                out.push_str(&t[new.len()..]);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The 64 bytes of `kernel`'s descriptor (`<kernel>.kd`) in an `llvm-objdump -D`
/// listing of its code object.
pub fn amdgpu_descriptor(listing: &str, kernel: &str) -> Option<Vec<u8>> {
    let head = format!("<{kernel}.kd>:");
    let at = listing.find(&head)?;
    let bytes: Vec<u8> = listing[at + head.len()..]
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".byte"))
        .take(64)
        .map(|b| {
            let b = b.trim();
            b.strip_prefix("0x").map_or_else(|| b.parse().ok(), |h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()?;
    (bytes.len() == 64).then_some(bytes)
}

/// Evaluates `kernel` in an `llvm-objdump -d` listing of an AMDGPU code object.
pub fn amdgpu(listing: &str, kernel: &str) -> Result<Kernel, String> {
    let items: Vec<Item<&str>> = kernel_lines(listing, kernel)?
        .into_iter()
        .map(|(addr, size, ins)| Item {
            addr,
            target: branch_target(ins, addr, size),
            uncond: matches!(split(ins).0, "s_branch" | "s_endpgm"),
            writes: match vopd(ins) {
                Some((x, y)) => [written(&x), written(&y)].concat(),
                None => written(ins),
            },
            ins,
        })
        .collect();
    let (ev, loops) = evaluate(kernel, &items, Eval::new(Vec::new()), |ev, ins| match vopd(ins) {
        Some((x, y)) => ev.step_dual(&x, &y),
        None => ev.step(ins),
    })?;
    Ok(Kernel { exprs: ev.e, stores: ev.stores, loops, ftz: (0, 0) })
}

/// A field of a kernel's entry in the AMDGPU metadata (`llvm-readelf --notes`):
/// `.max_flat_workgroup_size`, `.wavefront_size`, ...
pub fn amdgpu_metadata(notes: &str, kernel: &str, field: &str) -> Option<u64> {
    let lines: Vec<&str> = notes.lines().collect();
    let entry = metadata_entry(&lines, kernel)?;
    entry.iter().find_map(|l| {
        let t = l.trim().trim_start_matches("- ");
        t.strip_prefix(field).and_then(|v| v.strip_prefix(':')).and_then(|v| v.trim().parse().ok())
    })
}

/// The offset in the kernel arguments of an argument of `kernel` by its `.value_kind`
/// (`hidden_block_count_x`, ...: code object v5's implicit arguments), from the AMDGPU
/// metadata (`llvm-readelf --notes`).
pub fn amdgpu_arg_offset(notes: &str, kernel: &str, value_kind: &str) -> Option<u64> {
    let lines: Vec<&str> = notes.lines().collect();
    let entry = metadata_entry(&lines, kernel)?;
    let at = entry.iter().position(|l| {
        l.trim().strip_prefix(".value_kind:").is_some_and(|v| v.trim() == value_kind)
    })?;
    // The argument's fields run from its `- .` line; `.offset` is one of them.
    let start = (0..=at).rev().find(|&i| entry[i].trim_start().starts_with("- ."))?;
    entry[start..=at].iter().find_map(|l| {
        let t = l.trim().trim_start_matches("- ");
        t.strip_prefix(".offset:").and_then(|v| v.trim().parse().ok())
    })
}

/// The lines of `kernel`'s entry in the metadata: from the line starting with "- ."
/// before its `.name` to the next entry.
fn metadata_entry<'a>(lines: &[&'a str], kernel: &str) -> Option<Vec<&'a str>> {
    let at = lines.iter().position(|l| {
        let t = l.trim().trim_start_matches("- ");
        t.strip_prefix(".name:").is_some_and(|n| n.trim() == kernel)
    })?;
    // The entry runs from the line starting with "- ." before `.name` to the next one.
    let indent = |l: &str| l.len() - l.trim_start().len();
    let name_ind = indent(lines[at]);
    let start = (0..=at)
        .rev()
        .find(|&i| lines[i].trim_start().starts_with("- .") && indent(lines[i]) < name_ind)?;
    let ind = indent(lines[start]);
    let end = (start + 1..lines.len())
        .find(|&i| {
            let l = lines[i];
            !l.trim().is_empty()
                && (indent(l) < ind || (indent(l) == ind && l.trim_start().starts_with("- ")))
        })
        .unwrap_or(lines.len());
    Some(lines[start..end].to_vec())
}

/// An LLVM tool (`llvm-objdump`, `llvm-readelf`) that reads AMDGPU code objects: the
/// `TIERCHECK_LLVM_<NAME>` variable (e.g. `TIERCHECK_LLVM_OBJDUMP`), else hipcc's own
/// clang directory (`hipconfig --hipclangpath`; Debian: `/usr/lib/llvm-15/bin`), PATH,
/// and `/usr/lib/llvm-{15..19}/bin`.
pub fn find_llvm_tool(name: &str) -> Option<PathBuf> {
    let var = format!("TIERCHECK_LLVM_{}", name.trim_start_matches("llvm-").to_uppercase());
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Ok(o) = Command::new("hipconfig").arg("--hipclangpath").output() {
        let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !p.is_empty() {
            dirs.insert(0, PathBuf::from(p));
        }
    }
    for v in ["15", "16", "17", "18", "19"] {
        dirs.push(PathBuf::from(format!("/usr/lib/llvm-{v}/bin")));
    }
    for d in dirs {
        for n in [name.to_string(), format!("{name}-15")] {
            let p = d.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The full symbol of the first kernel in `listing` whose name starts with `prefix`.
pub fn find_kernel(listing: &str, prefix: &str) -> Option<String> {
    let at = listing.find(&format!("<{prefix}"))?;
    let rest = &listing[at + 1..];
    let end = rest.find(">:")?;
    Some(rest[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "
0000000000000100 <k>:
\tv_mov_b32_e32 v3, 0                                         // 000000000100: 7E060280
\tglobal_load_dword v21, v[10:11], off                        // 000000000104: DC308000 157D000A
\tglobal_load_dword v15, v[10:11], off offset:4               // 00000000010C: DC308004 0F7D000A
\tv_cvt_f32_i32_e32 v14, v14                                  // 000000000114: 7E1C0B0E
\tv_fma_mix_f32 v14, v21, v14, 0 op_sel_hi:[1,0,0]            // 000000000118: D7200000 0A021D15
\tv_mul_f32_e32 v13, v14, v14                                 // 000000000120: 101A1D0E
\tv_fma_mix_f32 v2, v14, v15, -v13 op_sel:[0,1,0] op_sel_hi:[0,1,0]  // 000000000124: D7200010 84361F0E
\tv_add_f32_e32 v3, v3, v2                                    // 00000000012C: 06060503
\ts_cbranch_execnz 65524                                      // 000000000130: BF89FFF7
\tv_xor_b32_e32 v4, 16, v1                                    // 000000000134: 3A080290
\tv_lshlrev_b32_e32 v4, 2, v4                                 // 000000000138: 34080882
\tds_bpermute_b32 v4, v4, v3                                  // 00000000013C: D8CC0000 04000304
\tv_add_f32_e32 v0, v3, v4                                    // 000000000144: 06000903
\tglobal_store_dword v1, v0, s[0:1]                           // 000000000148: DC708000 00000001
\ts_endpgm                                                    // 000000000150: BF810000
";

    #[test]
    fn a_loop_body_and_a_butterfly_read_as_trees() {
        // The branch at 0x130 jumps back to 0x104 (0x134 - 4 * 12).
        let k = amdgpu(LISTING, "k").unwrap();
        assert_eq!(k.loops.len(), 1);
        let acc = k.accumulators(0);
        assert_eq!(acc.len(), 1, "one float accumulator");
        let s = k.exprs.render(acc[0]);
        assert_eq!(
            s,
            "add(acc, fma(fma(h.lo, i, 0.0), h.hi, -mul(fma(h.lo, i, 0.0), fma(h.lo, i, 0.0))))"
        );
        let out = k.stores.last().unwrap().value;
        assert_eq!(k.exprs.render(out), "add(acc, shfl^16(acc))");
    }

    /// A slow path laid out between the body's pieces: entered by the forward branch at
    /// 0x104, it returns to 0x108 with an unconditional backward branch, and the body
    /// jumps over it (0x114). That is a detour, not a loop; the same backward branch
    /// reached from inside the body would close one.
    const DETOUR: &str = "
0000000000000100 <k>:
\tv_mov_b32_e32 v3, 0                                         // 000000000100: 7E060280
\ts_cbranch_scc0 4                                            // 000000000104: BF840004
\tv_add_f32_e32 v3, v3, v2                                    // 000000000108: 06060503
\tglobal_store_dword v1, v3, s[0:1]                           // 00000000010C: DC708000 00000301
\ts_branch 2                                                  // 000000000114: BF820002
\ts_mul_i32 s0, s1, s2                                        // 000000000118: 93000201
\ts_branch 65530                                              // 00000000011C: BF82FFFA
\ts_endpgm                                                    // 000000000120: BF810000
";

    /// A gfx11 dual-issue pair evaluates both halves on the registers before it: the
    /// second half's `v1` is the loaded value, not the first half's product.
    #[test]
    fn a_dual_issue_pair_reads_the_old_registers() {
        let listing = gfx11_names(
            "
0000000000000100 <k>:
\tglobal_load_b32 v1, v[8:9], off                            // 000000000100: 00000000 00000000
\tv_dual_mul_f32 v1, v1, v1 :: v_dual_add_f32 v2, 1.0, v1     // 000000000108: 00000000 00000000
\tv_fmac_f32_e32 v2, v1, v1                                  // 000000000110: 00000000
\tglobal_store_b32 v[10:11], v2, off                          // 000000000114: 00000000 00000000
\ts_endpgm                                                    // 00000000011C: BF810000
",
        );
        let k = amdgpu(&listing, "k").unwrap();
        let out = k.stores.last().unwrap().value;
        assert_eq!(k.exprs.render(out), "fma(mul(f, f), mul(f, f), add(1.0, f))");
    }

    #[test]
    fn a_detour_back_into_the_body_is_no_loop() {
        let k = amdgpu(DETOUR, "k").unwrap();
        assert!(k.loops.is_empty(), "{} loops", k.loops.len());
        assert!(!k.exprs.render(k.stores[0].value).contains("acc"));
        // Entered from inside the body (the forward branch moved past the return
        // point), the same block closes a loop.
        let inside = DETOUR
            .replace("s_cbranch_scc0 4           ", "s_nop 0                    ")
            .replace("v_add_f32_e32 v3, v3, v2  ", "s_cbranch_scc0 3           ");
        let k = amdgpu(&inside, "k").unwrap();
        assert_eq!(k.loops.len(), 1);
    }

    #[test]
    fn a_negative_constant_factor_reads_as_a_negated_product() {
        let mut e = Exprs::new();
        let (x, y) = (e.leaf("x"), e.leaf("y"));
        let (m8, p8) = (e.constant(-8.0), e.constant(8.0));
        let a = e.mul(m8, x);
        let b = e.mul(p8, x);
        let nb = e.neg(b);
        assert_eq!(e.render(a), e.render(nb));
        assert_eq!(e.render(a), "-mul(8.0, x)");
        let fa = e.fma(m8, x, y);
        let np8 = e.neg(p8);
        let fb = e.fma(np8, x, y);
        assert_eq!(e.render(fa), e.render(fb));
        assert_ne!(e.render(a), e.render(b), "the sign still counts");
    }

    /// `v_pk_mul_f16` is two f16 products, each `f16(mul(..))` of the widened halves, and
    /// a conversion (or `v_fma_mix_f32`) of one half reads that product.
    #[test]
    fn a_packed_f16_product_reads_as_rounded_products() {
        let listing = "
0000000000000100 <k>:
\tglobal_load_dword v2, v[8:9], off                          // 000000000100: 00000000 00000000
\tglobal_load_dword v3, v[8:9], off                          // 000000000108: 00000000 00000000
\tv_pk_mul_f16 v2, v3, v2                                   // 000000000110: 00000000 00000000
\tv_cvt_f32_f16_sdwa v4, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1// 000000000118: 00000000 00000000
\tv_fma_mix_f32 v5, v6, v2, v4 op_sel_hi:[0,1,0]           // 000000000120: 00000000 00000000
\tglobal_store_dword v1, v5, s[0:1]                          // 000000000128: 00000000 00000000
\ts_endpgm                                                    // 000000000130: BF810000
";
        let k = amdgpu(listing, "k").unwrap();
        let out = k.stores.last().unwrap().value;
        assert_eq!(k.exprs.render(out), "fma(f16(mul(h.lo, h.lo)), sym:v6, f16(mul(h.hi, h.hi)))");
    }

    #[test]
    fn canonical_form_sorts_commutative_operands_and_keeps_association() {
        let mut e = Exprs::new();
        let (a, b, c) = (e.leaf("a"), e.leaf("b"), e.leaf("c"));
        let ab = e.add(a, b);
        let ba = e.add(b, a);
        assert_eq!(e.render(ab), e.render(ba));
        let ab_c = e.add(ab, c);
        let bc = e.add(b, c);
        let a_bc = e.add(a, bc);
        assert_ne!(e.render(ab_c), e.render(a_bc));
        let na = e.neg(a);
        let m1 = e.mul(na, b);
        let nb = e.neg(b);
        let m2 = e.mul(a, nb);
        assert_eq!(e.render(m1), e.render(m2));
        let f1 = e.fma(a, b, c);
        let p = e.mul(a, b);
        let f2 = e.add(p, c);
        assert_ne!(e.render(f1), e.render(f2), "fused and unfused differ");
    }

    #[test]
    fn metadata_fields_are_read_from_the_kernel_entry() {
        let notes = "  amdhsa.kernels:
  - .args:
      - .size: 8
    .max_flat_workgroup_size: 64
    .name:           ka
    .wavefront_size: 64
  - .args:
      - .size: 8
    .max_flat_workgroup_size: 32
    .name:           kb
    .wavefront_size: 32
";
        assert_eq!(amdgpu_metadata(notes, "ka", ".max_flat_workgroup_size"), Some(64));
        assert_eq!(amdgpu_metadata(notes, "kb", ".max_flat_workgroup_size"), Some(32));
        assert_eq!(amdgpu_metadata(notes, "kb", ".wavefront_size"), Some(32));
        assert_eq!(amdgpu_metadata(notes, "kc", ".wavefront_size"), None);
    }
}
