//! Operator control of a prefix, its jobs and queues: `control` (HALT, RESUME), `run`
//! (once now, keeping the schedule), `pause` and `resume` of a job or of a whole queue,
//! `kill` (stop a job's current run). The keys are new here (`P-paused`,
//! `P-paused-queues`, `P-rerun`, `P-kill`); the Python original ignores them (see
//! docs/control.md for what a mixed fleet does).

use crate::{
    config::Config,
    error::{Error, Result},
    jitter, jobid,
    redis::events::Who,
    redis::pause,
    redis::scripts::control::{self, KillReply, PauseReply, ResumeReply, RunReply},
    redis::store::{with_store, PlaceItem, Placed, Store},
    schedule::{Placement, Schedule},
    shard,
};

pub use crate::redis::pause::Pause;

/// A signal of `redbike control` to the dispatchers and workers of a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Stop them.
    Halt,
    /// Clear HALT.
    Resume,
}

impl Signal {
    /// Reads `HALT` or `RESUME`, in any case, spaces around allowed.
    pub fn parse(text: &str) -> Result<Signal> {
        match text.trim().to_ascii_uppercase().as_str() {
            "HALT" => Ok(Signal::Halt),
            "RESUME" => Ok(Signal::Resume),
            other => Err(Error::Input(format!(
                "unknown control signal {other:?}; use HALT or RESUME"
            ))),
        }
    }
}

impl Signal {
    /// The word, as `control` takes it.
    pub fn word(self) -> &'static str {
        match self {
            Signal::Halt => "HALT",
            Signal::Resume => "RESUME",
        }
    }
}

/// `redbike control SIGNAL`: sets (HALT) or clears (RESUME) the control key of every
/// shard of `config`'s prefix, then writes `who`'s audit entry (once, in the first
/// shard's stream).
pub fn signal(config: &Config, signal: Signal, who: &Who) -> Result<()> {
    let shards = shard::checked_all(config)?;
    for config in &shards {
        with_store(&config.redis, |store| match signal {
            Signal::Halt => store.control("HALT"),
            Signal::Resume => store.clear_control(),
        })?;
    }
    write_once(&shards, who, "control", "", signal.word())
}

/// Writes one audit entry for an action done in every shard of `shards`: in the first
/// shard's stream (readers merge the shards' streams).
pub(crate) fn write_once(
    shards: &[Config],
    who: &Who,
    action: &str,
    target: &str,
    detail: &str,
) -> Result<()> {
    let Some(first) = shards.first().filter(|_| who.events > 0) else {
        return Ok(());
    };
    let audit = who.audit(action, target, detail);
    with_store(
        &first.redis,
        |store| Ok(audit.write(store.con, store.keys)?),
    )
}

/// What `run` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// It went into its queue.
    Enqueued,
    /// It was in its queue already: nothing changed.
    AlreadyQueued,
    /// It is running: it runs once more right after (our workers).
    Running,
}

/// What `run` found and did, and whether the prefix is halted (nothing runs then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunReport {
    /// What it did.
    pub ran: Ran,
    /// Whether the job is paused (it runs once and stays paused).
    pub paused: bool,
    /// Whether the control key says HALT.
    pub halted: bool,
}

/// What `pause` did to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    /// Paused (it was on the timeline, in its queue, or stopped).
    Paused,
    /// Paused while it runs: the run finishes, then the job is not placed.
    Running,
    /// It was paused already: nothing changed.
    Already,
}

/// What `resume` did to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumed {
    /// It was not paused: nothing changed.
    NotPaused,
    /// Placed per its schedule from now.
    Placed(Placement, Placed),
    /// Left in its queue for the run asked while it was paused (`redbike run`); placed
    /// per its schedule after that run.
    RunAsked,
}

/// What `kill` found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Killed {
    /// The worker running the job was asked to stop this run (the lease tag names it).
    Asked {
        /// The lease tag of the run.
        tag: String,
    },
    /// The job does not run: nothing was written.
    NotRunning,
    /// The prefix is halted (`control HALT`): nothing was written.
    Halted,
    /// A worker that takes no kills (the Python original) runs it: nothing was written.
    Python,
}

