//! Tokens of every kind against the verifier, minted here as LibreChat
//! mints them (`codeapi.ts`: header `{alg, typ: "JWT", kid}`, claims `iss`,
//! `aud`, `sub`, `iat`, `nbf`, `exp`, `jti`, `tenant_id`, `role`,
//! `principal_source`, `auth_context_hash`), and the providers' rules.

use std::collections::HashMap;

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::*;

const ED_PRIVATE: &str = include_str!("../../tests/keys/ed25519.pem");
const ED_PUBLIC: &str = include_str!("../../tests/keys/ed25519.pub.pem");
const RSA_PRIVATE: &str = include_str!("../../tests/keys/rsa.pem");
const RSA_PUBLIC: &str = include_str!("../../tests/keys/rsa.pub.pem");
const OTHER_PRIVATE: &str = include_str!("../../tests/keys/other-ed25519.pem");
const KID: &str = "lc-codeapi-2026-05";

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn settings() -> JwtSettings {
    let mut keys = HashMap::new();
    for (kid, text) in [(KID, ED_PUBLIC), ("rsa-1", RSA_PUBLIC)] {
        let key = VerifyingKey::parse(text).unwrap_or_else(|e| panic!("{kid}: {e}"));
        keys.insert(kid.to_owned(), key);
    }
    JwtSettings {
        keys,
        issuer: "librechat".into(),
        audience: "codeapi".into(),
        algorithms: vec![Algorithm::EdDSA, Algorithm::RS256],
        clock_skew_secs: 30,
        max_ttl_secs: 300,
        default_tenant: "legacy".into(),
    }
}

/// The claims LibreChat's `buildClaims` sends for user `sub`.
fn claims(sub: &str) -> Value {
    let now = now();
    json!({
        "iss": "librechat", "aud": "codeapi", "sub": sub,
        "iat": now, "nbf": now, "exp": now + 300,
        "jti": "6f1c2b1e-0000-4000-8000-000000000000",
        "tenant_id": "acme", "role": "USER",
        "principal_source": "librechat_jwt",
        "auth_context_hash": "0".repeat(64),
    })
}

fn sign(alg: Algorithm, kid: Option<&str>, pem: &str, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.typ = Some("JWT".into());
    header.kid = kid.map(str::to_owned);
    let key = match alg {
        Algorithm::EdDSA => EncodingKey::from_ed_pem(pem.as_bytes()),
        _ => EncodingKey::from_rsa_pem(pem.as_bytes()),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    jsonwebtoken::encode(&header, claims, &key).unwrap_or_else(|e| panic!("{e}"))
}

fn ed(claims: &Value) -> String {
    sign(Algorithm::EdDSA, Some(KID), ED_PRIVATE, claims)
}

fn b64(value: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    if let Some(map) = claims.as_object_mut() {
        map.remove(key);
    }
    claims
}

fn refusal(token: &str) -> Refusal {
    match settings().verify(token) {
        Ok(verified) => panic!("accepted: {verified:?}"),
        Err(refusal) => refusal,
    }
}

#[test]
fn tokens_as_librechat_mints_them_verify_to_their_tenant_and_user() {
    let verified = settings().verify(&ed(&claims("user-1")));
    assert_eq!(
        verified,
        Ok(Verified {
            tenant: "acme".into(),
            subject: "user-1".into(),
            role: Some("USER".into()),
            expires_at: (now() + 300) as u64,
        })
    );
    let rsa = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        RSA_PRIVATE,
        &claims("user-2"),
    );
    assert_eq!(
        settings().verify(&rsa).map(|v| v.subject),
        Ok("user-2".into())
    );
    // No tenant: the single tenant (`legacy` by default).
    let untenanted = ed(&without(claims("u"), "tenant_id"));
    assert_eq!(
        settings().verify(&untenanted).map(|v| v.tenant),
        Ok("legacy".into())
    );
    // `aud` as an array that names the audience; a reused jti.
    let array = ed(&with(claims("u"), "aud", json!(["other", "codeapi"])));
    assert!(settings().verify(&array).is_ok());
    assert!(settings().verify(&array).is_ok());
    // Within the skew: expired 20 s ago, not valid for another 20 s.
    let skewed = claims("u");
    let skewed = with(skewed, "exp", json!(now() - 20));
    let skewed = with(skewed, "iat", json!(now() - 200));
    assert!(
        settings()
            .verify(&ed(&with(skewed, "nbf", json!(now() - 200))))
            .is_ok()
    );
    assert!(
        settings()
            .verify(&ed(&with(claims("u"), "nbf", json!(now() + 20))))
            .is_ok()
    );
}

