//! BM25 over the analyzer's terms (Lucene's formula).
//!
//! `score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d) / (tf(t,d) + k1 · (1 − b + b · |d| / avgdl))`
//! with `idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))`. A query term repeated `n`
//! times counts `n` times. The per-posting impacts are precomputed at build time, so
//! changing `k1`, `b` or the analyzer's stemming means rebuilding the index.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::analyzer::{Analyzer, Stemming};
use super::bitset::Bitset;
use super::inverted::InvertedIndex;

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation.
    pub b: f32,
    /// How the analyzer reduces words to terms (absent in a request: the default, no
    /// stemming; an index manifest before format 5 is read as English stemming).
    #[serde(default)]
    pub stemming: Stemming,
}

impl Default for Bm25Params {
    /// Anserini's BEIR defaults, `k1 = 0.9`, `b = 0.4`, and no stemming.
    fn default() -> Self {
        Bm25Params { k1: 0.9, b: 0.4, stemming: Stemming::default() }
    }
}

/// BM25 parameters as formats 1 to 4 wrote them: always English stemming.
#[derive(Deserialize)]
pub(crate) struct Bm25ParamsV4 {
    k1: f32,
    b: f32,
}

impl From<Bm25ParamsV4> for Bm25Params {
    fn from(v4: Bm25ParamsV4) -> Self {
        Bm25Params { k1: v4.k1, b: v4.b, stemming: Stemming::English }
    }
}

/// Each text's term counts (by term id, sorted) and length in terms, with the vocabulary.
type TermCounts = (HashMap<String, u32>, Vec<(Vec<(u32, u32)>, usize)>);

fn term_counts<'a>(texts: impl IntoIterator<Item = &'a str>, analyzer: &Analyzer) -> TermCounts {
    let mut vocab: HashMap<String, u32> = HashMap::new();
    let mut docs = Vec::new();
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
    (vocab, docs)
}

fn document_frequencies(docs: &[(Vec<(u32, u32)>, usize)], terms: usize) -> Vec<u32> {
    let mut df = vec![0u32; terms];
    for (tf, _) in docs {
        for &(t, _) in tf {
            df[t as usize] += 1;
        }
    }
    df
}

/// BM25's corpus statistics, kept by term text so that indexes with vocabularies of their
/// own (the shards of one index) can share them: the chunk count `N`, the total length
/// `Σ |d|` in analysed terms, and each term's document (chunk) frequency `df(t)`. Two
/// parts' statistics add up to those of both ([`LexicalStats::add`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LexicalStats {
    /// Chunks counted (`N`).
    pub chunks: u64,
    /// Their total length in analysed terms.
    pub total_length: u64,
    /// Term → the number of chunks it is in. Written sorted by term.
    #[serde(serialize_with = "sorted_by_key")]
    pub df: HashMap<String, u32>,
}

impl LexicalStats {
    /// The statistics of `texts` (one per chunk) as an index with `params` reads them.
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>, params: Bm25Params) -> Self {
        let (vocab, docs) = term_counts(texts, &Analyzer::new(params.stemming));
        let df = document_frequencies(&docs, vocab.len());
        LexicalStats {
            chunks: docs.len() as u64,
            total_length: docs.iter().map(|d| d.1 as u64).sum(),
            df: vocab.into_iter().map(|(term, id)| (term, df[id as usize])).collect(),
        }
    }

    /// Adds `other`'s chunks to these statistics.
    pub fn add(&mut self, other: &LexicalStats) {
        self.chunks += other.chunks;
        self.total_length += other.total_length;
        for (term, &n) in &other.df {
            *self.df.entry(term.clone()).or_default() += n;
        }
    }

    /// `avgdl = Σ |d| / N`, at least 1, computed as [`Bm25Index::build`] computes it.
    pub fn avgdl(&self) -> f32 {
        (self.total_length as f32 / (self.chunks as f32).max(1.0)).max(1.0)
    }
}

/// BM25's inverse document frequency of a term that `df` of `n` chunks hold:
///
/// ```text
/// idf = ln(1 + (N − df + 0.5) / (df + 0.5))
/// ```
pub fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
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
    params: Bm25ParamsV4,
    vocab: HashMap<String, u32>,
    inverted: super::inverted::InvertedIndexV1,
}

impl From<Bm25IndexV1> for Bm25Index {
    fn from(v1: Bm25IndexV1) -> Self {
        Bm25Index { params: v1.params.into(), vocab: v1.vocab, inverted: v1.inverted.into() }
    }
}

