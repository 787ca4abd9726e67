//! The after-run policy: what becomes of a job after a run, or after its worker vanished
//! ([`decide`], [`decide_recovery`]), from its schedule, how the run ended and the
//! `on-failure` setting. The worker, recovery, `check --repair` and the dispatcher all
//! decide here; the scripts (finish.lua, recover.lua, place.lua, place_many.lua,
//! skip.lua) carry it out, told in the words of [`Action::wire`] and [`AfterRun::wire`],
//! which are the only place those words are written.

use std::collections::BTreeMap;

use chrono_tz::Tz;
use serde::Deserialize;

use crate::{
    jitter,
    retries::{self, Attempt, Retries},
    schedule::{Placement, Schedule},
    status,
};

/// What a worker does with a job whose command failed (status DIE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Leave the job out of circulation, as the original does; find it with `statuses`.
    Hold,
    /// Keep status DIE visible and put the job back per its schedule.
    Reschedule,
}

/// The settings the policy reads.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    /// What happens to a failed job.
    pub on_failure: OnFailure,
    /// Seconds a failed or timed-out CONTINUE job waits before it runs again.
    pub failure_delay: u64,
    /// Zone for rules without their own.
    pub timezone: Tz,
    /// Per-queue jitter of recurring jobs' runs, seconds (`[redbike.jitter]`).
    pub jitter: BTreeMap<String, u64>,
    /// Per-queue retries of failed runs (`[redbike.retries.Q]`).
    pub retries: BTreeMap<String, Retries>,
    /// Per-queue bounds of staleness (`[redbike.stale]`, see [`crate::stale`]).
    pub stale: BTreeMap<String, u64>,
}

impl Policy {
    /// What the deadlines of jobs are computed from (see [`crate::stale`]).
    pub fn bounds(&self) -> crate::stale::Bounds<'_> {
        crate::stale::Bounds {
            queues: &self.stale,
            jitter: &self.jitter,
            timezone: self.timezone,
        }
    }
}

/// How a run ended, as the job reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// Success; a CONTINUE job waits `backoff` seconds before it runs again.
    Success {
        /// Seconds to wait (the original's integer return value).
        backoff: Option<u64>,
    },
    /// The job asks to stop: its schedule becomes STOP (the original's StopWork).
    Stop,
    /// The job asks to be removed (the original's UnsetJob).
    Unset,
    /// The job failed (status DIE); the text says how.
    Failed(String),
}

/// How a run ended, as the worker records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The job ended by itself.
    Reported(RunResult),
    /// The worker stopped it: it ran past its timeout.
    TimedOut,
    /// The worker stopped it: the worker was stopping (HALT, a signal) and the job ran
    /// past the grace period.
    Interrupted,
    /// Its worker vanished mid-run; a dispatcher puts it back.
    Recovered,
    /// Its worker stopped it because it could not confirm it to Redis in time.
    Fenced,
    /// The worker stopped it: `redbike kill` asked for it.
    Killed,
}

/// Where a script puts a job (the `action` and `due` arguments of place.lua,
/// place_many.lua, skip.lua, finish.lua and recover.lua).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Into its queue.
    Enqueue,
    /// On the timeline, due at this unix time.
    Timeline(i64),
    /// Nowhere: stopped.
    Stop,
    /// A STOP schedule under a run that did not end by itself: the script queues the
    /// job again if that was a one-off run, else stops it (oneoff_action, common.lua).
    OneOff,
    /// A STOP schedule under a failed run to retry: the script puts the job on the
    /// timeline at this unix time if that was a one-off run, else stops it (an
    /// operator's `set JOB STOP` while it ran wins).
    OneOffRetry(i64),
}

impl Action {
    /// The script's `action` and `due` arguments.
    pub fn wire(self) -> (&'static str, i64) {
        match self {
            Action::Enqueue => ("enqueue", 0),
            Action::Timeline(ts) => ("timeline", ts),
            Action::Stop => ("stop", 0),
            Action::OneOff => ("oneoff", 0),
            Action::OneOffRetry(ts) => ("oneoff", ts),
        }
    }
}

impl From<Placement> for Action {
    fn from(placement: Placement) -> Action {
        match placement {
            Placement::Enqueue => Action::Enqueue,
            Placement::Timeline(ts) => Action::Timeline(ts),
            Placement::Stop => Action::Stop,
        }
    }
}

