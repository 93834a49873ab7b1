//! How an execution can fail: one enum of failure kinds, whose display is
//! the contract's one-line `error` text. A child reports one over its
//! socket; the engine and the service add their own; metrics and logs count
//! them by [`Failure::kind`].
//!
//! Invariants:
//! - Every text of the contract's `error` field is written here once; no
//!   other code spells "Time limit exceeded" or matches on an error's text.
//! - The stored outcome of an ended execution keeps the display (the text),
//!   so the stored format does not depend on this enum.

use serde::{Deserialize, Serialize};

/// One of the two output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The stream's name, as Python calls it.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Why an execution ended without completing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Failure {
    /// The program raised; the text is the exception's line,
    /// `Type: message` (`SystemExit: text` for an exit with a message).
    #[error("{0}")]
    Exception(String),
    /// The program exited with this non-zero status (`sys.exit(3)`; a
    /// shell command line's last status).
    #[error("SystemExit: {0}")]
    Exit(i32),
    /// The run-time budget, summed over rounds, is spent.
    #[error("Time limit exceeded")]
    TimeLimit,
    /// The child could not allocate memory within its limit.
    #[error("Out of memory")]
    OutOfMemory,
    /// The program wrote more than the cap to a stream.
    #[error("{} length exceeded", .0.name())]
    OutputCap(Stream),
    /// A replay did not make the calls or the output of the first run; the
    /// text names the round, the line and what differed.
    #[error("{0}")]
    NonDeterminism(String),
    /// The child died or broke its protocol; the text says how.
    #[error("Execution crashed: {0}")]
    Crashed(String),
    /// The child reported something no honest runtime reports (a call to
    /// an unknown tool, an invalid file); the text says what.
    #[error("{0}")]
    InvalidReport(String),
    /// The program cannot run at all (tools whose names collide...).
    #[error("{0}")]
    Unrunnable(String),
    /// The execution record outgrew its limit at a pause.
    #[error("Execution record too large: {size} bytes over the limit of {limit}")]
    RecordTooLarge {
        /// The record's size, bytes.
        size: usize,
        /// The limit, bytes.
        limit: usize,
    },
    /// The program paused more often than the limit allows.
    #[error("Exceeded maximum round trips ({0})")]
    TooManyRounds(usize),
    /// A client cancelled it.
    #[error("Execution was cancelled")]
    Cancelled,
}

impl Failure {
    /// A replay whose calls or output differ from the journal's at `round`.
    pub fn replay_differs(round: usize, line: u32, difference: &str) -> Failure {
        Failure::NonDeterminism(format!(
            "Non-deterministic replay at round {round} (line {line}): {difference}"
        ))
    }

    /// A replay that ended while the journal has `left` rounds more.
    pub fn replay_ended_early(round: usize, left: usize) -> Failure {
        Failure::NonDeterminism(format!(
            "Non-deterministic replay: the program ended after round {round} but the journal has {left} more"
        ))
    }

    /// A replay on a server whose interpreters hash strings with another
    /// seed than the one the execution was recorded with.
    pub fn replay_seed_differs(recorded: u32, current: u32) -> Failure {
        Failure::NonDeterminism(format!(
            "Non-deterministic replay: the execution was recorded with hash seed {recorded}, this server uses {current}"
        ))
    }

    /// Whether the code ended itself (it raised, or exited): what it did
    /// to its files until then stands, as on a disk.
    pub fn is_the_codes_own(&self) -> bool {
        matches!(self, Failure::Exception(_) | Failure::Exit(_))
    }

    /// The exit status a process would have ended with: 1 for an exception,
    /// the status for an exit (modulo 256, as the kernel keeps it); `None`
    /// when the code was stopped from outside (time, memory, output, a
    /// crash, a cancel).
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            Failure::Exception(_) => Some(1),
            Failure::Exit(status) => Some(status.rem_euclid(256)),
            _ => None,
        }
    }

    /// The failure's kind, a stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Exception(_) => "exception",
            Failure::Exit(_) => "exit",
            Failure::TimeLimit => "time_limit",
            Failure::OutOfMemory => "out_of_memory",
            Failure::OutputCap(_) => "output_cap",
            Failure::NonDeterminism(_) => "non_determinism",
            Failure::Crashed(_) => "crashed",
            Failure::InvalidReport(_) => "invalid_report",
            Failure::Unrunnable(_) => "unrunnable",
            Failure::RecordTooLarge { .. } => "record_too_large",
            Failure::TooManyRounds(_) => "too_many_rounds",
            Failure::Cancelled => "cancelled",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_contracts() {
        assert_eq!(Failure::TimeLimit.to_string(), "Time limit exceeded");
        assert_eq!(Failure::Exit(3).to_string(), "SystemExit: 3");
        assert_eq!(Failure::Exit(256).exit_status(), Some(0));
        assert_eq!(Failure::Exit(-1).exit_status(), Some(255));
        assert_eq!(Failure::TimeLimit.exit_status(), None);
        assert_eq!(Failure::OutOfMemory.to_string(), "Out of memory");
        assert_eq!(
            Failure::OutputCap(Stream::Stderr).to_string(),
            "stderr length exceeded"
        );
        assert_eq!(
            Failure::OutputCap(Stream::Stdout).to_string(),
            "stdout length exceeded"
        );
        assert_eq!(
            Failure::TooManyRounds(20).to_string(),
            "Exceeded maximum round trips (20)"
        );
        assert_eq!(
            Failure::Crashed("the interpreter process died".into()).to_string(),
            "Execution crashed: the interpreter process died"
        );
        assert_eq!(
            Failure::RecordTooLarge { size: 9, limit: 8 }.to_string(),
            "Execution record too large: 9 bytes over the limit of 8"
        );
        assert_eq!(
            Failure::replay_differs(3, 7, "the calls differ").to_string(),
            "Non-deterministic replay at round 3 (line 7): the calls differ"
        );
    }

    #[test]
    fn kinds_are_distinct() {
        let all = [
            Failure::Exception(String::new()),
            Failure::Exit(2),
            Failure::TimeLimit,
            Failure::OutOfMemory,
            Failure::OutputCap(Stream::Stdout),
            Failure::NonDeterminism(String::new()),
            Failure::Crashed(String::new()),
            Failure::InvalidReport(String::new()),
            Failure::Unrunnable(String::new()),
            Failure::RecordTooLarge { size: 0, limit: 0 },
            Failure::TooManyRounds(0),
            Failure::Cancelled,
        ];
        let kinds: std::collections::HashSet<_> = all.iter().map(Failure::kind).collect();
        assert_eq!(kinds.len(), all.len());
    }
}
