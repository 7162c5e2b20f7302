//! Secrets kept out of every output. Credentials reach loadmix only from the environment or
//! from files (`{env:NAME}`, `{file:PATH}`, `$LOADMIX_PASSWORD`); each value is registered
//! here when it is read, and every text loadmix writes (report files, op log, stdout, error
//! messages) passes through [`redact`] on its way out. A value then cannot leak through a
//! path that nobody thought of: a failure detail that quotes a URL with a token in it, a
//! server that echoes a header back.
//!
//! Values shorter than [`MIN_LEN`] are not registered: replacing every "ab" in a report
//! would destroy it while protecting nothing a guess could not find.

use std::borrow::Cow;
use std::sync::RwLock;

/// What a secret is replaced with.
pub(crate) const MASK: &str = "[redacted]";
/// Shorter values are not masked (see the module header).
pub(crate) const MIN_LEN: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Header names whose values are credentials wherever a request is shown.
pub(crate) const SENSITIVE_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// A credential held in memory: its `Debug` never shows it, and it is registered for
/// masking when made.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(std::sync::Arc<str>);

impl Secret {
    pub fn new(value: &str) -> Secret {
        register(value);
        Secret(value.into())
    }

    /// Hold a value without registering it: one registered where it was read, or a
    /// well-known default (Cosmo's "password") that masking would only garble reports with.
    pub fn held(value: &str) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(MASK)
    }
}

/// Remember `value` as a secret: from now on no output contains it.
pub(crate) fn register(value: &str) {
    if value.len() < MIN_LEN {
        return;
    }
    let mut list = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !list.iter().any(|v| v == value) {
        list.push(value.to_string());
        // Longest first, so a secret that contains another is masked whole.
        list.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }
}

/// `text` with every registered secret replaced by [`MASK`].
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let list = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if !list.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for s in list.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MASK);
        }
    }
    Cow::Owned(out)
}

/// A workload's text with the values of credential headers (`Authorization: ...`,
/// `Cookie: ...`) masked, for embedding in a report; registered secrets too.
pub(crate) fn redact_source(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start().trim_start_matches(['-', ' ', '"', '\'']);
        let lower = trimmed.to_ascii_lowercase();
        let sensitive = SENSITIVE_HEADERS.iter().find(|h| {
            lower.starts_with(*h)
                && lower[h.len()..]
                    .trim_start_matches(['"', '\''])
                    .trim_start()
                    .starts_with(':')
        });
        match sensitive {
            Some(_) => {
                let colon = line.len() - trimmed.len() + trimmed.find(':').unwrap_or(0);
                out.push_str(&line[..=colon]);
                out.push(' ');
                out.push_str(MASK);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    redact(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_masked_longest_first() {
        register("s3cr3t-token");
        register("s3cr3t");
        register("ab");
        assert_eq!(redact("x s3cr3t-token y"), "x [redacted] y");
        assert_eq!(redact("s3cr3t/ab"), "[redacted]/ab");
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn credential_headers_are_masked_in_a_workload_text() {
        let src = "headers:\n  Authorization: Basic dXNlcjpwYXNz\n  \"Cookie\": id=42\n  Accept: text/plain\n";
        let out = redact_source(src);
        assert!(
            !out.contains("dXNlcjpwYXNz") && !out.contains("id=42"),
            "{out}"
        );
        assert!(out.contains("Authorization: [redacted]\n"), "{out}");
        assert!(out.contains("Accept: text/plain"), "{out}");
    }
}
