//! `loadmix plan`: what each user of a workload will pick and the think before each,
//! without a server (plan = run), as text, JSON or one shard's part.

mod classes;
mod text;

pub(super) use text::{SKIP_WARNING_SHARE, render_plan};

use super::{Exit, WorkloadArgs, load_workload, parse_shard};
use crate::engine;
use crate::workload::{UserClass, Workload};
use clap::Args;

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
