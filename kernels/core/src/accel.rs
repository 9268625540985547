//! Where an accelerated form may stand in for a twin: one function-pointer slot per entry
//! point, filled by the `tiercheck-accel` crate, read by the twin's first line.
//!
//! A twin's contract is its bits, not its scalar code. The scalar twins in this crate are
//! the readable specification and contain no host-specific code (no `#[target_feature]`,
//! no intrinsics). `tiercheck-accel` holds the same computations written with the host's
//! SIMD (the same bits: exact integer stages, the twin's float operations one for one)
//! at the same paths (`accel/src/arch/x86_64/avx2/vec_dot.rs` accelerates
//! `core/src/arch/x86_64/avx2/vec_dot.rs`), detects the CPU's features once and stores a
//! function pointer in each slot the host can serve ([`Slot`]). A twin whose slot is
//! empty, or a thread inside [`with_scalar`], runs the scalar code.
//!
//! A slot has two entries:
//!
//! - **fast**: the accelerated form, run unless the thread asked for the scalar twins;
//! - **spec**: the scalar code itself compiled once more with the host's float features
//!   (x86-64 FMA: `f32::mul_add` one instruction instead of a software route), run
//!   inside [`with_scalar`]. Rust neither contracts nor reassociates float arithmetic
//!   whatever the target features, so this is the specification, only faster.
//!
//! The golden suite runs every case both ways (`<case>/<lane>` and `<case>/<lane>/scalar`)
//! against the same stored golden; `tiercheck-accel`'s tests compare each accelerated
//! form with its scalar twin on random and extreme inputs.

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    static SCALAR_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// What the installed accelerated forms are (`avx2+fma`, `neon`), set by `tiercheck-accel`.
static DESCRIPTION: OnceLock<&'static str> = OnceLock::new();

/// Run `f` with the scalar twins only, on this thread (threads `f` spawns are not
/// affected). The golden suite uses it to check every case on the scalar specification
/// as well as on the accelerated form.
pub fn with_scalar<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCALAR_ONLY.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SCALAR_ONLY.with(|s| s.replace(true)));
    f()
}

/// Whether this thread runs the scalar twins only (inside [`with_scalar`]).
#[inline]
pub fn scalar_only() -> bool {
    SCALAR_ONLY.with(|s| s.get())
}

/// Which accelerated form the twins use on this thread: what `tiercheck-accel`
/// installed (`avx2+fma`, `neon`), or `scalar` (nothing installed, or inside
/// [`with_scalar`]).
pub fn describe() -> &'static str {
    match DESCRIPTION.get() {
        Some(d) if !scalar_only() => d,
        _ => "scalar",
    }
}

/// Records what the installed forms are (the first call wins); for `tiercheck-accel`.
pub fn set_description(d: &'static str) {
    let _ = DESCRIPTION.set(d);
}

/// One entry point's accelerated forms: a function pointer set once, before or while the
/// twins run, by `tiercheck-accel` (only with what the CPU has).
pub struct Slot<F> {
    fast: OnceLock<F>,
    spec: OnceLock<F>,
}

impl<F: Copy> Slot<F> {
    /// An empty slot: the twin runs its scalar code.
    pub const fn new() -> Self {
        Slot { fast: OnceLock::new(), spec: OnceLock::new() }
    }

    /// The form to run on this thread now, if any: `spec` inside [`with_scalar`],
    /// `fast` otherwise.
    #[inline]
    pub fn get(&self) -> Option<F> {
        if scalar_only() {
            self.spec.get().copied()
        } else {
            self.fast.get().copied()
        }
    }

    /// Installs the accelerated form (the first call wins).
    pub fn set_fast(&self, f: F) {
        let _ = self.fast.set(f);
    }

    /// Installs the scalar code compiled with the host's float features (the first call
    /// wins).
    pub fn set_spec(&self, f: F) {
        let _ = self.spec.set(f);
    }

    /// Whether an accelerated form is installed (whatever this thread asked for).
    pub fn has_fast(&self) -> bool {
        self.fast.get().is_some()
    }
}

impl<F: Copy> Default for Slot<F> {
    fn default() -> Self {
        Slot::new()
    }
}

/// The first line of a twin entry point: `accelerated!(SLOT, (args))` returns the
/// installed form's result when the slot holds one for this thread.
#[macro_export]
macro_rules! accelerated {
    ($slot:expr, ($($arg:expr),* $(,)?)) => {
        if let Some(f) = $slot.get() {
            return f($($arg),*);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(x: u32) -> u32 {
        2 * x
    }

    fn triple(x: u32) -> u32 {
        3 * x
    }

    fn through(slot: &Slot<fn(u32) -> u32>, x: u32) -> u32 {
        accelerated!(slot, (x));
        x
    }

    #[test]
    fn a_slot_serves_fast_outside_and_spec_inside_with_scalar() {
        let slot: Slot<fn(u32) -> u32> = Slot::new();
        assert_eq!(through(&slot, 5), 5, "empty slot: the scalar code");
        slot.set_fast(double);
        assert_eq!(through(&slot, 5), 10);
        assert_eq!(with_scalar(|| through(&slot, 5)), 5, "no spec form: the scalar code");
        slot.set_spec(triple);
        assert_eq!(with_scalar(|| through(&slot, 5)), 15);
        assert_eq!(through(&slot, 5), 10, "with_scalar restored the thread's state");
        slot.set_fast(triple);
        assert_eq!(through(&slot, 5), 10, "the first installation wins");
    }

    #[test]
    fn with_scalar_is_per_thread_and_nests() {
        assert!(!scalar_only());
        with_scalar(|| {
            assert!(scalar_only());
            with_scalar(|| assert!(scalar_only()));
            assert!(scalar_only(), "the inner call restored the outer state");
            let other = std::thread::spawn(scalar_only).join().unwrap();
            assert!(!other, "a spawned thread is not affected");
        });
        assert!(!scalar_only());
    }
}
