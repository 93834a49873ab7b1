//! What a step of the engine leads to: a pause whose token is handed out
//! once what it follows from is durable, or an end whose outcome replaces
//! the record.
//!
//! Invariants:
//! - A pause's token exists only once everything the pause follows from
//!   is durable: the execution's start and the results of every round up
//!   to this one. Those were written with the start or with the claim of
//!   the round, and their flush ran while the code ran ([`Flushing`]); the
//!   reply waits for it. The pause itself (its pending calls and state) is
//!   written before the reply and made durable by the next flush: a crash
//!   that loses it leaves the round claimed with its results stored, and
//!   the round is run again by replay (`roll_forward`), to the same pause.
//! - What a step stores is guarded by the `running` state its request
//!   set: a cancel that came while the code ran (it changed the state)
//!   wins. An end's outcome is one batch, and stores nothing then. A
//!   pause writes its parts, then swaps its state from `running` to
//!   `paused` (no transaction: [`crate::store::Store::put_then_swap`]);
//!   after a cancel the swap fails and the parts it wrote are deleted with
//!   the cancelled record's (`forget_parts_after_cancel`). A crash between
//!   the two leaves the round running with the pause's parts stored: the
//!   execution recovers as paused there (`recovery.rs`).
//! - An end is written (one atomic batch) before its reply. One that
//!   produced or removed files is durable before its reply too (the client
//!   will fetch the files it names); any other is flushed right after its
//!   reply, without the reply waiting: a crash in between loses only that
//!   end, and the round that led to it is run again when the execution is
//!   next continued. A session's cell's end is always durable before its
//!   reply, with its journal in the same batch when it ended by itself;
//!   then its session lists it (`sessions.rs`).

use tracing::Instrument;

use crate::engine::Step;
use crate::failure::Failure;
use crate::journal::{ExecutionRecord, NewParts, history};
use crate::quota::{Item, Refusal};
use crate::state::{EndedOutcome, ExecState, Status, outcome_key, state_key};
use crate::store::Flushing;
use crate::timing::step;
use crate::workspace::FileMeta;

use super::error::ServiceError;
use super::messages::{Reply, cancelled_reply};
use super::records::{borrowed, part_writes, slices};
use super::{Service, now_millis, now_secs};

/// What was done for a step before its code ran.
pub(super) enum Claimed {
    /// What the step follows from (the start, or the round's results) was
    /// stored, and its flush begun: a pause's reply waits for it.
    Flushing(Flushing),
    /// Nothing was stored to replay from (a start without tools): a pause
    /// is flushed itself.
    Nothing,
    /// The step runs a round again after its node died: its claim is
    /// durable, and when the pause it leads to was first made is not known
    /// (the call history shows no time for that round).
    RunAgain,
}

/// When a write must be on disk.
enum Flush {
    /// Before the reply (an end that names files; a pause without a
    /// claim's flush).
    BeforeReply,
    /// A pause: with the next flush, but the reply waits for the flush of
    /// what it follows from, begun by its claim or start.
    Begun(Flushing),
    /// Right after the reply (an end; see the module doc).
    AfterReply,
}

/// What a step writes, guarded by the `running` state its request set.
enum Writes<'a> {
    /// A pause: its parts, then its state swapped from running to `state`
    /// (a failed swap leaves the parts: the cancel's caller deletes them).
    Pause {
        parts: &'a [(&'a [u8], &'a [u8])],
        state: &'a [u8],
    },
    /// An end: puts and deletes in one atomic batch.
    End {
        puts: &'a [(&'a [u8], &'a [u8])],
        deletes: &'a [&'a [u8]],
    },
}

/// What an execution now stores, for the key's usage.
struct Stored {
    id: [u8; 16],
    owner: [u8; 8],
    bytes: u64,
    expires_at: u64,
}

