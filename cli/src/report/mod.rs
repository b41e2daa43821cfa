//! Plotted reports: `sextant eval --report DIR` and `sextant bench --report DIR` write
//! `index.html` (one self-contained page: the charts as inline SVG, inline CSS, no script),
//! each chart again as its own `.svg` file (for a README to embed), and `report.json` with
//! every number the charts and tables show.
//!
//! This module holds the figures and the definitions computed from them (the best single
//! path, per-query wins and losses); [`charts`] draws them with plotters' SVG backend and
//! [`page`] lays out the page. Both are pure functions of the figures: nothing here runs a
//! query or reads the clock.

pub mod charts;
pub mod page;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path as FsPath, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};
use sextant_kit::eval::{Metrics, QueryMetrics};

use crate::bench::{stats, Figures, StageRow, Stats};
use crate::cli::{FusionChoice, Mode};

/// A difference of nDCG@10 at most this large (in absolute value) is a tie: two rankings
/// that put the relevant documents at the same ranks score exactly the same, so only
/// rounding is forgiven.
pub const TIE_EPSILON: f64 = 1e-9;

/// One way of ranking that an evaluation report compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportMode {
    /// The dense path alone.
    Dense,
    /// BM25 alone.
    Bm25,
    /// SPLADE alone.
    Splade,
    /// Plain RRF of all three paths (chunks' ranks, `k` = 60, equal weights: `--fusion plain`).
    PlainRrf,
    /// The default hybrid: all three paths, the engine's default fusion.
    Hybrid,
}

impl ReportMode {
    /// Every mode, in the order the charts and tables show them.
    pub const ALL: [ReportMode; 5] =
        [ReportMode::Dense, ReportMode::Bm25, ReportMode::Splade, ReportMode::PlainRrf, ReportMode::Hybrid];

    /// The mode's name in charts, tables and `report.json`.
    pub fn label(self) -> &'static str {
        match self {
            ReportMode::Dense => "dense",
            ReportMode::Bm25 => "bm25",
            ReportMode::Splade => "splade",
            ReportMode::PlainRrf => "plain RRF",
            ReportMode::Hybrid => "hybrid",
        }
    }

    /// The search mode whose paths it runs.
    pub fn mode(self) -> Mode {
        match self {
            ReportMode::Dense => Mode::Dense,
            ReportMode::Bm25 => Mode::Bm25,
            ReportMode::Splade => Mode::Splade,
            ReportMode::PlainRrf | ReportMode::Hybrid => Mode::Hybrid,
        }
    }

    /// The fusion it runs with (a single path's ranking is its own, whatever the fusion).
    pub fn fusion(self) -> FusionChoice {
        match self {
            ReportMode::PlainRrf => FusionChoice::Plain,
            _ => FusionChoice::Default,
        }
    }

    /// Whether it runs one path only.
    pub fn is_single_path(self) -> bool {
        matches!(self, ReportMode::Dense | ReportMode::Bm25 | ReportMode::Splade)
    }
}

/// One mode evaluated on one set: its mean metrics and each query's.
#[derive(Debug, Clone)]
pub struct ModeResult {
    /// The mode.
    pub mode: ReportMode,
    /// The paths that ran, joined by `+` (as `sextant eval` prints them).
    pub paths: String,
    /// The means over the evaluated queries ([`Metrics::mean`] of `per_query`).
    pub metrics: Metrics,
    /// Each evaluated query's metrics, in the set's query order.
    pub per_query: Vec<QueryMetrics>,
}

impl ModeResult {
    /// The object `sextant eval --report DIR --json` prints for this mode, one a line: the
    /// keys `sextant eval --json` prints, plus `set` and `label`. `report.json` holds the
    /// same object (with the per-query figures added), so the two agree to the last digit.
    pub fn summary(&self, set: &SetResult) -> Value {
        json!({
            "set": set.name,
            "label": self.mode.label(),
            "mode": self.mode.mode().name(),
            "paths": self.paths,
            "fusion": format!("{:?}", self.mode.fusion()).to_lowercase(),
            "split": set.split,
            "queries": self.metrics.queries,
            "docs": set.docs,
            "nDCG@10": self.metrics.ndcg_at_10,
            "Recall@10": self.metrics.recall_at_10,
            "Recall@100": self.metrics.recall_at_100,
            "MRR@10": self.metrics.mrr_at_10,
        })
    }
}

