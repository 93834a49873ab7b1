//! Forwarding to the node that holds an execution's child (several nodes
//! on one PostgreSQL store): a continuation, which that node resumes hot
//! where any other node would replay it cold; and a cancel decided here,
//! so that it ends at once the round running there or the child parked
//! there.
//!
//! The forwarded request is the client's own: the same path and body, the
//! same API key (which authenticates it at the other node, as it did
//! here), the same request id, and [`FORWARDED`] so that it is never
//! forwarded again.
//!
//! Invariants:
//! - Forwarding is an optimisation, never needed for correctness: when the
//!   owner cannot be reached within [`CONNECT_TIMEOUT`], or the exchange
//!   breaks, or the owner answers that it cannot serve (502, 503, 504),
//!   the continuation is served here (the round's claim decides who runs
//!   it, exactly once), and a cancel's child is ended by its node's next
//!   upkeep.
//! - Nothing else is forwarded: a start or an inspection is served by the
//!   node that receives it, and a cancel is decided by it.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Set on a forwarded continuation: the node that receives it serves it.
pub const FORWARDED: &str = "x-baton-forwarded";

/// How long the owner may take to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// How long a forwarded continuation may take: the longest run-time
/// budget a request may ask for, and a margin.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(310);

/// The request headers that travel with a forwarded continuation.
const KEPT_HEADERS: [&str; 5] = [
    "authorization",
    "x-api-key",
    "content-type",
    "x-librechat-code-request-id",
    "x-codeapi-expected-profile",
];

/// An HTTP client to the other nodes (connections are kept and reused).
pub struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        Self::new()
    }
}

impl Forwarder {
    /// A client with the connect timeout of this module.
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Forwarder {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// Sends the request to `path` (`headers`, `body`) to the node at
    /// `address`; its answer, or `None` when it must be served here.
    pub async fn forward(
        &self,
        address: &str,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Option<Response> {
        let uri = format!("{}{path}", address.trim_end_matches('/'));
        let mut request = Request::post(uri).body(Full::new(body)).ok()?;
        for name in KEPT_HEADERS {
            if let Some(value) = headers.get(name) {
                request.headers_mut().insert(name, value.clone());
            }
        }
        request
            .headers_mut()
            .insert(FORWARDED, HeaderValue::from_static("1"));
        let exchange = async {
            let response = self.client.request(request).await.ok()?;
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await.ok()?.to_bytes();
            Some((parts, bytes))
        };
        let (parts, bytes) = tokio::time::timeout(RESPONSE_TIMEOUT, exchange)
            .await
            .ok()??;
        if matches!(
            parts.status,
            StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
        ) {
            return None;
        }
        let mut response = Response::new(Body::from(bytes));
        *response.status_mut() = parts.status;
        for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
            if let Some(value) = parts.headers.get(&name) {
                response.headers_mut().insert(name, value.clone());
            }
        }
        Some(response)
    }
}
