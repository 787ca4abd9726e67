//! The figures of `redbike stats`: plain data, the same for every rendering, and the
//! merge of a sharded prefix's figures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::redis::hazards::Health;

/// The figures of one prefix at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// The key prefix.
    pub prefix: String,
    /// When the figures were read, unix seconds.
    pub time: i64,
    /// Whether `--scan` figures are included.
    pub scanned: bool,
    /// Stored schedules (HLEN of `P-schedules`).
    pub schedules: u64,
    /// Whether `P-control` says HALT.
    pub halted: bool,
    /// The timeline.
    pub timeline: Timeline,
    /// Running jobs according to the lease index `P-leases` (ZCARD; 0 when absent).
    /// Python workers do not write that index, so their jobs are not counted here.
    pub running: u64,
    /// One entry per queue, sorted by name.
    pub queues: Vec<Queue>,
    /// Jobs per status event (`--scan` only).
    pub statuses: Option<BTreeMap<String, u64>>,
    /// Status values not of the shape `EVENT:TS` (`--scan` only).
    pub unparsable_statuses: Option<u64>,
    /// Lease keys `P-work-Q-JOBID` found, Python workers' included (`--scan` only).
    pub lease_keys: Option<u64>,
    /// The Redis settings that lose jobs, from INFO (`None` when INFO is refused).
    pub redis: Option<Health>,
    /// Registered dispatchers and workers alive (`None` when `P-procs` holds another
    /// type). Python processes never register, so they are not counted.
    pub alive: Option<Alive>,
    /// Jobs due for longer than `overdue-after` and not yet dispatched.
    pub overdue: Overdue,
    /// Runs per minute and lateness over the last minute, from the run history
    /// (`P-runs-per-minute`, `P-recent-runs`; all zero with history off).
    pub recent_runs: crate::history::Recent,
    /// Paused jobs (HLEN of `P-paused`; `redbike pause`).
    pub paused_jobs: u64,
    /// Jobs waiting to retry a failed run (HLEN of `P-attempts`; see
    /// [`crate::retries`]).
    pub retrying_jobs: u64,
    /// Jobs with runs of past occurrences to come (HLEN of `P-backlogs`; `backfill`,
    /// catch-up `all`, see [`crate::backfill`]).
    pub backlog_jobs: u64,
    /// Stale jobs: not succeeded for longer than they should (HLEN of `P-stale`, plus
    /// the jobs whose deadline in `P-fresh-until` passed that no dispatcher has marked
    /// yet; see [`crate::stale`]).
    pub stale: u64,
    /// Paused queues, sorted by name (`redbike pause --queue`).
    pub paused_queues: Vec<PausedQueue>,
    /// History entries workers have not yet filed into their jobs' lists (LLEN of
    /// `P-unfiled-runs`; see [`crate::history`]).
    pub history_unfiled: u64,
    /// The evidence that a Python redbike process shares the prefix
    /// (`P-python-seen`), while it lasts: idle processes look every second until then.
    pub python_seen: Option<PythonSeen>,
    /// What a dispatcher or worker saw when the prefix lost its schedules and its
    /// registration at once (`P-schedules-lost`, for a day or until schedules come
    /// back): Redis came back empty?
    pub schedules_lost: Option<String>,
}

/// `P-python-seen` (see [`crate::redis::peers`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PythonSeen {
    /// What was seen, when (unix seconds) and by which process.
    pub evidence: String,
    /// Seconds until the note expires (an hour after the last evidence).
    pub expires_in_seconds: i64,
}

/// The registered processes alive (see [`crate::redis::registry`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alive {
    /// Dispatchers alive.
    pub dispatchers: u64,
    /// Workers alive.
    pub workers: u64,
    /// Workers alive per queue: every queue reported (0 when none works it) and every
    /// queue a live worker works.
    pub workers_per_queue: BTreeMap<String, u64>,
    /// Of those alive, processes that say an error retrying cannot fix keeps them from
    /// their work (`redbike ps` names it).
    pub failing: u64,
}

/// Overdue jobs: on the timeline with a score older than `now - after_seconds`. A
/// dispatcher moves a due job within a second, so these mean that no dispatcher runs,
/// or HALT is set. Queued and running jobs are never on the timeline (a running job
/// due again is pushed a second ahead), so they are not counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overdue {
    /// Jobs overdue (ZCOUNT).
    pub jobs: u64,
    /// The threshold, `overdue-after`.
    pub after_seconds: u64,
}

