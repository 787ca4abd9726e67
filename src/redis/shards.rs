//! The typed call of shards.lua: the number of shards a prefix is split into, as its
//! key `P-shards` records it (see [`crate::shard`]).

use crate::{
    error::{Error, Result},
    limits,
    redis::{scripts, store::Store},
};

/// What the prefix records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// Split into this many shards (1: not split).
    Shards(u32),
    /// Not split, and its own keys hold this many schedules: a process with more shards
    /// would leave them behind.
    Unsplit(u64),
}

/// Reads the number of shards `store`'s prefix (the unsplit one) records; with
/// `shards` > 1 and none recorded, records `shards` unless the prefix holds schedules.
pub(crate) fn record(store: &mut Store<'_>, shards: u32) -> Result<Recorded> {
    let reply: String = scripts::SHARDS
        .key(&store.keys.shards)
        .key(&store.keys.schedules)
        .arg(shards)
        .invoke(store.con)?;
    if let Some(held) = reply.strip_prefix("unsplit:") {
        return Ok(Recorded::Unsplit(held.parse().unwrap_or(0)));
    }
    // Anything else is another program's value: no number of shards to advise.
    let range = limits::SHARDS;
    match reply.trim().parse::<u32>() {
        Ok(n) if (range.lo..=range.hi).contains(&u64::from(n)) => Ok(Recorded::Shards(n)),
        _ => Err(Error::CannotFix {
            what: format!(
                "key {} holds {:?}, not a number of shards (1..=1024)",
                store.keys.shards,
                // Another program's value may be long; the start of it tells enough.
                reply.chars().take(40).collect::<String>()
            ),
            hint: "set it to the number the prefix is split into (`shards` in the config of its processes), or delete it if the prefix is not split".into(),
        }),
    }
}
