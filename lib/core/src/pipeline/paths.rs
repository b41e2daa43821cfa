//! Retrieval paths over an [`Index`]: dense, BM25 and SPLADE, on chunk ordinals and
//! prepared (already encoded) queries. The toolkit's retrievers (crate `sextant-kit`)
//! work on items and text; these are the engine's inner loop.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::encode::SparseVector;
use crate::error::{Error, Result};
use crate::index::{Bitset, Index};

/// A retrieval path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// Dense embeddings (HNSW + exact re-scoring).
    Dense,
    /// BM25 over analysed terms.
    Bm25,
    /// SPLADE learned-sparse terms.
    Splade,
}

impl Path {
    /// Every path, in fusion order.
    pub const ALL: [Path; 3] = [Path::Dense, Path::Bm25, Path::Splade];

    /// The path's name in requests and diagnostics.
    pub fn name(self) -> &'static str {
        match self {
            Path::Dense => "dense",
            Path::Bm25 => "bm25",
            Path::Splade => "splade",
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Path {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Path::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::invalid("path", format!("{s:?} is not one of dense, bm25, splade")))
    }
}

/// A query with the encodings its paths need, computed once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreparedQuery {
    /// The query text.
    pub text: String,
    /// Its dense embedding, when the dense path runs.
    pub dense: Option<Vec<f32>>,
    /// Its SPLADE vector, when the SPLADE path runs.
    pub sparse: Option<SparseVector>,
}

/// One ranked hit of a path: chunk ordinal and the path's own score.
pub type PathHit = (u32, f32);

/// A retrieval path over chunk ordinals, with filters applied before ranking.
pub trait PathRetriever: Send + Sync {
    /// Which path this is.
    fn path(&self) -> Path;
    /// The `k` best chunks among `allowed` (all when `None`), best first.
    fn retrieve(&self, query: &PreparedQuery, allowed: Option<&Bitset>, k: usize) -> Result<Vec<PathHit>>;
}

/// Dense retrieval over the index's vectors (HNSW, and an exact scan of a delta).
pub struct DensePath(pub Arc<Index>);
/// BM25 retrieval over the index's terms.
pub struct Bm25Path(pub Arc<Index>);
/// SPLADE retrieval over the index's learned terms.
pub struct SpladePath(pub Arc<Index>);

fn missing(path: Path, what: &str) -> Error {
    Error::Component { component: path.name().into(), reason: format!("query has no {what}") }
}

impl PathRetriever for DensePath {
    fn path(&self) -> Path {
        Path::Dense
    }
    fn retrieve(&self, q: &PreparedQuery, allowed: Option<&Bitset>, k: usize) -> Result<Vec<PathHit>> {
        let v = q.dense.as_ref().ok_or_else(|| missing(Path::Dense, "dense embedding"))?;
        if v.len() != self.0.dense.dim {
            return Err(Error::invalid(
                "embedding",
                format!("dimension {} but the index holds {}", v.len(), self.0.dense.dim),
            ));
        }
        Ok(self.0.dense_search(v, allowed, k))
    }
}

impl PathRetriever for Bm25Path {
    fn path(&self) -> Path {
        Path::Bm25
    }
    fn retrieve(&self, q: &PreparedQuery, allowed: Option<&Bitset>, k: usize) -> Result<Vec<PathHit>> {
        Ok(self.0.bm25_search(&q.text, allowed, k))
    }
}

impl PathRetriever for SpladePath {
    fn path(&self) -> Path {
        Path::Splade
    }
    fn retrieve(&self, q: &PreparedQuery, allowed: Option<&Bitset>, k: usize) -> Result<Vec<PathHit>> {
        let v = q.sparse.as_ref().ok_or_else(|| missing(Path::Splade, "SPLADE vector"))?;
        Ok(self.0.splade_search(v, allowed, k))
    }
}
