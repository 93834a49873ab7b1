//! Rounds left running by a dead node (a previous process of this server,
//! another node sharing the store, or a claim given up after an internal
//! failure: node 0).
//!
//! On a store that flushes while code runs (the embedded one:
//! [`crate::store::Store::flush_while_running`]), a claim stores the
//! round's results after its `running` state, and a start stores the
//! execution's record with its own, before the code runs (their flush runs
//! while it does; see `settle`). A pause is then written
//! before its reply but made durable only by the next flush. So a node that
//! dies may leave a round `running` whose results are stored and whose
//! pause the client may already have: that round is **run again by
//! replay** ([`Service::roll_forward`]), here, by the first continuation
//! that finds it, and leads to the same pause (the same call ids, the same
//! results and clock); the client's token for that pause then continues it.
//! A round whose results are not stored (a state of an earlier version)
//! goes back to `paused`; one whose next pause is stored but not its
//! state (a pause writes its parts first) is paused at that pause; an
//! execution without a record, `failed`.
//!
//! Invariants:
//! - A round a live node runs is never taken; a round is taken by one
//!   compare-and-swap of its state, so two nodes never run it again both.
//! - Upkeep ([`Replay::Later`]) runs no code: it leaves such a round to
//!   the next continuation, and lets it expire like a paused one.

use crate::journal::ExecutionRecord;
use crate::state::{ExecState, Status, state_key};

use super::Service;
use super::error::ServiceError;
use super::settle::Claimed;

/// Whether recovering a round may run it again now.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Replay {
    /// Yes: a continuation waits for it.
    Now,
    /// No (upkeep): leave it to the next continuation.
    Later,
}

/// What [`Service::recover_orphan`] found.
pub(super) enum Orphan {
    /// The state is not a round left by a dead node.
    No,
    /// The round was put back, failed, or run again: the state now.
    Recovered(Vec<u8>, ExecState),
    /// A round left as it is: to be run again later, or changed by
    /// another request meanwhile.
    Left,
}

/// What becomes of an orphaned round.
enum Fate {
    /// Run again from its stored results (or start).
    RunAgain(Box<ExecutionRecord>),
    /// Set to this status at this round (paused: continuable from its
    /// stored pause; failed: nothing stored to continue from).
    Set(Status, u32),
}

impl Service {
    /// When `state` (stored as `bytes`) is a round left running by a dead
    /// node, recovers it (see the module doc).
    pub(super) async fn recover_orphan(
        &self,
        id: &[u8; 16],
        bytes: &[u8],
        state: &ExecState,
        replay: Replay,
    ) -> Result<Orphan, ServiceError> {
        if state.status != Status::Running
            || self
                .store
                .node_alive(state.node)
                .await
                .map_err(ServiceError::store)?
        {
            return Ok(Orphan::No);
        }
        let (status, round) = match self.fate(id, state).await? {
            Fate::RunAgain(_) if replay == Replay::Later => return Ok(Orphan::Left),
            Fate::RunAgain(record) => return self.roll_forward(id, bytes, state, *record).await,
            Fate::Set(status, round) => (status, round),
        };
        let next = ExecState {
            status,
            round,
            ..state.clone()
        };
        let next_bytes = next.encode();
        let swapped = self
            .store
            .compare_and_swap(&state_key(id), Some(bytes), Some(&next_bytes))
            .await
            .map_err(ServiceError::store)?;
        Ok(match swapped {
            Ok(()) => Orphan::Recovered(next_bytes, next),
            Err(_changed) => Orphan::Left,
        })
    }

    /// What the orphaned round of `state` becomes, from the record stored.
    async fn fate(&self, id: &[u8; 16], state: &ExecState) -> Result<Fate, ServiceError> {
        let round = state.round;
        match self.load_record(id).await {
            Ok(record) if record.rounds.len() == round as usize => match record.pending {
                None => Ok(Fate::RunAgain(Box::new(record))),
                // The pause the round led to was stored, its state not (a
                // pause writes its parts, then its state: `settle`):
                // paused there; a retry of the round's continuation gets it.
                Some(_) => Ok(Fate::Set(Status::Paused, round + 1)),
            },
            // Paused at its last stored pause (a corrupt record says so
            // to the continuation that claims it).
            Ok(_) | Err(ServiceError::Corrupt(_)) => Ok(Fate::Set(Status::Paused, round)),
            Err(ServiceError::NotFound) => Ok(Fate::Set(Status::Failed, round)),
            Err(error) => Err(error),
        }
    }

    /// Runs again, here, the orphaned round of `state` (stored as `bytes`)
    /// whose results `record` holds, to its pause or end, stored as any
    /// step's.
    async fn roll_forward(
        &self,
        id: &[u8; 16],
        bytes: &[u8],
        state: &ExecState,
        mut record: ExecutionRecord,
    ) -> Result<Orphan, ServiceError> {
        let running = ExecState {
            node: self.store.node(),
            ..state.clone()
        };
        let taken = self
            .store
            .compare_and_swap(&state_key(id), Some(bytes), Some(&running.encode()))
            .await
            .map_err(ServiceError::store)?;
        if taken.is_err() {
            return Ok(Orphan::Left);
        }
        tracing::info!(execution = %record.id_hex(), round = state.round, "running a round again after its node died");
        metrics::counter!("baton_rounds_run_again_total").increment(1);
        let (step, _) = self.run_answered(&running, &mut record).await?;
        self.settle(record, running, step, Claimed::RunAgain)
            .await?;
        let (bytes, state) = self.load_state(id, state.owner).await?;
        Ok(Orphan::Recovered(bytes, state))
    }
}
