//! Redis settings that lose jobs without an error: a `maxmemory-policy` that deletes
//! keys, no persistence, memory close to `maxmemory`, keys evicted.
//!
//! Everything is read with `INFO` (sections memory, persistence and stats), which the
//! ACL user of docs/deployments.md may run. Whether RDB has save points is not in
//! INFO: it is read with `CONFIG GET save` only when connected as the `default` user,
//! since an ACL user would be refused (and every refusal lands in `ACL LOG`), and
//! `CONFIG GET` cannot be granted without also revealing `requirepass` and
//! `masterauth`. Without it, no persistence is inferred only from changes that went
//! unsaved for over an hour.

use std::{
    collections::HashMap,
    fmt,
    time::{Duration, Instant},
};

use redis::{Connection, Pipeline, RedisResult, Value};
use serde::Serialize;

use crate::{
    error::{Error, Result},
    redis::{store::Store, topology::Access},
    schedule::timestamp,
};

/// How often dispatchers and workers read the settings again.
pub const CHECK_EVERY: Duration = Duration::from_secs(60);
/// Used memory, in per cent of `maxmemory`, from which memory counts as near the limit.
pub const NEAR_LIMIT_PERCENT: u64 = 90;
/// Once near the limit, memory counts as near until it drops below this (so a level
/// around the threshold does not log a line every minute).
const NEAR_LIMIT_CLEARS_PERCENT: u64 = 85;
/// Changes left unsaved this long, with AOF off, mean no RDB save point fires (Redis's
/// own loosest default is one change in an hour).
const UNSAVED_SECONDS: i64 = 3600;

/// Whether Redis keeps its data over a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Persistence {
    /// Append-only file on.
    Aof,
    /// RDB snapshots with save points (AOF off).
    Rdb,
    /// Neither: a restart loses everything.
    Off,
    /// AOF off, and the save points cannot be read (CONFIG GET not allowed).
    Unknown,
}

impl Persistence {
    /// The name in `ping`, `stats` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Persistence::Aof => "aof",
            Persistence::Rdb => "rdb",
            Persistence::Off => "off",
            Persistence::Unknown => "unknown",
        }
    }
}

/// The kinds of hazard, as `stats` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `maxmemory-policy` is not `noeviction`.
    EvictionPolicy,
    /// No AOF and no RDB save points.
    NoPersistence,
    /// Used memory at or above [`NEAR_LIMIT_PERCENT`] of `maxmemory`.
    MemoryNearLimit,
    /// `evicted_keys` is above 0.
    KeysEvicted,
}

impl Kind {
    /// Every kind, in the order they are reported.
    pub const ALL: [Kind; 4] = [
        Kind::EvictionPolicy,
        Kind::NoPersistence,
        Kind::MemoryNearLimit,
        Kind::KeysEvicted,
    ];

    /// The name in `stats` (JSON and Prometheus label).
    pub fn name(self) -> &'static str {
        match self {
            Kind::EvictionPolicy => "eviction-policy",
            Kind::NoPersistence => "no-persistence",
            Kind::MemoryNearLimit => "memory-near-limit",
            Kind::KeysEvicted => "keys-evicted",
        }
    }
}

/// One setting or figure that can lose jobs, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hazard {
    /// What kind it is.
    pub kind: Kind,
    /// One line for people.
    pub message: String,
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What INFO (and `CONFIG GET save`, when asked) says about the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// `maxmemory-policy` (`noeviction` when INFO does not say).
    pub maxmemory_policy: String,
    /// `used_memory`.
    pub used_memory_bytes: u64,
    /// `maxmemory`; 0 means no limit.
    pub maxmemory_bytes: u64,
    /// `evicted_keys`: keys deleted for memory since the start (or CONFIG RESETSTAT),
    /// every database's and application's.
    pub evicted_keys: u64,
    /// AOF, RDB, none, or unknown.
    pub persistence: Persistence,
    /// The findings, in the order of [`Kind::ALL`].
    pub hazards: Vec<Hazard>,
    /// Why persistence counts as off, for the message.
    #[serde(skip)]
    off_because: String,
}

