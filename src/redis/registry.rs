//! Who is alive: every dispatcher and worker registers itself under its prefix and
//! heart-beats, so that `redbike ps` lists them and `redbike stats` counts them.
//!
//! Layout (both new keys; the Python original neither writes nor reads them):
//! - `P-proc-ID`: a string holding the process's JSON [`Description`], written with
//!   `SET ... EX ttl` at every heartbeat, so it expires by itself `heartbeat-ttl`
//!   seconds after the last one, on Redis's clock (no clock of any host matters);
//! - `P-procs`: the set of ids, so readers never SCAN. A killed process leaves its id
//!   behind; readers skip ids whose description has expired, and every process that
//!   registers drops them (register.lua), so the set stays as small as the fleet.
//!
//! A heartbeat is `SET` + `SADD` (the `SADD` puts back an id that a registering
//! process dropped while this one was stalled past its ttl), every third of the ttl,
//! inside a round trip the process makes anyway: a worker's poll, a dispatcher's pass
//! (dispatch.lua); an idle process that looks for work only every 10 s (see
//! `crate::redis::peers`) looks when its heartbeat is due. With the default ttl of 30 s
//! that is 2 commands every 10 s. A process that stops cleanly deletes its description
//! and id.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use redis::{Connection, Pipeline, RedisResult, Value};
use serde::{Deserialize, Serialize};

use crate::{
    error::is_connection_error,
    redis::{scripts, store::Store, topology::Access},
    schedule::timestamp,
};

/// `kind` of a dispatcher.
pub const DISPATCHER: &str = "dispatcher";
/// `kind` of a worker.
pub const WORKER: &str = "worker";

/// What a process says about itself (the JSON stored in `P-proc-ID`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// Unique id: `HOST-PID-RANDOM`.
    pub id: String,
    /// `dispatcher` or `worker`.
    pub kind: String,
    /// The host name.
    pub host: String,
    /// The process id on that host.
    pub pid: u32,
    /// The distinct queues a worker works, in cycle order (none for a dispatcher).
    pub queues: Vec<String>,
    /// Jobs a worker runs at once (`None` for a dispatcher).
    pub concurrency: Option<u64>,
    /// The redbike version.
    pub version: String,
    /// When it started, unix seconds (its host's clock).
    pub started: i64,
    /// When it last heart-beat, unix seconds (its host's clock).
    pub heartbeat: i64,
    /// Seconds its entry outlives its last heartbeat (`heartbeat-ttl`).
    pub ttl: u64,
    /// The error retrying cannot fix that keeps it from its work (`NOPERM`,
    /// `WRONGTYPE`, ...), while that lasts; absent while it works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
    /// The fleet-wide limits a worker applies to its queues (`[redbike.limits]`);
    /// absent when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, u64>,
}

/// A registered process as a reader sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listed {
    /// What it says about itself.
    #[serde(flatten)]
    pub description: Description,
    /// Seconds until its entry expires unless it heart-beats again (Redis's PTTL).
    pub expires_in_seconds: f64,
}

/// The registration of this process, and its heartbeats.
pub struct Registration {
    /// What is written.
    description: Description,
    /// `P-proc-ID`.
    key: String,
    /// `P-procs`.
    procs: String,
    /// The prefix (register.lua builds the keys of the ids it checks).
    prefix: String,
    /// The next heartbeat is due then.
    next: Instant,
    /// Why the last heartbeat failed, if it did (logged once per change).
    failing: Option<String>,
    /// `P-schedules`.
    schedules: String,
    /// `P-schedules-lost`.
    lost_key: String,
    /// Whether the prefix lost its schedules (seen, and not restored since).
    lost: bool,
    /// Whether `P-schedules-lost` says so, as far as this process wrote it.
    marked: bool,
    /// Replies the last heartbeat brings beyond its own (a write of `P-schedules-lost`).
    marking: usize,
}

