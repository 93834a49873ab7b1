//! The durable execution service: the protocol's start, continue, cancel and
//! inspect on top of the engine, the store and the tokens. What is stored,
//! and under which keys, is [`crate::state`]'s.
//!
//! Invariants:
//! - A pause's record and state are flushed to disk (group commit) before
//!   the response that carries its token is sent.
//! - A round is continued at most once: the continuation claims it by a
//!   compare-and-swap of the state from `Paused(round)` to `Running(round)`,
//!   after the results were validated (a bad request leaves it paused).
//! - A retried continuation (same token, same results) gets the answer that
//!   continuation led to, for as long as the execution is kept, after a
//!   restart too: the claim stores the results' digest with the state, and
//!   an ended execution keeps its outcome. Other results: 409.
//! - An execution of another API key answers exactly like a missing one; a
//!   request id is scoped to its key.
//! - At start-up, states left `Running` by a dead server go back to
//!   `Paused`, so the last durable pause stays continuable.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::api::error::ApiError;
use crate::api::views::ExecutionView;
use crate::engine::{Engine, ExecutionSpec, ResumeKind, Step};
use crate::journal::{CallRecord, CallResult, ExecutionRecord, PendingRound, WorkspaceFile};
use crate::quota::{Item, KeyUsage, Refusal};
use crate::state::{
    Answered, EarlyCancel, EndedOutcome, ExecState, RequestLink, Status, early_cancel_key,
    id_of_state_key, outcome_key, record_key, request_key, results_digest, state_key,
};
use crate::store::{Durability, Store};
use crate::token::{SigningKeys, TokenError};
use crate::tools::ToolDef;
use crate::workspace::{FileMeta, Files, WorkspaceError};

/// How long a cancel that came before its request is remembered, seconds.
pub const EARLY_CANCEL_SECS: u64 = 60;

/// How often a retried continuation looks whether the original is done.
const RETRY_POLL: Duration = Duration::from_millis(10);

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
    /// Bytes one API key may store: its executions' records and outcomes
    /// and its session files.
    pub max_key_storage_bytes: u64,
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
    /// Command-line arguments (`sys.argv[1:]`).
    pub argv: Vec<String>,
}

/// A start request's reference to a session file.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
pub struct FileRef {
    /// The file id.
    pub id: String,
    /// The name to give it under `/mnt/data` (the stored name when absent).
    #[serde(default)]
    pub name: Option<String>,
    /// Its session (the execution's when absent). LibreChat's client calls
    /// it `storage_session_id`.
    #[serde(default, alias = "storage_session_id")]
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
        /// Names of the request's files the code removed (when completed).
        deleted_files: Vec<String>,
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
    /// [`EARLY_CANCEL_SECS`] is cancelled on arrival.
    Pending,
}

/// The service.
pub struct Service {
    engine: Arc<Engine>,
    store: Arc<dyn Store>,
    files: Files,
    usage: Arc<KeyUsage>,
    durability: Durability,
    keys: SigningKeys,
    config: ServiceConfig,
    /// Request-id keys of the requests being served now.
    in_flight: Mutex<HashSet<Vec<u8>>>,
}

/// A client request id marked in flight; unmarked when dropped.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<Vec<u8>>>,
    key: Vec<u8>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.key);
        }
    }
}

/// What the service knows of a request's client request id.
struct RequestId<'a> {
    /// The id, when the request carried one.
    id: Option<&'a str>,
    /// Keeps it marked in flight while the request is served.
    _in_flight: Option<InFlight<'a>>,
    /// Whether a cancel for it came first.
    cancelled_early: bool,
}

