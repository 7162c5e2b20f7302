//! CalDAV scheduling (RFC 6638) on the embedded server, on both stores, as two users see
//! it: an invitation reaches the attendee's inbox and calendar, the answer reaches the
//! organizer's, a cancellation removes the copy; Schedule-Tags move with the organizer's
//! changes only; the outbox answers free-busy requests; the mailboxes refuse what a
//! calendar would take.

use crate::server::{Client, Resp, TEXT_CAL, each_store};

fn invitation(summary: &str, bob_partstat: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:meet-1\r\n\
         DTSTAMP:20300101T000000Z\r\nDTSTART:20300105T100000Z\r\nDTEND:20300105T110000Z\r\n\
         SUMMARY:{summary}\r\nX-LOADMIX-STAMP:run/org.0.0/1/meet-1\r\n\
         ORGANIZER;CN=Alice:mailto:alice@localhost\r\n\
         ATTENDEE;PARTSTAT=ACCEPTED:mailto:alice@localhost\r\n\
         ATTENDEE;CN=\"Bob; the: builder\";PARTSTAT={bob_partstat};RSVP=TRUE:mailto:bob@localhost\r\n\
         ATTENDEE;PARTSTAT=NEEDS-ACTION:mailto:stranger@example.com\r\n\
         END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

/// Alice makes her calendar `work` and invites Bob to `meet-1` in it.
fn invite(alice: &mut Client) -> Resp {
    let r = alice.send("MKCALENDAR", "/cosmo/dav/alice/work/", &[], "");
    assert_eq!(r.status, 201, "{}", r.body);
    let put = alice.send(
        "PUT",
        "/cosmo/dav/alice/work/meet.ics",
        &[TEXT_CAL],
        &invitation("Plan", "NEEDS-ACTION"),
    );
    assert_eq!(put.status, 201, "{}", put.body);
    put
}

/// The calendar texts of every resource in a collection, by depth-1 PROPFIND and GET.
fn contents(who: &mut Client, col: &str) -> Vec<(String, String)> {
    let r = who.send("PROPFIND", col, &[("depth", "1")], "");
    assert_eq!(r.status, 207, "{col}: {}", r.body);
    let hrefs: Vec<String> = r
        .body
        .split("<D:href>")
        .skip(1)
        .filter_map(|s| s.split('<').next())
        .filter(|h| h.ends_with(".ics"))
        .map(str::to_string)
        .collect();
    hrefs
        .into_iter()
        .map(|h| {
            let g = who.get(&h);
            assert_eq!(g.status, 200, "{h}");
            (h, g.body)
        })
        .collect()
}

fn methods(msgs: &[(String, String)]) -> Vec<String> {
    let mut m: Vec<String> = msgs
        .iter()
        .filter_map(|(_, b)| {
            b.lines()
                .find_map(|l| l.strip_prefix("METHOD:"))
                .map(|m| m.trim().to_string())
        })
        .collect();
    m.sort();
    m
}

#[test]
fn an_invitation_its_answer_and_its_cancellation_reach_the_other_user() {
    each_store(|_, _, alice, bob| {
        let o = alice.send("OPTIONS", "/cosmo/dav/alice/", &[], "");
        assert!(o.header("dav").contains("calendar-auto-schedule"));
        let p = alice.send(
            "PROPFIND",
            "/cosmo/dav/alice/",
            &[("depth", "0")],
            r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:schedule-inbox-URL/><C:schedule-outbox-URL/><C:calendar-user-address-set/></D:prop></D:propfind>"#,
        );
        for want in [
            "/cosmo/dav/alice/inbox/",
            "/cosmo/dav/alice/outbox/",
            "mailto:alice@localhost",
        ] {
            assert!(p.body.contains(want), "{want}: {}", p.body);
        }
        assert_eq!(
            bob.send("MKCALENDAR", "/cosmo/dav/bob/home/", &[], "")
                .status,
            201
        );

        // The organizer invites: a REQUEST in Bob's inbox, the event in his calendar.
        let put = invite(alice);
        let organizer_tag = put.header("schedule-tag").to_string();
        assert!(
            !organizer_tag.is_empty(),
            "a scheduling object gets a Schedule-Tag"
        );
        let inbox = contents(bob, "/cosmo/dav/bob/inbox/");
        assert_eq!(methods(&inbox), ["REQUEST"]);
        assert!(inbox[0].1.contains("X-LOADMIX-STAMP:run/org.0.0/1/meet-1"));
        let copy = bob.get("/cosmo/dav/bob/home/meet-1.ics");
        assert_eq!(copy.status, 200, "the copy is in Bob's only calendar");
        assert!(!copy.body.contains("METHOD:"), "a calendar keeps no METHOD");
        let bob_tag = copy.header("schedule-tag").to_string();
        assert!(!bob_tag.is_empty());

        // Bob accepts: his tag stays, Alice gets a REPLY and her copy says ACCEPTED.
        let stale = bob.send(
            "PUT",
            "/cosmo/dav/bob/home/meet-1.ics",
            &[TEXT_CAL, ("if-schedule-tag-match", "\"nope\"")],
            &invitation("Plan", "ACCEPTED"),
        );
        assert_eq!(stale.status, 412);
        let accept = bob.send(
            "PUT",
            "/cosmo/dav/bob/home/meet-1.ics",
            &[TEXT_CAL, ("if-schedule-tag-match", &bob_tag)],
            &invitation("Plan", "ACCEPTED"),
        );
        assert_eq!(accept.status, 204, "{}", accept.body);
        assert_eq!(
            accept.header("schedule-tag"),
            bob_tag,
            "a reply moves no tag"
        );
        let replies = contents(alice, "/cosmo/dav/alice/inbox/");
        assert_eq!(methods(&replies), ["REPLY"]);
        assert!(
            replies[0]
                .1
                .contains("PARTSTAT=ACCEPTED:mailto:bob@localhost")
        );
        let mine = alice.get("/cosmo/dav/alice/work/meet.ics");
        assert!(
            mine.body
                .contains("CN=\"Bob; the: builder\";PARTSTAT=ACCEPTED:mailto:bob@localhost"),
            "{}",
            mine.body
        );
        assert_eq!(mine.header("schedule-tag"), organizer_tag);

        // The organizer changes the event: a new tag, Bob's answer kept in his copy.
        let moved = alice.send(
            "PUT",
            "/cosmo/dav/alice/work/meet.ics",
            &[TEXT_CAL],
            &invitation("Plan, moved", "NEEDS-ACTION"),
        );
        assert_eq!(moved.status, 204);
        assert_ne!(moved.header("schedule-tag"), organizer_tag);
        let copy = bob.get("/cosmo/dav/bob/home/meet-1.ics");
        assert!(
            copy.body.contains("Plan, moved") && copy.body.contains("PARTSTAT=ACCEPTED:mailto:bob")
        );
        assert_ne!(copy.header("schedule-tag"), bob_tag);

        // The organizer deletes it: a CANCEL, and Bob's copy is gone.
        assert_eq!(
            alice
                .send("DELETE", "/cosmo/dav/alice/work/meet.ics", &[], "")
                .status,
            204
        );
        assert_eq!(
            methods(&contents(bob, "/cosmo/dav/bob/inbox/")),
            ["CANCEL", "REQUEST", "REQUEST"]
        );
        assert_eq!(bob.get("/cosmo/dav/bob/home/meet-1.ics").status, 404);
    });
}

#[test]
fn an_attendee_who_deletes_declines_and_mailboxes_refuse_calendar_writes() {
    each_store(|_, _, alice, bob| {
        invite(alice);
        // Bob had no calendar: one was made for him.
        assert_eq!(bob.get("/cosmo/dav/bob/calendar/meet-1.ics").status, 200);
        assert_eq!(
            bob.send("DELETE", "/cosmo/dav/bob/calendar/meet-1.ics", &[], "")
                .status,
            204
        );
        let mine = alice.get("/cosmo/dav/alice/work/meet.ics");
        assert!(
            mine.body.contains("PARTSTAT=DECLINED:mailto:bob@localhost"),
            "{}",
            mine.body
        );

        let inbox_item = format!(
            "/cosmo/dav/alice/inbox/{}",
            contents(alice, "/cosmo/dav/alice/inbox/")[0]
                .0
                .rsplit('/')
                .next()
                .unwrap()
        );
        for (method, path) in [
            ("PUT", "/cosmo/dav/alice/inbox/x.ics"),
            ("MKCALENDAR", "/cosmo/dav/alice/outbox/"),
            ("DELETE", "/cosmo/dav/alice/inbox/"),
            ("PUT", "/cosmo/dav/alice/outbox/x.ics"),
        ] {
            let r = alice.send(method, path, &[TEXT_CAL], &invitation("x", "ACCEPTED"));
            assert!(
                matches!(r.status, 403 | 404),
                "{method} {path}: {}",
                r.status
            );
        }
        assert_eq!(
            bob.get(&inbox_item).status,
            403,
            "another's inbox is private"
        );
        assert_eq!(
            alice.send("DELETE", &inbox_item, &[], "").status,
            204,
            "processed"
        );
    });
}

/// An event of `uid` in someone's calendar, organized by `organizer`, naming `attendees`.
fn event_of(uid: &str, summary: &str, organizer: Option<&str>, attendees: &[&str]) -> String {
    let mut t = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\n\
         DTSTAMP:20300101T000000Z\r\nDTSTART:20300105T100000Z\r\nDTEND:20300105T110000Z\r\n\
         SUMMARY:{summary}\r\n"
    );
    if let Some(o) = organizer {
        t.push_str(&format!("ORGANIZER:mailto:{o}@localhost\r\n"));
    }
    for a in attendees {
        t.push_str(&format!(
            "ATTENDEE;PARTSTAT=ACCEPTED:mailto:{a}@localhost\r\n"
        ));
    }
    t.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
    t
}

