//! The plan step: cut every document into chunks that fit the encoders' window, give each
//! chunk its encoder input and content key, and cut the chunk list into shards.

use std::ops::Range;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::encoded::ChunkKey;
use crate::corpus::{chunk_document_with_overlap, Chunk, Document, TokenMeasure};
use crate::encode::{TextTokenizer, MAX_TOKENS};
use crate::error::{Error, Result};
use crate::index::format::{ModelRef, FORMAT_VERSION};
use crate::index::Bm25Params;

/// The encoders' window: tokens an encoder reads, `[CLS]` and `[SEP]` included.
pub const WINDOW: usize = MAX_TOKENS;
/// The special tokens an encoder adds to every input (`[CLS]`, `[SEP]`).
const SPECIAL_TOKENS: usize = 2;
/// At most this many tokens of a title go in front of each of its chunks; a longer title
/// is cut there (it is metadata, not document text, and is still returned whole).
pub const TITLE_TOKENS: usize = 48;
/// Token budget of a dense window by default, [`MEASURED_DENSE_WINDOW`]: a chunk longer than
/// 128 dense tokens is read in windows (0: one dense vector per chunk, the release before).
/// It raises nDCG@10 on every dev set; the default fusion was chosen again for the stronger
/// dense path it makes (docs/quality.md, "Where the constants came from").
pub const DEFAULT_DENSE_WINDOW: usize = MEASURED_DENSE_WINDOW;
/// The dense window measured on the dev sets (against one vector per chunk and windows of
/// 64 tokens; docs/quality.md, "Where the constants came from"): a 200-token chunk read
/// whole is one vector for several statements, and a question about one of them is far
/// from it.
pub const MEASURED_DENSE_WINDOW: usize = 128;
/// Chunks per shard by default: a shard is the unit of encode work and of the cache files.
pub const DEFAULT_SHARD_CHUNKS: usize = 1024;

/// What an index build does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildOptions {
    /// Index id written in the manifest.
    pub index_id: String,
    /// Token budget of a chunk (lowered for a document whose title leaves less room in the
    /// window).
    pub chunk_tokens: usize,
    /// Tokens a chunk may repeat from the end of the one before it (whole pieces; 0: none,
    /// see [`chunk_document_with_overlap`]).
    #[serde(default)]
    pub chunk_overlap: usize,
    /// Token budget of a dense window: a chunk of more tokens than this (by the dense
    /// tokenizer, its title aside) is read by the dense encoder in `⌈tokens / budget⌉`
    /// windows of equal length, each with the title in front, one vector each
    /// ([`Plan::windows`]). 0: one vector per chunk (what an older configuration means).
    #[serde(default)]
    pub dense_window: usize,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Dense model reference for the manifest and the content keys.
    pub dense_model: ModelRef,
    /// SPLADE model reference for the manifest and the content keys.
    pub sparse_model: ModelRef,
    /// Chunks per shard ([`DEFAULT_SHARD_CHUNKS`]).
    pub shard_chunks: usize,
}

impl BuildOptions {
    /// The options the index of `manifest` was built with (for what is appended to it and
    /// for its next build), with [`DEFAULT_SHARD_CHUNKS`].
    pub fn of_manifest(manifest: &crate::index::Manifest) -> Self {
        BuildOptions {
            index_id: manifest.index_id.clone(),
            chunk_tokens: manifest.chunk_tokens,
            chunk_overlap: manifest.chunk_overlap,
            dense_window: manifest.dense_window,
            bm25: manifest.bm25,
            dense_model: manifest.dense_model.clone(),
            sparse_model: manifest.sparse_model.clone(),
            shard_chunks: DEFAULT_SHARD_CHUNKS,
        }
    }
}

/// Measures text with both encoders' tokenizers, taking the larger count, so a chunk fits
/// both windows; with one of them when they cut text alike
/// ([`TextTokenizer::splits_like`]), since the other would give the same.
struct BothTokenizers<'a> {
    dense: &'a TextTokenizer,
    /// `None` when it splits like `dense`.
    sparse: Option<&'a TextTokenizer>,
}

impl<'a> BothTokenizers<'a> {
    fn new(dense: &'a TextTokenizer, sparse: &'a TextTokenizer) -> Self {
        BothTokenizers { dense, sparse: (!sparse.splits_like(dense)).then_some(sparse) }
    }
}

