//! One run's charts: throughput and latency over its rounds, the latency spectrum and
//! heat map, errors and concurrency over time, the server's scraped figures.

use plotters::prelude::*;

use super::{COLUMNS, busiest, centred_label, color, legend, svg, time_chart};
use crate::report::axis::{Band, fault_spans, rounds_in_sequence};
use crate::report::model::{OpReport, PerSecond, Report};

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
            crate::report::axis::rates(round, &counts)
        })
        .unwrap_or_default()
    });
    time_chart(
        "throughput over time (successes per second; warm-up shaded, fault windows red; rounds in sequence)",
        "ops/s",
        &lines,
        &bands,
        &fault_spans(r, &bands),
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
pub(super) type ColoredLine = (String, Vec<(f64, f64)>, RGBColor);

/// An encoded histogram's latency (ms) at each spectrum quantile its count supports, as
/// (1/(1−q), ms); `None` when it holds no success.
pub(super) fn spectrum_points(encoded: &str) -> Option<Vec<(f64, f64)>> {
    let h = crate::report::model::decode_histogram(encoded)?;
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
pub(super) fn spectrum_chart(caption: &str, lines: &[ColoredLine]) -> String {
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

/// Quantiles drawn in the spectrum: dense where the tail bends.
pub(super) const SPECTRUM_QUANTILES: [f64; 16] = [
    0.0, 0.25, 0.5, 0.75, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995,
    0.99999, 0.999999,
];

/// The percentile an x of the spectrum stands for, e.g. 100 → "p99".
pub(super) fn percentile_label(x: f64) -> String {
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
        &fault_spans(r, &bands),
        xmax,
    ))
}

/// A chart of the rounds' per-second figures: one line per name, `pick` giving a second's
/// value for it (`None` leaves the second out), a count per second when `counts`; `empty`
/// when no line has a point.
pub(super) fn per_second_chart(
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
                let (x, scale) = crate::report::axis::per_second(round, i, 1);
                pick(s, name).map(|v| (x, if counts { v * scale } else { v }))
            })
            .collect()
    });
    if lines.iter().all(|(_, p)| p.is_empty()) {
        return format!("<p class=\"note\" data-empty=\"1\">{empty}</p>");
    }
    time_chart(caption, unit, &lines, &bands, &fault_spans(r, &bands), xmax)
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
pub(super) fn heat_cells(r: &Report, bands: &[Band], width: f64) -> Vec<(f64, f64, usize, f64)> {
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
    let (bands, xmax) = crate::report::axis::bands(r);
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
        // Fault windows framed in red, over the cells they cost.
        for (from, to) in fault_spans(r, &bands) {
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (from, lo as f64),
                    (to.max(from + xmax / 400.0), hi as f64 + 1.0),
                ],
                RGBColor(200, 40, 40).stroke_width(2),
            )))?;
        }
        root.present()?;
        Ok(())
    })
}

/// A latency bound in µs as a label in ms: "0.01 ms", "2 ms", "5000 ms".
pub(super) fn ms_label(us: u64) -> String {
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
pub(super) const MAX_SERIES_CHARTS: usize = 8;

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
                time_chart(
                    &caption,
                    what,
                    &lines,
                    &bands,
                    &fault_spans(r, &bands),
                    xmax,
                ),
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
