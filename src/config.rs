//! Configuration of `baton serve`: flags, each with a `BATON_*` environment
//! variable and a default, and the secrets kept in the data directory.
//!
//! Invariants:
//! - Secrets generated on first start are written with owner-only
//!   permissions (files 0600 in a 0700 directory) before they are used.
//! - The first signing key given is the one new tokens use; every key given
//!   is accepted for verification, so keys rotate without breaking tokens.

use std::fs;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use clap::Args;

use crate::state::shared_secret_key;
use crate::store::Store;
use crate::token::{SigningKey, generate_secret};

/// The default of every limit and setting: the one place they are written.
/// The flags below, the engine's `ExecLimits::default` and
/// `EngineConfig::new`, the sandbox's `ChildRlimits::default` and the
/// program's `ProgramLimits::default` all read them; the child's runtime gets
/// every limit in its program and has no defaults of its own.
pub mod defaults {
    /// Seconds a paused execution waits for its client.
    pub const PAUSED_TTL_SECS: u64 = 3600;
    /// Pauses of one execution.
    pub const MAX_ROUNDS: usize = 20;
    /// Largest execution record a pause may store, bytes.
    pub const MAX_RECORD_BYTES: usize = 64 << 20;
    /// Idle pre-forked children.
    pub const POOL_SIZE: usize = 4;
    /// Parked children kept in memory.
    pub const MAX_PARKED: usize = 256;
    /// Private memory of all parked children, MiB.
    pub const MAX_PARKED_MB: u64 = 1024;
    /// Bytes one API key may store, MiB.
    pub const MAX_KEY_STORAGE_MB: u64 = 1024;
    /// Memory for the records of recent pauses (hot continuations read no
    /// journal), MiB.
    pub const RECORD_CACHE_MB: u64 = 256;
    /// Memory one child may allocate, MiB.
    pub const MEMORY_MB: u64 = 256;
    /// Stdout, and stderr, of one execution, bytes.
    pub const OUTPUT_CAP: u64 = 1 << 20;
    /// CPU seconds of one child (backstop to the run-time budget).
    pub const CPU_SECONDS: u64 = 330;
    /// Open files per child.
    pub const OPEN_FILES: u64 = 64;
    /// Python recursion limit.
    pub const RECURSION_LIMIT: u32 = 1000;
    /// The highest recursion limit code may set (`sys.setrecursionlimit`),
    /// and the highest the flag accepts.
    pub const RECURSION_CAP: u32 = 4000;
    /// Calls in one round: a program awaiting more at once makes several
    /// rounds, and a child reporting more is lying.
    pub const CALLS_PER_ROUND: u32 = 10_000;
    /// Largest JSON input of one tool call, bytes.
    pub const MAX_TOOL_INPUT_BYTES: u64 = 1 << 20;
    /// Bytes in an execution's `/mnt/data`.
    pub const WORKSPACE_BYTES: u64 = 32 << 20;
    /// Files in an execution's `/mnt/data`.
    pub const WORKSPACE_FILES: u64 = 1000;
    /// Size of the code, bytes.
    pub const MAX_SOURCE_BYTES: usize = 256 << 10;
    /// Size of a request body, bytes.
    pub const BODY_LIMIT: usize = 4 << 20;
    /// Seconds a request body may take to arrive.
    pub const BODY_TIMEOUT_SECS: u64 = 30;
    /// MiB of request bodies held at once, across connections.
    pub const MAX_BODIES_IN_FLIGHT_MB: usize = 1024;
    /// HTTP connections open at once.
    pub const MAX_CONNECTIONS: usize = 4096;
    /// HTTP connections open at once from one peer address.
    pub const MAX_CONNECTIONS_PER_ADDRESS: usize = 1024;
    /// Seconds to send a request's head, on a new or an idle connection.
    pub const HEADER_TIMEOUT_SECS: u64 = 30;
    /// Size of an upload's body, bytes (LibreChat's own file limit).
    pub const UPLOAD_LIMIT: usize = 150 << 20;
    /// Seconds a runtime session keeps its files after its last call.
    pub const RUNTIME_SESSION_IDLE_SECS: u64 = 7200;
    /// Seconds a runtime session lives at most.
    pub const RUNTIME_SESSION_MAX_SECS: u64 = 28_800;
    /// Seconds a call waits for a busy runtime session (the official Code
    /// API's wait).
    pub const RUNTIME_SESSION_WAIT_SECS: u64 = 15;
    /// How long a Python session lives after its last cell, seconds (when
    /// its creation does not say).
    pub const SESSION_TTL_SECS: u64 = 3600;
    /// The longest `ttl_seconds` a session may ask for.
    pub const SESSION_MAX_TTL_SECS: u64 = 86_400;
    /// Cells one Python session may hold.
    pub const SESSION_MAX_CELLS: u32 = 64;
    /// Run time a Python session's cells may have taken in all, seconds
    /// (what rebuilding its namespace replays).
    pub const SESSION_MAX_REPLAY_SECS: u64 = 120;
    /// Seconds session files are kept.
    pub const FILE_TTL_SECS: u64 = 86_400;
    /// Seconds between sweeps.
    pub const SWEEP_SECS: u64 = 60;
    /// Milliseconds between the soft interrupt of a program over its time
    /// and the kill.
    pub const GRACE_MS: u64 = 500;
}

