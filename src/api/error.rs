//! The one place where failures become HTTP responses.
//!
//! Invariant: every error body is JSON `{"status": "error", "error": "..."}`
//! with the contract's exact text for the cases the contract names; no HTML,
//! no panic message, no internal detail beyond the one line.

use super::views::ErrorView;
use crate::service::ServiceError;
use crate::workspace::WorkspaceError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use utoipa::IntoResponses;

/// A request that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed body or bad field (400).
    #[error("{0}")]
    BadRequest(String),
    /// The client asked for an execution profile baton does not offer (409).
    #[error("execution_profile_mismatch")]
    ProfileMismatch(String),
    /// Missing or wrong API key (401).
    #[error("Missing or invalid API key")]
    Unauthorized,
    /// Body over the size limit (413).
    #[error("Request body too large (limit {0} bytes)")]
    TooLarge(usize),
    /// The body did not arrive in time (408).
    #[error("Request body not received within {0} s")]
    BodyTimeout(u64),
    /// The service refused or failed the request.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<WorkspaceError> for ApiError {
    fn from(error: WorkspaceError) -> Self {
        ApiError::Service(error.into())
    }
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::ProfileMismatch(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Service(error) => service_status(error),
        }
    }
}

/// The HTTP status of each of the service's errors.
pub(crate) fn service_status(error: &ServiceError) -> StatusCode {
    match error {
        ServiceError::Invalid(_)
        | ServiceError::InvalidToken
        | ServiceError::Expired
        | ServiceError::TooManyRounds(_) => StatusCode::BAD_REQUEST,
        ServiceError::AlreadyUsed
        | ServiceError::InProgress
        | ServiceError::Cancelled
        | ServiceError::RequestInFlight => StatusCode::CONFLICT,
        ServiceError::NotFound | ServiceError::FileNotFound => StatusCode::NOT_FOUND,
        ServiceError::StorageTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        ServiceError::StorageFull { .. } => StatusCode::TOO_MANY_REQUESTS,
        ServiceError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ServiceError::Store(_) | ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Error answers every authenticated route may give, for the OpenAPI
/// description (the statuses [`ApiError::status`] gives).
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum Failures {
    /// A malformed or invalid request: the `error` line says what.
    #[response(status = 400)]
    BadRequest(ErrorView),
    /// No API key, or an unknown one.
    #[response(status = 401)]
    Unauthorized(ErrorView),
    /// No such execution, file or endpoint (another key's answer the same).
    #[response(status = 404)]
    NotFound(ErrorView),
    /// The round was continued already, is being continued, or was cancelled.
    #[response(status = 409)]
    Conflict(ErrorView),
    /// The body did not arrive within the body timeout.
    #[response(status = 408)]
    BodyTimeout(ErrorView),
    /// The body is over the limit, or alone over the key's storage cap.
    #[response(status = 413)]
    TooLarge(ErrorView),
    /// The key stores as much as it may (`error` is `rate_limited`, with
    /// `retry_after_seconds` and a `Retry-After` header).
    #[response(status = 429)]
    StorageFull(ErrorView),
    /// A stored record is corrupt.
    #[response(status = 500)]
    Corrupt(ErrorView),
    /// The server cannot serve now (its store or sandbox failed).
    #[response(status = 503)]
    Unavailable(ErrorView),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut view = ErrorView::new(self.to_string());
        match &self {
            ApiError::ProfileMismatch(message) => view.message = Some(message.clone()),
            ApiError::Service(ServiceError::StorageFull {
                retry_after,
                message,
            }) => {
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
