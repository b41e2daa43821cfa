//! An inverted index with impact-ordered postings, shared by BM25 and SPLADE.
//!
//! Each posting stores a precomputed impact (the term's whole contribution to a
//! document's score, up to the query weight), so a query is a weighted sum of postings.
//! Postings are ordered by impact, highest first, so a caller may stop a list early.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use super::le_bytes;
use super::topk::top_k;
use crate::storage::{Blob, Flat};

/// Term id → postings, stored flat: the postings of term `t` are
/// `chunks[offsets[t]..offsets[t + 1]]` with the matching `impacts`, by decreasing impact.
///
/// Three flat arrays instead of a list per term: loading is three copies, not millions of
/// small decodes, and a scan walks contiguous memory. A loaded index reads its postings in
/// place from its file when it is a mapped local one ([`Flat::Mapped`]): a search pages in
/// the postings of its terms, and the kernel may reclaim them (`InvertedInPlace`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InvertedIndex {
    /// Number of chunks indexed.
    pub num_chunks: u32,
    /// Start of each term's postings; one more entry than there are terms.
    #[serde(with = "le_bytes::u64s")]
    offsets: Vec<u64>,
    /// Chunk ordinal of each posting.
    #[serde(serialize_with = "le_bytes::u32s::serialize", deserialize_with = "held_u32s")]
    chunks: Flat<u32>,
    /// Impact of each posting.
    #[serde(serialize_with = "le_bytes::f32s::serialize", deserialize_with = "held_f32s")]
    impacts: Flat<f32>,
}

fn held_u32s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Flat<u32>, D::Error> {
    le_bytes::u32s::deserialize(d).map(Flat::Held)
}

fn held_f32s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Flat<f32>, D::Error> {
    le_bytes::f32s::deserialize(d).map(Flat::Held)
}

/// An [`InvertedIndex`] as its file holds it, its three arrays borrowed from the file's
/// bytes (bincode writes each as its length, then its little-endian values), so that the
/// postings can be read in place ([`InvertedInPlace::in_place`]) instead of copied.
#[derive(Deserialize)]
pub(crate) struct InvertedInPlace<'a> {
    num_chunks: u32,
    #[serde(borrow)]
    offsets: &'a [u8],
    #[serde(borrow)]
    chunks: &'a [u8],
    #[serde(borrow)]
    impacts: &'a [u8],
}

impl InvertedInPlace<'_> {
    /// The index whose arrays these are, borrowed from `blob`: its term offsets decoded
    /// into memory, its postings read in place where [`Flat::of`] can.
    pub(crate) fn in_place(&self, blob: &Arc<Blob>) -> Result<InvertedIndex, String> {
        let within = |b: &[u8]| {
            let start = (b.as_ptr() as usize).checked_sub(blob.as_ptr() as usize).filter(|s| s + b.len() <= blob.len());
            start.map(|s| s..s + b.len()).ok_or_else(|| "postings outside their file".to_string())
        };
        let offsets = crate::storage::read_le(self.offsets)
            .ok_or_else(|| format!("{} bytes of offsets, not a whole number of u64", self.offsets.len()))?;
        let flat_error = |what: &str, n: usize| format!("{n} bytes of {what}, not a whole number of 4-byte values");
        Ok(InvertedIndex {
            num_chunks: self.num_chunks,
            offsets,
            chunks: Flat::of(blob, within(self.chunks)?).ok_or_else(|| flat_error("chunk ids", self.chunks.len()))?,
            impacts: Flat::of(blob, within(self.impacts)?).ok_or_else(|| flat_error("impacts", self.impacts.len()))?,
        })
    }
}

/// Format 1's layout: a list of `(chunk, impact)` per term. Read for compatibility.
#[derive(Deserialize)]
pub(crate) struct InvertedIndexV1 {
    num_chunks: u32,
    postings: Vec<Vec<(u32, f32)>>,
}

