//! A key's executions, newest first, in pages: the per-key index written
//! with each execution's first state (`x/` keys, see [`crate::state`]),
//! read against the executions' current states.
//!
//! Invariants:
//! - A listing shows only the caller's executions: it scans the caller's
//!   own index prefix, and each entry's state must name the caller.
//! - An entry whose state is gone (swept) is skipped, and removed by the
//!   next sweep; executions started by builds before the index are not
//!   listed (they are still inspectable by id).
//! - A cursor is the index position of the last execution returned: the
//!   next page starts after it, whatever was started or swept meanwhile.

use crate::state::{ExecState, Status, listing_prefix, parse_listing_key, state_key};

use super::error::ServiceError;
use super::{Service, now_secs};

/// The most executions one page may hold.
pub const MAX_PAGE: usize = 500;

/// What a listing asks for.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    /// Only executions with this status (`running`, `paused`, `expired`,
    /// `completed`, `failed`, `cancelled`).
    pub status: Option<String>,
    /// At most this many (1 to [`MAX_PAGE`]).
    pub limit: usize,
    /// Start after this position (a previous page's `next_cursor`).
    pub cursor: Option<String>,
}

/// One execution of a listing.
#[derive(Clone, Debug)]
pub struct Listed {
    /// Execution id (hex).
    pub execution_id: String,
    /// Its state now.
    pub state: ExecState,
    /// Its status as shown (`expired` for a pause past its time).
    pub status: &'static str,
    /// When it started, Unix microseconds.
    pub started_us: u64,
}

/// A page of a listing.
#[derive(Clone, Debug)]
pub struct Listing {
    /// The executions, newest first.
    pub executions: Vec<Listed>,
    /// Where the next page starts, when there may be one.
    pub next_cursor: Option<String>,
}

/// The status an execution shows: `expired` for a pause past its time.
pub(super) fn shown_status(state: &ExecState, now: u64) -> &'static str {
    if state.status == Status::Paused && state.expires_at <= now {
        "expired"
    } else {
        state.status.name()
    }
}

const STATUSES: [&str; 6] = [
    "running",
    "paused",
    "expired",
    "completed",
    "failed",
    "cancelled",
];

impl Service {
    /// A page of `owner`'s executions, newest first.
    pub async fn list(&self, owner: [u8; 8], query: &ListQuery) -> Result<Listing, ServiceError> {
        if let Some(status) = query.status.as_deref()
            && !STATUSES.contains(&status)
        {
            return Err(ServiceError::Invalid(format!(
                "status must be one of {}",
                STATUSES.join(", ")
            )));
        }
        if !(1..=MAX_PAGE).contains(&query.limit) {
            return Err(ServiceError::Invalid(format!(
                "limit must be from 1 to {MAX_PAGE}"
            )));
        }
        let prefix = listing_prefix(&owner);
        let after = query
            .cursor
            .as_deref()
            .map(|cursor| cursor_key(&prefix, cursor))
            .transpose()?;
        let now = now_secs();
        let mut executions = Vec::new();
        let mut next_cursor = None;
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), &prefix);
        while let Some(pair) = scan.next().await {
            let (key, _) = pair.map_err(ServiceError::store)?;
            if after.as_ref().is_some_and(|after| key <= *after) {
                continue;
            }
            let Some((started_us, id)) = parse_listing_key(&key) else {
                continue;
            };
            let Some(state) = self.listed_state(&id, owner).await? else {
                continue;
            };
            let status = shown_status(&state, now);
            if query
                .status
                .as_deref()
                .is_some_and(|wanted| wanted != status)
            {
                continue;
            }
            if executions.len() == query.limit {
                next_cursor = executions.last().map(|last: &Listed| cursor_of(last));
                break;
            }
            executions.push(Listed {
                execution_id: hex::encode(id),
                state,
                status,
                started_us,
            });
        }
        Ok(Listing {
            executions,
            next_cursor,
        })
    }

    /// The state of a listed execution, if it is still kept and `owner`'s.
    async fn listed_state(
        &self,
        id: &[u8; 16],
        owner: [u8; 8],
    ) -> Result<Option<ExecState>, ServiceError> {
        let bytes = self
            .store
            .get(&state_key(id))
            .await
            .map_err(ServiceError::store)?;
        Ok(bytes
            .as_deref()
            .and_then(ExecState::decode)
            .filter(|state| state.owner == owner))
    }

    /// Whether the index entry `key` names an execution that is gone.
    pub(super) async fn listing_is_stale(&self, key: &[u8]) -> Result<bool, ServiceError> {
        match parse_listing_key(key) {
            Some((_, id)) => Ok(self
                .store
                .get(&state_key(&id))
                .await
                .map_err(ServiceError::store)?
                .is_none()),
            None => Ok(true),
        }
    }
}

/// The cursor after `listed`: its index position (inverted start time and
/// id), in hex.
fn cursor_of(listed: &Listed) -> String {
    format!(
        "{:016x}{}",
        u64::MAX - listed.started_us,
        listed.execution_id
    )
}

/// The index key a cursor names, under `prefix`.
fn cursor_key(prefix: &[u8], cursor: &str) -> Result<Vec<u8>, ServiceError> {
    let bytes = hex::decode(cursor)
        .ok()
        .filter(|b| b.len() == 24)
        .ok_or_else(|| ServiceError::Invalid("cursor is not one this server gave".into()))?;
    Ok([prefix, &bytes].concat())
}