impl Service {
    /// Writes `writes` if the execution's state is still `running` (else
    /// `Cancelled`: a cancel came while it ran), has them flushed (`flush`
    /// says whether before returning), then counts the execution's new
    /// size for its key.
    async fn write_batch(
        &self,
        running: &ExecState,
        writes: Writes<'_>,
        flush: Flush,
        stored: Stored,
    ) -> Result<(), ServiceError> {
        let guard_key = state_key(&stored.id);
        let guard_value = running.encode();
        let began = std::time::Instant::now();
        let written = match writes {
            Writes::Pause { parts, state } => {
                self.store
                    .put_then_swap(parts, &guard_key, &guard_value, state)
                    .instrument(step!("store_write"))
                    .await
            }
            Writes::End { puts, deletes } => {
                self.store
                    .apply_batch_if((&guard_key, &guard_value), puts, deletes)
                    .instrument(step!("store_write"))
                    .await
            }
        };
        written
            .map_err(ServiceError::store)?
            .map_err(|_changed| ServiceError::Cancelled)?;
        let flushed = match flush {
            Flush::BeforeReply => Some(self.durability.durable().instrument(step!("flush")).await),
            Flush::Begun(claim) => Some(claim.wait().instrument(step!("flush")).await),
            Flush::AfterReply => {
                self.durability.soon();
                None
            }
        };
        if let Some(flushed) = flushed {
            flushed.map_err(ServiceError::store)?;
            metrics::histogram!("baton_pause_durable_seconds")
                .record(began.elapsed().as_secs_f64());
        }
        self.usage.set(
            Item::Execution(stored.id),
            stored.owner,
            stored.bytes,
            stored.expires_at,
        );
        Ok(())
    }

    /// Persists the outcome of a step and makes the reply; an execution
    /// cancelled while it ran (its state is no longer `running`) stores
    /// nothing and answers cancelled.
    /// `claimed` says what was stored before the code ran (see
    /// [`Claimed`]).
    pub(super) async fn settle(
        &self,
        mut record: ExecutionRecord,
        running: ExecState,
        step: Step,
        claim: Claimed,
    ) -> Result<Reply, ServiceError> {
        match self.settle_step(&mut record, running, step, claim).await {
            Ok(reply @ Reply::Paused { .. }) => {
                self.records.put(record);
                Ok(reply)
            }
            Ok(reply) => Ok(reply),
            Err(ServiceError::Cancelled) => {
                self.engine.evict(&record.id);
                self.forget_parts_after_cancel(&record).await;
                Ok(cancelled_reply(&record))
            }
            Err(other) => Err(other),
        }
    }

    /// Deletes the parts of the record of an execution cancelled while its
    /// step ran, if it is cancelled: a claim writes its round's parts after
    /// its state, so a cancel between the two may have deleted the record
    /// before they came. A failure is logged (the sweep deletes them with
    /// the execution).
    async fn forget_parts_after_cancel(&self, record: &ExecutionRecord) {
        let cancelled = self
            .store
            .get(&state_key(&record.id))
            .await
            .ok()
            .flatten()
            .and_then(|bytes| ExecState::decode(&bytes))
            .is_some_and(|state| state.status == Status::Cancelled);
        if !cancelled {
            return;
        }
        let keys = self.forget_parts_of(record);
        if let Err(error) = self.store.apply_batch(&[], &slices(&keys)).await {
            tracing::warn!(execution = %record.id_hex(), %error, "parts of a cancelled execution not deleted");
        }
    }

