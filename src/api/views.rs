//! The JSON bodies the API answers with, as types.
//!
//! Every response body the handlers send is one of these, and the OpenAPI
//! description (`/openapi.json`) is derived from the same types, so the
//! served schema cannot drift from what is sent.
//!
//! Invariant: field names and shapes are `PROTOCOL.md`'s; a field added here
//! is a field added to the wire contract.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::journal::{CallRecord, CallResult, HistoryCall, Timeline, TimelineCall};
use crate::service::{CancelOutcome, CellTag, Inspection, Listing, Reply, SessionInfo};
use crate::workspace::{FileMeta, MOUNT};

/// A tool call the client must run.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolCallView {
    /// The call's id, to be echoed as `tool_results[].call_id`.
    pub id: String,
    /// The tool's original name, as the start request declared it.
    pub name: String,
    /// Keyword arguments by name (positional ones named through the schema).
    #[schema(value_type = Object)]
    pub input: Box<RawValue>,
}

impl From<&CallRecord> for ToolCallView {
    fn from(call: &CallRecord) -> Self {
        Self {
            id: call.id.clone(),
            name: call.tool.clone(),
            input: raw_json(&call.input),
        }
    }
}

/// A call's input as the JSON text it is stored as: checked, never built
/// into a tree (an input may be a megabyte of small values; a view of it
/// costs its size once, not a tree many times that).
fn raw_json(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// A file the code created or changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProducedFileView {
    /// File id (21 characters), for `/download/{storage_session_id}/{id}`.
    pub id: String,
    /// Path under `/mnt/data`.
    pub name: String,
    /// Absolute path the code used.
    pub path: String,
    /// Session the file is kept in (the execution's).
    pub storage_session_id: String,
    /// The same session, as earlier builds named it.
    pub session_id: String,
    /// Bytes.
    pub size: u64,
    /// Always `false`: only what the code created or changed is listed
    /// (LibreChat skips files marked `inherited: true`).
    pub inherited: bool,
}

impl From<&FileMeta> for ProducedFileView {
    fn from(file: &FileMeta) -> Self {
        Self {
            id: file.id.clone(),
            name: file.name.clone(),
            path: format!("{MOUNT}/{}", file.name),
            storage_session_id: file.session_id.clone(),
            session_id: file.session_id.clone(),
            size: file.size,
            inherited: false,
        }
    }
}

/// A stored session file.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileView {
    /// File id.
    pub id: String,
    /// Path under `/mnt/data`.
    pub name: String,
    /// Session.
    pub session_id: String,
    /// Bytes.
    pub size: u64,
    /// Unix seconds.
    pub created: u64,
}

impl From<&FileMeta> for FileView {
    fn from(file: &FileMeta) -> Self {
        Self {
            id: file.id.clone(),
            name: file.name.clone(),
            session_id: file.session_id.clone(),
            size: file.size,
            created: file.created,
        }
    }
}

/// A session's files (`/upload`, `/files/{session_id}`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FilesView {
    /// The session.
    pub session_id: String,
    /// Its files.
    pub files: Vec<FileView>,
}

impl FilesView {
    /// The view of `files` in `session_id`.
    pub fn new(session_id: String, files: &[FileMeta]) -> Self {
        Self {
            session_id,
            files: files.iter().map(FileView::from).collect(),
        }
    }
}

/// The answer to `POST /exec/programmatic`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExecReply {
    /// The code waits on tool calls.
    ToolCallRequired {
        /// Execution id, for `/executions/{id}`.
        execution_id: String,
        /// Session.
        session_id: String,
        /// Token for the next continuation.
        continuation_token: String,
        /// Every call pending now: one round.
        tool_calls: Vec<ToolCallView>,
        /// A session's cell: its session and place.
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<CellTagView>,
    },
    /// The code ran to its end.
    Completed {
        /// Execution id.
        execution_id: String,
        /// Session.
        session_id: String,
        /// Everything printed.
        stdout: String,
        /// Everything written to stderr.
        stderr: String,
        /// Files created or changed under `/mnt/data`.
        files: Vec<ProducedFileView>,
        /// Names of the request's files the code removed.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        deleted_files: Vec<String>,
        /// The tool calls made, when the start asked (`include_history`).
        #[serde(skip_serializing_if = "Option::is_none")]
        history: Option<Vec<HistoryCallView>>,
        /// A session's cell: its session and place.
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<CellTagView>,
    },
    /// The code failed (an uncaught exception, a limit, a timeout).
    Error {
        /// Execution id.
        execution_id: String,
        /// Session.
        session_id: String,
        /// One line: the exception or the limit.
        error: String,
        /// Everything printed before the failure.
        stdout: String,
        /// Stderr, with the traceback.
        stderr: String,
        /// The tool calls made, when the start asked (`include_history`).
        #[serde(skip_serializing_if = "Option::is_none")]
        history: Option<Vec<HistoryCallView>>,
        /// A session's cell: its session and place.
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<CellTagView>,
    },
}

