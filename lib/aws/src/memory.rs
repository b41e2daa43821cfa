//! Whether an index version fits a function's memory, from the estimate its manifest
//! carries ([`Manifest::resident_bytes`](sextant_core::index::format::Manifest)), before a
//! byte of it is downloaded.
//!
//! ```text
//! budget   = memory − RESERVE                       (the models, the runtime, requests;
//!                                                    a shard function holds no model)
//! resident = RESIDENT_FACTOR · estimate             an index as it is served
//! load     = LOAD_FACTOR · estimate + LOAD_FIXED    its peak while it downloads and decodes
//!
//! swap     when resident(serving) + load(new) ≤ budget   (the old one serves meanwhile)
//! in place when load(new) ≤ budget                         (the old one is let go first)
//! refused  otherwise
//! ```
//!
//! The factors are measured (`sextant bench-load --index DIR`, release build, 2026-11-28,
//! the process's own memory before loading subtracted): resident memory was at most 1.17
//! times the estimate; a load's peak was 2.7 times it on an index of 960 chunks (6.5 MiB),
//! 1.93-2.05 times on SciFact, fin-filings and fin-calls (about 12,000 chunks) and 1.63
//! times on 100,000 synthetic chunks, and a second load beside the first peaked at 4.1,
//! 3.18-3.22 and 2.75 times. A factor alone would either fail small indexes or oversize
//! large ones, so the load also counts a fixed [`LOAD_FIXED_BYTES`]. The reserve is the
//! 254 MiB a process holding both models and ONNX Runtime measured, with room for the
//! requests in flight. An estimate of 0 (an index built before it was recorded) fits.

/// Memory kept for the models, ONNX Runtime and the requests in flight.
pub const RESERVE_BYTES: u64 = 384 << 20;

/// Memory a shard function keeps beside its shard: it loads no model and no ONNX Runtime
/// (a shard worker process holding a 480-chunk shard measured 22.4 MiB resident, and
/// `tests/aws_lambda_e2e.rs` holds a shard function's peak, its small shard included,
/// under this), with room for an answer in flight (Lambda's response is at most 6 MB).
pub const SHARD_RESERVE_BYTES: u64 = 96 << 20;

/// Resident memory of a served index per byte of its estimate.
pub const RESIDENT_FACTOR: f64 = 1.35;

/// Peak memory of loading an index per byte of its estimate.
pub const LOAD_FACTOR: f64 = 2.05;

/// Peak memory of loading an index beside [`LOAD_FACTOR`] per byte: what decoding costs
/// whatever the index's size.
pub const LOAD_FIXED_BYTES: u64 = 16 << 20;

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
    /// Bytes for indexes: the function's memory less `reserve`.
    pub bytes: u64,
    /// Bytes the function keeps for itself: [`RESERVE_BYTES`], or [`SHARD_RESERVE_BYTES`]
    /// for a shard function.
    pub reserve: u64,
}

impl MemoryBudget {
    /// The budget of an API or build function of `memory_mb` MB (Lambda's `MemorySize`, in
    /// MiB), which holds the models: [`RESERVE_BYTES`] kept.
    pub fn of_function(memory_mb: u64) -> Self {
        Self::keeping(memory_mb, RESERVE_BYTES)
    }

    /// The budget of a shard function of `memory_mb` MB, which holds no model:
    /// [`SHARD_RESERVE_BYTES`] kept.
    pub fn of_shard_function(memory_mb: u64) -> Self {
        Self::keeping(memory_mb, SHARD_RESERVE_BYTES)
    }

    fn keeping(memory_mb: u64, reserve: u64) -> Self {
        MemoryBudget { bytes: (memory_mb << 20).saturating_sub(reserve), reserve }
    }

    /// The budget of the Lambda function this runs in (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`),
    /// or `SEXTANT_MEMORY_MB` where set (a test, or a process that is not a function),
    /// as an API or build function's ([`MemoryBudget::of_function`]); `None` outside a
    /// function.
    pub fn from_env() -> Option<Self> {
        memory_mb_from_env().map(Self::of_function)
    }

    /// [`MemoryBudget::from_env`] for a shard function ([`MemoryBudget::of_shard_function`]).
    pub fn shard_from_env() -> Option<Self> {
        memory_mb_from_env().map(Self::of_shard_function)
    }

