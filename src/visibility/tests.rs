//! The visibility books: stamps, settling, the latency's split and the poll interval.
use super::*;

fn who(vu: u32) -> Who {
    Producer {
        class: 0,
        round: 1,
        vu,
    }
}

const WINDOW: Window = Window {
    from_us: 0,
    to_us: 10_000,
};

/// One team of these observers, each class of one user.
fn team_of(who: Vec<Who>) -> Audiences<impl Fn(TeamId) -> Vec<Who>, impl Fn(u16) -> u64> {
    Audiences {
        observers: move |_| who.clone(),
        users: |_| 1,
    }
}

fn look(label: u16, at_us: u64) -> Look {
    Look {
        label,
        began_us: at_us.saturating_sub(10),
        at_us,
        news: false,
    }
}

#[test]
fn a_stamp_reads_back_and_judges_its_run() {
    let s = Stamp {
        writer: who(3),
        seq: 17,
        event: 9,
    };
    let text = s.text("run-a/b");
    assert_eq!(Stamp::read(&text, "run-a/b"), Read::Ours(s));
    assert_eq!(Stamp::read(&text, "other"), Read::Foreign);
    for bad in [
        "",
        "x",
        "r/1.2/3/4",
        "r/1.2.3.4/5/6",
        "r/a.b.c/1/2",
        &"9".repeat(300),
    ] {
        assert_eq!(Stamp::read(bad, "r"), Read::Garbled, "{bad}");
    }
}

#[test]
fn stamps_are_found_in_folded_text_only_as_the_property() {
    let text = "BEGIN:VEVENT\r\nDESCRIPTION:X-LOADMIX-STAMP:not/0.1.2/3/4\r\nX-LOADMIX-STAMP:r/0.1.\r\n 2/3/4\r\nEND:VEVENT\r\n";
    let un = unfold(text);
    assert_eq!(stamps_in(&un), vec!["r/0.1.2/3/4"]);
}

#[test]
fn a_round_settles_seen_superseded_and_unseen() {
    let team = (0, 0);
    let mut writer = Book::default();
    // Event 1 written twice (seq 1, then 2), event 3 once.
    for (seq, event, at) in [(1, 1, 1_000), (2, 1, 2_000), (3, 3, 3_000)] {
        let s = Stamp {
            writer: who(0),
            seq,
            event,
        };
        writer.wrote(s, team, Audience::Team, 5, at);
    }
    let mut a = Book::default();
    // Observer 1 sees seq 1 at 1,500 and seq 3 at 2,900 (before the ack).
    a.saw(
        who(1),
        team,
        &Stamp {
            writer: who(0),
            seq: 1,
            event: 1,
        }
        .text("r"),
        "r",
        look(7, 1_500),
    );
    a.saw(
        who(1),
        team,
        &Stamp {
            writer: who(0),
            seq: 3,
            event: 3,
        }
        .text("r"),
        "r",
        look(7, 2_900),
    );
    // Observer 2 sees only the second version of event 1.
    let mut b = Book::default();
    b.saw(
        who(2),
        team,
        &Stamp {
            writer: who(0),
            seq: 2,
            event: 1,
        }
        .text("r"),
        "r",
        look(7, 2_500),
    );
    // And a stamp its writer sent and had no answer for.
    writer.sent(&Stamp {
        writer: who(0),
        seq: 99,
        event: 99,
    });
    b.saw(
        who(2),
        team,
        &Stamp {
            writer: who(0),
            seq: 99,
            event: 99,
        }
        .text("r"),
        "r",
        look(7, 2_600),
    );
    writer.absorb(a);
    writer.absorb(b);
    let s = writer.settle(WINDOW, &[], team_of(vec![who(0), who(1), who(2)]));
    assert_eq!(s.all.writes, 3);
    assert_eq!(s.all.expected, 6);
    assert_eq!(s.all.seen, 3);
    assert_eq!(s.all.seen_before_ack, 1);
    assert_eq!(
        s.all.superseded, 1,
        "observer 2 saw seq 2 of event 1, not seq 1"
    );
    assert_eq!(s.all.unseen, 2, "seq 2 by observer 1, seq 3 by observer 2");
    assert_eq!(s.unacknowledged, 1);
    assert_eq!(s.never_sent, 0);
    assert_eq!(s.unseen.len(), 2);
    // Latencies 500 and 500 µs, and 1 (seen before the ack).
    assert_eq!(s.all.latency.len(), 3);
    assert_eq!(s.all.latency.max(), s.all.latency.highest_equivalent(500));
}

