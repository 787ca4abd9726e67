//! What `redbike events` reads: the event stream `P-events` (docs/events.md) of every
//! shard of a prefix, merged in the order of the entries' ids, filtered, and, with
//! `--follow`, followed as entries arrive (XREAD BLOCK), riding out Redis outages.
//! Entries of another format (`v` other than 1) or of a type this version does not know
//! are skipped and counted.

use std::time::Duration;

use redis::{Connection, RedisResult};

use crate::{
    config::Config,
    error::Result,
    history::{Entry, Stored},
    redis::link::Link,
    redis::store::with_store,
    shard,
    shutdown::Shutdown,
};

/// The entry types this version reads.
pub const TYPES: [&str; 4] = ["run", "stale", "fresh", "action"];

/// Entries read per call.
const PAGE: usize = 1000;

/// How many entries `--follow` shows before it follows, as `journalctl -f` does.
pub const FOLLOW_LAST: usize = 10;

/// How long one XREAD waits for entries, over all shards (each shard waits its share).
const BLOCK: Duration = Duration::from_secs(1);

/// Which entries to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only failures: run events with `failed` 1, and jobs becoming stale.
    pub failures: bool,
    /// Only this job's entries (runs, staleness) and the actions on it.
    pub job: Option<String>,
    /// Only entries written at or after this instant (unix seconds, Redis's clock).
    pub since: Option<i64>,
}

impl Filter {
    /// Whether `e` is to be shown.
    pub fn shows(&self, e: &Event) -> bool {
        if self
            .since
            .is_some_and(|s| (e.millis as i64) < s.saturating_mul(1000))
        {
            return false;
        }
        if let Some(job) = &self.job {
            let subject = match e.kind() {
                "action" => e.get("target"),
                _ => e.get("job"),
            };
            if subject != Some(job.as_str()) {
                return false;
            }
        }
        if self.failures {
            return match e.kind() {
                "run" => e.get("failed") == Some("1"),
                "stale" => true,
                _ => false,
            };
        }
        true
    }
}

/// One entry of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its id, `MILLIS-SEQ`.
    pub id: String,
    /// The milliseconds of its id: when Redis wrote it.
    pub millis: u64,
    /// The sequence number of its id.
    pub seq: u64,
    /// The shard whose stream holds it (0 when the prefix is not split).
    pub shard: usize,
    /// Its fields, in their order (values made valid UTF-8).
    pub fields: Vec<(String, String)>,
}

impl Event {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Its type (`run`, `stale`, `fresh`, `action`).
    pub fn kind(&self) -> &str {
        self.get("type").unwrap_or("")
    }

    /// Whether this version reads it: format 1, a known type.
    pub fn known(&self) -> bool {
        self.get("v") == Some("1") && TYPES.contains(&self.kind())
    }

    /// A run event's history entry, as `redbike history` shows it.
    pub fn entry(&self) -> Option<Entry> {
        let raw = self.get("entry")?;
        serde_json::from_str::<Stored>(raw).ok().map(Entry::from)
    }

    /// The instant of its id, ISO 8601 UTC to the millisecond.
    pub fn time(&self) -> String {
        chrono::DateTime::from_timestamp_millis(self.millis as i64)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
            .unwrap_or_default()
    }

    /// The order of entries over shards: by id, then shard.
    fn key(&self) -> (u64, u64, usize) {
        (self.millis, self.seq, self.shard)
    }
}

/// A stream entry as Redis sends it.
type Raw = (String, Vec<Vec<u8>>);

/// XREAD's reply: per stream, its name and entries; nil when the wait ran out.
type Streams = Option<Vec<(String, Vec<Raw>)>>;

/// Parses one raw entry of shard `shard`; `None` for an id that is not Redis's.
fn parse(raw: Raw, shard: usize) -> Option<Event> {
    let (id, flat) = raw;
    let (ms, seq) = id.split_once('-')?;
    let (millis, seq) = (ms.parse().ok()?, seq.parse().ok()?);
    let fields = flat
        .chunks(2)
        .filter_map(|p| match p {
            [k, v] => Some((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )),
            _ => None,
        })
        .collect();
    Some(Event {
        id,
        millis,
        seq,
        shard,
        fields,
    })
}

