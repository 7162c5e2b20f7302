//! The workload layer's error: what is wrong, where (file:line:column and key path), and,
//! for near misses, what the user probably meant.

use std::fmt;

use super::yaml::Pos;

/// Any reason a workload cannot be loaded. Every variant means exit code 2: nothing was sent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("{path}: cannot read workload file: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// A located mistake in the file.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    /// A command-line override that does not apply.
    #[error("{arg}: {message}")]
    BadOverride {
        /// The argument as given.
        arg: String,
        /// Why.
        message: String,
    },
    /// Several mistakes found in one pass over the file (at most [`MAX_REPORTED`] listed),
    /// each as it would be alone; `total` counts them all.
    #[error("{}", several(.found, *.total))]
    Several {
        /// The mistakes listed, in the order the file has them.
        found: Vec<WorkloadError>,
        /// How many were found, listed or not.
        total: usize,
    },
}

/// The most mistakes one pass over a workload reports.
pub(crate) const MAX_REPORTED: usize = 20;

fn several(found: &[WorkloadError], total: usize) -> String {
    let list: Vec<String> = found.iter().map(|e| e.to_string()).collect();
    let tail = match total > found.len() {
        true => format!(
            "\n\n(only the first {} of the {total} are listed)",
            found.len()
        ),
        false => String::new(),
    };
    format!(
        "{total} mistakes in the workload:\n\n{}{tail}",
        list.join("\n\n")
    )
}

/// The mistakes one pass finds: each section of a file is checked whatever the others
/// came to, so that one run of `validate` lists them all (up to [`MAX_REPORTED`]).
#[derive(Default)]
pub(crate) struct Found {
    found: Vec<WorkloadError>,
    /// Every mistake noted, those not kept too.
    total: usize,
}

impl Found {
    /// The value, or `None` with its mistake noted.
    pub(crate) fn keep<T>(&mut self, r: Result<T, WorkloadError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    /// Note a mistake.
    pub(crate) fn note(&mut self, e: WorkloadError) {
        let n = match &e {
            WorkloadError::Several { total, .. } => *total,
            _ => 1,
        };
        self.total = self.total.saturating_add(n);
        match e {
            WorkloadError::Several { found, .. } => {
                let room = MAX_REPORTED.saturating_sub(self.found.len());
                self.found.extend(found.into_iter().take(room));
            }
            e if self.found.len() < MAX_REPORTED => self.found.push(e),
            _ => {}
        }
    }

    /// What was found as one error, its mistakes in file order; `None` when none was.
    pub(crate) fn into_error(mut self) -> Option<WorkloadError> {
        let line = |e: &WorkloadError| match e {
            WorkloadError::Invalid(d) if d.pos.is_known() => (d.pos.line, d.pos.column),
            _ => (u32::MAX, u32::MAX),
        };
        self.found.sort_by_key(line);
        match (self.found.len(), self.total) {
            (0, _) => None,
            (1, 1) => self.found.pop(),
            _ => Some(WorkloadError::Several {
                found: self.found,
                total: self.total,
            }),
        }
    }
}

/// One located mistake in a workload file.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// The workload file.
    pub file: String,
    /// Where in it (line and column).
    pub pos: Pos,
    /// Dotted key path, e.g. `users[1].mix.sinc` (or `users.morse.mix.sinc`).
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it, when there is something to say.
    pub hint: Option<String>,
    /// The offending line of the file, shown under the message with a caret.
    pub source_line: Option<String>,
    /// Set when the value came from `--set`, not from the file.
    pub from_override: bool,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pos.is_known() {
            write!(f, "{}:{}:{}: ", self.file, self.pos.line, self.pos.column)?;
        } else if self.from_override {
            write!(f, "{} (from --set): ", self.file)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        if self.key.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "{}: {}", self.key, self.message)?;
        }
        if let (Some(line), true) = (&self.source_line, self.pos.is_known()) {
            let gutter = self.pos.line.to_string();
            let pad = " ".repeat(gutter.len());
            write!(f, "\n{pad} |\n{gutter} | {line}\n{pad} | ")?;
            let caret_at = (self.pos.column as usize).saturating_sub(1);
            // Keep tabs so the caret lines up under the same character.
            let lead: String = line
                .chars()
                .take(caret_at)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "{lead}^")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  = hint: {hint}")?;
        }
        Ok(())
    }
}

/// Closest candidate to `word`, if it is close enough to be a plausible typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase()),
                c,
            )
        })
        // Short words need a closer match, or "ftp" would suggest "http".
        .filter(|(d, c)| {
            *d <= if c.len() <= 4 {
                1
            } else if c.len() <= 8 {
                2
            } else {
                3
            }
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_lists_at_most_twenty_mistakes_in_file_order() {
        let at = |line: u32| {
            WorkloadError::Invalid(Box::new(Diagnostic {
                file: "w.yaml".into(),
                pos: Pos { line, column: 1 },
                key: format!("k{line}"),
                message: "wrong".into(),
                hint: None,
                source_line: None,
                from_override: false,
            }))
        };
        let mut found = Found::default();
        assert!(found.keep::<()>(Err(at(9))).is_none());
        found.note(at(3));
        let two = found.into_error().unwrap().to_string();
        assert!(two.starts_with("2 mistakes in the workload:"), "{two}");
        assert!(two.find("w.yaml:3:1") < two.find("w.yaml:9:1"), "{two}");
        let mut found = Found::default();
        (1..=25).for_each(|l| found.note(at(l)));
        let many = found.into_error().unwrap().to_string();
        assert!(many.starts_with("25 mistakes"), "{many}");
        assert!(
            many.ends_with("(only the first 20 of the 25 are listed)"),
            "{many}"
        );
        let mut found = Found::default();
        found.note(at(4));
        assert!(matches!(
            found.into_error(),
            Some(WorkloadError::Invalid(_))
        ));
    }

    #[test]
    fn suggests_near_misses_only() {
        assert_eq!(
            did_you_mean("sinc", ["sync", "update", "publish"]),
            Some("sync")
        );
        assert_eq!(
            did_you_mean("duraton", ["duration", "rounds"]),
            Some("duration")
        );
        assert_eq!(did_you_mean("banana", ["sync", "update"]), None);
        assert_eq!(did_you_mean("ftp", ["http", "morse"]), None);
    }

    #[test]
    fn renders_location_line_and_caret() {
        let d = Diagnostic {
            file: "w.yaml".into(),
            pos: Pos { line: 3, column: 5 },
            key: "users[0].mix.sinc".into(),
            message: "unknown operation 'sinc'".into(),
            hint: Some("did you mean 'sync'?".into()),
            source_line: Some("    sinc: 3".into()),
            from_override: false,
        };
        let s = d.to_string();
        assert!(s.starts_with("w.yaml:3:5: users[0].mix.sinc: unknown operation 'sinc'"));
        assert!(s.contains("3 |     sinc: 3\n  |     ^"), "{s}");
        assert!(s.ends_with("= hint: did you mean 'sync'?"));
    }
}
