//! `sextant bench`: per-stage latency, HNSW recall against exact search, index load time,
//! at the size of a real index and at a synthetic larger size made from it.
//!
//! The synthetic index repeats the real chunks with variations: each copy's dense vector
//! is the original plus Gaussian-like noise (renormalised), its SPLADE weights are
//! jittered with some terms dropped, and its BM25 text drops a share of the words. No
//! model runs to make it, so a 100k-chunk index takes minutes, not hours; query encoding
//! is measured on the real models either way.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use sextant_core::build::{encode_inputs, encoder_input};
use sextant_core::corpus::{load_beir, Chunk};
use sextant_core::encode::{CrossEncoder, ModelSet, SparseVector};
use sextant_core::index::{Bm25Index, DenseIndex, Index, SpladeIndex, EXACT_ONLY_BELOW};
use sextant_core::pipeline::{
    open_engine, rrf_fuse, CrossEncoderReranker, Engine, FusionConfig, Path, SearchRequest, DEFAULT_PER_PATH_K,
};
use sextant_core::storage::LocalDir;

use crate::cli::BenchArgs;
use crate::indexes::{beir_index, cache_dir};
use crate::jsonl::write_jsonl;
use crate::report::{BenchReport, PeerSamples, ScaleResult};

/// Runs `sextant bench`: every stage's latency on the set's real index and at each
/// synthetic scale, printed as tables or JSON lines, with an optional plotted report.
pub fn command(args: BenchArgs, models: &ModelSet) -> Result<()> {
    let BenchArgs { beir, queries, scale, passages, json, export, report, peer, build } = args;
    // Read first: a bad samples file should not cost a benchmark run.
    let peer = peer.as_deref().map(PeerSamples::read).transpose()?;
    let set = load_beir(&beir, "test")?;
    let engine = open_engine(Arc::new(beir_index(&beir, &set, models, &build)?), models)?;
    let qs: Vec<String> = set.queries.iter().take(queries).map(|q| q.1.clone()).collect();
    let texts = self::passages(engine.index(), passages);
    let throughput = if texts.is_empty() { None } else { Some(passage_throughput(&engine, &texts)?) };
    if let Some(dir) = &export {
        export_common(dir, &qs, &texts)?;
    }
    let measure = |engine: &Engine, label: &str| -> Result<ScaleResult> {
        let (mut figures, rows) = run(engine, &qs, label)?;
        if let Some((both, dense, sparse)) = throughput {
            figures.build_chunks_per_s = both;
            figures.build_dense_chunks_per_s = dense;
            figures.build_sparse_chunks_per_s = sparse;
            figures.build_passages = texts.len();
        }
        if let Some(dir) = &export {
            export_index(dir, engine.index())?;
        }
        match json {
            true => println!("{}", serde_json::to_string(&figures)?),
            false => print_table(&figures, &rows),
        }
        Ok(ScaleResult { figures, stages: rows })
    };
    let mut scales = vec![measure(&engine, "real index")?];
    // The cross-encoder is timed for the table, and for a report's chart.
    if !json || report.is_some() {
        if let Some(dir) = &models.reranker {
            let rr = CrossEncoderReranker::new(CrossEncoder::load(dir)?, "reranker");
            let model = dir.file_name().and_then(|n| n.to_str()).unwrap_or("(unnamed)");
            let row = rerank50(&engine, &qs, &rr, model)?;
            if !json {
                print_row(&row);
            }
            scales[0].stages.push(row);
        }
    }
    if !json {
        load_time(engine.index())?;
    }
    for n in scale {
        let big = scaled(&engine, n, &cache_dir().join("bench"))?;
        scales.push(measure(&big, &format!("synthetic {n}"))?);
        if !json {
            load_time(big.index())?;
        }
    }
    if let Some(dir) = report {
        let set = beir.file_name().and_then(|n| n.to_str()).unwrap_or("beir").to_string();
        let report = BenchReport { set, scales, peer, command: crate::report::command_line() };
        let page = crate::report::write_bench(&dir, &report)?;
        eprintln!("report written to {}", page.display());
    }
    Ok(())
}

/// Latency summary of one stage, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Stats {
    /// Median: the sample at rank `round((n − 1) · 0.5)` of the sorted samples.
    pub p50: f64,
    /// 99th percentile: the sample at rank `round((n − 1) · 0.99)`.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
}

