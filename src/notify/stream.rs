//! Following `P-events` with a consumer group, so that notifiers sharing a prefix take
//! each entry once and one that died leaves its entries to the others: the group
//! (`redbike-notify`, created at the stream's end when the first notifier starts),
//! reading (XREADGROUP, blocking at most a second), claiming the entries a dead
//! consumer held longer than the claim time (XAUTOCLAIM), keeping this notifier's own
//! held entries from being claimed while it delivers them (XCLAIM JUSTID), and
//! acknowledging (XACK) once an entry is dealt with.

use std::collections::BTreeMap;

use redis::{Connection, RedisResult, Value};

/// The consumer group every notifier joins.
pub const GROUP: &str = "redbike-notify";
/// Entries read at a time.
pub const COUNT: usize = 10;

/// One entry read.
#[derive(Debug, Clone)]
pub struct Item {
    /// Its id, `MS-SEQ`.
    pub id: String,
    /// Its fields; `None` when it was trimmed away while held (XREADGROUP of the held
    /// entries answers its id alone).
    pub fields: Option<BTreeMap<String, Vec<u8>>>,
    /// Whether it may have been delivered before: claimed from another consumer, or
    /// held by this one across a reconnection.
    pub redelivered: bool,
}

/// The stream of one prefix, as this notifier follows it.
pub struct Stream {
    /// `P-events`.
    pub key: String,
    /// This notifier's consumer name, `HOST:PID`.
    pub consumer: String,
}

/// The entries of a stream reply: `[[id, [field, value, ...]], ...]`.
fn items(v: &Value, redelivered: bool) -> Vec<Item> {
    let Value::Array(entries) = v else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let Value::Array(pair) = e else { return None };
            let id: String = redis::from_redis_value(pair.first()?.clone()).ok()?;
            let fields = match pair.get(1) {
                Some(Value::Array(kv)) => {
                    let mut map = BTreeMap::new();
                    for chunk in kv.chunks(2) {
                        if let [k, v] = chunk {
                            let k: String = redis::from_redis_value(k.clone()).unwrap_or_default();
                            let v: Vec<u8> = redis::from_redis_value(v.clone()).unwrap_or_default();
                            map.insert(k, v);
                        }
                    }
                    Some(map)
                }
                _ => None,
            };
            Some(Item {
                id,
                fields,
                redelivered,
            })
        })
        .collect()
}

impl Stream {
    /// The stream `key`, read as this process.
    pub fn new(key: &str) -> Stream {
        Stream {
            key: key.to_string(),
            consumer: format!("{}:{}", crate::host::name(), std::process::id()),
        }
    }

    /// Creates the group at the stream's end (and the stream, empty, if it is missing);
    /// a group that exists is kept. Whether it was created.
    pub fn ensure_group(&self, con: &mut Connection) -> RedisResult<bool> {
        let made: RedisResult<Value> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.key)
            .arg(GROUP)
            .arg("$")
            .arg("MKSTREAM")
            .query(con);
        match made {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads new entries, waiting at most `block_ms` for one; `held` reads this
    /// consumer's own entries not acknowledged yet instead (after a reconnection).
    pub fn read(&self, con: &mut Connection, block_ms: u64, held: bool) -> RedisResult<Vec<Item>> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(COUNT);
        if !held {
            cmd.arg("BLOCK").arg(block_ms);
        }
        cmd.arg("STREAMS")
            .arg(&self.key)
            .arg(if held { "0" } else { ">" });
        let reply: Value = cmd.query(con)?;
        // [[key, entries]] or nil after the block.
        let Value::Array(streams) = reply else {
            return Ok(Vec::new());
        };
        Ok(streams
            .iter()
            .filter_map(|s| match s {
                Value::Array(pair) => pair.get(1).map(|e| items(e, held)),
                _ => None,
            })
            .flatten()
            .collect())
    }

    /// Claims up to [`COUNT`] entries other consumers held for `idle_ms` or longer
    /// without acknowledging them (a notifier that died or hangs); with the number of
    /// such entries the stream no longer holds (trimmed away: lost).
    pub fn claim(&self, con: &mut Connection, idle_ms: u64) -> RedisResult<(Vec<Item>, usize)> {
        let reply: Value = redis::cmd("XAUTOCLAIM")
            .arg(&self.key)
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(idle_ms)
            .arg("0-0")
            .arg("COUNT")
            .arg(COUNT)
            .query(con)?;
        let Value::Array(parts) = reply else {
            return Ok((Vec::new(), 0));
        };
        let claimed = parts.get(1).map(|v| items(v, true)).unwrap_or_default();
        let deleted = match parts.get(2) {
            Some(Value::Array(ids)) => ids.len(),
            _ => 0,
        };
        Ok((claimed, deleted))
    }

