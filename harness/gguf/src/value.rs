//! Metadata values: the thirteen GGUF value types, scalar values and typed arrays.

use std::fmt;

/// Deepest nesting of metadata arrays the reader accepts and the writer emits: an array
/// is depth 1, an array of arrays depth 2, and so on.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// A GGUF metadata value type (`enum gguf_type` in `gguf.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MetaValueType {
    /// `uint8` (id 0)
    U8 = 0,
    /// `int8` (id 1)
    I8 = 1,
    /// `uint16` (id 2)
    U16 = 2,
    /// `int16` (id 3)
    I16 = 3,
    /// `uint32` (id 4)
    U32 = 4,
    /// `int32` (id 5)
    I32 = 5,
    /// `float32` (id 6)
    F32 = 6,
    /// `bool` (id 7), one byte holding 0 or 1
    Bool = 7,
    /// `string` (id 8): u64 byte length, then UTF-8 bytes
    String = 8,
    /// `array` (id 9): u32 element type, u64 count, then the elements
    Array = 9,
    /// `uint64` (id 10)
    U64 = 10,
    /// `int64` (id 11)
    I64 = 11,
    /// `float64` (id 12)
    F64 = 12,
}

impl MetaValueType {
    /// Every value type, in id order.
    pub const ALL: &'static [MetaValueType] = &[
        MetaValueType::U8,
        MetaValueType::I8,
        MetaValueType::U16,
        MetaValueType::I16,
        MetaValueType::U32,
        MetaValueType::I32,
        MetaValueType::F32,
        MetaValueType::Bool,
        MetaValueType::String,
        MetaValueType::Array,
        MetaValueType::U64,
        MetaValueType::I64,
        MetaValueType::F64,
    ];

    /// The type with this GGUF id, or `None` for an unknown id.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => MetaValueType::U8,
            1 => MetaValueType::I8,
            2 => MetaValueType::U16,
            3 => MetaValueType::I16,
            4 => MetaValueType::U32,
            5 => MetaValueType::I32,
            6 => MetaValueType::F32,
            7 => MetaValueType::Bool,
            8 => MetaValueType::String,
            9 => MetaValueType::Array,
            10 => MetaValueType::U64,
            11 => MetaValueType::I64,
            12 => MetaValueType::F64,
            _ => return None,
        })
    }

    /// The GGUF id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The type's name as the GGUF specification spells it (`uint32`, `string`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MetaValueType::U8 => "uint8",
            MetaValueType::I8 => "int8",
            MetaValueType::U16 => "uint16",
            MetaValueType::I16 => "int16",
            MetaValueType::U32 => "uint32",
            MetaValueType::I32 => "int32",
            MetaValueType::F32 => "float32",
            MetaValueType::Bool => "bool",
            MetaValueType::String => "string",
            MetaValueType::Array => "array",
            MetaValueType::U64 => "uint64",
            MetaValueType::I64 => "int64",
            MetaValueType::F64 => "float64",
        }
    }

    /// The smallest number of bytes one value of this type occupies in a file (an empty
    /// string is its 8-byte length, an empty array its 4-byte type and 8-byte count).
    pub(crate) fn min_encoded_size(self) -> u64 {
        match self {
            MetaValueType::U8 | MetaValueType::I8 | MetaValueType::Bool => 1,
            MetaValueType::U16 | MetaValueType::I16 => 2,
            MetaValueType::U32 | MetaValueType::I32 | MetaValueType::F32 => 4,
            MetaValueType::U64 | MetaValueType::I64 | MetaValueType::F64 => 8,
            MetaValueType::String => 8,
            MetaValueType::Array => 12,
        }
    }
}

impl fmt::Display for MetaValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// `uint8`
    U8(u8),
    /// `int8`
    I8(i8),
    /// `uint16`
    U16(u16),
    /// `int16`
    I16(i16),
    /// `uint32`
    U32(u32),
    /// `int32`
    I32(i32),
    /// `float32`
    F32(f32),
    /// `bool`
    Bool(bool),
    /// `string`
    String(String),
    /// `array` (typed, possibly nested)
    Array(MetaArray),
    /// `uint64`
    U64(u64),
    /// `int64`
    I64(i64),
    /// `float64`
    F64(f64),
}

