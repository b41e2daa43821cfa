//! A shard's candidate lists packed for the wire: each path's list of `(chunk id, score)`
//! as one base64 string (standard alphabet, padded) of 8 bytes a hit, the chunk id as a
//! little-endian `u32` then the score's IEEE-754 bits as a little-endian `u32`.
//!
//! ```text
//! [(3, 0.5), (9, 0.25)]  ->  bytes 03 00 00 00 | 00 00 00 3f | 09 00 00 00 | 00 00 80 3e
//!                        ->  "AwAAAAAAAD8JAAAAAACAPg=="
//! ```
//!
//! Why not JSON pairs: a router over 400 shards decodes 240,000 hits a query, and the
//! shard answer is an internally tagged enum, which serde buffers whole before it reads
//! the variant, one allocation per number. As pairs that took 45.8 ms p50 a query on one
//! core; packed, 2.89 ms, mostly the base64 decode of 1.9 MB (release build, 2026-12-04,
//! `sextant bench-merge`, which times both in one process). Scores keep every bit (a NaN
//! included, which JSON cannot carry).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::de::Error as _;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serializer};

use crate::pipeline::PathHit;

/// Bytes a packed hit takes.
const HIT_BYTES: usize = 8;

/// `hits` packed as base64 (the module's layout).
pub fn pack(hits: &[PathHit]) -> String {
    let mut bytes = Vec::with_capacity(hits.len() * HIT_BYTES);
    for &(chunk, score) in hits {
        bytes.extend_from_slice(&chunk.to_le_bytes());
        bytes.extend_from_slice(&score.to_bits().to_le_bytes());
    }
    STANDARD.encode(bytes)
}

/// The hits `packed` holds, or why it is not a packed list.
pub fn unpack(packed: &str) -> Result<Vec<PathHit>, String> {
    let bytes = STANDARD.decode(packed).map_err(|e| format!("not base64 ({e})"))?;
    if bytes.len() % HIT_BYTES != 0 {
        return Err(format!("{} bytes, not a whole number of {HIT_BYTES}-byte hits", bytes.len()));
    }
    Ok(bytes
        .chunks_exact(HIT_BYTES)
        .map(|hit| {
            let word = |i: usize| u32::from_le_bytes([hit[i], hit[i + 1], hit[i + 2], hit[i + 3]]);
            (word(0), f32::from_bits(word(4)))
        })
        .collect())
}

/// Serializes each list of `lists` packed (for `#[serde(with = "packed")]`).
pub fn serialize<S: Serializer>(lists: &[Vec<PathHit>], serializer: S) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(lists.len()))?;
    for list in lists {
        seq.serialize_element(&pack(list))?;
    }
    seq.end()
}

/// Reads lists that [`serialize`] wrote; an error names the list (`lists[2]`) and why.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<PathHit>>, D::Error> {
    let packed = Vec::<String>::deserialize(deserializer)?;
    packed
        .iter()
        .enumerate()
        .map(|(i, p)| unpack(p).map_err(|why| D::Error::custom(format!("lists[{i}]: {why}"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout is the one the module's doc comment draws, byte for byte.
    #[test]
    fn the_layout_is_the_documented_one() {
        assert_eq!(pack(&[(3, 0.5), (9, 0.25)]), "AwAAAAAAAD8JAAAAAACAPg==");
        assert_eq!(pack(&[]), "");
        assert_eq!(unpack("").unwrap(), vec![]);
    }

    /// Every id and every score's bits come back, NaN, infinities and subnormals included.
    #[test]
    fn every_bit_comes_back() {
        let hits = vec![
            (0, 0.812_345_7),
            (u32::MAX, -0.0),
            (7, f32::MIN_POSITIVE / 8.0),
            (8, f32::INFINITY),
            (9, f32::from_bits(0x7fc0_0001)),
        ];
        let back = unpack(&pack(&hits)).unwrap();
        let bits = |h: &[PathHit]| h.iter().map(|&(c, s)| (c, s.to_bits())).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&hits));
    }

    /// A damaged list is refused with the list it is and why, never read as other hits.
    #[test]
    fn a_damaged_list_names_itself() {
        #[derive(Debug, serde::Deserialize)]
        struct Answer {
            #[serde(with = "super")]
            #[allow(dead_code)]
            lists: Vec<Vec<PathHit>>,
        }
        let whole = pack(&[(1, 1.0)]);
        let cut = STANDARD.encode([1u8, 0, 0, 0, 0, 0]);
        let read = |lists: &str| serde_json::from_str::<Answer>(&format!(r#"{{"lists":{lists}}}"#)).unwrap_err();
        let e = read(&format!(r#"["{whole}","{cut}"]"#)).to_string();
        assert!(e.contains("lists[1]: 6 bytes, not a whole number of 8-byte hits"), "{e}");
        let e = read(&format!(r#"["{whole}","AAA!"]"#)).to_string();
        assert!(e.contains("lists[1]: not base64"), "{e}");
        let e = read("[[[3, 0.5]]]").to_string();
        assert!(e.contains("expected a string"), "{e}");
    }
}
