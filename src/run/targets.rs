//! `--target` values: `NAME=SPEC` or `SPEC`, parsed into named targets with unique,
//! file-safe names.

use crate::workload::{EmbeddedStore, TargetSpec};

/// A target as named on the command line (`--target pg=http://...`).
#[derive(Debug, Clone)]
pub(crate) struct NamedTarget {
    pub name: String,
    pub spec: TargetSpec,
}

/// Parse `--target` values: `NAME=SPEC` or `SPEC` (named after its store or host).
pub(crate) fn parse_targets(
    args: &[String],
    default: &TargetSpec,
) -> Result<Vec<NamedTarget>, String> {
    if args.is_empty() {
        return Ok(vec![NamedTarget {
            name: default_name(default),
            spec: default.clone(),
        }]);
    }
    let mut out: Vec<NamedTarget> = Vec::new();
    for a in args {
        let (name, spec) = match a.split_once('=') {
            Some((n, s)) if !n.contains(':') && !n.contains('/') => (Some(n.trim().to_string()), s),
            _ => (None, a.as_str()),
        };
        let spec = TargetSpec::parse(spec).map_err(|m| format!("--target {a}: {m}"))?;
        let name = name.unwrap_or_else(|| default_name(&spec));
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "--target {a}: target names are letters, digits, '-', '_' or '.'"
            ));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(format!(
                "--target {a}: two targets are named '{name}'; name them, e.g. --target a=URL --target b=URL"
            ));
        }
        out.push(NamedTarget { name, spec });
    }
    Ok(out)
}

fn default_name(spec: &TargetSpec) -> String {
    match spec {
        TargetSpec::Embedded {
            store: EmbeddedStore::Memory,
        } => "memory".into(),
        TargetSpec::Embedded {
            store: EmbeddedStore::Sqlite(_),
        } => "sqlite".into(),
        TargetSpec::Url(u) => format!("{}-{}", u.host.replace([':', '[', ']'], ""), u.port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(args: &[&str]) -> Result<Vec<String>, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_targets(&args, &TargetSpec::parse("embedded").unwrap())
            .map(|t| t.into_iter().map(|t| t.name).collect())
    }

    #[test]
    fn targets_are_named_by_flag_store_or_host() {
        assert_eq!(names(&[]).unwrap(), ["memory"]);
        assert_eq!(
            names(&["embedded:sqlite", "http://127.0.0.1:8080/x"]).unwrap(),
            ["sqlite", "127.0.0.1-8080"]
        );
        assert_eq!(
            names(&["pg=http://[::1]:5232", "my.sql=http://localhost"]).unwrap(),
            ["pg", "my.sql"]
        );
        // An '=' inside a URL is not a name.
        assert_eq!(names(&["http://h:1/a=b"]).unwrap(), ["h-1"]);
    }

    #[test]
    fn bad_targets_are_refused_with_the_flag() {
        for (args, want) in [
            (
                &["a=http://h:1", "a=http://h:2"][..],
                "two targets are named 'a'",
            ),
            (&["http://h:1", "http://h:1"][..], "two targets are named"),
            (&["b c=http://h:1"][..], "letters, digits"),
            (&["=http://h:1"][..], "letters, digits"),
            (&["ftp://h"][..], "--target ftp://h"),
            (&["x=embedded:disk"][..], "not a target"),
        ] {
            let e = names(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
