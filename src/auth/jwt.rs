//! LibreChat's Code API tokens: `Authorization: Bearer <JWT>` as LibreChat
//! mints them (`packages/api/src/auth/codeapi.ts`), verified as the official
//! Code API verifies them (`service/src/auth/librechat-jwt.ts`): EdDSA
//! (Ed25519) or RS256 under a known `kid`, `iss`, `aud`, `exp`/`nbf`/`iat`
//! within the clock skew, a lifetime of at most the maximum, and the claims
//! LibreChat always sends. Signatures are checked by `jsonwebtoken`; this
//! module only chooses the key and reads the claims.
//!
//! Invariants:
//! - A token is accepted only under a key configured for its `kid`, with an
//!   algorithm both allowed and of that key's family: `alg: none`, an HMAC
//!   algorithm, or RS256 named on an Ed25519 key are refused before any
//!   signature check.
//! - Every refusal has a [`Refusal`] reason (for the log and the metric);
//!   the client is told only that the token is invalid.
//! - A `jti` may come again: LibreChat reuses a token for up to 30 s.

use std::collections::HashMap;
use std::path::Path;

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// The longest `clock skew` the official server allows, seconds.
pub const MAX_CLOCK_SKEW_SECS: u64 = 30;
/// The longest token lifetime (`exp - iat`) LibreChat mints, seconds.
pub const MAX_TTL_SECS: u64 = 300;
/// The longest `jti`, `sub` or `tenant_id` accepted, bytes.
const MAX_CLAIM_LEN: usize = 256;

/// Why a token was refused: the reason logged and counted
/// (`baton_auth_refused_total{reason}`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not three base64url parts, or a header or claims that are not JSON.
    #[error("malformed token")]
    Malformed,
    /// `alg` not in the allowed list (`none`, `HS256`...).
    #[error("algorithm {0:?} is not allowed")]
    Algorithm(String),
    /// No `kid` in the header.
    #[error("the header has no kid")]
    MissingKid,
    /// A `kid` no configured key has.
    #[error("unknown kid {0:?}")]
    UnknownKid(String),
    /// The header's algorithm is not the key's (RS256 on an Ed25519 key).
    #[error("algorithm {alg:?} does not match the key of kid {kid:?}")]
    KeyMismatch {
        /// The header's algorithm.
        alg: String,
        /// The key.
        kid: String,
    },
    /// The signature does not verify.
    #[error("bad signature")]
    Signature,
    /// Past `exp` (beyond the skew).
    #[error("expired")]
    Expired,
    /// Before `nbf`, or `iat` in the future (beyond the skew).
    #[error("not yet valid")]
    NotYetValid,
    /// `exp - iat` over the maximum lifetime.
    #[error("lifetime over {0} s")]
    Lifetime(u64),
    /// `iss` is not the configured issuer.
    #[error("wrong issuer")]
    Issuer,
    /// `aud` does not name the configured audience.
    #[error("wrong audience")]
    Audience,
    /// A required claim is missing or of the wrong type.
    #[error("claim {0:?} is missing or invalid")]
    Claim(&'static str),
}

impl Refusal {
    /// The reason as a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Algorithm(_) => "algorithm",
            Refusal::MissingKid => "missing_kid",
            Refusal::UnknownKid(_) => "unknown_kid",
            Refusal::KeyMismatch { .. } => "key_mismatch",
            Refusal::Signature => "signature",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::Lifetime(_) => "lifetime",
            Refusal::Issuer => "issuer",
            Refusal::Audience => "audience",
            Refusal::Claim(_) => "claim",
        }
    }
}

/// A verification key and the one algorithm it verifies.
#[derive(Clone)]
pub struct VerifyingKey {
    key: DecodingKey,
    algorithm: Algorithm,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerifyingKey({:?})", self.algorithm)
    }
}

