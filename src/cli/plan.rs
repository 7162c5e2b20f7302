//! `loadmix plan`: what each user of a workload will pick and the think before each,
//! without a server (plan = run), as text, JSON or one shard's part.

use super::{Exit, WorkloadArgs, load_workload, parse_shard};
use crate::engine;
use crate::workload::{UserClass, Workload, units};
use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

#[derive(Debug, Args)]
pub(super) struct PlanArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Which user: CLASS#N (N from 0) [default: the first class, #0]; for an open class,
    /// the session of its arrival N in the round.
    #[arg(long, value_name = "CLASS#N")]
    pub vu: Option<String>,
    /// How many operations.
    #[arg(long, default_value_t = 20)]
    pub ops: u64,
    /// Which round (from 1).
    #[arg(long, default_value_t = 1)]
    pub round: u32,
    /// Instead of one user's picks, list which users and arrivals of the round shard I of
    /// N runs (see `run --shard`).
    #[arg(long, value_name = "I/N", value_parser = parse_shard, conflicts_with = "vu")]
    pub shard: Option<crate::engine::shard::Shard>,
}

/// `--round` names one of the workload's rounds.
pub(super) fn check_round(w: &crate::workload::Workload, round: u32) -> Result<(), Exit> {
    if round == 0 || round > w.run.rounds {
        return Err(Exit::Usage.fail(format!(
            "--round: the workload has rounds 1..={}",
            w.run.rounds
        )));
    }
    Ok(())
}

/// `plan --shard I/N`: the users and arrivals of one round that shard runs, streamed.
pub(super) fn plan_shard(
    w: &crate::workload::Workload,
    shard: crate::engine::shard::Shard,
    round: u32,
) -> Exit {
    if let Err(e) = check_round(w, round) {
        return e;
    }
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "# {} shard {shard} round {round} seed {}\nclass\tkind\tindex\tat_ms",
        w.name, w.run.seed
    );
    for part in engine::plan::shard_part(w, shard, round) {
        let line = match part {
            engine::plan::Part::User { class, vu } => writeln!(out, "{class}\tuser\t{vu}\t-"),
            engine::plan::Part::Arrival { class, k, at } => {
                writeln!(out, "{class}\tarrival\t{k}\t{:.3}", at.as_secs_f64() * 1e3)
            }
        };
        if line.is_err() {
            break;
        }
    }
    let _ = out.flush();
    Exit::Ok
}

/// The resolved plan, as `validate` prints it.
pub(super) fn render_plan(w: &Workload) -> String {
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
    out
}

/// What a CalDAV class's set-up will cost the server: the events `initial_events` puts,
/// one PUT each, before a user's first pick (off the clock, but not free).
fn setup_text(c: &UserClass) -> Option<String> {
    let crate::workload::ClassKind::Caldav { params, .. } = &c.kind else {
        return None;
    };
    let mean = params.initial_events.as_ref()?.mean();
    if mean < 0.5 {
        return None;
    }
    if let Some(a) = c.arrival.as_ref().filter(|a| a.returning.is_none()) {
        return Some(format!(
            "set-up: each arriving user first puts about {mean:.0} events, one PUT each: \
             about {:.0} PUTs/s beside the measured picks",
            a.rate * mean
        ));
    }
    let users = match &c.arrival {
        Some(a) => f64::from(a.returning.unwrap_or(0)),
        None => f64::from(Workload::peak_users(c)),
    };
    let puts = users * mean;
    // At a pace a fast server keeps, so that a set-up of hours is seen as one.
    let secs = puts / 1000.0;
    let at = match secs {
        s if s >= 3600.0 => format!("about {:.1} h", s / 3600.0),
        s if s >= 60.0 => format!("about {:.0} min", s / 60.0),
        s if s >= 1.0 => format!("about {s:.0} s"),
        _ => "under a second".into(),
    };
    Some(format!(
        "set-up: about {puts:.0} events put before the first pick ({users:.0} users × mean \
         {mean:.0}, one PUT each): {at} at 1,000 PUTs a second"
    ))
}

