//! Picking the sentence(s) of a chunk that best answer the query: the `evidenceText` of
//! `/v1/retrieve` and the compact units of `/v1/search`.
//!
//! Each sentence is scored by the inverse document frequency (from the index's BM25
//! statistics) of the distinct query terms it contains, so rare, specific words count
//! most; ties go to the earlier sentence. Deterministic and cheap: no model runs.

use crate::corpus::split_sentences;
use crate::index::Analyzer;

/// A span of a chunk's text, offsets in characters (Unicode scalar values), end exclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The span's text.
    pub text: String,
    /// First character within the chunk text.
    pub char_start: usize,
    /// One past the last character.
    pub char_end: usize,
    /// Sum of the idf of the query terms it contains (0 when none).
    pub score: f32,
}

/// Sentences of `text` with their character offsets.
fn sentences_with_offsets(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut byte_cursor = 0;
    for s in split_sentences(text) {
        // Sentences come out trimmed and in order: find each after the previous one.
        let Some(pos) = text[byte_cursor..].find(s.as_str()) else { continue };
        let b0 = byte_cursor + pos;
        let b1 = b0 + s.len();
        let c0 = text[..b0].chars().count();
        out.push((c0, c0 + s.chars().count(), s));
        byte_cursor = b1;
    }
    out
}

/// The best sentence of `text` for `query`, grown with neighbouring sentences (the
/// following one first) while the span stays within `max_words` words; terms read with
/// `analyzer` and weighed by `idf` (the whole index's, [`IndexView::idf`](crate::pipeline::IndexView::idf)).
/// `None` for an empty text.
pub fn best_span(
    text: &str,
    query: &str,
    analyzer: &Analyzer,
    idf: &dyn Fn(&str) -> f32,
    max_words: usize,
) -> Option<Evidence> {
    let sents = sentences_with_offsets(text);
    if sents.is_empty() {
        return None;
    }
    let mut query_terms = analyzer.terms(query);
    query_terms.sort();
    query_terms.dedup();
    let idf: Vec<(String, f32)> = query_terms.into_iter().map(|t| (t.clone(), idf(&t))).collect();
    let scores: Vec<f32> = sents
        .iter()
        .map(|(_, _, s)| {
            let terms = analyzer.terms(s);
            idf.iter().filter(|(t, _)| terms.contains(t)).map(|(_, w)| w).sum()
        })
        .collect();
    let best = (0..sents.len()).fold(0, |b, i| if scores[i] > scores[b] { i } else { b });
    let words = |i: usize| sents[i].2.split_whitespace().count();
    let (mut lo, mut hi) = (best, best);
    let mut total = words(best);
    loop {
        if hi + 1 < sents.len() && total + words(hi + 1) <= max_words {
            hi += 1;
            total += words(hi);
        } else if lo > 0 && total + words(lo - 1) <= max_words {
            lo -= 1;
            total += words(lo);
        } else {
            break;
        }
    }
    let (c0, c1) = (sents[lo].0, sents[hi].1);
    let span: String = text.chars().skip(c0).take(c1 - c0).collect();
    Some(Evidence { text: span, char_start: c0, char_end: c1, score: scores[lo..=hi].iter().sum() })
}

#[cfg(test)]
mod tests {
    use crate::index::{Bm25Index, Bm25Params};

    use super::*;

    fn bm25() -> Bm25Index {
        Bm25Index::build(
            [
                "revenue grew in the quarter",
                "data center revenue grew",
                "the weather was fine",
                "capex rose for data centers",
            ],
            Bm25Params::default(),
        )
    }

    /// [`best_span`] weighed by [`bm25`]'s own statistics.
    fn span(text: &str, query: &str, max_words: usize) -> Option<Evidence> {
        let b = bm25();
        best_span(text, query, &b.analyzer(), &|t| b.idf_of(t), max_words)
    }

    #[test]
    fn picks_the_sentence_with_the_rarest_query_terms() {
        let text = "Thanks, and good afternoon. Revenue grew 8% this quarter. Data center capex rose to a record.";
        let e = span(text, "what happened to data center capex?", 1).unwrap();
        assert_eq!(e.text, "Data center capex rose to a record.");
        let chars: Vec<char> = text.chars().collect();
        assert_eq!(chars[e.char_start..e.char_end].iter().collect::<String>(), e.text);
        assert!(e.score > 0.0);
    }

    #[test]
    fn grows_with_neighbours_within_the_word_budget_and_counts_chars_not_bytes() {
        let text = "Café sales rose. Revenue grew 8%. Costs fell.";
        let e = span(text, "revenue", 7).unwrap();
        assert_eq!(e.text, "Revenue grew 8%. Costs fell.");
        let chars: Vec<char> = text.chars().collect();
        assert_eq!(chars[e.char_start..e.char_end].iter().collect::<String>(), e.text);
        let all = span(text, "revenue", 100).unwrap();
        assert_eq!(all.text, text);
    }

    #[test]
    fn no_match_falls_back_to_the_first_sentence_and_empty_text_has_none() {
        let e = span("One. Two.", "zebra", 1).unwrap();
        assert_eq!((e.text.as_str(), e.score), ("One.", 0.0));
        assert!(span("", "x", 10).is_none());
    }
}
