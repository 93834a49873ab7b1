//! HTTP: the routes of `PROTOCOL.md` (with and without `/v1`), auth, request
//! decoding and response shapes. Handlers only translate; the service does
//! the work.
//!
//! Invariants:
//! - Every route but `/health`, `/metrics`, `/openapi.json` and the
//!   console's page and assets (`/ui`) requires a credential the
//!   [`crate::auth::Authenticator`] accepts (an API key, or LibreChat's
//!   token), checked before any body is read; the principal it gives is
//!   handed to the handler, which acts for it alone.
//! - A request that names an execution profile (`X-CodeAPI-Expected-Profile`)
//!   names `default` or `stateful`, or gets 400 before anything else; every
//!   answer says the profile it was served in (`X-CodeAPI-Execution-Profile`).
//! - Failures of the user's code answer 200 with `status: "error"`; failures
//!   of the request answer with [`error::ApiError`]'s status and text.

pub mod body_budget;
mod console;
pub mod error;
mod files;
pub mod forward;
pub mod listener;
pub mod openapi;
pub mod profile;
pub mod request;
mod request_log;
mod sessions;
mod unread_body;
pub mod views;

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use tracing::Instrument;

use crate::auth::{AuthError, Authenticator, Credentials, Principal, Provider};
use crate::service::{
    CancelOutcome, Cancellation, Continued, ListQuery, Routing, Service, ServiceError,
};
use crate::timing::step;
use body_budget::BodyBudget;
use error::ApiError;
use error::Failures;
use profile::Profile;
use request::{CancelBody, ExecBody, ExecRequest, PlainBody, StubsBody};
use request_log::{Cancelled, RequestLog};
use views::{
    CancelView, ErrorView, ExecReply, ExecutionListView, ExecutionView, HealthView, PlainExecView,
    StubsView,
};

/// Shared state of the handlers.
pub struct AppState {
    /// The service.
    pub service: Service,
    /// Who may call, and as whom.
    pub auth: Authenticator,
    /// Renders `/metrics`.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Request body limit, bytes.
    pub body_limit: usize,
    /// Body limit of the upload routes, bytes.
    pub upload_limit: usize,
    /// How long a request body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// Sends continuations to the node whose child is parked for them
    /// (when other nodes share the store).
    pub forwarder: Option<forward::Forwarder>,
    /// The bytes of request bodies held at once.
    pub bodies: BodyBudget,
}

/// How much of a body over the limit is read (and thrown away) so that
/// the client, which is still sending, can read the 413.
const DRAIN_LIMIT: usize = 64 << 20;

/// Before any body is read: the caller's credentials (401 at once, the
/// body never read; the principal goes to the handler), and a body
/// announced over the route's limit (read up to [`DRAIN_LIMIT`] and thrown
/// away, then a readable 413).
async fn guard(
    State(state): State<Arc<AppState>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let authenticated = step!("auth").in_scope(|| authenticate(&state, request.headers()));
    let principal = match authenticated {
        Ok(principal) => principal,
        Err(error) => return error.into_response(),
    };
    let limit = state.body_limit_of(request.uri().path());
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|length| length > limit) {
        drain(request.into_body(), state.body_timeout).await;
        return ApiError::TooLarge(limit).into_response();
    }
    // Held until the answer is made: the handler holds the body till then.
    let _room = match state
        .bodies
        .reserve(
            principal.owner,
            request.headers(),
            limit,
            state.body_timeout,
        )
        .await
    {
        Ok(room) => room,
        Err(exhausted) => return ApiError::Busy(exhausted.budget).into_response(),
    };
    request.extensions_mut().insert(principal);
    next.run(request).await
}

impl AppState {
    /// The body limit of the route at `path`: the upload limit for the
    /// upload routes, the body limit for the others.
    fn body_limit_of(&self, path: &str) -> usize {
        let path = path.strip_prefix("/v1").unwrap_or(path);
        if path == "/upload" || path == "/upload/batch" {
            self.upload_limit
        } else {
            self.body_limit
        }
    }
}

/// Reads and discards a body, up to [`DRAIN_LIMIT`] bytes and `timeout`.
async fn drain(mut body: axum::body::Body, timeout: std::time::Duration) {
    use http_body_util::BodyExt;
    let _ = tokio::time::timeout(timeout, async {
        let mut read = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |data| data.len());
            if read > DRAIN_LIMIT {
                break;
            }
        }
    })
    .await;
}

