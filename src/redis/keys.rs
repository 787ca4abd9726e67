//! Key and channel names of one prefix, exactly as redbike 0.13.1 names its keys.
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `P-schedules` | hash | job id -> schedule |
//! | `P-statuses` | hash | job id -> `EVENT:UNIXSECONDS` |
//! | `P-timeline` | sorted set | job id scored by next run |
//! | `P-control` | string | `HALT` |
//! | `P-work-Q` | list | queue `Q` (LPUSH in, RPOP out) |
//! | `P-work-Q-members` | set | job ids in queue `Q` |
//! | `P-work-Q-JOBID` | string, expiring | the lease of a running job |
//! | `P-failures` | hash | job id -> last failure, `DIE:TS`, `TMO:TS`, `KIL:TS`, `REC:TS`, `FNC:TS` or `SKP:TS` (new here) |
//! | `P-leases` | sorted set | running job id -> when to recover it if its worker stops refreshing, on Redis's clock (new here) |
//! | `P-fencing` | string | the last fencing token given to a run (new here) |
//! | `P-procs` | set | ids of the registered dispatchers and workers (new here) |
//! | `P-proc-ID` | string, expiring | the JSON description of process `ID`, kept alive by its heartbeats (new here) |
//! | `P-history-JOBID` | list | the job's run history, newest first (new here, see `crate::history`) |
//! | `P-recent-runs` | list | every job's recent history entries (new here) |
//! | `P-unfiled-runs` | list | workers' history entries not yet filed into their jobs' lists, oldest first (new here, see `crate::history`) |
//! | `P-recent-failures` | list | recent history entries that are failures (new here) |
//! | `P-runs-per-minute` | hash | minute -> runs recorded then, the last few minutes (new here) |
//! | `P-due` | hash | job id -> `DUE:ENQUEUED`: the score a dispatcher queued it at, when it queued it late (new here) |
//! | `P-paused` | hash | paused job id -> JSON `{"since":unix,"note":text}` (new here, `pause`) |
//! | `P-paused-queues` | hash | paused queue -> the same JSON (new here, `pause --queue`) |
//! | `P-rerun` | hash | job id -> Redis-clock seconds when `run` was asked while it ran (new here) |
//! | `P-attempts` | hash | job id -> `ATTEMPT:DUE:AT`: its next run retries the occurrence due at DUE, placed at AT (new here, see [`crate::retries`]) |
//! | `P-kill` | hash | job id -> the lease tag of the run `redbike kill` asked to stop, until that run's outcome is written (new here) |
//! | `P-backlogs` | hash | job id -> the timeline instant its schedule goes back to after its backlog (0: none yet), for each job with a backlog (new here, see [`crate::backfill`]) |
//! | `P-backlog-JOBID` | list | the due instants still to run of a job's backfill or catch-up, oldest first (new here) |
//! | `P-fresh-until` | sorted set | job id scored by the unix second by which it must next succeed, for each recurring job (and `CONTINUE` job of a queue with a `[redbike.stale]` bound) not stale (new here, see [`crate::stale`]) |
//! | `P-stale` | hash | stale job id -> `SINCE:BOUND:WENT`: its last success (0: none known), the seconds it had to succeed within after it (0: not known), when it was found stale (new here) |
//! | `P-events` | stream | the event stream (new here, see docs/events.md) |
//! | `P-shards` | string | the shards the prefix is split into, when more than one; their keys are under `{TAG/K}` (new here, see `crate::shard`) |
//! | `P-python-seen` | string, expiring | evidence that a Python process shares the prefix: idle processes look for work every second while it exists (new here, see `crate::redis::peers`) |
//! | `P-schedules-lost` | string, expiring | what a process saw when the prefix lost its schedules and its registration at once: Redis came back empty? (new here, see `crate::redis::registry`) |
//!
//! The Python original ignores the keys that are new here: it neither reads nor
//! writes them, nor deletes them with a job.
//!
//! Channels (not keys, invisible to the Python original): `P-wake-timeline` wakes
//! dispatchers, `P-wake-Q` wakes workers of queue `Q`, `P-wake-control` carries control
//! signals (`HALT`, and `KILL TAG JOBID` from `redbike kill`), so idle processes block
//! instead of polling.

