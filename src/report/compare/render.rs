//! A comparison as a terminal table (wrapped to its width) and as Markdown, with the
//! targets' short names and the rounds' own table.

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::server::{ServerRow, server_value, server_verdict};
use super::{Cell, Comparison, rate, verdict};
use crate::report::power::ALPHA;

/// A run name longer than this is lettered in the console table.
pub(super) const MAX_RUN_NAME: usize = 10;

/// A, B, ..., Z, then R27, R28, ...
pub fn letter(i: usize) -> String {
    match u8::try_from(i).ok().filter(|i| *i < 26) {
        Some(i) => char::from(b'A' + i).to_string(),
        None => format!("R{}", i + 1),
    }
}

/// Console table: one row per operation and run, so it stays as narrow with four runs as
/// with two, and wraps to the terminal's width (100 columns when it has none).
pub fn render_table(c: &Comparison) -> String {
    render_table_at(c, terminal_width())
}

/// The width files are laid out to: wide enough that no cell wraps, as a file is read in
/// an editor or grepped, not in this terminal.
pub const FILE_WIDTH: u16 = 400;

/// The console table laid out to `width` columns.
pub fn render_table_at(c: &Comparison, width: u16) -> String {
    // Long names would wrap every cell of the run column and the "vs" header: the table
    // says A, B, ... and the legend says who they are.
    let lettered = width < 160 && c.runs.iter().any(|n| n.chars().count() > MAX_RUN_NAME);
    let runs: Vec<String> = match lettered {
        false => c.runs.clone(),
        true => (0..c.runs.len()).map(letter).collect(),
    };
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    t.set_header(vec![
        "operation",
        "run",
        "ops/s",
        "p50 ms",
        "p99 ms",
        &format!("vs {}", runs[0]),
        "latency vs",
    ]);
    for row in &c.rows {
        for (i, cell) in row.cells.iter().enumerate() {
            let op = if i == 0 {
                row.op.clone()
            } else {
                String::new()
            };
            let mut cells = vec![op, runs[i].clone()];
            match cell {
                Some(x) => {
                    cells.push(rate(x));
                    cells.push(format!("{:.2}", x.p50_ms));
                    cells.push(format!("{:.2}", x.p99_ms));
                    cells.push(verdict(x));
                    cells.push(latency_verdict(x));
                }
                None => cells.extend(std::iter::repeat_n("-".to_string(), 5)),
            }
            t.add_row(cells);
        }
    }
    for i in 2..t.column_count() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    // "p50 1.00× p99 1.00×" reads as well on two lines; the verdict beside it does not.
    if width < 120
        && let Some(col) = t.column_mut(6)
    {
        col.set_constraint(comfy_table::ColumnConstraint::UpperBoundary(
            comfy_table::Width::Fixed(13),
        ));
    }
    let legend: Vec<String> = c
        .details
        .iter()
        .enumerate()
        .map(|(i, d)| match lettered {
            false => format!("  {}", d.legend()),
            true => format!("  {} = {}", runs[i], d.legend()),
        })
        .collect();
    let warnings: String = c
        .warnings
        .iter()
        .map(|w| wrap(&format!("WARNING: {w}"), width.into(), "  "))
        .collect();
    let power: String = c
        .power
        .iter()
        .map(|w| wrap(&format!("power: {w}"), width.into(), "  "))
        .collect::<String>()
        + &client_timeouts(c, &runs, width);
    format!(
        "comparison of {} runs of {}\n{}\n{t}\n{}{}{power}{}{warnings}",
        c.runs.len(),
        c.workload,
        legend.join("\n"),
        wrap(
            "latency vs: * the rounds' percentiles differ significantly (Holm-corrected), ? one round (not tested)",
            width.into(),
            "  "
        ),
        round_table("server", &c.server, &c.runs, width)
            + &round_table("visibility", &c.visibility, &c.runs, width)
            + &round_table("faults", &c.faults, &c.runs, width),
        wrap(&format!("method: {}", c.method), width.into(), "  ")
    )
}

/// The width tables and prose are laid out to: `$COLUMNS` when the shell exports it (at
/// least 40), else the terminal's, else 100 (a file or a pipe is read in a terminal later).
pub fn terminal_width() -> u16 {
    match std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<u16>().ok())
    {
        Some(w) => w.max(40),
        None => Table::new().width().unwrap_or(100),
    }
}

/// `text` broken between words into lines of at most `width` characters (a word longer
/// than that stands alone), the lines after the first indented by `indent`; ends in a
/// newline.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if len > 0 && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Figures measured per round (the server's cost, visibility), one row per measure and
/// run, tested like ops/s; `what` heads the first column.
pub(super) fn round_table(what: &str, rows: &[ServerRow], runs: &[String], width: u16) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    t.set_header(vec![
        what.to_string(),
        "run".to_string(),
        "mean ± 95 % CI".to_string(),
        format!("vs {}", runs[0]),
    ]);
    for row in rows {
        for (i, cell) in row.cells.iter().enumerate() {
            let what = if i == 0 {
                format!("{} ({})", row.measure, row.unit)
            } else {
                String::new()
            };
            let (value, vs) = match cell {
                Some(x) => (server_value(x), server_verdict(x)),
                None => ("-".into(), "-".into()),
            };
            t.add_row(vec![what, runs[i].clone(), value, vs]);
        }
    }
    if let Some(col) = t.column_mut(2) {
        col.set_cell_alignment(CellAlignment::Right);
    }
    format!("{t}\n")
}

