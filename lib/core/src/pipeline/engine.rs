//! The engine: one index, the query encoders and an optional reranker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::adaptive::{adaptive_weights, agreement, confidence, identifier_damping, identifier_share, word_count};
use super::cancel::CancelFlag;
use super::feedback::{feedback_query, feedback_weight};
use super::fusion::{
    groups_in_order, recall_tail, rrf_fuse, rrf_fuse_grouped, zscore_fuse_grouped, Fused, DEFAULT_RRF_K,
};
use super::instructions::lexical_query;
use super::paths::{Bm25Path, DensePath, Path, PathHit, PathRetriever, PreparedQuery, SpladePath};
use super::rerank::{Candidate, CrossEncoderReranker, Reranker};
use crate::corpus::Date;
use crate::encode::{encoders_take_turns, join_encoders, DenseEncoder, SparseEncoder};
use crate::error::{Error, Result, Stage};
use crate::index::{Bitset, Filter, Index};

/// How the paths' lists are fused (see [`FusionConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionMethod {
    /// The z-scores of each path's own scores ([`zscore_fuse_grouped`]).
    Scores,
    /// Reciprocal Rank Fusion of each path's ranks ([`rrf_fuse_grouped`], [`rrf_fuse`]). A
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
/// w_i      = base_i · exp(α · (c_i − mean c) + β · (a_i − mean a)) · exp(−δ · ids(q))^[i = dense]
/// scores:  score(c) = Σ_i w_i · z_i(u(c)),   z_i(u) = (s_i(u) − μ_i) / σ_i
///          (u missing from path i: the lowest z_i of its list)
/// ranks:   score(c) = Σ_i w_i / (k + urank_i(u(c)))  +  λ · Σ_i w_i / (k + rank_i(c))
/// method(q) = ranks when len(q) > L (`long_query_words`, 0: never), else `method`
/// ```
///
/// `a_i` is the share of path `i`'s top units that another path also has among its top
/// units, `c_i` how far its top score stands above its next ones, `ids(q)` the share of the
/// query's words that are identifiers (tickers, dates, codes; [`identifier_share`]),
/// `s_i(u)` the path's score of unit `u` (cosine, BM25, SPLADE dot product), `μ_i` and
/// `σ_i` their mean and standard deviation over the path's list, and `urank_i` a unit's
/// 1-based rank in path `i`, `len(q)` the number of the query's words without the role
/// set in front of its question ([`word_count`] of [`lexical_query`]: what BM25 and SPLADE
/// read). A chunk scores as its document; the chunks of one document keep the order of their
/// own ranks.
///
/// With dense feedback (`feedback` = `c` > 0), the dense path's query then moves towards
/// the vectors of the fused top `m` documents' best chunks, by `γ(q) = min(1, c · ids(q))`;
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
    /// How strongly the dense path's weight falls with the share of identifiers among the
    /// query's words, `δ` (0: ignored). Absent from a configuration written before it: 0.
    #[serde(default)]
    pub identifiers: f32,
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
/// best single path's, with leave-one-set-out (README, "How the default fusion was chosen").
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
/// without identifiers not at all. Chosen again with dense windows
/// ([`DEFAULT_DENSE_WINDOW`](crate::build::DEFAULT_DENSE_WINDOW)), with `δ` = 0
/// ([`FusionConfig::identifiers`]): among `c ∈ {4, 6, 8, 10, 16}` the smallest above plain RRF of
/// every pair and of all three on every dev set, and the better worst set of the two that
/// are (README, "The fusion chosen again"). The release before had `c` = 6.
pub const DEFAULT_FEEDBACK: f32 = 10.0;

/// Default number of the first fusion's top documents dense feedback reads, `m`.
pub const DEFAULT_FEEDBACK_DOCUMENTS: usize = 2;

fn default_feedback_documents() -> usize {
    DEFAULT_FEEDBACK_DOCUMENTS
}

/// Default strength of the agreement term, `β`. The default fusion (z-scores by document,
/// equal base weights, `α` = 0, `β` = 2 over the top 10 documents, `δ` = 2, then 0 with
/// dense windows) was chosen for its worst dev set (SciFact train, TAT-QA dev and the two financial sets of
/// `scripts/build_devsets.py`) with `scripts/study_fusion.py`; README, "How the default
/// fusion was chosen".
pub const DEFAULT_AGREEMENT: f32 = 2.0;

/// Default strength of the identifier term, `δ`: 0, the dense path's weight does not fall
/// with the share of identifiers in the question. With dense windows each window carries
/// the chunk's title (company, form, period) in front of a few sentences, so the dense path
/// reads "MRCY" and "2016" through the title, and dense feedback moves the query to the
/// fused top's company: on the dev sets `δ` = 2 (the release before, when one vector read a
/// whole chunk) lost on fin-filings (0.5750 against 0.5850 with `c` = 10), fin-ratios and
/// SciFact (README, "The fusion chosen again"). "You are an equity analyst. Based on MRCY's
/// earnings call of January 26, 2016, what was the company's adjusted EBITDA?" has 3
/// identifiers in 20 words: with `δ` = 2 the dense path would keep `exp(−2 · 0.15)` ≈ 0.74
/// of its weight before the weights are normalised.
pub const DEFAULT_IDENTIFIERS: f32 = 0.0;

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
/// among them (`scripts/study_length.py`; README, "How the default fusion was chosen"), and
/// kept when the role stopped being counted (19 and 26 measured beside it).
pub const DEFAULT_LONG_QUERY_WORDS: usize = 22;

