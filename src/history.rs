//! Run history: one entry per run a redbike worker makes, and per recovery, skip or
//! refusal a dispatcher or worker makes, kept in Redis within bounds.
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `P-history-JOBID` | list | the job's last `history-limit` entries, newest first |
//! | `P-unfiled-runs` | list | workers' entries not yet filed into their jobs' lists, oldest first |
//! | `P-recent-runs` | list | every job's last [`RECENT_RUNS`] entries, newest first, while the event stream is off (`events = 0`); else the stream's run events are the recent runs ([`recent_runs`]) |
//! | `P-recent-failures` | list | the last [`RECENT_FAILURES`] entries that are failures |
//! | `P-runs-per-minute` | hash | minute (unix seconds / 60) -> entries the workers recorded, the last few minutes only |
//! | `P-due` | hash | job id -> `DUE:ENQUEUED`, the timeline score a dispatcher moved the job into its queue at, and when, for a job queued in a later second than it was due |
//!
//! Entries are JSON objects made and read here with serde_json, stored short
//! ([`Stored`]: one-letter keys, nothing empty, no queue) and read as [`Entry`]; the Lua
//! scripts only store and trim them, inside the round trips the worker and the
//! dispatcher make anyway (finish.lua, recover.lua, skip.lua). `history-limit = 0`
//! turns all of it off: nothing is written.
//!
//! A worker's entries go to `P-unfiled-runs`, in the same call as their outcomes; the
//! worker files them into their jobs' lists later (file_history.lua, see
//! `work/filing.rs`): when it is idle, or on its own round trips once more than
//! `history-backlog` wait. A new key per job is most of what history costs Redis, so a
//! burst of runs is not slowed by it. Readers of a job's entries read the unfiled ones
//! too ([`job_entries`]); a dispatcher's rare entries go to the job's list at once.

use std::{borrow::Cow, io::Write};

use serde::{Deserialize, Serialize};

use crate::{
    error::{Error, Result},
    status::Status,
};

/// Entries kept per job unless `history-limit` says otherwise.
pub const DEFAULT_LIMIT: u64 = 20;
/// Entries a busy worker leaves unfiled unless `history-backlog` says otherwise: a
/// burst of this many runs costs Redis no history key (about 16 MB of entries at
/// most, and what `history JOBID` reads through in 100 calls).
pub const DEFAULT_BACKLOG: u64 = 100_000;
/// Entries kept in `P-recent-runs`, whatever the job.
pub const RECENT_RUNS: u64 = 1000;
/// Entries kept in `P-recent-failures`.
pub const RECENT_FAILURES: u64 = 1000;
/// Bytes of a run's last output an entry keeps.
pub const TAIL_BYTES: usize = 2048;
/// Entries `tell` shows.
pub const TELL_RUNS: usize = 5;
/// The window of `stats`' lateness and runs per minute, seconds.
pub const WINDOW: f64 = 60.0;

/// How a run (or a dispatcher's step) ended. The names are stable: scripts read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The job succeeded.
    Ok,
    /// The job succeeded and asked to wait before its next run (a CONTINUE backoff).
    Backoff,
    /// The job asked to stop: its schedule became STOP.
    Stopped,
    /// The job asked to be unset, or was unset while it ran.
    Unset,
    /// The job failed (exit code, signal, or it could not start): status DIE.
    Failed,
    /// The job ran past its timeout and was stopped: status TMO.
    TimedOut,
    /// The job's run was stopped by `redbike kill`: status KIL.
    Killed,
    /// The job was stopped because its worker was stopping: status INT.
    Interrupted,
    /// The job was stopped because its worker could not confirm it to Redis: FNC.
    Fenced,
    /// A dispatcher put the job back after its worker vanished mid-run: status REC.
    Recovered,
    /// A dispatcher skipped a late occurrence (`catch-up = "skip"`): status SKP.
    Skipped,
    /// The job's schedule could not be read, so it was not put back: status BAD.
    Bad,
}

impl Outcome {
    /// Every outcome, in the order of the docs.
    pub const ALL: [Outcome; 12] = [
        Outcome::Ok,
        Outcome::Backoff,
        Outcome::Stopped,
        Outcome::Unset,
        Outcome::Failed,
        Outcome::TimedOut,
        Outcome::Killed,
        Outcome::Interrupted,
        Outcome::Fenced,
        Outcome::Recovered,
        Outcome::Skipped,
        Outcome::Bad,
    ];

