//! The durable execution record: everything needed to rebuild a paused
//! execution in a fresh interpreter.
//!
//! A paused Python frame cannot be serialized, so the record holds what makes
//! a replay reach the same point: the source and tools, the seed and clock
//! bases the code saw, and the journal of rounds (each call with its site,
//! tool and input, and the result the client gave). Output so far is kept so
//! that a replay can be checked against it and so that a restart loses none.
//!
//! Encoding: stored in parts (format 5, or 4 without its extensions,
//! [`parts`]): a start part written
//! once, a part per completed round, and a progress part rewritten at each
//! pause, so a pause writes only what it added. Formats 2 and 3 stored the
//! whole record as one value (the 4-byte magic `BATN`, a little-endian
//! `u16` version, then the bincode of [`ExecutionRecord`]); such records
//! still decode ([`ExecutionRecord::decode`]).
//!
//! Architecture Invariant: a record that decodes is internally consistent
//! (checked by [`ExecutionRecord::validate`] on decode): every completed round
//! has one result per call, output offsets never exceed the output held, and
//! the pending round (if any) has at least one call. A replay can therefore
//! index the record without panicking, whatever bytes the store returned.

mod parts;
mod timeline;

use serde::{Deserialize, Serialize};

pub use parts::{NewParts, StoredExtent, is_whole_record};
pub use timeline::{HistoryCall, Timeline, TimelineCall, history};

use crate::tools::ToolDef;

/// The on-disk format version written by this build (record parts).
pub const FORMAT_VERSION: u16 = 5;
/// The format of a start part that names read-only files (written only
/// then, so that other records stay readable by builds before it).
pub const READ_ONLY_VERSION: u16 = 6;
/// The format of a start part of a session's cell (written only for
/// cells: every other record stays 5 or 6).
pub const CELL_VERSION: u16 = 7;
/// The format of a start part of a cell of a compacted session: format 7
/// and the cells folded before it (written only then).
pub const COMPACTED_CELL_VERSION: u16 = 8;
/// The first format of record parts (read: its parts have no extension).
pub const FIRST_PARTS_VERSION: u16 = 4;
/// The last format that stored a record whole (read, and written only by
/// [`ExecutionRecord::encode`] for tests and fuzzing).
pub const WHOLE_FORMAT_VERSION: u16 = 3;
const MAGIC: &[u8; 4] = b"BATN";

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JournalError {
    /// The bytes do not start with the record magic.
    #[error("execution record is corrupt: bad magic")]
    BadMagic,
    /// Written by a build that knows a format this one does not.
    #[error("execution record has unknown format version {0} (this build reads {FORMAT_VERSION})")]
    UnknownVersion(u16),
    /// The body does not decode, or decodes to an inconsistent record.
    #[error("execution record is corrupt: {0}")]
    Corrupt(String),
}

/// Where the virtual monotonic clock of every execution starts, seconds.
pub const MONOTONIC_ORIGIN: f64 = 1000.0;

/// The virtual clock's starting point for one stretch of running code.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockBase {
    /// Seconds since the Unix epoch, as `time.time()` reports.
    pub wall: f64,
    /// Seconds of the monotonic clock, as `time.monotonic()` reports.
    pub mono: f64,
}

/// One tool call the code made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The id the client sees (`call_...`).
    pub id: String,
    /// The rewrite's site id of the call.
    pub site: u32,
    /// The original tool name.
    pub tool: String,
    /// The keyword arguments as JSON text.
    pub input: String,
    /// The user's line of the call.
    pub line: u32,
}

/// The answer the client gave to one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallResult {
    /// The tool's result, as JSON text.
    Value(String),
    /// The tool failed; the message is raised inside Python.
    Error(String),
}

/// Where the code stood when it paused, for operators (not used by replay).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameSummary {
    /// The function the first pending call was made from.
    pub function: String,
    /// Its line in the user's source.
    pub line: u32,
    /// Locals that render as JSON, as a JSON object text (values truncated).
    pub locals: String,
}

