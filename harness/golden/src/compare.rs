//! Comparing kernel outputs: bitwise, within a tolerance, and within per-element bounds.
//!
//! Three questions, three functions:
//!
//! - **Did anything move at all?** [`bitwise_f32`] and [`bitwise_bytes`] compare exact bits
//!   and return a [`BitwiseReport`]. Used against a lane's own golden.
//! - **Is the output close enough to the reference?** [`tolerance`] summarises the error of
//!   `got` against `want` in a [`ToleranceStats`]; a [`Tolerance`] decides pass or fail.
//! - **Is every element within its own error bound?** [`within_bounds`] checks
//!   `|got - want| <= bound` element by element against an exact (f64) reference and
//!   returns a [`BoundReport`].
//!
//! [`failure_message`] wraps any of these reports into the text a failing test prints,
//! ending with the command that refreshes the golden.
//!
//! Every report implements [`Display`] for a maintainer reading a test failure: a headline
//! with the count, then the first [`LISTED`] offending elements, then `... and N more`.
//!
//! # Lengths
//!
//! When the two sides differ in length, every function compares the common prefix
//! (`min` of the lengths), reports the lengths in a `length_mismatch` field, and counts
//! as unequal (bitwise) or failing ([`Tolerance::check`]). `total` is always the number of
//! positions actually compared.
//!
//! # Metrics, precisely
//!
//! In what follows `g = got[i]` and `w = want[i]`.
//!
//! - **Bitwise equality**: `g.to_bits() == w.to_bits()`. This is stricter than `==`:
//!   `-0.0` and `+0.0` differ, and two NaNs are equal only when sign and payload agree
//!   (while `NaN == NaN` is false for `==`). For bytes, plain byte equality.
//! - **Absolute difference** `abs = |g - w|`, with `g` and `w` widened to f64 first, so it
//!   never overflows (`f32::MAX - (-f32::MAX)` is finite in f64). Equal values, including
//!   equal infinities and `-0.0` against `+0.0`, give `abs = 0`. A NaN on either side gives
//!   NaN, unless both sides are NaN in [`tolerance`] and [`within_bounds`] (see below).
//! - **Relative difference** `rel = abs / |w|`; `0` when `abs == 0`; `+inf` when `w == 0`
//!   and `abs > 0`; NaN when `abs` is NaN.
//! - **ULP distance** ([`ulp_distance`]): the number of representable f32 values one must
//!   step through to get from `g` to `w`. Each f32 is mapped to an integer that is
//!   monotonic in the value: non-negative floats to their bit pattern, negative floats to
//!   the negated bit pattern of their magnitude. Hence `+0.0` and `-0.0` both map to 0
//!   (0 ULP apart), the smallest positive and smallest negative subnormals are 2 ULP apart
//!   (1 each side of zero), `f32::MAX` and `+inf` are 1 ULP apart, and `-inf` to `+inf` is
//!   `2 * 0x7f80_0000` ULP. If either side is NaN there is no distance (`None`).
//! - **NMSE** (normalised mean squared error), as in ggml's `test-backend-ops`:
//!   `sum (w - g)^2 / sum w^2`, where `a = want` is the normaliser, so the number does not
//!   depend on the output under test. Differences, squares and sums are all formed in f64
//!   (ggml forms the difference and square in f32 and only accumulates in double; forming
//!   them in f64 cannot overflow and rounds far less, so tiny NMSE values stay meaningful).
//!   The edge cases are defined: `0 / 0 = 0` (both sides all zero: no error) and
//!   `x / 0 = +inf` for `x > 0` (a non-zero output where the reference is all zero).
//!   Only positions where both sides are finite enter the sums; NaN and infinity
//!   mismatches are counted separately (next item).
//! - **NaN mismatch**: a position where exactly one side is NaN. Both sides NaN counts as
//!   equal for [`tolerance`] (whatever the payloads; bitwise comparison still sees payloads).
//!   Any NaN mismatch makes `max_ulp` `None`.
//! - **Infinity mismatch**: a position where neither side is NaN, at least one side is
//!   infinite, and the two are not equal (`+inf` vs a finite value, `+inf` vs `-inf`).
//!   These positions count towards `max_ulp` (the distance is defined) but not towards
//!   NMSE, `max_abs` or `max_rel`, which would otherwise all be infinite or NaN.
//!
//! [`Tolerance::check`] fails on any length, NaN or infinity mismatch whatever its limits,
//! so excluding those positions from the sums never hides them.
//!
//! # Per-element bounds
//!
//! [`within_bounds`] takes the reference in f64 (for example an exact or double-precision
//! result) and a bound per element, typically from a forward error analysis of the kernel.
//! An element passes when `|g - w| <= bound` with the difference formed in f64; a NaN
//! difference or a NaN bound fails; `got` NaN against `want` NaN passes. The *ratio*
//! `|g - w| / bound` says how much of the bound is used: `0` for an exact element, at
//! most 1 for a passing one, above 1 for a violation, and `+inf` for a violation that
//! no finite ratio describes (a zero, negative or NaN bound, or a NaN difference).

use std::fmt::{self, Display, Write as _};

/// How many offending elements a report lists before summarising the rest as `... and N more`.
pub const LISTED: usize = 5;

