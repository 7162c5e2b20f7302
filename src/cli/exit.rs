//! Exit codes, one enum, and how each layer's outcome maps to one.

use crate::run::{Finished, RunError};

/// The process exit codes the README documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Success.
    Ok = 0,
    /// The run finished but a threshold failed.
    Threshold = 1,
    /// Usage or workload error: nothing was sent.
    Usage = 2,
    /// The target could not be reached or failed its preflight.
    Unreachable = 3,
    /// The run finished but a report could not be written.
    Write = 4,
    /// Interrupted; the report of what ran is still written.
    Interrupted = 130,
}

impl Exit {
    pub(crate) fn code(self) -> i32 {
        self as i32
    }

    /// Print `error: msg` and return this code.
    pub(crate) fn fail(self, msg: impl std::fmt::Display) -> Exit {
        eprintln!("error: {}", crate::secrets::redact(&msg.to_string()));
        self
    }
}

impl From<&RunError> for Exit {
    fn from(e: &RunError) -> Exit {
        match e {
            RunError::Usage(_) => Exit::Usage,
            RunError::Unreachable(_) => Exit::Unreachable,
            RunError::Write(_) => Exit::Write,
        }
    }
}

/// The most important thing that happened wins: an interruption, then a lost output, then
/// a failed threshold.
impl From<Finished> for Exit {
    fn from(f: Finished) -> Exit {
        if f.interrupted {
            Exit::Interrupted
        } else if f.write_failed {
            Exit::Write
        } else if f.thresholds_failed {
            Exit::Threshold
        } else {
            Exit::Ok
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_serious_outcome_sets_the_code() {
        let f = |t, w, i| {
            Exit::from(Finished {
                thresholds_failed: t,
                write_failed: w,
                interrupted: i,
            })
            .code()
        };
        assert_eq!(f(false, false, false), 0);
        assert_eq!(f(true, false, false), 1);
        assert_eq!(f(true, true, false), 4);
        assert_eq!(f(true, true, true), 130);
        assert_eq!(Exit::from(&RunError::Usage(String::new())).code(), 2);
        assert_eq!(Exit::from(&RunError::Unreachable(String::new())).code(), 3);
    }
}