/// `INFO`'s `key:value` lines (section headers and blank lines skipped).
pub fn parse_info(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end_matches('\r').split_once(':'))
        .collect()
}

impl Health {
    /// Reads INFO `text`, with the value of `CONFIG GET save` when it could be read, at
    /// unix time `now`.
    pub fn from_info(text: &str, save: Option<&str>, now: i64) -> Health {
        let info = parse_info(text);
        let num = |k: &str| info.get(k).and_then(|v| v.trim().parse::<i64>().ok());
        let unsigned = |k: &str| num(k).unwrap_or(0).max(0) as u64;
        let (persistence, off_because) = if num("aof_enabled") == Some(1) {
            (Persistence::Aof, String::new())
        } else {
            match save {
                Some(points) if points.trim().is_empty() => (
                    Persistence::Off,
                    "appendonly is no and save has no snapshot points".to_string(),
                ),
                Some(_) => (Persistence::Rdb, String::new()),
                None => {
                    let changes = unsigned("rdb_changes_since_last_save");
                    let unsaved = num("rdb_last_save_time").map(|t| now.saturating_sub(t));
                    match unsaved {
                        Some(secs) if changes > 0 && secs > UNSAVED_SECONDS => (
                            Persistence::Off,
                            format!(
                                "appendonly is no and no RDB snapshot was taken for {}h while {changes} change(s) waited",
                                secs / 3600
                            ),
                        ),
                        _ => (Persistence::Unknown, String::new()),
                    }
                }
            }
        };
        let mut health = Health {
            maxmemory_policy: info
                .get("maxmemory_policy")
                .map_or("noeviction", |p| p.trim())
                .to_string(),
            used_memory_bytes: unsigned("used_memory"),
            maxmemory_bytes: unsigned("maxmemory"),
            evicted_keys: unsigned("evicted_keys"),
            persistence,
            hazards: Vec::new(),
            off_because,
        };
        health.hazards = Kind::ALL
            .into_iter()
            .filter_map(|kind| {
                let message = health.message(kind)?;
                Some(Hazard { kind, message })
            })
            .collect();
        health
    }

    /// Used memory in per cent of `maxmemory`; `None` without a limit.
    pub fn percent_used(&self) -> Option<u64> {
        (self.maxmemory_bytes > 0).then(|| {
            (u128::from(self.used_memory_bytes) * 100 / u128::from(self.maxmemory_bytes)) as u64
        })
    }

    /// Whether the policy deletes keys that have no expiry (schedules, timeline, queues).
    pub fn evicts_any_key(&self) -> bool {
        self.maxmemory_policy.starts_with("allkeys-")
    }

    /// Whether Redis has no room left: at or over `maxmemory` under a policy that
    /// cannot make room by deleting any key (`noeviction`, or `volatile-*` with nothing
    /// volatile left to delete). Redis itself refuses only a script whose first write
    /// would grow the data, and redbike's scripts first take the job out of where it
    /// was (a write that frees), so a full Redis would take batch after batch.
    pub fn full(&self) -> bool {
        !self.evicts_any_key()
            && self.maxmemory_bytes > 0
            && self.used_memory_bytes >= self.maxmemory_bytes
    }

    /// `1.2 MiB used of maxmemory 30.0 MiB (4%)`, or `1.2 MiB used, no maxmemory`.
    pub fn memory(&self) -> String {
        match self.percent_used() {
            Some(pct) => format!(
                "{} used of maxmemory {} ({pct}%)",
                human(self.used_memory_bytes),
                human(self.maxmemory_bytes)
            ),
            None => format!("{} used, no maxmemory", human(self.used_memory_bytes)),
        }
    }

