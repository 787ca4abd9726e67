//! What `redbike top` shows, read from one prefix in two pipelined round trips of cheap
//! commands whose cost does not grow with the data: no SCAN of the keyspace, every
//! range bounded (see [`Limits`]).
//!
//! Round trip one: GET, HLEN, ZCARD and ZCOUNT, the first entries of the timeline and of
//! the running index (`P-leases`), one HSCAN page of `P-failures` (small hashes come
//! whole in one page; a large one gives a bounded sample), PUBSUB CHANNELS of the
//! prefix's wake-up channels (the queues that workers listen on: the channels of the
//! server, never its keys), HLEN and one HSCAN page of `P-stale`, and LLEN and LINDEX of each queue named. Round trip two: one HMGET of `P-statuses` for the running jobs (when
//! they started) and the queues' oldest entries (since when they wait).

use std::collections::{BTreeMap, BTreeSet};

use redis::Connection;

use crate::{
    history,
    operator::control::Pause,
    redis::{
        keys::{glob_escape, queue_of, Keys},
        registry,
        store::{lossy, Store},
    },
    status::{Status, ENQ, WRK},
};

/// How much of each list one refresh reads.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries of the timeline (the next jobs due).
    pub upcoming: usize,
    /// Entries of the running index.
    pub running: usize,
    /// Fields asked for in the one HSCAN page of `P-failures`.
    pub failures: usize,
    /// Entries of the run history's recent failures.
    pub recent_failures: usize,
}

/// The limits of the live view.
pub const LIMITS: Limits = Limits {
    upcoming: 50,
    running: 100,
    failures: 200,
    recent_failures: 20,
};

/// One prefix at one instant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The key prefix.
    pub prefix: String,
    /// When it was read, unix seconds (this machine's clock).
    pub time: i64,
    /// Whether `P-control` says HALT.
    pub halted: bool,
    /// Stored schedules (HLEN).
    pub schedules: u64,
    /// Jobs on the timeline (ZCARD).
    pub timeline: u64,
    /// Jobs on the timeline due now or earlier: what dispatchers have yet to move.
    pub due: u64,
    /// The first jobs of the timeline, soonest first.
    pub upcoming: Vec<Upcoming>,
    /// Running jobs in the running index (ZCARD of `P-leases`); Python workers' jobs
    /// are not in it.
    pub running_total: u64,
    /// The running jobs read (at most [`Limits::running`]), by id.
    pub running: Vec<Running>,
    /// One row per queue named or seen, by name.
    pub queues: Vec<QueueRow>,
    /// Jobs with a last failure (HLEN of `P-failures`).
    pub failures_total: u64,
    /// Last failures read, newest first.
    pub failures: Vec<Failure>,
    /// Queues of the jobs read that were not in the plan (see [`Plan::queues`]).
    pub unread_queues: BTreeSet<String>,
    /// The slow figures this snapshot used (read now or carried over).
    pub slow: Slow,
}

/// A job on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Upcoming {
    /// The job id.
    pub jobid: String,
    /// When it is due, unix seconds.
    pub due: i64,
}

/// A running job.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// The job id.
    pub jobid: String,
    /// When its run started, from its `WRK` status; `None` when the status says otherwise.
    pub started: Option<i64>,
    /// Its queue's timeout in seconds, as this machine's config says.
    pub timeout: u64,
}

/// A work queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    /// The queue name.
    pub queue: String,
    /// Jobs waiting (LLEN).
    pub length: u64,
    /// Seconds the next job to be claimed has waited, from its `ENQ` status; `None`
    /// for an empty queue or when that status is not `ENQ`.
    pub oldest_age: Option<i64>,
    /// Its running jobs among those read.
    pub running: u64,
    /// Workers alive that work it.
    pub workers: u64,
    /// Its runs of the last minute, from the run history.
    pub runs: QueueRuns,
    /// Since when our workers do not claim from it (`pause --queue`), unix seconds.
    pub paused_since: Option<i64>,
    /// Its fleet-wide limit (`[redbike.limits]`), if it has one.
    pub limit: Option<u64>,
}

