//! `redbike stats`: figures about one prefix for people (text), scripts (JSON) and
//! monitoring (Prometheus text exposition format, for node_exporter's textfile
//! collector).
//!
//! The default path reads with cheap commands only: HLEN, GET, ZCARD, two ZCOUNT, a
//! one-member ZRANGE, and per named queue LLEN, LINDEX and one HGET, in three round
//! trips whatever the size of the data; then the registered processes (SMEMBERS, and
//! GET and PTTL per process, two round trips that grow with the fleet, not the data). Two figures need a walk over data that grows
//! with the number of jobs, so they are only read with `--scan`: the queues that exist
//! (SCAN of `P-work-*`, which walks the whole keyspace) and the counts per status event
//! (HSCAN of `P-statuses`).

use std::collections::{BTreeMap, BTreeSet};

use redis::Value;
use serde::Serialize;

use crate::{
    error::{Error, Result},
    redis::hazards::{Health, Kind, Persistence, Probe},
    redis::keys::glob_escape,
    redis::store::{Scan, Store},
    schedule::timestamp,
    status::{Status, ENQ},
};

/// How `redbike stats` prints its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Lines for people; the shape may change.
    Text,
    /// One JSON object; fields are added, never renamed.
    Json,
    /// Prometheus text exposition format, gauges named `redbike_*`.
    Prometheus,
}

/// What to read.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Queues to report on whatever they hold (from `--queues` or the config).
    pub queues: Vec<String>,
    /// Also walk the keyspace for every queue and the statuses for counts per event.
    pub scan: bool,
    /// Seconds a job may be due before it counts as overdue (`overdue-after`).
    pub overdue_after: u64,
}

/// The figures of one prefix at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// The key prefix.
    pub prefix: String,
    /// When the figures were read, unix seconds.
    pub time: i64,
    /// Whether `--scan` figures are included.
    pub scanned: bool,
    /// Stored schedules (HLEN of `P-schedules`).
    pub schedules: u64,
    /// Whether `P-control` says HALT.
    pub halted: bool,
    /// The timeline.
    pub timeline: Timeline,
    /// Running jobs according to the lease index `P-leases` (ZCARD; 0 when absent).
    /// Python workers do not write that index, so their jobs are not counted here.
    pub running: u64,
    /// One entry per queue, sorted by name.
    pub queues: Vec<Queue>,
    /// Jobs per status event (`--scan` only).
    pub statuses: Option<BTreeMap<String, u64>>,
    /// Status values not of the shape `EVENT:TS` (`--scan` only).
    pub unparsable_statuses: Option<u64>,
    /// Lease keys `P-work-Q-JOBID` found, Python workers' included (`--scan` only).
    pub lease_keys: Option<u64>,
    /// The Redis settings that lose jobs, from INFO (`None` when INFO is refused).
    pub redis: Option<Health>,
    /// Registered dispatchers and workers alive (`None` when `P-procs` holds another
    /// type). Python processes never register, so they are not counted.
    pub alive: Option<Alive>,
    /// Jobs due for longer than `overdue-after` and not yet dispatched.
    pub overdue: Overdue,
    /// Runs per minute and lateness over the last minute, from the run history
    /// (`P-runs-per-minute`, `P-recent-runs`; all zero with history off).
    pub recent_runs: crate::history::Recent,
    /// Paused jobs (HLEN of `P-paused`; `redbike pause`).
    pub paused_jobs: u64,
    /// Paused queues, sorted by name (`redbike pause --queue`).
    pub paused_queues: Vec<PausedQueue>,
    /// History entries workers have not yet filed into their jobs' lists (LLEN of
    /// `P-unfiled-runs`; see [`crate::history`]).
    pub history_unfiled: u64,
    /// The evidence that a Python redbike process shares the prefix
    /// (`P-python-seen`), while it lasts: idle processes look every second until then.
    pub python_seen: Option<PythonSeen>,
    /// What a dispatcher or worker saw when the prefix lost its schedules and its
    /// registration at once (`P-schedules-lost`, for a day or until schedules come
    /// back): Redis came back empty?
    pub schedules_lost: Option<String>,
}

/// `P-python-seen` (see [`crate::redis::peers`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PythonSeen {
    /// What was seen, when (unix seconds) and by which process.
    pub evidence: String,
    /// Seconds until the note expires (an hour after the last evidence).
    pub expires_in_seconds: i64,
}

