//! The Redis side of every command: one connection, the key names, and the operations
//! the commands need. Multi-step changes go through the scripts in [`crate::redis::scripts`].

use std::time::{Duration, Instant};

use redis::{Commands, Connection};

use crate::{
    error::{Error, Result},
    policy::Action,
    redis::events::Audit,
    redis::keys::{queue_of, Keys},
    redis::scripts,
    redis::settings::mask_urls_in,
    redis::topology::{must_reconnect, Access, Deployment, Reached},
    schedule::{Placement, Schedule},
};

/// How long a one-shot command waits to connect, and for each reply.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How many jobs [`Store::place_many`] sends in one pipeline.
pub const PLACE_BATCH: usize = 1000;

/// Bytes read from Redis as text, each byte that is not UTF-8 as U+FFFD: any value may
/// have been written by another program (the Python original, redis-cli), and a report
/// shows it rather than stop at it.
pub fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Where a job is (see [`Store::places`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Its timeline entry's due time, if it has one.
    pub due: Option<i64>,
    /// Whether it is in its queue.
    pub queued: bool,
    /// Whether its lease exists (it is claimed or running).
    pub leased: bool,
    /// Its status, `EVENT:TS` (read with [`lossy`]).
    pub status: Option<String>,
    /// Whether it is paused (`redbike pause`).
    pub paused: bool,
    /// Whether a run of it was asked (`redbike run`) that is still to happen.
    pub rerun: bool,
}

/// What placing a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// It went into its queue.
    Enqueued,
    /// It was in its queue already and stays there.
    AlreadyQueued,
    /// It is running (its lease exists), so it was not queued again.
    Running,
    /// It is on the timeline.
    Timeline,
    /// It is stopped.
    Stopped,
    /// It is paused: only its schedule was stored.
    Paused,
}

impl PlaceItem {
    /// The item for setting `jobid` to `schedule` (written as `text`) at `placement`.
    pub fn new(jobid: &str, schedule: &Schedule, text: &str, placement: Placement) -> PlaceItem {
        PlaceItem {
            jobid: jobid.to_string(),
            stored: schedule.stored_form(text),
            stored_if_running: match schedule {
                Schedule::Now => "NOW".to_string(),
                _ => schedule.stored_form(text),
            },
            stored_if_paused: paused_form(schedule, text),
            placement,
            deadline: crate::stale::Deadline::Keep,
        }
    }

    /// The item with the deadline its new schedule gives it from `at` (see
    /// [`crate::stale`]).
    pub fn with_deadline(
        mut self,
        bounds: &crate::stale::Bounds<'_>,
        schedule: &Schedule,
        at: i64,
    ) -> PlaceItem {
        self.deadline = bounds.for_set(&self.jobid, schedule, at);
        self
    }
}

impl Placed {
    /// The word the scripts answer for it (`place` in common.lua, place.lua's `paused`).
    pub(crate) fn word(self) -> &'static str {
        match self {
            Placed::Enqueued => "enqueued",
            Placed::AlreadyQueued => "queued",
            Placed::Running => "running",
            Placed::Timeline => "timeline",
            Placed::Stopped => "stopped",
            Placed::Paused => "paused",
        }
    }

    /// The placement a script answered.
    pub(crate) fn from_reply(reply: &str) -> Option<Placed> {
        [
            Placed::Enqueued,
            Placed::AlreadyQueued,
            Placed::Running,
            Placed::Timeline,
            Placed::Stopped,
            Placed::Paused,
        ]
        .into_iter()
        .find(|p| p.word() == reply)
    }
}

/// One job to place with [`Store::place`] or [`Store::place_many`].
#[derive(Debug, Clone)]
pub struct PlaceItem {
    /// The job id.
    pub jobid: String,
    /// The schedule text to store.
    pub stored: String,
    /// The schedule text to store instead when the job is running and cannot be queued.
    pub stored_if_running: String,
    /// The schedule text to store instead when the job is paused (see [`paused_form`]).
    pub stored_if_paused: String,
    /// Where it goes.
    pub placement: Placement,
    /// What becomes of its deadline (see [`crate::stale`]); `new` leaves it alone.
    pub deadline: crate::stale::Deadline,
}

/// The schedule a paused job keeps, so that `resume` makes the run it stands for: NOW
/// and AT:TS as given (stored, they would be the STOP they leave behind once placed),
/// others as [`Schedule::stored_form`].
pub fn paused_form(schedule: &Schedule, text: &str) -> String {
    match schedule {
        Schedule::Now => "NOW".to_string(),
        Schedule::At(ts) => format!("AT:{ts}"),
        _ => schedule.stored_form(text),
    }
}

