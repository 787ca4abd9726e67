//! Runs of past occurrences, each with its own due instant: `redbike backfill JOBID
//! --from TS --to TS` and the catch-up policy `all` (`[redbike.catch-up.Q]`). Both give
//! the job a backlog: the due instants still to run, oldest first, in
//! `P-backlog-JOBID` (a list), with the job's field in `P-backlogs` (job id -> the
//! instant its schedule goes back to afterwards, 0 while none is known).
//!
//! backfill.lua writes a backlog and queues the first run at once, unless the job runs
//! or is queued (then that run's end starts it); after each run of ours, finish.lua
//! queues the job again for the next instant, with the due note `INSTANT:NOW`, so the
//! claim reads due = INSTANT (`REDBIKE_DUE`, see [`crate::history::due_at`]). One run
//! at a time, in order: the job is queued again only once its run has ended. A retry
//! to come (`P-attempts`), a rerun (`redbike run`) and a pause go first; a run cut
//! short by its worker leaves the backlog as it is, to go on after the job's next run.
//! After the last instant, the job goes back per its schedule, at the earliest of its
//! next occurrence and the one the backlog put off, so none is lost meanwhile.
//!
//! This module computes the instants; the Python original ignores both keys (its
//! worker places the job per its schedule: the backlog goes on after the job's next
//! run by one of ours).

use chrono_tz::Tz;

use crate::{
    jitter,
    schedule::{RuleError, Schedule},
};

/// The occurrences of a range: at most the maximum asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrences {
    /// The runs, oldest first, each an occurrence plus the job's jitter offset.
    pub runs: Vec<i64>,
    /// The first run past the maximum, when the range holds more.
    pub beyond: Option<i64>,
}

/// The runs of `schedule` (a job's, shifted by its jitter `offset`) in `from..=to`, at
/// most `max` of them.
pub fn occurrences(
    schedule: &Schedule,
    from: i64,
    to: i64,
    tz: Tz,
    offset: i64,
    max: usize,
) -> Result<Occurrences, RuleError> {
    let mut runs = jitter::next_runs(schedule, from.saturating_sub(1), tz, offset, max + 1)?;
    runs.retain(|&t| t >= from && t <= to);
    let beyond = (runs.len() > max).then(|| runs[max]);
    runs.truncate(max);
    Ok(Occurrences { runs, beyond })
}

/// What catch-up `all` runs of a job found due at `late_at` (its timeline score) at
/// `now`: `late_at` itself, then the occurrences after it up to `now`, `max` runs in
/// all. `None` when no occurrence came after `late_at` by `now` (one run: the usual
/// pass queues it).
pub fn missed(
    schedule: &Schedule,
    late_at: i64,
    now: i64,
    tz: Tz,
    offset: i64,
    max: usize,
) -> Result<Option<Occurrences>, RuleError> {
    let later = occurrences(
        schedule,
        late_at.saturating_add(1),
        now,
        tz,
        offset,
        max.saturating_sub(1),
    )?;
    if later.runs.is_empty() && later.beyond.is_none() {
        return Ok(None);
    }
    let mut runs = vec![late_at];
    runs.extend(later.runs);
    Ok(Some(Occurrences {
        runs,
        beyond: later.beyond,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_holds_its_occurrences_up_to_the_maximum() {
        let minutely = Schedule::parse("FREQ=MINUTELY;BYSECOND=0").unwrap();
        let t0 = 1_704_067_200; // 2024-01-01T00:00:00Z
        let r = occurrences(&minutely, t0, t0 + 540, Tz::UTC, 0, 100).unwrap();
        assert_eq!(r.runs, (0..10).map(|i| t0 + 60 * i).collect::<Vec<_>>());
        assert_eq!(r.beyond, None);
        let r = occurrences(&minutely, t0 + 1, t0 + 540, Tz::UTC, 0, 3).unwrap();
        assert_eq!(r.runs, vec![t0 + 60, t0 + 120, t0 + 180]);
        assert_eq!(r.beyond, Some(t0 + 240));
        // Exactly the maximum: nothing beyond.
        let r = occurrences(&minutely, t0, t0 + 120, Tz::UTC, 0, 3).unwrap();
        assert_eq!((r.runs.len(), r.beyond), (3, None));
        // The jitter offset shifts each run.
        let r = occurrences(&minutely, t0, t0 + 120, Tz::UTC, 7, 10).unwrap();
        assert_eq!(r.runs, vec![t0 + 7, t0 + 67]);
        assert!(occurrences(&minutely, t0 + 1, t0 + 59, Tz::UTC, 0, 10)
            .unwrap()
            .runs
            .is_empty());
    }

    #[test]
    fn catch_up_runs_the_late_run_then_the_missed_ones() {
        let minutely = Schedule::parse("FREQ=MINUTELY;BYSECOND=0").unwrap();
        let t0 = 1_704_067_200;
        assert_eq!(
            missed(&minutely, t0, t0 + 59, Tz::UTC, 0, 10).unwrap(),
            None
        );
        let m = missed(&minutely, t0, t0 + 150, Tz::UTC, 0, 10)
            .unwrap()
            .unwrap();
        assert_eq!((m.runs, m.beyond), (vec![t0, t0 + 60, t0 + 120], None));
        let m = missed(&minutely, t0, t0 + 600, Tz::UTC, 0, 3)
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.runs, m.beyond),
            (vec![t0, t0 + 60, t0 + 120], Some(t0 + 180))
        );
        // max 1: the late run only, and what it drops.
        let m = missed(&minutely, t0, t0 + 600, Tz::UTC, 0, 1)
            .unwrap()
            .unwrap();
        assert_eq!((m.runs, m.beyond), (vec![t0], Some(t0 + 60)));
    }
}
