//! Signed continuation tokens.
//!
//! A token is URL-safe base64 (no padding) of a compact binary payload and its
//! HMAC-SHA256 tag:
//!
//! ```text
//! version u8 = 1 | key id length u8 | key id | execution id [16]
//! | round u32 BE | API key identity [8] | expires_at u64 BE | tag [32]
//! ```
//!
//! Invariants:
//! - The tag covers every byte before it, the signing key id included, and is
//!   checked in constant time (`Mac::verify_slice`).
//! - Tokens name the key that signed them, so several keys verify while only
//!   the current one signs: a key can be rotated without breaking tokens in
//!   flight.
//! - Nothing in a token is trusted before its tag is verified, and expiry is
//!   only reported for authentic tokens.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
const TAG_LEN: usize = 32;
const FIXED_LEN: usize = 1 + 1 + 16 + 4 + 8 + 8;
/// Longest accepted token text; anything longer is malformed.
const MAX_TOKEN_CHARS: usize = 512;
/// Shortest accepted signing secret, bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// Why a token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not base64, or the wrong shape.
    #[error("malformed token")]
    Malformed,
    /// A payload version this server does not know.
    #[error("unknown token version {0}")]
    UnknownVersion(u8),
    /// Signed by a key this server does not have.
    #[error("unknown signing key")]
    UnknownKey,
    /// The tag does not match.
    #[error("bad signature")]
    BadSignature,
    /// Authentic but past its expiry.
    #[error("token expired")]
    Expired,
    /// A configured key is unusable.
    #[error("invalid signing key: {0}")]
    InvalidKey(String),
}

/// A named signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey {
    /// Short public name, carried in tokens.
    pub id: String,
    /// The secret.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What an authentic token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// The execution.
    pub execution_id: [u8; 16],
    /// The round it continues (number of pauses before it).
    pub round: u32,
    /// Identity of the API key the execution belongs to.
    pub key_identity: [u8; 8],
    /// Unix seconds.
    pub expires_at: u64,
    /// The signing key that signed it.
    pub key_id: String,
}

/// The current signing key and the others that still verify.
#[derive(Clone, Debug)]
pub struct SigningKeys {
    current: SigningKey,
    others: Vec<SigningKey>,
}

impl SigningKeys {
    /// Checks the keys: ids 1..=64 bytes of `[A-Za-z0-9_-]`, unique; secrets
    /// at least [`MIN_SECRET_BYTES`].
    pub fn new(current: SigningKey, others: Vec<SigningKey>) -> Result<Self, TokenError> {
        let mut seen = std::collections::HashSet::new();
        for key in std::iter::once(&current).chain(&others) {
            check_key(key)?;
            if !seen.insert(key.id.as_str()) {
                return Err(TokenError::InvalidKey(format!(
                    "key id {:?} is configured twice",
                    key.id
                )));
            }
        }
        Ok(Self { current, others })
    }