/// A connection to Redis with the key names of one prefix.
pub struct Store<'a> {
    /// The connection.
    pub con: &'a mut Connection,
    /// The names under the configured prefix.
    pub keys: &'a Keys,
}

/// Opens a connection, mapping failure to [`Error::Unreachable`] (exit 69).
pub fn connect(access: &Access, timeout: Duration) -> Result<Connection> {
    reach(access, timeout).map(|reached| reached.con)
}

/// Opens a connection to the server the configured topology leads to (the Sentinels'
/// master, the cluster node of the prefix's slot), and says which one it is.
pub fn reach(access: &Access, timeout: Duration) -> Result<Reached> {
    access.topology.connect(timeout).map_err(|e| {
        let url = access.display_url();
        let reason = mask_urls_in(&e.reason);
        match e.cannot_fix {
            Some(hint) => Error::Refused { url, reason, hint },
            None => Error::Unreachable { url, reason },
        }
    })
}

/// A SCAN-family walk (SCAN, HSCAN, SSCAN, ZSCAN), one page per call, so callers keep
/// the connection free for other commands between pages.
pub struct Scan {
    /// The command, e.g. `HSCAN`.
    verb: &'static str,
    /// The key walked (none for SCAN).
    key: Option<String>,
    /// Arguments after the cursor (MATCH, TYPE); COUNT is added.
    extra: Vec<String>,
    /// The next cursor; `None` once the walk is over.
    cursor: Option<u64>,
}

/// Items asked for per page.
pub const SCAN_COUNT: usize = 1000;

impl Scan {
    /// A walk of `verb` over `key` with `extra` arguments (e.g. `["MATCH", "p*"]`).
    pub fn new(verb: &'static str, key: Option<&str>, extra: &[&str]) -> Scan {
        Scan {
            verb,
            key: key.map(str::to_string),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            cursor: Some(0),
        }
    }

    /// The next page (flat: fields and values alternate for HSCAN/ZSCAN); `None` at the end.
    pub fn next_page<T: redis::FromRedisValue>(
        &mut self,
        con: &mut Connection,
    ) -> redis::RedisResult<Option<Vec<T>>> {
        let Some(cursor) = self.cursor else {
            return Ok(None);
        };
        let mut cmd = redis::cmd(self.verb);
        if let Some(key) = &self.key {
            cmd.arg(key);
        }
        cmd.arg(cursor)
            .arg(&self.extra)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let (next, page): (u64, Vec<T>) = cmd.query(con)?;
        self.cursor = (next != 0).then_some(next);
        Ok(Some(page))
    }
}

/// How long a one-shot command keeps trying while a failover is going on.
pub(crate) const FAILOVER_PATIENCE: Duration = Duration::from_secs(15);