/// A job's last failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The job id.
    pub jobid: String,
    /// `DIE`, `TMO`, `KIL`, `REC`, `FNC` or `SKP`.
    pub event: String,
    /// When, unix seconds.
    pub at: i64,
    /// The last line of its output or its reason, from the run history (empty
    /// without it).
    pub detail: String,
}

/// What the reader needs besides the connection.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Queues to show whatever they hold (the config's and `--queues`), plus queues
    /// seen in earlier refreshes; the queues of jobs read are added.
    pub queues: BTreeSet<String>,
    /// Timeout per queue (the config's `timeouts`).
    pub timeouts: BTreeMap<String, u64>,
    /// Timeout of other queues.
    pub default_timeout: u64,
    /// Fleet-wide limits of queues (the config's `[redbike.limits]`).
    pub limits: BTreeMap<String, u64>,
}

type Scored = Vec<(Vec<u8>, f64)>;
/// The fields and values of a hash, as stored.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
/// A page of HSCAN: the next cursor, and fields and values as stored.
type HashPage = (String, Pairs);

/// Figures that change slowly, read every [`SLOW_EVERY`] refreshes and carried over in
/// between, to keep the cost of a refresh down.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slow {
    /// Stored schedules (HLEN).
    pub schedules: u64,
    /// Jobs with a last failure (HLEN of `P-failures`).
    pub failures_total: u64,
    /// Queues workers listen on (from their wake-up channels).
    pub listened: BTreeSet<String>,
    /// Last failures from `P-failures` (one HSCAN page), newest first: shown when the
    /// run history has none (history off, or only the Python original runs).
    pub last_failures: Vec<Failure>,
    /// Per queue, its runs of the last minute from the run history (`P-recent-runs`).
    pub runs: BTreeMap<String, QueueRuns>,
    /// Dispatchers alive (registered and heart-beating; Python ones never register).
    pub dispatchers: u64,
    /// Workers alive.
    pub workers: u64,
    /// Workers alive per queue they work.
    pub workers_per_queue: BTreeMap<String, u64>,
    /// Paused jobs (one HSCAN page of `P-paused`), by id.
    pub paused: Vec<PausedJob>,
    /// Jobs paused in all (HLEN of `P-paused`).
    pub paused_total: u64,
    /// Paused queues (`P-paused-queues`) and since when, unix seconds.
    pub paused_queues: BTreeMap<String, i64>,
    /// Stale jobs (one HSCAN page of `P-stale`, see [`crate::stale`]): marked in the
    /// view.
    pub stale: BTreeSet<String>,
    /// Stale jobs in all (HLEN of `P-stale`).
    pub stale_total: u64,
}

/// A paused job.
#[derive(Debug, Clone, PartialEq)]
pub struct PausedJob {
    /// The job id.
    pub jobid: String,
    /// Since when, unix seconds (0 when unknown).
    pub since: i64,
    /// The operator's note.
    pub note: String,
}

/// A queue's runs over the last minute, from the run history.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueRuns {
    /// Runs that ended in the last minute.
    pub runs: u64,
    /// Failures among the entries of the last minute.
    pub failures: u64,
    /// Median lateness of the runs that started in the last minute, seconds.
    pub late_p50: Option<f64>,
    /// 99th percentile of it.
    pub late_p99: Option<f64>,
}

/// One refresh in this many reads the [`Slow`] figures.
pub const SLOW_EVERY: u64 = 5;

/// The replies of a pipeline, taken in the order the commands were added.
struct Replies(std::vec::IntoIter<redis::Value>);

impl Replies {
    fn next<T: redis::FromRedisValue>(&mut self) -> redis::RedisResult<T> {
        let v = self.0.next().unwrap_or(redis::Value::Nil);
        if let redis::Value::ServerError(e) = v {
            return Err(e.into());
        }
        Ok(redis::from_redis_value(v)?)
    }

    /// A reply that may be refused (an ACL without the command): `None` then.
    fn optional<T: redis::FromRedisValue>(&mut self) -> redis::RedisResult<Option<T>> {
        match self.0.next() {
            Some(redis::Value::ServerError(_)) | None => Ok(None),
            Some(v) => Ok(Some(redis::from_redis_value(v)?)),
        }
    }
}

