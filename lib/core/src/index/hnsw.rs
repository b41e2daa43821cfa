//! Dense vectors: an HNSW graph over int8-quantised vectors for navigation, exact `f32`
//! cosine for the final scores.
//!
//! The graph (instant-distance) holds 8-bit copies of the vectors (4× smaller than the
//! `f32` store), and every candidate it returns is re-scored exactly against the `f32`
//! vectors, so quantisation only affects which candidates are found, never their scores.
//!
//! Filters are applied before ranking: when a filter keeps few chunks
//! ([`EXACT_SCAN_FRACTION`]) the kept chunks are scored exactly; otherwise HNSW
//! candidates are filtered, and if fewer than `k` survive the search widens to an exact
//! scan of the kept chunks, so a filtered query always gets its `k` best.

use instant_distance::{Builder, HnswMap, Point, Search};
use serde::{Deserialize, Serialize};

use super::bitset::Bitset;
use super::topk::top_k;

/// Below this fraction of kept chunks, a filtered query scans them exactly.
pub const EXACT_SCAN_FRACTION: f64 = 0.05;
/// Candidates one HNSW search returns (instant-distance's `ef_search`).
pub const EF_SEARCH: usize = 256;
/// Build-time beam width.
pub const EF_CONSTRUCTION: usize = 200;
/// Collections at most this large are never given a graph: exact search is as fast.
pub const EXACT_ONLY_BELOW: usize = 2_000;

/// An int8-quantised unit vector: `x ≈ q · scale`.
#[derive(Clone, Serialize, Deserialize)]
pub struct QuantizedVector {
    q: Vec<i8>,
    scale: f32,
}

impl QuantizedVector {
    /// Quantises `v` with one scale for the vector (its largest magnitude maps to 127).
    pub fn new(v: &[f32]) -> Self {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs())).max(f32::MIN_POSITIVE);
        let scale = max / 127.0;
        QuantizedVector { q: v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect(), scale }
    }
}

impl Point for QuantizedVector {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - self.scale * other.scale * dot_i8(&self.q, &other.q) as f32
    }
}

/// Integer dot product (auto-vectorised: eight independent lanes).
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] as i32 * y[i] as i32;
        }
    }
    acc.iter().sum::<i32>() + ra.iter().zip(rb).map(|(&x, &y)| x as i32 * y as i32).sum::<i32>()
}

/// `f32` dot product (auto-vectorised: eight independent accumulators).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f32>()
}

/// The dense index of a collection of unit vectors.
#[derive(Serialize, Deserialize)]
pub struct DenseIndex {
    /// Vector dimension.
    pub dim: usize,
    /// Row-major `f32` vectors, one row per chunk.
    #[serde(skip)]
    pub vectors: Vec<f32>,
    /// The graph; `None` for small collections (exact search only).
    pub graph: Option<HnswMap<QuantizedVector, u32>>,
}

impl DenseIndex {
    /// Builds the index (the graph only above [`EXACT_ONLY_BELOW`] vectors).
    pub fn build(dim: usize, vectors: Vec<f32>) -> Self {
        Self::build_with(dim, vectors, EXACT_ONLY_BELOW)
    }

    /// Builds with an explicit size threshold for the graph (0: always build one).
    pub fn build_with(dim: usize, vectors: Vec<f32>, exact_below: usize) -> Self {
        let n = vectors.len().checked_div(dim).unwrap_or(0);
        let graph = (n > exact_below).then(|| {
            let points: Vec<QuantizedVector> = vectors.chunks(dim).map(QuantizedVector::new).collect();
            Builder::default()
                .ef_construction(EF_CONSTRUCTION)
                .ef_search(EF_SEARCH)
                .seed(0x005e_7a47)
                .build(points, (0..n as u32).collect())
        });
        DenseIndex { dim, vectors, graph }
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.vectors.len().checked_div(self.dim).unwrap_or(0)
    }