/// The names used under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    /// The prefix itself.
    pub prefix: String,
    /// `P-schedules`.
    pub schedules: String,
    /// `P-statuses`.
    pub statuses: String,
    /// `P-timeline`.
    pub timeline: String,
    /// `P-control`.
    pub control: String,
    /// `P-failures`: the last failure of each job (unknown to the original, harmless).
    pub failures: String,
    /// `P-leases`: the index of running jobs, scored by when to recover them if their
    /// worker stops refreshing it (the original's workers do not maintain it).
    pub leases: String,
    /// `P-fencing`: the counter of fencing tokens, one per run claimed by our workers.
    pub fencing: String,
    /// `P-procs`: the ids of registered dispatchers and workers (see
    /// `redis/registry.rs`; unknown to the original, harmless).
    pub procs: String,
    /// `P-recent-runs`: every job's recent history entries.
    pub recent_runs: String,
    /// `P-recent-failures`: recent history entries that are failures.
    pub recent_failures: String,
    /// `P-unfiled-runs`: workers' history entries on their way to their jobs' lists.
    pub unfiled_runs: String,
    /// `P-runs-per-minute`: runs recorded per minute, the last few minutes.
    pub runs_per_minute: String,
    /// `P-due`: the timeline score a dispatcher queued each job at.
    pub due: String,
    /// `P-paused`: paused jobs (`redbike pause`), unknown to the original.
    pub paused: String,
    /// `P-paused-queues`: queues our workers do not claim from (`pause --queue`).
    pub paused_queues: String,
    /// `P-rerun`: jobs asked by `redbike run` to run again once their current run ends.
    pub rerun: String,
    /// `P-attempts`: jobs waiting to retry a failed run (see [`crate::retries`]).
    pub attempts: String,
    /// `P-kill`: runs `redbike kill` asked to stop, job id -> lease tag of the run.
    pub kill: String,
    /// `P-backlogs`: the jobs with a backlog (see [`crate::backfill`]).
    pub backlogs: String,
    /// `P-events`: the event stream, a capped Redis stream of run outcomes, staleness
    /// changes and operator actions (see docs/events.md).
    pub events: String,
    /// `P-fresh-until`: each job's deadline, the unix second by which it must next
    /// succeed (see [`crate::stale`]).
    pub fresh_until: String,
    /// `P-stale`: the stale jobs (see [`crate::stale::Stale`]).
    pub stale: String,
    /// `P-notify-state`: what `redbike notify` last reported of each job and of the
    /// fleet, and its rate limits (see `notify/state.rs`; new here).
    pub notify_state: String,
    /// `P-notify-held`: jobs whose changes the rate limit holds back, by the end of their
    /// window, in ms (new here).
    pub notify_held: String,
    /// `P-notify-check`: held (with an expiry) by the notifier whose turn it is to check
    /// the fleet (new here).
    pub notify_check: String,
    /// `P-shards`: how many shards the prefix is split into (see [`crate::shard`]).
    pub shards: String,
    /// `P-python-seen`: evidence of a Python peer, expiring (see
    /// [`crate::redis::peers`]).
    pub python_seen: String,
    /// `P-schedules-lost`: a process saw the prefix lose its schedules and its own
    /// registration at once (Redis came back empty?); what it saw, for `stats` (new here).
    pub schedules_lost: String,
    /// Channel that wakes dispatchers when something joins the timeline.
    pub timeline_wake: String,
    /// Channel that carries `control` signals.
    pub control_wake: String,
}

// The queue of a job id and the queue names whose keys would meet are about ids, so
// they live with the id rules; named here too, beside the key layout they follow.
pub use crate::jobid::{queue_collision, queue_of};

/// Whether `rest` (a key name after `P-work-`) is the name of a lease, `Q-JOBID` where
/// `Q` is the queue of `JOBID`.
pub fn is_lease_name(rest: &str) -> bool {
    match rest.rfind(':') {
        // JOBID holds the last ':' of the name: Q is what follows it.
        Some(colon) => {
            let q = &rest[colon + 1..];
            rest.len() > q.len() + 1
                && rest.starts_with(q)
                && rest.as_bytes()[q.len()] == b'-'
                && colon > q.len()
        }
        // A JOBID without ':' is its own queue: the name is JOBID-JOBID.
        None => {
            let half = rest.len() / 2;
            rest.len() % 2 == 1 && rest.as_bytes()[half] == b'-' && rest[..half] == rest[half + 1..]
        }
    }
}

