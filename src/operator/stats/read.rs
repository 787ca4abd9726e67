//! Reading the figures of one prefix from Redis.
//!
//! The default path reads with cheap commands only: HLEN, GET, ZCARD, two ZCOUNT, a
//! one-member ZRANGE, and per named queue LLEN, LINDEX and one HGET, in three round
//! trips whatever the size of the data; then the registered processes (SMEMBERS, and
//! GET and PTTL per process, two round trips that grow with the fleet, not the data).
//! Two figures need a walk over data that grows with the number of jobs, so they are
//! only read with `--scan`: the queues that exist (SCAN of `P-work-*`, which walks the
//! whole keyspace) and the counts per status event (HSCAN of `P-statuses`).

use std::collections::{BTreeMap, BTreeSet};

use redis::Value;

use super::{figures::*, Options};
use crate::{
    error::Result,
    redis::hazards::Probe,
    redis::keys::glob_escape,
    redis::store::{lossy, Scan, Store},
    schedule::timestamp,
    status::{Status, ENQ},
};

/// Reads the figures; `probe` reads the Redis settings (one more round trip).
pub fn collect(store: &mut Store<'_>, opts: &Options, probe: &Probe, now: i64) -> Result<Stats> {
    let mut stats = read_cheap(store, now, opts.overdue_after)?;
    stats.redis = probe.query(store.con)?.ok();
    stats.recent_runs = crate::redis::history::recent(store, timestamp::now_precise())?;
    let mut names: BTreeSet<String> = opts.queues.iter().cloned().collect();
    names.extend(opts.limits.keys().cloned());
    if opts.scan {
        let found = scan_work_keys(store)?;
        names.extend(found.queues);
        stats.lease_keys = Some(found.lease_keys);
        let (events, unparsable) = count_statuses(store)?;
        stats.statuses = Some(events);
        stats.unparsable_statuses = Some(unparsable);
        stats.scanned = true;
    }
    stats.queues = read_queues(store, &names, now)?;
    if !opts.limits.is_empty() {
        let leased = leased_per_queue(store)?;
        for q in &mut stats.queues {
            q.limit = opts.limits.get(&q.queue).copied();
            if q.limit.is_some() {
                q.leased = Some(leased.get(&q.queue).copied().unwrap_or(0));
            }
        }
    }
    stats.alive = match crate::redis::registry::list(store) {
        Ok(listed) => Some(count_alive(&listed, &names)),
        Err(e) if crate::error::is_wrong_type(&e) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(stats)
}

/// Counts the live processes; every queue of `named` is counted, with 0 workers if
/// none works it.
fn count_alive(listed: &[crate::redis::registry::Listed], named: &BTreeSet<String>) -> Alive {
    let mut alive = Alive {
        dispatchers: 0,
        workers: 0,
        workers_per_queue: named.iter().map(|q| (q.clone(), 0)).collect(),
        failing: 0,
    };
    for l in listed {
        let d = &l.description;
        alive.failing += u64::from(d.failing.is_some());
        match d.kind.as_str() {
            crate::redis::registry::DISPATCHER => alive.dispatchers += 1,
            crate::redis::registry::WORKER => {
                alive.workers += 1;
                for q in &d.queues {
                    *alive.workers_per_queue.entry(q.clone()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    alive
}

/// Everything that does not depend on the queues, in one round trip.
fn read_cheap(store: &mut Store<'_>, now: i64, overdue_after: u64) -> Result<Stats> {
    let k = store.keys;
    // Text is read as bytes (see `lossy`): another program may have written any value.
    type Reply = (
        u64,
        Option<Vec<u8>>,
        u64,
        u64,
        Vec<(Vec<u8>, f64)>,
        u64,
        u64,
        u64,
        BTreeMap<Vec<u8>, Vec<u8>>,
        u64,
        Option<Vec<u8>>,
        i64,
    );
    // Overdue: due strictly longer ago than the threshold.
    let overdue_before = format!("({}", now.saturating_sub(overdue_after as i64));
    let (
        schedules,
        control,
        jobs,
        due,
        oldest,
        running,
        overdue,
        paused_jobs,
        paused_queues,
        history_unfiled,
        python_seen,
        python_ttl,
    ): Reply = redis::pipe()
        .hlen(&k.schedules)
        .get(&k.control)
        .zcard(&k.timeline)
        .zcount(&k.timeline, "-inf", now)
        .zrange_withscores(&k.timeline, 0, 0)
        .zcard(&k.leases)
        .zcount(&k.timeline, "-inf", overdue_before)
        .hlen(&k.paused)
        .hgetall(&k.paused_queues)
        .llen(&k.unfiled_runs)
        .get(&k.python_seen)
        .pttl(&k.python_seen)
        .query(store.con)?;
    // A key of another type here is `check`'s to name; the figures go on without it.
    let schedules_lost: Option<Vec<u8>> = redis::cmd("GET")
        .arg(&k.schedules_lost)
        .query(store.con)
        .unwrap_or(None);
    let retrying_jobs: u64 = redis::cmd("HLEN")
        .arg(&k.attempts)
        .query(store.con)
        .unwrap_or(0);
    let backlog_jobs: u64 = redis::cmd("HLEN")
        .arg(&k.backlogs)
        .query(store.con)
        .unwrap_or(0);
    let stale_marked: u64 = redis::cmd("HLEN")
        .arg(&k.stale)
        .query(store.con)
        .unwrap_or(0);
    let stale_unmarked: u64 = redis::cmd("ZCOUNT")
        .arg(&k.fresh_until)
        .arg("-inf")
        .arg(format!("({now}"))
        .query(store.con)
        .unwrap_or(0);
    // A job set again while stale has both (until a dispatcher passes): counted once,
    // among the first 1000 passed deadlines (there are none while a dispatcher runs).
    let overlap = match stale_unmarked.min(stale_marked) {
        0 => 0,
        _ => {
            let passed: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
                .arg(&k.fresh_until)
                .arg("-inf")
                .arg(format!("({now}"))
                .arg("LIMIT")
                .arg(0)
                .arg(1000)
                .query(store.con)
                .unwrap_or_default();
            let marked: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
                .arg(&k.stale)
                .arg(&passed)
                .query(store.con)
                .unwrap_or_default();
            marked.iter().filter(|m| m.is_some()).count() as u64
        }
    };
    let paused_queues = paused_queues
        .into_iter()
        .map(|(queue, raw)| {
            let pause = crate::operator::control::Pause::parse(&lossy(raw));
            PausedQueue {
                queue: lossy(queue),
                since: pause.since,
                note: pause.note,
            }
        })
        .collect();
    let lateness = match oldest.first() {
        Some((_, score)) if due > 0 => (now - timestamp::unix_of(*score)).max(0),
        _ => 0,
    };
    Ok(Stats {
        prefix: k.prefix.clone(),
        time: now,
        scanned: false,
        schedules,
        halted: control.as_deref() == Some(b"HALT".as_slice()),
        timeline: Timeline {
            jobs,
            due,
            oldest_due_lateness_seconds: lateness,
        },
        running,
        queues: Vec::new(),
        statuses: None,
        unparsable_statuses: None,
        lease_keys: None,
        redis: None,
        alive: None,
        overdue: Overdue {
            jobs: overdue,
            after_seconds: overdue_after,
        },
        recent_runs: Default::default(),
        paused_jobs,
        retrying_jobs,
        backlog_jobs,
        stale: (stale_marked + stale_unmarked).saturating_sub(overlap),
        paused_queues,
        history_unfiled,
        python_seen: python_seen.map(|evidence| PythonSeen {
            evidence: lossy(evidence),
            expires_in_seconds: python_ttl.max(0) / 1000,
        }),
        schedules_lost: schedules_lost.map(lossy),
    })
}

/// Length and oldest entry of each queue, then that entry's status: two round trips.
fn read_queues(store: &mut Store<'_>, names: &BTreeSet<String>, now: i64) -> Result<Vec<Queue>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for q in names {
        let key = store.keys.queue(q);
        pipe.llen(&key).lindex(&key, -1);
    }
    let heads: Vec<(u64, Option<Vec<u8>>)> = pipe.query(store.con)?;
    let mut pipe = redis::pipe();
    for (_, head) in &heads {
        // An empty queue asks for a field that cannot exist, keeping replies aligned.
        pipe.hget(&store.keys.statuses, head.as_deref().unwrap_or(b""));
    }
    let statuses: Vec<Option<Vec<u8>>> = pipe.query(store.con)?;
    let queues = names.iter().zip(heads).zip(statuses);
    Ok(queues
        .map(|((name, (length, head)), status)| Queue {
            queue: name.clone(),
            length,
            oldest_age_seconds: match head {
                None => Some(0),
                Some(_) => enqueued_age(status.map(lossy).as_deref(), now),
            },
            limit: None,
            leased: None,
        })
        .collect())
}

/// The jobs leased now per queue, from the running index (as claim.lua counts them for
/// a limited queue); an index of another type counts none (`check` names it).
fn leased_per_queue(store: &mut Store<'_>) -> Result<BTreeMap<String, u64>> {
    let running: Vec<Vec<u8>> = redis::cmd("ZRANGE")
        .arg(&store.keys.leases)
        .arg(0)
        .arg(-1)
        .query(store.con)
        .unwrap_or_default();
    let mut leased = BTreeMap::new();
    for jobid in running {
        *leased
            .entry(crate::jobid::queue_of(&lossy(jobid)).to_string())
            .or_insert(0) += 1;
    }
    Ok(leased)
}

/// Seconds since an `ENQ:TS` status; `None` for any other status.
pub(super) fn enqueued_age(status: Option<&str>, now: i64) -> Option<i64> {
    let s = Status::parse(status?)?;
    (s.event == ENQ).then(|| now.saturating_sub(s.at).max(0))
}

/// What a walk over `P-work-*` found.
struct WorkKeys {
    queues: BTreeSet<String>,
    lease_keys: u64,
}

/// Walks `P-work-*` with SCAN and classifies each key by its TYPE: a list is a queue
/// `P-work-Q`, a set ending in `-members` is a queue's members set, a string is a
/// lease. Names alone cannot tell them apart: queue names and job ids may contain
/// `-`. TYPE (not SCAN's TYPE option) keeps this working on Redis before 6.0.
fn scan_work_keys(store: &mut Store<'_>) -> Result<WorkKeys> {
    let stem = format!("{}-work-", store.keys.prefix);
    let pattern = format!("{}*", glob_escape(&stem));
    let mut found = WorkKeys {
        queues: BTreeSet::new(),
        lease_keys: 0,
    };
    let mut scan = Scan::new("SCAN", None, &["MATCH", &pattern]);
    while let Some(keys) = scan.next_page::<Vec<u8>>(store.con)? {
        classify_page(store, &stem, &keys, &mut found)?;
    }
    Ok(found)
}

/// Classifies one SCAN page with one pipelined TYPE per key.
fn classify_page(
    store: &mut Store<'_>,
    stem: &str,
    keys: &[Vec<u8>],
    found: &mut WorkKeys,
) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("TYPE").arg(key);
    }
    let types: Vec<Value> = pipe.query(store.con)?;
    for (key, kind) in keys.iter().zip(types) {
        // Keys that are not UTF-8 were not written by redbike; they name no queue.
        let Some(rest) = std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix(stem))
        else {
            continue;
        };
        match type_name(&kind).as_str() {
            "list" => {
                found.queues.insert(rest.to_string());
            }
            "set" => {
                if let Some(q) = rest.strip_suffix("-members").filter(|q| !q.is_empty()) {
                    found.queues.insert(q.to_string());
                }
            }
            "string" => found.lease_keys += 1,
            _ => {}
        }
    }
    Ok(())
}

/// TYPE answers with a simple string, which redis-rs hands over as `Okay` for "OK"
/// only; read whatever shape it has.
fn type_name(v: &Value) -> String {
    match v {
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// Counts statuses per event with HSCAN; returns the counts and the unparsable ones.
fn count_statuses(store: &mut Store<'_>) -> Result<(BTreeMap<String, u64>, u64)> {
    let mut events = BTreeMap::new();
    let mut unparsable = 0;
    let key = store.keys.statuses.clone();
    store.scan_hash(&key, |_, raw| {
        match Status::parse(&String::from_utf8_lossy(&raw)) {
            Some(s) => *events.entry(s.event).or_insert(0) += 1,
            None => unparsable += 1,
        }
        Ok(())
    })?;
    Ok((events, unparsable))
}