/// Maps an f32 to an integer that is monotonic in its value (see the module docs).
///
/// `+0.0` and `-0.0` both map to 0. Meaningless for NaN; callers check first.
fn ordered(x: f32) -> i64 {
    let bits = x.to_bits();
    let magnitude = i64::from(bits & 0x7fff_ffff);
    if bits & 0x8000_0000 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// ULP distance between two f32: how many representable values lie between them, counting
/// one end. `+0.0` and `-0.0` are 0 apart, adjacent floats 1 apart (across zero too:
/// the smallest positive and negative subnormals are 2 apart, one step to zero and one
/// beyond), `f32::MAX` and `+inf` 1 apart. `None` when either side is NaN.
pub fn ulp_distance(a: f32, b: f32) -> Option<u64> {
    if a.is_nan() || b.is_nan() {
        return None;
    }
    Some(ordered(a).abs_diff(ordered(b)))
}

/// `|got - want|` in f64; 0 for equal values (so equal infinities give 0, not NaN).
fn abs_diff_f64(got: f64, want: f64) -> f64 {
    if got == want {
        0.0
    } else {
        (got - want).abs()
    }
}

/// `abs / |want|`: 0 for no difference, +inf for a difference against zero, NaN for NaN.
fn rel_diff(abs: f64, want: f64) -> f64 {
    if abs.is_nan() {
        f64::NAN
    } else if abs == 0.0 {
        0.0
    } else if want == 0.0 {
        f64::INFINITY
    } else {
        abs / want.abs()
    }
}

/// Writes `... and N more` when a report lists fewer offenders than it found.
fn write_more(f: &mut fmt::Formatter<'_>, found: usize, listed: usize) -> fmt::Result {
    if found > listed {
        write!(f, "\n  ... and {} more", found - listed)?;
    }
    Ok(())
}

/// An f32 value as its shortest round-trip decimal followed by its bits in hex.
struct F32Bits(f32);

impl Display for F32Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:e} (0x{:08x})", self.0, self.0.to_bits())
    }
}

/// A ULP distance, or `n/a (NaN)` when there is none.
struct Ulp(Option<u64>);

impl Display for Ulp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n} ulp"),
            None => f.write_str("ulp n/a (NaN)"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bitwise
// ---------------------------------------------------------------------------------------

/// One differing f32 position of a bitwise comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct F32Diff {
    /// Position in the compared slices.
    pub index: usize,
    /// The value under test.
    pub got: f32,
    /// The expected value.
    pub want: f32,
    /// `|got - want|` in f64 (0 for `-0.0` vs `+0.0`, NaN if a side is NaN).
    pub abs: f64,
    /// `abs / |want|` (`+inf` when `want == 0` and `abs > 0`, NaN if a side is NaN).
    pub rel: f64,
    /// [`ulp_distance`]; `None` if either side is NaN.
    pub ulp: Option<u64>,
}

/// One differing byte of a bitwise comparison of raw bytes (for example quantized blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteDiff {
    /// Byte offset in the compared slices.
    pub index: usize,
    /// The byte under test.
    pub got: u8,
    /// The expected byte.
    pub want: u8,
    /// `index / unit`: which block (of `unit` bytes) the byte belongs to.
    pub block: usize,
    /// `index % unit`: the byte's offset inside its block.
    pub offset_in_block: usize,
}

/// One difference listed in a [`BitwiseReport`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Diff {
    /// From [`bitwise_f32`].
    F32(F32Diff),
    /// From [`bitwise_bytes`].
    Byte(ByteDiff),
}

impl Diff {
    /// The position of the difference in the compared slices.
    pub fn index(&self) -> usize {
        match self {
            Diff::F32(d) => d.index,
            Diff::Byte(d) => d.index,
        }
    }
}

impl Display for Diff {
    /// One line, for example
    /// `[17] got 1.2345678e-1 (0x3dfcd6e9), want 1.2345679e-1 (0x3dfcd6ea): abs 7.45e-9, rel 6.04e-8, 1 ulp`
    /// or `[517] block 16 +5: got 0x3a, want 0x3b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diff::F32(d) => write!(
                f,
                "[{}] got {}, want {}: abs {:.2e}, rel {:.2e}, {}",
                d.index,
                F32Bits(d.got),
                F32Bits(d.want),
                d.abs,
                d.rel,
                Ulp(d.ulp)
            ),
            Diff::Byte(d) => write!(
                f,
                "[{}] block {} +{}: got 0x{:02x}, want 0x{:02x}",
                d.index, d.block, d.offset_in_block, d.got, d.want
            ),
        }
    }
}

/// Result of a bitwise comparison ([`bitwise_f32`], [`bitwise_bytes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BitwiseReport {
    /// Positions compared: the shorter of the two lengths.
    pub total: usize,
    /// Positions (among `total`) whose bits differ.
    pub differing: usize,
    /// `Some((got.len(), want.len()))` when the lengths differ.
    pub length_mismatch: Option<(usize, usize)>,
    /// The first [`LISTED`] differences, in index order.
    pub first: Vec<Diff>,
}

impl BitwiseReport {
    /// True when the lengths agree and every compared position is bitwise equal.
    pub fn is_equal(&self) -> bool {
        self.differing == 0 && self.length_mismatch.is_none()
    }

    /// "bytes" for a byte comparison with differences listed, otherwise "values".
    fn noun(&self) -> &'static str {
        match self.first.first() {
            Some(Diff::Byte(_)) => "bytes",
            _ => "values",
        }
    }
}