/// p50 and p99 against the baseline: ratios, starred when the rounds' own percentiles
/// differ significantly.
pub fn latency_verdict(c: &Cell) -> String {
    let (p50, p99) = (
        c.p50_p_adjusted.or(c.p50_p_value),
        c.p99_p_adjusted.or(c.p99_p_value),
    );
    let one = |name: &str, ratio: Option<f64>, p: Option<f64>| -> Option<String> {
        let r = ratio?;
        let mark = match p {
            Some(p) if p < ALPHA => "*",
            Some(_) => "",
            None => "?",
        };
        Some(format!("{name} {r:.2}×{mark}"))
    };
    let parts: Vec<String> = [one("p50", c.p50_ratio, p50), one("p99", c.p99_ratio, p99)]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        "baseline".into()
    } else {
        parts.join(" ")
    }
}

/// Names for runs in tables: each at most [`NAME_WIDTH`] characters where that keeps them
/// apart. Words every name shares (`synchronous_commit` in `synchronous_commit-on` and
/// `synchronous_commit-off`) are left out first, then long names are cut in the middle,
/// the same way everywhere. The full names are in the legend.
pub fn short_names(names: &[String]) -> Vec<String> {
    let unique = |v: &[String]| v.iter().collect::<std::collections::HashSet<_>>().len() == v.len();
    if names.iter().all(|n| n.chars().count() <= NAME_WIDTH) || !unique(names) {
        return names.to_vec();
    }
    let words = |n: &str| -> Vec<String> {
        n.split(['-', '_', '.', '=', ',', ' '])
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let all: Vec<Vec<String>> = names.iter().map(|n| words(n)).collect();
    let shared = |w: &String| all.iter().all(|ws| ws.contains(w));
    let distinct: Vec<String> = names
        .iter()
        .zip(&all)
        .map(|(n, ws)| {
            let kept: Vec<&str> = ws
                .iter()
                .filter(|w| !shared(w))
                .map(String::as_str)
                .collect();
            if kept.is_empty() || names.len() < 2 {
                n.clone()
            } else {
                kept.join("-")
            }
        })
        .collect();
    let base = if unique(&distinct) {
        distinct
    } else {
        names.to_vec()
    };
    let cut = |n: &str| -> String {
        let chars: Vec<char> = n.chars().collect();
        if chars.len() <= NAME_WIDTH {
            return n.to_string();
        }
        let head: String = chars[..NAME_WIDTH / 2 - 1].iter().collect();
        let tail: String = chars[chars.len() - (NAME_WIDTH - NAME_WIDTH / 2)..]
            .iter()
            .collect();
        format!("{head}…{tail}")
    };
    let short: Vec<String> = base.iter().map(|n| cut(n)).collect();
    if unique(&short) { short } else { base }
}

/// Longest run name shown in a table.
pub const NAME_WIDTH: usize = 16;

/// For each row where some run's answers came after its clients' `client_timeout`, the
/// share of requests that did, run by run: what the clients the workload models lost.
fn client_timeouts(c: &Comparison, runs: &[String], width: u16) -> String {
    c.rows
        .iter()
        .filter(|r| {
            r.cells
                .iter()
                .flatten()
                .any(|x| x.timed_out_for_client_pct.is_some_and(|p| p > 0.0))
        })
        .map(|r| {
            let each: Vec<String> = r
                .cells
                .iter()
                .zip(runs)
                .map(|(x, run)| match x.as_ref().and_then(|x| x.timed_out_for_client_pct) {
                    Some(p) => format!("{run} {p:.1} %"),
                    None => format!("{run} -"),
                })
                .collect();
            let line = format!(
                "timed out for the client (answers after client_timeout, share of requests): {}: {}",
                r.op,
                each.join(", ")
            );
            wrap(&line, width.into(), "  ")
        })
        .collect()
}

/// Markdown, for pasting into a review.
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!("### {}: {}\n\n", c.workload, c.runs.join(" vs "));
    out.push_str("| operation |");
    for (i, n) in c.runs.iter().enumerate() {
        let _ = write!(out, " {n} ops/s | {n} p99 ms |");
        if i > 0 {
            let _ = write!(out, " vs {} |", c.runs[0]);
        }
    }
    out.push_str("\n|---|");
    for (i, _) in c.runs.iter().enumerate() {
        out.push_str("---:|---:|");
        if i > 0 {
            out.push_str("---|");
        }
    }
    out.push('\n');
    for row in &c.rows {
        let _ = write!(out, "| {} |", row.op);
        for (i, cell) in row.cells.iter().enumerate() {
            match cell {
                Some(x) => {
                    let _ = write!(out, " {} | {:.2} |", rate(x), x.p99_ms);
                    if i > 0 {
                        let _ = write!(out, " {} |", verdict(x));
                    }
                }
                None => out.push_str(if i > 0 { " - | - | - |" } else { " - | - |" }),
            }
        }
        out.push('\n');
    }
    for (what, rows) in [
        ("server", &c.server),
        ("visibility", &c.visibility),
        ("faults", &c.faults),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "\n| {what} | run | mean ± 95 % CI | vs first |\n|---|---|---:|---|\n"
        );
        for row in rows {
            for (i, cell) in row.cells.iter().enumerate() {
                let (value, vs) = match cell {
                    Some(x) => (server_value(x), server_verdict(x)),
                    None => ("-".into(), "-".into()),
                };
                let _ = writeln!(
                    out,
                    "| {} ({}) | {} | {value} | {vs} |",
                    row.measure, row.unit, c.runs[i]
                );
            }
        }
    }
    for w in &c.power {
        let _ = write!(out, "\n{w}.\n");
    }
    let _ = write!(out, "\n_{}_\n", c.method);
    out
}
