//! Memory retrieval: remembered facts about users and conversations, ranked by recency,
//! relevance and importance together.
//!
//! A [`MemoryStore`] keeps [`MemoryEntry`]s ([`InMemoryStore`] in process; implement the
//! trait for a database). A [`ScoredMemoryRetriever`] ranks the entries of a store for a
//! query text by recency, relevance and importance together; its
//! [`ScoredMemoryRetriever::as_retriever`] makes it a [`Retriever`] whose items are
//! [`Source::Memory`], so memories can be fused or packed beside retrieved passages.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sextant_core::error::{Error, Result};
use sextant_core::index::{dot, Analyzer, Stemming};

use super::item::{ContextItem, Metadata, Query, Source};
use super::traits::Retriever;
use super::vector::Embed;

/// The [`ContextItem::priority`] of memories: above retrieved passages'
/// ([`super::DEFAULT_PRIORITY`]), since what a user told us is rarely redundant.
///
/// ```
/// use sextant_kit::{DEFAULT_PRIORITY, MEMORY_PRIORITY};
///
/// assert!(MEMORY_PRIORITY > DEFAULT_PRIORITY);
/// ```
pub const MEMORY_PRIORITY: u8 = 7;

/// One remembered fact: who it is about, what kind it is, what it says and how much it
/// matters.
///
/// Times are Unix seconds. `importance` lies in `[0, 1]` ([`ScoredMemoryRetriever::add_entry`]
/// refuses other values). `embedding` is filled by [`ScoredMemoryRetriever::add_entry`] when
/// the retriever has an embedding function.
///
/// ```
/// use sextant_kit::MemoryEntry;
/// use serde_json::json;
///
/// let e = MemoryEntry::new("m1", "ana", "preference", "Likes charts", 0.8, 1_700_000_000.0)
///     .with_metadata("channel", json!("chat"));
/// assert_eq!((e.created_at, e.last_accessed), (1_700_000_000.0, 1_700_000_000.0));
/// assert!(e.embedding.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// Unique identifier; adding an entry with an existing id replaces it.
    pub id: String,
    /// The user the memory belongs to.
    pub user_id: String,
    /// Its kind (`"fact"`, `"preference"`, `"episode"`...).
    pub memory_type: String,
    /// What is remembered.
    pub content: String,
    /// How much it matters, in `[0, 1]`.
    pub importance: f32,
    /// When it was created (Unix seconds).
    pub created_at: f64,
    /// When it was last created, retrieved or otherwise used (Unix seconds).
    pub last_accessed: f64,
    /// Free metadata, copied to the items of [`MemoryRetrieverAdapter`].
    #[serde(default)]
    pub metadata: Metadata,
    /// The embedding of `content`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

impl MemoryEntry {
    /// An entry created and last accessed at `at`, with no metadata and no embedding.
    pub fn new(
        id: impl Into<String>,
        user_id: impl Into<String>,
        memory_type: impl Into<String>,
        content: impl Into<String>,
        importance: f32,
        at: f64,
    ) -> Self {
        MemoryEntry {
            id: id.into(),
            user_id: user_id.into(),
            memory_type: memory_type.into(),
            content: content.into(),
            importance,
            created_at: at,
            last_accessed: at,
            metadata: Metadata::new(),
            embedding: None,
        }
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Sets a precomputed embedding of `content`.
    pub fn with_embedding(mut self, embedding: Vec<f32>) -> Self {
        self.embedding = Some(embedding);
        self
    }

    fn validate(&self) -> Result<()> {
        if self.id.is_empty() {
            return Err(Error::invalid("id", "a memory needs a non-empty id"));
        }
        if !(0.0..=1.0).contains(&self.importance) {
            return Err(Error::invalid(
                "importance",
                format!("{} is not in [0, 1] (memory {:?})", self.importance, self.id),
            ));
        }
        if !self.created_at.is_finite() || !self.last_accessed.is_finite() {
            return Err(Error::invalid("created_at", format!("memory {:?} has a NaN or infinite time", self.id)));
        }
        if let Some(v) = &self.embedding {
            check_vector(v, &self.id)?;
        }
        Ok(())
    }
}

fn check_vector(v: &[f32], id: &str) -> Result<()> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid("embedding", format!("memory {id:?}: empty or holding NaN or infinity")));
    }
    Ok(())
}

/// Which entries to consider: those of a user, of a type, or both (`None` matches any).
///
/// ```
/// use sextant_kit::{MemoryEntry, MemoryFilter};
///
/// let e = MemoryEntry::new("m1", "ana", "fact", "Works in treasury", 0.5, 0.0);
/// assert!(MemoryFilter::default().matches(&e));
/// assert!(MemoryFilter::default().with_user("ana").with_type("fact").matches(&e));
/// assert!(!MemoryFilter::default().with_user("ben").matches(&e));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryFilter {
    /// Only this user's entries.
    pub user_id: Option<String>,
    /// Only entries of this type.
    pub memory_type: Option<String>,
}

