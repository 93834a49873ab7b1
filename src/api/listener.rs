//! The HTTP listener: accepts connections within caps, serves each with
//! hyper under a header-read timeout, and stops gracefully.
//!
//! A connection that sends nothing costs a descriptor and a task: without
//! bounds, idle connections alone exhaust a server. So:
//! - at most `max_connections` are open at once, and at most
//!   `max_per_address` from one peer address; a connection over either is
//!   closed as soon as it is accepted (and counted), so it holds nothing
//!   and the kernel's queue keeps draining;
//! - a connection that does not finish a request's head within
//!   `header_timeout` (a new one, or one idle between requests) is closed.
//!
//! Invariants:
//! - A connection's slots (in all, and for its address) are held exactly
//!   as long as its task runs: released when it ends however it ends.
//! - On shutdown no connection is accepted any more; those open finish the
//!   request they are serving and close.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// The listener's bounds.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one peer address.
    pub max_per_address: usize,
    /// Time to send a request's head (from a new connection's start, or
    /// from the end of the last answer).
    pub header_timeout: Duration,
}

/// Open connections, in all and by peer address.
#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// Counts connections against the caps.
struct Admission {
    limits: ConnectionLimits,
    open: Mutex<Open>,
}

/// A connection's place among the open ones, given back when dropped.
struct Slot {
    admission: Arc<Admission>,
    address: IpAddr,
}

impl Admission {
    /// A slot for a connection from `address`, or `None` when a cap is
    /// reached.
    fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let from_address = open.by_address.get(&address).copied().unwrap_or(0);
        if open.total >= self.limits.max_connections || from_address >= self.limits.max_per_address
        {
            return None;
        }
        open.total += 1;
        open.by_address.insert(address, from_address + 1);
        metrics::gauge!("baton_http_connections").set(open.total as f64);
        Some(Slot {
            admission: self.clone(),
            address,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .admission
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_address.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.by_address.remove(&self.address);
            }
        }
        metrics::gauge!("baton_http_connections").set(open.total as f64);
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` ends.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let admission = Arc::new(Admission {
        limits,
        open: Mutex::default(),
    });
    let (closing, closed) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, or a connection reset before it was
                // taken: wait a moment rather than spin.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(slot) = admission.admit(peer.ip()) else {
            metrics::counter!("baton_http_connections_refused_total").increment(1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(
            router
                .clone()
                .map_request(|request: hyper::Request<Incoming>| request.map(Body::new)),
        );
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(slot);
        });
    }
    drop(closing);
    // Every connection task ends once it has answered the request it was
    // serving (idle ones at once).
    while connections_remain(&admission) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether connections are still open.
fn connections_remain(admission: &Admission) -> bool {
    admission
        .open
        .lock()
        .map(|open| open.total > 0)
        .unwrap_or(false)
}