impl Display for BitwiseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = self.noun();
        if let Some((got, want)) = self.length_mismatch {
            writeln!(
                f,
                "length mismatch: got {got} {noun}, want {want}; compared the first {}",
                self.total
            )?;
        }
        if self.differing == 0 {
            return write!(f, "all {} compared {noun} are bitwise equal", self.total);
        }
        write!(f, "{} of {} {noun} differ (bitwise):", self.differing, self.total)?;
        for d in &self.first {
            write!(f, "\n  {d}")?;
        }
        write_more(f, self.differing, self.first.len())
    }
}

/// Compares two f32 slices bit for bit (`to_bits` equality: `-0.0 != +0.0`, NaN payloads
/// count). Lists the first [`LISTED`] differences with abs, rel and ULP difference.
pub fn bitwise_f32(got: &[f32], want: &[f32]) -> BitwiseReport {
    let total = got.len().min(want.len());
    let mut differing = 0;
    let mut first = Vec::new();
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        if g.to_bits() == w.to_bits() {
            continue;
        }
        differing += 1;
        if first.len() < LISTED {
            let abs = abs_diff_f64(f64::from(g), f64::from(w));
            first.push(Diff::F32(F32Diff {
                index,
                got: g,
                want: w,
                abs,
                rel: rel_diff(abs, f64::from(w)),
                ulp: ulp_distance(g, w),
            }));
        }
    }
    BitwiseReport { total, differing, length_mismatch: length_mismatch(got, want), first }
}

/// Compares two byte slices; `unit` is the block size in bytes, used only to say which
/// block (and which byte of it) each difference falls in.
///
/// # Panics
///
/// If `unit` is 0 (a block size is a constant of the format, never user input).
pub fn bitwise_bytes(got: &[u8], want: &[u8], unit: usize) -> BitwiseReport {
    assert!(unit > 0, "bitwise_bytes: block size `unit` must be at least 1");
    let total = got.len().min(want.len());
    let mut differing = 0;
    let mut first = Vec::new();
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        if g == w {
            continue;
        }
        differing += 1;
        if first.len() < LISTED {
            first.push(Diff::Byte(ByteDiff {
                index,
                got: g,
                want: w,
                block: index / unit,
                offset_in_block: index % unit,
            }));
        }
    }
    BitwiseReport { total, differing, length_mismatch: length_mismatch(got, want), first }
}

fn length_mismatch<A, B>(got: &[A], want: &[B]) -> Option<(usize, usize)> {
    (got.len() != want.len()).then_some((got.len(), want.len()))
}

// ---------------------------------------------------------------------------------------
// Tolerance
// ---------------------------------------------------------------------------------------

/// Error statistics of `got` against `want` (see the module docs for each definition).
#[derive(Debug, Clone, PartialEq)]
pub struct ToleranceStats {
    /// Positions compared: the shorter of the two lengths.
    pub total: usize,
    /// `Some((got.len(), want.len()))` when the lengths differ.
    pub length_mismatch: Option<(usize, usize)>,
    /// `sum (want - got)^2 / sum want^2` over positions where both sides are finite, in
    /// f64; `0/0 = 0`, `x/0 = +inf`.
    pub nmse: f64,
    /// Largest `|got - want|` over positions where both sides are finite.
    pub max_abs: f64,
    /// First position reaching `max_abs`; `None` when `max_abs` is 0.
    pub max_abs_index: Option<usize>,
    /// Largest `|got - want| / |want|` over positions where both sides are finite
    /// (`+inf` if some `want` is 0 while `got` is not).
    pub max_rel: f64,
    /// First position reaching `max_rel`; `None` when `max_rel` is 0.
    pub max_rel_index: Option<usize>,
    /// Largest [`ulp_distance`] over all positions (both-NaN positions count as 0);
    /// `None` if there is any NaN mismatch.
    pub max_ulp: Option<u64>,
    /// First position reaching `max_ulp`; `None` when it is 0 or undefined.
    pub max_ulp_index: Option<usize>,
    /// Positions where exactly one side is NaN.
    pub nan_mismatch: usize,
    /// The first such position.
    pub first_nan_mismatch: Option<usize>,
    /// Positions where neither side is NaN, at least one is infinite, and they differ.
    pub inf_mismatch: usize,
    /// The first such position.
    pub first_inf_mismatch: Option<usize>,
}