    /// The stable lower-case name, as in JSON and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Backoff => "backoff",
            Outcome::Stopped => "stopped",
            Outcome::Unset => "unset",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed-out",
            Outcome::Killed => "killed",
            Outcome::Interrupted => "interrupted",
            Outcome::Fenced => "fenced",
            Outcome::Recovered => "recovered",
            Outcome::Skipped => "skipped",
            Outcome::Bad => "bad",
        }
    }

    /// Whether the entry also goes to `P-recent-failures`: everything but a run that
    /// ended as the job wanted.
    pub fn is_failure(self) -> bool {
        !matches!(
            self,
            Outcome::Ok | Outcome::Backoff | Outcome::Stopped | Outcome::Unset
        )
    }

    /// Whether it counts as a failure of the job in the event stream (`failed` = 1,
    /// docs/events.md): DIE, TMO, KIL, FNC and BAD; not an interruption, recovery or
    /// skip, which redbike did to the run.
    pub fn is_job_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::TimedOut | Outcome::Killed | Outcome::Fenced | Outcome::Bad
        )
    }

    /// The entry's kind for finish.lua: `f` a failure of the job (see
    /// [`Outcome::is_job_failure`]), `o` another failure (to the recent failures, not
    /// counted as failed by events), empty otherwise.
    pub fn kind(self) -> &'static str {
        match (self.is_job_failure(), self.is_failure()) {
            (true, _) => "f",
            (false, true) => "o",
            (false, false) => "",
        }
    }

    /// Whether it is a success (`tell`'s last success).
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Backoff)
    }
}

/// One history entry. Times are unix seconds (start and end to the millisecond).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The job id.
    pub job: String,
    /// Its queue.
    pub queue: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The instant the run was due (see docs/history.md: the timeline score a
    /// dispatcher moved it at, else when it entered its queue); `None` when unknown.
    #[serde(default)]
    pub due: Option<i64>,
    /// When the run started (`None` for a dispatcher's entry: no run).
    #[serde(default)]
    pub start: Option<f64>,
    /// When the run ended, or when the dispatcher acted.
    pub end: f64,
    /// Seconds the run took.
    #[serde(default)]
    pub duration: Option<f64>,
    /// Seconds from `due` to `start` (to `end` for a skip): how late it was.
    #[serde(default)]
    pub late: Option<f64>,
    /// The command's exit code.
    #[serde(default)]
    pub exit: Option<i32>,
    /// The signal that ended the command.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The host of the process that wrote the entry.
    #[serde(default)]
    pub host: String,
    /// Its process id.
    #[serde(default)]
    pub pid: u32,
    /// `worker` or `dispatcher`.
    #[serde(default)]
    pub by: String,
    /// Why, in words, when the outcome needs them (a failure's reason).
    #[serde(default)]
    pub detail: String,
    /// The last lines of the run's output, at most [`TAIL_BYTES`] bytes.
    #[serde(default)]
    pub tail: String,
    /// Which attempt of its occurrence the run was (see [`crate::retries`]); `None`
    /// for a first run not retried.
    #[serde(default)]
    pub attempt: Option<u32>,
}

/// An entry as stored in Redis: [`Entry`] with one-letter keys, without its queue (its
/// job id says it) and without what is unknown or empty (`by` is left out for a
/// worker), so that each run sends, stores and copies fewer bytes. Borrowed where it
/// can be: a worker makes one per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored<'a> {
    /// [`Entry::job`].
    #[serde(rename = "j", borrow)]
    pub job: Cow<'a, str>,
    /// [`Entry::outcome`].
    #[serde(rename = "o")]
    pub outcome: Outcome,
    /// [`Entry::due`].
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub due: Option<i64>,
    /// [`Entry::start`].
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    /// [`Entry::end`].
    #[serde(rename = "e")]
    pub end: f64,
    /// [`Entry::duration`].
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// [`Entry::late`].
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub late: Option<f64>,
    /// [`Entry::exit`].
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// [`Entry::signal`].
    #[serde(rename = "g", default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// [`Entry::host`].
    #[serde(rename = "h", borrow, default, skip_serializing_if = "str::is_empty")]
    pub host: Cow<'a, str>,
    /// [`Entry::pid`].
    #[serde(rename = "p", default)]
    pub pid: u32,
    /// [`Entry::by`]; left out: [`WORKER`].
    #[serde(
        rename = "b",
        borrow,
        default = "worker",
        skip_serializing_if = "is_worker"
    )]
    pub by: Cow<'a, str>,
    /// [`Entry::detail`].
    #[serde(rename = "w", borrow, default, skip_serializing_if = "str::is_empty")]
    pub detail: Cow<'a, str>,
    /// [`Entry::tail`].
    #[serde(rename = "t", borrow, default, skip_serializing_if = "str::is_empty")]
    pub tail: Cow<'a, str>,
    /// [`Entry::attempt`].
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