/// Sorts the entries of `raw` into `out` (shown) or `skipped`.
fn take(raw: Vec<Raw>, shard: usize, filter: &Filter, out: &mut Vec<Event>, skipped: &mut usize) {
    for r in raw {
        match parse(r, shard) {
            Some(e) if !e.known() => *skipped += 1,
            Some(e) if filter.shows(&e) => out.push(e),
            Some(_) => {}
            None => *skipped += 1,
        }
    }
}

/// The id right after `id` (the start of the next page: exclusive ranges need Redis
/// 6.2).
fn after_id(id: &str) -> String {
    match id
        .split_once('-')
        .map(|(m, s)| (m.parse::<u64>(), s.parse::<u64>()))
    {
        Some((Ok(ms), Ok(u64::MAX))) => format!("{}-0", ms.saturating_add(1)),
        Some((Ok(ms), Ok(seq))) => format!("{ms}-{}", seq + 1),
        _ => "+".into(),
    }
}

/// The id right before `id` (the end of the previous page, reading backwards).
fn before_id(id: &str) -> String {
    match id
        .split_once('-')
        .map(|(m, s)| (m.parse::<u64>(), s.parse::<u64>()))
    {
        Some((Ok(0), Ok(0))) => "-".into(),
        Some((Ok(ms), Ok(0))) => format!("{}-{}", ms - 1, u64::MAX),
        Some((Ok(ms), Ok(seq))) => format!("{ms}-{}", seq - 1),
        _ => "-".into(),
    }
}

/// The start of a read from `since` (unix seconds): XRANGE's `-` without it.
fn start_of(since: Option<i64>) -> String {
    match since {
        Some(s) if s > 0 => format!("{}-0", s.saturating_mul(1000)),
        _ => "-".into(),
    }
}

/// XRANGE `key` from `start` (inclusive) on, in pages; every entry.
fn range_from(con: &mut Connection, key: &str, start: &str) -> RedisResult<Vec<Raw>> {
    let mut all: Vec<Raw> = Vec::new();
    let mut from = start.to_string();
    loop {
        let page: Vec<Raw> = redis::cmd("XRANGE")
            .arg(key)
            .arg(&from)
            .arg("+")
            .arg("COUNT")
            .arg(PAGE)
            .query(con)?;
        let n = page.len();
        if let Some((last, _)) = page.last() {
            from = after_id(last);
        }
        all.extend(page);
        if n < PAGE {
            return Ok(all);
        }
    }
}

/// One shard's stream read page by page from a start, for [`read`]'s merge.
struct Cursor {
    con: Connection,
    key: String,
    shard: usize,
    /// XRANGE's next start.
    from: String,
    /// Read and not yet taken, oldest first.
    page: std::collections::VecDeque<Event>,
    /// Whether the stream's end was reached.
    done: bool,
}

impl Cursor {
    /// The oldest entry not yet taken (reading the next page when needed), counting
    /// what is skipped; `None` at the end.
    fn head(&mut self, skipped: &mut usize) -> RedisResult<Option<&Event>> {
        while self.page.is_empty() && !self.done {
            let raw: Vec<Raw> = redis::cmd("XRANGE")
                .arg(&self.key)
                .arg(&self.from)
                .arg("+")
                .arg("COUNT")
                .arg(PAGE)
                .query(&mut self.con)?;
            self.done = raw.len() < PAGE;
            if let Some((last, _)) = raw.last() {
                self.from = after_id(last);
            }
            for r in raw {
                match parse(r, self.shard) {
                    Some(e) if e.known() => self.page.push_back(e),
                    _ => *skipped += 1,
                }
            }
        }
        Ok(self.page.front())
    }
}

