//! The plan's text for each class: its heading (users, arrivals, peak), its share of the
//! offered rate, a session's length, and its operations or behaviours with their weights.

use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

use crate::engine;
use crate::workload::{UserClass, Workload, units};

/// A class's first line: its protocol, its users (or arrivals) and how they are paced.
pub(super) fn class_heading(c: &UserClass) -> String {
    let fmt_us =
        |us: f64| units::format_duration(std::time::Duration::from_nanos((us * 1e3) as u64));
    let users = match &c.arrival {
        Some(a) => format!(
            "open: sessions arrive at {}/s ({}), at most {} at once, when full {}, {}{}",
            a.rate,
            match a.process {
                crate::workload::ArrivalProcess::Poisson => "poisson",
                crate::workload::ArrivalProcess::Constant => "constant",
            },
            // One session per returning user at a time.
            a.returning
                .map_or(a.max_concurrency, |r| r.min(a.max_concurrency)),
            match a.when_full {
                crate::workload::WhenFull::Queue => "queue",
                crate::workload::WhenFull::Drop => "drop",
            },
            session_length(c),
            match a.returning {
                Some(n) => format!(", each one of {n} returning users"),
                None => ", each a new user".into(),
            }
        ),
        None => format!(
            "{} user(s){}",
            c.count,
            c.iterations
                .map(|n| format!(" · {n} ops each"))
                .unwrap_or_default()
        ),
    };
    let ramp = match c.ramp.len() {
        0 => String::new(),
        n => format!(" · ramp of {n} stage(s), up to {} at the peak", peak(c)),
    };
    let pace = match c.pacing {
        Some(p) => format!("pacing {} (no think)", units::format_duration(p)),
        None => format!("think {}", c.think.describe(&fmt_us)),
    };
    let pause = c
        .chain
        .pause
        .as_ref()
        .map(|p| format!(" · pause between sessions {}", p.describe(&fmt_us)))
        .unwrap_or_default();
    format!(
        "class {} · protocol {} · {users}{ramp} · {pace}{pause} · {}{}",
        c.name,
        c.protocol.name(),
        c.connection.name(),
        patience(c)
    )
}

/// The class's clients' patience: ` · client timeout T` when all its operations wait as
/// long, each operation's when they differ, nothing when none has one.
fn patience(c: &UserClass) -> String {
    let each: Vec<Option<std::time::Duration>> = c.ops.iter().map(|o| o.client_timeout).collect();
    match each.first() {
        None | Some(None) if each.iter().all(Option::is_none) => String::new(),
        Some(first) if each.iter().all(|t| t == first) => format!(
            " · client timeout {}",
            first.map_or("none".into(), units::format_duration)
        ),
        _ => {
            let ops: Vec<String> = c
                .ops
                .iter()
                .map(|o| {
                    let t = o
                        .client_timeout
                        .map_or("none".into(), units::format_duration);
                    format!("{} {t}", o.name)
                })
                .collect();
            format!(" · client timeouts {}", ops.join(", "))
        }
    }
}

/// A class's most users (or sessions per second) under its ramp.
pub(super) fn peak(c: &UserClass) -> String {
    match &c.arrival {
        Some(a) => {
            let top = c.ramp.iter().filter_map(|s| s.to).fold(a.rate, f64::max);
            format!("{top}/s")
        }
        None => format!("{} user(s)", Workload::peak_users(c)),
    }
}

/// The operations a class offers per second, as far as the plan can tell without a
/// server.
pub(super) enum Offered {
    /// Exactly: an open class's sessions, or paced users.
    Exactly(f64),
    /// About at most: users that think, before the server's answers add to each cycle
    /// (a round's drawn thinks may average a little under their mean).
    AtMost(f64),
}

impl Offered {
    fn rate(&self) -> f64 {
        match self {
            Offered::Exactly(r) | Offered::AtMost(r) => *r,
        }
    }

    pub(super) fn text(&self) -> String {
        match self {
            Offered::Exactly(r) => format!("offered: {r:.1} ops/s"),
            Offered::AtMost(r) => format!(
                "offered: up to about {r:.1} ops/s (users ÷ mean think; the time each answer takes lowers it)"
            ),
        }
    }
}

/// How long an open class's session is: its operations, or for behaviours, about how
/// many it runs to its exit.
pub(super) fn session_length(c: &UserClass) -> String {
    match engine::plan::session_ops(c) {
        Some(n) => format!("{n} op(s) each"),
        None => match c.chain.mean_ops_per_session(c.ops.len()) {
            Some(x) => format!("each to its exit (about {x:.2} ops)"),
            None => "each to its max_ops or the round's end".into(),
        },
    }
}