/// The last failures of `P-failures` (`JOBID`, `EVENT:TS` pairs), newest first.
fn last_failures(flat: Vec<Vec<u8>>) -> Vec<Failure> {
    let mut it = flat.into_iter();
    let mut failures: Vec<Failure> = std::iter::from_fn(|| Some((it.next()?, it.next()?)))
        .filter_map(|(id, raw)| {
            let s = Status::parse(&lossy(raw))?;
            Some(Failure {
                jobid: lossy(id),
                event: s.event,
                at: s.at,
                detail: String::new(),
            })
        })
        .collect();
    failures.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.jobid.cmp(&b.jobid)));
    failures
}

/// A failure as the run history recorded it: its outcome (with its attempt, `failed
/// #2`, when retries count them), and the last line of its output (else its reason).
fn failure_of(e: &history::Entry) -> Failure {
    let last = e.tail.lines().rev().find(|l| !l.trim().is_empty());
    let name = e.outcome.name();
    Failure {
        jobid: e.job.clone(),
        event: match e.attempt {
            Some(n) => format!("{name} #{n}"),
            None => name.to_string(),
        },
        at: crate::schedule::timestamp::unix_of(e.end),
        detail: last.unwrap_or(&e.detail).trim().to_string(),
    }
}

/// Per queue, the runs of the last minute among the recent entries: the history
/// module's own figures (lateness, failures) over each queue's entries.
fn queue_runs(entries: &[history::Entry], now: i64) -> BTreeMap<String, QueueRuns> {
    let now = now as f64;
    let mut by_queue: BTreeMap<String, Vec<history::Entry>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.end >= now - history::WINDOW) {
        by_queue.entry(e.queue.clone()).or_default().push(e.clone());
    }
    by_queue
        .into_iter()
        .map(|(q, list)| {
            let recent = history::recent_figures(&[], &list, now);
            let runs = QueueRuns {
                // Runs a worker made (a dispatcher's entries have no start).
                runs: list.iter().filter(|e| e.start.is_some()).count() as u64,
                failures: recent.recent_failures,
                late_p50: recent.lateness_p50_seconds,
                late_p99: recent.lateness_p99_seconds,
            };
            (q, runs)
        })
        .collect()
}