/// Every mode evaluated on one BEIR set and split.
#[derive(Debug, Clone)]
pub struct SetResult {
    /// The set's directory name (`scifact`, `fin-filings`).
    pub name: String,
    /// The qrels split evaluated.
    pub split: String,
    /// Documents in the corpus.
    pub docs: usize,
    /// One result per mode, in [`ReportMode::ALL`]'s order.
    pub modes: Vec<ModeResult>,
}

/// One query's difference of nDCG@10 between two rankings.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryDelta {
    /// The query's id.
    pub qid: String,
    /// nDCG@10 of the hybrid minus nDCG@10 of the other ranking.
    pub delta: f64,
}

/// The default hybrid against the best single path of a set, query by query.
///
/// The **best single path** is the one of dense, BM25 and SPLADE with the highest mean
/// nDCG@10 on that set (the first in that order on a tie). For each query `q` evaluated by
/// both,
///
/// ```text
/// Δ(q) = nDCG@10_hybrid(q) − nDCG@10_best(q)
/// win:  Δ(q) >  ε      tie: |Δ(q)| ≤ ε      loss: Δ(q) < −ε      (ε = TIE_EPSILON)
/// ```
///
/// and the mean of `Δ` is the difference of the two means.
#[derive(Debug, Clone, PartialEq)]
pub struct WinLoss {
    /// The best single path.
    pub best_single: ReportMode,
    /// Every query's `Δ`, sorted from the largest win to the largest loss (ties by query id).
    pub deltas: Vec<QueryDelta>,
    /// Queries with `Δ > ε`.
    pub wins: usize,
    /// Queries with `|Δ| ≤ ε`.
    pub ties: usize,
    /// Queries with `Δ < −ε`.
    pub losses: usize,
    /// The mean of `Δ`.
    pub mean: f64,
}

impl SetResult {
    /// `name split`, as the charts title the set.
    pub fn title(&self) -> String {
        format!("{} {}", self.name, self.split)
    }

    /// The result of `mode`, when it was evaluated.
    pub fn result(&self, mode: ReportMode) -> Option<&ModeResult> {
        self.modes.iter().find(|m| m.mode == mode)
    }

    /// The single path with the highest mean nDCG@10 (see [`WinLoss`]).
    pub fn best_single(&self) -> Option<&ModeResult> {
        self.modes.iter().filter(|m| m.mode.is_single_path()).fold(None, |best: Option<&ModeResult>, m| match best {
            Some(b) if b.metrics.ndcg_at_10 >= m.metrics.ndcg_at_10 => Some(b),
            _ => Some(m),
        })
    }

    /// The hybrid's wins, ties and losses against the best single path ([`WinLoss`]);
    /// `None` without a hybrid or a single-path result.
    pub fn win_loss(&self) -> Option<WinLoss> {
        let hybrid = self.result(ReportMode::Hybrid)?;
        let best = self.best_single()?;
        let other: HashMap<&str, f64> = best.per_query.iter().map(|q| (q.qid.as_str(), q.ndcg_at_10)).collect();
        let mut deltas: Vec<QueryDelta> = hybrid
            .per_query
            .iter()
            .filter_map(|q| {
                other.get(q.qid.as_str()).map(|b| QueryDelta { qid: q.qid.clone(), delta: q.ndcg_at_10 - b })
            })
            .collect();
        deltas.sort_by(|a, b| b.delta.total_cmp(&a.delta).then_with(|| a.qid.cmp(&b.qid)));
        let wins = deltas.iter().filter(|d| d.delta > TIE_EPSILON).count();
        let losses = deltas.iter().filter(|d| d.delta < -TIE_EPSILON).count();
        let mean = deltas.iter().map(|d| d.delta).sum::<f64>() / deltas.len().max(1) as f64;
        Some(WinLoss { best_single: best.mode, wins, losses, ties: deltas.len() - wins - losses, deltas, mean })
    }
}

/// An evaluation report: every set evaluated.
#[derive(Debug, Clone, Default)]
pub struct EvalReport {
    /// The sets, in the order they were given.
    pub sets: Vec<SetResult>,
    /// The command that made it, shown on the page.
    pub command: String,
}