/// Escapes glob characters so a prefix matches only itself in SCAN MATCH.
pub fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Keys {
    /// The names for `prefix`.
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
            schedules: format!("{prefix}-schedules"),
            statuses: format!("{prefix}-statuses"),
            timeline: format!("{prefix}-timeline"),
            control: format!("{prefix}-control"),
            failures: format!("{prefix}-failures"),
            leases: format!("{prefix}-leases"),
            fencing: format!("{prefix}-fencing"),
            procs: format!("{prefix}-procs"),
            recent_runs: format!("{prefix}-recent-runs"),
            recent_failures: format!("{prefix}-recent-failures"),
            unfiled_runs: format!("{prefix}-unfiled-runs"),
            runs_per_minute: format!("{prefix}-runs-per-minute"),
            due: format!("{prefix}-due"),
            paused: format!("{prefix}-paused"),
            paused_queues: format!("{prefix}-paused-queues"),
            rerun: format!("{prefix}-rerun"),
            attempts: format!("{prefix}-attempts"),
            kill: format!("{prefix}-kill"),
            backlogs: format!("{prefix}-backlogs"),
            events: format!("{prefix}-events"),
            fresh_until: format!("{prefix}-fresh-until"),
            stale: format!("{prefix}-stale"),
            notify_state: format!("{prefix}-notify-state"),
            notify_check: format!("{prefix}-notify-check"),
            notify_held: format!("{prefix}-notify-held"),
            shards: format!("{prefix}-shards"),
            python_seen: format!("{prefix}-python-seen"),
            schedules_lost: format!("{prefix}-schedules-lost"),
            timeline_wake: format!("{prefix}-wake-timeline"),
            control_wake: format!("{prefix}-wake-control"),
        }
    }

    /// `P-work-Q`, the list of queue `queue`.
    pub fn queue(&self, queue: &str) -> String {
        format!("{}-work-{queue}", self.prefix)
    }

    /// `P-work-Q-members`, the set of jobs in queue `queue`.
    pub fn members(&self, queue: &str) -> String {
        format!("{}-work-{queue}-members", self.prefix)
    }

    /// `P-work-Q-JOBID`, the lease key of a running job.
    pub fn lease(&self, jobid: &str) -> String {
        format!("{}-work-{}-{jobid}", self.prefix, queue_of(jobid))
    }

    /// `P-proc-ID`, the description of registered process `id`.
    pub fn proc(&self, id: &str) -> String {
        format!("{}-proc-{id}", self.prefix)
    }

    /// `P-history-JOBID`, the run history of a job.
    pub fn history(&self, jobid: &str) -> String {
        format!("{}-history-{jobid}", self.prefix)
    }

    /// `P-backlog-JOBID`, the due instants a job still has to run (see
    /// [`crate::backfill`]).
    pub fn backlog(&self, jobid: &str) -> String {
        format!("{}-backlog-{jobid}", self.prefix)
    }

    /// The channel that wakes workers of queue `queue`.
    pub fn queue_wake(&self, queue: &str) -> String {
        format!("{}-wake-{queue}", self.prefix)
    }

    /// The keys a single-job script touches, in the order the scripts expect them:
    /// schedules, statuses, timeline, queue, members, lease.
    pub fn job_keys(&self, jobid: &str) -> [String; 6] {
        let q = queue_of(jobid);
        [
            self.schedules.clone(),
            self.statuses.clone(),
            self.timeline.clone(),
            self.queue(q),
            self.members(q),
            self.lease(jobid),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_rule() {
        assert_eq!(queue_of("job1:A"), "A");
        assert_eq!(queue_of("a:b:C"), "C");
        assert_eq!(queue_of("job1"), "job1");
        let k = Keys::new("p");
        assert_eq!(k.lease("a:b:C"), "p-work-C-a:b:C");
        assert_eq!(k.members("C"), "p-work-C-members");
        assert_eq!(k.queue("C"), "p-work-C");
    }

    #[test]
    fn colliding_queue_names() {
        let k = Keys::new("p");
        assert_eq!(k.queue("A-members"), k.members("A"));
        assert_eq!(k.queue("A-A"), k.lease("A"));
        for q in ["A-members", "-members", "A-A", "-", "ü-ü", "a:b-a:b"] {
            assert!(queue_collision(q).is_some(), "{q}");
        }
        for q in [
            "A",
            "members",
            "A-B",
            "A-AA",
            "AA-A",
            "ü-u",
            "A--A",
            "A-membersx",
        ] {
            assert!(queue_collision(q).is_none(), "{q}");
        }
        for id in ["A", "j:A", "a:b:C", "x-y:Q", "q:A-A", "ü:ü"] {
            let rest = k.lease(id).strip_prefix("p-work-").unwrap().to_string();
            assert!(is_lease_name(&rest), "{id}");
        }
        for rest in ["A", "A-B", "A-j:B", "j:A", ":A-A"] {
            assert!(!is_lease_name(rest), "{rest}");
        }
    }
}
