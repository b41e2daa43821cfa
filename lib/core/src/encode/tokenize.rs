//! Tokenization with explicit truncation and no padding.
//!
//! The all-MiniLM-L6-v2 `tokenizer.json` ships with `Fixed(128)` padding and truncation at
//! 128: left as is, every input would be padded, and pooling over the pads ruins retrieval.
//! [`TextTokenizer`] therefore clears the padding and sets truncation itself.

use std::path::Path;

use sha2::Digest;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::{Error, Result};

/// The model window used everywhere: inputs are truncated to this many tokens.
pub const MAX_TOKENS: usize = 256;

/// One tokenized input: ids and token type ids (no padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Vocabulary ids, `[CLS] ... [SEP]` included.
    pub ids: Vec<u32>,
    /// Segment ids (0 for the first text, 1 for the second of a pair).
    pub type_ids: Vec<u32>,
    /// Whether the input was cut to fit the window.
    pub truncated: bool,
}

impl From<tokenizers::Encoding> for Encoded {
    fn from(e: tokenizers::Encoding) -> Self {
        Encoded {
            ids: e.get_ids().to_vec(),
            type_ids: e.get_type_ids().to_vec(),
            truncated: !e.get_overflowing().is_empty(),
        }
    }
}

/// A WordPiece tokenizer with the project's truncation rules.
#[derive(Clone)]
pub struct TextTokenizer {
    single: Tokenizer,
    pair: Tokenizer,
    /// No truncation and no padding: for measuring and cutting text.
    plain: Tokenizer,
    /// SHA-256 of `plain` serialized: its normalizer, pre-tokenizer, vocabulary, added and
    /// special tokens ([`TextTokenizer::splits_like`]), worked out when first asked.
    splits: std::sync::OnceLock<Option<[u8; 32]>>,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`, truncating at `max_tokens` (longest-first for single texts,
    /// only the second text for pairs).
    pub fn from_file(path: &Path, max_tokens: usize) -> Result<Self> {
        let base = Tokenizer::from_file(path)
            .map_err(|e| Error::Model { path: path.into(), reason: format!("tokenizer: {e}") })?;
        let with = |strategy| -> Result<Tokenizer> {
            let mut t = base.clone();
            t.with_padding(None);
            t.with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
            Ok(t)
        };
        let mut plain = base.clone();
        plain.with_padding(None);
        plain.with_truncation(None).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(TextTokenizer {
            plain,
            splits: std::sync::OnceLock::new(),
            single: with(TruncationStrategy::LongestFirst)?,
            pair: with(TruncationStrategy::OnlySecond)?,
        })
    }

    /// Loads the `tokenizer.json` of a converted model directory, truncating at
    /// [`MAX_TOKENS`].
    pub fn of_model(dir: &Path) -> Result<Self> {
        Self::from_file(&dir.join("tokenizer.json"), MAX_TOKENS)
    }

    /// Tokenizes a batch of single texts.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Encoded>> {
        texts.iter().map(|t| self.encode(t)).collect()
    }

    /// Tokenizes one text.
    pub fn encode(&self, text: &str) -> Result<Encoded> {
        // Without character offsets (`encode_fast`): the encoders need ids only.
        self.single.encode_fast(text, true).map(Encoded::from).map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Tokenizes a (query, passage) pair, truncating only the passage.
    pub fn encode_pair(&self, first: &str, second: &str) -> Result<Encoded> {
        self.pair.encode_fast((first, second), true).map(Encoded::from).map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Number of tokens of `text` without special tokens and without truncation.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.plain.encode_fast(text, false).map(|e| e.len()).unwrap_or(0)
    }

    /// The byte range in `text` of each of its tokens, in order (no special tokens, no
    /// truncation). Sub-word pieces of one word touch; a gap means white space.
    pub fn token_ranges(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        self.plain.encode(text, false).map(|e| e.get_offsets().iter().map(|&(a, b)| a..b).collect()).unwrap_or_default()
    }

    /// Whether `other` cuts every text into the same tokens as this one: their files differ
    /// at most in truncation and padding, which measuring and cutting leave out (the
    /// default dense and sparse models' tokenizers do). A plan then measures text once.
    pub fn splits_like(&self, other: &TextTokenizer) -> bool {
        matches!((self.splits(), other.splits()), (Some(a), Some(b)) if a == b)
    }

    /// The hash of how this tokenizer splits text (`None` if it cannot be serialized, which
    /// a loaded one always can: it then splits like no other).
    fn splits(&self) -> Option<[u8; 32]> {
        *self.splits.get_or_init(|| self.plain.to_string(false).ok().map(|json| sha2::Sha256::digest(json).into()))
    }

    /// The vocabulary string of an id, if any.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.single.id_to_token(id)
    }

    /// The vocabulary size (special tokens included).
    pub fn vocab_size(&self) -> usize {
        self.single.get_vocab_size(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::model_dir;

    #[test]
    fn the_default_encoders_tokenizers_split_alike_and_mpnets_does_not() {
        let load = |name: &str| TextTokenizer::of_model(&model_dir().join(name)).unwrap();
        let (dense, sparse, mpnet) = (load("minilm-l6-v2"), load("splade-tiny"), load("mpnet-base-v2"));
        // Their files differ (truncation, padding), not how they cut text.
        assert!(dense.splits_like(&sparse) && sparse.splits_like(&dense));
        assert!(!dense.splits_like(&mpnet), "another vocabulary");
        for text in [
            "Net revenue rose 12% to $4.1bn in Q3 FY2024 (see Note 7).",
            "Café Müller’s naïve résumé — “quoted” … 東京 ﬁnancials\tand\u{00a0}spaces",
            "",
        ] {
            assert_eq!(dense.count_tokens(text), sparse.count_tokens(text), "{text}");
            assert_eq!(dense.token_ranges(text), sparse.token_ranges(text), "{text}");
        }
    }
}