    /// The hazard of `kind`, if there is one.
    fn message(&self, kind: Kind) -> Option<String> {
        let policy = &self.maxmemory_policy;
        match kind {
            Kind::EvictionPolicy if self.evicts_any_key() => Some(format!(
                "maxmemory-policy is {policy}: when memory runs out Redis deletes any key, redbike's schedules, timeline and queues included, and jobs vanish without an error; set maxmemory-policy noeviction"
            )),
            Kind::EvictionPolicy if policy != "noeviction" => Some(format!(
                "maxmemory-policy is {policy}: when memory runs out Redis deletes keys that have an expiry, which are the leases of running jobs, so a job may run twice at once; set maxmemory-policy noeviction"
            )),
            Kind::NoPersistence if self.persistence == Persistence::Off => Some(format!(
                "no persistence: {}, so a restart of Redis loses every schedule written since; set appendonly yes (appendfsync everysec)",
                self.off_because
            )),
            Kind::MemoryNearLimit => {
                let pct = self.percent_used().filter(|p| *p >= NEAR_LIMIT_PERCENT)?;
                let what = if pct >= 100 { "memory is full" } else { "memory is near maxmemory" };
                Some(format!(
                    "{what}: {} used of maxmemory {} ({pct}%); at the limit Redis refuses writes (noeviction) or deletes keys (any other policy); raise maxmemory",
                    human(self.used_memory_bytes),
                    human(self.maxmemory_bytes)
                ))
            }
            Kind::KeysEvicted if self.evicted_keys > 0 => Some(format!(
                "Redis has evicted {} key(s) since it started (of any database and application; redbike's may be among them); run `redbike check`",
                self.evicted_keys
            )),
            _ => None,
        }
    }
}

/// Bytes for people, in binary units as Redis prints them: `512 B`, `30.0 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

pub use crate::error::is_oom;

/// The commands that read the settings, and how to read their replies.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// Whether to ask `CONFIG GET save` (only as the `default` user).
    config_get: bool,
}

impl Default for Probe {
    /// The probe of the `default` user, which asks `CONFIG GET save` too.
    fn default() -> Probe {
        Probe { config_get: true }
    }
}

impl Probe {
    /// The probe for the user `access` connects as.
    pub fn of(access: &Access) -> Probe {
        let info = access.settings.connection_info().ok();
        let user = info.as_ref().and_then(|i| i.redis_settings().username());
        Probe {
            config_get: user.is_none_or(|u| u == "default"),
        }
    }

    /// Adds the commands to `pipe`; returns how many replies they bring.
    pub fn add_to(&self, pipe: &mut Pipeline) -> usize {
        pipe.cmd("INFO");
        if self.config_get {
            pipe.cmd("CONFIG").arg("GET").arg("save");
        }
        1 + usize::from(self.config_get)
    }

    /// Reads the replies of the commands [`Probe::add_to`] added, taking exactly that
    /// many from `replies`; `Err` says why INFO could not be read (an ACL without
    /// `+info`). A refused `CONFIG GET` only leaves the save points unknown.
    pub fn read(
        &self,
        replies: &mut impl Iterator<Item = RedisResult<Value>>,
        now: i64,
    ) -> Result<Health, String> {
        let info = replies.next();
        let save = if self.config_get {
            replies.next()
        } else {
            None
        };
        let info: String = match info {
            Some(Ok(v)) => redis::from_redis_value(v).map_err(|e| e.to_string())?,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("no reply".into()),
        };
        let save = save
            .and_then(|r| r.ok())
            .and_then(|v| redis::from_redis_value::<HashMap<String, String>>(v).ok())
            .and_then(|mut m| m.remove("save"));
        Ok(Health::from_info(&info, save.as_deref(), now))
    }

    /// Reads the settings in one round trip of its own. The outer error is the
    /// connection's; the inner one says why INFO was refused.
    pub fn query(&self, con: &mut Connection) -> RedisResult<Result<Health, String>> {
        let mut pipe = redis::pipe();
        self.add_to(&mut pipe);
        let replies: Vec<RedisResult<Value>> = pipe.ignore_errors().query(con)?;
        Ok(self.read(&mut replies.into_iter(), timestamp::now()))
    }
}