/// What someone writes in their own calendar reaches another's only as an invitation
/// to the other's copy of that organizer's event: an event the other made with the same
/// UID (private, or organized by someone else) is never overwritten, answered for, nor
/// deleted by it (RFC 6638 §3.2, §8).
#[test]
fn no_invitation_touches_what_the_attendee_made() {
    each_store(|_, _, alice, bob| {
        let own = "/cosmo/dav/alice/home/private.ics";
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/home/", &[], "")
                .status,
            201
        );
        let private = event_of("alice-private-uid-1", "Alice's own", None, &[]);
        assert_eq!(alice.send("PUT", own, &[TEXT_CAL], &private).status, 201);
        assert_eq!(bob.get(own).status, 403, "not Bob's to read");
        assert_eq!(
            bob.send("MKCALENDAR", "/cosmo/dav/bob/mine/", &[], "")
                .status,
            201
        );
        let bobs = "/cosmo/dav/bob/mine/x.ics";

        // Bob "invites" Alice to an event of that UID, then drops her, then deletes it.
        let forged = event_of(
            "alice-private-uid-1",
            "OVERWRITTEN BY BOB",
            Some("bob"),
            &["alice"],
        );
        assert_eq!(bob.send("PUT", bobs, &[TEXT_CAL], &forged).status, 201);
        let mine = alice.get(own);
        assert_eq!(mine.status, 200);
        assert!(mine.body.contains("Alice's own"), "{}", mine.body);
        let dropped = event_of("alice-private-uid-1", "dropped", Some("bob"), &[]);
        assert_eq!(bob.send("PUT", bobs, &[TEXT_CAL], &dropped).status, 204);
        assert_eq!(bob.send("PUT", bobs, &[TEXT_CAL], &forged).status, 204);
        assert_eq!(bob.send("DELETE", bobs, &[], "").status, 204);
        let mine = alice.get(own);
        assert_eq!(mine.status, 200, "Alice's event survives Bob's deletion");
        assert!(mine.body.contains("Alice's own") && !mine.body.contains("ATTENDEE"));

        // Bob "answers" an event Alice organizes that never named him.
        let alices = "/cosmo/dav/alice/home/meet.ics";
        let meeting = event_of("meet-9", "Alice's meeting", Some("alice"), &["alice"]);
        assert_eq!(alice.send("PUT", alices, &[TEXT_CAL], &meeting).status, 201);
        let answer = event_of("meet-9", "Alice's meeting", Some("alice"), &["bob"]);
        assert_eq!(
            bob.send("PUT", "/cosmo/dav/bob/mine/y.ics", &[TEXT_CAL], &answer)
                .status,
            201
        );
        let m = alice.get(alices);
        assert!(!m.body.contains("mailto:bob@localhost"), "{}", m.body);
        assert_eq!(
            bob.send("DELETE", "/cosmo/dav/bob/mine/y.ics", &[], "")
                .status,
            204
        );
        let m = alice.get(alices);
        assert!(!m.body.contains("DECLINED"), "{}", m.body);
        assert!(
            methods(&contents(alice, "/cosmo/dav/alice/inbox/")).is_empty(),
            "nothing from Bob reached Alice's inbox"
        );
    });
}

