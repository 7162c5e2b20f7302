//! Reading log files into what each request was, in the files' order. The calling thread
//! cuts the lines (each bounded by [`log::MAX_LINE`]) into blocks; worker threads parse
//! and classify the blocks; their results are handed on block by block in the order the
//! lines were read, so what the passes see is what one thread reading alone would see.
//! Blocks in flight are bounded, so the memory held does not grow with the log.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::classify::{Kind, Protocol, classify};
use super::log::{self, Entry, Format, Line};
use super::rules::Rules;

/// Refused lines shown, per file.
const SHOWN: usize = 5;
/// Bytes of lines in a block handed to a worker, and lines at most (lines too long to
/// read take no bytes).
const BLOCK: usize = 512 << 10;
const BLOCK_LINES: usize = 8_192;
/// Workers at most; fewer where the machine has fewer cores.
const MAX_WORKERS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    File {
        file: String,
        source: crate::formats::files::FileError,
    },
    #[error("{0}: no line of it is a request")]
    Empty(String),
}

/// One operation the log showed.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDef {
    pub protocol: Protocol,
    pub name: String,
    /// http: method and path template, and the first target seen.
    pub template: Option<(String, String)>,
    pub example: String,
}

/// What one file gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileCounts {
    pub file: String,
    pub format: Option<&'static str>,
    pub lines: u64,
    pub refused: u64,
    pub too_long: u64,
    /// `file:line:column: why`, the first few.
    pub shown: Vec<String>,
}

/// A request reduced to what sessions need, borrowed from its block (most lines only
/// update what a client's earlier ones made).
pub(super) struct Seen<'a> {
    pub client: &'a str,
    pub protocol: Protocol,
    pub op: OpDef,
    /// The request target in origin form.
    pub target: &'a str,
    pub at_us: i64,
    pub done_us: i64,
}

/// Lines cut from one file, with their numbers, for a worker.
struct Block {
    format: Format,
    text: Vec<u8>,
    lines: Vec<Slot>,
}

impl Block {
    fn new(format: Format) -> Block {
        Block {
            format,
            text: Vec::with_capacity(BLOCK + log::MAX_LINE),
            lines: Vec::new(),
        }
    }
}

enum Slot {
    /// A line's bytes in the block's text, and its number in the file.
    Text(Range<usize>, u64),
    /// A line longer than [`log::MAX_LINE`]: refused.
    TooLong(u64),
}

/// What a worker made of a block: one item per line, in order; the client keys and
/// targets of the operations in `arena`.
struct Parsed {
    arena: String,
    items: Vec<Item>,
}

enum Item {
    Op {
        client: Range<usize>,
        target: Range<usize>,
        protocol: Protocol,
        op: OpDef,
        at_us: i64,
        done_us: i64,
    },
    /// Set-up, an asset, or a request that is no operation.
    Other(Kind),
    Refused {
        line: u64,
        column: usize,
        why: String,
    },
    /// A line longer than [`log::MAX_LINE`].
    TooLong(u64),
}

/// Read every line of every file, calling `each` with what each request was, in order.
pub(super) fn read_all(
    files: &[PathBuf],
    format: Option<Format>,
    rules: Option<&Rules>,
    counts: &mut Vec<FileCounts>,
    mut each: impl FnMut(Result<Seen<'_>, Kind>),
) -> Result<(), ScanError> {
    counts.clear();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    std::thread::scope(|scope| {
        let (done_tx, done) = mpsc::channel::<(u64, Option<Parsed>)>();
        let to: Vec<mpsc::Sender<(u64, Block)>> = (0..workers)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<(u64, Block)>();
                let done_tx = done_tx.clone();
                scope.spawn(move || {
                    for (n, b) in rx {
                        // A worker that panics (a bug: no line can make the parser
                        // panic) says so before it goes, or the reader would wait for
                        // its block for ever; the scope then reports the panic.
                        let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            parse_block(b, rules)
                        }));
                        match parsed {
                            Ok(p) => {
                                if done_tx.send((n, Some(p))).is_err() {
                                    return;
                                }
                            }
                            Err(panic) => {
                                let _ = done_tx.send((n, None));
                                std::panic::resume_unwind(panic);
                            }
                        }
                    }
                });
                tx
            })
            .collect();
        // The workers hold the only senders: if they all stop, a wait for them ends.
        drop(done_tx);
        let mut order = InOrder {
            rules,
            to,
            done,
            sent: 0,
            applied: 0,
            waiting: BTreeMap::new(),
        };
        for path in files {
            counts.push(read_file(path, format, &mut order, &mut each)?);
        }
        Ok(())
    })
}

