//! Whether an index version fits a function's memory, from the estimate its manifest
//! carries ([`Manifest::resident_bytes`](sextant_core::index::format::Manifest)), before a
//! byte of it is downloaded.
//!
//! ```text
//! budget   = memory − RESERVE                       (the models, the runtime, requests)
//! resident = RESIDENT_FACTOR · estimate             an index as it is served
//! load     = LOAD_FACTOR · estimate                 its peak while it downloads and decodes
//!
//! swap     when resident(serving) + load(new) ≤ budget   (the old one serves meanwhile)
//! in place when load(new) ≤ budget                         (the old one is let go first)
//! refused  otherwise
//! ```
//!
//! The factors are measured (`sextant bench-load --index DIR` on the SciFact, TAT-QA,
//! fin-filings and fin-calls indexes, 3.4k-12.8k chunks, 2026-11-27): resident memory was
//! 1.05-1.28 times the estimate and a load's peak 1.37-1.63 times; the reserve is the
//! 254 MiB a process holding both models and ONNX Runtime measured, with room for the
//! requests in flight. An estimate of 0 (an index built before it was recorded) fits.

/// Memory kept for the models, ONNX Runtime and the requests in flight.
pub const RESERVE_BYTES: u64 = 384 << 20;

/// Resident memory of a served index per byte of its estimate.
pub const RESIDENT_FACTOR: f64 = 1.35;

/// Peak memory of loading an index per byte of its estimate.
pub const LOAD_FACTOR: f64 = 1.75;

/// What loading a version may do (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Load it beside the one served, then swap.
    Swap,
    /// Let the served one go, then load it: the index answers 503 meanwhile.
    InPlace,
    /// It cannot be loaded in this function's memory at all.
    TooLarge {
        /// Bytes its load needs.
        needed: u64,
        /// Bytes the function has for indexes.
        budget: u64,
    },
}

/// The memory a function has for its indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    /// Bytes for indexes: the function's memory less [`RESERVE_BYTES`].
    pub bytes: u64,
}

impl MemoryBudget {
    /// The budget of a function of `memory_mb` MB (Lambda's `MemorySize`, in MiB).
    pub fn of_function(memory_mb: u64) -> Self {
        MemoryBudget { bytes: (memory_mb << 20).saturating_sub(RESERVE_BYTES) }
    }

    /// The budget of the Lambda function this runs in (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`),
    /// or `SEXTANT_MEMORY_MB` where set (a test, or a process that is not a function);
    /// `None` outside a function.
    pub fn from_env() -> Option<Self> {
        ["SEXTANT_MEMORY_MB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]
            .iter()
            .find_map(|k| std::env::var(k).ok()?.trim().parse::<u64>().ok())
            .map(Self::of_function)
    }

    /// What loading an index of `incoming` estimated bytes may do while one of `serving`
    /// estimated bytes is served (0: none).
    pub fn fit(&self, serving: u64, incoming: u64) -> Fit {
        let load = (incoming as f64 * LOAD_FACTOR) as u64;
        let resident = (serving as f64 * RESIDENT_FACTOR) as u64;
        if load > self.bytes {
            Fit::TooLarge { needed: load, budget: self.bytes }
        } else if resident + load > self.bytes {
            Fit::InPlace
        } else {
            Fit::Swap
        }
    }

    /// The function memory (MiB) an index of `estimate` bytes needs to be swapped for a
    /// version of its size: what to set `FunctionMemory` to.
    pub fn needed_mb(estimate: u64) -> u64 {
        let bytes = (estimate as f64 * (RESIDENT_FACTOR + LOAD_FACTOR)) as u64 + RESERVE_BYTES;
        bytes.div_ceil(1 << 20)
    }
}

/// The log line and CloudWatch metric (Embedded Metric Format, `Sextant`/`IndexTooLarge` by
/// index) of a version refused because it cannot fit; printed on stdout, where Lambda
/// sends it to CloudWatch.
pub fn report_too_large(index: &str, version: &str, manifest_estimate: u64, needed: u64, budget: u64) {
    let mib = |b: u64| b.div_ceil(1 << 20);
    tracing::error!(
        index,
        version,
        estimate_mib = mib(manifest_estimate),
        needed_mib = mib(needed),
        budget_mib = mib(budget),
        "index version refused: loading it needs {} MiB and this function has {} MiB for indexes; set \
         FunctionMemory to at least {} MB",
        mib(needed),
        mib(budget),
        MemoryBudget::needed_mb(manifest_estimate)
    );
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    println!(
        "{}",
        serde_json::json!({
            "_aws": {"Timestamp": now_ms, "CloudWatchMetrics": [{"Namespace": "Sextant", "Dimensions": [["Index"]],
                     "Metrics": [{"Name": "IndexTooLarge", "Unit": "Count"}]}]},
            "Index": index,
            "IndexTooLarge": 1,
            "version": version,
        })
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_swaps_in_beside_the_old_loads_in_place_or_is_refused_by_its_size() {
        let budget = MemoryBudget::of_function(3008);
        assert_eq!(budget.bytes, (3008 - 384) << 20);
        let mib = |n: u64| n << 20;
        // 1,000 MiB served, 800 MiB coming: 1,350 + 1,400 > 2,624 → in place.
        assert_eq!(budget.fit(mib(1000), mib(800)), Fit::InPlace);
        // Small ones swap; nothing served yet is a swap too.
        assert_eq!(budget.fit(mib(500), mib(500)), Fit::Swap);
        assert_eq!(budget.fit(0, mib(1400)), Fit::Swap);
        // Over the budget alone: refused, with what it needs.
        assert_eq!(budget.fit(0, mib(1600)), Fit::TooLarge { needed: mib(2800), budget: mib(2624) });
        // An estimate of 0 (not recorded) always fits.
        assert_eq!(budget.fit(0, 0), Fit::Swap);
        // The memory that swaps a 1,000 MiB index: 3.1 · 1,000 + 384 MiB.
        assert_eq!(MemoryBudget::needed_mb(mib(1000)), 3484);
        // A function smaller than the reserve has nothing for indexes.
        assert_eq!(MemoryBudget::of_function(128).bytes, 0);
    }
}
