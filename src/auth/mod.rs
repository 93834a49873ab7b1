//! Who is calling: the principal a request acts for, from its credentials.
//!
//! baton accepts three kinds of caller, chosen by `--auth-provider`
//! (`CODEAPI_AUTH_PROVIDER`):
//! - `api-key`: baton's own API keys (`X-API-Key`, or `Authorization:
//!   Bearer|ApiKey <key>`); the principal is the key.
//! - `librechat-jwt`: LibreChat's Code API tokens ([`jwt`]); the principal
//!   is the token's (`tenant_id`, `sub`).
//! - `both`: either, one per request (both at once is refused). The default
//!   when JWT keys are configured; `api-key` otherwise.
//! - `none` (only with `CODEAPI_ALLOW_AUTH_PROVIDER_NONE=true`): nothing is
//!   verified, and every caller is one principal of the single tenant: a
//!   user id a caller claims (`User-Id`, a body's `user_id`, `?kind=user&id=`)
//!   proves nothing, and LibreChat's calls that carry none (its programmatic
//!   tool, downloads, liveness probes) must find what the others stored.
//!
//! The module knows nothing of HTTP: the API hands it the header values.
//!
//! Invariants:
//! - A principal's `owner` is the one identity its executions, request ids,
//!   files, runtime sessions, listings and storage cap are kept under. For
//!   an API key it is [`crate::token::key_identity`] (as before principals
//!   existed, so stored data keeps its owner); for a token, a digest of
//!   (tenant, subject) in another domain, so no key and no token can share
//!   an owner by construction.
//! - Files of a shared kind (`agent`, `skill`) belong to their resource in
//!   the principal's tenant, not to the principal: every principal of the
//!   tenant that names the resource reaches them, no other.
//! - API keys are compared in constant time, by their SHA-256.

pub mod jwt;

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

pub use jwt::{JwtSettings, Refusal, Verified, VerifyingKey};

/// Which credentials a server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// baton's API keys only.
    #[value(name = "api-key")]
    ApiKey,
    /// LibreChat's Code API tokens only.
    #[value(name = "librechat-jwt")]
    LibrechatJwt,
    /// A token or an API key, one per request.
    #[value(name = "both")]
    Both,
    /// Nothing: every caller is trusted to say who it is.
    #[value(name = "none")]
    None,
}

impl Provider {
    /// The provider's name, as the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::ApiKey => "api-key",
            Provider::LibrechatJwt => "librechat-jwt",
            Provider::Both => "both",
            Provider::None => "none",
        }
    }

    fn takes_keys(self) -> bool {
        matches!(self, Provider::ApiKey | Provider::Both)
    }

    fn takes_tokens(self) -> bool {
        matches!(self, Provider::LibrechatJwt | Provider::Both)
    }
}

/// How a principal was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// An API key.
    ApiKey,
    /// A verified token.
    Token,
    /// Nothing verified (`--auth-provider none`).
    Unverified,
}

/// The caller a request acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// What everything of this principal is kept under.
    pub owner: [u8; 8],
    /// Its tenant: the token's `tenant_id`; for an API key, the key itself.
    pub tenant: String,
    /// Who within the tenant: the token's `sub`; for an API key, its
    /// identity in hex.
    pub subject: String,
    /// How it was established.
    pub via: Via,
}

/// Why a request is refused before anything else.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that does not verify: 401.
    #[error("{0}")]
    Refused(Denial),
    /// Several credentials at once (`X-API-Key` and a bearer token): 400.
    #[error("Ambiguous authentication headers: send one of X-API-Key and Authorization")]
    Ambiguous,
}

/// Why a credential was refused (logged, and counted by reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// No credential at all.
    #[error("no credential")]
    Missing,
    /// An API key no configured key matches.
    #[error("unknown API key")]
    UnknownKey,
    /// An API key where this server takes tokens only.
    #[error("API keys are not accepted (--auth-provider librechat-jwt)")]
    KeyNotAccepted,
    /// A token where this server takes API keys only.
    #[error("tokens are not accepted (--auth-provider api-key)")]
    TokenNotAccepted,
    /// A token that does not verify.
    #[error("token refused: {0}")]
    Token(Refusal),
}

impl Denial {
    /// The reason as a metric label (`baton_auth_refused_total{reason}`).
    pub fn label(&self) -> &'static str {
        match self {
            Denial::Missing => "missing",
            Denial::UnknownKey => "unknown_key",
            Denial::KeyNotAccepted => "key_not_accepted",
            Denial::TokenNotAccepted => "token_not_accepted",
            Denial::Token(refusal) => refusal.label(),
        }
    }
}