/// Connects for a one-shot command and runs `f` with a [`Store`]. With `wait-replicas`,
/// the writes count only once that many replicas acknowledge them. When the server
/// turns out to be a demoted master (READONLY) or the acknowledgements do not come (a
/// failover is going on), it connects anew, which asks the Sentinels again, and runs
/// `f` again; every command's writes are idempotent, so a repeat is harmless.
pub fn with_store<T>(access: &Access, mut f: impl FnMut(&mut Store<'_>) -> Result<T>) -> Result<T> {
    let keys = Keys::new(&access.prefix);
    let deadline = Instant::now() + FAILOVER_PATIENCE;
    // A single server that is down stays down: fail at once. Sentinels or a cluster
    // may be between two masters for a few seconds.
    let topology = &access.topology;
    let patient = topology.deployment != Deployment::Standalone;
    loop {
        let (mut con, server) = match reach(access, COMMAND_TIMEOUT) {
            Ok(reached) => (reached.con, reached.server),
            // A refusal (wrong password, missing database) is no failover: fail at once.
            Err(Error::Unreachable { .. }) if patient && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(250));
                continue;
            }
            Err(e) => return Err(e),
        };
        let outcome = f(&mut Store {
            con: &mut con,
            keys: &keys,
        });
        let retry = match outcome {
            Err(Error::Redis(e)) if must_reconnect(&e) => Error::Redis(e),
            Err(e) => return Err(e),
            Ok(value) => match acknowledged(&mut con, access)? {
                None => return Ok(value),
                Some(_) if topology.sentinels_confirm(&server) => return Ok(value),
                Some(short) => short,
            },
        };
        if Instant::now() >= deadline {
            return Err(retry);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits for `wait-replicas` acknowledgements of this connection's writes; `None` when
/// they came (or none are asked for), else the error to report if they never do.
pub fn acknowledged(con: &mut Connection, access: &Access) -> Result<Option<Error>> {
    let Some((wanted, ms)) = access.wait() else {
        return Ok(None);
    };
    let got: u32 = redis::cmd("WAIT").arg(wanted).arg(ms).query(con)?;
    Ok((got < wanted).then_some(Error::NotAcknowledged { wanted, got, ms }))
}

impl Store<'_> {
    /// Stores a schedule and places the job, atomically, waking dispatchers or workers,
    /// and writes `audit` to the event stream.
    pub fn place(&mut self, item: &PlaceItem, now: i64, audit: &Audit) -> Result<Placed> {
        let (act, due) = Action::from(item.placement).wire();
        let mut inv = scripts::PLACE.prepare_invoke();
        for key in self.keys.job_keys(&item.jobid) {
            inv.key(key);
        }
        inv.key(&self.keys.paused)
            .key(&self.keys.shards)
            .key(&self.keys.attempts)
            .key(&self.keys.fresh_until);
        inv.arg(&item.jobid)
            .arg(&item.stored)
            .arg(act)
            .arg(due)
            .arg(now)
            .arg(self.keys.queue_wake(queue_of(&item.jobid)))
            .arg(&self.keys.timeline_wake)
            .arg(&item.stored_if_running)
            .arg(&item.stored_if_paused)
            .arg(item.deadline.wire());
        audit.add_to(&mut inv, self.keys);
        let reply: String = inv.invoke(self.con)?;
        Ok(Placed::from_reply(&reply).ok_or_else(|| scripts::unexpected("place.lua", &reply))?)
    }

    /// Places many jobs, [`PLACE_BATCH`] per Lua call; each job is placed atomically
    /// (exactly as [`Store::place`] would), and each batch wakes dispatchers and workers
    /// once. `written` counts the jobs of the batches written so far, so that a failure
    /// part-way can say how many are in Redis: a batch is one script call, which Redis
    /// runs whole or (refused before its first write, e.g. OOM) not at all.
    pub fn place_many(&mut self, items: &[PlaceItem], now: i64, written: &mut usize) -> Result<()> {
        for batch in items.chunks(PLACE_BATCH) {
            let mut inv = scripts::PLACE_MANY.prepare_invoke();
            inv.key(&self.keys.schedules)
                .key(&self.keys.statuses)
                .key(&self.keys.timeline)
                .key(&self.keys.paused)
                .key(&self.keys.shards)
                .key(&self.keys.fresh_until)
                .arg(&self.keys.prefix)
                .arg(now);
            let mut queues = std::collections::BTreeSet::new();
            let mut earliest: Option<i64> = None;
            for item in batch {
                let (act, due) = Action::from(item.placement).wire();
                inv.arg(&item.jobid)
                    .arg(&item.stored)
                    .arg(act)
                    .arg(due)
                    .arg(&item.stored_if_running)
                    .arg(&item.stored_if_paused)
                    .arg(item.deadline.wire());
                match item.placement {
                    Placement::Enqueue => {
                        queues.insert(queue_of(&item.jobid));
                    }
                    Placement::Timeline(ts) => earliest = Some(earliest.map_or(ts, |e| e.min(ts))),
                    Placement::Stop => {}
                }
            }
            let _: i64 = inv.invoke(self.con)?;
            *written += batch.len();
            let mut pipe = redis::pipe();
            for q in queues {
                pipe.publish(self.keys.queue_wake(q), 1).ignore();
            }
            if let Some(ts) = earliest {
                pipe.publish(&self.keys.timeline_wake, ts).ignore();
            }
            if !pipe.is_empty() {
                pipe.exec(self.con)?;
            }
        }
        Ok(())
    }

    /// The keys placing the jobs `ids` touches that could be of another type, with
    /// redbike's type for each: the fixed ones, each queue's list and members set, and
    /// the lease of each job named as its queue (job A's lease key is queue A-A's list).
    pub fn place_keys<'i>(
        &self,
        ids: impl IntoIterator<Item = &'i str>,
    ) -> Vec<(String, &'static str)> {
        let k = self.keys;
        let mut keys = vec![
            (k.schedules.clone(), "hash"),
            (k.statuses.clone(), "hash"),
            (k.timeline.clone(), "zset"),
            (k.paused.clone(), "hash"),
        ];
        let mut queues = std::collections::BTreeSet::new();
        for id in ids {
            let q = queue_of(id);
            if queues.insert(q) {
                keys.push((k.queue(q), "list"));
                keys.push((k.members(q), "set"));
            }
            if q == id {
                keys.push((k.lease(id), "string"));
            }
        }
        keys
    }

    /// Fails, naming the key, unless each of `keys` is of its type or missing.
    pub fn check_types(&mut self, keys: &[(String, &'static str)]) -> Result<()> {
        for chunk in keys.chunks(PLACE_BATCH) {
            let mut pipe = redis::pipe();
            for (key, _) in chunk {
                pipe.cmd("TYPE").arg(key);
            }
            let types: Vec<String> = pipe.query(self.con)?;
            for ((key, want), found) in chunk.iter().zip(types) {
                if found != "none" && found != *want {
                    return Err(crate::error::wrong_type(key, &found, want).into());
                }
            }
        }
        Ok(())
    }

    /// Forgets a job; returns whether it had a schedule (then `audit` goes to the event
    /// stream).
    pub fn unset(&mut self, jobid: &str, audit: &Audit) -> Result<bool> {
        let [schedules, statuses, timeline, queue, members, _] = self.keys.job_keys(jobid);
        let mut inv = scripts::UNSET.prepare_invoke();
        inv.key(schedules)
            .key(statuses)
            .key(timeline)
            .key(queue)
            .key(members)
            .key(&self.keys.failures)
            .key(self.keys.history(jobid))
            .key(&self.keys.due)
            .key(&self.keys.paused)
            .key(&self.keys.rerun)
            .key(&self.keys.attempts)
            .key(&self.keys.backlogs)
            .key(self.keys.backlog(jobid))
            .key(&self.keys.fresh_until)
            .key(&self.keys.stale)
            .arg(jobid);
        audit.add_to(&mut inv, self.keys);
        let found: i64 = inv.invoke(self.con)?;
        Ok(found == 1)
    }

    /// Whether the run with fencing token `token` still holds `jobid`'s lease: the
    /// lease key holds that run's tag (which ends in its token) and its entry in the
    /// running index is not past its recovery instant on Redis's clock. No MULTI is
    /// needed in this order: an entry only moves forward while its lease is unchanged,
    /// and a run's tag is never written again once removed, so a lease still ours
    /// after the entry was read means the entry then stood, and stands, past `TIME`.
    pub fn holds_lease(&mut self, jobid: &str, token: u64) -> Result<bool> {
        let (recover_at, tag, (secs, micros)): (Option<f64>, Option<String>, (f64, f64)) =
            redis::pipe()
                .zscore(&self.keys.leases, jobid)
                .get(self.keys.lease(jobid))
                .cmd("TIME")
                .query(self.con)?;
        let ours = tag.is_some_and(|t| {
            t.len() == 30 && t.get(14..).and_then(|d| d.parse::<u64>().ok()) == Some(token)
        });
        Ok(ours && recover_at.is_some_and(|at| at > secs + micros / 1e6))
    }

    /// Where each of `ids` is, read atomically (places.lua).
    pub fn places<T: redis::ToRedisArgs>(&mut self, ids: &[T]) -> redis::RedisResult<Vec<Place>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = scripts::PLACES.prepare_invoke();
        inv.key(&self.keys.timeline)
            .key(&self.keys.statuses)
            .key(&self.keys.paused)
            .key(&self.keys.rerun)
            .arg(&self.keys.prefix);
        for id in ids {
            inv.arg(id);
        }
        type Reply = (bool, bool, bool, Option<Vec<u8>>, Option<f64>, bool, bool);
        let flat: Vec<redis::Value> = inv.invoke(self.con)?;
        flat.chunks_exact(7)
            .map(|c| {
                let (_, queued, leased, status, score, paused, rerun): Reply =
                    redis::from_redis_value(redis::Value::Array(c.to_vec()))?;
                Ok(Place {
                    due: score.map(crate::schedule::timestamp::unix_of),
                    queued,
                    leased,
                    status: status.map(lossy),
                    paused,
                    rerun,
                })
            })
            .collect()
    }

    /// Calls `each(field, value)` for every field of hash `key`, reading it in HSCAN
    /// pages so a large hash never sits in memory at once.
    pub fn scan_hash(
        &mut self,
        key: &str,
        mut each: impl FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let mut scan = Scan::new("HSCAN", Some(key), &[]);
        while let Some(page) = scan.next_page::<Vec<u8>>(self.con)? {
            let mut it = page.into_iter();
            while let (Some(field), Some(value)) = (it.next(), it.next()) {
                each(field, value)?;
            }
        }
        Ok(())
    }

    /// Sets the control key (`HALT`) and tells listening processes at once.
    pub fn control(&mut self, signal: &str) -> Result<()> {
        let _: () = redis::pipe()
            .set(&self.keys.control, signal)
            .ignore()
            .publish(&self.keys.control_wake, signal)
            .ignore()
            .query(self.con)?;
        Ok(())
    }

    /// Clears the control key (`RESUME`, and `dispatch`/`work` at start).
    pub fn clear_control(&mut self) -> Result<()> {
        let _: () = self.con.del(&self.keys.control)?;
        Ok(())
    }
}
