//! Reading run history from Redis: the entries `redbike history` asks for, the job's
//! list `tell` reads, and the recent figures of `stats`. What an entry is, and the
//! figures made from entries, are in [`crate::history`].

use crate::{
    error::Result,
    history::{parse_entries, recent_figures, Entry, Query, Recent, RECENT_RUNS},
    redis::{keys::Keys, store::Store},
};

/// The key a query reads: the job's list, else the recent failures or runs.
fn source<'k>(keys: &'k Keys, q: &Query) -> std::borrow::Cow<'k, str> {
    match (&q.job, q.failures) {
        (Some(job), _) => keys.history(job).into(),
        (None, true) => keys.recent_failures.as_str().into(),
        (None, false) => keys.recent_runs.as_str().into(),
    }
}

/// Reads the entries a query asks for, newest first. A key of another type is an
/// error that says so.
pub fn read(store: &mut Store<'_>, q: &Query) -> Result<Vec<Entry>> {
    let key = source(store.keys, q).into_owned();
    let raw: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(&key)
        .arg(0)
        .arg(-1)
        .query(store.con)?;
    Ok(parse_entries(raw, &key)
        .into_iter()
        .filter(|e| !q.failures || e.outcome.is_failure())
        .filter(|e| q.since.is_none_or(|s| e.end >= s as f64))
        .take(q.limit.unwrap_or(usize::MAX))
        .collect())
}

/// Adds to `pipe` the read of [`crate::history::JobHistory`] (one reply; see
/// [`crate::history::job_history`]): the job's whole list, bounded by `history-limit`.
/// A success is looked for there rather than kept apart, which would cost every run
/// one more write.
pub fn add_job_reads(pipe: &mut redis::Pipeline, keys: &Keys, job: &str) {
    pipe.cmd("LRANGE").arg(keys.history(job)).arg(0).arg(-1);
}

/// Reads the recent figures in one round trip: this minute's and the last minute's
/// counts, and the recent runs (bounded by [`RECENT_RUNS`]).
pub fn recent(store: &mut Store<'_>, now: f64) -> Result<Recent> {
    let k = store.keys;
    let minute = (now / 60.0).floor() as i64;
    let minutes = [minute.to_string(), (minute - 1).to_string()];
    let (counts, raw): (Vec<Option<u64>>, Vec<Vec<u8>>) = redis::pipe()
        .cmd("HMGET")
        .arg(&k.runs_per_minute)
        .arg(&minutes)
        .lrange(&k.recent_runs, 0, RECENT_RUNS as isize - 1)
        .query(store.con)?;
    let counts: Vec<(String, u64)> = minutes
        .into_iter()
        .zip(counts)
        .filter_map(|(m, n)| Some((m, n?)))
        .collect();
    Ok(recent_figures(
        &counts,
        &parse_entries(raw, &k.recent_runs),
        now,
    ))
}
