//! Decoding request bodies: the two shapes of `POST /exec/programmatic`
//! (a start, or a continuation) and the cancel body.
//!
//! Pure functions of the body bytes (and the request id header), so that
//! they are fuzzed directly (`fuzz/fuzz_targets/request.rs`).
//!
//! Invariants:
//! - Any body decodes to a request or to [`ApiError::BadRequest`] /
//!   [`ServiceError::InvalidToken`] naming the problem; nothing panics.
//! - A body is a continuation exactly when it holds a non-null
//!   `continuation_token`; a continuation must carry `tool_results`.
//! - A start's `code` is a non-blank string and its `timeout` is absent,
//!   null, or 1000..=300000 milliseconds (default 60000).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{OneOfBuilder, Ref, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::error::ApiError;
use crate::deep_json;
use crate::program::Lang;
/// The accepted `timeout` range, milliseconds (the service's).
pub use crate::service::TIMEOUT_RANGE_MS;
use crate::service::{FileRef, ServiceError, StartRequest, ToolResult};
use crate::stubs::StubFormat;
use crate::tools::{CallPolicy, ToolDef, WireTool};

/// Run-time budget of a start without `timeout`, milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// A decoded `POST /exec/programmatic`.
#[derive(Debug)]
pub enum ExecRequest {
    /// Run new code.
    Start(StartRequest),
    /// Continue a paused execution.
    Continue {
        /// The continuation token, unverified.
        token: String,
        /// The results, still as their text: read only once the token is
        /// known to be genuine ([`RawResults::decode`]).
        results: RawResults,
    },
}

/// A continuation's `tool_results`, as the body wrote them (checked to be
/// JSON, nothing built of it yet): a forged token costs the server no
/// tree of what came with it.
#[derive(Debug)]
pub struct RawResults(Option<String>);

impl RawResults {
    /// The results, in the client's order; 400 when they are missing or
    /// not an array, or naming the first entry that is not an object with
    /// `call_id` and `result`.
    pub fn decode(self) -> Result<Vec<ToolResult>, ApiError> {
        let text = self.0.ok_or_else(|| {
            ApiError::BadRequest("tool_results is required with a continuation_token".into())
        })?;
        if !text.starts_with('[') {
            return Err(ApiError::BadRequest(
                "invalid request body: tool_results must be an array".into(),
            ));
        }
        // Entries as text: a result of any depth passes through as its
        // text, the child's `json.loads` reads it (see `deep_json`).
        let entries: Vec<&RawValue> = serde_json::from_str(&text).map_err(|e| {
            ApiError::BadRequest(format!("invalid request body: tool_results: {e}"))
        })?;
        decode_results(entries)
    }
}

/// Starts an execution.
#[derive(Deserialize, ToSchema)]
pub struct StartBody {
    /// Python source; top-level `await` is allowed. Not blank.
    #[schema(value_type = String, required = true, pattern = r"\S")]
    code: Option<Value>,
    /// The tools the code may call.
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    /// Session for files (generated when absent).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$")]
    session_id: Option<String>,
    /// Run-time budget over all rounds, milliseconds (default 60000).
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 1000, maximum = 300000)]
    timeout: Option<Value>,
    /// Session files to put under `/mnt/data`.
    #[serde(default)]
    files: Option<Vec<FileRef>>,
    /// Whether the answer of the end lists the tool calls made (`history`).
    #[serde(default)]
    include_history: Option<bool>,
    /// `py`/`python` (the default). Tools are called from Python only.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(py|python)$")]
    lang: Option<Value>,
}

/// Runs the next cell of a Python session (`POST /sessions/{id}/exec`).
#[derive(Deserialize, ToSchema)]
pub struct CellBody {
    /// Python source; top-level `await` is allowed. Not blank.
    #[schema(value_type = String, required = true, pattern = r"\S")]
    code: Option<Value>,
    /// Tools the cell may call, beside those earlier cells declared (one
    /// of the same name replaces the earlier declaration).
    #[serde(default)]
    tools: Option<Vec<WireTool>>,
    /// Run-time budget over all rounds, milliseconds (default 60000).
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 1000, maximum = 300000)]
    timeout: Option<Value>,
    /// Files to lay under `/mnt/data` over what earlier cells left.
    #[serde(default)]
    files: Option<Vec<FileRef>>,
    /// Whether the answer of the end lists the tool calls made (`history`).
    #[serde(default)]
    include_history: Option<bool>,
    /// The cell this request means (from 1): a retry of a cell that ended
    /// gets that cell's answer again instead of running as a new cell; a
    /// number that is neither ended nor next: 409 `session_busy`.
    #[serde(default)]
    #[schema(minimum = 1)]
    cell: Option<u32>,
}

