//! Builds with the real models: lossless chunking, reuse, unchanged builds, damaged caches.

use std::sync::OnceLock;

use super::*;
use crate::encode::ModelSet;
use crate::index::format::ModelRef;
use crate::index::Bm25Params;
use crate::storage::MemStore;
use crate::testutil::{model_dir, test_document};

fn encoders() -> &'static (std::sync::Arc<DenseEncoder>, std::sync::Arc<SparseEncoder>) {
    static ENCODERS: OnceLock<(std::sync::Arc<DenseEncoder>, std::sync::Arc<SparseEncoder>)> = OnceLock::new();
    ENCODERS.get_or_init(|| {
        let models = ModelSet::under(&model_dir());
        (
            std::sync::Arc::new(DenseEncoder::load(&models.dense).unwrap()),
            std::sync::Arc::new(SparseEncoder::load(&models.sparse).unwrap()),
        )
    })
}

fn options(shard_chunks: usize) -> BuildOptions {
    BuildOptions {
        index_id: "t".into(),
        chunk_tokens: 64,
        chunk_overlap: 0,
        // Below the chunks' budget, so every build here reads most chunks in windows.
        dense_window: 32,
        bm25: Bm25Params::default(),
        dense_model: ModelRef { id: "d".into(), weights_sha256: "dense-sum".into() },
        sparse_model: ModelRef { id: "s".into(), weights_sha256: "sparse-sum".into() },
        shard_chunks,
    }
}

