//! The shard protocol: what a router asks an index shard and what the shard answers. The
//! same messages travel in this process ([`Shard`] for [`Engine`]), as JSON over HTTP to
//! a shard worker on loopback (`sextant shard-worker`), and as the payload of a Lambda
//! shard function (`sextant_lambda::shard`, asked with `Invoke`). Ids in them are the
//! shard's own (chunks and documents); the router translates them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::corpus::ChunkSpan;
use crate::encode::SparseVector;
use crate::error::{Error, Result};
use crate::index::{Bitset, Filter, Index};
use crate::pipeline::{
    ChunkSegment, ChunkSource, Engine, IndexView, Path, PathHit, PreparedQuery, Retrieved, SearchRequest, StageTimings,
};

/// One question a router asks a shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ShardRequest {
    /// Each path's candidates for a query, within a filter (boxed: the larger question).
    Retrieve(Box<ShardQuery>),
    /// Dense scores or nearest windows of some of the shard's chunks (dense feedback).
    Dense(DenseQuery),
    /// The text of some of the shard's chunks: the fetch phase, for the results and the
    /// reranker's candidates only.
    Fetch(FetchQuery),
}

/// A query, encoded once by the router, as every shard runs it: the retrieval half of a
/// search ([`Engine::retrieve_paths`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardQuery {
    /// The query text BM25 reads (the router's [`PreparedQuery::text`]).
    pub text: String,
    /// The query's dense embedding, when the dense path runs.
    #[serde(default)]
    pub dense: Option<Vec<f32>>,
    /// The query's SPLADE vector, when the SPLADE path runs.
    #[serde(default)]
    pub sparse: Option<SparseVector>,
    /// Metadata conditions applied before ranking.
    #[serde(default)]
    pub filter: Filter,
    /// Only these of the shard's documents (its ordinals, ascending), on top of `filter`.
    #[serde(default)]
    pub documents: Option<Vec<u32>>,
    /// Paths to run.
    pub paths: Vec<Path>,
    /// Candidates each path returns, unless `path_k` names the path.
    pub per_path_k: usize,
    /// Candidates of particular paths.
    #[serde(default)]
    pub path_k: BTreeMap<Path, usize>,
    /// Dense candidates under this cosine are dropped.
    #[serde(default)]
    pub min_dense_similarity: Option<f32>,
}

/// Dense scores of some chunks for unit query vectors, or their windows nearest to one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseQuery {
    /// The shard's chunk ids.
    pub chunks: Vec<u32>,
    /// Unit query vectors: with `nearest`, exactly one.
    pub queries: Vec<Vec<f32>>,
    /// Whether to answer with each chunk's window nearest to the query instead of scores.
    #[serde(default)]
    pub nearest: bool,
}

/// The chunks whose text a router fetches ([`ShardRequest::Fetch`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchQuery {
    /// The shard's chunk ids.
    pub chunks: Vec<u32>,
    /// Whether to answer with the document segments each chunk overlaps, too (`/v1/retrieve`'s
    /// `include_segments`).
    #[serde(default)]
    pub segments: bool,
}

/// One chunk's text and place in its document, fetched ([`ShardResponse::Fetch`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FetchedChunk {
    /// The chunk's text.
    pub text: String,
    /// Where it sits in its document (the router keeps nothing per chunk).
    pub span: ChunkSpan,
    /// The segments it overlaps, when asked for ([`FetchQuery::segments`]).
    #[serde(default)]
    pub segments: Vec<ChunkSegment>,
}

/// A shard's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ShardResponse {
    /// To [`ShardRequest::Retrieve`].
    Retrieve(ShardAnswer),
    /// To [`ShardRequest::Dense`]: per query, a score per chunk; or per chunk, its
    /// nearest window.
    Dense {
        /// `rows[q][i]` (scores) or `rows[i]` (nearest windows).
        rows: Vec<Vec<f32>>,
    },
    /// To [`ShardRequest::Fetch`]: one per chunk asked, in order.
    Fetch {
        /// The chunks' texts.
        chunks: Vec<FetchedChunk>,
    },
}

