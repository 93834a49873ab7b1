//! The stored state of executions and client requests: the small
//! [`ExecState`] each claim works on, the [`EndedOutcome`] an ended
//! execution is answered with, the request-id mappings cancel uses, and the
//! store's key layout for all of them, written once here.
//!
//! Keys:
//! - `s/<id 16>`: the [`ExecState`];
//! - `r/<id 16>`, `p/<id 16>`, `j/<id 16><round u32 BE>`: the
//!   [`crate::journal::ExecutionRecord`] while it can run, in parts (its
//!   start, its progress, one per completed round; see
//!   `journal/parts.rs`); `r/` alone holds a whole record of format 2 or 3;
//! - `o/<id 16>`: the [`EndedOutcome`] once it ended, kept as long as the
//!   state, so a retried continuation and an inspection still see it
//!   (with the execution's timeline of tool calls);
//! - `q/<owner 8><request id>`: the [`RequestLink`] of a client request id
//!   (start or continuation) to its execution;
//! - `c/<owner 8><request id>`: a cancel that came before its request
//!   ([`EarlyCancel`]);
//! - `x/<owner 8><u64::MAX - started µs, BE><id 16>` (empty value): a key's
//!   executions, newest first, for listings (written with the first state,
//!   swept once the state is gone);
//! - `n/<node id u64 BE>`: the address (`--advertise`) at which a node
//!   takes continuations of the executions whose children it holds
//!   (written when it starts, swept once it is dead);
//! - `k/<name>`: a secret generated for every node of a shared database
//!   (`api_key`, `signing_key`) when the flags give none.
//!
//! Kept by their own modules: `f/`, `d/` (session files,
//! `workspace/files.rs`), `t/` (runtime sessions,
//! `service/runtime_sessions.rs`), `y/`, `z/` (Python sessions and their
//! cells' journals, `service/sessions.rs`).
//!
//! Invariants:
//! - Request-id keys start with the owner's key identity: one API key can
//!   never see, take or cancel another key's request ids.
//! - Every value here is versioned bincode; a state written by the previous
//!   format still decodes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::failure::Failure;
use crate::journal::{ExecutionRecord, HistoryCall, Timeline};
use crate::workspace::FileMeta;

/// Where an execution stands, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Code is running (a request is in flight).
    Running,
    /// Waiting for the client's results.
    Paused,
    /// Ended successfully.
    Completed,
    /// Ended with an error.
    Failed,
    /// Cancelled by the client.
    Cancelled,
}

impl Status {
    /// Whether the execution has ended.
    pub fn is_ended(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// The continuation a round was answered with: its round and the digest of
/// its results ([`results_digest`]). A retry of that continuation (same
/// token, same results) gets the answer that round led to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    /// The round that was continued.
    pub round: u32,
    /// The digest of the results it was continued with.
    pub digest: [u8; 32],
}

/// The small per-execution state the claim works on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecState {
    /// Status.
    pub status: Status,
    /// Number of pauses so far (the round a token continues).
    pub round: u32,
    /// Identity of the API key that started it.
    pub owner: [u8; 8],
    /// Unix seconds after which the state may be swept.
    pub expires_at: u64,
    /// The last continuation made (set when it is claimed).
    pub answered: Option<Answered>,
    /// The node that wrote this state: while running, the one that runs
    /// the round; while paused, the one whose child may be parked (0 in
    /// states written before nodes had ids).
    pub node: u64,
}

/// The second stored format of [`ExecState`] (before nodes).
#[derive(Deserialize)]
struct ExecStateV2 {
    status: Status,
    round: u32,
    owner: [u8; 8],
    expires_at: u64,
    answered: Option<Answered>,
}

impl From<ExecStateV2> for ExecState {
    fn from(old: ExecStateV2) -> Self {
        ExecState {
            status: old.status,
            round: old.round,
            owner: old.owner,
            expires_at: old.expires_at,
            answered: old.answered,
            node: 0,
        }
    }
}

