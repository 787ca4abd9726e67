//! `redbike check [--repair]`: walks a whole prefix with SCAN-family commands and
//! reports every breach of the circulation invariant — each job with a live schedule is
//! in exactly one of: the timeline, its queue, or running under a lease — and every
//! inconsistency between the keys. `--repair` fixes each one with an idempotent Lua step
//! that re-checks its condition (repair.lua), so it is safe while processes run.
//! A paused job (`redbike pause`) is out of circulation on purpose: it is reported as
//! `paused` (informational), and as a problem only where it should not be (on the
//! timeline, or in its queue without a run asked).
//! Ids and values are read as bytes, since another program may have written any: a job
//! id that is not UTF-8 is reported (`not-utf8`) and left out of the other checks, and a
//! value that is not UTF-8 is checked with U+FFFD for its bytes.

mod keys;

use std::collections::{BTreeSet, HashMap};

use redis::RedisResult;

use crate::{
    config::Config,
    error::Result,
    policy::Policy,
    redis::events::Who,
    redis::hazards::Probe,
    redis::keys::queue_of,
    redis::scripts::{
        self,
        recovery::{recover_job, Lost},
    },
    redis::store::{lossy, with_store, Place, Scan, Store},
    schedule::Schedule,
    shard::{self, Order},
};

/// Items read per SCAN-family call and per pipelined check.
const CHUNK: usize = 1000;

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong, e.g. `out-of-circulation`; `held` and `bad` are informational.
    pub kind: &'static str,
    /// The job, as stored: another program may have written one that is not UTF-8
    /// (`not-utf8`).
    pub jobid: Vec<u8>,
    /// Details: the queue, the schedule, the places.
    pub detail: String,
}

/// What the walk saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Schedules walked.
    pub jobs: usize,
    /// Queues found.
    pub queues: usize,
    /// Problems found (not counting `held` jobs).
    pub problems: usize,
    /// Problems fixed by `--repair`.
    pub repaired: usize,
    /// Jobs held out of circulation on purpose: failed (status DIE) or marked BAD.
    pub held: usize,
    /// Jobs overdue: due on the timeline for longer than `overdue-after` (no
    /// dispatcher runs, or HALT is set); reported, not problems of the data.
    pub overdue: usize,
    /// Jobs paused (`redbike pause`).
    pub paused: usize,
    /// Jobs stale: not succeeded for longer than they should (see [`crate::stale`]);
    /// reported, not problems of the data.
    pub stale: usize,
    /// Job ids `set` refuses that work all the same (`odd-id` rows).
    pub odd_ids: usize,
}

/// What `check` found over all the shards of a prefix.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The walks' figures, added up.
    pub summary: Summary,
    /// The Redis settings that lose jobs, each said once however many nodes have it.
    pub hazards: Vec<String>,
    /// Why the Redis settings of a node could not be read (`INFO` refused), if so.
    pub unread: Option<String>,
}

/// Walks every shard of `config`'s prefix (repairing with `repair`), the shards at
/// once; `emit` receives each finding as it is found, all of shard 0's first, then
/// shard 1's, and so on, as when the shards are walked one after the other.
/// Each repair writes `who`'s audit entry (`repair`, the job, the kind of problem) to
/// its shard's event stream.
pub fn check_all(
    config: &Config,
    repair: bool,
    who: &Who,
    mut emit: impl FnMut(&Finding),
) -> Result<Report> {
    let policy = config.policy();
    let shards = shard::checked_all(config)?;
    let parts = shard::read_all(
        &shards,
        Order::Shards,
        |config, send| {
            let probe = Probe::of(&config.redis);
            let mut health = Err(String::new());
            // A finding that cannot be handed over (the listing stopped at another
            // shard's error, which is the one reported) stops nothing: the walk goes
            // on to its end, and its figures are dropped.
            let part = with_store(&config.redis, |store| {
                health = probe.query(store.con)?;
                let walk = Check::new(store, repair, &policy, |f: &Finding| {
                    let _ = send(f.clone());
                });
                Ok(walk
                    .overdue_after(config.overdue_after)
                    .audited(*who)
                    .run()?)
            })?;
            Ok((part, health))
        },
        |f| {
            emit(&f);
            Ok(())
        },
    )?;
    let mut report = Report::default();
    for (part, health) in parts {
        report.summary.add(&part);
        match health {
            Ok(health) => {
                for hazard in health.hazards {
                    if !report.hazards.contains(&hazard.message) {
                        report.hazards.push(hazard.message);
                    }
                }
            }
            Err(why) => report.unread = Some(why),
        }
    }
    Ok(report)
}

