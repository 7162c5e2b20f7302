//! The same behaviour from both stores.

use super::*;
use crate::model::{Field, Record};

fn data(title: &str) -> ItemData {
    ItemData::new(
        vec![Record {
            prefix: "item".into(),
            ns: "http://osafoundation.org/eim/item/0".into(),
            fields: vec![Field {
                name: "title".into(),
                ty: "text".into(),
                key: false,
                value: Some(title.into()),
            }],
        }],
        None,
    )
}

fn put(uid: &str, title: &str) -> ItemOp {
    ItemOp::Put {
        uid: uid.into(),
        name: None,
        data: Box::new(data(title)),
        merge: false,
        global_uid: true,
    }
}

fn each_store(f: impl Fn(&dyn Store)) {
    f(&MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    f(&SqliteStore::open(&dir.path().join("t.db")).unwrap());
}

#[test]
fn collections_items_versions_and_tombstones() {
    each_store(|s| {
        let CreateOutcome::Created(c) = s
            .create_collection(
                "c1",
                "alice",
                "Cal",
                "",
                vec![("a".into(), data("A")), ("b".into(), data("B"))],
            )
            .unwrap()
        else {
            panic!("created")
        };
        assert_eq!(c.version, 1);
        assert_eq!(
            s.create_collection("c1", "bob", "x", "", vec![]).unwrap(),
            CreateOutcome::Exists,
            "{}",
            s.kind()
        );
        let tok = s.collection("c1").unwrap().unwrap();
        assert_eq!(tok.token_version(&tok.token()), Some(1));
        // A batch: change a, add c, delete b.
        let out = s
            .write(
                "c1",
                vec![
                    put("a", "A2"),
                    put("c", "C"),
                    ItemOp::Delete {
                        uid: "b".into(),
                        must_exist: false,
                    },
                ],
                Precondition::Version(1),
            )
            .unwrap();
        let WriteOutcome::Done { version, etags } = out else {
            panic!("{out:?}")
        };
        assert_eq!(version, 2);
        assert_eq!(etags.len(), 2);
        // Stale version refused, nothing changes.
        assert_eq!(
            s.write("c1", vec![put("z", "Z")], Precondition::Version(1))
                .unwrap(),
            WriteOutcome::Stale
        );
        let (info, live) = s.items("c1", None).unwrap().unwrap();
        assert_eq!(info.version, 2);
        let mut uids: Vec<&str> = live.iter().map(|i| i.uid.as_str()).collect();
        uids.sort();
        assert_eq!(uids, ["a", "c"]);
        let (_, changed) = s.items("c1", Some(1)).unwrap().unwrap();
        assert_eq!(changed.len(), 3, "a, c and the tombstone of b");
        assert!(changed.iter().any(|i| i.uid == "b" && i.data.is_none()));
        assert!(s.items("c1", Some(2)).unwrap().unwrap().1.is_empty());
        // Lookups.
        assert_eq!(
            s.item_by_name("c1", "a.ics")
                .unwrap()
                .unwrap()
                .data
                .unwrap()
                .title(),
            "A2"
        );
        assert_eq!(s.items_by_uid("c").unwrap()[0].0, "c1");
        assert!(s.items_by_uid("b").unwrap().is_empty());
        // The same uid cannot live in two collections.
        s.create_collection("c2", "alice", "Other", "", vec![])
            .unwrap();
        assert!(matches!(
            s.write("c2", vec![put("a", "dup")], Precondition::None)
                .unwrap(),
            WriteOutcome::Conflict(_)
        ));
    });
}

#[test]
fn writes_keep_their_preconditions_and_a_deleted_collection_frees_its_uids() {
    each_store(|s| {
        s.create_collection("c1", "alice", "Cal", "", vec![("a".into(), data("A2"))])
            .unwrap();
        s.create_collection("c2", "alice", "Other", "", vec![])
            .unwrap();
        let (info, _) = s.items("c1", None).unwrap().unwrap();
        // ETag preconditions.
        let etag = s
            .item_by_name("c1", "a.ics")
            .unwrap()
            .unwrap()
            .etag(info.epoch);
        let ifm = |e: &str| Precondition::ItemEtag {
            uid: "a".into(),
            etag: e.into(),
        };
        assert_eq!(
            s.write("c1", vec![put("a", "A3")], ifm("\"nope\""))
                .unwrap(),
            WriteOutcome::PreconditionFailed
        );
        assert!(matches!(
            s.write("c1", vec![put("a", "A3")], ifm(&etag)).unwrap(),
            WriteOutcome::Done { .. }
        ));
        let absent = Precondition::ItemAbsent { uid: "a".into() };
        assert_eq!(
            s.write("c1", vec![put("a", "A4")], absent).unwrap(),
            WriteOutcome::PreconditionFailed
        );
        assert_eq!(
            s.write(
                "c1",
                vec![ItemOp::Delete {
                    uid: "zz".into(),
                    must_exist: true
                }],
                Precondition::None
            )
            .unwrap(),
            WriteOutcome::NoItem
        );
        assert_eq!(
            s.write("nope", vec![], Precondition::None).unwrap(),
            WriteOutcome::NoCollection
        );
        // Deleting the collection drops its items and frees their uids.
        assert!(s.delete_collection("c1").unwrap());
        assert!(s.collection("c1").unwrap().is_none());
        assert!(s.items_by_uid("a").unwrap().is_empty());
        assert_eq!(s.collections_of("alice").unwrap().len(), 1);
    });
}

#[test]
fn tokens_of_another_life_are_invalid() {
    each_store(|s| {
        s.create_collection("c", "u", "n", "", vec![]).unwrap();
        let old = s.collection("c").unwrap().unwrap();
        s.delete_collection("c").unwrap();
        s.create_collection("c", "u", "n", "", vec![]).unwrap();
        let new = s.collection("c").unwrap().unwrap();
        assert_eq!(new.token_version(&old.token()), None);
        assert_eq!(new.token_version("garbage"), None);
        assert_eq!(
            new.token_version(&format!("{}-99", new.epoch)),
            None,
            "a version from the future"
        );
    });
}

#[test]
fn users_and_queues() {
    each_store(|s| {
        let u = User {
            name: "u".into(),
            password: "p".into(),
            first_name: "f".into(),
            last_name: "l".into(),
            email: "e".into(),
        };
        assert!(s.put_user(&u).unwrap());
        assert!(!s.put_user(&u).unwrap());
        assert_eq!(s.user("u").unwrap().unwrap(), u);
        assert!(s.user("v").unwrap().is_none());
        assert_eq!(s.queue_push("q", Bytes::from_static(b"1")).unwrap(), 1);
        assert_eq!(s.queue_push("q", Bytes::from_static(b"2")).unwrap(), 2);
        assert_eq!(s.queue_pop("q").unwrap().unwrap(), "1");
        assert_eq!(s.queue_pop("q").unwrap().unwrap(), "2");
        assert!(s.queue_pop("q").unwrap().is_none());
    });
}

#[test]
fn a_taken_message_stays_until_settled_and_goes_back_in_its_place() {
    each_store(|s| {
        for m in ["1", "2", "3"] {
            s.queue_push("q", Bytes::from(m)).unwrap();
        }
        let one = s.queue_take("q", true).unwrap().unwrap();
        assert_eq!((one.body.as_ref(), one.redelivered), (&b"1"[..], false));
        let two = s.queue_take("q", true).unwrap().unwrap();
        assert_eq!(two.body, "2");
        // Taken messages still count in the depth and are not handed out twice.
        assert_eq!(s.queue_push("q", Bytes::from("4")).unwrap(), 4);
        assert_eq!(s.queue_take("q", true).unwrap().unwrap().body, "3");
        s.queue_settle("q", one.id, false).unwrap();
        s.queue_settle("q", two.id, true).unwrap();
        // Settling again, or under another queue's name, changes nothing.
        s.queue_settle("q", two.id, false).unwrap();
        s.queue_settle("elsewhere", one.id, true).unwrap();
        let again = s.queue_take("q", false).unwrap().unwrap();
        assert_eq!(again.body, "1", "back in its place");
        assert!(again.redelivered, "and said to have been handed out before");
        let four = s.queue_take("q", false).unwrap().unwrap();
        assert_eq!((four.body.as_ref(), four.redelivered), (&b"4"[..], false));
        assert!(s.queue_pop("q").unwrap().is_none(), "3 is still taken");
        s.queue_clear("q").unwrap();
        assert_eq!(s.queue_push("q", Bytes::from("5")).unwrap(), 1);
    });
}

#[test]
fn what_was_taken_and_never_settled_is_ready_again_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        for m in ["1", "2", "3"] {
            s.queue_push("q", Bytes::from(m)).unwrap();
        }
        let one = s.queue_take("q", true).unwrap().unwrap();
        s.queue_take("q", true).unwrap().unwrap();
        s.queue_settle("q", one.id, true).unwrap();
        // Dropped without a word, as a killed server would leave it.
    }
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(s.queue_push("q", Bytes::from("4")).unwrap(), 3);
    let left: Vec<(Bytes, bool)> = std::iter::from_fn(|| s.queue_take("q", false).unwrap())
        .map(|t| (t.body, t.redelivered))
        .collect();
    let handed_before = |m: &'static str, r| (Bytes::from(m), r);
    assert_eq!(
        left,
        [
            handed_before("2", true),
            handed_before("3", false),
            handed_before("4", false)
        ]
    );
}