    /// Resets the idle time of entries this consumer holds, so no other claims them
    /// while it is still delivering.
    pub fn touch(&self, con: &mut Connection, ids: &[String]) -> RedisResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::cmd("XCLAIM")
            .arg(&self.key)
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(0)
            .arg(ids)
            .arg("JUSTID")
            .query::<Value>(con)
            .map(drop)
    }

    /// The entry `id`, if the stream still holds it (its fields).
    pub fn entry(
        &self,
        con: &mut Connection,
        id: &str,
    ) -> RedisResult<Option<BTreeMap<String, Vec<u8>>>> {
        let reply: Value = redis::cmd("XRANGE")
            .arg(&self.key)
            .arg(id)
            .arg(id)
            .query(con)?;
        Ok(items(&reply, false)
            .into_iter()
            .next()
            .and_then(|i| i.fields))
    }

    /// Acknowledges an entry dealt with.
    pub fn ack(&self, con: &mut Connection, id: &str) -> RedisResult<()> {
        redis::cmd("XACK")
            .arg(&self.key)
            .arg(GROUP)
            .arg(id)
            .query::<Value>(con)
            .map(drop)
    }

    /// Entries trimmed away before the group read them, when Redis can tell (7.0 and
    /// later: the stream's `entries-added` and the group's `entries-read`, once the
    /// group's last id is older than the stream's first entry).
    pub fn lost(&self, con: &mut Connection) -> RedisResult<Option<u64>> {
        let stream: BTreeMap<String, Value> =
            match redis::cmd("XINFO").arg("STREAM").arg(&self.key).query(con) {
                Ok(m) => m,
                Err(_) => return Ok(None),
            };
        let groups: Vec<BTreeMap<String, Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&self.key)
            .query(con)?;
        let Some(group) = groups.iter().find(|g| {
            g.get("name")
                .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
                .as_deref()
                == Some(GROUP)
        }) else {
            return Ok(None);
        };
        let num = |m: &BTreeMap<String, Value>, k: &str| {
            m.get(k)
                .and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok())
        };
        // A group that never read has no `entries-read` (nil) and last id 0-0.
        let never_read = group
            .get("last-delivered-id")
            .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
            .is_some_and(|id| id == "0-0");
        let read = num(group, "entries-read").or(never_read.then_some(0));
        let (Some(added), Some(length), Some(read)) =
            (num(&stream, "entries-added"), num(&stream, "length"), read)
        else {
            return Ok(None);
        };
        // Entries gone from the stream (trimmed or deleted) that the group never read.
        let gone = added.saturating_sub(length);
        Ok(Some(gone.saturating_sub(read)))
    }

    /// Drops consumers of the group that hold nothing and were idle for `idle_ms` (a
    /// notifier killed or stopped uncleanly); how many. A live one reads every second,
    /// and one dropped by mistake is made again by its next read.
    pub fn drop_idle(&self, con: &mut Connection, idle_ms: u64) -> RedisResult<usize> {
        let consumers: Vec<BTreeMap<String, Value>> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&self.key)
            .arg(GROUP)
            .query(con)?;
        let num = |c: &BTreeMap<String, Value>, k: &str| {
            c.get(k)
                .and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok())
        };
        let mut dropped = 0;
        for c in &consumers {
            let name = c
                .get("name")
                .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
                .unwrap_or_default();
            if name != self.consumer
                && num(c, "pending") == Some(0)
                && num(c, "idle").is_some_and(|i| i >= idle_ms)
            {
                redis::cmd("XGROUP")
                    .arg("DELCONSUMER")
                    .arg(&self.key)
                    .arg(GROUP)
                    .arg(&name)
                    .query::<Value>(con)?;
                dropped += 1;
            }
        }
        Ok(dropped)
    }

    /// Leaves the group at a clean stop, when this consumer holds nothing.
    pub fn leave(&self, con: &mut Connection) -> RedisResult<()> {
        let consumers: Vec<BTreeMap<String, Value>> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&self.key)
            .arg(GROUP)
            .query(con)?;
        let mine = consumers.iter().find(|c| {
            c.get("name")
                .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
                .as_deref()
                == Some(self.consumer.as_str())
        });
        let pending = mine
            .and_then(|c| c.get("pending"))
            .and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok());
        if pending == Some(0) {
            redis::cmd("XGROUP")
                .arg("DELCONSUMER")
                .arg(&self.key)
                .arg(GROUP)
                .arg(&self.consumer)
                .query::<Value>(con)?;
        }
        Ok(())
    }
}
