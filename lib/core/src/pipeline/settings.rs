//! Fusion settings: how the paths' lists are fused ([`FusionConfig`]), and the defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::adaptive::word_count;
use super::fusion::DEFAULT_RRF_K;
use super::instructions::lexical_query;
use super::paths::Path;

/// How the paths' lists are fused (see [`FusionConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionMethod {
    /// The z-scores of each path's own scores ([`zscore_fuse_grouped`](super::zscore_fuse_grouped)).
    Scores,
    /// Reciprocal Rank Fusion of each path's ranks ([`rrf_fuse_grouped`](super::rrf_fuse_grouped), [`rrf_fuse`](super::rrf_fuse)). A
    /// configuration written before score fusion existed names no method, and means this.
    #[default]
    Ranks,
}

/// How the paths' lists are fused. Each path's list is read as a list of units: documents
/// (`by_document`, each at its best chunk) or chunks. Per query, each path gets a weight
/// from its agreement with the other paths and its confidence (see
/// [`adaptive_weights`](super::adaptive_weights)), then the units are fused by the
/// z-scores of the paths' own scores (the default) or by their ranks:
///
/// ```text
/// w_i      = base_i · exp(α · (c_i − mean c) + β · (a_i − mean a))
/// scores:  score(c) = Σ_i w_i · z_i(u(c)),   z_i(u) = (s_i(u) − μ_i) / σ_i
///          (u missing from path i: the lowest z_i of its list)
/// ranks:   score(c) = Σ_i w_i / (k + urank_i(u(c)))  +  λ · Σ_i w_i / (k + rank_i(c))
/// method(q) = ranks when len(q) > L (`long_query_words`, 0: never), else `method`
/// ```
///
/// `a_i` is the share of path `i`'s top units that another path also has among its top
/// units, `c_i` how far its top score stands above its next ones, `s_i(u)` the path's score of unit `u` (cosine, BM25, SPLADE dot product), `μ_i` and
/// `σ_i` their mean and standard deviation over the path's list, and `urank_i` a unit's
/// 1-based rank in path `i`, `len(q)` the number of the query's words without the role
/// set in front of its question ([`word_count`] of [`lexical_query`]: what BM25 and SPLADE
/// read). A chunk scores as its document; the chunks of one document keep the order of their
/// own ranks.
///
/// With dense feedback (`feedback` = `c` > 0), the dense path's query then moves towards
/// the vectors of the fused top `m` documents' best chunks, by `γ(q) = min(1, c · ids(q))`
/// (`ids(q)` the share of the query's words that are identifiers: tickers, dates, codes;
/// [`identifier_share`](super::identifier_share));
/// every chunk a path found is scored by its cosine with the moved query, and the lists are
/// fused again with that list in place of the dense one ([`feedback_query`](super::feedback_query)).
/// A long question (`dense_beside_feedback`) keeps the dense path's own list in that second
/// fusion too, the two sharing the dense weight by how far the query moved:
///
/// ```text
/// long q:  w(dense's own list) = (1 − γ(q)) · w_dense,   w(feedback list) = γ(q) · w_dense
/// ```
///
/// (`w_dense` computed over the four lists, the two dense ones counting as two for
/// agreement.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusionConfig {
    /// Scores (z-scores of each path's scores) or ranks (RRF).
    #[serde(default)]
    pub method: FusionMethod,
    /// RRF's `k` (ranks only).
    pub k: f32,
    /// Base weight of each path (absent: 1).
    pub weights: BTreeMap<Path, f32>,
    /// How strongly weights follow per-query path confidence, `α` (0: ignored).
    pub alpha: f32,
    /// How many top scores of a path its confidence looks at.
    pub confidence_depth: usize,
    /// How strongly weights follow a path's agreement with the others, `β` (0: ignored).
    pub agreement: f32,
    /// How many top units of each path agreement compares.
    pub agreement_depth: usize,
    /// Fuse documents (true) or chunks alone (false).
    pub by_document: bool,
    /// Ranks by document only: the weight `λ` of a chunk's own ranks beside its document's.
    pub chunk_share: f32,
    /// Strength `c` of dense feedback, whose weight is `γ(q) = min(1, c · ids(q))` (0: no
    /// feedback). Only when another path ran beside the dense one: dense alone has no other
    /// path's finds to read. The dense list fused, and the dense rank and score of each hit,
    /// are then the feedback's: cosines with the moved query.
    /// Absent from a configuration written before it: 0.
    #[serde(default)]
    pub feedback: f32,
    /// How many of the first fusion's top documents dense feedback reads, `m`. Absent from a
    /// configuration written before it: [`DEFAULT_FEEDBACK_DOCUMENTS`].
    #[serde(default = "default_feedback_documents")]
    pub feedback_documents: usize,
    /// A query of more words than this, `L`, is fused by ranks (RRF with `k`) whatever
    /// `method` says (0: never); its role sentence or clause ("You are an equity
    /// analyst.", [`lexical_query`]) is not counted. Absent from a configuration written
    /// before it: 0.
    #[serde(default)]
    pub long_query_words: usize,
    /// With dense feedback, whether a long query's second fusion keeps the dense path's own
    /// list beside the feedback list, weighted `1 − γ(q)` and `γ(q)` (true), instead of the
    /// feedback list alone (false). Absent from a configuration written before it: false.
    #[serde(default)]
    pub dense_beside_feedback: bool,
    /// The recall tail: below the fused top `head` units, units are ordered by an RRF of the
    /// lists in which the dense path counts as much as the lexical paths together
    /// ([`RecallTail`]). `None`: the fused order all the way down. Absent from a
    /// configuration written before it: none.
    #[serde(default)]
    pub recall_tail: Option<RecallTail>,
}

