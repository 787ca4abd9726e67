//! The public face of the worker: the job handed to a runner ([`Job`]), the trait of
//! what runs jobs ([`JobRunner`], with [`FnRunner`] for closures), the worker's
//! [`Settings`], and the timing constants the rest of the crate and its tests rely on.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use chrono_tz::Tz;

use crate::{
    error::{Error, Result},
    policy::{OnFailure, Policy, RunResult},
};

/// Extra lease time beyond timeout and grace period, so a worker always finishes its own
/// job (and its kill) before the lease can expire.
pub const LEASE_MARGIN: Duration = Duration::from_secs(10);
/// How often an idle worker looks for jobs enqueued without a wake-up (by the Python
/// original) and for a HALT set without one; also how often it refreshes the running
/// index for its jobs. A little under a second, so that such a job, found by the next
/// poll and then claimed and started, still starts within a second of being queued.
pub const POLL_EVERY: Duration = Duration::from_millis(950);
/// How long a job may run without its worker confirming it to Redis (a refresh of its
/// entry in the running index that Redis acknowledged, or its claim), unless the
/// worker is given another `fence-after`: past that the worker stops it (SIGTERM, then
/// SIGKILL after the grace period), and so does the guard if the worker is frozen or
/// stuck. Long enough that Redis stalled or unreachable for 30 s (a Sentinel failover
/// with its defaults, a fork for a large BGSAVE, a slow command) kills no running job:
/// the last confirmation before the stall is at most a refresh (`POLL_EVERY`) old, and
/// the first after it a refresh late. A worker that dies is not silent: its guard
/// tells Redis at once (see `death.rs`), so only silence waits this long.
/// `limits::FENCE_AFTER` keeps any setting at three refreshes or more.
pub const FENCE_AFTER: Duration = Duration::from_secs(crate::limits::FENCE_AFTER_DEFAULT);
/// What the recovery instant keeps in hand beyond the fencing interval and the grace
/// period: the loop's or the guard's lateness in sending a signal and the kernel's in
/// delivering SIGKILL (milliseconds), and the drift between the worker's clock and
/// Redis's over a few seconds (microseconds). Both ends of the interval are measured on
/// one clock each: the worker's own monotonic clock for the fencing, Redis's `TIME`
/// for the recovery; wall-clock skew between machines plays no part.
pub const FENCE_MARGIN: Duration = Duration::from_secs(2);

/// How long after the last confirmation a dispatcher may recover a job of a worker
/// with these settings (the instant claim.lua and refresh.lua write, on Redis's
/// clock): the job is stopped at `fence_after` and killed a grace period later, so
/// it is gone `FENCE_MARGIN` before anyone may run it again. 42 s with the defaults
/// (35 s, 5 s grace) for a silent worker; a dead one is reported at once by its guard.
pub fn recover_after(settings: &Settings) -> Duration {
    settings.fence_after + settings.grace + FENCE_MARGIN
}
/// Longest a job claimed ahead waits for a slot before it is handed back to its queue
/// (for other workers). Its lease, set at the claim, has `LEASE_MARGIN` to spare.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(2);
/// A job handed to a [`JobRunner`].
#[derive(Debug, Clone)]
pub struct Job {
    /// The job id.
    pub id: String,
    /// Its queue (the part of the id after the last `:`).
    pub queue: String,
    /// Its schedule when it was claimed (`None` if it had been unset).
    pub schedule: Option<String>,
    /// The key prefix.
    pub prefix: String,
    /// The slot (0..concurrency) running it; distinct among jobs running at once.
    pub slot: usize,
    /// Its run's fencing token (`REDBIKE_FENCING_TOKEN`): larger for every later run.
    pub token: Option<u64>,
    /// When the run is to be stopped unless its worker confirms it to Redis again
    /// (as of its start; the loop moves it on); `None`: never.
    pub fence_at: Option<Instant>,
    /// The instant the occurrence this run serves was due, unix seconds
    /// (`REDBIKE_DUE`; a retry's is its occurrence's, see [`crate::retries`]); `None`
    /// when unknown (a job queued by a Python process that wrote no status).
    pub due: Option<i64>,
    /// Which attempt of its occurrence the run is (`REDBIKE_ATTEMPT`): 1, or more for a
    /// retry (see [`crate::retries`]).
    pub attempt: u32,
    /// When its run was claimed, unix seconds on Redis's clock (`None`: unknown); a
    /// `redbike run` asked after it means one more run (finish.lua).
    pub claimed_at: Option<f64>,
}

