//! Where a workload's load goes: the embedded server (on memory or SQLite) or a URL of one
//! of the scheme table's schemes, and the metrics pages watched beside it.

use crate::formats::scheme::Scheme;

/// One `monitor.prometheus` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsWatch {
    /// `http://host:port/path`.
    pub url: String,
    /// The series to keep.
    pub series: Vec<String>,
    /// `per:` what a counter's increase is divided by (an operation, a class, or a sum);
    /// `None`: the report's headline sum.
    pub per: Option<String>,
}

/// Where the load goes.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    /// The reference server, started in-process on an ephemeral loopback port.
    Embedded {
        store: EmbeddedStore,
    },
    Url(TargetUrl),
}

impl TargetSpec {
    /// Parse `embedded`, `embedded:memory`, `embedded:sqlite[:PATH]`,
    /// `http[s]://host[:port][/base]` or `stomp[+ssl]://host[:port][/vhost]`.
    pub fn parse(s: &str) -> Result<TargetSpec, String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("embedded") {
            return match rest {
                "" | ":memory" => Ok(TargetSpec::Embedded {
                    store: EmbeddedStore::Memory,
                }),
                // A fresh database file for this run, kept beside its report.
                ":sqlite" => Ok(TargetSpec::Embedded {
                    store: EmbeddedStore::Sqlite(String::new()),
                }),
                r if r.starts_with(":sqlite:") && r.len() > ":sqlite:".len() => {
                    Ok(TargetSpec::Embedded {
                        store: EmbeddedStore::Sqlite(r[":sqlite:".len()..].to_string()),
                    })
                }
                _ => Err(format!(
                    "'{s}' is not a target; use embedded, embedded:memory, embedded:sqlite:PATH or http[s]://host:port"
                )),
            };
        }
        let Some((scheme, rest)) = Scheme::split(s) else {
            return Err(format!(
                "'{s}' is not a target; use embedded, embedded:sqlite:PATH or SCHEME://host[:port][/path], SCHEME one of {}",
                Scheme::listed()
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = if let Some(h) = authority.strip_prefix('[') {
            // [::1]:8080
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| format!("'{s}': unclosed '[' in host"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (authority.to_string(), ""),
            }
        };
        if host.is_empty() {
            return Err(format!("'{s}' has no host"));
        }
        let port = if port.is_empty() {
            scheme.default_port
        } else {
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("'{s}': '{port}' is not a port number"))?
        };
        Ok(TargetSpec::Url(TargetUrl {
            raw: s.to_string(),
            host,
            port,
            base_path: path.trim_end_matches('/').to_string(),
            scheme,
        }))
    }
}

/// The embedded server's store, as a target names it (`embedded:sqlite:PATH`); `run`
/// hands it to the server, which owns its own configuration type.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddedStore {
    Memory,
    Sqlite(String),
}

/// An `http://host:port/base`, `https://host:port/base` or `stomp[+ssl]://host:port[/vhost]`
/// target.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetUrl {
    pub raw: String,
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash ("" for none).
    pub base_path: String,
    /// Its scheme: TLS or not, and what its port speaks (a broker's path, if any, names
    /// its virtual host).
    pub scheme: Scheme,
}

impl std::fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSpec::Embedded {
                store: EmbeddedStore::Memory,
            } => write!(f, "embedded:memory"),
            TargetSpec::Embedded {
                store: EmbeddedStore::Sqlite(p),
            } if p.is_empty() => write!(f, "embedded:sqlite"),
            TargetSpec::Embedded {
                store: EmbeddedStore::Sqlite(p),
            } => write!(f, "embedded:sqlite:{p}"),
            TargetSpec::Url(u) => write!(f, "{}", u.raw),
        }
    }
}
