//! Start: a new execution from a request, run to its first pause or end.

use tracing::Instrument;

use crate::auth::Principal;
use crate::engine::ExecutionSpec;
use crate::journal::ExecutionRecord;
use crate::state::{ExecState, listing_key, state_key};
use crate::timing::step;

use super::error::ServiceError;
use super::inputs::InputFile;
use super::messages::{Reply, StartRequest};
use super::records::{borrowed, part_writes};
use super::settle::Claimed;
use super::{Service, now_micros};

impl Service {
    /// Starts an execution for `principal` and runs it to its first pause
    /// or its end.
    pub async fn start(
        &self,
        principal: &Principal,
        request: StartRequest,
    ) -> Result<Reply, ServiceError> {
        self.start_with(principal, request, &[], &[])
            .await
            .map(|(reply, _)| reply)
    }

    /// [`Service::start`] with `kept` files and `directories` under
    /// `/mnt/data` before the request's own (a runtime session's); also
    /// answers the stored file of each name the execution was given.
    pub(super) async fn start_with(
        &self,
        principal: &Principal,
        request: StartRequest,
        kept: &[InputFile],
        directories: &[String],
    ) -> Result<(Reply, Vec<InputFile>), ServiceError> {
        let owner = principal.owner;
        let _in_flight = self.engine.hold_for_request();
        let request_id = self
            .begin_request(owner, request.request_id.as_deref())
            .await?;
        let session_id = request
            .session_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(crate::workspace::new_session_id);
        crate::workspace::check_session(&session_id).map_err(ServiceError::from)?;
        self.admit(owner, request.code.len() as u64)?;
        let workspace = self
            .workspace_of(principal, &session_id, kept, &request.files)
            .await?;
        let spec = ExecutionSpec {
            source: request.code,
            tools: request.tools,
            timeout_ms: request.timeout_ms,
            session_id,
            seed: None,
            files: workspace.files,
            argv: request.argv,
            policy: request.policy,
            lang: request.lang,
            read_only: workspace.read_only,
            directories: directories.to_vec(),
        };
        let mut record = step!("prepare")
            .in_scope(|| self.engine.prepare(spec))
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        let state = self.first_round_running(&mut record, owner);
        let flushing = self.store_start(&mut record, &state).await?;
        self.link_request(owner, &request_id, record.id).await?;
        if request_id.cancelled_early {
            return Ok((self.cancel_now(record, state).await?, workspace.inputs));
        }
        metrics::counter!("baton_executions_started_total").increment(1);
        let started = std::time::Instant::now();
        let step = self
            .engine
            .start(&mut record)
            .instrument(step!("run"))
            .await;
        let step = match step {
            Ok(step) => step,
            Err(error) => {
                self.release(&record.id, &state).await;
                return Err(ServiceError::Unavailable(error.to_string()));
            }
        };
        metrics::histogram!("baton_start_to_pause_seconds").record(started.elapsed().as_secs_f64());
        let reply = self
            .settle(record, state, step, flushing)
            .instrument(step!("settle"))
            .await?;
        Ok((reply, workspace.inputs))
    }

    /// Stores a new execution, running: its listing entry, its record's
    /// start and progress, then its state, in that order (so a crash that
    /// keeps the state keeps the record; an entry without a state is
    /// skipped by listings and removed by the sweep), and begins their
    /// flush, which runs while the code does. An execution without tools
    /// cannot pause, and a store that does not flush while code runs
    /// ([`crate::store::Store::flush_while_running`]) flushes its pause:
    /// then the record is not stored, nothing is flushed.
    pub(super) async fn store_start(
        &self,
        record: &mut ExecutionRecord,
        state: &ExecState,
    ) -> Result<Claimed, ServiceError> {
        let listed = listing_key(&state.owner, now_micros(), &record.id);
        let can_pause = !record.tools.is_empty();
        let parts = if can_pause && self.store.flush_while_running() {
            Some(
                record
                    .new_parts()
                    .map_err(|e| ServiceError::Corrupt(e.to_string()))?,
            )
        } else {
            None
        };
        let state_bytes = state.encode();
        let mut writes = vec![(listed, &[][..])];
        if let Some(parts) = &parts {
            writes.extend(part_writes(&record.id, parts));
        }
        writes.push((state_key(&record.id), &state_bytes));
        let puts = borrowed(&writes);
        self.store
            .put_all(&puts)
            .instrument(step!("store_state"))
            .await
            .map_err(ServiceError::store)?;
        let Some(parts) = parts else {
            return Ok(Claimed::Nothing);
        };
        record.mark_stored(&parts);
        Ok(Claimed::Flushing(self.durability.begin()))
    }
}
