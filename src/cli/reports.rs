//! The commands on saved reports: `report` (render a run.json again), `compare` (runs of
//! one workload side by side) and `merge` (a sharded run's shards into one).

use super::{Exit, Format};
use crate::report;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct ReportArgs {
    /// A run.json written by `loadmix run`.
    pub run: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every column of every table, however wide the terminal (report.txt always has
    /// them all).
    #[arg(long)]
    pub wide: bool,
    /// Write the HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the per-round CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(super) enum CompareFormat {
    Table,
    Md,
    Json,
}

#[derive(Debug, Args)]
pub(super) struct MergeArgs {
    /// Every shard's run.json, once each.
    #[arg(required = true, num_args = 1..)]
    pub shards: Vec<PathBuf>,
    /// Write the merged run.json, report.txt and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every column of every table, however wide the terminal (report.txt always has
    /// them all).
    #[arg(long)]
    pub wide: bool,
}

#[derive(Debug, Args)]
pub(super) struct CompareArgs {
    /// Two or more run.json files; the first is the baseline.
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,
    /// Also write an HTML page with side-by-side charts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare runs of different workloads anyway.
    #[arg(long)]
    pub force: bool,
    /// The difference, in percent, to say how many rounds would detect (with the rounds'
    /// spread, at α 0.05 and power 0.8).
    #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = effect_pct)]
    pub effect: f64,
}

/// `--effect`: a percentage above 0 and at most 1,000 (`5` or `5%`).
fn effect_pct(s: &str) -> Result<f64, String> {
    let n = s.trim().trim_end_matches('%').trim();
    match n.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a percentage above 0 and at most 1000, e.g. 5%"
        )),
    }
}

