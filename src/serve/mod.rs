//! `redbike serve`: an HTTP view of one prefix, for people (a dashboard) and machines
//! (`/metrics`, a JSON API), with control (run now, pause, resume) when allowed.
//!
//! The reads are `top`'s, `stats`'s, `ps`'s, `tell`'s and `history`'s own, made on one
//! connection and cached between viewers ([`cache`]); the routes are in [`api`]
//! (reading), [`control`] (writing, and who may) and [`dashboard`] (the page). HTTP is
//! axum on a current-thread tokio runtime; Redis calls, which block, run on its
//! blocking threads. Nothing here is on the dispatcher's or worker's paths.

pub mod api;
pub mod cache;
pub mod control;
pub mod dashboard;

use std::{collections::BTreeSet, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    Router,
};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::{
    config::Config,
    error::{Error, Result},
    operator::stats,
    shutdown::Shutdown,
    top::snapshot::Plan,
};
use api::ApiError;

/// The address served when `--listen` is not given: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9170";
/// The largest request body accepted, in bytes (control requests have none).
pub const MAX_BODY: u64 = 4096;
/// The largest request head (request line and headers) accepted, in bytes.
const MAX_HEAD: usize = 16 * 1024;
/// A client must send a request's headers within this long (also between requests on a
/// kept-alive connection).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long, whatever it does.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 256;
/// Threads for the Redis calls (they take turns on one connection anyway).
const BLOCKING_THREADS: usize = 8;

/// The flags of `redbike serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    /// The address and port to listen on; keep it on loopback (or behind a proxy that
    /// adds TLS and logins) unless the prefix may be read by anyone who can reach it
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Accept control requests (run now, pause, resume) that carry the token of
    /// $REDBIKE_SERVE_TOKEN or of --token-file as `Authorization: Bearer TOKEN`
    #[arg(long)]
    pub allow_control: bool,
    /// Read the control token from this file (else from $REDBIKE_SERVE_TOKEN)
    #[arg(long, value_name = "FILE", requires = "allow_control")]
    pub token_file: Option<PathBuf>,
    /// Queues to show besides those of the config and of the jobs listed, e.g. A:B;
    /// the queues /metrics reports on [default: `queues` in the config]
    #[arg(long, value_name = "QUEUES")]
    pub queues: Option<String>,
}

/// What every request handler shares.
pub struct App {
    /// The reads of the prefix.
    pub source: cache::Source,
    /// The control token; `None` when serve is read-only.
    pub token: Option<Vec<u8>>,
}

/// Runs `redbike serve` until a stop signal.
pub fn run(config: &Config, flags: &Flags) -> Result<()> {
    if config.shards > 1 {
        return Err(Error::Input(format!(
            "serve shows one unsplit prefix, and {} is split into {} shards: serve a shard with shards = 1 and --prefix set to its prefix (`redbike ping` lists them)",
            config.prefix, config.shards
        )));
    }
    crate::shard::check_recorded(config)?;
    let token = if flags.allow_control {
        Some(control::load_token(flags.token_file.as_deref())?)
    } else {
        None
    };
    let flag_queues = match &flags.queues {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    let config_queues = match &config.worker.queues {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    let plan = Plan {
        queues: flag_queues
            .iter()
            .chain(&config_queues)
            .cloned()
            .collect::<BTreeSet<_>>(),
        timeouts: config.worker.timeouts.clone(),
        default_timeout: config.default_timeout,
        limits: config.limits.clone(),
    };
    let stats_queues = if flags.queues.is_some() {
        flag_queues
    } else {
        config_queues
    };
    let app = Arc::new(App {
        source: cache::Source::new(config, plan, stats_queues),
        token,
    });
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(false)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .map_err(|e| Error::io("cannot start the HTTP runtime", e))?;
    runtime.block_on(serve(app, flags.listen, &shutdown))?;
    crate::log_info!("serve stopping");
    Ok(())
}

/// Every route, with the checks every request passes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .merge(dashboard::routes())
        .merge(api::routes())
        .merge(control::routes())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such page") })
        .layer(middleware::from_fn(guard))
        .with_state(app)
}

/// Refuses bodies over [`MAX_BODY`] (and bodies of unknown length), and tells browsers
/// not to guess content types or frame the pages.
async fn guard(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if headers.contains_key(header::TRANSFER_ENCODING) || length.is_some_and(|n| n > MAX_BODY) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body refused: at most {MAX_BODY} bytes, with a Content-Length"),
        )
        .into_response();
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Accepts connections on `listen` until `shutdown` is requested.
async fn serve(app: Arc<App>, listen: SocketAddr, shutdown: &Shutdown) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::io(format!("cannot listen on {listen}"), e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the address listened on", e))?;
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    shutdown.on_request(move |_| {
        let _ = stop_tx.send(true);
    });
    crate::log_info!(
        "serve listening on http://{bound}/ ({})",
        if app.token.is_some() {
            "control allowed with the token"
        } else {
            "read-only"
        }
    );
    let routes = router(app);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    while !shutdown.requested() {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            _ = stop.changed() => break,
        };
        let Ok(slot) = slot else {
            break;
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: wait a little, then go on.
                crate::log_warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(routes.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
            drop(slot);
        });
    }
    Ok(())
}
