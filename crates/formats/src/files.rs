//! Reading the files loadmix is given (workloads, certificates, secrets, bodies, account
//! lists, reports, access logs): each must be a regular file, since a FIFO would hang the read and a
//! device (`/dev/zero`) never ends, and each is read up to a bound that fits its kind,
//! checked while reading, as a file can grow (or a `/proc` file claim no size at all).
//! Also the memory the machine has available, which such inputs are held against.

use std::io::Read;
use std::path::Path;

/// What a file is read as, and the most of it that is read.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Named in messages: "a workload", "a certificate".
    pub what: &'static str,
    /// The most bytes read; a larger file is refused.
    pub limit: u64,
}

/// A workload's YAML.
pub const WORKLOAD: Kind = Kind {
    what: "a workload",
    limit: 4 << 20,
};
/// A certificate or key.
pub const PEM: Kind = Kind {
    what: "a PEM file",
    limit: 1 << 20,
};
/// A password or token read from a file.
pub const SECRET: Kind = Kind {
    what: "a secret",
    limit: 64 << 10,
};
/// A request body a workload names.
pub const BODY: Kind = Kind {
    what: "a request body",
    limit: 64 << 20,
};
/// A list of accounts to log in as.
pub const ACCOUNTS: Kind = Kind {
    what: "an accounts file",
    limit: 16 << 20,
};
/// Samples for an empirical distribution (think times from a log).
pub const SAMPLES: Kind = Kind {
    what: "a samples file",
    limit: 16 << 20,
};
/// A saved report: its per-second series make it large, and `merge` holds every shard.
pub const REPORT: Kind = Kind {
    what: "a report",
    limit: 512 << 20,
};

/// Memory the kernel says can be had without swapping (`MemAvailable`), if known: what a
/// large input (the users of a workload, a report) is held against before it is built.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A file a workload names: beside the workload when the name is relative and the
/// workload has a folder, else as given.
pub fn beside(dir: Option<&Path>, name: &str) -> std::path::PathBuf {
    match dir {
        Some(d) => d.join(name),
        None => Path::new(name).to_path_buf(),
    }
}

/// Why a file was not read; the message does not repeat the path (callers name it).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused (missing, no permission, a read failed).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A folder where a file of the named kind was wanted.
    #[error("is a folder, not {0}")]
    Folder(&'static str),
    /// A FIFO, device or socket: reading it could hang or never end.
    #[error("is not a regular file (a FIFO, a device or a socket), so not {0}")]
    Special(&'static str),
    /// Larger than the kind's bound.
    #[error("{size} bytes is too large for {what} (at most {limit})", limit = human(*.limit))]
    TooLarge {
        /// The file's size, or the bytes read when it grew past the bound.
        size: u64,
        /// The kind of file, as [`Kind::what`].
        what: &'static str,
        /// The bound, as [`Kind::limit`].
        limit: u64,
    },
}

fn human(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The whole of `path`, when it is a regular file within `kind`'s bound.
pub fn read(path: &Path, kind: Kind) -> Result<Vec<u8>, FileError> {
    let file = open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(FileError::Folder(kind.what));
    }
    if !meta.file_type().is_file() {
        return Err(FileError::Special(kind.what));
    }
    let too_large = |size| FileError::TooLarge {
        size,
        what: kind.what,
        limit: kind.limit,
    };
    if meta.len() > kind.limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(kind.limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > kind.limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// `path` opened to be streamed (an access log of any size, read a line at a time with
/// each line bounded by its reader), when it is a regular file.
pub fn open_stream(path: &Path, what: &'static str) -> Result<std::fs::File, FileError> {
    let file = open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(FileError::Folder(what));
    }
    if !meta.file_type().is_file() {
        return Err(FileError::Special(what));
    }
    Ok(file)
}

/// As [`read`], as UTF-8 text.
pub fn read_text(path: &Path, kind: Kind) -> Result<String, FileError> {
    String::from_utf8(read(path, kind)?).map_err(|_| {
        FileError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "is not UTF-8 text",
        ))
    })
}

/// Opened without blocking: opening a FIFO for reading would wait for a writer.
#[cfg(unix)]
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Kind = Kind {
        what: "a test file",
        limit: 8,
    };

    #[test]
    fn a_regular_file_within_its_bound_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345678").unwrap();
        assert_eq!(read(&p, SMALL).unwrap(), b"12345678");
        std::fs::write(&p, b"123456789").unwrap();
        let e = read(&p, SMALL).unwrap_err().to_string();
        assert_eq!(e, "9 bytes is too large for a test file (at most 8 bytes)");
    }

    #[test]
    fn devices_fifos_and_folders_are_refused_without_reading() {
        for dev in ["/dev/zero", "/dev/urandom", "/dev/null"] {
            let e = read(Path::new(dev), SECRET).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{dev}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer ever opens it: a blocking open would hang here.
        let e = read(&fifo, WORKLOAD).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read(dir.path(), WORKLOAD).unwrap_err().to_string();
        assert_eq!(e, "is a folder, not a workload");
    }

    #[test]
    fn a_file_that_claims_no_size_is_still_bounded() {
        // /proc files say 0 bytes and have more.
        let e = read(Path::new("/proc/self/maps"), SMALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large"), "{e}");
    }
}