fn unknown(id: &str) -> Error {
    Error::Input(format!(
        "unknown job {id:?}: it has no schedule; nothing was written (see `redbike schedules`)"
    ))
}

/// Checks a queue name given to `pause --queue`/`resume --queue`: the name a job id
/// without ':' would give (queues need not exist yet).
pub fn validate_queue(queue: &str) -> Result<()> {
    if queue.contains(':') {
        return Err(Error::Input(format!(
            "bad queue name {queue:?}: a queue name has no ':' (it is the part of a job id after the last ':')"
        )));
    }
    // A queue name follows the job id rules; the message speaks of the queue name.
    crate::jobid::validate(queue).map_err(|e| {
        use crate::jobid::{JobIdError as E, MAX_JOBID_BYTES};
        let why = match e {
            E::Empty => "it is empty".to_string(),
            E::TooLong(n) => format!("it is {n} bytes long; the limit is {MAX_JOBID_BYTES}"),
            E::Control(_) => "it contains a control character".into(),
            E::Whitespace(_) => "it has white space at its start or end; remove it".into(),
            E::Collides { why, .. } => format!("{why}; pick another queue name"),
            e @ (E::NoQueue(_) | E::Reserved(_)) => e.to_string(),
        };
        Error::Input(format!("bad queue name {queue:?} (--queue): {why}"))
    })
}

/// Fails, naming the key, unless each of the control keys is a hash or missing.
fn check_control_keys(store: &mut Store<'_>) -> Result<()> {
    let k = store.keys;
    let keys = [
        (k.paused.clone(), "hash"),
        (k.paused_queues.clone(), "hash"),
        (k.rerun.clone(), "hash"),
    ];
    store.check_types(&keys)
}

/// The longest `--note` accepted, in bytes.
pub const MAX_NOTE_BYTES: usize = 1024;

fn check_note(note: &str) -> Result<()> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(Error::Input(format!(
            "--note is {} bytes long; the limit is {MAX_NOTE_BYTES}",
            note.len()
        )));
    }
    Ok(())
}

/// [`run_job`] on `config`'s prefix, in the job's shard.
pub fn run(config: &Config, id: &str, now: i64, who: &Who) -> Result<RunReport> {
    jobid::validate_placeable(id)?;
    let config = &shard::checked_for_job(config, id)?;
    with_store(&config.redis, |store| run_job(store, id, now, who))
}

/// [`pause_job`] on `config`'s prefix, in the job's shard.
pub fn pause(config: &Config, id: &str, note: &str, now: i64, who: &Who) -> Result<Paused> {
    check_note(note)?;
    // As placeable as `resume` needs: a pause that resume refuses would never end, and
    // a colliding queue's key is another key of ours, which pause.lua would meet.
    jobid::validate_placeable(id)?;
    let config = &shard::checked_for_job(config, id)?;
    with_store(&config.redis, |store| pause_job(store, id, note, now, who))
}

/// [`resume_job`] on `config`'s prefix, in the job's shard.
pub fn resume(config: &Config, id: &str, now: i64, who: &Who) -> Result<Resumed> {
    jobid::validate_placeable(id)?;
    let config = &shard::checked_for_job(config, id)?;
    with_store(&config.redis, |store| {
        resume_job(store, config, id, now, who)
    })
}

/// [`kill_job`] on `config`'s prefix, in the job's shard.
pub fn kill(config: &Config, id: &str, who: &Who) -> Result<Killed> {
    jobid::validate_stored(id)?;
    let config = &shard::checked_for_job(config, id)?;
    with_store(&config.redis, |store| kill_job(store, id, who))
}

/// [`pause_queue`] in every shard of `config`'s prefix; false when it was paused in
/// all of them already. `who`'s audit entry is written once, when it changed anything.
pub fn pause_queue_everywhere(
    config: &Config,
    queue: &str,
    note: &str,
    now: i64,
    who: &Who,
) -> Result<bool> {
    check_note(note)?;
    validate_queue(queue)?;
    let mut added = false;
    let shards = shard::checked_all(config)?;
    for config in &shards {
        added |= with_store(&config.redis, |store| {
            pause_queue(store, queue, note, now, &Who::NOBODY)
        })?;
    }
    if added {
        write_once(&shards, who, "pause", &format!("queue:{queue}"), note)?;
    }
    Ok(added)
}