/// A segment of about 330 tokens: longer than the window, in sentences.
fn long_segment() -> String {
    (0..30)
        .map(|i| {
            format!("In quarter {i} the segment's operating income rose on pricing, volume and lower freight costs.")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn corpus(n: usize) -> Vec<Document> {
    (0..n)
        .map(|i| {
            let mut d = test_document(
                &format!("d{i}"),
                "KO",
                "2024-02-10",
                &[&format!("Document {i} opens with a short paragraph."), &long_segment(), "A closing line."],
            );
            d.title = format!("Annual report {i}");
            d
        })
        .collect()
}

fn run(documents: Vec<Document>, shard_chunks: usize, previous: &Previous) -> Built {
    let (dense, sparse) = encoders();
    let runner = InProcess { dense, sparse };
    build(
        documents,
        vec![("facts.bin".into(), b"facts".to_vec())],
        &options(shard_chunks),
        (dense.tokenizer(), sparse.tokenizer()),
        previous,
        &runner,
        &|_, _, _| {},
    )
    .unwrap()
}

#[test]
fn a_segment_longer_than_the_window_reaches_both_encoders_whole() {
    let (dense, sparse) = encoders();
    let built = run(corpus(1), 4, &Previous::none());
    let index = built.index.as_ref().unwrap();
    assert_eq!(built.report.tokens_beyond_window, 0);
    assert!(index.chunks.len() >= 6, "the long segment is cut: {} chunks", index.chunks.len());
    let doc = &index.documents[0];
    let text: Vec<char> = doc.text().chars().collect();
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    let mut joined = String::new();
    for (i, c) in index.chunks.iter().enumerate() {
        // Each chunk is exactly its range of the document's text ...
        let slice: String = text[c.span.char_start as usize..c.span.char_end as usize].iter().collect();
        assert_eq!(slice, c.text);
        let p = index.provenance(i as u32);
        assert_eq!(p.chars, c.span.char_start as usize..c.span.char_end as usize);
        // ... and fits both windows with the title in front.
        let input = encoder_input(&doc.title, c);
        for tok in [dense.tokenizer(), sparse.tokenizer()] {
            assert!(tok.count_tokens(&input) + 2 <= WINDOW, "chunk {i} overflows: {}", tok.count_tokens(&input));
        }
        joined.push_str(&c.text);
    }
    // Together the chunks hold the whole text: nothing but white space is left out.
    assert_eq!(squeeze(&joined), squeeze(&doc.text()));
}

#[test]
fn a_rebuild_reuses_every_vector_and_an_unchanged_build_writes_nothing() {
    let store = MemStore::new("mem://incremental");
    let first = run(corpus(3), 4, &Previous::none());
    let chunks = first.report.chunks;
    let built_offsets = first.index.as_ref().unwrap().dense.window_offsets();
    assert_eq!((first.report.chunks_encoded, first.report.chunks_reused), (chunks, 0));
    let report = first.save(&store, &Previous::none()).unwrap().report;
    let mut saved: BuildReport = serde_json::from_slice(&store.read(REPORT_FILE).unwrap()).unwrap();
    assert!((saved.seconds - report.seconds).abs() < 1e-9);
    saved.seconds = report.seconds;
    assert_eq!(saved, report);
    let before = Index::load(&store).unwrap();
    // The chunks (up to 64 tokens) are read by the dense encoder in windows of 32, and the
    // saved index keeps them.
    assert!(before.dense.vector_count() > chunks, "{} vectors for {chunks} chunks", before.dense.vector_count());
    assert_eq!(before.dense.window_offsets(), built_offsets);

    // The same inputs: nothing planned, encoded or written.
    let previous = Previous::read(&store);
    assert_eq!(previous.cache.len(), chunks);
    let same = run(corpus(3), 4, &previous);
    assert!(same.report.unchanged && same.index.is_none());
    assert_eq!((same.report.chunks_encoded, same.report.chunks_reused), (0, chunks));

    // One document more: only its chunks are encoded; the others' vectors are the cached ones.
    let grown = run(corpus(4), 4, &previous);
    let per_doc = chunks / 3;
    assert!(!grown.report.unchanged);
    assert_eq!((grown.report.chunks_encoded, grown.report.chunks_reused), (per_doc, chunks));
    let after = grown.index.as_ref().unwrap();
    assert_eq!(&after.dense.vectors[..before.dense.vectors.len()], &before.dense.vectors[..]);
    grown.save(&store, &previous).unwrap();
    assert_eq!(Index::load(&store).unwrap().chunks.len(), chunks + per_doc);
}

#[test]
fn a_damaged_cache_record_is_encoded_again_never_served() {
    let store = MemStore::new("mem://damaged");
    let first = run(corpus(2), 1024, &Previous::none());
    first.save(&store, &Previous::none()).unwrap();
    let good = Index::load(&store).unwrap();
    // Damage the first vector value of chunk 1 in the one shard file.
    let name = shard_file(0);
    let mut bytes = store.read(&name).unwrap();
    let value = good.dense.vectors[good.dense.dim].to_le_bytes();
    let at = bytes.windows(4).position(|w| w == value).unwrap();
    bytes[at] ^= 0x40;
    store.write(&name, &bytes).unwrap();

    let previous = Previous::read(&store);
    assert_eq!(previous.cache.rejected, 1);
    let rebuilt = run(corpus(3), 1024, &previous);
    let per_doc = good.chunks.len() / 2;
    assert_eq!(rebuilt.report.cache_rejected, 1);
    assert_eq!(rebuilt.report.chunks_encoded, per_doc + 1, "the new document's chunks and the damaged one");
    let index = rebuilt.index.unwrap();
    let (dim, v) = (good.dense.dim, &index.dense.vectors);
    let cosine: f32 = (0..dim).map(|i| v[dim + i] * good.dense.vectors[dim + i]).sum();
    assert!(cosine > 0.9999, "chunk 1 is encoded again, not read damaged: cosine {cosine}");
}

#[test]
fn shard_files_of_a_larger_previous_build_are_removed() {
    let store = MemStore::new("mem://stale");
    run(corpus(2), 2, &Previous::none()).save(&store, &Previous::none()).unwrap();
    let many = Previous::read(&store).manifest.unwrap().build.unwrap().encoded;
    assert!(many.len() > 2);
    let previous = Previous::read(&store);
    run(corpus(2), 1024, &previous).save(&store, &previous).unwrap();
    let manifest = read_manifest(&store).unwrap();
    assert_eq!(manifest.build.unwrap().encoded, vec![shard_file(0)]);
    assert!(many[1..].iter().all(|n| !store.exists(n).unwrap() && !store.exists(&keys_file(n)).unwrap()));
    assert!(store.exists("facts.bin").unwrap());
    // The shard file kept has its keys file beside it, listing its records in order.
    let keys = EncodedKeys::read(&store.read(&keys_file(&shard_file(0))).unwrap()).unwrap();
    let shard = EncodedShard::from_bytes("0", &store.read(&shard_file(0)).unwrap()).unwrap();
    assert!(shard.holds(&keys) && !keys.is_empty());
}

#[test]
fn a_chunk_repeating_another_is_encoded_once_and_counted_as_reused() {
    let mut twin = corpus(1);
    twin.push(Document { document_id: "twin".into(), ..twin[0].clone() });
    let built = run(twin, 4, &Previous::none());
    let r = &built.report;
    assert_eq!((r.chunks_encoded * 2, r.chunks_reused * 2), (r.chunks, r.chunks), "{r:?}");
    let index = built.index.unwrap();
    let half = index.dense.vectors.len() / 2;
    assert_eq!(index.dense.vectors[..half], index.dense.vectors[half..]);
}

/// A delta searched beside its index finds what a rebuild of both finds: the same dense and
/// SPLADE scores for every chunk, its new documents by BM25, and never a withdrawn one.
#[test]
fn a_delta_beside_its_index_is_searched_as_a_rebuild_would_be() {
    use std::sync::Arc;

    use crate::pipeline::{Engine, SearchRequest};

    let (dense, sparse) = encoders();
    let mut main_docs = corpus(3);
    main_docs.push(test_document(
        "fx",
        "AAPL",
        "2024-11-01",
        &["Foreign currency exchange rates weighed on gross margin."],
    ));
    let main = Index::build(main_docs.clone(), dense, sparse, &options(1024), &|_, _, _| {}).unwrap();
    let added = vec![
        test_document("azure", "MSFT", "2024-07-30", &["Azure and other cloud services revenue grew 29 percent."]),
        test_document("fx", "AAPL", "2024-11-01", &["A stronger dollar cut reported services revenue."]),
    ];
    let encoded = encode_documents(added.clone(), &options(1024), dense, sparse, &VectorCache::new()).unwrap();
    assert_eq!(encoded.len(), 2);
    assert!(encoded.iter().all(|d| d.chunks.len() == d.vectors.len() && !d.chunks.is_empty()));
    let fx = main.documents.iter().position(|d| d.document_id == "fx").unwrap() as u32;
    let live = main.with_delta(EncodedDocument::appended(&encoded), &[fx]).unwrap();
    assert_eq!((live.documents.len(), live.delta_chunks()), (6, 2));
    assert!(live.save(&MemStore::new("mem://delta")).is_err(), "a delta is compacted, never saved as it is");

    let mut rebuilt_docs = main_docs;
    rebuilt_docs.retain(|d| d.document_id != "fx");
    rebuilt_docs.extend(added);
    let rebuilt = Index::build(rebuilt_docs, dense, sparse, &options(1024), &|_, _, _| {}).unwrap();
    let cite = |index: &Index, hits: Vec<(u32, f32)>| -> Vec<(String, u32, i64)> {
        let mut v: Vec<(String, u32, i64)> = hits
            .into_iter()
            .map(|(c, s)| {
                (
                    index.document_of(c).document_id.clone(),
                    index.chunks[c as usize].span.char_start,
                    (s * 1e4).round() as i64,
                )
            })
            .collect();
        v.sort();
        v
    };
    let allowed = live.allowed(&Default::default());
    assert!(allowed.is_some(), "a withdrawn document makes every search filtered");
    for q in ["cloud services revenue", "foreign currency", "operating income rose on pricing"] {
        let qv = dense.embed_query(q).unwrap().0;
        let k = rebuilt.chunks.len();
        assert_eq!(
            cite(&live, live.dense_search(&qv, allowed.as_ref(), k)),
            cite(&rebuilt, rebuilt.dense.search(&qv, None, k)),
            "{q}"
        );
        let sv = sparse.encode(q).unwrap();
        assert_eq!(
            cite(&live, live.splade_search(&sv, allowed.as_ref(), k)),
            cite(&rebuilt, rebuilt.splade.search(&sv, None, k)),
            "{q}"
        );
    }
    let top = |index: Index, q: &str| -> Vec<String> {
        let engine = Engine::new(Arc::new(index), dense.clone(), sparse.clone(), None);
        let mut req = SearchRequest::new(q, 3);
        req.rerank = false;
        let out = engine.search(&req).unwrap();
        out.hits.iter().map(|h| engine.index().document_of(h.chunk).document_id.clone()).collect()
    };
    assert_eq!(
        top(live.with_delta(EncodedDocument::appended(&encoded), &[fx]).unwrap(), "Azure cloud revenue")[0],
        "azure"
    );
    let engine = Engine::new(Arc::new(live), dense.clone(), sparse.clone(), None);
    let fx_texts = |q: &str| -> Vec<String> {
        let mut req = SearchRequest::new(q, 50);
        req.rerank = false;
        let out = engine.search(&req).unwrap();
        let index = engine.index();
        out.hits
            .iter()
            .filter(|h| index.document_of(h.chunk).document_id == "fx")
            .map(|h| index.chunks[h.chunk as usize].text.clone())
            .collect()
    };
    let new_text = vec!["A stronger dollar cut reported services revenue.".to_string()];
    assert_eq!(fx_texts("stronger dollar services revenue"), new_text);
    let old = fx_texts("foreign currency exchange rates weighed on gross margin");
    assert!(old.iter().all(|t| *t == new_text[0]), "the withdrawn version is never served: {old:?}");
}

/// An index saved without its encoded shards still gives every vector back: a build of
/// the same documents over them encodes nothing and makes the same index.
#[test]
fn an_index_gives_back_its_own_vectors_for_the_next_build() {
    let (dense, sparse) = encoders();
    let docs = corpus(3);
    let index = Index::build(docs.clone(), dense, sparse, &options(1024), &|_, _, _| {}).unwrap();
    let vectors = index_vectors(&index, &options(1024), (dense.tokenizer(), sparse.tokenizer())).unwrap();
    assert_eq!(vectors.len(), index.chunks.len());
    let mut previous = Previous::none();
    previous.cache.insert(vectors);
    let runner = InProcess { dense, sparse };
    let built = build(
        docs,
        Vec::new(),
        &options(1024),
        (dense.tokenizer(), sparse.tokenizer()),
        &previous,
        &runner,
        &|_, _, _| {},
    )
    .unwrap();
    assert_eq!(built.report.chunks_encoded, 0);
    let again = built.index.unwrap();
    assert_eq!(again.dense.vectors, index.dense.vectors);
    assert_eq!(*again.splade, *index.splade);

    // A build with one vector a chunk gets back those of the chunks read whole, and none of
    // the others: those are other windows' vectors.
    let whole = BuildOptions { dense_window: 0, ..options(1024) };
    let given = index_vectors(&index, &whole, (dense.tokenizer(), sparse.tokenizer())).unwrap();
    let read_whole = (0..index.chunks.len()).filter(|&c| index.dense.chunk_vectors(c).len() == index.dense.dim).count();
    assert!(
        read_whole > 0 && read_whole < index.chunks.len(),
        "{read_whole} of {} chunks read whole",
        index.chunks.len()
    );
    assert_eq!(given.len(), read_whole);
    assert!(given.iter().all(|v| v.dense.len() == index.dense.dim));
}

/// A chunk read whole is one vector of its input under any dense window, so builds with
/// other windows share its vectors: a build with one vector a chunk, after a windowed
/// build, encodes only the chunks that build read in windows, and a windowed build after
/// it only those again; each makes the index a build from nothing makes. SPLADE reads every
/// chunk whole, so what is encoded again is encoded by the dense model only.
#[test]
fn a_build_with_other_dense_windows_encodes_only_the_chunks_it_reads_otherwise() {
    let (dense, sparse) = encoders();
    let runner = InProcess { dense, sparse };
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    // Chunks of up to 200 tokens: the long segments' longer than the default window of 128,
    // the short documents' shorter.
    let with_window = |window: usize| BuildOptions { chunk_tokens: 200, dense_window: window, ..options(4) };
    let documents = || {
        let short =
            (0..3).map(|i| test_document(&format!("s{i}"), "KO", "2024-02-10", &[&format!("Note {i} on dividends.")]));
        corpus(3).into_iter().chain(short).collect::<Vec<_>>()
    };
    let build_with = |window: usize, previous: &Previous| {
        build(documents(), Vec::new(), &with_window(window), tokenizers, previous, &runner, &|_, _, _| {}).unwrap()
    };
    let store = MemStore::new("mem://windows");
    build_with(DEFAULT_DENSE_WINDOW, &Previous::none()).save(&store, &Previous::none()).unwrap();
    let windowed = Index::load(&store).unwrap();
    let chunks = windowed.chunks.len();
    let in_windows = (0..chunks).filter(|&c| windowed.dense.chunk_vectors(c).len() > windowed.dense.dim).count();
    assert!(in_windows > 0 && in_windows < chunks, "{in_windows} of {chunks} chunks read in windows");
    let previous = Previous::read(&store);
    let whole = build_with(0, &previous);
    assert_eq!((whole.report.chunks_encoded, whole.report.chunks_reused), (in_windows, chunks - in_windows));
    let whole = whole.index.unwrap();
    let fresh = build_with(0, &Previous::none()).index.unwrap();
    let dim = windowed.dense.dim;
    for c in 0..chunks {
        let (got, want) = (whole.dense.chunk_vectors(c), fresh.dense.chunk_vectors(c));
        assert_eq!((got.len(), want.len()), (dim, dim), "chunk {c}: one vector");
        let cosine: f32 = got.iter().zip(want).map(|(a, b)| a * b).sum();
        assert!(cosine > 0.9999, "chunk {c}: cosine {cosine} with a build from nothing");
        if windowed.dense.chunk_vectors(c).len() == dim {
            assert_eq!(got, windowed.dense.chunk_vectors(c), "chunk {c} read whole: the windowed build's vector");
        }
    }
    assert_eq!(*whole.splade, *windowed.splade, "every SPLADE vector is the windowed build's");
    // What is encoded again is read by the dense encoder only: SPLADE reads every chunk's
    // input whole under any window, so the tasks carry the windowed build's SPLADE vectors.
    let planned = plan(documents(), &with_window(0), String::new(), tokenizers.0, tokenizers.1).unwrap();
    let tasks = planned.tasks(&previous.cache);
    assert_eq!(tasks.iter().map(|t| t.keys.len()).sum::<usize>(), in_windows);
    assert!(tasks.iter().all(|t| t.sparse.len() == t.keys.len() && t.sparse.iter().all(Option::is_some)));

    // And back: a windowed build after the one-vector build encodes the windows only.
    let store = MemStore::new("mem://whole");
    build_with(0, &Previous::none()).save(&store, &Previous::none()).unwrap();
    let one_vector = Index::load(&store).unwrap();
    let again = build_with(DEFAULT_DENSE_WINDOW, &Previous::read(&store));
    assert_eq!((again.report.chunks_encoded, again.report.chunks_reused), (in_windows, chunks - in_windows));
    let again = again.index.unwrap();
    assert_eq!(again.dense.window_offsets(), windowed.dense.window_offsets());
    assert_eq!(*again.splade, *one_vector.splade, "every SPLADE vector is the one-vector build's");
}

/// A build whose vectors all come from the cache takes the width of a vector from the
/// plan's windows, not from the first record's length: a first chunk read in two windows
/// holds two vectors, not one of twice the width (which failed the build as a corrupt
/// shard, or would have built an index of the wrong dimension).
#[test]
fn a_build_of_cached_vectors_alone_keeps_the_dimension_when_its_first_chunk_has_windows() {
    let (dense, sparse) = encoders();
    let mut doc = test_document("w", "KO", "2024-02-10", &[&long_segment(), "A closing line."]);
    doc.title = "Annual report w".into();
    let docs = vec![doc];
    let index = Index::build(docs.clone(), dense, sparse, &options(1024), &|_, _, _| {}).unwrap();
    let offsets = index.dense.window_offsets();
    assert!(offsets[1] - offsets[0] > 1, "the first chunk is read in windows: {offsets:?}");
    let mut previous = Previous::none();
    previous.cache.insert(index_vectors(&index, &options(1024), (dense.tokenizer(), sparse.tokenizer())).unwrap());
    let built = run(docs, 1024, &previous);
    assert_eq!(built.report.chunks_encoded, 0);
    let again = built.index.unwrap();
    assert_eq!(again.dense.dim, index.dense.dim);
    assert_eq!(again.dense.vectors, index.dense.vectors);
    assert_eq!(again.dense.window_offsets(), offsets);
}

/// Chunk overlap is an option of the index: its manifest records it, and what is written
/// to the index later is cut the same way.
#[test]
fn an_index_built_with_overlap_records_it_and_its_writes_are_cut_the_same_way() {
    let (dense, sparse) = encoders();
    let opts = BuildOptions { chunk_tokens: 48, chunk_overlap: 24, ..options(1024) };
    let docs = corpus(1);
    let index = Index::build(docs.clone(), dense, sparse, &opts, &|_, _, _| {}).unwrap();
    assert_eq!(index.manifest.chunk_overlap, 24);
    let again = BuildOptions::of_manifest(&index.manifest);
    assert_eq!((again.chunk_tokens, again.chunk_overlap), (48, 24));
    let spans: Vec<(u32, u32)> = index.chunks.iter().map(|c| (c.span.char_start, c.span.char_end)).collect();
    assert!(spans.windows(2).any(|w| w[1].0 < w[0].1), "some chunk repeats the end of the one before: {spans:?}");
    let written = encode_documents(docs, &again, dense, sparse, &VectorCache::new()).unwrap();
    let cut: Vec<(u32, u32)> = written[0].chunks.iter().map(|c| (c.span.char_start, c.span.char_end)).collect();
    assert_eq!(cut, spans, "a write is cut as the build cut it");
}

#[test]
fn each_dense_window_is_the_encoders_reading_of_the_title_and_that_window() {
    let (dense, _) = encoders();
    let built = run(corpus(2), 4, &Previous::none());
    let index = built.index.unwrap();
    let dim = index.dense.dim;
    let mut read_in_windows = 0;
    for c in 0..index.chunks.len() as u32 {
        let chunk = &index.chunks[c as usize];
        let title = &index.documents[chunk.doc as usize].title;
        let windows = dense_windows(title, chunk, 32, dense.tokenizer());
        let texts = if windows.is_empty() { vec![encoder_input(title, chunk)] } else { windows };
        let rows = index.dense_vectors(c);
        assert_eq!(rows.len(), texts.len() * dim, "chunk {c}");
        for (row, text) in rows.chunks_exact(dim).zip(&texts) {
            let want = dense.embed(text).unwrap();
            let cosine: f32 = row.iter().zip(&want).map(|(a, b)| a * b).sum();
            assert!(cosine > 0.9999, "chunk {c}: cosine {cosine} with {text:?}");
        }
        read_in_windows += usize::from(texts.len() > 1);
        // A question that is one window's text finds its chunk by that window.
        if let Some(last) = texts.last().filter(|_| texts.len() > 1) {
            let q = dense.embed(last).unwrap();
            assert!(index.dense_score(c, &q) > 0.9999);
        }
    }
    assert!(read_in_windows > 0);
}

/// A build is unchanged only into what the previous version is: a sharded build of the same
/// inputs into as many shards, or a single build of the same inputs beside a single index.
#[test]
fn a_build_is_unchanged_only_at_the_previous_versions_shard_count() {
    let root = |inputs: &str, k: usize| RootManifest {
        format: String::new(),
        version: 1,
        index_id: "x".into(),
        shards: (0..k)
            .map(|i| crate::shards::ShardEntry {
                prefix: crate::shards::shard_prefix(i),
                manifest_sha256: String::new(),
                documents: 1,
                chunks: 1,
            })
            .collect(),
        stats: crate::index::format::FileEntry { name: String::new(), bytes: 0, sha256: String::new() },
        encoded: Vec::new(),
        inputs_sha256: inputs.into(),
    };
    let sharded = Previous { root: Some(root("abc", 3)), ..Previous::none() };
    assert!(sharded.unchanged("abc", Some(3)));
    for (inputs, k) in [("abc", Some(2)), ("abd", Some(3)), ("abc", None), ("abc", Some(1))] {
        assert!(!sharded.unchanged(inputs, k), "{inputs} into {k:?}");
    }
    assert!(!Previous::none().unchanged("abc", Some(3)) && !Previous::none().unchanged("abc", None));
}

/// The build workflow's Map of merges: each index shard merged alone, from its part of the
/// plan and the vectors it picks out of the build's files (read in any order), is the shard
/// one process makes of the whole plan, byte for byte; a shard whose vectors are missing
/// fails, naming it.
#[test]
fn an_index_shard_merged_alone_from_its_part_of_the_plan_is_the_one_a_whole_merge_makes() {
    let (dense, sparse) = encoders();
    let documents: Vec<Document> = corpus(7);
    let Planned::Ready { plan, tasks, .. } =
        plan_build(documents, &[], &options(5), (dense.tokenizer(), sparse.tokenizer()), &Previous::none(), Some(3))
            .unwrap()
    else {
        panic!("a first build is planned")
    };
    let runner = InProcess { dense, sparse };
    let encoded = plan.assemble(&VectorCache::new(), runner.run(tasks, &|_, _, _| {}).unwrap()).unwrap();
    assert!(encoded.len() >= 3, "several encoded files: {}", encoded.len());
    let files: Vec<Vec<u8>> = encoded.iter().rev().map(|e| e.to_bytes().unwrap()).collect();
    let saved = |index: &mut crate::index::Index, order: &[u32]| {
        index.manifest.created_unix = 0;
        let store = MemStore::new("shard");
        let order: Vec<u8> = order.iter().flat_map(|d| d.to_le_bytes()).collect();
        index.save_with(&store, vec![(crate::shards::ORDER_FILE.into(), order)]).unwrap();
        let mut objects = store.objects();
        objects.sort();
        objects
    };

    let mut whole = merge_shards((*plan).clone(), &encoded, 3, &|_, _, _| {}).unwrap();
    let stats = plan.lexical_stats();
    assert_eq!(stats, whole.stats);
    let parts = plan.split(3);
    assert_eq!(
        parts.iter().map(|p| p.chunks.len()).sum::<usize>(),
        encoded.iter().map(|e| e.records.len()).sum::<usize>()
    );
    for (k, part) in parts.into_iter().enumerate() {
        let mut cache = VectorCache::new();
        for bytes in &files {
            cache.add_file_where(bytes, |key| part.keys.contains(key));
        }
        assert_eq!(cache.len(), part.keys.len(), "only shard {k}'s vectors are kept");
        if k == 0 {
            let mut short = VectorCache::new();
            files[1..].iter().for_each(|bytes| short.add_file(bytes));
            let err = part.records(&short).unwrap_err().to_string();
            assert!(err.contains("merging index shard 0") && err.contains("neither cached nor encoded"), "{err}");
        }
        let records = part.records(&cache).unwrap();
        let (mut alone, order) = merge_shard(part, &records, cache.dim().unwrap(), &stats).unwrap();
        assert_eq!(order, whole.order[k]);
        assert!(!alone.chunks.is_empty(), "shard {k} holds chunks");
        assert_eq!(saved(&mut alone, &order), saved(&mut whole.indexes[k], &whole.order[k]), "shard {k}");
    }
}

#[test]
fn a_corpus_planned_in_parts_makes_the_shard_plans_one_process_makes() {
    let (dense, sparse) = encoders();
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    let documents: Vec<Document> = corpus(7);
    let Planned::Ready { plan, .. } =
        plan_build(documents.clone(), &[], &options(5), tokenizers, &Previous::none(), Some(3)).unwrap()
    else {
        panic!("a first build is planned")
    };
    // A previous version held the vectors of every third chunk: only the rest is encoded.
    let mut cache = VectorCache::new();
    let fake = |key| EncodedChunk::new(key, vec![1.0], crate::encode::SparseVector { ids: vec![], weights: vec![] });
    cache.insert(plan.keys.iter().step_by(3).map(|&k| fake(k)));

    // Parts of 3, 1 and 3 documents, planned apart, then gathered.
    let planned: Vec<PlannedPart> = [0..3, 3..4, 4..7]
        .into_iter()
        .enumerate()
        .map(|(p, r)| plan_part(p as u32, documents[r].to_vec(), &options(5), tokenizers).unwrap())
        .map(|part| part.finish(&cache, 3).unwrap())
        .collect();
    let summaries: Vec<PartSummary> = planned.iter().map(|p| p.summary.clone()).collect();
    let gathered = gather_parts(&options(5), &[], summaries.clone()).unwrap();
    assert_eq!(gathered.inputs_sha256, plan.inputs_sha256, "the fingerprint one process computes");
    assert_eq!(gathered.stats, plan.lexical_stats(), "BM25's statistics over the whole corpus");
    assert_eq!((gathered.report.documents, gathered.report.chunks), (7, plan.chunks.len()));
    assert_eq!(
        gathered.offsets,
        [(0, 0), (3, summaries[0].chunks), (4, summaries[0].chunks + summaries[1].chunks)]
            .map(|(documents, chunks)| PartOffsets { documents, chunks })
    );
    // Every chunk the cache lacks is encoded by one task, and the task numbers are unique.
    let encoded: Vec<ChunkKey> = planned.iter().flat_map(|p| &p.tasks).flat_map(|t| t.keys.clone()).collect();
    let lacking: Vec<ChunkKey> = plan.keys.iter().copied().filter(|k| cache.get(k).is_none()).collect();
    assert_eq!(encoded, lacking);
    let numbers: std::collections::HashSet<u32> = gathered.tasks.iter().copied().collect();
    assert_eq!(numbers.len(), gathered.tasks.len());
    assert!(gathered.tasks.iter().any(|&n| n >= task_number(2, 0).unwrap()), "{:?}", gathered.tasks);
    assert_eq!(gathered.report.chunks_encoded, lacking.len());

    // Each index shard's pieces, joined, are its part of the whole plan, byte for byte.
    let mut pieces: Vec<Vec<(ShardPlan, PartOffsets)>> = vec![Vec::new(); 3];
    for (p, part) in planned.into_iter().enumerate() {
        for piece in part.pieces {
            pieces[piece.shard].push((piece, gathered.offsets[p]));
        }
    }
    let twice = pieces.clone();
    for (k, want) in (*plan).clone().split(3).into_iter().enumerate() {
        assert!(!want.documents.is_empty(), "shard {k} holds documents");
        let got = ShardPlan::gather(k, std::mem::take(&mut pieces[k]), gathered.inputs_sha256.clone()).unwrap();
        assert_eq!(bincode::serialize(&got).unwrap(), bincode::serialize(&want).unwrap(), "index shard {k}");
    }

    // A document id in two parts is refused, naming it; so is a part missing.
    let home = crate::shards::shard_of("d0", 3);
    let mut again = twice[home].clone();
    let d0 = plan_part(3, documents[0..1].to_vec(), &options(5), tokenizers).unwrap().finish(&cache, 3).unwrap();
    again.push((d0.pieces[home].clone(), PartOffsets { documents: 7, chunks: plan.chunks.len() as u32 }));
    let err = ShardPlan::gather(home, again, gathered.inputs_sha256.clone()).unwrap_err().to_string();
    assert!(err.contains("\"d0\"") && err.contains("two parts"), "{err}");
    let err = gather_parts(&options(5), &[], summaries[1..].to_vec()).unwrap_err().to_string();
    assert!(err.contains("part 1"), "{err}");
}

/// A plan in corpus parts trusts the previous version's keys files; when a record they list
/// is damaged in its shard file, the merge encodes that chunk again, read as the plan read
/// it (its input and its dense windows), instead of failing every build from then on.
#[test]
fn a_merge_encodes_again_what_a_keys_file_listed_but_its_shard_file_lost() {
    let (dense, sparse) = encoders();
    let tokenizers = (dense.tokenizer(), sparse.tokenizer());
    let Planned::Ready { plan, tasks, .. } =
        plan_build(corpus(7), &[], &options(5), tokenizers, &Previous::none(), Some(3)).unwrap()
    else {
        panic!("a first build is planned")
    };
    let runner = InProcess { dense, sparse };
    let encoded = plan.assemble(&VectorCache::new(), runner.run(tasks, &|_, _, _| {}).unwrap()).unwrap();
    let files: Vec<Vec<u8>> = encoded.iter().map(|e| e.to_bytes().unwrap()).collect();
    let mut listed = CachedKeys::new();
    for e in &encoded {
        assert!(listed.add_keys_file_where(&EncodedKeys::of(e).to_bytes().unwrap(), |_| true));
    }
    assert_eq!(listed.len(), plan.keys.iter().collect::<std::collections::HashSet<_>>().len());
    // Planned against the keys files, nothing is encoded.
    assert!(plan.tasks(&listed).is_empty());

    let whole = plan.tasks(&VectorCache::new());
    let read_as_planned = |key: &ChunkKey| {
        let task = whole.iter().find(|t| t.keys.contains(key)).expect("every chunk is in a task of a first build");
        let i = task.keys.iter().position(|k| k == key).unwrap();
        (task.inputs[i].clone(), task.windows[i].clone())
    };
    for part in plan.split(3) {
        // The shard's vectors, but for one chunk's read in windows (its record lost).
        let lost = *part.keys.iter().find(|k| !read_as_planned(k).1.is_empty()).expect("a long chunk");
        let mut cache = VectorCache::new();
        files.iter().for_each(|bytes| cache.add_file_where(bytes, |k| part.keys.contains(k) && *k != lost));
        assert!(part.records(&cache).is_err(), "shard {} cannot merge as it is", part.shard);
        let task = part.lacking(&cache, tokenizers).expect("one chunk lacking");
        assert_eq!(task.keys, [lost], "shard {}", part.shard);
        assert_eq!((task.inputs[0].clone(), task.windows[0].clone()), read_as_planned(&lost));
        let again = encode_task(&task, dense, sparse, &|_| {}).unwrap();
        let before = encoded.iter().flat_map(|e| &e.records).find(|r| r.key == lost).unwrap();
        let dot: f32 = again.records[0].dense.iter().zip(&before.dense).map(|(a, b)| a * b).sum();
        let windows = before.dense.len() as f32 / encoded[0].dim as f32;
        assert!(dot / windows > 0.9999, "the vectors the first build made: {dot} over {windows} windows");
        cache.insert_encoded(again);
        assert!(part.lacking(&cache, tokenizers).is_none());
        assert!(part.records(&cache).is_ok());
    }
}
