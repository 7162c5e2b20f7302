//! What every built-in driver needs around a request: the VU's credentials, the context
//! prefix, sending through the VU's connection, and turning the answer into an [`Outcome`]
//! (expected status or a `status` failure; transport failures keep their class).
//! Also account set-up: Cosmo's CMP (as the admin), existing accounts, a shared principal.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};

use super::auth::Auth;
use super::{Outcome, ProtocolError, SetupError, Stage, VuIds};
use crate::answer::Answer;
use crate::formats::xml::XmlWriter;
use crate::secrets::Secret;
use crate::transport::{Conn, ErrorClass, Method, Request, Response};
use crate::workload::{AccountMode, Accounts, AuthScheme, UserClass, Workload};

/// Credentials and paths of one VU.
#[derive(Clone)]
pub(crate) struct Session {
    pub user: String,
    pub password: String,
    /// How requests are authenticated; `None` sends no credentials.
    pub auth: Option<Auth>,
    pub context: Arc<str>,
}

/// How accounts are obtained for a class (resolved once per run).
#[derive(Debug, Clone)]
pub(crate) enum AccountPlan {
    None,
    /// Create `lm-{run}-{round}-{class}-{vu}` through CMP.
    Cmp {
        admin: (String, String),
        password: String,
    },
    Existing {
        users: Vec<String>,
        password: String,
    },
    Shared {
        user: String,
        password: String,
    },
}

/// A password from the environment variable the workload names (or `default_var`); when it
/// is unset, `fallback` if there is one (Cosmo's well-known defaults), else an error.
fn password(
    var: Option<&String>,
    default_var: &str,
    fallback: Option<&str>,
) -> Result<String, ProtocolError> {
    let name = var.map_or(default_var, String::as_str);
    match (std::env::var(name), fallback) {
        (Ok(v), _) => {
            crate::secrets::register(&v);
            Ok(v)
        }
        (Err(_), Some(f)) => Ok(f.to_string()),
        (Err(_), None) => Err(ProtocolError::Setup(format!(
            "environment variable {name} (a password) is not set"
        ))),
    }
}

/// The password of existing accounts: from the variable the workload names (which must be
/// set), else `$LOADMIX_PASSWORD`, else none (a server without authentication).
fn optional_password(var: Option<&String>) -> Result<String, ProtocolError> {
    match var {
        Some(_) => password(var, "", None),
        None => password(None, "LOADMIX_PASSWORD", Some("")),
    }
}

impl AccountPlan {
    pub(crate) fn resolve(
        w: &Workload,
        base_dir: Option<&std::path::Path>,
    ) -> Result<AccountPlan, ProtocolError> {
        let Some(a): Option<&Accounts> = w.accounts.as_ref() else {
            return Ok(AccountPlan::None);
        };
        Ok(match a.create {
            AccountMode::None => AccountPlan::None,
            AccountMode::Cmp => AccountPlan::Cmp {
                admin: (
                    a.admin_username.clone().unwrap_or_else(|| "root".into()),
                    password(
                        a.admin_password_env.as_ref(),
                        "LOADMIX_ADMIN_PASSWORD",
                        Some("cosmo"),
                    )?,
                ),
                // The 2007 client gave every account the password "password".
                password: password(
                    a.password_env.as_ref(),
                    "LOADMIX_PASSWORD",
                    Some("password"),
                )?,
            },
            AccountMode::Shared => AccountPlan::Shared {
                user: a.username.clone().unwrap_or_default(),
                password: optional_password(a.password_env.as_ref())?,
            },
            AccountMode::Existing => {
                let file = a.file.clone().unwrap_or_default();
                let path = crate::formats::files::beside(base_dir, &file);
                let text = crate::formats::files::read_text(&path, crate::formats::files::ACCOUNTS)
                    .map_err(|e| {
                        ProtocolError::Setup(format!("accounts file {}: {e}", path.display()))
                    })?;
                let users: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
                    .collect();
                if users.is_empty() {
                    return Err(ProtocolError::Setup(format!(
                        "accounts file {} lists no accounts",
                        path.display()
                    )));
                }
                AccountPlan::Existing {
                    users,
                    password: optional_password(a.password_env.as_ref())?,
                }
            }
        })
    }

