//! Cancel: by a client request id of the key, also before the request it
//! names has come.

use crate::journal::ExecutionRecord;
use crate::quota::Item;
use crate::state::{
    EarlyCancel, ExecState, RequestLink, Status, early_cancel_key, request_key, state_key,
};

use super::error::ServiceError;
use super::messages::{CancelOutcome, Reply, cancelled_reply};
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
    ) -> Result<CancelOutcome, ServiceError> {
        let link = self
            .store
            .get(&request_key(owner, request_id))
            .map_err(ServiceError::store)?
            .and_then(|bytes| RequestLink::decode(&bytes));
        let Some(link) = link else {
            let early = EarlyCancel {
                until: now_secs() + EARLY_CANCEL_SECS,
            };
            self.store
                .put(&early_cancel_key(owner, request_id), &early.encode())
                .map_err(ServiceError::store)?;
            return Ok(CancelOutcome::Pending);
        };
        let id = link.execution;
        loop {
            let (bytes, state) = match self.load_state(&id, owner) {
                Ok(found) => found,
                Err(ServiceError::NotFound) => return Ok(CancelOutcome::Ended(Status::Cancelled)),
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
                .map_err(ServiceError::store)?;
            if swapped.is_ok() {
                let record_keys = self.forget_record(&id)?;
                let deletes = slices(&record_keys);
                self.store
                    .apply_batch(&[], &deletes)
                    .map_err(ServiceError::store)?;
                self.usage.remove(&Item::Execution(id));
                self.engine.kill(&id);
                self.durability
                    .durable()
                    .await
                    .map_err(ServiceError::store)?;
                metrics::counter!("baton_executions_cancelled_total").increment(1);
                return Ok(CancelOutcome::Cancelled);
            }
        }
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
        let record_keys = self.forget_record(&record.id)?;
        let deletes = slices(&record_keys);
        self.store
            .apply_batch(&[(&state_key(&record.id), &cancelled.encode())], &deletes)
            .map_err(ServiceError::store)?;
        self.usage.remove(&Item::Execution(record.id));
        self.engine.kill(&record.id);
        self.durability
            .durable()
            .await
            .map_err(ServiceError::store)?;
        metrics::counter!("baton_executions_cancelled_total").increment(1);
        Ok(cancelled_reply(&record))
    }
}
