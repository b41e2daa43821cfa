//! An inverted index with impact-ordered postings, shared by BM25 and SPLADE.
//!
//! Each posting stores a precomputed impact (the term's whole contribution to a
//! document's score, up to the query weight), so a query is a weighted sum of postings.
//! Postings are ordered by impact, highest first, so a caller may stop a list early.

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use super::le_bytes;
use super::topk::top_k;

/// Term id → postings, stored flat: the postings of term `t` are
/// `chunks[offsets[t]..offsets[t + 1]]` with the matching `impacts`, by decreasing impact.
///
/// Three flat arrays instead of a list per term: loading is three copies, not millions of
/// small decodes, and a scan walks contiguous memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InvertedIndex {
    /// Number of chunks indexed.
    pub num_chunks: u32,
    /// Start of each term's postings; one more entry than there are terms.
    #[serde(with = "le_bytes::u64s")]
    offsets: Vec<u64>,
    /// Chunk ordinal of each posting.
    #[serde(with = "le_bytes::u32s")]
    chunks: Vec<u32>,
    /// Impact of each posting.
    #[serde(with = "le_bytes::f32s")]
    impacts: Vec<f32>,
}

/// Format 1's layout: a list of `(chunk, impact)` per term. Read for compatibility.
#[derive(Deserialize)]
pub(crate) struct InvertedIndexV1 {
    num_chunks: u32,
    postings: Vec<Vec<(u32, f32)>>,
}

impl From<InvertedIndexV1> for InvertedIndex {
    fn from(v1: InvertedIndexV1) -> Self {
        let mut index = InvertedIndex { num_chunks: v1.num_chunks, ..Default::default() };
        for list in v1.postings {
            for (c, w) in list {
                index.chunks.push(c);
                index.impacts.push(w);
            }
            index.offsets.push(index.chunks.len() as u64);
        }
        index
    }
}

impl Default for InvertedIndex {
    fn default() -> Self {
        InvertedIndex { num_chunks: 0, offsets: vec![0], chunks: Vec::new(), impacts: Vec::new() }
    }
}

impl InvertedIndex {
    /// Builds from per-chunk `(term, impact)` lists.
    pub fn build(num_terms: usize, docs: impl IntoIterator<Item = Vec<(u32, f32)>>) -> Self {
        let mut lists: Vec<Vec<(u32, f32)>> = vec![Vec::new(); num_terms];
        let mut n = 0u32;
        for (chunk, terms) in docs.into_iter().enumerate() {
            for (t, w) in terms {
                lists[t as usize].push((chunk as u32, w));
            }
            n += 1;
        }
        let total: usize = lists.iter().map(|l| l.len()).sum();
        let mut index = InvertedIndex {
            num_chunks: n,
            offsets: Vec::with_capacity(num_terms + 1),
            chunks: Vec::with_capacity(total),
            impacts: Vec::with_capacity(total),
        };
        index.offsets.push(0);
        for mut list in lists {
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (c, w) in list {
                index.chunks.push(c);
                index.impacts.push(w);
            }
            index.offsets.push(index.chunks.len() as u64);
        }
        index
    }

    /// Number of terms (the vocabulary size it was built with).
    pub fn num_terms(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The postings of `term`: chunk ordinals and impacts, by decreasing impact (empty for
    /// an unknown term).
    pub fn postings(&self, term: u32) -> (&[u32], &[f32]) {
        let t = term as usize;
        if t + 1 >= self.offsets.len() {
            return (&[], &[]);
        }
        let r = self.offsets[t] as usize..self.offsets[t + 1] as usize;
        (&self.chunks[r.clone()], &self.impacts[r])
    }

    /// Document frequency of a term.
    pub fn df(&self, term: u32) -> usize {
        self.postings(term).0.len()
    }

    /// Total number of postings.
    pub fn num_postings(&self) -> usize {
        self.chunks.len()
    }

    /// Checks the structure after decoding: offsets ascending and in bounds, one impact per
    /// posting, chunk ordinals below `num_chunks`. Returns what is wrong.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.offsets.first() != Some(&0) {
            return Err("offsets do not start at 0".into());
        }
        if self.offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err("offsets are not ascending".into());
        }
        if *self.offsets.last().unwrap_or(&0) as usize != self.chunks.len() || self.chunks.len() != self.impacts.len() {
            return Err(format!(
                "{} postings by the offsets, {} chunk ids, {} impacts",
                self.offsets.last().unwrap_or(&0),
                self.chunks.len(),
                self.impacts.len()
            ));
        }
        if let Some(c) = self.chunks.iter().find(|&&c| c >= self.num_chunks) {
            return Err(format!("chunk ordinal {c} out of {} chunks", self.num_chunks));
        }
        Ok(())
    }

    /// The `k` best chunks for `query` (`(term, weight)` pairs) among `allowed` (all when
    /// `None`), by `sum(weight * impact)`. Chunks with no matching term are not returned.
    /// Ties are broken by chunk ordinal.
    pub fn search(&self, query: &[(u32, f32)], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        let mut acc = vec![0f32; self.num_chunks as usize];
        let mut touched: Vec<u32> = Vec::new();
        for &(t, qw) in query {
            let (chunks, impacts) = self.postings(t);
            for (&c, &imp) in chunks.iter().zip(impacts) {
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
        assert_eq!(idx.postings(1), (&[1, 0][..], &[3.0, 2.0][..]));
        assert_eq!(idx.postings(9), (&[][..], &[][..]));
        assert_eq!(idx.num_terms(), 3);
        assert_eq!(idx.num_postings(), 4);
        assert_eq!(idx.validate(), Ok(()));
        let hits = idx.search(&[(0, 1.0), (1, 1.0)], None, 10);
        assert_eq!(hits, vec![(0, 3.0), (1, 3.0)]);
        let mut only1 = Bitset::empty(4);
        only1.insert(1);
        assert_eq!(idx.search(&[(0, 1.0), (1, 1.0)], Some(&only1), 10), vec![(1, 3.0)]);
        assert!(idx.search(&[(7, 1.0)], None, 10).is_empty());
        assert!(idx.search(&[], None, 10).is_empty());
        assert_eq!(idx.search(&[(0, 1.0), (1, 1.0)], None, 1).len(), 1);
    }

    #[test]
    fn format_1_postings_convert_to_the_same_index() {
        let lists = vec![vec![(0u32, 1.0f32), (1, 2.0)], vec![(1, 3.0)], vec![(2, 5.0)], vec![]];
        let built = InvertedIndex::build(3, lists);
        // Format 1 wrote (num_chunks, one list per term) with bincode.
        let v1_bytes = bincode::serialize(&(
            4u32,
            vec![vec![(0u32, 1.0f32)], vec![(1u32, 3.0f32), (0, 2.0)], vec![(2u32, 5.0f32)]],
        ))
        .unwrap();
        let v1: InvertedIndexV1 = bincode::deserialize(&v1_bytes).unwrap();
        assert_eq!(InvertedIndex::from(v1), built);
    }

    #[test]
    fn validate_names_what_is_inconsistent() {
        let mut idx = InvertedIndex::build(2, vec![vec![(0, 1.0)], vec![(1, 2.0)]]);
        assert_eq!(idx.validate(), Ok(()));
        idx.chunks[0] = 9;
        assert!(idx.validate().unwrap_err().contains("chunk ordinal 9 out of 2"));
        idx.chunks[0] = 0;
        idx.impacts.pop();
        assert!(idx.validate().unwrap_err().contains("1 impacts"));
        idx.offsets = vec![0, 2, 1];
        assert!(idx.validate().unwrap_err().contains("not ascending"));
    }
}