impl MemoryFilter {
    /// Restricts to `user_id`'s entries.
    pub fn with_user(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// Restricts to entries of `memory_type`.
    pub fn with_type(mut self, memory_type: impl Into<String>) -> Self {
        self.memory_type = Some(memory_type.into());
        self
    }

    /// Whether `entry` passes.
    pub fn matches(&self, entry: &MemoryEntry) -> bool {
        self.user_id.as_ref().is_none_or(|u| *u == entry.user_id)
            && self.memory_type.as_ref().is_none_or(|t| *t == entry.memory_type)
    }
}

/// Where memories live. Methods return `Result` so that a database-backed store can report
/// its failures.
///
/// ```
/// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, MemoryStore};
///
/// let store = InMemoryStore::new();
/// store.add(MemoryEntry::new("m1", "ana", "fact", "old text", 0.5, 10.0)).unwrap();
/// store.add(MemoryEntry::new("m1", "ana", "fact", "new text", 0.5, 10.0)).unwrap(); // replaces
/// assert!(store.touch("m1", 20.0).unwrap());
/// let m1 = store.get("m1").unwrap().unwrap();
/// assert_eq!((m1.content.as_str(), m1.last_accessed), ("new text", 20.0));
/// assert_eq!(store.entries(&MemoryFilter::default().with_user("ben")).unwrap().len(), 0);
/// ```
pub trait MemoryStore: Send + Sync {
    /// Stores `entry`, replacing any entry with the same id.
    fn add(&self, entry: MemoryEntry) -> Result<()>;
    /// The entry with `id`, if any.
    fn get(&self, id: &str) -> Result<Option<MemoryEntry>>;
    /// Every entry `filter` matches (in no particular order the caller may rely on).
    fn entries(&self, filter: &MemoryFilter) -> Result<Vec<MemoryEntry>>;
    /// Records a use at `at`: `last_accessed` becomes `at` if that is later (it never moves
    /// back). `Ok(false)` when there is no entry with `id`.
    fn touch(&self, id: &str, at: f64) -> Result<bool>;
}

#[derive(Default)]
struct Entries {
    list: Vec<MemoryEntry>,
    by_id: HashMap<String, usize>,
}

/// A [`MemoryStore`] in process memory, behind a read-write lock. Entries are listed in
/// the order they were first added; replacing an entry keeps its place.
///
/// ```
/// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryStore};
///
/// let store = InMemoryStore::new();
/// assert!(store.is_empty());
/// store.add(MemoryEntry::new("m1", "ana", "fact", "text", 0.5, 0.0)).unwrap();
/// assert_eq!(store.len(), 1);
/// assert!(!store.touch("missing", 1.0).unwrap());
/// ```
#[derive(Default)]
pub struct InMemoryStore {
    entries: RwLock<Entries>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries are stored.
    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|e| e.into_inner()).list.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryStore").field("len", &self.len()).finish()
    }
}

impl MemoryStore for InMemoryStore {
    fn add(&self, entry: MemoryEntry) -> Result<()> {
        let mut e = self.entries.write().unwrap_or_else(|e| e.into_inner());
        match e.by_id.get(&entry.id) {
            Some(&i) => e.list[i] = entry,
            None => {
                let i = e.list.len();
                e.by_id.insert(entry.id.clone(), i);
                e.list.push(entry);
            }
        }
        Ok(())
    }

    fn get(&self, id: &str) -> Result<Option<MemoryEntry>> {
        let e = self.entries.read().unwrap_or_else(|e| e.into_inner());
        Ok(e.by_id.get(id).map(|&i| e.list[i].clone()))
    }

    fn entries(&self, filter: &MemoryFilter) -> Result<Vec<MemoryEntry>> {
        let e = self.entries.read().unwrap_or_else(|e| e.into_inner());
        Ok(e.list.iter().filter(|m| filter.matches(m)).cloned().collect())
    }

    fn touch(&self, id: &str, at: f64) -> Result<bool> {
        let mut e = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let Some(&i) = e.by_id.get(id) else { return Ok(false) };
        let entry = &mut e.list[i];
        if at > entry.last_accessed {
            entry.last_accessed = at;
        }
        Ok(true)
    }
}

/// Exponential forgetting: a memory's recency weight halves every `half_life_secs`.
///
/// ```
/// use sextant_kit::MemoryDecay;
///
/// let decay = MemoryDecay::new(3_600.0).unwrap(); // one hour
/// assert_eq!(decay.weight(0.0), 1.0);
/// assert_eq!(decay.weight(3_600.0), 0.5);
/// assert_eq!(decay.weight(-5.0), 1.0); // from the future: treated as now
/// assert_eq!(MemoryDecay::default().half_life_secs(), 7.0 * 86_400.0);
/// assert!(MemoryDecay::new(0.0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryDecay {
    half_life_secs: f64,
}

impl Default for MemoryDecay {
    fn default() -> Self {
        MemoryDecay { half_life_secs: Self::DEFAULT_HALF_LIFE_SECS }
    }
}

impl MemoryDecay {
    /// The default half-life: seven days.
    pub const DEFAULT_HALF_LIFE_SECS: f64 = 7.0 * 86_400.0;

    /// A decay with half-life `half_life_secs`. Errors: zero, negative, NaN or infinite.
    pub fn new(half_life_secs: f64) -> Result<Self> {
        if !(half_life_secs.is_finite() && half_life_secs > 0.0) {
            return Err(Error::invalid("half_life_secs", format!("must be positive and finite, got {half_life_secs}")));
        }
        Ok(MemoryDecay { half_life_secs })
    }

    /// The half-life in seconds.
    pub fn half_life_secs(&self) -> f64 {
        self.half_life_secs
    }

    /// The weight of a memory last used `age_secs` ago: `0.5 ^ (age / half_life)`, in
    /// `[0, 1]`. A negative age (a clock skew) counts as 0; a NaN age (an unknown time)
    /// weighs 0.
    pub fn weight(&self, age_secs: f64) -> f32 {
        if age_secs.is_nan() {
            return 0.0;
        }
        0.5f64.powf(age_secs.max(0.0) / self.half_life_secs) as f32
    }
}