/// Hands `show` the entries `filter` shows of every shard of `config`'s prefix, oldest
/// first (the shards merged by id), a page of each shard at a time; returns how many
/// were skipped (another format, an unknown type).
pub fn read(
    config: &Config,
    filter: &Filter,
    mut show: impl FnMut(&Event) -> Result<()>,
) -> Result<usize> {
    let shards = shard::checked_all(config)?;
    let start = start_of(filter.since);
    let mut cursors = Vec::new();
    for (k, config) in shards.iter().enumerate() {
        cursors.push(Cursor {
            con: crate::redis::store::connect(&config.redis, crate::redis::store::COMMAND_TIMEOUT)?,
            key: crate::redis::keys::Keys::new(&config.prefix).events,
            shard: k,
            from: start.clone(),
            page: Default::default(),
            done: false,
        });
    }
    let mut skipped = 0;
    loop {
        // The cursor whose head comes first.
        let mut first: Option<(usize, (u64, u64, usize))> = None;
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(e) = c.head(&mut skipped)? {
                let key = e.key();
                if first.is_none_or(|(_, k)| key < k) {
                    first = Some((i, key));
                }
            }
        }
        let Some((i, _)) = first else {
            return Ok(skipped);
        };
        if let Some(e) = cursors[i].page.pop_front() {
            if filter.shows(&e) {
                show(&e)?;
            }
        }
    }
}

/// The last `n` entries `filter` shows of one stream, oldest first, and the id of its
/// newest entry (following goes on after it; `0-0` for an empty stream).
fn last_of(
    con: &mut Connection,
    key: &str,
    shard: usize,
    filter: &Filter,
    n: usize,
    skipped: &mut usize,
) -> RedisResult<(Vec<Event>, String)> {
    let mut found = Vec::new();
    let mut newest = None;
    let mut to = "+".to_string();
    loop {
        let page: Vec<Raw> = redis::cmd("XREVRANGE")
            .arg(key)
            .arg(&to)
            .arg("-")
            .arg("COUNT")
            .arg(PAGE)
            .query(con)?;
        let len = page.len();
        if let Some((last, _)) = page.last() {
            to = before_id(last);
        }
        if newest.is_none() {
            newest = page.first().map(|(id, _)| id.clone());
        }
        take(page, shard, filter, &mut found, skipped);
        if found.len() >= n || len < PAGE {
            found.truncate(n);
            found.reverse();
            return Ok((found, newest.unwrap_or_else(|| "0-0".into())));
        }
    }
}

