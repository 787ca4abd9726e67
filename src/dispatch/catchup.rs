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

use crate::{
    config::{CatchUpPolicy, Config},
    history, jitter,
    redis::keys::queue_of,
    redis::scripts::skip::{skip as skip_script, Skip, SkipReply},
    redis::store::Store,
    schedule::timestamp,
    schedule::{Placement, Schedule},
};

/// Late jobs read per round trip.
const PAGE: isize = 1000;

/// Skips the late occurrences of the jobs of `skip` queues, as of `now`; returns how
/// many were skipped. Costs nothing when no queue skips, and one empty range read per
/// pass while no job is late.
pub fn skip_late(store: &mut Store<'_>, config: &Config, now: i64) -> redis::RedisResult<usize> {
    let policies = &config.catch_up;
    let Some(least_grace) = policies
        .values()
        .filter(|c| c.policy == CatchUpPolicy::Skip)
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
        // so the pages go by offset; a skipped job leaves it, so the offset counts
        // only the jobs left.
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
                    let ok = c.policy == CatchUpPolicy::Skip && (now as f64 - due) > c.grace as f64;
                    ok.then_some((jobid, due))
                });
            match late {
                Some((jobid, due)) if skip(store, config, jobid, score, due, now)? => skipped += 1,
                _ => left += 1,
            }
        }
        if page.len() < PAGE as usize {
            return Ok(skipped);
        }
        offset += left;
    }
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
    let stored: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(&store.keys.schedules)
        .arg(jobid)
        .query(store.con)?;
    // Missing, or not UTF-8 (not a schedule redbike can read: the worker marks it BAD).
    let Some(text) = stored.and_then(|b| String::from_utf8(b).ok()) else {
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
    let entry = (config.history_limit > 0).then(|| {
        let end = crate::schedule::timestamp::now_precise();
        let mut e = history::Entry::new(jobid, history::Outcome::Skipped, end, "dispatcher");
        e.due = Some(due as i64);
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
    };
    if skip_script(store.con, store.keys, &skip)? == SkipReply::Changed {
        return Ok(false);
    }
    let was = timestamp::iso_utc(due as i64);
    let late = now - due as i64;
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
