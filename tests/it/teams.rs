//! Teams sharing a calendar on the embedded server: every request agrees with the
//! server's count, every acknowledged write is in the visibility figures and held
//! against each member who reads, and the latency to first sight is what the pollers'
//! interval makes it (a write lands uniformly within a poll gap, so it waits half a gap
//! on average).

use loadmix::embedded::{self as server, ServerConfig, StoreSpec};

use crate::common::*;

/// Editors only put, pollers only sync at a constant interval: the truth of the
/// latency is known from the interval.
fn team_workload(target: &str) -> String {
    r#"target: TARGET
context: /cosmo
run: { duration: 4s, rounds: 2, seed: 34, timeout: 30s }
accounts: { create: cmp }
teams:
  - name: t
    count: 2
users:
  - class: editors
    protocol: caldav
    count: 2
    think: 150ms
    params: { team: t }
    mix: { put_event: 1 }
  - class: pollers
    protocol: caldav
    count: 6
    think: 400ms
    params: { team: t }
    mix: { sync_collection: 1 }
"#
    .replace("TARGET", target)
}

#[test]
fn a_team_sees_every_write_and_the_latency_is_the_poll_gaps_half() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    for store in [
        StoreSpec::Memory,
        StoreSpec::Sqlite(dir.path().join("t.db").display().to_string()),
    ] {
        let rt = runtime();
        let srv = rt
            .block_on(server::start(ServerConfig {
                store,
                ..ServerConfig::default()
            }))
            .unwrap();
        let (r, tmp) = run_against(&srv, "team.yaml", &team_workload(&srv.url()));
        let out = out_dir(&tmp);
        assert_eq!(
            srv.stats.count("ACL", 200),
            2 * 2,
            "one grant per team and round"
        );

        let v = r.visibility.as_ref().expect("a visibility section");
        let puts = op(&r, "editors.put_event").successes;
        assert!(puts > 20, "{puts}");
        assert_eq!(v.all.writes, puts, "every acknowledged write, once");
        // Each write is for the 3 pollers of its team (editors do not read).
        assert_eq!(v.all.expected, 3 * puts);
        assert_eq!(v.all.seen + v.all.superseded + v.all.unseen, v.all.expected);
        assert_eq!(v.all.superseded, 0, "nobody rewrites an event");
        assert_eq!(v.unacknowledged + v.unexpected + v.foreign + v.garbled, 0);
        // Only the writes of each round's last poll gap can be unseen.
        assert!(v.all.unseen <= 2 * 3 * 6, "{:?}", v.unseen_writes);
        // Each round settles its own writes; the run's figures are their sums.
        let rounds: Vec<_> = r
            .rounds
            .iter()
            .map(|x| x.visibility.as_ref().unwrap())
            .collect();
        assert_eq!(rounds.len(), 2);
        let figures = |a: &_| -> [u64; 4] {
            let a: &loadmix::reports::VisibilityRow = a;
            [a.writes, a.expected, a.seen, a.unseen]
        };
        let summed = rounds.iter().fold([0; 4], |mut acc, x| {
            for (s, f) in acc.iter_mut().zip(figures(&x.all)) {
                *s += f;
            }
            acc
        });
        assert_eq!(summed, figures(&v.all), "writes, expected, seen, unseen");
        // The page has the same figures.
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        let all_row = format!(
            "<tr><td>all</td><td>{}</td><td>{}</td><td>{}</td>",
            v.all.writes, v.all.expected, v.all.seen
        );
        assert!(html.contains("<h3>Visibility</h3>") && html.contains(&all_row));
        assert!(rounds.iter().all(|x| x.all.writes > 0));

        // Latency to first sight against the pollers' own measured interval.
        assert_eq!(v.by_observer[0].op, "pollers.sync_collection");
        half_a_gap(v, "pollers.sync_collection");
        all_of_it_is_the_wait_for_a_look(&v.all);
    }
}