/// Candidates each path gives the fusion by default. Below HNSW's beam
/// ([`EF_SEARCH`](crate::index::EF_SEARCH) = 256), so the dense path stays on the graph.
/// The z-scores of the default fusion need a path's list to be long enough for its mean and
/// spread: at 50 chunks (about 23 documents on the fin-filings dev set) the default falls
/// 0.040 behind the rank fusion there; at 200 it is ahead on every dev set, and a search
/// takes 1.02 to 1.06 times as long (README, "How the default fusion was chosen").
pub const DEFAULT_PER_PATH_K: usize = 200;

impl Default for FusionConfig {
    /// z-scores of documents at their best chunk (ranks with `k` = 60 for a query of more
    /// than 22 words besides its role), equal base weights, `α` = 0, `β` = 2 over the top 10
    /// documents, `δ` = 0, dense feedback with `c` = 10 from the top 2 documents (a long
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
            identifiers: DEFAULT_IDENTIFIERS,
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
            identifiers: 0.0,
            by_document: false,
            chunk_share: 1.0,
            feedback: 0.0,
            feedback_documents: DEFAULT_FEEDBACK_DOCUMENTS,
            long_query_words: 0,
            dense_beside_feedback: false,
            recall_tail: None,
        }
    }

    /// The default of the first releases, kept for comparisons (`sextant eval --fusion
    /// previous`): chunks' ranks, `k` = 5, BM25 weighted 1.5, `α` = 0.2, no agreement. It was
    /// chosen on SciFact train and TAT-QA dev, where BM25 is the strongest path, and did
    /// not transfer to financial questions.
    pub fn previous_default() -> Self {
        FusionConfig { k: 5.0, weights: BTreeMap::from([(Path::Bm25, 1.5)]), alpha: 0.2, ..Self::plain() }
    }

    /// The default of the release before score fusion, kept for comparisons (`sextant eval
    /// --fusion ranks`): [`agreement_default`](Self::agreement_default)'s documents and
    /// weights, fused by rank with `k` = 10.
    pub fn rank_default() -> Self {
        FusionConfig { method: FusionMethod::Ranks, k: 10.0, ..Self::agreement_default() }
    }

    /// The default of the release before the identifier term, kept for comparisons
    /// (`sextant eval --fusion agreement`): z-scores of documents with agreement weights
    /// alone, `β` = 3.
    pub fn agreement_default() -> Self {
        FusionConfig { agreement: 3.0, identifiers: 0.0, ..Self::identifier_default() }
    }

    /// The default of the release before dense feedback, kept for comparisons (`sextant
    /// eval --fusion identifiers`): [`feedback_default`](Self::feedback_default) without
    /// feedback.
    pub fn identifier_default() -> Self {
        FusionConfig { feedback: 0.0, ..Self::feedback_default() }
    }

    /// The default of the release before long queries were fused by ranks, kept for
    /// comparisons (`sextant eval --fusion feedback`): the default, every query fused by
    /// scores.
    pub fn feedback_default() -> Self {
        FusionConfig { long_query_words: 0, dense_beside_feedback: false, ..Self::length_default() }
    }

    /// The default of the release before the recall tail, kept for comparisons (`sextant
    /// eval --fusion length`): fused order all the way down, `δ` = 2 and `c` = 6 (chosen for
    /// one dense vector per chunk; the index's dense window is the build's, not the fusion's).
    pub fn length_default() -> Self {
        FusionConfig { recall_tail: None, identifiers: 2.0, feedback: 6.0, ..Self::default() }
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
}

/// Boost of recent documents: `score · (1 + weight · 0.5^(age_days / half_life_days))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recency {
    /// Age at which the boost halves.
    pub half_life_days: f32,
    /// Boost of a document published "now".
    pub weight: f32,
    /// "Now"; default: the newest publication date in the index.
    pub now: Option<Date>,
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query text (non-empty).
    pub query: String,
    /// Metadata conditions applied before ranking.
    pub filter: Filter,
    /// Hits to return.
    pub top_k: usize,
    /// Candidates each path contributes to fusion.
    pub per_path_k: usize,
    /// Candidates of particular paths, instead of `per_path_k` (the knowledge-base API's
    /// `DenseSimilarityTopK` and `SparseSimilarityTopK`).
    pub path_k: BTreeMap<Path, usize>,
    /// Paths to run.
    pub paths: Vec<Path>,
    /// Fusion settings.
    pub fusion: FusionConfig,
    /// Rerank the fused top `rerank_depth` when a reranker is configured.
    pub rerank: bool,
    /// How many fused candidates the reranker sees.
    pub rerank_depth: usize,
    /// Recency boost, if any.
    pub recency: Option<Recency>,
    /// At most this many chunks of one document in the results.
    pub max_per_document: Option<usize>,
    /// Dense candidates under this cosine similarity are dropped before fusion.
    pub min_dense_similarity: Option<f32>,
    /// Only documents whose ordinal is in this set (on top of `filter`): for conditions the
    /// [`Filter`] struct cannot express, evaluated once per document by the caller.
    pub documents: Option<Arc<Bitset>>,
    /// Set when the caller has gone away: the search stops at its next stage boundary
    /// with [`Error::Cancelled`].
    pub cancel: Option<CancelFlag>,
    /// Whether the lexical paths (BM25, SPLADE) read the query without the instructions
    /// around its question ([`lexical_query`](super::lexical_query)); the dense path always
    /// reads it whole. Default: true.
    pub strip_instructions: bool,
    /// The query already encoded ([`Engine::prepare`]) for several searches of one request:
    /// the search encodes nothing, and `query` only names it. Its `text` is what BM25 reads.
    pub prepared: Option<Arc<PreparedQuery>>,
}

