//! `loadmix new`: a first workload for a target, the way `k6 new` gives a first script,
//! except that this one has been tried.
//!
//! Each protocol the target might speak (by its scheme: CalDAV, Cosmo's Morse Code and
//! Atom, and a plain GET for an HTTP URL; STOMP or AMQP for a broker; Cosmo and CalDAV for
//! the embedded server) has a commented class template. Each is run once against the
//! target through `run` itself, briefly (one round of a few operations per user, its
//! preflight first, its cleanup after), and kept only when that trial had requests and no
//! failure. The file written holds the classes that passed, and says in comments what
//! the others answered; it is loaded back before it is written, so it validates.

use std::path::{Path, PathBuf};

use crate::formats::scheme::{Family, Scheme};
use crate::report;
use crate::run::{self, RunOptions, StdoutFormat};
use crate::transport::TlsOptions;
use crate::workload::{LoadOptions, Protocol};

/// Operations each user of a trial runs: enough to touch every operation of the mix
/// at least once in most trials, few enough to stay brief on a slow server.
const TRIAL_ITERATIONS: &str = "6";

#[derive(Debug, thiserror::Error)]
pub(crate) enum NewError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Write(String),
    /// Nothing the target was tried with worked: each trial's answer is in the message.
    #[error("no protocol worked against {target}:\n{tried}")]
    Nothing { target: String, tried: String },
}

/// What `loadmix new` is asked.
pub(crate) struct NewOptions {
    /// `--target`: a URL (`http(s)://`, `stomp://`, `amqp(s)://`) or `embedded`.
    pub target: String,
    /// `--protocol`: only these (their names), else every one the scheme allows.
    pub protocols: Vec<String>,
    /// `--user`: an existing account, its password from `$LOADMIX_PASSWORD`.
    pub user: Option<String>,
    pub out: PathBuf,
    pub tls: TlsOptions,
    /// Print nothing but errors.
    pub quiet: bool,
}

/// A kind of client the starter writes: one protocol's class, or Cosmo's two (Morse Code
/// and Atom, which a Cosmo server serves together, tried together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cosmo,
    One(Protocol),
}

impl Kind {
    fn of(p: Protocol) -> Kind {
        match p {
            Protocol::Morse | Protocol::Atom => Kind::Cosmo,
            Protocol::Caldav
            | Protocol::Carddav
            | Protocol::Http
            | Protocol::Stomp
            | Protocol::Amqp => Kind::One(p),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Cosmo => "morse+atom",
            Kind::One(p) => p.name(),
        }
    }

    /// Whether `--protocol NAME` asks for this kind.
    fn named(self, p: &str) -> bool {
        match self {
            Kind::Cosmo => matches!(p, "morse" | "atom" | "cosmo"),
            Kind::One(q) => q.name() == p,
        }
    }

    /// The kinds a target may speak, from the protocols themselves: those its scheme's
    /// family carries (the embedded server: those it serves), in the registry's order.
    fn candidates(target: &str) -> Result<Vec<Kind>, NewError> {
        let embedded = target == "embedded" || target.starts_with("embedded:");
        let family = match (embedded, Scheme::split(target)) {
            (true, _) => Family::Http,
            (false, Some((scheme, _))) => scheme.family,
            (false, None) => {
                return Err(NewError::Usage(format!(
                    "--target {target}: give embedded or a URL whose scheme is one of {}",
                    Scheme::listed()
                )));
            }
        };
        let mut kinds = Vec::new();
        for p in Protocol::ALL {
            let k = Kind::of(p);
            if p.family() == family && (!embedded || served_embedded(p)) && !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        Ok(kinds)
    }

    /// The class(es) of this kind, as YAML under `users:`, commented.
    fn classes(self) -> &'static str {
        match self {
            Kind::Cosmo => COSMO,
            Kind::One(p) => match p {
                Protocol::Morse | Protocol::Atom => COSMO,
                Protocol::Caldav => CALDAV,
                Protocol::Carddav => CARDDAV,
                Protocol::Http => HTTP,
                Protocol::Stomp => STOMP,
                Protocol::Amqp => AMQP,
            },
        }
    }
}

/// Whether the embedded server serves a protocol the starter tries on it: Cosmo's and
/// CalDAV and CardDAV (its queue and broker are there for workloads that name them).
fn served_embedded(p: Protocol) -> bool {
    match p {
        Protocol::Morse | Protocol::Atom | Protocol::Caldav | Protocol::Carddav => true,
        Protocol::Http | Protocol::Stomp | Protocol::Amqp => false,
    }
}

