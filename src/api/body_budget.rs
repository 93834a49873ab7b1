//! The bytes of request bodies the server holds at once, across every
//! connection: each request reserves what its body may bring before any
//! of it is read (its announced length, or its route's limit when it does
//! not announce one), and gives it back when its answer is made. A request
//! that cannot reserve within the body timeout is answered 503 with
//! `Retry-After`, its body unread.
//!
//! Invariant: the bodies being read or held by handlers never exceed the
//! budget (the body limit already bounds each one; this bounds them all).

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget's unit: reservations are counted in KiB (a semaphore counts
/// in `u32`).
const UNIT: usize = 1024;

/// The budget of request body bytes in flight.
pub struct BodyBudget {
    units: Arc<Semaphore>,
    total_units: u32,
}

/// Why a body could not be reserved.
#[derive(Debug)]
pub struct Exhausted {
    /// The budget, bytes.
    pub budget: usize,
}

impl BodyBudget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> Self {
        let total_units = u32::try_from(bytes.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX);
        BodyBudget {
            units: Arc::new(Semaphore::new(total_units as usize)),
            total_units,
        }
    }

    /// Reserves room for the body `headers` announce (up to `limit`),
    /// waiting up to `wait` for other bodies to be done with; the room is
    /// given back when the permit drops. A request without a body reserves
    /// nothing.
    pub async fn reserve(
        &self,
        headers: &HeaderMap,
        limit: usize,
        wait: Duration,
    ) -> Result<Option<OwnedSemaphorePermit>, Exhausted> {
        let bytes = announced(headers, limit);
        if bytes == 0 {
            return Ok(None);
        }
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .min(self.total_units);
        let acquired = tokio::time::timeout(wait, self.units.clone().acquire_many_owned(units));
        match acquired.await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            _ => {
                metrics::counter!("baton_http_bodies_refused_total").increment(1);
                Err(Exhausted {
                    budget: self.total_units as usize * UNIT,
                })
            }
        }
    }
}

/// The bytes a request's body may bring: its `content-length` (within
/// `limit`), `limit` when it is sent in chunks, none otherwise.
fn announced(headers: &HeaderMap, limit: usize) -> usize {
    let length = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    match length {
        Some(length) => length.min(limit),
        None if headers.contains_key(TRANSFER_ENCODING) => limit,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_body_reserves_what_it_announces_within_its_limit() {
        assert_eq!(
            announced(&headers(&[("content-length", "5000")]), 1 << 20),
            5000
        );
        assert_eq!(
            announced(&headers(&[("content-length", "9999999")]), 4096),
            4096
        );
        assert_eq!(
            announced(&headers(&[("transfer-encoding", "chunked")]), 4096),
            4096
        );
        assert_eq!(announced(&headers(&[]), 4096), 0);
    }

    #[tokio::test]
    async fn bodies_past_the_budget_wait_then_are_refused() {
        let budget = BodyBudget::new(10 * UNIT);
        let eight = headers(&[("content-length", "8192")]);
        let wait = Duration::from_millis(50);
        let held = budget.reserve(&eight, 1 << 20, wait).await;
        assert!(matches!(held, Ok(Some(_))));
        let refused = budget.reserve(&eight, 1 << 20, wait).await;
        assert_eq!(refused.err().map(|e| e.budget), Some(10 * UNIT));
        drop(held);
        assert!(matches!(
            budget.reserve(&eight, 1 << 20, wait).await,
            Ok(Some(_))
        ));
    }
}
