//! Cancel: by a client request id of the key, also before the request it
//! names has come, or (for operators) by execution id. A cancelled
//! execution keeps, instead of its record, an outcome with what it printed
//! and the calls it made up to its last pause, for inspection.
//!
//! Invariants:
//! - The cancel is decided here, by one compare-and-swap of the state;
//!   the child is ended by the node that has it: this one at once, another
//!   one when it is told ([`Cancellation::held_at`]: the API forwards the
//!   cancel there) or, failing that, at its next upkeep.
//! - Cancelling a cancelled execution again ends this node's child of it,
//!   if any: that is how the node that held it hears of a cancel decided
//!   elsewhere.

use crate::failure::Failure;
use crate::journal::ExecutionRecord;
use crate::quota::Item;
use crate::state::{
    EarlyCancel, EndedOutcome, ExecState, RequestLink, Status, early_cancel_key, outcome_key,
    request_key, state_key,
};

use super::error::ServiceError;
use super::messages::{CancelOutcome, Cancellation, Reply, cancelled_reply};
use super::records::slices;
use super::{EARLY_CANCEL_SECS, Service, now_secs};

impl Service {
    /// Cancels the execution a client request id (of this key) started or
    /// continued. An id no request has carried yet is remembered for
    /// [`EARLY_CANCEL_SECS`] and cancels its request when it comes.
    pub async fn cancel(
        &self,
        owner: [u8; 8],
        request_id: &str,
    ) -> Result<Cancellation, ServiceError> {
        let link = self
            .store
            .get(&request_key(owner, request_id))
            .await
            .map_err(ServiceError::store)?
            .and_then(|bytes| RequestLink::decode(&bytes));
        let Some(link) = link else {
            let early = EarlyCancel {
                until: now_secs() + EARLY_CANCEL_SECS,
            };
            self.store
                .put(&early_cancel_key(owner, request_id), &early.encode())
                .await
                .map_err(ServiceError::store)?;
            return Ok(CancelOutcome::Pending.into());
        };
        match self.cancel_execution(owner, link.execution).await {
            // Swept since: it ended long ago, and a cancel is what the
            // client last asked for.
            Err(ServiceError::NotFound) => Ok(CancelOutcome::Ended(Status::Cancelled).into()),
            other => other,
        }
    }

    /// Cancels the execution `id` of this key, if it is running or paused.
    /// `NotFound` when the key has no such execution (any more).
    pub async fn cancel_execution(
        &self,
        owner: [u8; 8],
        id: [u8; 16],
    ) -> Result<Cancellation, ServiceError> {
        loop {
            let (bytes, state) = self.load_state(&id, owner).await?;
            match state.status {
                Status::Cancelled => {
                    // Decided before, perhaps on another node: this
                    // node's child of it, if any, ends now.
                    self.engine.kill(&id);
                    return Ok(CancelOutcome::Cancelled.into());
                }
                Status::Completed | Status::Failed => {
                    return Ok(CancelOutcome::Ended(state.status).into());
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
                .await
                .map_err(ServiceError::store)?;
            if swapped.is_ok() {
                // The record as of its last pause (a step in flight is
                // refused when it tries to store), or as stored when a
                // pause in flight wrote its parts already (they come
                // before its state); none if it cannot be read.
                let record = match self.record_for_round(&id, state.round).await {
                    Ok(record) => Some(record),
                    Err(ServiceError::AlreadyUsed) => self.load_record(&id).await.ok(),
                    Err(_) => None,
                };
                self.forget_cancelled(&id, &cancelled, None, record.as_ref())
                    .await?;
                return Ok(Cancellation {
                    outcome: CancelOutcome::Cancelled,
                    held_at: self.holder_address(&state).await,
                });
            }
        }
    }

    /// Replaces a cancelled execution's record by its outcome (what it
    /// printed and the calls it made; nothing when `record` is `None`),
    /// writing `state` too when given, in one batch; then kills its child
    /// and waits until the batch is durable.
    async fn forget_cancelled(
        &self,
        id: &[u8; 16],
        cancelled: &ExecState,
        state: Option<&[u8]>,
        record: Option<&ExecutionRecord>,
    ) -> Result<(), ServiceError> {
        let outcome = record.map(|record| {
            EndedOutcome::of(
                record,
                Some(&Failure::Cancelled),
                Vec::new(),
                Vec::new(),
                None,
            )
        });
        let outcome_bytes = outcome.as_ref().map(EndedOutcome::encode);
        let (state_key, outcome_key) = (state_key(id), outcome_key(id));
        let mut puts: Vec<(&[u8], &[u8])> = Vec::with_capacity(2);
        if let Some(state) = state {
            puts.push((&state_key, state));
        }
        if let Some(bytes) = &outcome_bytes {
            puts.push((&outcome_key, bytes));
        }
        let record_keys = self.forget_record(id).await?;
        self.store
            .apply_batch(&puts, &slices(&record_keys))
            .await
            .map_err(ServiceError::store)?;
        match &outcome_bytes {
            Some(bytes) => self.usage.set(
                Item::Execution(*id),
                cancelled.owner,
                bytes.len() as u64,
                cancelled.expires_at,
            ),
            None => self.usage.remove(&Item::Execution(*id)),
        }
        self.engine.kill(id);
        self.durability
            .durable()
            .await
            .map_err(ServiceError::store)?;
        metrics::counter!("baton_executions_cancelled_total").increment(1);
        Ok(())
    }

    /// Cancels an execution whose request came after its cancel.
    pub(super) async fn cancel_now(
        &self,
        record: ExecutionRecord,
        state: ExecState,
    ) -> Result<Reply, ServiceError> {
        let cancelled = ExecState {
            status: Status::Cancelled,
            expires_at: now_secs() + self.config.ended_ttl_secs,
            ..state
        };
        let state = cancelled.encode();
        self.forget_cancelled(&record.id, &cancelled, Some(&state), Some(&record))
            .await?;
        Ok(cancelled_reply(&record))
    }
}