#[test]
fn a_version_the_server_made_up_supersedes_nothing_and_is_counted_apart() {
    // The writer writes events 1 and 2 (seq 1 and 2); the server answers the observer
    // with each stamp's seq moved up by a million, versions nobody wrote.
    let team = (0, 0);
    let mut book = Book::default();
    for seq in [1, 2] {
        let s = Stamp {
            writer: who(0),
            seq,
            event: seq,
        };
        book.sent(&s);
        book.wrote(s, team, Audience::Team, 5, 1_000);
    }
    let mut obs = Book::default();
    for seq in [1, 2] {
        let forged = Stamp {
            writer: who(0),
            seq: seq + 1_000_000,
            event: seq,
        };
        obs.saw(who(1), team, &forged.text("r"), "r", look(7, 2_000));
    }
    book.absorb(obs);
    let s = book.settle(WINDOW, &[], team_of(vec![who(0), who(1)]));
    assert_eq!(s.all.expected, 2);
    assert_eq!(s.all.superseded, 0, "no one wrote the later versions");
    assert_eq!(s.all.unseen, 2);
    assert_eq!(s.never_sent, 2);
    assert_eq!(s.unacknowledged, 0);
}

#[test]
fn a_sync_that_repeats_a_version_is_a_duplicate_and_a_poll_is_not() {
    let news = |at_us: u64| Look {
        label: 8,
        began_us: at_us - 5,
        at_us,
        news: true,
    };
    let team = (0, 0);
    let v = Stamp {
        writer: who(0),
        seq: 1,
        event: 1,
    }
    .text("r");
    let mut b = Book::default();
    b.saw(who(1), team, &v, "r", look(7, 10));
    b.saw(who(1), team, &v, "r", look(7, 20));
    // The first sync to report the version after polls saw it reports a real change
    // since its token; a second one repeats itself.
    b.saw(who(1), team, &v, "r", news(30));
    b.saw(who(1), team, &v, "r", look(7, 35));
    b.saw(who(1), team, &v, "r", news(40));
    let s = b.settle(WINDOW, &[], team_of(vec![who(1)]));
    assert_eq!(s.all.duplicated, 1);
    assert_eq!(s.by_observer[&(0, 8)].duplicated, 1);
}

#[test]
fn a_write_for_named_users_is_held_against_them_alone() {
    let team = (0, 0);
    let invite = Stamp {
        writer: who(0),
        seq: 1,
        event: 1,
    };
    let mut b = Book::default();
    // An invitation of users 1 and 2, and the answer of user 1 to its organizer.
    let invitees: Arc<[Who]> = Arc::from(vec![who(1), who(2)]);
    b.wrote(invite, team, Audience::Only(invitees), 4, 1_000);
    let answer = Stamp {
        writer: who(1),
        seq: 1,
        event: 1,
    };
    b.wrote(
        answer,
        team,
        Audience::Only(Arc::from(vec![who(0)])),
        6,
        2_000,
    );
    b.saw(who(1), team, &invite.text("r"), "r", look(7, 1_400));
    b.saw(who(0), team, &answer.text("r"), "r", look(7, 2_300));
    // Users 3 and 4 read the team's calendar, which neither write went to.
    let s = b.settle(
        WINDOW,
        &[],
        team_of(vec![who(0), who(1), who(2), who(3), who(4)]),
    );
    assert_eq!(s.all.writes, 2);
    assert_eq!(s.all.expected, 3, "two invitees and one organizer");
    assert_eq!(s.all.seen, 2);
    assert_eq!(s.all.unseen, 1, "user 2 never read the invitation");
    assert_eq!(s.unseen[0].writer, who(0));
    assert_eq!(s.by_write[&(0, 4)].expected, 2);
    assert_eq!(s.by_write[&(0, 6)].seen, 1);
    assert_eq!(s.all.latency.max(), s.all.latency.highest_equivalent(400));
}

/// A write, acknowledged at `acked`, and what observer 1 did: looks (answered at each
/// time, begun 10 µs before) and, among them, the one that first showed it.
fn one_write(acked: u64, looks: &[u64], shown_at: Option<u64>) -> Settled {
    one_write_until(WINDOW.to_us, acked, looks, shown_at)
}

