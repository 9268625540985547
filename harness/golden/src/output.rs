//! A kernel case's output: f32 values or quantized block bytes.

use safetensors::tensor::Dtype;
use tiercheck_core::blocks::dequantize;
use tiercheck_core::GgmlType;

use super::manifest::sha256_hex;

/// One output.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// f32 values.
    F32 {
        /// Shape, outermost first.
        shape: Vec<usize>,
        /// Values.
        data: Vec<f32>,
    },
    /// Quantized blocks (activation quantizer outputs).
    Blocks {
        /// Block type.
        ty: GgmlType,
        /// Bytes.
        data: Vec<u8>,
    },
}

impl Output {
    /// The exact bytes (f32 little-endian, or the blocks).
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Output::F32 { data, .. } => data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Output::Blocks { data, .. } => data.clone(),
        }
    }
    /// sha256 of [`Output::bytes`].
    pub fn sha256(&self) -> String {
        sha256_hex(&self.bytes())
    }
    /// `f32` or the block type's name.
    pub fn dtype(&self) -> String {
        match self {
            Output::F32 { .. } => "f32".into(),
            Output::Blocks { ty, .. } => ty.name().into(),
        }
    }
    /// Logical shape: the f32 shape, or `[bytes]` for blocks.
    pub fn shape(&self) -> Vec<usize> {
        self.stored_shape()
    }
    pub(crate) fn stored_dtype(&self) -> Dtype {
        match self {
            Output::F32 { .. } => Dtype::F32,
            Output::Blocks { .. } => Dtype::U8,
        }
    }
    pub(crate) fn stored_shape(&self) -> Vec<usize> {
        match self {
            Output::F32 { shape, .. } => shape.clone(),
            Output::Blocks { data, .. } => vec![data.len()],
        }
    }
    /// What the outputs file keeps of this output: all of it, or the first
    /// [`SAMPLE`](super::manifest::SAMPLE) values of a large f32 output.
    pub(crate) fn stored_part(&self) -> Output {
        match self {
            Output::F32 { data, .. } if data.len() > super::manifest::STORE_FULL_MAX => {
                let n = super::manifest::SAMPLE;
                Output::F32 { shape: vec![n], data: data[..n].to_vec() }
            }
            other => other.clone(),
        }
    }

    /// Number of elements (values, or bytes for blocks).
    pub fn len(&self) -> usize {
        match self {
            Output::F32 { data, .. } => data.len(),
            Output::Blocks { data, .. } => data.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values: f32 as is, blocks dequantized (d * q).
    pub fn values(&self) -> Vec<f32> {
        match self {
            Output::F32 { data, .. } => data.clone(),
            Output::Blocks { ty, data } => {
                let n = data.len() / ty.type_size() * ty.block_size();
                let mut v = vec![0.0; n];
                match dequantize(*ty, data, &mut v) {
                    Ok(()) => v,
                    Err(_) => Vec::new(),
                }
            }
        }
    }
    /// Rebuild from a stored tensor and the manifest's dtype.
    pub(crate) fn from_stored(
        dtype: Dtype,
        shape: &[usize],
        raw: &[u8],
        declared: &str,
    ) -> Result<Output, String> {
        match (dtype, declared) {
            (Dtype::F32, "f32") => Ok(Output::F32 {
                shape: shape.to_vec(),
                data: raw
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            }),
            (Dtype::U8, name) => {
                let ty = GgmlType::from_name(name)
                    .ok_or_else(|| format!("unknown block type {name:?}"))?;
                if !raw.len().is_multiple_of(ty.type_size()) {
                    return Err(format!(
                        "{} bytes is not a whole number of {name} blocks",
                        raw.len()
                    ));
                }
                Ok(Output::Blocks { ty, data: raw.to_vec() })
            }
            (dt, decl) => Err(format!("stored as {dt:?} but the manifest says {decl}")),
        }
    }
}