/// Before a one-shot command writes `total` jobs: refuses (nothing written) when Redis
/// is full (see [`Health::full`]), and warns when its policy may delete what is written.
/// Returns what it read, for [`after_writing`]; `None` when INFO is refused.
pub fn before_writing(con: &mut Connection, probe: &Probe, total: usize) -> Result<Option<Health>> {
    let Ok(health) = probe.query(con)? else {
        return Ok(None);
    };
    if health.full() {
        return Err(Error::OutOfMemory {
            written: 0,
            total,
            detail: health.memory(),
        });
    }
    if let Some(h) = health
        .hazards
        .iter()
        .find(|h| h.kind == Kind::EvictionPolicy)
    {
        crate::log_warn!("{h}");
    }
    Ok(Some(health))
}

/// Between the batches of a write: what Redis reports when it is full now (see
/// [`Health::full`]), from one `INFO memory`; `None` when there is room, or when INFO
/// is refused.
pub fn full_now(con: &mut Connection) -> Result<Option<String>> {
    match redis::cmd("INFO").arg("memory").query::<String>(con) {
        Ok(text) => {
            let health = Health::from_info(&text, None, 0);
            Ok(health.full().then(|| health.memory()))
        }
        Err(e) if crate::error::is_connection_error(&e) => Err(e.into()),
        Err(_) => Ok(None),
    }
}

/// After a one-shot command wrote `total` jobs under a policy that may delete any key:
/// if Redis evicted keys meanwhile, counts the jobs whose schedule is gone (`missing`
/// looks them up; an error when any is). Costs one more look when nothing was evicted.
pub fn after_writing(
    store: &mut Store<'_>,
    probe: &Probe,
    before: Option<&Health>,
    total: usize,
    missing: impl FnOnce(&mut Store<'_>) -> Result<usize>,
) -> Result<()> {
    let Some(before) = before.filter(|h| h.evicts_any_key()) else {
        return Ok(());
    };
    let Ok(after) = probe.query(store.con)? else {
        return Ok(());
    };
    let evicted = after.evicted_keys.saturating_sub(before.evicted_keys);
    if evicted == 0 {
        return Ok(());
    }
    let missing = missing(store)?;
    if missing > 0 {
        return Err(Error::Evicted {
            evicted,
            policy: after.maxmemory_policy,
            missing,
            total,
        });
    }
    crate::log_warn!(
        "Redis evicted {evicted} key(s) while the jobs were written (maxmemory-policy {}): every job's schedule is there, but the timeline or queues may have lost entries; run `redbike check`",
        after.maxmemory_policy
    );
    Ok(())
}

/// A level and a line to log.
type Line = (crate::log::Level, String);

/// What a dispatcher or worker saw at its last look.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// The hazard of the policy, if any.
    policy: Option<String>,
    /// Whether persistence was off.
    off: bool,
    /// Whether memory was near the limit.
    near: bool,
    /// `evicted_keys`.
    evicted: u64,
    /// Whether it grew at the last look.
    evicting: bool,
}

/// Watches the settings for a dispatcher or worker: logs every hazard at the first
/// look, and later a line whenever one begins or ends (evictions begin or stop, memory
/// crosses [`NEAR_LIMIT_PERCENT`], the policy or persistence changes).
#[derive(Debug, Clone)]
pub struct Watch {
    /// `dispatcher` or `worker`, for the log lines.
    who: &'static str,
    /// What to ask.
    probe: Probe,
    /// The next look is due then.
    next: Instant,
    /// What the last successful look saw.
    seen: Option<Seen>,
    /// Whether the last look was refused (logged once).
    refused: bool,
}

impl Watch {
    /// A watch whose first look is due at once.
    pub fn new(access: &Access, who: &'static str) -> Watch {
        Watch {
            who,
            probe: Probe::of(access),
            next: Instant::now(),
            seen: None,
            refused: false,
        }
    }

    /// Whether a look is due.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Adds a look to `pipe` (the next is due [`CHECK_EVERY`] later); returns how many
    /// replies it brings, for [`Watch::read`].
    pub fn add_to(&mut self, pipe: &mut Pipeline) -> usize {
        self.next = Instant::now() + CHECK_EVERY;
        self.probe.add_to(pipe)
    }

    /// Reads the replies of a look and logs what changed.
    pub fn read(&mut self, replies: &mut impl Iterator<Item = RedisResult<Value>>) {
        let reading = self.probe.read(replies, timestamp::now());
        for (level, line) in self.changes(reading) {
            crate::log::write(level, format_args!("{}: {line}", self.who));
        }
    }