#[test]
fn tokens_of_every_bad_kind_are_refused_with_their_reason() {
    let now = now();
    let expired = with(
        with(claims("u"), "exp", json!(now - 60)),
        "iat",
        json!(now - 200),
    );
    let expired = with(expired, "nbf", json!(now - 200));
    assert_eq!(refusal(&ed(&expired)), Refusal::Expired);
    let early = with(claims("u"), "nbf", json!(now + 120));
    assert_eq!(refusal(&ed(&early)), Refusal::NotYetValid);
    let future = with(
        with(claims("u"), "iat", json!(now + 120)),
        "exp",
        json!(now + 300),
    );
    assert_eq!(refusal(&ed(&future)), Refusal::NotYetValid);
    let long = with(claims("u"), "exp", json!(now + 3600));
    assert_eq!(refusal(&ed(&long)), Refusal::Lifetime(300));
    assert_eq!(
        refusal(&ed(&with(claims("u"), "aud", json!("other")))),
        Refusal::Audience
    );
    assert_eq!(
        refusal(&ed(&with(claims("u"), "iss", json!("evil")))),
        Refusal::Issuer
    );
    assert_eq!(
        refusal(&ed(&without(claims("u"), "jti"))),
        Refusal::Claim("jti")
    );
    assert_eq!(
        refusal(&ed(&without(claims("u"), "sub"))),
        Refusal::Claim("sub")
    );
    assert_eq!(
        refusal(&ed(&with(claims("u"), "sub", json!("")))),
        Refusal::Claim("sub")
    );
    assert_eq!(
        refusal(&ed(&without(claims("u"), "iat"))),
        Refusal::Claim("iat")
    );
    assert_eq!(
        refusal(&ed(&with(claims("u"), "tenant_id", json!(7)))),
        Refusal::Claim("tenant_id")
    );
    // Unknown and missing kid.
    let unknown = sign(
        Algorithm::EdDSA,
        Some("lc-codeapi-2099"),
        ED_PRIVATE,
        &claims("u"),
    );
    assert_eq!(
        refusal(&unknown),
        Refusal::UnknownKid("lc-codeapi-2099".into())
    );
    assert_eq!(
        refusal(&sign(Algorithm::EdDSA, None, ED_PRIVATE, &claims("u"))),
        Refusal::MissingKid
    );
    // Signed by a key the server does not trust, under a trusted kid.
    let forged = sign(Algorithm::EdDSA, Some(KID), OTHER_PRIVATE, &claims("u"));
    assert_eq!(refusal(&forged), Refusal::Signature);
    // A valid token with its claims changed (another user), or its
    // signature altered.
    let token = ed(&claims("u"));
    let parts: Vec<&str> = token.split('.').collect();
    let swapped = format!("{}.{}.{}", parts[0], b64(&claims("admin")), parts[2]);
    assert_eq!(refusal(&swapped), Refusal::Signature);
    // A character inside the signature (the last one also holds padding
    // bits, whose change would make it malformed rather than wrong).
    let mut signature = parts[2].to_owned();
    let other = if signature[5..6] == *"A" { "B" } else { "A" };
    signature.replace_range(5..6, other);
    assert_eq!(
        refusal(&format!("{}.{}.{signature}", parts[0], parts[1])),
        Refusal::Signature
    );
    // alg none, unsigned.
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": KID})),
        b64(&claims("u"))
    );
    assert_eq!(refusal(&none), Refusal::Algorithm("none".into()));
    // HS256 "signed" with the public key's text as the secret.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(KID.into());
    let hmac = jsonwebtoken::encode(
        &header,
        &claims("u"),
        &EncodingKey::from_secret(ED_PUBLIC.as_bytes()),
    )
    .unwrap_or_default();
    assert_eq!(refusal(&hmac), Refusal::Algorithm("HS256".into()));
    // RS256 named on the Ed25519 key, and EdDSA on the RSA key.
    let rs_on_ed = sign(Algorithm::RS256, Some(KID), RSA_PRIVATE, &claims("u"));
    assert!(matches!(refusal(&rs_on_ed), Refusal::KeyMismatch { .. }));
    let ed_on_rsa = sign(Algorithm::EdDSA, Some("rsa-1"), ED_PRIVATE, &claims("u"));
    assert!(matches!(refusal(&ed_on_rsa), Refusal::KeyMismatch { .. }));
    // Not a token at all.
    for junk in ["", "a.b", "a.b.c.d", "!!!.e30.x", "e30.e30.e30"] {
        assert!(settings().verify(junk).is_err(), "{junk:?} accepted");
    }
}