/// Where a session's cell stands (in every answer of a cell).
#[derive(Debug, Serialize, ToSchema)]
pub struct CellTagView {
    /// The Python session (`ps_…`).
    pub session_id: String,
    /// The cell's number, from 1.
    pub cell: u32,
    /// `new` (the session's first cell), `hot` (the namespace was held in
    /// memory), or `cold` (rebuilt by replaying the earlier cells).
    #[schema(pattern = "^(new|hot|cold)$")]
    pub resumed: &'static str,
    /// On the first cell after a compaction only: the names the compaction
    /// could not carry (gone from the namespace; empty when it kept all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<Vec<String>>,
}

impl From<CellTag> for CellTagView {
    fn from(tag: CellTag) -> Self {
        Self {
            session_id: tag.session_id,
            cell: tag.cell,
            resumed: tag.resumed,
            lost: tag.lost,
        }
    }
}

/// A global name a session holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct NameView {
    /// The name.
    pub name: String,
    /// Its value's type.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its value's repr (plain builtin values; at most 200 characters),
    /// else what it is (`<function f>`, `<class 'C'>`, `<C object>`).
    pub repr: String,
}

/// A Python session (`GET /sessions/{session_id}`; `POST /sessions`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// `ps_` and 32 hex digits.
    pub session_id: String,
    /// Cells it ran and holds (those a compaction folded too).
    pub cells: u32,
    /// Cells the last compaction folded into the session's base (0 while
    /// it was never compacted).
    pub compacted_cells: u32,
    /// Names the last compaction could not carry (gone from the
    /// namespace).
    pub lost: Vec<String>,
    /// `idle`, or `busy` while a cell runs or waits at tool calls.
    #[schema(pattern = "^(idle|busy)$")]
    pub status: &'static str,
    /// Unix seconds of its creation.
    pub created_at: u64,
    /// Unix seconds after which it is gone, unless a cell runs before.
    pub expires_at: u64,
    /// The storage session of its files (for `/download`, `/files`).
    pub files_session_id: String,
    /// The names its last cell left (none starting with `_`); left out of
    /// listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<NameView>>,
    /// The execution of each of its cells, in order (for
    /// `/executions/{id}`, while kept); left out of listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell_executions: Option<Vec<String>>,
}

impl SessionView {
    /// The view of `info`, with its names or without.
    pub fn new(info: SessionInfo, with_names: bool) -> Self {
        Self {
            session_id: info.session_id,
            cells: info.cells,
            compacted_cells: info.compacted_cells,
            lost: info.lost,
            status: info.status.name(),
            created_at: info.created,
            expires_at: info.expires_at,
            files_session_id: info.files_session,
            cell_executions: with_names.then_some(info.executions),
            names: with_names.then(|| {
                info.names
                    .into_iter()
                    .map(|n| NameView {
                        name: n.name,
                        ty: n.ty,
                        repr: n.repr,
                    })
                    .collect()
            }),
        }
    }
}

/// A principal's sessions (`GET /sessions`), oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionListView {
    /// The sessions, without their names.
    pub sessions: Vec<SessionView>,
}

/// One tool call of an ended execution's `history`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryCallView {
    /// The pause it was made at (1 for the first).
    pub round: u32,
    /// The call's id.
    pub id: String,
    /// The tool (its name as declared).
    pub name: String,
    /// Its arguments.
    #[schema(value_type = Object)]
    pub input: Box<RawValue>,
    /// Whether the client answered it with an error.
    pub is_error: bool,
    /// Milliseconds from the pause to the arrival of its round's results;
    /// null when unknown.
    pub client_ms: Option<u64>,
}