/// Who writes the entries of runs.
pub const WORKER: &str = "worker";

fn worker() -> Cow<'static, str> {
    Cow::Borrowed(WORKER)
}

fn is_worker(by: &str) -> bool {
    by == WORKER
}

impl Stored<'_> {
    /// The entry as stored.
    pub fn to_json(&self) -> String {
        // Strings, numbers and options always serialize.
        serde_json::to_string(self).expect("Stored serializes")
    }
}

impl From<Stored<'_>> for Entry {
    fn from(s: Stored<'_>) -> Entry {
        Entry {
            queue: crate::jobid::queue_of(&s.job).to_string(),
            job: s.job.into_owned(),
            outcome: s.outcome,
            due: s.due,
            start: s.start,
            end: s.end,
            duration: s.duration,
            late: s.late,
            exit: s.exit,
            signal: s.signal,
            host: s.host.into_owned(),
            pid: s.pid,
            by: s.by.into_owned(),
            detail: s.detail.into_owned(),
            tail: s.tail.into_owned(),
            attempt: s.attempt,
        }
    }
}

/// The CSV header row of `redbike history`.
pub const CSV_HEADER: [&str; 16] = [
    "job", "queue", "outcome", "due", "start", "end", "duration", "late", "exit", "signal", "host",
    "pid", "by", "detail", "tail", "attempt",
];

/// Rounds seconds to the millisecond, so entries stay short.
pub fn millis(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

/// This process's host name and pid, as entries name their writer.
pub fn origin() -> &'static (String, u32) {
    static ORIGIN: std::sync::LazyLock<(String, u32)> =
        std::sync::LazyLock::new(|| (crate::host::name().to_string(), std::process::id()));
    &ORIGIN
}

impl Entry {
    /// An entry for `job` written by this process (`by`: `worker` or `dispatcher`).
    pub fn new(job: &str, outcome: Outcome, end: f64, by: &str) -> Entry {
        let (host, pid) = origin();
        Entry {
            job: job.to_string(),
            queue: crate::jobid::queue_of(job).to_string(),
            outcome,
            due: None,
            start: None,
            end: millis(end),
            duration: None,
            late: None,
            exit: None,
            signal: None,
            host: host.clone(),
            pid: *pid,
            by: by.to_string(),
            detail: String::new(),
            tail: String::new(),
            attempt: None,
        }
    }

    /// The entry as stored ([`Stored`]).
    pub fn to_json(&self) -> String {
        Stored {
            job: Cow::Borrowed(&self.job),
            outcome: self.outcome,
            due: self.due,
            start: self.start,
            end: self.end,
            duration: self.duration,
            late: self.late,
            exit: self.exit,
            signal: self.signal,
            host: Cow::Borrowed(&self.host),
            pid: self.pid,
            by: Cow::Borrowed(&self.by),
            detail: Cow::Borrowed(&self.detail),
            tail: Cow::Borrowed(&self.tail),
            attempt: self.attempt,
        }
        .to_json()
    }

    /// The CSV row, in the order of [`CSV_HEADER`].
    fn row(&self) -> [String; 16] {
        let opt = |v: Option<String>| v.unwrap_or_default();
        [
            self.job.clone(),
            self.queue.clone(),
            self.outcome.name().to_string(),
            opt(self.due.map(|v| v.to_string())),
            opt(self.start.map(|v| v.to_string())),
            self.end.to_string(),
            opt(self.duration.map(|v| v.to_string())),
            opt(self.late.map(|v| v.to_string())),
            opt(self.exit.map(|v| v.to_string())),
            opt(self.signal.map(|v| v.to_string())),
            self.host.clone(),
            self.pid.to_string(),
            self.by.clone(),
            self.detail.clone(),
            self.tail.clone(),
            opt(self.attempt.map(|v| v.to_string())),
        ]
    }
}

/// What a run's command said about its end, beyond the [`crate::policy::RunResult`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunDetails {
    /// The exit code.
    pub exit: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// The last lines of its output (at most [`TAIL_BYTES`], see [`crate::work::output::tail_text`]).
    pub tail: String,
}