#[test]
fn a_push_costs_the_same_whatever_the_queues_depth() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("deep.db")).unwrap();
    let steps_of_a_push = |s: &SqliteStore| {
        s.count_steps(|| {
            s.queue_push("q", Bytes::from_static(b"m")).unwrap();
        })
    };
    for _ in 0..100 {
        s.queue_push("q", Bytes::from_static(b"m")).unwrap();
    }
    let shallow = steps_of_a_push(&s);
    for _ in 0..20_000 {
        s.queue_push("q", Bytes::from_static(b"m")).unwrap();
    }
    let deep = steps_of_a_push(&s);
    assert!(
        deep <= shallow + 2,
        "{deep} steps at 20,000 deep against {shallow} at 100"
    );
}

#[test]
fn sqlite_data_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        s.create_collection("c", "u", "n", "", vec![("a".into(), data("A"))])
            .unwrap();
        s.queue_push("q", Bytes::from_static(b"m")).unwrap();
    }
    let s = SqliteStore::open(&path).unwrap();
    assert_eq!(
        s.items("c", None).unwrap().unwrap().1[0]
            .data
            .as_ref()
            .unwrap()
            .title(),
        "A"
    );
    assert_eq!(s.queue_pop("q").unwrap().unwrap(), "m");
}

fn event(start: &str, rrule: bool) -> ItemData {
    let ics = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:u{start}\r\nDTSTART:{start}\r\nDURATION:PT1H\r\n{}END:VEVENT\r\nEND:VCALENDAR\r\n",
        if rrule { "RRULE:FREQ=WEEKLY\r\n" } else { "" }
    );
    crate::model::parse_ics(&ics).unwrap().1
}