impl VerifyingKey {
    /// A public key given as text: a PEM (`-----BEGIN PUBLIC KEY-----`,
    /// Ed25519 or RSA, or `BEGIN RSA PUBLIC KEY`), the base64 of its DER,
    /// or a JWK object (`{"kty": "OKP"|"RSA", ...}`). `\n` escapes are
    /// read as line breaks, as LibreChat reads its own key variables.
    pub fn parse(text: &str) -> Result<VerifyingKey, String> {
        let text = text.trim().replace("\\n", "\n");
        if text.starts_with('{') {
            let jwk: jsonwebtoken::jwk::Jwk =
                serde_json::from_str(&text).map_err(|e| format!("not a JWK: {e}"))?;
            return Self::from_jwk(&jwk);
        }
        let pem = if text.starts_with("-----BEGIN") {
            text
        } else {
            let body: String = text.split_whitespace().collect();
            format!("-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n")
        };
        if let Ok(key) = DecodingKey::from_ed_pem(pem.as_bytes()) {
            return Ok(VerifyingKey {
                key,
                algorithm: Algorithm::EdDSA,
            });
        }
        DecodingKey::from_rsa_pem(pem.as_bytes())
            .map(|key| VerifyingKey {
                key,
                algorithm: Algorithm::RS256,
            })
            .map_err(|_| "not an Ed25519 or RSA public key (PEM, base64 DER or JWK)".to_owned())
    }

    /// A key from a JWK: `OKP` (Ed25519) or `RSA`.
    pub fn from_jwk(jwk: &jsonwebtoken::jwk::Jwk) -> Result<VerifyingKey, String> {
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            _ => return Err("only OKP (Ed25519) and RSA keys verify Code API tokens".into()),
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("unusable JWK: {e}"))?;
        Ok(VerifyingKey { key, algorithm })
    }
}

/// How tokens are checked.
#[derive(Clone, Debug)]
pub struct JwtSettings {
    /// Keys by `kid`.
    pub keys: HashMap<String, VerifyingKey>,
    /// The expected `iss`.
    pub issuer: String,
    /// The audience `aud` must name.
    pub audience: String,
    /// The algorithms accepted.
    pub algorithms: Vec<Algorithm>,
    /// Seconds of clock difference tolerated on `exp`, `nbf` and `iat`.
    pub clock_skew_secs: u64,
    /// The longest `exp - iat`, seconds.
    pub max_ttl_secs: u64,
    /// The tenant of a token without `tenant_id`.
    pub default_tenant: String,
}

impl JwtSettings {
    /// Reads `CODEAPI_JWT_ALLOWED_ALGS`-style text: `EdDSA,RS256`.
    pub fn parse_algorithms(text: &str) -> Result<Vec<Algorithm>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| match name {
                "EdDSA" => Ok(Algorithm::EdDSA),
                "RS256" => Ok(Algorithm::RS256),
                other => Err(format!(
                    "algorithm {other:?} is not accepted for Code API tokens: give EdDSA and/or RS256"
                )),
            })
            .collect()
    }

    /// The keys of a directory: each file a public key (PEM, base64 DER or
    /// JWK), its `kid` the file name without its extension.
    pub fn keys_from_dir(dir: &Path) -> Result<Vec<(String, VerifyingKey)>, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut keys = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if !path.is_file() {
                continue;
            }
            let Some(kid) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if kid.starts_with('.') {
                continue;
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let key = VerifyingKey::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            keys.push((kid.to_owned(), key));
        }
        Ok(keys)
    }

    /// The keys of an inline JWKS (`{"keys": [{"kid": ..., ...}]}`).
    pub fn keys_from_jwks(text: &str) -> Result<Vec<(String, VerifyingKey)>, String> {
        let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
        set.keys
            .iter()
            .map(|jwk| {
                let kid = jwk
                    .common
                    .key_id
                    .clone()
                    .filter(|kid| !kid.is_empty())
                    .ok_or_else(|| "every key of the JWKS needs a kid".to_owned())?;
                let key = VerifyingKey::from_jwk(jwk).map_err(|e| format!("kid {kid:?}: {e}"))?;
                Ok((kid, key))
            })
            .collect()
    }
}

/// What a verified token says of its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// `tenant_id`, or the default tenant.
    pub tenant: String,
    /// `sub`: the LibreChat user id.
    pub subject: String,
    /// `role`, when given.
    pub role: Option<String>,
    /// `exp`: when it stops being accepted (beyond the skew).
    pub expires_at: u64,
}

/// The claims read beyond those `jsonwebtoken` checks.
#[derive(Deserialize)]
struct Claims {
    sub: Option<serde_json::Value>,
    iat: Option<serde_json::Value>,
    exp: Option<serde_json::Value>,
    jti: Option<serde_json::Value>,
    tenant_id: Option<serde_json::Value>,
    role: Option<serde_json::Value>,
}

