//! The Lua scripts that make multi-step changes atomic. Each lives next to this file (in
//! `src/redis/scripts/`) with a KEYS/ARGV header, and is prefixed with the helpers of
//! `common.lua` it uses ([`assemble`]), which hold the enqueue rule and the placement
//! logic among others. Each script has one typed Rust
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
//! | repair | `check`'s `fix` (`operator/check/mod.rs`) |
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

/// The helpers of `common.lua` a script uses, then the script: its text as Redis gets it.
/// A helper (a top-level `local` of common.lua with the comments right above it) goes
/// in when the script or a helper that goes in names it. Each helper in the text costs
/// every call of the script, since Lua makes a closure of each `local function` at each
/// run: the claim's and finish's share of the unused ones was about 1.5 % of what a job
/// costs Redis at `-j 8`, 3 % at `-j 1` (BENCHMARKS.md).
pub fn assemble(script: &str) -> String {
    let helpers = helpers(include_str!("common.lua"));
    let mut wanted = names_in(script);
    let mut keep = vec![false; helpers.len()];
    // Until no helper is added: each added one may name others.
    loop {
        let mut added = false;
        for (i, h) in helpers.iter().enumerate() {
            if !keep[i] && h.names.iter().any(|n| wanted.contains(n)) {
                keep[i] = true;
                added = true;
                wanted.extend(names_in(h.text));
            }
        }
        if !added {
            break;
        }
    }
    let mut out = String::new();
    for (h, _) in helpers.iter().zip(&keep).filter(|(_, k)| **k) {
        out.push_str(h.text);
    }
    out.push_str(script);
    out
}

/// One top-level definition of common.lua: the names it defines and its text.
struct Helper<'a> {
    names: Vec<&'a str>,
    text: &'a str,
}

/// common.lua's top-level definitions, in order: each starts at a line `local ...` (or
/// at the comment lines right above it) and ends where the next starts. What comes
/// before the first (the file's heading) belongs to none.
fn helpers(common: &str) -> Vec<Helper<'_>> {
    let mut starts = Vec::new(); // (where its text starts, the `local` line)
    let mut comment_from = None;
    let mut at = 0;
    for line in common.split_inclusive('\n') {
        if line.starts_with("--") {
            comment_from.get_or_insert(at);
        } else {
            if let Some(rest) = line.strip_prefix("local ") {
                starts.push((comment_from.unwrap_or(at), rest));
            }
            comment_from = None;
        }
        at += line.len();
    }
    let ends = starts
        .iter()
        .skip(1)
        .map(|(from, _)| *from)
        .chain([common.len()]);
    starts
        .iter()
        .zip(ends)
        .map(|(&(from, rest), to)| {
            let defined = match rest.strip_prefix("function ") {
                Some(f) => f.split('(').next().unwrap_or(f),
                None => rest.split('=').next().unwrap_or(rest),
            };
            Helper {
                names: words(defined).collect(),
                text: &common[from..to],
            }
        })
        .collect()
}

/// The names `code` uses, comments left out (a `--` after a quote on its line may be
/// in a string, so such a line is read whole: a name too many only keeps a helper).
fn names_in(code: &str) -> std::collections::HashSet<&str> {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(|l| match l.find("--") {
            Some(i) if !l[..i].contains(['"', '\'']) => &l[..i],
            _ => l,
        })
        .flat_map(words)
        .collect()
}

/// The identifiers (and numbers) of a piece of Lua.
fn words(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Each script's static ([`Script`], loaded by hash at its first use) and [`all`].
macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident = $file:literal;)*) => {
        $(
            $(#[$doc])*
            pub static $name: LazyLock<Script> =
                LazyLock::new(|| Script::new(&assemble(include_str!($file))));
        )*

        /// Every script: its file name and its text as Redis gets it ([`assemble`]).
        pub fn all() -> Vec<(&'static str, String)> {
            vec![$(($file, assemble(include_str!($file)))),*]
        }
    };
}

