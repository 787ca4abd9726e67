//! The typed calls of backfill.lua, through which a job gets a backlog of due instants
//! to run, one run each (`redbike backfill`, and the dispatcher's catch-up `all`; see
//! [`crate::backfill`]), and of cancel_backfill.lua (`backfill --cancel`). Their KEYS
//! and ARGV are built here only (their order is the header comment of each script).

use redis::{Connection, RedisResult};

use super::unexpected;
use crate::redis::{
    events::Audit,
    keys::{queue_of, Keys},
};

/// One backfill.lua call.
pub(crate) struct Backlog<'a> {
    /// The job id.
    pub jobid: &'a str,
    /// The schedule the instants were computed from: nothing is written unless the job
    /// still has it.
    pub schedule: &'a str,
    /// Unix time now (of the ENQ status and the due note).
    pub now: i64,
    /// Catch-up: the timeline score the dispatcher read, as Redis gave it; the job is
    /// taken only while it is still due there, neither running, queued nor paused.
    /// `None`: `backfill`, which refuses a paused job and a halted prefix instead.
    pub late_at: Option<&'a str>,
    /// The due instants, oldest first (at least one).
    pub instants: &'a [i64],
    /// The operator's audit entry, written when a backlog was given (catch-up:
    /// [`crate::redis::events::Who::NOBODY`]'s, which writes none).
    pub audit: Audit<'a>,
}

/// What backfill.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BacklogReply {
    /// The job has no schedule; nothing was written.
    Unknown,
    /// Its schedule (or, for catch-up, its timeline score) is not the one read;
    /// nothing was written.
    Changed,
    /// The job is paused; nothing was written.
    Paused,
    /// The prefix is halted; nothing was written.
    Halted,
    /// It has a backlog already, of this many instants; nothing was written.
    Pending(u64),
    /// Catch-up: the job is running, queued or paused; nothing was written.
    Left,
    /// The first instant's run is queued; this many wait in the backlog.
    Started(u64),
    /// It runs or is queued: this many instants wait for that run to end.
    Waiting(u64),
}

/// Calls backfill.lua.
pub(crate) fn backfill(
    con: &mut Connection,
    keys: &Keys,
    b: &Backlog<'_>,
) -> RedisResult<BacklogReply> {
    let mut inv = super::BACKFILL.prepare_invoke();
    for key in keys.job_keys(b.jobid) {
        inv.key(key);
    }
    inv.key(&keys.paused)
        .key(&keys.control)
        .key(&keys.backlogs)
        .key(keys.backlog(b.jobid))
        .key(&keys.due)
        .arg(b.jobid)
        .arg(b.schedule)
        .arg(b.now)
        .arg(keys.queue_wake(queue_of(b.jobid)))
        .arg(b.late_at.unwrap_or(""));
    // Before the instants, which end the arguments.
    b.audit.add_to(&mut inv, keys);
    for instant in b.instants {
        inv.arg(instant);
    }
    let (word, n): (String, u64) = inv.invoke(con)?;
    Ok(match word.as_str() {
        "unknown" => BacklogReply::Unknown,
        "changed" => BacklogReply::Changed,
        "paused" => BacklogReply::Paused,
        "halted" => BacklogReply::Halted,
        "pending" => BacklogReply::Pending(n),
        "left" => BacklogReply::Left,
        "started" => BacklogReply::Started(n),
        "waiting" => BacklogReply::Waiting(n),
        _ => return Err(unexpected("backfill.lua", &word)),
    })
}

/// Calls cancel_backfill.lua for `jobid`: the instants dropped, `None` when it had no
/// backlog; `audit` is written when it had one.
pub(crate) fn cancel(
    con: &mut Connection,
    keys: &Keys,
    jobid: &str,
    audit: &Audit,
) -> RedisResult<Option<u64>> {
    let mut inv = super::CANCEL_BACKFILL.prepare_invoke();
    inv.key(&keys.backlogs).key(keys.backlog(jobid)).arg(jobid);
    audit.add_to(&mut inv, keys);
    let n: i64 = inv.invoke(con)?;
    Ok(u64::try_from(n).ok())
}