/// The header fields chosen on.
#[derive(Deserialize)]
struct Header {
    alg: Option<String>,
    kid: Option<String>,
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The header of `token`, read without trusting it.
fn header_of(token: &str) -> Result<Header, Refusal> {
    use base64::Engine;
    let encoded = token.split('.').next().ok_or(Refusal::Malformed)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .map_err(|_| Refusal::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Refusal::Malformed)
}

/// A string claim of 1 to [`MAX_CLAIM_LEN`] bytes.
fn text_claim(value: Option<&serde_json::Value>, name: &'static str) -> Result<String, Refusal> {
    match value {
        Some(serde_json::Value::String(text))
            if !text.is_empty() && text.len() <= MAX_CLAIM_LEN =>
        {
            Ok(text.clone())
        }
        _ => Err(Refusal::Claim(name)),
    }
}

/// A time claim: whole seconds since the epoch.
fn time_claim(value: Option<&serde_json::Value>, name: &'static str) -> Result<u64, Refusal> {
    value
        .and_then(serde_json::Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .map(|t| t as u64)
        .ok_or(Refusal::Claim(name))
}

impl JwtSettings {
    /// Verifies `token`; what it says of its caller, or why it is refused.
    pub fn verify(&self, token: &str) -> Result<Verified, Refusal> {
        let header = header_of(token)?;
        let alg_name = header.alg.unwrap_or_default();
        let algorithm = match alg_name.as_str() {
            "EdDSA" => Algorithm::EdDSA,
            "RS256" => Algorithm::RS256,
            _ => return Err(Refusal::Algorithm(alg_name)),
        };
        if !self.algorithms.contains(&algorithm) {
            return Err(Refusal::Algorithm(alg_name));
        }
        let kid = header
            .kid
            .filter(|k| !k.is_empty())
            .ok_or(Refusal::MissingKid)?;
        let key = self
            .keys
            .get(&kid)
            .ok_or_else(|| Refusal::UnknownKid(kid.clone()))?;
        if key.algorithm != algorithm {
            return Err(Refusal::KeyMismatch { alg: alg_name, kid });
        }
        let claims = self.checked_claims(token, key, algorithm)?;
        let now = now_secs();
        let iat = time_claim(claims.iat.as_ref(), "iat")?;
        let exp = time_claim(claims.exp.as_ref(), "exp")?;
        if iat > now + self.clock_skew_secs {
            return Err(Refusal::NotYetValid);
        }
        if exp.saturating_sub(iat) > self.max_ttl_secs {
            return Err(Refusal::Lifetime(self.max_ttl_secs));
        }
        text_claim(claims.jti.as_ref(), "jti")?;
        let subject = text_claim(claims.sub.as_ref(), "sub")?;
        let tenant = match claims.tenant_id {
            None | Some(serde_json::Value::Null) => self.default_tenant.clone(),
            Some(value) => text_claim(Some(&value), "tenant_id")?,
        };
        let role = claims.role.and_then(|r| r.as_str().map(str::to_owned));
        Ok(Verified {
            tenant,
            subject,
            role,
            expires_at: exp,
        })
    }

    /// Whether a token verified before, expiring at `exp`, is still
    /// accepted `now`, as [`JwtSettings::verify`] would accept it (a
    /// verified token's other checks cannot change).
    pub fn still_valid(&self, exp: u64, now: u64) -> bool {
        now <= exp.saturating_add(self.clock_skew_secs)
    }

    /// The signature, `exp`, `nbf`, `iss` and `aud` checked by
    /// `jsonwebtoken`; the claims it leaves to us.
    fn checked_claims(
        &self,
        token: &str,
        key: &VerifyingKey,
        algorithm: Algorithm,
    ) -> Result<Claims, Refusal> {
        use jsonwebtoken::errors::ErrorKind;
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.clock_skew_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map(|data| data.claims)
            .map_err(|error| match error.kind() {
                ErrorKind::InvalidSignature => Refusal::Signature,
                ErrorKind::ExpiredSignature => Refusal::Expired,
                ErrorKind::ImmatureSignature => Refusal::NotYetValid,
                ErrorKind::InvalidIssuer => Refusal::Issuer,
                ErrorKind::InvalidAudience => Refusal::Audience,
                ErrorKind::MissingRequiredClaim(name) | ErrorKind::InvalidClaimFormat(name) => {
                    Refusal::Claim(match name.as_str() {
                        "exp" => "exp",
                        "nbf" => "nbf",
                        "iss" => "iss",
                        "aud" => "aud",
                        _ => "sub",
                    })
                }
                ErrorKind::InvalidAlgorithm => Refusal::KeyMismatch {
                    alg: format!("{algorithm:?}"),
                    kid: String::new(),
                },
                _ => Refusal::Malformed,
            })
    }
}