/// How the fused list is ordered below its top ([`recall_tail`](super::recall_tail)):
///
/// ```text
/// tail(u) = Σ_i t_i / (k + urank_i(u)),   t_i = dense_weight · share_i  (i dense),  share_i  (else)
/// ```
///
/// for the units (documents or chunks, as the fusion reads them) below the first `head` of
/// the fused order, `share_i` the list's share of its path's weight (1, or `γ` and `1 − γ`
/// for a long question's two dense lists). The top is what a reader sees and what the
/// fusion's per-query weights decide; the tail is what a reranker or a reader going further
/// gets, and it must not lose what a single path would have found: a z-score gives a unit
/// that one path alone found its list's lowest z in every other list, so a passage that
/// dense ranks 40th and no lexical path has falls below units that both lexical paths rank
/// 90th. With `dense_weight` = 2 the dense list counts as the two lexical lists together:
/// one vote for meaning, one for words. Chosen by the worst dev set's Recall@100 against the
/// best single path's, with leave-one-set-out (docs/quality.md, "Where the constants came
/// from").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecallTail {
    /// Units of the fused order kept as they are, `H`.
    pub head: usize,
    /// The dense lists' tail weight, `t_dense`; each lexical list's is 1.
    pub dense_weight: f32,
    /// The tail's RRF `k`.
    pub k: f32,
}

/// The default recall tail: the fused top 20 kept, the rest by an RRF with `k` = 100 and
/// the dense list weighted 2 ([`RecallTail`]).
pub const DEFAULT_RECALL_TAIL: RecallTail = RecallTail { head: 20, dense_weight: 2.0, k: 100.0 };

/// Default strength of dense feedback, `c`: a question whose words are a tenth identifiers
/// or more moves the dense query by the full mean of the fused top's vectors: "EXTN
/// bookings earnings call May 3, 2018" (3 in 7), "Based on MRCY's earnings call of January
/// 26, 2016, …" (3 in 20), the analyst style of question ("… capital expenditure in FY2019,
/// in USD millions?", 2 in 20); "… total revenue in 2023 …" (1 in 15) by 0.67; a question
/// without identifiers not at all. Chosen with dense windows
/// ([`DEFAULT_DENSE_WINDOW`](crate::build::DEFAULT_DENSE_WINDOW)) among
/// `c ∈ {4, 6, 8, 10, 16}` on the earlier dev sets; on the sets re-split by company it wins
/// on held-out phrasings (docs/quality.md).
pub const DEFAULT_FEEDBACK: f32 = 10.0;