/// Makes a Python session (`POST /sessions`).
#[derive(Deserialize, ToSchema, Default)]
pub struct SessionBody {
    /// Seconds the session lives after its last cell (default
    /// `--session-ttl-secs`, at most `--session-max-ttl-secs`).
    #[serde(default)]
    #[schema(minimum = 1)]
    ttl_seconds: Option<u64>,
}

/// Decodes a session creation body (an empty body is `{}`): its
/// `ttl_seconds`.
pub fn decode_session(body: &[u8]) -> Result<Option<u64>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Ok(parse_json::<SessionBody>(body)?.ttl_seconds)
}

/// Decodes a cell's body: the start it makes, and the cell it names.
pub fn decode_cell(
    body: &[u8],
    request_id: Option<&str>,
) -> Result<(StartRequest, Option<u32>), ApiError> {
    if let Some(request_id) = request_id.filter(|r| !r.is_empty()) {
        check_request_id(request_id)?;
    }
    let cell: CellBody = parse_json(body)?;
    if cell.cell == Some(0) {
        return Err(ApiError::BadRequest("cell counts from 1".into()));
    }
    let start_body = StartBody {
        code: cell.code,
        tools: cell.tools,
        session_id: None,
        timeout: cell.timeout,
        files: cell.files,
        include_history: cell.include_history,
        lang: None,
    };
    Ok((start(start_body, request_id)?, cell.cell))
}

/// Runs code with no tools (`POST /exec`): the body LibreChat's
/// `execute_code` tool sends, and its programmatic tool when the code calls
/// no tools. Unknown fields are ignored.
#[derive(Deserialize, ToSchema)]
pub struct PlainBody {
    /// `py` (or `python`), or `bash` (or `sh`): a command line for baton's
    /// own small shell. Other languages: 400 `unsupported_capability`.
    #[schema(value_type = String, required = true, pattern = "^(py|python|bash|sh)$")]
    lang: Option<Value>,
    /// With `X-CodeAPI-Expected-Profile: stateful`: the runtime session the
    /// call runs in (its `/mnt/data` kept from one call to the next).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    runtime_session_hint: Option<String>,
    /// Python source. Not blank.
    #[schema(value_type = String, required = true, pattern = r"\S")]
    code: Option<Value>,
    /// Command-line arguments: `sys.argv[1:]`.
    #[serde(default)]
    args: Option<Vec<String>>,
    /// Session files to put under `/mnt/data`.
    #[serde(default)]
    files: Option<Vec<FileRef>>,
    /// Session for files (generated when absent).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$")]
    session_id: Option<String>,
    /// Run-time budget, milliseconds (default 60000).
    #[serde(default)]
    #[schema(value_type = Option<f64>, minimum = 1000, maximum = 300000)]
    timeout: Option<Value>,
}

/// Continues a paused execution with the results of its round (its
/// OpenAPI description: the body is decoded as [`ExecRequest::Continue`],
/// its token before its results).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ContinueBody {
    /// The token of the last pause.
    #[schema(value_type = String, required = true)]
    continuation_token: Value,
    /// One result per pending call, any order: each an object with
    /// `call_id` and `result` (`result` may be left out only when
    /// `is_error` is true).
    #[serde(default)]
    #[schema(required = true, value_type = Vec<ToolResult>)]
    tool_results: Option<Vec<Value>>,
}

/// Cancels the execution started with a request id.
#[derive(Deserialize, ToSchema)]
pub struct CancelBody {
    /// The `x-librechat-code-request-id` of a start or continuation.
    #[schema(min_length = 1, max_length = 256)]
    request_id: String,
}

/// Asks for the prompt stubs of a tool list (`POST /tools/stubs`).
#[derive(Deserialize, ToSchema)]
pub struct StubsBody {
    /// The tools, as a start request carries them.
    tools: Vec<WireTool>,
    /// `python` (typed `async def` stubs with docstrings; the default) or
    /// `compact` (one line per tool).
    #[serde(default)]
    #[schema(pattern = "^(python|compact)$")]
    format: Option<String>,
}

/// Decodes a `POST /tools/stubs` body: its tools and the stub format.
pub fn decode_stubs(body: &[u8]) -> Result<(Vec<ToolDef>, StubFormat), ApiError> {
    let body: StubsBody = parse_json(body)?;
    let name = body.format.as_deref().unwrap_or("python");
    let format = StubFormat::parse(name).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "format must be \"python\" or \"compact\", not {name:?}"
        ))
    })?;
    // Stubs show what code can call: not the tools it may not.
    let tools = body
        .tools
        .into_iter()
        .filter(WireTool::callable_from_code)
        .map(Into::into)
        .collect();
    Ok((tools, format))
}

