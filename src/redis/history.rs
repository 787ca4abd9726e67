//! Run history in Redis: the entries `redbike history` asks for, a job's entries that
//! `tell` reads, the recent figures of `stats`, and the filing of the unfiled runs into
//! their jobs' lists. What an entry is, and the figures made from entries, are in
//! [`crate::history`].

use crate::{
    error::Result,
    history::{
        job_entries, parse_entries, recent_figures, recent_runs, stream_runs, unfiled_head, Entry,
        Query, Recent, StreamEntries, RECENT_RUNS,
    },
    redis::{keys::Keys, scripts, store::Store},
};

/// Entries of the unfiled runs read per call.
const PAGE: isize = 1000;

/// Reads the entries a query asks for, newest first. A key of another type is an
/// error that says so.
pub fn read(store: &mut Store<'_>, q: &Query) -> Result<Vec<Entry>> {
    let entries = match &q.job {
        Some(job) => {
            let unfiled = unfiled_of(store, job)?;
            let key = store.keys.history(job);
            let listed: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query(store.con)?;
            job_entries(unfiled, listed, &key)
        }
        None if q.failures => {
            let key = &store.keys.recent_failures;
            let raw: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(store.con)?;
            parse_entries(raw, key)
        }
        None => {
            let k = store.keys;
            let (stream, list): (StreamEntries, Vec<Vec<u8>>) = redis::pipe()
                .add_command(stream_read(k))
                .lrange(&k.recent_runs, 0, -1)
                .query(store.con)?;
            recent_runs(stream_runs(stream), list, &k.recent_runs)
        }
    };
    Ok(entries
        .into_iter()
        .filter(|e| !q.failures || e.outcome.is_failure())
        .filter(|e| q.since.is_none_or(|s| e.end >= s as f64))
        .take(q.limit.unwrap_or(usize::MAX))
        .collect())
}

/// The entries of `job` among the unfiled runs, newest first, read in pages from the
/// tail, where workers append: counted from the tail, an entry only moves away from
/// it as new ones come (a page may show it twice, which [`job_entries`] folds), and
/// filing takes from the head, so no entry moves past the pages read. They are read
/// before the job's list: an entry filed meanwhile is found there if not here.
pub fn unfiled_of(store: &mut Store<'_>, job: &str) -> Result<Vec<Vec<u8>>> {
    let head = unfiled_head(job);
    let mut found = Vec::new();
    let mut from_tail = 0;
    loop {
        let page: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&store.keys.unfiled_runs)
            .arg(-(from_tail + PAGE))
            .arg(-(from_tail + 1))
            .query(store.con)?;
        let full = page.len() == PAGE as usize;
        found.extend(
            page.into_iter()
                .rev()
                .filter(|e| e.starts_with(head.as_bytes())),
        );
        if !full {
            return Ok(found);
        }
        from_tail += PAGE;
    }
}

/// Adds to `pipe` the read of a job's list (one reply), for [`job_entries`] with what
/// [`unfiled_of`] read before. A success is looked for there rather than kept apart,
/// which would cost every run one more write.
pub fn add_job_reads(pipe: &mut redis::Pipeline, keys: &Keys, job: &str) {
    pipe.cmd("LRANGE").arg(keys.history(job)).arg(0).arg(-1);
}

/// What one call of [`file_oldest`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filed {
    /// Entries now in their jobs' lists.
    pub filed: u64,
    /// Entries dropped (their jobs are gone, or they name none).
    pub dropped: u64,
    /// Entries still unfiled.
    pub left: u64,
}

/// Files up to `chunk` (1..=10,000) of the oldest unfiled runs into their jobs' lists,
/// each kept to `limit` entries (file_history.lua, which reads, files and removes them
/// in one step: workers filing at once file each entry once).
pub fn file_oldest(
    con: &mut impl redis::ConnectionLike,
    keys: &Keys,
    limit: u64,
    chunk: usize,
) -> redis::RedisResult<Filed> {
    let counts: Vec<u64> = scripts::FILE_HISTORY
        .prepare_invoke()
        .key(&keys.unfiled_runs)
        .key(&keys.schedules)
        .arg(limit)
        .arg(chunk)
        .arg(keys.history(""))
        .invoke(con)?;
    match counts[..] {
        [filed, dropped, left] => Ok(Filed {
            filed,
            dropped,
            left,
        }),
        _ => Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "file_history.lua: not three counts",
        ))),
    }
}

/// Reads the recent figures in one round trip: this minute's and the last minute's
/// counts, and the recent runs (bounded by [`RECENT_RUNS`]).
pub fn recent(store: &mut Store<'_>, now: f64) -> Result<Recent> {
    let k = store.keys;
    let minute = (now / 60.0).floor() as i64;
    let minutes = [minute.to_string(), (minute - 1).to_string()];
    let (counts, stream, list): (Vec<Option<u64>>, _, Vec<Vec<u8>>) = redis::pipe()
        .cmd("HMGET")
        .arg(&k.runs_per_minute)
        .arg(&minutes)
        .add_command(stream_read(k))
        .lrange(&k.recent_runs, 0, RECENT_RUNS as isize - 1)
        .query(store.con)?;
    let counts: Vec<(String, u64)> = minutes
        .into_iter()
        .zip(counts)
        .filter_map(|(m, n)| Some((m, n?)))
        .collect();
    Ok(recent_figures(
        &counts,
        &recent_runs(stream_runs(stream), list, &k.recent_runs),
        now,
    ))
}

/// The read of the event stream's last [`RECENT_RUNS`] entries, of which the run
/// events are the prefix's recent runs (see [`recent_runs`]).
pub fn stream_read(k: &Keys) -> redis::Cmd {
    let mut cmd = redis::cmd("XREVRANGE");
    cmd.arg(&k.events)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(RECENT_RUNS);
    cmd
}