/// The two texts of a query: whole for the dense encoder, without instructions for the
/// lexical paths.
#[derive(Clone, Copy)]
struct QueryTexts<'a> {
    full: &'a str,
    lexical: &'a str,
}

impl SearchRequest {
    /// A hybrid search over every path with the default settings.
    pub fn new(query: impl Into<String>, top_k: usize) -> Self {
        SearchRequest {
            query: query.into(),
            filter: Filter::default(),
            top_k,
            per_path_k: DEFAULT_PER_PATH_K,
            path_k: BTreeMap::new(),
            paths: Path::ALL.to_vec(),
            fusion: FusionConfig::default(),
            rerank: true,
            rerank_depth: 50,
            recency: None,
            max_per_document: None,
            min_dense_similarity: None,
            documents: None,
            cancel: None,
            strip_instructions: true,
            prepared: None,
        }
    }
}

/// A hit's rank and score in one path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathRank {
    /// 1-based rank in the path's list.
    pub rank: usize,
    /// The path's own score (cosine, BM25, SPLADE dot product).
    pub score: f32,
}

/// Why a hit is where it is.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Rank and score in each path that found it.
    pub paths: BTreeMap<Path, PathRank>,
    /// 1-based rank after fusion.
    pub rrf_rank: usize,
    /// Fused score.
    pub rrf_score: f32,
    /// 1-based rank after reranking, when reranked.
    pub rerank_rank: Option<usize>,
    /// Reranker score, when reranked.
    pub rerank_score: Option<f32>,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Chunk ordinal in the index.
    pub chunk: u32,
    /// Final score (rerank score when reranked, else fused score), after recency.
    pub score: f32,
    /// Per-stage ranks and scores.
    pub diagnostics: Diagnostics,
}

/// What happened to reranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum RerankStatus {
    /// The request did not ask for it.
    NotRequested,
    /// No reranker is configured: fused order.
    Unavailable,
    /// Applied.
    Applied,
    /// The reranker failed: fused order.
    Failed(String),
}

impl RerankStatus {
    /// The status as the API writes it (`meta.rerank.status`, the serde tag above).
    pub fn name(&self) -> &'static str {
        match self {
            RerankStatus::NotRequested => "not_requested",
            RerankStatus::Unavailable => "unavailable",
            RerankStatus::Applied => "applied",
            RerankStatus::Failed(_) => "failed",
        }
    }
}

/// Time spent in each stage, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    /// Query encoding (dense and SPLADE run in parallel: the slower of the two).
    pub encode_ms: f64,
    /// Each path's retrieval.
    pub paths_ms: BTreeMap<Path, f64>,
    /// Fusion (with dense feedback's rescoring and second fusion, when it ran).
    pub fuse_ms: f64,
    /// Reranking.
    pub rerank_ms: f64,
    /// Whole search.
    pub total_ms: f64,
}

/// A query encoded for some paths: what ran, whether the text was cut (known when the
/// dense encoder ran), and the last encoder error.
struct Encoding {
    query: PreparedQuery,
    truncated: Option<bool>,
    error: Option<String>,
}

/// What one branch of a search produced: its paths' results and how long encoding took.
#[derive(Default)]
struct Branch {
    encode_ms: f64,
    truncated: Option<bool>,
    /// The query's dense vector, when the branch encoded it (or was given it).
    dense_query: Option<Vec<f32>>,
    results: Vec<(Path, Result<Vec<PathHit>>, f64)>,
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Hits, best first.
    pub hits: Vec<Hit>,
    /// Paths that failed and why (skipped in fusion).
    pub failed_paths: Vec<(Path, String)>,
    /// Reranking status.
    pub rerank: RerankStatus,
    /// Chunks that passed the filter.
    pub candidates: usize,
    /// Whether the query was cut to the model window.
    pub query_truncated: bool,
    /// Paths that served (in the request's order).
    pub paths_served: Vec<Path>,
    /// Paths the request asked for that are not ready yet (their index is building): the
    /// results are degraded until they are in.
    pub paths_pending: Vec<Path>,
    /// Stage timings.
    pub timings: StageTimings,
}

