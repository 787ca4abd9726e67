//! Claiming: the queue cycle a claim walks (claim.lua), and how many jobs to claim,
//! as pure functions of what the loop knows (no locks, no clock), so that they can be
//! tested alone. The loop reads the pool and the clock and asks these; the claims'
//! share of a round trip is `claims.rs`.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use crate::work::api::LEASE_MARGIN;

/// How much work, per slot, the jobs claimed ahead may add up to (by the average run
/// time of recent jobs); jobs longer than this are not claimed ahead at all.
const AHEAD_WORK: Duration = Duration::from_millis(50);
/// Most jobs claimed ahead: one per slot, but at least this many, so that a `-j 1`
/// worker of very short jobs gets several per round trip.
pub(crate) const AHEAD_AT_MOST: usize = 32;

/// A job claim.lua handed out.
pub(super) struct Claimed {
    /// The job id.
    pub id: String,
    /// Its schedule at claim time.
    pub schedule: Option<String>,
    /// Its queue's place in the cycle.
    pub queue_index: usize,
    /// The lease tag written for it.
    pub tag: String,
    /// Its run's fencing token.
    pub token: u64,
    /// When the claim was sent (its lease runs from about then).
    pub claimed: Instant,
    /// The instant its run was queued for (see [`crate::history::due_at`]).
    pub due: Option<i64>,
    /// Its field in `P-attempts`, if any (see [`crate::retries`]).
    pub attempts: Option<String>,
    /// When it was claimed on Redis's clock.
    pub claimed_at: Option<f64>,
}

/// The distinct queues of the cycle with their keys and lease times.
pub(super) struct Cycle {
    /// Distinct queue names.
    pub queues: Vec<String>,
    /// The cycle as 1-based indexes into `queues`.
    pub order: String,
    /// Positions in the cycle.
    pub positions: usize,
    /// Lease TTL in seconds per distinct queue.
    pub ttls: Vec<u64>,
    /// Timeout per distinct queue.
    pub timeouts: Vec<Duration>,
    /// Fleet-wide limit per distinct queue, 0 for none (`[redbike.limits]`): at most
    /// that many of its jobs leased at once over all workers, which claim.lua enforces.
    pub limits: Vec<u64>,
}

impl Cycle {
    /// The cycle of the queue names `names` (e.g. `A, A, B`), whose jobs run for at
    /// most `timeout(queue)` and then the grace period `grace`.
    pub fn new(names: &[String], timeout: impl Fn(&str) -> Duration, grace: Duration) -> Cycle {
        let mut queues: Vec<String> = Vec::new();
        let mut order = Vec::new();
        for name in names {
            let i = match queues.iter().position(|q| q == name) {
                Some(i) => i,
                None => {
                    queues.push(name.clone());
                    queues.len() - 1
                }
            };
            order.push((i + 1).to_string());
        }
        let timeouts: Vec<Duration> = queues.iter().map(|q| timeout(q)).collect();
        let ttls = timeouts
            .iter()
            .map(|t| (*t + grace + LEASE_MARGIN).as_secs_f64().ceil() as u64)
            .collect();
        Cycle {
            limits: vec![0; queues.len()],
            queues,
            positions: order.len(),
            order: order.join(","),
            ttls,
            timeouts,
        }
    }

    /// The cycle with the fleet-wide limits of its queues in `limits` (queue -> most
    /// jobs leased at once).
    pub fn with_limits(mut self, limits: &BTreeMap<String, u64>) -> Cycle {
        self.limits = self
            .queues
            .iter()
            .map(|q| limits.get(q).copied().unwrap_or(0))
            .collect();
        self
    }

    /// The position `n` claims after `cursor`, when each claims one position.
    pub fn advance(&self, cursor: usize, n: usize) -> usize {
        (cursor + n) % self.positions
    }
}

/// The average run time after a run of `ran`, from the average before (`None`: none yet).
pub(super) fn average_run_time(before: Option<Duration>, ran: Duration) -> Duration {
    match before {
        None => ran,
        Some(avg) => (avg * 3 + ran) / 4,
    }
}

/// How many jobs to claim ahead of the `concurrency` free slots: enough for up to
/// `AHEAD_WORK` of work per slot, by the average run time of recent jobs, within
/// `AHEAD_AT_MOST` (or one per slot). A job running longer than its predecessors (say
/// a long one among short ones; `longest_running` is how long the longest running job
/// has run) counts as long from the moment it outlasts them, so nothing more queues up
/// behind it.
pub(super) fn ahead(
    concurrency: usize,
    run_time: Option<Duration>,
    longest_running: Option<Duration>,
) -> usize {
    match run_time.max(longest_running) {
        Some(t) if t < AHEAD_WORK && run_time.is_some() => {
            let fits = AHEAD_WORK.as_nanos() * concurrency as u128 / t.as_nanos().max(1);
            AHEAD_AT_MOST.max(concurrency).min(fits as usize)
        }
        _ => 0,
    }
}