/// What runs jobs: the worker loop hands each claimed job to one. [`crate::work::runner::CommandRunner`] runs a command per job;
/// [`FnRunner`] runs a closure in-process.
pub trait JobRunner: Send + Sync {
    /// The queue weighting cycle, e.g. `["A", "A", "B"]`.
    fn queues(&self) -> Vec<String>;
    /// The timeout of a queue; `None` means the configured default.
    fn timeout(&self, _queue: &str) -> Option<Duration> {
        None
    }
    /// Runs one job to its end. Called on the job's slot thread.
    fn work(&self, job: &Job) -> RunResult;
    /// [`JobRunner::work`], also saying what the run's history entry records of it
    /// (exit code, signal, output tail); the slots call this one.
    fn run(&self, job: &Job) -> (RunResult, crate::history::RunDetails) {
        (self.work(job), crate::history::RunDetails::default())
    }
    /// Asks a running job to stop (`force`: at once). Called from the loop thread on
    /// timeout and shutdown; a runner that cannot interrupt its jobs ignores it.
    fn stop(&self, _job: &Job, _force: bool) {}
    /// The job was confirmed to Redis: it may run until `fence_at` (a heartbeat for
    /// whatever fences the job while the loop cannot).
    fn confirm(&self, _job: &Job, _fence_at: Instant) {}
}

/// A [`JobRunner`] that runs a closure in-process.
pub struct FnRunner<F> {
    /// The queue weighting cycle.
    queues: Vec<String>,
    /// The closure.
    f: F,
}

impl<F: Fn(&Job) -> RunResult + Send + Sync> FnRunner<F> {
    /// A runner for the queue string `queues` (e.g. `A:A:B`) running `f` per job.
    pub fn new(queues: &str, f: F) -> Result<FnRunner<F>> {
        Ok(FnRunner {
            queues: parse_queues(queues)?,
            f,
        })
    }
}

impl<F: Fn(&Job) -> RunResult + Send + Sync> JobRunner for FnRunner<F> {
    fn queues(&self) -> Vec<String> {
        self.queues.clone()
    }
    fn work(&self, job: &Job) -> RunResult {
        (self.f)(job)
    }
}

/// Parses the original's weighting string: `A:A:B` works A twice for each B.
pub fn parse_queues(text: &str) -> Result<Vec<String>> {
    let queues: Vec<String> = text.split(':').map(|q| q.trim().to_string()).collect();
    if text.trim().is_empty() || queues.iter().any(|q| q.is_empty()) {
        return Err(Error::Input(format!(
            "bad queue list {text:?}: give queue names separated by ':', e.g. A:A:B"
        )));
    }
    if let Some(q) = queues.iter().find(|q| q.chars().any(char::is_control)) {
        return Err(Error::Input(format!(
            "queue name {q:?} contains a control character"
        )));
    }
    for q in &queues {
        if let Some(why) = crate::redis::keys::queue_collision(q) {
            return Err(Error::Input(format!(
                "queue name {q:?} cannot be worked: {why}; move its jobs to another queue"
            )));
        }
    }
    Ok(queues)
}

