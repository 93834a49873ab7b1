//! The durable execution service: the protocol's start, continue, cancel and
//! inspect on top of the engine, the store and the tokens. What is stored,
//! and under which keys, is [`crate::state`]'s.
//!
//! Invariants:
//! - Before the response that carries a pause's token is sent, everything
//!   the pause follows from is flushed to disk (group commit): the start
//!   and every round's results, stored with the start or the claim and
//!   flushed while the code ran. The pause itself is written before the
//!   response and flushed with the next flush; one lost in a crash is
//!   reached again by running its round again by replay (`recovery`).
//! - A round is continued at most once: the continuation claims it by a
//!   compare-and-swap of the state from `Paused(round)` to `Running(round)`,
//!   after the results were validated (a bad request leaves it paused),
//!   then stores the results.
//! - A retried continuation (same token, same results) gets the answer that
//!   continuation led to, for as long as the execution is kept, after a
//!   restart too: the claim stores the results' digest with the state, and
//!   an ended execution keeps its outcome. Other results: 409.
//! - An execution of another API key answers exactly like a missing one; a
//!   request id is scoped to its key.
//! - States left `Running` by a dead node (a previous process, or another
//!   server sharing the store) are recovered: a round whose results are
//!   stored is run again by the first continuation that finds it (a retry,
//!   or the token of the pause it leads to); another goes back to `Paused`
//!   at start-up, with each sweep and when a continuation finds one. A
//!   live node's running round is never taken.

mod cancel;
mod continuation;
pub mod error;
mod inputs;
mod listing;
mod messages;
mod nodes;
mod records;
mod recovery;
mod request_ids;
mod runtime_sessions;
mod sessions;
mod settle;
mod start;
mod upkeep;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::engine::Engine;
use crate::quota::{Item, KeyUsage};
use crate::state::{EndedOutcome, ExecState, Status, outcome_key, state_key};
use crate::store::{Durability, Store, StoreError};
use crate::token::SigningKeys;
use crate::workspace::Files;

pub use continuation::{Continued, Routing, order_results};
pub use error::ServiceError;
pub use inputs::InputFile;
use listing::shown_status;
pub use listing::{ListQuery, Listed, Listing, MAX_PAGE};
pub use messages::{
    CancelOutcome, Cancellation, FileRef, Inspection, Reply, StartRequest, ToolResult,
};
pub use runtime_sessions::{
    RUNTIME_SESSIONS, RuntimeSessionInfo, RuntimeSessionLimits, RuntimeStatus,
};
pub use sessions::{
    CellTag, MAX_SESSION_CELLS, SessionInfo, SessionLimits, SessionStatus, parse_session_id,
};
pub use upkeep::Upkept;

/// How long a cancel that came before its request is remembered, seconds.
pub const EARLY_CANCEL_SECS: u64 = 60;

/// The run-time budget a request may ask for, milliseconds.
pub const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 1000..=300_000;

/// How long a round may run past the budget it has left (the watchdog's
/// grace and the reply), seconds, generously.
const ROUND_OVERRUN_SECS: u64 = 10;

/// What an upload under way has received, counted against its key's cap
/// beside what the key stores, so that uploads at once cannot together pass
/// it. Its files are counted as files once kept; the hold goes when it is
/// dropped, whatever became of the upload.
pub struct UploadHold {
    usage: Arc<KeyUsage>,
    item: Item,
    owner: [u8; 8],
}

impl UploadHold {
    /// Holds `received` bytes in all (413 when over the cap on its own,
    /// 429 when the key, with them, would be).
    pub fn grow(&self, received: u64) -> Result<(), ServiceError> {
        let now = now_secs();
        // The hold ends with its request: a minute is the retry to suggest.
        Ok(self
            .usage
            .hold(self.item.clone(), self.owner, received, now + 60, now)?)
    }
}

impl Drop for UploadHold {
    fn drop(&mut self) {
        self.usage.remove(&self.item);
    }
}

impl Service {
    /// When the state of a round of `record` claimed (or started) now
    /// expires: not before the token of the pause it leads to, handed out
    /// at most the budget `record` has left later (a round left by a dead
    /// node is swept at this time, so a client that still holds that token
    /// finds it until then).
    fn running_expires_at(&self, record: &crate::journal::ExecutionRecord) -> u64 {
        let budget_secs = record
            .timeout_ms
            .saturating_sub(record.used_ms)
            .div_ceil(1000);
        now_secs() + budget_secs + ROUND_OVERRUN_SECS + self.config.paused_ttl_secs
    }