/// The router.
pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.body_limit;
    let body_timeout = state.body_timeout;
    let uploads = Router::new()
        .route("/upload", post(files::upload))
        .route("/upload/batch", post(files::upload_batch))
        .layer(DefaultBodyLimit::max(state.upload_limit));
    let protocol = Router::new()
        .route("/exec", post(exec_plain))
        .route("/exec/programmatic", post(exec))
        .route("/exec/programmatic/cancel", post(cancel))
        .route("/executions", get(list_executions))
        .route("/executions/{id}", get(inspect))
        .route("/executions/{id}/cancel", post(cancel_execution))
        .merge(uploads)
        .route("/files/{session_id}", get(files::list))
        .route("/files/{session_id}/{file_id}", delete(files::delete_file))
        .route(
            "/sessions/{session_id}/objects/{file_id}",
            get(files::object).delete(files::delete),
        )
        .route("/sessions", post(sessions::create).get(sessions::list))
        .route(
            "/sessions/{session_id}",
            get(sessions::show).delete(sessions::delete),
        )
        .route("/sessions/{session_id}/exec", post(sessions::exec))
        .route("/download/{session_id}/{file_id}", get(files::download))
        .route("/tools/stubs", post(tool_stubs))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            body_timeout,
        ));
    Router::new()
        .merge(protocol.clone())
        .nest("/v1", protocol)
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/ui", get(console::page))
        .route("/ui/", get(console::page))
        .route("/ui/console.js", get(console::script))
        .route("/ui/console.css", get(console::style))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn(profile::answer_in_profile))
        .layer(axum::middleware::from_fn(unread_body::close_if_unread))
        .with_state(state)
}

async fn not_found() -> Response {
    let body = Json(ErrorView::new("no such endpoint"));
    (StatusCode::NOT_FOUND, body).into_response()
}

async fn method_not_allowed() -> Response {
    let body = Json(ErrorView::new("method not allowed"));
    (StatusCode::METHOD_NOT_ALLOWED, body).into_response()
}

/// The body, or the contract's answer to one that could not be read.
fn read_body(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(state.body_limit)
        } else if timed_out(&rejection) {
            ApiError::BodyTimeout(state.body_timeout.as_secs())
        } else {
            ApiError::BadRequest(format!("invalid request body: {rejection}"))
        }
    })
}

/// Whether a body could not be read because it took too long.
fn timed_out(rejection: &BytesRejection) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(error) = source {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// `GET /health`: whether executions can be served now, with the pool's
/// counts. 503 while the sandbox is not ready (at start, and after its
/// zygote died until the new one has a ready child), or while the database
/// does not answer.
#[utoipa::path(get, path = "/health", tag = "service", security(()),
    responses((status = 200, description = "Executions can be served", body = HealthView),
        (status = 503, description = "The sandbox is not ready yet, or is recovering", body = HealthView)))]
async fn health(State(state): State<Arc<AppState>>) -> Response {
    let engine = state.service.engine();
    let sandbox_ready = engine.sandbox_ready();
    if !sandbox_ready {
        engine.refill();
    }
    let store = match state.service.store_check().await {
        Ok(()) => "ok".to_owned(),
        Err(error) => error.to_string(),
    };
    let ready = sandbox_ready && store == "ok";
    let view = HealthView {
        status: if ready { "ok" } else { "degraded" },
        store,
        sandbox: if sandbox_ready {
            "ready"
        } else {
            "starting: no child of the current zygote is ready yet"
        },
        parked: engine.parked_count(),
        idle_children: engine.idle_count(),
        zygote_restarts: engine.zygote_deaths(),
        auth: state.auth.provider().name(),
        warning: (state.auth.provider() == Provider::None).then_some(
            "no credential is checked (--auth-provider none): anyone who reaches this server can run code, and every caller shares every file and execution",
        ),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(view)).into_response()
}

/// `GET /metrics`: Prometheus text.
#[utoipa::path(get, path = "/metrics", tag = "service", security(()),
    responses((status = 200, description = "Prometheus metrics", content_type = "text/plain", body = String)))]
async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let engine = state.service.engine();
    metrics::gauge!("baton_parked_children").set(engine.parked_count() as f64);
    metrics::gauge!("baton_parked_bytes").set(engine.parked_bytes() as f64);
    metrics::gauge!("baton_idle_children").set(engine.idle_count() as f64);
    let body = state
        .metrics
        .as_ref()
        .map(|m| m.render())
        .unwrap_or_default();
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

