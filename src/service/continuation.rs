//! Continuation: the client's results for a paused round, the claim of the
//! round, and the answer to a retried continuation.
//!
//! Invariants:
//! - A round is claimed by one compare-and-swap of its state from
//!   `Paused(round)` to `Running(round)`, after the results were validated
//!   (a bad request leaves it paused); the results are stored right after,
//!   and their flush runs while the code does.
//! - A retry (same token, same results: the digest stored with the claim)
//!   gets the answer that continuation led to; other results, 409. That
//!   holds also for a request that read the state before another claimed
//!   the round and the record after that one's step was stored: a record
//!   past the token's round sends it to the retry's answer, never on to
//!   a check of its results against the next round's calls.
//! - A round left running by a node that died (killed, or its machine
//!   gone: [`crate::store::Store::node_alive`]) is recovered by the next
//!   continuation that finds it (or that waits for it): run again when its
//!   results are stored, else put back to paused and claimed as usual. A
//!   continuation for the pause such a round leads to waits while another
//!   node runs it again. A round that a live node runs is never taken.

use std::time::Duration;

use tracing::Instrument;

use crate::engine::ResumeKind;
use crate::journal::{CallResult, ExecutionRecord, PendingRound};
use crate::state::{Answered, ExecState, Status, results_digest, state_key};
use crate::store::CasConflict;
use crate::timing::step;
use crate::token::{TokenClaims, TokenError};

use super::error::ServiceError;
use super::messages::{Reply, ToolResult};
use super::records::{borrowed, part_writes};
use super::recovery::{Orphan, Replay};
use super::request_ids::RequestId;
use super::settle::Claimed;
use super::{Service, TIMEOUT_RANGE_MS, now_millis, now_secs};

/// How often a retried continuation looks whether the original is done.
const RETRY_POLL: Duration = Duration::from_millis(10);
/// Every how many polls it also looks whether the node running the round
/// is still alive.
const ORPHAN_CHECK_POLLS: u64 = 50;

/// Each result's value as JSON text (for the digest and the record).
fn value_texts(results: &[ToolResult]) -> Vec<String> {
    results.iter().map(|r| r.result.clone()).collect()
}

/// The digest of a continuation's results as the client sent them, and
/// their size in bytes (what they will add to the record).
fn digest_of(results: &[ToolResult], texts: &[String]) -> ([u8; 32], u64) {
    let mut size = 0u64;
    let digest = results_digest(results.iter().zip(texts).map(|(r, text)| {
        size += (text.len() + r.error_message.as_ref().map_or(0, String::len)) as u64;
        (
            r.call_id.as_str(),
            r.is_error,
            text.as_str(),
            r.error_message.as_deref(),
        )
    }));
    (digest, size)
}

/// Where a continuation may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Here, whichever node holds the child (cold when it is elsewhere).
    Here,
    /// At the node whose child is parked for it, when that is another
    /// live node that gave an address.
    ToHolder,
}

/// What a continuation led to.
pub enum Continued {
    /// The answer (a pause, an end, or a retry's answer).
    Reply(Box<Reply>),
    /// The child is parked on another node, at `address`: the round was
    /// not claimed here, and the results are given back (to continue here
    /// with [`Routing::Here`] if that node does not answer).
    HeldAt {
        /// That node's base URL (`--advertise`).
        address: String,
        /// The client's results, untouched.
        results: Vec<ToolResult>,
    },
}

/// A round this request may claim: the state it read, and what the
/// client answered.
struct Claimable<'a> {
    id: [u8; 16],
    owner: [u8; 8],
    round: u32,
    digest: [u8; 32],
    state_bytes: Vec<u8>,
    state: ExecState,
    results: Vec<ToolResult>,
    texts: Vec<String>,
    request_id: RequestId<'a>,
}