#[test]
fn an_algorithm_left_out_of_the_allowed_list_is_refused() {
    let mut only_ed = settings();
    only_ed.algorithms = vec![Algorithm::EdDSA];
    let rsa = sign(Algorithm::RS256, Some("rsa-1"), RSA_PRIVATE, &claims("u"));
    assert_eq!(
        only_ed.verify(&rsa),
        Err(Refusal::Algorithm("RS256".into()))
    );
    assert!(JwtSettings::parse_algorithms("EdDSA, RS256").is_ok());
    assert!(JwtSettings::parse_algorithms("HS256").is_err());
}

#[test]
fn keys_are_read_from_pem_jwk_a_directory_and_a_jwks() {
    // `\n` escapes, as an environment variable carries a PEM on one line.
    let escaped = ED_PUBLIC.trim().replace('\n', "\\n");
    assert!(VerifyingKey::parse(&escaped).is_ok());
    // The base64 of the DER alone.
    let der: String = ED_PUBLIC
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert!(VerifyingKey::parse(&der).is_ok());
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": "jwk-1",
        "x": "vd02vx0OAr13ujRmxaqnE6AG6OdYsi6pJNbBDmwgc1E"});
    assert!(VerifyingKey::parse(&jwk.to_string()).is_ok());
    let set = json!({"keys": [jwk]}).to_string();
    let keys = JwtSettings::keys_from_jwks(&set).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].0, "jwk-1");
    // The JWK is the Ed25519 test key: a token signed with it verifies.
    let mut settings = settings();
    settings.keys = keys.into_iter().collect();
    assert!(
        settings
            .verify(&sign(
                Algorithm::EdDSA,
                Some("jwk-1"),
                ED_PRIVATE,
                &claims("u")
            ))
            .is_ok()
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("lc-2026.pem"), ED_PUBLIC).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("rsa-1.pub"), RSA_PUBLIC).unwrap_or_else(|e| panic!("{e}"));
    let mut kids: Vec<String> = JwtSettings::keys_from_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(kid, _)| kid)
        .collect();
    kids.sort();
    assert_eq!(kids, ["lc-2026", "rsa-1"]);
    std::fs::write(dir.path().join("broken.pem"), "not a key").unwrap_or_else(|e| panic!("{e}"));
    assert!(JwtSettings::keys_from_dir(dir.path()).is_err());
    assert!(
        VerifyingKey::parse("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----").is_err()
    );
}

fn authenticator(provider: Provider) -> Authenticator {
    Authenticator::new(
        provider,
        &["bt_key".to_owned()],
        Some(settings()),
        "local".into(),
    )
}

fn credentials<'a>(api_key: Option<&'a str>, authorization: Option<&'a str>) -> Credentials<'a> {
    Credentials {
        api_key,
        authorization,
    }
}

fn denial(result: Result<Principal, AuthError>) -> String {
    match result {
        Ok(principal) => panic!("accepted as {principal:?}"),
        Err(AuthError::Refused(denial)) => denial.label().to_owned(),
        Err(AuthError::Ambiguous) => "ambiguous".to_owned(),
    }
}

#[test]
fn each_provider_takes_its_own_credentials_only() {
    let token = ed(&claims("user-1"));
    let both = authenticator(Provider::Both);
    let by_token = both.authenticate(&credentials(None, Some(&token)));
    assert_eq!(by_token.as_ref().map(|p| p.via), Ok(Via::Token));
    let by_key = both.authenticate(&credentials(Some("bt_key"), None));
    assert_eq!(by_key.as_ref().map(|p| p.via), Ok(Via::ApiKey));
    let bearer_key = both.authenticate(&credentials(None, Some("bt_key")));
    assert_eq!(bearer_key.map(|p| p.via), Ok(Via::ApiKey));
    assert_eq!(
        denial(both.authenticate(&credentials(Some("bt_key"), Some(&token)))),
        "ambiguous"
    );
    assert_eq!(
        denial(both.authenticate(&credentials(None, None))),
        "missing"
    );
    assert_eq!(
        denial(both.authenticate(&credentials(Some("nope"), None))),
        "unknown_key"
    );
    let jwt_only = authenticator(Provider::LibrechatJwt);
    assert!(
        jwt_only
            .authenticate(&credentials(None, Some(&token)))
            .is_ok()
    );
    assert_eq!(
        denial(jwt_only.authenticate(&credentials(Some("bt_key"), None))),
        "key_not_accepted"
    );
    let keys_only = authenticator(Provider::ApiKey);
    assert_eq!(
        denial(keys_only.authenticate(&credentials(None, Some(&token)))),
        "unknown_key"
    );
    let keys_only = Authenticator::new(Provider::ApiKey, &["k".to_owned()], None, "local".into());
    assert_eq!(
        denial(keys_only.authenticate(&credentials(None, Some(&token)))),
        "unknown_key"
    );
}