/// The walk; `emit` receives each finding as it is found.
pub struct Check<'a, 's, F: FnMut(&Finding)> {
    /// The connection.
    store: &'a mut Store<'s>,
    /// Whether to fix what is found.
    repair: bool,
    /// For recovering jobs out of circulation.
    policy: &'a Policy,
    /// Receives findings.
    emit: F,
    /// Counts.
    summary: Summary,
    /// The type of each key of the prefix (a key not here does not exist).
    types: HashMap<String, String>,
    /// Timeline jobs due before this instant are reported as overdue.
    overdue_before: i64,
    /// Who repairs, for the audit entries ([`Who::NOBODY`]: none).
    who: Who,
}

impl Summary {
    /// Adds the counts of `other` (another shard's walk) to these.
    pub fn add(&mut self, other: &Summary) {
        self.jobs += other.jobs;
        self.queues += other.queues;
        self.problems += other.problems;
        self.repaired += other.repaired;
        self.held += other.held;
        self.overdue += other.overdue;
        self.stale += other.stale;
        self.paused += other.paused;
        self.odd_ids += other.odd_ids;
    }
}

impl<'a, 's, F: FnMut(&Finding)> Check<'a, 's, F> {
    /// A check of `store`'s prefix.
    pub(crate) fn new(store: &'a mut Store<'s>, repair: bool, policy: &'a Policy, emit: F) -> Self {
        Check {
            store,
            repair,
            policy,
            emit,
            summary: Summary::default(),
            types: HashMap::new(),
            overdue_before: i64::MIN,
            who: Who::NOBODY,
        }
    }

    /// Writes `who`'s audit entry with each repair.
    pub fn audited(mut self, who: Who) -> Self {
        self.who = who;
        self
    }

    /// Reports jobs due on the timeline for longer than `seconds` as `overdue`.
    pub fn overdue_after(mut self, seconds: u64) -> Self {
        self.overdue_before = crate::schedule::timestamp::now().saturating_sub(seconds as i64);
        self
    }

    /// Walks queues, timeline, statuses and schedules, in that order (so jobs that queue
    /// repairs take out of a wrong queue are then found and put back).
    /// Keys of other types than redbike's, and names where two key families meet, are
    /// reported first (`odd-key`, `colliding-key`); whatever their commands would fail on
    /// is then left out, so the walk never stops on them.
    pub fn run(mut self) -> RedisResult<Summary> {
        let queues = self.check_keys()?;
        for queue in queues {
            self.summary.queues += 1;
            if self.queue_keys_fit(&queue) {
                self.check_queue(&queue)?;
            }
        }
        let k = self.store.keys;
        let (schedules, statuses, timeline) =
            (k.schedules.clone(), k.statuses.clone(), k.timeline.clone());
        if self.fits(&timeline, "zset") && self.fits(&schedules, "hash") {
            self.check_hash_against_schedules(true)?;
        }
        if self.fits(&statuses, "hash") && self.fits(&schedules, "hash") {
            self.check_hash_against_schedules(false)?;
        }
        if self.fits(&schedules, "hash")
            && self.fits(&statuses, "hash")
            && self.fits(&timeline, "zset")
        {
            self.check_schedules()?;
        }
        let (paused, rerun) = (k.paused.clone(), k.rerun.clone());
        if self.fits(&schedules, "hash") && self.fits(&paused, "hash") && self.fits(&rerun, "hash")
        {
            self.check_control_hashes()?;
        }
        let (fresh_until, stale) = (k.fresh_until.clone(), k.stale.clone());
        if self.fits(&fresh_until, "zset") && self.fits(&stale, "hash") {
            self.check_stale()?;
        }
        Ok(self.summary)
    }