/// Ranks a store's memories for a query by recency, relevance and importance together, the
/// composite score of the "generative agents" memory stream (Park et al., 2023,
/// <https://arxiv.org/abs/2304.03442>):
///
/// ```text
/// score      = α · recency + β · relevance + γ · importance      (α, β, γ ≥ 0; 0.3, 0.5, 0.2 by default)
/// recency    = 0.5 ^ ((now − last_accessed) / half_life)         (1 when just used; half-life 7 days by default)
/// relevance  = max(0, cosine(query embedding, entry embedding))  (when both exist)
///            | |distinct query terms ∩ entry terms| / |distinct query terms|   (otherwise)
/// importance = the entry's own, clamped to [0, 1]
/// ```
///
/// Terms are the engine's analysed terms ([`sextant_core::index::Analyzer`]: lower-cased, stop
/// words dropped, stemmed in English). Relevance is the cosine of the query's and the entry's embeddings (clamped to `[0, 1]`)
/// when the retriever has an embedding function ([`ScoredMemoryRetriever::with_embed`]) and
/// the entry has an embedding; otherwise the share of the query's distinct terms found in
/// the entry. A query with no terms (empty, or stop words only) has relevance 0 everywhere.
/// Ties are broken by the more recently used entry, then by id.
///
/// **Retrieval is a use.** By default every returned entry is touched
/// ([`MemoryStore::touch`]): its `last_accessed` becomes the retrieval time, so memories that
/// keep being recalled stay fresh. The entries returned are as they were scored (before the
/// touch). Turn this off with [`ScoredMemoryRetriever::touch_on_retrieve`] for read-only
/// lookups. A failed touch is logged, not returned: the results are still good.
///
/// ```
/// use std::sync::Arc;
/// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, MemoryStore, ScoredMemoryRetriever};
///
/// let store = Arc::new(InMemoryStore::new());
/// let memory = ScoredMemoryRetriever::new(store.clone()).with_weights(1.0, 0.0, 0.0).unwrap(); // recency only
/// memory.add_entry(MemoryEntry::new("old", "ana", "fact", "a", 0.5, 0.0)).unwrap();
/// memory.add_entry(MemoryEntry::new("new", "ana", "fact", "b", 0.5, 100.0)).unwrap();
/// let hits = memory.retrieve_at("anything", 1, &MemoryFilter::default(), 100.0).unwrap();
/// assert_eq!((hits[0].0.id.as_str(), hits[0].1), ("new", 1.0));
/// ```
///
/// All three signals, for one user:
///
/// ```
/// use std::sync::Arc;
/// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, ScoredMemoryRetriever};
///
/// let day = 86_400.0;
/// let memory = ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new()));
/// memory
///     .add_entry(MemoryEntry::new("m1", "ana", "preference", "Prefers charts of quarterly revenue", 0.9, 0.0))
///     .unwrap();
/// memory.add_entry(MemoryEntry::new("m2", "ana", "fact", "Works in the treasury team", 0.4, 9.0 * day)).unwrap();
/// memory.add_entry(MemoryEntry::new("m3", "ben", "preference", "Prefers revenue tables", 0.9, 9.0 * day)).unwrap();
///
/// let ana = MemoryFilter::default().with_user("ana");
/// let hits = memory.retrieve_at("show revenue", 2, &ana, 10.0 * day).unwrap();
/// assert_eq!(hits[0].0.id, "m1"); // relevant and important, though older
/// assert_eq!(hits.len(), 2);      // ben's memory is not ana's
/// ```
pub struct ScoredMemoryRetriever {
    store: Arc<dyn MemoryStore>,
    embed: Option<Arc<dyn Embed>>,
    decay: MemoryDecay,
    alpha: f32,
    beta: f32,
    gamma: f32,
    touch: bool,
    analyzer: Analyzer,
}

