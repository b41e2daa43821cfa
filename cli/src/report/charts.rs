//! The charts, each a pure function from figures to one SVG document (a string), drawn with
//! plotters' SVG backend. Text is laid out by the browser (no font files are read), and
//! plotters escapes it.
//!
//! Colours are the Okabe–Ito palette, told apart with the common colour-vision deficiencies.

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{EvalReport, PeerStage, ReportMode, ScaleResult, SetResult, WinLoss, TIE_EPSILON};

/// Each mode's colour in the charts.
pub fn mode_color(mode: ReportMode) -> RGBColor {
    match mode {
        ReportMode::Dense => RGBColor(0x00, 0x72, 0xB2),
        ReportMode::Bm25 => RGBColor(0xE6, 0x9F, 0x00),
        ReportMode::Splade => RGBColor(0x00, 0x9E, 0x73),
        ReportMode::PlainRrf => RGBColor(0xCC, 0x79, 0xA7),
        ReportMode::Hybrid => RGBColor(0xD5, 0x5E, 0x00),
    }
}

/// The colour of a query the hybrid wins.
pub const WIN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
/// The colour of a query the hybrid loses.
pub const LOSS: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
/// Sextant's boxes in the latency chart.
pub const SEXTANT: RGBColor = RGBColor(0x00, 0x72, 0xB2);
/// The peer's boxes in the latency chart.
pub const PEER: RGBColor = RGBColor(0xE6, 0x9F, 0x00);

const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);

/// A sans-serif font of `px` CSS pixels (the SVG backend writes plotters' size ÷ 1.24).
fn font(px: f64) -> FontDesc<'static> {
    ("sans-serif", px * 1.24).into_font()
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// Draws on a fresh SVG of `size` pixels and returns the document.
fn svg(size: (u32, u32), draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// A row of colour swatches with their labels, left to right from `at` (pixels).
fn legend(root: &DrawingArea<SVGBackend, Shift>, at: (i32, i32), entries: &[(String, RGBColor)]) -> Result<()> {
    let mut x = at.0;
    for (label, color) in entries {
        root.draw(&Rectangle::new([(x, at.1 - 6), (x + 12, at.1 + 6)], color.filled())).map_err(err)?;
        let style = font(13.0).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        root.draw(&Text::new(label.clone(), (x + 17, at.1), style)).map_err(err)?;
        x += 30 + 7 * label.chars().count() as i32;
    }
    Ok(())
}

/// nDCG@10 of every mode on every set, as grouped bars: one group per set, one bar per
/// mode in [`ReportMode::ALL`]'s order, each bar labelled with its value (3 decimals), the
/// set's name and question count under its group.
///
/// nDCG@10 is the mean over the set's evaluated queries of `DCG@10 / IDCG@10`, with
/// `DCG@10 = Σ_{i=1..10} grade(d_i) / log2(i + 1)` ([`sextant_kit::eval::ndcg_at`]).
pub fn ndcg_by_mode(report: &EvalReport) -> Result<String> {
    let sets = &report.sets;
    let n = sets.len().max(1);
    let width = (160 + 190 * n as u32).max(640);
    svg((width, 460), |root| {
        let title = "nDCG@10 per mode and set";
        root.draw(&Text::new(title, (20, 22), font(20.0).color(&BLACK))).map_err(err)?;
        let entries: Vec<(String, RGBColor)> =
            ReportMode::ALL.iter().map(|m| (m.label().to_string(), mode_color(*m))).collect();
        legend(root, (22, 50), &entries)?;
        let area = root.margin(64, 46, 10, 20);
        let mut chart = ChartBuilder::on(&area)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..1f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(11)
            .y_desc("nDCG@10")
            .y_label_formatter(&|y| format!("{y:.1}"))
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .label_style(font(12.0))
            .axis_desc_style(font(13.0))
            .draw()
            .map_err(err)?;
        let group = 0.84;
        let bar = group / ReportMode::ALL.len() as f64;
        for (j, mode) in ReportMode::ALL.iter().enumerate() {
            let color = mode_color(*mode);
            let bars: Vec<(f64, f64)> = sets
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.result(*mode).map(|r| (i as f64 - group / 2.0 + bar * j as f64, r.metrics.ndcg_at_10))
                })
                .collect();
            chart
                .draw_series(
                    bars.iter()
                        .map(|&(x, v)| Rectangle::new([(x + 0.06 * bar, 0.0), (x + 0.94 * bar, v)], color.filled())),
                )
                .map_err(err)?;
            let label = font(11.0).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
            chart
                .draw_series(
                    bars.iter().map(|&(x, v)| Text::new(format!("{v:.3}"), (x + bar / 2.0, v + 0.01), label.clone())),
                )
                .map_err(err)?;
        }
        for (i, s) in sets.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64, 0.0));
            let queries = s.result(ReportMode::Hybrid).or(s.modes.first()).map_or(0, |m| m.metrics.queries);
            let style = font(13.0).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(s.title(), (px, py + 8), style.clone())).map_err(err)?;
            root.draw(&Text::new(format!("{queries} questions"), (px, py + 25), style)).map_err(err)?;
        }
        Ok(())
    })
}

