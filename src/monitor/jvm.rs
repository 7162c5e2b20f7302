//! A watched process that is a HotSpot JVM publishes its own counters in a shared-memory
//! file (`/tmp/hsperfdata_USER/PID`, what `jstat` reads): garbage collections, the time
//! they took, and the heap. Reading that file costs the JVM nothing (no agent, no JMX, no
//! attach), so every watched process is looked at for one, and a JVM gets its GC figures
//! in the report beside its CPU.
//!
//! The file is another process's memory and is read as hostile: its size is bounded, every
//! offset is checked against it, and anything malformed means "no JVM figures", never a
//! panic or an error that stops the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// HotSpot's perf-data files are 32 KiB by default (`-XX:PerfDataMemorySize`); more than
/// this is not one.
const MAX_FILE: u64 = 4 << 20;
/// Entries read from one file at most (a JDK 17 file has about 250).
const MAX_ENTRIES: usize = 20_000;
/// `hsperfdata_*` folders looked through at most.
const MAX_USER_DIRS: usize = 64;
const MAGIC: u32 = 0xcafe_c0c0;
const PROLOGUE: usize = 32;
const ENTRY_HEADER: usize = 20;

/// What one look at a JVM's counters says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JvmReading {
    /// Collections so far, over every collector.
    pub gc_count: u64,
    /// Time in them so far, seconds.
    pub gc_time_s: f64,
    /// Heap in use now (every generation's spaces), bytes.
    pub heap_used: u64,
    /// Heap committed now, bytes.
    pub heap_committed: u64,
    /// The collectors' names, as the JVM gives them (`G1 young collection pauses`, ...).
    pub collectors: Vec<String>,
}

/// Where each watched process's perf-data file is, looked up once per process: most
/// watched processes (a database's backends) are no JVM, and finding that out takes a
/// directory listing that should not be repeated every second for each of them. It lives
/// for one round's sampler, so a JVM started since is found the next round.
#[derive(Debug, Default)]
pub(crate) struct Files(std::collections::HashMap<u32, Option<PathBuf>>);

impl Files {
    /// The JVM counters of `pid`, when it is a HotSpot JVM whose perf-data file reads.
    pub(crate) fn read(&mut self, pid: u32) -> Option<JvmReading> {
        let path = self.0.entry(pid).or_insert_with(|| locate(pid)).as_ref()?;
        read_file(path)
    }
}

fn read_file(path: &Path) -> Option<JvmReading> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_FILE), &mut bytes).ok()?;
    parse(&bytes)
}

/// The perf-data file of `pid`: in `/tmp` as the process sees it (`/proc/PID/root`, so a
/// JVM in a container is found), named by its PID in its own namespace.
fn locate(pid: u32) -> Option<PathBuf> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let nspid = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_ascii_whitespace().last())
        .map(str::to_string)
        .unwrap_or_else(|| pid.to_string());
    let roots = [
        PathBuf::from(format!("/proc/{pid}/root/tmp")),
        PathBuf::from("/tmp"),
    ];
    roots.iter().find_map(|tmp| find_in(tmp, &nspid))
}

fn find_in(tmp: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(tmp)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("hsperfdata_"))
        .take(MAX_USER_DIRS)
        .map(|e| e.path().join(name))
        .find(|p| p.is_file())
}

