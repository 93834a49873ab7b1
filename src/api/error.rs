//! The one place where failures become HTTP responses.
//!
//! Invariant: every error body is JSON `{"status": "error", "error": "..."}`
//! with the contract's exact text for the cases the contract names; no HTML,
//! no panic message, no internal detail beyond the one line.

use super::views::ErrorView;
use crate::auth::{AuthError, Denial};
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
    /// `X-CodeAPI-Expected-Profile` names no profile (400).
    #[error("invalid_execution_profile")]
    InvalidProfile(String),
    /// A language or a feature baton does not run (400, with the code
    /// LibreChat's client takes as permanent).
    #[error("unsupported_capability")]
    Unsupported(String),
    /// No credential, or one that is refused (401); the reason is logged,
    /// never told.
    #[error("{}", unauthorized_text(.0))]
    Unauthorized(Denial),
    /// Several credentials at once (400).
    #[error("{}", AuthError::Ambiguous)]
    Ambiguous,
    /// Body over the size limit (413).
    #[error("Request body too large (limit {0} bytes)")]
    TooLarge(usize),
    /// The body did not arrive in time (408).
    #[error("Request body not received within {0} s")]
    BodyTimeout(u64),
    /// The bodies of requests under way fill the server's budget for
    /// them (503, with `Retry-After`).
    #[error("The server is receiving as many request bodies as it holds at once ({} MiB, --max-bodies-in-flight-mb); retry shortly", .0 >> 20)]
    Busy(usize),
    /// The service refused or failed the request.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// The one line a refused caller is told.
fn unauthorized_text(denial: &Denial) -> &'static str {
    match denial {
        Denial::Missing => {
            "Missing credentials: send Authorization: Bearer <token> (LibreChat's Code API JWT) or X-API-Key"
        }
        Denial::UnknownKey | Denial::KeyNotAccepted | Denial::TokenNotAccepted => {
            "Invalid credentials"
        }
        Denial::Token(_) => "Invalid bearer token",
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        match error {
            AuthError::Refused(denial) => ApiError::Unauthorized(denial),
            AuthError::Ambiguous => ApiError::Ambiguous,
        }
    }
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
            ApiError::BadRequest(_)
            | ApiError::InvalidProfile(_)
            | ApiError::Unsupported(_)
            | ApiError::Ambiguous => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
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
        | ServiceError::RequestInFlight
        | ServiceError::RuntimeSessionBusy
        | ServiceError::SessionBusy
        | ServiceError::SessionFull(_) => StatusCode::CONFLICT,
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
    /// No credential, or one that is refused (an unknown API key, a token
    /// that does not verify).
    #[response(status = 401)]
    Unauthorized(ErrorView),
    /// No such execution, file or endpoint (another key's answer the same).
    #[response(status = 404)]
    NotFound(ErrorView),
    /// The round was continued already, is being continued, or was
    /// cancelled; or the runtime session is busy (`runtime_session_busy`);
    /// or a Python session runs another cell (`session_busy`) or holds all
    /// the cells it may (`session_full`).
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
    /// The server cannot serve now: its store or sandbox failed, or the
    /// bodies of requests under way fill its budget for them (then with
    /// `Retry-After`).
    #[response(status = 503)]
    Unavailable(ErrorView),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut view = ErrorView::new(self.to_string());
        match &self {
            ApiError::InvalidProfile(message) | ApiError::Unsupported(message) => {
                view.message = Some(message.clone());
            }
            ApiError::Service(ServiceError::RuntimeSessionBusy) => {
                view.message = Some("Runtime session is busy".into());
            }
            ApiError::Service(ServiceError::SessionBusy) => {
                view.message = Some(
                    "A cell of this session runs or waits at tool calls (or the cell named is not the next)"
                        .into(),
                );
            }
            ApiError::Service(ServiceError::SessionFull(message)) => {
                view.message = Some(message.clone());
            }
            ApiError::Service(ServiceError::StorageFull {
                retry_after,
                message,
            }) => {
                view.message = Some(message.clone());
                return retrying(self.status(), view, *retry_after);
            }
            ApiError::Busy(_) => return retrying(self.status(), view, 1),
            _ => {}
        }
        (self.status(), Json(view)).into_response()
    }
}

/// An answer that says when to retry: `Retry-After` and
/// `retry_after_seconds`.
fn retrying(status: StatusCode, mut view: ErrorView, seconds: u64) -> Response {
    view.retry_after_seconds = Some(seconds);
    let header = [(axum::http::header::RETRY_AFTER, seconds.to_string())];
    (status, header, Json(view)).into_response()
}
