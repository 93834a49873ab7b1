//! The OpenAPI 3.1 description of the HTTP API, served at `/openapi.json`.
//!
//! Derived with utoipa from the handlers' annotations and the request and
//! response types themselves (`views`, `request`), so it describes what the
//! code sends and accepts. Every protocol route is listed twice, bare and
//! under `/v1`, as the router serves it.
//!
//! Invariant: every status a route can answer is listed with its body;
//! `tests/http_api.rs` and the schemathesis run in `.ci/run` hold the server
//! to it.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, PathItem};
use utoipa::{Modify, OpenApi};

use super::views::ErrorView;

/// The API's description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "baton",
        description = "Durable programmatic tool calling: Python that pauses at every tool call. \
                       The wire contract is PROTOCOL.md."
    ),
    paths(
        super::exec_plain,
        super::exec,
        super::cancel,
        super::list_executions,
        super::inspect,
        super::cancel_execution,
        super::files::upload,
        super::files::upload_batch,
        super::files::list,
        super::files::object,
        super::files::delete,
        super::files::delete_file,
        super::files::download,
        super::tool_stubs,
        super::sessions::create,
        super::sessions::exec,
        super::sessions::show,
        super::sessions::list,
        super::sessions::delete,
        super::health,
        super::metrics_text,
        openapi_json,
    ),
    components(schemas(ErrorView)),
    modifiers(&Security, &Versioned),
    security(("api_key" = []), ("bearer" = []))
)]
pub struct ApiDoc;

/// `GET /openapi.json`: this description.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "service",
    security(()),
    responses((status = 200, description = "The OpenAPI description", content_type = "application/json", body = Object))
)]
pub async fn openapi_json() -> axum::Json<Document> {
    axum::Json(ApiDoc::openapi())
}

/// The ways to present a credential: an API key, or a bearer token
/// (LibreChat's Code API JWT, or an API key).
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "LibreChat's Code API token (EdDSA or RS256, verified with --jwt-public-key), or an API key",
                    ))
                    .build(),
            ),
        );
    }
}

/// Adds the `/v1` copy of every protocol route.
struct Versioned;

/// Routes served only bare.
const UNVERSIONED: &[&str] = &["/health", "/metrics", "/openapi.json"];

impl Modify for Versioned {
    fn modify(&self, openapi: &mut Document) {
        let copies: Vec<(String, PathItem)> = openapi
            .paths
            .paths
            .iter()
            .filter(|(path, _)| !UNVERSIONED.contains(&path.as_str()))
            .map(|(path, item)| (format!("/v1{path}"), versioned(item.clone())))
            .collect();
        openapi.paths.paths.extend(copies);
    }
}

/// A route's copy with operation ids of its own.
fn versioned(mut item: PathItem) -> PathItem {
    for operation in [&mut item.get, &mut item.post, &mut item.delete]
        .into_iter()
        .flatten()
    {
        if let Some(id) = &operation.operation_id {
            operation.operation_id = Some(format!("v1_{id}"));
        }
    }
    item
}