/// On the embedded server a write is visible the moment it is acknowledged: the first
/// look begun after it shows it, so the server's staleness is 0 at every percentile and
/// the whole latency is the wait for that look. Each pair to be seen has a wait: a seen
/// one exact, an unseen one (a round's last gap) censored at the round's end.
fn all_of_it_is_the_wait_for_a_look(all: &loadmix::reports::VisibilityRow) {
    let (gap, stale) = (
        all.poll_gap_ms.as_ref().expect("the wait for a look"),
        all.staleness_ms.as_ref().expect("the staleness after it"),
    );
    assert_eq!(
        (stale.p50, stale.p99, stale.max),
        (0.0, 0.0, 0.0),
        "{stale:?}"
    );
    assert_eq!(gap.count, all.seen + all.unseen, "{gap:?}");
    assert_eq!(gap.censored, all.unseen, "{gap:?}");
    let lat = all.latency_ms.as_ref().unwrap();
    // The seen pairs' waits are their latencies; the unseen ones' are only longer.
    assert!(gap.p50 >= lat.p50 * 0.999, "{gap:?} against {lat:?}");
    assert!(gap.max >= lat.max * 0.999, "{gap:?} against {lat:?}");
}

/// A sync picked one time in ten looks about every ten think times: the interval is the
/// time the pollers ran over their looks, which a round shorter than a few intervals does
/// not cut short (the time between a poller's first and last look would read about 0.7
/// of it here, counting only pollers that looked twice).
#[test]
fn a_rarely_picked_look_has_its_whole_interval_though_the_round_is_short() {
    let workload = |target: &str| {
        r#"target: TARGET
context: /cosmo
run: { duration: 6s, rounds: 2, seed: 35, timeout: 30s }
accounts: { create: cmp }
teams:
  - name: t
    count: 2
users:
  - class: editors
    protocol: caldav
    count: 2
    think: 300ms
    params: { team: t }
    mix: { put_event: 1 }
  - class: pollers
    protocol: caldav
    count: 24
    think: 200ms
    params: { team: t }
    mix: { sync_collection: 1, time_range_report: 9 }
"#
        .replace("TARGET", target)
    };
    let (r, _tmp) = run_embedded("rare.yaml", workload);
    let v = r.visibility.as_ref().expect("a visibility section");
    let sync = v
        .by_observer
        .iter()
        .find(|o| o.op == "pollers.sync_collection")
        .expect("syncs looked");
    let every = sync.poll_interval_ms.unwrap();
    // Ten picks of a cycle of the think time and one operation's latency.
    let ops = ["pollers.sync_collection", "pollers.time_range_report"].map(|n| op(&r, n));
    let n: u64 = ops.iter().map(|o| o.requests).sum();
    let mean_ms: f64 = ops
        .iter()
        .map(|o| o.latency_ms.mean * o.requests as f64)
        .sum::<f64>()
        / n as f64;
    let design = 10.0 * (200.0 + mean_ms);
    assert!(
        (0.8 * design..1.25 * design).contains(&every),
        "every {every:.0} ms against {design:.0} ms by design ({} looks)",
        sync.looks
    );
}

/// The mean latency to first sight is half the observing operation's measured poll gap
/// (a write lands uniformly in a gap), within sampling noise, and none waits two gaps.
/// The observers think 400 ms between looks.
fn half_a_gap(v: &loadmix::reports::VisibilityRecord, observer: &str) {
    let poll = v
        .by_observer
        .iter()
        .find(|o| o.op == observer)
        .unwrap_or_else(|| panic!("{observer} observes"));
    let gap = poll.poll_interval_ms.unwrap();
    assert!(gap >= 400.0, "think 400 ms plus the look itself: {gap}");
    let lat = v.all.latency_ms.as_ref().unwrap();
    let ratio = lat.mean / gap;
    assert!(
        (0.3..0.7).contains(&ratio),
        "mean latency {} ms against a gap of {gap} ms: {ratio}",
        lat.mean
    );
    assert!(lat.max <= 2.0 * gap, "{} against {gap}", lat.max);
}

/// A writer per team updates, readers sync at a constant interval: Morse Code's shared
/// collection, reached by ticket.
fn morse_team_workload(target: &str) -> String {
    r#"target: TARGET
context: /cosmo
run: { duration: 4s, rounds: 2, seed: 2007, timeout: 30s }
accounts: { create: cmp }
teams:
  - name: t
    count: 2
users:
  - class: writers
    protocol: morse
    count: 2
    think: 300ms
    params: { team: t, collection_size: 3 }
    mix: { update: 1 }
  - class: readers
    protocol: morse
    count: 6
    think: 400ms
    params: { team: t }
    mix: { sync: 1 }
"#
    .replace("TARGET", target)
}