/// Computes [`ToleranceStats`] of `got` against the reference `want`.
pub fn tolerance(got: &[f32], want: &[f32]) -> ToleranceStats {
    let mut sum_err2 = 0.0f64;
    let mut sum_want2 = 0.0f64;
    let mut max_abs = (0.0f64, None);
    let mut max_rel = (0.0f64, None);
    let mut max_ulp = (0u64, None);
    let (mut nan_mismatch, mut first_nan_mismatch) = (0, None);
    let (mut inf_mismatch, mut first_inf_mismatch) = (0, None);

    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        match (g.is_nan(), w.is_nan()) {
            (true, true) => continue,
            (true, false) | (false, true) => {
                nan_mismatch += 1;
                first_nan_mismatch.get_or_insert(i);
                continue;
            }
            (false, false) => {}
        }
        // Neither side is NaN from here on, so the distance exists.
        let ulp = ordered(g).abs_diff(ordered(w));
        if ulp > max_ulp.0 {
            max_ulp = (ulp, Some(i));
        }
        if !g.is_finite() || !w.is_finite() {
            if g != w {
                inf_mismatch += 1;
                first_inf_mismatch.get_or_insert(i);
            }
            continue;
        }
        let (g, w) = (f64::from(g), f64::from(w));
        let abs = abs_diff_f64(g, w);
        sum_err2 += abs * abs;
        sum_want2 += w * w;
        if abs > max_abs.0 {
            max_abs = (abs, Some(i));
        }
        let rel = rel_diff(abs, w);
        if rel > max_rel.0 {
            max_rel = (rel, Some(i));
        }
    }

    ToleranceStats {
        total: got.len().min(want.len()),
        length_mismatch: length_mismatch(got, want),
        nmse: nmse_ratio(sum_err2, sum_want2),
        max_abs: max_abs.0,
        max_abs_index: max_abs.1,
        max_rel: max_rel.0,
        max_rel_index: max_rel.1,
        max_ulp: (nan_mismatch == 0).then_some(max_ulp.0),
        max_ulp_index: if nan_mismatch == 0 { max_ulp.1 } else { None },
        nan_mismatch,
        first_nan_mismatch,
        inf_mismatch,
        first_inf_mismatch,
    }
}

/// `err2 / want2` with `0/0 = 0` and `x/0 = +inf`.
fn nmse_ratio(err2: f64, want2: f64) -> f64 {
    if want2 == 0.0 {
        if err2 == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        err2 / want2
    }
}

/// Writes ` at [i]` when there is an index.
struct At(Option<usize>);

impl Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(i) => write!(f, " at [{i}]"),
            None => Ok(()),
        }
    }
}

impl Display for ToleranceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((got, want)) = self.length_mismatch {
            writeln!(f, "length mismatch: got {got} values, want {want}")?;
        }
        write!(f, "{} values compared (tolerance):", self.total)?;
        write!(f, "\n  nmse     {:.3e}", self.nmse)?;
        write!(f, "\n  max abs  {:.3e}{}", self.max_abs, At(self.max_abs_index))?;
        write!(f, "\n  max rel  {:.3e}{}", self.max_rel, At(self.max_rel_index))?;
        write!(f, "\n  max ulp  {}{}", Ulp(self.max_ulp), At(self.max_ulp_index))?;
        write!(
            f,
            "\n  NaN mismatches {}{}, infinity mismatches {}{}",
            self.nan_mismatch,
            At(self.first_nan_mismatch),
            self.inf_mismatch,
            At(self.first_inf_mismatch)
        )
    }
}

/// Limits for [`ToleranceStats`]. Each number should come with a comment that says where
/// it comes from (an error analysis or a calibration over many seeds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Largest allowed NMSE (ggml's test-backend-ops uses 1e-7 for most ops).
    pub max_nmse: f64,
    /// Largest allowed `|got - want|`, if bounded.
    pub max_abs: Option<f64>,
    /// Largest allowed ULP distance, if bounded (`Some(0)` demands equal values, though
    /// `-0.0` and `+0.0` still pass: use the bitwise comparison for exact bits).
    pub max_ulp: Option<u64>,
}

impl Tolerance {
    /// `Ok` when every limit holds and there is no length, NaN or infinity mismatch.
    /// Otherwise `Err` with one line per violation: which limit, the value, the limit,
    /// by how much it is exceeded and at which index.
    pub fn check(&self, stats: &ToleranceStats) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some((got, want)) = stats.length_mismatch {
            problems.push(format!("length mismatch: got {got} values, want {want}"));
        }
        if stats.nan_mismatch > 0 {
            problems.push(format!(
                "{} NaN mismatch(es) (exactly one side NaN), first{}",
                stats.nan_mismatch,
                At(stats.first_nan_mismatch)
            ));
        }
        if stats.inf_mismatch > 0 {
            problems.push(format!(
                "{} infinity mismatch(es), first{}",
                stats.inf_mismatch,
                At(stats.first_inf_mismatch)
            ));
        }
        if !within(stats.nmse, self.max_nmse) {
            problems.push(format!(
                "NMSE {:.3e} exceeds the limit {:.3e} by {:.3e} ({:.3}x the limit); \
                 largest abs error {:.3e}{}",
                stats.nmse,
                self.max_nmse,
                stats.nmse - self.max_nmse,
                stats.nmse / self.max_nmse,
                stats.max_abs,
                At(stats.max_abs_index)
            ));
        }
        if let Some(limit) = self.max_abs {
            if !within(stats.max_abs, limit) {
                problems.push(format!(
                    "max abs error {:.3e}{} exceeds the limit {:.3e} by {:.3e}",
                    stats.max_abs,
                    At(stats.max_abs_index),
                    limit,
                    stats.max_abs - limit
                ));
            }
        }
        if let Some(limit) = self.max_ulp {
            // With a NaN mismatch there is no ULP distance; that is reported above.
            if let Some(ulp) = stats.max_ulp.filter(|&u| u > limit) {
                problems.push(format!(
                    "ULP distance {ulp}{} exceeds the limit {limit} by {}",
                    At(stats.max_ulp_index),
                    ulp - limit
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

/// `value <= limit`, false when either is NaN: a NaN value or limit fails the check.
fn within(value: f64, limit: f64) -> bool {
    value <= limit
}

// ---------------------------------------------------------------------------------------
// Per-element bounds
// ---------------------------------------------------------------------------------------

/// One element outside its bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundViolation {
    /// Position in the compared slices.
    pub index: usize,
    /// The value under test.
    pub got: f32,
    /// The reference value.
    pub want: f64,
    /// The allowed `|got - want|` here.
    pub bound: f64,
    /// `|got - want|` in f64.
    pub err: f64,
    /// `err / bound` (`+inf` when no finite ratio describes it; see the module docs).
    pub ratio: f64,
}

impl Display for BoundViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] got {}, want {:e}: |err| {:.3e} > bound {:.3e} (ratio {:.3})",
            self.index,
            F32Bits(self.got),
            self.want,
            self.err,
            self.bound,
            self.ratio
        )
    }
}