    /// The session of one VU (before any account is created).
    pub(crate) fn session(&self, w: &Workload, class: &UserClass, ids: &VuIds) -> Session {
        let (user, password) = match self {
            AccountPlan::None => (format!("lm-{}-{}", class.name, ids.vu), String::new()),
            AccountPlan::Cmp { password, .. } => (
                format!("lm-{}-r{}-{}-{}", ids.run_id, ids.round, class.name, ids.vu),
                password.clone(),
            ),
            AccountPlan::Existing { users, password } => {
                // Dealt in class order, so that every user of the run has its own account
                // when the file has one per user (the users of a team must).
                let before: u64 = w
                    .classes
                    .iter()
                    .take_while(|c| c.name != class.name)
                    .map(|c| u64::from(Workload::peak_users(c)))
                    .sum();
                let i = (before + u64::from(ids.vu)) % users.len() as u64;
                (users[i as usize].clone(), password.clone())
            }
            AccountPlan::Shared { user, password } => (user.clone(), password.clone()),
        };
        // The drivers have always sent Basic when there are accounts; `http` classes send
        // credentials only when the workload says how.
        let scheme = match (&class.auth, self) {
            (Some(a), _) => Some(a.scheme),
            (None, AccountPlan::None) => None,
            (None, _) if class.protocol == crate::workload::Protocol::Http => None,
            (None, _) => Some(AuthScheme::Basic),
        };
        let token = class.auth.as_ref().and_then(|a| a.token.clone());
        // Registered for masking where it was read (`password`).
        let auth = scheme.map(|s| Auth::new(s, &user, Secret::held(&password), token));
        Session {
            user,
            password,
            auth,
            context: w.context.as_str().into(),
        }
    }

    /// Create the VU's account when the plan says so (untimed, before the round's clock).
    pub(crate) async fn create_account(
        &self,
        s: &Session,
        conn: &mut Conn,
    ) -> Result<(), SetupError> {
        let AccountPlan::Cmp { admin, .. } = self else {
            return Ok(());
        };
        let mut w = XmlWriter::fragment();
        w.open("user", &[("xmlns", "http://osafoundation.org/cosmo/CMP")])
            .leaf("username", &s.user)
            .leaf("password", &s.password)
            .leaf("firstName", "loadmix")
            .leaf("lastName", &s.user)
            .leaf("email", &format!("{}@loadmix.invalid", s.user))
            .close("user");
        let uri = format!("{}/cmp/user/{}", s.context_path(conn), s.user);
        let fail = |answer: String| SetupError {
            stage: Stage::Account,
            request: format!("PUT {uri} as {}", admin.0),
            answer,
        };
        let admin_auth = HeaderValue::from_str(&basic(&admin.0, &admin.1))
            .map_err(|_| fail("the admin credentials cannot be sent in a header".into()))?;
        let req = Request::builder()
            .method(Method::PUT)
            .uri(uri.as_str())
            .header(hyper::header::AUTHORIZATION, admin_auth)
            .header(hyper::header::CONTENT_TYPE, "text/xml")
            .body(Bytes::from(w.finish()))
            .map_err(|e| fail(format!("cannot build the request: {e}")))?;
        match conn.send(req).await {
            Ok(r) if r.status.as_u16() == 201 || r.status.as_u16() == 204 => Ok(()),
            // Not Cosmo, or a Cosmo that will not let this admin make users: say what to
            // write instead of a bare status.
            Ok(r) if matches!(r.status.as_u16(), 403 | 404 | 405 | 501) => Err(fail(format!(
                "{}: this server makes no accounts through Cosmo's CMP here; for accounts that exist, write accounts: {{ create: shared, username: NAME }} (or --user NAME) with LOADMIX_PASSWORD, or accounts: {{ create: existing, file: USERS }}",
                r.status
            ))),
            Ok(r) => Err(fail(r.status.to_string())),
            Err(e) => Err(fail(e.message)),
        }
    }
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// A sent request: the answer, or the failed outcome to report.
pub(crate) enum Exchange {
    Answer(Response),
    Failed(Outcome),
}

impl Session {
    /// The target's base path followed by the workload's context.
    pub(crate) fn context_path(&self, conn: &Conn) -> String {
        format!("{}{}", conn.endpoint().base_path, self.context)
    }

