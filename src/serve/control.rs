//! The control routes (run now, pause and resume a job or a queue, kill a job's run)
//! and who may use them: only a serve started with `--allow-control`, only POST, only
//! with the token in `Authorization: Bearer`, never from another site (`Origin`,
//! `Sec-Fetch-Site`).
//! No cookie is ever read, so a page of another site cannot borrow a session.

use std::sync::Arc;

use axum::{
    extract::{rejection::PathRejection, Path, State},
    http::{header, HeaderMap, StatusCode},
    response::Response,
    routing::post,
    Router,
};
use serde_json::json;

use super::{
    api::{blocking, json_reply, param, ApiError},
    App,
};
use crate::{
    config::Config,
    error::{Error, Result},
    jobid::JobIdError,
    operator::control::{self, Killed, Paused, Ran, Resumed},
    redis::events::{Via, Who},
    redis::store::Store,
    schedule::{timestamp, Placement},
};

/// The note of a pause made through serve (`redbike tell` shows it).
const PAUSE_NOTE: &str = "paused in redbike serve";

/// The environment variable that holds the token.
pub const TOKEN_VAR: &str = "REDBIKE_SERVE_TOKEN";

/// The control routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/v1/jobs/{id}/run", post(run_job))
        .route("/api/v1/jobs/{id}/pause", post(pause_job))
        .route("/api/v1/jobs/{id}/resume", post(resume_job))
        .route("/api/v1/jobs/{id}/kill", post(kill_job))
        .route("/api/v1/queues/{queue}/pause", post(pause_queue))
        .route("/api/v1/queues/{queue}/resume", post(resume_queue))
}

/// The token, from `--token-file` or else [`TOKEN_VAR`]; surrounding white space is
/// not part of it.
pub fn load_token(file: Option<&std::path::Path>) -> Result<Vec<u8>> {
    let text = match file {
        // A file that cannot be read is the operator's input, as `load` and `-c` treat theirs.
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            Error::Input(format!(
                "cannot read --token-file {path:?}: {e}; give a readable file holding the token"
            ))
        })?,
        None => std::env::var(TOKEN_VAR).map_err(|_| {
            Error::Input(format!(
                "--allow-control needs a token: set {TOKEN_VAR} or give --token-file"
            ))
        })?,
    };
    let token = text.trim();
    if token.len() < 16 {
        return Err(Error::Input(
            "the control token is shorter than 16 characters: use a long random one (e.g. `openssl rand -hex 32`)".into(),
        ));
    }
    Ok(token.as_bytes().to_vec())
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Refuses a request that may not control: read-only serve, another site, no token
/// or a wrong one.
fn allow(app: &App, headers: &HeaderMap) -> std::result::Result<(), ApiError> {
    let Some(token) = &app.token else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read-only: start redbike serve with --allow-control and a token to control jobs",
        ));
    };
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        if !matches!(site, "same-origin" | "none") {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "cross-site request refused",
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = text(header::HOST).unwrap_or("");
        let ok = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| !host.is_empty() && o == host);
        if !ok {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "cross-origin request refused",
            ));
        }
    }
    let given = text(header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    match given {
        Some(given) if same(given, token) => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "a valid token is needed: send it as Authorization: Bearer TOKEN",
        )),
    }
}

/// Who acts through the control routes, for the audit entries: this server's user,
/// host and pid, via `serve` (the HTTP client is known by its token only).
fn by_serve(config: &Config) -> Who {
    Who::new(config.events, Via::Serve)
}

/// The reply to a control request: what was done, as a sentence and a word.
fn done(result: &str, message: String) -> Response {
    json_reply(
        StatusCode::OK,
        &json!({ "result": result, "message": message }),
    )
}

/// What every job control route does first: the token and origin checks and a valid
/// id (`valid`), then `act` on the prefix off the async threads. The id and what `act`
/// returned.
async fn on_job<T: Send + 'static>(
    app: &Arc<App>,
    headers: &HeaderMap,
    id: Result<Path<String>, PathRejection>,
    valid: fn(&str) -> std::result::Result<(), JobIdError>,
    act: impl FnOnce(&mut Store<'_>, &Config, &str) -> Result<T> + Send + 'static,
) -> std::result::Result<(String, T), ApiError> {
    allow(app, headers)?;
    let id = param(id)?;
    valid(&id).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let (app, job) = (app.clone(), id.clone());
    let done = blocking(move || app.source.act(|store, config| act(store, config, &job))).await?;
    Ok((id, done))
}