/// A perf-data file's counters, or `None` when it is not one (or not ready).
pub(crate) fn parse(b: &[u8]) -> Option<JvmReading> {
    if b.len() < PROLOGUE || u32::from_be_bytes(b[0..4].try_into().ok()?) != MAGIC {
        return None;
    }
    let little = match b[4] {
        0 => false,
        1 => true,
        _ => return None,
    };
    // Version 2 is the only layout HotSpot has written since JDK 1.4.2; `accessible` is
    // set once the JVM has filled the file in.
    if b[5] != 2 || b[7] == 0 {
        return None;
    }
    let i32_at = |o: usize| -> Option<i32> {
        let raw: [u8; 4] = b.get(o..o.checked_add(4)?)?.try_into().ok()?;
        Some(if little {
            i32::from_le_bytes(raw)
        } else {
            i32::from_be_bytes(raw)
        })
    };
    let i64_at = |o: usize| -> Option<i64> {
        let raw: [u8; 8] = b.get(o..o.checked_add(8)?)?.try_into().ok()?;
        Some(if little {
            i64::from_le_bytes(raw)
        } else {
            i64::from_be_bytes(raw)
        })
    };
    let first = usize::try_from(i32_at(24)?).ok()?;
    let count = usize::try_from(i32_at(28)?).ok()?.min(MAX_ENTRIES);
    let mut longs: BTreeMap<String, i64> = BTreeMap::new();
    let mut strings: BTreeMap<String, String> = BTreeMap::new();
    let mut at = first;
    for _ in 0..count {
        let end_of_header = at.checked_add(ENTRY_HEADER)?;
        if end_of_header > b.len() {
            break;
        }
        let len = usize::try_from(i32_at(at)?).ok()?;
        let end = at.checked_add(len)?;
        if len < ENTRY_HEADER || end > b.len() {
            break;
        }
        let entry = &b[at..end];
        let name_at = usize::try_from(i32_at(at + 4)?).ok()?;
        let vector = i32_at(at + 8)?;
        let kind = entry[12];
        let data_at = usize::try_from(i32_at(at + 16)?).ok()?;
        let name = entry
            .get(name_at..)
            .and_then(|n| n.split(|c| *c == 0).next())
            .map(|n| String::from_utf8_lossy(n).into_owned());
        if let Some(name) = name.filter(|n| wanted(n)) {
            match (kind, vector) {
                (b'J', 0) if data_at.checked_add(8).is_some_and(|e| e <= len) => {
                    longs.insert(name, i64_at(at + data_at)?);
                }
                (b'B', n) if n > 0 => {
                    if let Some(v) = entry.get(data_at..) {
                        let v = v.split(|c| *c == 0).next().unwrap_or(&[]);
                        strings.insert(name, String::from_utf8_lossy(v).into_owned());
                    }
                }
                _ => {}
            }
        }
        at = end;
    }
    let freq = *longs.get("sun.os.hrt.frequency")?;
    if freq <= 0 {
        return None;
    }
    let mut r = JvmReading::default();
    let mut ticks: u64 = 0;
    for (name, v) in &longs {
        let v = u64::try_from(*v).unwrap_or(0);
        if let Some(rest) = name.strip_prefix("sun.gc.collector.") {
            if rest.ends_with(".invocations") {
                r.gc_count = r.gc_count.saturating_add(v);
            } else if rest.ends_with(".time") {
                ticks = ticks.saturating_add(v);
            }
        } else if name.starts_with("sun.gc.generation.") && name.contains(".space.") {
            if name.ends_with(".used") {
                r.heap_used = r.heap_used.saturating_add(v);
            } else if name.ends_with(".capacity") {
                r.heap_committed = r.heap_committed.saturating_add(v);
            }
        }
    }
    r.gc_time_s = ticks as f64 / freq as f64;
    r.collectors = strings
        .iter()
        .filter(|(k, _)| k.starts_with("sun.gc.collector.") && k.ends_with(".name"))
        .map(|(_, v)| v.clone())
        .collect();
    Some(r)
}