impl TokenMeasure for BothTokenizers<'_> {
    fn count(&self, text: &str) -> usize {
        let d = self.dense.count_tokens(text);
        self.sparse.map_or(d, |s| d.max(s.count_tokens(text)))
    }
    fn token_ranges(&self, text: &str) -> Vec<Range<usize>> {
        let d = self.dense.token_ranges(text);
        match self.sparse.map(|s| s.token_ranges(text)) {
            Some(s) if s.len() > d.len() => s,
            _ => d,
        }
    }
}

/// The dense tokenizer alone measures dense windows.
impl TokenMeasure for TextTokenizer {
    fn count(&self, text: &str) -> usize {
        self.count_tokens(text)
    }
    fn token_ranges(&self, text: &str) -> Vec<Range<usize>> {
        TextTokenizer::token_ranges(self, text)
    }
}

/// A build's plan: the chunks, what the encoders read for each, their keys and the shards.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The options planned with.
    pub options: BuildOptions,
    /// The documents, in input order.
    pub documents: Vec<Document>,
    /// The chunks, by document then position.
    pub chunks: Vec<Chunk>,
    /// What the encoders read for each chunk ([`encoder_input`]).
    pub inputs: Vec<String>,
    /// What the dense encoder reads of each chunk longer than the dense window
    /// ([`BuildOptions::dense_window`]): its windows ([`dense_windows`]); empty for a chunk
    /// it reads whole (as its input).
    #[serde(default)]
    pub windows: Vec<Vec<String>>,
    /// The content key of each chunk's vectors.
    pub keys: Vec<ChunkKey>,
    /// Contiguous chunk ranges, [`BuildOptions::shard_chunks`] long (the last one shorter).
    pub shards: Vec<Range<u32>>,
    /// Tokens of the encoder inputs beyond the window, summed over chunks (0 unless a
    /// title alone fills the window).
    pub tokens_beyond_window: u64,
    /// [`inputs_sha256`] of this build.
    pub inputs_sha256: String,
    /// The SPLADE vocabulary size.
    pub sparse_vocab: usize,
}

/// The title as the encoders read it: at most [`TITLE_TOKENS`] tokens of it.
fn encoder_title(title: &str, measure: &dyn TokenMeasure) -> String {
    let title = title.trim();
    let tokens = measure.token_ranges(title);
    match tokens.get(TITLE_TOKENS) {
        Some(_) => title[..tokens[TITLE_TOKENS - 1].end].to_string(),
        None => title.to_string(),
    }
}

/// The dense windows of `chunk` of a document titled `title`, as [`plan`] makes them
/// ([`dense_windows`] under the encoder title; empty when the dense encoder reads the
/// chunk's input whole).
pub(super) fn chunk_windows(
    title: &str,
    chunk: &Chunk,
    dense_window: usize,
    tokenizers: (&TextTokenizer, &TextTokenizer),
) -> Vec<String> {
    let (dense, sparse) = tokenizers;
    let title = encoder_title(title, &BothTokenizers::new(dense, sparse));
    dense_windows(&title, chunk, dense_window, dense)
}

/// The text the encoders see for a chunk: the (encoder) title, a newline, then the chunk.
pub fn encoder_input(title: &str, chunk: &Chunk) -> String {
    if title.is_empty() {
        chunk.text.clone()
    } else {
        format!("{title}\n{}", chunk.text)
    }
}

/// The windows the dense encoder reads of `chunk` under `title` (the encoder title): none
/// when the chunk has at most `budget` tokens by `measure` (or `budget` is 0), else
/// `n = ⌈tokens / budget⌉` windows, window `i` being tokens `⌊i·tokens/n⌋ .. ⌊(i+1)·tokens/n⌋`
/// of the chunk with the title in front ([`encoder_input`]'s layout).
pub fn dense_windows(title: &str, chunk: &Chunk, budget: usize, measure: &dyn TokenMeasure) -> Vec<String> {
    if budget == 0 {
        return Vec::new();
    }
    windows_of(title, chunk, &measure.token_ranges(&chunk.text), budget)
}