/// One index with everything needed to search it.
pub struct Engine {
    index: Arc<Index>,
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
    reranker: Option<Arc<dyn Reranker>>,
    retrievers: Vec<Box<dyn PathRetriever>>,
    newest_day: Option<i64>,
    ready: Vec<Path>,
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl Engine {
    /// Assembles an engine.
    pub fn new(
        index: Arc<Index>,
        dense: Arc<DenseEncoder>,
        sparse: Arc<SparseEncoder>,
        reranker: Option<Arc<dyn Reranker>>,
    ) -> Self {
        let retrievers: Vec<Box<dyn PathRetriever>> = vec![
            Box::new(DensePath(index.clone())),
            Box::new(Bm25Path(index.clone())),
            Box::new(SpladePath(index.clone())),
        ];
        let newest_day = index.documents.iter().filter_map(|d| d.published_at.map(Date::days_since_epoch)).max();
        Engine { index, dense, sparse, reranker, retrievers, newest_day, ready: Path::ALL.to_vec() }
    }

    /// Serves only `paths` (the others are still building: a search leaves them out and
    /// reports them in [`SearchOutcome::paths_pending`]).
    pub fn with_ready_paths(mut self, paths: &[Path]) -> Self {
        self.ready = Path::ALL.iter().copied().filter(|p| paths.contains(p)).collect();
        self
    }

    /// The paths this engine serves.
    pub fn ready_paths(&self) -> &[Path] {
        &self.ready
    }

    /// Whether some path is not ready yet.
    pub fn degraded(&self) -> bool {
        self.ready.len() < Path::ALL.len()
    }

    /// The same models over another index (a newly published version of the same
    /// corpus): refused unless that index was built with the same dense and SPLADE weights.
    pub fn with_index(&self, index: Arc<Index>) -> Result<Engine> {
        let (old, new) = (&self.index.manifest, &index.manifest);
        for (what, a, b) in
            [("dense", &old.dense_model, &new.dense_model), ("sparse", &old.sparse_model, &new.sparse_model)]
        {
            if a.weights_sha256 != b.weights_sha256 {
                return Err(Error::IndexCorrupted {
                    file: format!("{}/manifest.json", new.index_id),
                    expected: format!("{what} model {} ({}), the one loaded", a.id, a.weights_sha256),
                    found: format!("{} ({})", b.id, b.weights_sha256),
                });
            }
        }
        Ok(Engine::new(index, self.dense.clone(), self.sparse.clone(), self.reranker.clone()))
    }

    /// Replaces the retriever of one path (tests use this to make a path fail).
    pub fn with_retriever(mut self, r: Box<dyn PathRetriever>) -> Self {
        self.retrievers.retain(|x| x.path() != r.path());
        self.retrievers.push(r);
        self
    }

    /// Sets or removes the reranker: any [`Reranker`] of the library (the cross-encoder,
    /// a hosted service through a callback, a pipeline of them).
    pub fn with_reranker(mut self, r: Option<Arc<dyn Reranker>>) -> Self {
        self.reranker = r;
        self
    }

    /// The index searched.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The dense encoder.
    pub fn dense_encoder(&self) -> &Arc<DenseEncoder> {
        &self.dense
    }

    /// The SPLADE encoder.
    pub fn sparse_encoder(&self) -> &Arc<SparseEncoder> {
        &self.sparse
    }

    /// Whether a reranker is configured.
    pub fn has_reranker(&self) -> bool {
        self.reranker.is_some()
    }

    /// Encodes a query for the paths that need it, and tells whether it was cut to the
    /// model window. On tract dense and SPLADE run in parallel (each runs on one thread);
    /// on ONNX Runtime one after the other, each on the whole thread pool (measured on 2
    /// cores: 4.7 ms in sequence against 5.0 ms side by side).
    pub fn prepare(&self, text: &str, paths: &[Path]) -> Result<(PreparedQuery, bool)> {
        let dense_paths: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Dense).collect();
        let sparse_paths: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Splade).collect();
        let lexical = lexical_query(text);
        let text = QueryTexts { full: text, lexical: &lexical };
        let (d, s) = join_encoders(
            (self.dense.backend(), self.sparse.backend()),
            || self.encode(text, &dense_paths),
            || self.encode(text, &sparse_paths),
        );
        // An encoder failure is a failure of its path only, reported by the retriever.
        let query = PreparedQuery { text: text.lexical.to_string(), dense: d.query.dense, sparse: s.query.sparse };
        Ok((query, self.query_truncated(text.full, d.truncated)))
    }

    /// Whether `text` is cut to the model window: known from the dense encoding when it
    /// ran, else learnt by tokenizing once more.
    fn query_truncated(&self, text: &str, from_dense: Option<bool>) -> bool {
        from_dense.unwrap_or_else(|| self.dense.tokenizer().encode(text).map(|e| e.truncated).unwrap_or(false))
    }

    /// Runs the encoders `paths` need on `text` (one after the other), keeping the last
    /// encoder error instead of failing.
    fn encode(&self, text: QueryTexts<'_>, paths: &[Path]) -> Encoding {
        let mut out = Encoding {
            query: PreparedQuery { text: text.lexical.to_string(), dense: None, sparse: None },
            truncated: None,
            error: None,
        };
        if paths.contains(&Path::Dense) {
            match self.dense.embed_query(text.full) {
                Ok((v, truncated)) => {
                    out.query.dense = Some(v);
                    out.truncated = Some(truncated);
                }
                Err(e) => out.error = Some(e.to_string()),
            }
        }
        if paths.contains(&Path::Splade) {
            match self.sparse.encode(text.lexical) {
                Ok(v) => out.query.sparse = Some(v),
                Err(e) => out.error = Some(e.to_string()),
            }
        }
        out
    }

    /// Encodes `text` for `paths` (only what they need) and runs their retrievers in order.
    /// An encoder failure fails the paths that needed it, not the search.
    /// Dense hits under `min_dense` are dropped.
    /// `encoded`, when given, is the query already encoded for these paths.
    fn run_branch(
        &self,
        text: QueryTexts<'_>,
        paths: &[Path],
        allowed: Option<&Bitset>,
        k: &(dyn Fn(Path) -> usize + Sync),
        min_dense: Option<f32>,
        encoded: Option<(Encoding, f64)>,
    ) -> Branch {
        let mut branch = Branch::default();
        if paths.is_empty() {
            return branch;
        }
        let t = Instant::now();
        let (Encoding { query, truncated, error: encode_error }, encode_ms) =
            encoded.unwrap_or_else(|| (self.encode(text, paths), ms(t)));
        branch.truncated = truncated;
        branch.encode_ms = encode_ms;
        for &p in paths {
            let Some(r) = self.retrievers.iter().find(|r| r.path() == p) else { continue };
            let t = Instant::now();
            let needs_encoding = match p {
                Path::Dense => query.dense.is_none(),
                Path::Splade => query.sparse.is_none(),
                Path::Bm25 => false,
            };
            let result = match (&encode_error, needs_encoding) {
                (Some(e), true) => {
                    Err(Error::Component { component: p.name().into(), reason: format!("query encoding failed: {e}") })
                }
                _ => r.retrieve(&query, allowed, k(p)),
            };
            let result = match (p, min_dense) {
                (Path::Dense, Some(min)) => result.map(|hits| hits.into_iter().filter(|h| h.1 >= min).collect()),
                _ => result,
            };
            branch.results.push((p, result, ms(t)));
        }
        branch.dense_query = query.dense;
        branch
    }

    /// The per-query weight of each path's list (see [`FusionConfig`]): the base weights,
    /// adapted to each path's confidence and agreement on this query over its `units`
    /// (documents or chunks, as the fusion reads them), the dense path's damped by the
    /// share of identifiers in `query`, then rescaled to the base weights'
    /// total (one common factor: the fused order is unchanged, and fused scores stay on the
    /// scale of the base weights).
    fn fusion_weights(fusion: &FusionConfig, query: &str, paths: &[Path], units: &[Vec<(u32, f32)>]) -> Vec<f32> {
        let base: Vec<f32> = paths.iter().map(|&p| fusion.weight(p)).collect();
        if (fusion.alpha == 0.0 && fusion.agreement == 0.0 && fusion.identifiers == 0.0) || units.len() < 2 {
            return base;
        }
        let conf: Vec<f32> = match fusion.alpha {
            0.0 => vec![0.0; units.len()],
            _ => units
                .iter()
                .map(|l| confidence(&l.iter().map(|u| u.1).collect::<Vec<_>>(), fusion.confidence_depth))
                .collect(),
        };
        let ids: Vec<Vec<u32>> = units.iter().map(|l| l.iter().map(|u| u.0).collect()).collect();
        let views: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let agree: Vec<f32> = (0..views.len()).map(|i| agreement(&views, i, fusion.agreement_depth)).collect();
        let mut w = adaptive_weights(&base, &conf, fusion.alpha, &agree, fusion.agreement);
        if fusion.identifiers != 0.0 {
            let damping = identifier_damping(identifier_share(query), fusion.identifiers);
            w.iter_mut().zip(paths).filter(|(_, &p)| p == Path::Dense).for_each(|(x, _)| *x *= damping);
        }
        let (sum_base, sum_w) = (base.iter().sum::<f32>(), w.iter().sum::<f32>());
        if sum_w > 0.0 && sum_w.is_finite() {
            w.iter().map(|x| x * sum_base / sum_w).collect()
        } else {
            base
        }
    }

    /// Fuses the paths' lists for `query` (`paths[i]` gave `lists[i]`, best first) as
    /// `fusion` says: each list read as units (documents at their best chunk, or chunks),
    /// per-query weights over those units and the query's wording ([`FusionConfig`]), then
    /// z-scores or RRF. Every chunk of the lists comes back, best first, with its rank in
    /// each list.
    pub fn fuse(
        &self,
        fusion: &FusionConfig,
        query: &str,
        paths: &[Path],
        lists: &[Vec<PathHit>],
    ) -> Result<Vec<Fused<u32>>> {
        self.fuse_shared(fusion, query, paths, lists, &[])
    }

    /// [`fuse`](Self::fuse), each list's per-query weight then multiplied by its entry in
    /// `shares` (a list without one: 1). Dense feedback on a long query fuses two dense lists
    /// that share the dense weight this way ([`FusionConfig`]).
    pub(super) fn fuse_shared(
        &self,
        fusion: &FusionConfig,
        query: &str,
        paths: &[Path],
        lists: &[Vec<PathHit>],
        shares: &[f32],
    ) -> Result<Vec<Fused<u32>>> {
        let ids: Vec<Vec<u32>> = lists.iter().map(|l| l.iter().map(|h| h.0).collect()).collect();
        let by_document = fusion.by_document;
        let unit = |c: &u32| if by_document { self.index.chunks[*c as usize].doc } else { *c };
        let units: Vec<Vec<(u32, f32)>> = lists.iter().map(|l| groups_in_order(l, unit)).collect();
        let mut weights = Self::fusion_weights(fusion, query, paths, &units);
        weights.iter_mut().zip(shares).for_each(|(w, share)| *w *= share);
        let (w, k) = (Some(weights.as_slice()), fusion.k);
        let fused = match (fusion.method_for(query), by_document) {
            (FusionMethod::Scores, _) => zscore_fuse_grouped(&ids, &units, unit, w, usize::MAX),
            (FusionMethod::Ranks, true) => rrf_fuse_grouped(&ids, &units, unit, w, k, fusion.chunk_share, usize::MAX),
            (FusionMethod::Ranks, false) => rrf_fuse(&ids, w, k, usize::MAX),
        }?;
        let Some(tail) = &fusion.recall_tail else { return Ok(fused) };
        let tail_weights: Vec<f32> = paths
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let share = shares.get(i).copied().unwrap_or(1.0);
                if p == Path::Dense {
                    tail.dense_weight * share
                } else {
                    share
                }
            })
            .collect();
        recall_tail(fused, &units, unit, &tail_weights, tail.k, tail.head)
    }

    /// Runs a search.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchOutcome> {
        let start = Instant::now();
        if req.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        if req.top_k == 0 {
            return Err(Error::invalid("top_k", "must be at least 1"));
        }
        if req.paths.is_empty() {
            return Err(Error::invalid("paths", "at least one retrieval path is needed"));
        }
        if !(req.fusion.feedback.is_finite() && req.fusion.feedback >= 0.0) {
            return Err(Error::invalid("fusion.feedback", "must be a number of at least 0 (0: no dense feedback)"));
        }
        let checkpoint = |stage: Stage| req.cancel.as_ref().map_or(Ok(()), |c| c.check(stage));
        checkpoint(Stage::Retrieval)?;
        let mut timings = StageTimings::default();
        let allowed = match &req.documents {
            None => self.index.allowed(&req.filter),
            Some(docs) => self.index.allowed_by(|d, doc| docs.contains(d) && req.filter.matches(doc), false),
        };
        let candidates = allowed.as_ref().map_or(self.index.chunks.len(), |a| a.count());

        // Two branches run side by side: the dense path on one core; the SPLADE path, then
        // BM25, on the other. On tract each branch first encodes what its paths need (each
        // encoder runs on one thread), so BM25 and SPLADE hide behind the dense encoder, the
        // slowest stage. ONNX Runtime runs each encoder on every core, so there both encode
        // first, one after the other, and the branches only retrieve.
        let default_k = req.per_path_k.max(req.top_k);
        let k = move |p: Path| req.path_k.get(&p).copied().unwrap_or(default_k);
        let (paths, paths_pending): (Vec<Path>, Vec<Path>) = req.paths.iter().partition(|p| self.ready.contains(p));
        if paths.is_empty() {
            let names: Vec<&str> = paths_pending.iter().map(|p| p.name()).collect();
            return Err(Error::PathsNotReady(names.join(" and ")));
        }
        let on_dense: Vec<Path> = paths.iter().copied().filter(|&p| p == Path::Dense).collect();
        let on_sparse: Vec<Path> = paths.iter().copied().filter(|&p| p != Path::Dense).collect();
        // A prepared query is already encoded (and its text is what BM25 reads): nothing
        // here reads the lexical text then.
        let lexical = match req.strip_instructions && req.prepared.is_none() {
            true => lexical_query(&req.query),
            false => std::borrow::Cow::Borrowed(req.query.as_str()),
        };
        let texts = QueryTexts { full: &req.query, lexical: &lexical };
        let encode_first = |paths: &[Path]| {
            let t = Instant::now();
            let e = self.encode(texts, paths);
            (e, ms(t))
        };
        let encoded_first = encoders_take_turns(self.dense.backend(), self.sparse.backend());
        let (dense_encoded, sparse_encoded) = match (&req.prepared, encoded_first) {
            // Encoded once by the caller for several searches: nothing to encode here.
            (Some(p), _) => {
                let given = |dense: bool| {
                    let query = PreparedQuery {
                        text: p.text.clone(),
                        dense: if dense { p.dense.clone() } else { None },
                        sparse: if dense { None } else { p.sparse.clone() },
                    };
                    (Encoding { query, truncated: None, error: None }, 0.0)
                };
                (Some(given(true)), Some(given(false)))
            }
            (None, true) => (Some(encode_first(&on_dense)), Some(encode_first(&on_sparse))),
            (None, false) => (None, None),
        };
        let (dense_branch, sparse_branch) = rayon::join(
            || self.run_branch(texts, &on_dense, allowed.as_ref(), &k, req.min_dense_similarity, dense_encoded),
            || self.run_branch(texts, &on_sparse, allowed.as_ref(), &k, None, sparse_encoded),
        );
        // Side by side the slower branch's encoding counts; one after the other, both.
        timings.encode_ms = match encoded_first {
            true => dense_branch.encode_ms + sparse_branch.encode_ms,
            false => dense_branch.encode_ms.max(sparse_branch.encode_ms),
        };
        let query_truncated = self.query_truncated(&req.query, dense_branch.truncated);
        let dense_query = dense_branch.dense_query;
        let mut results: Vec<(Path, Result<Vec<PathHit>>, f64)> =
            dense_branch.results.into_iter().chain(sparse_branch.results).collect();
        // Report paths in the order the request named them.
        results.sort_by_key(|(p, _, _)| req.paths.iter().position(|x| x == p));

        let mut lists = Vec::new();
        let mut used_paths = Vec::new();
        let mut failed_paths = Vec::new();
        for (p, result, took) in results {
            match result {
                Ok(hits) => {
                    lists.push(hits);
                    used_paths.push(p);
                }
                Err(e) => {
                    tracing::warn!(path = p.name(), error = %e, "retrieval path failed; skipped");
                    failed_paths.push((p, e.to_string()));
                }
            }
            timings.paths_ms.insert(p, took);
        }
        if used_paths.is_empty() {
            let why = failed_paths.iter().map(|(p, e)| format!("{p}: {e}")).collect::<Vec<_>>().join("; ");
            return Err(Error::AllPathsFailed(why));
        }

        checkpoint(Stage::Fusion)?;
        let t = Instant::now();
        let mut fused = self.fuse(&req.fusion, &req.query, &used_paths, &lists)?;
        // Feedback lets the dense path read what the other paths found: with dense alone
        // there is nothing to read.
        let dense_at = used_paths.iter().position(|&p| p == Path::Dense).filter(|_| used_paths.len() > 1);
        if let (Some(i), Some(q)) = (dense_at, &dense_query) {
            if let Some((list, gamma)) = self.dense_feedback(req, q, &fused, &lists, k(Path::Dense)) {
                let own = std::mem::replace(&mut lists[i], list);
                fused = if req.fusion.dense_beside_feedback && req.fusion.is_long(&req.query) {
                    // The dense path's own list goes last, after the paths the hits report
                    // (their diagnostics below read `lists` only as far as `used_paths`).
                    let mut paths = used_paths.clone();
                    paths.push(Path::Dense);
                    let mut shares = vec![1.0; used_paths.len()];
                    shares[i] = gamma;
                    shares.push(1.0 - gamma);
                    lists.push(own);
                    self.fuse_shared(&req.fusion, &req.query, &paths, &lists, &shares)?
                } else {
                    self.fuse(&req.fusion, &req.query, &used_paths, &lists)?
                };
            }
        }
        let mut hits: Vec<Hit> = fused
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let mut d = Diagnostics { rrf_rank: i + 1, rrf_score: f.score, ..Default::default() };
                for ((&p, rank), list) in used_paths.iter().zip(&f.ranks).zip(&lists) {
                    if let Some(r) = rank {
                        d.paths.insert(p, PathRank { rank: *r, score: list[r - 1].1 });
                    }
                }
                Hit { chunk: f.item, score: f.score, diagnostics: d }
            })
            .collect();
        timings.fuse_ms = ms(t);

        if req.rerank && self.reranker.is_some() {
            checkpoint(Stage::Rerank)?;
        }
        let t = Instant::now();
        let rerank = self.rerank(req, &mut hits);
        timings.rerank_ms = ms(t);

        if let Some(rec) = &req.recency {
            self.apply_recency(&mut hits, rec)?;
        }
        let out = self.diversify(hits, req.top_k, req.max_per_document);
        timings.total_ms = ms(start);
        Ok(SearchOutcome {
            hits: out,
            failed_paths,
            rerank,
            candidates,
            query_truncated,
            paths_served: used_paths,
            paths_pending,
            timings,
        })
    }

    /// Dense feedback ([`FusionConfig`], [`feedback_query`]): the dense list again, with the
    /// query's feedback weight `γ(q)`, for the
    /// query vector `q` moved towards the vectors of the best chunks of `fused`'s top `m`
    /// documents (each chunk's window nearest to `q`). Every chunk a path found (`lists`,
    /// each already within the request's filter) is scored by its best window's cosine with
    /// the moved query, and the best `k` make the new
    /// list. This is an exact product per candidate, not a second graph search: on the dev
    /// sets the two were at most 0.003 apart, and with the graph search a search took 1.08
    /// to 1.19 times as long as without feedback, against 1.02 to 1.05 (README, "How the
    /// default fusion was chosen"). `None` when the request's fusion has no feedback or this query's
    /// weight `γ(q)` is 0. Chunks whose cosine with `q` itself is under the request's
    /// `min_dense_similarity` are left out, as from the first dense list.
    fn dense_feedback(
        &self,
        req: &SearchRequest,
        q: &[f32],
        fused: &[Fused<u32>],
        lists: &[Vec<PathHit>],
        k: usize,
    ) -> Option<(Vec<PathHit>, f32)> {
        let gamma = feedback_weight(identifier_share(&req.query), req.fusion.feedback);
        if gamma == 0.0 || req.fusion.feedback_documents == 0 {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        let top: Vec<u32> = fused
            .iter()
            .map(|f| f.item)
            .filter(|&c| seen.insert(self.index.chunks[c as usize].doc))
            .take(req.fusion.feedback_documents)
            .collect();
        if top.is_empty() {
            return None;
        }
        let moved = feedback_query(q, top.iter().map(|&c| self.index.dense_nearest(c, q)), gamma);
        let min = req.min_dense_similarity;
        let mut seen = std::collections::HashSet::new();
        let mut hits: Vec<PathHit> = lists
            .iter()
            .flatten()
            .map(|h| h.0)
            .filter(|&c| seen.insert(c))
            .filter(|&c| min.is_none_or(|min| self.index.dense_score(c, q) >= min))
            .map(|c| (c, self.index.dense_score(c, &moved)))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        Some((hits, gamma))
    }

    /// Reranks the fused top `rerank_depth` in place when asked and possible; candidates
    /// beyond the depth stay below every reranked one. On failure the fused order stays.
    fn rerank(&self, req: &SearchRequest, hits: &mut Vec<Hit>) -> RerankStatus {
        if !req.rerank {
            return RerankStatus::NotRequested;
        }
        let Some(rr) = &self.reranker else { return RerankStatus::Unavailable };
        let depth = req.rerank_depth.min(hits.len());
        let candidates: Vec<Candidate<'_>> = hits[..depth]
            .iter()
            .map(|h| Candidate {
                chunk: h.chunk,
                text: &self.index.chunks[h.chunk as usize].text,
                fused_score: h.score,
            })
            .collect();
        let reranked = match rr.rerank(&req.query, &candidates) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "reranker failed; fused order kept");
                return RerankStatus::Failed(e.to_string());
            }
        };
        // A reranker that invents or repeats chunks is a failed one: checked before any hit moves.
        let position: std::collections::HashMap<u32, usize> =
            candidates.iter().enumerate().map(|(i, c)| (c.chunk, i)).collect();
        let mut seen = vec![false; depth];
        let mut order = Vec::with_capacity(reranked.len());
        for r in &reranked {
            match position.get(&r.chunk) {
                Some(&i) if !std::mem::replace(&mut seen[i], true) => order.push((i, r.score)),
                _ => {
                    return RerankStatus::Failed(format!("reranker returned an unknown or repeated chunk {}", r.chunk))
                }
            }
        }
        let mut slots: Vec<Option<Hit>> = hits.drain(..depth).map(Some).collect();
        let mut head = Vec::with_capacity(depth);
        for (i, score) in order {
            let mut h = slots[i].take().expect("checked: each position once");
            h.diagnostics.rerank_score = Some(score);
            h.diagnostics.rerank_rank = Some(head.len() + 1);
            h.score = score;
            head.push(h);
        }
        // Candidates the reranker left out follow, in fused order.
        head.extend(slots.into_iter().flatten());
        head.append(hits);
        *hits = head;
        RerankStatus::Applied
    }

    /// The first `top_k` hits, keeping at most `max_per_document` chunks of a document.
    fn diversify(&self, hits: Vec<Hit>, top_k: usize, max_per_document: Option<usize>) -> Vec<Hit> {
        let mut out = Vec::with_capacity(top_k);
        let mut per_doc: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for h in hits {
            if out.len() == top_k {
                break;
            }
            let n = per_doc.entry(self.index.chunks[h.chunk as usize].doc).or_default();
            if max_per_document.is_some_and(|m| *n >= m) {
                continue;
            }
            *n += 1;
            out.push(h);
        }
        out
    }

    fn apply_recency(&self, hits: &mut [Hit], rec: &Recency) -> Result<()> {
        if rec.half_life_days.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
            || !rec.weight.is_finite()
            || rec.weight < 0.0
        {
            return Err(Error::invalid("recency", "half_life_days must be positive and weight non-negative"));
        }
        let now = rec.now.map(Date::days_since_epoch).or(self.newest_day);
        let Some(now) = now else { return Ok(()) };
        for h in hits.iter_mut() {
            let doc = self.index.document_of(h.chunk);
            if let Some(day) = doc.published_at.map(Date::days_since_epoch) {
                let age = (now - day).max(0) as f32;
                let boost = 1.0 + rec.weight * 0.5f32.powf(age / rec.half_life_days);
                // Rerank logits can be negative: dividing by the boost moves those up too.
                h.score = if h.score >= 0.0 { h.score * boost } else { h.score / boost };
            }
        }
        // Reranker scores and fused scores are on different scales: the reranked head is
        // re-sorted within itself and stays above the candidates the reranker never saw.
        hits.sort_by(|a, b| {
            let reranked = |h: &Hit| h.diagnostics.rerank_score.is_some();
            reranked(b)
                .cmp(&reranked(a))
                .then(b.score.total_cmp(&a.score))
                .then(a.diagnostics.rrf_rank.cmp(&b.diagnostics.rrf_rank))
        });
        Ok(())
    }
}