/// The summary of `xs` (milliseconds), nearest-rank percentiles as [`Stats`] says.
pub fn stats(xs: &[f64]) -> Stats {
    let mut xs = xs.to_vec();
    xs.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| xs[((xs.len() as f64 - 1.0) * q).round() as usize];
    Stats { p50: at(0.5), p99: at(0.99), mean: xs.iter().sum::<f64>() / xs.len() as f64 }
}

fn row(name: &str, s: &Stats, baseline: &str) {
    println!("| {name:<38} | {:>8.3} | {:>8.3} | {:>8.3} | {baseline} |", s.p50, s.p99, s.mean);
}

fn time<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed().as_secs_f64() * 1e3)
}

/// xorshift, deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1_000_000) as f32 / 1_000_000.0
    }
    fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.next()).sum::<f32>() - 2.0
    }
}

/// What a synthetic index of `target` chunks is made of: each chunk's text, dense vectors
/// (its windows'), SPLADE vector and chunk record (its text left empty).
pub struct SyntheticParts {
    /// BM25 texts.
    pub texts: Vec<String>,
    /// Each chunk's dense vectors, one unit row of `dim` per window (as its source chunk).
    pub vectors: Vec<Vec<f32>>,
    /// SPLADE vectors.
    pub sparse: Vec<SparseVector>,
    /// Chunk records (empty text).
    pub chunks: Vec<Chunk>,
}

/// Makes `target` chunks by repeating `base`'s with variations.
pub fn synthetic_parts(base: &Index, target: usize) -> SyntheticParts {
    let n = base.chunks.len();
    let dim = base.dense.dim;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut parts = SyntheticParts {
        texts: Vec::with_capacity(target),
        vectors: Vec::with_capacity(target),
        sparse: Vec::with_capacity(target),
        chunks: Vec::with_capacity(target),
    };
    // Forward SPLADE vectors, rebuilt from the inverted lists.
    let mut forward = vec![SparseVector::default(); n];
    for term in 0..base.splade.inverted.num_terms() as u32 {
        let (cs, ws) = base.splade.inverted.postings(term);
        for (&c, &w) in cs.iter().zip(ws) {
            forward[c as usize].ids.push(term);
            forward[c as usize].weights.push(w);
        }
    }
    for i in 0..target {
        let src = i % n;
        let copy = i / n;
        let mut rows = Vec::with_capacity(base.dense.chunk_vectors(src).len());
        for v in base.dense.chunk_vectors(src).chunks_exact(dim) {
            let noisy: Vec<f32> = v.iter().map(|x| x + if copy == 0 { 0.0 } else { 0.02 * rng.normal() }).collect();
            let norm = noisy.iter().map(|x| x * x).sum::<f32>().sqrt();
            rows.extend(noisy.iter().map(|x| x / norm));
        }
        parts.vectors.push(rows);
        let text = &base.chunks[src].text;
        parts.texts.push(if copy == 0 {
            text.clone()
        } else {
            text.split(' ').filter(|_| rng.next() > 0.15).collect::<Vec<_>>().join(" ")
        });
        let mut sv = SparseVector::default();
        for (&id, &w) in forward[src].ids.iter().zip(&forward[src].weights) {
            if copy == 0 || rng.next() > 0.1 {
                sv.ids.push(id);
                sv.weights.push(if copy == 0 { w } else { w * (0.8 + 0.4 * rng.next()) });
            }
        }
        parts.sparse.push(sv);
        parts.chunks.push(Chunk { doc: base.chunks[src].doc, span: base.chunks[src].span, text: String::new() });
    }
    parts
}

/// Builds an index of `target` chunks by repeating `base` with variations.
pub fn synthesize(base: &Index, target: usize) -> Result<Index> {
    let SyntheticParts { texts, vectors, sparse, mut chunks } = synthetic_parts(base, target);
    let bm25 = Bm25Index::build(texts.iter().map(|s| s.as_str()), base.bm25.params);
    let splade = SpladeIndex::build(base.splade.inverted.num_terms(), &sparse);
    let dense = DenseIndex::build_chunks(base.dense.dim, &vectors, EXACT_ONLY_BELOW).map_err(anyhow::Error::msg)?;
    for (c, t) in chunks.iter_mut().zip(texts) {
        c.text = t;
    }
    let mut manifest = base.manifest.clone();
    manifest.chunks = target;
    Ok(Index::from_parts(manifest, base.documents.to_vec(), chunks, dense, bm25, splade)?)
}