/// A component with more attendees than the server schedules is refused with the
/// precondition RFC 4791 names, not scheduled in part.
#[test]
fn an_event_past_the_attendee_bound_is_refused_not_cut() {
    each_store(|_, _, alice, _| {
        assert_eq!(
            alice
                .send("MKCALENDAR", "/cosmo/dav/alice/big/", &[], "")
                .status,
            201
        );
        let p = alice.send(
            "PROPFIND",
            "/cosmo/dav/alice/big/",
            &[("depth", "0")],
            r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:max-attendees-per-instance/></D:prop></D:propfind>"#,
        );
        assert!(p.body.contains(">256<"), "{}", p.body);
        let names: Vec<String> = (0..257).map(|i| format!("u{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let many = event_of("crowd-1", "Everyone", Some("alice"), &refs);
        let r = alice.send("PUT", "/cosmo/dav/alice/big/crowd.ics", &[TEXT_CAL], &many);
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(r.body.contains("max-attendees-per-instance"), "{}", r.body);
        let fits = event_of("crowd-1", "Everyone", Some("alice"), &refs[..256]);
        let r = alice.send("PUT", "/cosmo/dav/alice/big/crowd.ics", &[TEXT_CAL], &fits);
        assert_eq!(r.status, 201, "{}", r.body);
    });
}

#[test]
fn the_outbox_answers_free_busy_for_each_recipient() {
    each_store(|_, _, alice, bob| {
        assert_eq!(
            bob.send("MKCALENDAR", "/cosmo/dav/bob/home/", &[], "")
                .status,
            201
        );
        let busy = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:b1\r\nDTSTAMP:20300101T000000Z\r\nDTSTART:20300105T090000Z\r\nDTEND:20300105T100000Z\r\nSUMMARY:busy\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        assert_eq!(
            bob.send("PUT", "/cosmo/dav/bob/home/b1.ics", &[TEXT_CAL], busy)
                .status,
            201
        );
        let ask = |organizer: &str| {
            format!(
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nMETHOD:REQUEST\r\nBEGIN:VFREEBUSY\r\nUID:fb1\r\n\
                 DTSTAMP:20300101T000000Z\r\nDTSTART:20300105T000000Z\r\nDTEND:20300106T000000Z\r\n\
                 ORGANIZER:{organizer}\r\nATTENDEE:mailto:bob@localhost\r\nATTENDEE:mailto:nobody@localhost\r\n\
                 END:VFREEBUSY\r\nEND:VCALENDAR\r\n"
            )
        };
        let r = alice.send(
            "POST",
            "/cosmo/dav/alice/outbox/",
            &[TEXT_CAL],
            &ask("mailto:alice@localhost"),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("2.0;Success") && r.body.contains("3.7;Invalid calendar user"));
        assert!(
            r.body
                .contains("FREEBUSY;FBTYPE=BUSY:20300105T090000Z/20300105T100000Z"),
            "{}",
            r.body
        );
        let spoof = alice.send(
            "POST",
            "/cosmo/dav/alice/outbox/",
            &[TEXT_CAL],
            &ask("mailto:bob@localhost"),
        );
        assert_eq!(spoof.status, 403, "one asks in one's own name");
        let garbage = alice.send(
            "POST",
            "/cosmo/dav/alice/outbox/",
            &[TEXT_CAL],
            "BEGIN:VCALENDAR\r\n",
        );
        assert_eq!(garbage.status, 400);
        assert_eq!(
            bob.send(
                "POST",
                "/cosmo/dav/alice/outbox/",
                &[TEXT_CAL],
                &ask("mailto:bob@localhost")
            )
            .status,
            403
        );
    });
}

#[test]
fn taking_a_message_out_of_the_inbox_answers_nothing() {
    each_store(|_, _, alice, bob| {
        invite(alice);
        let msgs = contents(bob, "/cosmo/dav/bob/inbox/");
        assert_eq!(methods(&msgs), ["REQUEST"]);
        let item = msgs[0].0.rsplit('/').next().unwrap().to_string();
        let path = format!("/cosmo/dav/bob/inbox/{item}");
        assert_eq!(bob.send("DELETE", &path, &[], "").status, 204);
        assert!(
            contents(alice, "/cosmo/dav/alice/inbox/").is_empty(),
            "a request read is no answer"
        );
        let mine = alice.get("/cosmo/dav/alice/work/meet.ics");
        assert!(
            mine.body
                .contains("NEEDS-ACTION;RSVP=TRUE:mailto:bob@localhost")
        );
        assert_eq!(bob.get("/cosmo/dav/bob/calendar/meet-1.ics").status, 200);
    });
}

/// Organizers invite and cancel, attendees read their inbox and answer a think time after
/// they see an invitation, on the embedded server: every request is one the server
/// answered, every acknowledged invitation and cancellation is held against each
/// attendee it names and every answer against its organizer, and nothing is seen twice
/// or out of place.
fn invitation_workload(target: &str) -> String {
    r#"target: TARGET
context: /cosmo
run: { duration: 4s, rounds: 2, seed: 6638, timeout: 30s, warmup: 0s }
accounts: { create: cmp }
teams:
  - name: t
    count: 2
users:
  - class: organizers
    protocol: caldav
    count: 2
    think: 300ms
    params: { team: t }
    mix: { invite: 3, inbox: 2, cancel: 1, freebusy: 1 }
  - class: attendees
    protocol: caldav
    count: 4
    think: 200ms
    params: { team: t }
    ops: { inbox: {}, answer: { params: { accept: 0.5 } } }
    behaviours:
      attend:
        start: inbox
        states:
          inbox: { inbox: 1, answer: { p: 4, think: 100ms, when: { invited: true } } }
          answer: { inbox: 1, answer: { p: 4, think: 100ms, when: { invited: true } } }
"#
    .replace("TARGET", target)
}

#[test]
fn invitations_and_their_answers_are_each_seen_by_whom_they_name() {
    use crate::common::*;
    use loadmix::embedded::{self as server, ServerConfig};
    let _alone = alone();
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let (r, _out) =
        crate::teams::run_against(&srv, "invite.yaml", &invitation_workload(&srv.url()));
    let v = r.visibility.as_ref().expect("a visibility section");
    let row = |name: &str| v.by_write.iter().find(|w| w.op == name).unwrap();
    let invites = op(&r, "organizers.invite").successes;
    let answers = op(&r, "attendees.answer").successes;
    assert!(invites > 10 && answers > 5, "{invites} {answers}");
    // Two attendees a team, each named by every invitation of its organizer.
    assert_eq!(row("organizers.invite").writes, invites);
    assert_eq!(row("organizers.invite").expected, 2 * invites);
    // An answer is for its organizer alone, and each invitation gets at most one from
    // each attendee.
    assert_eq!(row("attendees.answer").writes, answers);
    assert_eq!(row("attendees.answer").expected, answers);
    assert!(answers <= 2 * invites);
    // Free-busy queries about the team's others, each answered for every one asked.
    assert!(op(&r, "organizers.freebusy").successes > 0);
    // A cancellation is for the attendees of the invitation it withdraws, who see it in
    // the CANCEL their inbox shows; an answer to it that comes after finds no copy.
    let cancels = op(&r, "organizers.cancel").successes;
    assert!(cancels > 0, "{cancels}");
    assert_eq!(row("organizers.cancel").writes, cancels);
    assert_eq!(row("organizers.cancel").expected, 2 * cancels);
    assert!(row("organizers.cancel").seen > 0);
    assert_eq!(v.all.seen + v.all.superseded + v.all.unseen, v.all.expected);
    assert_eq!(v.all.duplicated, 0, "each message once");
    assert_eq!(v.unacknowledged + v.unexpected + v.foreign + v.garbled, 0);
    // What the organizers' inboxes first showed are the answers; the attendees', the
    // invitations.
    let seen_by = |name: &str| v.by_observer.iter().find(|o| o.op == name).unwrap();
    assert_eq!(
        seen_by("organizers.inbox").seen,
        row("attendees.answer").seen
    );
    assert_eq!(
        seen_by("attendees.inbox").seen,
        row("organizers.invite").seen + row("organizers.cancel").seen
    );
    // Only a round's last poll gap can leave an invitation unseen.
    let gap = seen_by("attendees.inbox").poll_interval_ms.unwrap();
    let lat = row("organizers.invite").latency_ms.as_ref().unwrap();
    assert!(lat.mean < 2.0 * gap, "{} against {gap}", lat.mean);
}