/// The counters kept: the clock's rate, the collectors, the heap's spaces.
fn wanted(name: &str) -> bool {
    name == "sun.os.hrt.frequency"
        || name.starts_with("sun.gc.collector.")
        || (name.starts_with("sun.gc.generation.") && name.contains(".space."))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A perf-data file as HotSpot lays it out, with the given long and string entries.
    fn file(little: bool, longs: &[(&str, i64)], strings: &[(&str, &str)]) -> Vec<u8> {
        let i32b = |v: i32| {
            if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let mut entries: Vec<u8> = Vec::new();
        let mut n = 0;
        let mut add = |name: &str, kind: u8, vector: i32, data: Vec<u8>| {
            let name_at = ENTRY_HEADER;
            let data_at = (name_at + name.len() + 1).next_multiple_of(8);
            let len = data_at + data.len();
            let mut e = Vec::new();
            e.extend(i32b(len as i32));
            e.extend(i32b(name_at as i32));
            e.extend(i32b(vector));
            e.extend([kind, 0, 0, 0]);
            e.extend(i32b(data_at as i32));
            e.extend(name.as_bytes());
            e.resize(data_at, 0);
            e.extend(data);
            entries.extend(e);
            n += 1;
        };
        for (k, v) in longs {
            add(
                k,
                b'J',
                0,
                if little {
                    v.to_le_bytes().to_vec()
                } else {
                    v.to_be_bytes().to_vec()
                },
            );
        }
        for (k, v) in strings {
            let mut d = v.as_bytes().to_vec();
            d.push(0);
            add(k, b'B', d.len() as i32, d);
        }
        let mut b = Vec::new();
        b.extend(MAGIC.to_be_bytes());
        b.extend([u8::from(little), 2, 0, 1]);
        b.extend(i32b((PROLOGUE + entries.len()) as i32));
        b.extend(i32b(0));
        b.extend([0u8; 8]);
        b.extend(i32b(PROLOGUE as i32));
        b.extend(i32b(n));
        b.extend(entries);
        b
    }

    fn sample(little: bool) -> Vec<u8> {
        file(
            little,
            &[
                ("sun.os.hrt.frequency", 1_000_000_000),
                ("sun.gc.collector.0.invocations", 40),
                ("sun.gc.collector.0.time", 250_000_000),
                ("sun.gc.collector.1.invocations", 2),
                ("sun.gc.collector.1.time", 750_000_000),
                ("sun.gc.generation.0.space.0.used", 1000),
                ("sun.gc.generation.0.space.0.capacity", 4000),
                ("sun.gc.generation.1.space.0.used", 500),
                ("sun.gc.generation.1.capacity", 9_999_999),
                ("java.threads.live", 30),
            ],
            &[("sun.gc.collector.0.name", "Copy")],
        )
    }

    #[test]
    fn collections_time_and_heap_are_read_in_either_byte_order() {
        for little in [true, false] {
            let r = parse(&sample(little)).unwrap();
            assert_eq!(r.gc_count, 42);
            assert!((r.gc_time_s - 1.0).abs() < 1e-9);
            assert_eq!(r.heap_used, 1500);
            assert_eq!(r.heap_committed, 4000);
            assert_eq!(r.collectors, vec!["Copy".to_string()]);
        }
    }

    #[test]
    fn anything_malformed_is_no_reading_not_a_panic() {
        assert!(parse(b"").is_none());
        assert!(parse(&[0u8; 64]).is_none());
        let good = sample(true);
        // Every truncation, and every single-byte corruption, is read or refused calmly.
        for cut in 0..good.len() {
            let _ = parse(&good[..cut]);
        }
        for i in 0..good.len() {
            for v in [0u8, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = parse(&b);
            }
        }
        // Not yet accessible: the JVM is still writing it.
        let mut b = good.clone();
        b[7] = 0;
        assert!(parse(&b).is_none());
        // No clock rate: times cannot be told.
        assert!(parse(&file(true, &[("sun.gc.collector.0.time", 5)], &[])).is_none());
    }

    #[test]
    fn a_process_that_is_no_jvm_has_no_reading() {
        let mut files = Files::default();
        assert!(files.read(std::process::id()).is_none());
        assert_eq!(
            files.0.get(&std::process::id()),
            Some(&None),
            "looked up once"
        );
    }
}
