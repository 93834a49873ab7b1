//! Execution profiles (LibreChat's `X-CodeAPI-Expected-Profile`): `default`
//! (every call starts from the request's files) and `stateful` (a call
//! with a `runtime_session_hint` runs in that runtime session, whose
//! `/mnt/data` lives from one call to the next). baton serves both, so a
//! valid profile never mismatches.
//!
//! Invariants:
//! - A request that names anything but `default` or `stateful` (exactly:
//!   repeated headers are joined, as the official Code API reads them) is
//!   answered 400 `invalid_execution_profile` before anything else.
//! - Every answer carries `X-CodeAPI-Execution-Profile`: the profile the
//!   request was served in.

use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The header a client names its profile in.
pub const EXPECTED: &str = "x-codeapi-expected-profile";
/// The header every answer names its profile in.
pub const SERVED: &str = "x-codeapi-execution-profile";

/// An execution profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Each call on its own.
    Default,
    /// Calls with a `runtime_session_hint` share a runtime session.
    Stateful,
}

impl Profile {
    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Stateful => "stateful",
        }
    }
}

/// The profile a request expects (`default` when it names none).
pub fn expected(headers: &HeaderMap) -> Result<Profile, ApiError> {
    let values: Vec<&str> = headers
        .get_all(EXPECTED)
        .iter()
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
        .collect();
    if values.is_empty() {
        return Ok(Profile::Default);
    }
    match values.join(",").as_str() {
        "default" => Ok(Profile::Default),
        "stateful" => Ok(Profile::Stateful),
        other => Err(ApiError::InvalidProfile(format!(
            "Invalid execution profile: {other:?}; baton serves \"default\" and \"stateful\""
        ))),
    }
}

/// Refuses an invalid profile; says the profile served on every answer.
pub async fn answer_in_profile(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (mut response, profile) = match expected(request.headers()) {
        Ok(profile) => (next.run(request).await, profile),
        Err(error) => (error.into_response(), Profile::Default),
    };
    response
        .headers_mut()
        .insert(SERVED, HeaderValue::from_static(profile.name()));
    response
}