/// The hybrid against the best single path on one set, query by query (see [`WinLoss`]
/// for `Δ`): one bar per query that is not a tie, sorted from the largest win (left, above
/// zero, green) to the largest loss (right, below zero, orange); ties sit at zero between
/// them. The title gives the counts and the mean `Δ`.
pub fn win_loss(set: &SetResult, w: &WinLoss) -> Result<String> {
    let n = w.deltas.len().max(1);
    svg((900, 330), |root| {
        let title =
            format!("{}: hybrid − {} (best single path), ΔnDCG@10 per question", set.title(), w.best_single.label());
        root.draw(&Text::new(title, (20, 22), font(18.0).color(&BLACK))).map_err(err)?;
        let counts = format!(
            "{} wins · {} ties · {} losses of {} questions; mean Δ {:+.4}",
            w.wins,
            w.ties,
            w.losses,
            w.deltas.len(),
            w.mean
        );
        legend(root, (22, 48), &[("wins".into(), WIN), ("losses".into(), LOSS)])?;
        let style = font(13.0).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        root.draw(&Text::new(counts, (200, 48), style)).map_err(err)?;
        let area = root.margin(62, 10, 10, 20);
        let mut chart = ChartBuilder::on(&area)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n as f64, -1f64..1f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(6)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc("questions, sorted by Δ")
            .y_labels(5)
            .y_desc("ΔnDCG@10")
            .y_label_formatter(&|y| format!("{y:+.1}"))
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .label_style(font(12.0))
            .axis_desc_style(font(13.0))
            .draw()
            .map_err(err)?;
        // With more questions than pixels a bar one question wide can round to no width at
        // all; each is at least a pixel wide, over its right neighbour (sorted, so a sliver of
        // a taller bar at most), which is drawn after it. The last ones end at the axis' end.
        let pixels = chart.plotting_area().dim_in_pixel().0.max(1) as f64;
        let width = (n as f64 / pixels * 1.01).max(1.0);
        let bars = w.deltas.iter().enumerate().filter(|(_, d)| d.delta.abs() > TIE_EPSILON).map(|(i, d)| {
            let color = if d.delta > 0.0 { WIN } else { LOSS };
            let x = (i as f64).min(n as f64 - width);
            Rectangle::new([(x, 0.0), (x + width, d.delta)], color.filled())
        });
        chart.draw_series(bars).map_err(err)?;
        chart.draw_series(std::iter::once(PathElement::new([(0.0, 0.0), (n as f64, 0.0)], BLACK))).map_err(err)?;
        Ok(())
    })
}

