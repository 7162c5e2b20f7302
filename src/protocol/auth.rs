//! A user's HTTP authentication: Basic (sent with every request), Bearer (a token from the
//! environment or a file), Digest (RFC 7616: MD5 or SHA-256, `qop=auth`), or `auto`,
//! which answers whatever the server's `WWW-Authenticate` asks for.
//!
//! Digest keeps the server's nonce and counts `nc` up with every request, as browsers do,
//! so a user pays the 401 round trip once, not before every request. When the server
//! answers 401 because it learned something new to say (the first challenge, a stale or
//! replaced nonce), the request is sent once more with the new answer; both exchanges are
//! on the wire and both are counted (the 401 as an earlier status of the operation).
//! A 401 to fresh credentials is a refusal and is reported with the scheme the server
//! asked for.
//!
//! The state is per user and shared by the clones of its session (the drivers keep one
//! each), behind a mutex no other user touches.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use digest_auth::{AuthContext, HttpMethod, WwwAuthenticateHeader};
use hyper::HeaderMap;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};

use crate::secrets::Secret;
use crate::workload::AuthScheme;

/// Largest challenge header considered; longer ones are not parsed (a hostile server's
/// header could otherwise cost unbounded work per request).
const MAX_CHALLENGE: usize = 4096;

/// One user's authentication.
#[derive(Clone)]
pub(crate) struct Auth {
    state: Arc<Mutex<State>>,
}

struct State {
    scheme: AuthScheme,
    user: String,
    password: Secret,
    token: Option<Secret>,
    /// What is sent now, once known.
    current: Current,
    /// Why the last 401 stood (see [`Auth::refused`]).
    refusal: Option<String>,
}

enum Current {
    /// Nothing yet (`auto` before the first challenge; `digest` before its first nonce).
    Nothing,
    Fixed(HeaderValue),
    Digest(Box<WwwAuthenticateHeader>),
}

/// A challenge the server sent, as far as loadmix cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `Basic`, `Digest`, `Bearer`, ... as the server wrote it.
    pub scheme: String,
    /// The rest of the challenge (realm, nonce, ...).
    pub params: String,
}