impl From<HistoryCall> for HistoryCallView {
    fn from(call: HistoryCall) -> Self {
        Self {
            round: call.round,
            id: call.id,
            name: call.tool,
            input: raw_json(&call.input),
            is_error: call.is_error,
            client_ms: call.client_ms,
        }
    }
}

fn history_view(history: Option<Vec<HistoryCall>>) -> Option<Vec<HistoryCallView>> {
    history.map(|calls| calls.into_iter().map(HistoryCallView::from).collect())
}

impl From<Reply> for ExecReply {
    fn from(reply: Reply) -> Self {
        match reply {
            Reply::Paused {
                execution_id,
                session_id,
                token,
                calls,
                cell,
                ..
            } => Self::ToolCallRequired {
                execution_id,
                session_id,
                continuation_token: token,
                tool_calls: calls.iter().map(ToolCallView::from).collect(),
                session: cell.map(CellTagView::from),
            },
            Reply::Ended {
                execution_id,
                session_id,
                error: None,
                stdout,
                stderr,
                files,
                deleted_files,
                history,
                cell,
                ..
            } => Self::Completed {
                execution_id,
                session_id,
                stdout,
                stderr,
                files: files.iter().map(ProducedFileView::from).collect(),
                deleted_files,
                history: history_view(history),
                session: cell.map(CellTagView::from),
            },
            Reply::Ended {
                execution_id,
                session_id,
                error: Some(error),
                stdout,
                stderr,
                history,
                cell,
                ..
            } => Self::Error {
                execution_id,
                session_id,
                error,
                stdout,
                stderr,
                history: history_view(history),
                session: cell.map(CellTagView::from),
            },
        }
    }
}

/// The answer to `POST /exec`: what LibreChat's `execute_code` tool reads.
/// The code's failures are part of `stderr` (the client does not read a
/// status).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlainExecView {
    /// Session of the files (a new one for each call that names none).
    pub session_id: String,
    /// Everything printed.
    pub stdout: String,
    /// Stderr: the traceback, or the limit that ended the code.
    pub stderr: String,
    /// Files created or changed under `/mnt/data` (when the code completed,
    /// raised or exited; not when it was stopped).
    pub files: Vec<ProducedFileView>,
    /// Names of the request's files the code removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted_files: Vec<String>,
    /// Execution id, for `/executions/{id}`.
    pub execution_id: String,
    /// The exit status: 0, 1 when Python raised, `n` for `exit(n)` or a
    /// command line's last status; `null` when the code was stopped.
    pub code: Option<i32>,
    /// `SIGKILL` when the code was stopped (time, memory, output); else
    /// `null`.
    pub signal: Option<&'static str>,
    /// What stopped it: `TO` (time limit), `OL` (stdout over the cap),
    /// `EL` (stderr over the cap), `SG` (out of memory, or another end by
    /// the sandbox); `null` when the code ended itself.
    pub status: Option<&'static str>,
    /// The limit's sentence (`Time limit exceeded`...), when one stopped it.
    pub message: Option<String>,
    /// Milliseconds the call took at the server.
    pub wall_time: u64,
    /// With the `stateful` profile: the runtime session the call ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_session_id: Option<String>,
    /// With the `stateful` profile: `new` or `reused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_status: Option<&'static str>,
}

/// The official Code API's `status` and `signal` for a failure of this
/// kind (`None`: the code ended itself).
fn stop_of(kind: Option<&str>) -> (Option<&'static str>, Option<&'static str>) {
    match kind {
        None | Some("exception" | "exit") => (None, None),
        Some("time_limit") => (Some("TO"), Some("SIGKILL")),
        Some("output_cap") => (Some("OL"), Some("SIGKILL")),
        Some("cancelled") => (Some("SG"), Some("SIGKILL")),
        Some(_) => (Some("SG"), Some("SIGKILL")),
    }
}