/// The sample at rank `round((n − 1) · q)` of sorted samples: the nearest-rank percentile
/// `sextant bench` reports (so a box's median line is the table's p50).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Latency per stage at one scale, as horizontal box plots on a logarithmic axis (ms): the
/// box spans p25 to p75 with a line at p50, the whiskers reach p1 and p99, and dots mark
/// the slowest samples beyond p99. Sextant's box is above the peer's, where the peer timed
/// the same stage (`peer`, named `peer_name`); stages are in the order `bench` times them.
pub fn latency(scale: &ScaleResult, peer: &[PeerStage], peer_name: Option<&str>) -> Result<String> {
    let stages = &scale.stages;
    let rows = stages.len().max(1);
    let height = 130 + 42 * rows as u32;
    // Samples at or below zero (the remainder of a search can round to it) are drawn at the
    // axis' floor: a log axis has no zero.
    let all = stages.iter().flat_map(|s| s.samples_ms.iter()).chain(peer.iter().flat_map(|p| p.samples_ms.iter()));
    let (lo, hi) = all.fold((f64::MAX, 0f64), |(lo, hi), &x| (if x > 0.0 { lo.min(x) } else { lo }, hi.max(x)));
    let floor = if lo == f64::MAX { 0.001 } else { 10f64.powf(lo.log10().floor()) };
    let ceil = 10f64.powf(hi.max(floor * 10.0).log10().ceil());
    svg((960, height), |root| {
        let f = &scale.figures;
        let title = format!(
            "Latency per stage, {}: {} chunks, {} queries, {} backend",
            f.scale, f.chunks, f.queries, f.backend
        );
        root.draw(&Text::new(title, (20, 22), font(18.0).color(&BLACK))).map_err(err)?;
        let mut entries = vec![("Sextant".to_string(), SEXTANT)];
        match peer_name {
            Some(name) => entries.push((format!("peer: {name}"), PEER)),
            None => entries.push(("no peer samples".to_string(), WHITE)),
        }
        legend(root, (22, 50), &entries)?;
        let note = font(12.0).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        let how = "box: p25–p75, line: p50, whiskers: p1–p99, dots: beyond p99";
        root.draw(&Text::new(how, (22, 70), note)).map_err(err)?;
        let (labels, plot) = root.margin(84, 10, 10, 20).split_horizontally(300);
        let mut chart = ChartBuilder::on(&plot)
            .x_label_area_size(36)
            .build_cartesian_2d((floor..ceil).log_scale(), -0.5f64..(rows as f64 - 0.5))
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("milliseconds (log scale)")
            .x_label_formatter(&|x| format!("{x}"))
            .light_line_style(WHITE)
            .bold_line_style(GRID)
            .label_style(font(12.0))
            .axis_desc_style(font(13.0))
            .draw()
            .map_err(err)?;
        for (i, stage) in stages.iter().enumerate() {
            let y = (rows - 1 - i) as f64;
            let theirs = peer.iter().find(|p| p.key == stage.key);
            let offset = if theirs.is_some() { 0.18 } else { 0.0 };
            draw_box(&mut chart, &stage.samples_ms, y + offset, SEXTANT, floor)?;
            if let Some(p) = theirs {
                draw_box(&mut chart, &p.samples_ms, y - offset, PEER, floor)?;
            }
            // The stage's name level with its box, and the peer's under it, level with theirs.
            let (lx, _) = labels.get_base_pixel();
            let right = lx + labels.dim_in_pixel().0 as i32 - 8;
            let at = |y: f64| chart.backend_coord(&(floor, y)).1;
            let style = font(12.0).color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(shorten(&stage.name, 48), (right, at(y + offset)), style)).map_err(err)?;
            if let Some(p) = theirs {
                let style = font(11.0).color(&RGBColor(0x80, 0x56, 0x00)).pos(Pos::new(HPos::Right, VPos::Center));
                let name = shorten(&format!("peer: {}", p.name), 52);
                root.draw(&Text::new(name, (right, at(y - offset)), style)).map_err(err)?;
            }
        }
        Ok(())
    })
}

/// `text` cut to `max` characters (with an ellipsis) to fit the label column: the table on
/// the page has the names whole.
fn shorten(text: &str, max: usize) -> String {
    match text.chars().count() > max {
        true => text.chars().take(max - 1).collect::<String>() + "…",
        false => text.to_string(),
    }
}