/// [`dense_windows`] of a chunk whose dense tokens are `tokens` (their byte ranges in its
/// text), for a `budget` above 0.
fn windows_of(title: &str, chunk: &Chunk, tokens: &[Range<usize>], budget: usize) -> Vec<String> {
    let len = tokens.len();
    let n = len.div_ceil(budget);
    if n < 2 {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let (a, b) = (i * len / n, (i + 1) * len / n);
            let piece = &chunk.text[tokens[a].start..tokens[b - 1].end];
            if title.is_empty() {
                piece.to_string()
            } else {
                format!("{title}\n{piece}")
            }
        })
        .collect()
}

/// The dense window that the content key ([`ChunkKey`]) of a chunk of `tokens` dense tokens
/// names in a build whose dense window is `dense_window`:
///
/// ```text
/// key_window(W, n) = W                       when W > 0 and n > W (read in windows of W)
///                  = DEFAULT_DENSE_WINDOW    when n ≤ DEFAULT_DENSE_WINDOW (read whole)
///                  = 0                       otherwise (read whole)
/// ```
///
/// A chunk read whole is one vector of its input, whatever the build's window, so every
/// build that reads it whole keys it alike and reuses its record: a build with one vector
/// a chunk reuses the vectors of a windowed build's short chunks, and the other way round.
/// Its name is the default build's where that build reads it whole too, so the keys the
/// default build always had stay valid; a longer chunk read whole is named as a build with
/// one vector a chunk names it, since under the default window its name is its windows'.
pub fn key_window(dense_window: usize, tokens: usize) -> usize {
    if dense_window > 0 && tokens > dense_window {
        dense_window
    } else if tokens <= DEFAULT_DENSE_WINDOW {
        DEFAULT_DENSE_WINDOW
    } else {
        0
    }
}

/// The content key of `input` in a build with `options`, its dense window named `window`
/// ([`key_window`]).
pub(super) fn chunk_key(options: &BuildOptions, window: usize, input: &str) -> ChunkKey {
    let (d, s) = (&options.dense_model.weights_sha256, &options.sparse_model.weights_sha256);
    ChunkKey::new(d, s, options.chunk_tokens, WINDOW, window, input)
}

/// `n` chunks cut into contiguous shards of `step` (the last one shorter).
pub fn shard_ranges(n: usize, step: usize) -> Vec<Range<u32>> {
    (0..n.div_ceil(step)).map(|k| (k * step) as u32..((k + 1) * step).min(n) as u32).collect()
}

/// SHA-256 of one document as a build reads it (its bincode): what the fingerprint
/// ([`fingerprint`]) takes of it.
pub fn document_sha256(document: &Document) -> Result<[u8; 32]> {
    Ok(Sha256::digest(bincode::serialize(document)?).into())
}

/// The fingerprint of everything a build reads: [`fingerprint`] of each document's
/// [`document_sha256`], in order. Two builds with equal fingerprints make equal indexes.
pub fn inputs_sha256(
    documents: &[Document],
    options: &BuildOptions,
    attachments: &[(String, Vec<u8>)],
) -> Result<String> {
    let hashes = documents.par_iter().map(document_sha256).collect::<Result<Vec<_>>>()?;
    fingerprint(options, attachments, &hashes)
}

/// `SHA-256` over the format version, the options (as JSON), every attachment (name and
/// bytes), then the documents' hashes `documents` ([`document_sha256`], in order), each part
/// preceded by its length. It is computed from hashes so that a build planned in corpus
/// parts ([`plan_part`](super::plan_part)) gets the fingerprint one process computes from the
/// same documents.
pub fn fingerprint(
    options: &BuildOptions,
    attachments: &[(String, Vec<u8>)],
    documents: &[[u8; 32]],
) -> Result<String> {
    let mut h = Sha256::new();
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(&FORMAT_VERSION.to_le_bytes());
    part(&serde_json::to_vec(options)?);
    for (name, bytes) in attachments {
        part(name.as_bytes());
        part(bytes);
    }
    part(&(documents.len() as u64).to_le_bytes());
    for d in documents {
        part(d);
    }
    Ok(hex::encode(h.finalize()))
}

