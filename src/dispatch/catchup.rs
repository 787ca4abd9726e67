//! Missed runs: the per-queue catch-up policy the dispatcher applies to late jobs.
//!
//! A job is late when its timeline score is older than now by more than its queue's
//! grace (after a dispatcher outage, say). Under `catch-up = "once"` (the default, the
//! original's behaviour) it runs once, however late. Under `"skip"` the dispatcher,
//! before it moves due jobs, skips the missed occurrence: a recurring job goes on the
//! timeline at its next occurrence after now (computed here: Lua cannot evaluate
//! rules), a one-off (stored `STOP`) or an exhausted rule leaves the timeline; either
//! way its status and last failure become `SKP` and a log line says so. A CONTINUE job
//! waiting out a backoff, and a job whose schedule is missing or unparsable, are left
//! to the dispatcher as usual.
//!
//! Under `"all"` a late recurring job runs for each occurrence it missed: it is queued
//! for the late one, and the occurrences after it up to now go into its backlog (see
//! [`crate::backfill`]), `max` runs in all; the later ones are dropped, and the log line
//! gives the `redbike backfill` command that runs them. A job running, queued, paused or
//! with a backlog already, and one that missed no further occurrence, runs once, as
//! under `once`.

use crate::{
    backfill,
    config::{CatchUp, CatchUpPolicy, Config},
    history, jitter,
    redis::events::Who,
    redis::keys::queue_of,
    redis::scripts::backlog::{backfill as backfill_script, Backlog, BacklogReply},
    redis::scripts::skip::{skip as skip_script, Skip, SkipReply},
    redis::store::Store,
    schedule::timestamp,
    schedule::{Placement, Schedule},
};

/// Late jobs read per round trip.
const PAGE: isize = 1000;

/// Skips the late occurrences of the jobs of `skip` queues, and catches up those of
/// `all` queues, as of `now`; returns how many jobs were handled. Costs nothing when no
/// queue skips or catches up all, and one empty range read per pass while no job is
/// late.
pub fn catch_up_late(
    store: &mut Store<'_>,
    config: &Config,
    now: i64,
) -> redis::RedisResult<usize> {
    let policies = &config.catch_up;
    let Some(least_grace) = policies
        .values()
        .filter(|c| c.policy != CatchUpPolicy::Once)
        .map(|c| c.grace)
        .min()
    else {
        return Ok(0);
    };
    // Scores below this are late for every skip queue; each job is then checked
    // against its own queue's grace.
    let cutoff = now.saturating_sub(least_grace as i64);
    let mut skipped = 0;
    let mut offset = 0;
    loop {
        // Jobs of `once` queues stay in the range (the pass that follows moves them),
        // so the pages go by offset; a job skipped or caught up leaves it, so the
        // offset counts only the jobs left.
        let page: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGEBYSCORE")
            .arg(&store.keys.timeline)
            .arg("-inf")
            .arg(format!("({cutoff}"))
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(offset)
            .arg(PAGE)
            .query(store.con)?;
        let mut left = 0;
        for (id, score) in &page {
            let late = std::str::from_utf8(id)
                .ok()
                .zip(score.parse::<f64>().ok())
                .and_then(|(jobid, due)| {
                    let c = policies.get(queue_of(jobid))?;
                    let ok = c.policy != CatchUpPolicy::Once && (now as f64 - due) > c.grace as f64;
                    ok.then_some((jobid, due, c))
                });
            let handled = match late {
                Some((jobid, due, c)) if c.policy == CatchUpPolicy::Skip => {
                    skip(store, config, jobid, score, due, now)?
                }
                Some((jobid, due, c)) => all(store, config, c, jobid, score, due, now)?,
                None => false,
            };
            if handled {
                skipped += 1;
            } else {
                left += 1;
            }
        }
        if page.len() < PAGE as usize {
            return Ok(skipped);
        }
        offset += left;
    }
}

/// The stored schedule of `jobid`: `None` when missing, or not UTF-8 (not a schedule
/// redbike can read: the worker marks it BAD).
fn stored_schedule(store: &mut Store<'_>, jobid: &str) -> redis::RedisResult<Option<String>> {
    let stored: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(&store.keys.schedules)
        .arg(jobid)
        .query(store.con)?;
    Ok(stored.and_then(|b| String::from_utf8(b).ok()))
}