const COSMO: &str = r#"  # Morse Code sync clients (Cosmo's EIM over HTTP), as in the 2007 stress test: each
  # publishes a collection, then mostly syncs it, sometimes with changes.
  - class: morse
    protocol: morse
    count: 4
    mix: { publish: 0.5, sync: 76.5, update: 15, subscribe: 7.75, delete: 0.25 }
    params: { collection_size: { exponential: { mean: 50, max: 3000 } }, no_change_sync: 0.2 }
  # Atom feed readers and writers of the same server.
  - class: atom
    protocol: atom
    count: 2
    mix: { time_range_feed: 60, full_feed: 5, create_event: 15, update_event: 5, dashboard: 15 }
    params: { initial_items: 20 }
"#;

const CALDAV: &str = r#"  # CalDAV clients: discovery (/.well-known/caldav, principal, calendar home), then
  # sync-collection polls, time-range reports and some edits, in calendars of their own.
  - class: caldav
    protocol: caldav
    count: 4
    mix:
      sync_collection: 40
      time_range_report: { weight: 20, params: { range: 30d } }
      put_event: 12
      update_event: 8
      get_event: 6
      propfind: 4
      delete_event: 3
"#;

const CARDDAV: &str = r#"  # CardDAV clients: discovery (/.well-known/carddav, principal, address book home), an
  # address book of their own with 50 contacts, then sync-collection polls, lookups and
  # some edits.
  - class: carddav
    protocol: carddav
    count: 4
    mix:
      sync_collection: 40
      addressbook_query: 15
      addressbook_multiget: 10
      get_contact: 10
      put_contact: 10
      update_contact: 10
      propfind: 3
      delete_contact: 2
    params: { initial_contacts: 50 }
"#;

const HTTP: &str = r#"  # A plain GET of the target's URL; add requests as your server needs them (method,
  # path, headers, body, expect, capture/remember).
  - class: web
    protocol: http
    count: 4
    mix:
      get:
        weight: 1
        method: GET
        path: "/"
        expect: [200]
"#;

const STOMP: &str = r#"  # STOMP producers: persistent 1 KiB messages, each confirmed by a receipt.
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/queue/starter-{run_id}-{round}", size: 1KiB, persistent: true, receipt: true } }
  # Consumers of the same queue, acknowledging each message.
  - class: consumer
    protocol: stomp
    count: 2
    params: { subscribe: "/queue/starter-{run_id}-{round}", ack: client-individual, prefetch: 1 }
    mix:
      receive: { weight: 1, params: { timeout: 1s } }
"#;

const AMQP: &str = r#"  # AMQP producers: persistent 1 KiB messages with publisher confirms, to a classic queue
  # the run declares (and deletes after each round).
  - class: producer
    protocol: amqp
    count: 2
    params: { queue: "starter-{run_id}-{round}", queue_type: classic }
    mix:
      publish: { weight: 1, params: { size: 1KiB, persistent: true, confirm: true } }
  # Consumers of the same queue.
  - class: consumer
    protocol: amqp
    count: 2
    params: { queue: "starter-{run_id}-{round}", queue_type: classic, prefetch: 50 }
    mix:
      consume: { weight: 1, params: { timeout: 1s } }
"#;

/// What one trial found: the operations it ran, none failing; or why it was not kept.
struct Trial {
    kind: Kind,
    outcome: Result<u64, String>,
}

