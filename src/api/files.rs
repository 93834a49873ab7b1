//! HTTP for stored files, as LibreChat calls them and as earlier clients
//! did: `POST /upload` and `POST /upload/batch` (multipart: `kind`, `id`,
//! `version`, `read_only`, the `session_id` of baton's own clients, then
//! `file` parts whose names may be relative paths),
//! `GET /sessions/{session_id}/objects/{file_id}` (a file's metadata: the
//! liveness LibreChat checks before reusing a file), `DELETE` of the same
//! path or of `/files/{session_id}/{file_id}`, `GET /files/{session_id}`
//! and `GET /download/{session_id}/{file_id}`. Every route takes LibreChat's
//! `?kind=&id=&version=`.
//!
//! Invariant: every handler works inside the files its principal may reach
//! ([`Principal::files_owner`]): its own, or a shared resource's of its
//! tenant. Anything else lists as empty and answers 404, exactly like
//! files that do not exist.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::multipart::{Field, Multipart, MultipartError, MultipartRejection};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::error::Failures;
use super::views::{
    BatchFileView, BatchUploadView, DeletedView, FilesView, ObjectView, UploadView,
};
use crate::auth::{Principal, Resource};
use crate::service::{ServiceError, UploadHold};
use crate::workspace::{FileMeta, FileWriter, WrittenFile, check_session, new_session_id};

/// Files one batch may carry (the official Code API's limit).
const MAX_BATCH_FILES: usize = 200;

/// The form `POST /upload` and `POST /upload/batch` read (for the OpenAPI
/// description: the handlers read the parts as they stream).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct UploadForm {
    /// Whose files: `user` (the caller's own; the default), `agent` or
    /// `skill` (shared by the tenant's users of the resource `id`). Before
    /// the file parts.
    #[schema(pattern = "^(user|agent|skill)$")]
    kind: Option<String>,
    /// The agent's or skill's id (for `user`: informational).
    id: Option<String>,
    /// A skill's version.
    version: Option<String>,
    /// `true`: code may read the files and change nothing of them.
    read_only: Option<bool>,
    /// The session to store them in (a new one when absent).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$")]
    session_id: Option<String>,
    /// One or more files; each part needs a file name (a relative path is
    /// kept: it becomes the file's path under `/mnt/data`).
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
}

/// LibreChat's `?kind=&id=&version=`: whose files a request reaches.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ResourceQuery {
    /// `user` (the caller's own files; the default), `agent` or `skill`.
    kind: Option<String>,
    /// The agent's or skill's id.
    id: Option<String>,
    /// A skill's version.
    version: Option<String>,
}

impl ResourceQuery {
    /// The resource the query names, or the 400 it deserves.
    fn resource(&self) -> Result<Resource, ApiError> {
        Resource::parse(
            self.kind.as_deref(),
            self.id.as_deref(),
            self.version.as_deref(),
        )
        .map_err(ApiError::BadRequest)
    }
}

/// The owner of the files `query` names for `principal`.
fn owner_of(
    principal: &Principal,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<[u8; 8], ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::BadRequest(format!("invalid query: {}", e.body_text())))?;
    Ok(principal.files_owner(&query.resource()?))
}

fn multipart_error(error: MultipartError, limit: usize) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::TooLarge(limit)
    } else {
        ApiError::BadRequest(format!("invalid multipart body: {}", error.body_text()))
    }
}

fn multipart_of(multipart: Result<Multipart, MultipartRejection>) -> Result<Multipart, ApiError> {
    multipart.map_err(|e| {
        ApiError::BadRequest(format!(
            "expected a multipart/form-data body: {}",
            e.body_text()
        ))
    })
}

