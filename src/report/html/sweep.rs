//! The pages of a sweep (each point's figures and the fitted scalability models) and of a
//! capacity search (its steps, verdicts and answer).

use std::fmt::Write;

use super::compared::compare_table;
use super::{figure, page};
use crate::formats::xml::esc;
use crate::report::charts;
use crate::report::compare::Comparison;

/// What a sweep's page draws beside its points: each target's fitted curve, the fits in
/// words, and each target's knee where the sweep could tell one.
pub struct SweepModels<'a> {
    /// Per fitted target, the model's value at each point.
    pub fitted: &'a [charts::PointSeries],
    /// The fits in words, a paragraph each.
    pub notes: &'a [String],
    /// Per target, the point marked as its knee.
    pub knees: &'a [Option<usize>],
}

/// The page of a sweep: scaling charts and table, then each point's comparison.
pub fn sweep(
    title: &str,
    key: &str,
    points: &[String],
    targets: &[String],
    table: &[Vec<Option<(f64, f64)>>],
    comparisons: &[(String, Comparison)],
    models: SweepModels<'_>,
) -> String {
    let SweepModels {
        fitted,
        notes,
        knees,
    } = models;
    let mut b = format!(
        "<h1>{}</h1><p>sweep of <code>{}</code> over {}</p>",
        esc(title),
        esc(key),
        esc(&points.join(", "))
    );
    for n in notes {
        let _ = write!(b, "<p>{}</p>", esc(n));
    }
    let lines = |pick: fn(&(f64, f64)) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
        targets
            .iter()
            .enumerate()
            .map(|(t, name)| {
                (
                    name.clone(),
                    table.iter().map(|row| row[t].as_ref().map(pick)).collect(),
                )
            })
            .collect()
    };
    b.push_str(&figure(
        "sweep-throughput",
        charts::scaling(
            "total ops/s against the swept value",
            "ops/s",
            points,
            &lines(|x| x.0),
            knees,
            fitted,
        ),
    ));
    b.push_str(&figure(
        "sweep-p99",
        charts::scaling(
            "total p99 latency (ms) against the swept value",
            "p99 ms",
            points,
            &lines(|x| x.1),
            &[],
            &[],
        ),
    ));
    b.push_str("<table><tr><th>value</th>");
    for t in targets {
        let _ = write!(b, "<th>{0} ops/s</th><th>{0} p99 ms</th>", esc(t));
    }
    b.push_str("</tr>");
    for (i, p) in points.iter().enumerate() {
        let _ = write!(b, "<tr><td>{}</td>", esc(p));
        for cell in &table[i] {
            match cell {
                Some((ops, p99)) => {
                    let _ = write!(b, "<td>{ops:.1}</td><td>{p99:.2}</td>");
                }
                None => b.push_str("<td>-</td><td>-</td>"),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</table>");
    for (point, c) in comparisons {
        let _ = write!(b, "<h2>{}</h2>", esc(point));
        b.push_str(&compare_table(c));
    }
    page(title, &b)
}

/// A capacity search's page: the answer per target and against the first in words
/// (`intro`), its charts, and each target's steps as a table under `header`.
pub(crate) fn capacity(
    title: &str,
    intro: &[String],
    charts: Vec<(&str, String)>,
    header: &[&str],
    steps: &[(String, Vec<Vec<String>>)],
) -> String {
    let mut b = format!("<h1>{}</h1>", esc(title));
    for p in intro {
        let _ = write!(b, "<p>{}</p>", esc(p));
    }
    for (kind, svg) in charts {
        b.push_str(&figure(kind, svg));
    }
    for (target, rows) in steps {
        let _ = write!(b, "<h2>{}</h2><table><tr>", esc(target));
        for h in header {
            let _ = write!(b, "<th>{}</th>", esc(h));
        }
        b.push_str("</tr>");
        for row in rows {
            b.push_str("<tr>");
            for cell in row {
                let _ = write!(b, "<td>{}</td>", esc(cell));
            }
            b.push_str("</tr>");
        }
        b.push_str("</table>");
    }
    page(title, &b)
}