    /// A look in a round trip of its own; an error is the connection's.
    pub fn check(&mut self, con: &mut Connection) -> RedisResult<()> {
        let mut pipe = redis::pipe();
        self.add_to(&mut pipe);
        let replies: Vec<RedisResult<Value>> = pipe.ignore_errors().query(con)?;
        self.read(&mut replies.into_iter());
        Ok(())
    }

    /// The lines to log for a look's `reading`.
    fn changes(&mut self, reading: Result<Health, String>) -> Vec<Line> {
        use crate::log::Level::{Info, Warn};
        let health = match reading {
            Ok(health) => health,
            Err(why) => {
                let first = !std::mem::replace(&mut self.refused, true);
                self.seen = None;
                return match first {
                    true => vec![(Warn, format!(
                        "cannot read Redis INFO ({why}): settings that lose jobs (maxmemory-policy, persistence, evictions) go unchecked; allow +info (docs/deployments.md, Security / ACL)"
                    ))],
                    false => Vec::new(),
                };
            }
        };
        self.refused = false;
        let find = |kind| health.hazards.iter().find(|h| h.kind == kind);
        let first = self.seen.is_none();
        let was = self.seen.take().unwrap_or_default();
        let mut lines = Vec::new();
        let policy = find(Kind::EvictionPolicy).map(|h| h.message.clone());
        if policy != was.policy || first {
            match &policy {
                Some(message) => lines.push((Warn, message.clone())),
                None if !first => lines.push((
                    Info,
                    format!("maxmemory-policy is now {}", health.maxmemory_policy),
                )),
                None => {}
            }
        }
        let off = health.persistence == Persistence::Off;
        match (find(Kind::NoPersistence), was.off) {
            (Some(h), false) => lines.push((Warn, h.message.clone())),
            (None, true) => lines.push((
                Info,
                format!("persistence is {} now", health.persistence.name()),
            )),
            _ => {}
        }
        let pct = health.percent_used().unwrap_or(0);
        let near = match was.near {
            true => pct >= NEAR_LIMIT_CLEARS_PERCENT,
            false => pct >= NEAR_LIMIT_PERCENT,
        };
        match (near, was.near) {
            (true, false) => lines.push((
                Warn,
                find(Kind::MemoryNearLimit).map_or_else(|| health.memory(), |h| h.message.clone()),
            )),
            (false, true) => lines.push((
                Info,
                format!(
                    "memory is below {NEAR_LIMIT_CLEARS_PERCENT}% of maxmemory again: {}",
                    health.memory()
                ),
            )),
            _ => {}
        }
        let total = health.evicted_keys;
        let evicting = !first && total > was.evicted;
        if first {
            if let Some(h) = find(Kind::KeysEvicted) {
                lines.push((Warn, h.message.clone()));
            }
        } else if evicting && !was.evicting {
            lines.push((
                Warn,
                format!(
                    "Redis is evicting keys: {} since the last look, {total} since it started (maxmemory-policy {}); jobs may vanish; run `redbike check`",
                    total - was.evicted,
                    health.maxmemory_policy
                ),
            ));
        } else if !evicting && was.evicting {
            lines.push((
                Info,
                format!("Redis evicted no key since the last look ({total} since it started)"),
            ));
        }
        self.seen = Some(Seen {
            policy,
            off,
            near,
            evicted: total,
            evicting,
        });
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Level::{Info, Warn};

    /// An INFO text as Redis 7 writes it (CRLF, section headers), with `extra` lines.
    fn info(policy: &str, used: u64, max: u64, evicted: u64, extra: &str) -> String {
        format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:1M\r\nmaxmemory:{max}\r\nmaxmemory_policy:{policy}\r\n\r\n\
             # Persistence\r\nloading:0\r\nrdb_changes_since_last_save:0\r\nrdb_last_save_time:1000\r\naof_enabled:0\r\n{extra}\
             \r\n# Stats\r\nevicted_keys:{evicted}\r\nevicted_clients:0\r\n"
        )
    }

