//! Start: a new execution from a request, run to its first pause or end.

use tracing::Instrument;

use crate::engine::ExecutionSpec;
use crate::journal::{ExecutionRecord, WorkspaceFile};
use crate::state::{ExecState, Status, listing_key, state_key};
use crate::timing::step;

use super::error::ServiceError;
use super::messages::{FileRef, Reply, StartRequest};
use super::records::{borrowed, part_writes};
use super::settle::Claimed;
use super::{Service, now_micros};

impl Service {
    /// Loads the files a start request names, as the workspace to start with.
    async fn workspace(
        &self,
        owner: [u8; 8],
        session: &str,
        refs: &[FileRef],
    ) -> Result<Vec<WorkspaceFile>, ServiceError> {
        let mut files = Vec::with_capacity(refs.len());
        let limit = self.engine.limits().workspace_bytes;
        let mut total = 0u64;
        for file in refs {
            let from = file
                .session_id
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or(session);
            let stored = self
                .files
                .open(owner, from, &file.id)
                .await
                .map_err(ServiceError::from)?
                .ok_or_else(|| {
                    ServiceError::Invalid(format!(
                        "file {:?} not found in session {from:?}",
                        file.id
                    ))
                })?;
            let name = match file.name.as_deref().filter(|n| !n.is_empty()) {
                Some(name) => crate::workspace::check_name(name)
                    .map_err(ServiceError::from)?
                    .to_owned(),
                None => stored.name.clone(),
            };
            total = total.saturating_add(stored.size);
            if total > limit {
                return Err(ServiceError::Invalid(format!(
                    "the files of a request may have {limit} bytes at most"
                )));
            }
            let bytes = stored.read_all().await.map_err(ServiceError::from)?;
            files.push(WorkspaceFile { name, bytes });
        }
        Ok(files)
    }

    /// Starts an execution and runs it to its first pause or its end.
    pub async fn start(
        &self,
        owner: [u8; 8],
        request: StartRequest,
    ) -> Result<Reply, ServiceError> {
        let _in_flight = self.engine.hold_for_request();
        let request_id = self
            .begin_request(owner, request.request_id.as_deref())
            .await?;
        let session_id = request
            .session_id
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("sess_{}", hex::encode(rand::random::<[u8; 12]>())));
        crate::workspace::check_session(&session_id).map_err(ServiceError::from)?;
        self.admit(owner, request.code.len() as u64)?;
        let files = self.workspace(owner, &session_id, &request.files).await?;
        let spec = ExecutionSpec {
            source: request.code,
            tools: request.tools,
            timeout_ms: request.timeout_ms,
            session_id,
            seed: None,
            files,
            argv: request.argv,
            policy: request.policy,
        };
        let mut record = step!("prepare")
            .in_scope(|| self.engine.prepare(spec))
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        let state = ExecState {
            status: Status::Running,
            round: 0,
            owner,
            expires_at: self.running_expires_at(&record),
            answered: None,
            node: self.store.node(),
        };
        let flushing = self.store_start(&mut record, &state).await?;
        self.link_request(owner, &request_id, record.id).await?;
        if request_id.cancelled_early {
            return self.cancel_now(record, state).await;
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
        self.settle(record, state, step, flushing)
            .instrument(step!("settle"))
            .await
    }

    /// Stores a new execution, running: its listing entry, its record's
    /// start and progress, then its state, in that order (so a crash that
    /// keeps the state keeps the record; an entry without a state is
    /// skipped by listings and removed by the sweep), and begins their
    /// flush, which runs while the code does. An execution without tools
    /// cannot pause, and a store that does not flush while code runs
    /// ([`crate::store::Store::flush_while_running`]) flushes its pause:
    /// then the record is not stored, nothing is flushed.
    async fn store_start(
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