    /// The state of a new execution of `owner` (whose `record` it becomes)
    /// while its first round runs on this node.
    fn first_round_running(
        &self,
        record: &mut crate::journal::ExecutionRecord,
        owner: [u8; 8],
    ) -> ExecState {
        record.owner = owner;
        ExecState {
            status: Status::Running,
            round: 0,
            owner,
            expires_at: self.running_expires_at(record),
            answered: None,
            node: self.store.node(),
        }
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
    /// Bytes one API key may store: its executions' records and outcomes
    /// and its session files.
    pub max_key_storage_bytes: u64,
    /// Bytes of records of recent pauses kept in memory.
    pub record_cache_bytes: u64,
    /// How long runtime sessions live.
    pub runtime_sessions: RuntimeSessionLimits,
    /// Python sessions' lifetimes and size.
    pub sessions: SessionLimits,
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
    /// The records of recent pauses, for hot continuations.
    records: records::RecordCache,
    /// What this node knows of the others (several nodes on one store).
    directory: nodes::NodeDirectory,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn now_millis() -> u64 {
    now_micros() / 1000
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
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
        let records = records::RecordCache::new(config.record_cache_bytes);
        Service {
            engine,
            files: Files::new(store.clone(), usage.clone(), config.file_ttl_secs),
            usage,
            store,
            durability,
            keys,
            config,
            in_flight: Mutex::new(HashSet::new()),
            records,
            directory: nodes::NodeDirectory::default(),
        }
    }

    /// Whether `owner` may store `incoming` more bytes: its executions and
    /// files within the per-key cap (429 with the delay until some of it
    /// expires; 413 when the request alone is over the cap).
    pub fn admit(&self, owner: [u8; 8], incoming: u64) -> Result<(), ServiceError> {
        Ok(self.usage.admit(owner, incoming, now_secs())?)
    }

    /// A hold on `owner`'s storage for an upload under way
    /// ([`UploadHold::grow`] as its bytes arrive); dropping it releases
    /// what it held.
    pub fn hold_upload(&self, owner: [u8; 8]) -> UploadHold {
        UploadHold {
            usage: self.usage.clone(),
            item: Item::Upload(rand::random()),
            owner,
        }
    }

    /// The bytes `owner` stores (its executions and session files).
    pub fn stored_bytes(&self, owner: [u8; 8]) -> u64 {
        self.usage.stored(owner)
    }

    /// Whether the database answers (for `/health`).
    pub async fn store_check(&self) -> Result<(), StoreError> {
        self.store.check().await
    }

    /// The engine (for metrics).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The session files.
    pub fn files(&self) -> &Files {
        &self.files
    }

    async fn load_outcome(&self, id: &[u8; 16]) -> Result<Option<EndedOutcome>, ServiceError> {
        match self
            .store
            .get(&outcome_key(id))
            .await
            .map_err(ServiceError::store)?
        {
            None => Ok(None),
            Some(bytes) => EndedOutcome::decode(&bytes)
                .map(Some)
                .ok_or_else(|| ServiceError::Corrupt("Execution outcome is corrupt".into())),
        }
    }

    async fn load_state(
        &self,
        id: &[u8; 16],
        owner: [u8; 8],
    ) -> Result<(Vec<u8>, ExecState), ServiceError> {
        let bytes = self
            .store
            .get(&state_key(id))
            .await
            .map_err(ServiceError::store)?
            .ok_or(ServiceError::NotFound)?;
        let state = ExecState::decode(&bytes)
            .ok_or_else(|| ServiceError::Corrupt("Execution state is corrupt".into()))?;
        if state.owner != owner {
            return Err(ServiceError::NotFound);
        }
        Ok((bytes, state))
    }

    /// What an operator sees of an execution.
    pub async fn inspect(&self, owner: [u8; 8], id_hex: &str) -> Result<Inspection, ServiceError> {
        let id = parse_execution_id(id_hex)?;
        let (_, state) = self.load_state(&id, owner).await?;
        let (record, outcome) = match state.status {
            Status::Paused | Status::Running => (Some(self.load_record(&id).await?), None),
            _ => (None, self.load_outcome(&id).await?),
        };
        Ok(Inspection {
            status: shown_status(&state, now_secs()),
            state,
            record,
            outcome,
        })
    }
}

/// An execution id from its hex; `NotFound` for anything else (an id that
/// cannot exist is an execution this key does not have).
pub fn parse_execution_id(id_hex: &str) -> Result<[u8; 16], ServiceError> {
    hex::decode(id_hex)
        .ok()
        .and_then(|bytes| <[u8; 16]>::try_from(bytes.as_slice()).ok())
        .ok_or(ServiceError::NotFound)
}