/// The longest client request id, bytes.
pub const MAX_REQUEST_ID: usize = 256;

/// The body of `POST /exec/programmatic`: a start or a continuation (a body
/// with a non-null `continuation_token` is a continuation).
pub struct ExecBody;

impl PartialSchema for ExecBody {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(Ref::from_schema_name(StartBody::name()))
            .item(Ref::from_schema_name(ContinueBody::name()))
            .into()
    }
}

impl ToSchema for ExecBody {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        for (name, schema) in [
            (StartBody::name(), StartBody::schema()),
            (ContinueBody::name(), ContinueBody::schema()),
        ] {
            schemas.push((name.into_owned(), schema));
        }
        StartBody::schemas(schemas);
        ContinueBody::schemas(schemas);
    }
}

/// Parses JSON into `T`, or the contract's 400.
fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

/// Decodes an exec body; `request_id` is the client's request id header.
/// The top level is read first, each value kept as its text: a
/// continuation's results are built only when asked for, after its token
/// (see [`RawResults`]).
pub fn decode_exec(body: &[u8], request_id: Option<&str>) -> Result<ExecRequest, ApiError> {
    if let Some(request_id) = request_id.filter(|r| !r.is_empty()) {
        check_request_id(request_id)?;
    }
    let top: HashMap<String, &RawValue> = serde_json::from_slice(body).map_err(|e| {
        let what = if e.is_data() {
            "expected a JSON object".to_owned()
        } else {
            e.to_string()
        };
        ApiError::BadRequest(format!("invalid request body: {what}"))
    })?;
    match top.get("continuation_token").filter(|t| t.get() != "null") {
        Some(token) => continuation(token, top.get("tool_results").copied()),
        None => start(parse_json(body)?, request_id).map(ExecRequest::Start),
    }
}

/// A decoded `POST /exec`: a start with no tools, and the runtime session
/// it names.
#[derive(Debug)]
pub struct PlainRequest {
    /// The start.
    pub start: StartRequest,
    /// `runtime_session_hint`, when given and not empty.
    pub runtime_session_hint: Option<String>,
}

/// The languages baton runs, for the texts that name them.
const LANGUAGES: &str = "baton runs Python (lang \"py\") and a small shell of its own for file commands and python3 (lang \"bash\")";

/// The language a `lang` field names: Python or baton's shell; any other
/// is an unsupported capability (LibreChat's client takes that code as
/// permanent).
fn lang_of(lang: Option<&Value>) -> Result<Lang, ApiError> {
    match lang {
        Some(Value::String(name)) => Lang::parse(name).ok_or_else(|| {
            ApiError::Unsupported(format!("language {name:?} is not supported: {LANGUAGES}"))
        }),
        _ => Err(ApiError::BadRequest(format!(
            "lang is required: {LANGUAGES}"
        ))),
    }
}

/// Decodes a `POST /exec` body into a start with no tools; `request_id`
/// is the client's request id header (for cancel).
pub fn decode_plain(body: &[u8], request_id: Option<&str>) -> Result<PlainRequest, ApiError> {
    if let Some(request_id) = request_id.filter(|r| !r.is_empty()) {
        check_request_id(request_id)?;
    }
    let body: PlainBody = parse_json(body)?;
    let lang = lang_of(body.lang.as_ref())?;
    let mut code = code_of(body.code)?;
    if lang == Lang::Python {
        code = crate::rewrite::unwrap_librechat_main(&code).unwrap_or(code);
    }
    Ok(PlainRequest {
        start: StartRequest {
            code,
            tools: Vec::new(),
            session_id: body.session_id,
            timeout_ms: timeout_ms(body.timeout)?,
            request_id: request_id.map(str::to_owned),
            files: body.files.unwrap_or_default(),
            argv: body.args.unwrap_or_default(),
            policy: CallPolicy::default(),
            lang,
        },
        runtime_session_hint: body.runtime_session_hint.filter(|h| !h.is_empty()),
    })
}

/// Decodes a cancel body: the request id to cancel.
pub fn decode_cancel(body: &[u8]) -> Result<String, ApiError> {
    let request_id = parse_json::<CancelBody>(body)?.request_id;
    check_request_id(&request_id)?;
    Ok(request_id)
}

/// A client request id: 1 to [`MAX_REQUEST_ID`] bytes.
pub fn check_request_id(request_id: &str) -> Result<(), ApiError> {
    if request_id.is_empty() || request_id.len() > MAX_REQUEST_ID {
        return Err(ApiError::BadRequest(format!(
            "request_id must have 1 to {MAX_REQUEST_ID} bytes"
        )));
    }
    Ok(())
}

