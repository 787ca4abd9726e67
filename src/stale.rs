//! Staleness: a job that has not succeeded for longer than it should is *stale*
//! (docs/liveness.md#stale-jobs).
//!
//! Each success of a recurring job (a rule, a rule set, a cron line) writes the instant
//! by which the job must next succeed, its *deadline*, to `P-fresh-until` (a sorted
//! set, one `ZADD` in finish.lua); `set` and `load` write one for a new schedule, so a
//! job that never succeeds goes stale too. By default the deadline is derived from the
//! job's own schedule: the second occurrence after the success (so two runs in a row
//! may be missed or fail), plus the run's own duration, plus a grace of a tenth of the
//! gap between those two occurrences, at least [`MIN_GRACE`]. A queue may set its own
//! bound instead (`[redbike.stale]`, `Q = SECONDS`: must succeed within SECONDS of the
//! last success), which also covers `CONTINUE` jobs. One-off jobs (`NOW`, `AT:`) and
//! stopped ones are never stale.
//!
//! A dispatcher moves jobs whose deadline passed into `P-stale` (a hash, job id ->
//! `SINCE:BOUND:WENT`, see [`Stale`]) and writes a `stale` event; the next success takes
//! the job out and writes a `fresh` event (docs/events.md).

use std::collections::BTreeMap;

use chrono_tz::Tz;

use crate::{
    jitter,
    jobid::queue_of,
    schedule::{Placement, Schedule},
};

/// The least grace a derived deadline gives after the occurrence whose run must have
/// succeeded, seconds: a run is queued within a second of falling due, so this covers
/// a worker's claim, a busy queue and clocks a few seconds apart.
pub const MIN_GRACE: i64 = 10;

/// What finish.lua, place.lua and place_many.lua do with a job's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Left as it is (a failure, or a job without a bound).
    Keep,
    /// Set to this unix second.
    At(i64),
    /// Removed (a job that stops, or runs once).
    Drop,
}

impl Deadline {
    /// The scripts' argument: `""` keep, `-` drop, else the unix second.
    pub(crate) fn wire(self) -> String {
        match self {
            Deadline::Keep => String::new(),
            Deadline::At(t) => t.to_string(),
            Deadline::Drop => "-".into(),
        }
    }
}

/// What the deadline of a job is computed from.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<'a> {
    /// The queues' own bounds (`[redbike.stale]`), seconds.
    pub queues: &'a BTreeMap<String, u64>,
    /// The queues' jitter (`[redbike.jitter]`): runs are occurrences plus an offset.
    pub jitter: &'a BTreeMap<String, u64>,
    /// The zone of rules without their own.
    pub timezone: Tz,
}

impl Bounds<'_> {
    /// The deadline of job `jobid` with `schedule` after a success at `at` (or, for a
    /// new schedule, its setting at `at`), whose run took `ran` seconds. `None`: the
    /// job has no deadline (one-off, stopped, `CONTINUE` without a bound of its queue,
    /// a rule with fewer than two occurrences left).
    pub fn deadline(&self, jobid: &str, schedule: &Schedule, at: i64, ran: u64) -> Option<i64> {
        let own = self.queues.get(queue_of(jobid));
        match schedule {
            Schedule::Continue => own.map(|s| at.saturating_add(*s as i64)),
            Schedule::Rule(_) | Schedule::Cron(_) => {
                if let Some(s) = own {
                    return Some(at.saturating_add(*s as i64));
                }
                let offset = jitter::offset_in(self.jitter, jobid);
                let next = |t| match jitter::placement(schedule, t, self.timezone, offset) {
                    Ok(Placement::Timeline(ts)) => Some(ts),
                    _ => None,
                };
                let first = next(at)?;
                let second = next(first)?;
                let grace = ((second - first) / 10).max(MIN_GRACE);
                Some(second.saturating_add(grace).saturating_add(ran as i64))
            }
            Schedule::Now | Schedule::At(_) | Schedule::Stop => None,
        }
    }

    /// [`Bounds::deadline`] from a stored schedule, as the wire says it: set, or
    /// dropped for a schedule without one (or that cannot be read).
    pub fn for_set(&self, jobid: &str, schedule: &Schedule, at: i64) -> Deadline {
        match self.deadline(jobid, schedule, at, 0) {
            Some(t) => Deadline::At(t),
            None => Deadline::Drop,
        }
    }

    /// Whether the stored schedule `text` of job `jobid` still has a deadline (a
    /// dispatcher drops the deadline of one that no longer has: a schedule or a
    /// configuration changed by a process that does not write deadlines).
    pub fn bounded(&self, jobid: &str, text: Option<&str>) -> bool {
        let Some(schedule) = text.and_then(|t| Schedule::parse(t).ok()) else {
            return false;
        };
        match schedule {
            Schedule::Continue => self.queues.contains_key(queue_of(jobid)),
            Schedule::Rule(_) | Schedule::Cron(_) => true,
            _ => false,
        }
    }

    /// The queue's own bound, if it has one.
    pub fn own(&self, jobid: &str) -> Option<u64> {
        self.queues.get(queue_of(jobid)).copied()
    }
}