/// What becomes of a job after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRun {
    /// Back into circulation (or stopped) per its schedule.
    Place(Action),
    /// Forgotten: it asked to be unset, or was unset while it ran.
    Unset,
    /// Left out of circulation after a failure (`on-failure = "hold"`).
    Hold,
    /// Its schedule cannot be parsed: left out of circulation.
    Bad,
}

impl AfterRun {
    /// finish.lua's `mode`, `action` and `due` arguments.
    pub fn wire(self) -> (&'static str, (&'static str, i64)) {
        match self {
            AfterRun::Place(action) => ("place", action.wire()),
            AfterRun::Unset => ("unset", Action::Stop.wire()),
            AfterRun::Hold => ("hold", Action::Stop.wire()),
            AfterRun::Bad => ("bad", Action::Stop.wire()),
        }
    }

    /// recover.lua's `action` and `due` arguments (it has no `mode`: a job it cannot
    /// place is `bad`, one without a schedule is stopped).
    pub fn recover_wire(self) -> (&'static str, i64) {
        match self {
            AfterRun::Bad => ("bad", 0),
            mode => mode.wire().1,
        }
    }
}

/// What the script that records a run is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    /// What becomes of the job.
    pub after: AfterRun,
    /// A schedule to store first (`STOP` after NOW, AT, or a stop request).
    pub store: Option<&'static str>,
    /// A failure event to record (`DIE`, `TMO`, ...).
    pub failure: Option<&'static str>,
    /// What becomes of the job's pending retry (`P-attempts`, see [`crate::retries`]).
    pub attempts: Attempts,
}

/// What the script that records a run does with the job's field in `P-attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempts {
    /// Left as it is: the run was cut short by its worker (stopped, vanished, fenced),
    /// which is not an attempt of the job's.
    Keep,
    /// Removed: the occurrence is done with (success, attempts spent, unset, ...).
    Clear,
    /// Set: the next run is this attempt, placed on the timeline at this unix time (see
    /// [`crate::retries`]).
    Retry(Attempt, i64),
}

impl Attempts {
    /// finish.lua's `attempts` argument: `=` keep, empty to clear, else the field.
    pub fn wire(&self) -> String {
        match self {
            Attempts::Keep => "=".into(),
            Attempts::Clear => String::new(),
            Attempts::Retry(next, at) => next.field(*at),
        }
    }
}

/// Decides what becomes of a job after a run, from its current schedule.
/// `attempt` is which attempt the run was (see [`crate::retries`]).
pub(crate) fn decide(
    jobid: &str,
    schedule: Option<&str>,
    end: &End,
    attempt: Attempt,
    now: i64,
    p: &Policy,
) -> Decision {
    let mut decision = decide_once(jobid, schedule, end, now, p);
    if matches!(end, End::Interrupted | End::Recovered | End::Fenced) {
        decision.attempts = Attempts::Keep;
        return decision;
    }
    retry(jobid, schedule, &decision, attempt, now, p).unwrap_or(decision)
}

/// Where a failed or timed-out run of a job in a queue with retries goes while its
/// attempts last: on the timeline at its retry instant, or at its next regular
/// occurrence when that comes first (that run is attempt 1 of it); a one-off run (its
/// schedule is STOP by then) at its retry instant unless it was stopped meanwhile (see
/// [`Action::OneOffRetry`]). `None`: no retry, the decision stands.
fn retry(
    jobid: &str,
    schedule: Option<&str>,
    decision: &Decision,
    attempt: Attempt,
    now: i64,
    p: &Policy,
) -> Option<Decision> {
    let retries = retries::of(&p.retries, jobid)?;
    let failed = matches!(decision.failure, Some(status::DIE | status::TMO));
    if !failed || attempt.number >= retries.attempts {
        return None;
    }
    let at = now + retries.delay(jobid, attempt.number) as i64;
    let retry = |action| {
        Some(Decision {
            after: AfterRun::Place(action),
            store: None,
            failure: decision.failure,
            attempts: Attempts::Retry(attempt.next(now), at),
        })
    };
    // A job unset, unreadable, or given a new one-off while it ran is not retried.
    match Schedule::parse(schedule?).ok()? {
        Schedule::Stop => retry(Action::OneOffRetry(at)),
        Schedule::Continue => retry(Action::Timeline(at)),
        Schedule::Now | Schedule::At(_) => None,
        recurring @ (Schedule::Rule(_) | Schedule::Cron(_)) => {
            let offset = jitter::offset_in(&p.jitter, jobid);
            let next_after = |t| match jitter::placement(&recurring, t, p.timezone, offset) {
                Ok(Placement::Timeline(next)) => Some(next),
                _ => None,
            };
            // A run that is catching up (its occurrence's successor is past already: a
            // backfill, a catch-up) is retried as such: the occurrences after it are
            // the backlog's or the catch-up's, not this retry's to replace.
            let behind = attempt.due.and_then(next_after).is_some_and(|n| n <= now);
            match next_after(now) {
                Some(next) if next <= at && !behind => Some(Decision {
                    after: AfterRun::Place(Action::Timeline(next)),
                    store: None,
                    failure: decision.failure,
                    attempts: Attempts::Clear,
                }),
                _ => retry(Action::Timeline(at)),
            }
        }
    }
}