impl MetaValue {
    /// The value's GGUF type.
    pub fn value_type(&self) -> MetaValueType {
        match self {
            MetaValue::U8(_) => MetaValueType::U8,
            MetaValue::I8(_) => MetaValueType::I8,
            MetaValue::U16(_) => MetaValueType::U16,
            MetaValue::I16(_) => MetaValueType::I16,
            MetaValue::U32(_) => MetaValueType::U32,
            MetaValue::I32(_) => MetaValueType::I32,
            MetaValue::F32(_) => MetaValueType::F32,
            MetaValue::Bool(_) => MetaValueType::Bool,
            MetaValue::String(_) => MetaValueType::String,
            MetaValue::Array(_) => MetaValueType::Array,
            MetaValue::U64(_) => MetaValueType::U64,
            MetaValue::I64(_) => MetaValueType::I64,
            MetaValue::F64(_) => MetaValueType::F64,
        }
    }

    /// The string, if this is a `string` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an `array` value.
    pub fn as_array(&self) -> Option<&MetaArray> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Any integer value (of any width or signedness) that fits in `u64`; `None` for
    /// negative integers and non-integer types.
    pub fn to_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Array nesting depth: 0 for a scalar or string, 1 for an array of scalars, ...
    pub fn depth(&self) -> usize {
        match self {
            MetaValue::Array(a) => a.depth(),
            _ => 0,
        }
    }
}

/// A metadata array. Arrays are homogeneous and keep their element type even when empty;
/// an array of arrays holds inner arrays that each carry their own element type.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaArray {
    /// array of `uint8`
    U8(Vec<u8>),
    /// array of `int8`
    I8(Vec<i8>),
    /// array of `uint16`
    U16(Vec<u16>),
    /// array of `int16`
    I16(Vec<i16>),
    /// array of `uint32`
    U32(Vec<u32>),
    /// array of `int32`
    I32(Vec<i32>),
    /// array of `float32`
    F32(Vec<f32>),
    /// array of `bool`
    Bool(Vec<bool>),
    /// array of `string`
    String(Vec<String>),
    /// array of arrays
    Array(Vec<MetaArray>),
    /// array of `uint64`
    U64(Vec<u64>),
    /// array of `int64`
    I64(Vec<i64>),
    /// array of `float64`
    F64(Vec<f64>),
}

impl MetaArray {
    /// An empty array of the given element type.
    pub fn empty(elem_type: MetaValueType) -> Self {
        match elem_type {
            MetaValueType::U8 => MetaArray::U8(Vec::new()),
            MetaValueType::I8 => MetaArray::I8(Vec::new()),
            MetaValueType::U16 => MetaArray::U16(Vec::new()),
            MetaValueType::I16 => MetaArray::I16(Vec::new()),
            MetaValueType::U32 => MetaArray::U32(Vec::new()),
            MetaValueType::I32 => MetaArray::I32(Vec::new()),
            MetaValueType::F32 => MetaArray::F32(Vec::new()),
            MetaValueType::Bool => MetaArray::Bool(Vec::new()),
            MetaValueType::String => MetaArray::String(Vec::new()),
            MetaValueType::Array => MetaArray::Array(Vec::new()),
            MetaValueType::U64 => MetaArray::U64(Vec::new()),
            MetaValueType::I64 => MetaArray::I64(Vec::new()),
            MetaValueType::F64 => MetaArray::F64(Vec::new()),
        }
    }

