//! Index versions in S3 and keys, plans and rate counters in DynamoDB, against real
//! servers: SeaweedFS (S3, signatures checked) and moto (S3 and DynamoDB), started by
//! `scripts/ci/aws_servers.sh` (`scripts/ci/test.sh` starts them).

mod support;

use std::sync::Arc;

use aws_sdk_s3::primitives::ByteStream;
use sextant_aws::build_job::{self, BuildJob};
use sextant_aws::versions::{Pointer, VersionedIndex, CURRENT};
use sextant_aws::{DynamoKeyStore, S3Store};
use sextant_core::build::Previous;
use sextant_core::corpus::load_documents;
use sextant_core::encode::{default_model_dir, ModelSet};
use sextant_core::index::format::{sha256_hex, MANIFEST};
use sextant_core::index::Index;
use sextant_core::storage::{Location, MemStore};
use sextant_core::Error;
use sextant_keys::{create_key, hash_key, KeyStatus, KeyStore, Plan, RateDecision};
use support::servers::{create_bucket, create_tables, s3_client, servers, unique};
use support::switch_proxy::SwitchProxy;
use support::throttle_proxy::ThrottleProxy;

/// A small real index (three Exxon documents of the demo corpus), saved into memory.
fn small_index() -> MemStore {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/demo/documents.jsonl.gz");
    let docs: Vec<_> =
        load_documents(&corpus).unwrap().into_iter().filter(|d| d.ticker.as_deref() == Some("XOM")).take(3).collect();
    let job = BuildJob::from_event(
        serde_json::json!({"index_id": "small", "corpus": "/unused", "target": "s3://unused/x"}),
        &Default::default(),
    )
    .unwrap();
    let none = Previous::none();
    let built = build_job::build(docs, Vec::new(), &ModelSet::under(&default_model_dir()), &job, &none).unwrap();
    let files = MemStore::new("small");
    built.save(&files, &none).unwrap();
    files
}

