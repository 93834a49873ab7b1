//! What the service takes and gives: start and continuation requests,
//! replies, cancel outcomes and inspections. Plain data; the API decodes
//! requests into these and renders these as its views.

use serde::Deserialize;

use crate::journal::{CallRecord, ExecutionRecord, HistoryCall};
use crate::program::Lang;
use crate::state::{EndedOutcome, Ending, ExecState, Status};
use crate::tools::{CallPolicy, ToolDef};
use crate::workspace::FileMeta;

use crate::failure::Failure;

/// A start request.
#[derive(Debug)]
pub struct StartRequest {
    /// Python source.
    pub code: String,
    /// Tools.
    pub tools: Vec<ToolDef>,
    /// Session, generated when absent.
    pub session_id: Option<String>,
    /// Run-time budget, milliseconds.
    pub timeout_ms: u64,
    /// The client's request id header, for cancel.
    pub request_id: Option<String>,
    /// Session files to put under `/mnt/data`.
    pub files: Vec<FileRef>,
    /// Command-line arguments (`sys.argv[1:]`).
    pub argv: Vec<String>,
    /// Tools code may not call, and whether the end lists the calls.
    pub policy: CallPolicy,
    /// The language of `code`.
    pub lang: Lang,
}

/// A start request's reference to a session file: baton's shape (`id`,
/// `session_id`, `name`) or LibreChat's (`id`, `storage_session_id`,
/// `name`, `kind`, `resource_id`, `version`).
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
pub struct FileRef {
    /// The file id.
    pub id: String,
    /// The name to give it under `/mnt/data` (the stored name when absent).
    #[serde(default)]
    pub name: Option<String>,
    /// Its session (the execution's when absent).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Its session as LibreChat names it (wins over `session_id`).
    #[serde(default)]
    pub storage_session_id: Option<String>,
    /// Whose file: `user` (the caller's own, the default), `agent` or
    /// `skill` (shared in the tenant, with `resource_id`).
    #[serde(default)]
    pub kind: Option<String>,
    /// The agent's or skill's id (for `user` files: informational).
    #[serde(default)]
    pub resource_id: Option<String>,
    /// A skill's version (a number).
    #[serde(default)]
    #[schema(value_type = Option<f64>)]
    pub version: Option<serde_json::Value>,
}

impl FileRef {
    /// The storage session it names, if any.
    pub fn session(&self) -> Option<&str> {
        self.storage_session_id
            .as_deref()
            .or(self.session_id.as_deref())
            .filter(|s| !s.is_empty())
    }
}

/// One result of a continuation.
#[derive(Clone, Debug, utoipa::ToSchema)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The value: any JSON, of any depth (kept as its compact text, never
    /// built into a tree on the server; the code's `json.loads` reads it).
    #[serde(default)]
    #[schema(value_type = serde_json::Value)]
    pub result: String,
    /// Whether the tool failed.
    #[serde(default)]
    pub is_error: bool,
    /// The failure's message.
    #[serde(default)]
    pub error_message: Option<String>,
}

/// What the client gets back.
pub enum Reply {
    /// Waiting on tool calls.
    Paused {
        /// Execution id (hex), for inspection.
        execution_id: String,
        /// Session.
        session_id: String,
        /// Token for the next continuation.
        token: String,
        /// The calls.
        calls: Vec<CallRecord>,
        /// Pauses so far (this one included).
        round: u32,
        /// A session's cell: its session and place.
        cell: Option<super::CellTag>,
    },
    /// Ended.
    Ended {
        /// Execution id (hex), for inspection.
        execution_id: String,
        /// Session.
        session_id: String,
        /// `None` when completed, else the error line.
        error: Option<String>,
        /// All stdout.
        stdout: String,
        /// All stderr.
        stderr: String,
        /// Files the code created or changed (when completed).
        files: Vec<FileMeta>,
        /// Names of the request's files the code removed (when completed).
        deleted_files: Vec<String>,
        /// Pauses it made.
        round: u32,
        /// How it failed ([`crate::failure::Failure::kind`]); `None` when
        /// it completed, or when the answer repeats a stored outcome.
        failure: Option<&'static str>,
        /// The calls it made, when the start asked for them.
        history: Option<Vec<HistoryCall>>,
        /// Its exit status and failure kind.
        ending: Ending,
        /// Directories its code left empty (known to the request that ran
        /// the end only).
        directories: Vec<String>,
        /// A session's cell: its session and place.
        cell: Option<super::CellTag>,
    },
}

/// What a cancel found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The execution was running or paused, and is now cancelled (or had
    /// been cancelled already).
    Cancelled,
    /// The execution had already ended, with this status.
    Ended(Status),
    /// No request with this id yet: a request that comes with it within
    /// [`super::EARLY_CANCEL_SECS`] is cancelled on arrival.
    Pending,
}

/// A cancel's outcome, and where the execution was held when that is
/// another node (alive, with an address): a round running there, or a
/// child parked there, is ended only when that node hears of the cancel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancellation {
    /// What the cancel found.
    pub outcome: CancelOutcome,
    /// The base URL of the node that ran or held the execution, when it is
    /// not this one.
    pub held_at: Option<String>,
}

impl From<CancelOutcome> for Cancellation {
    fn from(outcome: CancelOutcome) -> Self {
        Cancellation {
            outcome,
            held_at: None,
        }
    }
}

/// What an operator sees of an execution: its state, and its record while
/// it can run or its outcome once it ended.
#[derive(Debug)]
pub struct Inspection {
    /// The execution's state.
    pub state: ExecState,
    /// Its status as shown: the state's, or `expired` for a pause past its
    /// time.
    pub status: &'static str,
    /// Its record, while paused or running.
    pub record: Option<ExecutionRecord>,
    /// Its outcome, once ended (while kept).
    pub outcome: Option<EndedOutcome>,
}

impl Reply {
    /// The reply with `tag` (a session's cell's) in it.
    pub(super) fn tagged(mut self, tag: Option<super::CellTag>) -> Reply {
        match &mut self {
            Reply::Paused { cell, .. } | Reply::Ended { cell, .. } => *cell = tag,
        }
        self
    }

    /// The reply of an ended execution.
    pub(super) fn from_outcome(
        execution_id: String,
        outcome: EndedOutcome,
        round: u32,
        failure: Option<&'static str>,
    ) -> Reply {
        Reply::Ended {
            round,
            failure,
            execution_id,
            session_id: outcome.session_id,
            error: outcome.error,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            files: outcome.files,
            deleted_files: outcome.deleted,
            history: outcome.history,
            ending: outcome.ending,
            directories: Vec::new(),
            cell: None,
        }
    }
}

/// The reply to a request whose execution was cancelled.
pub(super) fn cancelled_reply(record: &ExecutionRecord) -> Reply {
    Reply::Ended {
        execution_id: record.id_hex(),
        session_id: record.session_id.clone(),
        error: Some(Failure::Cancelled.to_string()),
        stdout: record.stdout.clone(),
        stderr: record.stderr.clone(),
        files: Vec::new(),
        deleted_files: Vec::new(),
        round: record.round_count() as u32,
        failure: Some(Failure::Cancelled.kind()),
        history: None,
        ending: Ending::of(Some(&Failure::Cancelled)),
        directories: Vec::new(),
        cell: None,
    }
}
