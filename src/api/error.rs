//! The one place where failures become HTTP responses.
//!
//! Invariant: every error body is JSON `{"status": "error", "error": "..."}`
//! with the contract's exact text for the cases the contract names; no HTML,
//! no panic message, no internal detail beyond the one line.

use super::views::ErrorView;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A request that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed body or bad field (400).
    #[error("{0}")]
    BadRequest(String),
    /// Token malformed, forged or from another key (400).
    #[error("Invalid continuation token")]
    InvalidToken,
    /// Token past its expiry (400).
    #[error("Execution expired")]
    Expired,
    /// Round already continued (409).
    #[error("Continuation already used")]
    AlreadyUsed,
    /// Round being continued by another request now (409).
    #[error("Continuation in progress: this round is being continued by another request")]
    InProgress,
    /// The execution was cancelled (409).
    #[error("Execution was cancelled")]
    Cancelled,
    /// The client asked for an execution profile baton does not offer (409).
    #[error("execution_profile_mismatch")]
    ProfileMismatch(String),
    /// Another request with the same client request id is being served (409).
    #[error("A request with this X-LibreChat-Code-Request-ID is already in progress")]
    RequestInFlight,
    /// Unknown or deleted execution (404).
    #[error("Execution not found or expired")]
    NotFound,
    /// Unknown file, or another key's (404).
    #[error("File not found")]
    FileNotFound,
    /// Round limit (400).
    #[error("Exceeded maximum round trips ({0})")]
    TooManyRounds(usize),
    /// Missing or wrong API key (401).
    #[error("Missing or invalid API key")]
    Unauthorized,
    /// Body over the size limit (413).
    #[error("Request body too large (limit {0} bytes)")]
    TooLarge(usize),
    /// The key stores as much as it may; some of it expires in
    /// `retry_after` seconds (429, `rate_limited`).
    #[error("rate_limited")]
    StorageFull {
        /// Seconds until some of the key's storage expires.
        retry_after: u64,
        /// The sentence that says which limit.
        message: String,
    },
    /// The request alone is over the per-key storage cap (413).
    #[error("{0}")]
    StorageTooLarge(String),
    /// The body did not arrive in time (408).
    #[error("Request body not received within {0} s")]
    BodyTimeout(u64),
    /// A stored record that does not decode (500).
    #[error("{0}")]
    Corrupt(String),
    /// The server failed (500 or 503).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_)
            | ApiError::InvalidToken
            | ApiError::Expired
            | ApiError::TooManyRounds(_) => StatusCode::BAD_REQUEST,
            ApiError::AlreadyUsed
            | ApiError::InProgress
            | ApiError::Cancelled
            | ApiError::RequestInFlight
            | ApiError::ProfileMismatch(_) => StatusCode::CONFLICT,
            ApiError::NotFound | ApiError::FileNotFound => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::TooLarge(_) | ApiError::StorageTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::StorageFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Internal(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut view = ErrorView::new(self.to_string());
        match &self {
            ApiError::ProfileMismatch(message) => view.message = Some(message.clone()),
            ApiError::StorageFull {
                retry_after,
                message,
            } => {
                view.message = Some(message.clone());
                view.retry_after_seconds = Some(*retry_after);
                let retry = retry_after.to_string();
                return (
                    self.status(),
                    [(axum::http::header::RETRY_AFTER, retry)],
                    Json(view),
                )
                    .into_response();
            }
            _ => {}
        }
        (self.status(), Json(view)).into_response()
    }
}