/// The same files with another build time: a distinct version.
fn rebuilt(files: &MemStore, created_unix: u64) -> MemStore {
    let out = MemStore::new("small");
    for (k, v) in files.objects() {
        if k == MANIFEST {
            let mut m: serde_json::Value = serde_json::from_slice(&v).unwrap();
            m["created_unix"] = created_unix.into();
            out.insert(k, serde_json::to_vec(&m).unwrap());
        } else {
            out.insert(k, v.as_ref().clone());
        }
    }
    out
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn versions_publish_load_conflict_prune_and_refuse_corruption_on_both_s3_servers() {
    let s = servers();
    let files = small_index();
    let chunks = Index::load(&rebuilt(&files, 1)).unwrap().chunks.len();
    rt().block_on(async {
        for endpoint in [&s.seaweed, &s.moto] {
            let config = s.config(endpoint).await;
            let bucket = unique("versions");
            create_bucket(&config, &bucket).await;
            let loc = Location::parse(&format!("s3://{bucket}/indexes/small")).unwrap();
            let index = VersionedIndex::new(&config, &loc).unwrap();

            // Nothing published yet: a clear error, not a crash.
            let e = index.download_current().await.err().unwrap();
            assert!(e.to_string().contains("no version has been published"), "{endpoint}: {e}");

            // First publication, then a cold load of it.
            let empty = index.pointer().await.unwrap();
            let v1 = index.publish(&rebuilt(&files, 1_800_000_000), &empty, 2).await.unwrap();
            let d = index.download_current().await.unwrap();
            assert_eq!(d.pointer.version, v1.version);
            assert_eq!(Index::load(&d.files).unwrap().chunks.len(), chunks, "{endpoint}");

            // A second build that read the pointer before v1 existed cannot replace it.
            let e = index.publish(&rebuilt(&files, 1_800_000_001), &empty, 2).await.unwrap_err();
            assert!(matches!(e, Error::Conflict { .. }), "{endpoint}: {e}");
            // Nor can one that read v1's pointer after v2 replaced it.
            let at_v1 = index.pointer().await.unwrap();
            let v2 = index.publish(&rebuilt(&files, 1_800_000_002), &at_v1, 2).await.unwrap();
            assert_eq!(v2.previous.as_deref(), Some(v1.version.as_str()));
            let e = index.publish(&rebuilt(&files, 1_800_000_003), &at_v1, 2).await.unwrap_err();
            assert!(matches!(e, Error::Conflict { .. }), "{endpoint}: {e}");
            assert_eq!(
                index.pointer().await.unwrap().pointer.unwrap().version,
                v2.version,
                "{endpoint}: the pointer was not clobbered"
            );

            // Old versions are pruned to the newest two (the current one always kept).
            let at_v2 = index.pointer().await.unwrap();
            let v3 = index.publish(&rebuilt(&files, 1_800_000_004), &at_v2, 2).await.unwrap();
            let kept = index.versions().await.unwrap();
            assert_eq!(kept.len(), 2, "{endpoint}: {kept:?}");
            assert!(kept.contains(&v3.version) && kept.contains(&v2.version), "{endpoint}: {kept:?}");
            assert!(!v3.pruned.is_empty(), "{endpoint}");

            // A version with a tampered file is downloaded but refused by verification.
            let raw = s3_client(&config);
            let key = format!("indexes/small/versions/{}/bm25.bin", v3.version);
            let mut bytes =
                raw.get_object().bucket(&bucket).key(&key).send().await.unwrap().body.collect().await.unwrap().to_vec();
            let mid = bytes.len() / 2;
            bytes[mid] ^= 0xff;
            raw.put_object().bucket(&bucket).key(&key).body(ByteStream::from(bytes)).send().await.unwrap();
            let d = index.download_current().await.unwrap();
            let e = Index::load(&d.files).err().unwrap();
            assert!(
                matches!(e, Error::IndexCorrupted { ref file, .. } if file.ends_with("bm25.bin")),
                "{endpoint}: {e}"
            );

            // A pointer whose manifest checksum does not match is refused before any download.
            let bad =
                Pointer { manifest_sha256: sha256_hex(b"other"), ..index.pointer().await.unwrap().pointer.unwrap() };
            raw.put_object()
                .bucket(&bucket)
                .key(format!("indexes/small/{CURRENT}"))
                .body(ByteStream::from(serde_json::to_vec(&bad).unwrap()))
                .send()
                .await
                .unwrap();
            let e = index.download_current().await.err().unwrap();
            assert!(matches!(e, Error::IndexCorrupted { ref file, .. } if file.ends_with(MANIFEST)), "{endpoint}: {e}");

            // An incomplete version (a file missing) fails the download with the object named.
            raw.delete_object()
                .bucket(&bucket)
                .key(format!("indexes/small/versions/{}/dense.graph", v2.version))
                .send()
                .await
                .unwrap();
            let good = index.pointer().await.unwrap().pointer.unwrap();
            let e = index.download(&Pointer { version: v2.version.clone(), ..good.clone() }).await.err().unwrap();
            assert!(e.to_string().contains(&v2.version), "{endpoint}: {e}");
        }
    });
}

/// A version loaded from S3 reads its `f32` vectors and SPLADE postings in place from
/// files on local disk (not from the process's memory), scores exactly as the saved index
/// does, refuses a tampered copy with the file named, and, when local disk cannot take
/// them, holds them in memory instead and still loads.
#[test]
fn a_loaded_version_reads_its_vectors_and_postings_from_local_disk() {
    let s = servers();
    let files = small_index();
    let saved = Index::load(&rebuilt(&files, 1)).unwrap();
    rt().block_on(async {
        let config = s.config(&s.seaweed).await;
        let bucket = unique("spill");
        create_bucket(&config, &bucket).await;
        let loc = Location::parse(&format!("s3://{bucket}/indexes/small")).unwrap();
        let index = VersionedIndex::new(&config, &loc).unwrap();
        let v1 = index.publish(&rebuilt(&files, 1_800_000_000), &index.pointer().await.unwrap(), 2).await.unwrap();
        let pointer = index.pointer().await.unwrap().pointer.unwrap();
        assert_eq!(pointer.version, v1.version);

        let (loaded, _, phases) = index.load(&pointer).await.unwrap();
        assert!(loaded.dense.vectors.is_mapped(), "{:?}", loaded.dense.vectors);
        assert!(loaded.splade.inverted.is_mapped(), "{:?}", loaded.splade.inverted);
        assert_eq!(loaded.dense.vectors, saved.dense.vectors);
        assert_eq!(*loaded.splade, *saved.splade);
        let in_place = saved.dense.mapped_bytes() + saved.splade.inverted.postings_bytes();
        assert!(phases.bytes >= in_place, "the files on local disk are counted as downloaded");
        let query = saved.dense_vectors(1)[..saved.dense.dim].to_vec();
        let (a, b) = (saved.dense.search(&query, None, 5), loaded.dense.search(&query, None, 5));
        assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits()), "{a:?} != {b:?}");

        // No room on local disk (here: no such directory): the vectors are held in memory.
        let nowhere = VersionedIndex::new(&config, &loc).unwrap().spill_to("/nonexistent/sextant-spill");
        let (held, _, _) = nowhere.load(&pointer).await.unwrap();
        assert!(!held.dense.vectors.is_mapped() && !held.splade.inverted.is_mapped());
        assert_eq!(held.dense.vectors, saved.dense.vectors);
        assert_eq!(*held.splade, *saved.splade);

        // One flipped byte in the vectors on S3: the spilled copy is refused, naming the file.
        let raw = s3_client(&config);
        let key = format!("indexes/small/versions/{}/dense.f32", v1.version);
        let mut bytes =
            raw.get_object().bucket(&bucket).key(&key).send().await.unwrap().body.collect().await.unwrap().to_vec();
        bytes[9] ^= 0x10;
        raw.put_object().bucket(&bucket).key(&key).body(ByteStream::from(bytes)).send().await.unwrap();
        let e = index.load(&pointer).await.err().expect("a tampered dense.f32 is refused");
        assert!(matches!(e, Error::IndexCorrupted { ref file, .. } if file.ends_with("dense.f32")), "{e}");
    });
}