/// Fewer jobs ready than this and it is time to claim more: one per slot, or half
/// the jobs claimed `ahead`, so that the slots do not run dry while Redis answers.
pub(super) fn refill_at(concurrency: usize, ahead: usize) -> usize {
    concurrency.max(ahead / 2)
}

/// How many jobs to claim now: one per slot plus those claimed `ahead`, less the jobs
/// `held` already (running, ready, held unconfirmed, or being claimed).
pub(super) fn wanted(concurrency: usize, ahead: usize, held: usize) -> usize {
    (concurrency + ahead).saturating_sub(held)
}

/// The random part of a lease tag: 14 hex digits; claim.lua appends the run's fencing
/// token in 16 decimal digits, making the original's 30 hex digits.
/// This worker process's tag: the first 14 hex digits of every lease it writes
/// (claim.lua appends each run's fencing token), random per process, so that a dead
/// worker's guard can tell Redis which leases were its (see `death.rs`).
pub(super) fn worker_tag() -> &'static str {
    static TAG: std::sync::LazyLock<String> = std::sync::LazyLock::new(new_tag);
    &TAG
}

/// 14 random hex digits.
fn new_tag() -> String {
    format!("{:014x}", rand::random::<u64>() >> 8)
}

/// The whole tag claim.lua writes for a run: `new_tag` and the fencing token.
pub(super) fn full_tag(random: &str, token: u64) -> String {
    format!("{random}{token:016}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn tags_are_30_hex_digits() {
        let t = full_tag(&new_tag(), 42);
        assert_eq!(t.len(), 30);
        assert!(t.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(t.ends_with("0000000000000042"));
        assert_ne!(new_tag(), new_tag());
    }

    #[test]
    fn claims_ahead_only_while_jobs_are_short() {
        // No run seen yet: nothing ahead.
        assert_eq!(ahead(1, None, None), 0);
        assert_eq!(ahead(1, None, Some(MS)), 0);
        // 50 ms of work per slot, within max(AHEAD_AT_MOST, concurrency).
        assert_eq!(ahead(1, Some(MS * 10), None), 5);
        assert_eq!(ahead(1, Some(MS), None), AHEAD_AT_MOST);
        assert_eq!(ahead(64, Some(MS), None), 64);
        assert_eq!(ahead(2, Some(Duration::from_nanos(0)), None), AHEAD_AT_MOST);
        // Jobs as long as AHEAD_WORK, or one running that long: none ahead.
        assert_eq!(ahead(4, Some(AHEAD_WORK), None), 0);
        assert_eq!(ahead(4, Some(MS), Some(AHEAD_WORK)), 0);
        // A running job shorter than the average does not lower it.
        assert_eq!(ahead(1, Some(MS * 10), Some(MS)), 5);
    }

    #[test]
    fn claims_what_the_slots_and_the_jobs_ahead_lack() {
        assert_eq!(wanted(4, 0, 0), 4);
        assert_eq!(wanted(4, 6, 3), 7);
        assert_eq!(wanted(2, 0, 5), 0);
        assert_eq!(refill_at(4, 0), 4);
        assert_eq!(refill_at(4, 10), 5);
    }

    #[test]
    fn run_time_is_a_moving_average() {
        assert_eq!(average_run_time(None, MS * 8), MS * 8);
        assert_eq!(average_run_time(Some(MS * 8), MS * 4), MS * 7);
    }

    #[test]
    fn cycle_of_weighted_queues() {
        let names: Vec<String> = ["A", "A", "B"].map(String::from).into();
        let timeout = |q: &str| Duration::from_secs(if q == "A" { 10 } else { 1 });
        let c = Cycle::new(&names, timeout, Duration::from_millis(500));
        assert_eq!(c.queues, ["A", "B"]);
        assert_eq!(c.order, "1,1,2");
        assert_eq!(c.positions, 3);
        // Timeout, grace and LEASE_MARGIN (10 s), rounded up.
        assert_eq!(c.ttls, [21, 12]);
        assert_eq!(c.limits, [0, 0]);
        let c = c.with_limits(&[("B".to_string(), 3), ("C".to_string(), 1)].into());
        assert_eq!(c.limits, [0, 3]);
        assert_eq!(
            c.timeouts,
            [Duration::from_secs(10), Duration::from_secs(1)]
        );
        assert_eq!(c.advance(2, 2), 1);
    }
}