/// A `--listen` value: a socket address, or `name:port` resolved to its
/// first address.
/// A PostgreSQL URL given to `--store`; its debug form hides it (it may
/// carry a password).
#[derive(Clone)]
pub struct StoreUrl(pub String);

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("postgres://…")
    }
}

fn parse_store(text: &str) -> Result<StoreUrl, String> {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        Ok(StoreUrl(text.to_owned()))
    } else {
        Err("--store takes a PostgreSQL URL (postgres://user:password@host:port/database); leave it out to keep executions in --data-dir".to_owned())
    }
}

fn parse_advertise(text: &str) -> Result<String, String> {
    let refuse = || {
        format!(
            "--advertise takes this node's base URL as the other nodes reach it, http://host:port (e.g. http://10.0.0.5:8080), not {text:?}"
        )
    };
    let rest = text.strip_prefix("http://").ok_or_else(refuse)?;
    let authority = rest.trim_end_matches('/');
    let valid = !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@', ' '])
        && authority.parse::<axum::http::uri::Authority>().is_ok();
    if valid {
        Ok(format!("http://{authority}"))
    } else {
        Err(refuse())
    }
}

fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let explain = || {
        format!(
            "{text:?} is not an address to listen on: give host:port, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or localhost:8080"
        )
    };
    std::net::ToSocketAddrs::to_socket_addrs(text)
        .map_err(|_| explain())?
        .next()
        .ok_or_else(explain)
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of `baton serve`.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    /// Address to listen on: `host:port`, the host an IP address or a name
    /// (`localhost:8080`, `0.0.0.0:8080`, `[::]:8080`).
    #[arg(long, env = "BATON_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Directory of the store and the generated keys.
    #[arg(long, env = "BATON_DATA_DIR", default_value = "./baton-data")]
    pub data_dir: PathBuf,
    /// Where executions are kept: a PostgreSQL database
    /// (`postgres://user:password@host:port/database`); by default the
    /// embedded database in `<data-dir>/store`.
    #[arg(long, env = "BATON_STORE", value_parser = parse_store)]
    pub store: Option<StoreUrl>,
    /// With several nodes on one `--store`: this node's base URL as the
    /// other nodes reach it (`http://10.0.0.5:8080`). Continuations that
    /// reach another node are forwarded here when this node holds their
    /// parked child; without it they resume cold (by replay) where they
    /// arrive.
    #[arg(long, env = "BATON_ADVERTISE", value_parser = parse_advertise)]
    pub advertise: Option<String>,
    /// API keys accepted (comma-separated). When none is given, one is
    /// generated on first start and kept in `<data-dir>/api_key`.
    #[arg(long = "api-key", env = "BATON_API_KEYS", value_delimiter = ',')]
    pub api_keys: Vec<String>,
    /// Which callers are accepted: `api-key` (baton's API keys), `librechat-jwt`
    /// (LibreChat's Code API tokens), `both` (either, one per request; the
    /// default when a JWT key is given, `api-key` otherwise), or `none`
    /// (no check at all: only with `--allow-auth-provider-none`).
    #[arg(long, env = "CODEAPI_AUTH_PROVIDER", value_enum)]
    pub auth_provider: Option<crate::auth::Provider>,
    /// Lets `--auth-provider none` start: every caller is then whoever it
    /// says it is (`User-Id`), with no credential checked.
    #[arg(
        long,
        env = "CODEAPI_ALLOW_AUTH_PROVIDER_NONE",
        default_value_t = false
    )]
    pub allow_auth_provider_none: bool,
    /// The public key LibreChat's tokens are verified with: a PEM (Ed25519
    /// or RSA; `\n` escapes allowed), the base64 of its DER, or a JWK.
    /// Needs `--jwt-kid`.
    #[arg(long, env = "CODEAPI_JWT_PUBLIC_KEY", hide_env_values = true)]
    pub jwt_public_key: Option<String>,
    /// The `kid` of `--jwt-public-key` (LibreChat's default is
    /// `lc-codeapi-2026-05`); `CODEAPI_JWT_KEY_ID` is read too.
    #[arg(long, env = "CODEAPI_JWT_KID")]
    pub jwt_kid: Option<String>,
    /// A directory of public keys, one per file, each file's name without
    /// its extension being its `kid` (for rotation).
    #[arg(long, env = "CODEAPI_JWT_PUBLIC_KEYS_DIR")]
    pub jwt_public_keys_dir: Option<PathBuf>,
    /// Public keys as an inline JWKS: `{"keys": [{"kid", "kty", ...}]}`.
    #[arg(long, env = "CODEAPI_JWT_JWKS_JSON", hide_env_values = true)]
    pub jwt_jwks_json: Option<String>,
    /// The `iss` tokens must carry.
    #[arg(long, env = "CODEAPI_JWT_ISSUER", default_value = "librechat")]
    pub jwt_issuer: String,
    /// The audience tokens' `aud` must name.
    #[arg(long, env = "CODEAPI_JWT_AUDIENCE", default_value = "codeapi")]
    pub jwt_audience: String,
    /// Token algorithms accepted (comma-separated): `EdDSA`, `RS256`.
    #[arg(long, env = "CODEAPI_JWT_ALLOWED_ALGS", default_value = "EdDSA,RS256")]
    pub jwt_allowed_algs: String,
    /// Seconds of clock difference tolerated on a token's times (at most 30).
    #[arg(long, env = "CODEAPI_JWT_CLOCK_SKEW_SECONDS", default_value_t = crate::auth::jwt::MAX_CLOCK_SKEW_SECS)]
    pub jwt_clock_skew_seconds: u64,
    /// The longest token lifetime (`exp - iat`) accepted, seconds (at most 300).
    #[arg(long, env = "CODEAPI_JWT_MAX_TTL_SECONDS", default_value_t = crate::auth::jwt::MAX_TTL_SECS)]
    pub jwt_max_ttl_seconds: u64,
    /// The tenant of tokens without `tenant_id`, and of unverified callers.
    #[arg(long, env = "CODEAPI_JWT_SINGLE_TENANT_ID", default_value = "legacy")]
    pub jwt_single_tenant_id: String,
    /// Token signing keys as `id:hexsecret` (comma-separated; the first signs
    /// new tokens, all verify). When none is given, one is generated on first
    /// start and kept in `<data-dir>/signing_key`.
    #[arg(
        long = "signing-key",
        env = "BATON_SIGNING_KEYS",
        value_delimiter = ','
    )]
    pub signing_keys: Vec<String>,
    /// How long a paused execution waits for its client, in seconds.
    #[arg(long, env = "BATON_PAUSED_TTL_SECS", default_value_t = defaults::PAUSED_TTL_SECS)]
    pub paused_ttl_secs: u64,
    /// Maximum number of pauses of one execution.
    #[arg(long, env = "BATON_MAX_ROUNDS", default_value_t = defaults::MAX_ROUNDS)]
    pub max_rounds: usize,
    /// Largest execution record (journal) a pause may store, in bytes.
    #[arg(long, env = "BATON_MAX_RECORD_BYTES", default_value_t = defaults::MAX_RECORD_BYTES)]
    pub max_record_bytes: usize,
    /// Idle pre-forked children kept ready.
    #[arg(long, env = "BATON_POOL_SIZE", default_value_t = defaults::POOL_SIZE)]
    pub pool_size: usize,
    /// Parked children kept in memory; beyond that executions resume cold.
    #[arg(long, env = "BATON_MAX_PARKED", default_value_t = defaults::MAX_PARKED)]
    pub max_parked: usize,
    /// Private memory all parked children may hold together, in MiB;
    /// beyond it the least recently parked are evicted (they resume cold).
    #[arg(long, env = "BATON_MAX_PARKED_MB", default_value_t = defaults::MAX_PARKED_MB)]
    pub max_parked_mb: u64,
    /// Bytes one API key may store, in MiB: the records of its paused
    /// executions, the outcomes of its ended ones, its session files.
    /// Beyond it requests get 429 `rate_limited` until some of it expires.
    #[arg(long, env = "BATON_MAX_KEY_STORAGE_MB", default_value_t = defaults::MAX_KEY_STORAGE_MB)]
    pub max_key_storage_mb: u64,
    /// Memory the server keeps the records of recent pauses in, in MiB, so
    /// a continuation of a parked execution reads no journal from the
    /// store; 0 turns it off. One record may use a quarter of it.
    #[arg(long, env = "BATON_RECORD_CACHE_MB", default_value_t = defaults::RECORD_CACHE_MB)]
    pub record_cache_mb: u64,
    /// Memory each child may allocate, in MiB.
    #[arg(long, env = "BATON_MEMORY_MB", default_value_t = defaults::MEMORY_MB)]
    pub memory_mb: u64,
    /// Put each child in a control group of its own (memory and task caps,
    /// the kernel's count of its memory and CPU time) where the kernel and
    /// this process's rights allow it; `false` leaves them out.
    #[arg(long, env = "BATON_CHILD_CGROUPS", default_value_t = true, action = clap::ArgAction::Set)]
    pub child_cgroups: bool,
    /// Maximum stdout (and stderr) of one execution, in bytes.
    #[arg(long, env = "BATON_OUTPUT_CAP", default_value_t = defaults::OUTPUT_CAP)]
    pub output_cap: u64,
    /// CPU seconds a child may use over its life (a backstop to the run-time
    /// budget).
    #[arg(long, env = "BATON_CPU_SECONDS", default_value_t = defaults::CPU_SECONDS)]
    pub cpu_seconds: u64,
    /// Open file descriptors per child.
    #[arg(long, env = "BATON_OPEN_FILES", default_value_t = defaults::OPEN_FILES)]
    pub open_files: u64,
    /// Python recursion limit (code may raise it up to 4000).
    #[arg(long, env = "BATON_RECURSION_LIMIT", default_value_t = defaults::RECURSION_LIMIT, value_parser = clap::value_parser!(u32).range(50..=i64::from(defaults::RECURSION_CAP)))]
    pub recursion_limit: u32,
    /// Largest JSON input of one tool call, in bytes.
    #[arg(long, env = "BATON_MAX_TOOL_INPUT_BYTES", default_value_t = defaults::MAX_TOOL_INPUT_BYTES)]
    pub max_tool_input_bytes: u64,
    /// Most bytes in an execution's `/mnt/data` (and in a request's files).
    #[arg(long, env = "BATON_WORKSPACE_BYTES", default_value_t = defaults::WORKSPACE_BYTES)]
    pub workspace_bytes: u64,
    /// Most files in an execution's `/mnt/data`.
    #[arg(long, env = "BATON_WORKSPACE_FILES", default_value_t = defaults::WORKSPACE_FILES)]
    pub workspace_files: u64,
    /// Maximum size of the code, in bytes.
    #[arg(long, env = "BATON_MAX_SOURCE_BYTES", default_value_t = defaults::MAX_SOURCE_BYTES)]
    pub max_source_bytes: usize,
    /// Maximum size of a request body, in bytes.
    #[arg(long, env = "BATON_BODY_LIMIT", default_value_t = defaults::BODY_LIMIT)]
    pub body_limit: usize,
    /// Largest body of an upload (`/upload`, `/upload/batch`), in bytes
    /// (LibreChat uploads files of up to 150 MiB).
    #[arg(long, env = "BATON_UPLOAD_LIMIT", default_value_t = defaults::UPLOAD_LIMIT)]
    pub upload_limit: usize,
    /// Seconds a runtime session (`X-CodeAPI-Expected-Profile: stateful`)
    /// keeps its `/mnt/data` after its last call.
    #[arg(long, env = "BATON_RUNTIME_SESSION_IDLE_SECS", default_value_t = defaults::RUNTIME_SESSION_IDLE_SECS)]
    pub runtime_session_idle_secs: u64,
    /// Seconds a runtime session lives at most from its first call (at most
    /// `--file-ttl-secs`: its files live no longer).
    #[arg(long, env = "BATON_RUNTIME_SESSION_MAX_SECS", default_value_t = defaults::RUNTIME_SESSION_MAX_SECS)]
    pub runtime_session_max_secs: u64,
    /// Seconds a call waits for its runtime session while another call
    /// holds it (then 409 `runtime_session_busy`).
    #[arg(long, env = "BATON_RUNTIME_SESSION_WAIT_SECS", default_value_t = defaults::RUNTIME_SESSION_WAIT_SECS)]
    pub runtime_session_wait_secs: u64,
    /// Seconds a request body may take to arrive (408 beyond).
    #[arg(long, env = "BATON_BODY_TIMEOUT_SECS", default_value_t = defaults::BODY_TIMEOUT_SECS)]
    pub body_timeout_secs: u64,
    /// MiB of request bodies the server holds at once, across connections
    /// (a request that cannot reserve its body's room within the body
    /// timeout gets 503 with Retry-After).
    #[arg(long, env = "BATON_MAX_BODIES_IN_FLIGHT_MB", default_value_t = defaults::MAX_BODIES_IN_FLIGHT_MB)]
    pub max_bodies_in_flight_mb: usize,
    /// HTTP connections open at once (at most three quarters of the open
    /// file limit); one over is closed as soon as it is accepted.
    #[arg(long, env = "BATON_MAX_CONNECTIONS", default_value_t = defaults::MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// HTTP connections open at once from one peer address.
    #[arg(long, env = "BATON_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = defaults::MAX_CONNECTIONS_PER_ADDRESS)]
    pub max_connections_per_address: usize,
    /// Seconds a connection may take to send a request's head, new or idle
    /// between requests (then it is closed).
    #[arg(long, env = "BATON_HEADER_TIMEOUT_SECS", default_value_t = defaults::HEADER_TIMEOUT_SECS)]
    pub header_timeout_secs: u64,
    /// Seconds a Python session (`POST /sessions`) lives after its last
    /// cell when its creation gives no `ttl_seconds`.
    #[arg(long, env = "BATON_SESSION_TTL_SECS", default_value_t = defaults::SESSION_TTL_SECS)]
    pub session_ttl_secs: u64,
    /// The largest `ttl_seconds` a Python session may ask for (also capped
    /// by `--file-ttl-secs`: its files must outlive it).
    #[arg(long, env = "BATON_SESSION_MAX_TTL_SECS", default_value_t = defaults::SESSION_MAX_TTL_SECS)]
    pub session_max_ttl_secs: u64,
    /// Cells a Python session replays at most when its namespace is
    /// rebuilt (at least 2): the next cell past them first compacts the
    /// session (its cells folded into one base cell).
    #[arg(long, env = "BATON_SESSION_MAX_CELLS", default_value_t = defaults::SESSION_MAX_CELLS)]
    pub session_max_cells: u32,
    /// Run time a Python session's cells may have taken in all, seconds:
    /// rebuilding its namespace in a fresh child replays them (the next
    /// cell past it first compacts the session).
    #[arg(long, env = "BATON_SESSION_MAX_REPLAY_SECS", default_value_t = defaults::SESSION_MAX_REPLAY_SECS)]
    pub session_max_replay_secs: u64,
    /// How long session files (uploaded or produced) are kept, in seconds.
    #[arg(long, env = "BATON_FILE_TTL_SECS", default_value_t = defaults::FILE_TTL_SECS)]
    pub file_ttl_secs: u64,
    /// Seconds between sweeps of expired executions.
    #[arg(long, env = "BATON_SWEEP_SECS", default_value_t = defaults::SWEEP_SECS)]
    pub sweep_secs: u64,
    /// Log filter (tracing `EnvFilter` syntax). The storage engine's and
    /// the HTTP stack's own logs stay at `warn` unless the filter names
    /// them.
    #[arg(long, env = "BATON_LOG", default_value = "info")]
    pub log: String,
    /// Log lines as `text` (for people; colour only on a terminal) or
    /// `json` (one object per line, for log collectors).
    #[arg(long, env = "BATON_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log how long each step of every request took: the spans of the
    /// `baton::timing` target (decode, rewrite, child, encode, store write,
    /// flush...), each printed when it closes with its busy and idle time.
    #[arg(long, env = "BATON_TRACE_REQUESTS", default_value_t = false)]
    pub trace_requests: bool,
}