impl ScoredMemoryRetriever {
    /// A retriever over `store` with lexical relevance, a seven-day half-life and weights
    /// 0.3 / 0.5 / 0.2 (recency / relevance / importance).
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        ScoredMemoryRetriever {
            store,
            embed: None,
            decay: MemoryDecay::default(),
            alpha: 0.3,
            beta: 0.5,
            gamma: 0.2,
            touch: true,
            analyzer: Analyzer::new(Stemming::English),
        }
    }

    /// Embeds entries on [`ScoredMemoryRetriever::add_entry`] and queries on retrieval, for
    /// cosine relevance.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, MemoryStore, ScoredMemoryRetriever};
    ///
    /// // Toy embedding: mentions of "money" and "team". "cash" is a synonym the lexical score would miss.
    /// let embed = |t: &str| {
    ///     Ok(vec![(t.contains("money") || t.contains("cash")) as u8 as f32, t.contains("team") as u8 as f32 + 0.01])
    /// };
    /// let store = Arc::new(InMemoryStore::new());
    /// let memory = ScoredMemoryRetriever::new(store.clone()).with_embed(embed).with_weights(0.0, 1.0, 0.0).unwrap();
    /// memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "Manages cash", 0.5, 0.0)).unwrap();
    /// memory.add_entry(MemoryEntry::new("m2", "ana", "fact", "Leads a team", 0.5, 0.0)).unwrap();
    /// assert!(store.get("m1").unwrap().unwrap().embedding.is_some());
    /// let hits = memory.retrieve_at("money", 1, &MemoryFilter::default(), 0.0).unwrap();
    /// assert_eq!(hits[0].0.id, "m1");
    /// ```
    pub fn with_embed(mut self, embed: impl Embed + 'static) -> Self {
        self.embed = Some(Arc::new(embed));
        self
    }

    /// The recency decay (default: a seven-day half-life).
    pub fn with_decay(mut self, decay: MemoryDecay) -> Self {
        self.decay = decay;
        self
    }

    /// The weights of recency (`alpha`), relevance (`beta`) and importance (`gamma`). They
    /// need not sum to 1; scores then lie in `[0, alpha + beta + gamma]`. Errors: a negative,
    /// NaN or infinite weight, or all three zero.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, ScoredMemoryRetriever};
    ///
    /// let new = || ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new()));
    /// assert_eq!(new().with_weights(0.0, 1.0, 0.0).unwrap().weights(), (0.0, 1.0, 0.0));
    /// assert!(new().with_weights(-0.1, 1.0, 0.0).is_err());
    /// assert!(new().with_weights(0.0, 0.0, 0.0).is_err());
    /// ```
    pub fn with_weights(mut self, alpha: f32, beta: f32, gamma: f32) -> Result<Self> {
        for (name, w) in [("alpha", alpha), ("beta", beta), ("gamma", gamma)] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(Error::invalid(name, format!("a weight must be finite and non-negative, got {w}")));
            }
        }
        if alpha + beta + gamma == 0.0 {
            return Err(Error::invalid("weights", "alpha, beta and gamma are all zero: every memory would score 0"));
        }
        (self.alpha, self.beta, self.gamma) = (alpha, beta, gamma);
        Ok(self)
    }

    /// Whether retrieval touches the returned entries (default `true`; see the type's
    /// documentation).
    pub fn touch_on_retrieve(mut self, yes: bool) -> Self {
        self.touch = yes;
        self
    }

    /// The weights `(alpha, beta, gamma)`.
    pub fn weights(&self) -> (f32, f32, f32) {
        (self.alpha, self.beta, self.gamma)
    }

    /// The decay.
    pub fn decay(&self) -> MemoryDecay {
        self.decay
    }

    /// The backing store.
    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    /// Validates `entry`, embeds its content when the retriever has an embedding function
    /// and the entry no embedding, and stores it (replacing an entry with the same id).
    ///
    /// Errors: an empty id, an importance outside `[0, 1]` or NaN, a NaN or infinite time,
    /// an empty or non-finite embedding, the embedding function's or the store's error.
    /// Nothing is stored on error.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, MemoryEntry, ScoredMemoryRetriever};
    ///
    /// let store = Arc::new(InMemoryStore::new());
    /// let memory = ScoredMemoryRetriever::new(store.clone());
    /// assert!(memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "text", 1.5, 0.0)).is_err());
    /// assert!(memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "text", 1.0, 0.0)).is_ok());
    /// assert_eq!(store.len(), 1);
    /// ```
    pub fn add_entry(&self, mut entry: MemoryEntry) -> Result<()> {
        entry.validate()?;
        if let (None, Some(embed)) = (&entry.embedding, &self.embed) {
            let v = embed.embed(&entry.content)?;
            check_vector(&v, &entry.id)?;
            entry.embedding = Some(v);
        }
        self.store.add(entry)
    }

    /// The `top_k` best entries `filter` admits for `query`, best first, with their scores,
    /// at the system clock's time. See [`ScoredMemoryRetriever::retrieve_at`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, ScoredMemoryRetriever};
    ///
    /// let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    /// let memory = ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new()));
    /// memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "Works in treasury", 1.0, now)).unwrap();
    /// let hits = memory.retrieve("treasury", 5, &MemoryFilter::default()).unwrap();
    /// assert!(hits[0].1 > 0.99); // fresh, fully relevant, fully important
    /// ```
    pub fn retrieve(&self, query: &str, top_k: usize, filter: &MemoryFilter) -> Result<Vec<(MemoryEntry, f32)>> {
        self.retrieve_at(query, top_k, filter, now_secs())
    }

    /// [`ScoredMemoryRetriever::retrieve`] at time `now` (Unix seconds): deterministic, for
    /// tests and replays. Touched entries get `last_accessed = now` (if later).
    ///
    /// Errors: a NaN or infinite `now`, the store's or the embedding function's error, an
    /// entry embedding whose dimension differs from the query's.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryFilter, MemoryStore, ScoredMemoryRetriever};
    ///
    /// let store = Arc::new(InMemoryStore::new());
    /// let memory = ScoredMemoryRetriever::new(store.clone());
    /// memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "Works in treasury", 0.5, 0.0)).unwrap();
    /// let week = 7.0 * 86_400.0;
    /// let hits = memory.retrieve_at("treasury", 5, &MemoryFilter::default(), week).unwrap();
    /// // 0.3 · 0.5 (one half-life old) + 0.5 · 1 (every query term found) + 0.2 · 0.5
    /// assert!((hits[0].1 - 0.75).abs() < 1e-6);
    /// assert_eq!(store.get("m1").unwrap().unwrap().last_accessed, week); // touched
    /// ```
    pub fn retrieve_at(
        &self,
        query: &str,
        top_k: usize,
        filter: &MemoryFilter,
        now: f64,
    ) -> Result<Vec<(MemoryEntry, f32)>> {
        self.rank(query, None, top_k, filter, now, &|_| true)
    }

    /// Scores and ranks the entries `filter` and `admit` pass; touches the winners.
    fn rank(
        &self,
        query: &str,
        query_vector: Option<Vec<f32>>,
        top_k: usize,
        filter: &MemoryFilter,
        now: f64,
        admit: &dyn Fn(&MemoryEntry) -> bool,
    ) -> Result<Vec<(MemoryEntry, f32)>> {
        if !now.is_finite() {
            return Err(Error::invalid("now", format!("must be finite, got {now}")));
        }
        if top_k == 0 {
            return Ok(Vec::new());
        }
        // A custom store may ignore the filter; check it again.
        let entries: Vec<MemoryEntry> =
            self.store.entries(filter)?.into_iter().filter(|e| filter.matches(e) && admit(e)).collect();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let query_vector = match query_vector {
            Some(v) => Some(v),
            None => match &self.embed {
                Some(embed) if entries.iter().any(|e| e.embedding.is_some()) => Some(embed.embed(query)?),
                _ => None,
            },
        };
        let query_terms: HashSet<String> = self.analyzer.terms(query).into_iter().collect();
        let mut scored = Vec::with_capacity(entries.len());
        for entry in entries {
            let relevance = match (&query_vector, &entry.embedding) {
                (Some(q), Some(e)) => {
                    if q.len() != e.len() {
                        let (id, have, want) = (&entry.id, e.len(), q.len());
                        return Err(Error::Component {
                            component: "memory".into(),
                            reason: format!(
                                "memory {id:?} has an embedding of dimension {have} but the query's has {want}"
                            ),
                        });
                    }
                    cosine(q, e).clamp(0.0, 1.0)
                }
                _ => self.term_overlap(&query_terms, &entry.content),
            };
            let recency = self.decay.weight(now - entry.last_accessed);
            let importance = if entry.importance.is_nan() { 0.0 } else { entry.importance.clamp(0.0, 1.0) };
            let score = self.alpha * recency + self.beta * relevance + self.gamma * importance;
            scored.push((entry, score));
        }
        scored.sort_by(|(a, sa), (b, sb)| {
            sb.total_cmp(sa).then(b.last_accessed.total_cmp(&a.last_accessed)).then_with(|| a.id.cmp(&b.id))
        });
        scored.truncate(top_k);
        if self.touch {
            for (entry, _) in &scored {
                if let Err(e) = self.store.touch(&entry.id, now) {
                    tracing::warn!(memory = %entry.id, error = %e, "could not record a memory's retrieval");
                }
            }
        }
        Ok(scored)
    }

    /// The share of `query_terms` found among `content`'s terms (0 without query terms).
    fn term_overlap(&self, query_terms: &HashSet<String>, content: &str) -> f32 {
        if query_terms.is_empty() {
            return 0.0;
        }
        let terms: HashSet<String> = self.analyzer.terms(content).into_iter().collect();
        query_terms.intersection(&terms).count() as f32 / query_terms.len() as f32
    }

    /// This retriever as a [`Retriever`] of [`ContextItem`]s ([`MemoryRetrieverAdapter`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sextant_kit::{InMemoryStore, MemoryEntry, Query, Retriever, ScoredMemoryRetriever, Source};
    ///
    /// let memory = Arc::new(ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new())));
    /// memory.add_entry(MemoryEntry::new("m1", "ana", "fact", "Works in treasury", 0.5, 0.0)).unwrap();
    /// let hits = memory.clone().as_retriever().retrieve(&Query::new("treasury"), 3).unwrap();
    /// assert_eq!((hits[0].id.as_str(), hits[0].source), ("m1", Source::Memory));
    /// ```
    pub fn as_retriever(self: Arc<Self>) -> MemoryRetrieverAdapter {
        MemoryRetrieverAdapter::new(self)
    }
}