impl Trial {
    fn passed(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// Probe the target with each candidate and write the workload of those that worked.
pub(crate) async fn new(o: NewOptions) -> Result<Vec<String>, NewError> {
    let mut kinds = Kind::candidates(&o.target)?;
    if !o.protocols.is_empty() {
        for p in &o.protocols {
            if !kinds.iter().any(|k| k.named(p)) {
                return Err(NewError::Usage(format!(
                    "--protocol {p}: {} speaks {}",
                    o.target,
                    kinds
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        kinds.retain(|k| o.protocols.iter().any(|p| k.named(p)));
    }
    if o.out.exists() {
        return Err(NewError::Usage(format!(
            "-o {}: the file exists; loadmix new does not overwrite it",
            o.out.display()
        )));
    }
    let scratch =
        tempfile::tempdir().map_err(|e| NewError::Write(format!("a scratch folder: {e}")))?;
    let mut trials = Vec::new();
    for kind in kinds {
        if !o.quiet {
            eprintln!(
                "loadmix new: trying {} against {} ...",
                kind.name(),
                o.target
            );
        }
        let t = trial(&o, kind, scratch.path()).await;
        if !o.quiet {
            match &t.outcome {
                Ok(n) => eprintln!("  {}: {n} operations, none failed: kept", kind.name()),
                Err(why) => eprintln!("  {}: not kept: {why}", kind.name()),
            }
        }
        trials.push(t);
    }
    let kept: Vec<Kind> = trials
        .iter()
        .filter(|t| t.passed())
        .map(|t| t.kind)
        .collect();
    if kept.is_empty() {
        let tried = trials
            .iter()
            .filter_map(|t| {
                t.outcome
                    .as_ref()
                    .err()
                    .map(|why| format!("  {}: {why}", t.kind.name()))
            })
            .collect::<Vec<_>>()
            .join("\n");
        return Err(NewError::Nothing {
            target: o.target.clone(),
            tried,
        });
    }
    let text = document(&o, &kept, &trials);
    // Loaded back before it is written: a file `new` writes always validates.
    crate::workload::load_str(&o.out.display().to_string(), &text, &[], None)
        .map_err(|e| NewError::Write(format!("the written workload does not load (a bug): {e}")))?;
    report::write_file(&o.out, &text).map_err(|e| NewError::Write(e.to_string()))?;
    Ok(kept.iter().map(|k| k.name().to_string()).collect())
}

/// One kind's workload run once, briefly, against the target, its report read back.
async fn trial(o: &NewOptions, kind: Kind, scratch: &Path) -> Trial {
    let file = scratch.join(format!("{}.yaml", kind.name().replace('+', "-")));
    let text = document(o, &[kind], &[]);
    if let Err(e) = report::write_file(&file, &text) {
        return not_kept(kind, format!("cannot write its trial workload: {e}"));
    }
    let out = scratch.join(format!("{}-report", kind.name().replace('+', "-")));
    let opts = RunOptions {
        workload: LoadOptions {
            path: file,
            // Every operation of the trial counts: none is in a warm-up window.
            set: vec!["run.warmup=0s".into()],
            users: None,
            duration: None,
            iterations: Some(TRIAL_ITERATIONS.into()),
            rounds: Some("1".into()),
            seed: None,
            user: o.user.clone(),
            faults: Vec::new(),
        },
        targets: Vec::new(),
        sweep: None,
        capacity: None,
        capacity_steps: None,
        start: Default::default(),
        html: None,
        csv: None,
        out: Some(out.clone()),
        format: StdoutFormat::Nothing,
        preflight: true,
        log_ops: None,
        quiet: true,
        tls: o.tls.clone(),
        keep_data: false,
        cleanup_timeout: std::time::Duration::from_secs(30),
        note: Some("loadmix new: a trial".into()),
        labels: Vec::new(),
        order: None,
        monitor_process: Vec::new(),
        monitor_prometheus: Vec::new(),
        shard: Default::default(),
        start_at: None,
        round_every: None,
        run_id: None,
        dashboard: None,
        metrics: None,
        linger: None,
        wide: false,
    };
    if let Err(e) = run::run(opts).await {
        return not_kept(kind, e.to_string());
    }
    let r = match report::load(&out.join("run.json")) {
        Ok(r) => r,
        Err(e) => return not_kept(kind, format!("its report does not read: {e}")),
    };
    let t = r.summary.headline();
    let outcome = match (t.requests, t.failures) {
        (0, _) => Err("no operation ran".to_string()),
        (n, 0) => Ok(n),
        (n, f) => Err(format!(
            "{f} of {n} operations failed{}",
            r.failures
                .first()
                .map(|f| format!(", the first: {} {}: {}", f.op, f.error, f.detail))
                .unwrap_or_default()
        )),
    };
    Trial { kind, outcome }
}

fn not_kept(kind: Kind, why: String) -> Trial {
    Trial {
        kind,
        outcome: Err(why),
    }
}

/// The workload file: what it is, how to run it, its run settings, then the classes of
/// `kinds`; the trials that did not pass, in comments at the end.
fn document(o: &NewOptions, kinds: &[Kind], trials: &[Trial]) -> String {
    let embedded = o.target == "embedded" || o.target.starts_with("embedded:");
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    let mut s = String::new();
    s.push_str(&format!(
        "# A first workload for {}, written by `loadmix new`: each class below ran once\n\
         # against it (a few operations per user, its cleanup after) with no failure.\n\
         # Run it, then shape it to your users (counts, mixes, think times, run length):\n\
         #\n\
         #   loadmix run {}{}\n\
         #\n",
        quote_comment(&o.target),
        quote_comment(&o.out.display().to_string()),
        match &o.user {
            Some(u) => format!(
                " --user {}   # its password from $LOADMIX_PASSWORD",
                quote_comment(u)
            ),
            None => String::new(),
        }
    ));
    s.push_str(&format!(
        "name: starter-{}\n",
        names.join("-").replace('+', "-")
    ));
    s.push_str(&format!(
        "description: {}\n",
        yaml_string(&format!(
            "a first workload for {}: {}",
            o.target,
            names.join(", ")
        ))
    ));
    s.push_str(&format!("target: {}\n", yaml_string(&o.target)));
    if embedded {
        s.push_str("context: /cosmo\n");
    }
    s.push_str("run:\n  duration: 30s\n  rounds: 3\n  warmup: 2s\n  seed: 1\n  timeout: 30s\n");
    if kinds.iter().any(|k| {
        matches!(
            k,
            Kind::Cosmo | Kind::One(Protocol::Caldav | Protocol::Carddav)
        )
    }) {
        match &o.user {
            Some(user) => s.push_str(&format!(
                "# Every user shares the existing account --user named (its password from\n\
                 # $LOADMIX_PASSWORD); each makes and deletes only collections of its own.\n\
                 accounts:\n  create: shared\n  username: {}\n",
                yaml_string(user)
            )),
            None => s.push_str(
                "# Each user gets an account of its own through Cosmo's CMP (the embedded\n\
                 # server has it); for a server whose accounts exist, give --user.\n\
                 accounts:\n  create: cmp\n",
            ),
        }
    }
    s.push_str("connection: keep_alive\n");
    s.push_str("think: { exponential: { mean: 200ms, max: 2s } }\n");
    s.push_str("users:\n");
    for k in kinds {
        s.push_str(k.classes());
    }
    let failed: Vec<(Kind, &String)> = trials
        .iter()
        .filter_map(|t| t.outcome.as_ref().err().map(|why| (t.kind, why)))
        .collect();
    if !failed.is_empty() {
        s.push_str("# Tried and left out:\n");
        for (kind, why) in failed {
            s.push_str(&format!("#   {}: {}\n", kind.name(), quote_comment(why)));
        }
    }
    s
}

/// Text for a comment: one line, whatever the target or an answer held.
fn quote_comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A YAML double-quoted scalar.
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(target: &str) -> NewOptions {
        NewOptions {
            target: target.into(),
            protocols: Vec::new(),
            user: Some("al\nice".into()),
            out: "starter.yaml".into(),
            tls: TlsOptions::default(),
            quiet: true,
        }
    }

    #[test]
    fn every_template_loads_for_every_target_it_is_tried_on() {
        for target in [
            "embedded",
            "http://127.0.0.1:1/dav",
            "stomp://127.0.0.1:1",
            "amqp://127.0.0.1:1",
        ] {
            for k in Kind::candidates(target).unwrap() {
                let text = document(&opts(target), &[k], &[]);
                crate::workload::load_str("starter.yaml", &text, &[], None)
                    .unwrap_or_else(|e| panic!("{target} {}: {e}\n{text}", k.name()));
            }
        }
        let all = [
            Kind::Cosmo,
            Kind::One(Protocol::Caldav),
            Kind::One(Protocol::Http),
        ];
        let text = document(&opts("http://[::1]:8080/x\"y"), &all, &[]);
        crate::workload::load_str("starter.yaml", &text, &[], None).unwrap();
        assert!(
            !text.contains("al\nice"),
            "a control character in --user stays in its comment"
        );
    }

    #[test]
    fn with_a_user_every_user_shares_that_account_and_without_one_cmp_makes_them() {
        let mut o = opts("http://127.0.0.1:1/dav");
        o.user = Some("alice".into());
        let text = document(&o, &[Kind::One(Protocol::Caldav)], &[]);
        assert!(
            text.contains("accounts:\n  create: shared\n  username: \"alice\"\n"),
            "{text}"
        );
        o.user = None;
        let text = document(&o, &[Kind::One(Protocol::Caldav)], &[]);
        assert!(text.contains("accounts:\n  create: cmp\n"), "{text}");
    }

    #[test]
    fn a_target_that_is_not_a_url_is_refused_in_words() {
        let e = Kind::candidates("ftp://x").unwrap_err().to_string();
        assert!(e.contains("one of http, https, stomp"), "{e}");
        assert_eq!(
            Kind::candidates("amqps://h").unwrap(),
            vec![Kind::One(Protocol::Amqp)]
        );
        assert_eq!(
            Kind::candidates("embedded:sqlite").unwrap(),
            vec![
                Kind::Cosmo,
                Kind::One(Protocol::Caldav),
                Kind::One(Protocol::Carddav)
            ]
        );
        // Every protocol over HTTP is tried on an http:// target.
        assert_eq!(
            Kind::candidates("https://h/dav").unwrap(),
            vec![
                Kind::Cosmo,
                Kind::One(Protocol::Caldav),
                Kind::One(Protocol::Carddav),
                Kind::One(Protocol::Http)
            ]
        );
    }
}