fn decide_once(jobid: &str, schedule: Option<&str>, end: &End, now: i64, p: &Policy) -> Decision {
    let failure = match end {
        End::TimedOut => Some(status::TMO),
        End::Interrupted => Some(status::INT),
        End::Recovered => Some(status::REC),
        End::Fenced => Some(status::FNC),
        End::Killed => Some(status::KIL),
        End::Reported(RunResult::Failed(_)) => Some(status::DIE),
        _ => None,
    };
    let d = |after, store| Decision {
        after,
        store,
        failure,
        attempts: Attempts::Clear,
    };
    let place = |action| d(AfterRun::Place(action), None);
    let Some(text) = schedule.filter(|_| *end != End::Reported(RunResult::Unset)) else {
        // Asked to unset, or unset while it ran: the job goes.
        return d(AfterRun::Unset, None);
    };
    if failure == Some(status::DIE) && p.on_failure == OnFailure::Hold {
        return d(AfterRun::Hold, None);
    }
    if *end == End::Reported(RunResult::Stop) {
        return d(AfterRun::Place(Action::Stop), Some("STOP"));
    }
    match Schedule::parse(text) {
        Err(_) => d(AfterRun::Bad, None),
        Ok(Schedule::Now) => d(AfterRun::Place(Action::Enqueue), Some("STOP")),
        Ok(Schedule::At(ts)) => d(AfterRun::Place(Action::Timeline(ts)), Some("STOP")),
        Ok(Schedule::Stop) if matches!(end, End::Recovered | End::Interrupted | End::Fenced) => {
            place(Action::OneOff)
        }
        Ok(Schedule::Stop) => place(Action::Stop),
        Ok(Schedule::Continue) => {
            let delay = match end {
                _ if failure.is_some() => p.failure_delay,
                End::Reported(RunResult::Success { backoff: Some(n) }) => *n,
                _ => 0,
            };
            if delay > 0 {
                place(Action::Timeline(now + delay as i64))
            } else {
                place(Action::Enqueue)
            }
        }
        Ok(recurring @ (Schedule::Rule(_) | Schedule::Cron(_))) => {
            let offset = jitter::offset_in(&p.jitter, jobid);
            match jitter::placement(&recurring, now, p.timezone, offset) {
                Ok(placement) => place(placement.into()),
                Err(_) => d(AfterRun::Bad, None),
            }
        }
    }
}

