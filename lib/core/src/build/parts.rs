//! A sharded build planned in corpus parts, so that no process holds the whole plan:
//!
//! 1. each part of the corpus (a run of its documents, in corpus order) is planned alone
//!    ([`plan_part`], then [`PartPlan::finish`] with the previous vectors of its chunks): its chunks, content keys and encode tasks, its BM25 statistics, its
//!    documents' hashes, and its piece of every index shard ([`Plan::split`] of the part);
//! 2. the parts' summaries are gathered ([`gather_parts`]): the build's fingerprint from
//!    every document's hash, BM25's statistics summed, and where each part's documents and
//!    chunks start in the whole corpus ([`PartOffsets`]);
//! 3. each index shard joins its pieces ([`ShardPlan::gather`]).
//!
//! Chunking, keys and BM25's counts are per document, so the shard plans, statistics and
//! fingerprint are those one process planning the whole corpus makes
//! ([`plan_build`](super::plan_build) then [`Plan::split`]): the index is the same, byte for
//! byte. Only the encode tasks differ: a chunk repeated in two parts is encoded by each.

use std::collections::HashSet;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::encode::EncodeTask;
use super::encoded::Cached;
use super::merge::ShardPlan;
use super::plan::{document_sha256, fingerprint, plan, BuildOptions};
use super::report::BuildReport;
use crate::corpus::{Chunk, Document};
use crate::encode::TextTokenizer;
use crate::error::{Error, Result};
use crate::index::LexicalStats;

/// The most corpus parts a build is planned in.
pub const MAX_PARTS: usize = 4096;
/// Bits of an encode task's number that count the part's own tasks ([`task_number`]).
const TASK_BITS: u32 = 20;

/// The number of part `part`'s encode task `k`: `part · 2^20 + k`, unique in the build (a
/// part has fewer than `2^20` tasks: a task holds at least 16 chunks).
pub fn task_number(part: u32, k: u32) -> Result<u32> {
    if part as usize >= MAX_PARTS || k >= 1 << TASK_BITS {
        return Err(Error::invalid(
            "part_bytes",
            format!("part {part} has encode task {k}: at most {MAX_PARTS} parts of 2^20 tasks; use larger parts"),
        ));
    }
    Ok(part << TASK_BITS | k)
}

/// What planning one corpus part hands on to the gather ([`gather_parts`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartSummary {
    /// The part's number, from 0 in corpus order.
    pub part: u32,
    /// Each of its documents' [`document_sha256`], in order.
    pub documents: Vec<[u8; 32]>,
    /// Its chunks.
    pub chunks: u32,
    /// BM25's statistics over its chunks.
    pub stats: LexicalStats,
    /// The numbers of its encode tasks ([`task_number`]).
    pub tasks: Vec<u32>,
    /// Its plan's figures (documents, chunks, encoded, reused, seconds).
    pub report: BuildReport,
}

/// One part, planned: its piece of each index shard, its encode tasks, its summary.
pub struct PlannedPart {
    /// Index shard `k`'s piece of this part, for each `k` (documents counted from the
    /// part's first).
    pub pieces: Vec<ShardPlan>,
    /// Its encode tasks: the keys `cache` lacks, numbered by [`task_number`].
    pub tasks: Vec<EncodeTask>,
    /// What the gather needs of it.
    pub summary: PartSummary,
}

/// Part `part` of a corpus, chunked and keyed ([`plan_part`]), before its encode tasks are
/// known: [`PartPlan::keys`] are what to look for in the previous version's vectors.
pub struct PartPlan {
    part: u32,
    plan: super::Plan,
    hashes: Vec<[u8; 32]>,
    started: std::time::Instant,
}