impl PlainExecView {
    /// The view of an ended execution, `wall_ms` after its request came;
    /// `None` for a pause (impossible without tools).
    pub fn from_reply(reply: Reply, wall_ms: u64) -> Option<Self> {
        let Reply::Ended {
            execution_id,
            session_id,
            error,
            stdout,
            mut stderr,
            files,
            deleted_files,
            ending,
            ..
        } = reply
        else {
            return None;
        };
        let kind = ending.failure_kind.as_deref();
        let (mut status, signal) = stop_of(kind);
        if status == Some("OL") && error.as_deref().is_some_and(|e| e.starts_with("stderr")) {
            status = Some("EL");
        }
        // A process that exits says nothing of it; an exception's line is
        // the end of its traceback already.
        let told = kind == Some("exit");
        let message = status.and(error.clone());
        if let Some(error) = error.filter(|_| !told)
            && stderr.lines().last() != Some(error.as_str())
        {
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                stderr.push('\n');
            }
            stderr.push_str(&error);
            stderr.push('\n');
        }
        Some(Self {
            session_id,
            stdout,
            stderr,
            files: files.iter().map(ProducedFileView::from).collect(),
            deleted_files,
            execution_id,
            code: ending.exit_status,
            signal,
            status,
            message,
            wall_time: wall_ms,
            runtime_session_id: None,
            runtime_status: None,
        })
    }
}

/// What `POST /upload` answers: LibreChat's shape (`message`,
/// `storage_session_id`, `files[].fileId`, `files[].filename`) with the
/// fields earlier builds gave beside it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadView {
    /// `success`.
    pub message: &'static str,
    /// The storage session the files are in (made for this upload unless
    /// the form named one).
    pub storage_session_id: String,
    /// The same session, as earlier builds named it.
    pub session_id: String,
    /// The files, in the order of their parts.
    pub files: Vec<UploadedFileView>,
}

/// One uploaded file.
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadedFileView {
    /// Its id (21 characters).
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The part's file name as sent (a relative path is kept).
    pub filename: String,
    /// The same id, as earlier builds named it.
    pub id: String,
    /// Its path under `/mnt/data`.
    pub name: String,
    /// Its storage session.
    pub session_id: String,
    /// Bytes.
    pub size: u64,
    /// Unix seconds.
    pub created: u64,
}

impl UploadedFileView {
    /// The view of a stored file.
    pub fn new(file: &FileMeta) -> Self {
        Self {
            file_id: file.id.clone(),
            filename: file.name.clone(),
            id: file.id.clone(),
            name: file.name.clone(),
            session_id: file.session_id.clone(),
            size: file.size,
            created: file.created,
        }
    }
}

impl UploadView {
    /// The answer to an upload that stored `files` in `session_id`.
    pub fn new(session_id: String, files: &[FileMeta]) -> Self {
        Self {
            message: "success",
            storage_session_id: session_id.clone(),
            session_id,
            files: files.iter().map(UploadedFileView::new).collect(),
        }
    }
}

/// What `POST /upload/batch` answers (LibreChat matches files by
/// `filename`).
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchUploadView {
    /// `success` (every file stored) or `partial_success` (a batch of
    /// which no file is stored is answered 400).
    #[schema(pattern = "^(success|partial_success)$")]
    pub message: &'static str,
    /// The storage session made for this upload.
    pub storage_session_id: String,
    /// One entry per file part, in order.
    pub files: Vec<BatchFileView>,
    /// Files stored.
    pub succeeded: usize,
    /// Files refused.
    pub failed: usize,
}

/// One file of a batch upload: stored (`status: success`, `fileId`) or
/// refused (`status: error`, `error`).
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchFileView {
    /// `success` or `error`.
    #[schema(pattern = "^(success|error)$")]
    pub status: &'static str,
    /// The part's file name as sent.
    pub filename: String,
    /// The stored file's id.
    #[serde(rename = "fileId", skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `GET /sessions/{session_id}/objects/{file_id}` answers: a stored
/// file's metadata (LibreChat reuses a file while `lastModified` is under
/// 23 hours old).
#[derive(Debug, Serialize, ToSchema)]
pub struct ObjectView {
    /// `<session>/<file id>`.
    pub name: String,
    /// Its path under `/mnt/data`, as uploaded.
    #[serde(rename = "originalFilename")]
    pub original_filename: String,
    /// Bytes.
    pub size: u64,
    /// When it was stored (RFC 3339, UTC).
    #[serde(rename = "lastModified")]
    pub last_modified: String,
    /// A tag for this content (the file id: files never change).
    pub etag: String,
    /// Its type, from its name.
    #[serde(rename = "contentType")]
    pub content_type: String,
    /// Whether code may only read it.
    #[serde(rename = "readOnly")]
    pub read_only: bool,
}

/// What a delete answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedView {
    /// `File deleted successfully`.
    pub message: &'static str,
    /// The session.
    pub session_id: String,
    /// The file.
    #[serde(rename = "fileId")]
    pub file_id: String,
}