/// A queue that redbike workers do not claim from (`P-paused-queues`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedQueue {
    /// The queue name.
    pub queue: String,
    /// When it was paused, unix seconds (0 when unknown).
    pub since: i64,
    /// The note given with `pause --queue`.
    pub note: String,
}

/// Figures of `P-timeline`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// Jobs on the timeline (ZCARD).
    pub jobs: u64,
    /// Jobs due now or earlier (ZCOUNT -inf now): what dispatchers have yet to move.
    pub due: u64,
    /// Seconds the oldest due job is past its time; 0 when none is due.
    pub oldest_due_lateness_seconds: i64,
}

/// Figures of one work queue `P-work-Q`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Queue {
    /// The queue name.
    pub queue: String,
    /// Jobs waiting (LLEN).
    pub length: u64,
    /// Seconds the next job to be claimed has waited, from its `ENQ` status; 0 for an
    /// empty queue; `None` when that job's status is not `ENQ` (so its age is unknown).
    pub oldest_age_seconds: Option<i64>,
    /// Its fleet-wide limit (`[redbike.limits]`), if it has one.
    pub limit: Option<u64>,
    /// Its jobs leased now, counted from the running index, for a limited queue.
    pub leased: Option<u64>,
}

/// The figures of a prefix split into shards, from each shard's (in shard order) and
/// named `prefix`: counts add up; a lateness, an age or a percentile is the largest of
/// the shards'; processes alive are the fewest any shard has (a process serving every
/// shard is registered in each); the Redis settings are those of shard 0's node.
pub fn merge(prefix: &str, parts: Vec<Stats>) -> Option<Stats> {
    let mut parts = parts.into_iter();
    let mut all = parts.next()?;
    all.prefix = prefix.to_string();
    let sum = |a: &mut Option<u64>, b: Option<u64>| *a = a.zip(b).map(|(x, y)| x + y);
    for s in parts {
        all.schedules += s.schedules;
        all.halted |= s.halted;
        all.timeline.jobs += s.timeline.jobs;
        all.timeline.due += s.timeline.due;
        all.timeline.oldest_due_lateness_seconds = all
            .timeline
            .oldest_due_lateness_seconds
            .max(s.timeline.oldest_due_lateness_seconds);
        all.running += s.running;
        for q in s.queues {
            match all.queues.iter_mut().find(|a| a.queue == q.queue) {
                Some(a) => {
                    a.length += q.length;
                    a.oldest_age_seconds = a.oldest_age_seconds.max(q.oldest_age_seconds);
                    a.leased = a.leased.zip(q.leased).map(|(x, y)| x + y);
                }
                None => all.queues.push(q),
            }
        }
        if let (Some(a), Some(b)) = (&mut all.statuses, s.statuses) {
            for (event, n) in b {
                *a.entry(event).or_default() += n;
            }
        }
        sum(&mut all.unparsable_statuses, s.unparsable_statuses);
        sum(&mut all.lease_keys, s.lease_keys);
        all.alive = all.alive.zip(s.alive).map(|(mut a, b)| {
            a.dispatchers = a.dispatchers.min(b.dispatchers);
            a.workers = a.workers.min(b.workers);
            a.failing = a.failing.max(b.failing);
            for (q, n) in b.workers_per_queue {
                let fewest = a.workers_per_queue.get(&q).map_or(0, |m| n.min(*m));
                a.workers_per_queue.insert(q, fewest);
            }
            a
        });
        all.overdue.jobs += s.overdue.jobs;
        let (r, t) = (&mut all.recent_runs, s.recent_runs);
        r.runs_per_minute += t.runs_per_minute;
        r.lateness_samples += t.lateness_samples;
        r.lateness_p50_seconds = max_f64(r.lateness_p50_seconds, t.lateness_p50_seconds);
        r.lateness_p99_seconds = max_f64(r.lateness_p99_seconds, t.lateness_p99_seconds);
        r.recent_failures += t.recent_failures;
        all.paused_jobs += s.paused_jobs;
        all.retrying_jobs += s.retrying_jobs;
        all.backlog_jobs += s.backlog_jobs;
        all.stale += s.stale;
        all.schedules_lost = all.schedules_lost.or(s.schedules_lost);
        all.history_unfiled += s.history_unfiled;
        if s.python_seen.as_ref().map(|p| p.expires_in_seconds)
            > all.python_seen.as_ref().map(|p| p.expires_in_seconds)
        {
            all.python_seen = s.python_seen;
        }
        for p in s.paused_queues {
            if !all.paused_queues.iter().any(|a| a.queue == p.queue) {
                all.paused_queues.push(p);
            }
        }
    }
    all.queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    all.paused_queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    Some(all)
}

fn max_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
