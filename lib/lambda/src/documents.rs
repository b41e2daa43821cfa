//! The document API on AWS: [`S3DocumentStore`] writes each document to its index's
//! corpus prefix in S3 and answers `pending` (the route's `202`); the S3 event of the
//! write starts the incremental index build, and a warm function serves the new version
//! after its next refresh.
//!
//! ```text
//! PUT /v1/indexes/demo/documents/q3   ->  s3://bucket/corpora/demo/q3.json   (202, pending)
//! aws s3 cp handbook.md s3://bucket/corpora/demo/                           (document "handbook")
//! ```
//!
//! A document's objects are the corpus prefix's per-document objects named after it
//! (`q3.json`, or a raw `q3.md`, `q3.txt`, `q3.html` uploaded directly; see
//! [`sextant_core::corpus::read_document_object`]); the newest is the document. `GET` reads it and says
//! `live` when the version this function serves holds that exact document, or was built
//! after the object was last written; else `pending`.

use std::sync::{Arc, Weak};

use sextant_aws::{Listed, S3Store};
use sextant_core::corpus::{document_object, read_document_object, Document, DOCUMENT_EXTENSION};
use sextant_core::error::Error;
use sextant_core::storage::Location;
use sextant_server::documents::{DocumentStore, StoreError, StoredDocument, StoredPage, Written};
use sextant_server::AppState;

/// Objects of one listing page read, or of one batch written, at once.
const FETCHES: usize = 16;

/// The documents of one index, as per-document objects under its corpus prefix in S3.
pub struct S3DocumentStore {
    index_id: String,
    store: S3Store,
    /// The corpus prefix, ending in `/` (or empty: the whole bucket).
    dir: String,
    /// The router's state, to see which version of the index is served.
    served: Weak<AppState>,
    /// The runtime the S3 calls run on (the store's calls block, off the async threads).
    runtime: tokio::runtime::Handle,
}

impl S3DocumentStore {
    /// The store of index `index_id` whose corpus is `corpus` (`s3://bucket/corpora/demo/`),
    /// reporting `live` against the versions `state` serves. Call it inside the Tokio
    /// runtime the router runs on.
    pub fn new(
        config: &aws_config::SdkConfig,
        index_id: &str,
        corpus: &Location,
        state: &Arc<AppState>,
    ) -> Result<Self, Error> {
        let Location::S3 { bucket, prefix } = corpus else {
            return Err(Error::invalid("corpus", format!("{corpus} is not an s3:// location")));
        };
        let prefix = prefix.trim_end_matches('/');
        Ok(S3DocumentStore {
            index_id: index_id.to_string(),
            store: S3Store::new(config, bucket.clone()),
            dir: if prefix.is_empty() { String::new() } else { format!("{prefix}/") },
            served: Arc::downgrade(state),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    fn block_on<T>(&self, f: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, StoreError> {
        self.runtime.block_on(f).map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    /// The objects holding document `id`, oldest first (the last is the document).
    async fn objects_of(&self, id: &str) -> Result<Vec<Listed>, Error> {
        let (listed, _) = self.store.list_after(&format!("{}{id}.", self.dir), None, 100).await?;
        let mut mine: Vec<Listed> = listed.into_iter().filter(|o| self.document_id(&o.key) == Some(id)).collect();
        mine.sort_by(|a, b| (a.modified_unix, &a.key).cmp(&(b.modified_unix, &b.key)));
        Ok(mine)
    }

    /// The document id of `key` when it is a per-document object directly under the prefix.
    fn document_id<'k>(&self, key: &'k str) -> Option<&'k str> {
        let name = key.strip_prefix(&self.dir)?;
        if name.contains('/') {
            return None;
        }
        document_object(name).map(|(id, _)| id)
    }

    /// Reads object `o` as the stored document.
    async fn read(&self, o: &Listed) -> Result<Option<StoredDocument>, Error> {
        let source = format!("s3://{}/{}", self.store.bucket(), o.key);
        let Some(object) = self.store.get(&o.key).await? else { return Ok(None) };
        let document = read_document_object(&o.key, &source, &object.bytes)?;
        let status = self.status(&document, object.modified_unix.or(o.modified_unix));
        Ok(Some(StoredDocument { document, chunks: None, status, compacted: None }))
    }

    /// `live` when the served version holds `document` exactly, or holds its id and was
    /// built after `modified`; else `pending`. (A sharded index's router holds no text, so
    /// there only the second can say `live`.)
    fn status(&self, document: &Document, modified: Option<i64>) -> &'static str {
        let Some(served) = self.served.upgrade().and_then(|s| s.loaded_index(&self.index_id)) else {
            return "pending";
        };
        let index = served.searcher.view();
        let Some(held) = index.documents().find(|d| d.document_id == document.document_id) else {
            return "pending";
        };
        let built = index.manifest().created_unix;
        let built_after = modified.is_some_and(|m| i64::try_from(built).unwrap_or(i64::MAX) > m);
        if held == document || built_after {
            "live"
        } else {
            "pending"
        }
    }
}

impl S3DocumentStore {
    /// Writes `document` as its object, replacing the document's other objects.
    async fn put_object(&self, document: Document) -> Result<Written, StoreError> {
        if document.document_id.contains('/') {
            // Objects of a corpus prefix name their document by file name.
            return Err(StoreError::Invalid {
                field: "documentId".into(),
                reason: "may not contain '/' here: on AWS a document is an object of the corpus prefix, named by its \
                         file name"
                    .into(),
            });
        }
        let bytes = serde_json::to_vec(&document).map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let key = format!("{}{}.{DOCUMENT_EXTENSION}", self.dir, document.document_id);
        let written: Result<Written, Error> = async {
            let before = self.objects_of(&document.document_id).await?;
            self.store.put(&key, bytes, &sextant_aws::Precondition::None).await?;
            // A raw file uploaded under the same name would shadow the write if newer: the
            // write replaces the document, so the other objects go.
            for o in before.iter().filter(|o| o.key != key) {
                self.store.delete(&o.key).await?;
            }
            Ok(Written { status: "pending", created: Some(before.is_empty()), chunks: None, seq: None })
        }
        .await;
        written.map_err(|e| StoreError::Unavailable(e.to_string()))
    }
}

impl DocumentStore for S3DocumentStore {
    fn put(&self, document: Document) -> Result<Written, StoreError> {
        self.runtime.block_on(self.put_object(document))
    }

    /// Each document its own object, 16 written at once; a document that could not
    /// be written is its own `unavailable` result.
    fn put_many(&self, documents: Vec<Document>) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
        let permits = Arc::new(tokio::sync::Semaphore::new(FETCHES));
        let puts = documents.into_iter().map(|document| {
            let permits = permits.clone();
            async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                self.put_object(document).await
            }
        });
        Ok(self.runtime.block_on(futures_util::future::join_all(puts)))
    }

