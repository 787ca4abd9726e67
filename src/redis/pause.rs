//! A pause of a job or a queue as `redbike pause` stores it, read back by `tell`,
//! `check`, `stats` and `top`; here, below the operator commands, because the store
//! reads it too.

use redis::{Commands, RedisResult};
use serde::{Deserialize, Serialize};

use crate::{redis::store::Store, schedule::timestamp};

/// A pause, as stored (JSON) in `P-paused` and `P-paused-queues`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// When it was paused, unix seconds.
    #[serde(default)]
    pub since: i64,
    /// The operator's note (`--note`), empty when none was given.
    #[serde(default)]
    pub note: String,
    /// `since` as ISO 8601 UTC (shown, never stored).
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub since_utc: Option<String>,
}

impl Pause {
    /// A pause made now.
    pub fn new(since: i64, note: &str) -> Pause {
        Pause {
            since,
            note: note.to_string(),
            since_utc: None,
        }
    }

    /// The stored JSON.
    pub fn to_json(&self) -> String {
        // A struct of a number and a string always serializes.
        serde_json::to_string(self).expect("a pause serializes")
    }

    /// Reads a stored entry; one that is not our JSON (written by hand) still means
    /// paused, with the raw text as its note.
    pub fn parse(raw: &str) -> Pause {
        let mut pause =
            serde_json::from_str::<Pause>(raw).unwrap_or_else(|_| Pause::new(0, raw.trim()));
        pause.since_utc = (pause.since > 0).then(|| timestamp::iso_utc(pause.since));
        pause
    }
}

/// A job's schedule and whether it is paused, read together (`resume` reads them before
/// it decides where the job goes).
pub fn schedule_and_paused(store: &mut Store<'_>, id: &str) -> RedisResult<(Option<String>, bool)> {
    let k = store.keys;
    redis::pipe()
        .hget(&k.schedules, id)
        .hexists(&k.paused, id)
        .query(store.con)
}

/// Pauses `queue` (stores `pause` in `P-paused-queues`); false when it was paused
/// already (nothing changed).
pub fn pause_queue(store: &mut Store<'_>, queue: &str, pause: &Pause) -> RedisResult<bool> {
    store
        .con
        .hset_nx(&store.keys.paused_queues, queue, pause.to_json())
}

/// Ends the pause of `queue` and wakes its idle workers; false when it was not paused
/// (nothing changed).
pub fn resume_queue(store: &mut Store<'_>, queue: &str) -> RedisResult<bool> {
    let (removed, _): (i64, i64) = redis::pipe()
        .hdel(&store.keys.paused_queues, queue)
        .publish(store.keys.queue_wake(queue), 1)
        .query(store.con)?;
    Ok(removed == 1)
}