/// `redbike events --follow`: hands `show` the last [`FOLLOW_LAST`] entries `filter`
/// shows (or, with `filter.since`, all since then), merged over the shards, then each
/// entry as it arrives, until `shutdown` is requested. Redis unreachable at the start
/// is an error; later outages are ridden out (reconnecting with capped backoff, one
/// log line per change). `skipped` is told the running count of skipped entries when
/// it grows. Returns that count.
pub fn follow(
    config: &Config,
    filter: &Filter,
    shutdown: &Shutdown,
    mut show: impl FnMut(&Event) -> Result<()>,
    mut skipped: impl FnMut(usize),
) -> Result<usize> {
    let shards = shard::checked_all(config)?;
    // The stop signals go to the thread that waits for them, never into a blocked
    // XREAD here (an interrupted read would look like an outage).
    if Shutdown::signal_thread_running() {
        crate::shutdown::block_in_this_thread(&crate::shutdown::STOP_SIGNALS);
    }
    let mut count = 0;
    let mut first = Vec::new();
    let mut after = Vec::new();
    for (k, config) in shards.iter().enumerate() {
        let (events, last) = with_store(&config.redis, |store| {
            let key = &store.keys.events;
            Ok(match filter.since {
                None => last_of(store.con, key, k, filter, FOLLOW_LAST, &mut count)?,
                Some(since) => {
                    let raw = range_from(store.con, key, &start_of(Some(since)))?;
                    let last = match raw.last() {
                        Some((id, _)) => id.clone(),
                        // Nothing since then yet: what comes next is.
                        None if since > 0 => {
                            format!("{}-{}", since.saturating_mul(1000) - 1, u64::MAX)
                        }
                        None => "0-0".into(),
                    };
                    let mut events = Vec::new();
                    take(raw, k, filter, &mut events, &mut count);
                    (events, last)
                }
            })
        })?;
        first.extend(events);
        after.push(last);
    }
    first.sort_by_key(Event::key);
    if filter.since.is_none() {
        let drop = first.len().saturating_sub(FOLLOW_LAST);
        first.drain(..drop);
    }
    for e in &first {
        show(e)?;
    }
    if count > 0 {
        skipped(count);
    }
    let mut links: Vec<Link> = shards
        .iter()
        .map(|c| {
            let mut link = Link::new(&c.redis, "events");
            // It read the stream once: from now on every error is ridden out.
            link.settle();
            link
        })
        .collect();
    let keys: Vec<String> = shards
        .iter()
        .map(|c| crate::redis::keys::Keys::new(&c.prefix).events)
        .collect();
    let block = BLOCK / shards.len().max(1) as u32;
    while !shutdown.requested() {
        let mut idle = true;
        for k in 0..shards.len() {
            if shutdown.requested() {
                break;
            }
            let Some(con) = links[k].get() else {
                continue;
            };
            idle = false;
            let reply: RedisResult<Streams> = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(PAGE)
                .arg("BLOCK")
                .arg(block.as_millis() as u64)
                .arg("STREAMS")
                .arg(&keys[k])
                .arg(&after[k])
                .query(con);
            match reply {
                Ok(streams) => {
                    links[k].ok();
                    let before = count;
                    for (_, raw) in streams.unwrap_or_default() {
                        if let Some((id, _)) = raw.last() {
                            after[k] = id.clone();
                        }
                        let mut events = Vec::new();
                        take(raw, k, filter, &mut events, &mut count);
                        for e in &events {
                            show(e)?;
                        }
                    }
                    if count > before {
                        skipped(count);
                    }
                }
                Err(e) => links[k].failed(&e),
            }
        }
        if idle {
            // Every shard is backing off: wait a little, waking for a stop.
            shutdown.sleep(Duration::from_millis(100));
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(fields: &[(&str, &str)]) -> Event {
        Event {
            id: "1700000000123-4".into(),
            millis: 1_700_000_000_123,
            seq: 4,
            shard: 0,
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn entries_parse_and_filter() {
        let raw: Raw = (
            "1700000000123-4".into(),
            vec![
                b"v".to_vec(),
                b"1".to_vec(),
                b"type".to_vec(),
                b"run".to_vec(),
            ],
        );
        let e = parse(raw, 1).unwrap();
        assert_eq!((e.millis, e.seq, e.shard), (1_700_000_000_123, 4, 1));
        assert_eq!(e.time(), "2023-11-14T22:13:20.123Z");
        assert!(e.known());
        assert!(parse(("x".into(), vec![]), 0).is_none());

        let run = event(&[("v", "1"), ("type", "run"), ("job", "a:A"), ("failed", "0")]);
        let failed = event(&[("v", "1"), ("type", "run"), ("job", "a:A"), ("failed", "1")]);
        let act = event(&[("v", "1"), ("type", "action"), ("target", "a:A")]);
        let failures = Filter {
            failures: true,
            ..Filter::default()
        };
        assert!(!failures.shows(&run) && failures.shows(&failed) && !failures.shows(&act));
        let job = Filter {
            job: Some("a:A".into()),
            ..Filter::default()
        };
        assert!(job.shows(&run) && job.shows(&act));
        let other = Filter {
            job: Some("b:A".into()),
            ..Filter::default()
        };
        assert!(!other.shows(&run) && !other.shows(&act));
        let since = |s| Filter {
            since: Some(s),
            ..Filter::default()
        };
        assert!(since(1_700_000_000).shows(&run));
        assert!(!since(1_700_000_001).shows(&run));
        assert!(!event(&[("v", "2"), ("type", "run")]).known());
        assert_eq!(after_id("5-1"), "5-2");
        assert_eq!(after_id(&format!("5-{}", u64::MAX)), "6-0");
        assert_eq!(before_id("5-1"), "5-0");
        assert_eq!(before_id("5-0"), format!("4-{}", u64::MAX));
        assert!(!event(&[("v", "1"), ("type", "later")]).known());
    }
}