/// Why configuration failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading or writing the data directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// A malformed key.
    #[error("{0}")]
    Invalid(String),
}

/// Keys in force.
pub struct Secrets {
    /// Accepted API keys.
    pub api_keys: Vec<String>,
    /// Signing keys, the first current.
    pub signing_keys: Vec<SigningKey>,
}

/// Resolves keys from flags, or from (or into) the data directory; with a
/// `shared` store (several nodes on one database), generated keys are kept
/// in the database instead, so that every node accepts the same API key
/// and verifies the same tokens (a key file left in the data directory by
/// an earlier start seeds the database). The data directory exists
/// ([`ensure_private_dir`]).
pub async fn load_secrets(
    args: &ServeArgs,
    shared: Option<&dyn Store>,
) -> Result<Secrets, ConfigError> {
    let generated = async |name: &str, generate: fn() -> String, announce: bool| {
        let path = args.data_dir.join(name);
        match shared {
            Some(store) => shared_or_generated(store, name, &path, generate, announce).await,
            None => stored_or_generated(&path, generate, announce),
        }
    };
    let api_keys = if args.api_keys.is_empty() {
        vec![generated("api_key", generate_api_key, true).await?]
    } else {
        args.api_keys.clone()
    };
    let signing_specs = if args.signing_keys.is_empty() {
        vec![generated("signing_key", generate_signing_key, false).await?]
    } else {
        args.signing_keys.clone()
    };
    let signing_keys = signing_specs
        .iter()
        .map(|spec| parse_signing_key(spec))
        .collect::<Result<Vec<_>, _>>()?;
    if api_keys.iter().any(|k| k.trim().is_empty()) {
        return Err(ConfigError::Invalid("an API key is empty".into()));
    }
    Ok(Secrets {
        api_keys,
        signing_keys,
    })
}

