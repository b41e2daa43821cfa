//! The financial side of one index version: its XBRL facts, stored as their own file
//! ([`FACTS_FILE`]) beside the index's files and listed in the same manifest, and the
//! company dictionary the question classifier reads.

use std::sync::OnceLock;

use sextant_core::error::Result;
use sextant_core::index::format;
use sextant_core::index::Index;
use sextant_core::pipeline::IndexView;
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
    /// The tickers of the index's documents.
    tickers: Vec<String>,
    /// Built on first use: only `/v1/context` reads it, and a function that serves only
    /// the search endpoints should not pay for it at cold start.
    companies: OnceLock<Companies>,
}

impl Financials {
    /// The financials of `index` from `facts`.
    pub fn new(facts: FactStore, index: &dyn IndexView) -> Self {
        let tickers = index.documents().filter_map(|d| d.ticker.clone()).collect();
        Financials { facts, tickers, companies: OnceLock::new() }
    }

    /// The question classifier's company dictionary (built on first use).
    pub fn companies(&self) -> &Companies {
        self.companies.get_or_init(|| Companies::new(&self.facts, self.tickers.iter().cloned()))
    }

    /// Reads the facts of the index version in `storage` (verified against its manifest)
    /// when it has any, and pairs them with `index`.
    pub fn load(storage: &dyn Storage, index: &Index) -> Result<Self> {
        let facts = match index.manifest.files.iter().find(|f| f.name == FACTS_FILE) {
            Some(entry) => {
                let blob = format::read_verified(storage, entry)?;
                let mut facts: FactStore = format::decode_bincode(&storage.location(), FACTS_FILE, &blob)?;
                facts.reindex();
                facts
            }
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