/// Skips one late job; whether it was skipped (not when its schedule does not skip, or
/// the job changed since it was read).
fn skip(
    store: &mut Store<'_>,
    config: &Config,
    jobid: &str,
    score: &str,
    due: f64,
    now: i64,
) -> redis::RedisResult<bool> {
    let Some(text) = stored_schedule(store, jobid)? else {
        return Ok(false);
    };
    // Only a recurring schedule (its next occurrence) or a one-off (stored STOP) is
    // skipped; CONTINUE and AT run late, and a schedule that cannot be read is the
    // worker's to mark BAD.
    // The next run is the job's own: its queue's jitter applies (see crate::jitter).
    let offset = jitter::offset_in(&config.jitter, jobid);
    let next =
        match Schedule::parse(&text).map(|s| jitter::placement(&s, now, config.timezone, offset)) {
            Ok(Ok(Placement::Timeline(ts))) if ts > now => Some(ts),
            Ok(Ok(Placement::Stop)) => None,
            _ => return Ok(false),
        };
    // The entry goes to the history and to the skip's event.
    let entry = (config.history_limit > 0 || config.events > 0).then(|| {
        let end = crate::schedule::timestamp::now_precise();
        let mut e = history::Entry::new(jobid, history::Outcome::Skipped, end, "dispatcher");
        e.due = Some(timestamp::unix_of(due));
        e.late = Some(history::millis(end - due));
        e.detail = match next {
            Some(ts) => format!("next run at {}", timestamp::iso_utc(ts)),
            None => "no run left: stopped".into(),
        };
        e.to_json()
    });
    let skip = Skip {
        jobid,
        score,
        schedule: &text,
        next_run: next,
        now,
        entry,
        history_limit: config.history_limit,
        events: config.events,
    };
    if skip_script(store.con, store.keys, &skip)? == SkipReply::Changed {
        return Ok(false);
    }
    let was = timestamp::iso_utc(timestamp::unix_of(due));
    let late = now - timestamp::unix_of(due);
    match next {
        Some(ts) => crate::log_info!(
            "job {jobid}: skipped its run due at {was} ({late}s late; queue {} catches up with skip); next run at {} (SKP)",
            queue_of(jobid),
            timestamp::iso_utc(ts)
        ),
        None => crate::log_info!(
            "job {jobid}: skipped its run due at {was} ({late}s late; queue {} catches up with skip); no run left, stopped (SKP)",
            queue_of(jobid)
        ),
    }
    Ok(true)
}

/// `word` as one word of a shell command line: as it is when plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

/// Catches up one late job of an `all` queue; whether it was (not when its schedule is
/// not recurring, it missed no further occurrence, or it is running, queued, paused,
/// has a backlog or changed since it was read: the pass queues it once).
fn all(
    store: &mut Store<'_>,
    config: &Config,
    policy: &CatchUp,
    jobid: &str,
    score: &str,
    due: f64,
    now: i64,
) -> redis::RedisResult<bool> {
    let Some(schedule) = stored_schedule(store, jobid)?
        .and_then(|text| Some((Schedule::parse(&text).ok()?, text)))
        .filter(|(s, _)| s.is_recurring())
    else {
        return Ok(false);
    };
    let (schedule, text) = schedule;
    let offset = jitter::offset_in(&config.jitter, jobid);
    // `max` is at most limits::CATCH_UP_MAX, which fits a usize.
    let missed = backfill::missed(
        &schedule,
        timestamp::unix_of(due),
        now,
        config.timezone,
        offset,
        policy.max as usize,
    );
    let Ok(Some(missed)) = missed else {
        return Ok(false);
    };
    let b = Backlog {
        jobid,
        schedule: &text,
        now,
        late_at: Some(score),
        instants: &missed.runs,
        audit: Who::NOBODY.audit("backfill", jobid, ""),
    };
    let reply = match backfill_script(store.con, store.keys, &b) {
        Ok(reply) => reply,
        // A key of another type (`check` names it): the pass queues the job once.
        Err(e) if !(e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) => {
            crate::log_warn!("job {jobid}: cannot catch up its missed runs ({e}); it runs once");
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    if !matches!(reply, BacklogReply::Started(_)) {
        return Ok(false);
    }
    let (first, last) = (missed.runs[0], missed.runs[missed.runs.len() - 1]);
    let dropped = match missed.beyond {
        Some(from) => format!(
            "; the runs due from {} on are dropped (max {}): `redbike backfill {} --from {from} --to {now}` runs them",
            timestamp::iso_utc(from),
            policy.max,
            shell_word(jobid)
        ),
        None => String::new(),
    };
    crate::log_info!(
        "job {jobid}: catching up {} missed run(s) due {} to {} ({}s late; queue {} catches up with all), one at a time{dropped}",
        missed.runs.len(),
        timestamp::iso_utc(first),
        timestamp::iso_utc(last),
        now - first,
        queue_of(jobid)
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn job_ids_in_a_command_line_are_one_word() {
        assert_eq!(shell_word("etl:imports"), "etl:imports");
        assert_eq!(shell_word("a b:Q"), "'a b:Q'");
        assert_eq!(shell_word("it's:Q"), "'it'\\''s:Q'");
    }
}