    /// What loading an index of `incoming` estimated bytes may do while one of `serving`
    /// estimated bytes is served (0: none).
    pub fn fit(&self, serving: u64, incoming: u64) -> Fit {
        let load = Self::load_bytes(incoming);
        if load > self.bytes {
            Fit::TooLarge { needed: load, budget: self.bytes }
        } else if Self::swap_bytes(serving, incoming) > self.bytes {
            Fit::InPlace
        } else {
            Fit::Swap
        }
    }

    /// The peak bytes of loading an index of `estimate` bytes:
    /// `LOAD_FACTOR · estimate + LOAD_FIXED_BYTES` (0 for an estimate not recorded).
    pub fn load_bytes(estimate: u64) -> u64 {
        match estimate {
            0 => 0,
            e => (e as f64 * LOAD_FACTOR) as u64 + LOAD_FIXED_BYTES,
        }
    }

    /// The bytes an index of `estimate` bytes holds while served: `RESIDENT_FACTOR · estimate`.
    pub fn resident_bytes(estimate: u64) -> u64 {
        (estimate as f64 * RESIDENT_FACTOR) as u64
    }

    /// The peak bytes of loading an index of `incoming` estimated bytes beside a served one
    /// of `serving`: `resident_bytes(serving) + load_bytes(incoming)`.
    pub fn swap_bytes(serving: u64, incoming: u64) -> u64 {
        Self::resident_bytes(serving) + Self::load_bytes(incoming)
    }

    /// The function memory (MiB) an index of `estimate` bytes needs to be swapped for a
    /// version of its size beside this budget's reserve: what to set `FunctionMemory` (or
    /// `ShardMemory`) to.
    pub fn needed_mb(&self, estimate: u64) -> u64 {
        (Self::swap_bytes(estimate, estimate) + self.reserve).div_ceil(1 << 20)
    }
}

/// `SEXTANT_MEMORY_MB`, else `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`.
fn memory_mb_from_env() -> Option<u64> {
    ["SEXTANT_MEMORY_MB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse::<u64>().ok())
}

/// The log line and CloudWatch metric (Embedded Metric Format, `Sextant`/`IndexTooLarge` by
/// index) of a version refused because it cannot fit; printed on stdout, where Lambda
/// sends it to CloudWatch.
pub fn report_too_large(index: &str, version: &str, manifest_estimate: u64, needed: u64, function: &MemoryBudget) {
    let budget = function.bytes;
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
        function.needed_mb(manifest_estimate)
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
        // 1,000 MiB served, 650 MiB coming: 1,350 + 1,332.5 + 16 > 2,624 → in place.
        assert_eq!(budget.fit(mib(1000), mib(650)), Fit::InPlace);
        // 1,000 MiB served, 590 coming: 1,350 + 1,209.5 + 16 ≤ 2,624 → beside it.
        assert_eq!(budget.fit(mib(1000), mib(590)), Fit::Swap);
        // Nothing served yet is a swap too.
        assert_eq!(budget.fit(0, mib(1200)), Fit::Swap);
        // Over the budget alone: refused, with what it needs.
        match budget.fit(0, mib(1400)) {
            Fit::TooLarge { needed, budget } => assert_eq!((needed.div_ceil(1 << 20), budget), (2886, mib(2624))),
            other => panic!("{other:?}"),
        }
        // An estimate of 0 (not recorded) always fits.
        assert_eq!(budget.fit(0, 0), Fit::Swap);
        // The memory that swaps a 1,000 MiB index: 3.4 · 1,000 + 16 + 384 MiB.
        assert_eq!(budget.needed_mb(mib(1000)), 3800);
        // A function smaller than the reserve has nothing for indexes.
        assert_eq!(MemoryBudget::of_function(128).bytes, 0);
        // A shard function holds no model: it keeps 96 MiB, so the same memory takes a
        // larger shard, and it needs less for the same one (3.4 · 1,000 + 16 + 96 MiB).
        let shard = MemoryBudget::of_shard_function(3008);
        assert_eq!(shard.bytes, (3008 - 96) << 20);
        assert_eq!(shard.fit(0, mib(1400)), Fit::Swap);
        assert_eq!(shard.needed_mb(mib(1000)), 3512);
    }
}
