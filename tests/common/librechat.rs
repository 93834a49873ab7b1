//! LibreChat's side, for the Rust tests: the keys it signs its Code API
//! tokens with (`tests/keys/`), the `CODEAPI_*` variables an operator gives
//! baton for them, tokens minted as LibreChat mints them
//! (`packages/api/src/auth/codeapi.ts`), and the Node harness of
//! `tests/librechat/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::root;

/// LibreChat's default `kid`.
pub(crate) const KID: &str = "lc-codeapi-2026-05";

/// A file of `tests/keys/`.
pub(crate) fn key_file(name: &str) -> PathBuf {
    root().join("tests/keys").join(name)
}

/// A key's text.
pub(crate) fn key_text(name: &str) -> String {
    std::fs::read_to_string(key_file(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What an operator sets on baton for LibreChat's tokens: the provider,
/// the public key LibreChat signs with, and its kid.
pub(crate) fn jwt_env(provider: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CODEAPI_AUTH_PROVIDER", provider.to_owned()),
        ("CODEAPI_JWT_PUBLIC_KEY", key_text("ed25519.pub.pem")),
        ("CODEAPI_JWT_KID", KID.to_owned()),
    ]
}

/// Borrowed pairs for `Server::start_with_env`.
pub(crate) fn pairs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The claims LibreChat mints for user `sub` of `tenant`.
pub(crate) fn claims(sub: &str, tenant: &str) -> Value {
    let now = now();
    json!({
        "iss": "librechat", "aud": "codeapi", "sub": sub,
        "iat": now, "nbf": now, "exp": now + 300,
        "jti": format!("{:032x}", rand::random::<u128>()),
        "tenant_id": tenant, "role": "USER",
        "principal_source": "librechat_jwt",
        "auth_context_hash": "0".repeat(64),
    })
}

/// A token over `claims`, signed with the key file `pem` as `alg` under
/// `kid` (`None`: no kid).
pub(crate) fn sign(alg: Algorithm, kid: Option<&str>, pem: &str, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.typ = Some("JWT".into());
    header.kid = kid.map(str::to_owned);
    let text = key_text(pem);
    let key = match alg {
        Algorithm::EdDSA => EncodingKey::from_ed_pem(text.as_bytes()),
        _ => EncodingKey::from_rsa_pem(text.as_bytes()),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    jsonwebtoken::encode(&header, claims, &key).unwrap_or_else(|e| panic!("{e}"))
}

/// A token of user `sub` in `tenant`, as LibreChat signs it.
pub(crate) fn token(sub: &str, tenant: &str) -> String {
    sign(
        Algorithm::EdDSA,
        Some(KID),
        "ed25519.pem",
        &claims(sub, tenant),
    )
}

/// Installs the harness's packages when they are missing (`npm ci`),
/// under a lock: the tests of this file run as processes at once, and one
/// `npm ci` clears `node_modules` while another test reads it.
pub(crate) fn install_harness() -> PathBuf {
    let harness = root().join("tests/librechat");
    let lock_file = std::fs::File::create(harness.join(".install.lock"))
        .unwrap_or_else(|e| panic!("cannot create the install lock: {e}"));
    let _locked = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("cannot take the install lock: {e}"));
    let installed = ["@librechat/agents", "axios", "form-data"]
        .iter()
        .all(|package| harness.join("node_modules").join(package).is_dir());
    if !installed {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&harness)
            .status()
            .unwrap_or_else(|e| panic!("npm is needed to install LibreChat's client: {e}"));
        assert!(status.success(), "npm ci in {} failed", harness.display());
    }
    harness
}

/// Runs `script` of the harness against `base` with `env`; its report
/// lines (JSON), its whole output, and whether it exited 0.
pub(crate) fn run_harness(
    harness: &Path,
    script: &str,
    base: &str,
    env: &[(&str, &str)],
) -> (Vec<Value>, String, bool) {
    let output = Command::new("node")
        .arg(script)
        .current_dir(harness)
        .env("BATON_URL", base)
        .env_remove("PROXY")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let reports = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let all = format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    (reports, all, output.status.success())
}
