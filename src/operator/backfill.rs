//! `redbike backfill JOBID --from TS --to TS`: every occurrence of the job's schedule in
//! a past range runs once, in order, one at a time, each with its own due instant (see
//! [`crate::backfill`]). Every refusal is bad input (exit 2) and writes nothing.
//! `--cancel` drops what is left of a job's backlog.

use crate::{
    backfill::{occurrences, Occurrences},
    config::Config,
    error::{Error, Result},
    jitter, jobid, limits,
    redis::events::Who,
    redis::pause,
    redis::scripts::backlog::{self, backfill as backfill_script, Backlog, BacklogReply},
    redis::store::with_store,
    schedule::{timestamp, Schedule},
    shard, terminal,
};

/// What `backfill` asked for.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// The first instant of the range (inclusive), unix seconds.
    pub from: i64,
    /// The last instant of the range (inclusive), unix seconds; not after now.
    pub to: i64,
    /// The most runs to queue.
    pub max: u64,
}

/// What `backfill` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfilled {
    /// The due instants of the runs, oldest first.
    pub runs: Vec<i64>,
    /// Whether the first run was queued now; else they wait for the job's current run
    /// (it is running or queued) to end.
    pub started: bool,
}

/// Refusal: one line, saying what to do, that nothing was written.
fn refuse(message: String) -> Error {
    Error::Input(format!("{message}; nothing was written"))
}

/// Checks the range against `now`: refusals that need no Redis.
pub fn check_range(range: &Range, now: i64) -> Result<()> {
    let iso = timestamp::iso_utc;
    if range.from > range.to {
        return Err(refuse(format!(
            "--from {} is after --to {}: give the earlier instant to --from",
            iso(range.from),
            iso(range.to)
        )));
    }
    if range.to > now {
        return Err(refuse(format!(
            "--to {} is in the future (now is {}): backfill runs past occurrences only, \
             the schedule runs the others",
            iso(range.to),
            iso(now)
        )));
    }
    limits::BACKFILL_MAX
        .check(range.max)
        .map_err(|why| refuse(format!("--max {why}")))?;
    Ok(())
}

/// `redbike backfill`: in the job's shard, queues every occurrence of its schedule in
/// `range`, refusing an unknown, paused or non-recurring job, a halted prefix, a job
/// with a backlog already, and a range with no occurrence or more than `range.max`.
pub fn backfill(
    config: &Config,
    id: &str,
    range: &Range,
    now: i64,
    who: &Who,
) -> Result<Backfilled> {
    jobid::validate_placeable(id)?;
    check_range(range, now)?;
    let config = &shard::checked_for_job(config, id)?;
    let shown = terminal::id(id);
    with_store(&config.redis, |store| {
        // The schedule may change under us (a `set`); read it again then, a few times.
        for _ in 0..5 {
            let (text, paused) = pause::schedule_and_paused(store, id)?;
            let Some(text) = text else {
                return Err(refuse(format!(
                    "unknown job {shown}: it has no schedule (see `redbike schedules`)"
                )));
            };
            if paused {
                return Err(refuse(format!(
                    "job {shown} is paused: `redbike resume {shown}` first"
                )));
            }
            let runs = runs_of(config, id, &text, range)?;
            let detail = match (runs.first(), runs.last()) {
                (Some(first), Some(last)) => format!(
                    "{} run(s) due from {} to {}",
                    runs.len(),
                    timestamp::iso_utc(*first),
                    timestamp::iso_utc(*last)
                ),
                _ => String::new(),
            };
            let b = Backlog {
                jobid: id,
                schedule: &text,
                now,
                late_at: None,
                instants: &runs,
                audit: who.audit("backfill", id, &detail),
            };
            let started = match backfill_script(store.con, store.keys, &b)? {
                BacklogReply::Changed => continue,
                BacklogReply::Started(_) => true,
                BacklogReply::Waiting(_) => false,
                BacklogReply::Unknown => {
                    return Err(refuse(format!("unknown job {shown}: it has no schedule")))
                }
                BacklogReply::Paused | BacklogReply::Left => {
                    return Err(refuse(format!(
                        "job {shown} is paused: `redbike resume {shown}` first"
                    )))
                }
                BacklogReply::Halted => {
                    return Err(refuse(
                        "the prefix is halted (control HALT): nothing would run; \
                         `redbike control RESUME` first"
                            .into(),
                    ))
                }
                BacklogReply::Pending(n) => {
                    return Err(refuse(format!(
                        "job {shown} has a backlog already ({n} run(s) to go, see `redbike tell`): \
                         backfill again once it is done"
                    )))
                }
            };
            return Ok(Backfilled { runs, started });
        }
        Err(refuse(format!(
            "job {shown}: its schedule keeps changing under `backfill`; try again"
        )))
    })
}

/// `redbike backfill JOBID --cancel`, in the job's shard: drops what is left of its
/// backlog; the instants dropped, `None` when it had none (nothing changed). A job
/// without a schedule may have one (a Python `unset` leaves it): it is dropped too.
pub fn cancel(config: &Config, id: &str, who: &Who) -> Result<Option<u64>> {
    jobid::validate_stored(id)?;
    let config = &shard::checked_for_job(config, id)?;
    let audit = who.audit("backfill", id, "cancel");
    with_store(&config.redis, |store| {
        Ok(backlog::cancel(store.con, store.keys, id, &audit)?)
    })
}

/// The due instants of job `id`'s schedule `text` in `range`, or the refusal.
fn runs_of(config: &Config, id: &str, text: &str, range: &Range) -> Result<Vec<i64>> {
    let shown = terminal::id(id);
    let schedule = Schedule::parse(text).map_err(|e| {
        refuse(format!(
            "job {shown}: its schedule {} cannot be parsed ({e}); set a schedule first",
            terminal::id(text)
        ))
    })?;
    if !schedule.is_recurring() {
        return Err(refuse(format!(
            "job {shown} has the schedule {}, which has no occurrences to backfill: \
             only a rule or a cron line has (`redbike run {shown}` runs it once)",
            terminal::id(text)
        )));
    }
    let offset = jitter::offset_in(&config.jitter, id);
    // `max` is at most limits::BACKFILL_MAX, which fits a usize.
    let max = range.max as usize;
    let Occurrences { runs, beyond } = occurrences(
        &schedule,
        range.from,
        range.to,
        config.timezone,
        offset,
        max,
    )
    .map_err(|e| refuse(format!("job {shown}: its schedule gives no run ({e})")))?;
    if let Some(next) = beyond {
        return Err(refuse(format!(
            "the range holds more than {max} run(s) of job {shown} (run {} is due at {}): \
             give --max N to queue up to N (at most {}), or a shorter range",
            max + 1,
            timestamp::iso_utc(next),
            limits::BACKFILL_MAX.hi
        )));
    }
    if runs.is_empty() {
        return Err(refuse(format!(
            "no run of job {shown} falls between {} and {}",
            timestamp::iso_utc(range.from),
            timestamp::iso_utc(range.to)
        )));
    }
    Ok(runs)
}