/// The credentials of one request, as its headers carry them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credentials<'a> {
    /// `X-API-Key`.
    pub api_key: Option<&'a str>,
    /// `Authorization: Bearer <x>` or `ApiKey <x>`: the `<x>`.
    pub authorization: Option<&'a str>,
}

/// The subject of every unverified caller.
pub const ANONYMOUS: &str = "anonymous";

/// Checks credentials.
pub struct Authenticator {
    provider: Provider,
    api_key_hashes: Vec<[u8; 32]>,
    jwt: Option<JwtSettings>,
    /// The tenant of unverified callers.
    unverified_tenant: String,
    /// Tokens verified lately, by their SHA-256: LibreChat sends one token
    /// for up to 30 s, and its signature need not be checked again (its
    /// expiry is, at every use).
    verified: Mutex<HashMap<[u8; 32], (Principal, u64)>>,
}

/// Tokens remembered as verified, at most (the map is emptied when full).
const VERIFIED_CACHE: usize = 4096;

/// Whether `value` has the shape of a JWT (three base64url parts).
fn looks_like_jwt(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

fn digest8(parts: &[&[u8]]) -> [u8; 8] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

impl Principal {
    /// The principal of an API key.
    pub fn of_key(key: &str) -> Principal {
        let owner = crate::token::key_identity(key);
        let subject = hex::encode(owner);
        Principal {
            owner,
            tenant: format!("key:{subject}"),
            subject,
            via: Via::ApiKey,
        }
    }

    /// The principal of `subject` in `tenant` (a token's, or an
    /// unverified caller's).
    pub fn of_subject(tenant: &str, subject: &str, via: Via) -> Principal {
        Principal {
            owner: digest8(&[b"baton/principal", tenant.as_bytes(), subject.as_bytes()]),
            tenant: tenant.to_owned(),
            subject: subject.to_owned(),
            via,
        }
    }

    /// Who owns the files of `resource` when this principal names it: its
    /// own owner for `user` files (the resource id is informational, as in
    /// the official Code API); the resource in this principal's tenant for
    /// `agent` and `skill` files.
    pub fn files_owner(&self, resource: &Resource) -> [u8; 8] {
        match resource.kind {
            Kind::User => self.owner,
            kind => digest8(&[
                b"baton/scope",
                self.tenant.as_bytes(),
                kind.name().as_bytes(),
                resource.id.as_bytes(),
                resource.version.as_deref().unwrap_or("").as_bytes(),
            ]),
        }
    }
}

/// What kind of resource a file belongs to (LibreChat's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A user's own files (chat attachments, outputs).
    User,
    /// An agent's files, shared by the tenant's users of the agent.
    Agent,
    /// A skill's files at one version.
    Skill,
}

impl Kind {
    /// The kind as LibreChat spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Agent => "agent",
            Kind::Skill => "skill",
        }
    }

    /// Reads `user`, `agent` or `skill`.
    pub fn parse(text: &str) -> Result<Kind, String> {
        match text {
            "user" => Ok(Kind::User),
            "agent" => Ok(Kind::Agent),
            "skill" => Ok(Kind::Skill),
            _ => Err("kind must be one of: skill, agent, user".into()),
        }
    }
}

/// The resource a file belongs to: LibreChat's `kind`, `id` (a file ref's
/// `resource_id`) and, for skills, `version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Its kind.
    pub kind: Kind,
    /// Its id (empty for a `user` resource named by the caller alone).
    pub id: String,
    /// A skill's version.
    pub version: Option<String>,
}

impl Resource {
    /// The caller's own files.
    pub fn own() -> Resource {
        Resource {
            kind: Kind::User,
            id: String::new(),
            version: None,
        }
    }