scripts! {
    /// `set`/`load`: store a schedule and place the job.
    PLACE = "place.lua";
    /// `unset`: forget a job.
    UNSET = "unset.lua";
    /// `dispatch`: move a batch of due jobs into their queues.
    DISPATCH = "dispatch.lua";
    /// `dispatch`: skip a late occurrence of a job in a `skip` queue.
    SKIP = "skip.lua";
    /// `backfill` and catch-up `all`: give a job a backlog of due instants to run.
    BACKFILL = "backfill.lua";
    /// `backfill --cancel`: drop what is left of a job's backlog.
    CANCEL_BACKFILL = "cancel_backfill.lua";
    /// `work`: claim (pop and lease) jobs along the queue cycle.
    CLAIM = "claim.lua";
    /// `work`: confirm running jobs (push their recovery instants forward).
    REFRESH = "refresh.lua";
    /// `work`: hand back a job claimed ahead that never started.
    RELEASE = "release.lua";
    /// `work`: record the outcomes of a batch of runs and reschedule the jobs.
    FINISH = "finish.lua";
    /// `work`: move the oldest unfiled history entries into their jobs' lists.
    FILE_HISTORY = "file_history.lua";
    /// Recovery: put back a job whose worker vanished.
    RECOVER = "recover.lua";
    /// Recovery: one step of the sweep for jobs out of circulation.
    SWEEP = "sweep.lua";
    /// Recovery: one step of the quick walk for the jobs a Python worker died with.
    SWEEP_CLAIMED = "sweep_claimed.lua";
    /// `check --repair`: one idempotent fix.
    REPAIR = "repair.lua";
    /// `load`: place a batch of jobs in one call.
    PLACE_MANY = "place_many.lua";
    /// `check`: where a batch of jobs is, atomically.
    PLACES = "places.lua";
    /// `dispatch` and `work`: register as a live process, dropping expired ones.
    REGISTER = "register.lua";
    /// `run`: queue a job now, or ask for one more run after the current one.
    RUN = "run.lua";
    /// Every command on a prefix with a hash tag: read (and record) its number of shards.
    SHARDS = "shards.lua";
    /// `pause`: take a job out of circulation, keeping its schedule.
    PAUSE = "pause.lua";
    /// `resume`: end a job's pause and place it per its schedule.
    RESUME = "resume.lua";
    /// A dead worker's running-index entries fall due for recovery now.
    DIED = "died.lua";
    /// `dispatch`: mark the jobs whose deadline passed as stale (crate::stale).
    STALE = "stale.lua";
    /// `kill`: ask the worker that runs a job to stop this run.
    KILL = "kill.lua";
    /// `notify`: record a state an event shows; whether it is a change to report.
    NOTIFY_STATE = "notify_state.lua";
    /// `notify`: report the changes a job's rate limit held back, at the window's end.
    NOTIFY_RELEASE = "notify_release.lua";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level names of common.lua.
    fn defined() -> Vec<&'static str> {
        helpers(include_str!("common.lua"))
            .into_iter()
            .flat_map(|h| h.names)
            .collect()
    }

    #[test]
    fn every_helper_a_script_names_is_in_its_text() {
        let all_names = defined();
        assert!(all_names.contains(&"record_run") && all_names.contains(&"redis"));
        for (file, text) in all() {
            let used = names_in(&text);
            let have: Vec<&str> = helpers(&text).into_iter().flat_map(|h| h.names).collect();
            for name in &all_names {
                assert!(
                    !used.contains(name) || have.contains(name),
                    "{file} names {name} but lacks it"
                );
            }
        }
    }

    #[test]
    fn a_script_gets_only_the_helpers_it_uses_and_theirs() {
        let claim = assemble(include_str!("claim.lua"));
        assert!(claim.contains("local function wrong_type("));
        assert!(claim.contains("local function keep_skiplist("));
        assert!(!claim.contains("local function audit("));
        assert!(!claim.contains("local function place("));
        assert!(claim.ends_with(include_str!("claim.lua")));
        // recover.lua calls record_run, which calls record_entry and emit.
        let recover = assemble(include_str!("recover.lua"));
        for helper in ["record_run(", "record_entry(", "emit("] {
            assert!(
                recover.contains(&format!("local function {helper}")),
                "{helper}"
            );
        }
    }

    #[test]
    fn common_lua_holds_only_definitions() {
        // A statement at the top level outside a `local` would go with the definition
        // above it, and be left out with it.
        for line in include_str!("common.lua").lines() {
            assert!(
                line.is_empty()
                    || line.starts_with(' ')
                    || line.starts_with("--")
                    || line.starts_with("local ")
                    || line == "end",
                "{line}"
            );
        }
    }

    #[test]
    fn names_in_comments_pull_in_nothing() {
        let used = names_in("-- audit\nlocal x = 1 -- emit\nlocal s = \"a -- place\"\n");
        assert!(!used.contains("audit") && !used.contains("emit"));
        assert!(used.contains("place"), "a `--` after a quote is read whole");
    }
}
