//! A bounded run of every fuzz target (`sextant_fuzz_harness`) in each CI run: the seeds of
//! `fuzz/seeds/<target>/` and a fixed number of random mutations of them (seeded, so a
//! failure replays). The long, coverage-guided runs use `cargo fuzz` (see `fuzz/README.md`).
//!
//! A target panics on a violation (a panic inside the code, a 5xx, a 4xx without the
//! envelope); this runner then names the target and prints the input in hex.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use sextant_fuzz_harness as fuzz;

/// Mutations per target; `SEXTANT_FUZZ_ITERATIONS` raises it.
fn iterations() -> usize {
    std::env::var("SEXTANT_FUZZ_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

/// Tokens worth splicing into JSON-ish inputs.
const DICTIONARY: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"null",
    b"true",
    b"false",
    b"-1",
    b"0",
    b"1e309",
    b"-0.0",
    b"18446744073709551616",
    b"\"\\u0000\"",
    b"\"\\ud800\"",
    b"\"Q5\"",
    b"\"2025-02-30\"",
    b"\"%\"",
    b"{\"gte\":",
    b"\"_conditions\":[",
    b"\"_operator\":\"XOR\"",
    b"\"top_k\":",
    b"\"limit\":",
    b"\"filters\":",
    b"\"query\":",
    b"\"question\":",
    b"\"History\":[",
    b"\"SearchFilters\":[",
    b"\xff\xfe",
    b"\xe2\x80\xae",
    b"\n",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One to four random edits: flip, insert, delete, duplicate, splice a dictionary token or
/// a piece of another seed, truncate.
fn mutate(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 if !v.is_empty() => {
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(32)).min(v.len());
                let piece = v[start..end].to_vec();
                v.splice(at..at, piece);
            }
            4 => {
                let t = DICTIONARY[rng.below(DICTIONARY.len())];
                v.splice(at..at, t.iter().copied());
            }
            5 if !others.is_empty() => {
                let o = &others[rng.below(others.len())];
                let start = rng.below(o.len());
                let end = (start + rng.below(64)).min(o.len());
                v.splice(at..at, o[start..end].iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let out: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!out.is_empty(), "no seeds for {target}");
    out
}

/// Runs `f` on every seed and on `iterations()` mutations; panics naming the first input
/// that fails.
fn run(target: &str, f: fn(&[u8])) {
    run_n(target, f, iterations());
}

/// [`run`] with `n` mutations.
fn run_n(target: &str, f: fn(&[u8]), n: usize) {
    let seeds = seeds(target);
    let mut rng = Rng(0x5eed_f022 ^ (target.len() as u64 * 0x9e37_79b9));
    let mut inputs: Vec<Vec<u8>> = seeds.clone();
    inputs.extend((0..n).map(|_| {
        let s = &seeds[rng.below(seeds.len())];
        mutate(&mut rng, s, &seeds)
    }));
    for (i, input) in inputs.iter().enumerate() {
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(input))) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("fuzz target {target} failed on input #{i} ({} bytes): {msg}\ninput (hex): {hex}", input.len());
        }
    }
    eprintln!("fuzz target {target}: {} inputs, no failure", inputs.len());
}

#[test]
fn request_bodies_never_crash_and_always_answer_in_the_envelope() {
    run("request_body", fuzz::request_body);
}

#[test]
fn search_filters_compile_or_refuse_any_json() {
    run("search_filters", fuzz::search_filters);
}

#[test]
fn the_conversation_rewrite_takes_any_text() {
    run("rewrite", fuzz::rewrite);
}

#[test]
fn the_index_loader_refuses_hostile_and_truncated_files() {
    run("index_file", fuzz::index_file);
}

#[test]
fn api_gateway_events_of_any_shape_never_crash_the_function() {
    run("apigw_event", fuzz::apigw_event);
}

/// PDFs damaged at random (bits flipped, bytes cut, spliced between the report, its
/// encrypted copy and its scan): each read or refused, none a crash or a hang. Fewer
/// mutations than the other targets: each is a whole PDF read (about 1 ms).
#[test]
fn damaged_pdfs_are_read_or_refused_never_a_crash_or_a_hang() {
    run_n("pdf", fuzz::pdf, iterations() / 4);
}
