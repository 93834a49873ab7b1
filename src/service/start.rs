//! Start: a new execution from a request, run to its first pause or end.

use tracing::Instrument;

use crate::engine::ExecutionSpec;
use crate::journal::WorkspaceFile;
use crate::state::{ExecState, Status, listing_key, state_key};
use crate::timing::step;

use super::error::ServiceError;
use super::messages::{FileRef, Reply, StartRequest};
use super::{Service, now_micros, now_secs};

impl Service {
    /// Loads the files a start request names, as the workspace to start with.
    async fn workspace(
        &self,
        owner: [u8; 8],
        session: &str,
        refs: &[FileRef],
    ) -> Result<Vec<WorkspaceFile>, ServiceError> {
        let mut files = Vec::with_capacity(refs.len());
        let limit = self.engine.limits().workspace_bytes as usize;
        let mut total = 0usize;
        for file in refs {
            let from = file
                .session_id
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or(session);
            let stored = self
                .files
                .get(owner, from, &file.id)
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
                None => stored.name,
            };
            total += stored.bytes.len();
            if total > limit {
                return Err(ServiceError::Invalid(format!(
                    "the files of a request may have {limit} bytes at most"
                )));
            }
            files.push(WorkspaceFile {
                name,
                bytes: stored.bytes,
            });
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
            expires_at: now_secs() + self.config.paused_ttl_secs,
            answered: None,
            node: self.store.node(),
        };
        // Two plain writes, not a batch (a sled transaction costs a start
        // ~0.15 ms): the index entry first, so a crash between them leaves
        // an entry without a state, which listings skip and the sweep removes.
        let listed = listing_key(&owner, now_micros(), &record.id);
        async {
            self.store.put(&listed, &[]).await?;
            self.store
                .put(&state_key(&record.id), &state.encode())
                .await
        }
        .instrument(step!("store_state"))
        .await
        .map_err(ServiceError::store)?;
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
            .await
            .map_err(|e| ServiceError::Unavailable(e.to_string()))?;
        metrics::histogram!("baton_start_to_pause_seconds").record(started.elapsed().as_secs_f64());
        self.settle(record, state, step)
            .instrument(step!("settle"))
            .await
    }
}