/// The digest of a continuation's results as the client sent them, and
/// their size in bytes (what they will add to the record).
fn digest_of(results: &[ToolResult]) -> ([u8; 32], u64) {
    let mut size = 0u64;
    let digest = results_digest(results.iter().map(|r| {
        let result = r.result.to_string();
        size += (result.len() + r.error_message.as_ref().map_or(0, String::len)) as u64;
        (
            r.call_id.as_str(),
            r.is_error,
            result,
            r.error_message.as_deref(),
        )
    }));
    (digest, size)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
        let usage = Arc::new(KeyUsage::new(config.max_key_storage_bytes));
        Service {
            engine,
            files: Files::new(store.clone(), usage.clone(), config.file_ttl_secs),
            usage,
            store,
            durability,
            keys,
            config,
            in_flight: Mutex::new(HashSet::new()),
        }
    }

    /// Marks the request's client id in flight (a second request with the
    /// same id while the first is served: 409) and takes a cancel that came
    /// before it.
    fn begin_request<'a>(
        &'a self,
        owner: [u8; 8],
        request_id: Option<&'a str>,
    ) -> Result<RequestId<'a>, ApiError> {
        let Some(id) = request_id.filter(|r| !r.is_empty()) else {
            return Ok(RequestId {
                id: None,
                _in_flight: None,
                cancelled_early: false,
            });
        };
        let key = request_key(owner, id);
        let fresh = self
            .in_flight
            .lock()
            .map_err(|_| ApiError::Internal("the request table is poisoned".into()))?
            .insert(key.clone());
        if !fresh {
            return Err(ApiError::RequestInFlight);
        }
        let guard = InFlight {
            set: &self.in_flight,
            key,
        };
        let early = early_cancel_key(owner, id);
        let cancelled_early = match self.store.get(&early).map_err(store_error)? {
            Some(bytes) => {
                self.store.delete(&early).map_err(store_error)?;
                EarlyCancel::decode(&bytes).is_some_and(|c| c.until >= now_secs())
            }
            None => false,
        };
        Ok(RequestId {
            id: Some(id),
            _in_flight: Some(guard),
            cancelled_early,
        })
    }

    /// Links a client request id to the execution it starts or continues.
    fn link_request(
        &self,
        owner: [u8; 8],
        request: &RequestId<'_>,
        execution: [u8; 16],
    ) -> Result<(), ApiError> {
        let Some(id) = request.id else {
            return Ok(());
        };
        let link = RequestLink {
            execution,
            expires_at: now_secs() + self.config.paused_ttl_secs + self.config.ended_ttl_secs,
        };
        self.store
            .put(&request_key(owner, id), &link.encode())
            .map_err(store_error)
    }

    /// Whether `owner` may store `incoming` more bytes: its executions and
    /// files within the per-key cap (429 with the delay until some of it
    /// expires; 413 when the request alone is over the cap).
    pub fn admit(&self, owner: [u8; 8], incoming: u64) -> Result<(), ApiError> {
        self.usage
            .admit(owner, incoming, now_secs())
            .map_err(|refusal| match refusal {
                Refusal::Full { retry_after, .. } => ApiError::StorageFull {
                    retry_after,
                    message: refusal.to_string(),
                },
                Refusal::TooLarge { .. } => ApiError::StorageTooLarge(refusal.to_string()),
            })
    }

    /// The bytes `owner` stores (its executions and session files).
    pub fn stored_bytes(&self, owner: [u8; 8]) -> u64 {
        self.usage.stored(owner)
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
        let request_id = self.begin_request(owner, request.request_id.as_deref())?;
        let session_id = request
            .session_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("sess_{}", hex::encode(rand::random::<[u8; 12]>())));
        crate::workspace::check_session(&session_id).map_err(workspace_error)?;
        self.admit(owner, request.code.len() as u64)?;
        let files = self.workspace(owner, &session_id, &request.files)?;
        let spec = ExecutionSpec {
            source: request.code,
            tools: request.tools,
            timeout_ms: request.timeout_ms,
            session_id,
            seed: None,
            files,
            argv: request.argv,
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
            answered: None,
        };
        self.store
            .put(&state_key(&record.id), &state.encode())
            .map_err(store_error)?;
        self.link_request(owner, &request_id, record.id)?;
        if request_id.cancelled_early {
            return self.cancel_now(record, state).await;
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

    /// Continues a paused execution with the client's results; a retry of a
    /// continuation already made gets that continuation's answer.
    pub async fn continue_with(
        &self,
        owner: [u8; 8],
        token: &str,
        results: Vec<ToolResult>,
        request_id: Option<&str>,
    ) -> Result<Reply, ApiError> {
        let claims = self.keys.verify(token, now_secs()).map_err(|e| match e {
            TokenError::Expired => ApiError::Expired,
            _ => ApiError::InvalidToken,
        })?;
        if claims.key_identity != owner {
            return Err(ApiError::InvalidToken);
        }
        let id = claims.execution_id;
        let (digest, incoming) = digest_of(&results);
        let request_id = self.begin_request(owner, request_id)?;
        let (state_bytes, state) = self.load_state(&id, owner)?;
        self.link_request(owner, &request_id, id)?;
        if let Err(refused) = check_claimable(&state, claims.round) {
            return self
                .answer_retry(&id, owner, claims.round, digest, refused)
                .await;
        }
        self.admit(owner, incoming)?;
        let mut record = self.load_record(&id)?;
        if request_id.cancelled_early {
            return self.cancel_now(record, state).await;
        }
        let pending = record.pending.as_ref().ok_or(ApiError::AlreadyUsed)?;
        let ordered = order_results(pending, results)?;
        let running = ExecState {
            status: Status::Running,
            answered: Some(Answered {
                round: claims.round,
                digest,
            }),
            ..state.clone()
        };
        if let Err(refused) = self.claim(&id, &state_bytes, &running, claims.round) {
            return self
                .answer_retry(&id, owner, claims.round, digest, refused)
                .await;
        }
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

    /// The answer to a continuation of `round` that cannot claim it: when
    /// it repeats the continuation that claimed it (same results), the
    /// answer that continuation led to (waiting for it while it runs);
    /// otherwise `refused`.
    async fn answer_retry(
        &self,
        id: &[u8; 16],
        owner: [u8; 8],
        round: u32,
        digest: [u8; 32],
        refused: ApiError,
    ) -> Result<Reply, ApiError> {
        let this = Some(Answered { round, digest });
        let give_up = std::time::Instant::now()
            + Duration::from_millis(*crate::api::request::TIMEOUT_RANGE_MS.end())
            + Duration::from_secs(10);
        loop {
            let (_, state) = self.load_state(id, owner)?;
            if state.answered != this {
                return Err(refused);
            }
            match state.status {
                Status::Running if std::time::Instant::now() < give_up => {
                    tokio::time::sleep(RETRY_POLL).await;
                }
                Status::Running => return Err(ApiError::InProgress),
                Status::Paused => {
                    let record = self.load_record(id)?;
                    let calls = record
                        .pending
                        .as_ref()
                        .map(|p| p.calls.clone())
                        .ok_or(ApiError::AlreadyUsed)?;
                    let token = self.keys.sign(*id, state.round, owner, state.expires_at);
                    metrics::counter!("baton_retried_continuations_total").increment(1);
                    return Ok(Reply::Paused {
                        execution_id: record.id_hex(),
                        session_id: record.session_id,
                        token,
                        calls,
                    });
                }
                Status::Cancelled => return Err(ApiError::Cancelled),
                Status::Completed | Status::Failed => {
                    let outcome = self.load_outcome(id)?.ok_or(refused)?;
                    metrics::counter!("baton_retried_continuations_total").increment(1);
                    return Ok(Reply::from_outcome(hex::encode(id), outcome));
                }
            }
        }
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
            return Ok(cancelled_reply(&record));
        }
        match step {
            Step::Paused(calls) => {
                if record.round_count() > self.config.max_rounds {
                    self.engine.evict(&record.id);
                    let error = ApiError::TooManyRounds(self.config.max_rounds);
                    self.end(&record, &state, Some(error.to_string()), Vec::new())
                        .await?;
                    return Err(error);
                }
                metrics::counter!("baton_rounds_total").increment(1);
                let record_bytes = record.encode();
                if let Some(error) = self.oversized(record_bytes.len()) {
                    self.engine.evict(&record.id);
                    return self.end(&record, &state, Some(error), Vec::new()).await;
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
                self.end(&record, &state, None, files).await
            }
            Step::Failed(error) => {
                metrics::counter!("baton_executions_failed_total").increment(1);
                if error.starts_with("Non-deterministic") {
                    metrics::counter!("baton_nondeterminism_errors_total").increment(1);
                }
                self.end(&record, &state, Some(error), Vec::new()).await
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
            answered: state.answered,
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
        self.usage.set(
            Item::Execution(record.id),
            state.owner,
            record_bytes.len() as u64,
            expires_at,
        );
        Ok(self.keys.sign(record.id, round, state.owner, expires_at))
    }

    /// Ends an execution: its state says how, its outcome is kept in place
    /// of its record (in one batch, made durable), and the reply is that
    /// outcome.
    async fn end(
        &self,
        record: &ExecutionRecord,
        state: &ExecState,
        error: Option<String>,
        files: Vec<FileMeta>,
    ) -> Result<Reply, ApiError> {
        let deleted = if error.is_none() {
            record.removed.clone()
        } else {
            Vec::new()
        };
        let ended = ExecState {
            status: if error.is_none() {
                Status::Completed
            } else {
                Status::Failed
            },
            round: record.round_count() as u32,
            owner: state.owner,
            expires_at: now_secs() + self.config.ended_ttl_secs,
            answered: state.answered,
        };
        let outcome = EndedOutcome {
            error,
            stdout: record.stdout.clone(),
            stderr: record.stderr.clone(),
            files,
            deleted,
            session_id: record.session_id.clone(),
        };
        let outcome_bytes = outcome.encode();
        self.store
            .apply_batch(
                &[
                    (&state_key(&record.id), &ended.encode()),
                    (&outcome_key(&record.id), &outcome_bytes),
                ],
                &[&record_key(&record.id)],
            )
            .map_err(store_error)?;
        self.durability.durable().await.map_err(store_error)?;
        self.usage.set(
            Item::Execution(record.id),
            state.owner,
            outcome_bytes.len() as u64,
            ended.expires_at,
        );
        Ok(Reply::from_outcome(record.id_hex(), outcome))
    }

    fn load_outcome(&self, id: &[u8; 16]) -> Result<Option<EndedOutcome>, ApiError> {
        match self.store.get(&outcome_key(id)).map_err(store_error)? {
            None => Ok(None),
            Some(bytes) => EndedOutcome::decode(&bytes)
                .map(Some)
                .ok_or_else(|| ApiError::Corrupt("Execution outcome is corrupt".into())),
        }
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

    /// Cancels the execution a client request id (of this key) started or
    /// continued. An id no request has carried yet is remembered for
    /// [`EARLY_CANCEL_SECS`] and cancels its request when it comes.
    pub async fn cancel(
        &self,
        owner: [u8; 8],
        request_id: &str,
    ) -> Result<CancelOutcome, ApiError> {
        let link = self
            .store
            .get(&request_key(owner, request_id))
            .map_err(store_error)?
            .and_then(|bytes| RequestLink::decode(&bytes));
        let Some(link) = link else {
            let early = EarlyCancel {
                until: now_secs() + EARLY_CANCEL_SECS,
            };
            self.store
                .put(&early_cancel_key(owner, request_id), &early.encode())
                .map_err(store_error)?;
            return Ok(CancelOutcome::Pending);
        };
        let id = link.execution;
        loop {
            let (bytes, state) = match self.load_state(&id, owner) {
                Ok(found) => found,
                Err(ApiError::NotFound) => return Ok(CancelOutcome::Ended(Status::Cancelled)),
                Err(other) => return Err(other),
            };
            match state.status {
                Status::Cancelled => return Ok(CancelOutcome::Cancelled),
                Status::Completed | Status::Failed => {
                    return Ok(CancelOutcome::Ended(state.status));
                }
                Status::Running | Status::Paused => {}
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
                self.usage.remove(&Item::Execution(id));
                self.engine.kill(&id);
                self.durability.durable().await.map_err(store_error)?;
                metrics::counter!("baton_executions_cancelled_total").increment(1);
                return Ok(CancelOutcome::Cancelled);
            }
        }
    }

    /// Cancels an execution whose request came after its cancel.
    async fn cancel_now(
        &self,
        record: ExecutionRecord,
        state: ExecState,
    ) -> Result<Reply, ApiError> {
        let cancelled = ExecState {
            status: Status::Cancelled,
            expires_at: now_secs() + self.config.ended_ttl_secs,
            ..state
        };
        self.store
            .apply_batch(
                &[(&state_key(&record.id), &cancelled.encode())],
                &[&record_key(&record.id)],
            )
            .map_err(store_error)?;
        self.usage.remove(&Item::Execution(record.id));
        self.engine.kill(&record.id);
        self.durability.durable().await.map_err(store_error)?;
        metrics::counter!("baton_executions_cancelled_total").increment(1);
        Ok(cancelled_reply(&record))
    }

    /// What an operator sees of an execution.
    pub fn inspect(&self, owner: [u8; 8], id_hex: &str) -> Result<ExecutionView, ApiError> {
        let id = hex::decode(id_hex)
            .ok()
            .and_then(|bytes| <[u8; 16]>::try_from(bytes.as_slice()).ok())
            .ok_or(ApiError::NotFound)?;
        let (_, state) = self.load_state(&id, owner)?;
        let (record, outcome) = match state.status {
            Status::Paused | Status::Running => (Some(self.load_record(&id)?), None),
            _ => (None, self.load_outcome(&id)?),
        };
        Ok(ExecutionView::new(
            id_hex,
            &state,
            record.as_ref(),
            outcome.as_ref(),
        ))
    }

    /// At start-up: rounds left running by a dead server become paused again.
    pub fn recover(&self) -> Result<usize, ApiError> {
        let mut recovered = 0;
        for pair in self.store.scan_prefix(b"s/") {
            let (key, bytes) = pair.map_err(store_error)?;
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

    /// At start-up: counts what each key stores (its executions' records
    /// and outcomes, its files), reading sizes, not contents.
    pub fn count_usage(&self) -> Result<(), ApiError> {
        let mut owners = std::collections::HashMap::new();
        for pair in self.store.scan_prefix(b"s/") {
            let (key, bytes) = pair.map_err(store_error)?;
            if let (Some(id), Some(state)) = (id_of_state_key(&key), ExecState::decode(&bytes)) {
                owners.insert(id, (state.owner, state.expires_at));
            }
        }
        for prefix in [b"r/", b"o/"] {
            for head in self.store.scan_heads(prefix, 0) {
                let head = head.map_err(store_error)?;
                let id = head
                    .key
                    .get(2..)
                    .and_then(|id| <[u8; 16]>::try_from(id).ok());
                if let Some((id, (owner, expires_at))) =
                    id.and_then(|id| owners.get(&id).map(|o| (id, *o)))
                {
                    self.usage
                        .set(Item::Execution(id), owner, head.len, expires_at);
                }
            }
        }
        self.files.count_usage().map_err(workspace_error)
    }

    /// Deletes session files past their lifetime; returns how many.
    pub fn sweep_files(&self, now: u64) -> Result<usize, ApiError> {
        self.files
            .sweep(now.saturating_sub(self.config.file_ttl_secs))
            .map_err(workspace_error)
    }

    /// Deletes expired executions, request-id links and early cancels;
    /// returns how many executions.
    pub fn sweep(&self, now: u64) -> Result<usize, ApiError> {
        let mut swept = 0;
        for pair in self.store.scan_prefix(b"s/") {
            let (key, bytes) = pair.map_err(store_error)?;
            let expired = ExecState::decode(&bytes)
                .is_none_or(|s| s.expires_at <= now && s.status != Status::Running);
            let Some(id) = id_of_state_key(&key).filter(|_| expired) else {
                continue;
            };
            self.engine.evict(&id);
            self.store
                .apply_batch(&[], &[&key, &record_key(&id), &outcome_key(&id)])
                .map_err(store_error)?;
            self.usage.remove(&Item::Execution(id));
            swept += 1;
        }
        self.sweep_prefix(b"q/", |bytes| {
            RequestLink::decode(bytes).is_none_or(|link| link.expires_at <= now)
        })?;
        self.sweep_prefix(b"c/", |bytes| {
            EarlyCancel::decode(bytes).is_none_or(|early| early.until <= now)
        })?;
        // The deletions' large values are reclaimed once they are durable.
        self.store.flush().map_err(store_error)?;
        Ok(swept)
    }

    /// Deletes the keys under `prefix` whose value `expired` says so.
    fn sweep_prefix(&self, prefix: &[u8], expired: impl Fn(&[u8]) -> bool) -> Result<(), ApiError> {
        for pair in self.store.scan_prefix(prefix) {
            let (key, bytes) = pair.map_err(store_error)?;
            if expired(&bytes) {
                self.store.delete(&key).map_err(store_error)?;
            }
        }
        Ok(())
    }
}

impl Reply {
    /// The reply of an ended execution.
    fn from_outcome(execution_id: String, outcome: EndedOutcome) -> Reply {
        Reply::Ended {
            execution_id,
            session_id: outcome.session_id,
            error: outcome.error,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            files: outcome.files,
            deleted_files: outcome.deleted,
        }
    }
}

/// The reply to a request whose execution was cancelled.
fn cancelled_reply(record: &ExecutionRecord) -> Reply {
    Reply::Ended {
        execution_id: record.id_hex(),
        session_id: record.session_id.clone(),
        error: Some(ApiError::Cancelled.to_string()),
        stdout: record.stdout.clone(),
        stderr: record.stderr.clone(),
        files: Vec::new(),
        deleted_files: Vec::new(),
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
