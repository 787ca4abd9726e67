//! Operator control of single jobs and queues: `run` (once now, keeping the schedule),
//! `pause` and `resume` of a job or of a whole queue. The keys are new here
//! (`P-paused`, `P-paused-queues`, `P-rerun`); the Python original ignores them (see
//! docs/control.md for what a mixed fleet does).

use redis::Commands;

use crate::{
    config::Config,
    error::{Error, Result},
    jitter,
    redis::keys::queue_of,
    redis::scripts,
    redis::store::{PlaceItem, Placed, Store},
    schedule::{Placement, Schedule},
};

pub use crate::redis::pause::Pause;

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

/// `redbike run JOBID`: runs the job once as soon as a worker is free (run.lua).
pub fn run_job(store: &mut Store<'_>, id: &str, now: i64) -> Result<RunReport> {
    let k = store.keys;
    let mut inv = scripts::RUN.prepare_invoke();
    for key in k.job_keys(id) {
        inv.key(key);
    }
    inv.key(&k.paused)
        .key(&k.rerun)
        .key(&k.control)
        .arg(id)
        .arg(now)
        .arg(k.queue_wake(queue_of(id)));
    let (result, halted, paused): (String, i64, i64) = inv.invoke(store.con)?;
    let ran = match result.as_str() {
        "unknown" => return Err(unknown(id)),
        "queued" => Ran::AlreadyQueued,
        "running" => Ran::Running,
        _ => Ran::Enqueued,
    };
    Ok(RunReport {
        ran,
        paused: paused == 1,
        halted: halted == 1,
    })
}

/// `redbike pause JOBID`: takes the job out of circulation, keeping its schedule
/// (pause.lua).
pub fn pause_job(store: &mut Store<'_>, id: &str, note: &str, now: i64) -> Result<Paused> {
    let k = store.keys;
    let mut inv = scripts::PAUSE.prepare_invoke();
    for key in k.job_keys(id) {
        inv.key(key);
    }
    inv.key(&k.paused)
        .key(&k.rerun)
        .arg(id)
        .arg(Pause::new(now, note).to_json())
        .arg(now);
    let result: String = inv.invoke(store.con)?;
    match result.as_str() {
        "unknown" => Err(unknown(id)),
        "already" => Ok(Paused::Already),
        "running" => Ok(Paused::Running),
        _ => Ok(Paused::Paused),
    }
}

/// `redbike resume JOBID`: ends the pause and places the job per its schedule from
/// `now` (resume.lua); occurrences missed while it was paused are not run.
pub fn resume_job(store: &mut Store<'_>, config: &Config, id: &str, now: i64) -> Result<Resumed> {
    let k = store.keys;
    // The schedule may change under us (a `set`); read it again then, a few times.
    for _ in 0..5 {
        let (text, paused): (Option<String>, bool) = redis::pipe()
            .hget(&k.schedules, id)
            .hexists(&k.paused, id)
            .query(store.con)?;
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
        let (act, due) = match placement {
            Placement::Enqueue => ("enqueue", 0),
            Placement::Timeline(ts) => ("timeline", ts),
            Placement::Stop => ("stop", 0),
        };
        let mut inv = scripts::RESUME.prepare_invoke();
        for key in k.job_keys(id) {
            inv.key(key);
        }
        inv.key(&k.paused)
            .key(&k.rerun)
            .arg(id)
            .arg(&text)
            .arg(&item.stored)
            .arg(act)
            .arg(due)
            .arg(now)
            .arg(k.queue_wake(queue_of(id)))
            .arg(&k.timeline_wake)
            .arg(&item.stored_if_running);
        let reply: String = inv.invoke(store.con)?;
        match reply.as_str() {
            "not-paused" => return Ok(Resumed::NotPaused),
            "changed" => continue,
            "asked" => return Ok(Resumed::RunAsked),
            placed => return Ok(Resumed::Placed(placement, placed_of(placed))),
        }
    }
    Err(Error::Input(format!(
        "job {id:?}: its schedule keeps changing under `resume`; try again"
    )))
}

fn placed_of(reply: &str) -> Placed {
    match reply {
        "enqueued" => Placed::Enqueued,
        "queued" => Placed::AlreadyQueued,
        "running" => Placed::Running,
        "timeline" => Placed::Timeline,
        _ => Placed::Stopped,
    }
}

/// `redbike pause --queue Q`: our workers stop claiming from Q; false when it was
/// paused already (nothing changed).
pub fn pause_queue(store: &mut Store<'_>, queue: &str, note: &str, now: i64) -> Result<bool> {
    check_control_keys(store)?;
    let added: bool = store.con.hset_nx(
        &store.keys.paused_queues,
        queue,
        Pause::new(now, note).to_json(),
    )?;
    Ok(added)
}

/// `redbike resume --queue Q`: our workers claim from Q again, and idle ones are woken;
/// false when it was not paused (nothing changed).
pub fn resume_queue(store: &mut Store<'_>, queue: &str) -> Result<bool> {
    check_control_keys(store)?;
    let (removed, _): (i64, i64) = redis::pipe()
        .hdel(&store.keys.paused_queues, queue)
        .publish(store.keys.queue_wake(queue), 1)
        .query(store.con)?;
    Ok(removed == 1)
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
    fn queue_names() {
        assert!(validate_queue("A").is_ok());
        for bad in ["", "a:b", " A", "A-members", "A-A", "x\ny"] {
            assert!(validate_queue(bad).is_err(), "{bad:?}");
        }
    }
}