    /// Signs a continuation of `round` of `execution_id` with the current key.
    pub fn sign(
        &self,
        execution_id: [u8; 16],
        round: u32,
        key_identity: [u8; 8],
        expires_at: u64,
    ) -> String {
        let key = &self.current;
        let mut bytes = Vec::with_capacity(FIXED_LEN + key.id.len() + TAG_LEN);
        bytes.push(VERSION);
        bytes.push(key.id.len() as u8);
        bytes.extend_from_slice(key.id.as_bytes());
        bytes.extend_from_slice(&execution_id);
        bytes.extend_from_slice(&round.to_be_bytes());
        bytes.extend_from_slice(&key_identity);
        bytes.extend_from_slice(&expires_at.to_be_bytes());
        let tag = mac(&key.secret, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Verifies a token at `now` (unix seconds).
    pub fn verify(&self, token: &str, now: u64) -> Result<TokenClaims, TokenError> {
        if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
            return Err(TokenError::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|_| TokenError::Malformed)?;
        let (&version, rest) = bytes.split_first().ok_or(TokenError::Malformed)?;
        if version != VERSION {
            return Err(TokenError::UnknownVersion(version));
        }
        let (&id_len, rest) = rest.split_first().ok_or(TokenError::Malformed)?;
        let id_len = usize::from(id_len);
        if bytes.len() != FIXED_LEN + id_len + TAG_LEN {
            return Err(TokenError::Malformed);
        }
        let key_id = std::str::from_utf8(&rest[..id_len]).map_err(|_| TokenError::Malformed)?;
        let key = self.find(key_id).ok_or(TokenError::UnknownKey)?;
        let (signed, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        mac(&key.secret, signed)
            .verify_slice(tag)
            .map_err(|_| TokenError::BadSignature)?;
        let claims = parse_claims(&rest[id_len..rest.len() - TAG_LEN], key_id)?;
        if claims.expires_at <= now {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }

    fn find(&self, id: &str) -> Option<&SigningKey> {
        std::iter::once(&self.current)
            .chain(&self.others)
            .find(|k| k.id == id)
    }
}

fn check_key(key: &SigningKey) -> Result<(), TokenError> {
    let id_ok = (1..=64).contains(&key.id.len())
        && key
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !id_ok {
        return Err(TokenError::InvalidKey(format!(
            "key id {:?} must be 1 to 64 characters of A-Z a-z 0-9 _ -",
            key.id
        )));
    }
    if key.secret.len() < MIN_SECRET_BYTES {
        return Err(TokenError::InvalidKey(format!(
            "key {:?}: the secret must have at least {MIN_SECRET_BYTES} bytes",
            key.id
        )));
    }
    Ok(())
}

fn mac(secret: &[u8], bytes: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; the error case cannot happen.
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(bytes);
    mac
}

fn parse_claims(fields: &[u8], key_id: &str) -> Result<TokenClaims, TokenError> {
    let (execution_id, rest) = fields
        .split_first_chunk::<16>()
        .ok_or(TokenError::Malformed)?;
    let (round, rest) = rest.split_first_chunk::<4>().ok_or(TokenError::Malformed)?;
    let (key_identity, rest) = rest.split_first_chunk::<8>().ok_or(TokenError::Malformed)?;
    let (expires_at, _) = rest.split_first_chunk::<8>().ok_or(TokenError::Malformed)?;
    Ok(TokenClaims {
        execution_id: *execution_id,
        round: u32::from_be_bytes(*round),
        key_identity: *key_identity,
        expires_at: u64::from_be_bytes(*expires_at),
        key_id: key_id.to_owned(),
    })
}

/// The short identity of an API key: the first 8 bytes of its SHA-256.
pub fn key_identity(api_key: &str) -> [u8; 8] {
    let digest = Sha256::digest(api_key.as_bytes());
    let mut identity = [0u8; 8];
    identity.copy_from_slice(&digest[..8]);
    identity
}

/// 32 random bytes from the OS.
pub fn generate_secret() -> Vec<u8> {
    let mut secret = vec![0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    secret
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(id: &str, byte: u8) -> SigningKey {
        SigningKey {
            id: id.into(),
            secret: vec![byte; 32],
        }
    }

    fn keys() -> SigningKeys {
        SigningKeys::new(key("k2", 2), vec![key("k1", 1)]).unwrap()
    }

    const ID: [u8; 16] = [7; 16];
    const OWNER: [u8; 8] = [9; 8];

    #[test]
    fn round_trip_names_everything() {
        let token = keys().sign(ID, 3, OWNER, 1000);
        let claims = keys().verify(&token, 999).unwrap();
        assert_eq!(
            claims,
            TokenClaims {
                execution_id: ID,
                round: 3,
                key_identity: OWNER,
                expires_at: 1000,
                key_id: "k2".into()
            }
        );
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
    }

    #[test]
    fn expired_only_when_authentic() {
        let token = keys().sign(ID, 0, OWNER, 1000);
        assert_eq!(keys().verify(&token, 1000), Err(TokenError::Expired));
        let mut bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            keys().verify(&URL_SAFE_NO_PAD.encode(bytes), 1000),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn rotation_old_key_still_verifies() {
        let old = SigningKeys::new(key("k1", 1), vec![]).unwrap();
        let token = old.sign(ID, 1, OWNER, 1000);
        assert_eq!(keys().verify(&token, 1).unwrap().key_id, "k1");
        let other = SigningKeys::new(key("k3", 3), vec![]).unwrap();
        assert_eq!(other.verify(&token, 1), Err(TokenError::UnknownKey));
    }

    #[test]
    fn same_id_other_secret_is_bad_signature() {
        let a = SigningKeys::new(key("k1", 1), vec![]).unwrap();
        let b = SigningKeys::new(key("k1", 4), vec![]).unwrap();
        assert_eq!(
            b.verify(&a.sign(ID, 1, OWNER, 1000), 1),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn bad_keys_are_refused() {
        assert!(SigningKeys::new(key("", 1), vec![]).is_err());
        assert!(SigningKeys::new(key("a b", 1), vec![]).is_err());
        assert!(SigningKeys::new(key("a", 1), vec![key("a", 2)]).is_err());
        let short = SigningKey {
            id: "a".into(),
            secret: vec![1; 8],
        };
        assert!(SigningKeys::new(short, vec![]).is_err());
    }

    #[test]
    fn malformed_shapes() {
        assert_eq!(keys().verify("", 1), Err(TokenError::Malformed));
        assert_eq!(keys().verify("!!!", 1), Err(TokenError::Malformed));
        assert_eq!(
            keys().verify(&"A".repeat(600), 1),
            Err(TokenError::Malformed)
        );
        let token = keys().sign(ID, 0, OWNER, 1000);
        assert_eq!(
            keys().verify(&token[..token.len() - 4], 1),
            Err(TokenError::Malformed)
        );
        let mut bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        bytes[0] = 9;
        assert_eq!(
            keys().verify(&URL_SAFE_NO_PAD.encode(bytes), 1),
            Err(TokenError::UnknownVersion(9))
        );
    }

    proptest! {
        #[test]
        fn any_single_bit_flip_is_rejected(byte in 0usize..80, bit in 0u8..8) {
            let token = keys().sign(ID, 5, OWNER, 1000);
            let mut bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
            let index = byte % bytes.len();
            bytes[index] ^= 1 << bit;
            prop_assert!(keys().verify(&URL_SAFE_NO_PAD.encode(bytes), 1).is_err());
        }

        #[test]
        fn arbitrary_text_never_verifies(text in ".{0,200}") {
            prop_assert!(keys().verify(&text, 1).is_err());
        }
    }
}