#[test]
fn principals_are_distinct_and_stable() {
    let both = authenticator(Provider::Both);
    let owner = |token: String| {
        both.authenticate(&credentials(None, Some(&token)))
            .map(|p| p.owner)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let a = owner(ed(&claims("user-1")));
    // A fresh token (another jti, later times) of the same user.
    assert_eq!(
        owner(ed(&with(claims("user-1"), "jti", json!("another")))),
        a
    );
    assert_ne!(owner(ed(&claims("user-2"))), a);
    // The same user id in another tenant is another principal.
    assert_ne!(
        owner(ed(&with(claims("user-1"), "tenant_id", json!("other")))),
        a
    );
    // A key keeps the owner it had before principals existed.
    assert_eq!(
        Principal::of_key("bt_key").owner,
        crate::token::key_identity("bt_key")
    );
}

#[test]
fn shared_files_belong_to_their_resource_in_the_tenant() {
    let alice = Principal::of_subject("acme", "alice", Via::Token);
    let bob = Principal::of_subject("acme", "bob", Via::Token);
    let mallory = Principal::of_subject("evil", "alice", Via::Token);
    let agent =
        Resource::parse(Some("agent"), Some("agent_1"), None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(alice.files_owner(&agent), bob.files_owner(&agent));
    assert_ne!(alice.files_owner(&agent), mallory.files_owner(&agent));
    let own = Resource::parse(Some("user"), Some("bob"), None).unwrap_or_else(|e| panic!("{e}"));
    // `id` of a user resource is informational: alice's own files.
    assert_eq!(alice.files_owner(&own), alice.owner);
    let v3 =
        Resource::parse(Some("skill"), Some("s1"), Some("3")).unwrap_or_else(|e| panic!("{e}"));
    let v3_0 =
        Resource::parse(Some("skill"), Some("s1"), Some("3.0")).unwrap_or_else(|e| panic!("{e}"));
    let v4 =
        Resource::parse(Some("skill"), Some("s1"), Some("4")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(alice.files_owner(&v3), alice.files_owner(&v3_0));
    assert_ne!(alice.files_owner(&v3), alice.files_owner(&v4));
    for (kind, id, version) in [
        (Some("robot"), Some("x"), None),
        (Some("agent"), None, None),
        (Some("skill"), Some("s"), None),
        (Some("skill"), Some("s"), Some("three")),
        (Some("agent"), Some("a"), Some("1")),
        (Some("agent"), Some("a/b"), None),
    ] {
        assert!(
            Resource::parse(kind, id, version).is_err(),
            "{kind:?} {id:?} {version:?}"
        );
    }
}

#[test]
fn every_unverified_caller_is_one_principal_of_the_tenant() {
    let none = authenticator(Provider::None);
    let anyone = none
        .authenticate(&credentials(None, None))
        .unwrap_or_else(|e| panic!("{e}"));
    let with_a_token = none
        .authenticate(&credentials(None, Some("whatever")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(anyone, with_a_token);
    assert_eq!(
        (anyone.via, anyone.subject.as_str()),
        (Via::Unverified, ANONYMOUS)
    );
    assert_ne!(
        anyone.owner,
        Principal::of_subject("other", ANONYMOUS, Via::Unverified).owner
    );
}

#[test]
fn a_token_verified_before_is_refused_once_it_expires() {
    let mut settings = settings();
    settings.clock_skew_secs = 0;
    let auth = Authenticator::new(Provider::LibrechatJwt, &[], Some(settings), "local".into());
    let soon = with(claims("u"), "exp", json!(now() + 1));
    let token = ed(&soon);
    let first = auth.authenticate(&credentials(None, Some(&token)));
    assert!(first.is_ok(), "{first:?}");
    // Again at once: the same principal (remembered, not verified again).
    assert_eq!(auth.authenticate(&credentials(None, Some(&token))), first);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(
        denial(auth.authenticate(&credentials(None, Some(&token)))),
        "expired"
    );
    // A token changed by one character is another token, verified anew.
    let mut altered = ed(&claims("u"));
    altered.push('A');
    assert!(
        auth.authenticate(&credentials(None, Some(&altered)))
            .is_err()
    );
}
