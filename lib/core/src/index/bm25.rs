//! BM25 over the analyzer's terms (Lucene's formula).
//!
//! `score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d) / (tf(t,d) + k1 · (1 − b + b · |d| / avgdl))`
//! with `idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))`. A query term repeated `n`
//! times counts `n` times. The per-posting impacts are precomputed at build time, so
//! changing `k1`/`b` means rebuilding the index.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::analyzer::Analyzer;
use super::bitset::Bitset;
use super::inverted::InvertedIndex;

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation.
    pub b: f32,
}

impl Default for Bm25Params {
    /// Anserini's BEIR defaults, `k1 = 0.9`, `b = 0.4`.
    fn default() -> Self {
        Bm25Params { k1: 0.9, b: 0.4 }
    }
}

/// A BM25 index: vocabulary and impact postings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Bm25Index {
    /// Parameters the impacts were computed with.
    pub params: Bm25Params,
    /// Term → id. Written sorted by term, so the same corpus gives the same file.
    #[serde(serialize_with = "sorted_by_key")]
    pub vocab: HashMap<String, u32>,
    /// Impact postings.
    pub inverted: InvertedIndex,
}

/// Writes a map in key order (read back as any map): a `HashMap` iterates in a random
/// order, which made two builds of one corpus differ byte for byte.
fn sorted_by_key<S: serde::Serializer>(map: &HashMap<String, u32>, s: S) -> Result<S::Ok, S::Error> {
    map.iter().collect::<std::collections::BTreeMap<_, _>>().serialize(s)
}

/// Format 1's BM25 file. Read for compatibility.
#[derive(Deserialize)]
pub(crate) struct Bm25IndexV1 {
    params: Bm25Params,
    vocab: HashMap<String, u32>,
    inverted: super::inverted::InvertedIndexV1,
}

impl From<Bm25IndexV1> for Bm25Index {
    fn from(v1: Bm25IndexV1) -> Self {
        Bm25Index { params: v1.params, vocab: v1.vocab, inverted: v1.inverted.into() }
    }
}

impl Bm25Index {
    /// Indexes texts (one per chunk).
    pub fn build<'a>(texts: impl IntoIterator<Item = &'a str>, params: Bm25Params) -> Self {
        let analyzer = Analyzer::default();
        let mut vocab: HashMap<String, u32> = HashMap::new();
        let mut docs: Vec<(Vec<(u32, u32)>, usize)> = Vec::new();
        for text in texts {
            let terms = analyzer.terms(text);
            let mut tf: HashMap<u32, u32> = HashMap::new();
            for t in &terms {
                let n = vocab.len() as u32;
                let id = *vocab.entry(t.clone()).or_insert(n);
                *tf.entry(id).or_default() += 1;
            }
            let mut tf: Vec<(u32, u32)> = tf.into_iter().collect();
            tf.sort_unstable();
            docs.push((tf, terms.len()));
        }
        let n = docs.len() as f32;
        let avgdl = (docs.iter().map(|d| d.1).sum::<usize>() as f32 / n.max(1.0)).max(1.0);
        let mut df = vec![0u32; vocab.len()];
        for (tf, _) in &docs {
            for &(t, _) in tf {
                df[t as usize] += 1;
            }
        }
        let idf: Vec<f32> = df.iter().map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln()).collect();
        let Bm25Params { k1, b } = params;
        let impacts = docs.into_iter().map(|(tf, len)| {
            let norm = k1 * (1.0 - b + b * len as f32 / avgdl);
            tf.into_iter().map(|(t, f)| (t, idf[t as usize] * f as f32 / (f as f32 + norm))).collect()
        });
        let inverted = InvertedIndex::build(vocab.len(), impacts);
        Bm25Index { params, vocab, inverted }
    }

    /// The query's known terms with their repeat counts.
    pub fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let mut out: Vec<(u32, f32)> = Vec::new();
        for t in Analyzer::default().terms(query) {
            if let Some(&id) = self.vocab.get(&t) {
                match out.iter_mut().find(|p| p.0 == id) {
                    Some(p) => p.1 += 1.0,
                    None => out.push((id, 1.0)),
                }
            }
        }
        out
    }

    /// The best `k` chunks for `query` among `allowed`.
    pub fn search(&self, query: &str, allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        self.inverted.search(&self.query_terms(query), allowed, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_lucene_formula() {
        let texts = ["apple revenue grew", "apple apple pie", "banana split"];
        let idx = Bm25Index::build(texts, Bm25Params { k1: 1.2, b: 0.75 });
        let hits = idx.search("apple", None, 10);
        // df(apple) = 2, N = 3: idf = ln(1 + 1.5/2.5); avgdl = 8/3.
        let idf = (1.0f32 + 1.5 / 2.5).ln();
        let s = |tf: f32, len: f32| idf * tf / (tf + 1.2 * (1.0 - 0.75 + 0.75 * len / (8.0 / 3.0)));
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].0, 1);
        assert!((hits[0].1 - s(2.0, 3.0)).abs() < 1e-6);
        assert!((hits[1].1 - s(1.0, 3.0)).abs() < 1e-6);
        assert!(idx.search("cherry", None, 10).is_empty());
        assert!(idx.search("", None, 10).is_empty());
    }

    #[test]
    fn the_same_texts_give_the_same_file() {
        let texts: Vec<String> = (0..500).map(|i| format!("term{i} shared words {}", i % 7)).collect();
        let build =
            || bincode::serialize(&Bm25Index::build(texts.iter().map(String::as_str), Bm25Params::default())).unwrap();
        let first = build();
        assert!((0..4).all(|_| build() == first), "the vocabulary is written in a fixed order");
        let back: Bm25Index = bincode::deserialize(&first).unwrap();
        assert_eq!(back, Bm25Index::build(texts.iter().map(String::as_str), Bm25Params::default()));
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let idx = Bm25Index::build(["common rare", "common", "common", "common"], Bm25Params::default());
        let hits = idx.search("common rare", None, 4);
        assert_eq!(hits[0].0, 0);
        assert!(hits[0].1 > 2.0 * hits[1].1);
    }
}