/// Loaded models, not yet tied to an index: loading them can overlap with fetching the
/// index (a cold start from S3 does both at once).
pub struct LoadedModels {
    dense: Arc<DenseEncoder>,
    sparse: Arc<SparseEncoder>,
    reranker: Option<Arc<dyn Reranker>>,
    dense_info: crate::encode::ModelInfo,
    sparse_info: crate::encode::ModelInfo,
    set: crate::encode::ModelSet,
}

impl LoadedModels {
    /// Loads the encoders of `models` (and the reranker when one is configured).
    pub fn load(models: &crate::encode::ModelSet) -> Result<Self> {
        use crate::encode::{CrossEncoder, ModelInfo};
        let (dense_info, sparse_info) = (ModelInfo::read(&models.dense)?, ModelInfo::read(&models.sparse)?);
        let (dense, sparse) = rayon::join(|| DenseEncoder::load(&models.dense), || SparseEncoder::load(&models.sparse));
        let reranker: Option<Arc<dyn Reranker>> = match &models.reranker {
            Some(dir) => {
                let name = ModelInfo::read(dir).map(|i| i.id).unwrap_or_else(|_| dir.display().to_string());
                Some(Arc::new(CrossEncoderReranker::new(CrossEncoder::load(dir)?, name)))
            }
            None => None,
        };
        Ok(LoadedModels {
            dense: Arc::new(dense?),
            sparse: Arc::new(sparse?),
            reranker,
            dense_info,
            sparse_info,
            set: models.clone(),
        })
    }

