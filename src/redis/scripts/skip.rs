//! The typed call of skip.lua: the dispatcher skips a late occurrence of a job in a
//! `catch-up = "skip"` queue. Its KEYS and ARGV are built here only (their order is
//! the header comment of skip.lua).

use redis::{Connection, RedisResult};

use crate::{
    history::{RECENT_FAILURES, RECENT_RUNS},
    policy::Action,
    redis::{keys::Keys, scripts},
};

/// One skip.lua call.
pub(crate) struct Skip<'a> {
    /// The job id.
    pub jobid: &'a str,
    /// The timeline score the dispatcher read, as Redis gave it: the job is skipped only
    /// while it is still due at that score.
    pub score: &'a str,
    /// The schedule read, from which `next_run` was computed: the job is skipped only
    /// while its schedule is still this one.
    pub schedule: &'a str,
    /// Its next occurrence; `None` takes it off the timeline (a one-off, or a rule with
    /// no run left).
    pub next_run: Option<i64>,
    /// Unix time now (of the SKP status and last failure).
    pub now: i64,
    /// The history entry of the skip, JSON (`None`: history and events are off).
    pub entry: Option<String>,
    /// History entries kept per job (0: none written).
    pub history_limit: u64,
    /// Entries kept in the event stream (0: none written).
    pub events: u64,
}

/// What skip.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SkipReply {
    /// The occurrence was skipped.
    Skipped,
    /// The job changed since it was read (a `set` or another dispatcher wins); nothing
    /// was written.
    Changed,
}

/// Calls skip.lua.
pub(crate) fn skip(con: &mut Connection, keys: &Keys, s: &Skip<'_>) -> RedisResult<SkipReply> {
    let (action, at) = s.next_run.map_or(Action::Stop, Action::Timeline).wire();
    let reply: String = scripts::SKIP
        .key(&keys.timeline)
        .key(&keys.statuses)
        .key(&keys.failures)
        .key(&keys.schedules)
        .key(keys.history(s.jobid))
        .key(&keys.recent_runs)
        .key(&keys.recent_failures)
        .key(&keys.due)
        .key(&keys.events)
        .arg(s.jobid)
        .arg(s.score)
        .arg(s.schedule)
        .arg(action)
        .arg(at)
        .arg(s.now)
        .arg(s.entry.as_deref().unwrap_or_default())
        .arg(s.history_limit)
        .arg(RECENT_RUNS)
        .arg(RECENT_FAILURES)
        .arg(s.events)
        .invoke(con)?;
    match reply.as_str() {
        "skipped" => Ok(SkipReply::Skipped),
        "changed" => Ok(SkipReply::Changed),
        _ => Err(super::unexpected("skip.lua", &reply)),
    }
}