/// Default number of the first fusion's top documents dense feedback reads, `m`.
pub const DEFAULT_FEEDBACK_DOCUMENTS: usize = 2;

fn default_feedback_documents() -> usize {
    DEFAULT_FEEDBACK_DOCUMENTS
}

/// Default strength of the agreement term, `β`. The default fusion (z-scores by document,
/// equal base weights, `α` = 0, `β` = 2 over the top 10 documents) was chosen for its worst
/// dev set with `scripts/studies/study_fusion.py` (docs/quality.md, "Where the constants
/// came from"), and kept on the sets split by company: without it the default loses on
/// every held-out phrasing (docs/quality.md).
pub const DEFAULT_AGREEMENT: f32 = 2.0;

/// Default length, in words, above which a query is fused by ranks instead of scores, `L`:
/// a long question's lexical lists can put a passage far above the rest for words that
/// are not its subject (definitions, answer instructions), and a path's rank caps what one
/// list can give a passage. "What is the FY2024 fixed asset turnover ratio for Home Depot,
/// Inc.? Fixed asset turnover ratio is defined as: total revenue divided by property,
/// plant and equipment, net. Round your answer to two decimal places." (35 words) is
/// fused by ranks with `k` = 60; "You are an equity analyst. Using the cash flow statement,
/// what was Acme's capital expenditure in FY2019, in USD millions?" (15 words after its role
/// sentence) by scores.
/// Chosen by the worst dev set with leave-one-set-out over the five dev sets, fin-ratios
/// among them (`scripts/studies/study_length.py`; docs/quality.md, "Where the constants
/// came from"), and kept when the role stopped being counted (19 and 26 measured beside it).
pub const DEFAULT_LONG_QUERY_WORDS: usize = 22;

/// Candidates each path gives the fusion by default. Below HNSW's beam
/// ([`EF_SEARCH`](crate::index::EF_SEARCH) = 256), so the dense path stays on the graph.
/// The z-scores of the default fusion need a path's list to be long enough for its mean and
/// spread: at 50 chunks (about 23 documents on the fin-filings dev set) the default falls
/// 0.040 behind the rank fusion there; at 200 it is ahead on every dev set, and a search
/// takes 1.02 to 1.06 times as long (docs/quality.md, "Where the constants came from").
pub const DEFAULT_PER_PATH_K: usize = 200;

impl Default for FusionConfig {
    /// z-scores of documents at their best chunk (ranks with `k` = 60 for a query of more
    /// than 22 words besides its role), equal base weights, `α` = 0, `β` = 2 over the top 10
    /// documents, dense feedback with `c` = 10 from the top 2 documents (a long
    /// query keeping the dense path's own list beside it), and below the top 20 documents
    /// the recall tail ([`DEFAULT_RECALL_TAIL`]).
    fn default() -> Self {
        FusionConfig {
            method: FusionMethod::Scores,
            k: DEFAULT_RRF_K,
            weights: BTreeMap::new(),
            alpha: 0.0,
            confidence_depth: 10,
            agreement: DEFAULT_AGREEMENT,
            agreement_depth: 10,
            by_document: true,
            chunk_share: 0.0,
            feedback: DEFAULT_FEEDBACK,
            feedback_documents: DEFAULT_FEEDBACK_DOCUMENTS,
            long_query_words: DEFAULT_LONG_QUERY_WORDS,
            dense_beside_feedback: true,
            recall_tail: Some(DEFAULT_RECALL_TAIL),
        }
    }
}

