//! What `redbike top` shows, read from one prefix in two pipelined round trips of cheap
//! commands whose cost does not grow with the data: no SCAN of the keyspace, every
//! range bounded (see [`Limits`]).
//!
//! Round trip one: GET, HLEN, ZCARD and ZCOUNT, the first entries of the timeline and of
//! the running index (`P-leases`), one HSCAN page of `P-failures` (small hashes come
//! whole in one page; a large one gives a bounded sample), PUBSUB CHANNELS of the
//! prefix's wake-up channels (the queues that workers listen on: the channels of the
//! server, never its keys), and LLEN and LINDEX of each queue named. Round trip two: one HMGET of `P-statuses` for the running jobs (when
//! they started) and the queues' oldest entries (since when they wait).

use std::collections::{BTreeMap, BTreeSet};

use redis::Connection;

use crate::{
    redis::keys::{glob_escape, queue_of, Keys},
    status::{Status, ENQ, WRK},
};

/// How much of each list one refresh reads.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries of the timeline (the next jobs due).
    pub upcoming: usize,
    /// Entries of the running index.
    pub running: usize,
    /// Fields asked for in the one HSCAN page of `P-failures`.
    pub failures: usize,
}

/// The limits of the live view.
pub const LIMITS: Limits = Limits {
    upcoming: 50,
    running: 100,
    failures: 200,
};

/// One prefix at one instant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The key prefix.
    pub prefix: String,
    /// When it was read, unix seconds (this machine's clock).
    pub time: i64,
    /// Whether `P-control` says HALT.
    pub halted: bool,
    /// Stored schedules (HLEN).
    pub schedules: u64,
    /// Jobs on the timeline (ZCARD).
    pub timeline: u64,
    /// Jobs on the timeline due now or earlier: what dispatchers have yet to move.
    pub due: u64,
    /// The first jobs of the timeline, soonest first.
    pub upcoming: Vec<Upcoming>,
    /// Running jobs in the running index (ZCARD of `P-leases`); Python workers' jobs
    /// are not in it.
    pub running_total: u64,
    /// The running jobs read (at most [`Limits::running`]), by id.
    pub running: Vec<Running>,
    /// One row per queue named or seen, by name.
    pub queues: Vec<QueueRow>,
    /// Jobs with a last failure (HLEN of `P-failures`).
    pub failures_total: u64,
    /// Last failures read, newest first.
    pub failures: Vec<Failure>,
    /// Queues of the jobs read that were not in the plan (see [`Plan::queues`]).
    pub unread_queues: BTreeSet<String>,
}

/// A job on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Upcoming {
    /// The job id.
    pub jobid: String,
    /// When it is due, unix seconds.
    pub due: i64,
}

/// A running job.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// The job id.
    pub jobid: String,
    /// When its run started, from its `WRK` status; `None` when the status says otherwise.
    pub started: Option<i64>,
    /// Its queue's timeout in seconds, as this machine's config says.
    pub timeout: u64,
}

/// A work queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    /// The queue name.
    pub queue: String,
    /// Jobs waiting (LLEN).
    pub length: u64,
    /// Seconds the next job to be claimed has waited, from its `ENQ` status; `None`
    /// for an empty queue or when that status is not `ENQ`.
    pub oldest_age: Option<i64>,
    /// Its running jobs among those read.
    pub running: u64,
}

/// A job's last failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The job id.
    pub jobid: String,
    /// `DIE`, `TMO`, `REC`, `FNC` or `SKP`.
    pub event: String,
    /// When, unix seconds.
    pub at: i64,
}

/// What the reader needs besides the connection.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Queues to show whatever they hold (the config's and `--queues`), plus queues
    /// seen in earlier refreshes; the queues of jobs read are added.
    pub queues: BTreeSet<String>,
    /// Timeout per queue (the config's `timeouts`).
    pub timeouts: BTreeMap<String, u64>,
    /// Timeout of other queues.
    pub default_timeout: u64,
}

type Scored = Vec<(String, f64)>;

/// Commands of round trip one before the per-queue ones.
const FIXED: usize = 10;