impl EvalReport {
    /// `report.json`: per set, each mode's [`ModeResult::summary`] with its per-query
    /// nDCG@10, and the hybrid's [`WinLoss`] against the best single path.
    pub fn json(&self) -> Value {
        let sets: Vec<Value> = self
            .sets
            .iter()
            .map(|set| {
                let modes: Vec<Value> = set
                    .modes
                    .iter()
                    .map(|m| {
                        let mut v = m.summary(set);
                        let per: Vec<Value> =
                            m.per_query.iter().map(|q| json!({"qid": q.qid, "nDCG@10": q.ndcg_at_10})).collect();
                        v["per_query"] = Value::Array(per);
                        v
                    })
                    .collect();
                let win_loss = set.win_loss().map(|w| {
                    json!({
                        "best_single": w.best_single.label(),
                        "wins": w.wins,
                        "ties": w.ties,
                        "losses": w.losses,
                        "mean_delta": w.mean,
                        "deltas": w.deltas.iter().map(|d| json!({"qid": d.qid, "delta": d.delta})).collect::<Vec<_>>(),
                    })
                });
                json!({"set": set.name, "split": set.split, "docs": set.docs, "modes": modes,
                       "hybrid_vs_best_single": win_loss})
            })
            .collect();
        json!({"kind": "eval", "command": self.command, "tie_epsilon": TIE_EPSILON, "sets": sets})
    }
}

/// A file name for a chart: lower-case letters, digits and `-` only.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c.to_ascii_lowercase() {
            c if c.is_ascii_alphanumeric() => out.push(c),
            _ if !out.ends_with('-') => out.push('-'),
            _ => {}
        }
    }
    out.trim_matches('-').to_string()
}

/// Writes an evaluation report under `dir` (created when missing): `index.html`,
/// `report.json`, `ndcg.svg` and one `winloss-SET-SPLIT.svg` per set. Returns the page's path.
pub fn write_eval(dir: &FsPath, report: &EvalReport) -> Result<PathBuf> {
    let mut files = vec![("ndcg.svg".to_string(), charts::ndcg_by_mode(report)?)];
    let mut win_loss = Vec::new();
    for set in &report.sets {
        if let Some(w) = set.win_loss() {
            let svg = charts::win_loss(set, &w)?;
            files.push((format!("winloss-{}.svg", slug(&set.title())), svg.clone()));
            win_loss.push((set, w, svg));
        }
    }
    let html = page::eval_page(report, &files[0].1, &win_loss);
    write_files(dir, files, &html, &report.json())
}

/// What a peer measured on the same queries (`scripts/bench/peer_bench.py --samples FILE`): raw
/// samples in milliseconds, per stage named as [`StageRow::key`] names Sextant's.
#[derive(Debug, Clone, Deserialize)]
pub struct PeerSamples {
    /// What the peer is, with versions (`ONNX Runtime 1.23 (Python) + LanceDB 0.25`).
    pub peer: String,
    /// Queries timed.
    pub queries: usize,
    /// Stages timed once for every scale: `encode_dense`, `encode_sparse` (the query
    /// encoders), each with its samples.
    pub stages: BTreeMap<String, Vec<f64>>,
    /// `search_total` per index size (chunks, as a string key): embed + one hybrid query.
    #[serde(default)]
    pub search_total: BTreeMap<String, PeerSearch>,
}

/// The peer's end-to-end search at one index size.
#[derive(Debug, Clone, Deserialize)]
pub struct PeerSearch {
    /// How it searched vectors (`exact`, or the name of its vector index).
    pub vector_search: String,
    /// Every query's time, ms.
    pub samples_ms: Vec<f64>,
}

/// One stage the peer measured at one scale, beside Sextant's stage of the same key.
#[derive(Debug, Clone)]
pub struct PeerStage {
    /// The Sextant stage it stands beside ([`StageRow::key`]).
    pub key: String,
    /// What the peer ran.
    pub name: String,
    /// The samples, ms.
    pub samples_ms: Vec<f64>,
    /// Their summary (the same nearest-rank percentiles as Sextant's).
    pub stats: Stats,
}

