//! The plan's text around its classes: what the run does (rounds, stop, warm-up), the
//! teams, each class's set-up, and the share of picks a sampled plan finds with nothing
//! to act on.

use super::classes::{class_shares, class_text, offered_rate};
use crate::engine;
use crate::workload::{UserClass, Workload, units};

/// The resolved plan, as `validate` prints it.
pub(in crate::cli) fn render_plan(w: &Workload) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    run_text(&mut out, w);
    let (shares, basis) = class_shares(w);
    for (c, share) in w.classes.iter().zip(shares) {
        class_text(&mut out, c, share);
        if let Some(rate) = offered_rate(c) {
            let _ = writeln!(out, "{}", rate.text());
        }
        if let Some(e) = engine::plan::skip_estimate(w, c) {
            let _ = writeln!(out, "{}", skip_text(&e));
        }
        if let Some(t) = setup_text(c) {
            let _ = writeln!(out, "{t}");
        }
    }
    let _ = writeln!(out, "\n{basis}");
    if !w.thresholds.is_empty() {
        let _ = writeln!(out, "thresholds:");
        for t in &w.thresholds {
            let _ = writeln!(out, "  {}: {}", t.op, t.text);
        }
    }
    faults_text(&mut out, w);
    out
}

/// The fault timeline: each window, where and when it acts; then how recovery is judged.
fn faults_text(out: &mut String, w: &Workload) {
    use std::fmt::Write as _;
    if w.faults.is_empty() {
        return;
    }
    let _ = writeln!(out, "faults (each measured round's clock):");
    for f in &w.faults {
        let round = f
            .round
            .map_or("every round".to_string(), |r| format!("round {r}"));
        let target = f
            .target
            .as_deref()
            .map_or("every target".to_string(), |t| format!("target {t}"));
        let _ = writeln!(
            out,
            "  {} at {} for {} · {round} · {target}",
            f.text,
            units::format_duration(f.at),
            units::format_duration(f.length),
        );
    }
    let r = &w.recovery;
    let _ = writeln!(
        out,
        "recovery: successes a second within {:.0}% of the seconds before a window, and their p{} at most {:.0}% above, for {} in a row",
        r.band * 100.0,
        r.percentile,
        r.band * 100.0,
        units::format_duration(r.hold)
    );
}

/// What a class puts in each user's first collection before its first pick, on average:
/// how many, what they are, and the mean bytes of one (`None`: the generator's natural
/// size, a few hundred bytes).
fn prefill_of(c: &UserClass) -> Option<(f64, &'static str, Option<f64>)> {
    use crate::workload::ClassKind;
    use crate::workload::protocols::{CarddavOp, ContactShape};
    match &c.kind {
        ClassKind::Caldav { params, .. } => {
            Some((params.initial_events.as_ref()?.mean(), "events", None))
        }
        ClassKind::Carddav { params, ops } => {
            let default = ContactShape::default();
            let shape = ops
                .iter()
                .find_map(|o| {
                    let CarddavOp::PutContact(s) = o else {
                        return None;
                    };
                    Some(s)
                })
                .unwrap_or(&default);
            // A photo goes as base64: four bytes for every three.
            let photo = shape
                .photo
                .as_ref()
                .map_or(0.0, |d| d.mean() * shape.photos * 4.0 / 3.0);
            Some((
                params.initial_contacts.as_ref()?.mean(),
                "contacts",
                Some(300.0 + photo),
            ))
        }
        ClassKind::Http { .. }
        | ClassKind::Morse { .. }
        | ClassKind::Atom { .. }
        | ClassKind::Stomp { .. }
        | ClassKind::Amqp { .. } => None,
    }
}

/// What a CalDAV or CardDAV class's set-up will cost the server: the events
/// `initial_events` or the contacts `initial_contacts` puts, one PUT each, before a
/// user's first pick (off the clock, but not free).
pub(super) fn setup_text(c: &UserClass) -> Option<String> {
    let (mean, what, bytes) = prefill_of(c)?;
    if mean < 0.5 {
        return None;
    }
    if let Some(a) = c.arrival.as_ref().filter(|a| a.returning.is_none()) {
        return Some(format!(
            "set-up: each arriving user first puts about {mean:.0} {what}, one PUT each: \
             about {:.0} PUTs/s beside the measured picks",
            a.rate * mean
        ));
    }
    let users = match &c.arrival {
        Some(a) => f64::from(a.returning.unwrap_or(0)),
        None => f64::from(Workload::peak_users(c)),
    };
    let puts = users * mean;
    // At a pace a fast server keeps, so that a set-up of hours is seen as one: a thousand
    // PUTs a second, or a hundred MiB of them when the items are large (photos).
    let all_bytes = bytes.map(|b| puts * b);
    let secs = (puts / 1000.0).max(all_bytes.unwrap_or(0.0) / SETUP_BYTES_PER_SEC);
    let at = match secs {
        s if s >= 3600.0 => format!("about {:.1} h", s / 3600.0),
        s if s >= 60.0 => format!("about {:.0} min", s / 60.0),
        s if s >= 1.0 => format!("about {s:.0} s"),
        _ => "under a second".into(),
    };
    let size = all_bytes.map_or(String::new(), |b| {
        format!(", about {} in all", crate::workload::units::format_size(b))
    });
    Some(format!(
        "set-up: about {puts:.0} {what} put before the first pick ({users:.0} users × mean \
         {mean:.0}, one PUT each{size}): {at} at 1,000 PUTs or 100 MiB a second, whichever \
         is slower"
    ))
}