/// The principal a request's credentials give, or why it is refused
/// (counted and logged by reason).
pub(crate) fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // `Bearer <x>` or `ApiKey <x>`: the `<x>`; another scheme is a
    // credential too (refused), never no credential at all.
    let authorization = text("authorization").map(|value| {
        let value = value.trim();
        match value.split_once(' ') {
            Some((scheme, rest))
                if scheme.eq_ignore_ascii_case("bearer")
                    || scheme.eq_ignore_ascii_case("apikey") =>
            {
                rest.trim()
            }
            _ => value,
        }
    });
    let credentials = Credentials {
        api_key: text("x-api-key"),
        authorization,
    };
    state.auth.authenticate(&credentials).map_err(|error| {
        if let AuthError::Refused(denial) = &error {
            metrics::counter!("baton_auth_refused_total", "reason" => denial.label())
                .increment(1);
            tracing::warn!(reason = denial.label(), detail = %denial, "request refused: not authenticated");
        }
        ApiError::from(error)
    })
}

/// `POST /exec`: runs code with no tools.
#[utoipa::path(post, path = "/exec", tag = "exec",
    request_body = PlainBody,
    params(("x-codeapi-expected-profile" = Option<String>, Header,
        description = "`default` (or absent), or `stateful`: with a `runtime_session_hint`, the call runs in that runtime session; anything else is answered 400 `invalid_execution_profile`"),
        ("x-librechat-code-request-id" = Option<String>, Header,
        description = "The client's id for this request, for cancel")),
    responses((status = 200, description = "The code ran (its failures are in stderr and code)", body = PlainExecView),
        Failures))]
async fn exec_plain(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let began = std::time::Instant::now();
    let body = read_body(&state, body)?;
    let profile = profile::expected(&headers)?;
    let decoded =
        step!("decode").in_scope(|| request::decode_plain(&body, client_request_id(&headers)))?;
    let log = RequestLog::begin("exec", principal.owner);
    let in_session = match (profile, decoded.runtime_session_hint) {
        (Profile::Stateful, Some(hint)) => Some(hint),
        _ => None,
    };
    let result = match &in_session {
        Some(hint) => state
            .service
            .start_in_runtime_session(&principal, hint, decoded.start)
            .instrument(step!("start"))
            .await
            .map(|(reply, session)| (reply, Some(session))),
        None => state
            .service
            .start(&principal, decoded.start)
            .instrument(step!("start"))
            .await
            .map(|reply| (reply, None)),
    };
    log.finish(result.as_ref().map(|(reply, _)| reply));
    let (reply, session) = result?;
    let wall_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut view = PlainExecView::from_reply(reply, wall_ms).ok_or_else(|| {
        ApiError::Service(ServiceError::Unavailable(
            "code without tools paused".into(),
        ))
    })?;
    if let Some(session) = session {
        view.runtime_session_id = Some(session.id);
        view.runtime_status = Some(session.status.name());
    }
    Ok(Json(view).into_response())
}

/// `POST /exec/programmatic`: start code, or continue it with tool results.
#[utoipa::path(post, path = "/exec/programmatic", tag = "exec",
    request_body(content = ExecBody, description = "A start or a continuation"),
    params(("x-librechat-code-request-id" = Option<String>, Header,
        description = "The client's id for this request (a start or a continuation), for cancel")),
    responses((status = 200, description = "Paused at tool calls, completed, or failed in the code",
        body = ExecReply), Failures))]
async fn exec(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(&state, body)?;
    let owner = principal.owner;
    let request_id = client_request_id(&headers);
    let decoded = step!("decode").in_scope(|| request::decode_exec(&body, request_id))?;
    let (log, result) = match decoded {
        ExecRequest::Continue { token, results } => {
            let log = RequestLog::begin("continue", owner);
            // The token first: a forged one costs no tree of its results.
            let checked = state
                .service
                .check_token(owner, &token)
                .map_err(ApiError::from)
                .and_then(|_| results.decode());
            let results = match checked {
                Ok(results) => results,
                Err(error) => {
                    if let ApiError::Service(refused) = &error {
                        log.finish(Err(refused));
                    }
                    return Err(error);
                }
            };
            let routing = if state.forwarder.is_some() && !headers.contains_key(forward::FORWARDED)
            {
                Routing::ToHolder
            } else {
                Routing::Here
            };
            let continued = state
                .service
                .continue_with(owner, &token, results, request_id, routing)
                .instrument(step!("continue"))
                .await;
            let result = match continued {
                Ok(Continued::Reply(reply)) => Ok(*reply),
                Ok(Continued::HeldAt { address, results }) => {
                    let forwarded =
                        forward_to_holder(&state, owner, &address, &headers, &body).await;
                    if let Some(response) = forwarded {
                        return Ok(response);
                    }
                    // The holder did not answer: the round is served here.
                    continue_here(&state, owner, &token, results, request_id).await
                }
                Err(error) => Err(error),
            };
            (log, result)
        }
        ExecRequest::Start(start) => {
            let log = RequestLog::begin("start", owner);
            let result = state
                .service
                .start(&principal, start)
                .instrument(step!("start"))
                .await;
            (log, result)
        }
    };
    log.finish(result.as_ref());
    let reply = result?;
    Ok(step!("respond").in_scope(|| Json(ExecReply::from(reply)).into_response()))
}