    /// Whether there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vector of chunk `i`.
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }

    /// Exact cosine of `query` against every kept chunk; the `k` best.
    pub fn exact(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        match allowed {
            Some(a) => top_k(a.iter().map(|i| (i as u32, dot(query, self.vector(i)))), k),
            None => top_k((0..self.len()).map(|i| (i as u32, dot(query, self.vector(i)))), k),
        }
    }

    /// The `k` most similar kept chunks with their exact cosine, best first.
    pub fn search(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        let n = self.len();
        let Some(graph) = &self.graph else { return self.exact(query, allowed, k) };
        let kept = allowed.map_or(n, |a| a.count());
        if k == 0 || kept == 0 {
            return Vec::new();
        }
        if k >= EF_SEARCH || (kept as f64) < EXACT_SCAN_FRACTION * n as f64 {
            return self.exact(query, allowed, k);
        }
        let mut search = Search::default();
        let q = QuantizedVector::new(query);
        let found: Vec<(u32, f32)> = graph
            .search(&q, &mut search)
            .map(|item| *item.value)
            .filter(|&c| allowed.is_none_or(|a| a.contains(c as usize)))
            .map(|c| (c, dot(query, self.vector(c as usize))))
            .collect();
        if found.len() < k.min(kept) {
            return self.exact(query, allowed, k);
        }
        top_k(found.into_iter(), k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = dot(&v, &v).sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn random_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::testutil::Rng(seed);
        (0..n).flat_map(|_| unit((0..dim).map(|_| (rng.next_u64() % 2000) as f32 / 1000.0 - 1.0).collect())).collect()
    }

    #[test]
    fn dot_products_match_naive_sums() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.05).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
        let qa: Vec<i8> = (0..37).map(|i| (i * 3 - 50) as i8).collect();
        let qb: Vec<i8> = (0..37).map(|i| (70 - i * 2) as i8).collect();
        assert_eq!(dot_i8(&qa, &qb), qa.iter().zip(&qb).map(|(&x, &y)| x as i32 * y as i32).sum::<i32>());
    }

    #[test]
    fn hnsw_recall_against_exact_search() {
        let (n, dim) = (3000, 32);
        let idx = DenseIndex::build_with(dim, random_vectors(n, dim, 7), 0);
        let queries = random_vectors(50, dim, 99);
        let mut hit = 0;
        for q in queries.chunks(dim) {
            let exact: Vec<u32> = idx.exact(q, None, 10).into_iter().map(|p| p.0).collect();
            let approx = idx.search(q, None, 10);
            assert_eq!(approx.len(), 10);
            // Scores are exact cosines, whatever path found the chunk.
            for &(c, s) in &approx {
                assert!((s - dot(q, idx.vector(c as usize))).abs() < 1e-6);
            }
            hit += approx.iter().filter(|p| exact.contains(&p.0)).count();
        }
        let recall = hit as f64 / 500.0;
        assert!(recall >= 0.98, "recall@10 {recall}");
    }

    #[test]
    fn filtered_search_returns_k_from_the_filter_only() {
        let (n, dim) = (3000, 16);
        let idx = DenseIndex::build_with(dim, random_vectors(n, dim, 3), 0);
        let q = &random_vectors(1, dim, 5)[..];
        for keep_every in [2, 10, 97, 1500] {
            let mut allowed = Bitset::empty(n);
            (0..n).step_by(keep_every).for_each(|i| allowed.insert(i));
            let got = idx.search(q, Some(&allowed), 10);
            assert_eq!(got.len(), 10.min(allowed.count()));
            assert!(got.iter().all(|p| (p.0 as usize).is_multiple_of(keep_every)));
            assert_eq!(got[0], idx.exact(q, Some(&allowed), 1)[0], "filter every {keep_every}");
        }
        assert!(idx.search(q, Some(&Bitset::empty(n)), 10).is_empty());
    }
}
