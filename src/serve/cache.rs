//! What `redbike serve` reads from Redis, and how often: one connection, and a cached
//! copy of each reply shared by every viewer. A reply is read again only when a request
//! asks for it and its copy is older than its time to live, so the Redis cost is
//! bounded by the clock, not by the number of viewers, and is nothing when nobody looks.
//!
//! Every read holds one lock (the connection and the copies): reads never overlap, and
//! viewers arriving during a read get its result.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use redis::Connection;
use serde_json::{json, Value};

use crate::{
    config::Config,
    error::{describe_redis, Error, Result},
    history::{self, Query},
    operator::{ps, stats},
    redis::{
        hazards::Probe,
        keys::Keys,
        registry,
        retry::Backoff,
        settings::mask_urls_in,
        store::{self, Store},
    },
    schedule::timestamp,
    top::snapshot::{self, Plan, Slow, Snapshot, SLOW_EVERY},
};

/// The overview (the dashboard's main read) is read at most this often.
pub const OVERVIEW_TTL: Duration = Duration::from_secs(1);
/// `/metrics` and `/api/v1/stats` are read at most this often.
pub const STATS_TTL: Duration = Duration::from_secs(5);
/// `/api/v1/ps` is read at most this often.
pub const PS_TTL: Duration = Duration::from_secs(2);
/// A job's `tell` and a history query are read at most this often each.
pub const KEYED_TTL: Duration = Duration::from_secs(1);
/// Distinct jobs and history queries whose replies are kept; beyond it the oldest go.
const KEYED_MAX: usize = 256;
/// How long serve waits to connect, and for a reply.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Why a read gave no reply.
#[derive(Debug, Clone)]
pub enum Failure {
    /// Redis cannot be reached or refused the read: HTTP 503.
    Down(String),
    /// The request was wrong: HTTP 400.
    Bad(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::Input(_) | Error::JobId(_) | Error::Schedule(_) => Failure::Bad(e.to_string()),
            Error::Redis(r) => Failure::Down(format!(
                "redis failed: {}",
                mask_urls_in(&describe_redis(&r))
            )),
            other => Failure::Down(mask_urls_in(&other.to_string())),
        }
    }
}

/// A reply and when it was read.
type Held<T> = Option<(Instant, T)>;

/// The connection and the cached copies.
struct State {
    con: Option<Connection>,
    /// No connection attempt before this instant.
    retry_at: Instant,
    backoff: Backoff,
    /// Whether the last read failed (one log line per change).
    down: bool,
    plan: Plan,
    /// The slow figures of the overview, and how many reads ago they were read.
    slow: Option<(Slow, u64)>,
    overview: Held<Arc<Value>>,
    stats: Held<Arc<stats::Stats>>,
    ps: Held<Arc<Vec<u8>>>,
    tell: BTreeMap<String, (Instant, Arc<Value>)>,
    history: BTreeMap<String, (Instant, Arc<Vec<u8>>)>,
}

/// The reads of one prefix, shared by every request.
pub struct Source {
    /// The configuration serve runs with.
    pub config: Config,
    keys: Keys,
    probe: Probe,
    stats_opts: stats::Options,
    state: Mutex<State>,
}