    /// Send a request (path relative to the target's base) with the VU's credentials.
    pub(crate) async fn send(
        &self,
        conn: &mut Conn,
        method: &str,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Exchange {
        let full = format!("{}{}", conn.endpoint().base_path, path);
        self.send_to(conn, method, &full, headers, body).await
    }

    /// As [`Session::send`], to a path on the server as it is (no base path prepended):
    /// the well-known URIs live at the server's root whatever the target's path.
    pub(crate) async fn send_to(
        &self,
        conn: &mut Conn,
        method: &str,
        full: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Exchange {
        let Ok(m) = Method::from_bytes(method.as_bytes()) else {
            return Exchange::Failed(Outcome::failed(
                ErrorClass::Body,
                format!("'{method}' is not an HTTP method"),
            ));
        };
        let build = |authorization: Option<&HeaderValue>| {
            let mut b = Request::builder().method(m.clone()).uri(full);
            if let Some(a) = authorization {
                b = b.header(hyper::header::AUTHORIZATION, a.clone());
            }
            for (k, v) in headers {
                b = b.header(k, v.clone());
            }
            b.body(body.clone())
        };
        match send_authenticated(conn, self.auth.as_ref(), &m, full, &body, build).await {
            Ok(r) => Exchange::Answer(r),
            Err(o) => Exchange::Failed(o),
        }
    }
}

/// Send a request with the user's credentials, built by `build` around the
/// `Authorization` value to send. A 401 whose challenge tells the user something new (the
/// first Digest nonce, a stale one, the scheme `auto` waited for) sends it once more; the
/// answer then includes both exchanges. A 401 that stands leaves its explanation with the
/// user's [`Auth`] for the failure's detail.
pub(crate) async fn send_authenticated<B>(
    conn: &mut Conn,
    auth: Option<&Auth>,
    method: &Method,
    uri: &str,
    body: &[u8],
    build: B,
) -> Result<Response, Outcome>
where
    B: Fn(Option<&HeaderValue>) -> Result<Request<Bytes>, hyper::http::Error>,
{
    let attempt = |authorization: Option<HeaderValue>| {
        build(authorization.as_ref()).map_err(|e| format!("cannot build {method} {uri}: {e}"))
    };
    let unbuilt = |m: String| Outcome::failed(ErrorClass::Body, m);
    let failed = |e: crate::transport::TransportError| {
        let mut o = Outcome::failed(e.class, format!("{method} {uri}: {}", e.message));
        o.bytes_sent = e.bytes_sent;
        o
    };
    let header = auth.and_then(|a| a.header(method.as_str(), uri, body));
    let first = conn
        .send(attempt(header).map_err(unbuilt)?)
        .await
        .map_err(failed)?;
    let Some(auth) = auth.filter(|_| first.status == hyper::StatusCode::UNAUTHORIZED) else {
        return Ok(first);
    };
    if !auth.challenged(&first.headers) {
        auth.refused(&first.headers);
        return Ok(first);
    }
    let second = conn
        .send(attempt(auth.header(method.as_str(), uri, body)).map_err(unbuilt)?)
        .await
        .map_err(|e| {
            let mut o = failed(e);
            // The challenge was answered on the wire: it counts with the operation.
            o.prior.push(Answer::http(first.status.as_u16()));
            o.bytes_sent += first.bytes_sent;
            o.bytes_received += first.bytes_received;
            o
        })?;
    if second.status == hyper::StatusCode::UNAUTHORIZED {
        auth.refused(&second.headers);
    }
    Ok(second.after(first))
}

impl Outcome {
    pub(crate) fn failed(class: ErrorClass, detail: String) -> Outcome {
        Outcome {
            error: Some(class),
            detail: Some(detail),
            ..Outcome::default()
        }
    }

    /// The outcome of an answer: success when its status is one of `expected`.
    pub(crate) fn of(resp: &Response, expected: &[u16], what: &str) -> Outcome {
        let status = resp.status.as_u16();
        let ok = expected.contains(&status);
        Outcome {
            label: None,
            answer: Answer::http(status),
            error: (!ok).then_some(ErrorClass::Status),
            detail: (!ok).then(|| format!("{what} -> {status}")),
            bytes_sent: resp.bytes_sent,
            bytes_received: resp.bytes_received,
            latency: resp.elapsed,
            longest: resp.elapsed,
            prior: resp.earlier.iter().map(|&s| Answer::http(s)).collect(),
            handshake: resp.handshake,
            steps: Vec::new(),
        }
    }

    /// Mark a 2xx whose body did not parse.
    pub(crate) fn body_error(mut self, detail: String) -> Outcome {
        self.error = Some(ErrorClass::Body);
        self.detail = Some(detail);
        self
    }

    pub(crate) fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// Add a second request's cost to this outcome (multi-request operations).
    pub(crate) fn add_cost(&mut self, other: &Outcome) {
        self.prior.extend(
            other
                .prior
                .iter()
                .copied()
                .chain(Some(other.answer).filter(|a| !a.is_none())),
        );
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.latency += other.latency;
        self.longest = self.longest.max(other.longest);
        self.handshake = match (self.handshake, other.handshake) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            (a, b) => a.or(b),
        };
    }
}