/// The figures of one scale, as `sextant bench --json` prints them (one object per line).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// `real index` or `synthetic N`.
    pub scale: String,
    /// Chunks in the index.
    pub chunks: usize,
    /// Queries timed.
    pub queries: usize,
    /// The inference backend.
    pub backend: String,
    /// What `/v1/search` runs (every path, fused; no cross-encoder), end to end, timed
    /// question after question with nothing in between (as a server answers them).
    pub search_p50_ms: f64,
    /// 99th percentile of the same.
    pub search_p99_ms: f64,
    /// Tokenizing a query (MiniLM's tokenizer), part of the encode figures.
    pub tokenize_p50_ms: f64,
    /// Dense query encoding (tokenize + MiniLM).
    pub encode_dense_p50_ms: f64,
    /// 99th percentile of the same.
    pub encode_dense_p99_ms: f64,
    /// SPLADE query encoding (tokenize + SPLADE-tiny + pooling).
    pub encode_sparse_p50_ms: f64,
    /// 99th percentile of the same.
    pub encode_sparse_p99_ms: f64,
    /// Both query encoders as a search runs them.
    pub encode_both_p50_ms: f64,
    /// 99th percentile of the same.
    pub encode_both_p99_ms: f64,
    /// Dense HNSW top-50.
    pub dense_path_p50_ms: f64,
    /// BM25 top-50.
    pub bm25_path_p50_ms: f64,
    /// SPLADE top-50.
    pub splade_path_p50_ms: f64,
    /// The engine's default fusion (z-scores by document, agreement weights) of three
    /// lists of 50.
    pub fuse_p50_ms: f64,
    /// The same search with 50 candidates per path (the earlier default) instead of
    /// `DEFAULT_PER_PATH_K`, timed query by query beside it.
    pub search_50_p50_ms: f64,
    /// The same search without dense feedback (the last release's fusion), timed query by
    /// query beside it.
    pub search_no_feedback_p50_ms: f64,
    /// HNSW recall@10 against exact search.
    pub hnsw_recall_at_10: f64,
    /// Passages encoded per second by both encoders, as a build encodes them.
    pub build_chunks_per_s: f64,
    /// Passages per second, dense encoder alone.
    pub build_dense_chunks_per_s: f64,
    /// Passages per second, SPLADE encoder alone.
    pub build_sparse_chunks_per_s: f64,
    /// Passages timed for the build figures.
    pub build_passages: usize,
}

/// Passage-encoding throughput on `passages` (encoder inputs): each encoder alone, then
/// both as a build runs them. Returns (both, dense, sparse) in passages per second.
pub fn passage_throughput(engine: &Engine, passages: &[String]) -> Result<(f64, f64, f64)> {
    let (dense, sparse) = (engine.dense_encoder()?, engine.sparse_encoder()?);
    let refs: Vec<&str> = passages.iter().map(|s| s.as_str()).collect();
    let warm = &refs[..refs.len().min(16)];
    dense.embed_batch(warm)?;
    sparse.encode_batch(warm)?;
    let n = passages.len() as f64;
    let (r, d_ms) = time(|| dense.embed_batch(&refs));
    r?;
    let (r, s_ms) = time(|| sparse.encode_batch(&refs));
    r?;
    let (r, both_ms) = time(|| encode_inputs(passages, dense, sparse));
    r?;
    Ok((n / (both_ms / 1e3), n / (d_ms / 1e3), n / (s_ms / 1e3)))
}

/// The encoder inputs of the first `n` chunks of `index`, as a build encodes them (the
/// title in full: the tokenizer cuts what exceeds the window).
pub fn passages(index: &Index, n: usize) -> Vec<String> {
    (0..index.chunks.len().min(n))
        .map(|i| encoder_input(&index.document_of(i as u32).title, &index.chunks[i]))
        .collect()
}

/// One row of a stage table: the stage, every sample timed, their summary, and a baseline
/// to read it beside.
#[derive(Debug, Clone)]
pub struct StageRow {
    /// The stage's name in reports and in a peer's samples (`scripts/bench/peer_bench.py
    /// --samples`): `encode_dense`, `encode_sparse`, `encode_both`, `encode_both_in_a_row`,
    /// `encode_both_after_idle`, `path_dense`, `path_dense_exact`, `path_bm25`,
    /// `path_splade`, `fuse`, `search_rest`, `search_total`, `search_total_50`,
    /// `search_total_no_feedback`, `rerank_50`.
    pub key: &'static str,
    /// The row's label in the table.
    pub name: String,
    /// Every sample, in milliseconds, in the order they were timed.
    pub samples_ms: Vec<f64>,
    /// Their summary.
    pub stats: Stats,
    /// A figure to read beside it (may be empty).
    pub baseline: String,
}

