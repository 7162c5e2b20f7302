//! What a user's picks come to in the round's figures: each pick's sample (and its steps'
//! samples), the first failures' details, the `--log-ops` row, and everything the users
//! of a round hand back when they end ([`VuOutput`]).

use std::time::Duration;

use tokio::time::Instant;

use super::session::ClassSessions;
use super::{FailureNote, OpLogEntry};
use crate::answer::Answer;
use crate::metrics::{self, Sample};
use crate::protocol::{Done, Handoff, Outcome, VuDriver};
use crate::transport::{ErrorClass, Tally, add_tally};

/// Who recorded a pick: its place in the round and in the report.
#[derive(Clone, Copy)]
pub(super) struct Who {
    /// The round's start, from which every sample's start is counted.
    pub(super) start: Instant,
    pub(super) round: u32,
    pub(super) class_index: usize,
    /// The user's index in its class, or an open session's place in the schedule.
    pub(super) vu: u32,
    /// The class's first label.
    pub(super) label_base: u32,
    /// Keep a row of every pick (`--log-ops`).
    pub(super) log_ops: bool,
    /// The round's warm-up window, µs from its start: what starts in it is not measured.
    pub(super) warmup_us: u64,
}

/// Per VU, keep only the first few failure details: the report needs examples, not a log.
const FAILURE_NOTES_PER_VU: usize = 2;

/// What the users of a round (closed users, open sessions) came to, added up as they end.
#[derive(Default)]
pub(super) struct VuOutput {
    pub(super) log: Vec<OpLogEntry>,
    pub(super) failures: Vec<FailureNote>,
    /// Set-up requests, by method and status.
    pub(super) setup: Tally,
    /// Open model: arrivals that found every slot taken and gave up, or waited.
    pub(super) dropped: u64,
    pub(super) late: u64,
    /// Open model: arrivals the generator itself started more than
    /// [`BEHIND_LIMIT`] after they fell due, with nothing (no busy slot) holding them.
    pub(super) behind: u64,
    pub(super) sessions: u64,
    /// Users stopped because pick after pick found nothing to act on.
    pub(super) stuck: u64,
    /// Classes with behaviours: what their users' sessions came to, by class index.
    pub(super) walks: Vec<(usize, ClassSessions)>,
    /// What its users handed over when they ended: what they left for the round's
    /// teardown, and their connections.
    pub(super) handoff: Handoff,
    /// Users that go on into the next round (`run.keep_state`).
    pub(super) kept: Vec<Ready>,
    /// Answers put in doubt, by label.
    pub(super) doubted: std::collections::BTreeMap<u32, u64>,
    /// User tasks (set-ups, users, sessions) that ended in a panic: a bug of loadmix's,
    /// whose output went with them.
    pub(super) panicked: u64,
}

/// A user task's end: its output absorbed, or, when it panicked (a bug: a task only ends
/// by returning), counted, so the report says output is missing. A task cancelled at a
/// stop left nothing to count.
pub(super) fn joined<T>(
    out: &mut VuOutput,
    res: Result<T, tokio::task::JoinError>,
    absorb: impl FnOnce(&mut VuOutput, T),
) {
    match res {
        Ok(t) => absorb(out, t),
        Err(e) if e.is_panic() => out.panicked += 1,
        Err(_) => {}
    }
}

/// An arrival started later than this after it fell due, by the generator's own doing,
/// is counted as behind: the schedule was not kept.
pub(crate) const BEHIND_LIMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// A closed user with its set-up done: its class, index and driver.
pub(super) type Ready = (usize, u32, VuDriver);

impl VuOutput {
    /// Add another user's.
    pub(super) fn absorb(&mut self, o: VuOutput) {
        self.handoff.absorb(o.handoff);
        self.kept.extend(o.kept);
        self.log.extend(o.log);
        self.failures.extend(o.failures);
        add_tally(&mut self.setup, o.setup);
        self.dropped += o.dropped;
        self.late += o.late;
        self.behind += o.behind;
        self.sessions += o.sessions;
        self.stuck += o.stuck;
        self.panicked += o.panicked;
        for (l, n) in o.doubted {
            *self.doubted.entry(l).or_insert(0) += n;
        }
        for (ci, w) in o.walks {
            match self.walks.iter_mut().find(|(c, _)| *c == ci) {
                Some((_, mine)) => mine.absorb(&w),
                None => self.walks.push((ci, w)),
            }
        }
    }
}