/// A sampled plan's share of picks with nothing to act on beyond which `validate` warns:
/// the realized mix would then be visibly off the mix asked.
pub(super) const SKIP_WARNING_SHARE: f64 = 0.02;

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
fn run_text(out: &mut String, w: &Workload) {
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
fn teams_text(out: &mut String, w: &Workload) {
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

/// A class's first line: its protocol, its users (or arrivals) and how they are paced.
fn class_heading(c: &UserClass) -> String {
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
        "class {} · protocol {} · {users}{ramp} · {pace}{pause} · {}",
        c.name,
        c.protocol.name(),
        c.connection.name()
    )
}

/// A class's most users (or sessions per second) under its ramp.
fn peak(c: &UserClass) -> String {
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
enum Offered {
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

    fn text(&self) -> String {
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
fn session_length(c: &UserClass) -> String {
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
fn offered_rate(c: &UserClass) -> Option<Offered> {
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
fn class_shares(w: &Workload) -> (Vec<Option<f64>>, &'static str) {
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
fn class_text(out: &mut String, c: &UserClass, share: Option<f64>) {
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

pub(super) fn plan(a: PlanArgs) -> Exit {
    let w = match load_workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return Exit::Usage.fail(e),
    };
    if let Some(shard) = a.shard {
        return plan_shard(&w, shard, a.round);
    }
    let (class, vu) = match which_user(&w, a.vu.as_deref()) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if let Err(e) = check_round(&w, a.round) {
        return e;
    }
    let class_name = class.name.as_str();
    if class
        .chain
        .rows
        .iter()
        .any(|r| r.to.iter().any(|t| t.when.is_some()))
    {
        eprintln!(
            "note: class {class_name} has guarded transitions; this plan takes every guard as holding, while a run checks each against what the user holds then"
        );
    }
    if class.arrival.is_some() {
        return plan_arrival(&w, class, vu, a.round, a.ops);
    }
    // Streamed: any --ops prints in constant memory, and stops when stdout closes.
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "# {} {class_name}#{vu} round {} seed {}\nseq\tthink\top",
        w.name, a.round, w.run.seed
    );
    for p in engine::plan::picks(w.run.seed, class, vu, a.round).take(a.ops as usize) {
        if writeln!(
            out,
            "{}\t{:.3}ms\t{}",
            p.seq,
            p.think.as_secs_f64() * 1e3,
            p.name
        )
        .is_err()
        {
            break;
        }
    }
    let _ = out.flush();
    Exit::Ok
}

/// The class and user (or open arrival) `--vu CLASS#N` names; the first class's #0 when
/// it is not given.
fn which_user<'w>(w: &'w Workload, vu: Option<&str>) -> Result<(&'w UserClass, u32), Exit> {
    let (class_name, n) = match vu {
        None => (w.classes[0].name.as_str(), 0),
        Some(s) => {
            let (c, n) = s.split_once('#').unwrap_or((s, "0"));
            match n.parse::<u32>() {
                Ok(n) => (c, n),
                Err(_) => {
                    return Err(
                        Exit::Usage.fail(format!("--vu: '{s}' should be CLASS#N, e.g. morse#3"))
                    );
                }
            }
        }
    };
    let Some(class) = w.class(class_name) else {
        let names: Vec<&str> = w.classes.iter().map(|c| c.name.as_str()).collect();
        return Err(Exit::Usage.fail(format!(
            "--vu: no class '{class_name}' (classes: {})",
            names.join(", ")
        )));
    };
    if class.arrival.is_none() && n >= Workload::peak_users(class) {
        return Err(Exit::Usage.fail(format!(
            "--vu: class {class_name} has {} user(s), numbered from 0",
            Workload::peak_users(class)
        )));
    }
    Ok((class, n))
}

/// `plan --vu CLASS#K` of an open class: when arrival K is due in the round and the picks
/// of its session (the first due on arrival, with no think before it).
fn plan_arrival(w: &Workload, class: &UserClass, k: u32, round: u32, ops: u64) -> Exit {
    let Some(at) = engine::plan::arrival_at(w, class, u64::from(k), round) else {
        return Exit::Usage.fail(format!(
            "--vu: round {round} of class {} has no arrival {k} (arrivals are numbered from 0; `plan --shard 1/1` lists them)",
            class.name
        ));
    };
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "# {} {}#{k}: open arrival {k}, due {:.3} ms into round {round}, seed {}; its session's picks\nseq\tthink\top",
        w.name,
        class.name,
        at.as_secs_f64() * 1e3,
        w.run.seed
    );
    let picks = engine::plan::arrival_picks(w, class, k, round);
    for p in picks.take(usize::try_from(ops).unwrap_or(usize::MAX)) {
        let think = match p.seq {
            0 => "on arrival".to_string(),
            _ => format!("{:.3}ms", p.think.as_secs_f64() * 1e3),
        };
        if writeln!(out, "{}\t{think}\t{}", p.seq, p.name).is_err() {
            break;
        }
    }
    let _ = out.flush();
    Exit::Ok
}

/// A weight as its user wrote it, in scientific notation when a plain decimal would run
/// to hundreds of digits (`1e-320`, `1e300`).
fn weight(w: f64) -> String {
    if w != 0.0 && !(1e-4..1e9).contains(&w.abs()) {
        format!("{w:e}")
    } else {
        format!("{w}")
    }
}
