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