/// What the log, history and `stats` say when a process finds its prefix's schedules
/// and its own registration gone at once.
pub const LOST_SCHEDULES: &str = "the prefix lost its schedules: redis came back empty?";

/// How long `P-schedules-lost` tells `stats` of a loss nobody restored (a day).
const LOST_NOTE_TTL: u64 = 86_400;

impl Registration {
    /// The registration with the fleet-wide limits of its queues in `limits`.
    pub fn with_limits(mut self, limits: &BTreeMap<String, u64>) -> Registration {
        self.description.limits = self
            .description
            .queues
            .iter()
            .filter_map(|q| Some((q.clone(), *limits.get(q)?)))
            .collect();
        self
    }

    /// The registration of this process as a `kind` working `queues`.
    pub fn new(
        access: &Access,
        ttl: u64,
        kind: &str,
        queues: Vec<String>,
        concurrency: Option<usize>,
    ) -> Registration {
        let host = crate::host::name().to_string();
        let pid = std::process::id();
        let id = format!("{host}-{pid}-{:08x}", rand::random::<u32>());
        let keys = crate::redis::keys::Keys::new(&access.prefix);
        let now = timestamp::now();
        Registration {
            key: keys.proc(&id),
            procs: keys.procs,
            prefix: access.prefix.clone(),
            description: Description {
                id,
                kind: kind.to_string(),
                host,
                pid,
                queues,
                concurrency: concurrency.map(|n| n as u64),
                version: env!("CARGO_PKG_VERSION").to_string(),
                started: now,
                heartbeat: now,
                ttl,
                failing: None,
                limits: BTreeMap::new(),
            },
            next: Instant::now(),
            failing: None,
            schedules: keys.schedules,
            lost_key: keys.schedules_lost,
            lost: false,
            marked: false,
            marking: 0,
        }
    }

    /// Whether the prefix lost its schedules (Redis came back empty?): this process's
    /// registration and `P-schedules` were both gone, and no schedule came back since.
    pub fn lost_schedules(&self) -> bool {
        self.lost
    }

    /// Notes what a heartbeat (or a worker's refresh) saw: whether this process was no
    /// longer registered, and whether `P-schedules` exists. Both gone at once is what
    /// Redis restarted empty leaves (or a FLUSHDB): said once, and until schedules
    /// come back, history entries and `stats` say it.
    pub fn note_prefix(&mut self, unregistered: bool, schedules: bool) {
        let kind = &self.description.kind;
        if unregistered && !schedules && !self.lost {
            self.lost = true;
            crate::log_warn!(
                "{kind}: {LOST_SCHEDULES} {} and this {kind}'s registration are gone; restore the schedules from a backup (`redbike load` of what `redbike schedules` wrote); runs that end meanwhile are recorded with this note",
                self.schedules
            );
        } else if schedules && self.lost {
            self.lost = false;
            crate::log_info!("{kind}: {} holds schedules again", self.schedules);
        }
    }

    /// Adds the write of `P-schedules-lost` when it no longer says what this process
    /// saw: the note while the loss lasts, its deletion once schedules came back.
    fn add_marker(&mut self, pipe: &mut Pipeline) -> usize {
        if self.lost == self.marked {
            return 0;
        }
        self.marked = self.lost;
        if self.lost {
            let note = format!(
                "{LOST_SCHEDULES} ({} {} saw it at {})",
                self.description.kind,
                self.description.id,
                timestamp::iso_utc(timestamp::now())
            );
            pipe.cmd("SET")
                .arg(&self.lost_key)
                .arg(note)
                .arg("EX")
                .arg(LOST_NOTE_TTL);
        } else {
            pipe.cmd("DEL").arg(&self.lost_key);
        }
        1
    }

