//! The service's failures: every way a request to it can be refused or
//! fail, each one's display being the contract's text. Nothing here knows of
//! HTTP: `api/error.rs` gives each its status, in one place.

use crate::failure::Failure;
use crate::quota::Refusal;
use crate::workspace::WorkspaceError;

/// A request the service cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is invalid (a missing file, a bad name, results that do
    /// not answer the pending calls...); the text names the problem.
    #[error("{0}")]
    Invalid(String),
    /// Token malformed, forged or from another key.
    #[error("Invalid continuation token")]
    InvalidToken,
    /// Token past its expiry.
    #[error("Execution expired")]
    Expired,
    /// Round already continued.
    #[error("Continuation already used")]
    AlreadyUsed,
    /// Round being continued by another request now.
    #[error("Continuation in progress: this round is being continued by another request")]
    InProgress,
    /// The execution was cancelled.
    #[error("{}", Failure::Cancelled)]
    Cancelled,
    /// Another request with the same client request id is being served.
    #[error("A request with this X-LibreChat-Code-Request-ID is already in progress")]
    RequestInFlight,
    /// The runtime session runs another call, and did not finish it within
    /// the wait.
    #[error("runtime_session_busy")]
    RuntimeSessionBusy,
    /// A cell of the session runs or waits at tool calls (or the cell
    /// asked for is not the next).
    #[error("session_busy")]
    SessionBusy,
    /// The session holds as many cells (or as much run time to replay) as
    /// it may; the text says which.
    #[error("session_full")]
    SessionFull(String),
    /// Unknown or deleted execution, or another key's.
    #[error("Execution not found or expired")]
    NotFound,
    /// Unknown file, or another key's.
    #[error("File not found")]
    FileNotFound,
    /// The execution paused more often than the limit allows; it ended.
    #[error("{}", Failure::TooManyRounds(*.0))]
    TooManyRounds(usize),
    /// The key stores as much as it may; some of it expires in
    /// `retry_after` seconds.
    #[error("rate_limited")]
    StorageFull {
        /// Seconds until some of the key's storage expires.
        retry_after: u64,
        /// The sentence that says which limit.
        message: String,
    },
    /// The request alone is over the per-key storage cap.
    #[error("{0}")]
    StorageTooLarge(String),
    /// A stored value that does not decode.
    #[error("{0}")]
    Corrupt(String),
    /// The store failed.
    #[error("store failure: {0}")]
    Store(String),
    /// The engine could not run the execution (no child, a sandbox
    /// failure); the execution is left as it was.
    #[error("{0}")]
    Unavailable(String),
}

impl ServiceError {
    /// A store failure.
    pub(crate) fn store(error: impl std::fmt::Display) -> ServiceError {
        ServiceError::Store(error.to_string())
    }
}

impl From<WorkspaceError> for ServiceError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Invalid(message) => ServiceError::Invalid(message),
            WorkspaceError::Corrupt(message) => ServiceError::Corrupt(message),
            WorkspaceError::Store(error) => ServiceError::store(error),
        }
    }
}

impl From<Refusal> for ServiceError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Full { retry_after, .. } => ServiceError::StorageFull {
                retry_after,
                message: refusal.to_string(),
            },
            Refusal::TooLarge { .. } => ServiceError::StorageTooLarge(refusal.to_string()),
        }
    }
}