impl StageRow {
    fn new(key: &'static str, name: &str, samples_ms: Vec<f64>, baseline: String) -> StageRow {
        StageRow { key, name: name.to_string(), stats: stats(&samples_ms), samples_ms, baseline }
    }
}

/// Times every stage over `queries` against `engine`.
pub fn run(engine: &Engine, queries: &[String], label: &str) -> Result<(Figures, Vec<StageRow>)> {
    let index = engine.index();
    let (mut tok, mut rest) = (vec![], vec![]);
    let (mut enc_d, mut enc_s, mut prep, mut dense, mut bm25, mut splade, mut exact, mut fuse, mut total) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut rrf, mut total50, mut total_no_feedback) = (vec![], vec![], vec![]);
    let mut hit = 0usize;
    let mut want = 0usize;
    for q in queries.iter().take(10) {
        let _ = engine.search(&SearchRequest::new(q.clone(), 10));
    }
    let search_request = |q: &String| {
        let mut req = SearchRequest::new(q.clone(), 10);
        req.rerank = false;
        req
    };
    // The search as a server answers it: question after question with nothing in between,
    // as the peer's embed + hybrid queries are timed (`scripts/bench/peer_bench.py`). The
    // stage timings below run other work between two questions (each path alone, an exact
    // scan of every vector), which slows the next question's encoders (docs/quality.md,
    // "Where the encoders' extra time comes from").
    for q in queries {
        let (out, ms) = time(|| engine.search(&search_request(q)));
        total.push(ms);
        if let Ok(out) = out {
            // What the stages the engine times leave over: filters, hits, provenance.
            let t = &out.timings;
            let path = |p| t.paths_ms.get(&p).copied().unwrap_or(0.0);
            let paths = path(Path::Dense).max(path(Path::Bm25) + path(Path::Splade));
            rest.push(t.total_ms - t.encode_ms - paths - t.fuse_ms - t.rerank_ms);
        }
    }
    // Each encoder over every query in turn (as a peer times its model), then the stages of
    // a search query by query.
    let (dense_encoder, sparse_encoder) = (engine.dense_encoder()?, engine.sparse_encoder()?);
    for q in queries {
        tok.push(time(|| dense_encoder.tokenizer().encode(q)).1);
    }
    for q in queries {
        enc_d.push(time(|| dense_encoder.embed(q)).1);
    }
    for q in queries {
        enc_s.push(time(|| sparse_encoder.encode(q)).1);
    }
    // Both encoders as a search runs them, question after question with nothing between:
    // beside `encode_both` (the same inside the stage loop) it tells what the paths' work
    // between two questions costs the encoders.
    let encode_both = |q: &String| time(|| engine.prepare(q, &Path::ALL).map(|_| ())).1;
    let prep_in_a_row: Vec<f64> = queries.iter().map(encode_both).collect();
    // And after 4 ms of idling, as a server answers a question that comes alone: the
    // encoders' thread pool and the second core have gone to sleep.
    let prep_after_idle: Vec<f64> = queries
        .iter()
        .map(|q| {
            std::thread::sleep(std::time::Duration::from_millis(4));
            encode_both(q)
        })
        .collect();
    for q in queries {
        let ((pq, _), t) = time(|| engine.prepare(q, &Path::ALL).expect("encode"));
        prep.push(t);
        let qv = pq.dense.clone().context("dense vector")?;
        let (d, t) = time(|| index.dense.search(&qv, None, 50));
        dense.push(t);
        let (b, t) = time(|| index.bm25.search(q, None, 50));
        bm25.push(t);
        let (s, t) = time(|| index.splade.search(pq.sparse.as_ref().expect("sparse"), None, 50));
        splade.push(t);
        let (e, t) = time(|| index.dense.exact(&qv, None, 10));
        exact.push(t);
        // The engine's own fusion of the three lists (its default: z-scores by document,
        // agreement weights), and plain RRF of the same chunks beside it.
        let exact10: Vec<u32> = e.iter().map(|h| h.0).collect();
        hit += d.iter().take(10).filter(|h| exact10.contains(&h.0)).count();
        let scored = [d, b, s];
        fuse.push(time(|| engine.fuse(&FusionConfig::default(), q, &Path::ALL, &scored)).1);
        let lists: Vec<Vec<u32>> = scored.iter().map(|l| l.iter().map(|h| h.0).collect()).collect();
        rrf.push(time(|| rrf_fuse(&lists, None, 60.0, usize::MAX)).1);
        want += exact10.len();
    }
    // The two baselines, each paired question by question with the default search.
    let mut paired = vec![];
    for q in queries {
        let req = search_request(q);
        let mut shallow = req.clone();
        shallow.per_path_k = 50;
        let mut no_feedback = req.clone();
        no_feedback.fusion = FusionConfig { feedback: 0.0, ..FusionConfig::default() };
        // The baselines first on every other query, so neither side always runs warm.
        let baselines_first = paired.len() % 2 == 0;
        if baselines_first {
            total50.push(time(|| engine.search(&shallow)).1);
            total_no_feedback.push(time(|| engine.search(&no_feedback)).1);
        }
        paired.push(time(|| engine.search(&req)).1);
        if !baselines_first {
            total50.push(time(|| engine.search(&shallow)).1);
            total_no_feedback.push(time(|| engine.search(&no_feedback)).1);
        }
    }
    let (sd, ss, sp) = (stats(&enc_d), stats(&enc_s), stats(&prep));
    let (dstats, estats, bstats, sstats, fstats, t) =
        (stats(&dense), stats(&exact), stats(&bm25), stats(&splade), stats(&fuse), stats(&total));
    let (rstats, t50, t_no_feedback) = (stats(&rrf), stats(&total50), stats(&total_no_feedback));
    let t_paired = stats(&paired);
    let slower = sd.p50.max(ss.p50);
    let figures = Figures {
        scale: label.to_string(),
        chunks: index.chunks.len(),
        queries: queries.len(),
        backend: engine.dense_encoder()?.backend().to_string(),
        search_p50_ms: t.p50,
        search_p99_ms: t.p99,
        tokenize_p50_ms: stats(&tok).p50,
        encode_dense_p50_ms: sd.p50,
        encode_dense_p99_ms: sd.p99,
        encode_sparse_p50_ms: ss.p50,
        encode_sparse_p99_ms: ss.p99,
        encode_both_p50_ms: sp.p50,
        encode_both_p99_ms: sp.p99,
        dense_path_p50_ms: dstats.p50,
        bm25_path_p50_ms: bstats.p50,
        splade_path_p50_ms: sstats.p50,
        fuse_p50_ms: fstats.p50,
        search_50_p50_ms: t50.p50,
        search_no_feedback_p50_ms: t_no_feedback.p50,
        hnsw_recall_at_10: hit as f64 / want.max(1) as f64,
        ..Figures::default()
    };
    let rows = vec![
        StageRow::new("encode_dense", "encode query: dense (MiniLM-L6)", enc_d, String::new()),
        StageRow::new("encode_sparse", "encode query: SPLADE-tiny", enc_s, String::new()),
        StageRow::new(
            "encode_both",
            "encode query: both (as a search runs them)",
            prep,
            format!("slower encoder alone {slower:.3}"),
        ),
        StageRow::new(
            "encode_both_in_a_row",
            "encode query: both, question after question",
            prep_in_a_row,
            String::new(),
        ),
        StageRow::new(
            "encode_both_after_idle",
            "encode query: both, each after 4 ms idle",
            prep_after_idle,
            String::new(),
        ),
        StageRow::new(
            "path_dense",
            "path: dense HNSW top-50 (+exact rescoring)",
            dense,
            format!("exact scan top-10 p50 {:.3}", estats.p50),
        ),
        StageRow::new("path_dense_exact", "path: dense exact scan top-10", exact, String::new()),
        StageRow::new("path_bm25", "path: BM25 top-50", bm25, String::new()),
        StageRow::new("path_splade", "path: SPLADE top-50", splade, String::new()),
        StageRow::new(
            "fuse",
            "fusion of 3×50 (Engine::fuse: z-scores by document, agreement weights)",
            fuse,
            format!("RRF of the same chunks p50 {:.3}", rstats.p50),
        ),
        StageRow::new("search_rest", "search: outside encoders, paths and fusion", rest, String::new()),
        StageRow::new(
            "search_total",
            "search total (no cross-encoder), questions in a row",
            total,
            format!("target ≤ 1.3 × {slower:.3} = {:.3}", 1.3 * slower),
        ),
        StageRow::new(
            "search_total_50",
            "search total, 50 candidates per path (the earlier depth)",
            total50,
            format!("the default's {DEFAULT_PER_PATH_K} take {:.2} × as long (p50)", t_paired.p50 / t50.p50.max(1e-9)),
        ),
        StageRow::new(
            "search_total_no_feedback",
            "search total without dense feedback (as the last release)",
            total_no_feedback,
            format!("the default takes {:.2} × as long (p50)", t_paired.p50 / t_no_feedback.p50.max(1e-9)),
        ),
    ];
    Ok((figures, rows))
}

