//! The report pages: one self-contained HTML document each, with the charts inline (SVG),
//! the style inline (CSS), no script and nothing fetched. Every piece of text that comes
//! from the figures (set names, commands, the peer's name) goes through [`escape`].

use std::fmt::Write;

use super::{BenchReport, EvalReport, ReportMode, SetResult, WinLoss, TIE_EPSILON};

/// `text` safe inside an HTML element or a quoted attribute: `& < > " '` as entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1000px;padding:0 1rem;color:#222}\
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem}figure{margin:1rem 0}svg{max-width:100%;height:auto}\
table{border-collapse:collapse;margin:.8rem 0;font-size:.9rem}th,td{border:1px solid #ccc;padding:.25rem .55rem}\
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}code{background:#f4f4f4;padding:0 .2rem}\
.note{color:#555}";

fn open(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>{}</title>\n\
         <style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    )
}

fn figure(svg: &str, caption: &str) -> String {
    format!("<figure>\n{svg}<figcaption class=\"note\">{}</figcaption>\n</figure>\n", escape(caption))
}

/// The evaluation page: the command, the definitions, the nDCG@10 chart (`ndcg_svg`) with a
/// table of nDCG@10 and Recall@100 per mode and set (the best of each column in bold), then
/// per set the hybrid's wins and losses against the best single path (`win_loss`: the set,
/// its [`WinLoss`] and its chart).
pub fn eval_page(report: &EvalReport, ndcg_svg: &str, win_loss: &[(&SetResult, WinLoss, String)]) -> String {
    let mut h = open("Sextant: retrieval quality per mode and set");
    let _ = write!(
        h,
        "<p>Made by <code>{}</code>.</p>\n<p class=\"note\">Modes: <b>dense</b>, <b>bm25</b> and <b>splade</b> \
         are one path alone; <b>plain RRF</b> fuses all three by chunks' ranks (k = 60, equal weights); \
         <b>hybrid</b> is the default fusion. Rankings are by document (one chunk each, 100 documents). \
         nDCG@10 = mean over questions of DCG@10 / IDCG@10, DCG@10 = Σ<sub>i≤10</sub> grade(d<sub>i</sub>) / \
         log<sub>2</sub>(i + 1); Recall@100 = share of a question's relevant documents in its first 100.</p>\n",
        escape(&report.command)
    );
    h.push_str("<h2>nDCG@10 per mode and set</h2>\n");
    h.push_str(&figure(ndcg_svg, "nDCG@10 per mode (bars) and set (groups)."));
    h.push_str("<table>\n<tr><th rowspan=\"2\">mode</th>");
    for s in &report.sets {
        let queries = s.modes.first().map_or(0, |m| m.metrics.queries);
        let _ = write!(h, "<th colspan=\"2\">{} ({queries} questions)</th>", escape(&s.title()));
    }
    h.push_str("</tr>\n<tr>");
    for _ in &report.sets {
        h.push_str("<th>nDCG@10</th><th>Recall@100</th>");
    }
    h.push_str("</tr>\n");
    for mode in ReportMode::ALL {
        let _ = write!(h, "<tr><td>{}</td>", escape(mode.label()));
        for s in &report.sets {
            let best = |f: fn(&sextant_kit::eval::Metrics) -> f64| {
                s.modes.iter().map(|m| f(&m.metrics)).fold(f64::MIN, f64::max)
            };
            match s.result(mode) {
                Some(r) => {
                    for (value, top) in [
                        (r.metrics.ndcg_at_10, best(|m| m.ndcg_at_10)),
                        (r.metrics.recall_at_100, best(|m| m.recall_at_100)),
                    ] {
                        match value == top {
                            true => {
                                let _ = write!(h, "<td class=\"n\"><b>{value:.4}</b></td>");
                            }
                            false => {
                                let _ = write!(h, "<td class=\"n\">{value:.4}</td>");
                            }
                        }
                    }
                }
                None => h.push_str("<td></td><td></td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    let _ = write!(
        h,
        "<h2>Hybrid against the best single path, per question</h2>\n<p class=\"note\">The best single path \
         is the one of dense, bm25 and splade with the highest mean nDCG@10 on the set. For each question, \
         Δ = nDCG@10 of hybrid − nDCG@10 of that path: a win when Δ &gt; {TIE_EPSILON:e}, a loss when \
         Δ &lt; −{TIE_EPSILON:e}, else a tie.</p>\n<table>\n<tr><th>set</th><th>best single path</th>\
         <th>its nDCG@10</th><th>hybrid nDCG@10</th><th>wins</th><th>ties</th><th>losses</th><th>mean Δ</th></tr>\n"
    );
    for (set, w, _) in win_loss {
        let best = set.result(w.best_single).map_or(0.0, |m| m.metrics.ndcg_at_10);
        let hybrid = set.result(ReportMode::Hybrid).map_or(0.0, |m| m.metrics.ndcg_at_10);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{best:.4}</td><td class=\"n\">{hybrid:.4}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:+.4}</td></tr>",
            escape(&set.title()),
            escape(w.best_single.label()),
            w.wins,
            w.ties,
            w.losses,
            w.mean
        );
    }
    h.push_str("</table>\n");
    for (set, w, svg) in win_loss {
        let caption = format!(
            "{}: {} wins, {} ties, {} losses of hybrid against {}, questions sorted by Δ.",
            set.title(),
            w.wins,
            w.ties,
            w.losses,
            w.best_single.label()
        );
        h.push_str(&figure(svg, &caption));
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The benchmark page: the command, whose samples stand beside Sextant's ("no peer
/// samples" without `--peer`), then per scale its latency chart (`svgs`, one per scale in
/// order) and a table of each stage's p50, p99 and mean, Sextant's and the peer's, with the
/// ratio of the p50s.
pub fn bench_page(report: &BenchReport, svgs: &[&str]) -> String {
    let mut h = open(&format!("Sextant: latency per stage on {}", report.set));
    let _ = writeln!(h, "<p>Made by <code>{}</code>.</p>", escape(&report.command));
    match &report.peer {
        Some(p) => {
            let _ = writeln!(
                h,
                "<p>Beside it, the peer: {} ({} queries, the same ones), from <code>scripts/bench/peer_bench.py \
                 --samples</code>. A ratio below 1 means Sextant is faster.</p>",
                escape(&p.peer),
                p.queries
            );
        }
        None => h.push_str(
            "<p><b>No peer samples</b>: run <code>scripts/bench/peer_bench.py --samples FILE</code> and \
                            pass <code>--peer FILE</code> to show the peer beside each stage.</p>\n",
        ),
    }
    h.push_str(
        "<p class=\"note\">Percentiles are nearest-rank (the sample at rank round((n − 1) · q) of the sorted \
         samples), as <code>sextant bench</code> prints them.</p>\n",
    );
    for (sc, svg) in report.scales.iter().zip(svgs) {
        let f = &sc.figures;
        let _ = writeln!(h, "<h2>{}: {} chunks</h2>", escape(&f.scale), f.chunks);
        h.push_str(&figure(svg, &format!("Latency per stage, {}, {} queries.", f.scale, f.queries)));
        let peer = report.peer.as_ref().map(|p| p.at(f.chunks)).unwrap_or_default();
        h.push_str(
            "<table>\n<tr><th>stage</th><th>p50 ms</th><th>p99 ms</th><th>mean ms</th><th>peer</th>\
             <th>peer p50 ms</th><th>peer p99 ms</th><th>p50 ratio</th></tr>\n",
        );
        for r in &sc.stages {
            let s = r.stats;
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td>",
                escape(&r.name),
                s.p50,
                s.p99,
                s.mean
            );
            match peer.iter().find(|p| p.key == r.key) {
                Some(p) => {
                    let _ = writeln!(
                        h,
                        "<td>{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.2}</td></tr>",
                        escape(&p.name),
                        p.stats.p50,
                        p.stats.p99,
                        s.p50 / p.stats.p50
                    );
                }
                None => h.push_str("<td></td><td></td><td></td><td></td></tr>\n"),
            }
        }
        h.push_str("</table>\n");
        let _ = write!(h, "<p>HNSW recall@10 against exact search: {:.4}.", f.hnsw_recall_at_10);
        if f.build_passages > 0 {
            let _ = write!(
                h,
                " Passage encoding, {} passages: {:.1}/s with both encoders as a build runs them \
                 (dense alone {:.1}/s, SPLADE alone {:.1}/s).",
                f.build_passages, f.build_chunks_per_s, f.build_dense_chunks_per_s, f.build_sparse_chunks_per_s
            );
        }
        h.push_str("</p>\n");
    }
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{stats, Figures, StageRow};
    use crate::report::tests::{set, well_formed};
    use crate::report::{PeerSamples, ScaleResult};

    #[test]
    fn escape_covers_the_five_characters() {
        assert_eq!(
            escape(r#"<a href="x">Tom's & Jerry's</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&#39;s&lt;/a&gt;"
        );
        assert_eq!(escape("ΔnDCG@10 − plain"), "ΔnDCG@10 − plain");
    }

    #[test]
    fn the_eval_page_is_well_formed_escaped_and_scriptless() {
        let s = set(
            "<script>alert(1)</script>&co",
            &[(ReportMode::Bm25, &[0.5, 0.25]), (ReportMode::Splade, &[0.4, 0.4]), (ReportMode::Hybrid, &[0.75, 0.25])],
        );
        let w = s.win_loss().unwrap();
        let report = EvalReport { sets: vec![s.clone()], command: "sextant eval --beir 'a b'".into() };
        let html = eval_page(&report, "<svg id=\"ndcg\"></svg>", &[(&s, w, "<svg id=\"wl\"></svg>".into())]);
        well_formed(&html).unwrap();
        assert!(!html.to_lowercase().contains("<script"), "no script, even from a set's name");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;co dev"));
        assert!(html.contains("sextant eval --beir &#39;a b&#39;"));
        assert!(html.contains("<svg id=\"ndcg\">") && html.contains("<svg id=\"wl\">"));
        for mode in ReportMode::ALL {
            assert!(html.contains(&format!("<tr><td>{}</td>", escape(mode.label()))));
        }
        // splade has the best mean of the single paths: 0.4, against bm25's 0.375.
        let row = "<td>splade</td><td class=\"n\">0.4000</td><td class=\"n\">0.5000</td>";
        assert!(html.contains(row), "the best single path, its nDCG@10 and the hybrid's");
        assert!(html.contains(
            "<td class=\"n\">1</td><td class=\"n\">0</td><td class=\"n\">1</td><td class=\"n\">+0.1000</td>"
        ));
        assert!(html.contains("<b>0.5000</b>"), "the best nDCG@10 of the set in bold");
        assert_eq!(html.matches("<b>0.9000</b>").count(), 3, "Recall@100, every mode level at the best");
    }

    #[test]
    fn the_bench_page_says_when_there_is_no_peer() {
        let samples = vec![1.0, 2.0, 3.0];
        let row = StageRow {
            key: "encode_dense",
            name: "encode query: dense".into(),
            stats: stats(&samples),
            samples_ms: samples,
            baseline: String::new(),
        };
        let figures = Figures { scale: "real index".into(), chunks: 100, queries: 3, ..Default::default() };
        let mut report = BenchReport {
            set: "scifact".into(),
            scales: vec![ScaleResult { figures, stages: vec![row] }],
            peer: None,
            command: "sextant bench".into(),
        };
        let html = bench_page(&report, &["<svg></svg>"]);
        well_formed(&html).unwrap();
        assert!(html.contains("No peer samples") && !html.contains("<script"));
        assert!(html.contains("<td>encode query: dense</td><td class=\"n\">2.000</td><td class=\"n\">3.000</td>"));
        report.peer = Some(PeerSamples {
            peer: "ONNX Runtime & <LanceDB>".into(),
            queries: 3,
            stages: [("encode_dense".to_string(), vec![4.0, 4.0, 8.0])].into(),
            search_total: Default::default(),
        });
        let html = bench_page(&report, &["<svg></svg>"]);
        well_formed(&html).unwrap();
        assert!(html.contains("ONNX Runtime &amp; &lt;LanceDB&gt;") && !html.contains("No peer samples"));
        assert!(html.contains("<td class=\"n\">4.000</td><td class=\"n\">8.000</td><td class=\"n\">0.50</td>"));
    }
}