    /// For a process whose heartbeats go through a script (the dispatcher's, in
    /// dispatch.lua): looks, in a round trip of its own, whether it is still
    /// registered and `P-schedules` exists (see [`Registration::note_prefix`]).
    /// Errors are the heartbeat's to report; they pass here.
    pub fn look_at_prefix(&mut self, con: &mut Connection) {
        let mut pipe = redis::pipe();
        pipe.cmd("SISMEMBER")
            .arg(&self.procs)
            .arg(&self.description.id)
            .cmd("EXISTS")
            .arg(&self.schedules);
        let seen: RedisResult<(bool, bool)> = pipe.query(con);
        if let Ok((registered, schedules)) = seen {
            self.note_prefix(!registered, schedules);
            let mut pipe = redis::pipe();
            if self.add_marker(&mut pipe) > 0 {
                let _: RedisResult<()> = pipe.query(con);
            }
        }
    }

    /// Whether a heartbeat is due.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// When the next heartbeat is due.
    pub fn next_due(&self) -> Instant {
        self.next
    }

    /// The process's id (`HOST-PID-RANDOM`).
    pub fn id(&self) -> &str {
        &self.description.id
    }

    /// The description as of now, JSON; the next heartbeat is due a third of the ttl
    /// later.
    fn beat_now(&mut self) -> String {
        self.description.heartbeat = timestamp::now();
        self.next = Instant::now() + Duration::from_secs(self.description.ttl) / 3;
        // A struct of strings, numbers and a list of strings always serializes.
        serde_json::to_string(&self.description).expect("Description serializes")
    }

    /// The heartbeat as dispatch.lua takes it: keys procs and description key, then
    /// arguments id, description and ttl.
    pub fn beat_for_script(&mut self) -> ([String; 2], [String; 3]) {
        let json = self.beat_now();
        (
            [self.procs.clone(), self.key.clone()],
            [
                self.description.id.clone(),
                json,
                self.description.ttl.to_string(),
            ],
        )
    }

    /// Notes the error retrying cannot fix that keeps this process from its work (`None`
    /// once it works again), said by the next heartbeat.
    pub fn unfixable(&mut self, kind: Option<&str>) {
        self.description.failing = kind.map(str::to_string);
    }

    /// Adds a heartbeat to `pipe`; returns how many replies it brings (for
    /// [`Registration::read`]).
    pub fn add_to(&mut self, pipe: &mut Pipeline) -> usize {
        let json = self.beat_now();
        pipe.cmd("SET")
            .arg(&self.key)
            .arg(json)
            .arg("EX")
            .arg(self.description.ttl);
        pipe.cmd("SADD").arg(&self.procs).arg(&self.description.id);
        pipe.cmd("EXISTS").arg(&self.schedules);
        self.marking = self.add_marker(pipe);
        3 + self.marking
    }

    /// Reads the replies of a heartbeat added by [`Registration::add_to`]. A refusal
    /// is logged, never the caller's error: a process that cannot register still
    /// does its work.
    pub fn read(&mut self, replies: &mut impl Iterator<Item = RedisResult<Value>>) {
        let mut why = None;
        let mut ints = [None; 3];
        for i in 0..3 + self.marking {
            match (replies.next(), ints.get_mut(i)) {
                (Some(Err(e)), _) => {
                    why.get_or_insert_with(|| crate::error::describe_redis(&e));
                }
                (Some(Ok(Value::Int(n))), Some(int)) => *int = Some(n),
                _ => {}
            }
        }
        self.note(why);
        // SADD answers 1 when this process's id was no longer in the set.
        if let [_, Some(added), Some(exists)] = ints {
            self.note_prefix(added == 1, exists == 1);
        }
    }

    /// Notes dispatch.lua's heartbeat result (`1` written, `-1` refused).
    pub fn note_script(&mut self, result: i64) {
        let why = (result < 0).then(|| {
            format!(
                "{} holds another type than a set; `redbike check` names it",
                self.procs
            )
        });
        self.note(why);
    }