/// The registered processes alive (see [`crate::redis::registry`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alive {
    /// Dispatchers alive.
    pub dispatchers: u64,
    /// Workers alive.
    pub workers: u64,
    /// Workers alive per queue: every queue reported (0 when none works it) and every
    /// queue a live worker works.
    pub workers_per_queue: BTreeMap<String, u64>,
    /// Of those alive, processes that say an error retrying cannot fix keeps them from
    /// their work (`redbike ps` names it).
    pub failing: u64,
}

/// Overdue jobs: on the timeline with a score older than `now - after_seconds`. A
/// dispatcher moves a due job within a second, so these mean that no dispatcher runs,
/// or HALT is set. Queued and running jobs are never on the timeline (a running job
/// due again is pushed a second ahead), so they are not counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overdue {
    /// Jobs overdue (ZCOUNT).
    pub jobs: u64,
    /// The threshold, `overdue-after`.
    pub after_seconds: u64,
}

/// A queue that redbike workers do not claim from (`P-paused-queues`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedQueue {
    /// The queue name.
    pub queue: String,
    /// When it was paused, unix seconds (0 when unknown).
    pub since: i64,
    /// The note given with `pause --queue`.
    pub note: String,
}

/// Figures of `P-timeline`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// Jobs on the timeline (ZCARD).
    pub jobs: u64,
    /// Jobs due now or earlier (ZCOUNT -inf now): what dispatchers have yet to move.
    pub due: u64,
    /// Seconds the oldest due job is past its time; 0 when none is due.
    pub oldest_due_lateness_seconds: i64,
}

/// Figures of one work queue `P-work-Q`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Queue {
    /// The queue name.
    pub queue: String,
    /// Jobs waiting (LLEN).
    pub length: u64,
    /// Seconds the next job to be claimed has waited, from its `ENQ` status; 0 for an
    /// empty queue; `None` when that job's status is not `ENQ` (so its age is unknown).
    pub oldest_age_seconds: Option<i64>,
}