/// The instant a claimed run was due, from what claim.lua read before it wrote WRK:
/// the job's status then (`EVENT:TS`, when it entered its queue) and its `P-due` field
/// (`DUE:ENQUEUED`). The field counts only if the status is the `ENQ` the dispatcher
/// wrote with it (else the job was queued again since, by `set`, a finish or the Python
/// original); without it, the status's time is the due instant.
pub fn due_at(status: Option<&str>, due_field: Option<&str>) -> Option<i64> {
    let status = Status::parse(status?)?;
    let from_dispatcher = due_field.and_then(|f| {
        let (due, enqueued) = f.split_once(':')?;
        let enqueued = enqueued.parse::<i64>().ok()?;
        (status.event == crate::status::ENQ && enqueued == status.at)
            .then(|| {
                due.parse::<f64>()
                    .ok()
                    .map(crate::schedule::timestamp::unix_of)
            })
            .flatten()
    });
    Some(from_dispatcher.unwrap_or(status.at))
}

/// Which entries `redbike history` prints.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// One job's entries, else every job's recent ones.
    pub job: Option<String>,
    /// Only failures.
    pub failures: bool,
    /// Entries ended at or after this instant.
    pub since: Option<i64>,
    /// At most this many.
    pub limit: Option<usize>,
}

/// Parses stored entries, newest first; an entry that is not ours is skipped with a
/// warning (named once per call).
pub fn parse_entries(raw: Vec<Vec<u8>>, key: &str) -> Vec<Entry> {
    let mut bad = 0;
    let entries: Vec<Entry> = raw
        .into_iter()
        .filter_map(|r| {
            let e = serde_json::from_slice::<Stored>(&r).ok();
            bad += usize::from(e.is_none());
            e.map(Entry::from)
        })
        .collect();
    if bad > 0 {
        crate::log_warn!("{bad} entry(ies) of {key} are not history entries; left out");
    }
    entries
}

/// An `XRANGE` or `XREVRANGE` reply: each entry's id and its fields and values in turn.
pub type StreamEntries = Vec<(String, Vec<Vec<u8>>)>;

/// The entries of the run events in an `XREVRANGE` reply of the event stream
/// (docs/events.md: field `entry` of the entries of `type` `run`), newest first.
pub fn stream_runs(reply: StreamEntries) -> Vec<Vec<u8>> {
    reply
        .into_iter()
        .filter_map(|(_, fields)| {
            let mut pairs = fields.chunks_exact(2);
            let run = pairs.clone().any(|p| p[0] == b"type" && p[1] == b"run");
            run.then(|| pairs.find(|p| p[0] == b"entry").map(|p| p[1].clone()))?
        })
        .collect()
}

/// The prefix's recent runs, newest first, at most [`RECENT_RUNS`]: the run events of
/// the stream (`stream`, from [`stream_runs`]) and the entries of `P-recent-runs`
/// (`list`), which finish.lua writes only while the stream is off and dispatchers'
/// recoveries and skips write too; an entry in both counts once.
pub fn recent_runs(stream: Vec<Vec<u8>>, list: Vec<Vec<u8>>, key: &str) -> Vec<Entry> {
    let mut seen = std::collections::HashSet::new();
    let raw: Vec<Vec<u8>> = stream
        .into_iter()
        .chain(list)
        .filter(|r| seen.insert(r.clone()))
        .collect();
    let mut entries = parse_entries(raw, key);
    entries.sort_by(|a, b| b.end.total_cmp(&a.end));
    entries.truncate(RECENT_RUNS as usize);
    entries
}

/// How every entry of `job` begins as stored ([`Stored`] writes the job id first): the
/// unfiled runs are searched for it without parsing the others.
pub fn unfiled_head(job: &str) -> String {
    // A string always serializes.
    format!("{{\"j\":{}", serde_json::Value::from(job))
}

/// The job id of a stored entry, if it is one.
pub fn job_of(raw: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct JobOnly {
        #[serde(rename = "j")]
        job: String,
    }
    serde_json::from_slice::<JobOnly>(raw).ok().map(|j| j.job)
}