/// [`resume_queue`] in every shard of `config`'s prefix; false when it was paused in
/// none of them. `who`'s audit entry is written once, when it changed anything.
pub fn resume_queue_everywhere(config: &Config, queue: &str, who: &Who) -> Result<bool> {
    validate_queue(queue)?;
    let mut removed = false;
    let shards = shard::checked_all(config)?;
    for config in &shards {
        removed |= with_store(&config.redis, |store| {
            resume_queue(store, queue, &Who::NOBODY)
        })?;
    }
    if removed {
        write_once(&shards, who, "resume", &format!("queue:{queue}"), "")?;
    }
    Ok(removed)
}

/// `redbike run JOBID`: runs the job once as soon as a worker is free (run.lua), with
/// `who`'s audit entry when that changed anything.
pub fn run_job(store: &mut Store<'_>, id: &str, now: i64, who: &Who) -> Result<RunReport> {
    let audit = who.audit("run", id, "");
    let answer = control::run(store.con, store.keys, id, now, &audit)?;
    let ran = match answer.reply {
        RunReply::Unknown => return Err(unknown(id)),
        RunReply::Queued => Ran::AlreadyQueued,
        RunReply::Running => Ran::Running,
        RunReply::Enqueued => Ran::Enqueued,
    };
    Ok(RunReport {
        ran,
        paused: answer.paused,
        halted: answer.halted,
    })
}

/// `redbike pause JOBID`: takes the job out of circulation, keeping its schedule
/// (pause.lua), with `who`'s audit entry (the note its detail) when it was not paused.
pub fn pause_job(
    store: &mut Store<'_>,
    id: &str,
    note: &str,
    now: i64,
    who: &Who,
) -> Result<Paused> {
    let pause = Pause::new(now, note).to_json();
    let audit = who.audit("pause", id, note);
    match control::pause(store.con, store.keys, id, &pause, now, &audit)? {
        PauseReply::Unknown => Err(unknown(id)),
        PauseReply::Already => Ok(Paused::Already),
        PauseReply::Running => Ok(Paused::Running),
        PauseReply::Paused => Ok(Paused::Paused),
    }
}

/// `redbike resume JOBID`: ends the pause and places the job per its schedule from
/// `now` (resume.lua); occurrences missed while it was paused are not run. `who`'s
/// audit entry goes with it.
pub fn resume_job(
    store: &mut Store<'_>,
    config: &Config,
    id: &str,
    now: i64,
    who: &Who,
) -> Result<Resumed> {
    let audit = who.audit("resume", id, "");
    // The schedule may change under us (a `set`); read it again then, a few times.
    for _ in 0..5 {
        let (text, paused) = pause::schedule_and_paused(store, id)?;
        let Some(text) = text else {
            return Err(unknown(id));
        };
        if !paused {
            return Ok(Resumed::NotPaused);
        }
        let schedule = Schedule::parse(&text).map_err(|e| {
            Error::Input(format!(
                "job {id:?} cannot be resumed: its schedule {text:?} cannot be parsed ({e}); set a schedule first (it stays paused)"
            ))
        })?;
        let offset = jitter::offset_in(&config.jitter, id);
        let placement =
            jitter::placement(&schedule, now, config.timezone, offset).map_err(|e| {
                Error::Input(format!(
                    "job {id:?} cannot be resumed: its schedule {text:?} gives no run ({e}); set a schedule first (it stays paused)"
                ))
            })?;
        let item = PlaceItem::new(id, &schedule, &text, placement);
        match control::resume(store.con, store.keys, &item, &text, now, &audit)? {
            ResumeReply::NotPaused => return Ok(Resumed::NotPaused),
            ResumeReply::Changed => continue,
            ResumeReply::Asked => {
                restart_deadline(store, config, id, &schedule, now);
                return Ok(Resumed::RunAsked);
            }
            ResumeReply::Placed(placed) => {
                restart_deadline(store, config, id, &schedule, now);
                return Ok(Resumed::Placed(placement, placed));
            }
        }
    }
    Err(Error::Input(format!(
        "job {id:?}: its schedule keeps changing under `resume`; try again"
    )))
}

