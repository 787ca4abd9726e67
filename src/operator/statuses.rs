//! What `redbike statuses` prints: every job's status (`EVENT:TIMESTAMP`) up to a time,
//! over all the shards of a prefix.

use crate::{
    config::Config,
    error::Result,
    redis::store::with_store,
    shard::{self, Order},
    status::Status,
};

/// Calls `emit(job id, status)` for every status at or before `before` under `config`'s
/// prefix (its shards read at once, each in HSCAN order; the rows of the shards come
/// interleaved, for output that is sorted); a value that is not `EVENT:TIMESTAMP` is
/// logged and left out.
pub fn each_status(
    config: &Config,
    before: i64,
    emit: impl FnMut((Vec<u8>, Status)) -> Result<()>,
) -> Result<()> {
    let shards = shard::checked_all(config)?;
    shard::read_all(
        &shards,
        Order::Any,
        |config, emit| {
            with_store(&config.redis, |store| {
                let key = store.keys.statuses.clone();
                store.scan_hash(&key, |id, raw| {
                    match Status::parse(&String::from_utf8_lossy(&raw)) {
                        Some(s) if s.at <= before => emit((id, s))?,
                        Some(_) => {}
                        None => crate::log_warn!(
                            "status of {:?} is {:?}, not EVENT:TIMESTAMP; left out",
                            String::from_utf8_lossy(&id),
                            String::from_utf8_lossy(&raw)
                        ),
                    }
                    Ok(())
                })
            })
        },
        emit,
    )?;
    Ok(())
}
