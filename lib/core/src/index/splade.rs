//! The SPLADE index: an inverted index over vocabulary ids with the model's weights.

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use super::inverted::{InvertedInPlace, InvertedIndex};
use crate::encode::SparseVector;

/// Document term weights are stored as impacts; a query scores `Σ q_w · d_w`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SpladeIndex {
    /// Vocabulary-id postings.
    pub inverted: InvertedIndex,
}

/// The SPLADE file as it is laid out, its postings borrowed to be read in place
/// ([`InvertedInPlace`]).
#[derive(Deserialize)]
pub(crate) struct SpladeInPlace<'a> {
    #[serde(borrow)]
    pub(crate) inverted: InvertedInPlace<'a>,
}

/// Format 1's SPLADE file. Read for compatibility.
#[derive(Deserialize)]
pub(crate) struct SpladeIndexV1 {
    inverted: super::inverted::InvertedIndexV1,
}

impl From<SpladeIndexV1> for SpladeIndex {
    fn from(v1: SpladeIndexV1) -> Self {
        SpladeIndex { inverted: v1.inverted.into() }
    }
}

impl SpladeIndex {
    /// The bytes it holds in memory once loaded: its term offsets. Its postings
    /// ([`InvertedIndex::postings_bytes`]) are read in place from `splade.bin`, through the
    /// page cache, and are not counted.
    pub fn resident_bytes(&self) -> u64 {
        self.inverted.resident_bytes() - self.inverted.postings_bytes()
    }

    /// Indexes one sparse vector per chunk.
    pub fn build(vocab_size: usize, docs: &[SparseVector]) -> Self {
        let lists = docs.iter().map(|v| v.ids.iter().copied().zip(v.weights.iter().copied()).collect());
        SpladeIndex { inverted: InvertedIndex::build(vocab_size, lists) }
    }

    /// The best `k` chunks for an encoded query among `allowed`.
    pub fn search(&self, query: &SparseVector, allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        let q: Vec<(u32, f32)> = query.ids.iter().copied().zip(query.weights.iter().copied()).collect();
        self.inverted.search(&q, allowed, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_product_ranking() {
        let docs = vec![
            SparseVector { ids: vec![1, 5], weights: vec![1.0, 2.0] },
            SparseVector { ids: vec![5], weights: vec![0.5] },
            SparseVector { ids: vec![2], weights: vec![9.0] },
        ];
        let idx = SpladeIndex::build(10, &docs);
        let q = SparseVector { ids: vec![1, 5], weights: vec![2.0, 1.0] };
        let hits = idx.search(&q, None, 10);
        assert_eq!(hits, vec![(0, 4.0), (1, 0.5)]);
        assert_eq!(hits[0].1, q.dot(&docs[0]));
    }
}
