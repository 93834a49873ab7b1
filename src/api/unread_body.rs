//! An answer given before its request's body was read says that the
//! connection closes.
//!
//! hyper does not keep an HTTP/1.1 connection alive when a handler answers
//! while the request's body is still unread (a 401 before the body, a 404
//! or 405 of a route that never reads one): it closes the connection after
//! the answer, and without `connection: close` a client that reuses it
//! fails on its next request (a broken pipe, a reset). Every route's
//! request body is watched, and such answers carry `connection: close`, so
//! the client opens a new connection instead.
//!
//! Invariant: a response to a request whose body had not been read to its
//! end when the response was made carries `connection: close`; a body read
//! to its end (or empty) changes nothing.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// A request body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: runs the request with its body watched, and marks the
/// response `connection: close` if the body was left unread.
pub(super) async fn close_if_unread(request: Request, next: Next) -> Response {
    use http_body::Body as _;
    let ended = Arc::new(AtomicBool::new(request.body().is_end_stream()));
    let watched = ended.clone();
    let request = request.map(move |inner| {
        Body::new(Watched {
            inner,
            ended: watched,
        })
    });
    let mut response = next.run(request).await;
    if !ended.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
