//! The target URL schemes loadmix speaks, in one table: each one's prefix, whether every
//! connection is TLS, the family of protocols it carries and its default port. The
//! workload parses targets with it and the transport connects by it; a new scheme is one
//! row here, and a new family one variant the compiler then asks every match about.

/// What a target's port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// HTTP/1.1: Morse Code, Atom, CalDAV and `http` classes.
    Http,
    /// A message broker's STOMP port.
    Stomp,
    /// A message broker's AMQP 0-9-1 port.
    Amqp,
}

/// One target URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    /// What the URL starts with (`https://`).
    pub prefix: &'static str,
    /// Every connection is TLS.
    pub tls: bool,
    /// What it speaks.
    pub family: Family,
    /// The port when the URL names none.
    pub default_port: u16,
}

/// Every scheme a target may have.
pub const SCHEMES: [Scheme; 6] = [
    Scheme::of("http://", false, Family::Http, 80),
    Scheme::of("https://", true, Family::Http, 443),
    Scheme::of("stomp://", false, Family::Stomp, 61613),
    Scheme::of("stomp+ssl://", true, Family::Stomp, 61614),
    Scheme::of("amqp://", false, Family::Amqp, 5672),
    Scheme::of("amqps://", true, Family::Amqp, 5671),
];

impl Scheme {
    const fn of(prefix: &'static str, tls: bool, family: Family, default_port: u16) -> Scheme {
        Scheme {
            prefix,
            tls,
            family,
            default_port,
        }
    }

    /// The scheme `url` starts with, and the rest of it.
    pub fn split(url: &str) -> Option<(Scheme, &str)> {
        SCHEMES
            .iter()
            .find_map(|s| url.strip_prefix(s.prefix).map(|rest| (*s, rest)))
    }

    /// Plain HTTP, as an embedded target's own port is.
    pub fn http() -> Scheme {
        SCHEMES[0]
    }

    /// Its port answers HTTP requests.
    pub fn speaks_http(self) -> bool {
        match self.family {
            Family::Http => true,
            Family::Stomp | Family::Amqp => false,
        }
    }

    /// The schemes' names, for messages: `http, https, stomp, ...`.
    pub fn listed() -> String {
        SCHEMES
            .iter()
            .map(|s| s.prefix.trim_end_matches("://"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_scheme_and_each_scheme_its_port() {
        let (s, rest) = Scheme::split("stomp+ssl://broker:61614/vhost").unwrap();
        assert_eq!(
            (s.family, s.tls, s.default_port),
            (Family::Stomp, true, 61614)
        );
        assert_eq!(rest, "broker:61614/vhost");
        // `https://` is not taken for `http://` with an `s` host.
        assert!(Scheme::split("https://h").unwrap().0.tls);
        assert!(Scheme::split("ftp://h").is_none());
        assert!(!Scheme::split("amqp://h").unwrap().0.speaks_http());
        // One row per prefix, and no prefix another's start.
        for (i, a) in SCHEMES.iter().enumerate() {
            for b in &SCHEMES[i + 1..] {
                assert!(!b.prefix.starts_with(a.prefix) && !a.prefix.starts_with(b.prefix));
            }
        }
    }
}