/// A round whose results were given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The calls of the round, in the order the code made them.
    pub calls: Vec<CallRecord>,
    /// One result per call, same order.
    pub results: Vec<CallResult>,
    /// Length in bytes of stdout when the code paused.
    pub stdout_len: u64,
    /// Length in bytes of stderr when the code paused.
    pub stderr_len: u64,
    /// Where the code stood.
    pub frame: FrameSummary,
    /// The clock the code saw after the results came in.
    pub resume_clock: ClockBase,
}

/// The round the code is waiting on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRound {
    /// The calls waiting for results.
    pub calls: Vec<CallRecord>,
    /// Length in bytes of stdout when the code paused.
    pub stdout_len: u64,
    /// Length in bytes of stderr when the code paused.
    pub stderr_len: u64,
    /// Where the code stood.
    pub frame: FrameSummary,
}

/// A file of the execution's workspace (`/mnt/data/<name>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFile {
    /// Path under `/mnt/data`, `/`-separated, validated.
    pub name: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// The whole durable state of one execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    /// Random execution id.
    pub id: [u8; 16],
    /// The session the execution belongs to.
    pub session_id: String,
    /// The Python source as the user wrote it.
    pub source: String,
    /// The tools of the start request.
    pub tools: Vec<ToolDef>,
    /// Run-time budget over all rounds, in milliseconds.
    pub timeout_ms: u64,
    /// Run time used so far, in milliseconds.
    pub used_ms: u64,
    /// Seed of every random source the code can reach.
    pub seed: [u8; 32],
    /// The interpreter's string hash seed (fixed per build; checked on replay).
    pub hash_seed: u32,
    /// The clock the code saw at its start.
    pub clock0: ClockBase,
    /// Completed rounds.
    pub rounds: Vec<Round>,
    /// The round waiting for results, if paused.
    pub pending: Option<PendingRound>,
    /// All stdout so far.
    pub stdout: String,
    /// All stderr so far.
    pub stderr: String,
    /// The workspace the code starts with (the request's files); replay
    /// starts from the same.
    pub files: Vec<WorkspaceFile>,
    /// The program's command-line arguments (`sys.argv[1:]`). Added in
    /// format 3; must stay the last stored field (see [`check_header`]).
    pub argv: Vec<String>,
    /// Files the code created or changed, once it completed (not stored).
    #[serde(skip)]
    pub produced: Vec<WorkspaceFile>,
    /// Names of the request's files the code removed, once it completed
    /// (not stored).
    #[serde(skip)]
    pub removed: Vec<String>,
    /// What the store holds of this record (not stored).
    #[serde(skip)]
    pub stored: StoredExtent,
    /// Tools the code may not call: their `allowed_callers` leave out code
    /// execution. Stored from format 5 (in the start part's extension).
    #[serde(skip)]
    pub direct_only: Vec<String>,
    /// Whether the answer of the end lists the calls made (the start's
    /// `include_history`). Format 5 (start part's extension).
    #[serde(skip)]
    pub include_history: bool,
    /// Names of the workspace files code may read and not change (uploaded
    /// `read_only`). Format 6 (start part's extension).
    #[serde(skip)]
    pub read_only: Vec<String>,
    /// The language of `source` (not stored: only Python can pause, so a
    /// stored record is always Python's).
    #[serde(skip)]
    pub lang: crate::program::Lang,
    /// Directories the workspace starts with beside those of its files (a
    /// runtime session's empty ones; not stored: such calls cannot pause).
    #[serde(skip)]
    pub directories: Vec<String>,
    /// Directories the code left empty, once it ended (not stored).
    #[serde(skip)]
    pub directories_left: Vec<String>,
    /// The contracts of `tools`, once a call was checked (not stored).
    #[serde(skip)]
    pub contracts: crate::contract::Contracts,
    /// The principal it runs for, as the service knows it from its state
    /// (not stored with the record): parked children are shared fairly
    /// among principals.
    #[serde(skip)]
    pub owner: [u8; 8],
    /// Wall-clock milliseconds of each pause, and of the arrival of each
    /// round's results: how long the client took per round. Format 5
    /// (progress part's extension); empty for what earlier formats stored.
    #[serde(skip)]
    pub round_times: RoundTimes,
    /// The session and place of a session's cell (`None` for any other
    /// execution). Format 7 (start part's extension).
    #[serde(skip)]
    pub cell: Option<SessionCell>,
    /// A cell's global names at its end, as its child reported them (not
    /// stored with the record; the session keeps them).
    #[serde(skip)]
    pub names: Vec<NameInfo>,
}