/// The continuation (`headers`, `body`) sent to the node at `address`,
/// whose child is parked for it; its answer, or `None` when it must be
/// served here (see `forward.rs`).
async fn forward_to_holder(
    state: &AppState,
    owner: [u8; 8],
    address: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Response> {
    let forwarder = state.forwarder.as_ref()?;
    let answer = forwarder
        .forward(address, "/exec/programmatic", headers, body.clone())
        .instrument(step!("forward"))
        .await;
    let outcome = if answer.is_some() {
        "answered"
    } else {
        "served_here"
    };
    count_forward(
        "baton_forwarded_continuations_total",
        "continue",
        owner,
        address,
        outcome,
    );
    answer
}

/// Counts a request forwarded to the node that holds an execution's child
/// (`metric`, by `outcome`) and logs it, one `baton::requests` line.
fn count_forward(
    metric: &'static str,
    request: &'static str,
    owner: [u8; 8],
    address: &str,
    outcome: &'static str,
) {
    metrics::counter!(metric, "outcome" => outcome).increment(1);
    tracing::info!(
        target: "baton::requests",
        request,
        key = %hex::encode(owner),
        forwarded_to = %address,
        outcome,
        "request sent to the node that holds the execution's child"
    );
}

/// The continuation of `token` with `results` served on this node,
/// whichever node holds its child.
async fn continue_here(
    state: &AppState,
    owner: [u8; 8],
    token: &str,
    results: Vec<crate::service::ToolResult>,
    request_id: Option<&str>,
) -> Result<crate::service::Reply, ServiceError> {
    match state
        .service
        .continue_with(owner, token, results, request_id, Routing::Here)
        .await?
    {
        Continued::Reply(reply) => Ok(*reply),
        // Not given back with `Routing::Here`.
        Continued::HeldAt { .. } => Err(ServiceError::Unavailable(
            "the continuation could not be served".into(),
        )),
    }
}

/// How long the node that holds a cancelled execution's child may take to
/// answer the forwarded cancel (it only kills a child).
const CANCEL_FORWARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A cancel's outcome; when it was decided here for an execution that
/// another node holds, the cancel (`path`, `headers`, `body`) is forwarded
/// there in the background, so that node ends its child at once (see
/// `forward.rs`; its next upkeep does, if it does not hear).
fn tell_holder(
    state: &Arc<AppState>,
    owner: [u8; 8],
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
    result: Result<Cancellation, ServiceError>,
) -> Result<CancelOutcome, ServiceError> {
    let cancellation = result?;
    if let Some(address) = cancellation.held_at
        && state.forwarder.is_some()
        && !headers.contains_key(forward::FORWARDED)
    {
        let (state, path, headers, body) = (
            state.clone(),
            path.to_owned(),
            headers.clone(),
            body.clone(),
        );
        tokio::spawn(async move {
            let Some(forwarder) = state.forwarder.as_ref() else {
                return;
            };
            let forwarded = forwarder.forward(&address, &path, &headers, body);
            let answer = tokio::time::timeout(CANCEL_FORWARD_TIMEOUT, forwarded).await;
            let outcome = match &answer {
                Ok(Some(response)) if response.status().is_success() => "delivered",
                _ => "failed",
            };
            count_forward(
                "baton_forwarded_cancels_total",
                "cancel",
                owner,
                &address,
                outcome,
            );
        });
    }
    Ok(cancellation.outcome)
}

/// The client's id for a request (`X-LibreChat-Code-Request-ID`), for cancel.
fn client_request_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-librechat-code-request-id")
        .and_then(|v| v.to_str().ok())
}

