//! SVG charts for the HTML pages, drawn with plotters' SVG backend (no fonts or scripts to
//! load, so the page stays self-contained). Each function returns one `<svg>` element.

use plotters::prelude::*;

use super::axis::{Band, Line, rounds_in_sequence};
use super::compare::Comparison;
use super::model::{OpReport, PerSecond, Report};

const W: u32 = 920;
const H: u32 = 340;

fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// Draw with plotters into a string; a drawing error leaves a note instead of a chart.
fn svg(
    draw: impl FnOnce(
        DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    ) -> Result<(), Box<dyn std::error::Error + '_>>,
) -> String {
    let mut out = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut out, (W, H)).into_drawing_area();
        draw(root).map_err(|e| e.to_string())
    };
    match res {
        Ok(()) => out,
        Err(e) => format!(
            "<p class=\"note\">chart not drawn: {}</p>",
            crate::formats::xml::esc(&e)
        ),
    }
}

/// The legend box every chart draws the same way.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 11))
        .draw()
}

/// Group `i` spans [i, i+1); asking plotters for 2n+1 labels puts one at every half unit,
/// and only the ones at a group's centre get its name.
fn centred_label(labels: &[String], x: f64) -> String {
    if (x.fract() - 0.5).abs() < 1e-6 && x >= 0.0 {
        labels.get(x.floor() as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// The operations worth a line: the busiest first, at most `n`.
fn busiest(ops: &[OpReport], n: usize) -> Vec<&OpReport> {
    let mut v: Vec<&OpReport> = ops.iter().filter(|o| o.requests > 0).collect();
    v.sort_by_key(|o| std::cmp::Reverse(o.requests));
    v.truncate(n);
    v
}

/// Columns of a time chart a line keeps two points in (its lowest and highest): a chart is
/// about this many pixels wide, so more points draw nothing more, and a report of days of
/// seconds would otherwise be a page of tens of megabytes.
const COLUMNS: usize = 800;

/// `pts` (in order of x) with at most the lowest and the highest point of each of
/// `columns` equal slices of its x range, in order: every spike stays, and a line of
/// millions of seconds draws as fast as one of minutes.
fn thin(pts: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
        return Vec::new();
    };
    let span = last.0 - first.0;
    if pts.len() <= 2 * columns || span.is_nan() || span <= 0.0 {
        return pts.to_vec();
    }
    let mut out = Vec::with_capacity(2 * columns + 2);
    let column = |x: f64| (((x - first.0) / span * columns as f64) as usize).min(columns - 1);
    let mut i = 0;
    while i < pts.len() {
        let c = column(pts[i].0);
        let (mut lo, mut hi) = (i, i);
        let mut j = i;
        while j < pts.len() && column(pts[j].0) == c {
            if pts[j].1 < pts[lo].1 {
                lo = j;
            }
            if pts[j].1 > pts[hi].1 {
                hi = j;
            }
            j += 1;
        }
        out.push(pts[lo.min(hi)]);
        if lo != hi {
            out.push(pts[lo.max(hi)]);
        }
        i = j;
    }
    out
}

/// Lines over the run's time axis, each round's end marked and its warm-up shaded. A line
/// named `total` is drawn black and thicker.
fn time_chart(caption: &str, y_desc: &str, lines: &[Line], bands: &[Band], xmax: f64) -> String {
    let ymax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(0.1, f64::max)
        * 1.15;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(y_desc)
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (start, warm_end, end) in bands {
            if warm_end > start {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(*start, 0.0), (*warm_end, ymax)],
                    RGBColor(255, 230, 180).mix(0.6).filled(),
                )))?;
            }
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(*end, 0.0), (*end, ymax)],
                BLACK.mix(0.3),
            )))?;
        }
        for (i, (name, pts)) in lines.iter().enumerate() {
            let (c, width) = match name.as_str() {
                "total" => (BLACK, 2),
                n if super::model::is_sum(n) => (color(i), 2),
                _ => (color(i), 1),
            };
            chart
                .draw_series(LineSeries::new(thin(pts, COLUMNS), c.stroke_width(width)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// Successful operations per second over the run, rounds one after another, warm-up
/// shaded, one line per operation (the eight busiest) and the total.
pub(crate) fn throughput(r: &Report) -> String {
    let mut names: Vec<String> = busiest(&r.summary.ops, 8)
        .iter()
        .map(|o| o.op.clone())
        .collect();
    names.extend(r.summary.sums().iter().map(|o| o.op.clone()));
    let (lines, bands, xmax) = rounds_in_sequence(r, &names, |round, name| {
        let op = round
            .sum(name)
            .or_else(|| round.ops.iter().find(|o| o.op == name));
        op.map(|op| {
            let counts: Vec<u64> = op.timeline.iter().map(|b| b.successes).collect();
            super::axis::rates(round, &counts)
        })
        .unwrap_or_default()
    });
    time_chart(
        "throughput over time (successes per second; warm-up shaded; rounds in sequence)",
        "ops/s",
        &lines,
        &bands,
        xmax,
    )
}

/// p50, p90, p99 and p99.9 per operation, on a log scale.
pub(crate) fn latency(r: &Report) -> String {
    let ops: Vec<&OpReport> = busiest(&r.summary.ops, 12)
        .into_iter()
        .filter(|o| o.successes > 0)
        .collect();
    type Pick = fn(&OpReport) -> f64;
    let pcts: [(&str, Pick); 4] = [
        ("p50", |o| o.latency_ms.p50),
        ("p90", |o| o.latency_ms.p90),
        ("p99", |o| o.latency_ms.p99),
        ("p99.9", |o| o.latency_ms.p999),
    ];
    let vmax = ops.iter().map(|o| o.latency_ms.p999).fold(0.01, f64::max) * 2.0;
    let vmin = ops
        .iter()
        .map(|o| o.latency_ms.p50)
        .fold(f64::MAX, f64::min)
        .clamp(0.001, 1.0)
        / 2.0;
    let n = ops.len().max(1) as f64;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "latency percentiles per operation (ms, log scale, successes only)",
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(70)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..n, (vmin..vmax).log_scale())?;
        let labels: Vec<String> = ops.iter().map(|o| o.op.clone()).collect();
        chart
            .configure_mesh()
            .x_labels(2 * ops.len() + 1)
            .x_label_formatter(&|x| centred_label(&labels, *x))
            .x_label_style(
                ("sans-serif", 10)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .y_desc("ms")
            .disable_x_mesh()
            .draw()?;
        for (k, (name, f)) in pcts.iter().enumerate() {
            let c = color(k);
            chart
                .draw_series(ops.iter().enumerate().map(|(i, o)| {
                    let x0 = i as f64 + 0.1 + k as f64 * 0.2;
                    Rectangle::new([(x0, vmin), (x0 + 0.18, f(o).max(vmin))], c.filled())
                }))?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// The latency percentile spectrum, as HdrHistogram plots it: latency (log) against
/// 1/(1−q) (log), so the median, the 99th and the 99.99th percentile each get room. One
/// line per operation (the six busiest) and the total, from the merged histograms.
pub(crate) fn spectrum(r: &Report) -> String {
    let ops = busiest(&r.summary.ops, 6);
    let lines: Vec<ColoredLine> = ops
        .into_iter()
        .chain(r.summary.sums())
        .enumerate()
        .filter_map(|(i, o)| {
            let c = if o.op == "total" { BLACK } else { color(i) };
            spectrum_points(&o.histogram).map(|pts| (o.op.clone(), pts, c))
        })
        .collect();
    if lines.is_empty() {
        return "<p class=\"note\">no successful operation: no latency spectrum</p>".into();
    }
    spectrum_chart(
        "latency by percentile (ms, log; x: 1/(1−q): 2 = p50, 100 = p99, 10,000 = p99.99)",
        &lines,
    )
}

/// A named line with its colour.
type ColoredLine = (String, Vec<(f64, f64)>, RGBColor);

/// An encoded histogram's latency (ms) at each spectrum quantile its count supports, as
/// (1/(1−q), ms); `None` when it holds no success.
fn spectrum_points(encoded: &str) -> Option<Vec<(f64, f64)>> {
    let h = super::model::decode_histogram(encoded)?;
    if h.is_empty() {
        return None;
    }
    // Quantiles up to what the sample count can support.
    let max_q = 1.0 - 1.0 / h.len().max(2) as f64;
    let pts: Vec<(f64, f64)> = SPECTRUM_QUANTILES
        .iter()
        .copied()
        .filter(|q| *q <= max_q)
        .map(|q| {
            (
                1.0 / (1.0 - q),
                (h.value_at_quantile(q) as f64 / 1000.0).max(0.001),
            )
        })
        .collect();
    (!pts.is_empty()).then_some(pts)
}

/// Lines of latency against 1/(1−q), both axes logarithmic.
fn spectrum_chart(caption: &str, lines: &[ColoredLine]) -> String {
    let ys = || lines.iter().flat_map(|(_, p, _)| p.iter().map(|(_, y)| *y));
    let xmax = lines
        .iter()
        .flat_map(|(_, p, _)| p.iter().map(|(x, _)| *x))
        .fold(10.0, f64::max);
    let ymax = ys().fold(0.01, f64::max) * 2.0;
    let ymin = ys().fold(f64::MAX, f64::min).clamp(0.001, 1.0) / 2.0;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(55)
            .build_cartesian_2d((1f64..xmax).log_scale(), (ymin..ymax).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("1/(1−q)")
            .y_desc("ms")
            .x_label_formatter(&|x| percentile_label(*x))
            .draw()?;
        for (name, pts, c) in lines {
            let c = *c;
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// Per operation (the total and the busiest three), every run's latency by percentile on
/// one chart: where two runs part (at p50, or only past p99) shows, as bars cannot.
pub(crate) fn compare_spectra(c: &Comparison) -> Vec<(String, String)> {
    let mut rows: Vec<&super::compare::Row> = c
        .rows
        .iter()
        .filter(|r| !super::model::is_sum(&r.op))
        .collect();
    let requests = |r: &super::compare::Row| {
        r.cells
            .first()
            .and_then(|x| x.as_ref())
            .map_or(0.0, |x| x.ops_per_sec)
    };
    rows.sort_by(|a, b| requests(b).total_cmp(&requests(a)));
    rows.truncate(3);
    let total = c.rows.iter().filter(|r| super::model::is_sum(&r.op));
    total
        .chain(rows)
        .filter_map(|row| {
            let lines: Vec<ColoredLine> = row
                .cells
                .iter()
                .zip(&c.runs)
                .enumerate()
                .filter_map(|(i, (cell, run))| {
                    let pts = spectrum_points(&cell.as_ref()?.histogram)?;
                    Some((run.clone(), pts, if i == 0 { BLACK } else { color(i) }))
                })
                .collect();
            (lines.len() > 1).then(|| {
                let caption = format!(
                    "{}: latency by percentile per run (ms, log; 2 = p50, 100 = p99)",
                    row.op
                );
                (row.op.clone(), spectrum_chart(&caption, &lines))
            })
        })
        .collect()
}

/// Quantiles drawn in the spectrum: dense where the tail bends.
const SPECTRUM_QUANTILES: [f64; 16] = [
    0.0, 0.25, 0.5, 0.75, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995,
    0.99999, 0.999999,
];

/// The percentile an x of the spectrum stands for, e.g. 100 → "p99".
fn percentile_label(x: f64) -> String {
    if x <= 1.0 {
        return "p0".into();
    }
    let q = (1.0 - 1.0 / x) * 100.0;
    let text = format!("{q:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

/// The watched server processes' CPU per second, on the throughput chart's time axis
/// (rounds in sequence), in cores.
pub(crate) fn server(r: &Report) -> Option<String> {
    let names: Vec<String> = r.summary.server.iter().map(|p| p.process.clone()).collect();
    if names.is_empty() {
        return None;
    }
    let (lines, bands, xmax) = rounds_in_sequence(r, &names, |round, name| {
        round
            .server
            .iter()
            .find(|p| p.process == name)
            .map(|p| {
                p.cpu_percent
                    .iter()
                    .enumerate()
                    .map(|(i, pct)| (i as f64 + 1.0, pct / 100.0))
                    .collect()
            })
            .unwrap_or_default()
    });
    Some(time_chart(
        "server CPU over time (cores; rounds in sequence, as the throughput chart)",
        "cores",
        &lines,
        &bands,
        xmax,
    ))
}

/// A chart of the rounds' per-second figures: one line per name, `pick` giving a second's
/// value for it (`None` leaves the second out), a count per second when `counts`; `empty`
/// when no line has a point.
fn per_second_chart(
    r: &Report,
    names: &[String],
    pick: impl Fn(&PerSecond, &str) -> Option<f64>,
    counts: bool,
    (caption, unit): (&str, &str),
    empty: &str,
) -> String {
    let (lines, bands, xmax) = rounds_in_sequence(r, names, |round, name| {
        round
            .per_second
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                // A count in a partly covered second is a rate over the part covered;
                // a level (latency, users) is as read, drawn mid-part.
                let (x, scale) = super::axis::per_second(round, i, 1);
                pick(s, name).map(|v| (x, if counts { v * scale } else { v }))
            })
            .collect()
    });
    if lines.iter().all(|(_, p)| p.is_empty()) {
        return format!("<p class=\"note\" data-empty=\"1\">{empty}</p>");
    }
    time_chart(caption, unit, &lines, &bands, xmax)
}

/// p50 and p99 of all operations, second by second (by the second each operation
/// started), on the throughput chart's time axis.
pub(crate) fn latency_over_time(r: &Report) -> String {
    per_second_chart(
        r,
        &["p50".into(), "p99".into()],
        |s, name| if name == "p50" { s.p50_ms } else { s.p99_ms },
        false,
        (
            "latency over time (ms, all operations, by the second they started; rounds in sequence)",
            "ms",
        ),
        "no per-second latency in this report",
    )
}

/// Failures per second by error class; a note when nothing failed.
pub(crate) fn errors_over_time(r: &Report) -> String {
    let mut names: Vec<String> = Vec::new();
    for s in r.rounds.iter().flat_map(|round| &round.per_second) {
        for k in s.errors.keys() {
            if !names.iter().any(|n| n == k.name()) {
                names.push(k.name().to_string());
            }
        }
    }
    per_second_chart(
        r,
        &names,
        |s, name| {
            let n = s.errors.iter().find(|(k, _)| k.name() == name);
            Some(n.map_or(0, |(_, n)| *n) as f64)
        },
        true,
        (
            "failures over time by class (per second; rounds in sequence)",
            "failures/s",
        ),
        "no failures over time: nothing failed",
    )
}

/// The heat map's cells: (x from, x to, row, share of its column's successes). A column
/// is `width` seconds of one round (one second, unless the run is longer than the chart
/// has columns), as wide as the part of it the round covered.
fn heat_cells(r: &Report, bands: &[Band], width: f64) -> Vec<(f64, f64, usize, f64)> {
    let mut cells = Vec::new();
    for (round, &(offset, _, end)) in r.rounds.iter().zip(bands) {
        // (column, x from, x to, successes per row), in order.
        let mut columns: Vec<(u64, f64, f64, Vec<u64>)> = Vec::new();
        for (i, s) in round.per_second.iter().enumerate() {
            if s.latency_heat.iter().all(|&c| c == 0) {
                continue;
            }
            let x0 = offset + i as f64;
            // A second past the round's end is off the chart (a report's timelines and
            // per-second entries that disagree): no cells drawn where nothing is seen.
            if x0 >= end {
                break;
            }
            let x1 = (x0 + 1.0).min(end).max(x0 + 0.001);
            let col = (x0 / width) as u64;
            if columns.last().is_none_or(|c| c.0 != col) {
                columns.push((col, x0, x1, Vec::new()));
            }
            if let Some(c) = columns.last_mut() {
                c.2 = x1;
                if c.3.len() < s.latency_heat.len() {
                    c.3.resize(s.latency_heat.len(), 0);
                }
                for (a, &n) in c.3.iter_mut().zip(&s.latency_heat) {
                    *a += u64::from(n);
                }
            }
        }
        for (_, x0, x1, counts) in columns {
            let n: u64 = counts.iter().sum();
            for (row, &c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                cells.push((x0, x1, row, c as f64 / n as f64));
            }
        }
    }
    cells
}

/// Latency over time as a heat map: a column per second of the run (rounds in sequence),
/// a row per latency band of `metrics::HEAT_BOUNDS_US` on a log scale, each cell as dark as
/// the share of that second's successes in that band. Two modes (a cache and a disk, a
/// collector's pauses) show as two bands, where percentiles would average them away.
pub(crate) fn latency_heat(r: &Report) -> String {
    use crate::metrics::HEAT_BOUNDS_US;
    let (bands, xmax) = super::axis::bands(r);
    let cells = heat_cells(r, &bands, (xmax / COLUMNS as f64).ceil().max(1.0));
    if cells.is_empty() {
        return "<p class=\"note\" data-empty=\"1\">no per-second latency bands in this report</p>"
            .into();
    }
    let rows = HEAT_BOUNDS_US.len() + 1;
    let (lo, hi) = cells
        .iter()
        .fold((rows, 0), |(lo, hi), c| (lo.min(c.2), hi.max(c.2)));
    let label = |row: usize| match row {
        r if r < HEAT_BOUNDS_US.len() => ms_label(HEAT_BOUNDS_US[r]),
        _ => format!("> {}", ms_label(HEAT_BOUNDS_US[HEAT_BOUNDS_US.len() - 1])),
    };
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "latency heat map (share of each second's successes per latency band; rounds in sequence)",
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, (lo as f64)..(hi as f64 + 1.0))?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("latency up to")
            .y_labels(hi - lo + 2)
            .y_label_formatter(&|y| {
                // A row's label sits at its upper edge.
                match (y.fract().abs() < 1e-9, *y as usize) {
                    (true, r) if r > 0 => label(r - 1),
                    _ => String::new(),
                }
            })
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        chart.draw_series(cells.iter().map(|&(x0, x1, row, share)| {
            // White to dark blue, by share: a band with a tenth of the second is clearly
            // there, one with all of it is darkest.
            let t = share.sqrt();
            let c = RGBColor(
                (255.0 - 215.0 * t) as u8,
                (255.0 - 165.0 * t) as u8,
                (255.0 - 75.0 * t) as u8,
            );
            Rectangle::new([(x0, row as f64), (x1, row as f64 + 1.0)], c.filled())
        }))?;
        for (_, _, end) in &bands {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(*end, lo as f64), (*end, hi as f64 + 1.0)],
                BLACK.mix(0.3),
            )))?;
        }
        root.present()?;
        Ok(())
    })
}

/// A latency bound in µs as a label in ms: "0.01 ms", "2 ms", "5000 ms".
fn ms_label(us: u64) -> String {
    let ms = us as f64 / 1000.0;
    match ms {
        m if m < 1.0 => format!("{m} ms"),
        m => format!("{m:.0} ms"),
    }
}

/// Active users (at each second's end) and operations in flight (the second's mean) over
/// time: the load the server was under.
pub(crate) fn concurrency(r: &Report) -> String {
    per_second_chart(
        r,
        &["active users".into(), "in flight".into()],
        |s, name| {
            if name == "in flight" {
                Some(s.in_flight)
            } else {
                s.users.map(|u| u as f64)
            }
        },
        false,
        (
            "active users and operations in flight (per second; rounds in sequence)",
            "count",
        ),
        "no per-second figures in this report",
    )
}

/// At most this many scraped series get a chart of their own.
const MAX_SERIES_CHARTS: usize = 8;

/// Each scraped series over time (counters as rates per second, gauges as read), one
/// chart per series, on the throughput chart's time axis: (series, chart).
pub(crate) fn scraped(r: &Report) -> Vec<(String, String)> {
    r.summary
        .metrics
        .iter()
        .take(MAX_SERIES_CHARTS)
        .map(|m| {
            let name = vec![m.series.clone()];
            let (lines, bands, xmax) = rounds_in_sequence(r, &name, |round, _| {
                round
                    .metrics
                    .iter()
                    .find(|x| x.series == m.series && x.url == m.url)
                    .map(|x| {
                        x.values
                            .iter()
                            .enumerate()
                            .map(|(i, v)| (i as f64 + 1.0, *v))
                            .collect()
                    })
                    .unwrap_or_default()
            });
            let what = if m.kind == "counter" {
                "per second"
            } else {
                "as read"
            };
            let caption = format!("{} ({what}; rounds in sequence)", m.series);
            (
                m.series.clone(),
                time_chart(&caption, what, &lines, &bands, xmax),
            )
        })
        .collect()
}

/// Total ops/s of each round, with the mean and its 95 % confidence interval.
pub(crate) fn rounds(r: &Report) -> String {
    let a = r.summary.headline().across_rounds.clone();
    let pts: Vec<(f64, f64)> = r
        .rounds
        .iter()
        .map(|x| (x.index as f64, x.headline().ops_per_sec))
        .collect();
    let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25;
    let xmax = r.rounds.len() as f64 + 1.0;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "ops/s per round, mean and 95 % confidence interval",
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("round")
            .y_desc("ops/s")
            .x_labels(r.rounds.len() + 2)
            .draw()?;
        if let Some(a) = &a {
            if let Some([lo, hi]) = a.ops_per_sec_ci95 {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, lo.max(0.0)), (xmax, hi)],
                        RGBColor(120, 160, 230).mix(0.25).filled(),
                    )))?
                    .label("95 % CI of the mean")
                    .legend(|(x, y)| {
                        Rectangle::new(
                            [(x, y - 5), (x + 10, y + 5)],
                            RGBColor(120, 160, 230).mix(0.4).filled(),
                        )
                    });
            }
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, a.ops_per_sec_mean), (xmax, a.ops_per_sec_mean)],
                    BLUE.stroke_width(2),
                )))?
                .label(format!("mean {:.1}", a.ops_per_sec_mean))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE.stroke_width(2)));
        }
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 5, BLACK.filled())))?
            .label("round")
            .legend(|(x, y)| Circle::new((x + 5, y), 4, BLACK.filled()));
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// Failures by class per operation (stacked bars); a note when nothing failed.
pub(crate) fn errors(r: &Report) -> String {
    let failing: Vec<&OpReport> = r.summary.ops.iter().filter(|o| o.failures > 0).collect();
    if failing.is_empty() {
        return "<p class=\"note\" data-empty=\"1\">no failures</p>".into();
    }
    let classes = ["connect", "timeout", "reset", "status", "body"];
    let ymax = failing.iter().map(|o| o.failures).max().unwrap_or(1) as f64 * 1.2;
    let n = failing.len() as f64;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("failures by class per operation", ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(70)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..n, 0f64..ymax)?;
        let labels: Vec<String> = failing.iter().map(|o| o.op.clone()).collect();
        chart
            .configure_mesh()
            .x_labels(2 * failing.len() + 1)
            .x_label_formatter(&|x| centred_label(&labels, *x))
            .x_label_style(
                ("sans-serif", 10)
                    .into_font()
                    .transform(FontTransform::Rotate90),
            )
            .disable_x_mesh()
            .draw()?;
        for (k, class) in classes.iter().enumerate() {
            let c = color(k + 3);
            chart
                .draw_series(failing.iter().enumerate().map(|(i, o)| {
                    let below: u64 = classes[..k]
                        .iter()
                        .map(|c| o.errors.get(*c).copied().unwrap_or(0))
                        .sum();
                    let mine = o.errors.get(*class).copied().unwrap_or(0);
                    Rectangle::new(
                        [
                            (i as f64 + 0.2, below as f64),
                            (i as f64 + 0.8, (below + mine) as f64),
                        ],
                        c.filled(),
                    )
                }))?
                .label(*class)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// The operations a throughput comparison draws (each but the total that some run
/// measured), and the axis's end: the highest bar or interval, with room above it.
fn throughput_rows(c: &Comparison) -> (Vec<&super::compare::Row>, f64) {
    let rows: Vec<_> = c
        .rows
        .iter()
        .filter(|r| {
            !super::model::is_sum(&r.op) && r.cells.iter().flatten().any(|x| x.ops_per_sec > 0.0)
        })
        .collect();
    let ymax = rows
        .iter()
        .flat_map(|r| {
            r.cells
                .iter()
                .flatten()
                .map(|x| x.ci95.map_or(x.ops_per_sec, |ci| ci[1]))
        })
        .fold(1.0, f64::max)
        * 1.15;
    (rows, ymax)
}

/// Room down a chart's side for the longest of `labels`, in pixels (8 to 40 characters).
fn label_width(labels: &[String]) -> u32 {
    labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 40) as u32
        * 7
        + 10
}

/// Side by side: each run's ops/s per operation with its 95 % CI.
pub(crate) fn compare_throughput(c: &Comparison) -> String {
    let (rows, ymax) = throughput_rows(c);
    let n = rows.len().max(1) as f64;
    let k = c.runs.len().max(1) as f64;
    let labels: Vec<String> = rows.iter().map(|r| r.op.clone()).collect();
    // Operations down the side with their names written level (bars run across), so no
    // label crosses a bar however many operations or runs there are. The first operation
    // is at the top.
    let label_width = label_width(&labels);
    let height = (H as f64).max(60.0 + n * (14.0 * k + 10.0)) as u32;
    let flip = |i: usize| n - 1.0 - i as f64;
    let mut out = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut out, (W, height)).into_drawing_area();
        (|| -> Result<(), Box<dyn std::error::Error + '_>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    "ops/s per operation, each run with its 95 % CI",
                    ("sans-serif", 15),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(label_width)
                .build_cartesian_2d(0f64..ymax, 0f64..n)?;
            chart
                .configure_mesh()
                .y_labels(2 * rows.len() + 1)
                .y_label_formatter(&|y| {
                    // Row i is drawn at n - 1 - i: name the rows back in table order.
                    centred_label(&labels, n - 1.0 - y.floor() + y.fract())
                })
                .y_label_style(("sans-serif", 11))
                .x_desc("ops/s")
                .disable_y_mesh()
                .draw()?;
            for (j, name) in c.runs.iter().enumerate() {
                let col = color(j);
                let h = 0.8 / k;
                let cells: Vec<(f64, f64, Option<[f64; 2]>)> = rows
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| {
                        r.cells[j]
                            .as_ref()
                            .map(|x| (flip(i) + 0.9 - (j as f64 + 1.0) * h, x.ops_per_sec, x.ci95))
                    })
                    .collect();
                chart
                    .draw_series(cells.iter().map(|(y0, v, _)| {
                        Rectangle::new([(0.0, *y0), (*v, *y0 + h * 0.9)], col.filled())
                    }))?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], col.filled())
                    });
                chart.draw_series(cells.iter().filter_map(|(y0, v, ci)| {
                    ci.map(|[lo, hi]| {
                        ErrorBar::new_horizontal(
                            *y0 + h * 0.45,
                            lo.max(0.0),
                            *v,
                            hi,
                            BLACK.stroke_width(1),
                            6,
                        )
                    })
                }))?;
            }
            legend(&mut chart)?;
            root.present()?;
            Ok(())
        })()
        .map_err(|e| e.to_string())
    };
    match res {
        Ok(()) => out,
        Err(e) => format!(
            "<p class=\"note\">chart not drawn: {}</p>",
            crate::formats::xml::esc(&e)
        ),
    }
}