/// What one operation needs to be recorded.
pub(super) struct Timing {
    pub(super) think: Duration,
    /// When the operation was due: the end of the think, its pacing slot, its arrival.
    pub(super) intended: Instant,
    /// Of the time between `intended` and `ready`, what the generator itself took before
    /// the user could act (an open session's arrival acted on late by the arrival loop or
    /// the runtime): the generator's, counted as start lag and not as the server's.
    pub(super) held_by_generator: Duration,
    /// When the user was free to send it: the previous operation's end, or (for an open
    /// session's first) the end of its wait for a slot and of its set-up. What lies past
    /// `intended` before this, less `held_by_generator`, is the server's doing; what lies
    /// past both before `started` is the generator's (its timer waking late), and is
    /// never the server's latency.
    pub(super) ready: Instant,
    pub(super) started: Instant,
    pub(super) ended: Instant,
    pub(super) scheduled: bool,
}

/// Which pick an operation was: its number, its operation (none for a bootstrap) and
/// that operation's `client_timeout`, past which an answer that came fails for its
/// client.
pub(super) struct Pick {
    pub(super) seq: u64,
    pub(super) op: Option<usize>,
    pub(super) patience: Option<Duration>,
}

/// Record what a pick came to: its sample, its steps' samples, the first failures'
/// details and, with `--log-ops`, its row. A skipped pick (nothing sent) has only its row.
/// The label its answer was recorded under, when it sent anything, and whether it is
/// among the measured figures (it started after the warm-up window).
pub(super) fn record(
    out: &mut VuOutput,
    recorder: &mut metrics::Recorder,
    who: &Who,
    pick: Pick,
    done: &Done,
    t: Timing,
) -> Option<(u32, bool)> {
    let Pick { seq, op, patience } = pick;
    let start_us = t.started.duration_since(who.start).as_micros() as u64;
    let row = |label: usize, latency_us: u64, answer: Answer| OpLogEntry {
        round: who.round,
        class: who.class_index,
        vu: who.vu,
        seq,
        think_us: t.think.as_micros() as u64,
        op,
        label,
        start_us,
        latency_us,
        answer,
        error: match done {
            Done::Sent(o) => o.error,
            Done::Skipped => None,
        },
        skipped: matches!(done, Done::Skipped),
    };
    let outcome = match done {
        Done::Sent(o) => o,
        Done::Skipped => {
            // A bootstrap is never skipped by a driver; a pick is, and is counted.
            if let Some(op) = op {
                let sample = Sample::skipped(who.label_base + op as u32, start_us);
                recorder.record(sample, t.ended);
            }
            if who.log_ops {
                out.log.push(row(op.unwrap_or(0), 0, Answer::NONE));
            }
            return None;
        }
    };
    let label = outcome.label.or(op).unwrap_or(0);
    let mut sample = sample_of(outcome, who.label_base + label as u32, start_us, &t);
    // The row of the table picked, which the answer's label may refine.
    sample.pick = op.map_or(metrics::NO_PICK, |o| who.label_base + o as u32);
    let late = past_patience(&sample, outcome.longest, patience);
    if late.is_some() {
        sample.error = Some(ErrorClass::ClientTimeout);
    }
    recorder.record(sample, t.ended);
    record_steps(recorder, outcome, who.label_base, start_us, t.ended);
    if let (Some(e), true) = (sample.error, out.failures.len() < FAILURE_NOTES_PER_VU) {
        out.failures.push(FailureNote {
            round: who.round,
            label: sample.label,
            error: e,
            detail: late.unwrap_or_else(|| outcome.detail.clone().unwrap_or_default()),
        });
    }
    if who.log_ops {
        out.log.push(row(label, sample.latency_us, sample.answer));
    }
    Some((sample.label, start_us >= who.warmup_us))
}

/// Answers put in doubt during a pick (see [`crate::transport::Doubt`]): the earlier ones
/// are the user's previous answer's (`previous`: its label, and whether it is measured),
/// the others this one's (`this`). Only measured answers are filed, as only they are in
/// the operation's figures; one found with nothing before it in the round, or in the
/// warm-up, is counted only in the connection's unsolicited bytes. The user's last
/// answer, now.
pub(super) fn record_doubt(
    out: &mut VuOutput,
    doubt: crate::transport::Doubt,
    previous: Option<(u32, bool)>,
    this: Option<(u32, bool)>,
) -> Option<(u32, bool)> {
    for (answer, n) in [(previous, doubt.earlier), (this, doubt.this)] {
        if let (Some((l, true)), 1..) = (answer, n) {
            *out.doubted.entry(l).or_insert(0) += u64::from(n);
        }
    }
    this.or(previous)
}

/// The steps of a sequence, each under its own label, one after the other from the
/// operation's start (left out of the totals, which count the operation once).
pub(super) fn record_steps(
    recorder: &mut metrics::Recorder,
    outcome: &Outcome,
    label_base: u32,
    start_us: u64,
    ended: Instant,
) {
    let mut step_start = start_us;
    for (step_label, o) in &outcome.steps {
        let s = step_sample(o, label_base + *step_label as u32, step_start);
        recorder.record(s, ended);
        step_start += s.latency_us;
    }
}