/// One box (see [`latency`]) centred on row `y`.
fn draw_box<X>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    samples: &[f64],
    y: f64,
    color: RGBColor,
    floor: f64,
) -> Result<()>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    if samples.is_empty() {
        return Ok(());
    }
    let mut s: Vec<f64> = samples.iter().map(|&x| x.max(floor)).collect();
    s.sort_by(f64::total_cmp);
    let [p1, p25, p50, p75, p99] = [0.01, 0.25, 0.5, 0.75, 0.99].map(|q| percentile(&s, q));
    let h = 0.14;
    let line = color.stroke_width(2);
    chart
        .draw_series([
            PathElement::new([(p1, y), (p25, y)], line),
            PathElement::new([(p75, y), (p99, y)], line),
            PathElement::new([(p1, y - h / 2.0), (p1, y + h / 2.0)], line),
            PathElement::new([(p99, y - h / 2.0), (p99, y + h / 2.0)], line),
        ])
        .map_err(err)?;
    chart.draw_series([Rectangle::new([(p25, y - h), (p75, y + h)], color.mix(0.35).filled())]).map_err(err)?;
    chart.draw_series([Rectangle::new([(p25, y - h), (p75, y + h)], line)]).map_err(err)?;
    chart.draw_series([PathElement::new([(p50, y - h), (p50, y + h)], BLACK.stroke_width(2))]).map_err(err)?;
    chart.draw_series(s.iter().filter(|&&x| x > p99).map(|&x| Circle::new((x, y), 2, color.filled()))).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{stats, Figures, StageRow};
    use crate::report::tests::{set, well_formed};

    /// `#RRGGBB`, as the SVG backend writes a colour.
    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// Filled rectangles of colour `c` (bars, swatches) in an SVG plotters drew.
    fn filled(svg: &str, c: RGBColor, opacity: &str) -> usize {
        svg.matches(&format!("opacity=\"{opacity}\" fill=\"{}\"", hex(c))).count()
    }

    fn report() -> EvalReport {
        let modes = |base: f64| -> Vec<(ReportMode, Vec<f64>)> {
            ReportMode::ALL.iter().enumerate().map(|(j, m)| (*m, vec![base + 0.05 * j as f64, base])).collect()
        };
        let sets = [("scifact", 0.6), ("fin-filings", 0.3), ("fin-calls", 0.45)]
            .iter()
            .map(|(name, base)| {
                let m = modes(*base);
                let m: Vec<(ReportMode, &[f64])> = m.iter().map(|(k, v)| (*k, &v[..])).collect();
                set(name, &m)
            })
            .collect();
        EvalReport { sets, command: "sextant eval".into() }
    }

    #[test]
    fn ndcg_chart_has_one_bar_per_mode_and_set_and_names_them() {
        let r = report();
        let svg = ndcg_by_mode(&r).unwrap();
        well_formed(&svg).unwrap();
        assert!(svg.starts_with("<svg") && !svg.contains("<script"));
        for mode in ReportMode::ALL {
            // One bar per set, and the legend's swatch.
            assert_eq!(filled(&svg, mode_color(mode), "1"), r.sets.len() + 1, "{}", mode.label());
            assert!(svg.contains(&format!(">\n{}\n</text>", mode.label())), "legend names {}", mode.label());
        }
        for s in &r.sets {
            assert!(svg.contains(&s.title()), "{}", s.title());
            for m in &s.modes {
                assert!(svg.contains(&format!("{:.3}", m.metrics.ndcg_at_10)));
            }
        }
        assert!(svg.contains("nDCG@10 per mode and set"));
    }

    #[test]
    fn a_set_without_a_mode_has_no_bar_for_it() {
        let mut r = report();
        r.sets[1].modes.retain(|m| m.mode != ReportMode::Splade);
        let svg = ndcg_by_mode(&r).unwrap();
        assert_eq!(filled(&svg, mode_color(ReportMode::Splade), "1"), r.sets.len());
        assert_eq!(filled(&svg, mode_color(ReportMode::Dense), "1"), r.sets.len() + 1);
    }

    #[test]
    fn win_loss_chart_draws_a_bar_per_win_and_per_loss() {
        let s = set(
            "fin-calls",
            &[
                (ReportMode::Dense, &[0.1, 0.1, 0.1, 0.1, 0.1]),
                (ReportMode::Bm25, &[0.5, 0.5, 0.5, 0.5, 0.9]),
                (ReportMode::Hybrid, &[1.0, 0.7, 0.5, 0.5, 0.0]),
            ],
        );
        let w = s.win_loss().unwrap();
        assert_eq!((w.wins, w.ties, w.losses), (2, 2, 1));
        let svg = win_loss(&s, &w).unwrap();
        well_formed(&svg).unwrap();
        // WIN is SPLADE's colour and LOSS the hybrid's, but this chart has no mode bars.
        assert_eq!(filled(&svg, WIN, "1"), w.wins + 1);
        assert_eq!(filled(&svg, LOSS, "1"), w.losses + 1);
        assert!(svg.contains("2 wins · 2 ties · 1 losses of 5 questions"));
        assert!(svg.contains("fin-calls dev: hybrid − bm25 (best single path)"));
        assert!(svg.contains(&format!("{:+.4}", w.mean)));
    }

    #[test]
    fn bars_are_a_pixel_wide_at_least_with_more_questions_than_pixels() {
        let n = 2000;
        let best: Vec<f64> = vec![0.5; n];
        let hybrid: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 0.9 } else { 0.1 }).collect();
        let s = set("tatqa", &[(ReportMode::Bm25, &best), (ReportMode::Hybrid, &hybrid)]);
        let w = s.win_loss().unwrap();
        let svg = win_loss(&s, &w).unwrap();
        let widths: Vec<i32> = svg
            .split("<rect ")
            .skip(1)
            .filter(|r| r.contains(&format!("fill=\"{}\"", hex(WIN))) || r.contains(&format!("fill=\"{}\"", hex(LOSS))))
            .map(|r| r.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(widths.len(), n + 2, "every question a bar, and the two swatches");
        assert!(widths.iter().all(|&px| px >= 1), "{:?}", widths.iter().filter(|&&px| px < 1).count());
    }

    fn stage(key: &'static str, name: &str, samples: Vec<f64>) -> StageRow {
        StageRow { key, name: name.into(), stats: stats(&samples), samples_ms: samples, baseline: String::new() }
    }

    fn scale() -> ScaleResult {
        let ramp = |lo: f64| (0..200).map(|i| lo * (1.0 + i as f64 / 100.0)).collect::<Vec<_>>();
        let figures = Figures { scale: "real index".into(), chunks: 11249, queries: 200, ..Default::default() };
        ScaleResult {
            figures,
            stages: vec![
                stage("encode_dense", "encode query: dense", ramp(2.0)),
                stage("fuse", "fusion <RRF> & co", ramp(0.02)),
                // A remainder that rounds to zero must not break the log axis.
                stage("search_rest", "search: the rest", vec![0.0, 0.001, 0.002]),
                stage("search_total", "search total", ramp(6.0)),
            ],
        }
    }

    #[test]
    fn latency_chart_has_a_box_per_stage_and_the_peers_beside_them() {
        let sc = scale();
        let peer = vec![PeerStage {
            key: "search_total".into(),
            name: "embed + hybrid query".into(),
            stats: stats(&[10.0, 11.0, 30.0]),
            samples_ms: vec![10.0, 11.0, 30.0],
        }];
        let svg = latency(&sc, &peer, Some("LanceDB")).unwrap();
        well_formed(&svg).unwrap();
        // Each box is a translucent filled rectangle.
        assert_eq!(filled(&svg, SEXTANT, "0.35"), sc.stages.len());
        assert_eq!(filled(&svg, PEER, "0.35"), 1);
        assert!(svg.contains("peer: LanceDB"));
        assert!(svg.contains("fusion &lt;RRF&gt; &amp; co"), "labels are escaped");
        assert!(svg.contains(">\nsearch total\n</text>") && svg.contains(">\npeer: embed + hybrid query\n</text>"));
        assert!(svg.contains("11249 chunks, 200 queries"));
        let alone = latency(&sc, &[], None).unwrap();
        well_formed(&alone).unwrap();
        assert_eq!(filled(&alone, PEER, "0.35"), 0);
        assert!(alone.contains("no peer samples"));
    }
}
