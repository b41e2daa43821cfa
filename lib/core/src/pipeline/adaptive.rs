//! Per-query path weights from what each path shows on this query.
//!
//! Two signals, both scale-free so that the paths can be compared:
//!
//! - **Confidence**: a path whose best hit stands far above its next ones is usually right
//!   about it; a path whose scores are flat has not found anything distinctive. For path `i`
//!   with scores `s_1 ≥ s_2 ≥ …` (its own scale: cosine, BM25, SPLADE dot product):
//!
//!   ```text
//!   c_i = (s_1 − mean(s_2..s_depth)) / std(s_2..s_depth)
//!   ```
//!
//! - **Agreement**: the share of path `i`'s top `n` documents that another path also has in
//!   its top `n`. A path that disagrees with every other path on a query (dense retrieval
//!   on a ticker and a date, BM25 on a question buried in instructions) is usually the one
//!   that is wrong:
//!
//!   ```text
//!   a_i = |{d ∈ top_n(i) : d ∈ top_n(j) for some j ≠ i}| / |top_n(i)|
//!   ```
//!
//! - **Identifiers in the query** (its wording, not the paths): the share of the query's
//!   words that are tickers, dates, codes or figures. A sentence encoder reads "MRCY",
//!   "January 26, 2016" or "FY2019" poorly, while BM25 and SPLADE match them exactly; dense
//!   feedback moves the dense query by this share ([`feedback_weight`](super::feedback_weight)):
//!
//!   ```text
//!   ids(q) = |{w ∈ words(q) : w has a digit, or is two or more capitals}| / |words(q)|
//!   ```
//!
//! The fusion's weight for path `i` is
//!
//! ```text
//! w_i = base_i · exp(α · (c_i − mean_j c_j) + β · (a_i − mean_j a_j))
//! ```
//!
//! - **The query's length** (its wording again): `len(q)`, the number of its words besides
//!   the role set in front of it ("You are an equity analyst.", which the lexical paths do
//!   not read: [`lexical_query`](super::lexical_query)). A long
//!   question ("What is the FY2024 fixed asset turnover ratio for Home Depot, Inc.? Fixed
//!   asset turnover ratio is defined as: … Round your answer to two decimal places.") gives
//!   the lexical paths many terms to match besides its subject, so a passage can stand far
//!   above the rest of a path's list for words that are not what is asked. The fusion then
//!   reads the paths' ranks instead of their scores ([`FusionConfig`](super::FusionConfig)).
//!
//! `α = β = 0` gives the base weights. A path with fewer than two hits has confidence
//! 0; one with none has agreement 0.

/// Confidence of a score list (best first): see the module documentation.
pub fn confidence(scores: &[f32], depth: usize) -> f32 {
    if scores.len() < 2 || depth < 2 {
        return 0.0;
    }
    let rest = &scores[1..scores.len().min(depth)];
    let n = rest.len() as f32;
    let mean = rest.iter().sum::<f32>() / n;
    let var = rest.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let sd = var.sqrt().max(1e-6);
    let c = (scores[0] - mean) / sd;
    if c.is_finite() {
        c.min(50.0)
    } else {
        0.0
    }
}

/// Agreement of list `i` with the others: the share of its first `n` items found among
/// the first `n` of another list (see the module documentation).
pub fn agreement<T: PartialEq>(lists: &[&[T]], i: usize, n: usize) -> f32 {
    let top = &lists[i][..lists[i].len().min(n)];
    if top.is_empty() {
        return 0.0;
    }
    let shared =
        top.iter().filter(|x| lists.iter().enumerate().any(|(j, l)| j != i && l[..l.len().min(n)].contains(x))).count();
    shared as f32 / top.len() as f32
}

/// Per-query weights `base_i · exp(α · (c_i − mean c) + β · (a_i − mean a))`.
pub fn adaptive_weights(base: &[f32], confidences: &[f32], alpha: f32, agreements: &[f32], beta: f32) -> Vec<f32> {
    if base.is_empty() {
        return Vec::new();
    }
    let mean = |x: &[f32]| if x.is_empty() { 0.0 } else { x.iter().sum::<f32>() / x.len() as f32 };
    let (mc, ma) = (mean(confidences), mean(agreements));
    base.iter()
        .enumerate()
        .map(|(i, b)| {
            let c = confidences.get(i).map_or(0.0, |c| c - mc);
            let a = agreements.get(i).map_or(0.0, |a| a - ma);
            b * (alpha * c + beta * a).exp()
        })
        .collect()
}

/// The share of `query`'s words that are identifiers, `ids(q)` in the module
/// documentation: a word is a run that starts with an ASCII letter or digit and goes on
/// with letters, digits, `.`, `-` and `'` ("Acme's", "U.S.", "10-K"); it is an identifier
/// when it holds a digit ("FY2019", "26,", "Q3") or has two or more characters and no
/// lowercase letter ("MRCY", "USD", "EBITDA"). 0 for a query without words.
pub fn identifier_share(query: &str) -> f32 {
    let (mut words, mut identifiers) = (0usize, 0usize);
    for word in words_of(query) {
        words += 1;
        let capitals = word.len() >= 2 && !word.bytes().any(|b| b.is_ascii_lowercase());
        if capitals || word.bytes().any(|b| b.is_ascii_digit()) {
            identifiers += 1;
        }
    }
    identifiers as f32 / words.max(1) as f32
}