impl Auth {
    pub(crate) fn new(
        scheme: AuthScheme,
        user: &str,
        password: Secret,
        token: Option<Secret>,
    ) -> Auth {
        let mut state = State {
            scheme,
            user: user.to_string(),
            password,
            token,
            current: Current::Nothing,
            refusal: None,
        };
        state.current = match scheme {
            AuthScheme::Basic => state.basic(),
            AuthScheme::Bearer => state.bearer(),
            AuthScheme::Digest | AuthScheme::Auto => Current::Nothing,
        };
        Auth {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves plain data behind: use it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `Authorization` value for a request about to go out (`uri` as sent: path and
    /// query), or none while nothing is known to send.
    pub(crate) fn header(&self, method: &str, uri: &str, body: &[u8]) -> Option<HeaderValue> {
        let mut st = self.lock();
        let State {
            user,
            password,
            current,
            ..
        } = &mut *st;
        match current {
            Current::Nothing => None,
            Current::Fixed(v) => Some(v.clone()),
            Current::Digest(challenge) => {
                let cx = AuthContext::new_with_method(
                    user.as_str(),
                    password.expose(),
                    uri,
                    Some(body),
                    HttpMethod::from(method),
                );
                // `respond` counts nc up for this nonce.
                let answer = challenge.respond(&cx).ok()?;
                HeaderValue::from_str(&answer.to_header_string()).ok()
            }
        }
    }

    /// After a 401: learn from its challenges, and say whether the request should be sent
    /// once more (something new was learned). False means the credentials were refused.
    pub(crate) fn challenged(&self, headers: &HeaderMap) -> bool {
        let challenges = challenges(headers);
        let mut st = self.lock();
        let scheme = st.scheme;
        let digest = challenges
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("digest"))
            .and_then(|c| WwwAuthenticateHeader::parse(&c.params).ok());
        let offered = |name: &str| {
            challenges
                .iter()
                .any(|c| c.scheme.eq_ignore_ascii_case(name))
        };
        if matches!(scheme, AuthScheme::Digest | AuthScheme::Auto)
            && let Some(new) = digest
        {
            let renew = match &st.current {
                Current::Digest(old) => new.stale || new.nonce != old.nonce,
                _ => true,
            };
            if renew {
                st.current = Current::Digest(Box::new(new));
            }
            return renew;
        }
        if scheme != AuthScheme::Auto || !matches!(st.current, Current::Nothing) {
            return false;
        }
        if offered("basic") {
            st.current = st.basic();
            return true;
        }
        if offered("bearer") && st.token.is_some() {
            st.current = st.bearer();
            return true;
        }
        false
    }

    /// A 401 stands: remember why, for the failure it becomes.
    pub(crate) fn refused(&self, headers: &HeaderMap) {
        let why = self.explain(headers);
        self.lock().refusal = Some(why);
    }

    /// Why the last 401 stood, once.
    pub(crate) fn take_refusal(&self) -> Option<String> {
        self.lock().refusal.take()
    }

    /// Why a 401 stands, in words: what the server asked for, and whether loadmix's
    /// credentials were refused or never matched what it asked.
    pub(crate) fn explain(&self, headers: &HeaderMap) -> String {
        let st = self.lock();
        describe_refusal(st.scheme, &st.user, &challenges(headers))
    }
}

impl State {
    fn basic(&self) -> Current {
        let raw = format!("{}:{}", self.user, self.password.expose());
        let value = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        );
        // Not registered for masking: loadmix never shows a request's headers, and one
        // entry per user would make masking cost grow with the population.
        HeaderValue::from_str(&value).map_or(Current::Nothing, Current::Fixed)
    }

    fn bearer(&self) -> Current {
        match &self.token {
            Some(t) => HeaderValue::from_str(&format!("Bearer {}", t.expose()))
                .map_or(Current::Nothing, Current::Fixed),
            None => Current::Nothing,
        }
    }
}

/// What a 401 means for a user of `scheme`, given the server's `challenges`.
pub(crate) fn describe_refusal(scheme: AuthScheme, user: &str, challenges: &[Challenge]) -> String {
    let asked: Vec<&str> = challenges.iter().map(|c| c.scheme.as_str()).collect();
    let ours = scheme.name();
    if asked.is_empty() {
        return format!(
            "the server refused {ours} credentials of user '{user}' and sent no WWW-Authenticate challenge"
        );
    }
    let realm = challenges.iter().find_map(|c| realm_of(&c.params));
    let realm = realm
        .map(|r| format!(", realm \"{r}\""))
        .unwrap_or_default();
    let matches = asked.iter().any(|a| a.eq_ignore_ascii_case(ours))
        || (scheme == AuthScheme::Auto
            && asked
                .iter()
                .any(|a| ["basic", "digest", "bearer"].contains(&a.to_ascii_lowercase().as_str())));
    if matches {
        format!(
            "the server asks for {}{realm} and refused the credentials of user '{user}' (check the user name and $LOADMIX_PASSWORD, or the token)",
            asked.join(" or ")
        )
    } else {
        format!(
            "the server asks for {}{realm}, but the workload sends {ours}: set auth: {} (or auto)",
            asked.join(" or "),
            asked[0].to_ascii_lowercase()
        )
    }
}

fn realm_of(params: &str) -> Option<String> {
    let i = params.to_ascii_lowercase().find("realm=")?;
    let rest = &params[i + "realm=".len()..];
    let v = match rest.strip_prefix('"') {
        Some(q) => q.split('"').next().unwrap_or(""),
        None => rest.split([',', ' ']).next().unwrap_or(""),
    };
    Some(v.chars().take(80).collect())
}

/// Every challenge of a response's `WWW-Authenticate` headers, in order. One header may
/// hold several (`Basic realm="a", Digest realm="b", nonce="..."`): a new challenge starts
/// at a token followed by a space rather than by `=`, outside quotes.
pub(crate) fn challenges(headers: &HeaderMap) -> Vec<Challenge> {
    let mut out = Vec::new();
    for v in headers.get_all(WWW_AUTHENTICATE) {
        // Visible ASCII only (to_str): the Digest parser indexes by characters.
        let Ok(text) = v.to_str() else { continue };
        if text.len() > MAX_CHALLENGE {
            continue;
        }
        split_challenges(text, &mut out);
    }
    out
}

fn split_challenges(text: &str, out: &mut Vec<Challenge>) {
    let bytes = text.as_bytes();
    // Start offsets of the scheme tokens.
    let mut starts = Vec::new();
    let mut in_quotes = false;
    let mut escaped = false;
    let mut i = 0;
    let mut expect_scheme = true;
    while i < bytes.len() {
        let c = bytes[i];
        if in_quotes {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_quotes = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => in_quotes = true,
            b',' => expect_scheme = true,
            b' ' | b'\t' => {}
            _ if c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c) => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&bytes[i]))
                {
                    i += 1;
                }
                let next = bytes[i..].iter().find(|b| **b != b' ' && **b != b'\t');
                // A token not followed by '=' where a new item may start is a scheme.
                if expect_scheme && next != Some(&b'=') {
                    starts.push(start);
                }
                expect_scheme = false;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    for (n, s) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(text.len());
        let piece = text[*s..end].trim().trim_end_matches(',').trim();
        let (scheme, params) = match piece.find([' ', '\t']) {
            Some(k) => (&piece[..k], piece[k..].trim()),
            None => (piece, ""),
        };
        out.push(Challenge {
            scheme: scheme.to_string(),
            params: params.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(WWW_AUTHENTICATE, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn auth(scheme: AuthScheme) -> Auth {
        Auth::new(scheme, "Mufasa", Secret::new("Circle of Life"), None)
    }

    #[test]
    fn several_challenges_in_one_header_are_told_apart() {
        let h = headers(&[
            r#"Basic realm="a, b", Digest realm="x", nonce="n1", qop="auth,auth-int""#,
            "Bearer",
        ]);
        let c = challenges(&h);
        let schemes: Vec<&str> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Basic", "Digest", "Bearer"]);
        assert_eq!(c[1].params, r#"realm="x", nonce="n1", qop="auth,auth-int""#);
    }

    #[test]
    fn digest_answers_the_rfc_7616_example_and_counts_nc_up() {
        let a = auth(AuthScheme::Digest);
        assert!(a.header("GET", "/dir/index.html", b"").is_none());
        let h = headers(&[
            r#"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#,
        ]);
        assert!(
            a.challenged(&h),
            "the first challenge is learned and retried"
        );
        let first = a.header("GET", "/dir/index.html", b"").unwrap();
        let first = first.to_str().unwrap();
        assert!(first.starts_with("Digest "), "{first}");
        assert!(first.contains("algorithm=SHA-256") && first.contains("nc=00000001"));
        let second = a.header("GET", "/dir/index.html", b"").unwrap();
        assert!(second.to_str().unwrap().contains("nc=00000002"));
        // The same challenge again: the credentials were refused, no retry.
        assert!(!a.challenged(&h));
        // A stale nonce is renewed once.
        let stale = headers(&[
            r#"Digest realm="http-auth@example.org", qop="auth", nonce="fresh", stale=true"#,
        ]);
        assert!(a.challenged(&stale));
        let third = a.header("PUT", "/x", b"body").unwrap();
        assert!(third.to_str().unwrap().contains(r#"nonce="fresh""#));
        assert!(third.to_str().unwrap().contains("nc=00000001"));
    }

    #[test]
    fn auto_follows_the_server_and_refusals_are_explained() {
        let a = auth(AuthScheme::Auto);
        assert!(a.header("GET", "/", b"").is_none());
        assert!(a.challenged(&headers(&[r#"Basic realm="dav""#])));
        assert!(
            a.header("GET", "/", b"")
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("Basic ")
        );
        assert!(!a.challenged(&headers(&[r#"Basic realm="dav""#])));
        let b = auth(AuthScheme::Basic);
        let said = b.explain(&headers(&[r#"Digest realm="cal", nonce="n""#]));
        assert!(
            said.contains("asks for Digest") && said.contains("auth: digest"),
            "{said}"
        );
        let said = b.explain(&headers(&[r#"Basic realm="cal""#]));
        assert!(
            said.contains("refused the credentials of user 'Mufasa'"),
            "{said}"
        );
    }

    #[test]
    fn hostile_challenges_cost_little_and_never_panic() {
        for v in [
            "Digest",
            "Digest realm=\"unterminated",
            "Digest nonce=",
            ",,,,",
            "Digest realm=\"\\\"\", nonce=\"\\",
            "=====",
        ] {
            let a = auth(AuthScheme::Auto);
            let _ = a.challenged(&headers(&[v]));
            let _ = a.header("GET", "/", b"");
            let _ = a.explain(&headers(&[v]));
        }
        let long = format!(
            "Digest realm=\"{}\", nonce=\"n\"",
            "r".repeat(MAX_CHALLENGE)
        );
        assert!(challenges(&headers(&[&long])).is_empty());
    }
}