/// `POST /tools/stubs`: the tools as a model's prompt can show them.
#[derive(Debug, Serialize, ToSchema)]
pub struct StubsView {
    /// `python` or `compact`.
    #[schema(pattern = "^(python|compact)$")]
    pub format: &'static str,
    /// The stubs: Python source (`python`), or one line per tool
    /// (`compact`). The same tools always give the same text.
    pub stubs: String,
}

/// The answer to a cancel.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelView {
    /// `cancelled`: the execution is cancelled (now or before); `ended`: it
    /// had already ended (see `execution_status`); `pending`: no request
    /// has carried this id yet, and one that does within a minute is
    /// cancelled on arrival.
    #[schema(pattern = "^(cancelled|ended|pending)$")]
    pub status: &'static str,
    /// The request id.
    pub request_id: String,
    /// For `ended`: `completed` or `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_status: Option<&'static str>,
}

impl CancelView {
    /// The view of what cancelling `request_id` found.
    pub fn new(request_id: String, outcome: CancelOutcome) -> Self {
        let (status, execution_status) = match outcome {
            CancelOutcome::Cancelled => ("cancelled", None),
            CancelOutcome::Ended(status) => ("ended", Some(status.name())),
            CancelOutcome::Pending => ("pending", None),
        };
        Self {
            status,
            request_id,
            execution_status,
        }
    }
}

/// Every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorView {
    /// Always `error`.
    pub status: &'static str,
    /// One line saying what was wrong, or a code LibreChat's client knows
    /// (`execution_profile_mismatch`).
    pub error: String,
    /// With a code: the sentence that explains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `rate_limited`: seconds until the request may succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl ErrorView {
    /// The error body saying `error`.
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            status: "error",
            error: error.into(),
            message: None,
            retry_after_seconds: None,
        }
    }
}

/// `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// `ok`, or `degraded` (HTTP 503) while the sandbox is not ready or
    /// the database does not answer.
    #[schema(pattern = "^(ok|degraded)$")]
    pub status: &'static str,
    /// The sandbox's state, in words.
    pub sandbox: &'static str,
    /// The database: `ok`, or why it does not answer.
    pub store: String,
    /// How many times the sandbox zygote died and was replaced.
    pub zygote_restarts: u64,
    /// Children parked at a pause.
    pub parked: usize,
    /// Pre-forked children waiting for work.
    pub idle_children: usize,
    /// Which callers are accepted (`--auth-provider`): `api-key`,
    /// `librechat-jwt`, `both`, or `none`.
    pub auth: &'static str,
    /// With `auth: none`, the warning that nothing is checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<&'static str>,
}

/// Where a paused execution's code stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct FrameView {
    /// The function the first pending call was made from.
    pub function: String,
    /// Its line.
    pub line: u32,
    /// Its locals that render as JSON (values truncated).
    pub locals: Value,
}

/// `GET /executions/{id}`: an execution as operators see it. `session_id`,
/// `stdout` and `stderr` are there while it is kept (so far, or all once
/// ended); `timeout_ms`, `used_ms` and `stdout_bytes` while it runs or is
/// paused; `pending_calls` and `frame` are null unless it is paused;
/// `error`, `files` and `deleted_files` once it ended.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionView {
    /// Execution id.
    pub execution_id: String,
    /// `running`, `paused`, `expired` (a pause past its time, never to be
    /// continued), `completed`, `failed` or `cancelled`.
    pub status: String,
    /// Pauses so far.
    pub round: u32,
    /// Unix seconds after which it may be swept.
    pub expires_at: u64,
    /// Session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Run-time budget, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Run time used, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_ms: Option<u64>,
    /// Bytes printed so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_bytes: Option<usize>,
    /// The calls it waits on.
    pub pending_calls: Option<Vec<ToolCallView>>,
    /// Where its code stands.
    pub frame: Option<FrameView>,
    /// Once ended: its one-line error (null when it completed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Option<String>>,
    /// What it printed so far (everything, once ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Its stderr so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Once completed: the files it created or changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<ProducedFileView>>,
    /// Once completed: the request's files it removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_files: Option<Vec<String>>,
    /// The tool calls it made, oldest first, inputs and answers cut to
    /// 1 KiB (empty for an execution that ended under a build that did not
    /// keep them).
    pub timeline: Vec<TimelineCallView>,
    /// Calls made beyond the first 500, not in `timeline`.
    pub timeline_omitted: u32,
}

