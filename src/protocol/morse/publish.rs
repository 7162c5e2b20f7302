//! Publishing a Morse Code collection: the preflight's probe, a user's first collection
//! and a team's shared one (asking for a read-write ticket), and the ticket and token its
//! answer carries.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use rand::rngs::Xoshiro256PlusPlus;

use super::{TICKET_ISSUED, TICKET_TYPE, eim_header, token_of};
use crate::formats::eim;
use crate::protocol::contract::Preflight;
use crate::protocol::session::{Exchange, Session};
use crate::protocol::{Outcome, ProtocolError, VuIds, data};
use crate::transport::{Conn, Response};

pub(crate) async fn preflight_publish(cx: &Preflight<'_>) -> Result<(), ProtocolError> {
    let (s, mut conn) = crate::protocol::over_http::probe_with_account(cx).await?;
    let mut rng = <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(1);
    let (o, created) = publish(&s, &cx.ids, &mut conn, &mut rng, 0, &[201]).await;
    let Some((uid, _, _)) = created else {
        let why = s.auth.as_ref().and_then(|a| a.take_refusal());
        return Err(cx.failed(
            format!("Morse Code publish (PUT {}/mc/collection/…)", s.context),
            match why {
                Some(w) => format!("{}: {w}", o.detail.unwrap_or_default()),
                None => o.detail.unwrap_or_default(),
            },
        ));
    };
    let path = format!("{}/mc/collection/{uid}", s.context);
    match s.send(&mut conn, "DELETE", &path, &[], Bytes::new()).await {
        Exchange::Answer(r) if r.status.as_u16() == 204 => Ok(()),
        Exchange::Answer(r) => Err(cx.failed(format!("DELETE {path}"), r.status.to_string())),
        Exchange::Failed(o) => {
            Err(cx.failed(format!("DELETE {path}"), o.detail.unwrap_or_default()))
        }
    }
}

pub(crate) async fn publish(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
    expect: &[u16],
) -> (Outcome, Option<(String, Vec<String>, String)>) {
    let (o, p) = publish_with(s, ids, conn, rng, n, expect, false).await;
    (o, p.map(|p| (p.uid, p.items, p.token)))
}

/// A collection published: its uid, its items, its first token, and the read-write
/// ticket the server issued when one was asked for.
pub(super) struct Published {
    pub(super) uid: String,
    pub(super) items: Vec<String>,
    pub(super) token: String,
    pub(super) ticket: Option<String>,
}

/// Publish `n + 1` items, asking for a read-write ticket when `ticket` (Cosmo's
/// `X-MorseCode-TicketType`); a ticket asked for and not issued fails the publish.
pub(super) async fn publish_with(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
    expect: &[u16],
    ticket: bool,
) -> (Outcome, Option<Published>) {
    let uid = data::uid(rng, &ids.run_id);
    let mut items = Vec::with_capacity(n + 1);
    let mut sets = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        let item = data::uid(rng, &ids.run_id);
        sets.push(data::eim_records(rng, &item, &s.user, true));
        items.push(item);
    }
    let name = data::text(rng);
    let doc = eim::write_eimml(
        &uid,
        &name,
        items
            .iter()
            .zip(&sets)
            .map(|(u, r)| (u.as_str(), Some(r.as_slice()))),
    );
    let path = format!("{}/mc/collection/{uid}", s.context);
    let mut headers = vec![eim_header()];
    if ticket {
        headers.push((
            HeaderName::from_static(TICKET_TYPE),
            HeaderValue::from_static("read-write"),
        ));
    }
    let r = match s.send(conn, "PUT", &path, &headers, Bytes::from(doc)).await {
        Exchange::Answer(r) => r,
        Exchange::Failed(o) => return (o, None),
    };
    let o = Outcome::of(&r, expect, &format!("PUT {path}"));
    if !o.is_ok() {
        return (o, None);
    }
    let Some(token) = token_of(&r) else {
        let why = format!("PUT {path}: no X-MorseCode-SyncToken in the answer");
        return (o.body_error(why), None);
    };
    let issued = ticket_of(&r, "read-write");
    if ticket && issued.is_none() {
        let why = format!("PUT {path}: no read-write X-MorseCode-Ticket in the answer");
        return (o.body_error(why), None);
    }
    let p = Published {
        uid,
        items,
        token,
        ticket: issued,
    };
    (o, Some(p))
}

/// The key of the `kind` ticket a publish's answer issued: `X-MorseCode-Ticket: KIND=KEY`,
/// once per ticket or several to a line, comma-separated. A key is a token of printable
/// ASCII, at most 256 bytes; anything else is not one.
pub(super) fn ticket_of(r: &Response, kind: &str) -> Option<String> {
    r.headers
        .get_all(TICKET_ISSUED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| t.trim().split_once('='))
        .find(|(k, _)| *k == kind)
        .map(|(_, key)| key.to_string())
        .filter(|k| !k.is_empty() && k.len() <= 256 && k.bytes().all(|b| b.is_ascii_graphic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_read_from_any_of_its_headers_and_only_when_it_is_one() {
        let r = Response::canned(
            201,
            &[
                ("x-morsecode-ticket", "read-only=ro1"),
                ("x-morsecode-ticket", "read-write=rw1, free-busy=fb1"),
            ],
            "",
        );
        assert_eq!(ticket_of(&r, "read-write").as_deref(), Some("rw1"));
        assert_eq!(ticket_of(&r, "read-only").as_deref(), Some("ro1"));
        assert_eq!(ticket_of(&r, "owner"), None);
        // Empty, too long, or not printable ASCII: not a key.
        for bad in [
            "read-write=",
            "read-write=a b",
            &format!("read-write={}", "k".repeat(257)),
        ] {
            let r = Response::canned(201, &[("x-morsecode-ticket", bad)], "");
            assert_eq!(ticket_of(&r, "read-write"), None, "{bad}");
        }
    }

    #[test]
    fn a_sync_token_is_taken_only_when_the_answer_has_one() {
        let with = Response::canned(200, &[("x-morsecode-synctoken", "t42")], "");
        assert_eq!(token_of(&with).as_deref(), Some("t42"));
        let empty = Response::canned(200, &[("x-morsecode-synctoken", "")], "");
        assert_eq!(token_of(&empty), None);
        assert_eq!(token_of(&Response::canned(200, &[], "")), None);
    }
}
