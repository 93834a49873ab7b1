//! Principals over real HTTP: LibreChat's Code API tokens verified as the
//! official Code API verifies them, refused tokens of every kind (each
//! counted by reason, none of them running anything), principals that
//! cannot see each other, the keys an operator gives (a directory of keys,
//! RS256, an inline JWKS), `--auth-provider none` and its guard, and
//! runtime sessions: durable across a SIGKILL, one call at a time, expired
//! when idle.

mod common;

use std::time::{Duration, Instant};

use common::librechat::{KID, claims, jwt_env, key_file, key_text, pairs, sign, token};
use common::server::{KEY, Server, counter};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `POST /exec` of Python as `authorization`.
fn exec(server: &Server, authorization: &str, code: &str) -> (u16, Value) {
    server.request(
        "POST",
        "/exec",
        &[("authorization", authorization)],
        Some(&json!({"lang": "py", "code": code})),
    )
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn with(mut value: Value, key: &str, field: Value) -> Value {
    value[key] = field;
    value
}

fn b64(value: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Bad tokens, each with the reason the server must count for it.
fn bad_tokens() -> Vec<(&'static str, &'static str, String)> {
    let now = now();
    let good = || claims("6650c1e1f1a2b3c4d5e6f701", "acme");
    let ed = |claims: &Value| sign(Algorithm::EdDSA, Some(KID), "ed25519.pem", claims);
    let expired = with(
        with(
            with(good(), "exp", json!(now - 120)),
            "iat",
            json!(now - 400),
        ),
        "nbf",
        json!(now - 400),
    );
    let valid = ed(&good());
    let parts: Vec<&str> = valid.split('.').collect();
    let tampered_claims = format!(
        "{}.{}.{}",
        parts[0],
        b64(&with(good(), "sub", json!("admin"))),
        parts[2]
    );
    // A character inside the signature (the last one holds padding bits).
    let mut flipped = parts[2].to_owned();
    let other = if flipped[5..6] == *"A" { "B" } else { "A" };
    flipped.replace_range(5..6, other);
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some(KID.into());
    let hs256 = jsonwebtoken::encode(
        &hs,
        &good(),
        &EncodingKey::from_secret(key_text("ed25519.pub.pem").as_bytes()),
    )
    .unwrap_or_default();
    vec![
        ("expired", "expired", ed(&expired)),
        (
            "not yet valid",
            "not_yet_valid",
            ed(&with(good(), "nbf", json!(now + 120))),
        ),
        (
            "wrong audience",
            "audience",
            ed(&with(good(), "aud", json!("other-api"))),
        ),
        (
            "wrong issuer",
            "issuer",
            ed(&with(good(), "iss", json!("evil"))),
        ),
        (
            "a lifetime over 300 s",
            "lifetime",
            ed(&with(good(), "exp", json!(now + 3600))),
        ),
        (
            "no sub",
            "claim",
            ed(&{
                let mut c = good();
                c.as_object_mut().map(|m| m.remove("sub"));
                c
            }),
        ),
        (
            "an unknown kid",
            "unknown_kid",
            sign(
                Algorithm::EdDSA,
                Some("lc-codeapi-2099"),
                "ed25519.pem",
                &good(),
            ),
        ),
        (
            "alg none",
            "algorithm",
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "typ": "JWT", "kid": KID})),
                b64(&good())
            ),
        ),
        ("HS256 keyed with the public key", "algorithm", hs256),
        (
            "RS256 on the Ed25519 kid",
            "key_mismatch",
            sign(Algorithm::RS256, Some(KID), "rsa.pem", &good()),
        ),
        (
            "signed by another key",
            "signature",
            sign(Algorithm::EdDSA, Some(KID), "other-ed25519.pem", &good()),
        ),
        ("claims changed", "signature", tampered_claims),
        (
            "signature changed",
            "signature",
            format!("{}.{}.{flipped}", parts[0], parts[1]),
        ),
    ]
}

