//! Stale jobs (see [`crate::stale`]): the dispatcher's pass that marks the jobs whose
//! deadline passed, with stale.lua.
//!
//! The dispatcher learns the earliest deadline from every pass (dispatch.lua reads the
//! head of `P-fresh-until` with the timeline's, no round trip of its own) and sleeps
//! no later than it. When it has passed, this pass reads up to [`BATCH`] jobs whose
//! deadline passed, with their schedules, works out what each event says (the last
//! success: its deadline minus its queue's bound, or the newest success its run
//! history holds), and moves them into `P-stale` in one stale.lua call that writes a
//! `stale` event for each and moves a job only if its deadline is still the one read.
//! A job that has no bound any more (its schedule or its queue's bound changed, by a
//! process that writes no deadlines) or that is paused loses its deadline instead.

use std::collections::HashMap;

use redis::RedisResult;

use crate::{
    history::{job_entries, job_of},
    redis::{keys::Keys, scripts, store::Store},
    stale::Bounds,
};

/// Jobs looked at per pass (a dispatcher whose every pass finds this many passes again
/// at once).
pub(crate) const BATCH: usize = 100;

/// The newest unfiled history entries read per pass to find last successes (the rest
/// are older, or filed into their jobs' lists).
const UNFILED_READ: isize = 10_000;

/// What one pass found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// Jobs marked stale now (each with its `stale` event).
    pub marked: usize,
    /// Jobs whose deadline was dropped: they have no bound any more.
    pub dropped: usize,
    /// Jobs whose deadline passed, looked at.
    pub looked: usize,
    /// The earliest deadline left.
    pub next: Option<i64>,
}

/// Marks the jobs whose deadline is `now` or earlier (Redis's clock, whole seconds) as
/// stale, up to [`BATCH`] of them; `events` entries are kept in the event stream.
/// A `P-fresh-until` or `P-stale` of another type (`check` names it) marks nothing.
pub(crate) fn pass(
    store: &mut Store<'_>,
    bounds: &Bounds<'_>,
    events: u64,
    now: i64,
) -> RedisResult<Found> {
    let keys: &Keys = store.keys;
    let due: Vec<(String, String)> = match redis::cmd("ZRANGEBYSCORE")
        .arg(&keys.fresh_until)
        .arg("-inf")
        .arg(now)
        .arg("WITHSCORES")
        .arg("LIMIT")
        .arg(0)
        .arg(BATCH)
        .query(store.con)
    {
        Err(e) if crate::error::is_wrong_type(&e) => return Ok(Found::default()),
        other => other?,
    };
    if due.is_empty() {
        return Ok(Found::default());
    }
    let ids: Vec<&str> = due.iter().map(|(id, _)| id.as_str()).collect();
    // Their schedules, and the history of those whose last success is to be found.
    let derived: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| bounds.own(id).is_none())
        .collect();
    let mut pipe = redis::pipe();
    pipe.cmd("HMGET").arg(&keys.schedules).arg(&ids);
    pipe.cmd("HMGET").arg(&keys.paused).arg(&ids);
    if !derived.is_empty() {
        pipe.cmd("LRANGE")
            .arg(&keys.unfiled_runs)
            .arg(-UNFILED_READ)
            .arg(-1);
        for id in &derived {
            pipe.cmd("LRANGE").arg(keys.history(id)).arg(0).arg(-1);
        }
    }
    let mut replies: Vec<redis::Value> = pipe.ignore_errors().query(store.con)?;
    replies.reverse();
    let mut next = || replies.pop().unwrap_or(redis::Value::Nil);
    let schedules: Vec<Option<String>> = redis::from_redis_value(next())?;
    // A paused hash of another type reads as no job paused.
    let paused: Vec<Option<String>> =
        redis::from_redis_value(next()).unwrap_or_else(|_| vec![None; ids.len()]);
    let mut last_success = HashMap::new();
    if !derived.is_empty() {
        // A key of another type reads as no history.
        let unfiled: Vec<Vec<u8>> = redis::from_redis_value(next()).unwrap_or_default();
        let mut by_job: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
        for raw in unfiled {
            if let Some(job) = job_of(&raw) {
                by_job.entry(job).or_default().push(raw);
            }
        }
        for id in &derived {
            let listed: Vec<Vec<u8>> = redis::from_redis_value(next()).unwrap_or_default();
            let unfiled = by_job.remove(*id).unwrap_or_default();
            let entries = job_entries(unfiled, listed, &keys.history(id));
            if let Some(e) = entries.iter().find(|e| e.outcome.is_success()) {
                last_success.insert(*id, crate::schedule::timestamp::unix_of(e.end.floor()));
            }
        }
    }
    let mut call = scripts::STALE.prepare_invoke();
    call.key(&keys.fresh_until)
        .key(&keys.stale)
        .key(&keys.events)
        .arg(events);
    for (((id, deadline), schedule), paused) in due.iter().zip(&schedules).zip(&paused) {
        // A paused job does not run on purpose: it loses its deadline, not its
        // freshness (`resume` gives it a new one).
        let bounded = paused.is_none() && bounds.bounded(id, schedule.as_deref());
        let verdict = match (bounded, bounds.own(id)) {
            (false, _) => "-".to_string(),
            (true, Some(secs)) => {
                let d = crate::schedule::timestamp::unix_of(
                    deadline.parse::<f64>().unwrap_or(0.0).ceil(),
                );
                format!("{}:{secs}", d - secs as i64)
            }
            (true, None) => match last_success.get(id.as_str()) {
                Some(&since) => {
                    let d = crate::schedule::timestamp::unix_of(
                        deadline.parse::<f64>().unwrap_or(0.0).ceil(),
                    );
                    format!("{since}:{}", (d - since).max(0))
                }
                None => "0:0".to_string(),
            },
        };
        call.arg(id).arg(deadline).arg(verdict);
    }
    let (marked, dropped, next): (usize, usize, Option<f64>) = match call.invoke(store.con) {
        Err(e) if crate::error::is_wrong_type(&e) => return Ok(Found::default()),
        other => other?,
    };
    Ok(Found {
        marked,
        dropped,
        looked: due.len(),
        next: next.map(|t| crate::schedule::timestamp::unix_of(t.ceil())),
    })
}
