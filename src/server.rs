//! `baton serve`: wires configuration, store, engine, service and HTTP
//! together, runs the background sweeper, and shuts down gracefully.
//!
//! Invariant: shutdown stops accepting requests, lets in-flight ones finish,
//! then flushes the store, so every pause a client holds a token for is on
//! disk when the process exits.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::api::body_budget::BodyBudget;
use crate::api::forward::Forwarder;
use crate::api::listener::ConnectionLimits;
use crate::api::{AppState, router};
use crate::config::{LogFormat, ServeArgs, ensure_private_dir, load_secrets};
use crate::engine::{Engine, EngineConfig};
use crate::service::{Service, ServiceConfig, Upkept};
use crate::store::{PostgresStore, SledStore, Store};
use crate::token::{SigningKey, SigningKeys};

/// Libraries whose own logs stay at `warn` unless the filter names them:
/// `debug` shows baton's steps, not the storage engine's internals.
const QUIET_LIBRARIES: &[&str] = &["sled", "hyper", "h2", "tower", "mio", "axum"];

/// Installs the log subscriber: the filter of `--log` (with the libraries
/// of [`QUIET_LIBRARIES`] at `warn` unless named), request spans with
/// `--trace-requests`, text or JSON lines, colour only on a terminal.
fn init_logging(args: &ServeArgs) {
    let mut filter = EnvFilter::try_new(&args.log).unwrap_or_else(|_| EnvFilter::new("info"));
    for library in QUIET_LIBRARIES {
        if !args.log.contains(library)
            && let Ok(directive) = format!("{library}=warn").parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    let mut span_events = FmtSpan::NONE;
    if args.trace_requests {
        if let Ok(timing) = format!("{}=debug", crate::timing::TARGET).parse() {
            filter = filter.add_directive(timing);
        }
        span_events = FmtSpan::CLOSE;
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(span_events)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    match args.log_format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
}

/// Binds `--listen`; a failure is a sentence that names the flag and what
/// to do.
async fn listen(address: std::net::SocketAddr) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(address).await.map_err(|e| {
        let advice = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "the address is already in use: another process (perhaps another baton) listens there; stop it, or give another --listen"
            }
            std::io::ErrorKind::PermissionDenied => {
                "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE; give a port above 1023"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "this machine has no such address: give one of its addresses, 0.0.0.0 for all, or 127.0.0.1"
            }
            _ => "check the address",
        };
        format!("cannot listen on {address} (--listen, BATON_LISTEN): {advice} ({e})")
    })
}

