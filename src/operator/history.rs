//! What `redbike history` reads: the run history of one job, or the recent runs of
//! every job, over all the shards of a prefix.

use crate::{
    config::Config,
    error::Result,
    history::{Entry, Query},
    jobid,
    redis::store::with_store,
    shard,
};

/// The entries `query` asks for under `config`'s prefix, newest first.
pub fn read(config: &Config, query: &Query) -> Result<Vec<Entry>> {
    let shards = match &query.job {
        Some(id) => {
            jobid::validate_stored(id)?;
            vec![shard::checked_for_job(config, id)?]
        }
        None => shard::checked_all(config)?,
    };
    // The shards are read at once; their entries are put together in shard order.
    let mut entries: Vec<Entry> = shard::map(&shards, |config| {
        with_store(&config.redis, |store| {
            crate::redis::history::read(store, query)
        })
    })?
    .into_iter()
    .flatten()
    .collect();
    if shards.len() > 1 {
        // Each shard's entries are newest first; so are all of them together.
        entries.sort_by(|a, b| b.end.total_cmp(&a.end));
        entries.truncate(query.limit.unwrap_or(usize::MAX));
    }
    Ok(entries)
}