/// [`one_write`] in a round that ends at `to_us`.
fn one_write_until(to_us: u64, acked: u64, looks: &[u64], shown_at: Option<u64>) -> Settled {
    let team = (0, 0);
    let w = Stamp {
        writer: who(0),
        seq: 1,
        event: 1,
    };
    let mut b = Book::default();
    b.wrote(w, team, Audience::Team, 4, acked);
    // Another write of the same operation the observer saw by the same operation
    // (said so, begun before its acknowledgement: 0 in every figure): that operation
    // shows such writes.
    let other = Stamp {
        writer: who(0),
        seq: 2,
        event: 2,
    };
    b.wrote(other, team, Audience::Team, 4, 20);
    b.saw(who(1), team, &other.text("r"), "r", look(7, 20));
    for &at in looks {
        b.looked(who(1), &look(7, at));
        if Some(at) == shown_at {
            b.saw(who(1), team, &w.text("r"), "r", look(7, at));
        }
    }
    b.settle(
        Window { from_us: 0, to_us },
        &[],
        team_of(vec![who(0), who(1)]),
    )
}

fn by_write(s: &Settled) -> &Tally {
    &s.by_write[&(0, 4)]
}

#[test]
fn the_latency_is_the_wait_for_a_look_and_then_the_servers_staleness() {
    let looks = [1_000, 2_000, 3_000, 4_000, 5_000];
    // Shown by the first look after the acknowledgement: all of it was the wait.
    let s = one_write(1_500, &looks, Some(2_000));
    let t = &s.all;
    assert_eq!(t.latency.max(), t.latency.highest_equivalent(500));
    assert_eq!(
        t.poll_gap.exact.max(),
        t.poll_gap.exact.highest_equivalent(500)
    );
    assert_eq!(t.staleness.exact.max(), 0);
    // Shown two looks later: the server kept it from two looks (2,000 µs).
    let s = one_write(1_500, &looks, Some(4_000));
    let t = by_write(&s);
    assert_eq!(
        t.poll_gap.exact.max(),
        t.poll_gap.exact.highest_equivalent(500)
    );
    assert_eq!(
        t.staleness.exact.max(),
        t.staleness.exact.highest_equivalent(2_000)
    );
    assert_eq!(
        (t.poll_gap.censored.len(), t.staleness.censored.len()),
        (0, 0)
    );
    // Shown by a look begun before the acknowledgement (answered 10 µs after it):
    // nothing to wait for from the server.
    let s = one_write(1_995, &looks, Some(2_000));
    let t = by_write(&s);
    assert_eq!(
        t.poll_gap.exact.max(),
        t.poll_gap.exact.highest_equivalent(5)
    );
    assert_eq!(t.staleness.exact.max(), 0);
}

#[test]
fn what_the_rounds_end_cut_short_is_censored_at_what_it_reached() {
    // Looked for twice and never shown: the wait for the first look is known, the
    // staleness is at least the rest of the round (10,000 - 2,000).
    let s = one_write(1_500, &[1_000, 2_000, 3_000], None);
    let t = by_write(&s);
    assert_eq!(t.unseen, 1);
    assert_eq!(
        (t.poll_gap.censored.len(), t.staleness.censored.len()),
        (0, 1)
    );
    assert_eq!(
        t.staleness.censored.max(),
        t.staleness.censored.highest_equivalent(8_000)
    );
    // No look began after the write: the wait itself is at least 10,000 - 9,000.
    let s = one_write(9_000, &[1_000, 2_000], None);
    let t = by_write(&s);
    assert_eq!(t.poll_gap.censored.len(), 1);
    assert_eq!(
        t.poll_gap.censored.max(),
        t.poll_gap.censored.highest_equivalent(1_000)
    );
    assert_eq!(
        t.staleness.exact.len(),
        1,
        "no look: no staleness but the other's"
    );
}

#[test]
fn the_poll_interval_is_the_mean_gap_with_the_rounds_end_censoring_it() {
    // Two looks in a round of 10,000 µs by the one user of its class: every 5,000
    // µs, though the two looks were 1,000 µs apart.
    let s = one_write(1_500, &[2_000, 3_000], Some(2_000));
    let by = &s.by_observer[&(0, 7)];
    assert_eq!(by.looks, 2);
    // To the histograms' precision.
    let every = by.poll_interval_us().unwrap();
    assert!((every - 5_000.0).abs() < 5.0, "{every}");
    // Looks every 1,000 µs: the gap cut by the round's end (500 µs reached, 9,500 -
    // 9,000) takes nothing from it.
    let every: Vec<u64> = (1..=9).map(|k| k * 1_000).collect();
    let s = one_write_until(9_500, 1_500, &every, Some(2_000));
    let by = &s.by_observer[&(0, 7)];
    assert_eq!(by.poll_interval_us(), Some(1_000.0));
}