/// Reads the figures; `probe` reads the Redis settings (one more round trip).
pub fn collect(store: &mut Store<'_>, opts: &Options, probe: &Probe, now: i64) -> Result<Stats> {
    let mut stats = read_cheap(store, now, opts.overdue_after)?;
    stats.redis = probe.query(store.con)?.ok();
    stats.recent_runs = crate::redis::history::recent(store, timestamp::now_precise())?;
    let mut names: BTreeSet<String> = opts.queues.iter().cloned().collect();
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
    stats.alive = match crate::redis::registry::list(store) {
        Ok(listed) => Some(count_alive(&listed, &names)),
        Err(e) if crate::error::is_wrong_type(&e) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(stats)
}

/// The figures of a prefix split into shards, from each shard's (in shard order) and
/// named `prefix`: counts add up; a lateness, an age or a percentile is the largest of
/// the shards'; processes alive are the fewest any shard has (a process serving every
/// shard is registered in each); the Redis settings are those of shard 0's node.
pub fn merge(prefix: &str, parts: Vec<Stats>) -> Option<Stats> {
    let mut parts = parts.into_iter();
    let mut all = parts.next()?;
    all.prefix = prefix.to_string();
    let sum = |a: &mut Option<u64>, b: Option<u64>| *a = a.zip(b).map(|(x, y)| x + y);
    for s in parts {
        all.schedules += s.schedules;
        all.halted |= s.halted;
        all.timeline.jobs += s.timeline.jobs;
        all.timeline.due += s.timeline.due;
        all.timeline.oldest_due_lateness_seconds = all
            .timeline
            .oldest_due_lateness_seconds
            .max(s.timeline.oldest_due_lateness_seconds);
        all.running += s.running;
        for q in s.queues {
            match all.queues.iter_mut().find(|a| a.queue == q.queue) {
                Some(a) => {
                    a.length += q.length;
                    a.oldest_age_seconds = a.oldest_age_seconds.max(q.oldest_age_seconds);
                }
                None => all.queues.push(q),
            }
        }
        if let (Some(a), Some(b)) = (&mut all.statuses, s.statuses) {
            for (event, n) in b {
                *a.entry(event).or_default() += n;
            }
        }
        sum(&mut all.unparsable_statuses, s.unparsable_statuses);
        sum(&mut all.lease_keys, s.lease_keys);
        all.alive = all.alive.zip(s.alive).map(|(mut a, b)| {
            a.dispatchers = a.dispatchers.min(b.dispatchers);
            a.workers = a.workers.min(b.workers);
            a.failing = a.failing.max(b.failing);
            for (q, n) in b.workers_per_queue {
                let fewest = a.workers_per_queue.get(&q).map_or(0, |m| n.min(*m));
                a.workers_per_queue.insert(q, fewest);
            }
            a
        });
        all.overdue.jobs += s.overdue.jobs;
        let (r, t) = (&mut all.recent_runs, s.recent_runs);
        r.runs_per_minute += t.runs_per_minute;
        r.lateness_samples += t.lateness_samples;
        r.lateness_p50_seconds = max_f64(r.lateness_p50_seconds, t.lateness_p50_seconds);
        r.lateness_p99_seconds = max_f64(r.lateness_p99_seconds, t.lateness_p99_seconds);
        r.recent_failures += t.recent_failures;
        all.paused_jobs += s.paused_jobs;
        all.schedules_lost = all.schedules_lost.or(s.schedules_lost);
        all.history_unfiled += s.history_unfiled;
        if s.python_seen.as_ref().map(|p| p.expires_in_seconds)
            > all.python_seen.as_ref().map(|p| p.expires_in_seconds)
        {
            all.python_seen = s.python_seen;
        }
        for p in s.paused_queues {
            if !all.paused_queues.iter().any(|a| a.queue == p.queue) {
                all.paused_queues.push(p);
            }
        }
    }
    all.queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    all.paused_queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    Some(all)
}

fn max_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
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
    type Reply = (
        u64,
        Option<String>,
        u64,
        u64,
        Vec<(Vec<u8>, f64)>,
        u64,
        u64,
        u64,
        BTreeMap<String, String>,
        u64,
        Option<String>,
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
    let schedules_lost: Option<String> = redis::cmd("GET")
        .arg(&k.schedules_lost)
        .query(store.con)
        .unwrap_or(None);
    let paused_queues = paused_queues
        .into_iter()
        .map(|(queue, raw)| {
            let pause = crate::operator::control::Pause::parse(&raw);
            PausedQueue {
                queue,
                since: pause.since,
                note: pause.note,
            }
        })
        .collect();
    let lateness = match oldest.first() {
        Some((_, score)) if due > 0 => (now - *score as i64).max(0),
        _ => 0,
    };
    Ok(Stats {
        prefix: k.prefix.clone(),
        time: now,
        scanned: false,
        schedules,
        halted: control.as_deref() == Some("HALT"),
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
        paused_queues,
        history_unfiled,
        python_seen: python_seen.map(|evidence| PythonSeen {
            evidence,
            expires_in_seconds: python_ttl.max(0) / 1000,
        }),
        schedules_lost,
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
    let statuses: Vec<Option<String>> = pipe.query(store.con)?;
    let queues = names.iter().zip(heads).zip(statuses);
    Ok(queues
        .map(|((name, (length, head)), status)| Queue {
            queue: name.clone(),
            length,
            oldest_age_seconds: match head {
                None => Some(0),
                Some(_) => enqueued_age(status.as_deref(), now),
            },
        })
        .collect())
}

/// Seconds since an `ENQ:TS` status; `None` for any other status.
fn enqueued_age(status: Option<&str>, now: i64) -> Option<i64> {
    let s = Status::parse(status?)?;
    (s.event == ENQ).then(|| (now - s.at).max(0))
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

/// Renders the figures in `format`, newline-terminated.
pub fn render(stats: &Stats, format: Format) -> String {
    match format {
        Format::Text => render_text(stats),
        Format::Json => {
            // A struct of strings, numbers, bools and maps with string keys always
            // serializes.
            let mut s = crate::terminal::json_safe(
                serde_json::to_string_pretty(stats).expect("Stats serializes"),
            );
            s.push('\n');
            s
        }
        Format::Prometheus => render_prometheus(stats),
    }
}

fn render_text(s: &Stats) -> String {
    let mut lines = vec![
        format!("prefix      {}", s.prefix),
        format!("time        {} ({})", s.time, timestamp::iso_utc(s.time)),
        format!("halted      {}", if s.halted { "yes" } else { "no" }),
        format!("schedules   {}", s.schedules),
        format!(
            "timeline    {} job(s), {} due{}",
            s.timeline.jobs,
            s.timeline.due,
            match s.timeline.due {
                0 => String::new(),
                _ => format!(
                    ", the oldest due {}s late",
                    s.timeline.oldest_due_lateness_seconds
                ),
            }
        ),
        format!(
            "running     {} (from {}; Python workers' jobs are not counted)",
            s.running,
            crate::redis::keys::Keys::new(&s.prefix).leases
        ),
    ];
    match &s.alive {
        Some(a) => {
            lines.push(format!(
                "alive       {} dispatcher(s), {} worker(s) registered (Python processes do not register)",
                a.dispatchers, a.workers
            ));
            if !a.workers_per_queue.is_empty() {
                let per: Vec<String> = a
                    .workers_per_queue
                    .iter()
                    .map(|(q, n)| format!("{q}: {n}"))
                    .collect();
                lines.push(format!("workers     {}", per.join(", ")));
            }
            if a.failing > 0 {
                lines.push(format!(
                    "failing     {} process(es) kept from their work by an error retrying cannot fix (see redbike ps)",
                    a.failing
                ));
            }
        }
        None => lines.push(format!(
            "alive       unknown: {} holds another type than a set (see redbike check)",
            crate::redis::keys::Keys::new(&s.prefix).procs
        )),
    }
    lines.push(match s.overdue.jobs {
        0 => format!(
            "overdue     0 (no job due for over {}s)",
            s.overdue.after_seconds
        ),
        n => format!(
            "overdue     {n} job(s) due for over {}s and not dispatched: no dispatcher runs, or HALT is set",
            s.overdue.after_seconds
        ),
    });
    if s.queues.is_empty() {
        lines.push(
            "queues      none named: use --queues A:B, `queues` in the config, or --scan".into(),
        );
    }
    for q in &s.queues {
        let oldest = match q.oldest_age_seconds {
            _ if q.length == 0 => String::new(),
            Some(age) => format!(", the oldest for {age}s"),
            None => ", the oldest for an unknown time (its status is not ENQ)".into(),
        };
        lines.push(format!(
            "queue       {}: {} waiting{oldest}",
            q.queue, q.length
        ));
    }
    if s.paused_jobs > 0 {
        lines.push(format!("paused      {} job(s)", s.paused_jobs));
    }
    for q in &s.paused_queues {
        let since = match q.since {
            0 => String::new(),
            t => format!(" since {}", timestamp::iso_utc(t)),
        };
        let note = match q.note.as_str() {
            "" => String::new(),
            n => format!(": \"{n}\""),
        };
        lines.push(format!(
            "paused      queue {}{since} (redbike workers do not claim from it){note}",
            q.queue
        ));
    }
    if let Some(events) = &s.statuses {
        let counts: Vec<String> = events.iter().map(|(e, n)| format!("{e} {n}")).collect();
        lines.push(format!("statuses    {}", counts.join(", ")));
    }
    if let Some(n) = s.unparsable_statuses.filter(|n| *n > 0) {
        lines.push(format!("unparsable  {n} status value(s)"));
    }
    if let Some(n) = s.lease_keys {
        lines.push(format!("lease keys  {n} (any worker's)"));
    }
    let r = &s.recent_runs;
    let secs = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}s"));
    lines.push(format!(
        "runs        {} per minute, {} failure(s) in the last minute; lateness p50 {}, p99 {} ({} run(s) of the last minute); {} history entr(ies) not yet filed",
        r.runs_per_minute,
        r.recent_failures,
        secs(r.lateness_p50_seconds),
        secs(r.lateness_p99_seconds),
        r.lateness_samples,
        s.history_unfiled
    ));
    if let Some(note) = &s.schedules_lost {
        lines.push(format!("lost        {note}"));
    }
    lines.push(match &s.python_seen {
        Some(p) => format!(
            "python      a Python redbike process was seen ({}); idle processes look every second for {}s more",
            p.evidence, p.expires_in_seconds
        ),
        None => "python      none seen in the last hour".into(),
    });
    match &s.redis {
        Some(h) => {
            lines.push(format!(
                "redis       maxmemory-policy {}, {}, {} key(s) evicted, persistence {}",
                h.maxmemory_policy,
                h.memory(),
                h.evicted_keys,
                h.persistence.name()
            ));
            for hazard in &h.hazards {
                lines.push(format!("warning     {hazard}"));
            }
        }
        None => lines.push("redis       settings unknown: INFO refused (allow +info)".into()),
    }
    // Queue names and notes come from Redis: each line is shown by the terminal rule.
    let lines: Vec<_> = lines.iter().map(|l| crate::terminal::text(l)).collect();
    lines.join("\n") + "\n"
}

/// One metric family of the exposition (a gauge unless `kind` says otherwise).
struct Gauge {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, i64)>,
}

/// The run history's figures, in seconds (fractions): written apart from the integer
/// gauges.
fn history_metrics(s: &Stats, out: &mut String) {
    let r = &s.recent_runs;
    let prefix = escape_label(&s.prefix);
    let metrics: [(&str, &str, Option<f64>); 5] = [
        (
            "redbike_runs_per_minute",
            "Runs workers recorded over the last minute (estimated from per-minute counts).",
            Some(r.runs_per_minute as f64),
        ),
        (
            "redbike_recent_failures",
            "History entries of the last minute that are failures.",
            Some(r.recent_failures as f64),
        ),
        (
            "redbike_run_lateness_samples",
            "Runs of the last minute the lateness percentiles are taken from.",
            Some(r.lateness_samples as f64),
        ),
        (
            "redbike_run_lateness_p50_seconds",
            "Median seconds from due to start of the runs of the last minute.",
            r.lateness_p50_seconds,
        ),
        (
            "redbike_run_lateness_p99_seconds",
            "99th percentile of seconds from due to start of the runs of the last minute.",
            r.lateness_p99_seconds,
        ),
    ];
    for (name, help, value) in metrics {
        if let Some(v) = value {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{prefix=\"{prefix}\"}} {v}\n"
            ));
        }
    }
}

fn render_prometheus(s: &Stats) -> String {
    let mut out = String::new();
    history_metrics(s, &mut out);
    for g in gauges(s).iter().filter(|g| !g.samples.is_empty()) {
        out.push_str(&format!(
            "# HELP {} {}\n# TYPE {} {}\n",
            g.name, g.help, g.name, g.kind
        ));
        for (labels, value) in &g.samples {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            out.push_str(&format!("{}{{{}}} {value}\n", g.name, labels.join(",")));
        }
    }
    out
}

/// The gauges of `s`; every sample carries the `prefix` label.
fn gauges(s: &Stats) -> Vec<Gauge> {
    let p = || ("prefix", s.prefix.clone());
    let one = |name, help, v: i64| Gauge {
        name,
        help,
        kind: "gauge",
        samples: vec![(vec![p()], v)],
    };
    let per_queue = |name, help, f: &dyn Fn(&Queue) -> Option<i64>| Gauge {
        name,
        help,
        kind: "gauge",
        samples: s
            .queues
            .iter()
            .filter_map(|q| Some((vec![p(), ("queue", q.queue.clone())], f(q)?)))
            .collect(),
    };
    let optional = |name, help, v: Option<u64>| Gauge {
        name,
        help,
        kind: "gauge",
        samples: v.map(|v| (vec![p()], v as i64)).into_iter().collect(),
    };
    let mut gauges = vec![
        one(
            "redbike_stats_time_seconds",
            "Unix time the figures were read.",
            s.time,
        ),
        one(
            "redbike_halted",
            "1 when the control key says HALT.",
            s.halted as i64,
        ),
        one("redbike_schedules", "Stored schedules.", s.schedules as i64),
        one(
            "redbike_timeline_jobs",
            "Jobs on the timeline.",
            s.timeline.jobs as i64,
        ),
        one(
            "redbike_timeline_due_jobs",
            "Timeline jobs due now or earlier, not yet dispatched.",
            s.timeline.due as i64,
        ),
        one(
            "redbike_timeline_oldest_due_lateness_seconds",
            "Seconds the oldest due timeline job is past its time (0 when none is due).",
            s.timeline.oldest_due_lateness_seconds,
        ),
        one(
            "redbike_running_jobs",
            "Jobs running under a lease in the lease index (Python workers' jobs are not counted).",
            s.running as i64,
        ),
        per_queue(
            "redbike_queue_length",
            "Jobs waiting in the work queue.",
            &|q| Some(q.length as i64),
        ),
        per_queue(
            "redbike_queue_oldest_age_seconds",
            "Seconds the next job of the queue has waited (0 when empty; absent when unknown).",
            &|q| q.oldest_age_seconds,
        ),
        one(
            "redbike_paused_jobs",
            "Jobs paused with redbike pause.",
            s.paused_jobs as i64,
        ),
        one(
            "redbike_history_unfiled",
            "Run history entries workers have not yet filed into their jobs' lists.",
            s.history_unfiled as i64,
        ),
        one(
            "redbike_python_peer_seen",
            "1 while the evidence of a Python redbike process on the prefix lasts (idle processes then look every second), else 0.",
            i64::from(s.python_seen.is_some()),
        ),
        Gauge {
            name: "redbike_queue_paused_since_seconds",
            help: "Unix time a queue was paused (redbike pause --queue; 0 when unknown); absent when not paused.",
            kind: "gauge",
            samples: s
                .paused_queues
                .iter()
                .map(|q| (vec![p(), ("queue", q.queue.clone())], q.since))
                .collect(),
        },
        Gauge {
            name: "redbike_status_jobs",
            help: "Jobs per status event (needs --scan).",
            kind: "gauge",
            samples: s
                .statuses
                .iter()
                .flatten()
                .map(|(e, n)| (vec![p(), ("event", e.clone())], *n as i64))
                .collect(),
        },
        one(
            "redbike_overdue_jobs",
            "Timeline jobs due for longer than overdue-after and not dispatched (no dispatcher runs, or HALT is set).",
            s.overdue.jobs as i64,
        ),
        one(
            "redbike_overdue_after_seconds",
            "The overdue-after threshold, in seconds.",
            s.overdue.after_seconds as i64,
        ),
        optional(
            "redbike_dispatchers_alive",
            "Registered dispatchers alive (Python processes do not register).",
            s.alive.as_ref().map(|a| a.dispatchers),
        ),
        optional(
            "redbike_workers_alive",
            "Registered workers alive (Python processes do not register).",
            s.alive.as_ref().map(|a| a.workers),
        ),
        optional(
            "redbike_processes_failing",
            "Registered processes kept from their work by an error retrying cannot fix (redbike ps names it).",
            s.alive.as_ref().map(|a| a.failing),
        ),
        Gauge {
            name: "redbike_queue_workers_alive",
            help: "Registered workers alive that work the queue.",
            kind: "gauge",
            samples: s
                .alive
                .iter()
                .flat_map(|a| &a.workers_per_queue)
                .map(|(q, n)| (vec![p(), ("queue", q.clone())], *n as i64))
                .collect(),
        },
        optional(
            "redbike_unparsable_statuses",
            "Status values not of the shape EVENT:TS (needs --scan).",
            s.unparsable_statuses,
        ),
        optional(
            "redbike_lease_keys",
            "Lease keys of running jobs, any worker's (needs --scan).",
            s.lease_keys,
        ),
    ];
    gauges.extend(redis_gauges(s));
    gauges
}

/// The Redis settings' figures; none when INFO was refused.
fn redis_gauges(s: &Stats) -> Vec<Gauge> {
    let Some(h) = &s.redis else {
        return Vec::new();
    };
    let p = || ("prefix", s.prefix.clone());
    let one = |name, help, v: u64| Gauge {
        name,
        help,
        kind: "gauge",
        samples: vec![(vec![p()], v as i64)],
    };
    let persistence = match h.persistence {
        Persistence::Unknown => None,
        other => Some(u64::from(other != Persistence::Off)),
    };
    vec![
        one(
            "redbike_redis_used_memory_bytes",
            "Memory Redis uses (INFO used_memory).",
            h.used_memory_bytes,
        ),
        one(
            "redbike_redis_maxmemory_bytes",
            "Redis maxmemory (0: no limit).",
            h.maxmemory_bytes,
        ),
        Gauge {
            name: "redbike_redis_evicted_keys_total",
            help: "Keys Redis evicted since it started, any database's (INFO evicted_keys).",
            kind: "counter",
            samples: vec![(vec![p()], h.evicted_keys as i64)],
        },
        Gauge {
            name: "redbike_redis_maxmemory_policy",
            help: "Redis maxmemory-policy, as the label policy (always 1).",
            kind: "gauge",
            samples: vec![(vec![p(), ("policy", h.maxmemory_policy.clone())], 1)],
        },
        Gauge {
            name: "redbike_redis_persistence",
            help:
                "1 when Redis persists (AOF or RDB save points), 0 when not; absent when unknown.",
            kind: "gauge",
            samples: persistence
                .map(|v| (vec![p()], v as i64))
                .into_iter()
                .collect(),
        },
        Gauge {
            name: "redbike_redis_hazard",
            help: "1 when the Redis setting or figure named by kind can lose jobs.",
            kind: "gauge",
            samples: Kind::ALL
                .iter()
                .map(|k| {
                    let on = h.hazards.iter().any(|x| x.kind == *k);
                    (vec![p(), ("kind", k.name().to_string())], i64::from(on))
                })
                .collect(),
        },
    ]
}

/// Label values escape backslash, double quote and newline (exposition format 0.0.4).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Parses the `--queues` value: the weighting string's names, each once.
pub fn parse_queue_names(text: &str) -> Result<Vec<String>> {
    let names = crate::work::parse_queues(text)?;
    let unique: BTreeSet<String> = names.into_iter().collect();
    if unique.is_empty() {
        return Err(Error::Input("--queues names no queue".into()));
    }
    Ok(unique.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Stats {
        Stats {
            prefix: "p\"x".into(),
            time: 100,
            scanned: true,
            schedules: 3,
            halted: false,
            timeline: Timeline {
                jobs: 2,
                due: 1,
                oldest_due_lateness_seconds: 7,
            },
            running: 1,
            queues: vec![
                Queue {
                    queue: "A".into(),
                    length: 2,
                    oldest_age_seconds: Some(5),
                },
                Queue {
                    queue: "B\\n".into(),
                    length: 1,
                    oldest_age_seconds: None,
                },
            ],
            statuses: Some([("ENQ".to_string(), 3u64)].into_iter().collect()),
            unparsable_statuses: Some(0),
            lease_keys: Some(1),
            redis: Some(Health::from_info(
                "maxmemory_policy:allkeys-lru\r\nused_memory:950\r\nmaxmemory:1000\r\nevicted_keys:4\r\naof_enabled:0\r\n",
                Some(""),
                0,
            )),
            alive: Some(Alive {
                dispatchers: 1,
                workers: 2,
                workers_per_queue: [("A".to_string(), 2u64), ("C".to_string(), 0)]
                    .into_iter()
                    .collect(),
                failing: 0,
            }),
            overdue: Overdue {
                jobs: 4,
                after_seconds: 60,
            },
            recent_runs: crate::history::Recent {
                runs_per_minute: 12,
                lateness_samples: 3,
                lateness_p50_seconds: Some(0.25),
                lateness_p99_seconds: None,
                recent_failures: 1,
            },
            paused_jobs: 2,
            paused_queues: vec![PausedQueue {
                queue: "B".into(),
                since: 50,
                note: "disk full".into(),
            }],
            history_unfiled: 7,
            python_seen: Some(PythonSeen {
                evidence: "90 worker w-1: job j:A was queued without a wake-up".into(),
                expires_in_seconds: 3500,
            }),
            schedules_lost: None,
        }
    }

    #[test]
    fn unfiled_history_and_python_peers_in_every_format() {
        let mut s = sample();
        let prom = render_prometheus(&s);
        for line in [
            "redbike_history_unfiled{prefix=\"p\\\"x\"} 7\n",
            "redbike_python_peer_seen{prefix=\"p\\\"x\"} 1\n",
        ] {
            assert!(prom.contains(line), "{line} in {prom}");
        }
        let text = render_text(&s);
        assert!(
            text.contains("; 7 history entr(ies) not yet filed\n"),
            "{text}"
        );
        assert!(
            text.contains("python      a Python redbike process was seen (90 worker w-1: job j:A was queued without a wake-up); idle processes look every second for 3500s more\n"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
        assert_eq!(json["history_unfiled"], 7);
        assert_eq!(json["python_seen"]["expires_in_seconds"], 3500);
        s.python_seen = None;
        assert!(render_prometheus(&s).contains("redbike_python_peer_seen{prefix=\"p\\\"x\"} 0\n"));
        assert!(render_text(&s).contains("python      none seen in the last hour\n"));
        let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
        assert_eq!(json["python_seen"], serde_json::Value::Null);
    }

    #[test]
    fn alive_and_overdue_in_every_format() {
        let s = sample();
        let prom = render_prometheus(&s);
        for line in [
            "redbike_dispatchers_alive{prefix=\"p\\\"x\"} 1\n",
            "redbike_workers_alive{prefix=\"p\\\"x\"} 2\n",
            "redbike_queue_workers_alive{prefix=\"p\\\"x\",queue=\"C\"} 0\n",
            "redbike_overdue_jobs{prefix=\"p\\\"x\"} 4\n",
            "redbike_overdue_after_seconds{prefix=\"p\\\"x\"} 60\n",
        ] {
            assert!(prom.contains(line), "{line} in {prom}");
        }
        let text = render_text(&s);
        assert!(
            text.contains("alive       1 dispatcher(s), 2 worker(s)"),
            "{text}"
        );
        assert!(text.contains("workers     A: 2, C: 0\n"), "{text}");
        assert!(
            text.contains("overdue     4 job(s) due for over 60s"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
        assert_eq!(json["alive"]["workers_per_queue"]["A"], 2);
        assert_eq!(json["overdue"]["jobs"], 4);
        let mut unknown = s.clone();
        unknown.alive = None;
        assert!(!render_prometheus(&unknown).contains("alive"));
    }

    #[test]
    fn paused_queues_in_every_format() {
        let s = sample();
        let text = render_text(&s);
        assert!(text.contains("paused      2 job(s)\n"), "{text}");
        assert!(
            text.contains("paused      queue B since 1970-01-01T00:00:50Z (redbike workers do not claim from it): \"disk full\"\n"),
            "{text}"
        );
        let prom = render_prometheus(&s);
        assert!(
            prom.contains("redbike_paused_jobs{prefix=\"p\\\"x\"} 2\n"),
            "{prom}"
        );
        assert!(
            prom.contains("redbike_queue_paused_since_seconds{prefix=\"p\\\"x\",queue=\"B\"} 50\n"),
            "{prom}"
        );
        let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
        assert_eq!(json["paused_queues"][0]["queue"], "B");
        assert_eq!(json["paused_jobs"], 2);
    }

    #[test]
    fn labels_are_escaped() {
        let out = render_prometheus(&sample());
        assert!(
            out.contains("redbike_schedules{prefix=\"p\\\"x\"} 3\n"),
            "{out}"
        );
        assert!(out.contains("queue=\"B\\\\n\"} 1\n"), "{out}");
        // Unknown age: no sample for B.
        assert_eq!(out.matches("redbike_queue_oldest_age_seconds{").count(), 1);
    }

    #[test]
    fn text_leaves_out_lateness_when_nothing_is_due() {
        let mut s = sample();
        assert!(render_text(&s).contains("2 job(s), 1 due, the oldest due 7s late\n"));
        s.timeline.due = 0;
        s.timeline.oldest_due_lateness_seconds = 0;
        assert!(render_text(&s).contains("2 job(s), 0 due\n"));
    }

    #[test]
    fn history_figures_are_in_seconds() {
        let out = render_prometheus(&sample());
        assert!(
            out.contains("redbike_run_lateness_p50_seconds{prefix=\"p\\\"x\"} 0.25\n"),
            "{out}"
        );
        assert!(out.contains("redbike_runs_per_minute{prefix=\"p\\\"x\"} 12\n"));
        // No sample: no line.
        assert!(!out.contains("redbike_run_lateness_p99_seconds{"));
        assert!(render_text(&sample()).contains("lateness p50 0.250s, p99 -"));
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\-work-"), "a\\*b\\?\\[c\\]\\\\-work-");
    }

    #[test]
    fn queue_age_needs_an_enq_status() {
        assert_eq!(enqueued_age(Some("ENQ:90"), 100), Some(10));
        assert_eq!(enqueued_age(Some("ENQ:120"), 100), Some(0));
        assert_eq!(enqueued_age(Some("WRK:90"), 100), None);
        assert_eq!(enqueued_age(None, 100), None);
    }

    #[test]
    fn queue_names_are_deduplicated() {
        assert_eq!(parse_queue_names("B:A:A").unwrap(), ["A", "B"]);
        assert!(parse_queue_names("A::B").is_err());
    }
}