/// Reads one snapshot at `now`. Returns it with the number of commands sent.
pub fn read(
    con: &mut Connection,
    keys: &Keys,
    plan: &Plan,
    now: i64,
) -> redis::RedisResult<(Snapshot, usize)> {
    let named: Vec<String> = plan.queues.iter().cloned().collect();
    let mut pipe = redis::pipe();
    pipe.get(&keys.control)
        .hlen(&keys.schedules)
        .zcard(&keys.timeline)
        .zcount(&keys.timeline, "-inf", now)
        .zrange_withscores(&keys.timeline, 0, LIMITS.upcoming as isize - 1)
        .zcard(&keys.leases)
        .zrange(&keys.leases, 0, LIMITS.running as isize - 1)
        .hlen(&keys.failures)
        .cmd("HSCAN")
        .arg(&keys.failures)
        .arg(0)
        .arg("COUNT")
        .arg(LIMITS.failures)
        .cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(format!("{}-wake-*", glob_escape(&keys.prefix)));
    for q in &named {
        pipe.llen(keys.queue(q)).lindex(keys.queue(q), -1);
    }
    let mut sent = pipe.len();
    type Fixed = (
        Option<String>,
        u64,
        u64,
        u64,
        Scored,
        u64,
        Vec<String>,
        u64,
        (String, Vec<String>),
    );
    // Errors come back as values, so that PUBSUB CHANNELS, which only adds queues, may
    // be refused (an ACL user without it still gets the view); any other error fails
    // the read. One reply per command sent, so the index exists.
    let mut replies: Vec<redis::Value> = pipe.ignore_errors().query(con)?;
    let channels: Vec<String> = match replies.remove(FIXED - 1) {
        redis::Value::ServerError(_) => Vec::new(),
        v => redis::from_redis_value(v)?,
    };
    let mut replies: Vec<redis::Value> =
        redis::from_redis_value(redis::Value::Array(replies).extract_error()?)?;
    let per_queue = replies.split_off((FIXED - 1).min(replies.len()));
    let (
        control,
        schedules,
        timeline,
        due,
        upcoming,
        running_total,
        running_ids,
        failures_total,
        (_, flat),
    ): Fixed = redis::from_redis_value(redis::Value::Array(replies))?;
    let mut heads = Vec::with_capacity(named.len());
    for pair in per_queue.chunks_exact(2) {
        let (length, head): (u64, Option<String>) =
            redis::from_redis_value(redis::Value::Array(pair.to_vec()))?;
        heads.push((length, head));
    }

    // Round trip two: when each running job started and since when each head waits.
    let mut fields: Vec<&str> = running_ids.iter().map(String::as_str).collect();
    fields.extend(heads.iter().filter_map(|(_, h)| h.as_deref()));
    let statuses: Vec<Option<String>> = if fields.is_empty() {
        Vec::new()
    } else {
        sent += 1;
        redis::cmd("HMGET")
            .arg(&keys.statuses)
            .arg(&fields)
            .query(con)?
    };
    let status_of = |i: usize| statuses.get(i).cloned().flatten();
    let since = |i: usize, event: &str| {
        Status::parse(&status_of(i)?).and_then(|s| (s.event == event).then_some(s.at))
    };

    let running: Vec<Running> = running_ids
        .iter()
        .enumerate()
        .map(|(i, id)| Running {
            jobid: id.clone(),
            started: since(i, WRK),
            timeout: *plan
                .timeouts
                .get(queue_of(id))
                .unwrap_or(&plan.default_timeout),
        })
        .collect();
    let mut at = running_ids.len();
    let mut queues: BTreeMap<String, QueueRow> = BTreeMap::new();
    for (name, (length, head)) in named.iter().zip(&heads) {
        let oldest_age = match head {
            Some(_) => {
                at += 1;
                since(at - 1, ENQ).map(|t| (now - t).max(0))
            }
            None => None,
        };
        queues.insert(
            name.clone(),
            QueueRow {
                queue: name.clone(),
                length: *length,
                oldest_age,
                running: 0,
            },
        );
    }
    let upcoming: Vec<Upcoming> = upcoming
        .into_iter()
        .map(|(jobid, score)| Upcoming {
            jobid,
            due: score as i64,
        })
        .collect();
    let mut failures: Vec<Failure> = flat
        .chunks_exact(2)
        .filter_map(|c| {
            let s = Status::parse(&c[1])?;
            Some(Failure {
                jobid: c[0].clone(),
                event: s.event,
                at: s.at,
            })
        })
        .collect();
    failures.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.jobid.cmp(&b.jobid)));
    // Queues met in the lists read but not named: the caller adds them to its plan,
    // so they get a row (with figures) from the next read on.
    // So are the queues that workers listen on (their wake-up channels).
    let wake = format!("{}-wake-", keys.prefix);
    let listened = channels
        .iter()
        .filter_map(|c| c.strip_prefix(&wake))
        .filter(|q| !matches!(*q, "timeline" | "control"));
    let unread: BTreeSet<String> = running
        .iter()
        .map(|r| queue_of(&r.jobid))
        .chain(upcoming.iter().map(|u| queue_of(&u.jobid)))
        .chain(failures.iter().map(|f| queue_of(&f.jobid)))
        .chain(listened)
        .filter(|q| !plan.queues.contains(*q))
        .map(str::to_string)
        .collect();
    for r in &running {
        if let Some(row) = queues.get_mut(queue_of(&r.jobid)) {
            row.running += 1;
        }
    }
    let snapshot = Snapshot {
        prefix: keys.prefix.clone(),
        time: now,
        halted: control.as_deref() == Some("HALT"),
        schedules,
        timeline,
        due,
        upcoming,
        running_total,
        running,
        queues: queues.into_values().collect(),
        failures_total,
        failures,
        unread_queues: unread,
    };
    Ok((snapshot, sent))
}