impl Service {
    /// What a continuation token of `owner` says, or why it is refused
    /// (forged, of another principal: `InvalidToken`; past its time:
    /// `Expired`). Cheap (an HMAC): run before anything else of a
    /// continuation is read.
    pub fn check_token(&self, owner: [u8; 8], token: &str) -> Result<TokenClaims, ServiceError> {
        let claims = self.keys.verify(token, now_secs()).map_err(|e| match e {
            TokenError::Expired => ServiceError::Expired,
            _ => ServiceError::InvalidToken,
        })?;
        if claims.key_identity != owner {
            return Err(ServiceError::InvalidToken);
        }
        Ok(claims)
    }

    /// Continues a paused execution with the client's results; a retry of a
    /// continuation already made gets that continuation's answer. With
    /// [`Routing::ToHolder`], a round whose child is parked on another
    /// live node is left to that node ([`Continued::HeldAt`]).
    pub async fn continue_with(
        &self,
        owner: [u8; 8],
        token: &str,
        results: Vec<ToolResult>,
        request_id: Option<&str>,
        routing: Routing,
    ) -> Result<Continued, ServiceError> {
        let _in_flight = self.engine.hold_for_request();
        let claims = step!("verify").in_scope(|| self.check_token(owner, token))?;
        let id = claims.execution_id;
        let texts = value_texts(&results);
        let (digest, incoming) = digest_of(&results, &texts);
        let request_id = self.begin_request(owner, request_id).await?;
        let (state_bytes, state) = loop {
            let (mut state_bytes, mut state) = self.load_state(&id, owner).await?;
            // A round left running by a node that died is run again (or
            // claimable again).
            if let Orphan::Recovered(bytes, recovered) = self
                .recover_orphan(&id, &state_bytes, &state, Replay::Now)
                .await?
            {
                (state_bytes, state) = (bytes, recovered);
            }
            self.link_request(owner, &request_id, id).await?;
            // The round before the token's is being run again (its node
            // died after answering): its pause is the one the token is for.
            if state.status == Status::Running && state.round.checked_add(1) == Some(claims.round) {
                self.wait_while_running(&id, owner, &state_bytes).await?;
                continue;
            }
            let Err(refused) = check_claimable(&state, claims.round) else {
                break (state_bytes, state);
            };
            match self
                .answer_retry(&id, owner, claims.round, digest, refused)
                .await?
            {
                Retried::Answer(reply) => return Ok(Continued::Reply(reply)),
                // The node running the round died while this waited.
                Retried::PutBack => continue,
            }
        };
        if routing == Routing::ToHolder
            && let Some(address) = self.holder_address(&state).await
        {
            return Ok(Continued::HeldAt { address, results });
        }
        self.admit(owner, incoming)?;
        let claimable = Claimable {
            id,
            owner,
            round: claims.round,
            digest,
            state_bytes,
            state,
            results,
            texts,
            request_id,
        };
        self.claim_and_run(claimable)
            .await
            .map(|reply| Continued::Reply(Box::new(reply)))
    }