/// Prints one scale's figures as a Markdown table.
pub fn print_table(figures: &Figures, rows: &[StageRow]) {
    println!(
        "\n### {}: {} chunks, {} queries, {} backend\n",
        figures.scale, figures.chunks, figures.queries, figures.backend
    );
    println!("| stage | p50 ms | p99 ms | mean ms | baseline |");
    println!("|---|---:|---:|---:|---|");
    for r in rows {
        print_row(r);
    }
    println!("\nHNSW recall@10 against exact search: {:.4} (target ≥ 0.98)", figures.hnsw_recall_at_10);
    if figures.build_passages > 0 {
        println!(
            "passage encoding, {} passages: {:.1}/s both encoders as a build runs them (dense alone {:.1}/s, SPLADE alone {:.1}/s)",
            figures.build_passages, figures.build_chunks_per_s, figures.build_dense_chunks_per_s, figures.build_sparse_chunks_per_s
        );
    }
}

/// Writes `queries.jsonl` and `passages.jsonl` (one JSON string per line) under `dir`.
pub fn export_common(dir: &std::path::Path, queries: &[String], passages: &[String]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, lines) in [("queries.jsonl", queries), ("passages.jsonl", passages)] {
        write_jsonl(&dir.join(name), lines)?;
    }
    Ok(())
}