#[test]
fn tokens_of_every_bad_kind_are_refused_counted_and_run_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let env = jwt_env("librechat-jwt");
    let server = Server::start_with_env(dir.path(), &[], &pairs(&env));
    for (what, reason, token) in bad_tokens() {
        let label = format!("baton_auth_refused_total{{reason=\"{reason}\"}}");
        let before = counter(&server, &label);
        let (status, body) = exec(&server, &bearer(&token), "print('ran')");
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["error"], "Invalid bearer token", "{what}");
        assert_eq!(
            counter(&server, &label),
            before + 1.0,
            "{what}: counted as {reason}"
        );
    }
    // Nothing of them ran: no execution was started.
    assert_eq!(counter(&server, "baton_executions_started_total"), 0.0);
    // No credential, an API key (this server takes tokens only), both at once.
    let (status, body) = server.request(
        "POST",
        "/exec",
        &[],
        Some(&json!({"lang": "py", "code": "1"})),
    );
    assert_eq!(
        (
            status,
            body["error"]
                .as_str()
                .map(|e| e.starts_with("Missing credentials"))
        ),
        (401, Some(true))
    );
    let (status, _) = server.request(
        "POST",
        "/exec",
        &[("x-api-key", KEY)],
        Some(&json!({"lang": "py", "code": "1"})),
    );
    assert_eq!(status, 401);
    assert_eq!(
        counter(
            &server,
            "baton_auth_refused_total{reason=\"key_not_accepted\"}"
        ),
        1.0
    );
    let good = token("u1", "acme");
    let auth = bearer(&good);
    let (status, body) = server.request(
        "POST",
        "/exec",
        &[("x-api-key", KEY), ("authorization", auth.as_str())],
        Some(&json!({"lang": "py", "code": "1"})),
    );
    assert_eq!(status, 400, "{body}");
    // The good token runs, and runs again (LibreChat reuses a token, jti and all).
    for _ in 0..2 {
        let (status, body) = exec(&server, &auth, "print('ran')");
        assert_eq!(
            (status, body["stdout"].as_str()),
            (200, Some("ran\n")),
            "{body}"
        );
    }
    let (_, health) = server.get("/health", None);
    assert_eq!(health["auth"], "librechat-jwt");
}

/// A paused execution of `authorization`: its id and token.
fn paused(server: &Server, authorization: &str, request_id: &str) -> (String, String) {
    let body = json!({
        "code": "w = await get_weather(city='Paris')\nprint(w)",
        "tools": [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    });
    let (status, reply) = server.request(
        "POST",
        "/exec/programmatic",
        &[
            ("authorization", authorization),
            ("x-librechat-code-request-id", request_id),
        ],
        Some(&body),
    );
    assert_eq!(
        (status, reply["status"].as_str()),
        (200, Some("tool_call_required")),
        "{reply}"
    );
    let id = reply["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let token = reply["continuation_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (id, token)
}

#[test]
fn two_users_of_one_tenant_and_one_user_id_in_two_tenants_are_strangers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let env = jwt_env("librechat-jwt");
    let server = Server::start_with_env(dir.path(), &[], &pairs(&env));
    let alice = bearer(&token("6650c1e1f1a2b3c4d5e6f701", "acme"));
    let bob = bearer(&token("6650c1e1f1a2b3c4d5e6f702", "acme"));
    let mallory = bearer(&token("6650c1e1f1a2b3c4d5e6f701", "evil"));
    let (id, continuation) = paused(&server, &alice, "req-alice-1");
    for stranger in [&bob, &mallory] {
        let (status, _) = server.request(
            "GET",
            &format!("/executions/{id}"),
            &[("authorization", stranger)],
            None,
        );
        assert_eq!(status, 404);
        let (_, listed) =
            server.request("GET", "/executions", &[("authorization", stranger)], None);
        assert_eq!(
            listed["executions"].as_array().map(Vec::len),
            Some(0),
            "{listed}"
        );
        // Alice's token of the pause is no token of theirs.
        let body = json!({"continuation_token": continuation, "tool_results": [{"call_id": "x", "result": 1}]});
        let (status, reply) = server.request(
            "POST",
            "/exec/programmatic",
            &[("authorization", stranger)],
            Some(&body),
        );
        assert_eq!(status, 400, "{reply}");
        // A cancel of her request id is theirs alone (pending), and hers stays paused.
        let (status, cancel) = server.request(
            "POST",
            "/exec/programmatic/cancel",
            &[("authorization", stranger)],
            Some(&json!({"request_id": "req-alice-1"})),
        );
        assert_eq!(
            (status, cancel["status"].as_str()),
            (200, Some("pending")),
            "{cancel}"
        );
        let (status, _) = server.request(
            "POST",
            &format!("/executions/{id}/cancel"),
            &[("authorization", stranger)],
            None,
        );
        assert_eq!(status, 404);
    }
    let (status, view) = server.request(
        "GET",
        &format!("/executions/{id}"),
        &[("authorization", alice.as_str())],
        None,
    );
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("paused")),
        "{view}"
    );
    let (_, listed) = server.request(
        "GET",
        "/executions",
        &[("authorization", alice.as_str())],
        None,
    );
    assert_eq!(listed["executions"].as_array().map(Vec::len), Some(1));
}