/// The first stored format of [`ExecState`] (before retried continuations
/// were answered).
#[derive(Deserialize)]
struct ExecStateV1 {
    status: Status,
    round: u32,
    owner: [u8; 8],
    expires_at: u64,
}

impl From<ExecStateV1> for ExecState {
    fn from(old: ExecStateV1) -> Self {
        ExecState {
            status: old.status,
            round: old.round,
            owner: old.owner,
            expires_at: old.expires_at,
            answered: None,
            node: 0,
        }
    }
}

impl ExecState {
    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes any stored format.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        decode_either::<Self, ExecStateV2>(bytes).or_else(|| {
            bincode::deserialize::<ExecStateV1>(bytes)
                .ok()
                .map(Into::into)
        })
    }
}

/// How an execution ended, kept after its record is dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedOutcome {
    /// `None` when it completed, else the one-line error.
    pub error: Option<String>,
    /// All stdout.
    pub stdout: String,
    /// All stderr.
    pub stderr: String,
    /// The files it left (completed only).
    pub files: Vec<FileMeta>,
    /// Names of the request's files it removed (completed only).
    pub deleted: Vec<String>,
    /// Its session.
    pub session_id: String,
    /// The tool calls it made, for operators (added in the second format).
    pub timeline: Timeline,
    /// The calls as the answer's `history` lists them, when the start asked
    /// for it (second format).
    pub history: Option<Vec<HistoryCall>>,
    /// Its exit status and failure kind (third format; must stay the last
    /// field).
    pub ending: Ending,
}

/// How an execution ended: what `POST /exec` answers as `code`, `status`
/// and `signal`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
    /// The status its code ended with: 0 when it completed, 1 when it
    /// raised, `n` for `exit(n)`; `None` when it was stopped from outside
    /// (or stored by a build before this field).
    pub exit_status: Option<i32>,
    /// How it failed ([`Failure::kind`]), when it did.
    pub failure_kind: Option<String>,
}

impl Ending {
    /// The ending of an execution that completed (`None`) or failed so.
    pub fn of(failure: Option<&Failure>) -> Ending {
        match failure {
            None => Ending {
                exit_status: Some(0),
                failure_kind: None,
            },
            Some(failure) => Ending {
                exit_status: failure.exit_status(),
                failure_kind: Some(failure.kind().to_owned()),
            },
        }
    }
}

/// The second stored format of [`EndedOutcome`] (before its ending).
#[derive(Deserialize)]
struct EndedOutcomeV2 {
    error: Option<String>,
    stdout: String,
    stderr: String,
    files: Vec<FileMeta>,
    deleted: Vec<String>,
    session_id: String,
    timeline: Timeline,
    history: Option<Vec<HistoryCall>>,
}

/// The first stored format of [`EndedOutcome`] (before the timeline).
#[derive(Deserialize)]
struct EndedOutcomeV1 {
    error: Option<String>,
    stdout: String,
    stderr: String,
    files: Vec<FileMeta>,
    deleted: Vec<String>,
    session_id: String,
}

impl EndedOutcome {
    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes any stored format (the newest is tried first: bincode reads
    /// an older prefix of a newer value too).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        bincode::deserialize::<Self>(bytes)
            .ok()
            .or_else(|| decode_either::<EndedOutcomeV2, EndedOutcomeV1>(bytes).map(Into::into))
    }

    /// The outcome of `record` ended with `failure` (`None`: completed),
    /// leaving `files` and having removed `deleted`; `history` when the
    /// answer lists the calls.
    pub fn of(
        record: &ExecutionRecord,
        failure: Option<&Failure>,
        files: Vec<FileMeta>,
        deleted: Vec<String>,
        history: Option<Vec<HistoryCall>>,
    ) -> Self {
        EndedOutcome {
            error: failure.map(Failure::to_string),
            stdout: record.stdout.clone(),
            stderr: record.stderr.clone(),
            files,
            deleted,
            session_id: record.session_id.clone(),
            timeline: Timeline::of(record),
            history,
            ending: Ending::of(failure),
        }
    }
}