    /// The element type.
    pub fn elem_type(&self) -> MetaValueType {
        match self {
            MetaArray::U8(_) => MetaValueType::U8,
            MetaArray::I8(_) => MetaValueType::I8,
            MetaArray::U16(_) => MetaValueType::U16,
            MetaArray::I16(_) => MetaValueType::I16,
            MetaArray::U32(_) => MetaValueType::U32,
            MetaArray::I32(_) => MetaValueType::I32,
            MetaArray::F32(_) => MetaValueType::F32,
            MetaArray::Bool(_) => MetaValueType::Bool,
            MetaArray::String(_) => MetaValueType::String,
            MetaArray::Array(_) => MetaValueType::Array,
            MetaArray::U64(_) => MetaValueType::U64,
            MetaArray::I64(_) => MetaValueType::I64,
            MetaArray::F64(_) => MetaValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::String(v) => v.len(),
            MetaArray::Array(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`MetaValue`] (cloned), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<MetaValue> {
        Some(match self {
            MetaArray::U8(v) => MetaValue::U8(*v.get(i)?),
            MetaArray::I8(v) => MetaValue::I8(*v.get(i)?),
            MetaArray::U16(v) => MetaValue::U16(*v.get(i)?),
            MetaArray::I16(v) => MetaValue::I16(*v.get(i)?),
            MetaArray::U32(v) => MetaValue::U32(*v.get(i)?),
            MetaArray::I32(v) => MetaValue::I32(*v.get(i)?),
            MetaArray::F32(v) => MetaValue::F32(*v.get(i)?),
            MetaArray::Bool(v) => MetaValue::Bool(*v.get(i)?),
            MetaArray::String(v) => MetaValue::String(v.get(i)?.clone()),
            MetaArray::Array(v) => MetaValue::Array(v.get(i)?.clone()),
            MetaArray::U64(v) => MetaValue::U64(*v.get(i)?),
            MetaArray::I64(v) => MetaValue::I64(*v.get(i)?),
            MetaArray::F64(v) => MetaValue::F64(*v.get(i)?),
        })
    }

    /// Iterates over the elements as [`MetaValue`]s (cloned).
    pub fn iter(&self) -> impl Iterator<Item = MetaValue> + '_ {
        (0..self.len()).filter_map(move |i| self.get(i))
    }

    /// Nesting depth: 1 for an array of non-arrays, 1 + the deepest inner array otherwise
    /// (an empty array of arrays counts as depth 2).
    pub fn depth(&self) -> usize {
        match self {
            MetaArray::Array(inner) => 1 + inner.iter().map(MetaArray::depth).max().unwrap_or(1),
            _ => 1,
        }
    }

    /// The strings, if this is an array of strings (the tokenizer vocabulary, ...).
    pub fn as_strings(&self) -> Option<&[String]> {
        match self {
            MetaArray::String(v) => Some(v),
            _ => None,
        }
    }
}

macro_rules! conversions {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(
            impl From<$t> for MetaValue {
                fn from(v: $t) -> Self {
                    MetaValue::$variant(v)
                }
            }
            impl From<Vec<$t>> for MetaArray {
                fn from(v: Vec<$t>) -> Self {
                    MetaArray::$variant(v)
                }
            }
            impl From<&[$t]> for MetaArray {
                fn from(v: &[$t]) -> Self {
                    MetaArray::$variant(v.to_vec())
                }
            }
            impl From<Vec<$t>> for MetaValue {
                fn from(v: Vec<$t>) -> Self {
                    MetaValue::Array(MetaArray::$variant(v))
                }
            }
            impl From<&[$t]> for MetaValue {
                fn from(v: &[$t]) -> Self {
                    MetaValue::Array(MetaArray::$variant(v.to_vec()))
                }
            }
        )*
    };
}

conversions! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, u64 => U64, i64 => I64, f64 => F64, String => String,
}

impl From<&str> for MetaValue {
    fn from(v: &str) -> Self {
        MetaValue::String(v.to_owned())
    }
}

impl From<Vec<&str>> for MetaArray {
    fn from(v: Vec<&str>) -> Self {
        MetaArray::String(v.into_iter().map(str::to_owned).collect())
    }
}

impl From<&[&str]> for MetaArray {
    fn from(v: &[&str]) -> Self {
        MetaArray::String(v.iter().map(|s| (*s).to_owned()).collect())
    }
}

impl From<Vec<&str>> for MetaValue {
    fn from(v: Vec<&str>) -> Self {
        MetaValue::Array(v.into())
    }
}

impl From<&[&str]> for MetaValue {
    fn from(v: &[&str]) -> Self {
        MetaValue::Array(v.into())
    }
}

impl From<Vec<MetaArray>> for MetaArray {
    fn from(v: Vec<MetaArray>) -> Self {
        MetaArray::Array(v)
    }
}

impl From<Vec<MetaArray>> for MetaValue {
    fn from(v: Vec<MetaArray>) -> Self {
        MetaValue::Array(MetaArray::Array(v))
    }
}

impl From<MetaArray> for MetaValue {
    fn from(v: MetaArray) -> Self {
        MetaValue::Array(v)
    }
}