/// A stale job, as `P-stale` keeps it: `SINCE:BOUND:WENT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Stale {
    /// Its last success, unix seconds (0: none known).
    pub since: i64,
    /// The seconds it had to succeed within after it (0: not known).
    pub bound: i64,
    /// When a dispatcher found it stale (its deadline had passed), unix seconds.
    pub went: i64,
}

impl Stale {
    /// The field `P-stale` keeps.
    pub fn field(&self) -> String {
        format!("{}:{}:{}", self.since, self.bound, self.went)
    }

    /// Reads a field of `P-stale` (`None`: not one of ours).
    pub fn parse(raw: &str) -> Option<Stale> {
        let mut it = raw.split(':').map(|p| p.parse::<i64>().ok());
        let (since, bound, went) = (it.next()??, it.next()??, it.next()??);
        if it.next().is_some() {
            return None;
        }
        Some(Stale { since, bound, went })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(queues: &BTreeMap<String, u64>) -> Bounds<'_> {
        static NONE: BTreeMap<String, u64> = BTreeMap::new();
        Bounds {
            queues,
            jitter: &NONE,
            timezone: Tz::UTC,
        }
    }

    fn parse(s: &str) -> Schedule {
        Schedule::parse(s).unwrap()
    }

    #[test]
    fn a_derived_deadline_is_the_second_occurrence_plus_grace_and_the_run() {
        let none = BTreeMap::new();
        let b = bounds(&none);
        // Every 2 s: occurrences 102, 104; grace 10 s.
        let every2 = parse("FREQ=SECONDLY;INTERVAL=2");
        let d = b.deadline("j:A", &every2, 101, 0).unwrap();
        assert!(
            (101 + 2 + MIN_GRACE..=101 + 4 + MIN_GRACE).contains(&d),
            "{d}"
        );
        // Hourly: a tenth of an hour; the run's duration on top.
        let hourly = parse("CRON:0 * * * *");
        assert_eq!(b.deadline("j:A", &hourly, 3600, 0), Some(3 * 3600 + 360));
        assert_eq!(b.deadline("j:A", &hourly, 3600, 50), Some(3 * 3600 + 410));
        // Weekdays at 9: a success on Friday must be followed by one on Tuesday.
        let weekdays = parse("CRON:0 9 * * MON-FRI");
        let friday = 1_767_949_200; // 2026-01-09T09:00:00Z, a Friday
        let tuesday = friday + 4 * 86_400;
        assert_eq!(
            b.deadline("j:A", &weekdays, friday + 60, 0),
            Some(tuesday + 8640)
        );
        // No deadline for one-offs, stops, and CONTINUE without a bound of its queue.
        for s in ["NOW", "AT:100", "STOP", "CONTINUE"] {
            assert_eq!(b.deadline("j:A", &parse(s), 100, 0), None, "{s}");
        }
        assert_eq!(b.for_set("j:A", &parse("STOP"), 100), Deadline::Drop);
        assert!(!b.bounded("j:A", Some("CONTINUE")));
        assert!(b.bounded("j:A", Some("CRON:* * * * *")));
        assert!(!b.bounded("j:A", Some("FREQ=NOPE")));
        assert!(!b.bounded("j:A", None));
    }

    #[test]
    fn a_queue_bound_counts_from_the_success() {
        let queues = BTreeMap::from([("A".to_string(), 30)]);
        let b = bounds(&queues);
        assert_eq!(b.deadline("j:A", &parse("CONTINUE"), 100, 7), Some(130));
        assert_eq!(
            b.deadline("j:A", &parse("CRON:0 0 1 1 *"), 100, 0),
            Some(130)
        );
        assert_eq!(b.deadline("j:A", &parse("NOW"), 100, 0), None);
        assert_eq!(b.deadline("j:B", &parse("CONTINUE"), 100, 0), None);
        assert!(b.bounded("j:A", Some("CONTINUE")));
        assert_eq!(b.own("x:A"), Some(30));
    }

    #[test]
    fn stale_fields_read_back() {
        let s = Stale {
            since: 10,
            bound: 20,
            went: 31,
        };
        assert_eq!(Stale::parse(&s.field()), Some(s));
        for bad in ["", "1:2", "1:2:3:4", "a:2:3"] {
            assert_eq!(Stale::parse(bad), None, "{bad}");
        }
        assert_eq!(Deadline::At(5).wire(), "5");
        assert_eq!(Deadline::Keep.wire(), "");
        assert_eq!(Deadline::Drop.wire(), "-");
    }
}
