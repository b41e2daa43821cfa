//! What a build did, written as `build_report.json` at the root of the index.

use serde::{Deserialize, Serialize};

/// The report's file name at the root of an index.
pub const REPORT_FILE: &str = "build_report.json";

/// Seconds spent in each phase of a build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Reading the corpus (and attachments).
    pub read: f64,
    /// Chunking, keys and shards (or telling that nothing changed).
    pub plan: f64,
    /// Encoding the chunks no cache held, and assembling the shards.
    pub encode: f64,
    /// Building the dense, BM25 and SPLADE indexes.
    pub merge: f64,
    /// Writing the index, its shards and this report (locally; publishing to S3 is
    /// reported by the build job).
    pub write: f64,
}

impl Phases {
    /// The sum of the phases.
    pub fn total(&self) -> f64 {
        self.read + self.plan + self.encode + self.merge + self.write
    }
}

/// What a build did.
///
/// `chunks = chunks_encoded + chunks_reused`: a chunk is reused when its vectors came from
/// the cache, or when its encoder input repeats an earlier chunk's in the same build (it is
/// encoded once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildReport {
    /// The index id.
    pub index_id: String,
    /// Documents read.
    pub documents: usize,
    /// Chunks in the index.
    pub chunks: usize,
    /// Chunks encoded by this build.
    pub chunks_encoded: usize,
    /// Chunks whose vectors came from the cache.
    pub chunks_reused: usize,
    /// Cache records rejected (checksum or shape) and encoded again instead.
    pub cache_rejected: usize,
    /// Tokens of encoder inputs beyond the encoders' window: 0 means every token of every
    /// document reached every encoder.
    pub tokens_beyond_window: u64,
    /// Whether the inputs, options and models were the previous version's: then nothing
    /// was encoded or written.
    pub unchanged: bool,
    /// Shards of the plan.
    pub shards: usize,
    /// Encode tasks run at once.
    pub workers: usize,
    /// The inference backend that encoded (`onnxruntime` or `tract`; empty in reports
    /// written before there were two).
    #[serde(default)]
    pub backend: String,
    /// Seconds, all phases.
    pub seconds: f64,
    /// Seconds per phase.
    pub phases: Phases,
    /// Files of a folder corpus that were not read, with why
    /// ([`load_folder`](crate::corpus::load_folder)); the caller that read the folder sets
    /// it. Always written (a build's plan is stored with bincode, which cannot skip a
    /// field); a report written before it reads as none.
    #[serde(default)]
    pub skipped_files: Vec<crate::corpus::SkippedFile>,
    /// The bytes the index built holds in memory once loaded (its manifest's
    /// `resident_bytes`; 0 when nothing was built).
    #[serde(default)]
    pub resident_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_read_back_is_the_report_written_to_the_last_digit() {
        // serde_json's default float parser can be one unit in the last place off: it read
        // this value, written as "1.3241551280000001", back as 1.324155128 (a CI run's
        // failure of the build tests). The workspace enables `float_roundtrip`.
        let report = BuildReport {
            index_id: "t".into(),
            seconds: 1.380400559,
            phases: Phases { plan: 0.051776243, encode: 1.3241551280000001, merge: 0.000822081, ..Phases::default() },
            ..BuildReport::default()
        };
        let written = serde_json::to_vec_pretty(&report).unwrap();
        let read: BuildReport = serde_json::from_slice(&written).unwrap();
        assert_eq!(read, report);
    }

    #[test]
    fn a_report_with_or_without_skipped_files_reads_back_from_bincode_as_a_plan_stores_it() {
        let skipped = vec![crate::corpus::SkippedFile { path: "a.pdf".into(), reason: "PDF".into() }];
        for report in [BuildReport::default(), BuildReport { skipped_files: skipped, ..BuildReport::default() }] {
            let read: BuildReport = bincode::deserialize(&bincode::serialize(&report).unwrap()).unwrap();
            assert_eq!(read, report);
        }
        // JSON written before the field existed reads as no skipped files.
        let mut old = serde_json::to_value(BuildReport::default()).unwrap();
        old.as_object_mut().unwrap().remove("skipped_files");
        assert!(serde_json::from_value::<BuildReport>(old).unwrap().skipped_files.is_empty());
    }
}
