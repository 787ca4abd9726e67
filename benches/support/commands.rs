//! Counting the commands Redis runs, the way the Python baseline counts them: CONFIG
//! RESETSTAT, then the sum of `calls` over INFO commandstats. Redis counts the commands
//! a Lua script runs (`redis.call`) as well as the EVALSHA itself, and the RESETSTAT
//! itself counts once.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

/// Zeroes the server's command statistics.
pub fn reset(con: &mut redis::Connection) -> Result<()> {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(con)
        .context("CONFIG RESETSTAT")
}

/// Calls per command since the last [`reset`], e.g. `{"evalsha": 5, "get": 5}`.
pub fn calls(con: &mut redis::Connection) -> Result<BTreeMap<String, u64>> {
    Ok(stats(con)?
        .into_iter()
        .map(|(name, s)| (name, s.calls))
        .collect())
}

/// What Redis counted for one command since the last [`reset`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Stat {
    /// How often it ran.
    pub calls: u64,
    /// Microseconds it took in all (for EVALSHA including the commands the script ran).
    pub usec: u64,
}

/// Calls and time per command since the last [`reset`].
pub fn stats(con: &mut redis::Connection) -> Result<BTreeMap<String, Stat>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .context("INFO commandstats")?;
    Ok(info.lines().filter_map(parse_line).collect())
}

/// `cmdstat_get:calls=5,usec=12,...` -> `("get", 5 calls, 12 µs)`.
fn parse_line(line: &str) -> Option<(String, Stat)> {
    let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let field = |key: &str| -> Option<u64> {
        fields
            .split(',')
            .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some((
        name.to_string(),
        Stat {
            calls: field("calls")?,
            usec: field("usec")?,
        },
    ))
}

/// `evalsha 5, get 5, ...`, most called first, for the notes under the table.
pub fn describe(calls: &BTreeMap<String, u64>) -> String {
    let mut by_count: Vec<_> = calls.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = by_count.iter().map(|(n, c)| format!("{n} {c}")).collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// `evalsha 20000 × 9.10 µs, zadd 10000 × 1.20 µs, ...`, most time first: Redis's time
/// per call of each command (a script's includes the commands it ran).
pub fn describe_usec(stats: &BTreeMap<String, Stat>) -> String {
    let mut by_time: Vec<_> = stats.iter().filter(|(_, s)| s.calls > 0).collect();
    by_time.sort_by(|a, b| b.1.usec.cmp(&a.1.usec).then(a.0.cmp(b.0)));
    let parts: Vec<String> = by_time
        .iter()
        .map(|(n, s)| format!("{n} {} × {:.2} µs", s.calls, s.usec as f64 / s.calls as f64))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}