impl FusionConfig {
    /// Plain RRF of chunks with equal weights and `k` = 60.
    pub fn plain() -> Self {
        FusionConfig {
            method: FusionMethod::Ranks,
            k: DEFAULT_RRF_K,
            weights: BTreeMap::new(),
            alpha: 0.0,
            confidence_depth: 10,
            agreement: 0.0,
            agreement_depth: 10,
            by_document: false,
            chunk_share: 1.0,
            feedback: 0.0,
            feedback_documents: DEFAULT_FEEDBACK_DOCUMENTS,
            long_query_words: 0,
            dense_beside_feedback: false,
            recall_tail: None,
        }
    }

    /// Whether `query` is long: more than `long_query_words` words besides the role set in
    /// front of its question ([`lexical_query`]; never when `long_query_words` is 0). "As a
    /// buy-side analyst preparing a note, summarise what INCY management said about revenue
    /// on the August 4, 2015 call, with the figure." is 23 words, 16 without its role
    /// clause: not long.
    pub fn is_long(&self, query: &str) -> bool {
        self.long_query_words > 0 && word_count(&lexical_query(query)) > self.long_query_words
    }

    /// The method that fuses `query`: ranks for a long query ([`is_long`](Self::is_long)),
    /// else `method`.
    pub fn method_for(&self, query: &str) -> FusionMethod {
        if self.is_long(query) {
            FusionMethod::Ranks
        } else {
            self.method
        }
    }

    /// The weight of a path.
    pub fn weight(&self, p: Path) -> f32 {
        self.weights.get(&p).copied().unwrap_or(1.0)
    }

    /// The relevance in [0, 1] of a fused score `raw` of `query`, fused from paths whose
    /// base weights add up to `total_weight`: what the API returns as a hit's `score`. It
    /// keeps the fused order (it grows with `raw`) and reads nothing but `raw` and the
    /// query's fusion method, so a router computes it as one engine does.
    ///
    /// ```text
    /// relevance = σ(a · x + b),   σ(x) = 1 / (1 + e^(−x))
    /// scores:  x = raw / W                          (the weighted mean z-score)
    /// ranks:   x = raw / (W / (k + 1) · (1 + λ · [by_document]))   (1: first in every list)
    /// ```
    ///
    /// `a` and `b` are a logistic fit, on the dev sets, of whether a document is relevant
    /// given `x`, one pair per method ([`RELEVANCE_SCORES`], [`RELEVANCE_RANKS`];
    /// `scripts/studies/choose_fusion.py`): a relevance reads as the share of documents at
    /// that score that were relevant there, the scale of a cross-encoder's `σ(logit)`.
    pub fn relevance(&self, raw: f32, total_weight: f32, query: &str) -> f32 {
        if !raw.is_finite() || total_weight <= 0.0 {
            return 0.0;
        }
        let ((a, b), x) = match self.method_for(query) {
            FusionMethod::Scores => (RELEVANCE_SCORES, raw / total_weight),
            FusionMethod::Ranks => {
                let lambda = if self.by_document { self.chunk_share } else { 0.0 };
                (RELEVANCE_RANKS, raw / (total_weight / (self.k + 1.0) * (1.0 + lambda)))
            }
        };
        (1.0 / (1.0 + (-(a * x + b)).exp())).clamp(0.0, 1.0)
    }
}

/// `(a, b)` of [`FusionConfig::relevance`] for z-scores, fitted on the five dev sets
/// (2026-11-27, every set weighing the same): a document at mean z 2 is relevant 6 % of the
/// time there, at 3 19 %, at 4 44 %.
pub const RELEVANCE_SCORES: (f32, f32) = (1.2145, -5.1195);

/// `(a, b)` of [`FusionConfig::relevance`] for ranks (RRF with `k` = 60), fitted as
/// [`RELEVANCE_SCORES`]: a document first in every list is relevant 30 % of the time there.
pub const RELEVANCE_RANKS: (f32, f32) = (8.9655, -9.7987);