    /// [`Service::settle`]'s work: what to store, and the reply (a paused
    /// reply means the record was stored at that pause).
    async fn settle_step(
        &self,
        record: &mut ExecutionRecord,
        state: ExecState,
        step: Step,
        claim: Claimed,
    ) -> Result<Reply, ServiceError> {
        match step {
            Step::Paused(calls) => {
                if record.round_count() > self.config.max_rounds {
                    self.engine.evict(&record.id);
                    let failure = Failure::TooManyRounds(self.config.max_rounds);
                    self.end(record, &state, Some(failure), Vec::new()).await?;
                    return Err(ServiceError::TooManyRounds(self.config.max_rounds));
                }
                metrics::counter!("baton_rounds_total").increment(1);
                let pending_round = record.rounds.len();
                let paused_at = match claim {
                    Claimed::RunAgain => 0,
                    _ => now_millis(),
                };
                record.round_times.paused(pending_round, paused_at);
                let parts = step!("encode")
                    .in_scope(|| record.new_parts())
                    .map_err(|e| ServiceError::Corrupt(e.to_string()))?;
                let stored_bytes = parts.total_bytes(&record.stored);
                if let Some(failure) = self.oversized(stored_bytes) {
                    self.engine.evict(&record.id);
                    return self.end(record, &state, Some(failure), Vec::new()).await;
                }
                if let Err(refusal) = self.reserve_pause(record, &state, stored_bytes) {
                    metrics::counter!("baton_pauses_refused_for_storage_total").increment(1);
                    self.engine.evict(&record.id);
                    if let Refusal::TooLarge { incoming, cap } = refusal {
                        // It can never be stored under this cap.
                        let size = usize::try_from(incoming).unwrap_or(usize::MAX);
                        let limit = usize::try_from(cap).unwrap_or(usize::MAX);
                        let failure = Failure::RecordTooLarge { size, limit };
                        return self.end(record, &state, Some(failure), Vec::new()).await;
                    }
                    self.release(&record.id, &state).await;
                    return Err(refusal.into());
                }
                let token = self
                    .persist_pause(record, &parts, stored_bytes, &state, claim)
                    .await?;
                record.mark_stored(&parts);
                Ok(Reply::Paused {
                    execution_id: record.id_hex(),
                    session_id: record.session_id.clone(),
                    token,
                    calls,
                    round: record.round_count() as u32,
                    cell: None,
                })
            }
            Step::Completed => {
                metrics::counter!("baton_executions_completed_total").increment(1);
                let files = self.keep_produced(record, &state).await?;
                self.end(record, &state, None, files).await
            }
            // Its child was killed by a cancel (decided and stored by it).
            Step::Failed(Failure::Cancelled) => Err(ServiceError::Cancelled),
            Step::Failed(failure) => {
                metrics::counter!("baton_executions_failed_total", "kind" => failure.kind())
                    .increment(1);
                tracing::info!(execution = %record.id_hex(), kind = failure.kind(), "execution failed");
                if matches!(failure, Failure::NonDeterminism(_)) {
                    metrics::counter!("baton_nondeterminism_errors_total").increment(1);
                }
                // Code that raised or exited leaves its files as a disk would.
                let files = if failure.is_the_codes_own() {
                    self.keep_produced(record, &state).await?
                } else {
                    Vec::new()
                };
                self.end(record, &state, Some(failure), files).await
            }
        }
    }

    /// Stores the files `record`'s code left, in its session.
    async fn keep_produced(
        &self,
        record: &mut ExecutionRecord,
        state: &ExecState,
    ) -> Result<Vec<FileMeta>, ServiceError> {
        let produced = std::mem::take(&mut record.produced);
        self.files
            .keep_produced(state.owner, &record.session_id, produced)
            .await
            .map_err(ServiceError::from)
    }

    /// Reserves the key's storage for a pause of `stored_bytes` before it
    /// is written (what the execution stored before counts as its own), so
    /// that pauses at once cannot together pass the cap. Refused, the pause
    /// is not written: its child is dropped and the round given up to be
    /// run again by replay ([`Service::release`]), so the same token is
    /// answered 429 with the delay as an admission would be (a start gets
    /// the 429 and nothing to continue); a pause alone over the cap ends
    /// the execution (`Execution record too large`).
    fn reserve_pause(
        &self,
        record: &ExecutionRecord,
        state: &ExecState,
        stored_bytes: u64,
    ) -> Result<(), Refusal> {
        let now = now_secs();
        self.usage.hold(
            Item::Execution(record.id),
            state.owner,
            stored_bytes,
            now + self.config.paused_ttl_secs,
            now,
        )
    }

    /// The failure of a record too large to store, if it is.
    fn oversized(&self, size: u64) -> Option<Failure> {
        let limit = self.config.max_record_bytes;
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        (size > limit).then_some(Failure::RecordTooLarge { size, limit })
    }

