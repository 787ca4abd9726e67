//! The state of each job, and of the fleet, as the notifiers last recorded it
//! (`P-notify-state`, written by `notify_state.lua` only): whether an event is a
//! change to report. The script applies an entry only when it is newer than the newest
//! applied, so two notifiers reading one stream agree on which entry made each change,
//! and a redelivered entry that made a change is reported again (at least once).

use redis::{Connection, RedisResult, Value};

use crate::{
    history::Entry,
    redis::{hazards::Kind as HazardKind, keys::Keys, scripts},
};

use super::{
    entry::Event,
    message::{Kind, Notification},
};

/// What `notify_state.lua` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Older than, or the same as, the newest entry applied: nothing to say.
    Old,
    /// No change.
    Same,
    /// The first record of a state that is no news (a job's first success).
    Quiet,
    /// A change within the rate limit, counted.
    Suppressed,
    /// A change to report, with the changes suppressed since the last report.
    Changed {
        /// The state before ("" when none was recorded).
        previous: String,
        /// Changes suppressed since the job's last notification.
        suppressed: u64,
    },
    /// The entry that made the state, seen again: report it again, marked.
    Again {
        /// As reported the first time.
        suppressed: u64,
    },
}

/// One state to record: the field, the entry id (`*` for now), the state, the state a
/// first record keeps quiet about, and the rate limit of the job (field, seconds).
pub struct Record<'a> {
    /// `run:JOB`, `stale:JOB`, `fleet:NAME`.
    pub field: String,
    /// The stream entry's id, or `*`.
    pub id: &'a str,
    /// The state it shows.
    pub state: &'a str,
    /// The state a first record says nothing about ("" for none).
    pub quiet: &'a str,
    /// `rate:JOB` and the limit in seconds, for a job.
    pub rate: Option<(String, u64)>,
}

/// Records `r` with `notify_state.lua`; the transition and the entry id used.
pub fn apply(
    con: &mut Connection,
    keys: &Keys,
    r: &Record<'_>,
) -> RedisResult<(Transition, String)> {
    let (rate_field, limit) = r.rate.clone().unwrap_or_default();
    let reply: Vec<Value> = scripts::NOTIFY_STATE
        .key(&keys.notify_state)
        .key(&keys.notify_held)
        .arg(&r.field)
        .arg(r.id)
        .arg(r.state)
        .arg(r.quiet)
        .arg(rate_field)
        .arg(limit)
        .invoke(con)?;
    let text = |i: usize| -> String {
        reply
            .get(i)
            .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
            .unwrap_or_default()
    };
    let count = reply
        .get(2)
        .and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok())
        .unwrap_or(0);
    let word = text(0);
    let t = match word.as_str() {
        "old" => Transition::Old,
        "same" => Transition::Same,
        "quiet" => Transition::Quiet,
        "suppressed" => Transition::Suppressed,
        "changed" => Transition::Changed {
            previous: text(1),
            suppressed: count,
        },
        "again" => Transition::Again { suppressed: count },
        other => return Err(scripts::unexpected("notify_state.lua", other)),
    };
    Ok((t, text(3)))
}

/// A change the rate limit held back whose state lasted to the window's end: to
/// report now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// `run:JOB` or `stale:JOB`.
    pub field: String,
    /// The newest entry applied to it (the one to report).
    pub id: String,
    /// Its state.
    pub state: String,
    /// Changes suppressed since the job's last notification.
    pub suppressed: u64,
}

/// Takes the jobs whose rate-limit window ended with changes held back
/// (`notify_release.lua`): the fields to report.
pub fn release(con: &mut Connection, keys: &Keys) -> RedisResult<Vec<Released>> {
    let flat: Vec<Value> = scripts::NOTIFY_RELEASE
        .key(&keys.notify_state)
        .key(&keys.notify_held)
        .arg(100)
        .arg("run,stale")
        .invoke(con)?;
    let text = |v: &Value| redis::from_redis_value::<String>(v.clone()).unwrap_or_default();
    Ok(flat
        .chunks(4)
        .filter_map(|c| match c {
            [field, id, state, n] => Some(Released {
                field: text(field),
                id: text(id),
                state: text(state),
                suppressed: redis::from_redis_value::<u64>(n.clone()).unwrap_or(0),
            }),
            _ => None,
        })
        .collect())
}

/// The notification of a released change whose entry is gone from the stream (or
/// unreadable): what the state says, without the run.
pub fn released_without_entry(prefix: &str, r: &Released) -> Notification {
    let (kind_name, job) = r.field.split_once(':').unwrap_or(("run", &r.field));
    let kind = match (kind_name, r.state.as_str()) {
        ("run", "fail") => Kind::Failure,
        ("run", _) => Kind::Recovery,
        (_, "stale") => Kind::Stale,
        _ => Kind::Fresh,
    };
    Notification {
        v: 1,
        kind,
        prefix: prefix.to_string(),
        job: Some(job.to_string()),
        queue: None,
        time: id_time(&r.id),
        id: r.id.clone(),
        summary: format!("job {job}: {} (its stream entry is gone)", kind.name()),
        run: None,
        since: None,
        bound: None,
        hazard: None,
        overdue: None,
        suppressed: r.suppressed,
        redelivered: false,
    }
}

/// The unix seconds of a stream id (`MS-SEQ`).
pub fn id_time(id: &str) -> i64 {
    id.split('-')
        .next()
        .and_then(|ms| ms.parse::<i64>().ok())
        .map_or(0, |ms| ms / 1000)
}

