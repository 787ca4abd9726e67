//! The read-only routes: `/metrics` and the JSON API under `/api/v1/` (docs/serve.md
//! lists every field). Errors are JSON too: `{"error": "..."}`.

use std::sync::Arc;

use axum::{
    extract::{
        rejection::{PathRejection, QueryRejection},
        Path, Query, State,
    },
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{cache::Failure, App};
use crate::{limits, operator::stats, schedule::timestamp};

/// The routes of this file.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/api/v1/overview", get(overview))
        .route("/api/v1/stats", get(stats_json))
        .route("/api/v1/ps", get(ps))
        .route("/api/v1/paused", get(paused))
        .route("/api/v1/history", get(history))
        .route("/api/v1/jobs/{id}", get(job))
        .route("/api/v1/jobs/{id}/next", get(next))
}

/// An error reply: its status and `{"error": message}`.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for people.
    pub message: String,
}

impl ApiError {
    /// An error with `status`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<Failure> for ApiError {
    fn from(f: Failure) -> ApiError {
        match f {
            Failure::Down(why) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why),
            Failure::Bad(why) => ApiError::new(StatusCode::BAD_REQUEST, why),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_reply(self.status, &json!({ "error": self.message }))
    }
}

/// A JSON reply of `value`.
pub fn json_reply(status: StatusCode, value: &Value) -> Response {
    // A Value always serializes.
    let body = serde_json::to_vec(value).expect("a JSON value serializes");
    json_bytes(status, body)
}

/// A JSON reply of text already encoded.
fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Runs a read off the async threads (Redis calls block).
pub async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(read).await {
        Ok(done) => done.map_err(ApiError::from),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the read failed: {e}"),
        )),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let figures = blocking(move || app.source.stats()).await?;
    let text = stats::render(&figures, stats::Format::Prometheus);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn stats_json(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let figures = blocking(move || app.source.stats()).await?;
    let text = stats::render(&figures, stats::Format::Json);
    Ok(json_bytes(StatusCode::OK, text.into_bytes()))
}

async fn overview(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let value = blocking(move || app.source.overview()).await?;
    Ok(json_reply(StatusCode::OK, &value))
}

async fn paused(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let value = blocking(move || app.source.overview()).await?;
    let part = json!({
        "jobs": value["paused_jobs"],
        "jobs_total": value["paused_total"],
        "queues": value["paused_queues"],
    });
    Ok(json_reply(StatusCode::OK, &part))
}

async fn ps(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let text = blocking(move || app.source.ps()).await?;
    Ok(json_bytes(StatusCode::OK, text.to_vec()))
}

/// A path parameter, or a JSON 400 (one that is not UTF-8, say).
pub fn param(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(v)| v)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))
}

async fn job(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = param(id)?;
    let value = blocking(move || app.source.tell(&id)).await?;
    Ok(json_reply(StatusCode::OK, &value))
}

/// The query parameters of `/api/v1/jobs/JOBID/next`: how many runs (1 to 100, 5 when
/// left out).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NextParams {
    count: Option<String>,
}

/// The job's next runs: the one on the timeline, then those `redbike next SCHEDULE
/// --job JOBID` lists after it (its queue's jitter included), from what `tell` reads.
async fn next(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    params: Result<Query<NextParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = param(id)?;
    let Query(p) = params.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let count = match p.count.as_deref() {
        None => 5,
        Some(c) => match c.parse::<usize>() {
            Ok(n @ 1..=100) => n,
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("count: {c:?} is not a whole number from 1 to 100"),
                ))
            }
        },
    };
    let source = Arc::clone(&app);
    let job = id.clone();
    let info = blocking(move || source.source.tell(&job)).await?;
    let config = &app.source.config;
    let text = info.get("schedule").and_then(Value::as_str);
    // The run the timeline holds comes first (a one-off's, stored as STOP, is its only
    // one), then the schedule's occurrences after it, or after now when the job is off
    // the timeline (queued, running or paused).
    let first = info.get("next_run").and_then(Value::as_i64);
    let mut runs: Vec<i64> = first.into_iter().collect();
    let mut unreadable = None;
    match text.map(crate::schedule::Schedule::parse) {
        None => {}
        Some(Err(e)) => unreadable = Some(e.to_string()),
        Some(Ok(schedule)) => {
            let offset = crate::jitter::offset_in(&config.jitter, &id);
            let after = first.unwrap_or_else(timestamp::now);
            let more = count - runs.len();
            match crate::jitter::next_runs(&schedule, after, config.timezone, offset, more) {
                Ok(later) if first.is_none() || schedule.is_recurring() => runs.extend(later),
                Ok(_) => {}
                Err(e) => unreadable = Some(e.to_string()),
            }
        }
    }
    let runs: Vec<Value> = runs
        .into_iter()
        .map(|ts| json!({"unix": ts, "utc": timestamp::iso_utc(ts)}))
        .collect();
    let value = json!({"job": id, "schedule": text, "runs": runs, "unreadable": unreadable});
    Ok(json_reply(StatusCode::OK, &value))
}

/// The query parameters of `/api/v1/history`: `redbike history`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryParams {
    job: Option<String>,
    count: Option<String>,
    failures: Option<String>,
    since: Option<String>,
}

async fn history(
    State(app): State<Arc<App>>,
    params: Result<Query<HistoryParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(p) = params.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let bad = |what: String| ApiError::new(StatusCode::BAD_REQUEST, what);
    let limit = p
        .count
        .as_deref()
        .map(|c| limits::arg::history_count(c).map_err(|e| bad(format!("count: {e}"))))
        .transpose()?;
    let failures = match p.failures.as_deref() {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") | Some("") => true,
        Some(other) => return Err(bad(format!("failures: {other:?} is not true or false"))),
    };
    let since = p
        .since
        .as_deref()
        .map(|t| {
            timestamp::parse(t, app.source.config.timezone).map_err(|e| bad(format!("since: {e}")))
        })
        .transpose()?;
    let query = crate::history::Query {
        job: p.job,
        failures,
        since,
        limit,
    };
    let text = blocking(move || app.source.history(&query)).await?;
    Ok(json_bytes(StatusCode::OK, text.to_vec()))
}