/// Why an answer that came as expected fails for its client: one of the operation's
/// requests (`longest`, else the whole operation's latency when the driver does not
/// say) waited longer than the client waits for an answer (`patience`, the operation's
/// `client_timeout`), in words; `None` when it failed already or came in time.
fn past_patience(s: &Sample, longest: Duration, patience: Option<Duration>) -> Option<String> {
    let limit = patience?;
    let took = match longest.is_zero() {
        true => Duration::from_micros(s.latency_us),
        false => longest,
    };
    (s.error.is_none() && took > limit).then(|| {
        format!(
            "answered {} after {:.3} s, past the client's timeout of {:.3} s",
            s.answer,
            took.as_secs_f64(),
            limit.as_secs_f64()
        )
    })
}

/// An operation's sample under `label`, from its start (`start_us` into the round).
fn sample_of(outcome: &Outcome, label: u32, start_us: u64, t: &Timing) -> Sample {
    // The driver times the wire; an operation that failed before any answer arrived is
    // timed by the engine, so timeouts show their real cost in the timeline.
    let latency = if outcome.latency.is_zero() {
        t.ended.duration_since(t.started)
    } else {
        outcome.latency
    };
    Sample {
        label,
        start_us,
        latency_us: latency.as_micros() as u64,
        answer: outcome.answer,
        prior: prior_answers(&outcome.prior),
        error: outcome.error,
        bytes_sent: outcome.bytes_sent,
        bytes_received: outcome.bytes_received,
        // Coordinated omission: the time the user could not send because the server held
        // it (busy with the previous operation past this one's due time, or queued for a
        // slot) is added to the service time; the generator's own lateness is not.
        corrected_us: corrected(latency, t).as_micros() as u64,
        lag_us: start_lag(t).as_micros() as u64,
        scheduled: t.scheduled,
        connect_us: outcome.handshake.map(|h| micros32(h.connect)),
        tls_us: outcome.handshake.and_then(|h| h.tls).map(micros32),
        tls_resumed: outcome.handshake.is_some_and(|h| h.resumed),
        step: false,
        skipped: false,
        pick: metrics::NO_PICK,
    }
}

/// The latency from the operation's intended start: its service time, plus the time the
/// server kept the user from sending (busy with the previous operation past this one's due
/// time, a session slot held by sessions waiting on it, a session's set-up), less what
/// the generator itself took ([`start_lag`]). The same for closed, paced and open users.
fn corrected(latency: Duration, t: &Timing) -> Duration {
    let held = t.ready.saturating_duration_since(t.intended);
    latency + held.saturating_sub(t.held_by_generator)
}

/// How late the generator started the operation by its own doing: before the user was
/// ready (an arrival acted on late), and after it was both due and ready (a timer or the
/// runtime waking late).
fn start_lag(t: &Timing) -> Duration {
    t.held_by_generator + t.started.saturating_duration_since(t.intended.max(t.ready))
}

/// One step of a sequence as its own sample (no warm-up of its own, no scheduling lag).
fn step_sample(o: &Outcome, label: u32, start_us: u64) -> Sample {
    let latency_us = o.latency.as_micros() as u64;
    Sample {
        label,
        start_us,
        latency_us,
        answer: o.answer,
        prior: prior_answers(&o.prior),
        error: o.error,
        bytes_sent: o.bytes_sent,
        bytes_received: o.bytes_received,
        corrected_us: latency_us,
        lag_us: 0,
        scheduled: false,
        connect_us: o.handshake.map(|h| micros32(h.connect)),
        tls_us: o.handshake.and_then(|h| h.tls).map(micros32),
        tls_resumed: o.handshake.is_some_and(|h| h.resumed),
        step: true,
        skipped: false,
        pick: metrics::NO_PICK,
    }
}

/// Up to [`crate::metrics::PRIOR_ANSWERS`] earlier answers of an operation, none for none.
fn prior_answers(list: &[Answer]) -> [(Answer, u32); crate::metrics::PRIOR_ANSWERS] {
    let mut out = [crate::metrics::NO_PRIOR; crate::metrics::PRIOR_ANSWERS];
    let mut used = 0;
    for &a in list {
        // The same answer again adds to its entry; a new one takes the next, and past
        // the last entry (more kinds than any operation sends) it is counted in the last.
        let at = match out[..used].iter().position(|(b, _)| *b == a) {
            Some(i) => i,
            None if used < out.len() => {
                out[used].0 = a;
                used += 1;
                used - 1
            }
            None => used - 1,
        };
        out[at].1 = out[at].1.saturating_add(1);
    }
    out
}

