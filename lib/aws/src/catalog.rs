//! The indexes created through the API (`PUT /v1/indexes/{index}`) in one bucket.
//!
//! ```text
//! s3://bucket/indexes/.created/<id>.json   the index's options: it exists
//! s3://bucket/indexes/<id>/                its published versions (VersionedIndex)
//! s3://bucket/corpora/<id>/                its documents (the document API writes here)
//! ```
//!
//! An index is created when its marker is written (once: `If-None-Match`), and only into
//! prefixes that hold nothing, so a creation touches nothing else; it is deleted by removing
//! its two prefixes, then its marker, then its versions' prefix again (what a build running
//! meanwhile published). The API functions read the markers to serve every
//! created index, and the index-build function to build the one an S3 event's key names.
//! The markers live under `indexes/.created/`, one listing away, in no index's prefix (an
//! index id starts with a letter or a digit).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sextant_core::error::{Error, Result};
use sextant_core::storage::Location;

use super::s3::{Precondition, S3Store};

/// Where the markers are, under the bucket.
const MARKERS: &str = "indexes/.created/";

/// What an index was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatedIndex {
    /// Tokens per chunk.
    pub chunk_tokens: usize,
    /// Tokens a chunk repeats from the one before it.
    pub chunk_overlap: usize,
}

/// The created indexes of one bucket.
#[derive(Clone)]
pub struct Catalog {
    store: S3Store,
}

impl Catalog {
    /// The catalog of the bucket `root` names (`s3://bucket/`; a prefix is refused: the
    /// layout above is the bucket's).
    pub fn new(config: &aws_config::SdkConfig, root: &Location) -> Result<Self> {
        match root {
            Location::S3 { bucket, prefix } if prefix.trim_matches('/').is_empty() => {
                Ok(Catalog { store: S3Store::new(config, bucket.clone()) })
            }
            _ => Err(Error::invalid("SEXTANT_CATALOG", format!("{root}: name a bucket, as s3://bucket/"))),
        }
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        self.store.bucket()
    }

    fn marker(id: &str) -> String {
        format!("{MARKERS}{id}.json")
    }

    /// Where index `id` publishes its versions: `s3://bucket/indexes/<id>`.
    pub fn index_location(&self, id: &str) -> Location {
        Location::S3 { bucket: self.bucket().to_string(), prefix: format!("indexes/{id}") }
    }

    /// Where index `id`'s documents are: the prefix `s3://bucket/corpora/<id>/`.
    pub fn corpus_location(&self, id: &str) -> Location {
        Location::S3 { bucket: self.bucket().to_string(), prefix: format!("corpora/{id}") }
    }

    /// The index whose corpus holds object `key` (`corpora/<id>/...`), when it is a created
    /// one: its id and options.
    pub async fn of_corpus_key(&self, key: &str) -> Result<Option<(String, CreatedIndex)>> {
        let Some((id, _)) = key.strip_prefix("corpora/").and_then(|rest| rest.split_once('/')) else {
            return Ok(None);
        };
        Ok(self.get(id).await?.map(|created| (id.to_string(), created)))
    }

    /// Every created index, by id (one whose marker does not parse is logged and left out).
    pub async fn list(&self) -> Result<BTreeMap<String, CreatedIndex>> {
        let mut out = BTreeMap::new();
        for (key, _) in self.store.list(MARKERS).await? {
            let Some(id) = key.strip_prefix(MARKERS).and_then(|k| k.strip_suffix(".json")) else { continue };
            match self.get(id).await {
                Ok(Some(created)) => {
                    out.insert(id.to_string(), created);
                }
                Ok(None) => continue,
                // One damaged marker leaves the other indexes served; it is deleted as any.
                Err(e @ Error::IndexCorrupted { .. }) => {
                    tracing::error!(index = %id, error = %e, "a created index's marker does not parse")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Index `id`'s options, when it was created (a marker that does not parse is an error
    /// naming it, never an index with other options).
    pub async fn get(&self, id: &str) -> Result<Option<CreatedIndex>> {
        let key = Self::marker(id);
        let Some(object) = self.store.get(&key).await? else { return Ok(None) };
        serde_json::from_slice(&object.bytes).map(Some).map_err(|e| Error::IndexCorrupted {
            file: format!("s3://{}/{key}", self.bucket()),
            expected: "the options an index was created with".into(),
            found: e.to_string(),
        })
    }

    /// Whether index `id`'s prefixes hold any object (then it cannot be created there).
    pub async fn in_use(&self, id: &str) -> Result<bool> {
        for prefix in [format!("indexes/{id}/"), format!("corpora/{id}/")] {
            if !self.store.list_after(&prefix, None, 1).await?.0.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Writes index `id`'s marker unless there is one: `false` when another creation wrote
    /// it first.
    pub async fn create(&self, id: &str, created: &CreatedIndex) -> Result<bool> {
        let bytes = serde_json::to_vec(created)?;
        match self.store.put(&Self::marker(id), bytes, &Precondition::Absent).await {
            Ok(_) => Ok(true),
            Err(Error::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes index `id`: its versions and documents, then its marker (so that a deletion
    /// that fails half-way leaves an index that can be deleted again), then its versions
    /// again: a build that was running published after the first removal and found the
    /// marker still there (one that finds it gone removes its version itself,
    /// [`crate::build_job::answer_published`]). Answers the objects removed.
    pub async fn delete(&self, id: &str) -> Result<usize> {
        let (versions, documents) = (format!("indexes/{id}/"), format!("corpora/{id}/"));
        let mut removed = 0;
        for prefix in [&versions, &documents] {
            removed += self.store.delete_prefix(prefix).await?;
        }
        self.store.delete(&Self::marker(id)).await?;
        removed += self.store.delete_prefix(&versions).await?;
        Ok(removed + 1)
    }
}
