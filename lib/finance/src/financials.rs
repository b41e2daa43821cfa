//! The financial side of one index version: its XBRL facts, stored as their own file
//! ([`FACTS_FILE`]) beside the index's files and listed in the same manifest, and the
//! company dictionary the question classifier reads.

use sextant_core::error::{Error, Result};
use sextant_core::index::format::{self, FileEntry, Manifest};
use sextant_core::index::Index;
use sextant_core::storage::Storage;

use crate::classify::Companies;
use crate::facts::FactStore;

/// The facts' file in an index version (optional: an index built without facts has none).
pub const FACTS_FILE: &str = "facts.bin";

/// The facts of one index and its company dictionary: the facts' companies and every ticker
/// of the index's documents.
#[derive(Debug, Clone, Default)]
pub struct Financials {
    /// XBRL facts of the corpus's companies (empty when the index was built without).
    pub facts: FactStore,
    /// The question classifier's company dictionary.
    pub companies: Companies,
}

impl Financials {
    /// The financials of `index` from `facts`.
    pub fn new(facts: FactStore, index: &Index) -> Self {
        let companies = Companies::new(&facts, index.documents.iter().filter_map(|d| d.ticker.clone()));
        Financials { facts, companies }
    }

    /// Reads the facts of the index version in `storage` (verified against its manifest)
    /// when it has any, and pairs them with `index`.
    pub fn load(storage: &dyn Storage, index: &Index) -> Result<Self> {
        let facts = match facts_entry(&index.manifest) {
            Some(entry) => decode_facts(&storage.location(), entry, &storage.read_blob(FACTS_FILE)?)?,
            None => FactStore::default(),
        };
        Ok(Financials::new(facts, index))
    }

    /// The facts' file to save beside an index ([`Index::save_with`]); none when there are
    /// no facts.
    pub fn attachment(facts: &FactStore) -> Result<Option<(String, Vec<u8>)>> {
        if facts.is_empty() {
            return Ok(None);
        }
        Ok(Some((FACTS_FILE.to_string(), bincode::serialize(facts)?)))
    }
}

/// The manifest's entry for the facts' file, if the version has one.
pub fn facts_entry(manifest: &Manifest) -> Option<&FileEntry> {
    manifest.files.iter().find(|f| f.name == FACTS_FILE)
}

/// Verifies the facts' file downloaded or read from `location` (size and SHA-256, as
/// `entry` lists them) and decodes it.
pub fn decode_facts(location: &str, entry: &FileEntry, bytes: &[u8]) -> Result<FactStore> {
    format::verify(location, entry, bytes)?;
    let mut facts: FactStore = bincode::deserialize(bytes).map_err(|e| Error::IndexCorrupted {
        file: format!("{location}/{FACTS_FILE}"),
        expected: "a decodable file".into(),
        found: e.to_string(),
    })?;
    facts.reindex();
    Ok(facts)
}