    /// Claims the round and runs it to the next pause or the end.
    async fn claim_and_run(&self, claimable: Claimable<'_>) -> Result<Reply, ServiceError> {
        let Claimable {
            id,
            owner,
            round,
            digest,
            state_bytes,
            state,
            results,
            texts,
            request_id,
        } = claimable;
        let loaded = self
            .record_for_round(&id, round)
            .instrument(step!("load_record"))
            .await;
        let mut record = match loaded {
            Ok(record) => record,
            // Another request continued the round since the state was read.
            Err(ServiceError::AlreadyUsed) => {
                return self
                    .answer_retry(&id, owner, round, digest, ServiceError::AlreadyUsed)
                    .await?
                    .reply();
            }
            Err(error) => return Err(error),
        };
        if request_id.cancelled_early {
            return self.cancel_now(record, state).await;
        }
        let pending = record.pending.as_ref().ok_or(ServiceError::AlreadyUsed)?;
        let ordered = match order_texts(pending, results, texts) {
            Ok(ordered) => ordered,
            Err(invalid) => {
                // The round stays paused: its record stays at hand.
                self.records.put(record);
                return Err(invalid);
            }
        };
        let answered_at = now_millis();
        self.engine
            .answer(&mut record, ordered)
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        let answered_round = record.rounds.len().saturating_sub(1);
        record.round_times.answered(answered_round, answered_at);
        let running = ExecState {
            status: Status::Running,
            answered: Some(Answered { round, digest }),
            node: self.store.node(),
            expires_at: self.running_expires_at(&record),
            ..state
        };
        let claimed = self
            .claim(&id, &state_bytes, &running, &mut record)
            .instrument(step!("claim"))
            .await;
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(refused) => {
                return self
                    .answer_retry(&id, owner, round, digest, refused)
                    .await?
                    .reply();
            }
        };
        let started = std::time::Instant::now();
        let (step, kind) = self.run_answered(&running, &mut record).await?;
        metrics::histogram!("baton_resume_to_pause_seconds")
            .record(started.elapsed().as_secs_f64());
        let tag = self.cell_tag(&record, kind).await;
        let reply = self
            .settle(record, running, step, claimed)
            .instrument(step!("settle"))
            .await?;
        Ok(reply.tagged(tag))
    }

    /// Runs the round `record` was answered in, claimed as `running`, to
    /// its pause or end (counting a cold resume; a session's cell resumed
    /// cold runs its session's earlier cells first); an engine that cannot
    /// run it gives the round up to be run again ([`Service::release`]).
    pub(super) async fn run_answered(
        &self,
        running: &ExecState,
        record: &mut ExecutionRecord,
    ) -> Result<(crate::engine::Step, ResumeKind), ServiceError> {
        record.owner = running.owner;
        let resumed = match self
            .resume_with_history(record)
            .instrument(step!("resume"))
            .await
        {
            Ok(resumed) => resumed,
            Err(error) => {
                self.release(&record.id, running).await;
                return Err(error);
            }
        };
        match resumed {
            Ok((step, kind)) => {
                if kind == ResumeKind::Cold {
                    metrics::counter!("baton_cold_resumes_total").increment(1);
                }
                Ok((step, kind))
            }
            Err(error) => {
                self.release(&record.id, running).await;
                Err(ServiceError::Unavailable(error.to_string()))
            }
        }
    }

    /// The answer to a continuation of `round` that cannot claim it: when
    /// it repeats the continuation that claimed it (same results), the
    /// answer that continuation led to (waiting for it while it runs, or
    /// [`Retried::PutBack`] when the node running it died meanwhile);
    /// otherwise `refused`.
    async fn answer_retry(
        &self,
        id: &[u8; 16],
        owner: [u8; 8],
        round: u32,
        digest: [u8; 32],
        refused: ServiceError,
    ) -> Result<Retried, ServiceError> {
        let this = Some(Answered { round, digest });
        let give_up = retry_deadline();
        let mut poll = 0u64;
        loop {
            poll += 1;
            let (bytes, state) = self.load_state(id, owner).await?;
            if state.answered != this {
                return Err(refused);
            }
            match state.status {
                // The node that ran the round died: the round is paused
                // again, to be claimed.
                Status::Running
                    if poll.is_multiple_of(ORPHAN_CHECK_POLLS)
                        && matches!(
                            self.recover_orphan(id, &bytes, &state, Replay::Now).await?,
                            Orphan::Recovered(..)
                        ) =>
                {
                    return Ok(Retried::PutBack);
                }
                Status::Running if std::time::Instant::now() < give_up => {
                    tokio::time::sleep(RETRY_POLL).await;
                }
                Status::Running => return Err(ServiceError::InProgress),
                Status::Paused => {
                    let record = self.load_record(id).await?;
                    let calls = record
                        .pending
                        .as_ref()
                        .map(|p| p.calls.clone())
                        .ok_or(ServiceError::AlreadyUsed)?;
                    let token = self.keys.sign(*id, state.round, owner, state.expires_at);
                    metrics::counter!("baton_retried_continuations_total").increment(1);
                    let cell = self.cell_tag(&record, ResumeKind::Cold).await;
                    return Ok(Retried::Answer(Box::new(Reply::Paused {
                        execution_id: record.id_hex(),
                        session_id: record.session_id,
                        token,
                        calls,
                        round: state.round,
                        cell,
                    })));
                }
                Status::Cancelled => return Err(ServiceError::Cancelled),
                Status::Completed | Status::Failed => {
                    let outcome = self.load_outcome(id).await?.ok_or(refused)?;
                    metrics::counter!("baton_retried_continuations_total").increment(1);
                    return Ok(Retried::Answer(Box::new(Reply::from_outcome(
                        hex::encode(id),
                        outcome,
                        state.round,
                        None,
                    ))));
                }
            }
        }
    }

    /// Waits until the state stored as `bytes` (a round running) changes,
    /// or until the node running it is found dead (then the caller recovers
    /// the round); [`ServiceError::InProgress`] after the longest a round
    /// may run.
    async fn wait_while_running(
        &self,
        id: &[u8; 16],
        owner: [u8; 8],
        bytes: &[u8],
    ) -> Result<(), ServiceError> {
        let give_up = retry_deadline();
        let mut poll = 0u64;
        loop {
            poll += 1;
            tokio::time::sleep(RETRY_POLL).await;
            let (now, state) = self.load_state(id, owner).await?;
            if now != bytes {
                return Ok(());
            }
            if poll.is_multiple_of(ORPHAN_CHECK_POLLS)
                && !self
                    .store
                    .node_alive(state.node)
                    .await
                    .map_err(ServiceError::store)?
            {
                return Ok(());
            }
            if std::time::Instant::now() >= give_up {
                return Err(ServiceError::InProgress);
            }
        }
    }

    /// Claims the round `record` was just answered in: sets the state
    /// `running` if it still is the paused state read (`expected`), then
    /// writes the round's part (its results) and the progress, so that the
    /// round can be run again by replay if this node dies before its pause
    /// is stored, and begins their flush. A crash between the two leaves
    /// the round claimed with its results not stored: it goes back to
    /// paused (`recovery`). A store that does not flush while code runs
    /// gets the compare-and-swap only (the pause then stores the results).
    async fn claim(
        &self,
        id: &[u8; 16],
        expected: &[u8],
        running: &ExecState,
        record: &mut ExecutionRecord,
    ) -> Result<Claimed, ServiceError> {
        let round = running.round;
        if !self.store.flush_while_running() {
            let swapped = self
                .store
                .compare_and_swap(&state_key(id), Some(expected), Some(&running.encode()))
                .await
                .map_err(ServiceError::store)?;
            return match swapped {
                Ok(()) => Ok(Claimed::Nothing),
                Err(conflict) => Err(claim_refused(conflict, round)),
            };
        }
        let parts = record
            .new_parts()
            .map_err(|e| ServiceError::Corrupt(e.to_string()))?;
        let writes = part_writes(id, &parts);
        let puts = borrowed(&writes);
        let swapped = self
            .store
            .swap_then_put(&state_key(id), expected, &running.encode(), &puts)
            .await
            .map_err(ServiceError::store)?;
        match swapped {
            Ok(()) => {
                record.mark_stored(&parts);
                Ok(Claimed::Flushing(self.durability.begin()))
            }
            Err(conflict) => Err(claim_refused(conflict, round)),
        }
    }

    /// Gives up a claimed round after an internal failure, leaving it to
    /// be run again: its state stays `running`, its node becomes none (0,
    /// never alive), so the next continuation that finds it, a retry of
    /// this one included, runs the round by replay (`roll_forward`). A
    /// state that changed since the claim (a cancel came) is left as it is;
    /// a store that fails is logged, and the round stays this node's until
    /// the next start of the server.
    pub(super) async fn release(&self, id: &[u8; 16], running: &ExecState) {
        let orphaned = ExecState {
            node: 0,
            ..running.clone()
        };
        let swapped = self
            .store
            .compare_and_swap(
                &state_key(id),
                Some(&running.encode()),
                Some(&orphaned.encode()),
            )
            .await;
        match swapped {
            Ok(Ok(())) => {}
            Ok(Err(_changed)) => {
                tracing::info!(execution = %hex::encode(id), "round not released: its state changed");
            }
            Err(error) => {
                tracing::error!(execution = %hex::encode(id), %error, "round not released: store failure");
            }
        }
    }
}