/// Result of [`within_bounds`].
#[derive(Debug, Clone, PartialEq)]
pub struct BoundReport {
    /// Positions compared: the shortest of the three lengths.
    pub total: usize,
    /// `Some((got.len(), want.len(), bound.len()))` when the lengths are not all equal.
    pub length_mismatch: Option<(usize, usize, usize)>,
    /// Positions outside their bound.
    pub violations: usize,
    /// Largest `|got - want| / bound` over all compared positions (0 when empty).
    pub worst_ratio: f64,
    /// First position reaching `worst_ratio`; `None` when it is 0.
    pub worst_index: Option<usize>,
    /// The first [`LISTED`] violations, in index order.
    pub first: Vec<BoundViolation>,
}

impl BoundReport {
    /// True when the lengths agree and every element is within its bound.
    pub fn is_ok(&self) -> bool {
        self.violations == 0 && self.length_mismatch.is_none()
    }
}

impl Display for BoundReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((got, want, bound)) = self.length_mismatch {
            writeln!(
                f,
                "length mismatch: got {got} values, want {want}, bound {bound}; \
                 compared the first {}",
                self.total
            )?;
        }
        let worst = format!("worst |err|/bound {:.3}{}", self.worst_ratio, At(self.worst_index));
        if self.violations == 0 {
            return write!(f, "all {} values within their bounds ({worst})", self.total);
        }
        write!(f, "{} of {} values exceed their bound ({worst}):", self.violations, self.total)?;
        for v in &self.first {
            write!(f, "\n  {v}")?;
        }
        write_more(f, self.violations, self.first.len())
    }
}

/// Checks `|got[i] - want[i]| <= bound[i]` for every position (difference in f64).
/// `got` NaN against `want` NaN passes; any other NaN, and a NaN bound, fails.
pub fn within_bounds(got: &[f32], want: &[f64], bound: &[f64]) -> BoundReport {
    let total = got.len().min(want.len()).min(bound.len());
    let length_mismatch = (got.len() != want.len() || got.len() != bound.len()).then_some((
        got.len(),
        want.len(),
        bound.len(),
    ));
    let mut violations = 0;
    let mut worst = (0.0f64, None);
    let mut first = Vec::new();
    for (index, ((&g, &w), &b)) in got.iter().zip(want).zip(bound).enumerate() {
        let g64 = f64::from(g);
        let both_nan = g.is_nan() && w.is_nan();
        let err = if both_nan { 0.0 } else { abs_diff_f64(g64, w) };
        let ok = both_nan || err <= b;
        let ratio = bound_ratio(err, b, ok);
        if ratio > worst.0 {
            worst = (ratio, Some(index));
        }
        if ok {
            continue;
        }
        violations += 1;
        if first.len() < LISTED {
            first.push(BoundViolation { index, got: g, want: w, bound: b, err, ratio });
        }
    }
    BoundReport {
        total,
        length_mismatch,
        violations,
        worst_ratio: worst.0,
        worst_index: worst.1,
        first,
    }
}

/// `err / bound`: 0 for an exact element, in (0, 1] for a passing one (1 for an infinite
/// error within an infinite bound), above 1 for a violation, +inf for a violation with a
/// zero, negative or NaN bound or a NaN error.
fn bound_ratio(err: f64, bound: f64, ok: bool) -> f64 {
    if ok {
        if err == 0.0 {
            return 0.0;
        }
        let r = err / bound;
        return if r.is_nan() { 1.0 } else { r.min(1.0) };
    }
    let r = err / bound;
    if bound > 0.0 && !r.is_nan() {
        r
    } else {
        f64::INFINITY
    }
}

// ---------------------------------------------------------------------------------------
// Failure text
// ---------------------------------------------------------------------------------------

