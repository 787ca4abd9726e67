//! Jitter: per queue, each job's runs are spread by a fixed offset derived from its id,
//! so thousands of jobs on one rule (`BYHOUR=0`) do not all fall due in one second, and
//! each job keeps its own slot (as Jenkins' `H` does).
//!
//! The offset of job `ID` in a queue with `jitter = S` is FNV-1a 64 (offset basis
//! 0xcbf29ce484222325, prime 0x100000001b3) of the UTF-8 bytes of `ID`, modulo `S`:
//! stable across versions, machines and restarts. It applies to recurring schedules
//! (rules, rule sets, cron lines) only: a run is an occurrence plus the offset, and the
//! next run after an instant is the first such run strictly after it.

use std::collections::BTreeMap;

use chrono_tz::Tz;

use crate::{
    jobid::queue_of,
    schedule::{Placement, RuleError, Schedule},
};

/// FNV-1a 64 of `bytes` (also the start of a job's shard, see [`crate::shard`]).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The offset, in seconds in `0..spread`, of job `jobid` under `jitter = spread`
/// (0 without jitter).
pub fn offset(jobid: &str, spread: u64) -> i64 {
    match spread {
        0 => 0,
        // `spread` is at most a day (limits::JITTER), so the offset fits an i64.
        s => (fnv1a(jobid.as_bytes()) % s) as i64,
    }
}

/// The offset of `jobid` under its queue's jitter in `spreads` (queue -> seconds).
pub fn offset_in(spreads: &BTreeMap<String, u64>, jobid: &str) -> i64 {
    spreads
        .get(queue_of(jobid))
        .map_or(0, |s| offset(jobid, *s))
}

/// The next `count` runs of `schedule` after `after`, as `redbike next` lists them, for
/// a job whose runs are shifted by `offset` seconds: fewer once the schedule ends. One
/// run for `AT:`; none for schedules that run when a worker is free (`NOW`,
/// `CONTINUE`) or never (`STOP`).
pub fn next_runs(
    schedule: &Schedule,
    after: i64,
    tz: Tz,
    offset: i64,
    count: usize,
) -> Result<Vec<i64>, RuleError> {
    let recurring = schedule.is_recurring();
    let mut runs = Vec::new();
    let mut after = after;
    while runs.len() < count {
        let Placement::Timeline(ts) = placement(schedule, after, tz, offset)? else {
            break;
        };
        runs.push(ts);
        if !recurring {
            break;
        }
        after = ts;
    }
    Ok(runs)
}

/// Where `schedule` puts a job whose runs are shifted by `offset` seconds, with
/// reference instant `after`: for a recurring schedule, the first occurrence after
/// `after - offset`, plus `offset`; other schedules are not shifted.
pub fn placement(
    schedule: &Schedule,
    after: i64,
    tz: Tz,
    offset: i64,
) -> Result<Placement, RuleError> {
    if offset == 0 || !matches!(schedule, Schedule::Rule(_) | Schedule::Cron(_)) {
        return schedule.placement(after, tz);
    }
    Ok(match schedule.placement(after - offset, tz)? {
        // An occurrence shifted past the last representable second has ended, like
        // one past it unshifted.
        Placement::Timeline(ts) if ts + offset > crate::schedule::timestamp::MAX_UNIX => {
            Placement::Stop
        }
        Placement::Timeline(ts) => Placement::Timeline(ts + offset),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_shifted_past_the_year_9999_ends_the_schedule() {
        let rule = Schedule::parse("FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=31;BYHOUR=23").unwrap();
        let after = crate::schedule::timestamp::MAX_UNIX - 2 * 86_400;
        assert_eq!(
            placement(&rule, after, Tz::UTC, 86_399).unwrap(),
            Placement::Stop
        );
        assert!(matches!(
            placement(&rule, after, Tz::UTC, 10).unwrap(),
            Placement::Timeline(_)
        ));
    }

    #[test]
    fn offsets_are_fnv1a_and_stable() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        // Fixed for ever: documented in docs/schedules.md.
        assert_eq!(offset("report:A", 3600), 2838);
        assert_eq!(offset("report:A", 0), 0);
        assert!((0..60).contains(&offset("x", 60)));
    }

    #[test]
    fn a_run_is_an_occurrence_plus_the_offset() {
        let daily = Schedule::parse("FREQ=DAILY;BYHOUR=0").unwrap();
        let at = |after, off| placement(&daily, after, Tz::UTC, off).unwrap();
        // Occurrences at 0, 86400, ...; with 600 s of offset the runs are 600, 87000.
        assert_eq!(at(100, 600), Placement::Timeline(600));
        assert_eq!(at(599, 600), Placement::Timeline(600));
        assert_eq!(at(600, 600), Placement::Timeline(87_000));
        assert_eq!(at(100, 0), Placement::Timeline(86_400));
        let at_100 = Schedule::parse("AT:100").unwrap();
        assert_eq!(
            placement(&at_100, 0, Tz::UTC, 5).unwrap(),
            Placement::Timeline(100)
        );
    }
}