impl PeerSamples {
    /// Reads a samples file.
    pub fn read(path: &FsPath) -> Result<PeerSamples> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a peer samples file", path.display()))
    }

    /// The peer's stages at an index of `chunks` chunks: the query encoders always, the
    /// search when the peer searched an index of that size. Stages without samples are left out.
    pub fn at(&self, chunks: usize) -> Vec<PeerStage> {
        let mut out = Vec::new();
        let mut push = |key: &str, name: String, samples: &[f64]| {
            if !samples.is_empty() {
                let stats = stats(samples);
                out.push(PeerStage { key: key.to_string(), name, samples_ms: samples.to_vec(), stats });
            }
        };
        for (key, samples) in &self.stages {
            let what = match key.as_str() {
                "encode_dense" => "query embed, MiniLM-L6".to_string(),
                "encode_sparse" => "query embed, SPLADE-tiny".to_string(),
                other => other.to_string(),
            };
            push(key, what, samples);
        }
        if let Some(s) = self.search_total.get(&chunks.to_string()) {
            push("search_total", format!("embed + hybrid query ({} vectors)", s.vector_search), &s.samples_ms);
        }
        out
    }
}

/// One scale of a benchmark: its figures (what `--json` prints) and every stage's samples.
#[derive(Debug, Clone)]
pub struct ScaleResult {
    /// The figures `sextant bench --json` prints for this scale.
    pub figures: Figures,
    /// Every stage timed, with its samples.
    pub stages: Vec<StageRow>,
}

/// A benchmark report: every scale measured, and the peer's samples if given.
#[derive(Debug, Clone, Default)]
pub struct BenchReport {
    /// The BEIR set's name.
    pub set: String,
    /// The scales, in the order measured.
    pub scales: Vec<ScaleResult>,
    /// The peer's samples (`--peer FILE`), if any.
    pub peer: Option<PeerSamples>,
    /// The command that made it, shown on the page.
    pub command: String,
}

impl BenchReport {
    /// `report.json`: per scale, the figures `--json` printed and each stage's summary and
    /// samples, Sextant's and (where measured) the peer's.
    pub fn json(&self) -> Value {
        let stage = |key: &str, name: &str, s: &Stats, samples: &[f64]| json!({"key": key, "name": name, "p50_ms": s.p50, "p99_ms": s.p99, "mean_ms": s.mean, "samples_ms": samples});
        let scales: Vec<Value> = self
            .scales
            .iter()
            .map(|sc| {
                let peer: Vec<Value> = self
                    .peer
                    .as_ref()
                    .map(|p| p.at(sc.figures.chunks))
                    .unwrap_or_default()
                    .iter()
                    .map(|p| stage(&p.key, &p.name, &p.stats, &p.samples_ms))
                    .collect();
                json!({
                    "figures": sc.figures,
                    "stages": sc.stages.iter().map(|r| stage(r.key, &r.name, &r.stats, &r.samples_ms)).collect::<Vec<_>>(),
                    "peer_stages": peer,
                })
            })
            .collect();
        json!({"kind": "bench", "command": self.command, "set": self.set,
               "peer": self.peer.as_ref().map(|p| p.peer.clone()), "scales": scales})
    }
}

/// Writes a benchmark report under `dir` (created when missing): `index.html`,
/// `report.json` and one `latency-SCALE.svg` per scale. Returns the page's path.
pub fn write_bench(dir: &FsPath, report: &BenchReport) -> Result<PathBuf> {
    let mut files = Vec::new();
    for sc in &report.scales {
        let peer = report.peer.as_ref().map(|p| p.at(sc.figures.chunks)).unwrap_or_default();
        let svg = charts::latency(sc, &peer, report.peer.as_ref().map(|p| p.peer.as_str()))?;
        files.push((format!("latency-{}.svg", slug(&sc.figures.scale)), svg));
    }
    let svgs: Vec<&str> = files.iter().map(|(_, s)| s.as_str()).collect();
    let html = page::bench_page(report, &svgs);
    write_files(dir, files, &html, &report.json())
}

fn write_files(dir: &FsPath, svgs: Vec<(String, String)>, html: &str, json: &Value) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, svg) in svgs {
        std::fs::write(dir.join(name), svg)?;
    }
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(json)?)?;
    let page = dir.join("index.html");
    std::fs::write(&page, html)?;
    Ok(page)
}