    /// Reports the stale jobs (`P-stale`), and the jobs whose deadline passed that no
    /// dispatcher has marked yet (none runs, or it has not passed since), kind `stale`.
    fn check_stale(&mut self) -> RedisResult<()> {
        let k = self.store.keys;
        let now = crate::schedule::timestamp::now();
        let mut found: Vec<(String, String)> = Vec::new();
        let mut marked = BTreeSet::new();
        let mut scan = Scan::new("HSCAN", Some(&k.stale), &[]);
        while let Some(page) = scan.next_page::<(Vec<u8>, Vec<u8>)>(self.store.con)? {
            for (id, raw) in page {
                let Some(id) = self.id_text(&id, &k.stale) else {
                    continue;
                };
                found.push((id.to_string(), stale_detail(&lossy(raw))));
                marked.insert(id.to_string());
            }
        }
        let mut from = 0;
        loop {
            let page: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGEBYSCORE")
                .arg(&k.fresh_until)
                .arg("-inf")
                .arg(format!("({now}"))
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(from)
                .arg(CHUNK)
                .query(self.store.con)?;
            let n = page.len();
            for (id, deadline) in page {
                let Some(id) = self.id_text(&id, &k.fresh_until) else {
                    continue;
                };
                // Stale already (a `set` gave it a deadline again): one row.
                if marked.contains(id) {
                    continue;
                }
                let d = deadline as i64;
                found.push((
                    id.to_string(),
                    format!(
                        "no success by its deadline {} ({}s ago); not yet marked: no dispatcher has looked since (see redbike ps)",
                        crate::schedule::timestamp::iso_utc(d),
                        now.saturating_sub(d)
                    ),
                ));
            }
            if n < CHUNK {
                break;
            }
            from += CHUNK;
        }
        found.sort();
        for (id, detail) in found {
            let f = Finding {
                kind: "stale",
                jobid: id.into_bytes(),
                detail,
            };
            (self.emit)(&f);
            self.summary.stale += 1;
        }
        Ok(())
    }

    fn found(
        &mut self,
        kind: &'static str,
        jobid: &str,
        queue: &str,
        detail: String,
    ) -> RedisResult<()> {
        let f = Finding {
            kind,
            jobid: jobid.as_bytes().to_vec(),
            detail,
        };
        if kind == "held" || kind == "bad" {
            (self.emit)(&f);
            self.summary.held += 1;
            return Ok(());
        }
        if kind == "overdue" {
            (self.emit)(&f);
            self.summary.overdue += 1;
            return Ok(());
        }
        // Confirm (or fix) atomically: the walk is not a snapshot, and a job that moved
        // meanwhile is no problem.
        if !self.fix(kind, jobid, queue, None, !self.repair)? {
            return Ok(());
        }
        (self.emit)(&f);
        self.summary.problems += 1;
        if self.repair {
            self.summary.repaired += 1;
        }
        Ok(())
    }

    /// Runs repair.lua for a finding of `kind` of job `id` whose repair touches the keys
    /// of `queue` (`dry`: only whether its condition holds); `schedule`, as stored, for
    /// unparsable ones.
    fn fix(
        &mut self,
        kind: &'static str,
        id: &str,
        queue: &str,
        schedule: Option<&[u8]>,
        dry: bool,
    ) -> RedisResult<bool> {
        let k = &self.store.keys;
        let mut inv = scripts::REPAIR.prepare_invoke();
        inv.key(&k.schedules)
            .key(&k.statuses)
            .key(&k.timeline)
            .key(k.queue(queue))
            .key(k.members(queue))
            .key(k.lease(id))
            .key(&k.failures)
            .key(&k.paused)
            .key(&k.rerun)
            .arg(kind)
            .arg(id)
            .arg(schedule.unwrap_or_default())
            .arg(crate::schedule::timestamp::now())
            .arg(scripts::flag(dry));
        self.who.audit("repair", id, kind).add_to(&mut inv, k);
        let changed: RedisResult<i64> = inv.invoke(self.store.con);
        match changed {
            // A key of the job of another type (a lease key that is another queue's
            // list): reported as such by check_keys; nothing here can be confirmed.
            Err(e) if crate::error::is_wrong_type(&e) => Ok(false),
            other => Ok(other? > 0),
        }
    }