/// The caller checks `args` configure, accepting `api_keys`: the
/// provider (the default: `both` when a token key is given, else
/// `api-key`), and the token keys from the inline JWKS, the keys directory
/// and the single key, in that order (a later `kid` replaces an earlier
/// one). Every refusal is a sentence naming the flag.
pub fn authenticator(
    args: &ServeArgs,
    api_keys: &[String],
) -> Result<crate::auth::Authenticator, ConfigError> {
    use crate::auth::{Authenticator, JwtSettings, Provider, VerifyingKey};
    let invalid = |text: String| ConfigError::Invalid(text);
    let mut keys = std::collections::HashMap::new();
    if let Some(jwks) = args
        .jwt_jwks_json
        .as_deref()
        .filter(|j| !j.trim().is_empty())
    {
        let found = JwtSettings::keys_from_jwks(jwks)
            .map_err(|e| invalid(format!("--jwt-jwks-json (CODEAPI_JWT_JWKS_JSON): {e}")))?;
        keys.extend(found);
    }
    if let Some(dir) = &args.jwt_public_keys_dir {
        let found = JwtSettings::keys_from_dir(dir).map_err(|e| {
            invalid(format!(
                "--jwt-public-keys-dir (CODEAPI_JWT_PUBLIC_KEYS_DIR): {e}"
            ))
        })?;
        keys.extend(found);
    }
    if let Some(text) = args
        .jwt_public_key
        .as_deref()
        .filter(|k| !k.trim().is_empty())
    {
        let kid = args
            .jwt_kid
            .clone()
            .or_else(|| std::env::var("CODEAPI_JWT_KEY_ID").ok())
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| {
                invalid("--jwt-public-key (CODEAPI_JWT_PUBLIC_KEY) needs its kid: give --jwt-kid (CODEAPI_JWT_KID), LibreChat's CODEAPI_JWT_KID (lc-codeapi-2026-05 when it sets none)".into())
            })?;
        let key = VerifyingKey::parse(text)
            .map_err(|e| invalid(format!("--jwt-public-key (CODEAPI_JWT_PUBLIC_KEY): {e}")))?;
        keys.insert(kid.trim().to_owned(), key);
    }
    if args.jwt_clock_skew_seconds > crate::auth::jwt::MAX_CLOCK_SKEW_SECS {
        return Err(invalid(format!(
            "--jwt-clock-skew-seconds (CODEAPI_JWT_CLOCK_SKEW_SECONDS) is {}: at most {} seconds",
            args.jwt_clock_skew_seconds,
            crate::auth::jwt::MAX_CLOCK_SKEW_SECS
        )));
    }
    if !(1..=crate::auth::jwt::MAX_TTL_SECS).contains(&args.jwt_max_ttl_seconds) {
        return Err(invalid(format!(
            "--jwt-max-ttl-seconds (CODEAPI_JWT_MAX_TTL_SECONDS) is {}: give 1 to {} seconds",
            args.jwt_max_ttl_seconds,
            crate::auth::jwt::MAX_TTL_SECS
        )));
    }
    let algorithms = JwtSettings::parse_algorithms(&args.jwt_allowed_algs).map_err(|e| {
        invalid(format!(
            "--jwt-allowed-algs (CODEAPI_JWT_ALLOWED_ALGS): {e}"
        ))
    })?;
    let provider = args.auth_provider.unwrap_or(if keys.is_empty() {
        Provider::ApiKey
    } else {
        Provider::Both
    });
    match provider {
        Provider::LibrechatJwt | Provider::Both if keys.is_empty() => {
            return Err(invalid(format!(
                "--auth-provider {} needs the public key LibreChat signs with: give --jwt-public-key and --jwt-kid (CODEAPI_JWT_PUBLIC_KEY, CODEAPI_JWT_KID), --jwt-public-keys-dir or --jwt-jwks-json",
                provider.name()
            )));
        }
        Provider::None if !args.allow_auth_provider_none => {
            return Err(invalid(
                "--auth-provider none checks no credential at all: every caller could act as any user. Give --allow-auth-provider-none (CODEAPI_ALLOW_AUTH_PROVIDER_NONE=true) to run so on purpose, or configure LibreChat's JWT (see the README)".into(),
            ));
        }
        _ => {}
    }
    if algorithms.is_empty() && provider != Provider::ApiKey && provider != Provider::None {
        return Err(invalid(
            "--jwt-allowed-algs (CODEAPI_JWT_ALLOWED_ALGS) names no algorithm: give EdDSA and/or RS256".into(),
        ));
    }
    let jwt = (!keys.is_empty()).then(|| JwtSettings {
        keys,
        issuer: args.jwt_issuer.clone(),
        audience: args.jwt_audience.clone(),
        algorithms,
        clock_skew_secs: args.jwt_clock_skew_seconds,
        max_ttl_secs: args.jwt_max_ttl_seconds,
        default_tenant: args.jwt_single_tenant_id.clone(),
    });
    Ok(Authenticator::new(
        provider,
        api_keys,
        jwt,
        args.jwt_single_tenant_id.clone(),
    ))
}