/// The number of `query`'s words, `len(q)` in the module documentation (words as
/// [`identifier_share`] reads them).
pub fn word_count(query: &str) -> usize {
    words_of(query).count()
}

/// The words of `query`: runs that start with an ASCII letter or digit and go on with
/// letters, digits, `.`, `-` and `'`.
fn words_of(query: &str) -> impl Iterator<Item = &str> {
    let mut rest = query;
    std::iter::from_fn(move || {
        let start = rest.find(|c: char| c.is_ascii_alphanumeric())?;
        let word = &rest[start..];
        let len =
            word.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '\''))).unwrap_or(word.len());
        rest = &word[len..];
        Some(&word[..len])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standout_top_hit_is_confident_and_a_flat_list_is_not() {
        let peaked = confidence(&[10.0, 2.0, 2.1, 1.9, 2.0], 10);
        let flat = confidence(&[2.05, 2.0, 2.1, 1.9, 2.0], 10);
        assert!(peaked > 50.0 * flat.max(0.01) || peaked >= 50.0, "{peaked} vs {flat}");
        assert!(flat < 1.0);
        // Scale-free: multiplying every score changes nothing.
        let a = confidence(&[0.9, 0.5, 0.45, 0.4], 10);
        let b = confidence(&[9.0, 5.0, 4.5, 4.0], 10);
        assert!((a - b).abs() < 1e-3);
    }

    #[test]
    fn short_lists_and_ties() {
        assert_eq!(confidence(&[], 10), 0.0);
        assert_eq!(confidence(&[1.0], 10), 0.0);
        assert_eq!(confidence(&[1.0, 1.0, 1.0], 10), 0.0);
        assert_eq!(confidence(&[1.0, 0.5], 1), 0.0);
    }

    #[test]
    fn weights_follow_confidence_and_alpha_zero_keeps_the_base() {
        assert_eq!(adaptive_weights(&[1.0, 2.0], &[5.0, 1.0], 0.0, &[1.0, 0.0], 0.0), vec![1.0, 2.0]);
        let w = adaptive_weights(&[1.0, 1.0, 1.0], &[3.0, 1.0, 2.0], 0.5, &[0.5, 0.5, 0.5], 3.0);
        assert!(w[0] > w[2] && w[2] > w[1]);
        assert!((w[2] - 1.0).abs() < 1e-6, "the mean-confidence path keeps its base weight");
        assert_eq!(adaptive_weights(&[0.0, 1.0], &[9.0, 0.0], 1.0, &[1.0, 0.0], 1.0)[0], 0.0, "a zero base stays zero");
        assert!(adaptive_weights(&[], &[], 1.0, &[], 1.0).is_empty());
    }

    #[test]
    fn a_path_that_agrees_with_no_other_counts_less() {
        let dense: &[u32] = &[7, 8, 9, 10];
        let bm25: &[u32] = &[1, 2, 3, 4];
        let splade: &[u32] = &[2, 1, 4, 5];
        let lists = [dense, bm25, splade];
        let a: Vec<f32> = (0..3).map(|i| agreement(&lists, i, 10)).collect();
        assert_eq!(a, vec![0.0, 0.75, 0.75]);
        // Only the first n of each list count.
        assert_eq!(agreement(&lists, 1, 2), 1.0);
        assert_eq!(agreement(&[&[1u32][..], &[9, 1][..]], 0, 1), 0.0);
        assert_eq!(agreement(&[&[][..], &[1u32][..]], 0, 10), 0.0);
        let w = adaptive_weights(&[1.0; 3], &[0.0; 3], 0.0, &a, 3.0);
        // exp(3 · (0 − 0.5)) against exp(3 · (0.75 − 0.5)).
        assert!((w[0] - (-1.5f32).exp()).abs() < 1e-6 && (w[1] - 0.75f32.exp()).abs() < 1e-6, "{w:?}");
    }

    #[test]
    fn tickers_dates_and_codes_are_identifiers_and_plain_words_are_not() {
        // You are an equity analyst. Based on MRCY's earnings call of January 26, 2016, what
        // was the company's adjusted EBITDA? -> 20 words; MRCY's is not all capitals, 26,
        // 2016 and EBITDA are identifiers.
        let q = "You are an equity analyst. Based on MRCY's earnings call of January 26, 2016, what was the company's adjusted EBITDA?";
        assert!((identifier_share(q) - 3.0 / 20.0).abs() < 1e-6, "{}", identifier_share(q));
        assert_eq!(identifier_share("EXTN bookings earnings call May 3, 2018"), 3.0 / 7.0);
        assert_eq!(identifier_share("what was the capital expenditure in FY2019, in USD millions"), 2.0 / 10.0);
        assert_eq!(identifier_share("Does vitamin D deficiency cause depression?"), 0.0, "D: one capital");
        assert_eq!(identifier_share("10-K U.S. Q3"), 1.0);
        assert_eq!(identifier_share("I am A"), 0.0, "a single capital letter is a word");
        assert_eq!(identifier_share(""), 0.0);
        assert_eq!(identifier_share("¿—?"), 0.0);
        // The same words are what the length switch counts.
        assert_eq!(word_count(q), 20);
        assert_eq!(word_count("Acme's U.S. 10-K, FY2019 — capex?"), 5);
        assert_eq!(word_count("¿—?"), 0);
        assert_eq!(identifier_share("Müller 2024"), 1.0 / 3.0, "non-ASCII letters split words: M, ller, 2024");
    }
}