    /// Reranks with `reranker` instead of the model set's cross-encoder.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.reranker = Some(reranker);
        self
    }

    /// An engine over `index`, refused unless it was built with these dense and SPLADE weights.
    pub fn engine(&self, index: Arc<Index>) -> Result<Engine> {
        check_built_with(&index, &self.set, &self.dense_info, &self.sparse_info)?;
        Ok(Engine::new(index, self.dense.clone(), self.sparse.clone(), self.reranker.clone()))
    }
}

/// Refuses `index` unless it was built with the dense and SPLADE weights described by
/// `dense` and `sparse` (the model infos of `models`).
fn check_built_with(
    index: &Index,
    models: &crate::encode::ModelSet,
    dense: &crate::encode::ModelInfo,
    sparse: &crate::encode::ModelInfo,
) -> Result<()> {
    for (what, dir, info, built) in [
        ("dense", &models.dense, dense, &index.manifest.dense_model),
        ("sparse", &models.sparse, sparse, &index.manifest.sparse_model),
    ] {
        if info.weights_sha256 != built.weights_sha256 {
            return Err(Error::Model {
                path: dir.clone(),
                reason: format!(
                    "index was built with {} ({}), not these {what} weights ({}): rebuild the index",
                    built.id, built.weights_sha256, info.weights_sha256
                ),
            });
        }
    }
    Ok(())
}

/// Loads the encoders of `models` (and the reranker when one is configured) and checks
/// that `index` was built with the same dense and SPLADE weights.
pub fn open_engine(index: Arc<Index>, models: &crate::encode::ModelSet) -> Result<Engine> {
    use crate::encode::ModelInfo;
    // Check the weights before the (slow) load, so a mismatch fails fast.
    check_built_with(&index, models, &ModelInfo::read(&models.dense)?, &ModelInfo::read(&models.sparse)?)?;
    LoadedModels::load(models)?.engine(index)
}