impl From<EndedOutcomeV2> for EndedOutcome {
    fn from(old: EndedOutcomeV2) -> Self {
        EndedOutcome {
            error: old.error,
            stdout: old.stdout,
            stderr: old.stderr,
            files: old.files,
            deleted: old.deleted,
            session_id: old.session_id,
            timeline: old.timeline,
            history: old.history,
            ending: Ending::default(),
        }
    }
}

impl From<EndedOutcomeV1> for EndedOutcomeV2 {
    fn from(old: EndedOutcomeV1) -> Self {
        EndedOutcomeV2 {
            error: old.error,
            stdout: old.stdout,
            stderr: old.stderr,
            files: old.files,
            deleted: old.deleted,
            session_id: old.session_id,
            timeline: Timeline::default(),
            history: None,
        }
    }
}

/// The execution a client request id started or continued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestLink {
    /// The execution.
    pub execution: [u8; 16],
    /// Unix seconds after which the link may be swept.
    pub expires_at: u64,
}

/// A cancel that arrived before any request with its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlyCancel {
    /// Unix seconds until which a request with the id is cancelled on arrival.
    pub until: u64,
}

macro_rules! codec {
    ($type:ty) => {
        impl $type {
            /// The stored bytes.
            pub fn encode(&self) -> Vec<u8> {
                encode(self)
            }

            /// Decodes stored bytes.
            pub fn decode(bytes: &[u8]) -> Option<Self> {
                bincode::deserialize(bytes).ok()
            }
        }
    };
}

codec!(RequestLink);
codec!(EarlyCancel);

/// Bincode of plain data; it cannot fail for these types.
/// A value of the current format `T`, or of the earlier format `Old`
/// (upgraded): the current one is tried first.
fn decode_either<T, Old>(bytes: &[u8]) -> Option<T>
where
    T: serde::de::DeserializeOwned,
    Old: serde::de::DeserializeOwned + Into<T>,
{
    if let Ok(value) = bincode::deserialize::<T>(bytes) {
        return Some(value);
    }
    bincode::deserialize::<Old>(bytes).ok().map(Into::into)
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    match bincode::serialize(value) {
        Ok(bytes) => bytes,
        Err(error) => unreachable!("bincode of plain data failed: {error}"),
    }
}

/// The prefix of executions' states.
pub const STATES: &[u8] = b"s/";
/// The prefix of executions' records.
pub const RECORDS: &[u8] = b"r/";
/// The prefix of executions' record progress parts.
pub const PROGRESS: &[u8] = b"p/";
/// The prefix of executions' record round parts.
pub const ROUNDS: &[u8] = b"j/";
/// The prefix of ended executions' outcomes.
pub const OUTCOMES: &[u8] = b"o/";
/// The prefix of request-id links.
pub const REQUEST_LINKS: &[u8] = b"q/";
/// The prefix of the per-key execution index.
pub const LISTINGS: &[u8] = b"x/";

/// The prefix of one key's entries in the execution index.
pub fn listing_prefix(owner: &[u8; 8]) -> Vec<u8> {
    [LISTINGS, owner].concat()
}

/// The index entry of an execution of `owner` started at `started_us`
/// (Unix microseconds): later starts sort first.
pub fn listing_key(owner: &[u8; 8], started_us: u64, id: &[u8; 16]) -> Vec<u8> {
    [LISTINGS, owner, &(u64::MAX - started_us).to_be_bytes(), id].concat()
}

/// The start time (Unix microseconds) and execution id of an index key.
pub fn parse_listing_key(key: &[u8]) -> Option<(u64, [u8; 16])> {
    let rest = key.strip_prefix(LISTINGS)?.get(8..)?;
    let inverted = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let id = rest.get(8..)?.try_into().ok()?;
    Some((u64::MAX - inverted, id))
}

/// The prefix of early cancels.
pub const EARLY_CANCELS: &[u8] = b"c/";
/// The prefix of the nodes' addresses.
pub const NODES: &[u8] = b"n/";
/// The prefix of secrets generated for every node of a shared database.
pub const SHARED_SECRETS: &[u8] = b"k/";

