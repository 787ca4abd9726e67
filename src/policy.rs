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
}

impl Action {
    /// The script's `action` and `due` arguments.
    pub fn wire(self) -> (&'static str, i64) {
        match self {
            Action::Enqueue => ("enqueue", 0),
            Action::Timeline(ts) => ("timeline", ts),
            Action::Stop => ("stop", 0),
            Action::OneOff => ("oneoff", 0),
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
}

/// Decides what becomes of a job after a run, from its current schedule.
pub(crate) fn decide(
    jobid: &str,
    schedule: Option<&str>,
    end: &End,
    now: i64,
    p: &Policy,
) -> Decision {
    let failure = match end {
        End::TimedOut => Some(status::TMO),
        End::Interrupted => Some(status::INT),
        End::Recovered => Some(status::REC),
        End::Fenced => Some(status::FNC),
        End::Reported(RunResult::Failed(_)) => Some(status::DIE),
        _ => None,
    };
    let d = |after, store| Decision {
        after,
        store,
        failure,
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
    decide(jobid, schedule, &End::Recovered, now, p)
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
        }
    }

    fn ok(backoff: Option<u64>) -> End {
        End::Reported(RunResult::Success { backoff })
    }

    #[test]
    fn decisions() {
        let s = policy();
        let failed = End::Reported(RunResult::Failed("x".into()));
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &ok(None), 100, &s).after,
            AfterRun::Place(Action::Enqueue)
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &ok(Some(5)), 100, &s).after,
            AfterRun::Place(Action::Timeline(105))
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &failed, 100, &s).after,
            AfterRun::Place(Action::Timeline(110))
        );
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &End::TimedOut, 100, &s).failure,
            Some("TMO")
        );
        assert_eq!(
            decide("j:A", None, &ok(None), 100, &s).after,
            AfterRun::Unset
        );
        assert_eq!(
            decide(
                "j:A",
                Some("STOP"),
                &End::Reported(RunResult::Unset),
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
            100,
            &s,
        );
        assert_eq!(
            (stop.after, stop.store),
            (AfterRun::Place(Action::Stop), Some("STOP"))
        );
        let now = decide("j:A", Some("NOW"), &ok(None), 100, &s);
        assert_eq!(
            (now.after, now.store),
            (AfterRun::Place(Action::Enqueue), Some("STOP"))
        );
        assert_eq!(
            decide("j:A", Some("FREQ=NOPE"), &ok(None), 100, &s).after,
            AfterRun::Bad
        );
        // A STOP schedule under a run that did not end by itself: the script decides
        // from the status whether it was a one-off run (queued again) or a stop.
        assert_eq!(
            decide("j:A", Some("STOP"), &End::Interrupted, 100, &s).after,
            AfterRun::Place(Action::OneOff)
        );
        let recovered = decide_recovery("j:A", Some("STOP"), 100, &s);
        assert_eq!(
            (recovered.after.recover_wire(), recovered.store),
            (("oneoff", 0), None)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &End::Fenced, 100, &s).after,
            AfterRun::Place(Action::OneOff)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &End::TimedOut, 100, &s).after,
            AfterRun::Place(Action::Stop)
        );
        assert_eq!(
            decide("j:A", Some("STOP"), &ok(None), 100, &s).after,
            AfterRun::Place(Action::Stop)
        );
        assert_eq!(
            decide("j:A", Some("NOW"), &End::Interrupted, 100, &s).after,
            AfterRun::Place(Action::Enqueue)
        );
        let hold = Policy {
            on_failure: OnFailure::Hold,
            ..policy()
        };
        assert_eq!(
            decide("j:A", Some("CONTINUE"), &failed, 100, &hold).after,
            AfterRun::Hold
        );
        // A timeout always goes back into circulation.
        assert!(matches!(
            decide("j:A", Some("CONTINUE"), &End::TimedOut, 100, &hold).after,
            AfterRun::Place(_)
        ));
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
        let at = |id, now| decide(id, hourly, &ok(None), now, &s).after;
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
            decide("job:J", Some("CONTINUE"), &ok(Some(5)), 100, &s).after,
            AfterRun::Place(Action::Timeline(105))
        );
    }
}