/// An ended cell of a session, as a later cell's cold start runs it again:
/// its record (rounds all answered) and how it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct EndedCell {
    /// Its record.
    pub record: ExecutionRecord,
    /// `None` when it completed, else the code's own failure (an exception
    /// or an exit).
    pub ended: Option<crate::failure::Failure>,
}

/// A global name a session's cell left, as `GET /sessions/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameInfo {
    /// The name.
    pub name: String,
    /// Its value's type name.
    pub ty: String,
    /// Its value's `repr` (builtin plain values only, at most 200
    /// characters), else a description that ran no user code.
    pub repr: String,
}

/// The most names a cell reports.
pub const MAX_NAMES: usize = 500;
/// The most characters of a name, type or repr a cell reports.
pub const MAX_NAME_TEXT: usize = 200;

impl NameInfo {
    /// A name with each text cut to [`MAX_NAME_TEXT`] characters.
    pub fn cut(name: String, ty: String, repr: String) -> NameInfo {
        let cut = |text: String| match text.char_indices().nth(MAX_NAME_TEXT) {
            Some((at, _)) => text[..at].to_owned(),
            None => text,
        };
        NameInfo {
            name: cut(name),
            ty: cut(ty),
            repr: cut(repr),
        }
    }
}

/// Where a cell stands in its session: what its program is built with so
/// that its sites and marker are the same on every run of it, hot or cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCell {
    /// The session's id.
    pub session: [u8; 16],
    /// The cell's number in its session, from 1.
    pub index: u32,
    /// The id of its first call site: the sites of the earlier cells.
    pub site_base: u32,
    /// The global name its call sites are reached by (never an earlier
    /// cell's).
    pub marker: String,
    /// Whether its workspace is exactly its request's files (a runtime
    /// session's cell: `/mnt/data` is the runtime session's), rather than
    /// its request's files laid over what the earlier cells left.
    pub fresh_workspace: bool,
    /// The cells a compaction folded into the session's base, less one:
    /// the cell's number is `index + offset` (0 while its session was never
    /// compacted; stored by format 8).
    #[serde(skip)]
    pub offset: u32,
    /// A compaction's look at the namespace rather than code: the runtime
    /// writes the base source and the names it cannot carry (never stored:
    /// it never pauses).
    #[serde(skip)]
    pub snapshot: bool,
}

impl SessionCell {
    /// The cell's number in its session as clients see it, from 1.
    pub fn number(&self) -> u32 {
        self.index.saturating_add(self.offset)
    }

    /// Whether it is the base cell a compaction made (listed first, in
    /// place of the cells it folds).
    pub fn is_base(&self) -> bool {
        self.index == 1 && self.offset > 0
    }

    /// Whether it is the first cell after a compaction (listed right after
    /// the base): its answers name what the compaction lost.
    pub fn follows_compaction(&self) -> bool {
        self.index == 2 && self.offset > 0
    }

    /// The key its session's child is parked under once this cell ran in
    /// it ([`session_park_key`]).
    pub fn park_key(&self) -> usize {
        session_park_key(self.offset, self.number())
    }

    /// The key of the child this cell runs hot in: the one parked after
    /// the cell before it, in the same compaction (none for a session's
    /// first cell or a base, which start in fresh globals).
    pub fn hot_key(&self) -> Option<usize> {
        let before = self.number().checked_sub(1)?;
        (self.index > 1).then(|| session_park_key(self.offset, before))
    }
}

/// The key a session's child is parked under: the number of the last cell
/// it ran, with the offset of the compaction that cell follows in the high
/// half. A compaction's base has the number of the last cell it folds, so
/// the number alone would let a child parked before a compaction (on this
/// node or another) pass for the base's.
pub fn session_park_key(offset: u32, number: u32) -> usize {
    ((u64::from(offset) << 32) | u64::from(number)) as usize
}

/// When each round was paused and answered, wall-clock milliseconds since
/// the Unix epoch (for the call history; never read by replay).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundTimes {
    /// One per pause, in order.
    pub paused_ms: Vec<u64>,
    /// One per answered round, in order.
    pub answered_ms: Vec<u64>,
}