/// `loadmix merge`: check the shards, merge them, judge the thresholds on the merged run
/// (exit 1 as `run` does), write and print it. Nothing is written when a shard is refused.
pub(super) fn merge(a: MergeArgs) -> Exit {
    let mut shards = Vec::new();
    for f in &a.shards {
        match report::load(f) {
            Ok(r) => shards.push(report::merge::ShardReport {
                file: f.display().to_string(),
                report: r,
            }),
            Err(e) => return Exit::Usage.fail(e),
        }
    }
    // The workload is read back from the copy the shards carry: what they say they did
    // is held against it, and the merged run is judged by its rules.
    let workload = shards.first().map(|s| {
        let w = &s.report.workload;
        crate::workload::reload(&w.file, &w.source, &w.overrides)
    });
    if let Some(Err(e)) = &workload {
        eprintln!(
            "warning: the workload the shards carry does not load again here ({e}): \
             their destinations are not held against it, their thresholds not judged"
        );
    }
    let mut r = match report::merge::merge(shards, workload.as_ref().and_then(|w| w.as_ref().ok()))
    {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    let mut passed = true;
    if let Some(Ok(w)) = &workload
        && !r.thresholds.is_empty()
    {
        passed = report::thresholds::evaluate(&w.thresholds, &mut r);
    }
    if let Err(e) = print_report(&r, a.format, a.wide) {
        return e;
    }
    if let Some(dir) = &a.out
        && let Err(e) = report::write_dir(&r, dir)
    {
        return Exit::Write.fail(e);
    }
    if passed { Exit::Ok } else { Exit::Threshold }
}

/// A report on stdout, as a table or as JSON.
pub(super) fn print_report(r: &report::Report, format: Format, wide: bool) -> Result<(), Exit> {
    match format {
        Format::Table => print!(
            "{}",
            report::table::render_for(r, report::table::console_width(wide))
        ),
        Format::Json => match report::to_json(r) {
            Ok(j) => println!("{j}"),
            Err(e) => return Err(Exit::Write.fail(e)),
        },
    }
    Ok(())
}

pub(super) fn show_report(a: ReportArgs) -> Exit {
    let r = match report::load(&a.run) {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    if let Err(e) = print_report(&r, a.format, a.wide) {
        return e;
    }
    let mut code = Exit::Ok;
    if let Some(h) = &a.html
        && let Err(e) = report::write_file(h, &report::html::report(&r))
    {
        code = Exit::Write.fail(e);
    }
    if let Some(c) = &a.csv {
        let written = report::csv::render(&r, true)
            .map_err(|e| e.to_string())
            .and_then(|t| report::write_file(c, &t).map_err(|e| e.to_string()));
        if let Err(e) = written {
            code = Exit::Write.fail(format!("{}: {e}", c.display()));
        }
    }
    code
}

/// `compare` of saved capacity searches (`capacity.json`): each file named by its folder
/// (else a letter), its targets after it.
fn compare_capacities(a: &CompareArgs) -> Exit {
    use crate::run::capacity::output;
    if a.html.is_some() || !matches!(a.format, CompareFormat::Table) {
        return Exit::Usage.fail(
            "capacity answers compare as a table; each search's capacity.html and capacity.json hold the rest",
        );
    }
    let mut files = Vec::new();
    for (i, p) in a.runs.iter().enumerate() {
        let c = match output::load(p) {
            Ok(c) => c,
            Err(e) => return Exit::Usage.fail(e),
        };
        let name = p
            .parent()
            .and_then(|d| d.file_name())
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| report::compare::letter(i));
        files.push((name, c));
    }
    let mut seen = std::collections::HashSet::new();
    if !files.iter().all(|(n, _)| seen.insert(n.clone())) {
        for (i, f) in files.iter_mut().enumerate() {
            f.0 = report::compare::letter(i);
        }
    }
    match output::compare_answers(files, a.force) {
        Ok(text) => {
            print!("{}", text);
            Exit::Ok
        }
        Err(e) => Exit::Usage.fail(e),
    }
}

/// How compared runs are named in tables: by their names, else targets, notes, labels or
/// run directories, whichever tells them all apart; else `A`, `B`, … (and `true`: the
/// legend then gives each run's file). Never by the whole path, which wraps every cell.
pub(super) fn run_names(reports: &[report::Report], files: &[PathBuf]) -> (Vec<String>, bool) {
    let unique = |v: &[String]| v.iter().collect::<std::collections::HashSet<_>>().len() == v.len();
    let labels = |r: &report::Report| {
        r.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let candidates: [Vec<String>; 5] = [
        reports
            .iter()
            .map(|r| r.name.clone().unwrap_or_default())
            .collect(),
        reports.iter().map(|r| r.target.clone()).collect(),
        reports
            .iter()
            .map(|r| r.note.clone().unwrap_or_default())
            .collect(),
        reports.iter().map(labels).collect(),
        files
            .iter()
            .map(|p| {
                p.parent()
                    .and_then(|d| d.file_name())
                    .map(|d| d.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect(),
    ];
    match candidates
        .into_iter()
        .find(|c| c.iter().all(|n| !n.is_empty()) && unique(c))
    {
        Some(names) => (names, false),
        None => (
            (0..files.len()).map(report::compare::letter).collect(),
            true,
        ),
    }
}

pub(super) fn compare(a: CompareArgs) -> Exit {
    if a.runs
        .iter()
        .any(|p| crate::run::capacity::output::is_capacity(p))
    {
        return compare_capacities(&a);
    }
    let mut reports = Vec::new();
    for p in &a.runs {
        match report::load(p) {
            Ok(r) => reports.push(r),
            Err(e) => return Exit::Usage.fail(e),
        }
    }
    let (names, lettered) = run_names(&reports, &a.runs);
    let mut c = match report::compare::compare_for(&names, &reports, a.force, a.effect) {
        Ok(c) => c,
        Err(e) => return Exit::Usage.fail(e),
    };
    if lettered {
        for (d, f) in c.details.iter_mut().zip(&a.runs) {
            d.full_name = f.display().to_string();
        }
    }
    match a.format {
        CompareFormat::Table => print!("{}", report::compare::render_table(&c)),
        CompareFormat::Md => print!("{}", report::compare::render_markdown(&c)),
        CompareFormat::Json => match serde_json::to_string_pretty(&c) {
            Ok(j) => println!("{j}"),
            Err(e) => return Exit::Write.fail(format!("the comparison as JSON: {e}")),
        },
    }
    if let Some(h) = &a.html
        && let Err(e) = report::write_file(h, &report::html::comparison(&c))
    {
        return Exit::Write.fail(e);
    }
    Exit::Ok
}
