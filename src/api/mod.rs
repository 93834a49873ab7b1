//! HTTP: the routes of `PROTOCOL.md` (with and without `/v1`), auth, request
//! decoding and response shapes. Handlers only translate; the service does
//! the work.
//!
//! Invariants:
//! - Every route but `/health` and `/metrics` requires an API key, compared
//!   in constant time.
//! - Failures of the user's code answer 200 with `status: "error"`; failures
//!   of the request answer with [`error::ApiError`]'s status and text.

pub mod error;
mod files;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::service::{FileRef, Reply, Service, StartRequest, ToolResult, call_view};
use crate::token::key_identity;
use crate::tools::{ToolDef, WireTool};
use error::ApiError;

/// Shared state of the handlers.
pub struct AppState {
    /// The service.
    pub service: Service,
    /// SHA-256 of each accepted API key (compared in constant time).
    pub api_key_hashes: Vec<[u8; 32]>,
    /// Renders `/metrics`.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Request body limit, bytes.
    pub body_limit: usize,
}

/// The router.
pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.body_limit;
    let protocol = Router::new()
        .route("/exec/programmatic", post(exec))
        .route("/exec/programmatic/cancel", post(cancel))
        .route("/executions/{id}", get(inspect))
        .route("/upload", post(files::upload))
        .route("/files/{session_id}", get(files::list))
        .route("/download/{session_id}/{file_id}", get(files::download));
    Router::new()
        .merge(protocol.clone())
        .nest("/v1", protocol)
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

async fn not_found() -> Response {
    let body = Json(json!({"status": "error", "error": "no such endpoint"}));
    (StatusCode::NOT_FOUND, body).into_response()
}

async fn method_not_allowed() -> Response {
    let body = Json(json!({"status": "error", "error": "method not allowed"}));
    (StatusCode::METHOD_NOT_ALLOWED, body).into_response()
}

/// The body, or the contract's answer to one that could not be read.
fn read_body(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(state.body_limit)
        } else {
            ApiError::BadRequest(format!("invalid request body: {rejection}"))
        }
    })
}

async fn health(State(state): State<Arc<AppState>>) -> Json<Value> {
    let engine = state.service.engine();
    Json(json!({
        "status": "ok",
        "parked": engine.parked_count(),
        "idle_children": engine.idle_count(),
    }))
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let engine = state.service.engine();
    metrics::gauge!("baton_parked_children").set(engine.parked_count() as f64);
    let body = state
        .metrics
        .as_ref()
        .map(|m| m.render())
        .unwrap_or_default();
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

/// The caller's API key identity, or 401.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<[u8; 8], ApiError> {
    let key = presented_key(headers).ok_or(ApiError::Unauthorized)?;
    let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    let mut matched = 0u8;
    for accepted in &state.api_key_hashes {
        matched |= constant_time_eq(&digest, accepted);
    }
    if matched == 1 {
        Ok(key_identity(key))
    } else {
        Err(ApiError::Unauthorized)
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> u8 {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    u8::from(difference == 0)
}

fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(key.trim());
    }
    let auth = headers.get("authorization")?.to_str().ok()?.trim();
    let (scheme, key) = auth.split_once(' ')?;
    let scheme = scheme.to_ascii_lowercase();
    (scheme == "bearer" || scheme == "apikey").then(|| key.trim())
}

#[derive(Deserialize)]
struct StartBody {
    code: Option<Value>,
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    timeout: Option<Value>,
    #[serde(default)]
    files: Option<Vec<FileRef>>,
}

#[derive(Deserialize)]
struct ContinueBody {
    continuation_token: Value,
    #[serde(default)]
    tool_results: Option<Vec<ToolResult>>,
}

#[derive(Deserialize)]
struct CancelBody {
    request_id: String,
}

/// The caller's identity and the request body, or the request's error.
fn authorized_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<([u8; 8], Bytes), ApiError> {
    let owner = authorize(state, headers)?;
    Ok((owner, read_body(state, body)?))
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

async fn exec(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (owner, body) = authorized_body(&state, &headers, body)?;
    let value: Value = parse_json(&body)?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "invalid request body: expected a JSON object".into(),
        ));
    }
    let reply = if value
        .get("continuation_token")
        .is_some_and(|t| !t.is_null())
    {
        let body: ContinueBody = parse_json(&body)?;
        let token = body
            .continuation_token
            .as_str()
            .ok_or(ApiError::InvalidToken)?;
        let results = body.tool_results.ok_or_else(|| {
            ApiError::BadRequest("tool_results is required with a continuation_token".into())
        })?;
        state.service.continue_with(owner, token, results).await?
    } else {
        let request = start_request(parse_json(&body)?, &headers)?;
        state.service.start(owner, request).await?
    };
    Ok(Json(reply_json(reply)).into_response())
}

fn start_request(body: StartBody, headers: &HeaderMap) -> Result<StartRequest, ApiError> {
    let code = match body.code {
        Some(Value::String(code)) if !code.trim().is_empty() => code,
        Some(Value::String(_)) => return Err(ApiError::BadRequest("code is empty".into())),
        Some(_) => return Err(ApiError::BadRequest("code must be a string".into())),
        None => return Err(ApiError::BadRequest("code is required".into())),
    };
    let timeout_ms = match body.timeout {
        None | Some(Value::Null) => 60_000,
        Some(value) => value
            .as_f64()
            .filter(|t| (1000.0..=300_000.0).contains(t))
            .map(|t| t as u64)
            .ok_or_else(|| {
                ApiError::BadRequest(
                    "timeout must be a number of milliseconds from 1000 to 300000".into(),
                )
            })?,
    };
    let tools: Vec<ToolDef> = body
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(Into::into)
        .collect();
    let request_id = headers
        .get("x-librechat-code-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(StartRequest {
        code,
        tools,
        session_id: body.session_id,
        timeout_ms,
        request_id,
        files: body.files.unwrap_or_default(),
    })
}

fn reply_json(reply: Reply) -> Value {
    match reply {
        Reply::Paused {
            execution_id,
            session_id,
            token,
            calls,
        } => json!({
            "status": "tool_call_required",
            "execution_id": execution_id,
            "session_id": session_id,
            "continuation_token": token,
            "tool_calls": calls.iter().map(call_view).collect::<Vec<_>>(),
        }),
        Reply::Ended {
            execution_id,
            session_id,
            error: None,
            stdout,
            stderr,
            files,
        } => json!({
            "status": "completed",
            "execution_id": execution_id,
            "session_id": session_id,
            "stdout": stdout,
            "stderr": stderr,
            "files": files.iter().map(files::produced_view).collect::<Vec<_>>(),
        }),
        Reply::Ended {
            execution_id,
            session_id,
            error: Some(error),
            stdout,
            stderr,
            ..
        } => json!({
            "status": "error",
            "execution_id": execution_id,
            "session_id": session_id,
            "error": error,
            "stdout": stdout,
            "stderr": stderr,
        }),
    }
}

async fn cancel(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (owner, body) = authorized_body(&state, &headers, body)?;
    let body: CancelBody = parse_json(&body)?;
    if state.service.cancel(owner, &body.request_id).await? {
        Ok(Json(json!({"status": "cancelled", "request_id": body.request_id})).into_response())
    } else {
        Err(ApiError::NotFound)
    }
}

async fn inspect(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let owner = authorize(&state, &headers)?;
    state.service.inspect(owner, &id).map(Json)
}