/// The bytes a second of items a fast server stores in a set-up, for its estimate.
const SETUP_BYTES_PER_SEC: f64 = 100.0 * 1024.0 * 1024.0;

/// A sampled plan's share of picks with nothing to act on beyond which `validate` warns:
/// the realized mix would then be visibly off the mix asked.
pub(in crate::cli) const SKIP_WARNING_SHARE: f64 = 0.02;

/// What a sampled plan of a class's picks says of those that would send nothing.
pub(super) fn skip_text(e: &engine::plan::SkipEstimate) -> String {
    let ops: Vec<String> = e.by_op.iter().map(|(op, n)| format!("{op} {n}")).collect();
    let rounds = match e.rounds {
        1 => String::new(),
        n => format!(" in each of {n} rounds"),
    };
    let each = match e.to_exit {
        true => "each to its exit".to_string(),
        false => format!("{} picks each", e.per_round),
    };
    let sampled = format!(
        "a sampled plan ({} {}, {each}{rounds})",
        e.users,
        match e.open {
            true => "session(s)",
            false => "user(s)",
        },
    );
    match e.skipped {
        0 => format!("{sampled} finds something to act on for every pick"),
        _ => format!(
            "{sampled} finds nothing to act on for {} of {} picks ({:.1} %: {}); such a pick sends nothing and is reported as skipped",
            e.skipped,
            e.picks,
            e.share() * 100.0,
            ops.join(", ")
        ),
    }
}

/// The workload, its target and how its rounds run.
pub(super) fn run_text(out: &mut String, w: &Workload) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "workload {} · hash {} · {}",
        w.name,
        &w.hash[..12],
        w.file
    );
    if let Some(d) = &w.description {
        let _ = writeln!(out, "{d}");
    }
    let users = w.context_users();
    match users.is_empty() {
        true => {
            let _ = writeln!(out, "target {}", w.target);
        }
        false => {
            let _ = writeln!(
                out,
                "target {} · context '{}' (for {})",
                w.target,
                w.context,
                users.join(", ")
            );
        }
    }
    let _ = writeln!(
        out,
        "run {} round(s) × {} · warm-up {} · seed {} · timeout {} · connect timeout {}",
        w.run.rounds,
        w.length_text(),
        units::format_duration(w.run.warmup),
        w.run.seed,
        units::format_duration(w.run.timeout),
        units::format_duration(w.run.connect_timeout)
    );
    if w.run.warmup_rounds > 0 {
        let _ = writeln!(
            out,
            "{} warm-up round(s) first, run and thrown away",
            w.run.warmup_rounds
        );
    }
    if w.run.keep_state {
        let _ = writeln!(
            out,
            "users keep what they made (accounts, calendars, items) from round to round; it is removed once, after the last"
        );
    }
    teams_text(out, w);
    if !w.overrides.is_empty() {
        let _ = writeln!(out, "overrides: {}", w.overrides.join(" "));
    }
}

/// Each kind of team: how many, how access is granted, who is in one and who owns it.
pub(super) fn teams_text(out: &mut String, w: &Workload) {
    use std::fmt::Write as _;
    for (kind, t) in w.teams.iter().enumerate() {
        let mut by_class: Vec<(usize, u32)> = Vec::new();
        for (ci, _) in w.members(kind, 0) {
            match by_class.last_mut() {
                Some((c, n)) if *c == ci => *n += 1,
                _ => by_class.push((ci, 1)),
            }
        }
        let name = |ci: usize| w.classes.get(ci).map_or("?", |c| c.name.as_str());
        let each: Vec<String> = by_class
            .iter()
            .map(|&(ci, n)| format!("{} {n}", name(ci)))
            .collect();
        let owner = t.classes.first().map_or("?", |&ci| name(ci));
        let by_ticket = t
            .classes
            .first()
            .and_then(|&ci| w.classes.get(ci))
            .is_some_and(|c| c.protocol == crate::workload::Protocol::Morse);
        let (access, makes) = match by_ticket {
            true => ("by ticket".to_string(), "publishes its collection"),
            false => (format!("grant {}", t.grant.name()), "makes its calendar"),
        };
        let _ = writeln!(
            out,
            "team {} × {} ({access}): {} users each ({}); {owner}#t owns team t and {makes}",
            t.name,
            t.count,
            by_class.iter().map(|(_, n)| n).sum::<u32>(),
            each.join(", ")
        );
    }
}