/// Decodes the entries of `tool_results`, naming the first one that is not
/// an object with `call_id` and `result`.
fn decode_results(entries: Vec<&RawValue>) -> Result<Vec<ToolResult>, ApiError> {
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| decode_result(index, entry))
        .collect()
}

fn decode_result(index: usize, entry: &RawValue) -> Result<ToolResult, ApiError> {
    let what = |problem: String| ApiError::BadRequest(format!("tool_results[{index}]: {problem}"));
    let fields: HashMap<String, &RawValue> = serde_json::from_str(entry.get()).map_err(|_| {
        what(format!(
            "expected an object with call_id and result, got {}",
            deep_json::kind_of(entry.get())
        ))
    })?;
    let field = |name: &str| fields.get(name).filter(|value| value.get() != "null");
    let Some(Ok(call_id)) = fields
        .get("call_id")
        .map(|value| serde_json::from_str::<String>(value.get()))
    else {
        return Err(what("call_id must be a string".into()));
    };
    let is_error = match field("is_error") {
        None => false,
        Some(flag) => serde_json::from_str::<bool>(flag.get()).map_err(|_| {
            what(format!(
                "is_error must be a boolean, got {}",
                deep_json::kind_of(flag.get())
            ))
        })?,
    };
    let error_message = match field("error_message") {
        None => None,
        Some(message) => Some(serde_json::from_str::<String>(message.get()).map_err(|_| {
            what(format!(
                "error_message must be a string, got {}",
                deep_json::kind_of(message.get())
            ))
        })?),
    };
    // A result left out is `None` to the code: a JavaScript client's tool
    // that returned `undefined` sends no `result` (`JSON.stringify` drops
    // it), and LibreChat's does exactly that.
    let result = fields.get("result").map_or_else(
        || "null".to_owned(),
        |value| deep_json::compact(value.get()),
    );
    Ok(ToolResult {
        call_id,
        result,
        is_error,
        error_message,
    })
}

fn continuation(token: &RawValue, results: Option<&RawValue>) -> Result<ExecRequest, ApiError> {
    let token: String =
        serde_json::from_str(token.get()).map_err(|_| ServiceError::InvalidToken)?;
    Ok(ExecRequest::Continue {
        token,
        results: RawResults(
            results
                .filter(|r| r.get() != "null")
                .map(|r| r.get().to_owned()),
        ),
    })
}

/// A start's `code`: a non-blank string.
fn code_of(code: Option<Value>) -> Result<String, ApiError> {
    match code {
        Some(Value::String(code)) if !code.trim().is_empty() => Ok(code),
        Some(Value::String(_)) => Err(ApiError::BadRequest("code is empty".into())),
        Some(_) => Err(ApiError::BadRequest("code must be a string".into())),
        None => Err(ApiError::BadRequest("code is required".into())),
    }
}

fn start(body: StartBody, request_id: Option<&str>) -> Result<StartRequest, ApiError> {
    if body.lang.is_some() && lang_of(body.lang.as_ref())? != Lang::Python {
        return Err(ApiError::Unsupported(
            "tools are called from Python code only: send lang \"py\" (or no lang)".into(),
        ));
    }
    let code = code_of(body.code)?;
    let wire = body.tools.unwrap_or_default();
    let policy = CallPolicy {
        direct_only: wire
            .iter()
            .filter(|tool| !tool.callable_from_code())
            .map(|tool| tool.name.clone())
            .collect(),
        include_history: body.include_history.unwrap_or(false),
    };
    let tools: Vec<ToolDef> = wire.into_iter().map(Into::into).collect();
    Ok(StartRequest {
        code,
        tools,
        session_id: body.session_id,
        timeout_ms: timeout_ms(body.timeout)?,
        request_id: request_id.map(str::to_owned),
        files: body.files.unwrap_or_default(),
        argv: Vec::new(),
        policy,
        lang: Lang::Python,
    })
}

fn timeout_ms(timeout: Option<Value>) -> Result<u64, ApiError> {
    let Some(value) = timeout.filter(|t| !t.is_null()) else {
        return Ok(DEFAULT_TIMEOUT_MS);
    };
    let (low, high) = (*TIMEOUT_RANGE_MS.start(), *TIMEOUT_RANGE_MS.end());
    value
        .as_f64()
        .filter(|t| (low as f64..=high as f64).contains(t))
        .map(|t| t as u64)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "timeout must be a number of milliseconds from {low} to {high}"
            ))
        })
}