/// Each path's candidates on one shard, with their raw scores: no text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardAnswer {
    /// Each served path's list, best first, of `(shard chunk id, score)`; on the wire one
    /// base64 string a list, 8 bytes a hit ([`packed`](super::packed)).
    #[serde(with = "super::packed")]
    pub lists: Vec<Vec<PathHit>>,
    /// The paths that served, in the request's order.
    pub used_paths: Vec<Path>,
    /// Paths that failed, and why.
    #[serde(default)]
    pub failed_paths: Vec<(Path, String)>,
    /// Paths asked for that are not ready.
    #[serde(default)]
    pub paths_pending: Vec<Path>,
    /// The shard's chunks within the filter.
    pub candidates: usize,
    /// Each path's milliseconds on the shard.
    #[serde(default)]
    pub paths_ms: BTreeMap<Path, f64>,
}

/// An index shard as a router asks it: in this process, or behind the protocol.
pub trait Shard: Send + Sync {
    /// Answers `request`; an error is the shard failing (the router leaves it out).
    fn ask(&self, request: &ShardRequest) -> Result<ShardResponse>;
}

impl Shard for Engine {
    fn ask(&self, request: &ShardRequest) -> Result<ShardResponse> {
        answer(self, request)
    }
}

/// `engine`'s answer to `request`: what every shard, wherever it runs, computes.
pub fn answer(engine: &Engine, request: &ShardRequest) -> Result<ShardResponse> {
    match request {
        ShardRequest::Retrieve(q) => {
            let index = engine.index();
            let documents = match &q.documents {
                None => None,
                Some(ds) => {
                    let mut set = Bitset::empty(index.documents.len());
                    for &d in ds {
                        if d as usize >= set.len() {
                            return Err(Error::invalid("documents", format!("document {d} of {}", set.len())));
                        }
                        set.insert(d as usize);
                    }
                    Some(Arc::new(set))
                }
            };
            let prepared = PreparedQuery { text: q.text.clone(), dense: q.dense.clone(), sparse: q.sparse.clone() };
            let req = SearchRequest {
                filter: q.filter.clone(),
                per_path_k: q.per_path_k,
                path_k: q.path_k.clone(),
                paths: q.paths.clone(),
                min_dense_similarity: q.min_dense_similarity,
                documents,
                prepared: Some(Arc::new(prepared)),
                ..SearchRequest::new(q.text.clone(), 1)
            };
            let r = engine.retrieve_paths(&req)?;
            Ok(ShardResponse::Retrieve(ShardAnswer {
                lists: r.lists,
                used_paths: r.used_paths,
                failed_paths: r.failed_paths,
                paths_pending: r.paths_pending,
                candidates: r.candidates,
                paths_ms: r.timings.paths_ms,
            }))
        }
        ShardRequest::Dense(d) => {
            let index = &**engine.index();
            check_chunks(index, &d.chunks)?;
            if d.queries.iter().any(|q| q.len() != index.manifest.dense_dim) {
                return Err(Error::invalid("queries", format!("vectors of {} dimensions", index.manifest.dense_dim)));
            }
            let rows = match (d.nearest, d.queries.as_slice()) {
                (true, [q]) => index.nearest_windows(&d.chunks, q)?,
                (true, _) => return Err(Error::invalid("queries", "exactly one with nearest")),
                (false, qs) => index.dense_scores(&d.chunks, &qs.iter().map(Vec::as_slice).collect::<Vec<_>>())?,
            };
            Ok(ShardResponse::Dense { rows })
        }
        ShardRequest::Fetch(f) => {
            let index = &**engine.index();
            check_chunks(index, &f.chunks)?;
            let chunks = f
                .chunks
                .iter()
                .map(|&c| FetchedChunk {
                    text: index.chunks[c as usize].text.clone(),
                    span: index.chunks[c as usize].span,
                    segments: if f.segments { index.segments_of(c) } else { Vec::new() },
                })
                .collect();
            Ok(ShardResponse::Fetch { chunks })
        }
    }
}

