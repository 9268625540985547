//! Errors of the kernel layer: about shapes, lengths or unsupported types, since the
//! arithmetic itself cannot fail; and, for kernels that run on a GPU, the device
//! runtime's own errors.

/// A kernel was called with inputs it cannot process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A byte buffer is not a whole number of blocks.
    #[error("{what}: {len} bytes is not a whole number of {unit}-byte blocks")]
    BadLength {
        /// The format.
        what: &'static str,
        /// The length given.
        len: usize,
        /// The block size in bytes.
        unit: usize,
    },
    /// A length or shape differs from what the other inputs imply.
    #[error("{what}: expected {expected} elements, got {got}")]
    ShapeMismatch {
        /// What was checked.
        what: &'static str,
        /// What the other inputs imply.
        expected: usize,
        /// What was given.
        got: usize,
    },
    /// A row length is not a multiple of the block size.
    #[error("{ty}: row length {k} is not a multiple of the block size {block}")]
    BadRowLength {
        /// The type.
        ty: &'static str,
        /// The row length.
        k: usize,
        /// The block size.
        block: usize,
    },
    /// The operation is not implemented for this type.
    #[error("{op} is not supported for type {ty}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The type name.
        ty: &'static str,
    },
    /// A device runtime call failed (GPU lanes only): the call and the runtime's error.
    #[error("device: {0}")]
    Device(String),
}