/// The text a failing golden test prints: a headline naming the case and the lane, the
/// report, and the exact command that refreshes the golden.
pub fn failure_message(
    case: &str,
    lane: &str,
    report: &impl Display,
    refresh_command: &str,
) -> String {
    let mut out = format!("mismatch in case `{case}` on lane `{lane}`\n");
    // Writing to a String cannot fail.
    let _ = write!(out, "{report}");
    let trimmed = out.trim_end_matches('\n').len();
    out.truncate(trimmed);
    let _ =
        write!(out, "\nto refresh this golden (only if the change is intended): {refresh_command}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN_SUB: f32 = f32::from_bits(1);

    fn next_up(x: f32) -> f32 {
        f32::from_bits(x.to_bits() + 1)
    }

    #[test]
    fn ulp_across_zero() {
        assert_eq!(ulp_distance(0.0, -0.0), Some(0));
        assert_eq!(ulp_distance(0.0, MIN_SUB), Some(1));
        assert_eq!(ulp_distance(-0.0, MIN_SUB), Some(1));
        assert_eq!(ulp_distance(-MIN_SUB, 0.0), Some(1));
        assert_eq!(ulp_distance(-MIN_SUB, MIN_SUB), Some(2));
        assert_eq!(ulp_distance(-1.0, 1.0), Some(2 * u64::from(1.0f32.to_bits())));
    }

    #[test]
    fn ulp_adjacent_values() {
        for x in [1.0f32, 0.1, 3.0e38, 1.0e-40, -2.5, -1.0e-40] {
            let y = next_up(x); // next in magnitude, same sign
            assert_eq!(ulp_distance(x, y), Some(1), "{x:e}");
            assert_eq!(ulp_distance(y, x), Some(1), "{x:e}");
        }
        assert_eq!(ulp_distance(1.0, 1.0), Some(0));
        assert_eq!(ulp_distance(1.0, 2.0), Some(1 << 23));
    }

    #[test]
    fn ulp_infinities() {
        assert_eq!(ulp_distance(f32::MAX, f32::INFINITY), Some(1));
        assert_eq!(ulp_distance(f32::MIN, f32::NEG_INFINITY), Some(1));
        assert_eq!(ulp_distance(f32::INFINITY, f32::INFINITY), Some(0));
        assert_eq!(ulp_distance(f32::NEG_INFINITY, f32::INFINITY), Some(2 * 0x7f80_0000));
    }

    #[test]
    fn ulp_nan() {
        assert_eq!(ulp_distance(f32::NAN, 1.0), None);
        assert_eq!(ulp_distance(1.0, f32::NAN), None);
        assert_eq!(ulp_distance(f32::NAN, f32::NAN), None);
        assert_eq!(ulp_distance(f32::INFINITY, f32::NAN), None);
    }

    #[test]
    fn bitwise_equal() {
        let a = [1.0f32, -2.0, 0.5, f32::INFINITY];
        let r = bitwise_f32(&a, &a);
        assert!(r.is_equal());
        assert_eq!((r.total, r.differing, r.length_mismatch), (4, 0, None));
        assert!(r.first.is_empty());
        assert_eq!(r.to_string(), "all 4 compared values are bitwise equal");
    }

    #[test]
    fn bitwise_one_difference() {
        let want = [0.0f32, 0.12345679, 2.0];
        let got = [0.0f32, f32::from_bits(0.12345679f32.to_bits() - 1), 2.0];
        let r = bitwise_f32(&got, &want);
        assert!(!r.is_equal());
        assert_eq!((r.total, r.differing), (3, 1));
        let Diff::F32(d) = r.first[0] else { panic!("expected an f32 diff") };
        assert_eq!((d.index, d.ulp), (1, Some(1)));
        assert_eq!(d.abs, f64::from(want[1]) - f64::from(got[1]));
        assert_eq!(d.rel, d.abs / f64::from(want[1]));
        let text = r.to_string();
        assert_eq!(
            text,
            "1 of 3 values differ (bitwise):\n  [1] got 1.2345678e-1 (0x3dfcd6e9), \
             want 1.2345679e-1 (0x3dfcd6ea): abs 7.45e-9, rel 6.03e-8, 1 ulp"
        );
    }

    #[test]
    fn bitwise_signed_zero_and_nan_payloads() {
        let r = bitwise_f32(&[-0.0], &[0.0]);
        assert_eq!(r.differing, 1);
        let Diff::F32(d) = r.first[0] else { panic!("expected an f32 diff") };
        assert_eq!((d.abs, d.rel, d.ulp), (0.0, 0.0, Some(0)));

        let quiet = f32::from_bits(0x7fc0_0000);
        let payload = f32::from_bits(0x7fc0_0001);
        assert!(bitwise_f32(&[quiet], &[quiet]).is_equal());
        let r = bitwise_f32(&[payload], &[quiet]);
        assert_eq!(r.differing, 1);
        assert!(r.to_string().contains("ulp n/a (NaN)"), "{r}");

        let r = bitwise_f32(&[1.0], &[0.0]);
        let Diff::F32(d) = r.first[0] else { panic!("expected an f32 diff") };
        assert_eq!((d.abs, d.rel), (1.0, f64::INFINITY));
    }

    #[test]
    fn bitwise_five_listed_no_more_line() {
        let want = [1.0f32; 10];
        let mut got = want;
        for i in [0, 2, 4, 6, 8] {
            got[i] = 2.0;
        }
        let r = bitwise_f32(&got, &want);
        assert_eq!((r.differing, r.first.len()), (5, 5));
        let text = r.to_string();
        assert!(text.starts_with("5 of 10 values differ (bitwise):"), "{text}");
        assert_eq!(text.lines().count(), 6);
        assert!(!text.contains("more"), "{text}");
        let idx: Vec<usize> = r.first.iter().map(Diff::index).collect();
        assert_eq!(idx, [0, 2, 4, 6, 8]);
    }

    #[test]
    fn bitwise_seven_lists_five_and_two_more() {
        let want = [1.0f32; 8];
        let mut got = want;
        for v in got.iter_mut().skip(1) {
            *v = -1.0;
        }
        let r = bitwise_f32(&got, &want);
        assert_eq!((r.differing, r.first.len()), (7, 5));
        let text = r.to_string();
        assert!(text.starts_with("7 of 8 values differ (bitwise):"), "{text}");
        assert_eq!(text.lines().count(), 7);
        assert_eq!(text.lines().last(), Some("  ... and 2 more"));
        assert_eq!(r.first.last().map(Diff::index), Some(5));
    }

    #[test]
    fn bitwise_length_mismatch() {
        let r = bitwise_f32(&[1.0, 2.0, 3.0], &[1.0, 2.0]);
        assert!(!r.is_equal());
        assert_eq!((r.total, r.differing, r.length_mismatch), (2, 0, Some((3, 2))));
        assert_eq!(
            r.to_string(),
            "length mismatch: got 3 values, want 2; compared the first 2\n\
             all 2 compared values are bitwise equal"
        );
        let r = bitwise_f32(&[1.0], &[2.0, 2.0]);
        assert_eq!((r.differing, r.length_mismatch), (1, Some((1, 2))));
        assert!(r.to_string().contains("1 of 1 values differ"), "{r}");
    }

    #[test]
    fn bytes_blocks() {
        let want: Vec<u8> = (0..40).collect();
        let mut got = want.clone();
        got[3] ^= 1;
        got[37] = 0xff;
        let r = bitwise_bytes(&got, &want, 34);
        assert_eq!((r.total, r.differing), (40, 2));
        assert_eq!(
            r.first[1],
            Diff::Byte(ByteDiff { index: 37, got: 0xff, want: 37, block: 1, offset_in_block: 3 })
        );
        assert_eq!(
            r.to_string(),
            "2 of 40 bytes differ (bitwise):\n  [3] block 0 +3: got 0x02, want 0x03\n  \
             [37] block 1 +3: got 0xff, want 0x25"
        );
        assert!(bitwise_bytes(&want, &want, 34).is_equal());
        let r = bitwise_bytes(&want[..34], &want, 34);
        assert_eq!(r.length_mismatch, Some((34, 40)));
        assert!(!r.is_equal());
    }

    #[test]
    #[should_panic(expected = "unit")]
    fn bytes_zero_unit_panics() {
        bitwise_bytes(&[1], &[1], 0);
    }

    #[test]
    fn nmse_known_values() {
        let s = tolerance(&[1.0, 3.0], &[1.0, 2.0]);
        assert_eq!(s.nmse, 1.0 / 5.0);
        assert_eq!((s.max_abs, s.max_abs_index), (1.0, Some(1)));
        assert_eq!((s.max_rel, s.max_rel_index), (0.5, Some(1)));
        assert_eq!((s.max_ulp, s.max_ulp_index), (Some(1 << 22), Some(1)));

        // Normalised by want, not got.
        assert_eq!(tolerance(&[1.0, 2.0], &[1.0, 3.0]).nmse, 1.0 / 10.0);
        // 0/0 = 0, x/0 = inf, empty = 0.
        assert_eq!(tolerance(&[0.0, -0.0], &[0.0, 0.0]).nmse, 0.0);
        assert_eq!(tolerance(&[0.0, 1.0], &[0.0, 0.0]).nmse, f64::INFINITY);
        assert_eq!(tolerance(&[], &[]).nmse, 0.0);
        let s = tolerance(&[2.0, 2.0], &[2.0, 2.0]);
        assert_eq!((s.nmse, s.max_abs, s.max_abs_index, s.max_ulp), (0.0, 0.0, None, Some(0)));
        // Differences formed in f64 do not overflow.
        let s = tolerance(&[f32::MAX], &[-f32::MAX]);
        assert_eq!(s.nmse, 4.0);
        assert_eq!(s.max_abs, 2.0 * f64::from(f32::MAX));
    }

    #[test]
    fn tolerance_nan_and_inf() {
        let got = [f32::NAN, 1.0, f32::NAN, f32::INFINITY, f32::INFINITY, 4.0];
        let want = [f32::NAN, f32::NAN, 2.0, f32::INFINITY, f32::MAX, 4.0];
        let s = tolerance(&got, &want);
        assert_eq!((s.nan_mismatch, s.first_nan_mismatch), (2, Some(1)));
        assert_eq!((s.inf_mismatch, s.first_inf_mismatch), (1, Some(4)));
        assert_eq!((s.max_ulp, s.max_ulp_index), (None, None));
        // Only index 5 is finite on both sides, and it is exact.
        assert_eq!((s.nmse, s.max_abs, s.max_rel), (0.0, 0.0, 0.0));

        let s = tolerance(&[f32::INFINITY, 1.0], &[f32::MAX, 1.0]);
        assert_eq!((s.max_ulp, s.max_ulp_index, s.inf_mismatch), (Some(1), Some(0), 1));
    }

    #[test]
    fn tolerance_check_messages() {
        let tol = Tolerance { max_nmse: 1e-3, max_abs: Some(0.5), max_ulp: Some(4) };
        let near = [1.0f32, next_up(2.0)];
        assert_eq!(tol.check(&tolerance(&near, &[1.0, 2.0])), Ok(()));

        let err = tol.check(&tolerance(&[1.0, 3.0], &[1.0, 2.0])).unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 3, "{err}");
        assert_eq!(
            lines[0],
            "NMSE 2.000e-1 exceeds the limit 1.000e-3 by 1.990e-1 (200.000x the limit); \
             largest abs error 1.000e0 at [1]"
        );
        assert_eq!(lines[1], "max abs error 1.000e0 at [1] exceeds the limit 5.000e-1 by 5.000e-1");
        assert_eq!(lines[2], "ULP distance 4194304 at [1] exceeds the limit 4 by 4194300");

        let nmse_only = Tolerance { max_nmse: 1.0, max_abs: None, max_ulp: None };
        let err = nmse_only.check(&tolerance(&[1.0, f32::NAN, 1.0], &[1.0, 1.0])).unwrap_err();
        assert_eq!(err, "length mismatch: got 3 values, want 2\n1 NaN mismatch(es) (exactly one side NaN), first at [1]");
        let err = nmse_only.check(&tolerance(&[f32::NEG_INFINITY], &[f32::INFINITY])).unwrap_err();
        assert_eq!(err, "1 infinity mismatch(es), first at [0]");
        assert_eq!(nmse_only.check(&tolerance(&[f32::NAN], &[f32::NAN])), Ok(()));
    }

    #[test]
    fn tolerance_display() {
        let text = tolerance(&[1.0, 3.0], &[1.0, 2.0]).to_string();
        assert_eq!(
            text,
            "2 values compared (tolerance):\n  nmse     2.000e-1\n  max abs  1.000e0 at [1]\n  \
             max rel  5.000e-1 at [1]\n  max ulp  4194304 ulp at [1]\n  \
             NaN mismatches 0, infinity mismatches 0"
        );
    }

    #[test]
    fn bounds_report() {
        let got = [1.0f32, 2.0, 3.0, 4.0, f32::NAN, f32::NAN, 7.0];
        let want = [1.0, 2.1, 3.0, 4.5, 5.0, f64::NAN, 7.0];
        let bound = [0.0, 0.2, 0.0, 0.25, 1.0, 0.0, f64::NAN];
        let r = within_bounds(&got, &want, &bound);
        assert!(!r.is_ok());
        assert_eq!((r.total, r.length_mismatch, r.violations), (7, None, 3));
        let idx: Vec<usize> = r.first.iter().map(|v| v.index).collect();
        assert_eq!(idx, [3, 4, 6]);
        assert_eq!(r.first[0].ratio, 2.0);
        assert_eq!(r.first[1].ratio, f64::INFINITY); // NaN error
        assert_eq!(r.first[2].ratio, f64::INFINITY); // NaN bound
        assert_eq!((r.worst_ratio, r.worst_index), (f64::INFINITY, Some(4)));
        let text = r.to_string();
        assert!(
            text.starts_with("3 of 7 values exceed their bound (worst |err|/bound inf at [4]):"),
            "{text}"
        );
        assert!(
            text.contains("[3] got 4e0 (0x40800000), want 4.5e0: |err| 5.000e-1 > bound 2.500e-1 (ratio 2.000)"),
            "{text}"
        );

        let r = within_bounds(&[1.0, 2.0], &[1.0, 2.1], &[0.0, 0.2]);
        assert!(r.is_ok());
        assert_eq!(r.worst_index, Some(1));
        assert!((r.worst_ratio - 0.5).abs() < 1e-6, "{}", r.worst_ratio);
        assert_eq!(
            r.to_string(),
            "all 2 values within their bounds (worst |err|/bound 0.500 at [1])"
        );
    }

    #[test]
    fn bounds_many_and_length_mismatch() {
        let got = [0.0f32; 8];
        let want = [1.0f64; 8];
        let bound = [0.5f64; 9];
        let r = within_bounds(&got, &want, &bound);
        assert_eq!((r.total, r.length_mismatch, r.violations), (8, Some((8, 8, 9)), 8));
        assert_eq!(r.first.len(), LISTED);
        let text = r.to_string();
        assert!(text.starts_with("length mismatch: got 8 values, want 8, bound 9"), "{text}");
        assert_eq!(text.lines().last(), Some("  ... and 3 more"));
        // A zero bound with a non-zero error has no finite ratio.
        let r = within_bounds(&[1.0], &[0.0], &[0.0]);
        assert_eq!((r.violations, r.worst_ratio), (1, f64::INFINITY));
    }

    #[test]
    fn failure_message_layout() {
        let r = bitwise_f32(&[1.0, 2.0], &[1.0, 3.0]);
        let msg = failure_message(
            "q4_K/gemv/k=256,n=4/case0",
            "x86_64-avx2",
            &r,
            "TIERCHECK_BLESS=1 cargo test --test trials -- golden::q4_K/gemv",
        );
        let lines: Vec<&str> = msg.lines().collect();
        assert_eq!(lines[0], "mismatch in case `q4_K/gemv/k=256,n=4/case0` on lane `x86_64-avx2`");
        assert_eq!(lines[1], "1 of 2 values differ (bitwise):");
        assert!(lines[2].starts_with("  [1] got 2e0 (0x40000000), want 3e0 (0x40400000)"));
        assert_eq!(
            lines[3],
            "to refresh this golden (only if the change is intended): \
             TIERCHECK_BLESS=1 cargo test --test trials -- golden::q4_K/gemv"
        );
        assert_eq!(lines.len(), 4);

        // A report ending in a newline does not leave a blank line.
        let msg = failure_message("c", "ref", &"report\n", "cmd");
        assert_eq!(msg, "mismatch in case `c` on lane `ref`\nreport\nto refresh this golden (only if the change is intended): cmd");
    }
}