/// `POST /upload`: stores each file part (in a new storage session unless
/// the form names one) as it arrives, and answers the files' ids and names.
/// A refused or broken upload keeps none of its files.
#[utoipa::path(post, path = "/upload", tag = "files",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "The stored files", body = UploadView), Failures))]
pub(super) async fn upload(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, ApiError> {
    let mut upload = received(&state, principal, multipart, Strict::Yes).await?;
    let files = state.service.files();
    let session = upload.session.clone();
    let stored = files.keep(&session, upload.written_files()).await?;
    files.flush().await?;
    Ok(Json(UploadView::new(session, &stored)).into_response())
}

/// `POST /upload/batch`: LibreChat's upload of several files at once (a
/// skill's files, a conversation's images), each stored or refused on its
/// own, all in one new storage session; matched back by `filename`.
#[utoipa::path(post, path = "/upload/batch", tag = "files",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "Every file stored, or some (`partial_success`, with each refused file's `error`)", body = BatchUploadView),
        Failures))]
pub(super) async fn upload_batch(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, ApiError> {
    let upload = received(&state, principal, multipart, Strict::No).await?;
    let files = state.service.files();
    let session = upload.session.clone();
    let (parts, written) = upload.into_parts();
    let mut stored = files.keep(&session, written).await?.into_iter();
    files.flush().await?;
    let views: Vec<BatchFileView> = parts
        .into_iter()
        .map(|part| match part {
            Part::Stored(filename) => BatchFileView {
                status: "success",
                file_id: stored.next().map(|file: FileMeta| file.id),
                filename,
                error: None,
            },
            Part::Refused { filename, error } => BatchFileView {
                status: "error",
                filename,
                file_id: None,
                error: Some(error),
            },
        })
        .collect();
    let succeeded = views.iter().filter(|v| v.status == "success").count();
    let failed = views.len() - succeeded;
    if succeeded == 0 {
        let first = views.iter().find_map(|v| v.error.as_deref()).unwrap_or("");
        return Err(ApiError::BadRequest(format!(
            "no file of the batch was stored ({failed} refused; the first: {first})"
        )));
    }
    let view = BatchUploadView {
        message: if failed == 0 {
            "success"
        } else {
            "partial_success"
        },
        storage_session_id: session,
        files: views,
        succeeded,
        failed,
    };
    Ok(Json(view).into_response())
}

/// The whole form of an upload read, its files' contents stored (not kept
/// yet); on a failure, or with no file part, nothing of it is left.
async fn received(
    state: &AppState,
    principal: Principal,
    multipart: Result<Multipart, MultipartRejection>,
    strict: Strict,
) -> Result<Upload, ApiError> {
    let mut multipart = multipart_of(multipart)?;
    let mut upload = Upload::new(principal);
    if let Err(error) = receive(state, &mut multipart, &mut upload, strict).await {
        state.service.files().discard(upload.written_files()).await;
        return Err(error);
    }
    if upload.parts.is_empty() {
        return Err(ApiError::BadRequest("the body has no file part".into()));
    }
    Ok(upload)
}

/// Whether one bad file refuses the whole upload (`/upload`) or only
/// itself (`/upload/batch`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strict {
    Yes,
    No,
}

/// One file part of an upload, in order.
enum Part {
    /// Stored (its written file is in [`Upload::written`], in order).
    Stored(String),
    /// Refused, with why.
    Refused { filename: String, error: String },
}

/// What an upload has received so far.
struct Upload {
    principal: Principal,
    /// Its bytes, counted against the owner's storage until it ends (made
    /// with the first file, once the form has said whose files they are).
    hold: Option<UploadHold>,
    /// The file parts, in order.
    parts: Vec<Part>,
    /// The files whose contents are stored.
    written: Vec<WrittenFile>,
    /// The form's identity fields, before the first file.
    kind: Option<String>,
    id: Option<String>,
    version: Option<String>,
    read_only: bool,
    /// The owner the files are stored for, fixed at the first file.
    owner: Option<[u8; 8]>,
    /// The storage session.
    session: String,
    /// Bytes of file contents, all parts together (for the quota).
    bytes: u64,
}

impl Upload {
    fn new(principal: Principal) -> Upload {
        Upload {
            principal,
            hold: None,
            parts: Vec::new(),
            written: Vec::new(),
            kind: None,
            id: None,
            version: None,
            read_only: false,
            owner: None,
            session: new_session_id(),
            bytes: 0,
        }
    }

