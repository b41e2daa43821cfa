//! The BM25 text analyzer: Unicode word split, lowercasing, stop words, and optionally
//! Snowball English stemming.

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};

/// English stop words removed before indexing (Lucene's classic list plus common
/// function words).
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
    "we", "our", "you", "your", "i", "me", "my", "he", "she", "his", "her", "its", "them", "those", "what", "which",
    "who", "whom", "were", "been", "being", "have", "has", "had", "do", "does", "did", "from", "so", "than", "too",
    "very", "can", "would", "should", "could", "about", "also", "us", "am", "how", "when", "where", "why",
];

/// How the analyzer reduces a word to its index term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stemming {
    /// The word as written, lowercased: the default of new indexes. On the financial dev
    /// sets BM25 finds more with words as written ("operating" is not "operations"); on
    /// SciFact, whose claims want "inhibits" to match "inhibition", stemming finds more
    /// (docs/quality.md, "Where the constants came from").
    #[default]
    None,
    /// Snowball English stemming: every index before format 5.
    English,
}

/// Turns text into index terms.
pub struct Analyzer {
    stemmer: Option<Stemmer>,
}

impl Default for Analyzer {
    /// The analyzer of new indexes ([`Stemming::default`]).
    fn default() -> Self {
        Analyzer::new(Stemming::default())
    }
}

impl Analyzer {
    /// An analyzer that stems (or not) as `stemming` says.
    pub fn new(stemming: Stemming) -> Self {
        Analyzer {
            stemmer: match stemming {
                Stemming::None => None,
                Stemming::English => Some(Stemmer::create(Algorithm::English)),
            },
        }
    }

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
            out.push(match &self.stemmer {
                Some(stemmer) => stemmer.stem(&lower).into_owned(),
                None => lower,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_stems_and_drops_stop_words() {
        let a = Analyzer::new(Stemming::English);
        assert_eq!(a.terms("The Revenues of Apple increased in 2023!"), vec!["revenu", "appl", "increas", "2023"]);
        assert_eq!(a.terms("running runs ran"), vec!["run", "run", "ran"]);
        assert!(a.terms("the of and").is_empty());
        assert!(a.terms("").is_empty());
    }

    #[test]
    fn keeps_numbers_and_non_ascii_words() {
        for a in [Analyzer::new(Stemming::English), Analyzer::default()] {
            assert_eq!(a.terms("Q3 EBITDA: €4.5bn"), vec!["q3", "ebitda", "4", "5bn"]);
            assert_eq!(a.terms("Müller café"), vec!["müller", "café"]);
        }
    }

    #[test]
    fn without_stemming_words_stay_as_written() {
        let a = Analyzer::new(Stemming::None);
        assert_eq!(a.terms("The Revenues of Apple increased in 2023!"), vec!["revenues", "apple", "increased", "2023"]);
        assert_eq!(a.terms("operating operations"), vec!["operating", "operations"]);
        assert!(a.terms("the of and").is_empty());
        assert_eq!(Analyzer::default().terms("Operating"), vec!["operating"], "new indexes do not stem");
    }
}
