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
use super::dot::{dot, dot_i8};
use super::topk::top_k;
use crate::storage::Flat;

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

/// The dense index of a collection of chunks, each held as one or more unit vectors.
///
/// A chunk longer than the build's dense window is read by the dense encoder in windows
/// (`BuildOptions::dense_window`), one vector each, and its score is that of its best
/// window:
///
/// ```text
/// dense(q, c) = max_{w ∈ windows(c)} cos(q, v_w)
/// ```
///
/// The graph holds every window; a search maps the windows it finds to their chunks.
/// Chunks of an index without windows have one vector each.
#[derive(Serialize, Deserialize)]
pub struct DenseIndex {
    /// Vector dimension.
    pub dim: usize,
    /// Row-major `f32` vectors, a chunk's rows one after the other: held when built in
    /// this process, mapped from `dense.f32` when loaded from a local file.
    #[serde(skip)]
    pub vectors: VectorRows,
    /// The graph over every vector (its values are vector ordinals); `None` for small
    /// collections (exact search only).
    pub graph: Option<HnswMap<QuantizedVector, u32>>,
    /// Chunk `c`'s vectors are rows `windows[c]..windows[c + 1]`; empty when every chunk has
    /// exactly one (row `c`).
    #[serde(skip)]
    windows: Vec<u32>,
    /// The chunk of each row, when chunks have windows.
    #[serde(skip)]
    owner: Vec<u32>,
}

/// The exact `f32` rows of a dense index, a chunk's rows one after the other (what the
/// file `dense.f32` holds, little-endian): held when built in this process, read in place
/// from the file when loaded from one ([`Flat::Mapped`]), so that a search pages in the rows
/// it scores and the kernel may reclaim them; [`DenseIndex::resident_bytes`] leaves them out.
pub type VectorRows = Flat<f32>;

/// The graph's beam for `rows` vectors of `chunks` chunks:
///
/// ```text
/// ef = ⌈EF_SEARCH · rows / chunks⌉   (EF_SEARCH when every chunk has one vector)
/// ```
///
/// A search visits `ef` rows, and a chunk's windows fill several of them: at 1.17 windows a
/// chunk the beam is 300, not the 512 that rounding the windows a chunk up to 2 gave.
pub fn beam(rows: usize, chunks: usize) -> usize {
    (EF_SEARCH * rows).div_ceil(chunks.max(1)).max(EF_SEARCH)
}

/// Neighbours of a graph node on the bottom layer and on each upper layer (instant-distance's
/// `M`: 32, with twice that on layer 0).
const GRAPH_M: usize = 32;

impl DenseIndex {
    /// The bytes this index holds in memory once loaded, estimated from its sizes:
    ///
    /// ```text
    /// bytes = 4 · (|windows| + |owner|)            window offsets and owners
    ///       + rows_g · (8M + dim + 36)             graph: layer-0 neighbours (2M u32), the
    ///                                              i8 vector with its Vec and scale, the value
    ///       + rows_g · 4M / (M − 1)                upper layers (1 node in M − 1 per layer, M u32)
    /// ```
    ///
    /// with `rows_g` the rows in the graph (0 without one) and M = 32. The `f32` rows
    /// (`4 · rows · dim`, [`DenseIndex::mapped_bytes`]) are not counted: a loaded index
    /// reads them in place from `dense.f32` ([`VectorRows`]), through the page cache.
    pub fn resident_bytes(&self) -> u64 {
        let rows = self.vectors.len().checked_div(self.dim).unwrap_or(0) as u64;
        let in_graph = if self.graph.is_some() { rows } else { 0 };
        let m = GRAPH_M as u64;
        4 * (self.windows.len() + self.owner.len()) as u64
            + in_graph * (8 * m + self.dim as u64 + 36)
            + in_graph * 4 * m / (m - 1)
    }

    /// The bytes of the `f32` rows, which a loaded index reads in place from `dense.f32`:
    /// `4 · rows · dim`.
    pub fn mapped_bytes(&self) -> u64 {
        4 * self.vectors.len() as u64
    }

    /// Builds the index of one vector per chunk (the graph only above
    /// [`EXACT_ONLY_BELOW`] vectors).
    pub fn build(dim: usize, vectors: Vec<f32>) -> Self {
        Self::build_with(dim, vectors, EXACT_ONLY_BELOW)
    }

    /// Builds with an explicit size threshold for the graph (0: always build one).
    pub fn build_with(dim: usize, vectors: Vec<f32>, exact_below: usize) -> Self {
        let n = vectors.len().checked_div(dim).unwrap_or(0);
        let graph = Self::graph(dim, &vectors, n, exact_below, EF_SEARCH);
        DenseIndex { dim, vectors: vectors.into(), graph, windows: Vec::new(), owner: Vec::new() }
    }

