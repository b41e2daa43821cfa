//! An inverted index with impact-ordered postings, shared by BM25 and SPLADE.
//!
//! Each posting stores a precomputed impact (the term's whole contribution to a
//! document's score, up to the query weight), so a query is a weighted sum of postings.
//! Postings are ordered by impact, highest first, so a caller may stop a list early.

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use super::topk::top_k;

/// Postings of one term: `(chunk, impact)` by decreasing impact.
pub type Postings = Vec<(u32, f32)>;

/// Term id → postings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InvertedIndex {
    /// Number of chunks indexed.
    pub num_chunks: u32,
    /// Postings per term id.
    pub postings: Vec<Postings>,
}

impl InvertedIndex {
    /// Builds from per-chunk `(term, impact)` lists.
    pub fn build(num_terms: usize, docs: impl IntoIterator<Item = Vec<(u32, f32)>>) -> Self {
        let mut postings: Vec<Postings> = vec![Vec::new(); num_terms];
        let mut n = 0u32;
        for (chunk, terms) in docs.into_iter().enumerate() {
            for (t, w) in terms {
                postings[t as usize].push((chunk as u32, w));
            }
            n += 1;
        }
        for p in &mut postings {
            p.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        InvertedIndex { num_chunks: n, postings }
    }

    /// Document frequency of a term.
    pub fn df(&self, term: u32) -> usize {
        self.postings.get(term as usize).map_or(0, |p| p.len())
    }

    /// Total number of postings.
    pub fn num_postings(&self) -> usize {
        self.postings.iter().map(|p| p.len()).sum()
    }

    /// The `k` best chunks for `query` (`(term, weight)` pairs) among `allowed` (all when
    /// `None`), by `sum(weight * impact)`. Chunks with no matching term are not returned.
    /// Ties are broken by chunk ordinal.
    pub fn search(&self, query: &[(u32, f32)], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        let mut acc = vec![0f32; self.num_chunks as usize];
        let mut touched: Vec<u32> = Vec::new();
        for &(t, qw) in query {
            let Some(list) = self.postings.get(t as usize) else { continue };
            for &(c, imp) in list {
                if let Some(a) = allowed {
                    if !a.contains(c as usize) {
                        continue;
                    }
                }
                let slot = &mut acc[c as usize];
                if *slot == 0.0 {
                    touched.push(c);
                }
                *slot += qw * imp;
            }
        }
        top_k(touched.into_iter().map(|c| (c, acc[c as usize])).filter(|&(_, s)| s > 0.0), k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_weighted_sums_and_filters_apply_before_ranking() {
        let idx = InvertedIndex::build(3, vec![vec![(0, 1.0), (1, 2.0)], vec![(1, 3.0)], vec![(2, 5.0)], vec![]]);
        assert_eq!(idx.num_chunks, 4);
        assert_eq!(idx.postings[1], vec![(1, 3.0), (0, 2.0)]);
        let hits = idx.search(&[(0, 1.0), (1, 1.0)], None, 10);
        assert_eq!(hits, vec![(0, 3.0), (1, 3.0)]);
        let mut only1 = Bitset::empty(4);
        only1.insert(1);
        assert_eq!(idx.search(&[(0, 1.0), (1, 1.0)], Some(&only1), 10), vec![(1, 3.0)]);
        assert!(idx.search(&[(7, 1.0)], None, 10).is_empty());
        assert!(idx.search(&[], None, 10).is_empty());
        assert_eq!(idx.search(&[(0, 1.0), (1, 1.0)], None, 1).len(), 1);
    }
}