/// What recover.lua does with a job whose worker vanished. Like a timeout, recovery
/// ignores `on-failure`.
pub(crate) fn decide_recovery(
    jobid: &str,
    schedule: Option<&str>,
    now: i64,
    p: &Policy,
) -> Decision {
    decide(
        jobid,
        schedule,
        &End::Recovered,
        Attempt::first(None),
        now,
        p,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            on_failure: OnFailure::Reschedule,
            failure_delay: 10,
            timezone: Tz::UTC,
            jitter: BTreeMap::new(),
            retries: BTreeMap::new(),
            stale: BTreeMap::new(),
        }
    }

    fn first() -> Attempt {
        Attempt::first(None)
    }

    fn ok(backoff: Option<u64>) -> End {
        End::Reported(RunResult::Success { backoff })
    }

    #[test]
    fn decisions() {
        let s = policy();
        let failed = End::Reported(RunResult::Failed("x".into()));
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &ok(None), first(), 100, &s).after,
            AfterRun::Place(Action::Enqueue)
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &ok(Some(5)), first(), 100, &s).after,
            AfterRun::Place(Action::Timeline(105))
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &failed, first(), 100, &s).after,
            AfterRun::Place(Action::Timeline(110))
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &End::TimedOut, first(), 100, &s).failure,
            Some("TMO")
        );
        assert_eq!(
            decide("j:A", None, &ok(None), first(), 100, &s).after,
            AfterRun::Unset
        );
        assert_eq!(
            decide(
                "j:A",
                Some("STOP"),
                &End::Reported(RunResult::Unset),
                first(),
                100,
                &s
            )
            .after,
            AfterRun::Unset
        );
        let stop = decide(
            "j:A",
            Some("CONTINUE"),
            &End::Reported(RunResult::Stop),
            first(),
            100,
            &s,
        );
        assert_eq!(
            (stop.after, stop.store),
            (AfterRun::Place(Action::Stop), Some("STOP"))
        );
        let now = decide("j:A", Some("NOW"), &ok(None), first(), 100, &s);
        assert_eq!(
            (now.after, now.store),
            (AfterRun::Place(Action::Enqueue), Some("STOP"))
        );
        assert_eq!(
            decide("j:A", Some("FREQ=NOPE"), &ok(None), first(), 100, &s).after,
            AfterRun::Bad
        );
        // A STOP schedule under a run that did not end by itself: the script decides
        // from the status whether it was a one-off run (queued again) or a stop.
        assert_eq!(
            decide("j:A", Some("STOP"), &End::Interrupted, first(), 100, &s).after,
            AfterRun::Place(Action::OneOff)
        );
        let recovered = decide_recovery("j:A", Some("STOP"), 100, &s);
        assert_eq!(
            (recovered.after.recover_wire(), recovered.store),
            (("oneoff", 0), None)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &End::Fenced, first(), 100, &s).after,
            AfterRun::Place(Action::OneOff)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &End::TimedOut, first(), 100, &s).after,
            AfterRun::Place(Action::Stop)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &ok(None), first(), 100, &s).after,
            AfterRun::Place(Action::Stop)
        );
        assert_eq!(
            decide("j:A", Some("NOW"), &End::Interrupted, first(), 100, &s).after,
            AfterRun::Place(Action::Enqueue)
        );
        let hold = Policy {
            on_failure: OnFailure::Hold,
            ..policy()
        };
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &failed, first(), 100, &hold).after,
            AfterRun::Hold
        );
        // A kill is a timeout the operator chose: a one-off is done, CONTINUE waits.
        let killed = decide("j:A", Some("CONTINUE"), &End::Killed, first(), 100, &hold);
        assert_eq!(
            (killed.after, killed.failure),
            (AfterRun::Place(Action::Timeline(110)), Some("KIL"))
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &End::Killed, first(), 100, &s).after,
            AfterRun::Place(Action::Stop)
        );
        // A timeout always goes back into circulation.
        assert!(matches!(
            decide("j:A", Some("CONTINUE"), &End::TimedOut, first(), 100, &hold).after,
            AfterRun::Place(_)
        ));
    }

    #[test]
    fn failed_runs_are_retried_while_attempts_last() {
        let retries = Retries {
            attempts: 3,
            backoff_min: 10,
            backoff_max: 1000,
        };
        let s = Policy {
            on_failure: OnFailure::Hold,
            retries: [("A".to_string(), retries)].into(),
            ..policy()
        };
        let failed = End::Reported(RunResult::Failed("x".into()));
        let nth = |n| Attempt {
            number: n,
            due: Some(90),
        };
        let daily = Some("FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYSECOND=0");
        // Attempt 1 fails: back on the timeline within [now + 7.5, now + 10].
        let d = decide("j:A", daily, &failed, nth(1), 100, &s);
        let AfterRun::Place(Action::Timeline(at)) = d.after else {
            panic!("{d:?}")
        };
        assert!((108..=110).contains(&at), "{at}");
        assert_eq!(
            (d.failure, d.attempts, d.store),
            (Some("DIE"), Attempts::Retry(nth(2), at), None)
        );
        // A timeout is an attempt too.
        let d = decide("j:A", daily, &End::TimedOut, nth(2), 100, &s);
        assert!(matches!(d.attempts, Attempts::Retry(a, _) if a == nth(3)));
        // Spent: on-failure decides (hold), the field goes.
        let d = decide("j:A", daily, &failed, nth(3), 100, &s);
        assert_eq!((d.after, d.attempts), (AfterRun::Hold, Attempts::Clear));
        // Success clears; a run cut short by its worker keeps the field.
        let d = decide("j:A", daily, &ok(None), nth(2), 100, &s);
        assert_eq!(d.attempts, Attempts::Clear);
        for end in [End::Interrupted, End::Recovered, End::Fenced] {
            assert_eq!(
                decide("j:A", daily, &end, nth(2), 100, &s).attempts,
                Attempts::Keep
            );
        }
        // The next occurrence comes before the retry: that run is attempt 1 of it.
        let t0 = 1_704_067_200; // 2024-01-01T00:00:00Z
        let minutely = Some("FREQ=MINUTELY;BYSECOND=0");
        let on_time = Attempt {
            number: 1,
            due: Some(t0),
        };
        let d = decide("j:A", minutely, &failed, on_time, t0 + 55, &s);
        assert_eq!(
            (d.after, d.attempts),
            (AfterRun::Place(Action::Timeline(t0 + 60)), Attempts::Clear)
        );
        // A run catching up (its occurrence's successor is past: a backfill) is
        // retried at its instant, not merged into the next occurrence.
        let behind = Attempt {
            number: 1,
            due: Some(t0 - 600),
        };
        let d = decide("j:A", minutely, &failed, behind, t0 + 55, &s);
        let AfterRun::Place(Action::Timeline(at)) = d.after else {
            panic!("{d:?}")
        };
        assert!((t0 + 62..=t0 + 65).contains(&at), "{d:?}");
        assert!(matches!(d.attempts, Attempts::Retry(..)));
        // A one-off run (its schedule is STOP by then), CONTINUE; not other queues.
        let d = decide("j:A", Some("STOP"), &failed, nth(1), 100, &s);
        assert!(matches!(
            d.after,
            AfterRun::Place(Action::OneOffRetry(108..=110))
        ));
        assert_eq!(d.after.wire().0, "place");
        let d = decide("j:A", Some("CONTINUE"), &failed, nth(1), 100, &s);
        assert!(matches!(
            d.after,
            AfterRun::Place(Action::Timeline(108..=110))
        ));
        let d = decide("j:B", daily, &failed, nth(1), 100, &s);
        assert_eq!((d.after, d.attempts), (AfterRun::Hold, Attempts::Clear));
        // Unset while it ran: gone.
        assert_eq!(
            decide("j:A", None, &failed, nth(1), 100, &s).after,
            AfterRun::Unset
        );
        // An operator's kill ends the occurrence: no retry, the field goes.
        let d = decide("j:A", Some("CONTINUE"), &End::Killed, nth(1), 100, &s);
        assert_eq!(d.attempts, Attempts::Clear);
        assert_eq!(d.failure, Some(status::KIL));
    }

    #[test]
    fn wire_forms() {
        assert_eq!(
            AfterRun::Place(Action::Timeline(7)).wire(),
            ("place", ("timeline", 7))
        );
        assert_eq!(AfterRun::Unset.wire(), ("unset", ("stop", 0)));
        assert_eq!(AfterRun::Bad.wire(), ("bad", ("stop", 0)));
        assert_eq!(AfterRun::Bad.recover_wire(), ("bad", 0));
        assert_eq!(AfterRun::Unset.recover_wire(), ("stop", 0));
        assert_eq!(
            AfterRun::Place(Action::OneOff).recover_wire(),
            ("oneoff", 0)
        );
    }

    #[test]
    fn reschedule_and_recovery_keep_the_jobs_jitter_slot() {
        let s = Policy {
            jitter: [("J".to_string(), 3600)].into(),
            ..policy()
        };
        // job:J's offset under 3600 s is 1656 (FNV-1a, see crate::jitter).
        let hourly = Some("FREQ=HOURLY;BYMINUTE=0;BYSECOND=0");
        let at = |id, now| decide(id, hourly, &ok(None), first(), now, &s).after;
        assert_eq!(
            at("job:J", 1656),
            AfterRun::Place(Action::Timeline(3600 + 1656))
        );
        assert_eq!(at("job:J", 1000), AfterRun::Place(Action::Timeline(1656)));
        assert_eq!(at("job:K", 1000), AfterRun::Place(Action::Timeline(3600)));
        let recovered = decide_recovery("job:J", hourly, 1000, &s);
        assert_eq!(
            (recovered.after.recover_wire(), recovered.store),
            (("timeline", 1656), None)
        );
        // CONTINUE is not shifted.
        assert_eq!(
            decide("job:J", Some("CONTINUE"), &ok(Some(5)), first(), 100, &s).after,
            AfterRun::Place(Action::Timeline(105))
        );
    }
}