    fn check_queue(&mut self, q: &str) -> RedisResult<()> {
        let list = self.store.keys.queue(q);
        let members_key = self.store.keys.members(q);
        let mut entries: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut start = 0;
        loop {
            let chunk: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(&list)
                .arg(start)
                .arg(start + CHUNK as i64 - 1)
                .query(self.store.con)?;
            for id in &chunk {
                *entries.entry(id.clone()).or_default() += 1;
            }
            if chunk.len() < CHUNK {
                break;
            }
            start += CHUNK as i64;
        }
        let ids: Vec<Vec<u8>> = entries.keys().cloned().collect();
        for part in ids.chunks(CHUNK) {
            let flags: Vec<bool> = redis::cmd("SMISMEMBER")
                .arg(&members_key)
                .arg(part)
                .query(self.store.con)?;
            for (id, member) in part.iter().zip(flags) {
                if let Some(text) = self.id_text(id, &list) {
                    self.check_entry(q, text, entries[id], member)?;
                }
            }
        }
        let mut scan = Scan::new("SSCAN", Some(&members_key), &[]);
        while let Some(members) = scan.next_page::<Vec<u8>>(self.store.con)? {
            for id in members.iter().filter(|id| !entries.contains_key(*id)) {
                if let Some(id) = self.id_text(id, &members_key) {
                    self.found("member-without-entry", id, q, format!("queue {q}"))?;
                }
            }
        }
        Ok(())
    }

    fn check_entry(&mut self, q: &str, id: &str, count: usize, member: bool) -> RedisResult<()> {
        if queue_of(id) != q {
            return self.found(
                "wrong-queue",
                id,
                q,
                format!("in queue {q}, belongs to {}", queue_of(id)),
            );
        }
        if count > 1 {
            self.found(
                "duplicate-entry",
                id,
                q,
                format!("{count} entries in queue {q}"),
            )?;
        }
        if !member {
            self.found("entry-without-member", id, q, format!("queue {q}"))?;
        }
        Ok(())
    }

    /// Timeline entries (`timeline`) or statuses (else) of jobs that have no schedule.
    fn check_hash_against_schedules(&mut self, timeline: bool) -> RedisResult<()> {
        let key = if timeline {
            self.store.keys.timeline.clone()
        } else {
            self.store.keys.statuses.clone()
        };
        let scan = if timeline { "ZSCAN" } else { "HSCAN" };
        let kind = if timeline {
            "timeline-without-schedule"
        } else {
            "status-of-unknown-job"
        };
        let mut walk = Scan::new(scan, Some(&key), &[]);
        while let Some(page) = walk.next_page::<Vec<u8>>(self.store.con)? {
            let mut ids = Vec::new();
            for id in page.iter().step_by(2) {
                if let Some(id) = self.id_text(id, &key) {
                    ids.push(id);
                }
            }
            let mut pipe = redis::pipe();
            for id in &ids {
                pipe.hexists(&self.store.keys.schedules, *id);
            }
            let known: Vec<bool> = if ids.is_empty() {
                Vec::new()
            } else {
                pipe.query(self.store.con)?
            };
            for (id, known) in ids.into_iter().zip(known) {
                if !known {
                    self.found(kind, id, queue_of(id), String::new())?;
                }
            }
        }
        Ok(())
    }

