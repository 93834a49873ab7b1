//! The bytes of request bodies the server holds at once, across every
//! connection: each request reserves what its body may bring before any
//! of it is read (its announced length, or its route's limit when it does
//! not announce one), and gives it back when its answer is made. A request
//! that cannot reserve within the body timeout is answered 503 with
//! `Retry-After`, its body unread.
//!
//! One principal (an API key, a LibreChat user) may hold a share of the
//! budget only: a quarter, or one largest body if that is more. A request
//! that would take its principal past its share is answered 503 at once,
//! so one principal's bodies cannot keep every other principal's waiting.
//!
//! Invariants:
//! - The bodies being read or held by handlers never exceed the budget
//!   (the body limit already bounds each one; this bounds them all).
//! - The bodies of one principal never exceed its share; what it holds is
//!   counted from its reservation until the answer is made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
    /// What one principal may hold, units.
    share_units: u32,
    /// What each principal holds now, units (principals holding nothing
    /// are not kept).
    held: Arc<Mutex<HashMap<[u8; 8], u32>>>,
}

/// Room reserved for one body: given back (to the budget and its
/// principal's share) when dropped.
pub struct BodyRoom {
    /// The room in the budget, once given.
    permit: Option<OwnedSemaphorePermit>,
    owner: [u8; 8],
    units: u32,
    held: Arc<Mutex<HashMap<[u8; 8], u32>>>,
}

impl Drop for BodyRoom {
    fn drop(&mut self) {
        if let Ok(mut held) = self.held.lock()
            && let Some(units) = held.get_mut(&self.owner)
        {
            *units = units.saturating_sub(self.units);
            if *units == 0 {
                held.remove(&self.owner);
            }
        }
    }
}

/// Why a body could not be reserved.
#[derive(Debug)]
pub struct Exhausted {
    /// The budget, bytes.
    pub budget: usize,
}

impl BodyBudget {
    /// A budget of `bytes` (at least one unit), of which one principal
    /// may hold a quarter, or `largest_body` if that is more.
    pub fn new(bytes: usize, largest_body: usize) -> Self {
        let units_of = |bytes: usize| u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        let total_units = units_of(bytes).max(1);
        BodyBudget {
            units: Arc::new(Semaphore::new(total_units as usize)),
            total_units,
            share_units: (total_units / 4)
                .max(units_of(largest_body))
                .min(total_units),
            held: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Counts `units` against `owner`'s share; false (nothing counted)
    /// when they would take it past the share.
    fn take_share(&self, owner: [u8; 8], units: u32) -> bool {
        let Ok(mut held) = self.held.lock() else {
            return false;
        };
        let holding = held.get(&owner).copied().unwrap_or(0);
        if holding.saturating_add(units) > self.share_units {
            return false;
        }
        held.insert(owner, holding + units);
        true
    }

    /// Reserves room for the body `headers` announce (up to `limit`) for
    /// `owner`, within its share at once, then within the budget, waiting
    /// up to `wait` for other bodies to be done with; the room is given
    /// back when it drops. A request without a body reserves nothing.
    pub async fn reserve(
        &self,
        owner: [u8; 8],
        headers: &HeaderMap,
        limit: usize,
        wait: Duration,
    ) -> Result<Option<BodyRoom>, Exhausted> {
        let bytes = announced(headers, limit);
        if bytes == 0 {
            return Ok(None);
        }
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .min(self.share_units);
        if !self.take_share(owner, units) {
            return Err(self.refused());
        }
        // Counted against the share from here: given back when the room
        // drops, also when the budget has no room in time.
        let mut room = BodyRoom {
            permit: None,
            owner,
            units,
            held: self.held.clone(),
        };
        let acquired = tokio::time::timeout(wait, self.units.clone().acquire_many_owned(units));
        match acquired.await {
            Ok(Ok(permit)) => {
                room.permit = Some(permit);
                Ok(Some(room))
            }
            _ => Err(self.refused()),
        }
    }

    fn refused(&self) -> Exhausted {
        metrics::counter!("baton_http_bodies_refused_total").increment(1);
        Exhausted {
            budget: self.total_units as usize * UNIT,
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

    const A: [u8; 8] = [1; 8];
    const B: [u8; 8] = [2; 8];

    #[tokio::test]
    async fn bodies_past_the_budget_wait_then_are_refused() {
        let budget = BodyBudget::new(10 * UNIT, 8 * UNIT);
        let eight = headers(&[("content-length", "8192")]);
        let wait = Duration::from_millis(50);
        let held = budget.reserve(A, &eight, 1 << 20, wait).await;
        assert!(matches!(held, Ok(Some(_))));
        let refused = budget.reserve(B, &eight, 1 << 20, wait).await;
        assert_eq!(refused.err().map(|e| e.budget), Some(10 * UNIT));
        drop(held);
        assert!(matches!(
            budget.reserve(B, &eight, 1 << 20, wait).await,
            Ok(Some(_))
        ));
    }

    #[tokio::test]
    async fn one_principal_holds_its_share_and_no_more() {
        // A quarter of 40 units: 10, more than one largest body (8).
        let budget = BodyBudget::new(40 * UNIT, 8 * UNIT);
        let eight = headers(&[("content-length", "8192")]);
        let wait = Duration::from_millis(50);
        let first = budget.reserve(A, &eight, 1 << 20, wait).await;
        assert!(matches!(first, Ok(Some(_))));
        // The budget has 32 units free, A's share 2.
        assert!(budget.reserve(A, &eight, 1 << 20, wait).await.is_err());
        let other = budget.reserve(B, &eight, 1 << 20, wait).await;
        assert!(matches!(other, Ok(Some(_))));
        drop(first);
        assert!(matches!(
            budget.reserve(A, &eight, 1 << 20, wait).await,
            Ok(Some(_))
        ));
        // A refused reservation took nothing from the share.
        assert_eq!(
            budget
                .held
                .lock()
                .map(|h| h.get(&A).copied())
                .ok()
                .flatten(),
            None
        );
    }
}