/// Microseconds in 32 bits (over an hour saturates; connect and handshake times are
/// bounded by the connect timeout long before).
fn micros32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operations_earlier_answers_are_carried_as_kinds_with_their_counts() {
        let a = |s| Answer::http(s);
        let mut list = vec![a(401), a(207)];
        list.extend(std::iter::repeat_n(a(207), 99));
        list.push(a(401));
        let p = prior_answers(&list);
        assert_eq!(
            &p[..3],
            &[(a(401), 2), (a(207), 100), crate::metrics::NO_PRIOR]
        );
        // More kinds than entries: every answer still counted.
        let many: Vec<Answer> = (200..220).map(a).collect();
        let p = prior_answers(&many);
        assert_eq!(p.iter().map(|(_, n)| u64::from(*n)).sum::<u64>(), 20);
    }

    #[test]
    fn the_clients_patience_holds_its_longest_request_else_the_whole() {
        let mut s = Sample::skipped(0, 0);
        s.latency_us = 900_000;
        let secs = Duration::from_millis;
        // Three requests of 300 ms: none past a 500 ms patience, though together 900 ms.
        assert_eq!(past_patience(&s, secs(300), Some(secs(500))), None);
        assert!(past_patience(&s, Duration::ZERO, Some(secs(500))).is_some());
        assert!(past_patience(&s, secs(600), Some(secs(500))).is_some());
        assert_eq!(past_patience(&s, secs(600), None), None);
        s.error = Some(ErrorClass::Status);
        assert_eq!(
            past_patience(&s, secs(600), Some(secs(500))),
            None,
            "failed already"
        );
    }

    #[test]
    fn answers_in_doubt_are_filed_under_their_label_only_when_measured() {
        use crate::transport::Doubt;
        let mut out = VuOutput::default();
        let doubt = |earlier, this| Doubt { earlier, this };
        // The previous answer was in the warm-up window: not in any figure, not filed.
        let last = record_doubt(&mut out, doubt(1, 0), Some((3, false)), Some((4, true)));
        assert!(out.doubted.is_empty());
        assert_eq!(last, Some((4, true)));
        // A skipped pick keeps the last answer, which the next doubt then names.
        let last = record_doubt(&mut out, doubt(0, 0), last, None);
        let last = record_doubt(&mut out, doubt(1, 2), last, Some((5, true)));
        assert_eq!(out.doubted.get(&4), Some(&1));
        assert_eq!(out.doubted.get(&5), Some(&2));
        assert_eq!(last, Some((5, true)));
        // Nothing before the first pick of the round: counted nowhere.
        let mut first = VuOutput::default();
        record_doubt(&mut first, doubt(1, 0), None, Some((4, true)));
        assert!(first.doubted.is_empty());
    }

    #[tokio::test]
    async fn a_user_task_that_panics_is_counted_and_the_others_output_kept() {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..3u64 {
            tasks.spawn(async move {
                assert!(i != 1, "a bug in one user");
                VuOutput {
                    sessions: i,
                    ..VuOutput::default()
                }
            });
        }
        let mut out = VuOutput::default();
        while let Some(res) = tasks.join_next().await {
            joined(&mut out, res, VuOutput::absorb);
        }
        assert_eq!(out.panicked, 1);
        assert_eq!(out.sessions, 2, "the other two users' output");
    }

    /// A timing `ms` offsets from one instant.
    fn timing(intended: u64, by_generator: u64, ready: u64, started: u64) -> Timing {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        Timing {
            think: Duration::ZERO,
            intended: at(intended),
            held_by_generator: Duration::from_millis(by_generator),
            ready: at(ready),
            started: at(started),
            ended: at(started + 2),
            scheduled: true,
        }
    }

    #[test]
    fn what_the_generator_took_is_start_lag_and_what_the_server_held_is_corrected() {
        let ms = Duration::from_millis;
        // An arrival due at 0, acted on 5 ms late by the arrival loop, then 3 ms waiting
        // for a slot the server's sessions held: ready at 8, sent at 9 (1 ms more of the
        // generator's), answered in 2 ms.
        let t = timing(0, 5, 8, 9);
        assert_eq!(corrected(ms(2), &t), ms(2 + 3));
        assert_eq!(start_lag(&t), ms(5 + 1));
        // A closed or paced user busy with the previous answer past the due time: all of
        // it the server's.
        let t = timing(10, 0, 14, 14);
        assert_eq!((corrected(ms(2), &t), start_lag(&t)), (ms(6), ms(0)));
        // Free before the due time and started late: the timer's, none in the latency.
        let t = timing(10, 0, 4, 12);
        assert_eq!((corrected(ms(2), &t), start_lag(&t)), (ms(2), ms(2)));
    }
}