/// Plans part `part` of a corpus, its `documents` (in corpus order): chunks, encoder inputs
/// and content keys, as [`plan`] does for a whole corpus.
pub fn plan_part(
    part: u32,
    documents: Vec<Document>,
    options: &BuildOptions,
    tokenizers: (&TextTokenizer, &TextTokenizer),
) -> Result<PartPlan> {
    let started = std::time::Instant::now();
    task_number(part, 0)?;
    let hashes = documents.par_iter().map(document_sha256).collect::<Result<Vec<_>>>()?;
    // The part's own fingerprint: the gather gives each shard the whole build's.
    let own = fingerprint(options, &[], &hashes)?;
    let plan = plan(documents, options, own, tokenizers.0, tokenizers.1)?;
    Ok(PartPlan { part, plan, hashes, started })
}

impl PartPlan {
    /// The content key of each of the part's chunks.
    pub fn keys(&self) -> &[super::ChunkKey] {
        &self.plan.keys
    }

    /// The part's encode tasks (what `cache`, the previous version's vectors of at least
    /// these chunks, lacks), its summary and its piece of each of `count` index shards.
    pub fn finish(self, cache: &dyn Cached, count: usize) -> Result<PlannedPart> {
        let PartPlan { part, plan, hashes, started } = self;
        let mut tasks = plan.tasks(cache);
        for task in &mut tasks {
            task.shard = task_number(part, task.shard)?;
        }
        let mut report = BuildReport::planned(&plan, &tasks, cache.rejected());
        let stats = plan.lexical_stats();
        let chunks =
            u32::try_from(plan.chunks.len()).map_err(|_| Error::invalid("part_bytes", "a part of 2^32 chunks"))?;
        let pieces = plan.split(count);
        report.phases.plan = started.elapsed().as_secs_f64();
        let numbers = tasks.iter().map(|t| t.shard).collect();
        let summary = PartSummary { part, documents: hashes, chunks, stats, tasks: numbers, report };
        Ok(PlannedPart { pieces, tasks, summary })
    }
}

/// Where a part's documents and chunks start in the whole corpus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartOffsets {
    /// Documents of the parts before it.
    pub documents: u32,
    /// Chunks of the parts before it.
    pub chunks: u32,
}

/// The parts' summaries gathered: what every index shard's merge and the publication need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gathered {
    /// The build's fingerprint ([`fingerprint`] of every document, in corpus order).
    pub inputs_sha256: String,
    /// Where each part starts, by part number.
    pub offsets: Vec<PartOffsets>,
    /// BM25's statistics over the whole corpus: the parts' summed.
    pub stats: LexicalStats,
    /// Every part's encode tasks, in part order.
    pub tasks: Vec<u32>,
    /// The plan's figures: the parts' summed (its plan phase the slowest part's: they run
    /// side by side).
    pub report: BuildReport,
}

/// The parts' summaries, added one at a time in part order ([`Gather::add`]), so that
/// only one part's BM25 statistics are held beside the sum.
pub struct Gather {
    options: BuildOptions,
    at: PartOffsets,
    offsets: Vec<PartOffsets>,
    stats: LexicalStats,
    hashes: Vec<[u8; 32]>,
    tasks: Vec<u32>,
    report: BuildReport,
}

impl Gather {
    /// No part yet, of a build with `options`.
    pub fn new(options: &BuildOptions) -> Self {
        Gather {
            options: options.clone(),
            at: PartOffsets::default(),
            offsets: Vec::new(),
            stats: LexicalStats::default(),
            hashes: Vec::new(),
            tasks: Vec::new(),
            report: BuildReport { index_id: options.index_id.clone(), ..Default::default() },
        }
    }