impl From<InvertedIndexV1> for InvertedIndex {
    fn from(v1: InvertedIndexV1) -> Self {
        let (mut offsets, mut chunks, mut impacts) = (vec![0], Vec::new(), Vec::new());
        for list in v1.postings {
            for (c, w) in list {
                chunks.push(c);
                impacts.push(w);
            }
            offsets.push(chunks.len() as u64);
        }
        InvertedIndex { num_chunks: v1.num_chunks, offsets, chunks: chunks.into(), impacts: impacts.into() }
    }
}

impl Default for InvertedIndex {
    fn default() -> Self {
        InvertedIndex { num_chunks: 0, offsets: vec![0], chunks: Flat::default(), impacts: Flat::default() }
    }
}

impl InvertedIndex {
    /// The bytes its postings hold in memory: 8 per term offset, 8 per posting (a chunk
    /// and its impact).
    pub fn resident_bytes(&self) -> u64 {
        8 * self.offsets.len() as u64 + self.postings_bytes()
    }

    /// The bytes of the postings alone (which SPLADE's loaded index reads in place): 8 per
    /// posting.
    pub fn postings_bytes(&self) -> u64 {
        4 * (self.chunks.len() + self.impacts.len()) as u64
    }

    /// Whether the postings are read in place from a file.
    pub fn is_mapped(&self) -> bool {
        self.chunks.is_mapped() && self.impacts.is_mapped()
    }

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
        let mut offsets = Vec::with_capacity(num_terms + 1);
        let (mut chunks, mut impacts) = (Vec::with_capacity(total), Vec::with_capacity(total));
        offsets.push(0);
        for mut list in lists {
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (c, w) in list {
                chunks.push(c);
                impacts.push(w);
            }
            offsets.push(chunks.len() as u64);
        }
        InvertedIndex { num_chunks: n, offsets, chunks: chunks.into(), impacts: impacts.into() }
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
    /// posting, chunk ordinals below `num_chunks`. Returns what is wrong. The pages of
    /// mapped chunk ids it read are released after it.
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
        let out_of_range = self.chunks.iter().find(|&&c| c >= self.num_chunks).copied();
        // That pass read every chunk id: hand mapped pages back (a search reads its own).
        self.chunks.release();
        if let Some(c) = out_of_range {
            return Err(format!("chunk ordinal {c} out of {} chunks", self.num_chunks));
        }
        Ok(())
    }

    /// The `k` best chunks for `query` (`(term, weight)` pairs) among `allowed` (all when
    /// `None`), by `sum(weight * impact)`. Chunks with no matching term are not returned.
    /// Ties are broken by chunk ordinal.
    ///
    /// Term at a time into one score per chunk (a buffer kept per thread), then one pass
    /// over the scores keeps the best `k`. Measured at 100,000 chunks against keeping a list
    /// of the chunks touched (a branch and a push per posting): see docs/benchmarks.md, "Sextant
    /// beside a peer".
    pub fn search(&self, query: &[(u32, f32)], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        thread_local! {
            static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCORES.with(|scores| {
            let mut acc = scores.borrow_mut();
            acc.clear();
            acc.resize(self.num_chunks as usize, 0.0);
            for &(t, qw) in query {
                let (chunks, impacts) = self.postings(t);
                match allowed {
                    None => {
                        for (&c, &imp) in chunks.iter().zip(impacts) {
                            acc[c as usize] += qw * imp;
                        }
                    }
                    Some(a) => {
                        for (&c, &imp) in chunks.iter().zip(impacts) {
                            if a.contains(c as usize) {
                                acc[c as usize] += qw * imp;
                            }
                        }
                    }
                }
            }
            best_of_dense(&acc, k)
        })
    }
}