impl Source {
    /// The reads of `config`'s prefix; nothing is read before the first request.
    pub fn new(config: &Config, plan: Plan, stats_queues: Vec<String>) -> Source {
        Source {
            keys: Keys::new(&config.prefix),
            probe: Probe::of(&config.redis),
            stats_opts: stats::Options {
                queues: stats_queues,
                scan: false,
                overdue_after: config.overdue_after,
                limits: config.limits.clone(),
            },
            config: config.clone(),
            state: Mutex::new(State {
                con: None,
                retry_at: Instant::now(),
                backoff: Backoff::new(),
                down: false,
                plan,
                slow: None,
                overview: None,
                stats: None,
                ps: None,
                tell: BTreeMap::new(),
                history: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic in a read leaves plain data behind: carry on with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The overview: the queues, running jobs, next due, failures, paused jobs and
    /// queues, and the processes alive, as `top` reads them.
    pub fn overview(&self) -> std::result::Result<Arc<Value>, Failure> {
        let mut state = self.lock();
        if let Some(v) = fresh(&state.overview, OVERVIEW_TTL) {
            return Ok(v);
        }
        let now = timestamp::now();
        let slow = match state.slow.take() {
            Some((slow, age)) if age + 1 < SLOW_EVERY => Some((slow, age + 1)),
            _ => None,
        };
        let keys = self.keys.clone();
        let plan = state.plan.clone();
        let carried = slow.as_ref().map(|(s, _)| s.clone());
        let (mut snap, _) = self.with(&mut state, |store| {
            snapshot::read(store.con, &keys, &plan, now, carried.as_ref()).map_err(Error::Redis)
        })?;
        if !snap.unread_queues.is_empty() {
            // Queues met for the first time: read again so that they get their figures
            // now (once per new queue; they are in the plan from now on).
            let mut plan = plan;
            plan.queues.extend(snap.unread_queues.iter().cloned());
            let slow = Some(snap.slow.clone());
            snap = self
                .with(&mut state, |store| {
                    snapshot::read(store.con, &keys, &plan, now, slow.as_ref())
                        .map_err(Error::Redis)
                })?
                .0;
            state.plan = plan;
        }
        state.slow = Some(slow.unwrap_or_else(|| (snap.slow.clone(), 0)));
        state.plan.queues.extend(snap.unread_queues.iter().cloned());
        let value = Arc::new(overview_json(&snap));
        state.overview = Some((Instant::now(), value.clone()));
        Ok(value)
    }

    /// The figures of `redbike stats` (without `--scan`).
    pub fn stats(&self) -> std::result::Result<Arc<stats::Stats>, Failure> {
        let mut state = self.lock();
        if let Some(v) = fresh(&state.stats, STATS_TTL) {
            return Ok(v);
        }
        let (opts, probe) = (&self.stats_opts, &self.probe);
        let part = self.with(&mut state, |store| {
            stats::collect(store, opts, probe, timestamp::now())
        })?;
        // One part always merges into one.
        let merged = stats::merge(&self.config.prefix, vec![part])
            .ok_or_else(|| Failure::Down("no figures were read".into()))?;
        let value = Arc::new(merged);
        state.stats = Some((Instant::now(), value.clone()));
        Ok(value)
    }

    /// What `redbike ps --format json` prints.
    pub fn ps(&self) -> std::result::Result<Arc<Vec<u8>>, Failure> {
        let mut state = self.lock();
        if let Some(v) = fresh(&state.ps, PS_TTL) {
            return Ok(v);
        }
        let mut listed = self.with(&mut state, |store| Ok(registry::list(store)?))?;
        listed.sort_by(|a, b| {
            let (a, b) = (&a.description, &b.description);
            (&a.kind, &a.host, a.pid, &a.id).cmp(&(&b.kind, &b.host, b.pid, &b.id))
        });
        let text = ps::render(&listed, ps::Format::Json, timestamp::now(), false)?;
        let value = Arc::new(text);
        state.ps = Some((Instant::now(), value.clone()));
        Ok(value)
    }

    /// What `redbike tell JOBID` prints.
    pub fn tell(&self, id: &str) -> std::result::Result<Arc<Value>, Failure> {
        crate::jobid::validate_stored(id).map_err(|e| Failure::Bad(e.to_string()))?;
        let mut state = self.lock();
        if let Some((at, v)) = state.tell.get(id) {
            if at.elapsed() < KEYED_TTL {
                return Ok(v.clone());
            }
        }
        let info = self.with(&mut state, |store| store.tell(id))?;
        // A struct of strings, numbers and bools always serializes.
        let value = Arc::new(serde_json::to_value(&info).expect("JobInfo serializes"));
        keep(&mut state.tell, id.to_string(), value.clone());
        Ok(value)
    }

    /// What `redbike history --format json` prints for `query`.
    pub fn history(&self, query: &Query) -> std::result::Result<Arc<Vec<u8>>, Failure> {
        if let Some(id) = &query.job {
            crate::jobid::validate_stored(id).map_err(|e| Failure::Bad(e.to_string()))?;
        }
        let key = format!(
            "{:?} {} {:?} {:?}",
            query.job, query.failures, query.since, query.limit
        );
        let mut state = self.lock();
        if let Some((at, v)) = state.history.get(&key) {
            if at.elapsed() < KEYED_TTL {
                return Ok(v.clone());
            }
        }
        let entries = self.with(&mut state, |store| {
            crate::redis::history::read(store, query)
        })?;
        let mut text = Vec::new();
        history::write_json(&entries, &mut text)?;
        let value = Arc::new(text);
        keep(&mut state.history, key, value.clone());
        Ok(value)
    }

    /// Runs `act` (an operator command's own function) on the connection, and makes
    /// the next overview read Redis again so that it shows what was done.
    pub fn act<T>(
        &self,
        act: impl FnOnce(&mut Store<'_>, &Config) -> Result<T>,
    ) -> std::result::Result<T, Failure> {
        let mut state = self.lock();
        let config = &self.config;
        let done = self.with(&mut state, |store| act(store, config))?;
        state.overview = None;
        state.slow = None;
        state.tell.clear();
        Ok(done)
    }

    /// Runs `read` on the connection, (re)connecting when an attempt is due; a failed
    /// read drops the connection and waits for the backoff before the next attempt.
    fn with<T>(
        &self,
        state: &mut State,
        read: impl FnOnce(&mut Store<'_>) -> Result<T>,
    ) -> std::result::Result<T, Failure> {
        if state.con.is_none() {
            if Instant::now() < state.retry_at {
                return Err(Failure::Down(
                    "redis cannot be reached; retrying in a moment".into(),
                ));
            }
            match store::reach(&self.config.redis, TIMEOUT) {
                Ok(reached) => {
                    let _ = reached.con.set_read_timeout(Some(TIMEOUT));
                    let _ = reached.con.set_write_timeout(Some(TIMEOUT));
                    state.con = Some(reached.con);
                }
                Err(e) => return Err(self.failed(state, e)),
            }
        }
        let Some(con) = state.con.as_mut() else {
            return Err(Failure::Down("no connection".into()));
        };
        match read(&mut Store {
            con,
            keys: &self.keys,
        }) {
            Ok(v) => {
                if state.down {
                    crate::log_info!("redis answers again");
                    state.down = false;
                }
                state.backoff = Backoff::new();
                Ok(v)
            }
            // A refused request leaves the connection as it was.
            Err(e @ (Error::Input(_) | Error::JobId(_) | Error::Schedule(_))) => {
                Err(Failure::from(e))
            }
            Err(e) => Err(self.failed(state, e)),
        }
    }

    fn failed(&self, state: &mut State, e: Error) -> Failure {
        state.con = None;
        state.retry_at = Instant::now() + state.backoff.step();
        let failure = Failure::from(e);
        if !state.down {
            if let Failure::Down(why) = &failure {
                crate::log_warn!("cannot read redis, serving errors until it answers: {why}");
            }
            state.down = true;
        }
        failure
    }
}

/// The copy in `slot` if it is younger than `ttl`.
fn fresh<T: Clone>(slot: &Held<T>, ttl: Duration) -> Option<T> {
    slot.as_ref()
        .filter(|(at, _)| at.elapsed() < ttl)
        .map(|(_, v)| v.clone())
}

/// Keeps `value` under `key`, dropping the oldest copies beyond [`KEYED_MAX`].
fn keep<T>(map: &mut BTreeMap<String, (Instant, T)>, key: String, value: T) {
    map.insert(key, (Instant::now(), value));
    while map.len() > KEYED_MAX {
        let oldest = map
            .iter()
            .min_by_key(|(_, (at, _))| *at)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => map.remove(&k),
            None => break,
        };
    }
}

/// The overview as JSON (docs/serve.md lists the fields).
fn overview_json(s: &Snapshot) -> Value {
    json!({
        "prefix": s.prefix,
        "time": s.time,
        "halted": s.halted,
        "schedules": s.schedules,
        "timeline": s.timeline,
        "due": s.due,
        "upcoming": s.upcoming.iter().map(|u| json!({"jobid": u.jobid, "due": u.due})).collect::<Vec<_>>(),
        "running_total": s.running_total,
        "running": s.running.iter().map(|r| json!({
            "jobid": r.jobid,
            "started": r.started,
            "timeout": r.timeout,
        })).collect::<Vec<_>>(),
        "queues": s.queues.iter().map(|q| json!({
            "queue": q.queue,
            "length": q.length,
            "oldest_age": q.oldest_age,
            "running": q.running,
            "workers": q.workers,
            "runs_last_minute": q.runs.runs,
            "failures_last_minute": q.runs.failures,
            "lateness_p50": q.runs.late_p50,
            "lateness_p99": q.runs.late_p99,
            "paused_since": q.paused_since,
        })).collect::<Vec<_>>(),
        "failures_total": s.failures_total,
        "failures": s.failures.iter().map(|f| json!({
            "jobid": f.jobid,
            "event": f.event,
            "at": f.at,
            "detail": f.detail,
        })).collect::<Vec<_>>(),
        "paused_total": s.slow.paused_total,
        "paused_jobs": paused_jobs(&s.slow),
        "paused_queues": s.slow.paused_queues,
        "stale_total": s.slow.stale_total,
        "stale_jobs": s.slow.stale,
        "dispatchers": s.slow.dispatchers,
        "workers": s.slow.workers,
    })
}

/// The paused jobs read (one HSCAN page), by id.
fn paused_jobs(slow: &Slow) -> Vec<Value> {
    slow.paused
        .iter()
        .map(|p| json!({"jobid": p.jobid, "since": p.since, "note": p.note}))
        .collect()
}
