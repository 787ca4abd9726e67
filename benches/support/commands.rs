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
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .context("INFO commandstats")?;
    Ok(info.lines().filter_map(parse_line).collect())
}

/// `cmdstat_get:calls=5,usec=12,...` -> `("get", 5)`.
fn parse_line(line: &str) -> Option<(String, u64)> {
    let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let calls = fields
        .split(',')
        .find_map(|f| f.strip_prefix("calls="))?
        .parse()
        .ok()?;
    Some((name.to_string(), calls))
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