fn generate_signing_key() -> String {
    format!("k1:{}", hex::encode(generate_secret()))
}

/// Reads the secret `name` from the shared database, or stores one there:
/// the data directory's file of that name when there is one, else a
/// generated value. When nodes start at once, the first one's value is
/// kept (a compare-and-swap) and every node uses it.
async fn shared_or_generated(
    store: &dyn Store,
    name: &str,
    file: &Path,
    generate: fn() -> String,
    announce: bool,
) -> Result<String, ConfigError> {
    let key = shared_secret_key(name);
    let failed = |e: crate::store::StoreError| {
        ConfigError::Invalid(format!(
            "cannot keep the generated {name} in the database: {e}"
        ))
    };
    let text = |bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|_| {
            ConfigError::Invalid(format!("the {name} kept in the database is not text"))
        })
    };
    if let Some(value) = store.get(&key).await.map_err(failed)? {
        return text(value);
    }
    let from_file = fs::read_to_string(file)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    let fresh = from_file.is_none();
    let value = from_file.unwrap_or_else(generate);
    match store
        .compare_and_swap(&key, None, Some(value.as_bytes()))
        .await
        .map_err(failed)?
    {
        Ok(()) => {
            // Durable before anyone is told it.
            store.flush().await.map_err(failed)?;
            if fresh && announce {
                println!("baton: generated API key {value}");
                println!(
                    "baton: it is kept in the database, for every node (shown only this once)"
                );
            }
            Ok(value)
        }
        Err(conflict) => text(conflict.current.unwrap_or_default()),
    }
}

