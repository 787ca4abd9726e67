//! The typed calls of run.lua, pause.lua, resume.lua and kill.lua (`redbike run`,
//! `pause`, `resume`, `kill` of a job), and the words they answer, parsed here once.

use redis::{Connection, RedisResult};

use super::unexpected;
use crate::{
    policy::Action,
    redis::events::Audit,
    redis::keys::{queue_of, Keys},
    redis::store::{PlaceItem, Placed},
};

/// What run.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunReply {
    /// The job has no schedule; nothing was written.
    Unknown,
    /// It was in its queue already.
    Queued,
    /// It is running: a marker asks for one more run.
    Running,
    /// It went into its queue.
    Enqueued,
}

/// run.lua's answer: what it did, whether the prefix is halted and whether the job is
/// paused.
pub(crate) struct RunAnswer {
    /// What it did.
    pub reply: RunReply,
    /// Whether the control key says HALT.
    pub halted: bool,
    /// Whether the job is paused.
    pub paused: bool,
}

/// Calls run.lua for `id` at `now`, writing `audit` when it changed something.
pub(crate) fn run(
    con: &mut Connection,
    k: &Keys,
    id: &str,
    now: i64,
    audit: &Audit,
) -> RedisResult<RunAnswer> {
    let mut inv = super::RUN.prepare_invoke();
    for key in k.job_keys(id) {
        inv.key(key);
    }
    inv.key(&k.paused)
        .key(&k.rerun)
        .key(&k.control)
        .arg(id)
        .arg(now)
        .arg(k.queue_wake(queue_of(id)));
    audit.add_to(&mut inv, k);
    let (word, halted, paused): (String, i64, i64) = inv.invoke(con)?;
    let reply = match word.as_str() {
        "unknown" => RunReply::Unknown,
        "queued" => RunReply::Queued,
        "running" => RunReply::Running,
        "enqueued" => RunReply::Enqueued,
        _ => return Err(unexpected("run.lua", &word)),
    };
    Ok(RunAnswer {
        reply,
        halted: halted == 1,
        paused: paused == 1,
    })
}

/// What pause.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PauseReply {
    /// The job has no schedule; nothing was written.
    Unknown,
    /// It was paused already.
    Already,
    /// Paused while it runs.
    Running,
    /// Paused.
    Paused,
}

/// Calls pause.lua for `id`, storing `pause` (the JSON of a `Pause`) at `now`, writing
/// `audit` when it paused the job.
pub(crate) fn pause(
    con: &mut Connection,
    k: &Keys,
    id: &str,
    pause: &str,
    now: i64,
    audit: &Audit,
) -> RedisResult<PauseReply> {
    let mut inv = super::PAUSE.prepare_invoke();
    for key in k.job_keys(id) {
        inv.key(key);
    }
    inv.key(&k.paused).key(&k.rerun).arg(id).arg(pause).arg(now);
    audit.add_to(&mut inv, k);
    let word: String = inv.invoke(con)?;
    match word.as_str() {
        "unknown" => Ok(PauseReply::Unknown),
        "already" => Ok(PauseReply::Already),
        "running" => Ok(PauseReply::Running),
        "paused" => Ok(PauseReply::Paused),
        _ => Err(unexpected("pause.lua", &word)),
    }
}

/// What resume.lua did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResumeReply {
    /// The job was not paused; nothing changed.
    NotPaused,
    /// Its schedule is no longer the one read; nothing changed.
    Changed,
    /// The run asked while it was paused stays queued.
    Asked,
    /// Placed.
    Placed(Placed),
}

/// Calls resume.lua for `item`, read with the schedule `text`, at `now`, writing
/// `audit` when it resumed the job.
pub(crate) fn resume(
    con: &mut Connection,
    k: &Keys,
    item: &PlaceItem,
    text: &str,
    now: i64,
    audit: &Audit,
) -> RedisResult<ResumeReply> {
    let id = item.jobid.as_str();
    let (action, due) = Action::from(item.placement).wire();
    let mut inv = super::RESUME.prepare_invoke();
    for key in k.job_keys(id) {
        inv.key(key);
    }
    inv.key(&k.paused)
        .key(&k.rerun)
        .arg(id)
        .arg(text)
        .arg(&item.stored)
        .arg(action)
        .arg(due)
        .arg(now)
        .arg(k.queue_wake(queue_of(id)))
        .arg(&k.timeline_wake)
        .arg(&item.stored_if_running);
    audit.add_to(&mut inv, k);
    let word: String = inv.invoke(con)?;
    match word.as_str() {
        "not-paused" => Ok(ResumeReply::NotPaused),
        "changed" => Ok(ResumeReply::Changed),
        "asked" => Ok(ResumeReply::Asked),
        placed => Placed::from_reply(placed)
            .map(ResumeReply::Placed)
            .ok_or_else(|| unexpected("resume.lua", placed)),
    }
}

/// What kill.lua found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KillReply {
    /// The job has no schedule and does not run; nothing was written.
    Unknown,
    /// The control key says HALT; nothing was written.
    Halted,
    /// The job does not run; nothing was written.
    Idle,
    /// A worker that takes no kills (the Python original) runs it; nothing was written.
    Python,
    /// The worker holding the run with this lease tag was asked to stop it.
    Asked(String),
}

/// Calls kill.lua for `id`, writing `audit` when it asked for the kill.
pub(crate) fn kill(
    con: &mut Connection,
    k: &Keys,
    id: &str,
    audit: &Audit,
) -> RedisResult<KillReply> {
    let mut inv = super::KILL.prepare_invoke();
    inv.key(&k.schedules)
        .key(k.lease(id))
        .key(&k.leases)
        .key(&k.kill)
        .key(&k.control)
        .arg(id)
        .arg(&k.control_wake);
    audit.add_to(&mut inv, k);
    let (word, tag): (String, Option<String>) = inv.invoke(con)?;
    match (word.as_str(), tag) {
        ("unknown", _) => Ok(KillReply::Unknown),
        ("halted", _) => Ok(KillReply::Halted),
        ("idle", _) => Ok(KillReply::Idle),
        ("python", _) => Ok(KillReply::Python),
        ("asked", Some(tag)) => Ok(KillReply::Asked(tag)),
        _ => Err(unexpected("kill.lua", &word)),
    }
}
