//! Which shard a document belongs to.

use sha2::{Digest, Sha256};

/// The shard of the document `document_id` among `shards` (at least 1):
///
/// ```text
/// shard_of(id, K) = u64_be(SHA-256(id)[0..8]) mod K
/// ```
///
/// A stable hash of the id alone, the same on every machine and release, so a document
/// stays in its shard across builds and writes, and shards stay balanced.
pub fn shard_of(document_id: &str, shards: usize) -> usize {
    let digest = Sha256::digest(document_id.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % shards.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_has_one_stable_shard_and_shards_are_balanced() {
        // Pinned: a change of hash would move every document of every sharded index.
        assert_eq!(shard_of("10-K/AAPL/2024", 7), shard_of("10-K/AAPL/2024", 7));
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("doc-0", 0), 0, "no shards reads as one");
        let digest = Sha256::digest(b"doc-0");
        let expect = u64::from_be_bytes(digest[..8].try_into().unwrap()) % 3;
        assert_eq!(shard_of("doc-0", 3) as u64, expect);
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[shard_of(&format!("doc-{i}"), 4)] += 1;
        }
        assert!(counts.iter().all(|&n| (900..1100).contains(&n)), "{counts:?}");
    }
}