/// Counts the dispatchers and workers alive (see [`registry::list`]: SMEMBERS, then
/// GET and PTTL per process).
fn alive(
    con: &mut Connection,
    keys: &Keys,
    slow: &mut Slow,
    sent: &mut usize,
) -> redis::RedisResult<()> {
    let listed = registry::list(&mut Store { con, keys })?;
    *sent += 1 + 2 * listed.len();
    for l in &listed {
        let d = &l.description;
        match d.kind.as_str() {
            registry::DISPATCHER => slow.dispatchers += 1,
            registry::WORKER => {
                slow.workers += 1;
                for q in &d.queues {
                    *slow.workers_per_queue.entry(q.clone()).or_insert(0) += 1;
                    slow.listened.insert(q.clone());
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Reads one snapshot at `now`; the [`Slow`] figures too unless `slow` carries them
/// over. Returns it with the number of commands sent.
pub fn read(
    con: &mut Connection,
    keys: &Keys,
    plan: &Plan,
    now: i64,
    slow: Option<&Slow>,
) -> redis::RedisResult<(Snapshot, usize)> {
    let named: Vec<String> = plan.queues.iter().cloned().collect();
    let mut pipe = redis::pipe();
    pipe.get(&keys.control)
        .zcard(&keys.timeline)
        .zcount(&keys.timeline, "-inf", now)
        .zrange_withscores(&keys.timeline, 0, LIMITS.upcoming as isize - 1)
        .zcard(&keys.leases)
        .zrange(&keys.leases, 0, LIMITS.running as isize - 1)
        .lrange(
            &keys.recent_failures,
            0,
            LIMITS.recent_failures as isize - 1,
        );
    if slow.is_none() {
        pipe.hlen(&keys.schedules)
            .hlen(&keys.failures)
            .cmd("HSCAN")
            .arg(&keys.failures)
            .arg(0)
            .arg("COUNT")
            .arg(LIMITS.failures)
            .add_command(crate::redis::history::stream_read(keys))
            .lrange(&keys.recent_runs, 0, history::RECENT_RUNS as isize - 1)
            .hlen(&keys.paused)
            .cmd("HSCAN")
            .arg(&keys.paused)
            .arg(0)
            .arg("COUNT")
            .arg(LIMITS.failures)
            .hgetall(&keys.paused_queues)
            .hlen(&keys.stale)
            .cmd("HSCAN")
            .arg(&keys.stale)
            .arg(0)
            .arg("COUNT")
            .arg(LIMITS.failures)
            .cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(format!("{}-wake-*", glob_escape(&keys.prefix)));
    }
    for q in &named {
        pipe.llen(keys.queue(q)).lindex(keys.queue(q), -1);
    }
    let mut sent = pipe.len();
    // Errors come back as values, so that one that only adds detail (PUBSUB CHANNELS,
    // refused to an ACL user without it) need not fail the read.
    let replies: Vec<redis::Value> = pipe.ignore_errors().query(con)?;
    let mut r = Replies(replies.into_iter());
    // Ids, names and values are read as bytes and shown with `lossy`: another program
    // may have written bytes that are not UTF-8, which a monitor shows, not stops at.
    let control: Option<Vec<u8>> = r.next()?;
    let timeline: u64 = r.next()?;
    let due: u64 = r.next()?;
    let upcoming: Scored = r.next()?;
    let running_total: u64 = r.next()?;
    let running_ids: Vec<Vec<u8>> = r.next()?;
    let recent_failures: Vec<Vec<u8>> = r.next()?;
    let slow = match slow {
        Some(slow) => slow.clone(),
        None => {
            let schedules = r.next()?;
            let failures_total = r.next()?;
            let (_, flat): (String, Vec<Vec<u8>>) = r.next()?;
            // Of another type (`check` names it): no run events.
            let stream: history::StreamEntries = r.optional()?.unwrap_or_default();
            let list: Vec<Vec<u8>> = r.next()?;
            let paused_total = r.next()?;
            let (_, paused): HashPage = r.next()?;
            let paused_queues: Pairs = r.next()?;
            // Of another type (`check` names it): no job shown stale.
            let stale_total: u64 = r.optional()?.unwrap_or(0);
            let stale: Option<HashPage> = r.optional()?;
            let channels: Vec<Vec<u8>> = r.optional()?.unwrap_or_default();
            let wake = format!("{}-wake-", keys.prefix);
            let mut slow = Slow {
                schedules,
                failures_total,
                listened: channels
                    .into_iter()
                    .map(lossy)
                    .filter_map(|c| c.strip_prefix(&wake).map(str::to_string))
                    .filter(|q| !matches!(q.as_str(), "timeline" | "control"))
                    .collect(),
                last_failures: last_failures(flat),
                runs: queue_runs(
                    &history::recent_runs(history::stream_runs(stream), list, &keys.recent_runs),
                    now,
                ),
                paused: paused
                    .into_iter()
                    .map(|(jobid, raw)| {
                        let p = Pause::parse(&lossy(raw));
                        PausedJob {
                            jobid: lossy(jobid),
                            since: p.since,
                            note: p.note,
                        }
                    })
                    .collect(),
                paused_total,
                paused_queues: paused_queues
                    .into_iter()
                    .map(|(q, raw)| (lossy(q), Pause::parse(&lossy(raw)).since))
                    .collect(),
                stale: stale
                    .map(|(_, page)| page.into_iter().map(|(id, _)| lossy(id)).collect())
                    .unwrap_or_default(),
                stale_total,
                ..Slow::default()
            };
            slow.paused.sort_by(|a, b| a.jobid.cmp(&b.jobid));
            alive(con, keys, &mut slow, &mut sent)?;
            slow
        }
    };
    let mut heads = Vec::with_capacity(named.len());
    for _ in &named {
        let length: u64 = r.next()?;
        let head: Option<Vec<u8>> = r.next()?;
        heads.push((length, head));
    }

    // Round trip two: when each running job started and since when each head waits.
    // The ids as stored, so that one that is not UTF-8 still finds its status.
    let mut fields: Vec<&[u8]> = running_ids.iter().map(Vec::as_slice).collect();
    fields.extend(heads.iter().filter_map(|(_, h)| h.as_deref()));
    let statuses: Vec<Option<Vec<u8>>> = if fields.is_empty() {
        Vec::new()
    } else {
        sent += 1;
        redis::cmd("HMGET")
            .arg(&keys.statuses)
            .arg(&fields)
            .query(con)?
    };
    let status_of = |i: usize| statuses.get(i).cloned().flatten().map(lossy);
    let since = |i: usize, event: &str| {
        Status::parse(&status_of(i)?).and_then(|s| (s.event == event).then_some(s.at))
    };

    let running: Vec<Running> = running_ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let jobid = lossy(id);
            Running {
                started: since(i, WRK),
                timeout: *plan
                    .timeouts
                    .get(queue_of(&jobid))
                    .unwrap_or(&plan.default_timeout),
                jobid,
            }
        })
        .collect();
    let mut at = running.len();
    let mut queues: BTreeMap<String, QueueRow> = BTreeMap::new();
    for (name, (length, head)) in named.iter().zip(&heads) {
        let oldest_age = match head {
            Some(_) => {
                at += 1;
                since(at - 1, ENQ).map(|t| now.saturating_sub(t).max(0))
            }
            None => None,
        };
        queues.insert(
            name.clone(),
            QueueRow {
                queue: name.clone(),
                length: *length,
                oldest_age,
                running: 0,
                workers: slow.workers_per_queue.get(name).copied().unwrap_or(0),
                runs: slow.runs.get(name).cloned().unwrap_or_default(),
                paused_since: slow.paused_queues.get(name).copied(),
                limit: plan.limits.get(name).copied(),
            },
        );
    }
    let upcoming: Vec<Upcoming> = upcoming
        .into_iter()
        .map(|(jobid, score)| Upcoming {
            jobid: lossy(jobid),
            due: crate::schedule::timestamp::unix_of(score),
        })
        .collect();
    let failures: Vec<Failure> = {
        let entries = history::parse_entries(recent_failures, &keys.recent_failures);
        if entries.is_empty() {
            slow.last_failures.clone()
        } else {
            entries.iter().map(failure_of).collect()
        }
    };
    // Queues met in the lists read but not named: the caller adds them to its plan,
    // so they get a row (with figures) from the next read on.
    // So are the queues that workers listen on (their wake-up channels) and the
    // paused ones.
    let listened = slow
        .listened
        .iter()
        .chain(slow.paused_queues.keys())
        .map(String::as_str);
    let unread: BTreeSet<String> = running
        .iter()
        .map(|r| queue_of(&r.jobid))
        .chain(upcoming.iter().map(|u| queue_of(&u.jobid)))
        .chain(failures.iter().map(|f| queue_of(&f.jobid)))
        .chain(listened)
        .filter(|q| !plan.queues.contains(*q))
        .map(str::to_string)
        .collect();
    for r in &running {
        if let Some(row) = queues.get_mut(queue_of(&r.jobid)) {
            row.running += 1;
        }
    }
    let snapshot = Snapshot {
        prefix: keys.prefix.clone(),
        time: now,
        halted: control.as_deref() == Some(b"HALT".as_slice()),
        schedules: slow.schedules,
        timeline,
        due,
        upcoming,
        running_total,
        running,
        queues: queues.into_values().collect(),
        failures_total: slow.failures_total,
        failures,
        unread_queues: unread,
        slow,
    };
    Ok((snapshot, sent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_failure_names_its_attempt() {
        let mut e = history::Entry::new("j:A", history::Outcome::Failed, 10.0, "worker");
        e.tail = "first\nlast line\n\n".into();
        assert_eq!(failure_of(&e).event, "failed");
        assert_eq!(failure_of(&e).detail, "last line");
        e.attempt = Some(2);
        assert_eq!(failure_of(&e).event, "failed #2");
    }
}