    fn check_schedules(&mut self) -> RedisResult<()> {
        let key = self.store.keys.schedules.clone();
        let mut lost = Vec::new();
        let mut walk = Scan::new("HSCAN", Some(&key), &[]);
        while let Some(page) = walk.next_page::<Vec<u8>>(self.store.con)? {
            let mut jobs: Vec<(String, Vec<u8>)> = Vec::new();
            let mut it = page.into_iter();
            while let (Some(id), Some(schedule)) = (it.next(), it.next()) {
                self.summary.jobs += 1;
                if let Some(id) = self.id_text(&id, &key) {
                    self.check_id(id);
                    jobs.push((id.to_string(), schedule));
                }
            }
            self.check_schedule_chunk(&jobs, &mut lost)?;
        }
        // Put lost jobs back last, when a Python reschedule caught mid-way has finished.
        if self.repair {
            for id in lost {
                let now = crate::schedule::timestamp::now();
                match recover_job(self.store, &id, Lost::Orphan, now, self.policy, 0, 0) {
                    Ok(true) => {
                        self.summary.repaired += 1;
                        self.who
                            .audit("repair", &id, "out-of-circulation")
                            .write(self.store.con, self.store.keys)?;
                    }
                    Ok(false) => {}
                    // One of its keys is of another type (reported by check_keys).
                    Err(e) if crate::error::is_wrong_type(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// A job id `set` refuses, as the Python original may store: `odd-id`
    /// (informational: every command names it) or, when its queue's keys are other keys
    /// of ours, `colliding-id`, a problem `--repair` cannot choose a new name for.
    fn check_id(&mut self, id: &str) {
        let Err(e) = crate::jobid::validate(id) else {
            return;
        };
        let colliding = matches!(
            e,
            crate::jobid::JobIdError::Collides { .. } | crate::jobid::JobIdError::Reserved(_)
        );
        let (kind, detail) = if colliding {
            self.summary.problems += 1;
            (
                "colliding-id",
                format!(
                    "{e}; never repaired: `redbike unset {}`, then set it under another queue name",
                    crate::terminal::id(id)
                ),
            )
        } else {
            self.summary.odd_ids += 1;
            (
                "odd-id",
                format!("{e}; stored by another implementation: every redbike command but `set` names it, quoted as shown"),
            )
        };
        (self.emit)(&Finding {
            kind,
            jobid: id.as_bytes().to_vec(),
            detail,
        });
    }

    /// `id`, read from `key`, as text; an id that is not UTF-8 (another program wrote
    /// it) is reported (`not-utf8`, a problem no repair fixes) and `None`: no redbike
    /// command can name it, so the other checks leave it out.
    fn id_text<'i>(&mut self, id: &'i [u8], key: &str) -> Option<&'i str> {
        if let Ok(text) = std::str::from_utf8(id) {
            return Some(text);
        }
        (self.emit)(&Finding {
            kind: "not-utf8",
            jobid: id.to_vec(),
            detail: format!(
                "{key} holds this job id, which is not UTF-8 (another program wrote it): no redbike command takes it; never repaired: remove it with redis-cli"
            ),
        });
        self.summary.problems += 1;
        None
    }

    /// Pauses of jobs that have no schedule, and runs asked (`redbike run`) that nothing
    /// will honour (the job neither runs nor waits in its queue).
    fn check_control_hashes(&mut self) -> RedisResult<()> {
        for (key, kind) in [
            (self.store.keys.paused.clone(), "paused-without-schedule"),
            (self.store.keys.rerun.clone(), "stale-rerun"),
        ] {
            let mut walk = Scan::new("HSCAN", Some(&key), &[]);
            while let Some(page) = walk.next_page::<Vec<u8>>(self.store.con)? {
                for id in page.iter().step_by(2) {
                    let Some(id) = self.id_text(id, &key) else {
                        continue;
                    };
                    let q = queue_of(id);
                    if self.queue_keys_fit(q) {
                        // found() confirms each with repair.lua's condition.
                        self.found(kind, id, q, String::new())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A paused job: reported as such, and as a problem where a Python process put it
    /// back (the timeline, its queue without a run asked).
    fn check_paused(&mut self, id: &str, place: &Place) -> RedisResult<()> {
        let q = queue_of(id);
        let raw: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&self.store.keys.paused)
            .arg(id)
            .query(self.store.con)?;
        let pause = crate::operator::control::Pause::parse(&lossy(raw.unwrap_or_default()));
        (self.emit)(&Finding {
            kind: "paused",
            jobid: id.as_bytes().to_vec(),
            detail: format!(
                "paused since {}{}",
                pause.since_utc.as_deref().unwrap_or("?"),
                if pause.note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", pause.note)
                }
            ),
        });
        self.summary.paused += 1;
        if place.due.is_some() {
            self.found("paused-on-timeline", id, q, "on the timeline".into())?;
        }
        if place.queued && !place.rerun {
            self.found("paused-in-queue", id, q, format!("queue {q}"))?;
        }
        Ok(())
    }

    /// An unparsable schedule is a problem until it is marked BAD (what `--repair` does);
    /// then it is reported as `bad`, like a held job: an operator has to set or unset it.
    /// `stored` is the schedule as stored, which the repair confirms it still is.
    fn check_unparsable(&mut self, id: &str, stored: &[u8], why: String) -> RedisResult<()> {
        let status: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&self.store.keys.statuses)
            .arg(id)
            .query(self.store.con)?;
        let q = queue_of(id);
        if status.as_deref().is_some_and(|s| s.starts_with(b"BAD:")) {
            return self.found("bad", id, q, why);
        }
        let kind = "unparsable-schedule";
        if !self.fix(kind, id, q, Some(stored), !self.repair)? {
            return Ok(()); // changed meanwhile
        }
        (self.emit)(&Finding {
            kind,
            jobid: id.as_bytes().to_vec(),
            detail: why,
        });
        self.summary.problems += 1;
        if self.repair {
            self.summary.repaired += 1;
        }
        Ok(())
    }

    /// `jobs`: ids and schedules as stored (a schedule that is not UTF-8 is read with
    /// U+FFFD for its bytes, and so does not parse).
    fn check_schedule_chunk(
        &mut self,
        jobs: &[(String, Vec<u8>)],
        lost: &mut Vec<String>,
    ) -> RedisResult<()> {
        let mut live = Vec::new();
        let mut unparsable = Vec::new();
        // A job whose queue's keys are of other types is left out (check_keys reported
        // them): where it is cannot be told. STOP jobs too: a one-off run may be lost
        // (below).
        for (id, stored) in jobs.iter().filter(|j| self.queue_keys_fit(queue_of(&j.0))) {
            let text = String::from_utf8_lossy(stored);
            match Schedule::parse(&text) {
                Ok(_) => live.push((id, text)),
                Err(e) => unparsable.push((id, stored, e.to_string())),
            }
        }
        for (id, stored, why) in unparsable {
            self.check_unparsable(id, stored, why)?;
        }
        let ids: Vec<&str> = live.iter().map(|(id, _)| id.as_str()).collect();
        let places = self.store.places(&ids)?;
        for ((id, text), place) in live.into_iter().zip(places) {
            if place.paused {
                self.check_paused(id, &place)?;
                continue;
            }
            let Place {
                due,
                queued,
                leased,
                status,
                ..
            } = place;
            let score = due.is_some();
            let q = queue_of(id);
            let wrk = status.as_deref().is_some_and(|s| s.starts_with("WRK:"));
            match (score, queued, leased) {
                // Stopped, or a one-off that ran: where a STOP job belongs. Status WRK
                // says a one-off run was claimed and never recorded as done (its worker
                // died): that run is lost (see oneoff_action in common.lua).
                (false, false, false) if text == "STOP" && !wrk => {}
                (false, false, false)
                    if status.as_deref().is_some_and(|s| s.starts_with("DIE:")) =>
                {
                    self.found(
                        "held",
                        id,
                        q,
                        format!(
                            "failed ({}), held out of circulation",
                            status.unwrap_or_default()
                        ),
                    )?;
                }
                (false, false, false) => {
                    let detail = if text == "STOP" {
                        format!(
                            "one-off run never completed (status {})",
                            status.unwrap_or_default()
                        )
                    } else {
                        format!("schedule {text}")
                    };
                    let f = Finding {
                        kind: "out-of-circulation",
                        jobid: id.as_bytes().to_vec(),
                        detail,
                    };
                    (self.emit)(&f);
                    self.summary.problems += 1;
                    lost.push(id.clone());
                }
                (true, true, _) => {
                    self.found("queued-and-timeline", id, q, format!("queue {q}"))?
                }
                (_, true, true) => {
                    self.found("queued-while-running", id, q, format!("queue {q}"))?
                }
                (true, false, false) if due.is_some_and(|d| d < self.overdue_before) => {
                    let d = due.unwrap_or_default();
                    self.found(
                        "overdue",
                        id,
                        q,
                        format!(
                            "due since {} ({}s); not repaired: no dispatcher runs, or HALT is set (see redbike ps, redbike control RESUME)",
                            crate::schedule::timestamp::iso_utc(d),
                            crate::schedule::timestamp::now().saturating_sub(d)
                        ),
                    )?
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The detail of a `stale` row from a field of `P-stale`.
fn stale_detail(raw: &str) -> String {
    use crate::schedule::timestamp::iso_utc;
    match crate::stale::Stale::parse(raw) {
        Some(s) => format!(
            "stale since {}; last success {}; bound {}",
            iso_utc(s.went),
            match s.since {
                0 => "unknown".to_string(),
                t => iso_utc(t),
            },
            match s.bound {
                0 => "unknown".to_string(),
                b => format!("{b}s"),
            }
        ),
        None => "stale (its entry in P-stale is not redbike's)".to_string(),
    }
}
