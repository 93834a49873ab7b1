//! The continuation-token codec. Keys: `k2` (signs, secret 32 x 0x07) and
//! `k1` (verifies only, 32 x 0x09).
//!
//! Properties:
//! - any text verifies without panicking, and text that verifies is exactly
//!   the token the named key signs for the claims it carries;
//! - a token signed here verifies to its claims until it expires;
//! - flipping any one bit of a valid token, in its text or in its bytes,
//!   makes it fail (and never as "expired", which is only for authentic
//!   tokens).
#![no_main]

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use baton::token::{SigningKey, SigningKeys, TokenError};
use libfuzzer_sys::fuzz_target;

/// The input: 48 bytes of parameters, then the text to verify (so seeds
/// can hold real tokens).
struct Input {
    text: String,
    now: u64,
    execution_id: [u8; 16],
    round: u32,
    identity: [u8; 8],
    expires_at: u64,
    text_bit: u16,
    byte_bit: u16,
}

impl Input {
    fn parse(data: &[u8]) -> Option<Self> {
        let (params, text) = data.split_at_checked(48)?;
        let (execution_id, rest) = params.split_first_chunk::<16>()?;
        let (round, rest) = rest.split_first_chunk::<4>()?;
        let (identity, rest) = rest.split_first_chunk::<8>()?;
        let (expires_at, rest) = rest.split_first_chunk::<8>()?;
        let (now, rest) = rest.split_first_chunk::<8>()?;
        let (text_bit, rest) = rest.split_first_chunk::<2>()?;
        let (byte_bit, _) = rest.split_first_chunk::<2>()?;
        Some(Self {
            text: String::from_utf8_lossy(text).into_owned(),
            now: u64::from_be_bytes(*now),
            execution_id: *execution_id,
            round: u32::from_be_bytes(*round),
            identity: *identity,
            expires_at: u64::from_be_bytes(*expires_at),
            text_bit: u16::from_be_bytes(*text_bit),
            byte_bit: u16::from_be_bytes(*byte_bit),
        })
    }
}

fn key(id: &str, byte: u8) -> SigningKey {
    SigningKey {
        id: id.to_owned(),
        secret: vec![byte; 32],
    }
}

fn keys_signing_with(current: SigningKey, others: Vec<SigningKey>) -> SigningKeys {
    match SigningKeys::new(current, others) {
        Ok(keys) => keys,
        Err(error) => panic!("fixed keys are valid: {error}"),
    }
}

/// Flips bit `bit` (modulo the length) of `bytes`.
fn flip(bytes: &mut [u8], bit: u16) {
    let bit = usize::from(bit) % (bytes.len() * 8);
    bytes[bit / 8] ^= 1 << (bit % 8);
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let (current, old) = (key("k2", 7), key("k1", 9));
    let keys = keys_signing_with(current.clone(), vec![old.clone()]);

    if let Ok(claims) = keys.verify(&input.text, input.now) {
        let signer = if claims.key_id == current.id {
            current.clone()
        } else {
            old.clone()
        };
        let canonical = keys_signing_with(signer, Vec::new()).sign(
            claims.execution_id,
            claims.round,
            claims.key_identity,
            claims.expires_at,
        );
        assert_eq!(
            input.text.trim(),
            canonical,
            "accepted text that the key did not sign"
        );
    }

    let expires_at = input.expires_at.max(1);
    let token = keys.sign(input.execution_id, input.round, input.identity, expires_at);
    match keys.verify(&token, input.now) {
        Ok(claims) => {
            assert!(expires_at > input.now, "an expired token verified");
            assert_eq!(
                (
                    claims.execution_id,
                    claims.round,
                    claims.key_identity,
                    claims.expires_at
                ),
                (input.execution_id, input.round, input.identity, expires_at)
            );
            assert_eq!(claims.key_id, current.id);
        }
        Err(TokenError::Expired) => assert!(expires_at <= input.now),
        Err(error) => panic!("a fresh token failed: {error}"),
    }

    let mut text = token.clone().into_bytes();
    flip(&mut text, input.text_bit);
    let flipped = String::from_utf8_lossy(&text);
    let refused = keys.verify(&flipped, 0);
    assert!(
        refused.is_err() && refused != Err(TokenError::Expired),
        "bit-flipped text: {refused:?}"
    );

    let Ok(mut bytes) = URL_SAFE_NO_PAD.decode(&token) else {
        panic!("a token is base64url");
    };
    flip(&mut bytes, input.byte_bit);
    let refused = keys.verify(&URL_SAFE_NO_PAD.encode(&bytes), 0);
    assert!(
        refused.is_err() && refused != Err(TokenError::Expired),
        "bit-flipped bytes: {refused:?}"
    );
});