async fn run_job(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    let (id, report) = on_job(
        &app,
        &headers,
        id,
        crate::jobid::validate_placeable,
        |store, config, id| control::run_job(store, id, timestamp::now(), &by_serve(config)),
    )
    .await?;
    let (word, what) = match report.ran {
        Ran::Enqueued => ("enqueued", "queued to run now; its schedule stays"),
        Ran::AlreadyQueued => ("already_queued", "already in its queue; nothing changed"),
        Ran::Running => ("running", "running; it runs once more right after this run"),
    };
    let paused = if report.paused {
        " (it stays paused)"
    } else {
        ""
    };
    let halted = if report.halted {
        "; HALT is set: nothing runs until `control RESUME`"
    } else {
        ""
    };
    Ok(done(word, format!("{id}: {what}{paused}{halted}")))
}

async fn kill_job(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    let (id, killed) = on_job(
        &app,
        &headers,
        id,
        crate::jobid::validate_stored,
        |store, config, id| control::kill_job(store, id, &by_serve(config)),
    )
    .await?;
    let (word, what) = match killed {
        Killed::Asked { .. } => (
            "killed",
            "its worker stops this run now; the job then goes on per its schedule",
        ),
        Killed::NotRunning => ("not_running", "not running; nothing changed"),
        Killed::Halted => (
            "halted",
            "HALT is set: its workers stop their runs anyway; nothing changed",
        ),
        Killed::Python => (
            "python",
            "run by a worker that takes no kills (the Python original); nothing changed",
        ),
    };
    Ok(done(word, format!("{id}: {what}")))
}

async fn pause_job(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    let (id, paused) = on_job(
        &app,
        &headers,
        id,
        crate::jobid::validate_placeable,
        |store, config, id| {
            control::pause_job(store, id, PAUSE_NOTE, timestamp::now(), &by_serve(config))
        },
    )
    .await?;
    let (word, what) = match paused {
        Paused::Paused => ("paused", "paused"),
        Paused::Running => ("paused", "paused; its run finishes, then it is not placed"),
        Paused::Already => ("already_paused", "paused already; nothing changed"),
    };
    Ok(done(word, format!("{id}: {what}")))
}

async fn resume_job(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    let (id, resumed) = on_job(
        &app,
        &headers,
        id,
        crate::jobid::validate_stored,
        |store, config, id| {
            control::resume_job(store, config, id, timestamp::now(), &by_serve(config))
        },
    )
    .await?;
    let (word, what) = match resumed {
        Resumed::NotPaused => ("not_paused", "was not paused; nothing changed".to_string()),
        Resumed::RunAsked => ("resumed", "resumed; the asked run comes first".to_string()),
        Resumed::Placed(Placement::Timeline(ts), _) => (
            "resumed",
            format!("resumed; next run at {}", timestamp::iso_utc(ts)),
        ),
        Resumed::Placed(Placement::Enqueue, _) => ("resumed", "resumed; queued".to_string()),
        Resumed::Placed(Placement::Stop, _) => ("resumed", "resumed; stopped (STOP)".to_string()),
    };
    Ok(done(word, format!("{id}: {what}")))
}

async fn pause_queue(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    queue: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    allow(&app, &headers)?;
    let queue = param(queue)?;
    control::validate_queue(&queue)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let changed = {
        let (app, queue) = (app.clone(), queue.clone());
        blocking(move || {
            app.source.act(|store, config| {
                let who = by_serve(config);
                control::pause_queue(store, &queue, PAUSE_NOTE, timestamp::now(), &who)
            })
        })
        .await?
    };
    Ok(if changed {
        done("paused", format!("queue {queue}: paused"))
    } else {
        done(
            "already_paused",
            format!("queue {queue}: paused already; nothing changed"),
        )
    })
}

async fn resume_queue(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    queue: Result<Path<String>, PathRejection>,
) -> std::result::Result<Response, ApiError> {
    allow(&app, &headers)?;
    let queue = param(queue)?;
    control::validate_queue(&queue)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let changed = {
        let (app, queue) = (app.clone(), queue.clone());
        blocking(move || {
            app.source
                .act(|store, config| control::resume_queue(store, &queue, &by_serve(config)))
        })
        .await?
    };
    Ok(if changed {
        done("resumed", format!("queue {queue}: resumed"))
    } else {
        done(
            "not_paused",
            format!("queue {queue}: was not paused; nothing changed"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!same(b"0123456789abcdef", b"0123456789abcdeg"));
        assert!(!same(b"0123456789abcdef", b"0123456789abcde"));
        assert!(!same(b"", b"x"));
    }
}