impl fmt::Debug for ScoredMemoryRetriever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScoredMemoryRetriever")
            .field("embed", &self.embed.is_some())
            .field("decay", &self.decay)
            .field("weights", &self.weights())
            .field("touch_on_retrieve", &self.touch)
            .finish_non_exhaustive()
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms > 0.0 && norms.is_finite() {
        dot(a, b) / norms
    } else {
        0.0
    }
}

/// The system clock in Unix seconds (0 if it is set before 1970).
fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A [`ScoredMemoryRetriever`] as a [`Retriever`], for pipelines mixing memories and
/// passages.
///
/// The [`MemoryFilter`] comes from the query: `user_id` and `memory_type` are read from
/// [`Query::filters`], else from [`Query::metadata`], as strings (a non-string metadata value
/// is an error). All of the query's filters then apply, before ranking, to each memory's
/// item metadata ([`Query::admits`]), so an array filter (`"user_id": ["ana", "ben"]`) or a
/// filter on the memory's own metadata works too. A [`Query::embedding`] is used as the
/// query's embedding. The clock is the system's.
///
/// Items: `id` = the entry id, `text` = its content, `score` = the composite score,
/// `source` = [`Source::Memory`], `priority` = [`MEMORY_PRIORITY`]; metadata holds the
/// entry's own metadata plus `user_id`, `memory_type`, `importance`, `created_at`,
/// `last_accessed` (before this retrieval's touch) and `retrieval_method = "memory"`.
///
/// ```
/// use std::sync::Arc;
/// use sextant_kit::{InMemoryStore, MemoryEntry, MemoryRetrieverAdapter, Query, Retriever, ScoredMemoryRetriever};
/// use serde_json::json;
///
/// let memory = Arc::new(ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new())));
/// memory.add_entry(MemoryEntry::new("a1", "ana", "fact", "Ana covers semiconductors", 0.5, 0.0)).unwrap();
/// memory.add_entry(MemoryEntry::new("b1", "ben", "fact", "Ben covers semiconductors", 0.5, 0.0)).unwrap();
/// let adapter = MemoryRetrieverAdapter::new(memory);
/// let hits = adapter.retrieve(&Query::new("semiconductors").with_metadata("user_id", json!("ben")), 5).unwrap();
/// assert_eq!(hits.len(), 1);
/// assert_eq!((hits[0].id.as_str(), hits[0].priority), ("b1", 7));
/// assert_eq!(hits[0].metadata["user_id"], "ben");
/// assert_eq!(hits[0].metadata["retrieval_method"], "memory");
/// ```
#[derive(Debug, Clone)]
pub struct MemoryRetrieverAdapter {
    memory: Arc<ScoredMemoryRetriever>,
}

impl MemoryRetrieverAdapter {
    /// The adapter of `memory`.
    pub fn new(memory: Arc<ScoredMemoryRetriever>) -> Self {
        MemoryRetrieverAdapter { memory }
    }

    /// The memory retriever it adapts.
    pub fn memory(&self) -> &Arc<ScoredMemoryRetriever> {
        &self.memory
    }
}

/// `query.filters[key]` if it is a string (another filter value is left to
/// [`Query::admits`]); else `query.metadata[key]`, which must be a string or null.
fn query_key(query: &Query, key: &str) -> Result<Option<String>> {
    if let Some(v) = query.filters.get(key) {
        return Ok(v.as_str().map(str::to_string));
    }
    match query.metadata.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Error::invalid(format!("metadata.{key}"), format!("must be a string, got {other}"))),
    }
}

fn to_item(entry: &MemoryEntry, score: f32) -> ContextItem {
    let mut item = ContextItem::new(entry.id.clone(), entry.content.clone());
    item.source = Source::Memory;
    item.priority = MEMORY_PRIORITY;
    item.metadata = entry.metadata.clone();
    item.metadata.insert("user_id".into(), Value::from(entry.user_id.as_str()));
    item.metadata.insert("memory_type".into(), Value::from(entry.memory_type.as_str()));
    item.metadata.insert("importance".into(), Value::from(entry.importance));
    item.metadata.insert("created_at".into(), Value::from(entry.created_at));
    item.metadata.insert("last_accessed".into(), Value::from(entry.last_accessed));
    item.scored_by("memory", score)
}

