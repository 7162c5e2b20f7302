//! SVG charts for the HTML pages, drawn with plotters' SVG backend (no fonts or scripts to
//! load, so the page stays self-contained). Each function returns one `<svg>` element.
//! What they share (the canvas, colours, legends, thinning, the time chart) is here;
//! one run's charts are in `single.rs`, charts that set runs side by side in
//! `compared.rs`.

use plotters::prelude::*;

use super::axis::{Band, Line};
use super::model::OpReport;

mod compared;
mod single;

pub(crate) use compared::{
    PointSeries, RateSeries, against_rate, compare_over_time, compare_spectra, compare_throughput,
    scaling,
};
pub(crate) use single::{
    concurrency, errors, errors_over_time, latency, latency_heat, latency_over_time, rounds,
    scraped, server, spectrum, throughput,
};

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

/// Lines over the run's time axis, each round's end marked, its warm-up shaded and its
/// fault windows (`faults`, seconds on the axis) shaded red. A line named `total` is drawn
/// black and thicker.
fn time_chart(
    caption: &str,
    y_desc: &str,
    lines: &[Line],
    bands: &[Band],
    faults: &[(f64, f64)],
    xmax: f64,
) -> String {
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
        for (from, to) in faults {
            // A window too short to see (a kill restarted at once) is a sliver, not nothing.
            let to = to.max(from + xmax / 400.0);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(*from, 0.0), (to, ymax)],
                RGBColor(230, 90, 90).mix(0.25).filled(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::single::heat_cells;
    use crate::report::model::PerSecond;

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