/// Formats 2 to 4's BM25 file (stemmed, without the stemming in its parameters). Read for
/// compatibility.
#[derive(Deserialize)]
pub(crate) struct Bm25IndexV4 {
    params: Bm25ParamsV4,
    vocab: HashMap<String, u32>,
    inverted: InvertedIndex,
}

impl From<Bm25IndexV4> for Bm25Index {
    fn from(v4: Bm25IndexV4) -> Self {
        Bm25Index { params: v4.params.into(), vocab: v4.vocab, inverted: v4.inverted }
    }
}

impl Bm25Index {
    /// The bytes it holds in memory: its postings (held: its file places them at no
    /// particular alignment, so they are not read in place as SPLADE's are,
    /// [`crate::index::SpladeIndex::resident_bytes`]), and per vocabulary term its text with
    /// a `String`'s 24 bytes, its id, and a hash table slot's 16.
    pub fn resident_bytes(&self) -> u64 {
        self.inverted.resident_bytes() + self.vocab.keys().map(|t| t.len() as u64 + 44).sum::<u64>()
    }

    /// Indexes texts (one per chunk).
    pub fn build<'a>(texts: impl IntoIterator<Item = &'a str>, params: Bm25Params) -> Self {
        let (vocab, docs) = term_counts(texts, &Analyzer::new(params.stemming));
        let n = docs.len() as f32;
        let avgdl = (docs.iter().map(|d| d.1).sum::<usize>() as f32 / n.max(1.0)).max(1.0);
        let df = document_frequencies(&docs, vocab.len());
        Self::weigh(params, vocab, docs, |t| df[t as usize], n, avgdl)
    }

    /// Indexes texts (one per chunk) weighed with `stats`, the statistics of a whole corpus
    /// these texts are part of (an index shard's chunks, with the root's statistics):
    /// `N = stats.chunks`, `avgdl = stats.total_length / N` and `df(t)` from `stats`, so a
    /// chunk's impacts are bit for bit those of a [`build`](Self::build) of the whole
    /// corpus. A term of `texts` that `stats` lacks counts the chunks of `texts` it is in.
    pub fn build_with_stats<'a>(
        texts: impl IntoIterator<Item = &'a str>,
        params: Bm25Params,
        stats: &LexicalStats,
    ) -> Self {
        Self::build_with_stats_at(texts, params, stats, stats.avgdl())
    }

    /// [`build_with_stats`](Self::build_with_stats) with `avgdl` given rather than taken
    /// from `stats`: `N = stats.chunks`, `df(t)` from `stats`, and each posting's impact
    /// normalised by `avgdl`. The delta of an index shard is weighed so
    /// ([`Index::with_sharded_delta`](crate::index::Index::with_sharded_delta)): `stats`
    /// counts every chunk of every shard and of every shard's delta, `avgdl` is the built
    /// chunks' alone, as [`build_beside`](Self::build_beside) weighs the delta of one index.
    pub fn build_with_stats_at<'a>(
        texts: impl IntoIterator<Item = &'a str>,
        params: Bm25Params,
        stats: &LexicalStats,
        avgdl: f32,
    ) -> Self {
        let (vocab, docs) = term_counts(texts, &Analyzer::new(params.stemming));
        let own = document_frequencies(&docs, vocab.len());
        let mut df = vec![0u32; vocab.len()];
        for (term, &id) in &vocab {
            df[id as usize] = stats.df.get(term).copied().unwrap_or(own[id as usize]);
        }
        Self::weigh(params, vocab, docs, |t| df[t as usize], stats.chunks as f32, avgdl.max(1.0))
    }

    /// Indexes `texts`, chunks appended after those of `main` (a delta), with the
    /// statistics of both: `N = N_main + N_delta`, `df(t) = df_main(t) + df_delta(t)` and
    /// `main_avgdl` as the average length, so a delta chunk scores as it would have in a
    /// build of `main` with it (up to the change of those statistics, which a rebuild
    /// applies to every chunk).
    pub fn build_beside<'a>(texts: impl IntoIterator<Item = &'a str>, main: &Bm25Index, main_avgdl: f32) -> Self {
        let (vocab, docs) = term_counts(texts, &main.analyzer());
        let n = (main.inverted.num_chunks as usize + docs.len()) as f32;
        let own = document_frequencies(&docs, vocab.len());
        let mut main_df = vec![0u32; vocab.len()];
        for (term, &id) in &vocab {
            main_df[id as usize] = main.vocab.get(term).map_or(0, |&m| main.inverted.df(m) as u32);
        }
        Self::weigh(main.params, vocab, docs, |t| own[t as usize] + main_df[t as usize], n, main_avgdl.max(1.0))
    }

    /// The index of `docs` (term counts and lengths) with these statistics:
    /// `idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))` and each posting's impact
    /// `idf(t) · f / (f + k1 · (1 − b + b · len / avgdl))`.
    fn weigh(
        params: Bm25Params,
        vocab: HashMap<String, u32>,
        docs: Vec<(Vec<(u32, u32)>, usize)>,
        df: impl Fn(u32) -> u32,
        n: f32,
        avgdl: f32,
    ) -> Self {
        let idf: Vec<f32> = (0..vocab.len() as u32).map(|t| idf(n, df(t) as f32)).collect();
        let Bm25Params { k1, b, .. } = params;
        let impacts = docs.into_iter().map(|(tf, len)| {
            let norm = k1 * (1.0 - b + b * len as f32 / avgdl);
            tf.into_iter().map(|(t, f)| (t, idf[t as usize] * f as f32 / (f as f32 + norm))).collect()
        });
        let inverted = InvertedIndex::build(vocab.len(), impacts);
        Bm25Index { params, vocab, inverted }
    }

    /// How many of this index's chunks hold `term` (an analysed term): 0 for a term it
    /// does not have.
    pub fn df_of(&self, term: &str) -> usize {
        self.vocab.get(term).map_or(0, |&id| self.inverted.df(id))
    }

    /// The [`idf`] of `term` (an analysed term) among this index's chunks (`N` at least 1).
    pub fn idf_of(&self, term: &str) -> f32 {
        idf(self.inverted.num_chunks.max(1) as f32, self.df_of(term) as f32)
    }

    /// The analyzer this index's terms come from: a query must be read with it.
    pub fn analyzer(&self) -> Analyzer {
        Analyzer::new(self.params.stemming)
    }

    /// The average length of `texts` in this index's analysed terms (BM25's `avgdl`), at
    /// least 1.
    pub fn average_length<'a>(&self, texts: impl IntoIterator<Item = &'a str>) -> f32 {
        let analyzer = self.analyzer();
        let (mut total, mut n) = (0usize, 0usize);
        for t in texts {
            total += analyzer.terms(t).len();
            n += 1;
        }
        (total as f32 / n.max(1) as f32).max(1.0)
    }

    /// The query's known terms with their repeat counts.
    pub fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let mut out: Vec<(u32, f32)> = Vec::new();
        for t in self.analyzer().terms(query) {
            if let Some(&id) = self.vocab.get(&t) {
                match out.iter_mut().find(|p| p.0 == id) {
                    Some(p) => p.1 += 1.0,
                    None => out.push((id, 1.0)),
                }
            }
        }
        out
    }

    /// This index's BM25 file as formats 2 to 4 wrote it: the parameters without the
    /// stemming (`k1`, `b`), then the vocabulary and the postings. For tests of reading old
    /// indexes.
    #[cfg(test)]
    pub(crate) fn format_4_bytes(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct V4<'a> {
            params: (f32, f32),
            vocab: &'a HashMap<String, u32>,
            inverted: &'a InvertedIndex,
        }
        let params = (self.params.k1, self.params.b);
        bincode::serialize(&V4 { params, vocab: &self.vocab, inverted: &self.inverted }).expect("in memory")
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
        let idx = Bm25Index::build(texts, Bm25Params { k1: 1.2, b: 0.75, ..Default::default() });
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
    fn a_delta_built_beside_its_index_scores_as_a_build_of_both() {
        let main = ["apple revenue grew", "apple pie", "banana split", "cherry tart"];
        let delta = ["apple banana smoothie", "kiwi"];
        let params = Bm25Params { k1: 1.2, b: 0.75, stemming: Stemming::English };
        let both = Bm25Index::build(main.iter().chain(&delta).copied(), params);
        let main_index = Bm25Index::build(main, params);
        // With the whole corpus's average length, the delta's scores are a build of both's.
        let avgdl = main_index.average_length(main.iter().chain(&delta).copied());
        let beside = Bm25Index::build_beside(delta, &main_index, avgdl);
        for q in ["apple", "banana smoothie", "kiwi", "apple kiwi", "smoothies"] {
            let whole: Vec<(u32, f32)> = both.search(q, None, 10).into_iter().filter(|h| h.0 >= 4).collect();
            let part: Vec<(u32, f32)> = beside.search(q, None, 10).into_iter().map(|(c, s)| (c + 4, s)).collect();
            assert_eq!(whole.len(), part.len(), "{q}");
            for (a, b) in whole.iter().zip(&part) {
                assert_eq!(a.0, b.0, "{q}");
                assert!((a.1 - b.1).abs() < 1e-5, "{q}: {a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn parts_weighed_with_the_whole_statistics_score_as_the_whole_to_the_bit() {
        let texts: Vec<String> =
            (0..300).map(|i| format!("term{} shared words {} and {}", i % 37, i % 7, "x ".repeat(i % 11))).collect();
        let params = Bm25Params::default();
        let whole = Bm25Index::build(texts.iter().map(String::as_str), params);
        let stats = LexicalStats::of(texts.iter().map(String::as_str), params);
        // Statistics of parts add up to the whole's.
        type Part<'a> = Vec<(usize, &'a String)>;
        let (even, odd): (Part<'_>, Part<'_>) = texts.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        let mut added = LexicalStats::of(even.iter().map(|(_, t)| t.as_str()), params);
        added.add(&LexicalStats::of(odd.iter().map(|(_, t)| t.as_str()), params));
        assert_eq!(added, stats);
        for part in [&even, &odd] {
            let index = Bm25Index::build_with_stats(part.iter().map(|(_, t)| t.as_str()), params, &stats);
            for q in ["term3 shared", "words 5 x", "and term36 term1", "absent"] {
                let whole_hits: Vec<(usize, u32)> = whole
                    .search(q, None, 300)
                    .into_iter()
                    .filter(|h| part.iter().any(|(i, _)| *i == h.0 as usize))
                    .map(|(c, s)| (c as usize, s.to_bits()))
                    .collect();
                let mut part_hits: Vec<(usize, u32)> =
                    index.search(q, None, 300).into_iter().map(|(c, s)| (part[c as usize].0, s.to_bits())).collect();
                part_hits.sort_by_key(|h| whole_hits.iter().position(|w| w.0 == h.0));
                assert_eq!(part_hits, whole_hits, "{q}");
            }
        }
        // With its own statistics a part scores otherwise: the statistics are what makes them equal.
        let alone = Bm25Index::build(even.iter().map(|(_, t)| t.as_str()), params);
        let weighed = Bm25Index::build_with_stats(even.iter().map(|(_, t)| t.as_str()), params, &stats);
        assert_ne!(alone.search("term3", None, 1)[0].1, weighed.search("term3", None, 1)[0].1);
    }

    #[test]
    fn queries_are_read_with_the_index_analyzer() {
        let texts = ["operating income rose", "operations were sold"];
        let plain = Bm25Index::build(texts, Bm25Params::default());
        let stemmed = Bm25Index::build(texts, Bm25Params { stemming: Stemming::English, ..Default::default() });
        // Stemmed, "operating" and "operations" are one term; as written they are two.
        assert_eq!(stemmed.search("operating", None, 10).len(), 2);
        assert_eq!(plain.search("operating", None, 10).iter().map(|h| h.0).collect::<Vec<_>>(), vec![0]);
        assert_eq!(plain.search("OPERATIONS", None, 10).iter().map(|h| h.0).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_format_4_file_reads_as_a_stemmed_index() {
        // Format 4 wrote the parameters without the stemming: k1, b, then the rest.
        let stemmed = Bm25Index::build(["operating income rose", "operations were sold"], {
            Bm25Params { k1: 1.2, b: 0.75, stemming: Stemming::English }
        });
        let back: Bm25Index = bincode::deserialize::<Bm25IndexV4>(&stemmed.format_4_bytes()).unwrap().into();
        assert_eq!(back, stemmed);
        assert_eq!(back.search("operations", None, 10).len(), 2, "queries are stemmed as the terms were");
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let idx = Bm25Index::build(["common rare", "common", "common", "common"], Bm25Params::default());
        let hits = idx.search("common rare", None, 4);
        assert_eq!(hits[0].0, 0);
        assert!(hits[0].1 > 2.0 * hits[1].1);
    }
}