/// A job's entries, newest first (by end), from what the unfiled runs hold of it and
/// its list (`key`): an entry in both (filed while it was read) counts once.
pub fn job_entries(unfiled: Vec<Vec<u8>>, listed: Vec<Vec<u8>>, key: &str) -> Vec<Entry> {
    let mut seen = std::collections::HashSet::new();
    let raw: Vec<Vec<u8>> = unfiled
        .into_iter()
        .chain(listed)
        .filter(|r| seen.insert(r.clone()))
        .collect();
    let mut entries = parse_entries(raw, key);
    // Stable: entries that ended in the same millisecond keep their order.
    entries.sort_by(|a, b| b.end.total_cmp(&a.end));
    entries
}

/// Writes entries as RFC 4180 CSV with the header row; `escape`: fields escaped for a
/// terminal ([`crate::terminal::csv_escapes`]).
pub fn write_csv(entries: &[Entry], out: impl Write, escape: bool) -> Result<()> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out);
    let fail = |e: csv::Error| Error::io("cannot write output", e.into());
    w.write_record(CSV_HEADER).map_err(fail)?;
    for e in entries {
        let row = e.row();
        w.write_record(
            row.iter()
                .map(|f| crate::terminal::csv_field(f.as_bytes(), escape)),
        )
        .map_err(fail)?;
    }
    w.flush().map_err(|e| Error::io("cannot write output", e))
}

/// Writes entries as one JSON array.
pub fn write_json(entries: &[Entry], mut out: impl Write) -> Result<()> {
    let fail = |e: std::io::Error| Error::io("cannot write output", e);
    let json = serde_json::to_string_pretty(entries).map_err(|e| fail(e.into()))?;
    writeln!(out, "{}", crate::terminal::json_safe(json)).map_err(fail)
}

/// What `tell` adds: the job's last few entries and its last success.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobHistory {
    /// The last entries, newest first (at most [`TELL_RUNS`]).
    pub last_runs: Vec<Entry>,
    /// The last run that succeeded among the entries kept (`history-limit`).
    pub last_success: Option<Entry>,
}

/// [`JobHistory`] from a job's entries, newest first ([`job_entries`]).
pub fn job_history(entries: Vec<Entry>) -> JobHistory {
    JobHistory {
        last_success: entries.iter().find(|e| e.outcome.is_success()).cloned(),
        last_runs: entries.into_iter().take(TELL_RUNS).collect(),
    }
}

/// What `stats` reports of the recent runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recent {
    /// Runs recorded by workers over the last minute (an estimate from per-minute
    /// counts: this minute's, plus the previous minute's share of the window).
    pub runs_per_minute: u64,
    /// Runs of the last minute whose lateness is known, among the last
    /// [`RECENT_RUNS`] entries: what the percentiles are taken from.
    pub lateness_samples: u64,
    /// Median lateness of those runs, seconds (`None`: no sample).
    pub lateness_p50_seconds: Option<f64>,
    /// 99th percentile of their lateness, seconds.
    pub lateness_p99_seconds: Option<f64>,
    /// Failures (see [`Outcome::is_failure`]) among the entries of the last minute.
    pub recent_failures: u64,
}

/// [`Recent`] from the per-minute counts and the recent entries, as of `now`.
pub fn recent_figures(counts: &[(String, u64)], entries: &[Entry], now: f64) -> Recent {
    let minute = (now / 60.0).floor() as i64;
    let count = |m: i64| {
        counts
            .iter()
            .filter(|(f, _)| f.parse::<i64>().ok() == Some(m))
            .map(|(_, n)| *n)
            .sum::<u64>()
    };
    // Sliding window: this minute's count, plus the part of the previous minute that
    // the last 60 s still cover.
    let into = now / 60.0 - minute as f64;
    let runs = count(minute) as f64 + count(minute - 1) as f64 * (1.0 - into);
    let window: Vec<&Entry> = entries.iter().filter(|e| e.end >= now - WINDOW).collect();
    let mut late: Vec<f64> = window
        .iter()
        .filter(|e| e.start.is_some())
        .filter_map(|e| e.late)
        .collect();
    late.sort_by(f64::total_cmp);
    Recent {
        runs_per_minute: runs.round() as u64,
        lateness_samples: late.len() as u64,
        lateness_p50_seconds: percentile(&late, 50),
        lateness_p99_seconds: percentile(&late, 99),
        recent_failures: window.iter().filter(|e| e.outcome.is_failure()).count() as u64,
    }
}