    /// The index of chunks each given as its windows' rows (`dim` values per window), one
    /// after the other: [`DenseIndex::build_windows_with`] over their rows and offsets.
    pub fn build_chunks<V: AsRef<[f32]>>(
        dim: usize,
        chunks: impl IntoIterator<Item = V>,
        exact_below: usize,
    ) -> Result<Self, String> {
        let mut rows = Vec::new();
        let mut windows = vec![0u32];
        for v in chunks {
            rows.extend_from_slice(v.as_ref());
            windows.push((rows.len() / dim.max(1)) as u32);
        }
        Self::build_windows_with(dim, rows, windows, exact_below)
    }

    /// Builds the index of chunks held as windows: chunk `c`'s vectors are rows
    /// `windows[c]..windows[c + 1]` of `vectors`, and the graph is built above `exact_below`
    /// vectors. The graph's beam is widened by the windows a chunk has on average
    /// ([`beam`]), so one search still finds about [`EF_SEARCH`] chunks.
    pub fn build_windows_with(
        dim: usize,
        vectors: Vec<f32>,
        windows: Vec<u32>,
        exact_below: usize,
    ) -> Result<Self, String> {
        let n = vectors.len().checked_div(dim).unwrap_or(0);
        let chunks = windows.len().saturating_sub(1);
        let graph = Self::graph(dim, &vectors, n, exact_below, beam(n, chunks));
        let mut index = DenseIndex { dim, vectors: vectors.into(), graph, windows: Vec::new(), owner: Vec::new() };
        index.set_windows(windows)?;
        Ok(index)
    }

    fn graph(
        dim: usize,
        vectors: &[f32],
        n: usize,
        exact_below: usize,
        ef_search: usize,
    ) -> Option<HnswMap<QuantizedVector, u32>> {
        (n > exact_below).then(|| {
            let points: Vec<QuantizedVector> = vectors.chunks(dim).map(QuantizedVector::new).collect();
            Builder::default()
                .ef_construction(EF_CONSTRUCTION)
                .ef_search(ef_search)
                .seed(0x005e_7a47)
                .build(points, (0..n as u32).collect())
        })
    }

    /// Sets where each chunk's vectors start (the file `dense.windows`), after checking
    /// that they cover every vector in order and give each chunk at least one. One window
    /// per chunk is stored as no windows.
    pub fn set_windows(&mut self, windows: Vec<u32>) -> Result<(), String> {
        let rows = self.vector_count();
        if windows.first() != Some(&0) || windows.last().map(|&w| w as usize) != Some(rows) {
            return Err(format!("offsets from 0 to {rows}, found {:?} to {:?}", windows.first(), windows.last()));
        }
        if let Some(c) = windows.windows(2).position(|w| w[1] <= w[0]) {
            return Err(format!("at least one vector per chunk, none for chunk {c}"));
        }
        if windows.len() == rows + 1 {
            (self.windows, self.owner) = (Vec::new(), Vec::new());
            return Ok(());
        }
        self.owner = windows.windows(2).enumerate().flat_map(|(c, w)| (w[0]..w[1]).map(move |_| c as u32)).collect();
        self.windows = windows;
        Ok(())
    }

    /// Where each chunk's vectors start, one more than chunks (what `dense.windows` holds).
    pub fn window_offsets(&self) -> Vec<u32> {
        if self.windows.is_empty() {
            (0..=self.vector_count() as u32).collect()
        } else {
            self.windows.clone()
        }
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        if self.windows.is_empty() {
            self.vector_count()
        } else {
            self.windows.len() - 1
        }
    }

    /// Whether there are no chunks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of vectors (windows), at least the number of chunks.
    pub fn vector_count(&self) -> usize {
        self.vectors.len().checked_div(self.dim).unwrap_or(0)
    }

    /// The vectors of chunk `c`, one row of `dim` per window.
    pub fn chunk_vectors(&self, c: usize) -> &[f32] {
        let (a, b) =
            if self.windows.is_empty() { (c, c + 1) } else { (self.windows[c] as usize, self.windows[c + 1] as usize) };
        &self.vectors[a * self.dim..b * self.dim]
    }

    /// Chunk `c`'s vector nearest to `query` (its only one when it has no windows).
    pub fn nearest_vector(&self, c: usize, query: &[f32]) -> &[f32] {
        let rows = self.chunk_vectors(c).chunks_exact(self.dim);
        rows.max_by(|a, b| dot(query, a).total_cmp(&dot(query, b))).unwrap_or(&[])
    }

    /// `dense(q, c)`: the cosine of `query` with chunk `c`'s best window (type docs).
    pub fn score(&self, c: usize, query: &[f32]) -> f32 {
        self.chunk_vectors(c).chunks_exact(self.dim).map(|v| dot(query, v)).fold(f32::NEG_INFINITY, f32::max)
    }