    /// Logs a heartbeat failure once per change of state.
    fn note(&mut self, why: Option<String>) {
        if why == self.failing {
            return;
        }
        match &why {
            Some(w) => crate::log_warn!(
                "{}: cannot register in {} ({w}); it works on, but `redbike ps` and `stats` do not count it",
                self.description.kind,
                self.procs
            ),
            None => crate::log_info!(
                "{}: registered in {} again",
                self.description.kind,
                self.procs
            ),
        }
        self.failing = why;
    }

    /// Registers (register.lua), dropping the ids of expired processes. A connection
    /// error is returned (the caller retries); a refusal is logged and passed over.
    pub fn register(&mut self, con: &mut Connection) -> RedisResult<()> {
        let json = self.beat_now();
        let result: RedisResult<i64> = scripts::REGISTER
            .key(&self.procs)
            .key(&self.key)
            .arg(&self.prefix)
            .arg(&self.description.id)
            .arg(json)
            .arg(self.description.ttl)
            .invoke(con);
        match result {
            Ok(dropped) => {
                if dropped > 0 {
                    crate::log_info!(
                        "{}: dropped {dropped} expired process(es) from {}",
                        self.description.kind,
                        self.procs
                    );
                }
                self.note(None);
                Ok(())
            }
            Err(e) if is_connection_error(&e) => Err(e),
            Err(e) => {
                self.note(Some(crate::error::describe_redis(&e)));
                Ok(())
            }
        }
    }

    /// Deregisters on a clean stop; failures are only logged (the entry expires).
    pub fn deregister(&self, con: Option<&mut Connection>) {
        let Some(con) = con else {
            return;
        };
        let done: RedisResult<()> = redis::pipe()
            .del(&self.key)
            .ignore()
            .srem(&self.procs, &self.description.id)
            .ignore()
            .query(con);
        if let Err(e) = done {
            crate::log_debug!(
                "{}: cannot deregister ({e}); its entry expires within {}s",
                self.description.kind,
                self.description.ttl
            );
        }
    }
}

/// Every registered process whose entry has not expired, sorted by kind, host, pid:
/// SMEMBERS, then GET and PTTL of each entry, in two round trips. Entries that are
/// not a redbike description (written by hand) are left out.
pub fn list(store: &mut Store<'_>) -> RedisResult<Vec<Listed>> {
    let ids: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
        .arg(&store.keys.procs)
        .query(store.con)?;
    // An id that is not UTF-8 is not one redbike registers (another program wrote it).
    let ids: Vec<String> = ids
        .into_iter()
        .filter_map(|id| String::from_utf8(id).ok())
        .collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for id in &ids {
        let key = store.keys.proc(id);
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
    }
    // A description key of another type: its GET fails alone.
    let replies: Vec<RedisResult<Value>> = pipe.ignore_errors().query(store.con)?;
    let mut listed: Vec<Listed> = replies
        .chunks(2)
        .filter_map(|pair| {
            let raw: Vec<u8> =
                redis::from_redis_value(pair.first()?.as_ref().ok()?.clone()).ok()?;
            let pttl: i64 = redis::from_redis_value(pair.get(1)?.as_ref().ok()?.clone()).ok()?;
            let description: Description = serde_json::from_slice(&raw).ok()?;
            Some(Listed {
                description,
                expires_in_seconds: pttl.max(0) as f64 / 1000.0,
            })
        })
        .collect();
    listed.sort_by(|a, b| {
        let key = |l: &Listed| {
            let d = &l.description;
            (d.kind.clone(), d.host.clone(), d.pid, d.id.clone())
        };
        key(a).cmp(&key(b))
    });
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_round_trip_through_json() {
        let d = Description {
            id: "h-1-0000abcd".into(),
            kind: WORKER.into(),
            host: "h".into(),
            pid: 1,
            queues: vec!["A".into(), "B".into()],
            concurrency: Some(4),
            version: "0.1.0".into(),
            started: 10,
            heartbeat: 20,
            ttl: 30,
            failing: Some("NOPERM".into()),
            limits: [("B".to_string(), 3)].into(),
        };
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Description>(&json).unwrap(), d);
    }
}
