//! The durable execution service: the protocol's start, continue, cancel and
//! inspect on top of the engine, the store and the tokens.
//!
//! Keys in the store: `r/<id>` the [`ExecutionRecord`], `s/<id>` the small
//! [`ExecState`] (status, round, owner, expiry), `q/<request id>` the
//! execution a client request id started (for cancel).
//!
//! Invariants:
//! - A pause's record and state are flushed to disk (group commit) before
//!   the response that carries its token is sent.
//! - A round is continued at most once: the continuation claims it by a
//!   compare-and-swap of the state from `Paused(round)` to `Running(round)`,
//!   after the results were validated (a bad request leaves it paused).
//! - An execution of another API key answers exactly like a missing one.
//! - At start-up, states left `Running` by a dead server go back to
//!   `Paused`, so the last durable pause stays continuable.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::api::error::ApiError;
use crate::api::views::ExecutionView;
use crate::engine::{Engine, ExecutionSpec, ResumeKind, Step};
use crate::journal::{CallRecord, CallResult, ExecutionRecord, PendingRound, WorkspaceFile};
use crate::store::{Durability, Store};
use crate::token::{SigningKeys, TokenError};
use crate::tools::ToolDef;
use crate::workspace::{FileMeta, Files, WorkspaceError};

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
}

impl ExecState {
    fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        bincode::deserialize(bytes).ok()
    }
}

/// Settings of the service.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// How long a pause waits for its client, seconds.
    pub paused_ttl_secs: u64,
    /// How long an ended execution's state is kept (to answer replays), seconds.
    pub ended_ttl_secs: u64,
    /// Maximum pauses of one execution.
    pub max_rounds: usize,
    /// Largest encoded execution record a pause may store, bytes.
    pub max_record_bytes: usize,
    /// How long session files are kept, seconds.
    pub file_ttl_secs: u64,
}

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
}

/// A start request's reference to a session file.
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
}

/// One result of a continuation.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// The value.
    #[serde(default)]
    pub result: serde_json::Value,
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
    },
}

/// The service.
pub struct Service {
    engine: Arc<Engine>,
    store: Arc<dyn Store>,
    files: Files,
    durability: Durability,
    keys: SigningKeys,
    config: ServiceConfig,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn state_key(id: &[u8; 16]) -> Vec<u8> {
    [b"s/".as_slice(), id].concat()
}

fn record_key(id: &[u8; 16]) -> Vec<u8> {
    [b"r/".as_slice(), id].concat()
}

fn request_key(request_id: &str) -> Vec<u8> {
    [b"q/".as_slice(), request_id.as_bytes()].concat()
}

/// Maps a file store failure to the API's errors.
pub fn workspace_error(error: WorkspaceError) -> ApiError {
    match error {
        WorkspaceError::Invalid(message) => ApiError::BadRequest(message),
        WorkspaceError::Corrupt(message) => ApiError::Corrupt(message),
        WorkspaceError::Store(error) => store_error(error),
    }
}

fn store_error(error: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(format!("store failure: {error}"))
}

impl Service {
    /// A service over an engine and a store.
    pub fn new(
        engine: Arc<Engine>,
        store: Arc<dyn Store>,
        keys: SigningKeys,
        config: ServiceConfig,
    ) -> Service {
        let durability = Durability::new(store.clone());
        Service {
            engine,
            files: Files::new(store.clone()),
            store,
            durability,
            keys,
            config,
        }
    }