/// Runs the server until SIGINT/SIGTERM.
pub fn run(args: ServeArgs) -> ExitCode {
    init_logging(&args);
    // Probed while the process has one thread (before the runtime's).
    let layers = crate::sandbox::isolation::probe();
    if layers.namespaces && layers.landlock_abi >= 6 {
        tracing::info!("sandbox: {}", layers.describe());
    } else {
        tracing::warn!("sandbox degraded on this kernel: {}", layers.describe());
    }
    raise_open_file_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("baton: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("baton: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Raises this process's soft limit of open files to its hard limit: each
/// parked or pooled child holds two descriptors (its socket and its pidfd)
/// beside the connections and the store's files, and the usual soft limit
/// (1024) is below what `--max-parked` allows.
fn raise_open_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let raised = getrlimit(Resource::RLIMIT_NOFILE)
        .and_then(|(_, hard)| setrlimit(Resource::RLIMIT_NOFILE, hard, hard));
    if let Err(error) = raised {
        tracing::warn!(%error, "the open-file limit could not be raised");
    }
}

/// The listener's bounds from the flags: at most three quarters of the
/// open-file limit go to connections, the rest stays for children and the
/// store.
fn connection_limits(args: &ServeArgs) -> ConnectionLimits {
    let descriptors = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| usize::try_from(soft / 4 * 3).unwrap_or(usize::MAX))
        .unwrap_or(usize::MAX);
    let max_connections = args.max_connections.clamp(1, descriptors.max(1));
    if max_connections < args.max_connections {
        tracing::warn!(
            requested = args.max_connections,
            allowed = max_connections,
            "--max-connections is above three quarters of the open-file limit; lowered"
        );
    }
    ConnectionLimits {
        max_connections,
        max_per_address: args.max_connections_per_address.max(1),
        header_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
    }
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    // Before anything is created or generated: a port in use is reported
    // with nothing written to the data directory.
    let listener = listen(args.listen).await?;
    ensure_private_dir(&args.data_dir).map_err(|e| e.to_string())?;
    let store = open_store(&args).await?;
    let shared = store.shared().then_some(store.as_ref());
    let secrets = load_secrets(&args, shared)
        .await
        .map_err(|e| e.to_string())?;
    let keys = signing_keys(secrets.signing_keys)?;
    let auth = crate::config::authenticator(&args, &secrets.api_keys).map_err(|e| e.to_string())?;
    announce_auth(&auth);
    let engine = Engine::new(engine_config(&args)?).map_err(|e| e.to_string())?;
    let service = Service::new(
        engine,
        store.clone(),
        keys,
        ServiceConfig {
            paused_ttl_secs: args.paused_ttl_secs,
            ended_ttl_secs: args.paused_ttl_secs,
            max_rounds: args.max_rounds,
            max_record_bytes: args.max_record_bytes,
            file_ttl_secs: args.file_ttl_secs,
            max_key_storage_bytes: args.max_key_storage_mb.saturating_mul(1 << 20),
            record_cache_bytes: args.record_cache_mb.saturating_mul(1 << 20),
            runtime_sessions: crate::service::RuntimeSessionLimits {
                idle_secs: args.runtime_session_idle_secs,
                max_secs: args.runtime_session_max_secs.min(args.file_ttl_secs),
                wait: Duration::from_secs(args.runtime_session_wait_secs),
            },
            sessions: crate::service::SessionLimits {
                ttl_secs: args.session_ttl_secs.clamp(1, args.file_ttl_secs.max(1)),
                max_ttl_secs: args
                    .session_max_ttl_secs
                    .clamp(1, args.file_ttl_secs.max(1)),
                max_cells: args
                    .session_max_cells
                    .clamp(2, crate::service::MAX_SESSION_CELLS),
                max_replay_ms: args.session_max_replay_secs.saturating_mul(1000),
            },
        },
    );
    let recovered = service
        .recover_and_count()
        .await
        .map_err(|e| e.to_string())?;
    if recovered > 0 {
        tracing::info!(
            recovered,
            "rounds left running by a server that is gone are paused again"
        );
    }
    if let Some(address) = &args.advertise {
        service
            .advertise(address)
            .await
            .map_err(|e| e.to_string())?;
    }
    let metrics = crate::metrics_catalog::install();
    let state = Arc::new(AppState {
        service,
        auth,
        metrics,
        body_limit: args.body_limit,
        upload_limit: args.upload_limit,
        body_timeout: Duration::from_secs(args.body_timeout_secs.max(1)),
        forwarder: store.shared().then(Forwarder::new),
        bodies: {
            let largest = args.upload_limit.max(args.body_limit);
            BodyBudget::new(
                args.max_bodies_in_flight_mb
                    .saturating_mul(1 << 20)
                    .max(largest),
                largest,
            )
        },
    });
    spawn_sweeper(state.clone(), Duration::from_secs(args.sweep_secs.max(1)));
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    println!("baton: listening on http://{address}");
    let store_kind = if args.store.is_some() {
        "postgres"
    } else {
        "embedded"
    };
    tracing::info!(%address, data_dir = %args.data_dir.display(), store = store_kind, node = store.node(), advertise = args.advertise.as_deref().unwrap_or("-"), "serving");
    let ending = state.clone();
    crate::api::listener::serve(
        listener,
        router(state),
        connection_limits(&args),
        shutdown_signal(),
    )
    .await;
    store.flush().await.map_err(|e| e.to_string())?;
    let _stopped = tokio::task::spawn_blocking(move || ending.service.engine().shutdown()).await;
    tracing::info!("stopped; every paused execution is on disk");
    Ok(())
}

