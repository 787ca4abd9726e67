//! The Lua scripts that make multi-step changes atomic. Each lives next to this file (in
//! `src/redis/scripts/`) with a KEYS/ARGV header, and is prefixed with `common.lua`,
//! which holds the enqueue rule and the placement logic. Each script has one typed Rust
//! function, the only code that builds its KEYS and ARGV:
//!
//! | script | typed function |
//! | --- | --- |
//! | claim, refresh, release, finish | `worker.rs` (`add_claim`, `add_refresh`, `add_release`, `add_finish`) |
//! | recover | `recovery.rs` |
//! | skip | `skip.rs` |
//! | backfill, cancel_backfill | `backlog.rs` |
//! | place, place_many, places, unset | `Store::place`, `Store::place_many`, `Store::places`, `Store::unset` (`redis/store.rs`) |
//! | register | `Registration::register` (`redis/registry.rs`) |
//! | dispatch | `dispatch::pass::pass_with` |
//! | sweep, sweep_claimed | `dispatch::lost_jobs::sweep` |
//! | stale | `dispatch::staleness::pass` |
//! | repair | `check`'s `fix` (`operator/check.rs`) |
//! | run, pause, resume, kill | `run`, `pause`, `resume`, `kill` (`control.rs`) |
//! | file_history | `redis::history::file_oldest` |
//! | notify_state, notify_release | `notify::state::apply`, `notify::state::release` |

pub(crate) mod backlog;
pub(crate) mod control;
pub(crate) mod recovery;
pub(crate) mod skip;
pub(crate) mod worker;

use std::sync::LazyLock;

use redis::Script;

/// A yes/no argument of a script, as every script reads one (`== "1"`).
pub(crate) fn flag(yes: bool) -> &'static str {
    if yes {
        "1"
    } else {
        "0"
    }
}

/// The error of a script that answered a word its typed function does not know (a
/// script and its caller out of step: a bug).
pub(crate) fn unexpected(script: &str, word: &str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected script reply",
        format!("{script} answered {word:?}"),
    ))
}

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(concat!(include_str!("common.lua"), include_str!($file))))
    };
}

/// `set`/`load`: store a schedule and place the job.
pub static PLACE: LazyLock<Script> = script!("place.lua");
/// `unset`: forget a job.
pub static UNSET: LazyLock<Script> = script!("unset.lua");
/// `dispatch`: move a batch of due jobs into their queues.
pub static DISPATCH: LazyLock<Script> = script!("dispatch.lua");
/// `dispatch`: skip a late occurrence of a job in a `skip` queue.
pub static SKIP: LazyLock<Script> = script!("skip.lua");
/// `backfill` and catch-up `all`: give a job a backlog of due instants to run.
pub static BACKFILL: LazyLock<Script> = script!("backfill.lua");
/// `backfill --cancel`: drop what is left of a job's backlog.
pub static CANCEL_BACKFILL: LazyLock<Script> = script!("cancel_backfill.lua");
/// `work`: claim (pop and lease) jobs along the queue cycle.
pub static CLAIM: LazyLock<Script> = script!("claim.lua");
/// `work`: confirm running jobs (push their recovery instants forward).
pub static REFRESH: LazyLock<Script> = script!("refresh.lua");
/// `work`: hand back a job claimed ahead that never started.
pub static RELEASE: LazyLock<Script> = script!("release.lua");
/// `work`: record the outcomes of a batch of runs and reschedule the jobs.
pub static FINISH: LazyLock<Script> = script!("finish.lua");
/// `work`: move the oldest unfiled history entries into their jobs' lists.
pub static FILE_HISTORY: LazyLock<Script> = script!("file_history.lua");
/// Recovery: put back a job whose worker vanished.
pub static RECOVER: LazyLock<Script> = script!("recover.lua");
/// Recovery: one step of the sweep for jobs out of circulation.
pub static SWEEP: LazyLock<Script> = script!("sweep.lua");
/// Recovery: one step of the quick walk for the jobs a Python worker died with.
pub static SWEEP_CLAIMED: LazyLock<Script> = script!("sweep_claimed.lua");
/// `check --repair`: one idempotent fix.
pub static REPAIR: LazyLock<Script> = script!("repair.lua");
/// `load`: place a batch of jobs in one call.
pub static PLACE_MANY: LazyLock<Script> = script!("place_many.lua");
/// `check`: where a batch of jobs is, atomically.
pub static PLACES: LazyLock<Script> = script!("places.lua");
/// `dispatch` and `work`: register as a live process, dropping expired ones.
pub static REGISTER: LazyLock<Script> = script!("register.lua");
/// `run`: queue a job now, or ask for one more run after the current one.
pub static RUN: LazyLock<Script> = script!("run.lua");
/// Every command on a prefix with a hash tag: read (and record) its number of shards.
pub static SHARDS: LazyLock<Script> = script!("shards.lua");
/// `pause`: take a job out of circulation, keeping its schedule.
pub static PAUSE: LazyLock<Script> = script!("pause.lua");
/// `resume`: end a job's pause and place it per its schedule.
pub static RESUME: LazyLock<Script> = script!("resume.lua");
/// A dead worker's running-index entries fall due for recovery now.
pub static DIED: LazyLock<Script> = script!("died.lua");
/// `dispatch`: mark the jobs whose deadline passed as stale (crate::stale).
pub static STALE: LazyLock<Script> = script!("stale.lua");
/// `kill`: ask the worker that runs a job to stop this run.
pub static KILL: LazyLock<Script> = script!("kill.lua");
/// `notify`: record a state an event shows; whether it is a change to report.
pub static NOTIFY_STATE: LazyLock<Script> = script!("notify_state.lua");
/// `notify`: report the changes a job's rate limit held back, at the window's end.
pub static NOTIFY_RELEASE: LazyLock<Script> = script!("notify_release.lua");
