//! The operator's log: one `info` line per request that changes an
//! execution (a start, a continuation, an `/exec`, a cancel), with the
//! execution id, the caller's id (its principal's 8-byte owner in hex,
//! never a key or a token), what became of the execution, its round, the request's duration
//! and, for a failure, its kind. Refused requests are logged too, with
//! their HTTP status and message.
//!
//! Invariant: no line carries a key, a token, code or tool data.

use std::time::Instant;

use crate::service::{CancelOutcome, Reply, ServiceError};

use super::error::service_status;

/// Log target of these lines (`BATON_LOG=baton::requests=info`).
const TARGET: &str = "baton::requests";

/// One request being served, for its log line.
pub(crate) struct RequestLog {
    request: &'static str,
    key: String,
    began: Instant,
}

impl RequestLog {
    /// A request of kind `request` (`start`, `continue`, `exec`, `cancel`)
    /// by the key whose identity is `key`.
    pub(crate) fn begin(request: &'static str, key: [u8; 8]) -> RequestLog {
        RequestLog {
            request,
            key: hex::encode(key),
            began: Instant::now(),
        }
    }

    fn millis(&self) -> f64 {
        (self.began.elapsed().as_secs_f64() * 1e5).round() / 100.0
    }

    /// Logs what a start or continuation led to.
    pub(crate) fn finish(&self, result: Result<&Reply, &ServiceError>) {
        match result {
            Ok(Reply::Paused {
                execution_id,
                round,
                ..
            }) => tracing::info!(
                target: TARGET,
                request = %self.request,
                execution = %execution_id,
                key = %self.key,
                status = "paused",
                round,
                ms = self.millis(),
            ),
            Ok(Reply::Ended {
                execution_id,
                round,
                failure,
                error,
                ..
            }) => tracing::info!(
                target: TARGET,
                request = %self.request,
                execution = %execution_id,
                key = %self.key,
                status = if error.is_none() { "completed" } else { "failed" },
                round,
                ms = self.millis(),
                failure = failure.unwrap_or_default(),
            ),
            Err(error) => self.refused(error),
        }
    }

    /// Logs what a cancel found.
    pub(crate) fn cancelled(
        &self,
        cancelled: Cancelled<'_>,
        result: &Result<CancelOutcome, ServiceError>,
    ) {
        let (request_id, execution) = match cancelled {
            Cancelled::Request(id) => (Some(id), None),
            Cancelled::Execution(id) => (None, Some(id)),
        };
        match result {
            Ok(outcome) => tracing::info!(
                target: TARGET,
                request = %self.request,
                request_id,
                execution,
                key = %self.key,
                status = ?outcome,
                ms = self.millis(),
            ),
            Err(error) => self.refused(error),
        }
    }

    fn refused(&self, error: &ServiceError) {
        tracing::info!(
            target: TARGET,
            request = %self.request,
            key = %self.key,
            status = "refused",
            http = service_status(error).as_u16(),
            error = %error,
            ms = self.millis(),
        );
    }
}

/// What a cancel named.
#[derive(Clone, Copy)]
pub(crate) enum Cancelled<'a> {
    /// A client request id.
    Request(&'a str),
    /// An execution id (the console's cancel).
    Execution(&'a str),
}