/// Refuses a question naming a chunk the shard does not have.
fn check_chunks(index: &Index, chunks: &[u32]) -> Result<()> {
    match chunks.iter().find(|&&c| c as usize >= index.chunks.len()) {
        Some(&c) => Err(Error::invalid("chunks", format!("chunk {c} of {}", index.chunks.len()))),
        None => Ok(()),
    }
}

impl ShardQuery {
    /// The shard query for `req` with its query encoded as `prepared`, over the shard's
    /// documents `documents` (ascending), when the request restricts them.
    pub fn of(req: &SearchRequest, prepared: &PreparedQuery, documents: Option<Vec<u32>>) -> Self {
        ShardQuery {
            text: prepared.text.clone(),
            dense: prepared.dense.clone(),
            sparse: prepared.sparse.clone(),
            filter: req.filter.clone(),
            documents,
            paths: req.paths.clone(),
            per_path_k: req.per_path_k.max(req.top_k),
            path_k: req.path_k.clone(),
            min_dense_similarity: req.min_dense_similarity,
        }
    }
}

impl From<ShardAnswer> for Retrieved {
    fn from(a: ShardAnswer) -> Self {
        Retrieved {
            lists: a.lists,
            used_paths: a.used_paths,
            failed_paths: a.failed_paths,
            paths_pending: a.paths_pending,
            candidates: a.candidates,
            timings: StageTimings { paths_ms: a.paths_ms, ..Default::default() },
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message survives JSON, the wire format of the loopback workers, to
    /// the last bit of every score.
    #[test]
    fn messages_cross_json_unchanged() {
        let q = ShardRequest::Retrieve(Box::new(ShardQuery {
            text: "net revenue".into(),
            dense: Some(vec![0.1, -0.3333333, f32::MIN_POSITIVE]),
            sparse: None,
            filter: Filter::default(),
            documents: Some(vec![0, 7]),
            paths: vec![Path::Dense, Path::Bm25],
            per_path_k: 200,
            path_k: BTreeMap::from([(Path::Bm25, 50)]),
            min_dense_similarity: Some(0.25),
        }));
        let a = ShardResponse::Retrieve(ShardAnswer {
            lists: vec![vec![(3, 0.812_345_7), (9, 1.0e-7)]],
            used_paths: vec![Path::Dense],
            failed_paths: vec![(Path::Bm25, "broken".into())],
            paths_pending: vec![],
            candidates: 12,
            paths_ms: BTreeMap::from([(Path::Dense, 0.5)]),
        });
        let m = serde_json::to_string(&q).unwrap();
        assert_eq!(serde_json::from_str::<ShardRequest>(&m).unwrap(), q);
        let m = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<ShardResponse>(&m).unwrap(), a);
        assert!(m.starts_with(r#"{"op":"retrieve""#), "{m}");
        let lists = &serde_json::from_str::<serde_json::Value>(&m).unwrap()["lists"];
        assert_eq!(lists[0].as_str(), Some(crate::shards::packed::pack(&[(3, 0.812_345_7), (9, 1.0e-7)]).as_str()));
        let f = ShardRequest::Fetch(FetchQuery { chunks: vec![4, 1], segments: true });
        let m = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<ShardRequest>(&m).unwrap(), f);
        let segment =
            ChunkSegment { sequence: 2, content: "Net sales rose — 8 %.".into(), char_start: 40, char_end: 61 };
        let span = ChunkSpan { seg_start: 2, seg_end: 3, char_start: 40, char_end: 54 };
        let a = ShardResponse::Fetch {
            chunks: vec![
                FetchedChunk { text: "Net sales rose".into(), span, segments: vec![segment] },
                FetchedChunk {
                    text: String::new(),
                    span: ChunkSpan { seg_start: 3, seg_end: 3, char_start: 61, char_end: 61 },
                    segments: vec![],
                },
            ],
        };
        let m = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<ShardResponse>(&m).unwrap(), a);
    }
}