    /// The engine (for metrics).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The session files.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// Loads the files a start request names, as the workspace to start with.
    fn workspace(
        &self,
        owner: [u8; 8],
        session: &str,
        refs: &[FileRef],
    ) -> Result<Vec<WorkspaceFile>, ApiError> {
        let mut files = Vec::with_capacity(refs.len());
        let limit = self.engine.limits().workspace_bytes as usize;
        let mut total = 0usize;
        for file in refs {
            let from = file
                .session_id
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or(session);
            let stored = self
                .files
                .get(owner, from, &file.id)
                .map_err(workspace_error)?
                .ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "file {:?} not found in session {from:?}",
                        file.id
                    ))
                })?;
            let name = match file.name.as_deref().filter(|n| !n.is_empty()) {
                Some(name) => crate::workspace::check_name(name)
                    .map_err(workspace_error)?
                    .to_owned(),
                None => stored.name,
            };
            total += stored.bytes.len();
            if total > limit {
                return Err(ApiError::BadRequest(format!(
                    "the files of a request may have {limit} bytes at most"
                )));
            }
            files.push(WorkspaceFile {
                name,
                bytes: stored.bytes,
            });
        }
        Ok(files)
    }

    /// Starts an execution and runs it to its first pause or its end.
    pub async fn start(&self, owner: [u8; 8], request: StartRequest) -> Result<Reply, ApiError> {
        let session_id = request
            .session_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("sess_{}", hex::encode(rand::random::<[u8; 12]>())));
        crate::workspace::check_session(&session_id).map_err(workspace_error)?;
        let files = self.workspace(owner, &session_id, &request.files)?;
        let spec = ExecutionSpec {
            source: request.code,
            tools: request.tools,
            timeout_ms: request.timeout_ms,
            session_id,
            seed: None,
            files,
        };
        let mut record = self
            .engine
            .prepare(spec)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let state = ExecState {
            status: Status::Running,
            round: 0,
            owner,
            expires_at: now_secs() + self.config.paused_ttl_secs,
        };
        self.store
            .put(&state_key(&record.id), &state.encode())
            .map_err(store_error)?;
        if let Some(request_id) = request.request_id.filter(|r| !r.is_empty()) {
            self.store
                .put(&request_key(&request_id), &record.id)
                .map_err(store_error)?;
        }
        metrics::counter!("baton_executions_started_total").increment(1);
        let started = std::time::Instant::now();
        let step = self
            .engine
            .start(&mut record)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        metrics::histogram!("baton_start_to_pause_seconds").record(started.elapsed().as_secs_f64());
        self.settle(record, state, step).await
    }

    /// Continues a paused execution with the client's results.
    pub async fn continue_with(
        &self,
        owner: [u8; 8],
        token: &str,
        results: Vec<ToolResult>,
    ) -> Result<Reply, ApiError> {
        let claims = self.keys.verify(token, now_secs()).map_err(|e| match e {
            TokenError::Expired => ApiError::Expired,
            _ => ApiError::InvalidToken,
        })?;
        if claims.key_identity != owner {
            return Err(ApiError::InvalidToken);
        }
        let id = claims.execution_id;
        let (state_bytes, state) = self.load_state(&id, owner)?;
        check_claimable(&state, claims.round)?;
        let mut record = self.load_record(&id)?;
        let pending = record.pending.as_ref().ok_or(ApiError::AlreadyUsed)?;
        let ordered = order_results(pending, results)?;
        let running = ExecState {
            status: Status::Running,
            ..state.clone()
        };
        self.claim(&id, &state_bytes, &running, claims.round)?;
        let started = std::time::Instant::now();
        let resumed = self.engine.resume(&mut record, ordered).await;
        let (step, kind) = match resumed {
            Ok(done) => done,
            Err(error) => {
                self.release(&id, &running, &state);
                return Err(ApiError::Internal(error.to_string()));
            }
        };
        metrics::histogram!("baton_resume_to_pause_seconds")
            .record(started.elapsed().as_secs_f64());
        if kind == ResumeKind::Cold {
            metrics::counter!("baton_cold_resumes_total").increment(1);
        }
        self.settle(record, running, step).await
    }

    /// Persists the outcome of a step and makes the reply.
    async fn settle(
        &self,
        mut record: ExecutionRecord,
        state: ExecState,
        step: Step,
    ) -> Result<Reply, ApiError> {
        if self.is_cancelled(&record.id) {
            self.engine.evict(&record.id);
            return Ok(ended(
                record,
                Some("Execution was cancelled".into()),
                Vec::new(),
            ));
        }
        match step {
            Step::Paused(calls) => {
                if record.round_count() > self.config.max_rounds {
                    self.engine.evict(&record.id);
                    self.end(&record, &state, Status::Failed).await?;
                    return Err(ApiError::TooManyRounds(self.config.max_rounds));
                }
                metrics::counter!("baton_rounds_total").increment(1);
                let record_bytes = record.encode();
                if let Some(error) = self.oversized(record_bytes.len()) {
                    self.engine.evict(&record.id);
                    self.end(&record, &state, Status::Failed).await?;
                    record.pending = None;
                    return Ok(ended(record, Some(error), Vec::new()));
                }
                let token = self.persist_pause(&record, &record_bytes, &state).await?;
                Ok(Reply::Paused {
                    execution_id: record.id_hex(),
                    session_id: record.session_id,
                    token,
                    calls,
                })
            }
            Step::Completed => {
                metrics::counter!("baton_executions_completed_total").increment(1);
                let produced = std::mem::take(&mut record.produced);
                let files = self
                    .files
                    .keep_produced(state.owner, &record.session_id, produced)
                    .map_err(workspace_error)?;
                self.end(&record, &state, Status::Completed).await?;
                Ok(ended(record, None, files))
            }
            Step::Failed(error) => {
                metrics::counter!("baton_executions_failed_total").increment(1);
                if error.starts_with("Non-deterministic") {
                    metrics::counter!("baton_nondeterminism_errors_total").increment(1);
                }
                self.end(&record, &state, Status::Failed).await?;
                record.pending = None;
                Ok(ended(record, Some(error), Vec::new()))
            }
        }
    }

    /// The error of a record too large to store, if it is.
    fn oversized(&self, size: usize) -> Option<String> {
        (size > self.config.max_record_bytes).then(|| {
            format!(
                "Execution record too large: {size} bytes over the limit of {}",
                self.config.max_record_bytes
            )
        })
    }

    async fn persist_pause(
        &self,
        record: &ExecutionRecord,
        record_bytes: &[u8],
        state: &ExecState,
    ) -> Result<String, ApiError> {
        let round = record.round_count() as u32;
        let expires_at = now_secs() + self.config.paused_ttl_secs;
        let paused = ExecState {
            status: Status::Paused,
            round,
            owner: state.owner,
            expires_at,
        };
        let state_bytes = paused.encode();
        self.store
            .apply_batch(
                &[
                    (&record_key(&record.id), record_bytes),
                    (&state_key(&record.id), &state_bytes),
                ],
                &[],
            )
            .map_err(store_error)?;
        self.durability.durable().await.map_err(store_error)?;
        Ok(self.keys.sign(record.id, round, state.owner, expires_at))
    }

    async fn end(
        &self,
        record: &ExecutionRecord,
        state: &ExecState,
        status: Status,
    ) -> Result<(), ApiError> {
        let ended = ExecState {
            status,
            round: record.round_count() as u32,
            owner: state.owner,
            expires_at: now_secs() + self.config.ended_ttl_secs,
        };
        let state_bytes = ended.encode();
        self.store
            .apply_batch(
                &[(&state_key(&record.id), &state_bytes)],
                &[&record_key(&record.id)],
            )
            .map_err(store_error)?;
        self.durability.durable().await.map_err(store_error)
    }

    fn load_state(&self, id: &[u8; 16], owner: [u8; 8]) -> Result<(Vec<u8>, ExecState), ApiError> {
        let bytes = self
            .store
            .get(&state_key(id))
            .map_err(store_error)?
            .ok_or(ApiError::NotFound)?;
        let state = ExecState::decode(&bytes)
            .ok_or_else(|| ApiError::Corrupt("Execution state is corrupt".into()))?;
        if state.owner != owner {
            return Err(ApiError::NotFound);
        }
        Ok((bytes, state))
    }

    fn load_record(&self, id: &[u8; 16]) -> Result<ExecutionRecord, ApiError> {
        let bytes = self
            .store
            .get(&record_key(id))
            .map_err(store_error)?
            .ok_or(ApiError::NotFound)?;
        ExecutionRecord::decode(&bytes).map_err(|e| ApiError::Corrupt(e.to_string()))
    }

    fn claim(
        &self,
        id: &[u8; 16],
        expected: &[u8],
        running: &ExecState,
        round: u32,
    ) -> Result<(), ApiError> {
        let swapped = self
            .store
            .compare_and_swap(&state_key(id), Some(expected), Some(&running.encode()))
            .map_err(store_error)?;
        match swapped {
            Ok(()) => Ok(()),
            Err(conflict) => {
                let current = conflict.current.as_deref().and_then(ExecState::decode);
                match current {
                    None => Err(ApiError::NotFound),
                    Some(state) => check_claimable(&state, round).and(Err(ApiError::InProgress)),
                }
            }
        }
    }

    /// Puts a claimed round back to paused after an internal failure.
    fn release(&self, id: &[u8; 16], running: &ExecState, paused: &ExecState) {
        let _ = self.store.compare_and_swap(
            &state_key(id),
            Some(&running.encode()),
            Some(&paused.encode()),
        );
    }

    fn is_cancelled(&self, id: &[u8; 16]) -> bool {
        matches!(
            self.store
                .get(&state_key(id))
                .ok()
                .flatten()
                .as_deref()
                .and_then(ExecState::decode),
            Some(ExecState {
                status: Status::Cancelled,
                ..
            })
        )
    }

    /// Cancels the execution a client request id started. Returns whether
    /// there was one (of this key) to cancel.
    pub async fn cancel(&self, owner: [u8; 8], request_id: &str) -> Result<bool, ApiError> {
        let Some(id) = self
            .store
            .get(&request_key(request_id))
            .map_err(store_error)?
        else {
            return Ok(false);
        };
        let Ok(id) = <[u8; 16]>::try_from(id.as_slice()) else {
            return Ok(false);
        };
        loop {
            let (bytes, state) = match self.load_state(&id, owner) {
                Ok(found) => found,
                Err(ApiError::NotFound) => return Ok(false),
                Err(other) => return Err(other),
            };
            if matches!(
                state.status,
                Status::Completed | Status::Failed | Status::Cancelled
            ) {
                return Ok(true);
            }
            let cancelled = ExecState {
                status: Status::Cancelled,
                expires_at: now_secs() + self.config.ended_ttl_secs,
                ..state
            };
            let swapped = self
                .store
                .compare_and_swap(&state_key(&id), Some(&bytes), Some(&cancelled.encode()))
                .map_err(store_error)?;
            if swapped.is_ok() {
                self.store.delete(&record_key(&id)).map_err(store_error)?;
                self.engine.kill(&id);
                self.durability.durable().await.map_err(store_error)?;
                return Ok(true);
            }
        }
    }

    /// What an operator sees of an execution.
    pub fn inspect(&self, owner: [u8; 8], id_hex: &str) -> Result<ExecutionView, ApiError> {
        let id = hex::decode(id_hex)
            .ok()
            .and_then(|bytes| <[u8; 16]>::try_from(bytes.as_slice()).ok())
            .ok_or(ApiError::NotFound)?;
        let (_, state) = self.load_state(&id, owner)?;
        let record = match state.status {
            Status::Paused | Status::Running => Some(self.load_record(&id)?),
            _ => None,
        };
        Ok(ExecutionView::new(id_hex, &state, record.as_ref()))
    }

    /// At start-up: rounds left running by a dead server become paused again.
    pub fn recover(&self) -> Result<usize, ApiError> {
        let mut recovered = 0;
        for (key, bytes) in self.store.scan_prefix(b"s/").map_err(store_error)? {
            let Some(state) = ExecState::decode(&bytes) else {
                continue;
            };
            if state.status != Status::Running {
                continue;
            }
            let has_record = self
                .store
                .get(&[b"r/".as_slice(), &key[2..]].concat())
                .map_err(store_error)?
                .is_some();
            let next = ExecState {
                status: if has_record {
                    Status::Paused
                } else {
                    Status::Failed
                },
                ..state
            };
            let _ = self
                .store
                .compare_and_swap(&key, Some(&bytes), Some(&next.encode()))
                .map_err(store_error)?;
            recovered += 1;
        }
        self.store.flush().map_err(store_error)?;
        Ok(recovered)
    }

    /// Deletes session files past their lifetime; returns how many.
    pub fn sweep_files(&self, now: u64) -> Result<usize, ApiError> {
        self.files
            .sweep(now.saturating_sub(self.config.file_ttl_secs))
            .map_err(workspace_error)
    }

    /// Deletes expired executions; returns how many.
    pub fn sweep(&self, now: u64) -> Result<usize, ApiError> {
        let mut swept = 0;
        for (key, bytes) in self.store.scan_prefix(b"s/").map_err(store_error)? {
            let expired = ExecState::decode(&bytes)
                .is_none_or(|s| s.expires_at <= now && s.status != Status::Running);
            if !expired || key.len() != 18 {
                continue;
            }
            let mut id = [0u8; 16];
            id.copy_from_slice(&key[2..]);
            self.engine.evict(&id);
            self.store
                .apply_batch(&[], &[&key, &record_key(&id)])
                .map_err(store_error)?;
            swept += 1;
        }
        Ok(swept)
    }
}