/// Every update the server took is two writes (a new item, and from the writer's
/// second update on, one of its own changed) held against the team's three readers, who
/// reach the owner's collection only by its ticket; none is seen twice, and the first
/// sight waits half a poll gap, as a write landing uniformly in a gap does.
#[test]
fn a_morse_team_sees_every_update_by_ticket_at_half_a_poll_gap() {
    let _alone = alone();
    let (r, _tmp) = run_embedded("morse-team.yaml", morse_team_workload);
    let v = r.visibility.as_ref().expect("a visibility section");
    let updates = op(&r, "writers.update").successes;
    assert!(updates > 10, "{updates}");
    assert!(
        r.summary
            .ops
            .iter()
            .all(|o| o.op != "writers.update_contended"),
        "one writer a team: nobody contends"
    );
    // Each writer's first update of a round has no item of its own to change yet.
    let firsts = 2 * 2;
    assert_eq!(v.all.writes, 2 * updates - firsts, "two items an update");
    assert_eq!(v.all.expected, 3 * v.all.writes, "three readers a team");
    assert_eq!(v.all.seen + v.all.superseded + v.all.unseen, v.all.expected);
    assert_eq!(
        v.all.duplicated, 0,
        "a sync with the newest token repeats nothing"
    );
    assert_eq!(v.unacknowledged + v.unexpected + v.foreign + v.garbled, 0);
    // Only the writes of each round's last poll gap can be unseen (two updates of two
    // items a gap, at most, for each reader of each team).
    assert!(v.all.unseen <= 2 * 2 * 3 * 4, "{:?}", v.unseen_writes);
    half_a_gap(v, "readers.sync");
}

/// Cosmo's two views of one collection in one team: a Morse Code writer updates, an Atom
/// writer creates entries, and a reader of each kind looks at a constant interval.
fn cosmo_team_workload(target: &str) -> String {
    r#"target: TARGET
context: /cosmo
run: { duration: 4s, rounds: 2, seed: 2007, timeout: 30s }
accounts: { create: cmp }
teams:
  - name: t
    count: 2
users:
  - class: desk_writers
    protocol: morse
    count: 2
    think: 300ms
    params: { team: t, collection_size: 3 }
    mix: { update: 1 }
  - class: web_writers
    protocol: atom
    count: 2
    think: 300ms
    params: { team: t }
    mix: { create_event: 2, update_event: 1 }
  - class: desk_readers
    protocol: morse
    count: 2
    think: 400ms
    params: { team: t }
    mix: { sync: 1 }
  - class: web_readers
    protocol: atom
    count: 2
    think: 400ms
    params: { team: t }
    mix: { full_feed: 1 }
"#
    .replace("TARGET", target)
}

/// What either view writes reaches the readers of both: every write is held against the
/// team's Morse Code reader and its Atom reader, and most are seen by both (a write seen
/// through one view only would leave `seen` at most the number of writes).
#[test]
fn a_write_through_morse_code_or_atom_reaches_the_readers_of_both() {
    let _alone = alone();
    let (r, _tmp) = run_embedded("cosmo-team.yaml", cosmo_team_workload);
    let v = r.visibility.as_ref().expect("a visibility section");
    let updates = op(&r, "desk_writers.update").successes;
    let creates = op(&r, "web_writers.create_event").successes;
    let edits = op(&r, "web_writers.update_event").successes;
    assert!(
        updates > 10 && creates > 10 && edits > 3,
        "{updates} {creates} {edits}"
    );
    let row = |name: &str| v.by_write.iter().find(|w| w.op == name).unwrap();
    let (morse, atom) = (row("desk_writers.update"), row("web_writers.create_event"));
    assert_eq!(
        morse.writes,
        2 * updates - 2 * 2,
        "two items an update but the first"
    );
    assert_eq!(atom.writes, creates);
    let edited = row("web_writers.update_event").writes;
    assert_eq!(edited, edits, "each an entry of the writer's own");
    assert_eq!(
        v.all.expected,
        2 * v.all.writes,
        "one reader of each view a team"
    );
    assert_eq!(v.all.seen + v.all.superseded + v.all.unseen, v.all.expected);
    for w in [morse, atom] {
        assert!(
            w.seen > w.writes + w.writes / 2,
            "seen through both views: {w:?}"
        );
    }
    assert_eq!(v.all.duplicated, 0);
    assert_eq!(v.unacknowledged + v.unexpected + v.foreign + v.garbled, 0);
    half_a_gap(v, "web_readers.full_feed");
}

