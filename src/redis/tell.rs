//! `redbike tell`: everything known about one job, read in one round trip.

use serde::Serialize;

use crate::{
    error::Result,
    redis::{
        history,
        keys::queue_of,
        pause::Pause,
        store::{lossy, Store},
    },
    schedule::timestamp::iso_utc,
};

/// What `tell` shows about a job.
#[derive(Debug, Clone, Serialize)]
pub struct JobInfo {
    /// The raw status, `EVENT:TS`, as the original shows it.
    pub status: Option<String>,
    /// The stored schedule.
    pub schedule: Option<String>,
    /// The timeline score.
    pub next_run: Option<i64>,
    /// Whether its lease exists (it is running).
    pub working: bool,
    /// The next run as ISO 8601 UTC.
    pub next_run_utc: Option<String>,
    /// The queue it belongs to.
    pub queue: String,
    /// Whether it waits in its queue now.
    pub queued: bool,
    /// Seconds left on its lease while it runs.
    pub lease_seconds_left: Option<f64>,
    /// The last failure, `DIE:TS`, `TMO:TS`, `KIL:TS`, ...
    pub last_failure: Option<String>,
    /// Its last few history entries, newest first, and its last success.
    #[serde(flatten)]
    pub history: crate::history::JobHistory,
    /// Its pause (`redbike pause`), if it is paused.
    pub paused: Option<Pause>,
    /// Whether a run asked with `redbike run` while it ran is still to come.
    pub run_asked: bool,
    /// The retry its next run is, after a failed run (see [`crate::retries`]).
    pub retry: Option<PendingRetry>,
    /// The runs of past occurrences it still has to run (`backfill`, catch-up `all`;
    /// see [`crate::backfill`]), when it has any.
    pub backlog: Option<BacklogInfo>,
    /// The unix second by which it must next succeed, when it has a deadline and is not
    /// stale (`P-fresh-until`, see [`crate::stale`]).
    pub fresh_until: Option<i64>,
    /// Its staleness, when it is stale (`P-stale`).
    pub stale: Option<StaleInfo>,
}

/// A stale job, as `tell` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StaleInfo {
    /// Its last success, unix seconds (0: none known).
    pub since: i64,
    /// The seconds it had to succeed within after it (0: not known).
    pub bound: i64,
    /// When a dispatcher found it stale, unix seconds.
    pub went: i64,
    /// `went` as ISO 8601 UTC.
    pub went_utc: String,
    /// Whether a dispatcher marked it (else its deadline passed, and no dispatcher has
    /// looked since: `went` is the deadline).
    pub marked: bool,
}

/// A job's backlog: the due instants still to run, one run each (`P-backlog-JOBID`).
#[derive(Debug, Clone, Serialize)]
pub struct BacklogInfo {
    /// Runs still to come (not counting one queued or running now).
    pub runs_left: u64,
    /// The due instant of the next, unix seconds.
    pub next_due: Option<i64>,
    /// The same as ISO 8601 UTC.
    pub next_due_utc: Option<String>,
}

/// A retry a job waits for: its next run is attempt `attempt` of the occurrence due at
/// `due`, placed at `at` (`P-attempts`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PendingRetry {
    /// The attempt its next run is (2 for the first retry).
    pub attempt: u32,
    /// The instant the occurrence it retries was due, unix seconds.
    pub due: i64,
    /// The instant it was placed on the timeline at, unix seconds.
    pub at: i64,
}

impl Store<'_> {
    /// Everything known about one job, read in one round trip.
    pub fn tell(&mut self, jobid: &str) -> Result<JobInfo> {
        let q = queue_of(jobid);
        // Values are read as bytes: another program may have written bytes that are not
        // UTF-8 into a status, schedule or note, which `tell` shows (as U+FFFD) rather
        // than refuse the whole job over.
        type Bytes = Option<Vec<u8>>;
        type Reply = (
            Bytes,
            Bytes,
            Option<f64>,
            i64,
            bool,
            Bytes,
            Bytes,
            bool,
            Bytes,
            u64,
            Bytes,
            Vec<Vec<u8>>,
        );
        let mut pipe = redis::pipe();
        pipe.hget(&self.keys.statuses, jobid)
            .hget(&self.keys.schedules, jobid)
            .zscore(&self.keys.timeline, jobid)
            .pttl(self.keys.lease(jobid))
            .sismember(self.keys.members(q), jobid)
            .hget(&self.keys.failures, jobid)
            .hget(&self.keys.paused, jobid)
            .hexists(&self.keys.rerun, jobid)
            .hget(&self.keys.attempts, jobid)
            .llen(self.keys.backlog(jobid))
            .lindex(self.keys.backlog(jobid), 0);
        history::add_job_reads(&mut pipe, self.keys, jobid);
        let unfiled = history::unfiled_of(self, jobid)?;
        let (
            status,
            schedule,
            score,
            pttl,
            queued,
            last_failure,
            paused,
            run_asked,
            retry,
            backlog_len,
            backlog_next,
            runs,
        ): Reply = pipe.query(self.con)?;
        let text = |b: Bytes| b.map(lossy);
        let (status, schedule, last_failure, paused, retry, backlog_next) = (
            text(status),
            text(schedule),
            text(last_failure),
            text(paused),
            text(retry),
            text(backlog_next),
        );
        // Keys of another type (`check` names them) read as no staleness.
        let fresh_until: Option<f64> = redis::cmd("ZSCORE")
            .arg(&self.keys.fresh_until)
            .arg(jobid)
            .query(self.con)
            .unwrap_or(None);
        let marked: Bytes = redis::cmd("HGET")
            .arg(&self.keys.stale)
            .arg(jobid)
            .query(self.con)
            .unwrap_or(None);
        let marked = text(marked);
        let fresh_until = fresh_until.map(|t| crate::schedule::timestamp::unix_of(t.ceil()));
        let now = crate::schedule::timestamp::now();
        let stale = match (
            marked.as_deref().and_then(crate::stale::Stale::parse),
            fresh_until,
        ) {
            (Some(s), _) => Some(StaleInfo {
                since: s.since,
                bound: s.bound,
                went: s.went,
                went_utc: iso_utc(s.went),
                marked: true,
            }),
            (None, Some(d)) if d < now => Some(StaleInfo {
                since: 0,
                bound: 0,
                went: d,
                went_utc: iso_utc(d),
                marked: false,
            }),
            _ => None,
        };
        let next_due = backlog_next.and_then(|t| t.parse::<i64>().ok());
        let backlog = (backlog_len > 0).then(|| BacklogInfo {
            runs_left: backlog_len,
            next_due,
            next_due_utc: next_due.map(iso_utc),
        });
        let retry = retry
            .as_deref()
            .and_then(crate::retries::parse_field)
            .map(|(attempt, due, at)| PendingRetry { attempt, due, at });
        let next_run = score.map(crate::schedule::timestamp::unix_of);
        Ok(JobInfo {
            status,
            schedule,
            next_run,
            // PTTL: -2 no key, -1 no expiry, else milliseconds left.
            working: pttl != -2,
            next_run_utc: next_run.map(iso_utc),
            queue: q.to_string(),
            queued,
            lease_seconds_left: (pttl >= 0).then(|| pttl as f64 / 1000.0),
            last_failure,
            history: crate::history::job_history(crate::history::job_entries(
                unfiled,
                runs,
                &self.keys.history(jobid),
            )),
            paused: paused.map(|raw| Pause::parse(&raw)),
            run_asked,
            retry,
            backlog,
            fresh_until,
            stale,
        })
    }
}