/// The key of the shared secret `name` (`api_key`, `signing_key`).
pub fn shared_secret_key(name: &str) -> Vec<u8> {
    [SHARED_SECRETS, name.as_bytes()].concat()
}

/// The key of a node's address (`--advertise`).
pub fn node_key(node: u64) -> Vec<u8> {
    [NODES, &node.to_be_bytes()[..]].concat()
}

/// The node id of a key under [`NODES`].
pub fn node_of_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(
        key.strip_prefix(NODES)?.try_into().ok()?,
    ))
}

/// The key of an execution's state.
pub fn state_key(id: &[u8; 16]) -> Vec<u8> {
    [STATES, id].concat()
}

/// The key of an execution's record.
pub fn record_key(id: &[u8; 16]) -> Vec<u8> {
    [RECORDS, id].concat()
}

/// The key of an execution's record progress part.
pub fn progress_key(id: &[u8; 16]) -> Vec<u8> {
    [PROGRESS, id].concat()
}

/// The prefix of an execution's record round parts.
pub fn rounds_prefix(id: &[u8; 16]) -> Vec<u8> {
    [ROUNDS, id].concat()
}

/// The key of an execution's record part for round `index` (from 0); keys
/// sort in round order.
pub fn round_key(id: &[u8; 16], index: u32) -> Vec<u8> {
    [ROUNDS, id, &index.to_be_bytes()].concat()
}

/// The execution id of a key under `prefix` whose id may be followed by
/// more (a round part's index).
pub fn id_after_prefix(prefix: &[u8], key: &[u8]) -> Option<[u8; 16]> {
    key.strip_prefix(prefix)?.get(..16)?.try_into().ok()
}

/// The key of an ended execution's outcome.
pub fn outcome_key(id: &[u8; 16]) -> Vec<u8> {
    [OUTCOMES, id].concat()
}

/// The key of a request id's link to its execution.
pub fn request_key(owner: [u8; 8], request_id: &str) -> Vec<u8> {
    [REQUEST_LINKS, &owner, request_id.as_bytes()].concat()
}

/// The key of an early cancel of a request id.
pub fn early_cancel_key(owner: [u8; 8], request_id: &str) -> Vec<u8> {
    [EARLY_CANCELS, &owner, request_id.as_bytes()].concat()
}

/// The execution id of a key under `prefix` ([`STATES`], [`RECORDS`] or
/// [`OUTCOMES`]), if it is one.
pub fn id_of_key(prefix: &[u8], key: &[u8]) -> Option<[u8; 16]> {
    key.strip_prefix(prefix)?.try_into().ok()
}

/// The execution id of a state key (`s/<id>`), if it is one.
pub fn id_of_state_key(key: &[u8]) -> Option<[u8; 16]> {
    id_of_key(STATES, key)
}