/// `--shard I/N` with N dividing every team count keeps each team whole on one shard
/// (its members meet there), each shard settles its own teams, and `merge` adds the
/// shards' visibility up, round by round and for the run; a shard count that would split
/// a team is refused before anything runs.
#[test]
fn shards_keep_each_team_whole_and_their_visibility_adds_up() {
    let _alone = alone();
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let tmp = tempdir();
    let w = tmp.path().join("team.yaml");
    std::fs::write(&w, team_workload(&srv.url())).unwrap();
    let o = loadmix_bin(&["run", &path_str(&w), "--shard", "0/3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("'t' has 2 (give it 3, or run whole)"));
    let mut files = Vec::new();
    let mut parts = Vec::new();
    for i in 0..2 {
        let dir = tmp.path().join(format!("shard-{i}"));
        let shard = format!("{i}/2");
        let args = [
            "run",
            &path_str(&w),
            "--shard",
            &shard,
            "--quiet",
            "--out",
            &path_str(&dir),
        ];
        assert_eq!(loadmix(&args), 0);
        let r = read_report(&dir);
        let v = r.visibility.clone().expect("a shard's teams settled");
        let puts = op(&r, "editors.put_event").successes;
        assert!(puts > 5, "{puts}");
        // One team a shard: its editor's writes, held against its three pollers.
        assert_eq!((v.all.writes, v.all.expected), (puts, 3 * puts));
        assert_eq!(v.unexpected + v.unacknowledged, 0);
        files.push(path_str(&dir.join("run.json")));
        parts.push(v);
    }
    rt.block_on(srv.stop());
    let merged_dir = tmp.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    let out = path_str(&merged_dir);
    args.extend(["--out", out.as_str()]);
    assert_eq!(loadmix(&args), 0);
    let m = read_report(&merged_dir);
    let v = m.visibility.as_ref().expect("the merged visibility");
    let sum = |f: fn(&loadmix::reports::VisibilityRow) -> u64| {
        parts.iter().map(|p| f(&p.all)).sum::<u64>()
    };
    assert_eq!(v.all.writes, sum(|r| r.writes));
    assert_eq!(v.all.expected, sum(|r| r.expected));
    assert_eq!(v.all.seen, sum(|r| r.seen));
    assert_eq!(v.all.unseen, sum(|r| r.unseen));
    let lat = v.all.latency_ms.as_ref().unwrap();
    assert_eq!(lat.count, v.all.seen, "the histograms added, not averaged");
    let gaps: Vec<f64> = parts
        .iter()
        .map(|p| p.by_observer[0].poll_interval_ms.unwrap())
        .collect();
    let gap = v.by_observer[0].poll_interval_ms.unwrap();
    assert!(
        gaps.iter().any(|g| *g <= gap) && gaps.iter().any(|g| *g >= gap),
        "{gap} {gaps:?}"
    );
    for (i, round) in m.rounds.iter().enumerate() {
        let rv = round.visibility.as_ref().unwrap();
        let of_shards: u64 = files
            .iter()
            .map(|f| {
                let r = read_report(std::path::Path::new(f).parent().unwrap());
                r.rounds[i].visibility.as_ref().unwrap().all.writes
            })
            .sum();
        assert_eq!(rv.all.writes, of_shards, "round {i}");
    }
}

/// A latency fault of 600 ms on the answers for 10 s: every poll of the pollers (who think
/// 400 ms after each answer) then takes 600 ms longer, so they look less often, and the
/// writes acknowledged while it is on are seen later than the round's writes on
/// average, by more than three standard errors of the difference (measured: 843-848 ms
/// against 380-389, 4.8 standard errors; a 4 s window gave only 2.4).
/// The window's visibility counts exactly those writes, against every member who reads,
/// and the report's fault table prints it. The mean, not the median: pollers of one
/// think time look in step, so the sights come in clumps.
#[test]
fn writes_made_during_a_fault_are_seen_as_late_as_its_slower_polls_make_them() {
    let _alone = alone();
    let workload = |url: &str| {
        team_workload(url).replace(
            "duration: 4s, rounds: 2",
            "duration: 16s, rounds: 1, warmup: 0s",
        ) + "faults:\n  - { fault: latency, at: 3s, for: 10s, delay: 600ms }\nrecovery: { hold: 1s }\n"
    };
    let (r, tmp) = run_embedded("team-fault.yaml", workload);
    let f = &r.rounds[0].faults[0];
    let v = f.visibility.as_ref().expect("the window's visibility");
    assert!(v.writes >= 4, "{v:?}");
    assert_eq!(v.expected, 3 * v.writes, "{v:?}");
    assert_eq!(v.seen + v.superseded + v.unseen, v.expected, "{v:?}");
    let all = &r.rounds[0].visibility.as_ref().expect("the round's").all;
    let (during, round) = (mean_and_var(v), mean_and_var(all));
    // A write's sights by the members of its team come together (they poll in step):
    // the writes, not the sights, are the independent samples of the mean.
    let se = (during.1 / v.writes as f64 + round.1 / all.writes as f64).sqrt();
    let later = during.0 - round.0;
    eprintln!(
        "first sight: {:.0} ms on average in the window, {:.0} ms in the round: {later:.0} ms later (standard error {se:.0} ms)",
        during.0, round.0
    );
    assert!(
        later > 3.0 * se,
        "in the window {} ms, the round's {} ms (standard error {se:.0} ms)",
        during.0,
        round.0
    );
    let text = std::fs::read_to_string(out_dir(&tmp).join("report.txt")).unwrap();
    assert!(text.contains("teams' writes acknowledged in it"), "{text}");
}

/// The mean and variance of a visibility row's latencies to first sight, ms.
fn mean_and_var(row: &loadmix::reports::VisibilityRow) -> (f64, f64) {
    let l = row.latency_ms.as_ref().expect("sights");
    let h = loadmix::reports::decode_histogram(&l.histogram).expect("its histogram");
    (l.mean, (h.stdev() / 1000.0).powi(2))
}

/// `workload(url)` (as file `name`) run against a fresh embedded server on memory, as
/// [`run_against`] checks it.
fn run_embedded(
    name: &str,
    workload: impl Fn(&str) -> String,
) -> (loadmix::reports::Report, tempfile::TempDir) {
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let done = run_against(&srv, name, &workload(&srv.url()));
    rt.block_on(srv.stop());
    done
}

/// `workload` (as file `name`) run against the embedded server `srv`: its report, once
/// the run succeeded with no failure and every request it counts, measured or not, is one
/// the server answered.
/// The directory it wrote to is kept with it.
pub(crate) fn run_against(
    srv: &server::ServerHandle,
    name: &str,
    workload: &str,
) -> (loadmix::reports::Report, tempfile::TempDir) {
    let tmp = tempdir();
    let w = tmp.path().join(name);
    std::fs::write(&w, workload).unwrap();
    let out = out_dir(&tmp);
    assert_eq!(
        loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
        0
    );
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    let statuses: u64 = r.summary.ops.iter().flat_map(|o| o.status.values()).sum();
    let setup = r.preflight.requests + r.rounds.iter().map(|x| x.setup.requests).sum::<u64>();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    let answered: u64 = srv.stats.snapshot().iter().map(|(_, _, n)| n).sum();
    assert_eq!(statuses + setup + cleanup, answered);
    (r, tmp)
}

/// A team's mistakes are the workload's: named with file:line:column, exit 2.
#[test]
fn team_mistakes_are_located() {
    let tmp = tempdir();
    let cases = [
        (
            "teams:\n  - name: t\n    count: 2\nusers:\n  - class: a\n    protocol: caldav\n    count: 3\n    params: { team: t }\n    mix: { put_event: 1, sync_collection: 1 }\n",
            "do not deal evenly",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 1\n    params: { team: t }\n    mix: { put_event: 1, sync_collection: 1 }\n",
            "one user",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 2\n    params: { team: t }\n    mix: { sync_collection: 1 }\n",
            "nobody in team 't' writes",
        ),
        (
            "teams:\n  - name: team\nusers:\n  - class: a\n    protocol: caldav\n    count: 2\n    params: { team: teem }\n    mix: { put_event: 1 }\n",
            "did you mean 'team'",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 2\n    params: { team: t }\n    mix: { invite: 1 }\n",
            "its invitations would reach nobody",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 1\n    params: { team: t }\n    mix: { invite: 1 }\n  - class: b\n    protocol: caldav\n    count: 1\n    params: { team: t }\n    mix: { answer: 1 }\n  - class: c\n    protocol: caldav\n    count: 1\n    params: { team: t }\n    mix: { inbox: 1 }\n",
            "answers invitations but never reads its inbox",
        ),
        (
            "users:\n  - class: a\n    protocol: caldav\n    count: 2\n    mix: { inbox: 1 }\n",
            "is in no team",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: morse\n    count: 2\n    params: { team: t }\n    mix: { publish: 1, sync: 1 }\n",
            "has publish: a team's users sync and update the collection its owner publishes",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 2\n    params: { team: t }\n    mix: { put_event: 1 }\n  - class: b\n    protocol: morse\n    count: 2\n    params: { team: t }\n    mix: { sync: 1 }\n",
            "class 'b' (morse) cannot join team 't' of class 'a' (caldav)",
        ),
        (
            "teams:\n  - name: t\nusers:\n  - class: a\n    protocol: caldav\n    count: 2\n    params: { team: t }\n    ops: { put_event: {}, sync_collection: {} }\n    behaviours:\n      b:\n        start: put_event\n        states:\n          put_event: { sync_collection: { p: 1, when: { invited: true } }, put_event: 1 }\n          sync_collection: { put_event: 1 }\n",
            "never reads its inbox, so it never has an invitation",
        ),
    ];
    for (i, (text, says)) in cases.iter().enumerate() {
        let w = tmp.path().join(format!("w{i}.yaml"));
        std::fs::write(&w, text).unwrap();
        let o = loadmix_bin(&["validate", &path_str(&w)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(err.contains(&format!("w{i}.yaml:")), "{err}");
    }
}

/// `validate` says who is in a team and who owns it, from the workload alone.
#[test]
fn validate_lists_each_kind_of_team() {
    let o = loadmix_bin(&["validate", "workloads/cosmo-team.yaml"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains(
            "team shared × 4 (by ticket): 5 users each (desktop_writers 1, desktop_readers 2, web 2); desktop_writers#t owns team t and publishes its collection"
        ),
        "{out}"
    );
    let o = loadmix_bin(&["validate", "workloads/caldav-team.yaml"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains(
            "team project × 4 (grant acl): 7 users each (editors 1, pollers 3, organizers 1, attendees 2); editors#t owns team t"
        ),
        "{out}"
    );
}

/// `compare` holds two runs' visibility against each other, tested over rounds: pollers
/// that look every 1,200 ms instead of every 200 ms are the known truth of a later first
/// sight (half a gap on average), and the comparison must find it.
#[test]
fn compare_finds_the_later_sight_of_slower_pollers() {
    let _alone = alone();
    let rt = runtime();
    let srv = rt.block_on(server::start(ServerConfig::default())).unwrap();
    let tmp = tempdir();
    let mut reports = Vec::new();
    for (name, think) in [("fast", "200ms"), ("slow", "1200ms")] {
        let w = tmp.path().join(format!("{name}.yaml"));
        let text = team_workload(&srv.url())
            .replace("duration: 4s, rounds: 2", "duration: 3s, rounds: 3")
            .replace("think: 400ms", &format!("think: {think}"));
        std::fs::write(&w, text).unwrap();
        let out = tmp.path().join(name);
        assert_eq!(
            loadmix(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]),
            0
        );
        reports.push(read_report(&out));
    }
    rt.block_on(srv.stop());
    // Two workloads, so forced, as `compare --force` does.
    let c = loadmix::reports::compare::compare(&["fast".into(), "slow".into()], &reports, true)
        .unwrap();
    let row = |m: &str| {
        c.visibility
            .iter()
            .find(|r| r.measure == m)
            .unwrap_or_else(|| panic!("no {m} row: {:?}", c.visibility))
    };
    let gap = row("poll interval");
    let p50 = row("visibility p50");
    for r in [gap, p50] {
        assert!(
            r.cells
                .iter()
                .all(|x| x.as_ref().is_some_and(|x| x.rounds == 3))
        );
    }
    let slow = p50.cells[1].as_ref().unwrap();
    let ratio = slow.ratio.unwrap();
    assert!((2.5..12.0).contains(&ratio), "p50 {ratio}× for a 6× gap");
    assert!(slow.p_adjusted.unwrap() < 0.05, "{slow:?}");
    let gap_ratio = gap.cells[1].as_ref().unwrap().ratio.unwrap();
    assert!(
        (3.0..7.0).contains(&gap_ratio),
        "poll interval {gap_ratio}×"
    );
    let table = loadmix::reports::compare::render_table(&c);
    assert!(table.contains("visibility p50 (ms)"), "{table}");
}
