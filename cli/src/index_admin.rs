//! Indexes created and deleted through the API (`PUT` and `DELETE /v1/indexes/{index}`)
//! by `sextant serve`, each in a directory of its own under the data directory:
//!
//! ```text
//! <root>/<index>/base/        the empty index it was created as
//! <root>/<index>/index.json   its options, written last: a directory without it is a
//!                             creation that did not finish, and is not served
//! <root>/<index>/             its writes (log, compacted versions), as for any index
//! ```
//!
//! At start, every created index under the root is served again with its writes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sextant_core::build::{lexical_only, plan_build, Planned, Previous};
use sextant_core::encode::{ModelInfo, TextTokenizer};
use sextant_core::index::Index;
use sextant_core::pipeline::SharedModels;
use sextant_core::storage::LocalDir;
use sextant_finance::{FactStore, Financials};
use sextant_server::{AdminError, AppState, IndexAdmin, IndexOptions, ServedIndex};

use crate::cli::BuildArgs;
use crate::indexes::build_options;

/// The file that marks a directory as a created index, with its options.
const MARKER: &str = "index.json";

/// What an index was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Created {
    chunk_tokens: usize,
    chunk_overlap: usize,
}

/// `sextant serve`'s [`IndexAdmin`].
pub struct LocalIndexAdmin {
    root: PathBuf,
    models: Arc<SharedModels>,
    state: Arc<AppState>,
    build: BuildArgs,
    compact_at_chunks: usize,
    /// One creation or deletion at a time.
    lock: Mutex<()>,
}

impl LocalIndexAdmin {
    /// The admin of indexes under `root`, built with `build`'s settings unless a request
    /// names others, served into `state` with `models`.
    pub fn new(
        root: PathBuf,
        models: Arc<SharedModels>,
        state: Arc<AppState>,
        build: BuildArgs,
        compact_at_chunks: usize,
    ) -> Self {
        LocalIndexAdmin { root, models, state, build, compact_at_chunks, lock: Mutex::new(()) }
    }

    /// Serves again every index created under the root (a directory whose creation did not
    /// finish is removed); the ids served.
    pub fn reopen(&self) -> Result<Vec<String>> {
        let mut served = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.root) else { return Ok(served) };
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if id.starts_with(".deleted-") {
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            }
            if sextant_server::check_index_id(&id).is_err() || !entry.path().is_dir() {
                continue;
            }
            match read_marker(&entry.path()) {
                Some(created) => {
                    self.open(&id, &created).with_context(|| format!("serving created index {id}"))?;
                    served.push(id);
                }
                None if entry.path().join("base").is_dir() => {
                    tracing::warn!("{}: a creation that did not finish; removed", entry.path().display());
                    let _ = std::fs::remove_dir_all(entry.path());
                }
                None => {}
            }
        }
        Ok(served)
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// Serves created index `id`: its empty base (built now when missing) and its writes.
    fn open(&self, id: &str, created: &Created) -> Result<()> {
        let dir = self.dir(id);
        let base = dir.join("base");
        let index = match Index::load(&LocalDir::new(&base)) {
            Ok(index) => index,
            Err(_) => {
                let index = self.empty(id, created)?;
                index.save(&LocalDir::new(&base)).with_context(|| format!("saving {}", base.display()))?;
                index
            }
        };
        let financials = Financials::new(FactStore::default(), &index);
        let (engine, _) = self.models.engine(Arc::new(index))?;
        self.state.replace_index(id, ServedIndex::new(engine, financials), None);
        crate::serve::open_live(&self.state, id, &base, &dir, self.compact_at_chunks)
    }

    /// An index of no documents, cut as `created` says: its writes are encoded as they come.
    fn empty(&self, id: &str, created: &Created) -> Result<Index> {
        let models = self.models.set();
        let args = BuildArgs {
            chunk_tokens: created.chunk_tokens,
            chunk_overlap: created.chunk_overlap,
            ..self.build.clone()
        };
        let options = build_options(models, id, &args)?;
        let tokenizers = (TextTokenizer::of_model(&models.dense)?, TextTokenizer::of_model(&models.sparse)?);
        let dim = ModelInfo::read(&models.dense)?.hidden_size;
        match plan_build(Vec::new(), &[], &options, (&tokenizers.0, &tokenizers.1), &Previous::none(), None)? {
            Planned::Ready { plan, .. } => Ok(lexical_only(*plan, dim)?),
            Planned::Unchanged(_) => anyhow::bail!("an empty plan is never unchanged without a previous build"),
        }
    }
}