/// What a stream event changes: the record to apply, and the notification to send if it
/// is a change (its `suppressed` and `redelivered` are set by the caller).
pub fn of_event<'a>(
    prefix: &str,
    id: &'a str,
    event: &Event,
    rate_limit: u64,
) -> Option<(Record<'a>, Notification)> {
    let base = |kind: Kind, job: &str, queue: &str, summary: String| Notification {
        v: 1,
        kind,
        prefix: prefix.to_string(),
        job: Some(job.to_string()),
        queue: Some(queue.to_string()).filter(|q| !q.is_empty()),
        time: id_time(id),
        id: id.to_string(),
        summary,
        run: None,
        since: None,
        bound: None,
        hazard: None,
        overdue: None,
        suppressed: 0,
        redelivered: false,
    };
    // No rate field without a limit: a job costs the state one field.
    let rate = |job: &str| (rate_limit > 0).then(|| (format!("rate:{job}"), rate_limit));
    match event {
        Event::Run { job, failed, entry } => {
            let state = if *failed {
                "fail"
            } else if entry.outcome.is_success() {
                "ok"
            } else {
                // Stopped, unset, interrupted, recovered, skipped: neither.
                return None;
            };
            let (kind, summary) = if *failed {
                (Kind::Failure, failure_summary(job, entry))
            } else {
                (Kind::Recovery, format!("job {job} succeeded again"))
            };
            let mut n = base(kind, job, &entry.queue, summary);
            n.run = Some(Notification::bounded_run((**entry).clone()));
            let record = Record {
                field: format!("run:{job}"),
                id,
                state,
                quiet: "ok",
                rate: rate(job),
            };
            Some((record, n))
        }
        Event::Stale {
            job,
            queue,
            since,
            bound,
        } => {
            let last = if *since > 0 {
                format!(
                    ": no success since {}",
                    crate::schedule::timestamp::iso_utc(*since)
                )
            } else {
                String::new()
            };
            let within = if *bound > 0 {
                format!(" (it should succeed within {bound}s)")
            } else {
                String::new()
            };
            let mut n = base(
                Kind::Stale,
                job,
                queue,
                format!("job {job} is stale{last}{within}"),
            );
            n.since = Some(*since);
            n.bound = Some(*bound);
            let record = Record {
                field: format!("stale:{job}"),
                id,
                state: "stale",
                quiet: "",
                rate: rate(job),
            };
            Some((record, n))
        }
        Event::Fresh { job, queue, since } => {
            let mut n = base(
                Kind::Fresh,
                job,
                queue,
                format!("job {job} succeeded again and is no longer stale"),
            );
            n.since = Some(*since);
            let record = Record {
                field: format!("stale:{job}"),
                id,
                state: "fresh",
                quiet: "fresh",
                rate: rate(job),
            };
            Some((record, n))
        }
        Event::Action => None,
    }
}

/// `job J failed (outcome, exit 3): detail`.
fn failure_summary(job: &str, e: &Entry) -> String {
    let mut how = e.outcome.name().to_string();
    if let Some(code) = e.exit {
        how.push_str(&format!(", exit {code}"));
    }
    if let Some(sig) = e.signal {
        how.push_str(&format!(", signal {sig}"));
    }
    let detail = if e.detail.is_empty() {
        String::new()
    } else {
        let first: String = e.detail.chars().take(200).collect();
        format!(": {first}")
    };
    format!("job {job} failed ({how}){detail}")
}

/// A fleet-level condition a check found, as a record and its notification.
pub struct FleetState {
    /// The field, `fleet:dispatcher` or `fleet:hazard:KIND`.
    pub field: String,
    /// `bad` or `good`.
    pub state: &'static str,
    /// What to send if it changed.
    pub notification: Notification,
}

/// The fleet's states from a check of `prefix`: dispatcher absent with jobs overdue,
/// and each hazard.
pub fn fleet_states(
    prefix: &str,
    dispatchers: Option<u64>,
    overdue: u64,
    hazards: Option<&crate::redis::hazards::Health>,
    now: i64,
) -> Vec<FleetState> {
    let base = |kind: Kind, summary: String| Notification {
        v: 1,
        kind,
        prefix: prefix.to_string(),
        job: None,
        queue: None,
        time: now,
        id: String::new(),
        summary,
        run: None,
        since: None,
        bound: None,
        hazard: None,
        overdue: None,
        suppressed: 0,
        redelivered: false,
    };
    let mut out = Vec::new();
    if let Some(alive) = dispatchers {
        let absent = alive == 0 && overdue > 0;
        let mut n = if absent {
            base(
                Kind::DispatcherAbsent,
                format!(
                    "no dispatcher is alive on prefix {prefix} and {overdue} job(s) are overdue"
                ),
            )
        } else {
            base(
                Kind::DispatcherBack,
                format!("prefix {prefix} has a dispatcher again, or no job is overdue"),
            )
        };
        n.overdue = Some(overdue);
        out.push(FleetState {
            field: "fleet:dispatcher".into(),
            state: if absent { "bad" } else { "good" },
            notification: n,
        });
    }
    if let Some(health) = hazards {
        for kind in HazardKind::ALL {
            let found = health.hazards.iter().find(|h| h.kind == kind);
            let mut n = match found {
                Some(h) => base(Kind::Hazard, format!("redis hazard: {}", h.message)),
                None => base(
                    Kind::HazardCleared,
                    format!("redis hazard {} is gone", kind.name()),
                ),
            };
            n.hazard = Some(kind.name().to_string());
            out.push(FleetState {
                field: format!("fleet:hazard:{}", kind.name()),
                state: if found.is_some() { "bad" } else { "good" },
                notification: n,
            });
        }
    }
    out
}