/// `POST /exec/programmatic/cancel`: cancels the execution of a request id.
#[utoipa::path(post, path = "/exec/programmatic/cancel", tag = "exec",
    request_body = CancelBody,
    responses((status = 200, description = "What the cancel found: cancelled, already ended, or pending (the request has not come yet)",
        body = CancelView), Failures))]
async fn cancel(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let owner = principal.owner;
    let body = read_body(&state, body)?;
    let request_id = request::decode_cancel(&body)?;
    let log = RequestLog::begin("cancel", owner);
    let result = state.service.cancel(owner, &request_id).await;
    let result = tell_holder(
        &state,
        owner,
        "/exec/programmatic/cancel",
        &headers,
        &body,
        result,
    );
    log.cancelled(Cancelled::Request(&request_id), &result);
    Ok(Json(CancelView::new(request_id, result?)).into_response())
}

/// `POST /tools/stubs`: the stubs of a tool list for a model's prompt.
#[utoipa::path(post, path = "/tools/stubs", tag = "tools",
    request_body = StubsBody,
    responses((status = 200, description = "The stubs", body = StubsView), Failures))]
async fn tool_stubs(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<StubsView>, ApiError> {
    let body = read_body(&state, body)?;
    let (tools, format) = request::decode_stubs(&body)?;
    let stubs = crate::stubs::stubs(&tools, format)
        .map_err(|error| ApiError::BadRequest(error.to_string()))?;
    Ok(Json(StubsView {
        format: format.name(),
        stubs,
    }))
}

/// The query of `GET /executions`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListParams {
    /// Only executions with this status: `running`, `paused`, `expired`,
    /// `completed`, `failed` or `cancelled`.
    status: Option<String>,
    /// At most this many (1 to 500; default 50).
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// `GET /executions`: the caller's executions, newest first, in pages.
#[utoipa::path(get, path = "/executions", tag = "exec", params(ListParams),
    responses((status = 200, description = "A page of the caller's executions", body = ExecutionListView), Failures))]
async fn list_executions(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    query: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<ExecutionListView>, ApiError> {
    let owner = principal.owner;
    let Query(params) =
        query.map_err(|e| ApiError::BadRequest(format!("invalid query: {}", e.body_text())))?;
    let listing = state
        .service
        .list(
            owner,
            &ListQuery {
                status: params.status,
                limit: params.limit.unwrap_or(DEFAULT_PAGE),
                cursor: params.cursor,
            },
        )
        .await?;
    Ok(Json(ExecutionListView::from(listing)))
}

/// Executions per page when the query does not say.
const DEFAULT_PAGE: usize = 50;

/// `GET /executions/{id}`: an execution's state.
#[utoipa::path(get, path = "/executions/{id}", tag = "exec",
    params(("id" = String, Path, description = "The execution id (hex)")),
    responses((status = 200, description = "The execution", body = ExecutionView), Failures))]
async fn inspect(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<ExecutionView>, ApiError> {
    execution_view(&state, principal.owner, &id).await
}

/// The execution `id` of `owner` as `GET /executions/{id}` shows it.
async fn execution_view(
    state: &AppState,
    owner: [u8; 8],
    id: &str,
) -> Result<Json<ExecutionView>, ApiError> {
    let inspection = state.service.inspect(owner, id).await?;
    Ok(Json(ExecutionView::new(id, &inspection)))
}

/// `POST /executions/{id}/cancel`: cancels an execution by its id (the
/// console's cancel), and answers the execution as it now stands.
#[utoipa::path(post, path = "/executions/{id}/cancel", tag = "exec",
    params(("id" = String, Path, description = "The execution id (hex)")),
    responses((status = 200, description = "The execution after the cancel: `cancelled`, or how it had already ended", body = ExecutionView), Failures))]
async fn cancel_execution(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<ExecutionView>, ApiError> {
    let owner = principal.owner;
    let log = RequestLog::begin("cancel", owner);
    let result = async {
        let execution = crate::service::parse_execution_id(&id)?;
        state.service.cancel_execution(owner, execution).await
    }
    .await;
    let path = format!("/executions/{id}/cancel");
    let result = tell_holder(&state, owner, &path, &headers, &Bytes::new(), result);
    log.cancelled(Cancelled::Execution(&id), &result);
    result?;
    execution_view(&state, owner, &id).await
}
