//! The BM25 text analyzer: Unicode word split, lowercasing, stop words, Snowball stemming.

use rust_stemmers::{Algorithm, Stemmer};

/// English stop words removed before indexing (Lucene's classic list plus common
/// function words).
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
    "we", "our", "you", "your", "i", "me", "my", "he", "she", "his", "her", "its", "them", "those", "what", "which",
    "who", "whom", "were", "been", "being", "have", "has", "had", "do", "does", "did", "from", "so", "than", "too",
    "very", "can", "would", "should", "could", "about", "also", "us", "am", "how", "when", "where", "why",
];

/// Turns text into index terms.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer { stemmer: Stemmer::create(Algorithm::English) }
    }
}

impl Analyzer {
    /// The terms of `text`, in order, with repeats.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            if word.is_empty() {
                continue;
            }
            let lower = word.to_lowercase();
            if STOP_WORDS.contains(&lower.as_str()) {
                continue;
            }
            out.push(self.stemmer.stem(&lower).into_owned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_stems_and_drops_stop_words() {
        let a = Analyzer::default();
        assert_eq!(a.terms("The Revenues of Apple increased in 2023!"), vec!["revenu", "appl", "increas", "2023"]);
        assert_eq!(a.terms("running runs ran"), vec!["run", "run", "ran"]);
        assert!(a.terms("the of and").is_empty());
        assert!(a.terms("").is_empty());
    }

    #[test]
    fn keeps_numbers_and_non_ascii_words() {
        let a = Analyzer::default();
        assert_eq!(a.terms("Q3 EBITDA: €4.5bn"), vec!["q3", "ebitda", "4", "5bn"]);
        assert_eq!(a.terms("Müller café"), vec!["müller", "café"]);
    }
}