/// A resumed job's deadline starts afresh from `now` (see [`crate::stale`]: a
/// dispatcher dropped it while the job was paused), so that a job that never succeeds
/// after its pause goes stale too. A write of its own after resume.lua's: a job unset
/// meanwhile leaves a deadline that the next dispatcher pass drops (it has no schedule);
/// a key of another type there (`check` names it) is left alone.
fn restart_deadline(
    store: &mut Store<'_>,
    config: &Config,
    id: &str,
    schedule: &Schedule,
    now: i64,
) {
    let Some(deadline) = config.policy().bounds().deadline(id, schedule, now, 0) else {
        return;
    };
    let _: redis::RedisResult<i64> = redis::cmd("ZADD")
        .arg(&store.keys.fresh_until)
        .arg(deadline)
        .arg(id)
        .query(store.con);
}

/// `redbike kill JOBID`: asks the worker that runs the job to stop this run (kill.lua);
/// the job then goes on per its schedule. `who`'s audit entry goes with the request.
pub fn kill_job(store: &mut Store<'_>, id: &str, who: &Who) -> Result<Killed> {
    let audit = who.audit("kill", id, "");
    match control::kill(store.con, store.keys, id, &audit)? {
        KillReply::Unknown => Err(unknown(id)),
        KillReply::Halted => Ok(Killed::Halted),
        KillReply::Idle => Ok(Killed::NotRunning),
        KillReply::Python => Ok(Killed::Python),
        KillReply::Asked(tag) => Ok(Killed::Asked { tag }),
    }
}

/// `redbike pause --queue Q`: our workers stop claiming from Q; false when it was
/// paused already (nothing changed), else `who`'s audit entry is written after.
pub fn pause_queue(
    store: &mut Store<'_>,
    queue: &str,
    note: &str,
    now: i64,
    who: &Who,
) -> Result<bool> {
    check_control_keys(store)?;
    let added = pause::pause_queue(store, queue, &Pause::new(now, note))?;
    if added {
        let target = format!("queue:{queue}");
        who.audit("pause", &target, note)
            .write(store.con, store.keys)?;
    }
    Ok(added)
}

/// `redbike resume --queue Q`: our workers claim from Q again, and idle ones are woken;
/// false when it was not paused (nothing changed), else `who`'s audit entry is written
/// after.
pub fn resume_queue(store: &mut Store<'_>, queue: &str, who: &Who) -> Result<bool> {
    check_control_keys(store)?;
    let removed = pause::resume_queue(store, queue)?;
    if removed {
        let target = format!("queue:{queue}");
        who.audit("resume", &target, "")
            .write(store.con, store.keys)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_round_trip_and_tolerate_hand_written_entries() {
        let p = Pause::new(1_700_000_000, "db \"migration\"\n");
        let back = Pause::parse(&p.to_json());
        assert_eq!((back.since, back.note.as_str()), (p.since, p.note.as_str()));
        assert_eq!(back.since_utc.as_deref(), Some("2023-11-14T22:13:20Z"));
        assert!(!p.to_json().contains("since_utc"));
        let odd = Pause::parse("by hand");
        assert_eq!(
            (odd.since, odd.note.as_str(), odd.since_utc),
            (0, "by hand", None)
        );
    }

    #[test]
    fn control_signals() {
        assert_eq!(Signal::parse(" halt ").unwrap(), Signal::Halt);
        assert_eq!(Signal::parse("Resume").unwrap(), Signal::Resume);
        let e = Signal::parse("stop").unwrap_err().to_string();
        assert!(e.contains("\"STOP\""), "{e}");
    }

    #[test]
    fn queue_names() {
        assert!(validate_queue("A").is_ok());
        for bad in ["", "a:b", " A", "A-members", "A-A", "x\ny"] {
            assert!(validate_queue(bad).is_err(), "{bad:?}");
        }
    }
}
