//! HTTP for session files: `POST /upload` (multipart: `file` parts and an
//! optional `session_id`), `GET /files/{session_id}`, and
//! `GET /download/{session_id}/{file_id}`.
//!
//! Invariant: every handler works inside the caller's own files; another
//! key's session lists as empty and its files answer 404, exactly like
//! files that do not exist.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::multipart::{Field, Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::authorize;
use super::error::ApiError;
use super::error::Failures;
use super::views::FilesView;
use crate::service::{ServiceError, UploadHold};
use crate::workspace::{FileWriter, WrittenFile, check_session};

/// The form `POST /upload` reads (for the OpenAPI description: the handler
/// reads the parts as they stream).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct UploadForm {
    /// One or more files; each part needs a file name (it becomes the
    /// file's path under `/mnt/data`).
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
    /// The session to store them in (a new one when absent).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$")]
    session_id: Option<String>,
}

fn multipart_error(error: MultipartError, limit: usize) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::TooLarge(limit)
    } else {
        ApiError::BadRequest(format!("invalid multipart body: {}", error.body_text()))
    }
}

/// `POST /upload`: stores each `file` part in the session (a new session
/// when none is given) as it arrives, and returns the files' ids and names.
/// A refused or broken upload keeps none of its files.
#[utoipa::path(post, path = "/upload", tag = "files",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "The stored files", body = FilesView), Failures))]
pub(super) async fn upload(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, ApiError> {
    let owner = authorize(&state, &headers)?;
    let mut multipart = multipart.map_err(|e| {
        ApiError::BadRequest(format!(
            "expected a multipart/form-data body: {}",
            e.body_text()
        ))
    })?;
    let files = state.service.files();
    let mut upload = Upload {
        hold: state.service.hold_upload(owner),
        written: Vec::new(),
        session: None,
        bytes: 0,
    };
    if let Err(error) = receive(&state, owner, &mut multipart, &mut upload).await {
        files.discard(upload.written).await;
        return Err(error);
    }
    if upload.written.is_empty() {
        return Err(ApiError::BadRequest("the body has no file part".into()));
    }
    let session = upload
        .session
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("sess_{}", hex::encode(rand::random::<[u8; 12]>())));
    let stored = files.keep(&session, upload.written).await?;
    files.flush().await?;
    Ok(Json(FilesView::new(session, &stored)).into_response())
}

/// What an upload has received so far.
struct Upload {
    /// Its bytes, counted against the key's storage until it ends.
    hold: UploadHold,
    /// The files whose contents are stored.
    written: Vec<WrittenFile>,
    /// The `session_id` part.
    session: Option<String>,
    /// Bytes of file contents, all parts together (for the key's quota).
    bytes: u64,
}

/// Reads the form's parts, storing each file's contents as they arrive.
async fn receive(
    state: &AppState,
    owner: [u8; 8],
    multipart: &mut Multipart,
    upload: &mut Upload,
) -> Result<(), ApiError> {
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(e, state.body_limit))?
    {
        let file_name = field.file_name().map(str::to_owned);
        match (field.name(), file_name) {
            (_, Some(name)) => {
                let writer = state.service.files().writer(owner, &name)?;
                let file = receive_file(state, &mut field, writer, upload).await?;
                upload.written.push(file);
            }
            (Some("session_id"), None) => {
                let session = field
                    .text()
                    .await
                    .map_err(|e| multipart_error(e, state.body_limit))?;
                if !session.is_empty() {
                    check_session(&session)?;
                }
                upload.session = Some(session);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Copies one file part into `writer`, held against the key's storage
/// as it arrives; on a failure the part's chunks are deleted.
async fn receive_file(
    state: &AppState,
    field: &mut Field<'_>,
    mut writer: FileWriter,
    upload: &mut Upload,
) -> Result<WrittenFile, ApiError> {
    let copied = async {
        while let Some(bytes) = field
            .chunk()
            .await
            .map_err(|e| multipart_error(e, state.body_limit))?
        {
            upload.bytes += bytes.len() as u64;
            upload.hold.grow(upload.bytes)?;
            writer.write(&bytes).await?;
        }
        Ok::<_, ApiError>(())
    }
    .await;
    match copied {
        Ok(()) => Ok(writer.close().await?),
        Err(error) => {
            writer.discard().await;
            Err(error)
        }
    }
}

/// `GET /files/{session_id}`: the caller's files of a session.
#[utoipa::path(get, path = "/files/{session_id}", tag = "files",
    params(("session_id" = String, Path, description = "The session")),
    responses((status = 200, description = "The session's files", body = FilesView), Failures))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(session): Path<String>,
) -> Result<Response, ApiError> {
    let owner = authorize(&state, &headers)?;
    let files = state.service.files().list(owner, &session).await?;
    Ok(Json(FilesView::new(session, &files)).into_response())
}

/// `GET /download/{session_id}/{file_id}`: one file's bytes.
#[utoipa::path(get, path = "/download/{session_id}/{file_id}", tag = "files",
    params(("session_id" = String, Path, description = "The session"),
        ("file_id" = String, Path, description = "The file id")),
    responses((status = 200, description = "The file's bytes", content_type = "application/octet-stream",
        body = String), Failures))]
pub(super) async fn download(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path((session, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let owner = authorize(&state, &headers)?;
    let file = state
        .service
        .files()
        .open(owner, &session, &id)
        .await?
        .ok_or(ServiceError::FileNotFound)?;
    let base = file.name.rsplit('/').next().unwrap_or("file");
    let safe: String = base
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\')
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (header::CONTENT_DISPOSITION, disposition),
        (header::CONTENT_LENGTH, HeaderValue::from(file.size)),
    ];
    // Sent as it is read: a chunk that cannot be read ends the body short
    // of its announced length, which the client sees.
    Ok((headers, Body::from_stream(file.into_stream())).into_response())
}