    fn written_files(&mut self) -> Vec<WrittenFile> {
        std::mem::take(&mut self.written)
    }

    fn into_parts(self) -> (Vec<Part>, Vec<WrittenFile>) {
        (self.parts, self.written)
    }

    /// The owner of the upload's files: the resource the fields before the
    /// first file name (fixed from then on).
    fn owner(&mut self, state: &AppState) -> Result<[u8; 8], ApiError> {
        if let Some(owner) = self.owner {
            return Ok(owner);
        }
        let resource = Resource::parse(
            self.kind.as_deref(),
            self.id.as_deref(),
            self.version.as_deref(),
        )
        .map_err(ApiError::BadRequest)?;
        let owner = self.principal.files_owner(&resource);
        self.hold = Some(state.service.hold_upload(owner));
        self.owner = Some(owner);
        Ok(owner)
    }

    /// Reads one text field of the form.
    fn field(&mut self, name: &str, value: String) -> Result<(), ApiError> {
        if self.owner.is_some() && matches!(name, "kind" | "id" | "version" | "session_id") {
            return Err(ApiError::BadRequest(format!(
                "the form's {name} must come before its files"
            )));
        }
        match name {
            "kind" => self.kind = Some(value),
            "id" => self.id = Some(value),
            "version" => self.version = Some(value),
            "read_only" => self.read_only = value.trim().eq_ignore_ascii_case("true"),
            "session_id" if !value.is_empty() => {
                check_session(&value)?;
                self.session = value;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Reads the form's parts, storing each file's contents as they arrive.
async fn receive(
    state: &AppState,
    multipart: &mut Multipart,
    upload: &mut Upload,
    strict: Strict,
) -> Result<(), ApiError> {
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(e, state.upload_limit))?
    {
        let file_name = field.file_name().map(str::to_owned);
        let Some(filename) = file_name else {
            let name = field.name().unwrap_or("").to_owned();
            let value = field
                .text()
                .await
                .map_err(|e| multipart_error(e, state.upload_limit))?;
            upload.field(&name, value)?;
            continue;
        };
        let owner = upload.owner(state)?;
        let refused = |error: String| Part::Refused {
            filename: filename.clone(),
            error,
        };
        if strict == Strict::No && upload.parts.len() >= MAX_BATCH_FILES {
            drain_field(&mut field, state).await?;
            upload.parts.push(refused(format!(
                "a batch may have {MAX_BATCH_FILES} files at most"
            )));
            continue;
        }
        let writer = match state
            .service
            .files()
            .writer(owner, &filename, upload.read_only)
        {
            Ok(writer) => writer,
            Err(error) if strict == Strict::No => {
                drain_field(&mut field, state).await?;
                upload.parts.push(refused(error.to_string()));
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let file = receive_file(state, &mut field, writer, upload).await?;
        upload.written.push(file);
        upload.parts.push(Part::Stored(filename));
    }
    Ok(())
}

/// Reads and drops a part that is refused on its own.
async fn drain_field(field: &mut Field<'_>, state: &AppState) -> Result<(), ApiError> {
    while field
        .chunk()
        .await
        .map_err(|e| multipart_error(e, state.upload_limit))?
        .is_some()
    {}
    Ok(())
}

/// Copies one file part into `writer`, held against its owner's storage
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
            .map_err(|e| multipart_error(e, state.upload_limit))?
        {
            upload.bytes += bytes.len() as u64;
            if let Some(hold) = &upload.hold {
                hold.grow(upload.bytes)?;
            }
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

/// `GET /files/{session_id}`: the files of a session.
#[utoipa::path(get, path = "/files/{session_id}", tag = "files",
    params(("session_id" = String, Path, description = "The session"), ResourceQuery),
    responses((status = 200, description = "The session's files", body = FilesView), Failures))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(session): Path<String>,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let owner = owner_of(&principal, query)?;
    let files = state.service.files().list(owner, &session).await?;
    Ok(Json(FilesView::new(session, &files)).into_response())
}

/// Unix seconds as RFC 3339 in UTC (`2026-11-27T13:37:44.000Z`, as
/// JavaScript's `Date.toISOString` writes it).
fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The type of a file, from its name.
fn content_type(name: &str) -> String {
    mime_guess::from_path(name)
        .first_or_octet_stream()
        .essence_str()
        .to_owned()
}

/// `GET /sessions/{session_id}/objects/{file_id}`: a file's metadata.
#[utoipa::path(get, path = "/sessions/{session_id}/objects/{file_id}", tag = "files",
    params(("session_id" = String, Path, description = "The storage session"),
        ("file_id" = String, Path, description = "The file id"), ResourceQuery),
    responses((status = 200, description = "The file's metadata", body = ObjectView), Failures))]
pub(super) async fn object(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path((session, id)): Path<(String, String)>,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let owner = owner_of(&principal, query)?;
    let file = state
        .service
        .files()
        .open(owner, &session, &id)
        .await?
        .ok_or(ServiceError::FileNotFound)?;
    let view = ObjectView {
        name: format!("{session}/{id}"),
        content_type: content_type(&file.name),
        original_filename: file.name,
        size: file.size,
        last_modified: rfc3339(file.created),
        etag: id,
        read_only: file.read_only,
    };
    Ok(Json(view).into_response())
}

/// `DELETE /sessions/{session_id}/objects/{file_id}` (and
/// `DELETE /files/{session_id}/{file_id}`): deletes a file.
#[utoipa::path(delete, path = "/sessions/{session_id}/objects/{file_id}", tag = "files",
    params(("session_id" = String, Path, description = "The storage session"),
        ("file_id" = String, Path, description = "The file id"), ResourceQuery),
    responses((status = 200, description = "Deleted", body = DeletedView), Failures))]
pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path((session, id)): Path<(String, String)>,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let owner = owner_of(&principal, query)?;
    if !state.service.files().remove(owner, &session, &id).await? {
        return Err(ServiceError::FileNotFound.into());
    }
    let view = DeletedView {
        message: "File deleted successfully",
        session_id: session,
        file_id: id,
    };
    Ok(Json(view).into_response())
}

/// `DELETE /files/{session_id}/{file_id}`: the same delete, where LibreChat
/// tries it when the objects route is missing.
#[utoipa::path(delete, path = "/files/{session_id}/{file_id}", tag = "files",
    params(("session_id" = String, Path, description = "The storage session"),
        ("file_id" = String, Path, description = "The file id"), ResourceQuery),
    responses((status = 200, description = "Deleted", body = DeletedView), Failures))]
pub(super) async fn delete_file(
    state: State<Arc<AppState>>,
    principal: Extension<Principal>,
    path: Path<(String, String)>,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    delete(state, principal, path, query).await
}

/// `GET /download/{session_id}/{file_id}`: one file's bytes.
#[utoipa::path(get, path = "/download/{session_id}/{file_id}", tag = "files",
    params(("session_id" = String, Path, description = "The session"),
        ("file_id" = String, Path, description = "The file id"), ResourceQuery),
    responses((status = 200, description = "The file's bytes, with a Content-Type from its name (`application/octet-stream` when it names none)", content_type = "*/*",
        body = String), Failures))]
pub(super) async fn download(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path((session, id)): Path<(String, String)>,
    query: Result<Query<ResourceQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let owner = owner_of(&principal, query)?;
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
    let kind = HeaderValue::from_str(&content_type(&file.name))
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let headers = [
        (header::CONTENT_TYPE, kind),
        (header::CONTENT_DISPOSITION, disposition),
        (header::CONTENT_LENGTH, HeaderValue::from(file.size)),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ];
    // Sent as it is read: a chunk that cannot be read ends the body short
    // of its announced length, which the client sees.
    Ok((headers, Body::from_stream(file.into_stream())).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_javascript_writes_them() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_786_664), "2026-11-27T13:37:44.000Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00.000Z");
    }
}