/// Writes an index's chunks for a peer under `dir/chunks-N/`: `texts.jsonl` (each
/// chunk's BM25 text: title and chunk text) and `vectors.f32` (one dense vector per chunk,
/// `N × dim` little-endian, in chunk order) with `dim.txt`. A chunk read in windows is
/// given the normalised mean of its windows: the peer holds one vector per chunk and is
/// timed, not scored.
pub fn export_index(dir: &std::path::Path, index: &Index) -> Result<()> {
    let out = dir.join(format!("chunks-{}", index.chunks.len()));
    std::fs::create_dir_all(&out)?;
    let texts =
        index.chunks.iter().enumerate().map(|(i, c)| format!("{}\n{}", index.document_of(i as u32).title, c.text));
    write_jsonl(&out.join("texts.jsonl"), texts)?;
    let dim = index.dense.dim;
    let mut bytes = Vec::with_capacity(index.chunks.len() * dim * 4);
    for c in 0..index.chunks.len() {
        let mut mean = vec![0f32; dim];
        for v in index.dense.chunk_vectors(c).chunks_exact(dim) {
            mean.iter_mut().zip(v).for_each(|(m, x)| *m += x);
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        bytes.extend(mean.iter().flat_map(|x| (x / norm).to_le_bytes()));
    }
    std::fs::write(out.join("vectors.f32"), bytes)?;
    std::fs::write(out.join("dim.txt"), index.dense.dim.to_string())?;
    Ok(())
}

/// Times a reranker over 50 passages (10 queries); the row names the model (`model`: its
/// directory's name), and says when it is the untrained stand-in.
pub fn rerank50(
    engine: &Engine,
    queries: &[String],
    reranker: &sextant_core::pipeline::CrossEncoderReranker,
    model: &str,
) -> Result<StageRow> {
    let index = engine.index();
    let passages: Vec<&str> = index.chunks.iter().take(50).map(|c| c.text.as_str()).collect();
    let times: Vec<f64> = queries.iter().take(10).map(|q| time(|| reranker.score(q, &passages)).1).collect();
    let what = match model.contains("standin") {
        true => format!("the stand-in cross-encoder {model}: untrained, timing only"),
        false => format!("cross-encoder {model}"),
    };
    Ok(StageRow::new("rerank_50", &format!("rerank 50 passages ({what})"), times, String::new()))
}

/// Prints one stage row, as [`print_table`] prints its rows.
pub fn print_row(r: &StageRow) {
    row(&r.name, &r.stats, &r.baseline);
}

/// Measures saving and loading `index` (verification included) in a temporary directory.
pub fn load_time(index: &Index) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("sextant-bench-{}", std::process::id()));
    let storage = LocalDir::new(&dir);
    let (_, save_ms) = time(|| index.save(&storage));
    let mut loads = Vec::new();
    for _ in 0..3 {
        let (r, t) = time(|| Index::load(&storage));
        r?;
        loads.push(t);
    }
    let bytes: u64 = std::fs::read_dir(&dir)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
    println!(
        "\nindex load ({} chunks, {:.1} MB, checksums verified): {:.1} ms (best of 3; save {:.0} ms)",
        index.chunks.len(),
        bytes as f64 / 1e6,
        loads.iter().cloned().fold(f64::MAX, f64::min),
        save_ms
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// An engine over a synthetic index of `target` chunks, sharing the encoders of `engine`.
///
/// Synthesis is deterministic, so the result is kept under `cache` (keyed by the base
/// index's checksums and the size) and reused by later runs; the load-time figure is
/// measured separately on a fresh copy either way.
pub fn scaled(engine: &Engine, target: usize, cache: &std::path::Path) -> Result<Engine> {
    let key = sextant_core::index::format::sha256_hex(&serde_json::to_vec(&engine.index().manifest.files)?);
    let dir = cache.join(format!("synthetic-{target}-{}", &key[..12]));
    let (index, reused) = crate::indexes::cached_index(&dir, |dir| {
        let (idx, ms) = time(|| synthesize(engine.index(), target));
        eprintln!("synthesised {target} chunks in {:.1}s", ms / 1e3);
        let idx = idx?;
        idx.save(&LocalDir::new(dir))?;
        Ok(idx)
    })?;
    if reused {
        eprintln!("reusing the synthetic {target}-chunk index in {}", dir.display());
    }
    Ok(engine.sharing_encoders(Arc::new(index), None))
}

/// Cold start from S3, phase by phase: publishes `index` under `s3`/`label` as a new
/// version, then three times builds a client, reads `CURRENT`, downloads, verifies and
/// decodes the files and opens the models, as a function does at cold start. Beside it,
/// the baseline: the same index loaded from a local directory (memory-mapped).
pub fn cold_start(index: &Index, s3: &str, label: &str, models: &sextant_core::encode::ModelSet) -> Result<()> {
    use sextant_aws::refresh::open_from_s3;
    use sextant_aws::versions::VersionedIndex;
    use sextant_core::pipeline::SharedModels;
    use sextant_core::storage::{Location, MemStore};
    let Location::S3 { bucket, prefix } = Location::parse(s3)? else { anyhow::bail!("--s3 must be an s3:// location") };
    let (bucket_name, location_prefix) = (bucket.clone(), prefix.clone());
    let location = Location::S3 {
        bucket,
        prefix: format!("{}/{label}", prefix.trim_end_matches('/')).trim_start_matches('/').to_string(),
    };
    let files = MemStore::new(label);
    index.save(&files)?;
    let bytes = files.total_bytes();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let source = VersionedIndex::new(&sextant_aws::sdk_config().await, &location)?;
        let expected = source.pointer().await?;
        let (published, publish_ms) = {
            let t = Instant::now();
            (source.publish(&files, &expected, 2).await?, t.elapsed().as_secs_f64() * 1e3)
        };
        eprintln!("published {} ({:.1} MB) in {publish_ms:.0} ms", published.version, bytes as f64 / 1e6);
        let mut runs = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            // A new configuration and new models each run, as in a new process.
            let source = VersionedIndex::new(&sextant_aws::load_sdk_config().await, &location)?;
            let client_ms = t.elapsed().as_secs_f64() * 1e3;
            let loaded = open_from_s3(&source, &Arc::new(SharedModels::new(models.clone())), None).await?;
            runs.push((client_ms, loaded.timings, t.elapsed().as_secs_f64() * 1e3));
            drop(loaded); // freeing the index is not part of a cold start
        }
        runs.sort_by(|a, b| a.2.total_cmp(&b.2));
        let (client_ms, t, total) = runs[1];
        // The template's old way, for comparison: the two models fetched from S3 into /tmp at
        // cold start (the stand-in cross-encoder is not counted, though the old deployment
        // synced it too). Now they ship in a layer and are only loaded.
        let store = sextant_aws::S3Store::new(&sextant_aws::sdk_config().await, bucket_name.clone());
        let models_prefix = format!("{}/models", location_prefix.trim_end_matches('/'));
        let mut model_bytes = 0u64;
        for dir in [&models.dense, &models.sparse] {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
            for f in std::fs::read_dir(dir)? {
                let f = f?.path();
                if f.is_file() {
                    let bytes = std::fs::read(&f)?;
                    model_bytes += bytes.len() as u64;
                    let key = format!("{models_prefix}/{name}/{}", f.file_name().unwrap().to_string_lossy());
                    store.upload(&key, Arc::new(bytes)).await?;
                }
            }
        }
        let mut fetches = Vec::new();
        for _ in 0..3 {
            let tmp = std::env::temp_dir().join(format!("sextant-cold-models-{}", std::process::id()));
            let t = Instant::now();
            store.download_prefix(&models_prefix, &tmp).await?;
            fetches.push(t.elapsed().as_secs_f64() * 1e3);
            std::fs::remove_dir_all(&tmp).ok();
        }
        fetches.sort_by(f64::total_cmp);
        let fetch_ms = fetches[1];
        // Baseline: the same index from a local directory, and the same models.
        let dir = std::env::temp_dir().join(format!("sextant-cold-{}", std::process::id()));
        let local = LocalDir::new(&dir);
        index.save(&local)?;
        let mut local_runs = Vec::new();
        for _ in 0..3 {
            let (r, ms) = time(|| Index::load(&local));
            r?;
            local_runs.push(ms);
        }
        local_runs.sort_by(f64::total_cmp);
        std::fs::remove_dir_all(&dir).ok();
        println!(
            "\n### cold start from S3, {label}: {} chunks, {:.1} MB (median of 3)\n",
            index.chunks.len(),
            bytes as f64 / 1e6
        );
        println!("| phase | ms | baseline |");
        println!("|---|---:|---|");
        println!("| client | {client_ms:.0} | |");
        println!("| pointer (GET CURRENT) | {} | |", t.pointer_ms);
        println!("| download (manifest + ranged GETs) | {} | |", t.download_ms);
        println!(
            "| verify + decode | {} | local directory load (mmap, verified): {:.0} ms |",
            t.decode_ms, local_runs[1]
        );
        println!("| models: load from the function's layer ({} backend) | {} | |", sextant_core::encode::backend(), t.models_ms);
        println!("| **total** | **{total:.0}** | local load + models: {:.0} ms |", local_runs[1] + t.models_ms as f64);
        println!(
            "| had the models been fetched from S3 ({:.0} MB, as the template did before) | +{fetch_ms:.0} | total {:.0} ms |",
            model_bytes as f64 / 1e6,
            total + fetch_ms
        );
        Ok(())
    })
}