/// Says which callers are accepted; loudly when none is checked.
fn announce_auth(auth: &crate::auth::Authenticator) {
    use crate::auth::Provider;
    match auth.provider() {
        Provider::None => {
            let warning = "--auth-provider none: NO CREDENTIAL IS CHECKED. Anyone who reaches this port can run code, and every caller is one user: all files and executions are shared. Run so only on a private network, for development";
            eprintln!("baton: WARNING: {warning}");
            tracing::warn!(auth_provider = "none", "{warning}");
        }
        provider => tracing::info!(
            auth_provider = provider.name(),
            "callers are checked: {}",
            match provider {
                Provider::ApiKey => "API keys",
                Provider::LibrechatJwt => "LibreChat's Code API tokens (JWT)",
                _ => "LibreChat's Code API tokens (JWT) or API keys",
            }
        ),
    }
}

/// The store `--store` names (PostgreSQL), or the embedded one in the
/// data directory; `--advertise` only with a store that nodes share.
async fn open_store(args: &ServeArgs) -> Result<Arc<dyn Store>, String> {
    match &args.store {
        Some(url) => Ok(Arc::new(
            PostgresStore::open(&url.0)
                .await
                .map_err(|e| e.to_string())?,
        )),
        None if args.advertise.is_some() => Err(
            "--advertise (BATON_ADVERTISE) is for several nodes on one PostgreSQL database: give --store postgres://… too, or leave --advertise out".to_owned(),
        ),
        None => Ok(Arc::new(
            SledStore::open(&args.data_dir.join("store")).map_err(|e| e.to_string())?,
        )),
    }
}

fn signing_keys(keys: Vec<SigningKey>) -> Result<SigningKeys, String> {
    let mut keys = keys.into_iter();
    let current = keys.next().ok_or("no signing key")?;
    SigningKeys::new(current, keys.collect()).map_err(|e| format!("signing keys: {e}"))
}

fn engine_config(args: &ServeArgs) -> Result<EngineConfig, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own binary: {e}"))?;
    let mut config = EngineConfig::new(exe);
    config.pool_size = args.pool_size;
    config.max_parked = args.max_parked;
    config.max_parked_bytes = args.max_parked_mb.saturating_mul(1 << 20);
    config.rlimits.memory_mb = args.memory_mb;
    config.child_cgroups = args.child_cgroups;
    config.limits.stdout_cap = args.output_cap;
    config.limits.stderr_cap = args.output_cap;
    config.limits.max_source_bytes = args.max_source_bytes;
    config.limits.recursion_limit = args.recursion_limit;
    config.limits.max_input_bytes = args.max_tool_input_bytes;
    config.limits.workspace_bytes = args.workspace_bytes;
    config.limits.workspace_files = args.workspace_files;
    config.rlimits.cpu_seconds = args.cpu_seconds;
    config.rlimits.open_files = args.open_files;
    Ok(config)
}

fn spawn_sweeper(state: Arc<AppState>, every: Duration) {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        loop {
            interval.tick().await;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            match state.service.upkeep(now).await {
                Ok(done) if done == Upkept::default() => {}
                Ok(done) => tracing::info!(
                    swept = done.swept,
                    swept_files = done.swept_files,
                    recovered = done.recovered,
                    evicted = done.evicted,
                    "upkeep: expired executions and files removed, orphaned rounds paused again, stale parked children ended"
                ),
                Err(error) => tracing::warn!(%error, "upkeep failed"),
            }
        }
    });
}

/// Resolves at SIGINT or SIGTERM (also used by `examples/durable_echo.rs`,
/// so the floor it measures shuts down as baton does).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
