//! Reports: the JSON model (`loadmix/report/v2`, the source of truth) and what is rendered
//! from it: the console table, CSV, HTML pages with SVG charts, comparisons of runs, and
//! threshold verdicts. `--out DIR` writes `run.json`, `report.txt` and `report.html`;
//! `loadmix report RUN.json` renders a saved run again. Every file is written through
//! [`write_file`], which masks registered secrets ([`crate::secrets`]).

mod axis;
pub(crate) mod charts;
pub(crate) mod check;
pub mod compare;
pub(crate) mod csv;
mod figures;
pub mod html;
pub mod merge;
pub(crate) mod model;
pub(crate) mod oplog;
pub(crate) mod power;
mod read;
pub(crate) mod stats;
pub mod table;
pub(crate) mod thresholds;
pub(crate) mod usl;

use std::io::Write as _;
use std::path::{Path, PathBuf};

pub use model::Report;
pub(crate) use model::{SCHEMA, TlsInfo, build};

/// A size in words: `27 MiB`, `5.8 GiB`.
fn in_mib_or_gib(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b => format!("{} MiB", b.div_ceil(1 << 20)),
    }
}

/// Why a report could not be read, written or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::formats::files::FileError,
    },
    /// The file is not JSON of a report.
    #[error("{}: not a loadmix report: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A report of a schema this version does not read.
    #[error("{}: schema '{found}' is not one this version reads ({SCHEMA})", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// The schema it names.
        found: String,
    },
    /// Figures no run of loadmix could have written.
    #[error("{}: not a report loadmix wrote: {what}", path.display())]
    Implausible {
        /// The file.
        path: PathBuf,
        /// What does not add up.
        what: String,
    },
    /// A report that would take more memory than the machine has available.
    #[error(
        "{}: reading this report would take about {} of memory; this machine has {} available",
        path.display(), in_mib_or_gib(*.need), in_mib_or_gib(*.available)
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Bytes the typed report would take.
        need: u64,
        /// Bytes available (`MemAvailable`).
        available: u64,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A chart or page could not be rendered.
    #[error("cannot render {what}: {message}")]
    Render {
        /// What was being rendered.
        what: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// Read a saved report: its numbers checked and its size held against the memory the
/// machine has before anything is built from it ([`read`]).
pub fn load(path: &Path) -> Result<Report, ReportError> {
    load_within(path, crate::formats::files::memory_available())
}

/// [`load`], held against `available` bytes of memory (unbounded when unknown).
fn load_within(path: &Path, available: Option<u64>) -> Result<Report, ReportError> {
    let text = crate::formats::files::read_text(path, crate::formats::files::REPORT).map_err(
        |source| ReportError::Read {
            path: path.to_path_buf(),
            source,
        },
    )?;
    let parse = |source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let survey = read::survey(&text).map_err(|e| match e {
        read::Refused::Json(e) => parse(e),
        read::Refused::Implausible(what) => ReportError::Implausible {
            path: path.to_path_buf(),
            what,
        },
    })?;
    let found = survey.schema.as_deref().unwrap_or("none");
    if !model::READS.contains(&found) {
        return Err(ReportError::Schema {
            path: path.to_path_buf(),
            found: found.to_string(),
        });
    }
    let need = survey.bytes_needed();
    // A fifth is left for what is done with the report and for the rest of the machine.
    if let Some(available) = available
        && need > available / 5 * 4
    {
        return Err(ReportError::TooLarge {
            path: path.to_path_buf(),
            need,
            available,
        });
    }
    let r = read::typed(&text).map_err(parse)?;
    check::consistent(&r).map_err(|what| ReportError::Implausible {
        path: path.to_path_buf(),
        what,
    })?;
    Ok(r)
}

/// The largest count or size a report may hold: far beyond any run, and small enough
/// that the shards of the largest sharded run (10,000) add up without overflow.
pub(crate) const MAX_COUNT: u64 = 1 << 50;

/// The report as pretty JSON (`run.json`).
pub fn to_json(r: &Report) -> Result<String, ReportError> {
    serde_json::to_string_pretty(r).map_err(|e| ReportError::Render {
        what: "the report as JSON",
        message: e.to_string(),
    })
}

/// Write `run.json`, `report.txt` and `report.html` into `dir` (created if needed). Each
/// file is written whole or not at all (`write_file`); the first failure is returned.
pub fn write_dir(r: &Report, dir: &Path) -> Result<(), ReportError> {
    write_file(&dir.join("run.json"), &(to_json(r)? + "\n"))?;
    write_file(&dir.join("report.txt"), &table::render(r))?;
    write_file(&dir.join("report.html"), &html::report(r))?;
    Ok(())
}

/// Write a file whole or not at all: into a temporary file beside it, flushed to disk,
/// then renamed over the target. On a full disk no truncated file is left behind, and
/// the error names the file.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), ReportError> {
    // Every file loadmix writes goes through here: no credential reaches one.
    let text = crate::secrets::redact(text);
    let werr = |p: &Path, source| ReportError::Write {
        path: p.to_path_buf(),
        source,
    };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| werr(dir, e))?;
    }
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        werr(path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokers_answers_are_kept_in_run_json_and_shown_in_its_own_words() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        let mut r = load(&path).unwrap();
        r.schema = SCHEMA.into();
        let mut stats = crate::metrics::OpStats {
            requests: 7,
            ..Default::default()
        };
        let a = crate::answer::Answer::named("stomp", "RECEIPT", None, None);
        let e = crate::answer::Answer::named("stomp", "ERROR", None, Some("queue <full>"));
        stats.by_answer.insert(a, 5);
        stats.by_answer.insert(e, 2);
        let op = model::op_report("producers.send", None, &stats, 1.0, false);
        assert!(op.status.is_empty(), "no HTTP status: {:?}", op.status);
        r.summary.ops.push(op);
        // run.json carries them and reads back the same.
        let json = to_json(&r).unwrap();
        assert!(json.contains("\"answers\""), "{json}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.json");
        write_file(&file, &json).unwrap();
        let back = load(&file).unwrap();
        assert_eq!(back.summary.ops, r.summary.ops);
        // The table and the page say what the broker said.
        let text = table::render(&back);
        assert!(
            text.contains("producers.send: stomp ERROR 'queue <full>'×2 stomp RECEIPT×5"),
            "{text}"
        );
        let page = html::report(&back);
        assert!(page.contains("<th>answers</th>"), "{page}");
        assert!(page.contains("stomp RECEIPT: 5"), "{page}");
        assert!(page.contains("queue &lt;full&gt;"), "{page}");
        // A v1 report still reads, without answers.
        let v1 = load(&path).unwrap();
        assert_eq!(v1.schema, "loadmix/report/v1");
        assert!(v1.summary.ops.iter().all(|o| o.answers.is_empty()));
    }

    #[test]
    fn a_report_too_large_for_the_memory_available_is_refused_with_the_figures() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let second = serde_json::json!({"in_flight": 0.5});
        v["rounds"][0]["per_second"] = serde_json::Value::Array(vec![second; 100_000]);
        // A round that long: a timeline longer than its round is refused for that.
        v["rounds"][0]["elapsed_s"] = serde_json::json!(100_000.0);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.json");
        std::fs::write(&file, serde_json::to_string(&v).unwrap()).unwrap();
        // 100,000 seconds of 2.2 MB text take about 28 MB once read (the estimate is
        // above what the typed report holds: 104 bytes a second).
        let gib = 1u64 << 30;
        let e = load_within(&file, Some(gib / 64)).unwrap_err().to_string();
        assert!(
            e.contains("reading this report would take about 2")
                && e.contains("MiB of memory; this machine has 16 MiB available"),
            "{e}"
        );
        let r = load_within(&file, Some(gib)).unwrap();
        assert_eq!(r.rounds[0].per_second.len(), 100_000);
        assert!(load_within(&file, None).is_ok());
    }

    #[test]
    fn a_file_that_cannot_be_written_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("sub/a.txt");
        write_file(&ok, "hello").unwrap();
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "hello");
        write_file(&ok, "again").unwrap();
        assert_eq!(std::fs::read_to_string(&ok).unwrap(), "again");
        // A folder where the file should be: the rename fails, the temporary file goes.
        let blocked = dir.path().join("sub/b");
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let e = write_file(&blocked, "x").unwrap_err();
        assert!(e.to_string().contains("sub/b"), "{e}");
        let left: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
    }
}