    fn kinds(h: &Health) -> Vec<&'static str> {
        h.hazards.iter().map(|h| h.kind.name()).collect()
    }

    #[test]
    fn parses_info_lines_and_skips_headers() {
        let text = info("noeviction", 5, 0, 0, "");
        let map = parse_info(&text);
        assert_eq!(map["used_memory"], "5");
        assert_eq!(map["maxmemory_policy"], "noeviction");
        assert!(!map.keys().any(|k| k.starts_with('#') || k.is_empty()));
        // Values may hold ':' themselves.
        assert_eq!(parse_info("a:b:c\r\n")["a"], "b:c");
    }

    #[test]
    fn a_safe_server_has_no_hazard() {
        let h = Health::from_info(
            &info("noeviction", 100, 1000, 0, "aof_enabled:1\r\n"),
            None,
            2000,
        );
        // The later aof_enabled line wins, as in a real INFO there is only one.
        assert_eq!(h.persistence, Persistence::Aof);
        assert_eq!(kinds(&h), Vec::<&str>::new());
        assert_eq!(h.percent_used(), Some(10));
        assert!(!h.full());
    }

    #[test]
    fn evicting_policies_are_hazards_and_say_what_they_delete() {
        let all = Health::from_info(&info("allkeys-lru", 1, 0, 0, ""), Some("3600 1"), 0);
        assert_eq!(kinds(&all), ["eviction-policy"]);
        assert!(all.hazards[0]
            .message
            .contains("schedules, timeline and queues"));
        assert!(all.evicts_any_key());
        let volatile = Health::from_info(&info("volatile-ttl", 1, 0, 0, ""), Some("3600 1"), 0);
        assert_eq!(kinds(&volatile), ["eviction-policy"]);
        assert!(volatile.hazards[0].message.contains("leases"));
        assert!(!volatile.evicts_any_key());
    }

    #[test]
    fn persistence_from_config_get_or_from_unsaved_changes() {
        let text = info("noeviction", 1, 0, 0, "");
        let off = Health::from_info(&text, Some(""), 0);
        assert_eq!(off.persistence, Persistence::Off);
        assert_eq!(kinds(&off), ["no-persistence"]);
        assert!(off.hazards[0]
            .message
            .contains("save has no snapshot points"));
        assert_eq!(
            Health::from_info(&text, Some("3600 1 300 100"), 0).persistence,
            Persistence::Rdb
        );
        // Without CONFIG GET: unknown, unless changes waited for over an hour.
        assert_eq!(
            Health::from_info(&text, None, 99_999).persistence,
            Persistence::Unknown
        );
        let stale = text.replace(
            "rdb_changes_since_last_save:0",
            "rdb_changes_since_last_save:7",
        );
        assert_eq!(
            Health::from_info(&stale, None, 1000 + 3600).persistence,
            Persistence::Unknown
        );
        let h = Health::from_info(&stale, None, 1000 + 7300);
        assert_eq!(h.persistence, Persistence::Off);
        assert!(
            h.hazards[0]
                .message
                .contains("for 2h while 7 change(s) waited"),
            "{h:?}"
        );
    }

    #[test]
    fn memory_near_and_at_the_limit() {
        let at = |used| Health::from_info(&info("noeviction", used, 1000, 0, ""), Some("1 1"), 0);
        assert_eq!(kinds(&at(899)), Vec::<&str>::new());
        assert_eq!(kinds(&at(900)), ["memory-near-limit"]);
        assert!(at(900).hazards[0]
            .message
            .starts_with("memory is near maxmemory"));
        assert!(!at(999).full());
        assert!(at(1000).full());
        assert!(at(1000).hazards[0].message.starts_with("memory is full"));
        // No limit: never near it.
        let none = Health::from_info(&info("noeviction", 1536, 0, 0, ""), Some("1 1"), 0);
        assert_eq!(none.percent_used(), None);
        assert!(!none.full());
        assert_eq!(none.memory(), "1.5 KiB used, no maxmemory");
        assert_eq!(at(450).memory(), "450 B used of maxmemory 1000 B (45%)");
    }

    #[test]
    fn evicted_keys_are_a_hazard_and_missing_figures_are_zero() {
        let h = Health::from_info(&info("allkeys-lru", 1, 0, 118_000, ""), Some(""), 0);
        assert_eq!(
            kinds(&h),
            ["eviction-policy", "no-persistence", "keys-evicted"]
        );
        assert!(h.hazards[2].message.contains("evicted 118000 key(s)"));
        let bare = Health::from_info("", None, 0);
        assert_eq!(bare.maxmemory_policy, "noeviction");
        assert_eq!(bare.used_memory_bytes, 0);
        assert_eq!(bare.persistence, Persistence::Unknown);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(30 * 1024 * 1024), "30.0 MiB");
        assert_eq!(human(1536), "1.5 KiB");
    }

    #[test]
    fn oom_replies_are_recognised() {
        let reply = |raw: &[u8]| {
            redis::parse_redis_value(raw)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        assert!(is_oom(&reply(
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
        )));
        // Redis 6 wraps a write refused inside a script in an ERR.
        assert!(is_oom(&reply(
            b"-ERR Error running script (call to f_1): @user_script:14: -OOM command not allowed when used memory > 'maxmemory'\r\n"
        )));
        assert!(!is_oom(&reply(b"-ERR unknown command\r\n")));
    }

    fn watch() -> Watch {
        Watch {
            who: "worker",
            probe: Probe { config_get: true },
            next: Instant::now(),
            seen: None,
            refused: false,
        }
    }

    fn look(w: &mut Watch, text: &str, save: &str) -> Vec<Line> {
        w.changes(Ok(Health::from_info(text, Some(save), 0)))
    }

    #[test]
    fn a_watch_logs_every_hazard_first_then_only_changes() {
        let mut w = watch();
        let lines = look(&mut w, &info("allkeys-lru", 950, 1000, 3, ""), "");
        let levels: Vec<_> = lines.iter().map(|l| l.0).collect();
        assert_eq!(levels, [Warn, Warn, Warn, Warn], "{lines:?}");
        // Nothing changed: nothing logged.
        assert!(look(&mut w, &info("allkeys-lru", 950, 1000, 3, ""), "").is_empty());
        // Evictions begin: one line; they go on: nothing; they stop: one line.
        let lines = look(&mut w, &info("allkeys-lru", 950, 1000, 10, ""), "");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].0, Warn);
        assert!(
            lines[0]
                .1
                .contains("evicting keys: 7 since the last look, 10 since"),
            "{lines:?}"
        );
        assert!(look(&mut w, &info("allkeys-lru", 950, 1000, 20, ""), "").is_empty());
        let lines = look(&mut w, &info("allkeys-lru", 950, 1000, 20, ""), "");
        assert_eq!(
            lines,
            [(
                Info,
                "Redis evicted no key since the last look (20 since it started)".to_string()
            )]
        );
        // Memory: 88% is still near (clears under 85%), 80% is not.
        assert!(look(&mut w, &info("allkeys-lru", 880, 1000, 20, ""), "").is_empty());
        let lines = look(&mut w, &info("allkeys-lru", 800, 1000, 20, ""), "");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].1.starts_with("memory is below 85%"), "{lines:?}");
        // Policy and persistence fixed.
        let lines = look(&mut w, &info("noeviction", 800, 1000, 20, ""), "3600 1");
        assert_eq!(
            lines,
            [
                (Info, "maxmemory-policy is now noeviction".to_string()),
                (Info, "persistence is rdb now".to_string()),
            ]
        );
    }

    #[test]
    fn a_safe_server_logs_nothing_and_a_refusal_once() {
        let mut w = watch();
        assert!(look(&mut w, &info("noeviction", 1, 0, 0, ""), "1 1").is_empty());
        let refused = w.changes(Err("NOPERM".into()));
        assert_eq!(refused.len(), 1);
        assert!(refused[0].1.contains("allow +info"));
        assert!(w.changes(Err("NOPERM".into())).is_empty());
        // Readable again: a first look, which finds nothing on a safe server.
        assert!(look(&mut w, &info("noeviction", 1, 0, 0, ""), "1 1").is_empty());
    }
}