/// The ids of the indexes created under `root` (those [`LocalIndexAdmin::reopen`] serves
/// again).
pub fn created_under(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|id| sextant_server::check_index_id(id).is_ok() && read_marker(&root.join(id)).is_some())
        .collect()
}

fn read_marker(dir: &Path) -> Option<Created> {
    serde_json::from_slice(&std::fs::read(dir.join(MARKER)).ok()?).ok()
}

/// Writes the marker whole or not at all (a temporary file renamed over it).
fn write_marker(dir: &Path, created: &Created) -> Result<()> {
    let tmp = dir.join(format!("{MARKER}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(created)?)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(MARKER))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

impl IndexAdmin for LocalIndexAdmin {
    fn create(&self, id: &str, options: IndexOptions) -> Result<bool, AdminError> {
        let _one = self.lock.lock().expect("admin lock");
        let (chunk_tokens, chunk_overlap) = options.resolve((self.build.chunk_tokens, self.build.chunk_overlap))?;
        let wanted = Created { chunk_tokens, chunk_overlap };
        let dir = self.dir(id);
        match read_marker(&dir) {
            Some(existing) if existing == wanted => return Ok(false),
            Some(existing) => {
                return Err(AdminError::Conflict(format!(
                    "index {id} exists with chunkTokens {} and chunkOverlap {}: delete it first to change them",
                    existing.chunk_tokens, existing.chunk_overlap
                )))
            }
            None if self.state.loaded_index(id).is_some() => {
                return Err(AdminError::Conflict(format!(
                    "index {id} is served from the server's own corpus or index directory, not created through the API"
                )))
            }
            None => {}
        }
        let made = (|| -> Result<()> {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            self.open(id, &wanted)?;
            write_marker(&dir, &wanted)
        })();
        made.map_err(|e| {
            self.state.remove_index(id);
            let _ = std::fs::remove_dir_all(&dir);
            AdminError::Unavailable(format!("creating index {id} in {}: {e:#}", dir.display()))
        })?;
        tracing::info!("created index {id} in {}", dir.display());
        Ok(true)
    }

    fn delete(&self, id: &str) -> Result<bool, AdminError> {
        let _one = self.lock.lock().expect("admin lock");
        let dir = self.dir(id);
        if read_marker(&dir).is_none() {
            if self.state.loaded_index(id).is_some() {
                return Err(AdminError::Conflict(format!(
                    "index {id} is served from the server's own corpus or index directory, not created through the \
                     API: stop serving it instead"
                )));
            }
            return Ok(false);
        }
        // Renamed first, so that a crash while removing leaves no index to serve again; and
        // only then no longer served, so that a rename that fails leaves it as it was.
        let gone = trash_name(&self.root, id);
        std::fs::rename(&dir, &gone)
            .map_err(|e| AdminError::Unavailable(format!("deleting {}: {e}", dir.display())))?;
        self.state.remove_index(id);
        if let Err(e) = std::fs::remove_dir_all(&gone) {
            tracing::warn!("{}: not removed: {e}", gone.display());
        }
        tracing::info!("deleted index {id}");
        Ok(true)
    }
}

/// Where index `id`'s directory goes while it is removed: `.deleted-{id}-{pid}-{n}` under
/// `root`, the first `n` that names nothing, so that what an earlier removal failed to
/// delete (removed at the next start) never stops a delete.
fn trash_name(root: &Path, id: &str) -> PathBuf {
    let pid = std::process::id();
    (0u64..)
        .map(|n| root.join(format!(".deleted-{id}-{pid}-{n}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("a free name")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_never_renames_onto_what_an_earlier_removal_left() {
        let root = tempfile::tempdir().unwrap();
        let first = trash_name(root.path(), "docs");
        // An earlier delete of the same id whose removal failed half-way.
        std::fs::create_dir_all(first.join("base")).unwrap();
        std::fs::write(first.join("base/left.bin"), b"x").unwrap();
        let index = root.path().join("docs");
        std::fs::create_dir_all(&index).unwrap();
        let second = trash_name(root.path(), "docs");
        assert_ne!(first, second);
        std::fs::rename(&index, &second).unwrap();
        assert!(first.join("base/left.bin").exists() && !index.exists());
        assert!(
            second.file_name().unwrap().to_string_lossy().starts_with(".deleted-docs-"),
            "removed at the next start"
        );
    }
}