/// This process's command line as a user would type it: `sextant` and the arguments,
/// any with a space or a quote in single quotes.
pub fn command_line() -> String {
    let args = std::env::args().skip(1).map(|a| match a.contains([' ', '\'', '"']) || a.is_empty() {
        true => format!("'{}'", a.replace('\'', "'\\''")),
        false => a,
    });
    std::iter::once("sextant".to_string()).chain(args).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether every `&` in `text` starts an entity (`&name;`, `&#10;`, `&#x1F;`): xmlparser
    /// leaves text and attribute values unchecked.
    fn entities_ok(text: &str) -> bool {
        text.split('&').skip(1).all(|rest| {
            let Some(end) = rest.find(';') else { return false };
            let name = &rest[..end];
            match name.strip_prefix('#') {
                Some(n) => match n.strip_prefix('x') {
                    Some(h) => !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()),
                    None => !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()),
                },
                None => matches!(name, "amp" | "lt" | "gt" | "quot" | "apos"),
            }
        })
    }

    /// Checks that `xml` is well-formed: xmlparser's tokens (it rejects malformed tags and
    /// attributes), only XML's five named entities, and every element closed in order.
    /// Returns the number of elements.
    pub(crate) fn well_formed(xml: &str) -> std::result::Result<usize, String> {
        let mut open: Vec<&str> = Vec::new();
        let mut elements = 0;
        for token in xmlparser::Tokenizer::from(xml) {
            match token.map_err(|e| e.to_string())? {
                xmlparser::Token::Text { text } if !entities_ok(text.as_str()) => {
                    return Err(format!("a bare & in the text {:?}", text.as_str()));
                }
                xmlparser::Token::Attribute { local, value, .. } if !entities_ok(value.as_str()) => {
                    return Err(format!("a bare & in the attribute {}={:?}", local.as_str(), value.as_str()));
                }
                xmlparser::Token::ElementStart { local, .. } => {
                    open.push(local.as_str());
                    elements += 1;
                }
                xmlparser::Token::ElementEnd { end, .. } => match end {
                    xmlparser::ElementEnd::Open => {}
                    xmlparser::ElementEnd::Empty => {
                        open.pop();
                    }
                    xmlparser::ElementEnd::Close(_, local) => match open.pop() {
                        Some(name) if name == local.as_str() => {}
                        other => return Err(format!("</{}> closes {other:?}", local.as_str())),
                    },
                },
                _ => {}
            }
        }
        match open.is_empty() && elements > 0 {
            true => Ok(elements),
            false => Err(format!("unclosed: {open:?} ({elements} elements)")),
        }
    }

    #[test]
    fn the_well_formedness_check_fails_on_broken_markup() {
        assert_eq!(well_formed("<svg><rect/><text>a &amp; b</text></svg>"), Ok(3));
        assert!(well_formed("<svg><text>a</svg></text>").is_err());
        assert!(well_formed("<svg><text>a</text>").is_err());
        assert!(well_formed("<svg><text>a & b</text></svg>").is_err());
        assert!(well_formed("<svg><text>&nbsp;</text></svg>").is_err(), "not an XML entity");
        assert!(well_formed("<svg><text title=\"a&b\">&#39;&#x394;</text></svg>").is_err());
        assert_eq!(well_formed("<svg><text title=\"a&amp;b\">&#39;&#x394;</text></svg>"), Ok(2));
        assert!(well_formed("").is_err());
    }

    /// A query's metrics with only nDCG@10 set.
    fn q(qid: &str, ndcg: f64) -> QueryMetrics {
        QueryMetrics { qid: qid.into(), ndcg_at_10: ndcg, ..Default::default() }
    }

    /// A set where each mode's per-query nDCG@10 is given; the means are computed.
    pub(crate) fn set(name: &str, per_mode: &[(ReportMode, &[f64])]) -> SetResult {
        let modes = per_mode
            .iter()
            .map(|(mode, values)| {
                let per_query: Vec<QueryMetrics> =
                    values.iter().enumerate().map(|(i, &v)| q(&format!("q{i}"), v)).collect();
                let mut metrics = Metrics::mean(&per_query);
                metrics.recall_at_100 = 0.9;
                ModeResult { mode: *mode, paths: "dense+bm25+splade".into(), metrics, per_query }
            })
            .collect();
        SetResult { name: name.into(), split: "dev".into(), docs: 10, modes }
    }

    #[test]
    fn the_best_single_path_has_the_highest_mean() {
        let s = set(
            "s",
            &[
                (ReportMode::Dense, &[0.2, 0.2]),
                (ReportMode::Bm25, &[0.5, 0.1]),
                (ReportMode::Splade, &[0.3, 0.1]),
                (ReportMode::Hybrid, &[0.9, 0.9]),
            ],
        );
        assert_eq!(s.best_single().unwrap().mode, ReportMode::Bm25);
        // A tie keeps the first in ALL's order.
        let t = set("t", &[(ReportMode::Dense, &[0.4]), (ReportMode::Bm25, &[0.4])]);
        assert_eq!(t.best_single().unwrap().mode, ReportMode::Dense);
        assert!(t.win_loss().is_none(), "no hybrid, no wins or losses");
    }

    #[test]
    fn wins_ties_and_losses_against_the_best_single_path() {
        let s = set(
            "s",
            &[
                (ReportMode::Dense, &[0.0, 0.0, 0.0, 0.0]),
                (ReportMode::Bm25, &[0.5, 0.5, 0.5, 1.0]),
                (ReportMode::PlainRrf, &[1.0, 1.0, 1.0, 1.0]),
                (ReportMode::Hybrid, &[1.0, 0.5, 0.25, 1.0 - 1e-12]),
            ],
        );
        let w = s.win_loss().unwrap();
        assert_eq!(w.best_single, ReportMode::Bm25, "plain RRF is not a single path");
        assert_eq!((w.wins, w.ties, w.losses), (1, 2, 1));
        let order: Vec<(&str, f64)> = w.deltas.iter().map(|d| (d.qid.as_str(), d.delta)).collect();
        assert_eq!(order[0], ("q0", 0.5));
        assert_eq!(order[3], ("q2", -0.25));
        assert!((w.mean - (0.5 + 0.0 - 0.25 - 1e-12) / 4.0).abs() < 1e-15);
        let hybrid = s.result(ReportMode::Hybrid).unwrap().metrics.ndcg_at_10;
        let bm25 = s.result(ReportMode::Bm25).unwrap().metrics.ndcg_at_10;
        assert!((w.mean - (hybrid - bm25)).abs() < 1e-12, "the mean Δ is the difference of the means");
    }

    #[test]
    fn report_json_holds_each_modes_summary_and_its_queries() {
        let s = set("fin", &[(ReportMode::Bm25, &[0.5, 0.25]), (ReportMode::Hybrid, &[0.75, 0.25])]);
        let r = EvalReport { sets: vec![s.clone()], command: "sextant eval".into() };
        let v = r.json();
        let m = &v["sets"][0]["modes"][1];
        let mut summary = m.clone();
        summary.as_object_mut().unwrap().remove("per_query");
        assert_eq!(summary, s.modes[1].summary(&s));
        assert_eq!(m["label"], "hybrid");
        assert_eq!(m["nDCG@10"], 0.5);
        assert_eq!(m["per_query"][0]["nDCG@10"], 0.75);
        let wl = &v["sets"][0]["hybrid_vs_best_single"];
        assert_eq!(
            (wl["best_single"].as_str(), wl["wins"].as_u64(), wl["ties"].as_u64()),
            (Some("bm25"), Some(1), Some(1))
        );
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("fin-filings dev"), "fin-filings-dev");
        assert_eq!(slug("synthetic 100000"), "synthetic-100000");
        assert_eq!(slug("  A/b..c "), "a-b-c");
    }

    #[test]
    fn peer_stages_at_a_scale() {
        let p: PeerSamples = serde_json::from_value(json!({
            "peer": "ORT + LanceDB", "queries": 3,
            "stages": {"encode_dense": [1.0, 2.0, 3.0], "encode_sparse": []},
            "search_total": {"5000": {"vector_search": "exact", "samples_ms": [9.0, 10.0, 11.0]}}
        }))
        .unwrap();
        let at = p.at(5000);
        assert_eq!(at.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["encode_dense", "search_total"]);
        assert_eq!(at[1].stats.p50, 10.0);
        assert!(at[1].name.contains("exact"));
        assert_eq!(p.at(11249).len(), 1, "no search at a size the peer did not measure");
    }
}