/// The `p`th percentile of sorted values (nearest rank); `None` when empty.
fn percentile(sorted: &[f64], p: usize) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable() {
        let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(
            names,
            [
                "ok",
                "backoff",
                "stopped",
                "unset",
                "failed",
                "timed-out",
                "killed",
                "interrupted",
                "fenced",
                "recovered",
                "skipped",
                "bad"
            ]
        );
        for o in Outcome::ALL {
            assert_eq!(
                serde_json::to_string(&o).unwrap(),
                format!("\"{}\"", o.name())
            );
        }
    }

    #[test]
    fn entries_round_trip_and_tolerate_missing_fields() {
        let mut e = Entry::new("j:A", Outcome::Failed, 100.12345, "worker");
        e.exit = Some(3);
        e.tail = "a\nb".into();
        assert_eq!(e.end, 100.123);
        let stored = e.to_json();
        let back = parse_entries(vec![stored.clone().into()], "k");
        assert_eq!(back, [e.clone()]);
        // Short keys; nothing unknown or empty, no queue, no `by` for a worker.
        let (host, pid) = origin();
        assert_eq!(
            stored,
            format!(
                r#"{{"j":"j:A","o":"failed","e":100.123,"x":3,"h":"{host}","p":{pid},"t":"a\nb"}}"#
            )
        );
        e.by = "dispatcher".into();
        assert!(e.to_json().contains(r#""b":"dispatcher""#));
        let short = parse_entries(vec![br#"{"j":"x","o":"ok","e":5,"new":1}"#.to_vec()], "k");
        assert_eq!((short[0].due, short[0].by.as_str()), (None, WORKER));
        assert_eq!(short[0].queue, "x");
    }

    #[test]
    fn a_jobs_unfiled_entries_are_found_by_their_head_and_merged_once() {
        for job in ["j:A", r#"odd "id"\:A"#, "j:AB"] {
            let stored = Entry::new(job, Outcome::Ok, 1.0, "worker").to_json();
            assert!(stored.starts_with(&unfiled_head(job)), "{stored}");
            assert_eq!(job_of(stored.as_bytes()).as_deref(), Some(job));
        }
        // Another job whose id starts with this one's is not taken for it.
        let other = Entry::new("j:AB", Outcome::Ok, 1.0, "worker").to_json();
        assert!(!other.starts_with(&unfiled_head("j:A")));
        assert_eq!(job_of(b"not json"), None);
        let at = |end: f64| {
            Entry::new("j:A", Outcome::Ok, end, "worker")
                .to_json()
                .into_bytes()
        };
        let merged = job_entries(vec![at(3.0), at(2.0)], vec![at(2.0), at(4.0), at(1.0)], "k");
        let ends: Vec<f64> = merged.iter().map(|e| e.end).collect();
        assert_eq!(ends, [4.0, 3.0, 2.0, 1.0]);
    }

    #[test]
    fn due_instants() {
        // Queued by a dispatcher: its score.
        assert_eq!(due_at(Some("ENQ:105"), Some("100:105")), Some(100));
        // Queued again since (another ENQ, or a failure status): when it was queued.
        assert_eq!(due_at(Some("ENQ:200"), Some("100:105")), Some(200));
        assert_eq!(due_at(Some("DIE:200"), Some("100:200")), Some(200));
        assert_eq!(due_at(Some("ENQ:7"), None), Some(7));
        assert_eq!(due_at(None, Some("1:2")), None);
        assert_eq!(due_at(Some("ENQ:1700000000.25"), None), Some(1700000000));
    }

    #[test]
    fn recent_figures_use_the_last_minute() {
        let run = |late: f64, end: f64| Entry {
            start: Some(end - 1.0),
            late: Some(late),
            ..Entry::new("j:A", Outcome::Ok, end, "worker")
        };
        let mut entries: Vec<Entry> = (1..=100).map(|i| run(i as f64, 1000.0)).collect();
        entries.push(run(500.0, 900.0)); // older than a minute
        entries.push(Entry::new("k:A", Outcome::Skipped, 1000.0, "dispatcher"));
        // 30 s into minute 16 (960..1020): all of this minute, half of the last.
        let counts = [("16".to_string(), 10), ("15".to_string(), 40)];
        let r = recent_figures(&counts, &entries, 990.0);
        assert_eq!(r.runs_per_minute, 30);
        assert_eq!(r.lateness_samples, 100);
        assert_eq!(r.lateness_p50_seconds, Some(50.0));
        assert_eq!(r.lateness_p99_seconds, Some(99.0));
        assert_eq!(r.recent_failures, 1);
        let none = recent_figures(&[], &[], 990.0);
        assert_eq!((none.runs_per_minute, none.lateness_p50_seconds), (0, None));
    }
}
