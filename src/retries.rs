//! Retries: a run of a job in a queue with `[redbike.retries.Q]` that fails (`DIE`) or
//! runs past its timeout (`TMO`) runs again after a growing delay, until the queue's
//! `attempts` are spent; then `on-failure` decides, as without retries.
//!
//! What a retry waits for is kept in `P-attempts` (job id -> `ATTEMPT:DUE:AT`: the next
//! run is attempt `ATTEMPT` of the occurrence due at `DUE`, placed on the timeline at
//! `AT`), written by finish.lua with the
//! failed outcome, read by claim.lua, cleared by any other outcome, `set` and `unset`.
//! The job itself waits on the timeline at its retry instant, as any job does, so a
//! Python worker sees an ordinary timeline entry (and ignores the field).
//!
//! The delay after failed attempt `k` is `backoff-min * 2^(k-1)`, at most
//! `backoff-max`, less up to a quarter of it from a hash of the job id and `k`, so a
//! fleet of jobs that fail together (a database down) does not retry in lock-step,
//! while one job's delays still grow (each is at least 1.5 times the one before until
//! the cap). A retry never waits past the job's next regular occurrence: when that
//! comes first, the job runs then as attempt 1 of that occurrence (one run, not two).

use crate::{jitter::fnv1a, jobid::queue_of, schedule::Schedule};
use chrono_tz::Tz;
use std::collections::BTreeMap;

/// `[redbike.retries.Q]`: how often and when the failed runs of queue Q run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    /// Runs an occurrence gets in all, the first included (as BullMQ counts).
    pub attempts: u32,
    /// Seconds before the first retry.
    pub backoff_min: u64,
    /// The longest wait between two attempts, seconds.
    pub backoff_max: u64,
}

/// `backoff-min` when a table leaves it out.
pub const BACKOFF_MIN_DEFAULT: u64 = 10;
/// `backoff-max` when a table leaves it out.
pub const BACKOFF_MAX_DEFAULT: u64 = 3600;

impl Retries {
    /// Seconds to wait after failed attempt `attempt` (1-based) of job `jobid`.
    pub fn delay(&self, jobid: &str, attempt: u32) -> u64 {
        let doublings = attempt.saturating_sub(1).min(62);
        let full = self
            .backoff_min
            .saturating_mul(1u64 << doublings)
            .min(self.backoff_max);
        let cut = full / 4;
        let jitter = match cut {
            0 => 0,
            c => fnv1a(format!("{jobid}\0{attempt}").as_bytes()) % (c + 1),
        };
        (full - jitter).max(1)
    }
}

/// The retries of `jobid`'s queue in `table` (queue -> retries), if it has any.
pub(crate) fn of<'a>(table: &'a BTreeMap<String, Retries>, jobid: &str) -> Option<&'a Retries> {
    table.get(queue_of(jobid))
}

/// Which attempt of which occurrence a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first run of an occurrence, 2 for its first retry, ...
    pub number: u32,
    /// The instant the occurrence was due, unix seconds (`None`: unknown).
    pub due: Option<i64>,
}

impl Attempt {
    /// The first run of the occurrence due at `due`.
    pub fn first(due: Option<i64>) -> Attempt {
        Attempt { number: 1, due }
    }

    /// The attempt a claimed run is: the stored field `pending` (`ATTEMPT:DUE:AT`) when
    /// it is still about this run, else the first of the occurrence due at `run_due`
    /// (the instant the run was queued for). A field outlives its retry when a Python
    /// worker ran the retry (it places the job at its next occurrence and leaves the
    /// field), or a run cut short by its worker put the job there: for a recurring
    /// schedule the field counts only for runs queued before the occurrence that
    /// follows the retry's instant `AT`.
    pub fn of_claim(
        pending: Option<&str>,
        run_due: Option<i64>,
        schedule: Option<&str>,
        tz: Tz,
    ) -> Attempt {
        let Some((number, due, at)) = pending.and_then(parse_field) else {
            return Attempt::first(run_due);
        };
        let recurring = schedule
            .and_then(|s| Schedule::parse(s).ok())
            .filter(Schedule::is_recurring);
        if let (Some(schedule), Some(run_due)) = (recurring, run_due) {
            // Jitter shifts runs but keeps their order: comparing unshifted is enough.
            if let Ok(crate::schedule::Placement::Timeline(next)) = schedule.placement(at, tz) {
                if run_due >= next {
                    return Attempt::first(Some(run_due));
                }
            }
        }
        Attempt {
            number,
            due: Some(due),
        }
    }