/// Plans a build of `documents` whose [`inputs_sha256`] is `fingerprint`: chunks
/// (lossless, within both tokenizers' windows), encoder inputs, content keys and shards.
/// Refuses duplicate document ids.
pub fn plan(
    documents: Vec<Document>,
    options: &BuildOptions,
    fingerprint: String,
    dense: &TextTokenizer,
    sparse: &TextTokenizer,
) -> Result<Plan> {
    if options.chunk_tokens == 0 {
        return Err(Error::invalid("chunk_tokens", "must be positive"));
    }
    if options.shard_chunks == 0 {
        return Err(Error::invalid("shard_chunks", "must be positive"));
    }
    let mut seen = std::collections::HashSet::new();
    for d in &documents {
        if !seen.insert(d.document_id.as_str()) {
            return Err(Error::invalid("documentId", format!("duplicate document id {:?}", d.document_id)));
        }
    }
    let measure = BothTokenizers::new(dense, sparse);
    let room = WINDOW - SPECIAL_TOKENS;
    #[allow(clippy::type_complexity)]
    let per_doc: Vec<(Vec<Chunk>, Vec<String>, Vec<Vec<String>>, Vec<usize>, u64)> = documents
        .par_iter()
        .enumerate()
        .map(|(i, doc)| {
            let title = encoder_title(&doc.title, &measure);
            let title_tokens = if title.is_empty() { 0 } else { measure.count(&title) };
            let budget = options.chunk_tokens.min(room.saturating_sub(title_tokens)).max(1);
            let chunks: Vec<Chunk> = chunk_document_with_overlap(doc, budget, options.chunk_overlap, &measure)
                .into_iter()
                .map(|s| Chunk::new(i as u32, doc, s))
                .collect();
            let inputs: Vec<String> = chunks.iter().map(|c| encoder_input(&title, c)).collect();
            let (windows, key_windows) = chunks
                .iter()
                .map(|c| {
                    let tokens = dense.token_ranges(&c.text);
                    let windows = match options.dense_window {
                        0 => Vec::new(),
                        budget => windows_of(&title, c, &tokens, budget),
                    };
                    (windows, key_window(options.dense_window, tokens.len()))
                })
                .unzip();
            let beyond = inputs.iter().map(|s| (measure.count(s) + SPECIAL_TOKENS).saturating_sub(WINDOW) as u64).sum();
            (chunks, inputs, windows, key_windows, beyond)
        })
        .collect();
    let (mut chunks, mut inputs, mut windows, mut key_windows) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut tokens_beyond_window = 0;
    for (c, s, w, k, b) in per_doc {
        chunks.extend(c);
        inputs.extend(s);
        windows.extend(w);
        key_windows.extend(k);
        tokens_beyond_window += b;
    }
    let keys = inputs.par_iter().zip(&key_windows).map(|(input, &window)| chunk_key(options, window, input)).collect();
    let shards = shard_ranges(chunks.len(), options.shard_chunks);
    Ok(Plan {
        inputs_sha256: fingerprint,
        options: options.clone(),
        documents,
        chunks,
        inputs,
        windows,
        keys,
        shards,
        tokens_beyond_window,
        sparse_vocab: sparse.vocab_size(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::ChunkSpan;
    use crate::testutil::Words;

    fn chunk(words: usize) -> Chunk {
        let text = (0..words).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        Chunk { doc: 0, span: ChunkSpan { seg_start: 0, seg_end: 1, char_start: 0, char_end: 0 }, text }
    }

    #[test]
    fn a_chunk_longer_than_the_dense_window_is_read_in_equal_windows_under_its_title() {
        // 10 tokens, budget 4: ⌈10/4⌉ = 3 windows of tokens 0..3, 3..6, 6..10.
        let windows = dense_windows("Acme 10-K", &chunk(10), 4, &Words);
        assert_eq!(windows, ["Acme 10-K\nw0 w1 w2", "Acme 10-K\nw3 w4 w5", "Acme 10-K\nw6 w7 w8 w9"]);
        assert_eq!(dense_windows("", &chunk(5), 4, &Words), ["w0 w1", "w2 w3 w4"]);
        // At most the budget, or no budget: the chunk is read whole.
        assert!(dense_windows("t", &chunk(4), 4, &Words).is_empty());
        assert!(dense_windows("t", &chunk(400), 0, &Words).is_empty());
    }
}