/// A warm function loads each new version as its memory allows, from the estimate in the
/// manifest: beside the served one when two fit, in its place (the served one let go
/// first) when only one does, and not at all when even one does not (refused once, not
/// fetched again).
#[test]
fn new_versions_load_beside_in_place_or_not_at_all_as_the_memory_allows() {
    use std::sync::Mutex;
    use std::time::Duration;

    use sextant_aws::{MemoryBudget, Refresher};
    use sextant_core::pipeline::SharedModels;

    let s = servers();
    let files = small_index();
    // Loading takes the files out of their store: a copy is loaded.
    let estimate = Index::load(&rebuilt(&files, 1)).unwrap().manifest.resident_bytes;
    assert!(estimate > 0, "a build records its resident estimate");
    rt().block_on(async {
        let config = s.config(&s.seaweed).await;
        let bucket = unique("memory");
        create_bucket(&config, &bucket).await;
        let loc = Location::parse(&format!("s3://{bucket}/indexes/small")).unwrap();
        let index = VersionedIndex::new(&config, &loc).unwrap();
        let publish = |at: u64| {
            let index = index.clone();
            let files = rebuilt(&files, at);
            async move {
                let now = index.pointer().await.unwrap();
                index.publish(&files, &now, 5).await.unwrap().version
            }
        };
        let v1 = publish(1_800_000_000).await;
        let models = Arc::new(SharedModels::new(ModelSet::under(&default_model_dir())));
        let check = |budget: u64, serving: String| {
            let (index, models) = (index.clone(), models.clone());
            async move {
                let r = Refresher::within(
                    Duration::ZERO,
                    models,
                    Some(MemoryBudget { bytes: budget, reserve: sextant_aws::memory::RESERVE_BYTES }),
                    None,
                );
                r.watch("small", index, serving, estimate, None);
                let seen = Mutex::new(Vec::new());
                for _ in 0..2 {
                    let permit = r.begin().expect("a check is due");
                    r.check_now(
                        permit,
                        |id, loaded| seen.lock().unwrap().push(format!("swap {id} {}", loaded.pointer.version)),
                        |id| seen.lock().unwrap().push(format!("unload {id}")),
                    )
                    .await;
                }
                seen.into_inner().unwrap()
            }
        };
        let (load, resident) = (MemoryBudget::load_bytes(estimate), MemoryBudget::resident_bytes(estimate));
        // Room for two: v2 loads beside v1.
        let v2 = publish(1_800_000_001).await;
        assert_eq!(check(load + resident + 1, v1.clone()).await, [format!("swap small {v2}")]);
        // Room for one: v1 is let go, then v2 loads.
        assert_eq!(
            check(load + resident / 2, v1.clone()).await,
            ["unload small".to_string(), format!("swap small {v2}")]
        );
        // Room for none: refused at the first check, not fetched at the second.
        assert_eq!(check(load / 2, v1).await, Vec::<String>::new());
    });
}

