//! Charts that set runs side by side: throughput, latency spectra and time series of
//! compared targets, a sweep's scaling, and figures against the offered rate.

use plotters::prelude::*;

use super::single::{ColoredLine, spectrum_chart, spectrum_points};
use super::{H, W, centred_label, color, legend, svg, time_chart};
use crate::report::axis::Line;
use crate::report::compare::Comparison;

/// Per operation (the total and the busiest three), every run's latency by percentile on
/// one chart: where two runs part (at p50, or only past p99) shows, as bars cannot.
pub(crate) fn compare_spectra(c: &Comparison) -> Vec<(String, String)> {
    let mut rows: Vec<&crate::report::compare::Row> = c
        .rows
        .iter()
        .filter(|r| !crate::report::model::is_sum(&r.op))
        .collect();
    let requests = |r: &crate::report::compare::Row| {
        r.cells
            .first()
            .and_then(|x| x.as_ref())
            .map_or(0.0, |x| x.ops_per_sec)
    };
    rows.sort_by(|a, b| requests(b).total_cmp(&requests(a)));
    rows.truncate(3);
    let total = c
        .rows
        .iter()
        .filter(|r| crate::report::model::is_sum(&r.op));
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

/// The operations a throughput comparison draws (each but the total that some run
/// measured), and the axis's end: the highest bar or interval, with room above it.
pub(super) fn throughput_rows(c: &Comparison) -> (Vec<&crate::report::compare::Row>, f64) {
    let rows: Vec<_> = c
        .rows
        .iter()
        .filter(|r| {
            !crate::report::model::is_sum(&r.op)
                && r.cells.iter().flatten().any(|x| x.ops_per_sec > 0.0)
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
pub(super) fn label_width(labels: &[String]) -> u32 {
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
    // Each run's fault windows, shaded alike: a comparison of recoveries lines them up.
    let faults: Vec<(f64, f64)> = c.over_time.iter().flat_map(|t| t.faults.clone()).collect();
    time_chart(caption, unit, &lines, &[], &faults, xmax)
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