    fn delete(&self, id: &str) -> Result<Option<Written>, StoreError> {
        self.block_on(async {
            let objects = self.objects_of(id).await?;
            if objects.is_empty() {
                return Ok(None);
            }
            for o in &objects {
                self.store.delete(&o.key).await?;
            }
            Ok(Some(Written { status: "pending", created: None, chunks: None, seq: None }))
        })
    }

    fn get(&self, id: &str) -> Result<Option<StoredDocument>, StoreError> {
        self.block_on(async {
            match self.objects_of(id).await?.last() {
                Some(o) => self.read(o).await,
                None => Ok(None),
            }
        })
    }

    fn list(&self, cursor: Option<&str>, limit: usize) -> Result<StoredPage, StoreError> {
        self.block_on(async {
            let mut after = cursor.map(|c| format!("{}{c}", self.dir));
            let mut picked: Vec<Listed> = Vec::new();
            let mut more = true;
            while picked.len() < limit && more {
                let (page, truncated) = self.store.list_after(&self.dir, after.as_deref(), 1000).await?;
                more = truncated;
                let Some(last) = page.last() else { break };
                after = Some(last.key.clone());
                for o in page {
                    let Some(id) = self.document_id(&o.key) else { continue };
                    // Two objects of one id list side by side only when their names
                    // share the id: keep the newer.
                    if let Some(prev) = picked.last_mut().filter(|p| self.document_id(&p.key) == Some(id)) {
                        if o.modified_unix >= prev.modified_unix {
                            *prev = o;
                        }
                        continue;
                    }
                    if picked.len() == limit {
                        more = true;
                        break;
                    }
                    picked.push(o);
                }
            }
            let next_cursor = if more {
                picked.last().map(|o| o.key.strip_prefix(&self.dir).unwrap_or(&o.key).to_string())
            } else {
                None
            };
            let permits = Arc::new(tokio::sync::Semaphore::new(FETCHES));
            let reads = picked.iter().map(|o| {
                let permits = permits.clone();
                async move {
                    let _permit = permits.acquire_owned().await.expect("semaphore open");
                    self.read(o).await
                }
            });
            let mut documents = Vec::with_capacity(picked.len());
            for read in futures_util::future::join_all(reads).await {
                documents.extend(read?);
            }
            Ok(StoredPage { documents, next_cursor })
        })
    }

    /// Nothing to fold on AWS: every write already started the incremental build (through
    /// its S3 event), so this answers that nothing was compacted.
    fn compact(&self) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(None)
    }
}
