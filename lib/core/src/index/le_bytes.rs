//! Serde helpers that store numeric arrays as one little-endian byte string.
//!
//! bincode writes a `Vec<u32>` element by element and reads it back through a visitor
//! call per element; as a byte string it is one length and one copy, and decoding is a
//! single pass the compiler vectorises. Used with `#[serde(with = "le_bytes::u32s")]`.

use serde::de::{Deserializer, Error as _, Visitor};
use serde::ser::Serializer;

macro_rules! le_array {
    ($name:ident, $t:ty) => {
        /// `Vec<` a primitive `>` as a little-endian byte string.
        pub mod $name {
            use super::*;

            /// Writes the values as little-endian bytes.
            pub fn serialize<S: Serializer>(values: &[$t], s: S) -> Result<S::Ok, S::Error> {
                let mut bytes = Vec::with_capacity(values.len() * size_of::<$t>());
                for v in values {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
                s.serialize_bytes(&bytes)
            }

            /// Reads values written by [`serialize`]; a length that is not a multiple of
            /// the element size is an error.
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<$t>, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Vec<$t>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        write!(f, "a byte string of little-endian {}", stringify!($t))
                    }
                    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Self::Value, E> {
                        const N: usize = size_of::<$t>();
                        if b.len() % N != 0 {
                            return Err(E::custom(format!(
                                "{} bytes is not a whole number of {}",
                                b.len(),
                                stringify!($t)
                            )));
                        }
                        Ok(b.chunks_exact(N).map(|c| <$t>::from_le_bytes(c.try_into().expect("N bytes"))).collect())
                    }
                    fn visit_byte_buf<E: serde::de::Error>(self, b: Vec<u8>) -> Result<Self::Value, E> {
                        self.visit_bytes(&b)
                    }
                }
                d.deserialize_bytes(V).map_err(|e| D::Error::custom(e))
            }
        }
    };
}

le_array!(u32s, u32);
le_array!(u64s, u64);
le_array!(f32s, f32);

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct T {
        #[serde(with = "super::u32s")]
        a: Vec<u32>,
        #[serde(with = "super::f32s")]
        b: Vec<f32>,
    }

    #[test]
    fn round_trips_and_rejects_ragged_lengths() {
        let t = T { a: vec![0, 1, u32::MAX], b: vec![-0.5, f32::MAX, 1e-30] };
        let bytes = bincode::serialize(&t).unwrap();
        assert_eq!(bincode::deserialize::<T>(&bytes).unwrap(), t);
        let empty = T { a: vec![], b: vec![] };
        assert_eq!(bincode::deserialize::<T>(&bincode::serialize(&empty).unwrap()).unwrap(), empty);
        // A byte string of 5 bytes where u32s are expected.
        let mut bad = bincode::serialize(&5u64).unwrap();
        bad.extend([1, 2, 3, 4, 5]);
        bad.extend(bincode::serialize(&0u64).unwrap());
        let err = bincode::deserialize::<T>(&bad).unwrap_err().to_string();
        assert!(err.contains("not a whole number of u32"), "{err}");
    }
}