/// Each run's total successes per second (or p99 per second), rounds laid end to end: a
/// run that warmed up, stalled or degraded shows its shape beside the others.
pub(crate) fn compare_over_time(c: &Comparison, p99: bool) -> String {
    let lines: Vec<Line> = c
        .runs
        .iter()
        .zip(&c.over_time)
        .map(|(name, t)| {
            let pts = if p99 { &t.p99_ms } else { &t.successes };
            (name.clone(), pts.clone())
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return "<p class=\"note\">no per-second figures in these reports</p>".into();
    }
    let xmax = c.over_time.iter().map(|t| t.length_s).fold(0.0, f64::max);
    let (caption, unit) = if p99 {
        (
            "p99 latency over time per run (ms, all operations; rounds in sequence)",
            "ms",
        )
    } else {
        (
            "throughput over time per run (successes per second; rounds in sequence)",
            "ops/s",
        )
    };
    time_chart(caption, unit, &lines, &[], xmax)
}

/// A scaling chart for sweeps: one line per target of `value(point)` against the swept
/// value, and a thin line per fitted curve (`fitted`, the model's value at each point);
/// `knees`, per line, the point marked as its knee (one the sweep could tell).
pub(crate) fn scaling(
    title: &str,
    y_desc: &str,
    xs: &[String],
    lines: &[(String, Vec<Option<f64>>)],
    knees: &[Option<usize>],
    fitted: &[(String, Vec<Option<f64>>)],
) -> String {
    let n = xs.len().max(1) as f64;
    let ymax = lines
        .iter()
        .chain(fitted)
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .fold(1e-9, f64::max)
        * 1.15;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_labels(xs.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    xs.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_desc)
            .disable_x_mesh()
            .draw()?;
        for (j, (name, vals)) in lines.iter().enumerate() {
            let col = color(j);
            let pts: Vec<(f64, f64)> = vals
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, col.filled())))?;
            let knee = knees.get(j).copied().flatten();
            if let Some(k) = knee.and_then(|k| vals[k].map(|v| (k, v))) {
                let at = (k.0 as f64, k.1);
                chart.draw_series(std::iter::once(Circle::new(at, 9, col.stroke_width(2))))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!("knee: {}", xs.get(k.0).map_or("", String::as_str)),
                    (at.0, at.1 * 0.9),
                    ("sans-serif", 12),
                )))?;
            }
        }
        for (j, (name, vals)) in fitted.iter().enumerate() {
            let col = color(j).mix(0.6);
            let pts: Vec<(f64, f64)> = vals
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts, col.stroke_width(1)))?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], col));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

