//! Reports: the JSON model (`loadmix/report/v1`, the source of truth) and what is rendered
//! from it: the console table, CSV, HTML pages with SVG charts, comparisons of runs, and
//! threshold verdicts. `--out DIR` writes `run.json`, `report.txt` and `report.html`;
//! `loadmix report RUN.json` renders a saved run again.

pub mod charts;
pub mod compare;
pub mod csv;
pub mod html;
pub mod model;
pub mod stats;
pub mod table;
pub mod thresholds;

use std::path::Path;

pub use model::{Report, SCHEMA, build};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}: not a loadmix report: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: schema '{found}' is not one this version reads ({SCHEMA})")]
    Schema { path: String, found: String },
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
}

/// Read a saved report.
pub fn load(path: &Path) -> Result<Report, ReportError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::Read {
        path: p.clone(),
        message: e.to_string(),
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| ReportError::Parse {
        path: p.clone(),
        message: e.to_string(),
    })?;
    let found = v
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or("none")
        .to_string();
    if found != SCHEMA {
        return Err(ReportError::Schema { path: p, found });
    }
    serde_json::from_value(v).map_err(|e| ReportError::Parse {
        path: p,
        message: e.to_string(),
    })
}

pub fn to_json(r: &Report) -> String {
    // Serialising plain data structures cannot fail.
    serde_json::to_string_pretty(r).unwrap_or_default()
}

/// Write `run.json` and `report.txt` into `dir` (created if needed).
pub fn write_dir(r: &Report, dir: &Path) -> Result<(), ReportError> {
    let werr = |p: &Path, e: std::io::Error| ReportError::Write {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| werr(dir, e))?;
    let json = dir.join("run.json");
    std::fs::write(&json, to_json(r) + "\n").map_err(|e| werr(&json, e))?;
    let txt = dir.join("report.txt");
    std::fs::write(&txt, table::render(r)).map_err(|e| werr(&txt, e))?;
    let html = dir.join("report.html");
    std::fs::write(&html, html::report(r)).map_err(|e| werr(&html, e))?;
    Ok(())
}

/// Write a file, as a report error when it fails.
pub fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| ReportError::Write {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    }
    std::fs::write(path, text).map_err(|e| ReportError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}
