//! Where a run's files go and how they are written: the run id, the output folder,
//! JSON through the masked writer, warnings, the comparison of a point's targets.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::targets::NamedTarget;
use super::{Finished, PointResult, RunOptions, StdoutFormat, single_point, sweep};
use crate::report::{self, Report, compare};

/// JSON for stdout; a value that cannot be serialised is said, not printed as nothing.
pub(super) fn json_text<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_string_pretty(v) {
        Ok(j) => j + "\n",
        Err(e) => {
            warn(format!("cannot print the results as JSON: {e}"));
            String::new()
        }
    }
}

/// Write each file's text into `dir` (a text that could not be made is its error); false
/// when any could not be written, each failure said and the rest written.
pub(super) fn write_all<const N: usize>(
    dir: &Path,
    files: [(&str, Result<String, String>); N],
) -> bool {
    let mut ok = true;
    for (f, text) in files {
        let path = dir.join(f);
        let written = text.and_then(|t| report::write_file(&path, &t).map_err(|e| e.to_string()));
        if let Err(e) = written {
            warn(format!("{}: {e}", path.display()));
            ok = false;
        }
    }
    ok
}

/// A non-fatal problem, printed as it happens; the run goes on.
pub(super) fn warn(msg: impl std::fmt::Display) {
    eprintln!("error: {}", crate::secrets::redact(&msg.to_string()));
}

pub(crate) fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:06x}",
        now.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u32>() & 0xff_ffff
    )
}

/// The run's id: `--run-id`; for a shard under `--start-at`, one from that time, which
/// every shard has alike (so they stamp and name alike); else a new one.
pub(super) fn run_id_of(a: &RunOptions) -> String {
    if let Some(id) = &a.run_id {
        return id.clone();
    }
    match (a.shard.is_whole(), a.start_at) {
        (false, Some(at)) => {
            let at: chrono::DateTime<chrono::Utc> = at.into();
            format!("{}-shared", at.format("%Y%m%dT%H%M%SZ"))
        }
        _ => new_run_id(),
    }
}

/// `reports/NAME-RUN`, and a shard's apart from its sisters', which share the run id.
pub(super) fn default_out(name: &str, run_id: &str, shard: crate::engine::shard::Shard) -> String {
    match shard.is_whole() {
        true => format!("{}-{run_id}", safe(name)),
        false => format!("{}-{run_id}-shard{}", safe(name), shard.index),
    }
}

pub(super) fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The targets compared, as text, Markdown, HTML and JSON in `dir`; false when a file
/// could not be written (each is named on stderr).
pub(super) fn write_comparison(dir: &Path, reports: &[(String, Report, PathBuf)]) -> bool {
    let names = compare::short_names(
        &reports
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect::<Vec<_>>(),
    );
    let reps: Vec<Report> = reports.iter().map(|(_, r, _)| r.clone()).collect();
    let Ok(c) = compare::compare(&names, &reps, false) else {
        return true;
    };
    let files = [
        (
            "compare.txt",
            Ok(compare::render_table_at(&c, compare::FILE_WIDTH)),
        ),
        ("compare.md", Ok(compare::render_markdown(&c))),
        ("compare.html", Ok(report::html::comparison(&c))),
        (
            "compare.json",
            serde_json::to_string_pretty(&c).map_err(|e| e.to_string()),
        ),
    ];
    write_all(dir, files)
}

/// Print the figures and write the outputs that span targets or points.
pub(super) fn emit(
    a: &RunOptions,
    out: &Path,
    targets: &[NamedTarget],
    sweep: Option<&(String, Vec<String>)>,
    results: &[PointResult],
) -> Finished {
    let mut done = Finished {
        thresholds_failed: results.iter().any(|p| !p.thresholds_ok),
        write_failed: results.iter().any(|p| p.write_failed),
        interrupted: results.iter().any(|p| p.interrupted)
            || results.len() < sweep.map_or(1, |(_, v)| v.len()),
    };
    let stdout = match sweep {
        None => {
            let Some(p) = results.first() else {
                return done;
            };
            let (text, failed) = single_point(a, p);
            done.write_failed |= failed;
            text
        }
        Some((key, values)) => {
            let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
            let s = sweep::Sweep::new(key, values, &names, results);
            done.write_failed |= !s.write(out, results);
            match a.format {
                StdoutFormat::Table => s.table(),
                StdoutFormat::Json => json_text(&s),
                StdoutFormat::Nothing => String::new(),
            }
        }
    };
    print!("{}", crate::secrets::redact(&stdout));
    let _ = std::io::stdout().flush();
    if !a.quiet {
        eprintln!("reports written to {}", out.display());
    }
    done
}