/// How the loop runs jobs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Jobs run at once (the loop's slots; under `permits`, the whole process's).
    pub concurrency: usize,
    /// Run permits shared with other loops of the process, when their slots add up to
    /// more than the process may run at once: a slot starts a job only with one.
    pub permits: Option<crate::work::Permits>,
    /// The claim budget shared with the other loops of the process when it serves
    /// several shards: each may claim up to `concurrency` and the jobs it claims ahead,
    /// less what the others hold.
    pub budget: Option<crate::work::Budget>,
    /// Timeout of queues the worker names none for.
    pub default_timeout: Duration,
    /// Time between asking a job to stop and killing it; also how long running jobs may
    /// go on after a stop request.
    pub grace: Duration,
    /// How long a running job may go unconfirmed to Redis before the worker (or its
    /// guard) stops it (`fence-after`, default [`FENCE_AFTER`]).
    pub fence_after: Duration,
    /// What happens to a failed job.
    pub on_failure: OnFailure,
    /// Seconds a failed or timed-out CONTINUE job waits before it runs again.
    pub failure_delay: u64,
    /// Zone for rules without their own.
    pub timezone: Tz,
    /// `(replicas, timeout in ms)`: claims and outcomes count only once that many
    /// replicas acknowledge them (`wait-replicas`).
    pub wait: Option<(u32, u64)>,
    /// Per-queue jitter of recurring jobs' runs, seconds (`[redbike.jitter]`).
    pub jitter: BTreeMap<String, u64>,
    /// Per-queue retries of failed runs (`[redbike.retries.Q]`).
    pub retries: BTreeMap<String, crate::retries::Retries>,
    /// Fleet-wide limits of queues: at most that many of a queue's jobs leased at once
    /// over all workers (`[redbike.limits]`).
    pub limits: BTreeMap<String, u64>,
    /// History entries kept per job (`history-limit`; 0: none written).
    pub history_limit: u64,
    /// History entries left unfiled before a busy worker files them
    /// (`history-backlog`, see `work/filing.rs`).
    pub history_backlog: u64,
    /// Seconds within which the jobs of particular queues must succeed after their last
    /// success (`[redbike.stale]`, see [`crate::stale`]).
    pub stale: BTreeMap<String, u64>,
    /// Entries kept in the event stream (`events`; 0: none written).
    pub events: u64,
}

impl Settings {
    /// The settings the config file gives (flags may then override fields).
    pub fn from_config(config: &crate::config::Config) -> Settings {
        let w = &config.worker;
        Settings {
            concurrency: w.concurrency,
            permits: None,
            budget: None,
            default_timeout: Duration::from_secs(config.default_timeout),
            grace: Duration::from_secs(w.grace_period),
            fence_after: Duration::from_secs(w.fence_after),
            on_failure: w.on_failure,
            failure_delay: w.failure_delay,
            timezone: config.timezone,
            wait: config.redis.wait(),
            jitter: config.jitter.clone(),
            retries: config.retries.clone(),
            limits: config.limits.clone(),
            history_limit: config.history_limit,
            history_backlog: config.history_backlog,
            stale: config.stale.clone(),
            events: config.events,
        }
    }

    /// The after-run policy of these settings.
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            on_failure: self.on_failure,
            failure_delay: self.failure_delay,
            timezone: self.timezone,
            jitter: self.jitter.clone(),
            retries: self.retries.clone(),
            stale: self.stale.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            concurrency: 1,
            permits: None,
            budget: None,
            default_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(5),
            fence_after: FENCE_AFTER,
            on_failure: OnFailure::Reschedule,
            failure_delay: 10,
            timezone: Tz::UTC,
            wait: None,
            jitter: BTreeMap::new(),
            retries: BTreeMap::new(),
            limits: BTreeMap::new(),
            history_limit: 20,
            history_backlog: 100,
            stale: BTreeMap::new(),
            events: 0,
        }
    }

    #[test]
    fn queue_strings() {
        assert_eq!(parse_queues("A:A:B").unwrap(), ["A", "A", "B"]);
        assert!(parse_queues("").is_err());
        assert!(parse_queues("A::B").is_err());
    }

    #[test]
    fn silence_is_recovered_after_the_fencing_interval_grace_and_margin() {
        // 35 s rides out a 30 s stall; a dead worker is reported at once instead.
        assert_eq!(recover_after(&settings()), Duration::from_secs(42));
        assert!(FENCE_AFTER >= POLL_EVERY * 3);
        assert!(Duration::from_secs(crate::limits::FENCE_AFTER.lo) >= POLL_EVERY * 3);
    }
}