#[test]
fn keys_from_a_directory_an_inline_jwks_and_rs256_verify() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(key_file("ed25519.pub.pem"), keys.join("lc-2026-06.pem"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(key_file("rsa.pub.pem"), keys.join("lc-rsa.pub"))
        .unwrap_or_else(|e| panic!("{e}"));
    // The Ed25519 test key as a JWK (its x is the raw public key).
    let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "lc-jwk-1",
        "x": "vd02vx0OAr13ujRmxaqnE6AG6OdYsi6pJNbBDmwgc1E"}]})
    .to_string();
    let keys_dir = keys.display().to_string();
    let env = [
        ("CODEAPI_AUTH_PROVIDER", "librechat-jwt"),
        ("CODEAPI_JWT_PUBLIC_KEYS_DIR", keys_dir.as_str()),
        ("CODEAPI_JWT_JWKS_JSON", jwks.as_str()),
    ];
    let server = Server::start_with_env(&dir.path().join("data"), &[], &env);
    let claims = claims("u1", "acme");
    for (alg, kid, pem) in [
        (Algorithm::EdDSA, "lc-2026-06", "ed25519.pem"),
        (Algorithm::RS256, "lc-rsa", "rsa.pem"),
        (Algorithm::EdDSA, "lc-jwk-1", "ed25519.pem"),
    ] {
        let (status, body) = exec(
            &server,
            &bearer(&sign(alg, Some(kid), pem, &claims)),
            "print(1)",
        );
        assert_eq!(status, 200, "{kid}: {body}");
    }
    // EdDSA named on the RSA kid is refused before any signature check.
    let (status, _) = exec(
        &server,
        &bearer(&sign(
            Algorithm::EdDSA,
            Some("lc-rsa"),
            "ed25519.pem",
            &claims,
        )),
        "1",
    );
    assert_eq!(status, 401);
}

#[test]
fn no_auth_provider_needs_its_flag_and_says_so_everywhere() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("refused"))
        .env("CODEAPI_AUTH_PROVIDER", "none")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("--allow-auth-provider-none"), "{stderr}");
    let env = [
        ("CODEAPI_AUTH_PROVIDER", "none"),
        ("CODEAPI_ALLOW_AUTH_PROVIDER_NONE", "true"),
    ];
    let server = Server::start_with_env(&dir.path().join("open"), &[], &env);
    let (_, health) = server.get("/health", None);
    assert_eq!(health["auth"], "none");
    assert!(
        health["warning"]
            .as_str()
            .is_some_and(|w| w.contains("no credential"))
    );
    // Every caller is one user: execute_code's output (its body names a
    // user) is found by LibreChat's download, which names another.
    let (status, ran) = server.request(
        "POST",
        "/exec",
        &[],
        Some(&json!({"lang": "py", "user_id": "u1", "code": "open('o.txt','w').write('x')"})),
    );
    assert_eq!(status, 200, "{ran}");
    let file = &ran["files"][0];
    let path = format!(
        "/download/{}/{}?kind=user&id=u2",
        file["storage_session_id"].as_str().unwrap_or_default(),
        file["id"].as_str().unwrap_or_default()
    );
    let (status, _) = server.get(&path, None);
    assert_eq!(status, 200);
    let (_, listed) = server.request("GET", "/executions", &[("user-id", "u3")], None);
    assert_eq!(listed["executions"].as_array().map(Vec::len), Some(1));
}

