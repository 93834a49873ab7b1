//! The routes of Python sessions: make one, run its next cell, look at it,
//! list and delete them. The cells' answers are those of
//! `/exec/programmatic` with a `session` tag, and a paused cell is
//! continued there.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::error::{ApiError, Failures};
use super::request::{self, CellBody, SessionBody};
use super::request_log::RequestLog;
use super::views::{ExecReply, SessionListView, SessionView};
use super::{AppState, client_request_id, read_body};
use crate::auth::Principal;
use crate::timing::step;

/// `POST /sessions`: a new Python session.
#[utoipa::path(post, path = "/sessions", tag = "sessions",
    request_body(content = SessionBody, description = "Its lifetime (optional; the body may be empty)"),
    responses((status = 201, description = "The session, with no cell yet", body = SessionView), Failures))]
pub(super) async fn create(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(&state, body)?;
    let ttl = request::decode_session(&body)?;
    let info = state.service.create_session(principal.owner, ttl).await?;
    Ok((StatusCode::CREATED, Json(SessionView::new(info, true))).into_response())
}

/// `POST /sessions/{session_id}/exec`: runs the session's next cell.
#[utoipa::path(post, path = "/sessions/{session_id}/exec", tag = "sessions",
    request_body(content = CellBody, description = "The cell"),
    params(("session_id" = String, Path, description = "The session (`ps_…`)"),
        ("x-librechat-code-request-id" = Option<String>, Header,
        description = "The client's id for this request, for cancel")),
    responses((status = 200, description = "Paused at tool calls (continue through /exec/programmatic), completed, or failed in the code; with `session`",
        body = ExecReply), Failures))]
pub(super) async fn exec(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(&state, body)?;
    let (start, cell) =
        step!("decode").in_scope(|| request::decode_cell(&body, client_request_id(&headers)))?;
    let log = RequestLog::begin("cell", principal.owner);
    let result = state
        .service
        .exec_cell(&principal, &session_id, start, cell)
        .instrument(step!("cell"))
        .await;
    log.finish(result.as_ref());
    Ok(Json(ExecReply::from(result?)).into_response())
}

/// `GET /sessions/{session_id}`: the session and the names it holds.
#[utoipa::path(get, path = "/sessions/{session_id}", tag = "sessions",
    params(("session_id" = String, Path, description = "The session (`ps_…`)")),
    responses((status = 200, description = "The session", body = SessionView), Failures))]
pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(session_id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let info = state
        .service
        .session_info(principal.owner, &session_id)
        .await?;
    Ok(Json(SessionView::new(info, true)))
}

/// `GET /sessions`: the caller's sessions.
#[utoipa::path(get, path = "/sessions", tag = "sessions",
    responses((status = 200, description = "The caller's sessions, oldest first", body = SessionListView), Failures))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<SessionListView>, ApiError> {
    let sessions = state.service.list_sessions(principal.owner).await?;
    Ok(Json(SessionListView {
        sessions: sessions
            .into_iter()
            .map(|info| SessionView::new(info, false))
            .collect(),
    }))
}

/// `DELETE /sessions/{session_id}`: ends the session (a cell that holds it
/// is cancelled) and deletes its journals.
#[utoipa::path(delete, path = "/sessions/{session_id}", tag = "sessions",
    params(("session_id" = String, Path, description = "The session (`ps_…`)")),
    responses((status = 204, description = "Deleted"), Failures))]
pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(session_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .service
        .delete_session(principal.owner, &session_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