/// What class `c` offers per second: an open class its rate × operations per session, a
/// paced one its users ÷ the pacing, one that thinks its users ÷ the mean think; `None`
/// when its users go as fast as the server answers (no think).
pub(super) fn offered_rate(c: &UserClass) -> Option<Offered> {
    if let Some(a) = &c.arrival {
        let per_session = match engine::plan::session_ops(c) {
            Some(n) => n as f64,
            None => c.chain.mean_ops_per_session(c.ops.len())?,
        };
        return Some(Offered::Exactly(a.rate * per_session));
    }
    if let Some(p) = c.pacing.filter(|p| !p.is_zero()) {
        return Some(Offered::Exactly(c.count as f64 / p.as_secs_f64()));
    }
    let think_s = c.think.mean() / 1e6;
    (think_s > 0.0).then(|| Offered::AtMost(c.count as f64 / think_s))
}

/// Each class's share of all operations, and the line saying what it rests on: the
/// classes' offered rates when every class has one, else their users, every user taken
/// to run at the same rate (an open class then has none to give).
pub(super) fn class_shares(w: &Workload) -> (Vec<Option<f64>>, &'static str) {
    let rates: Option<Vec<f64>> = w
        .classes
        .iter()
        .map(|c| offered_rate(c).map(|o| o.rate()))
        .collect();
    if let Some(rates) = rates {
        let sum: f64 = rates.iter().sum();
        if sum > 0.0 {
            return (
                rates.iter().map(|r| Some(r / sum)).collect(),
                "share of all ops from each class's offered rate (a class that thinks gives its most, as if every answer were instant).",
            );
        }
    }
    let users = w.total_users() as f64;
    (
        w.classes
            .iter()
            .map(|c| match (&c.arrival, users > 0.0) {
                (None, true) => Some(c.count as f64 / users),
                _ => None,
            })
            .collect(),
        "share of all ops assumes every closed user runs operations at the same rate (open classes: see their offered rate).",
    )
}

/// One class: its users and think, its operations with their weights and shares (of all
/// operations, from the class's `share`), its behaviours.
pub(super) fn class_text(out: &mut String, c: &UserClass, share: Option<f64>) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "\n{}", class_heading(c));
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "operation",
        "weight",
        "probability",
        "share of all ops",
        "request / params",
    ]);
    for (i, op) in c.ops.iter().enumerate() {
        let share = share.map_or("-".to_string(), |s| {
            format!("{:.2}%", op.probability * s * 100.0)
        });
        t.add_row(vec![
            op.name.clone(),
            if c.chain.from_mix {
                weight(op.weight)
            } else {
                "(rows)".into()
            },
            format!("{:.2}%", op.probability * 100.0),
            share,
            c.kind.describe_op(i),
        ]);
    }
    let _ = writeln!(out, "{t}");
    if !c.chain.from_mix {
        behaviours_text(out, c);
    }
}

/// What each behaviour of a class implies, worked out exactly from its chain: its share
/// of sessions, the operations a session runs and the visits to each state; states it
/// defines but never reaches, as warnings.
pub(super) fn behaviours_text(out: &mut String, c: &crate::workload::UserClass) {
    use std::fmt::Write as _;
    let n = c.ops.len();
    let mut reached = vec![false; n];
    for (b, beh) in c.chain.behaviours.iter().enumerate() {
        let e = c.chain.expected(b, n);
        let length = match e.ops_per_session {
            Some(x) => format!("{x:.2} operations per session"),
            None => "sessions never exit (they end with max_ops or the round)".into(),
        };
        let unit = if e.ops_per_session.is_some() {
            "visits per session"
        } else {
            "long-run share"
        };
        let visits: Vec<String> = c
            .ops
            .iter()
            .zip(&e.visits)
            .filter(|(_, v)| **v > 0.0)
            .map(|(o, v)| format!("{} {v:.3}", o.name))
            .collect();
        let _ = writeln!(
            out,
            "behaviour {} · weight {} ({:.1}% of sessions) · {length}\n  {unit}: {}",
            beh.name,
            weight(beh.weight),
            beh.probability * 100.0,
            visits.join(", ")
        );
        if beh.weight > 0.0 && beh.probability == 0.0 {
            let _ = writeln!(
                out,
                "  warning: weight {} is too small beside the others for a double to \
                 draw: behaviour '{}' never runs",
                weight(beh.weight),
                beh.name
            );
        }
        let reach = c.chain.reachable(b, n);
        for (op, r) in reach.iter().enumerate() {
            reached[op] |= *r;
            if !r && beh.states[op].is_some() {
                let _ = writeln!(
                    out,
                    "  warning: state '{}' of behaviour '{}' is never reached",
                    c.ops[op].name, beh.name
                );
            }
        }
    }
    if let Some(m) = c.chain.max_ops {
        let _ = writeln!(out, "a session ends after at most {m} operations");
    }
    for (op, r) in c.ops.iter().zip(&reached) {
        if !r {
            let _ = writeln!(
                out,
                "warning: operation '{}' is in ops but no behaviour reaches it",
                op.name
            );
        }
    }
}

/// A weight as its user wrote it, in scientific notation when a plain decimal would run
/// to hundreds of digits (`1e-320`, `1e300`).
pub(super) fn weight(w: f64) -> String {
    if w != 0.0 && !(1e-4..1e9).contains(&w.abs()) {
        format!("{w:e}")
    } else {
        format!("{w}")
    }
}