/// Measures whether MaxSim late interaction over the dense model's token vectors improves
/// the first `depth` of a hybrid ranking (no cross-encoder): the ranking alone, re-scored
/// by MaxSim, and both fused by RRF, on the same queries.
pub fn late_interaction(
    engine: Engine,
    set: &sextant_core::corpus::BeirSet,
    paths: Vec<Path>,
    depth: usize,
    name: &str,
) -> Result<()> {
    use sextant_kit::eval::evaluate_retriever;
    use sextant_kit::{EngineRetriever, HybridRetriever, LateInteractionRetriever, Retriever};
    let encoder = engine.dense_encoder()?.clone();
    let engine = Arc::new(engine);
    let mut template = SearchRequest::new("", depth);
    template.paths = paths;
    template.per_path_k = 100;
    template.rerank = false;
    template.max_per_document = Some(1);
    let first: Arc<dyn Retriever> = Arc::new(EngineRetriever::new(engine.clone(), template));
    // Every candidate passage's tokens are kept: SciFact's test candidates fit in ~2 GB.
    let late: Arc<dyn Retriever> = Arc::new(
        LateInteractionRetriever::new(Box::new(first.clone()), encoder)
            .with_first_stage_k(depth)
            .with_cache_capacity(20_000),
    );
    let fused = HybridRetriever::new(vec![Box::new(first.clone()), Box::new(late.clone())])?.with_candidates(depth);
    println!(
        "{name}: {} queries, first stage = hybrid top {depth} (one chunk per document, no cross-encoder)",
        set.queries.len()
    );
    println!("| ranking | nDCG@10 | Recall@10 | MRR@10 | time |\n|---|---|---|---|---|");
    let variants: [(&str, &dyn Retriever); 3] = [
        ("hybrid (baseline)", first.as_ref()),
        ("hybrid top-N re-scored by MaxSim", late.as_ref()),
        ("RRF(hybrid, MaxSim)", &fused),
    ];
    for (label, r) in variants {
        let (m, ms) = time(|| evaluate_retriever(r, set));
        let m = m?;
        println!("| {label} | {:.4} | {:.4} | {:.4} | {:.0} s |", m.ndcg_at_10, m.recall_at_10, m.mrr_at_10, ms / 1e3);
    }
    Ok(())
}