    /// The attempt after this one, of the same occurrence (due `now` when unknown).
    pub(crate) fn next(&self, now: i64) -> Attempt {
        Attempt {
            number: self.number + 1,
            due: Some(self.due.unwrap_or(now)),
        }
    }

    /// Its field in `P-attempts` for a retry placed at `at`: `ATTEMPT:DUE:AT`.
    pub(crate) fn field(&self, at: i64) -> String {
        format!("{}:{}:{at}", self.number, self.due.unwrap_or(0))
    }
}

/// `ATTEMPT:DUE:AT` as stored, as `(ATTEMPT, DUE, AT)`; `None` when the field is not
/// of that shape.
pub fn parse_field(field: &str) -> Option<(u32, i64, i64)> {
    let mut parts = field.split(':');
    let number = parts.next()?.parse::<u32>().ok().filter(|n| *n >= 1)?;
    let due = parts.next()?.parse::<i64>().ok()?;
    let at = parts.next()?.parse::<i64>().ok()?;
    parts.next().is_none().then_some((number, due, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retries(min: u64, max: u64) -> Retries {
        Retries {
            attempts: 5,
            backoff_min: min,
            backoff_max: max,
        }
    }

    #[test]
    fn delays_grow_until_the_cap_and_stay_within_a_quarter_below_it() {
        let r = retries(10, 100);
        for job in ["a:Q", "b:Q", "report:Q", "x"] {
            let d: Vec<u64> = (1..=6).map(|k| r.delay(job, k)).collect();
            for (k, full) in [10u64, 20, 40, 80, 100, 100].into_iter().enumerate() {
                assert!(d[k] <= full && d[k] >= full - full / 4, "{job}: {d:?}");
            }
            assert!(d[0] < d[1] && d[1] < d[2] && d[2] < d[3], "{job}: {d:?}");
        }
        // Jobs failing together do not all wait the same.
        let firsts: std::collections::BTreeSet<u64> =
            (0..50).map(|i| r.delay(&format!("job{i}:Q"), 3)).collect();
        assert!(firsts.len() > 3, "{firsts:?}");
        // Huge attempt numbers neither overflow nor pass the cap.
        assert!(r.delay("a:Q", u32::MAX) <= 100);
        assert_eq!(retries(1, 1).delay("a:Q", 1), 1);
    }

    #[test]
    fn a_field_counts_until_the_next_occurrence() {
        let tz = Tz::UTC;
        let hourly = Some("FREQ=HOURLY;BYMINUTE=0;BYSECOND=0");
        // Attempt 3 of the occurrence of 3600, long ago, placed at 90000.
        let field = Some("3:3600:90000");
        // The retry, queued at its instant or later within the hour.
        for queued in [90_000, 90_100, 90_000 - 10] {
            assert_eq!(
                Attempt::of_claim(field, Some(queued), hourly, tz),
                Attempt {
                    number: 3,
                    due: Some(3600)
                }
            );
        }
        // The next occurrence's run (a Python worker ran the retry): attempt 1.
        assert_eq!(
            Attempt::of_claim(field, Some(93_600), hourly, tz),
            Attempt::first(Some(93_600))
        );
        assert_eq!(parse_field("3:3600"), None);
        assert_eq!(parse_field("3:3600:1:2"), None);
        assert_eq!(parse_field("0:3600:1"), None);
        // One-offs and CONTINUE keep their field.
        assert_eq!(
            Attempt::of_claim(field, Some(99_999), Some("NOW"), tz).number,
            3
        );
        assert_eq!(
            Attempt::of_claim(None, Some(5), hourly, tz),
            Attempt::first(Some(5))
        );
        assert_eq!(
            Attempt::of_claim(Some("junk"), Some(5), hourly, tz),
            Attempt::first(Some(5))
        );
        assert_eq!(
            Attempt {
                number: 2,
                due: Some(60)
            }
            .next(99)
            .field(120),
            "3:60:120"
        );
        assert_eq!(Attempt::first(None).next(99).field(120), "2:99:120");
    }
}
