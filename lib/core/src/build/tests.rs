//! Builds with the real models: lossless chunking, reuse, unchanged builds, damaged caches.

use std::sync::OnceLock;

use super::*;
use crate::encode::ModelSet;
use crate::index::format::ModelRef;
use crate::index::Bm25Params;
use crate::storage::MemStore;
use crate::testutil::{model_dir, test_document};

fn encoders() -> &'static (DenseEncoder, SparseEncoder) {
    static ENCODERS: OnceLock<(DenseEncoder, SparseEncoder)> = OnceLock::new();
    ENCODERS.get_or_init(|| {
        let models = ModelSet::under(&model_dir());
        (DenseEncoder::load(&models.dense).unwrap(), SparseEncoder::load(&models.sparse).unwrap())
    })
}

fn options(shard_chunks: usize) -> BuildOptions {
    BuildOptions {
        index_id: "t".into(),
        chunk_tokens: 64,
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
    assert_eq!((first.report.chunks_encoded, first.report.chunks_reused), (chunks, 0));
    let report = first.save(&store, &Previous::none()).unwrap();
    let mut saved: BuildReport = serde_json::from_slice(&store.read(REPORT_FILE).unwrap()).unwrap();
    assert!((saved.seconds - report.seconds).abs() < 1e-9);
    saved.seconds = report.seconds;
    assert_eq!(saved, report);
    let before = Index::load(&store).unwrap();

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
    assert!(many[1..].iter().all(|n| !store.exists(n).unwrap()));
    assert!(store.exists("facts.bin").unwrap());
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