#[test]
fn range_prefilter_keeps_every_candidate() {
    each_store(|s| {
        let items = vec![
            ("may".to_string(), event("20070521T100000Z", false)),
            ("june".to_string(), event("20070601T100000Z", false)),
            ("weekly".to_string(), event("20070101T100000Z", true)),
            ("untimed".to_string(), data("no time")),
        ];
        s.create_collection("r", "u", "n", "", items).unwrap();
        let ms = |t: &str| {
            crate::model::parse_ical_datetime(t)
                .unwrap()
                .timestamp_millis()
        };
        let (_, got) = s
            .items_overlapping("r", ms("20070521T000000Z"), ms("20070528T000000Z"))
            .unwrap()
            .unwrap();
        let mut uids: Vec<&str> = got.iter().map(|i| i.uid.as_str()).collect();
        uids.sort();
        assert_eq!(uids, ["may", "weekly"], "{}", s.kind());
        let (_, got) = s
            .items_overlapping("r", ms("20061201T000000Z"), ms("20061208T000000Z"))
            .unwrap()
            .unwrap();
        assert!(got.is_empty(), "nothing before the first start");
    });
}

#[test]
fn a_message_pushed_to_many_queues_is_in_each_and_their_depths_count_it() {
    each_store(|s| {
        // One queue's depth already kept, the others not yet.
        assert_eq!(s.queue_push("q0", Bytes::from_static(b"first")).unwrap(), 1);
        let queues: Vec<String> = (0..5).map(|i| format!("q{i}")).collect();
        s.queue_push_many(&queues, Bytes::from_static(b"m"))
            .unwrap();
        assert_eq!(
            s.queue_push("q0", Bytes::from_static(b"x")).unwrap(),
            3,
            "{}",
            s.kind()
        );
        assert_eq!(
            s.queue_push("q4", Bytes::from_static(b"x")).unwrap(),
            2,
            "{}",
            s.kind()
        );
        for q in &queues[1..4] {
            assert_eq!(s.queue_pop(q).unwrap().as_deref(), Some(&b"m"[..]));
            assert_eq!(s.queue_pop(q).unwrap(), None);
        }
    });
}