    /// The chunk of row `row`.
    fn chunk_of(&self, row: u32) -> u32 {
        if self.owner.is_empty() {
            row
        } else {
            self.owner[row as usize]
        }
    }

    /// Exact score of `query` against every kept chunk; the `k` best.
    pub fn exact(&self, query: &[f32], allowed: Option<&Bitset>, k: usize) -> Vec<(u32, f32)> {
        match allowed {
            Some(a) => top_k(a.iter().map(|i| (i as u32, self.score(i, query))), k),
            None => top_k((0..self.len()).map(|i| (i as u32, self.score(i, query))), k),
        }
    }

    /// The `k` most similar kept chunks with their exact score, best first.
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
        let mut seen = std::collections::HashSet::new();
        let found: Vec<(u32, f32)> = graph
            .search(&q, &mut search)
            .map(|item| self.chunk_of(*item.value))
            .filter(|&c| allowed.is_none_or(|a| a.contains(c as usize)))
            .filter(|&c| seen.insert(c))
            .map(|c| (c, self.score(c as usize, query)))
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
    fn the_beam_grows_with_the_windows_a_chunk_really_has() {
        // One vector a chunk: the plain beam.
        assert_eq!(beam(1000, 1000), EF_SEARCH);
        // 1.17 windows a chunk (fin-calls with 128-token windows): 300 rows, not 2 × 256.
        assert_eq!(beam(1170, 1000), 300);
        assert_eq!(beam(2000, 1000), 2 * EF_SEARCH);
        // No chunks: no division by zero.
        assert_eq!(beam(0, 0), EF_SEARCH);
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
                assert!((s - dot(q, idx.chunk_vectors(c as usize))).abs() < 1e-6);
            }
            hit += approx.iter().filter(|p| exact.contains(&p.0)).count();
        }
        let recall = hit as f64 / 500.0;
        assert!(recall >= 0.98, "recall@10 {recall}");
    }

    #[test]
    fn a_chunk_in_windows_is_found_by_any_window_and_scored_by_its_best() {
        // 1,500 chunks of two windows each: the graph holds 3,000 rows.
        let (chunks, dim) = (1500, 24);
        let rows = random_vectors(2 * chunks, dim, 11);
        let offsets: Vec<u32> = (0..=chunks as u32).map(|c| 2 * c).collect();
        let idx = DenseIndex::build_windows_with(dim, rows.clone(), offsets.clone(), 0).unwrap();
        assert_eq!((idx.len(), idx.vector_count()), (chunks, 2 * chunks));
        assert_eq!(idx.window_offsets(), offsets);
        for c in [0usize, 700, 1499] {
            for w in [0, 1] {
                let q = &rows[(2 * c + w) * dim..(2 * c + w + 1) * dim];
                let (exact, approx) = (idx.exact(q, None, 5), idx.search(q, None, 5));
                assert_eq!((exact[0].0, approx[0].0), (c as u32, c as u32), "chunk {c} by its window {w}");
                assert!((approx[0].1 - 1.0).abs() < 1e-5);
                assert_eq!(idx.nearest_vector(c, q), q);
                // Each chunk once, whichever of its windows was found.
                let mut ids: Vec<u32> = approx.iter().map(|h| h.0).collect();
                ids.dedup();
                assert_eq!(ids.len(), 5);
            }
        }
        // Filters are by chunk, not by row.
        let mut allowed = Bitset::empty(chunks);
        (0..chunks).step_by(3).for_each(|c| allowed.insert(c));
        let q = &rows[(2 * 700 + 1) * dim..(2 * 700 + 2) * dim];
        let got = idx.search(q, Some(&allowed), 10);
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|h| (h.0 as usize).is_multiple_of(3)));
    }

    #[test]
    fn window_offsets_must_cover_every_row_and_give_each_chunk_one() {
        let rows = random_vectors(4, 8, 1);
        for (offsets, why) in [
            (vec![0, 1, 1, 4], "none for chunk 1"),
            (vec![0, 2, 3], "from 0 to 4"),
            (vec![1, 2, 4], "from 0 to 4"),
            (vec![], "from 0 to 4"),
        ] {
            let err = DenseIndex::build_windows_with(8, rows.clone(), offsets.clone(), EXACT_ONLY_BELOW)
                .err()
                .expect("refused");
            assert!(err.contains(why), "{offsets:?}: {err}");
        }
        // One row per chunk is the plain index.
        let plain = DenseIndex::build_windows_with(8, rows.clone(), vec![0, 1, 2, 3, 4], EXACT_ONLY_BELOW).unwrap();
        assert_eq!(plain.len(), 4);
        assert_eq!(plain.chunk_vectors(2), &rows[16..24]);
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
