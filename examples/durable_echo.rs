//! The durable echo floor: the least a durable HTTP answer can cost on
//! baton's own HTTP stack, for `benches/peer.py`.
//!
//! `POST /echo` appends the request body to one file and `fdatasync`s it
//! (on a blocking thread, as baton's store does its disk work) before it
//! answers `{"ok":true}`; `GET /health` answers 200. Nothing else runs: no
//! interpreter, no token, no record encoding. The connection handling is
//! baton's own ([`baton::api::listener::serve`]: hyper's HTTP/1.1 under an
//! axum `Router`, `TCP_NODELAY`, the same connection caps and header
//! timeout as `baton serve`'s defaults) on the same multi-threaded tokio
//! runtime. So the median time of one echo, a body the size of a
//! continuation's, is what any durable pause pays for HTTP and the disk;
//! baton's continue → next pause minus it is what running the code costs.
//!
//! Usage: `durable_echo --listen 127.0.0.1:PORT --file PATH` (the file is
//! created if missing and appended to). Stops on SIGINT or SIGTERM.
//! Build: `cargo build --release --ignore-rust-version --example durable_echo`.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use baton::api::listener::{ConnectionLimits, serve};
use clap::Parser;

/// The flags.
#[derive(Parser)]
#[command(about = "Appends each POST /echo body to a file and fdatasyncs it before answering")]
struct Args {
    /// Address to listen on, e.g. 127.0.0.1:8090.
    #[arg(long)]
    listen: SocketAddr,
    /// The file the bodies are appended to (created when missing).
    #[arg(long)]
    file: PathBuf,
}

/// `POST /echo`: the body appended and on disk, then `{"ok":true}`; an
/// I/O failure is a 500 that says what failed.
async fn echo(State(file): State<Arc<File>>, body: Bytes) -> Response {
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        // Opened with `O_APPEND`: each write lands at the end, whatever
        // other requests write meanwhile.
        (&*file).write_all(&body)?;
        file.sync_data()
    })
    .await;
    match written {
        Ok(Ok(())) => Json(serde_json::json!({"ok": true})).into_response(),
        Ok(Err(error)) => failure(format!("appending the body failed: {error}")),
        Err(error) => failure(format!("the writing task failed: {error}")),
    }
}

/// A 500 whose body is `{"error": message}`.
fn failure(message: String) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(serde_json::json!({"error": message})),
    )
        .into_response()
}

/// `GET /health`.
async fn health() -> StatusCode {
    StatusCode::OK
}

async fn run(args: Args) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.file)
        .map_err(|e| format!("cannot open {}: {e}", args.file.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let router = Router::new()
        .route("/echo", post(echo))
        .route("/health", get(health))
        .with_state(Arc::new(file));
    // `baton serve`'s defaults (--max-connections,
    // --max-connections-per-address, --header-timeout-secs).
    let limits = ConnectionLimits {
        max_connections: 4096,
        max_per_address: 1024,
        header_timeout: Duration::from_secs(30),
    };
    serve(listener, router, limits, baton::server::shutdown_signal()).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("durable_echo: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("durable_echo: {error}");
            ExitCode::FAILURE
        }
    }
}