impl RoundTimes {
    /// Notes that round `index` (from 0) paused at `ms`. Rounds before it
    /// with no time (stored by an earlier format) hold 0, unknown.
    pub fn paused(&mut self, index: usize, ms: u64) {
        set_at(&mut self.paused_ms, index, ms);
    }

    /// Notes that round `index`'s results arrived at `ms`.
    pub fn answered(&mut self, index: usize, ms: u64) {
        set_at(&mut self.answered_ms, index, ms);
    }

    /// How long the client took to answer round `index` (from 0), when
    /// both times are known.
    pub fn client_ms(&self, index: usize) -> Option<u64> {
        let paused = *self.paused_ms.get(index).filter(|ms| **ms > 0)?;
        let answered = *self.answered_ms.get(index).filter(|ms| **ms > 0)?;
        Some(answered.saturating_sub(paused))
    }
}

fn set_at(times: &mut Vec<u64>, index: usize, ms: u64) {
    if times.len() <= index {
        times.resize(index + 1, 0);
    }
    times[index] = ms;
}

impl ExecutionRecord {
    /// Encodes the whole record in format 3 (what earlier builds stored).
    /// Bincode of this plain data into memory does not fail; if it ever
    /// did, the error is returned rather than a partial record.
    pub fn encode(&self) -> Result<Vec<u8>, JournalError> {
        let mut out = Vec::with_capacity(256 + self.source.len() + self.stdout.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&WHOLE_FORMAT_VERSION.to_le_bytes());
        bincode::serialize_into(&mut out, self)
            .map_err(|e| JournalError::Corrupt(format!("the record does not encode: {e}")))?;
        Ok(out)
    }

    /// Decodes and validates a whole record of format 2 or 3.
    pub fn decode(bytes: &[u8]) -> Result<Self, JournalError> {
        let body = check_header(bytes)?;
        let options = bincode_limits(bytes.len());
        let record: Self = bincode::Options::deserialize(options, body.as_ref())
            .map_err(|e| JournalError::Corrupt(e.to_string()))?;
        record.validate()?;
        Ok(record)
    }

    /// Checks the invariants a replay relies on.
    pub fn validate(&self) -> Result<(), JournalError> {
        if self.used_ms > self.timeout_ms {
            return Err(JournalError::Corrupt(format!(
                "used {} ms of a {} ms budget",
                self.used_ms, self.timeout_ms
            )));
        }
        for (index, round) in self.rounds.iter().enumerate() {
            if round.calls.is_empty() || round.calls.len() != round.results.len() {
                return Err(JournalError::Corrupt(format!(
                    "round {} has {} calls and {} results",
                    index + 1,
                    round.calls.len(),
                    round.results.len()
                )));
            }
            self.check_offsets(round.stdout_len, round.stderr_len)?;
        }
        if let Some(pending) = &self.pending {
            if pending.calls.is_empty() {
                return Err(JournalError::Corrupt("pending round has no calls".into()));
            }
            self.check_offsets(pending.stdout_len, pending.stderr_len)?;
        }
        Ok(())
    }

    /// Output offsets must lie inside the output held, on character boundaries.
    fn check_offsets(&self, out: u64, err: u64) -> Result<(), JournalError> {
        let fits =
            |text: &str, at: u64| usize::try_from(at).is_ok_and(|at| text.is_char_boundary(at));
        if !fits(&self.stdout, out) || !fits(&self.stderr, err) {
            return Err(JournalError::Corrupt(format!(
                "output offset {out}/{err} outside the output held ({}/{} bytes)",
                self.stdout.len(),
                self.stderr.len()
            )));
        }
        Ok(())
    }

    /// The number of pauses so far (completed rounds plus the pending one).
    pub fn round_count(&self) -> usize {
        self.rounds.len() + usize::from(self.pending.is_some())
    }

    /// The execution id as lowercase hex.
    pub fn id_hex(&self) -> String {
        hex::encode(self.id)
    }
}