fn generate_api_key() -> String {
    format!("bt_{}", hex::encode(generate_secret()))
}

/// Parses `id:hexsecret`.
pub fn parse_signing_key(spec: &str) -> Result<SigningKey, ConfigError> {
    let (id, secret) = spec
        .trim()
        .split_once(':')
        .ok_or_else(|| ConfigError::Invalid("a signing key must look like id:hexsecret".into()))?;
    let secret = hex::decode(secret)
        .map_err(|_| ConfigError::Invalid(format!("signing key {id:?}: secret is not hex")))?;
    Ok(SigningKey {
        id: id.to_owned(),
        secret,
    })
}

/// Creates the data directory (0700) when missing, and checks that this
/// process can write in it; each failure is a sentence naming the flag.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<(), ConfigError> {
    let named = format!("--data-dir {} (BATON_DATA_DIR)", dir.display());
    if dir.exists() && !dir.is_dir() {
        return Err(ConfigError::Invalid(format!(
            "{named} is a file, not a directory: give a directory (baton creates it when it is missing)"
        )));
    }
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                ConfigError::Invalid(format!(
                    "cannot create {named}: {e}; give a directory this user may create, or create it and give it to this user"
                ))
            })?;
    }
    let probe = dir.join(".baton-write-check");
    fs::write(&probe, b"")
        .and_then(|()| fs::remove_file(&probe))
        .map_err(|e| {
            ConfigError::Invalid(format!(
                "{named} is not writable by this user: {e}; give a directory this user owns, or change its owner"
            ))
        })
}