#[test]
fn large_objects_go_up_in_parts_and_come_back_by_ranges_on_both_s3_servers() {
    let s = servers();
    rt().block_on(async {
        for endpoint in [&s.seaweed, &s.moto] {
            let config = s.config(endpoint).await;
            let bucket = unique("multipart");
            create_bucket(&config, &bucket).await;
            let store = S3Store::new(&config, &bucket);
            // 21 MiB + 5 bytes of a pattern no two parts share: a misplaced range would show.
            let len = (21 << 20) + 5;
            let bytes: Vec<u8> = (0..len as u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
            store.upload("big/blob.bin", Arc::new(bytes.clone())).await.unwrap();
            let listed = store.list("big/").await.unwrap();
            assert_eq!(listed, vec![("big/blob.bin".to_string(), len as u64)], "{endpoint}");
            let back = store.get_ranged("big/blob.bin", len as u64).await.unwrap();
            assert!(back == bytes, "{endpoint}: ranged download differs");
            // Asking for more than the object holds is an error, not a short buffer.
            assert!(store.get_ranged("big/blob.bin", len as u64 + (8 << 20)).await.is_err(), "{endpoint}");
            assert_eq!(store.delete_prefix("big/").await.unwrap(), 1);
            assert!(store.list("big/").await.unwrap().is_empty());
        }
    });
}

#[test]
fn corpora_are_read_from_a_prefix_or_a_manifest() {
    let s = servers();
    rt().block_on(async {
        let config = s.config(&s.seaweed).await;
        let bucket = unique("corpus");
        create_bucket(&config, &bucket).await;
        let raw = s3_client(&config);
        let doc = |id: &str| format!("{{\"documentId\": \"{id}\", \"segments\": [\"Text of {id}.\"]}}\n");
        for (key, body) in [
            ("corpora/a/one.jsonl", doc("d1") + &doc("d2")),
            ("corpora/a/two.jsonl", doc("d3")),
            ("corpora/a/notes.csv", "ignored".to_string()),
            // A raw file is one document, named after the file (see sextant_core::corpus::read_document_object).
            ("corpora/a/notes.txt", "Plain notes.".to_string()),
            ("other/x.jsonl", doc("d4")),
            ("manifest.json", r#"{"documents": ["corpora/a/two.jsonl", "other/x.jsonl"]}"#.to_string()),
            ("broken.json", r#"{"documents": ["corpora/a/missing.jsonl"]}"#.to_string()),
            ("corpora/bad/x.jsonl", "{not json\n".to_string()),
        ] {
            raw.put_object().bucket(&bucket).key(key).body(ByteStream::from(body.into_bytes())).send().await.unwrap();
        }
        let ids =
            |docs: Vec<sextant_core::corpus::Document>| docs.into_iter().map(|d| d.document_id).collect::<Vec<_>>();
        let by_prefix = build_job::read_corpus(&format!("s3://{bucket}/corpora/a/"), &config).await.unwrap();
        assert_eq!(ids(by_prefix), ["d1", "d2", "d3", "notes"]);
        let by_manifest = build_job::read_corpus(&format!("s3://{bucket}/manifest.json"), &config).await.unwrap();
        assert_eq!(ids(by_manifest), ["d3", "d4"]);
        let e = build_job::read_corpus(&format!("s3://{bucket}/broken.json"), &config).await.unwrap_err();
        assert!(e.to_string().contains("corpora/a/missing.jsonl"), "{e}");
        let e = build_job::read_corpus(&format!("s3://{bucket}/corpora/bad/"), &config).await.unwrap_err();
        assert!(
            matches!(e, Error::Corpus { ref source_name, line: 1, .. } if source_name.ends_with("corpora/bad/x.jsonl")),
            "{e}"
        );
        let e = build_job::read_corpus(&format!("s3://{bucket}/nothing/"), &config).await.unwrap_err();
        assert!(e.to_string().contains("no .jsonl"), "{e}");
    });
}

#[test]
fn seaweedfs_checks_signatures() {
    let s = servers();
    rt().block_on(async {
        let config = s.config(&s.seaweed).await;
        let bucket = unique("signed");
        create_bucket(&config, &bucket).await;
        // Unsigned, then signed with a wrong secret: both refused.
        let url = format!("{}/{bucket}/x", s.seaweed);
        let status = unsigned_get(&url).await;
        assert_eq!(status, 403, "an unsigned request must be refused");
        let wrong = support::servers::Servers { secret: "wrong-secret".into(), ..s.clone() };
        let store = S3Store::new(&wrong.config(&s.seaweed).await, &bucket);
        let e = store.get("x").await.unwrap_err();
        assert!(
            e.to_string().contains("SignatureDoesNotMatch")
                || e.to_string().contains("403")
                || e.to_string().contains("AccessDenied"),
            "{e}"
        );
    });
}

async fn unsigned_get(url: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut conn = tokio::net::TcpStream::connect(host).await.unwrap();
    conn.write_all(format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    conn.read_to_end(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf).split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn dynamodb_keys_and_plans_round_trip_and_rate_limits_are_exact_under_concurrency() {
    let s = servers();
    rt().block_on(async {
        let config = s.config(&s.moto).await;
        let (keys_table, rate_table) = (unique("keys"), unique("rate"));
        create_tables(&config, &keys_table, &rate_table).await;
        let store = Arc::new(DynamoKeyStore::new(&config, keys_table.clone(), Some(rate_table.clone())));

        // Plans: built-in ones answer without an item; custom ones are stored.
        assert_eq!(store.plan("pro").await.unwrap().unwrap().max_top_k, 25);
        let burst = Plan { name: "burst".into(), max_top_k: 7, requests_per_minute: 25, requests_per_day: 1_000 };
        store.put_plan(burst.clone()).await.unwrap();
        assert_eq!(store.plan("Burst").await.unwrap(), Some(burst.clone()));
        assert_eq!(store.custom_plans().await.unwrap(), vec![burst.clone()]);

        // Keys: stored by hash only, found, listed, revoked.
        let rec = create_key(store.as_ref(), "sx_dynamo_test_key", "acme", "burst", vec!["demo".into()]).await.unwrap();
        let db = aws_sdk_dynamodb::Client::new(&config);
        let scan = format!("{:?}", db.scan().table_name(&keys_table).send().await.unwrap().items);
        assert!(
            !scan.contains("sx_dynamo_test_key") && scan.contains(&hash_key("sx_dynamo_test_key")),
            "only the hash is stored"
        );
        assert_eq!(store.find(&hash_key("sx_dynamo_test_key")).await.unwrap(), Some(rec.clone()));
        assert_eq!(store.find(&hash_key("sx_unknown")).await.unwrap(), None);
        assert!(
            create_key(store.as_ref(), "sx_x", "acme", "platinum", vec!["*".into()]).await.is_err(),
            "unknown plan"
        );

        // 60 requests at once against a limit of 25 a minute: exactly 25 pass.
        let now = sextant_keys::now_unix();
        let now = if now % 60 > 50 { now - 15 } else { now }; // one minute window for all
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..60 {
            let (store, rec, plan) = (store.clone(), rec.clone(), burst.clone());
            tasks.spawn(async move { store.count(&rec, &plan, now).await.unwrap() });
        }
        let mut allowed = 0;
        let mut retry_afters = Vec::new();
        while let Some(d) = tasks.join_next().await {
            match d.unwrap() {
                RateDecision::Allowed { .. } => allowed += 1,
                RateDecision::Limited { limit, retry_after } => {
                    assert_eq!(limit, 25);
                    retry_afters.push(retry_after);
                }
            }
        }
        assert_eq!(allowed, 25, "the limit holds exactly under concurrency");
        assert!(retry_afters.iter().all(|r| (1..=60).contains(r)), "{retry_afters:?}");
        // The day window counted only the requests that passed, and items carry their expiry.
        let day_start = now - now % 86_400;
        let item = db
            .get_item()
            .table_name(&rate_table)
            .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("rate#{}#86400#{day_start}", rec.hash)))
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        assert_eq!(item["n"].as_n().unwrap(), "25");
        assert_eq!(item["expires_at"].as_n().unwrap(), &(day_start + 86_400 + 60).to_string());
        // The next minute window starts afresh.
        assert!(matches!(
            store.count(&rec, &burst, now - now % 60 + 60).await.unwrap(),
            RateDecision::Allowed { remaining: 24, .. }
        ));

        // Revocation by display prefix.
        assert_eq!(store.revoke(&rec.prefix, now).await.unwrap(), 1);
        assert_eq!(store.find(&rec.hash).await.unwrap().unwrap().status, KeyStatus::Revoked);
        assert_eq!(store.list_keys().await.unwrap().len(), 1);
    });
}

#[test]
fn an_unreachable_dynamodb_fails_closed_quickly_and_recovers() {
    let s = servers();
    rt().block_on(async {
        let moto = s.moto.strip_prefix("http://").unwrap().to_string();
        let proxy = SwitchProxy::start(moto).await;
        let config = s.config(&proxy.url).await;
        let (keys_table, rate_table) = (unique("keys"), unique("rate"));
        create_tables(&config, &keys_table, &rate_table).await;
        let store = DynamoKeyStore::new(&config, keys_table, Some(rate_table));
        let rec = create_key(&store, "sx_outage", "acme", "free", vec!["*".into()]).await.unwrap();
        let plan = Plan::builtin().remove(0);
        assert!(matches!(store.count(&rec, &plan, 1_000).await.unwrap(), RateDecision::Allowed { .. }));
        proxy.set_up(false);
        let t = std::time::Instant::now();
        let e = store.count(&rec, &plan, 1_001).await.unwrap_err();
        assert!(matches!(e, Error::Storage { .. }), "{e}");
        assert!(store.find(&rec.hash).await.is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "failing took {:?}", t.elapsed());
        proxy.set_up(true);
        assert!(matches!(store.count(&rec, &plan, 1_002).await.unwrap(), RateDecision::Allowed { remaining: 58, .. }));
    });
}

#[test]
fn dynamodb_throttling_is_retried_with_backoff_then_fails_closed() {
    let s = servers();
    rt().block_on(async {
        let proxy = ThrottleProxy::start(s.moto.strip_prefix("http://").unwrap().to_string()).await;
        // The production retry policy (sextant_aws::sdk_config reads the rest from the
        // environment, which parallel tests cannot share).
        let config = s.config(&proxy.url).await.to_builder().retry_config(sextant_aws::retry_config()).build();
        let (keys_table, rate_table) = (unique("keys"), unique("rate"));
        create_tables(&config, &keys_table, &rate_table).await;
        let store = DynamoKeyStore::new(&config, keys_table, Some(rate_table));
        let rec = create_key(&store, "sx_throttled", "acme", "free", vec!["*".into()]).await.unwrap();
        let plan = Plan::builtin().remove(0);

        // Two throttled answers, then the third attempt goes through: the caller sees success.
        proxy.throttle_next(2);
        assert_eq!(store.find(&rec.hash).await.unwrap(), Some(rec.clone()));
        assert_eq!(proxy.throttled(), 2, "both throttled attempts were retried");
        proxy.throttle_next(2);
        assert!(matches!(store.count(&rec, &plan, 1_000).await.unwrap(), RateDecision::Allowed { .. }));
        assert_eq!(proxy.throttled(), 4);

        // Throttled throughout: three attempts, then a store error (the API's 503).
        proxy.throttle_all();
        let e = store.count(&rec, &plan, 1_001).await.unwrap_err();
        assert!(matches!(e, Error::Storage { .. }), "{e}");
        assert!(e.to_string().contains("Throttling"), "the cause is named: {e}");
        assert_eq!(proxy.throttled(), 4 + 3, "three attempts in all");

        // Throughput back: requests pass again, and the refused one was not counted.
        proxy.throttle_next(0);
        assert!(matches!(store.count(&rec, &plan, 1_002).await.unwrap(), RateDecision::Allowed { remaining: 58, .. }));
    });
}