/// `POST /exec` in the runtime session `hint` (stateful profile) as the
/// test key.
fn in_session(server: &Server, hint: &str, lang: &str, code: &str) -> (u16, Value) {
    server.request(
        "POST",
        "/exec",
        &[
            ("x-api-key", KEY),
            ("x-codeapi-expected-profile", "stateful"),
        ],
        Some(&json!({"lang": lang, "code": code, "runtime_session_hint": hint})),
    )
}

#[test]
fn a_runtime_session_keeps_its_files_across_a_sigkill_and_runs_one_call_at_a_time() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--runtime-session-wait-secs", "1"]);
    let hint = "v2:user:0123456789abcdef0123456789abcdef";
    let (status, first) = in_session(
        &server,
        hint,
        "bash",
        "mkdir -p out && echo one > out/a.txt",
    );
    assert_eq!(
        (status, first["runtime_status"].as_str()),
        (200, Some("new")),
        "{first}"
    );
    server.kill();
    server.restart();
    let (status, second) = in_session(
        &server,
        hint,
        "bash",
        "cat out/a.txt && rm out/a.txt && echo two > b.txt",
    );
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["stdout"], "one\n");
    assert_eq!(second["runtime_status"], "reused");
    assert_eq!(second["runtime_session_id"], first["runtime_session_id"]);
    let (_, third) = in_session(
        &server,
        hint,
        "py",
        "import os\nprint(sorted(os.listdir('.')), os.listdir('out'))",
    );
    assert_eq!(third["stdout"], "['b.txt', 'out'] []\n", "{third}");
    // Without the stateful profile the hint names nothing.
    let (_, plain) = server.request(
        "POST",
        "/exec",
        &[("x-api-key", KEY)],
        Some(&json!({"lang": "bash", "code": "ls", "runtime_session_hint": hint})),
    );
    assert_eq!(plain["stdout"], "", "{plain}");
    assert!(plain.get("runtime_session_id").is_none());
    // A call that holds the session for 3 s: another waits 1 s, then 409.
    let base = server.base.clone();
    let slow = std::thread::spawn(move || {
        let (status, _) = ureq_post(
            &base,
            hint,
            "import time\ntime.sleep(3)\nopen('slow.txt','w').write('done')",
        );
        status
    });
    std::thread::sleep(Duration::from_millis(700));
    let started = Instant::now();
    let (status, busy) = in_session(&server, hint, "bash", "true");
    assert_eq!(
        (status, busy["error"].as_str()),
        (409, Some("runtime_session_busy")),
        "{busy}"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(slow.join().ok(), Some(200));
    let (_, after) = in_session(&server, hint, "bash", "cat slow.txt");
    assert_eq!(after["stdout"], "done");
}

fn ureq_post(base: &str, hint: &str, code: &str) -> (u16, Value) {
    let sent = ureq::post(&format!("{base}/exec"))
        .set("x-api-key", KEY)
        .set("x-codeapi-expected-profile", "stateful")
        .send_json(json!({"lang": "py", "code": code, "runtime_session_hint": hint}));
    match sent {
        Ok(response) => (
            response.status(),
            response.into_json().unwrap_or(Value::Null),
        ),
        Err(ureq::Error::Status(status, _)) => (status, Value::Null),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn an_idle_runtime_session_expires_and_its_hint_starts_anew() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--runtime-session-idle-secs", "1"]);
    let hint = "conversation-7";
    let (_, first) = in_session(&server, hint, "bash", "echo kept > k.txt");
    assert_eq!(first["runtime_status"], "new");
    let (_, soon) = in_session(&server, hint, "bash", "cat k.txt");
    assert_eq!(
        (soon["runtime_status"].as_str(), soon["stdout"].as_str()),
        (Some("reused"), Some("kept\n"))
    );
    std::thread::sleep(Duration::from_millis(2100));
    let (_, later) = in_session(&server, hint, "bash", "ls");
    assert_eq!(
        (later["runtime_status"].as_str(), later["stdout"].as_str()),
        (Some("new"), Some("")),
        "{later}"
    );
    let (status, bad) = in_session(&server, "a hint with spaces", "bash", "true");
    assert_eq!(status, 400, "{bad}");
}