/// Reads a secret file, or creates it (0600) with a generated value.
fn stored_or_generated(
    path: &Path,
    generate: impl FnOnce() -> String,
    announce: bool,
) -> Result<String, ConfigError> {
    let io_error = |source| ConfigError::Io {
        path: path.to_owned(),
        source,
    };
    match fs::read_to_string(path) {
        Ok(text) => return Ok(text.trim().to_owned()),
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(io_error(error)),
        Err(_) => {}
    }
    let value = generate();
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error)?;
    file.write_all(format!("{value}\n").as_bytes())
        .map_err(io_error)?;
    file.sync_all().map_err(io_error)?;
    if announce {
        println!("baton: generated API key {value}");
        println!(
            "baton: it is kept in {} (shown only this once)",
            path.display()
        );
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generates_private_secrets_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("api_key");
        let first = stored_or_generated(&path, || "one".into(), false).ok();
        let second = stored_or_generated(&path, || "two".into(), false).ok();
        assert_eq!(first.as_deref(), Some("one"));
        assert_eq!(second.as_deref(), Some("one"));
        let mode = fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .ok();
        assert_eq!(mode, Some(0o600));
    }

    #[tokio::test]
    async fn secrets_of_a_shared_store_are_kept_in_it_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = crate::store::SledStore::open(&dir.path().join("store"))
            .unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("signing_key");
        let kept = async |generate: fn() -> String| {
            shared_or_generated(&store, "signing_key", &file, generate, false)
                .await
                .ok()
        };
        assert_eq!(kept(|| "k1:01".into()).await.as_deref(), Some("k1:01"));
        assert_eq!(kept(|| "k1:02".into()).await.as_deref(), Some("k1:01"));
        // A key file left by an earlier start seeds an empty database.
        let other = crate::store::SledStore::open(&dir.path().join("other"))
            .unwrap_or_else(|e| panic!("{e}"));
        fs::write(&file, "k7:0a0b\n").unwrap_or_else(|e| panic!("{e}"));
        let seeded =
            shared_or_generated(&other, "signing_key", &file, || "k1:03".into(), false).await;
        assert_eq!(seeded.ok().as_deref(), Some("k7:0a0b"));
    }

    #[test]
    fn an_advertised_address_is_a_base_url_over_http() {
        assert_eq!(
            parse_advertise("http://10.0.0.5:8080/").as_deref(),
            Ok("http://10.0.0.5:8080")
        );
        assert_eq!(
            parse_advertise("http://node-2.internal:8080").as_deref(),
            Ok("http://node-2.internal:8080")
        );
        for bad in [
            "10.0.0.5:8080",
            "https://a:1",
            "http://",
            "http://a:1/path",
            "http://user@a:1",
            "http://a b:1",
        ] {
            assert!(parse_advertise(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn parses_signing_keys() {
        let key = parse_signing_key("k2:00ff").ok();
        assert_eq!(
            key.map(|k| (k.id, k.secret)),
            Some(("k2".into(), vec![0, 255]))
        );
        assert!(parse_signing_key("nocolon").is_err());
        assert!(parse_signing_key("k:zz").is_err());
    }
}