/// One tool call of an execution's timeline.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelineCallView {
    /// The pause it was made at (1 for the first).
    pub round: u32,
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The line of the call in the code.
    pub line: u32,
    /// Its arguments, JSON text (cut to 1 KiB, then `…`).
    pub input: String,
    /// `ok` (answered with a result), `error` (answered with an error) or
    /// `pending` (waiting for the client).
    pub state: &'static str,
    /// The result (JSON text) or error message (cut to 1 KiB); null while
    /// pending.
    pub answer: Option<String>,
}

impl From<&TimelineCall> for TimelineCallView {
    fn from(call: &TimelineCall) -> Self {
        let (state, answer) = match &call.answer {
            None => ("pending", None),
            Some(CallResult::Value(text)) => ("ok", Some(text.clone())),
            Some(CallResult::Error(text)) => ("error", Some(text.clone())),
        };
        Self {
            round: call.round,
            id: call.id.clone(),
            name: call.tool.clone(),
            line: call.line,
            input: call.input.clone(),
            state,
            answer,
        }
    }
}

impl ExecutionView {
    /// The view of the execution `id_hex` as the service found it: its
    /// record when it is running or paused, its outcome once it ended.
    pub fn new(id_hex: &str, inspection: &Inspection) -> Self {
        let state = &inspection.state;
        let record = inspection.record.as_ref();
        let outcome = inspection.outcome.as_ref();
        let pending = record.and_then(|r| r.pending.as_ref());
        let timeline = match (record, outcome) {
            (Some(record), _) => Timeline::of(record),
            (None, Some(outcome)) => outcome.timeline.clone(),
            (None, None) => Timeline::default(),
        };
        Self {
            execution_id: id_hex.to_owned(),
            status: inspection.status.to_owned(),
            round: state.round,
            expires_at: state.expires_at,
            session_id: record
                .map(|r| r.session_id.clone())
                .or_else(|| outcome.map(|o| o.session_id.clone())),
            timeout_ms: record.map(|r| r.timeout_ms),
            used_ms: record.map(|r| r.used_ms),
            stdout_bytes: record.map(|r| r.stdout.len()),
            pending_calls: pending.map(|p| p.calls.iter().map(ToolCallView::from).collect()),
            frame: pending.map(|p| FrameView {
                function: p.frame.function.clone(),
                line: p.frame.line,
                locals: serde_json::from_str(&p.frame.locals).unwrap_or_default(),
            }),
            error: outcome.map(|o| o.error.clone()),
            stdout: outcome
                .map(|o| o.stdout.clone())
                .or_else(|| record.map(|r| r.stdout.clone())),
            stderr: outcome
                .map(|o| o.stderr.clone())
                .or_else(|| record.map(|r| r.stderr.clone())),
            files: outcome.map(|o| o.files.iter().map(ProducedFileView::from).collect()),
            deleted_files: outcome.map(|o| o.deleted.clone()),
            timeline: timeline.calls.iter().map(TimelineCallView::from).collect(),
            timeline_omitted: timeline.omitted,
        }
    }
}

/// One execution in a listing (`GET /executions`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListedExecutionView {
    /// Execution id, for `GET /executions/{id}`.
    pub execution_id: String,
    /// `running`, `paused`, `expired`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// Pauses so far.
    pub round: u32,
    /// Unix seconds when it started.
    pub started: u64,
    /// Unix seconds after which it may be swept.
    pub expires_at: u64,
}

/// A page of the caller's executions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionListView {
    /// The executions of this page.
    pub executions: Vec<ListedExecutionView>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

impl From<Listing> for ExecutionListView {
    fn from(listing: Listing) -> Self {
        Self {
            executions: listing
                .executions
                .into_iter()
                .map(|listed| ListedExecutionView {
                    execution_id: listed.execution_id,
                    status: listed.status.to_owned(),
                    round: listed.state.round,
                    started: listed.started_us / 1_000_000,
                    expires_at: listed.state.expires_at,
                })
                .collect(),
            next_cursor: listing.next_cursor,
        }
    }
}