/// The digest of a continuation's results, independent of their order:
/// each result's call id, error flag, value (as JSON text) and message,
/// sorted by call id.
pub fn results_digest<'a>(
    results: impl IntoIterator<Item = (&'a str, bool, &'a str, Option<&'a str>)>,
) -> [u8; 32] {
    let mut entries: Vec<_> = results.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut hasher = Sha256::new();
    for (call_id, is_error, value, message) in entries {
        for part in [
            call_id,
            if is_error { "1" } else { "0" },
            value,
            message.unwrap_or("\u{0}"),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
    }
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_of_the_first_format_still_decodes() {
        #[derive(Serialize)]
        struct Old {
            error: Option<String>,
            stdout: String,
            stderr: String,
            files: Vec<FileMeta>,
            deleted: Vec<String>,
            session_id: String,
        }
        let bytes = bincode::serialize(&Old {
            error: Some("boom".into()),
            stdout: "out".into(),
            stderr: String::new(),
            files: vec![],
            deleted: vec!["a.txt".into()],
            session_id: "s1".into(),
        })
        .unwrap_or_default();
        let outcome = EndedOutcome::decode(&bytes).expect("decodes");
        assert_eq!(
            (
                outcome.error.as_deref(),
                outcome.stdout.as_str(),
                outcome.session_id.as_str()
            ),
            (Some("boom"), "out", "s1")
        );
        assert_eq!(outcome.deleted, vec!["a.txt".to_owned()]);
        assert_eq!(outcome.timeline, Timeline::default());
        assert_eq!(outcome.ending, Ending::default());
        let mut new = outcome;
        new.timeline.omitted = 3;
        assert_eq!(EndedOutcome::decode(&new.encode()), Some(new));
    }

    #[test]
    fn an_outcome_of_the_second_format_decodes_without_its_ending() {
        let failed = Failure::Exit(3);
        let outcome = EndedOutcome {
            error: Some(failed.to_string()),
            stdout: "out".into(),
            stderr: String::new(),
            files: vec![],
            deleted: vec![],
            session_id: "s1".into(),
            timeline: Timeline::default(),
            history: Some(vec![]),
            ending: Ending::of(Some(&failed)),
        };
        let bytes = outcome.encode();
        assert_eq!(EndedOutcome::decode(&bytes), Some(outcome.clone()));
        assert_eq!(outcome.ending.exit_status, Some(3));
        // The same value as the second format wrote it: no ending.
        let ending_len = bincode::serialize(&outcome.ending)
            .unwrap_or_default()
            .len();
        let old = EndedOutcome::decode(&bytes[..bytes.len() - ending_len]).expect("decodes");
        assert_eq!(old.ending, Ending::default());
        assert_eq!(old.history, Some(vec![]));
        assert_eq!(old.stdout, "out");
    }

    #[test]
    fn a_state_of_the_first_format_still_decodes() {
        #[derive(Serialize)]
        struct Old {
            status: Status,
            round: u32,
            owner: [u8; 8],
            expires_at: u64,
        }
        let bytes = bincode::serialize(&Old {
            status: Status::Paused,
            round: 3,
            owner: [7; 8],
            expires_at: 99,
        })
        .unwrap_or_default();
        let state = ExecState::decode(&bytes).expect("decodes");
        assert_eq!(state.round, 3);
        assert_eq!(state.status, Status::Paused);
        assert_eq!(state.answered, None);
        assert_eq!(state.node, 0);
        let new = ExecState {
            answered: Some(Answered {
                round: 3,
                digest: [1; 32],
            }),
            node: 42,
            ..state
        };
        assert_eq!(ExecState::decode(&new.encode()), Some(new));
    }

    #[test]
    fn a_state_of_the_second_format_still_decodes() {
        #[derive(Serialize)]
        struct Old {
            status: Status,
            round: u32,
            owner: [u8; 8],
            expires_at: u64,
            answered: Option<Answered>,
        }
        for answered in [
            None,
            Some(Answered {
                round: 2,
                digest: [9; 32],
            }),
        ] {
            let bytes = bincode::serialize(&Old {
                status: Status::Running,
                round: 2,
                owner: [7; 8],
                expires_at: 99,
                answered,
            })
            .unwrap_or_default();
            let state = ExecState::decode(&bytes).expect("decodes");
            assert_eq!(
                (state.status, state.round, state.answered, state.node),
                (Status::Running, 2, answered, 0)
            );
        }
    }

    #[test]
    fn node_keys_give_back_their_node() {
        assert_eq!(
            node_of_key(&node_key(0x0102_0304_0506_0708)),
            Some(0x0102_0304_0506_0708)
        );
        assert_eq!(node_of_key(b"n/short"), None);
        assert_eq!(node_of_key(&state_key(&[1; 16])), None);
    }

    #[test]
    fn digest_ignores_order_but_not_content() {
        let a = || ("call_a", false, "1", None);
        let b = || ("call_b", true, "null", Some("boom"));
        assert_eq!(results_digest([a(), b()]), results_digest([b(), a()]));
        assert_ne!(
            results_digest([a(), b()]),
            results_digest([a(), ("call_b", true, "null", Some("boom!"))])
        );
        assert_ne!(
            results_digest([("ab", false, "c", None)]),
            results_digest([("a", false, "bc", None)])
        );
    }
}