/// What a continuation that could not claim its round gets.
enum Retried {
    /// The answer of the continuation it repeats.
    Answer(Box<Reply>),
    /// The round was put back to paused (its node died): claim it.
    PutBack,
}

impl Retried {
    /// The answer; a round put back is refused as still in progress (the
    /// client's next try claims it).
    fn reply(self) -> Result<Reply, ServiceError> {
        match self {
            Retried::Answer(reply) => Ok(*reply),
            Retried::PutBack => Err(ServiceError::InProgress),
        }
    }
}

/// How long a request waits for a round that another runs: the longest a
/// round may run, and ten seconds more.
fn retry_deadline() -> std::time::Instant {
    std::time::Instant::now()
        + Duration::from_millis(*TIMEOUT_RANGE_MS.end())
        + Duration::from_secs(10)
}

/// Why a claim of `round` was refused, from the state the store holds.
fn claim_refused(conflict: CasConflict, round: u32) -> ServiceError {
    match conflict.current.as_deref().and_then(ExecState::decode) {
        None => ServiceError::NotFound,
        Some(state) => match check_claimable(&state, round) {
            Ok(()) => ServiceError::InProgress,
            Err(refused) => refused,
        },
    }
}

/// Whether a token for `round` may continue an execution in `state`.
fn check_claimable(state: &ExecState, round: u32) -> Result<(), ServiceError> {
    match state.status {
        Status::Cancelled => Err(ServiceError::Cancelled),
        Status::Completed | Status::Failed => Err(ServiceError::AlreadyUsed),
        _ if state.round != round => Err(ServiceError::AlreadyUsed),
        Status::Running => Err(ServiceError::InProgress),
        Status::Paused => Ok(()),
    }
}