    /// A resource from its parts as a form, a query or a file ref gives
    /// them (each absent, or text); `None` kind is the caller's own files.
    /// The rules are the official Code API's: `id` is required for `agent`
    /// and `skill` (1 to 128 of `A-Za-z0-9_.:-`), a `version` is required
    /// for `skill` and refused for the others.
    pub fn parse(
        kind: Option<&str>,
        id: Option<&str>,
        version: Option<&str>,
    ) -> Result<Resource, String> {
        let kind = match kind.filter(|k| !k.is_empty()) {
            None => return Ok(Resource::own()),
            Some(kind) => Kind::parse(kind)?,
        };
        let id = id.unwrap_or("");
        if !id.is_empty() && !valid_resource_id(id) {
            return Err(format!(
                "id {id:?} is invalid: 1 to 128 of A-Z a-z 0-9 _ . : -"
            ));
        }
        if id.is_empty() && kind != Kind::User {
            return Err(format!("id is required for kind: '{}'", kind.name()));
        }
        let version = version.filter(|v| !v.is_empty());
        let version = match (kind, version) {
            (Kind::Skill, None) => return Err("version is required for kind: 'skill'".into()),
            (Kind::Skill, Some(v)) => Some(canonical_version(v)?),
            (_, Some(_)) => return Err("version is only valid for kind: 'skill'".into()),
            (_, None) => None,
        };
        Ok(Resource {
            kind,
            id: id.to_owned(),
            version,
        })
    }
}

/// A resource id as the official Code API accepts one.
fn valid_resource_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// A skill version as a number's canonical text (`"3"` and `"3.0"` are one
/// version, as JavaScript's `Number()` reads them).
fn canonical_version(text: &str) -> Result<String, String> {
    let number: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| "version must be a number for kind: 'skill'".to_owned())?;
    if number.fract() == 0.0 && number.abs() < 1e15 {
        Ok(format!("{}", number as i64))
    } else {
        Ok(format!("{number}"))
    }
}

impl Authenticator {
    /// A checker for `provider`, with these API keys and token settings.
    pub fn new(
        provider: Provider,
        api_keys: &[String],
        jwt: Option<JwtSettings>,
        unverified_tenant: String,
    ) -> Authenticator {
        Authenticator {
            provider,
            api_key_hashes: api_keys
                .iter()
                .map(|key| Sha256::digest(key.as_bytes()).into())
                .collect(),
            jwt,
            unverified_tenant,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// The provider in force.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The principal `credentials` establish, or why they do not.
    pub fn authenticate(&self, credentials: &Credentials<'_>) -> Result<Principal, AuthError> {
        let api_key = credentials.api_key.map(str::trim).filter(|k| !k.is_empty());
        let authorization = credentials
            .authorization
            .map(str::trim)
            .filter(|k| !k.is_empty());
        if api_key.is_some() && authorization.is_some() {
            return Err(AuthError::Ambiguous);
        }
        if self.provider == Provider::None {
            return Ok(Principal::of_subject(
                &self.unverified_tenant,
                ANONYMOUS,
                Via::Unverified,
            ));
        }
        let refused = |denial| Err(AuthError::Refused(denial));
        match (api_key, authorization) {
            (Some(key), _) => self.by_key(key),
            (None, Some(value)) if looks_like_jwt(value) => match (&self.jwt, self.provider) {
                (Some(jwt), provider) if provider.takes_tokens() => self.by_token(jwt, value),
                // A key that happens to look like a token.
                _ if self.provider.takes_keys() => self.by_key(value),
                _ => refused(Denial::TokenNotAccepted),
            },
            (None, Some(value)) => self.by_key(value),
            (None, None) => refused(Denial::Missing),
        }
    }

    /// The principal of a token: from the tokens verified lately while it
    /// is within its time, else verified now (and remembered).
    fn by_token(&self, jwt: &JwtSettings, token: &str) -> Result<Principal, AuthError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = jwt::now_secs();
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        match verified.get(&digest) {
            Some((principal, exp)) if jwt.still_valid(*exp, now) => return Ok(principal.clone()),
            Some(_) => {
                verified.remove(&digest);
                return Err(AuthError::Refused(Denial::Token(Refusal::Expired)));
            }
            None => {}
        }
        drop(verified);
        let checked = jwt
            .verify(token)
            .map_err(|r| AuthError::Refused(Denial::Token(r)))?;
        let principal = Principal::of_subject(&checked.tenant, &checked.subject, Via::Token);
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified.len() >= VERIFIED_CACHE {
            verified.clear();
        }
        verified.insert(digest, (principal.clone(), checked.expires_at));
        Ok(principal)
    }

    /// The principal of an API key.
    fn by_key(&self, key: &str) -> Result<Principal, AuthError> {
        if !self.provider.takes_keys() {
            return Err(AuthError::Refused(Denial::KeyNotAccepted));
        }
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut matched = 0u8;
        for accepted in &self.api_key_hashes {
            matched |= constant_time_eq(&digest, accepted);
        }
        if matched == 1 {
            Ok(Principal::of_key(key))
        } else {
            Err(AuthError::Refused(Denial::UnknownKey))
        }
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> u8 {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    u8::from(difference == 0)
}

#[cfg(test)]
mod tests;