    /// Writes the parts a pause added and its state, waits for the claim's
    /// flush (see the module doc; without one, flushes); returns the
    /// pause's token.
    async fn persist_pause(
        &self,
        record: &ExecutionRecord,
        parts: &NewParts,
        stored_bytes: u64,
        state: &ExecState,
        claim: Claimed,
    ) -> Result<String, ServiceError> {
        let round = record.round_count() as u32;
        let expires_at = now_secs() + self.config.paused_ttl_secs;
        let paused = ExecState {
            status: Status::Paused,
            round,
            owner: state.owner,
            expires_at,
            answered: state.answered,
            node: self.store.node(),
        };
        let state_bytes = paused.encode();
        let writes = part_writes(&record.id, parts);
        self.write_batch(
            state,
            Writes::Pause {
                parts: &borrowed(&writes),
                state: &state_bytes,
            },
            match claim {
                Claimed::Flushing(flushing) => Flush::Begun(flushing),
                Claimed::Nothing | Claimed::RunAgain => Flush::BeforeReply,
            },
            Stored {
                id: record.id,
                owner: state.owner,
                bytes: stored_bytes,
                expires_at,
            },
        )
        .await?;
        Ok(self.keys.sign(record.id, round, state.owner, expires_at))
    }

    /// Ends an execution: its state says how, its outcome is kept in place
    /// of its record (in one batch; see the module doc for when it is
    /// flushed), and the reply is that outcome.
    pub(super) async fn end(
        &self,
        record: &ExecutionRecord,
        state: &ExecState,
        failure: Option<Failure>,
        files: Vec<FileMeta>,
    ) -> Result<Reply, ServiceError> {
        let kind = failure.as_ref().map(Failure::kind);
        let deleted = if failure.as_ref().is_none_or(Failure::is_the_codes_own) {
            record.removed.clone()
        } else {
            Vec::new()
        };
        let ended = ExecState {
            status: if failure.is_none() {
                Status::Completed
            } else {
                Status::Failed
            },
            round: record.round_count() as u32,
            owner: state.owner,
            expires_at: now_secs() + self.config.ended_ttl_secs,
            answered: state.answered,
            node: self.store.node(),
        };
        let history = record.include_history.then(|| history(record));
        let outcome = EndedOutcome::of(record, failure.as_ref(), files, deleted, history);
        let outcome_bytes = outcome.encode();
        let flush = if outcome.files.is_empty() && outcome.deleted.is_empty() {
            Flush::AfterReply
        } else {
            Flush::BeforeReply
        };
        let record_keys = self.forget_parts_of(record);
        let deletes = slices(&record_keys);
        let journal = self.cell_journal(record, state.owner, failure.as_ref())?;
        let state_bytes = ended.encode();
        let (ended_key, kept_key) = (state_key(&record.id), outcome_key(&record.id));
        let mut puts: Vec<(&[u8], &[u8])> =
            vec![(&ended_key, &state_bytes), (&kept_key, &outcome_bytes)];
        if let Some(journal) = &journal {
            puts.push((&journal.key, &journal.bytes));
        }
        // A session's cell the client saw is never lost: its end is on
        // disk before its answer.
        let flush = if record.cell.is_some() {
            Flush::BeforeReply
        } else {
            flush
        };
        self.write_batch(
            state,
            Writes::End {
                puts: &puts,
                deletes: &deletes,
            },
            flush,
            Stored {
                id: record.id,
                owner: state.owner,
                bytes: outcome_bytes.len() as u64,
                expires_at: ended.expires_at,
            },
        )
        .await?;
        self.settle_cell(record, state.owner, journal.as_ref().map(|j| &j.bytes[..]))
            .await;
        let mut reply =
            Reply::from_outcome(record.id_hex(), outcome, record.round_count() as u32, kind);
        if let Reply::Ended { directories, .. } = &mut reply
            && failure.as_ref().is_none_or(Failure::is_the_codes_own)
        {
            directories.clone_from(&record.directories_left);
        }
        Ok(reply)
    }
}
