//! What a step of the engine leads to: a pause persisted before its token
//! is handed out, or an end whose outcome replaces the record.
//!
//! Invariant: a pause's record and state are durable (group commit) before
//! the reply that carries its token exists.

use tracing::Instrument;

use crate::engine::Step;
use crate::failure::Failure;
use crate::journal::ExecutionRecord;
use crate::quota::Item;
use crate::state::{EndedOutcome, ExecState, Status, outcome_key, record_key, state_key};
use crate::timing::step;
use crate::workspace::FileMeta;

use super::error::ServiceError;
use super::messages::{Reply, cancelled_reply};
use super::{Service, now_secs};

/// What an execution now stores, for the key's usage.
struct Stored {
    id: [u8; 16],
    owner: [u8; 8],
    bytes: u64,
    expires_at: u64,
}

impl Service {
    /// Writes `puts` and deletes `deletes` in one batch, waits until it is
    /// durable, then counts the execution's new size for its key.
    async fn write_durably(
        &self,
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
        stored: Stored,
    ) -> Result<(), ServiceError> {
        step!("store_write")
            .in_scope(|| self.store.apply_batch(puts, deletes))
            .map_err(ServiceError::store)?;
        self.durability
            .durable()
            .instrument(step!("flush"))
            .await
            .map_err(ServiceError::store)?;
        self.usage.set(
            Item::Execution(stored.id),
            stored.owner,
            stored.bytes,
            stored.expires_at,
        );
        Ok(())
    }

    /// Persists the outcome of a step and makes the reply.
    pub(super) async fn settle(
        &self,
        mut record: ExecutionRecord,
        state: ExecState,
        step: Step,
    ) -> Result<Reply, ServiceError> {
        if self.is_cancelled(&record.id)? {
            self.engine.evict(&record.id);
            return Ok(cancelled_reply(&record));
        }
        match step {
            Step::Paused(calls) => {
                if record.round_count() > self.config.max_rounds {
                    self.engine.evict(&record.id);
                    let failure = Failure::TooManyRounds(self.config.max_rounds);
                    self.end(&record, &state, Some(failure), Vec::new()).await?;
                    return Err(ServiceError::TooManyRounds(self.config.max_rounds));
                }
                metrics::counter!("baton_rounds_total").increment(1);
                let record_bytes = step!("encode")
                    .in_scope(|| record.encode())
                    .map_err(|e| ServiceError::Corrupt(e.to_string()))?;
                if let Some(failure) = self.oversized(record_bytes.len()) {
                    self.engine.evict(&record.id);
                    return self.end(&record, &state, Some(failure), Vec::new()).await;
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
                    .map_err(ServiceError::from)?;
                self.end(&record, &state, None, files).await
            }
            Step::Failed(failure) => {
                metrics::counter!("baton_executions_failed_total", "kind" => failure.kind())
                    .increment(1);
                tracing::info!(execution = %record.id_hex(), kind = failure.kind(), "execution failed");
                if matches!(failure, Failure::NonDeterminism(_)) {
                    metrics::counter!("baton_nondeterminism_errors_total").increment(1);
                }
                self.end(&record, &state, Some(failure), Vec::new()).await
            }
        }
    }

    /// The failure of a record too large to store, if it is.
    fn oversized(&self, size: usize) -> Option<Failure> {
        let limit = self.config.max_record_bytes;
        (size > limit).then_some(Failure::RecordTooLarge { size, limit })
    }

    async fn persist_pause(
        &self,
        record: &ExecutionRecord,
        record_bytes: &[u8],
        state: &ExecState,
    ) -> Result<String, ServiceError> {
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
        self.write_durably(
            &[
                (&record_key(&record.id), record_bytes),
                (&state_key(&record.id), &state_bytes),
            ],
            &[],
            Stored {
                id: record.id,
                owner: state.owner,
                bytes: record_bytes.len() as u64,
                expires_at,
            },
        )
        .await?;
        Ok(self.keys.sign(record.id, round, state.owner, expires_at))
    }

    /// Ends an execution: its state says how, its outcome is kept in place
    /// of its record (in one batch, made durable), and the reply is that
    /// outcome.
    pub(super) async fn end(
        &self,
        record: &ExecutionRecord,
        state: &ExecState,
        failure: Option<Failure>,
        files: Vec<FileMeta>,
    ) -> Result<Reply, ServiceError> {
        let error = failure.map(|failure| failure.to_string());
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
        self.write_durably(
            &[
                (&state_key(&record.id), &ended.encode()),
                (&outcome_key(&record.id), &outcome_bytes),
            ],
            &[&record_key(&record.id)],
            Stored {
                id: record.id,
                owner: state.owner,
                bytes: outcome_bytes.len() as u64,
                expires_at: ended.expires_at,
            },
        )
        .await?;
        Ok(Reply::from_outcome(record.id_hex(), outcome))
    }
}