/// A line on a sweep's chart: its name and its value at each swept point, where it has one.
pub(crate) type PointSeries = (String, Vec<Option<f64>>);

/// One target's steps on a chart against the offered rate: its name, and per step the
/// rate, the figure, and whether the step kept the service level.
pub(crate) type RateSeries = (String, Vec<(f64, f64, bool)>);

/// A capacity search's chart: one figure (p99, errors) against the offered rate, a line
/// and a point per step of each target (filled where the step kept the service level,
/// a cross where it did not), the rate on a log axis, and the level's bound drawn across.
pub(crate) fn against_rate(
    title: &str,
    y_desc: &str,
    lines: &[RateSeries],
    level: Option<f64>,
) -> String {
    let all = || lines.iter().flat_map(|(_, v)| v.iter());
    let xmin = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let xmax = all().map(|p| p.0).fold(0.0, f64::max);
    let (xmin, xmax) = match xmin.is_finite() && xmin > 0.0 {
        true => (xmin / 1.3, xmax * 1.3),
        false => (0.1, 10.0),
    };
    let ymax = all().map(|p| p.1).chain(level).fold(1e-9, f64::max) * 1.15;
    svg(|root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((xmin..xmax).log_scale(), 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("offered sessions/s (log scale)")
            .y_desc(y_desc)
            .draw()?;
        if let Some(b) = level {
            chart
                .draw_series(LineSeries::new(
                    vec![(xmin, b), (xmax, b)],
                    RED.mix(0.7).stroke_width(2),
                ))?
                .label("service level")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED.stroke_width(2)));
        }
        for (j, (name, pts)) in lines.iter().enumerate() {
            let col = color(j);
            let mut sorted = pts.clone();
            sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(
                    sorted.iter().map(|p| (p.0, p.1)),
                    col.mix(0.5).stroke_width(1),
                ))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2))
                });
            chart.draw_series(
                pts.iter()
                    .filter(|p| p.2)
                    .map(|p| Circle::new((p.0, p.1), 4, col.filled())),
            )?;
            chart.draw_series(
                pts.iter()
                    .filter(|p| !p.2)
                    .map(|p| Cross::new((p.0, p.1), 5, col.stroke_width(2))),
            )?;
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_days_of_seconds_draws_a_page_of_the_charts_width() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        let mut r = crate::report::load(&path).unwrap();
        let n = 200_000;
        let second = PerSecond {
            p50_ms: Some(1.5),
            p99_ms: Some(9.0),
            in_flight: 2.0,
            users: Some(15),
            latency_heat: vec![3, 1, 0, 0, 2],
            ..PerSecond::default()
        };
        r.rounds.truncate(1);
        r.rounds[0].per_second = vec![second; n];
        r.rounds[0].elapsed_s = n as f64;
        r.rounds[0].total.timeline = vec![crate::metrics::TimelineBucket::default(); n];
        let (bands, xmax) = super::super::axis::bands(&r);
        let cells = heat_cells(&r, &bands, (xmax / COLUMNS as f64).ceil());
        // Three bands a column, each the share it has of every second in it.
        assert!(cells.len() <= 3 * (COLUMNS + 1), "{}", cells.len());
        assert!(
            cells
                .iter()
                .any(|c| c.2 == 4 && (c.3 - 2.0 / 6.0).abs() < 1e-9)
        );
        let page = crate::report::html::report(&r);
        assert!(page.len() < 4 << 20, "{} bytes", page.len());
        // A report whose timeline says two seconds but whose per-second entries go on for
        // days draws the two seconds: nothing past the round's end.
        r.rounds[0].elapsed_s = 2.0;
        r.rounds[0].total.timeline.truncate(2);
        let (bands, xmax) = super::super::axis::bands(&r);
        let cells = heat_cells(&r, &bands, (xmax / COLUMNS as f64).ceil());
        assert_eq!(cells.len(), 2 * 3, "{cells:?}");
        let page = crate::report::html::report(&r);
        assert!(page.len() < 4 << 20, "{} bytes", page.len());
    }

    #[test]
    fn a_long_line_keeps_each_columns_lowest_and_highest_point_in_order() {
        let mut pts: Vec<(f64, f64)> = (0..1_000_000).map(|i| (i as f64, (i % 7) as f64)).collect();
        pts[123_456].1 = 1000.0;
        pts[654_321].1 = -5.0;
        let t = thin(&pts, 800);
        assert!(t.len() <= 1600, "{}", t.len());
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0), "in order of x");
        assert!(t.contains(&(123_456.0, 1000.0)) && t.contains(&(654_321.0, -5.0)));
        assert_eq!(t.first(), Some(&(0.0, 0.0)));
        // Short lines are drawn as they are.
        assert_eq!(thin(&pts[..100], 800), pts[..100].to_vec());
        assert!(thin(&[], 800).is_empty());
    }
}