/// The `k` best positive scores of `scores` (indexed by chunk), best first, ties by smaller
/// chunk: one pass that keeps at most `2k` candidates above a rising threshold (the `k`-th
/// best so far; a later chunk with an equal score has a larger ordinal and loses the tie).
fn best_of_dense(scores: &[f32], k: usize) -> Vec<(u32, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let mut kept: Vec<(u32, f32)> = Vec::with_capacity(2 * k);
    let mut floor = 0.0f32;
    for (c, &s) in scores.iter().enumerate() {
        if s > floor {
            kept.push((c as u32, s));
            if kept.len() == 2 * k {
                let best = top_k(kept.drain(..), k);
                floor = best[k - 1].1;
                kept.extend(best);
            }
        }
    }
    top_k(kept.into_iter(), k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's layout read with its arrays borrowed gives the same index, its postings
    /// read in place from a map (here decoded, from bytes in memory); arrays that are not
    /// whole numbers of values are refused with what is wrong, not read.
    #[test]
    fn the_file_read_in_place_is_the_index_and_bad_arrays_are_refused() {
        let idx = InvertedIndex::build(3, vec![vec![(0, 1.0), (1, 2.0)], vec![(1, 3.0)], vec![(2, 5.0)], vec![]]);
        let blob = Arc::new(Blob::Owned(bincode::serialize(&idx).unwrap()));
        let file: InvertedInPlace = bincode::deserialize(&blob).unwrap();
        assert_eq!(file.in_place(&blob).unwrap(), idx);
        // Chunk ids of 6 bytes: the layout (u32, then three length-prefixed arrays) with one
        // array cut short.
        let mut bytes = 4u32.to_le_bytes().to_vec();
        for array in [&[0u8; 16][..], &[0u8; 6][..], &[0u8; 8][..]] {
            bytes.extend_from_slice(&(array.len() as u64).to_le_bytes());
            bytes.extend_from_slice(array);
        }
        let blob = Arc::new(Blob::Owned(bytes));
        let file: InvertedInPlace = bincode::deserialize(&blob).unwrap();
        let err = file.in_place(&blob).unwrap_err();
        assert!(err.contains("6 bytes of chunk ids"), "{err}");
    }

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

    /// The one-pass selection returns exactly what scoring every chunk and sorting does,
    /// filters and ties included (impacts on a coarse grid make many equal scores).
    #[test]
    fn search_matches_scoring_every_chunk() {
        let mut rng = crate::testutil::Rng(7);
        let (n, terms) = (3000usize, 40u32);
        let docs: Vec<Vec<(u32, f32)>> = (0..n)
            .map(|_| {
                let mut d = Vec::new();
                for t in 0..terms {
                    if rng.below(4) == 0 {
                        d.push((t, (1 + rng.below(3)) as f32 * 0.5));
                    }
                }
                d
            })
            .collect();
        let idx = InvertedIndex::build(terms as usize, docs.clone());
        let mut allowed = Bitset::empty(n);
        for c in (0..n).filter(|c| c % 3 != 0) {
            allowed.insert(c);
        }
        for round in 0..20 {
            let query: Vec<(u32, f32)> =
                (0..terms).filter(|_| rng.below(5) == 0).map(|t| (t, 1.0 + (t % 3) as f32)).collect();
            let filter = if round % 2 == 0 { None } else { Some(&allowed) };
            for k in [1, 7, 50, 5000] {
                let naive = docs
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| filter.is_none_or(|a| a.contains(*c)))
                    .map(|(c, d)| {
                        let s: f32 =
                            query.iter().filter_map(|(t, w)| d.iter().find(|p| p.0 == *t).map(|p| w * p.1)).sum();
                        (c as u32, s)
                    })
                    .filter(|p| p.1 > 0.0);
                let want = top_k(naive, k);
                assert_eq!(idx.search(&query, filter, k), want, "round {round}, k {k}");
            }
        }
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
        idx.chunks.to_mut()[0] = 9;
        assert!(idx.validate().unwrap_err().contains("chunk ordinal 9 out of 2"));
        idx.chunks.to_mut()[0] = 0;
        idx.impacts.to_mut().pop();
        assert!(idx.validate().unwrap_err().contains("1 impacts"));
        idx.offsets = vec![0, 2, 1];
        assert!(idx.validate().unwrap_err().contains("not ascending"));
    }
}
