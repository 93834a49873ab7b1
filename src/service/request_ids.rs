//! Client request ids (`X-LibreChat-Code-Request-ID`): one request per id
//! at a time, the link from an id to its execution (for cancel), and a
//! cancel that came before its request.
//!
//! Invariant: an id is scoped to its API key: every key of the store under
//! it starts with the owner.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::state::{EarlyCancel, RequestLink, early_cancel_key, request_key};

use super::error::ServiceError;
use super::{Service, now_secs};

/// A client request id marked in flight; unmarked when dropped.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<Vec<u8>>>,
    key: Vec<u8>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.key);
        }
    }
}

/// What the service knows of a request's client request id.
pub(super) struct RequestId<'a> {
    /// The id, when the request carried one.
    id: Option<&'a str>,
    /// Keeps it marked in flight while the request is served.
    _in_flight: Option<InFlight<'a>>,
    /// Whether a cancel for it came first.
    pub(super) cancelled_early: bool,
}

impl Service {
    /// Marks the request's client id in flight (a second request with the
    /// same id while the first is served: 409) and takes a cancel that came
    /// before it.
    pub(super) async fn begin_request<'a>(
        &'a self,
        owner: [u8; 8],
        request_id: Option<&'a str>,
    ) -> Result<RequestId<'a>, ServiceError> {
        let Some(id) = request_id.filter(|r| !r.is_empty()) else {
            return Ok(RequestId {
                id: None,
                _in_flight: None,
                cancelled_early: false,
            });
        };
        let key = request_key(owner, id);
        let fresh = self
            .in_flight
            .lock()
            .map_err(|_| ServiceError::Unavailable("the request table is poisoned".into()))?
            .insert(key.clone());
        if !fresh {
            return Err(ServiceError::RequestInFlight);
        }
        let guard = InFlight {
            set: &self.in_flight,
            key,
        };
        let early = early_cancel_key(owner, id);
        let cancelled_early = match self.store.get(&early).await.map_err(ServiceError::store)? {
            Some(bytes) => {
                self.store
                    .delete(&early)
                    .await
                    .map_err(ServiceError::store)?;
                EarlyCancel::decode(&bytes).is_some_and(|c| c.until >= now_secs())
            }
            None => false,
        };
        Ok(RequestId {
            id: Some(id),
            _in_flight: Some(guard),
            cancelled_early,
        })
    }

    /// Links a client request id to the execution it starts or continues.
    pub(super) async fn link_request(
        &self,
        owner: [u8; 8],
        request: &RequestId<'_>,
        execution: [u8; 16],
    ) -> Result<(), ServiceError> {
        let Some(id) = request.id else {
            return Ok(());
        };
        let link = RequestLink {
            execution,
            expires_at: now_secs() + self.config.paused_ttl_secs + self.config.ended_ttl_secs,
        };
        self.store
            .put(&request_key(owner, id), &link.encode())
            .await
            .map_err(ServiceError::store)
    }
}