fn ended(record: ExecutionRecord, error: Option<String>, files: Vec<FileMeta>) -> Reply {
    Reply::Ended {
        execution_id: record.id_hex(),
        session_id: record.session_id,
        error,
        stdout: record.stdout,
        stderr: record.stderr,
        files,
    }
}

/// Whether a token for `round` may continue an execution in `state`.
fn check_claimable(state: &ExecState, round: u32) -> Result<(), ApiError> {
    match state.status {
        Status::Cancelled => Err(ApiError::Cancelled),
        Status::Completed | Status::Failed => Err(ApiError::AlreadyUsed),
        _ if state.round != round => Err(ApiError::AlreadyUsed),
        Status::Running => Err(ApiError::InProgress),
        Status::Paused => Ok(()),
    }
}

/// Puts the client's results in the order of the pending calls; names every
/// missing, unknown or duplicate id.
pub fn order_results(
    pending: &PendingRound,
    results: Vec<ToolResult>,
) -> Result<Vec<CallResult>, ApiError> {
    let mut slots: Vec<Option<CallResult>> = vec![None; pending.calls.len()];
    let (mut unknown, mut duplicate) = (Vec::new(), Vec::new());
    for result in results {
        match pending.calls.iter().position(|c| c.id == result.call_id) {
            None => unknown.push(result.call_id),
            Some(index) if slots[index].is_some() => duplicate.push(result.call_id),
            Some(index) => slots[index] = Some(to_call_result(result)),
        }
    }
    let missing: Vec<&str> = pending
        .calls
        .iter()
        .zip(&slots)
        .filter(|(_, slot)| slot.is_none())
        .map(|(call, _)| call.id.as_str())
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "missing results for call ids: {}",
            missing.join(", ")
        ));
    }
    if !unknown.is_empty() {
        problems.push(format!("unknown call ids: {}", unknown.join(", ")));
    }
    if !duplicate.is_empty() {
        problems.push(format!(
            "duplicate results for call ids: {}",
            duplicate.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(ApiError::BadRequest(problems.join("; ")));
    }
    Ok(slots.into_iter().flatten().collect())
}

fn to_call_result(result: ToolResult) -> CallResult {
    if result.is_error {
        let message = result
            .error_message
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "tool call failed".into());
        CallResult::Error(message)
    } else {
        CallResult::Value(result.result.to_string())
    }
}
