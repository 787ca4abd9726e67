//! `redbike ping`: one connection with the effective settings, and what it reached, to
//! debug a deployment (TLS, ACL user, Sentinel, Cluster) in one step, and the Redis
//! settings that lose jobs (see [`crate::redis::hazards`]).

use std::{fmt, time::Instant};

use redis::{Connection, Value};

use crate::{
    config::Config,
    error::Result,
    redis::hazards::{Health, Probe},
    redis::link::CONNECT_TIMEOUT,
    redis::store,
};

/// PINGs sent to measure the round trip; the median is reported.
const PINGS: usize = 5;

/// What `redbike ping` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `host:port` of the server reached.
    pub server: String,
    /// `standalone`, `sentinel` or `cluster`.
    pub mode: &'static str,
    /// The master's name at the sentinels.
    pub master_name: Option<String>,
    /// The prefix's hash slot on a cluster.
    pub slot: Option<u16>,
    /// The server's role, `master` or `replica` (`unknown` when HELLO is refused).
    pub role: String,
    /// The server's version (`unknown` when HELLO is refused).
    pub version: String,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The ACL user connected as.
    pub user: String,
    /// The key prefix in use.
    pub prefix: String,
    /// Median round trip of a PING, in milliseconds.
    pub latency_ms: f64,
    /// The Redis settings that lose jobs, or why INFO could not be read.
    pub health: Result<Health, String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "server: {}", self.server)?;
        writeln!(f, "mode: {}", self.mode)?;
        if let Some(name) = &self.master_name {
            writeln!(f, "master-name: {name}")?;
        }
        if let Some(slot) = self.slot {
            writeln!(f, "slot: {slot}")?;
        }
        writeln!(f, "role: {}", self.role)?;
        writeln!(f, "version: {}", self.version)?;
        writeln!(f, "tls: {}", if self.tls { "on" } else { "off" })?;
        writeln!(f, "user: {}", self.user)?;
        writeln!(f, "prefix: {}", self.prefix)?;
        writeln!(f, "latency_ms: {:.3}", self.latency_ms)?;
        match &self.health {
            Ok(h) => {
                writeln!(f, "maxmemory-policy: {}", h.maxmemory_policy)?;
                writeln!(f, "memory: {}", h.memory())?;
                writeln!(f, "evicted-keys: {}", h.evicted_keys)?;
                writeln!(f, "persistence: {}", h.persistence.name())?;
                for hazard in &h.hazards {
                    writeln!(f, "warning: {hazard}")?;
                }
                Ok(())
            }
            Err(why) => writeln!(
                f,
                "redis-settings: unknown: cannot read INFO ({why}); allow +info"
            ),
        }
    }
}

/// Connects as every other command would and reports on the server reached.
pub fn ping(config: &Config) -> Result<Report> {
    let topology = &config.redis.topology;
    let mut reached = store::reach(&config.redis, CONNECT_TIMEOUT)?;
    let (role, version) = hello(&mut reached.con);
    Ok(Report {
        server: reached.server,
        mode: topology.deployment.name(),
        master_name: topology.master_name.clone(),
        slot: reached.slot,
        role,
        version,
        tls: topology.tls,
        user: config
            .redis
            .settings
            .username
            .clone()
            .unwrap_or_else(|| "default".into()),
        prefix: config.prefix.clone(),
        latency_ms: latency_ms(&mut reached.con)?,
        health: Probe::of(&config.redis).query(&mut reached.con)?,
    })
}

/// The line `ping` prints for shard `k` (configuration `shard`) of a split prefix:
/// its prefix, the server serving it and, on a cluster, its slot.
pub fn shard_line(k: usize, shard: &Config) -> Result<String> {
    let reached = store::reach(&shard.redis, CONNECT_TIMEOUT)?;
    let slot = reached
        .slot
        .map(|s| format!(" slot {s}"))
        .unwrap_or_default();
    Ok(format!(
        "shard {k}: prefix {} server {}{slot}",
        shard.prefix, reached.server
    ))
}

/// Role and version from HELLO (no protocol switch); `unknown` when it is refused (an
/// ACL without `hello`, a server older than 6).
fn hello(con: &mut Connection) -> (String, String) {
    let fields: Vec<(String, Value)> = redis::cmd("HELLO").query(con).unwrap_or_default();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| redis::from_redis_value::<String>(v.clone()).ok())
            .unwrap_or_else(|| "unknown".into())
    };
    (field("role"), field("version"))
}

fn latency_ms(con: &mut Connection) -> Result<f64> {
    let mut rounds = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let start = Instant::now();
        redis::cmd("PING").query::<String>(con)?;
        rounds.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    rounds.sort_by(f64::total_cmp);
    Ok(rounds[PINGS / 2])
}
