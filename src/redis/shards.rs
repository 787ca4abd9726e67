//! The typed call of shards.lua: the number of shards a prefix is split into, as its
//! key `P-shards` records it (see [`crate::shard`]).

use crate::{
    error::Result,
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
    // Anything else than a number is another program's value: treat it as a mismatch.
    Ok(Recorded::Shards(reply.trim().parse().unwrap_or(0)))
}