/// Blocks handed to the workers in turn and their results taken back in the order sent.
struct InOrder<'r> {
    rules: Option<&'r Rules>,
    to: Vec<mpsc::Sender<(u64, Block)>>,
    done: mpsc::Receiver<(u64, Option<Parsed>)>,
    sent: u64,
    applied: u64,
    /// Results that came before an earlier block's (none: its worker panicked).
    waiting: BTreeMap<u64, Option<Parsed>>,
}

impl InOrder<'_> {
    /// Hand `b` on; apply results while more than two blocks per worker are out.
    fn send(
        &mut self,
        b: Block,
        c: &mut FileCounts,
        path: &Path,
        each: &mut impl FnMut(Result<Seen<'_>, Kind>),
    ) {
        let worker = (self.sent % self.to.len() as u64) as usize;
        let n = self.sent;
        self.sent += 1;
        if let Err(mpsc::SendError((_, b))) = self.to[worker].send((n, b)) {
            // A worker gone (it cannot be, but nothing is lost if it were): parse here.
            self.waiting.insert(n, Some(parse_block(b, self.rules)));
        }
        while self.sent - self.applied > 2 * self.to.len() as u64 {
            self.apply_next(c, path, each);
        }
    }

    /// Apply every result still out: the file is read.
    fn flush(
        &mut self,
        c: &mut FileCounts,
        path: &Path,
        each: &mut impl FnMut(Result<Seen<'_>, Kind>),
    ) {
        while self.applied < self.sent {
            self.apply_next(c, path, each);
        }
    }

    fn apply_next(
        &mut self,
        c: &mut FileCounts,
        path: &Path,
        each: &mut impl FnMut(Result<Seen<'_>, Kind>),
    ) {
        let next = self.applied;
        while !self.waiting.contains_key(&next) {
            match self.done.recv() {
                Ok((n, p)) => {
                    self.waiting.insert(n, p);
                }
                // Every worker gone with a block still out: a worker panicked, and
                // the scope says so when it joins.
                Err(_) => {
                    self.applied = self.sent;
                    return;
                }
            }
        }
        if let Some(Some(p)) = self.waiting.remove(&next) {
            apply(p, c, path, each);
        }
        self.applied += 1;
    }
}

/// One file's lines, cut into blocks and handed on; its counts once all are applied.
fn read_file(
    path: &Path,
    format: Option<Format>,
    order: &mut InOrder<'_>,
    each: &mut impl FnMut(Result<Seen<'_>, Kind>),
) -> Result<FileCounts, ScanError> {
    let io = |source| ScanError::Io {
        file: path.display().to_string(),
        source,
    };
    let f = crate::formats::files::open_stream(path, "an access log").map_err(|source| {
        ScanError::File {
            file: path.display().to_string(),
            source,
        }
    })?;
    let mut r = BufReader::with_capacity(256 << 10, f);
    let mut c = FileCounts {
        file: path.display().to_string(),
        ..Default::default()
    };
    let mut format = format;
    let mut buf = Vec::new();
    let mut block = Block::new(format.unwrap_or(Format::Clf));
    loop {
        match log::next_line(&mut r, &mut buf).map_err(io)? {
            Line::End => break,
            Line::TooLong => {
                c.lines += 1;
                block.lines.push(Slot::TooLong(c.lines));
            }
            Line::Text(line) => {
                c.lines += 1;
                buf = line;
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let fmt = *format.get_or_insert_with(|| Format::detect(&buf));
                c.format = Some(fmt.name());
                // A file's format is known from its first line that is not blank: a
                // block before it holds only lines too long to read.
                block.format = fmt;
                let at = block.text.len();
                block.text.extend_from_slice(&buf);
                block.lines.push(Slot::Text(at..block.text.len(), c.lines));
            }
        }
        if block.text.len() >= BLOCK || block.lines.len() >= BLOCK_LINES {
            let next = Block::new(block.format);
            order.send(std::mem::replace(&mut block, next), &mut c, path, each);
        }
    }
    if !block.lines.is_empty() {
        order.send(block, &mut c, path, each);
    }
    order.flush(&mut c, path, each);
    if c.lines == c.refused {
        return Err(ScanError::Empty(c.file));
    }
    Ok(c)
}

/// A worker's part: each line of `b` parsed and classified.
fn parse_block(b: Block, rules: Option<&Rules>) -> Parsed {
    let mut p = Parsed {
        arena: String::new(),
        items: Vec::with_capacity(b.lines.len()),
    };
    let mut key = String::new();
    for slot in b.lines {
        let (range, line) = match slot {
            Slot::Text(range, line) => (range, line),
            Slot::TooLong(line) => {
                p.items.push(Item::TooLong(line));
                continue;
            }
        };
        let item = match log::parse(&b.text[range], b.format) {
            Ok(e) => match seen(&e, rules, &mut key) {
                Ok(x) => {
                    let at = p.arena.len();
                    p.arena.push_str(x.client);
                    let mid = p.arena.len();
                    p.arena.push_str(x.target);
                    Item::Op {
                        client: at..mid,
                        target: mid..p.arena.len(),
                        protocol: x.protocol,
                        op: x.op,
                        at_us: x.at_us,
                        done_us: x.done_us,
                    }
                }
                Err(k) => Item::Other(k),
            },
            Err(e) => Item::Refused {
                line,
                column: e.column,
                why: e.why,
            },
        };
        p.items.push(item);
    }
    p
}

/// A worker's results handed on in order, refusals counted and the first few noted.
fn apply(
    p: Parsed,
    c: &mut FileCounts,
    path: &Path,
    each: &mut impl FnMut(Result<Seen<'_>, Kind>),
) {
    for item in p.items {
        match item {
            Item::Op {
                client,
                target,
                protocol,
                op,
                at_us,
                done_us,
            } => each(Ok(Seen {
                client: &p.arena[client],
                protocol,
                op,
                target: &p.arena[target],
                at_us,
                done_us,
            })),
            Item::Other(k) => each(Err(k)),
            Item::Refused { line, column, why } => refused(c, path, line, column, &why),
            Item::TooLong(line) => {
                c.too_long += 1;
                let why = format!("longer than {} bytes", log::MAX_LINE);
                refused(c, path, line, 1, &why);
            }
        }
    }
}

/// A line refused: counted, and noted among the first few.
fn refused(c: &mut FileCounts, path: &Path, line: u64, column: usize, why: &str) {
    c.refused += 1;
    if c.shown.len() < SHOWN {
        c.shown
            .push(format!("{}:{line}:{column}: {why}", path.display()));
    }
}

/// What `e` was; an operation's client key is written into `key`.
fn seen<'a>(
    e: &'a Entry<'_>,
    rules: Option<&Rules>,
    key: &'a mut String,
) -> Result<Seen<'a>, Kind> {
    // loadmix marks what its users send off the clock: set-up, whatever it looks like.
    if loadmix_setup(e.agent.as_deref()) {
        return Err(Kind::SetUp("loadmix set-up"));
    }
    let target = super::classify::origin_form(&e.target).ok_or(Kind::Unclassified)?;
    let path = target.split(['?', '#']).next().unwrap_or("");
    let query = target.split_once('?').map(|(_, q)| q);
    let kind = rules
        .filter(|_| super::classify::is_method(&e.method))
        .and_then(|r| r.classify(&e.method, path, query))
        .unwrap_or_else(|| classify(&e.method, path, query, e.status));
    match kind {
        Kind::Op {
            protocol,
            name,
            template,
        } => {
            client_key(e, protocol, key);
            Ok(Seen {
                client: key.as_str(),
                protocol,
                op: OpDef {
                    protocol,
                    name,
                    template,
                    // Filled in only for an operation seen the first time.
                    example: String::new(),
                },
                target,
                at_us: e.at_us,
                done_us: e.done_us(),
            })
        }
        other => Err(other),
    }
}

/// Who sent `e`, as `PROTOCOL KIND NAME` into `key`: a loadmix user by its User-Agent,
/// else the session cookie, else the authenticated user, else address and agent.
fn client_key(e: &Entry<'_>, protocol: Protocol, key: &mut String) {
    key.clear();
    key.push_str(protocol.name());
    let (kind, name) = match (loadmix_user(e.agent.as_deref()), &e.cookie, &e.user) {
        (Some(u), _, _) => ("l", u),
        (None, Some(c), _) => ("c", c.as_ref()),
        (None, None, Some(u)) => ("u", u.as_ref()),
        (None, None, None) => {
            for part in [" a ", &e.host, " ", e.agent.as_deref().unwrap_or("-")] {
                key.push_str(part);
            }
            return;
        }
    };
    for part in [" ", kind, " ", name] {
        key.push_str(part);
    }
}

/// Whether `agent` is a loadmix user's, sent off the clock (`...; setup)`).
pub(super) fn loadmix_setup(agent: Option<&str>) -> bool {
    loadmix_user(agent).is_some_and(|u| u.ends_with("; setup"))
}

/// The user a loadmix User-Agent names (`run RUN; CLASS#N`), when the agent is loadmix's
/// default one: each of its users is a client of its own.
pub(super) fn loadmix_user(agent: Option<&str>) -> Option<&str> {
    let rest = agent?.strip_prefix("loadmix/")?;
    let inside = rest.split_once(" (")?.1.strip_suffix(')')?;
    let (run, user) = inside.split_once("; ")?;
    (run.starts_with("run ") && user.contains('#')).then_some(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one thread reading a line at a time makes of `o`'s files: the reference.
    fn one_by_one(files: &[PathBuf]) -> (Vec<String>, Vec<FileCounts>) {
        let (mut seen_all, mut counts) = (Vec::new(), Vec::new());
        let mut key = String::new();
        for path in files {
            let f = std::fs::File::open(path).unwrap();
            let mut r = std::io::BufReader::new(f);
            let mut c = FileCounts {
                file: path.display().to_string(),
                ..Default::default()
            };
            let (mut format, mut buf) = (None, Vec::new());
            loop {
                let line = match log::next_line(&mut r, &mut buf).unwrap() {
                    Line::End => break,
                    Line::TooLong => {
                        c.lines += 1;
                        c.too_long += 1;
                        let why = format!("longer than {} bytes", log::MAX_LINE);
                        let n = c.lines;
                        refused(&mut c, path, n, 1, &why);
                        continue;
                    }
                    Line::Text(t) => t,
                };
                c.lines += 1;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let fmt = *format.get_or_insert_with(|| Format::detect(&line));
                c.format = Some(fmt.name());
                match log::parse(&line, fmt) {
                    Ok(e) => seen_all.push(shown(seen(&e, None, &mut key))),
                    Err(e) => {
                        let n = c.lines;
                        refused(&mut c, path, n, e.column, &e.why)
                    }
                }
            }
            counts.push(c);
        }
        (seen_all, counts)
    }

    fn shown(r: Result<Seen<'_>, Kind>) -> String {
        match r {
            Ok(x) => format!(
                "{} {:?} {} {} {} {}",
                x.client, x.op, x.target, x.at_us, x.done_us, x.protocol as u8
            ),
            Err(k) => format!("{k:?}"),
        }
    }

    /// Two files of many blocks, the first with lines too long to read (one of them its
    /// very first, before its format is known), blank lines and lines that are no log
    /// lines among requests of many clients; the second JSON lines after a line too long.
    /// Parsed on the workers, they come out as one thread reading line by line reads
    /// them: every request in order, every count, the same lines noted.
    #[test]
    fn blocks_parsed_apart_come_out_as_lines_read_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(log::MAX_LINE + 10);
        let mut clf = format!("{long}\n");
        for i in 0..30_000u32 {
            let at = format!(
                "02/Dec/2026:{:02}:{:02}:{:02} +0000",
                i / 3600,
                i / 60 % 60,
                i % 60
            );
            clf.push_str(&format!(
                "10.0.{}.{} - - [{at}] \"GET /cosmo/dav/u/c{}/ HTTP/1.1\" 207 5 \"-\" \"a{}\" 0.001\n",
                i % 7,
                i % 13,
                i % 5,
                i % 3
            ));
            match i % 4_999 {
                17 => clf.push_str("no log line\n"),
                18 => clf.push_str("   \n"),
                19 => clf.push_str(&format!("{long}\n")),
                _ => {}
            }
        }
        let json = format!(
            "{long}\n{}",
            (0..2_000)
                .map(|i| format!(
                    "{{\"msec\":{}.5,\"remote_addr\":\"10.1.0.{}\",\"request_method\":\"PUT\",\"request_uri\":\"/x/{i}\",\"status\":201}}\n",
                    1_764_000_000 + i,
                    i % 9
                ))
                .collect::<String>()
        );
        let (a, b) = (dir.path().join("a.log"), dir.path().join("b.json"));
        std::fs::write(&a, &clf).unwrap();
        std::fs::write(&b, &json).unwrap();
        assert!(clf.len() > 4 * BLOCK, "{}", clf.len());
        let files = [a, b];
        let (mut got, mut counts) = (Vec::new(), Vec::new());
        read_all(&files, None, None, &mut counts, |r| got.push(shown(r))).unwrap();
        let (want, want_counts) = one_by_one(&files);
        assert_eq!(counts, want_counts);
        assert_eq!(got.len(), want.len());
        assert!(
            got == want,
            "the requests came out in another order or form"
        );
        assert_eq!(
            (counts[0].too_long, counts[0].refused),
            (7, 13),
            "{counts:?}"
        );
        assert_eq!(counts[1].format, Some("json lines"));
        assert_eq!(got.len(), 32_000);
    }
}