/// The body of a whole record. A format-2 record is the same bincode
/// without the trailing `argv`: appending an empty vector's encoding (a
/// zero `u64` length) makes it a format-3 body.
fn check_header(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, JournalError> {
    if bytes.len() < 6 || &bytes[..4] != MAGIC {
        return Err(JournalError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    match version {
        WHOLE_FORMAT_VERSION => Ok(std::borrow::Cow::Borrowed(&bytes[6..])),
        2 => Ok(std::borrow::Cow::Owned(
            [&bytes[6..], 0u64.to_le_bytes().as_slice()].concat(),
        )),
        _ => Err(JournalError::UnknownVersion(version)),
    }
}

/// Bincode options equal to `bincode::serialize`'s, with an allocation limit
/// so corrupt lengths cannot ask for more memory than the input could hold.
fn bincode_limits(input_len: usize) -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit((input_len as u64).saturating_mul(4).max(4096))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A paused record with one completed round, output and a file.
    pub(crate) fn sample() -> ExecutionRecord {
        let call = CallRecord {
            id: "call_1".into(),
            site: 0,
            tool: "get-weather".into(),
            input: r#"{"city":"SF"}"#.into(),
            line: 1,
        };
        ExecutionRecord {
            id: [7; 16],
            session_id: "s".into(),
            source: "x = await get_weather(city='SF')\nprint(x)\n".into(),
            tools: vec![],
            timeout_ms: 60_000,
            used_ms: 3,
            seed: [1; 32],
            hash_seed: 0,
            clock0: ClockBase {
                wall: 1.5,
                mono: 2.5,
            },
            rounds: vec![Round {
                calls: vec![call.clone()],
                results: vec![CallResult::Value("1".into())],
                stdout_len: 2,
                stderr_len: 0,
                frame: FrameSummary::default(),
                resume_clock: ClockBase {
                    wall: 3.0,
                    mono: 4.0,
                },
            }],
            pending: Some(PendingRound {
                calls: vec![call],
                stdout_len: 3,
                stderr_len: 0,
                frame: FrameSummary::default(),
            }),
            stdout: "abc".into(),
            stderr: String::new(),
            files: vec![WorkspaceFile {
                name: "data.csv".into(),
                bytes: b"a,b\n1,2\n".to_vec(),
            }],
            argv: vec![],
            produced: vec![],
            removed: vec![],
            stored: StoredExtent::default(),
            direct_only: Vec::new(),
            include_history: false,
            read_only: Vec::new(),
            lang: Default::default(),
            directories: Vec::new(),
            directories_left: Vec::new(),
            contracts: Default::default(),
            owner: [0; 8],
            round_times: RoundTimes::default(),
            cell: None,
            names: Vec::new(),
        }
    }

    #[test]
    fn round_trips() {
        let record = sample();
        assert_eq!(
            ExecutionRecord::decode(&record.encode().unwrap_or_default()),
            Ok(record)
        );
    }

    #[test]
    fn rejects_bad_magic_and_unknown_version() {
        let mut bytes = sample().encode().unwrap_or_default();
        bytes[0] = b'X';
        assert_eq!(ExecutionRecord::decode(&bytes), Err(JournalError::BadMagic));
        let mut bytes = sample().encode().unwrap_or_default();
        bytes[4] = 9;
        assert_eq!(
            ExecutionRecord::decode(&bytes),
            Err(JournalError::UnknownVersion(9))
        );
    }

    #[test]
    fn rejects_truncation_and_inconsistency() {
        let bytes = sample().encode().unwrap_or_default();
        for cut in [6, 20, bytes.len() / 2, bytes.len() - 1] {
            assert!(matches!(
                ExecutionRecord::decode(&bytes[..cut]),
                Err(JournalError::Corrupt(_))
            ));
        }
        let mut record = sample();
        record.rounds[0].results.clear();
        assert!(matches!(
            ExecutionRecord::decode(&record.encode().unwrap_or_default()),
            Err(JournalError::Corrupt(_))
        ));
        let mut record = sample();
        record.rounds[0].stdout_len = 99;
        assert!(matches!(
            ExecutionRecord::decode(&record.encode().unwrap_or_default()),
            Err(JournalError::Corrupt(_))
        ));
        let mut record = sample();
        (record.timeout_ms, record.used_ms) = (10, 11);
        assert!(matches!(
            ExecutionRecord::decode(&record.encode().unwrap_or_default()),
            Err(JournalError::Corrupt(_))
        ));
    }
}
