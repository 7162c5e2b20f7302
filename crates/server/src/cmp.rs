//! Cosmo Management Protocol, the part the stress test used: `PUT {ctx}/cmp/user/{name}` as
//! the admin creates (201) or replaces (204) an account from a `<user>` document.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::http::*;
use super::store::User;
use loadmix_formats::xml;

const CMP_NS: &str = "http://osafoundation.org/cosmo/CMP";

pub(crate) async fn put_user(
    State(st): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = match st.authenticate(&headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !caller.admin && !st.settings.no_auth {
        return text(
            StatusCode::FORBIDDEN,
            "only the administrator creates accounts",
        );
    }
    if !safe_segment(&name) || name == st.settings.admin_user {
        return bad_segment();
    }
    // HTTP Basic credentials are `user:password`: a user name with a colon, or a control
    // character, could never log in.
    if name.contains(':') || name.chars().any(char::is_control) {
        return text(
            StatusCode::BAD_REQUEST,
            "a user name cannot contain ':' or control characters (it could never log in)",
        );
    }
    if let Err(r) = require_length(&headers) {
        return r;
    }
    let doc = match std::str::from_utf8(&body)
        .map_err(|e| e.to_string())
        .and_then(|t| xml::parse(t).map_err(String::from))
    {
        Ok(d) => d,
        Err(m) => return text(StatusCode::BAD_REQUEST, m),
    };
    if !doc.is(CMP_NS, "user") {
        return text(
            StatusCode::BAD_REQUEST,
            "expected a <user> element in the CMP namespace",
        );
    }
    let field = |n: &str| {
        doc.child(CMP_NS, n)
            .map(|e| e.text.trim().to_string())
            .unwrap_or_default()
    };
    let username = field("username");
    if username != name {
        return text(
            StatusCode::BAD_REQUEST,
            format!("username '{username}' does not match the URL ('{name}')"),
        );
    }
    let password = field("password");
    if password.is_empty() {
        return text(StatusCode::BAD_REQUEST, "a password is required");
    }
    let user = User {
        name,
        password,
        first_name: field("firstName"),
        last_name: field("lastName"),
        email: field("email"),
    };
    match st.store.put_user(&user) {
        Ok(true) => StatusCode::CREATED.into_response(),
        Ok(false) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => store_error(e),
    }
}
