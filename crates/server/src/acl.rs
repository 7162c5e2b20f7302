//! Sharing a calendar (RFC 3744 `ACL`): its owner grants read, or read and write, to
//! other users by their principal, or to every authenticated user. The grants are kept
//! with the collection, as one of its properties, so both stores keep them; the owner
//! always has every right, and nobody else has any the grants do not give.

use loadmix_formats::dav::{DAV, href_path};
use loadmix_formats::xml::El;

use super::http::{percent_decode, safe_segment};

/// The collection property the grants are kept in (not writable by PROPPATCH).
pub(crate) const NS: &str = "urn:loadmix:acl";
pub(crate) const KEY: &str = "{urn:loadmix:acl}grants";
/// Grants one collection keeps.
const MAX_GRANTS: usize = 1_000;
/// Who `authenticated` is in the kept form: a `/`, which no user name has (a user may
/// be named `*`, and a grant to them must not reach everyone).
const ANYONE: &str = "/authenticated";

/// What one grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Right {
    Read,
    Write,
}

/// Why an ACL request was refused: the RFC 3744 precondition, and a word on it.
#[derive(Debug, PartialEq)]
pub(crate) struct Refused {
    pub condition: &'static str,
    pub why: String,
}

fn refused(condition: &'static str, why: impl Into<String>) -> Refused {
    Refused {
        condition,
        why: why.into(),
    }
}

/// The grants of an `ACL` body (`prefix` is the principals' path, `{ctx}/dav`), in the
/// kept form: one `user:r` or `user:rw` a line, [`ANYONE`] for every authenticated user.
pub(crate) fn parse(root: &El, prefix: &str) -> Result<String, Refused> {
    if !root.is(DAV, "acl") {
        return Err(refused("", "expected a DAV:acl body"));
    }
    let mut out = String::new();
    for (n, ace) in root.children_named(DAV, "ace").enumerate() {
        if n >= MAX_GRANTS {
            return Err(refused("", format!("more than {MAX_GRANTS} ACEs")));
        }
        if ace.child(DAV, "deny").is_some() {
            return Err(refused("grant-only", "only grants are supported"));
        }
        let who = principal(ace, prefix)?;
        let rights = ace
            .child(DAV, "grant")
            .ok_or_else(|| refused("", "an ACE without DAV:grant"))?
            .children_named(DAV, "privilege")
            .flat_map(|p| p.children.iter())
            .map(|p| match (p.ns.as_str(), p.name.as_str()) {
                (DAV, "read" | "read-current-user-privilege-set") => Ok(Right::Read),
                (DAV, "write" | "write-content" | "bind" | "unbind" | "all") => Ok(Right::Write),
                _ => Err(refused(
                    "not-supported-privilege",
                    format!("privilege {} is not supported", p.name),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mode = match rights.contains(&Right::Write) {
            true => "rw",
            false => "r",
        };
        out.push_str(&format!("{who}:{mode}\n"));
    }
    Ok(out)
}

/// The user an ACE's principal names, or [`ANYONE`].
fn principal(ace: &El, prefix: &str) -> Result<String, Refused> {
    let p = ace
        .child(DAV, "principal")
        .ok_or_else(|| refused("", "an ACE without DAV:principal"))?;
    if p.child(DAV, "authenticated").is_some() || p.child(DAV, "all").is_some() {
        return Ok(ANYONE.into());
    }
    let href = p
        .child(DAV, "href")
        .map(|h| href_path(h.text.trim()))
        .ok_or_else(|| {
            refused(
                "recognized-principal",
                "a principal that is neither href nor authenticated",
            )
        })?;
    let user = href
        .strip_prefix(prefix)
        .map(|r| r.trim_matches('/'))
        .and_then(percent_decode)
        .filter(|u| safe_segment(u))
        .ok_or_else(|| {
            refused(
                "recognized-principal",
                format!("{href} is no principal here"),
            )
        })?;
    Ok(user)
}

/// Whether the kept `grants` let `user` do what needs `right`.
pub(crate) fn permits(grants: Option<&String>, user: &str, right: Right) -> bool {
    grants.is_some_and(|g| {
        g.lines().any(|l| {
            let Some((who, mode)) = l.rsplit_once(':') else {
                return false;
            };
            (who == user || who == ANYONE) && (right == Right::Read || mode == "rw")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_and_permit() {
        let body = r#"<D:acl xmlns:D="DAV:"><D:ace><D:principal><D:href>/c/dav/bob/</D:href></D:principal><D:grant><D:privilege><D:read/></D:privilege></D:grant></D:ace><D:ace><D:principal><D:href>http://h/c/dav/carol/</D:href></D:principal><D:grant><D:privilege><D:read/></D:privilege><D:privilege><D:write/></D:privilege></D:grant></D:ace></D:acl>"#;
        let root = loadmix_formats::xml::parse(body).unwrap();
        let g = parse(&root, "/c/dav").unwrap();
        assert_eq!(g, "bob:r\ncarol:rw\n");
        assert!(permits(Some(&g), "bob", Right::Read));
        assert!(!permits(Some(&g), "bob", Right::Write));
        assert!(permits(Some(&g), "carol", Right::Write));
        assert!(!permits(Some(&g), "dave", Right::Read));
        assert!(!permits(None, "bob", Right::Read));
        // A user named `*`, by name or escaped, is one user, not everyone.
        for star in ["/c/dav/*/", "/c/dav/%2A/"] {
            let body = format!(
                r#"<D:acl xmlns:D="DAV:"><D:ace><D:principal><D:href>{star}</D:href></D:principal><D:grant><D:privilege><D:read/></D:privilege></D:grant></D:ace></D:acl>"#
            );
            let g = parse(&loadmix_formats::xml::parse(&body).unwrap(), "/c/dav").unwrap();
            assert!(permits(Some(&g), "*", Right::Read));
            assert!(!permits(Some(&g), "dave", Right::Read), "{g}");
        }
    }

    #[test]
    fn deny_and_strangers_are_refused() {
        let deny = r#"<D:acl xmlns:D="DAV:"><D:ace><D:principal><D:authenticated/></D:principal><D:deny><D:privilege><D:read/></D:privilege></D:deny></D:ace></D:acl>"#;
        let root = loadmix_formats::xml::parse(deny).unwrap();
        assert_eq!(parse(&root, "/c/dav").unwrap_err().condition, "grant-only");
        let stranger = r#"<D:acl xmlns:D="DAV:"><D:ace><D:principal><D:href>/elsewhere/x/</D:href></D:principal><D:grant><D:privilege><D:read/></D:privilege></D:grant></D:ace></D:acl>"#;
        let root = loadmix_formats::xml::parse(stranger).unwrap();
        assert_eq!(
            parse(&root, "/c/dav").unwrap_err().condition,
            "recognized-principal"
        );
        let anyone = r#"<D:acl xmlns:D="DAV:"><D:ace><D:principal><D:authenticated/></D:principal><D:grant><D:privilege><D:all/></D:privilege></D:grant></D:ace></D:acl>"#;
        let g = parse(&loadmix_formats::xml::parse(anyone).unwrap(), "/c/dav").unwrap();
        assert!(permits(Some(&g), "zed", Right::Write));
    }
}