/// Puts the client's results in the order of the pending calls; names every
/// missing, unknown or duplicate id.
pub fn order_results(
    pending: &PendingRound,
    results: Vec<ToolResult>,
) -> Result<Vec<CallResult>, ServiceError> {
    let texts = value_texts(&results);
    order_texts(pending, results, texts)
}

/// [`order_results`] of results whose values are already JSON text
/// (`texts`, one per result).
fn order_texts(
    pending: &PendingRound,
    results: Vec<ToolResult>,
    texts: Vec<String>,
) -> Result<Vec<CallResult>, ServiceError> {
    let mut slots: Vec<Option<CallResult>> = vec![None; pending.calls.len()];
    let (mut unknown, mut duplicate) = (Vec::new(), Vec::new());
    for (result, text) in results.into_iter().zip(texts) {
        match pending.calls.iter().position(|c| c.id == result.call_id) {
            None => unknown.push(result.call_id),
            Some(index) if slots[index].is_some() => duplicate.push(result.call_id),
            Some(index) => slots[index] = Some(to_call_result(result, text)),
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
        return Err(ServiceError::Invalid(problems.join("; ")));
    }
    Ok(slots.into_iter().flatten().collect())
}

fn to_call_result(result: ToolResult, text: String) -> CallResult {
    if result.is_error {
        let message = result
            .error_message
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "tool call failed".into());
        CallResult::Error(message)
    } else {
        CallResult::Value(text)
    }
}