    /// Adds the next part's summary: it must be of the part after the last one added.
    pub fn add(&mut self, summary: PartSummary) -> Result<()> {
        let next = self.offsets.len();
        if summary.part as usize != next {
            return Err(Error::invalid(
                "parts",
                format!(
                    "the summary of part {} came where part {next}'s was due: one per part, in order",
                    summary.part
                ),
            ));
        }
        self.offsets.push(self.at);
        let too_many = || Error::invalid("corpus", "more than 2^32 documents or chunks in one index");
        self.at.documents = self.at.documents.checked_add(summary.documents.len() as u32).ok_or_else(too_many)?;
        self.at.chunks = self.at.chunks.checked_add(summary.chunks).ok_or_else(too_many)?;
        self.stats.add(&summary.stats);
        let (r, report) = (&summary.report, &mut self.report);
        report.documents += r.documents;
        report.chunks += r.chunks;
        report.chunks_encoded += r.chunks_encoded;
        report.chunks_reused += r.chunks_reused;
        report.cache_rejected += r.cache_rejected;
        report.tokens_beyond_window += r.tokens_beyond_window;
        report.shards += r.shards;
        // The parts are planned side by side: a phase takes as long as its slowest part.
        report.phases.plan = report.phases.plan.max(r.phases.plan);
        report.phases.read = report.phases.read.max(r.phases.read);
        self.hashes.extend(summary.documents);
        self.tasks.extend(summary.tasks);
        Ok(())
    }

    /// What the parts added make, with the build's `attachments` in its fingerprint.
    pub fn finish(self, attachments: &[(String, Vec<u8>)]) -> Result<Gathered> {
        Ok(Gathered {
            inputs_sha256: fingerprint(&self.options, attachments, &self.hashes)?,
            offsets: self.offsets,
            stats: self.stats,
            tasks: self.tasks,
            report: self.report,
        })
    }
}

/// Gathers the summaries of every part (`summaries`, one per part number from 0, in order)
/// of a build with `options` and `attachments` ([`Gather`]). A part missing or given
/// twice is refused.
pub fn gather_parts(
    options: &BuildOptions,
    attachments: &[(String, Vec<u8>)],
    summaries: impl IntoIterator<Item = PartSummary>,
) -> Result<Gathered> {
    let mut gather = Gather::new(options);
    for summary in summaries {
        gather.add(summary)?;
    }
    gather.finish(attachments)
}

impl ShardPlan {
    /// Index shard `shard`'s part of the plan of a corpus planned in parts: each part's
    /// piece of it (`pieces`, in part order, each with where its part starts), joined as
    /// [`Plan::split`](super::Plan::split) of the whole corpus's plan makes it, with the
    /// whole build's fingerprint `inputs_sha256`. A document id in two pieces (two parts
    /// of the corpus) is refused, naming it.
    pub fn gather(shard: usize, pieces: Vec<(ShardPlan, PartOffsets)>, inputs_sha256: String) -> Result<ShardPlan> {
        let mut pieces = pieces.into_iter();
        let Some((first, at)) = pieces.next() else {
            return Err(Error::invalid("parts", format!("index shard {shard} has no piece of any part")));
        };
        let mut joined = ShardPlan::empty(shard, &first.options, first.sparse_vocab, inputs_sha256);
        let mut ids = HashSet::new();
        for (piece, at) in std::iter::once((first, at)).chain(pieces) {
            if piece.shard != shard || piece.options != joined.options || piece.sparse_vocab != joined.sparse_vocab {
                return Err(Error::invalid(
                    "parts",
                    format!("a piece of index shard {} planned otherwise was given for shard {shard}", piece.shard),
                ));
            }
            for d in &piece.documents {
                if !ids.insert(d.document_id.clone()) {
                    return Err(Error::invalid(
                        "documentId",
                        format!("document id {:?} is in two parts of the corpus: give each id once", d.document_id),
                    ));
                }
            }
            let base = joined.documents.len() as u32;
            joined.documents.extend(piece.documents);
            joined.order.extend(piece.order.iter().map(|d| d + at.documents));
            joined.chunks.extend(piece.chunks.into_iter().map(|c| Chunk { doc: c.doc + base, ..c }));
            joined.plan_chunks.extend(piece.plan_chunks.iter().map(|c| c + at.chunks));
            joined.inputs.extend(piece.inputs);
            joined.keys.extend(piece.keys);
        }
        Ok(joined)
    }
}