impl Retriever for MemoryRetrieverAdapter {
    fn retrieve(&self, query: &Query, top_k: usize) -> Result<Vec<ContextItem>> {
        let filter =
            MemoryFilter { user_id: query_key(query, "user_id")?, memory_type: query_key(query, "memory_type")? };
        let admit = |e: &MemoryEntry| query.filters.is_empty() || query.admits(&to_item(e, 0.0));
        let ranked = self.memory.rank(&query.text, query.embedding.clone(), top_k, &filter, now_secs(), &admit)?;
        Ok(ranked.iter().map(|(e, s)| to_item(e, *s)).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DAY: f64 = 86_400.0;

    fn ids(hits: &[(MemoryEntry, f32)]) -> Vec<&str> {
        hits.iter().map(|(e, _)| e.id.as_str()).collect()
    }

    fn memory() -> (Arc<InMemoryStore>, ScoredMemoryRetriever) {
        let store = Arc::new(InMemoryStore::new());
        (store.clone(), ScoredMemoryRetriever::new(store))
    }

    fn entry(id: &str, user: &str, kind: &str, content: &str, importance: f32, at: f64) -> MemoryEntry {
        MemoryEntry::new(id, user, kind, content, importance, at)
    }

    #[test]
    fn decay_halves_every_half_life_and_refuses_bad_half_lives() {
        let d = MemoryDecay::new(10.0).unwrap();
        assert_eq!(d.weight(0.0), 1.0);
        assert_eq!(d.weight(10.0), 0.5);
        assert_eq!(d.weight(20.0), 0.25);
        assert_eq!(d.weight(-100.0), 1.0);
        assert_eq!(d.weight(f64::INFINITY), 0.0);
        assert_eq!(d.weight(f64::NAN), 0.0);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(MemoryDecay::new(bad).is_err(), "{bad}");
        }
        assert_eq!(MemoryDecay::default().weight(7.0 * DAY), 0.5);
    }

    #[test]
    fn exact_composite_scores() {
        let (_, m) = memory();
        m.add_entry(entry("m1", "u", "fact", "Quarterly revenue grew", 0.4, 0.0)).unwrap();
        // Half the query's distinct terms ("revenu", "margin") are in the entry; one half-life old.
        let hits = m.retrieve_at("revenue margin revenue", 1, &MemoryFilter::default(), 7.0 * DAY).unwrap();
        let want = 0.3 * 0.5 + 0.5 * 0.5 + 0.2 * 0.4;
        assert!((hits[0].1 - want).abs() < 1e-6, "{} vs {want}", hits[0].1);
    }

    #[test]
    fn relevance_uses_analysed_terms() {
        let (_, m) = memory();
        let m = m.with_weights(0.0, 1.0, 0.0).unwrap();
        m.add_entry(entry("m1", "u", "fact", "The revenues increased", 0.5, 0.0)).unwrap();
        let hits = m.retrieve_at("REVENUE increasing", 1, &MemoryFilter::default(), 0.0).unwrap();
        assert_eq!(hits[0].1, 1.0, "stemmed and lower-cased terms match");
        for nothing in ["", "the of and"] {
            assert_eq!(m.retrieve_at(nothing, 1, &MemoryFilter::default(), 0.0).unwrap()[0].1, 0.0, "{nothing:?}");
        }
    }

    #[test]
    fn weights_change_the_order_and_bad_weights_are_refused() {
        let (store, m) = memory();
        m.add_entry(entry("old-important", "u", "fact", "alpha", 1.0, 0.0)).unwrap();
        m.add_entry(entry("new-trivial", "u", "fact", "alpha", 0.0, 30.0 * DAY)).unwrap();
        let f = MemoryFilter::default();
        let recency =
            ScoredMemoryRetriever::new(store.clone()).with_weights(1.0, 0.0, 0.0).unwrap().touch_on_retrieve(false);
        assert_eq!(ids(&recency.retrieve_at("alpha", 2, &f, 30.0 * DAY).unwrap()), ["new-trivial", "old-important"]);
        let importance =
            ScoredMemoryRetriever::new(store).with_weights(0.0, 0.0, 1.0).unwrap().touch_on_retrieve(false);
        assert_eq!(ids(&importance.retrieve_at("alpha", 2, &f, 30.0 * DAY).unwrap()), ["old-important", "new-trivial"]);
        for (a, b, g) in [(-1.0, 1.0, 1.0), (1.0, f32::NAN, 1.0), (1.0, 1.0, f32::INFINITY), (0.0, 0.0, 0.0)] {
            assert!(
                ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new())).with_weights(a, b, g).is_err(),
                "{a} {b} {g}"
            );
        }
        let err = ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new())).with_weights(0.1, -0.5, 0.1).unwrap_err();
        assert!(err.to_string().contains("beta"), "{err}");
    }

    #[test]
    fn ties_go_to_the_more_recently_used_then_the_smaller_id() {
        let (_, m) = memory();
        let m = m.with_weights(0.0, 1.0, 0.0).unwrap().touch_on_retrieve(false);
        m.add_entry(entry("b", "u", "fact", "same", 0.5, 5.0)).unwrap();
        m.add_entry(entry("a", "u", "fact", "same", 0.5, 5.0)).unwrap();
        m.add_entry(entry("c", "u", "fact", "same", 0.5, 9.0)).unwrap();
        assert_eq!(ids(&m.retrieve_at("same", 3, &MemoryFilter::default(), 10.0).unwrap()), ["c", "a", "b"]);
    }

    #[test]
    fn filters_select_user_and_type() {
        let (_, m) = memory();
        m.add_entry(entry("a-fact", "ana", "fact", "x", 0.5, 0.0)).unwrap();
        m.add_entry(entry("a-pref", "ana", "preference", "x", 0.5, 0.0)).unwrap();
        m.add_entry(entry("b-fact", "ben", "fact", "x", 0.5, 0.0)).unwrap();
        let got = |f: MemoryFilter| {
            let mut v: Vec<String> = m.retrieve_at("x", 10, &f, 0.0).unwrap().into_iter().map(|(e, _)| e.id).collect();
            v.sort();
            v
        };
        assert_eq!(got(MemoryFilter::default().with_user("ana")), ["a-fact", "a-pref"]);
        assert_eq!(got(MemoryFilter::default().with_type("fact")), ["a-fact", "b-fact"]);
        assert_eq!(got(MemoryFilter::default().with_user("ana").with_type("fact")), ["a-fact"]);
        assert!(got(MemoryFilter::default().with_user("zoe")).is_empty());
    }

    #[test]
    fn retrieval_touches_the_returned_entries_only_and_can_be_turned_off() {
        let (store, m) = memory();
        m.add_entry(entry("hit", "u", "fact", "treasury", 0.5, 0.0)).unwrap();
        m.add_entry(entry("miss", "u", "fact", "other", 0.0, 0.0)).unwrap();
        let hits = m.retrieve_at("treasury", 1, &MemoryFilter::default(), 50.0).unwrap();
        assert_eq!(hits[0].0.last_accessed, 0.0, "returned as scored");
        assert_eq!(store.get("hit").unwrap().unwrap().last_accessed, 50.0);
        assert_eq!(store.get("miss").unwrap().unwrap().last_accessed, 0.0);
        m.retrieve_at("treasury", 1, &MemoryFilter::default(), 20.0).unwrap();
        assert_eq!(store.get("hit").unwrap().unwrap().last_accessed, 50.0, "never moves back");
        let quiet = ScoredMemoryRetriever::new(store.clone()).touch_on_retrieve(false);
        quiet.retrieve_at("treasury", 2, &MemoryFilter::default(), 99.0).unwrap();
        assert_eq!(store.get("hit").unwrap().unwrap().last_accessed, 50.0);
        assert_eq!(store.get("miss").unwrap().unwrap().last_accessed, 0.0);
    }

    #[test]
    fn add_entry_refuses_bad_entries_and_replaces_by_id() {
        let (store, m) = memory();
        for bad in [
            entry("m", "u", "fact", "x", -0.1, 0.0),
            entry("m", "u", "fact", "x", 1.01, 0.0),
            entry("m", "u", "fact", "x", f32::NAN, 0.0),
            entry("", "u", "fact", "x", 0.5, 0.0),
            entry("m", "u", "fact", "x", 0.5, f64::NAN),
            entry("m", "u", "fact", "x", 0.5, 0.0).with_embedding(vec![]),
            entry("m", "u", "fact", "x", 0.5, 0.0).with_embedding(vec![f32::INFINITY]),
        ] {
            assert!(m.add_entry(bad.clone()).is_err(), "{bad:?}");
        }
        assert!(store.is_empty());
        let err = m.add_entry(entry("m", "u", "fact", "x", 2.0, 0.0)).unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument { field, .. } if field == "importance"), "{err}");
        m.add_entry(entry("m", "u", "fact", "first", 0.0, 0.0)).unwrap();
        m.add_entry(entry("m", "u", "fact", "second", 1.0, 0.0)).unwrap();
        assert_eq!(store.len(), 1);
        assert_eq!(store.get("m").unwrap().unwrap().content, "second");
    }

    #[test]
    fn empty_store_zero_top_k_and_bad_now() {
        let (_, m) = memory();
        assert!(m.retrieve_at("x", 5, &MemoryFilter::default(), 0.0).unwrap().is_empty());
        m.add_entry(entry("m", "u", "fact", "x", 0.5, 0.0)).unwrap();
        assert!(m.retrieve_at("x", 0, &MemoryFilter::default(), 0.0).unwrap().is_empty());
        assert!(m.retrieve_at("x", 5, &MemoryFilter::default(), f64::NAN).is_err());
        assert_eq!(
            m.retrieve_at("x", 5, &MemoryFilter::default(), -10.0).unwrap()[0].0.id,
            "m",
            "a time before the entry is fine"
        );
    }

    fn toy(t: &str) -> Result<Vec<f32>> {
        Ok(["cash", "team", "risk"].iter().map(|w| t.matches(w).count() as f32).collect())
    }

    #[test]
    fn embeddings_give_cosine_relevance_clamped_and_fall_back_to_terms() {
        let store = Arc::new(InMemoryStore::new());
        let m = ScoredMemoryRetriever::new(store.clone()).with_embed(toy).with_weights(0.0, 1.0, 0.0).unwrap();
        m.add_entry(entry("cash", "u", "fact", "cash cash", 0.5, 0.0)).unwrap();
        m.add_entry(entry("opposite", "u", "fact", "n/a", 0.5, 0.0).with_embedding(vec![-1.0, 0.0, 0.0])).unwrap();
        store.add(entry("raw", "u", "fact", "cash", 0.5, 0.0)).unwrap(); // no embedding: term overlap
        let hits = m.retrieve_at("cash team", 3, &MemoryFilter::default(), 0.0).unwrap();
        let score = |id: &str| hits.iter().find(|(e, _)| e.id == id).map(|h| h.1).unwrap();
        assert!((score("cash") - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-5);
        assert_eq!(score("opposite"), 0.0, "a negative cosine is clamped to 0");
        assert_eq!(score("raw"), 0.5, "one of two query terms");
        assert_eq!(
            store.get("opposite").unwrap().unwrap().embedding,
            Some(vec![-1.0, 0.0, 0.0]),
            "a given embedding is kept"
        );
    }

    #[test]
    fn embedding_errors_are_reported() {
        let store = Arc::new(InMemoryStore::new());
        let m = ScoredMemoryRetriever::new(store.clone()).with_embed(toy);
        m.add_entry(entry("wide", "u", "fact", "x", 0.5, 0.0).with_embedding(vec![1.0; 5])).unwrap();
        let err = m.retrieve_at("cash", 1, &MemoryFilter::default(), 0.0).unwrap_err();
        assert!(err.to_string().contains("dimension 5"), "{err}");
        let failing = ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new()))
            .with_embed(|_t: &str| -> Result<Vec<f32>> { Err(Error::Inference("embedding service down".into())) });
        assert!(failing.add_entry(entry("m", "u", "fact", "x", 0.5, 0.0)).is_err());
        assert!(failing.store().entries(&MemoryFilter::default()).unwrap().is_empty(), "nothing stored on error");
    }

    /// A store whose touch always fails.
    struct NoTouch(InMemoryStore);
    impl MemoryStore for NoTouch {
        fn add(&self, e: MemoryEntry) -> Result<()> {
            self.0.add(e)
        }
        fn get(&self, id: &str) -> Result<Option<MemoryEntry>> {
            self.0.get(id)
        }
        fn entries(&self, f: &MemoryFilter) -> Result<Vec<MemoryEntry>> {
            self.0.entries(f)
        }
        fn touch(&self, _id: &str, _at: f64) -> Result<bool> {
            Err(Error::Storage { location: "memories".into(), reason: "read-only".into() })
        }
    }

    #[test]
    fn a_failed_touch_does_not_fail_the_retrieval() {
        let m = ScoredMemoryRetriever::new(Arc::new(NoTouch(InMemoryStore::new())));
        m.add_entry(entry("m", "u", "fact", "x", 0.5, 0.0)).unwrap();
        assert_eq!(ids(&m.retrieve_at("x", 1, &MemoryFilter::default(), 1.0).unwrap()), ["m"]);
    }

    fn adapter() -> MemoryRetrieverAdapter {
        let now = now_secs();
        let m = Arc::new(ScoredMemoryRetriever::new(Arc::new(InMemoryStore::new())).touch_on_retrieve(false));
        m.add_entry(entry("a1", "ana", "fact", "Ana covers chips", 0.9, now).with_metadata("desk", json!("semis")))
            .unwrap();
        m.add_entry(entry("a2", "ana", "preference", "Ana likes chips charts", 0.1, now - DAY)).unwrap();
        m.add_entry(entry("b1", "ben", "fact", "Ben covers chips", 0.5, now)).unwrap();
        m.as_retriever()
    }

    fn item_ids(items: &[ContextItem]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    #[test]
    fn adapter_items_carry_the_memory_fields() {
        let hits = adapter().retrieve(&Query::new("chips"), 10).unwrap();
        assert_eq!(item_ids(&hits), ["a1", "b1", "a2"]);
        let a1 = &hits[0];
        assert_eq!((a1.source, a1.priority, a1.text.as_str()), (Source::Memory, MEMORY_PRIORITY, "Ana covers chips"));
        for key in ["user_id", "memory_type", "importance", "created_at", "last_accessed"] {
            assert!(a1.metadata.contains_key(key), "{key}");
        }
        assert_eq!(a1.metadata["desk"], "semis", "the entry's own metadata is kept");
        assert_eq!(a1.metadata["retrieval_method"], "memory");
        assert!(a1.score > hits[1].score);
    }

    #[test]
    fn adapter_reads_filters_then_metadata() {
        let a = adapter();
        let q =
            Query::new("chips").with_filter("user_id", json!("ana")).with_metadata("memory_type", json!("preference"));
        assert_eq!(item_ids(&a.retrieve(&q, 10).unwrap()), ["a2"]);
        let any_of = Query::new("chips").with_filter("user_id", json!(["ben", "zoe"]));
        assert_eq!(item_ids(&a.retrieve(&any_of, 10).unwrap()), ["b1"], "array filters work through Query::admits");
        let own_meta = Query::new("chips").with_filter("desk", json!("semis"));
        assert_eq!(
            item_ids(&a.retrieve(&own_meta, 10).unwrap()),
            ["a1"],
            "filters on the entry's metadata apply before ranking"
        );
        let bad = Query::new("chips").with_metadata("user_id", json!(42));
        let err = a.retrieve(&bad, 10).unwrap_err();
        assert!(err.to_string().contains("metadata.user_id"), "{err}");
        assert!(a.retrieve(&Query::new("chips").with_metadata("user_id", json!(null)), 10).unwrap().len() == 3);
        assert!(a.retrieve(&Query::new("chips"), 0).unwrap().is_empty());
    }

    #[test]
    fn adapter_uses_a_query_embedding() {
        let store = Arc::new(InMemoryStore::new());
        let m = Arc::new(ScoredMemoryRetriever::new(store).with_weights(0.0, 1.0, 0.0).unwrap());
        m.add_entry(entry("x", "u", "fact", "words", 0.5, 0.0).with_embedding(vec![1.0, 0.0])).unwrap();
        m.add_entry(entry("y", "u", "fact", "words", 0.5, 0.0).with_embedding(vec![0.0, 1.0])).unwrap();
        let hits = m.as_retriever().retrieve(&Query::new("unrelated").with_embedding(vec![0.0, 2.0]), 1).unwrap();
        assert_eq!((hits[0].id.as_str(), hits[0].score), ("y", 1.0));
    }

    #[test]
    fn store_lists_in_insertion_order_and_touch_reports_missing_ids() {
        let s = InMemoryStore::new();
        for id in ["c", "a", "b"] {
            s.add(entry(id, "u", "fact", "x", 0.5, 0.0)).unwrap();
        }
        s.add(entry("a", "u", "fact", "replaced", 0.5, 0.0)).unwrap();
        let all = s.entries(&MemoryFilter::default()).unwrap();
        assert_eq!(all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["c", "a", "b"]);
        assert_eq!(all[1].content, "replaced");
        assert!(!s.touch("zzz", 1.0).unwrap());
        assert!(s.get("zzz").unwrap().is_none());
    }

    #[test]
    fn entries_serialise_without_an_absent_embedding() {
        let e = entry("m", "u", "fact", "x", 0.5, 1.0);
        let v = serde_json::to_value(&e).unwrap();
        assert!(v.get("embedding").is_none());
        let back: MemoryEntry = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }
}
