//! The interface of a dense vector store: the engine's HNSW index is one, the toolkit's
//! exact `FlatVectorStore` another.

use super::{Bitset, DenseIndex};

/// Stores unit vectors under ordinals `0..len` and finds the nearest to a query.
///
/// The engine's HNSW index ([`DenseIndex`]) is one implementation and the one the engine's
/// dense path searches through; the toolkit's `FlatVectorStore` (crate `sextant-kit`) is an
/// exact, growable one.
pub trait VectorStore: Send + Sync {
    /// The vectors' dimension.
    fn dim(&self) -> usize;
    /// How many vectors are stored.
    fn len(&self) -> usize;
    /// Whether the store is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `k` stored vectors most similar to the unit vector `query`, among `allowed`
    /// ordinals (all when `None`), as `(ordinal, cosine)` best first.
    fn search(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)>;
}

impl VectorStore for DenseIndex {
    fn dim(&self) -> usize {
        self.dim
    }
    fn len(&self) -> usize {
        DenseIndex::len(self)
    }
    fn search(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        DenseIndex::search(self, query, allowed, k)
    }
}
