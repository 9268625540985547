//! tiercheck-core: block formats, lane recipes, the `ref` lane and portable schedules.

pub mod ggml_type;

pub use ggml_type::GgmlType;
