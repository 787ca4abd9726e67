//! Lost jobs: no job falls out of circulation because its worker died (recovery of
//! expired leases, and the sweep).
//!
//! Our workers keep each running job in the running index (`P-leases`) and push its
//! recovery instant forward every second; a dispatcher recovers the jobs whose instant
//! has passed (the worker is gone: kill -9, machine lost; or it was frozen or cut off,
//! and has stopped the job itself by then: see `FENCE_AFTER` in `work/api.rs`) — per
//! schedule, status `REC`. The instants are on Redis's clock (`TIME`, read inside the
//! scripts), so the clocks of the machines involved never matter.
//! Python workers keep no index, so a slow sweep over all schedules also finds live jobs
//! that are nowhere (no lease, no queue entry, no timeline entry) and recovers them when
//! they are still nowhere [`SUSPECT_FOR`] later. Every recovery re-checks its condition
//! atomically (recover.lua), so racing dispatchers recover a job once.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use redis::RedisResult;

use crate::{
    policy::Policy,
    redis::scripts::{
        self,
        recovery::{recover_job, Lost},
    },
    redis::store::Store,
};

/// After Redis comes back, how long to wait before recovering: workers need a moment to
/// reconnect and refresh the index, or live jobs would look dead.
pub const QUIET_AFTER_OUTAGE: Duration = Duration::from_secs(15);
/// How long a job must stay out of circulation before the sweep puts it back (the
/// original's reschedule is not atomic: a job is briefly nowhere between two steps).
pub const SUSPECT_FOR: Duration = Duration::from_secs(10);
/// How fast the sweep walks the schedules: calls of at most `call` schedules each (a
/// call holds Redis a few ms: 500 schedules take 1 – 3 ms at 10 million on this
/// project's 2-core machine, see docs/scale.md), paced so that a whole pass over N
/// schedules takes `pass`, but at least `least` and at most `most` schedules a second.
/// With the defaults: a call of 500 every 5 s up to 60,000 schedules (10,000: a pass
/// in 100 s); a pass in 10 minutes up to 2.4 million; beyond, N/4,000 seconds (10
/// million: 42 minutes, in 8 calls a second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepPace {
    /// The most schedules one call looks at.
    pub call: usize,
    /// The fewest schedules looked at a second.
    pub least: usize,
    /// The most schedules looked at a second.
    pub most: usize,
    /// How long a whole pass should take, within those bounds.
    pub pass: Duration,
}

impl SweepPace {
    /// The pace a dispatcher uses.
    pub const DEFAULT: SweepPace = SweepPace {
        call: 500,
        least: 100,
        most: 4_000,
        pass: Duration::from_secs(600),
    };

    /// [`SweepPace::DEFAULT`], except for the pass when the test hook
    /// `REDBIKE_TEST_SWEEP_PASS` sets its seconds (so a test covers many schedules in
    /// seconds; debug builds only).
    fn from_env() -> SweepPace {
        let pass = crate::test_hook::value("REDBIKE_TEST_SWEEP_PASS")
            .and_then(|s| s.parse().ok())
            .filter(|&n| n > 0)
            .map(Duration::from_secs);
        SweepPace {
            pass: pass.unwrap_or(SweepPace::DEFAULT.pass),
            ..SweepPace::DEFAULT
        }
    }

    /// Schedules looked at a second when there are `schedules`.
    pub fn per_second(&self, schedules: usize) -> f64 {
        let wanted = schedules as f64 / self.pass.as_secs_f64();
        wanted.clamp(self.least as f64, self.most as f64)
    }
}

/// One sweep call's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepStep {
    /// The HSCAN cursor to go on from (0: the pass is complete).
    pub cursor: u64,
    /// How many schedules there are (HLEN).
    pub schedules: usize,
    /// Live jobs found out of circulation, with their schedules.
    pub lost: Vec<(String, String)>,
}

/// One call of the sweep (sweep.lua) from `cursor`, looking at about `count` schedules.
pub fn sweep(store: &mut Store<'_>, cursor: u64, count: usize) -> RedisResult<SweepStep> {
    let reply: Vec<String> = scripts::SWEEP
        .key(&store.keys.schedules)
        .key(&store.keys.timeline)
        .key(&store.keys.statuses)
        .key(&store.keys.paused)
        .arg(&store.keys.prefix)
        .arg(cursor)
        .arg(count)
        .invoke(store.con)?;
    let mut it = reply.into_iter();
    let cursor = it.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let schedules = it.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut lost = Vec::new();
    while let (Some(id), Some(schedule)) = (it.next(), it.next()) {
        lost.push((id, schedule));
    }
    Ok(SweepStep {
        cursor,
        schedules,
        lost,
    })
}
/// How much sweeping accrues at most while the dispatcher does not tick (a long pass,
/// an outage): at 10 million schedules, 40 calls in a row after such a pause.
const SWEEP_CATCH_UP: Duration = Duration::from_secs(5);
/// Index entries recovered per call.
const BATCH: usize = 100;
/// Pages of index entries looked at per pass, at most.
const PAGES: usize = 10;
/// How far an index entry whose job cannot be recovered (one of its keys holds another
/// type) is moved ahead, so that it neither hides the entries behind it nor keeps the
/// earliest recovery instant in the past; it is looked at again then.
const ODD_AGAIN: f64 = 30.0;

/// Recovery state of one dispatcher.
pub struct Recovery {
    /// How jobs are put back (schedule zone, failure delay, jitter).
    policy: Policy,
    /// History entries kept per job (`history-limit`; 0: recoveries write none).
    history_limit: u64,
    /// Entries kept in the event stream (`events`; 0: recoveries write none).
    events: u64,
    /// No recovery before this instant.
    quiet_until: Instant,
    /// Jobs seen out of circulation, with when they were first seen.
    suspects: HashMap<String, (String, Instant)>,
    /// The sweep's HSCAN cursor.
    cursor: u64,
    /// How fast the sweep walks.
    pace: SweepPace,
    /// Schedules the sweep is to look at now, accrued at its pace.
    owed: f64,
    /// When `owed` was last accrued.
    accrued: Instant,
    /// The number of schedules the last sweep call found.
    schedules: usize,
    /// Jobs that could not be recovered because one of their keys is of another type
    /// (named once while they stay so; `redbike check` reports the key).
    odd: HashSet<String>,
}

impl Recovery {
    /// Recovery with the given settings; the first sweep call is due at once.
    pub(crate) fn new(policy: Policy, history_limit: u64, events: u64) -> Recovery {
        let pace = SweepPace::from_env();
        Recovery {
            policy,
            history_limit,
            events,
            quiet_until: Instant::now(),
            suspects: HashMap::new(),
            cursor: 0,
            pace,
            owed: pace.call as f64,
            accrued: Instant::now(),
            schedules: 0,
            odd: HashSet::new(),
        }
    }

    /// Redis was away: hold off until workers had time to refresh the index.
    pub fn outage_ended(&mut self) {
        self.quiet_until = Instant::now() + QUIET_AFTER_OUTAGE;
        self.suspects.clear();
    }

    /// When the next sweep call is owed, while the sweep walks faster than its least
    /// pace (many schedules): an idle dispatcher that would sleep longer ticks then. At
    /// the least pace the calls ride the passes it makes anyway (see
    /// [`crate::redis::peers`]), at most one every 10 s.
    pub fn sweep_due(&self) -> Option<Instant> {
        let rate = self.pace.per_second(self.schedules);
        if rate <= self.pace.least as f64 {
            return None;
        }
        let left = (self.pace.call as f64 - self.owed).max(0.0);
        let due = self.accrued + Duration::from_secs_f64(left / rate);
        Some(due.max(self.quiet_until))
    }

    /// Does what is due: recover stale index entries (`earliest` is the earliest
    /// recovery instant in the index, `redis_now` Redis's clock) and the sweep calls
    /// owed since the last tick (ticks about once a second spread them evenly);
    /// `now` is what statuses record. Returns jobs recovered.
    pub fn tick(
        &mut self,
        store: &mut Store<'_>,
        earliest: Option<f64>,
        redis_now: f64,
        now: i64,
    ) -> RedisResult<usize> {
        if Instant::now() < self.quiet_until {
            return Ok(0);
        }
        let mut n = 0;
        if earliest.is_some_and(|t| t <= redis_now) {
            n += self.recover_index(store, redis_now, now)?;
        }
        n += self.sweep_step(store, now)?;
        Ok(n)
    }

    /// [`recover_job`], except that a job one of whose keys is of another type (a
    /// script refuses it before writing) is skipped, and named once while it stays so,
    /// rather than failing every pass of the dispatcher: `None` then.
    fn recover_one(
        &mut self,
        store: &mut Store<'_>,
        id: &str,
        lost: Lost,
        now: i64,
    ) -> RedisResult<Option<bool>> {
        match recover_job(
            store,
            id,
            lost,
            now,
            &self.policy,
            self.history_limit,
            self.events,
        ) {
            Err(e) if crate::error::is_wrong_type(&e) => {
                if self.odd.insert(id.to_string()) {
                    crate::log_warn!(
                        "cannot recover job {id}: {}; `redbike check` names the key",
                        e.detail().unwrap_or("a key of another type")
                    );
                }
                Ok(None)
            }
            Ok(done) => {
                // Its keys are fine (again): named anew if they turn odd later.
                self.odd.remove(id);
                Ok(Some(done))
            }
            Err(e) => Err(e),
        }
    }

    /// Recovers the jobs whose index entry is older than `redis_now` (recover.lua
    /// checks each again against Redis's clock). The entries of jobs that cannot be
    /// recovered are moved `ODD_AGAIN` ahead (XX GT: never added, never moved back),
    /// so the next page holds other entries.
    fn recover_index(
        &mut self,
        store: &mut Store<'_>,
        redis_now: f64,
        now: i64,
    ) -> RedisResult<usize> {
        let mut n = 0;
        for _ in 0..PAGES {
            let stale: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(&store.keys.leases)
                .arg("-inf")
                .arg(redis_now)
                .arg("LIMIT")
                .arg(0)
                .arg(BATCH)
                .query(store.con)?;
            let mut odd = Vec::new();
            let mut done = 0;
            for id in &stale {
                match self.recover_one(store, id, Lost::Index, now)? {
                    None => odd.push(id),
                    Some(recovered) => done += usize::from(recovered),
                }
            }
            if !odd.is_empty() {
                let again = redis_now + ODD_AGAIN;
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(&store.keys.leases).arg("XX").arg("GT");
                for id in &odd {
                    zadd.arg(again).arg(*id);
                }
                zadd.exec(store.con)?;
            }
            n += done;
            // A short page was the last; a page that changed nothing would come again.
            if stale.len() < BATCH || done + odd.len() == 0 {
                break;
            }
        }
        Ok(n)
    }

    /// Recovers the suspects still out of circulation after [`SUSPECT_FOR`], then makes
    /// the sweep calls owed: the pace accrues schedules by the second (up to
    /// [`SWEEP_CATCH_UP`] of them, after a slow pass), and a call is made for each
    /// `call` of them, so Redis is never held long; with few schedules, a call every
    /// 5 s, as an idle dispatcher always did.
    fn sweep_step(&mut self, store: &mut Store<'_>, now: i64) -> RedisResult<usize> {
        let mut n = 0;
        let ripe: Vec<String> = self
            .suspects
            .iter()
            .filter(|(_, (_, seen))| seen.elapsed() >= SUSPECT_FOR)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ripe {
            self.suspects.remove(&id);
            n += usize::from(self.recover_one(store, &id, Lost::Orphan, now)? == Some(true));
        }
        let rate = self.pace.per_second(self.schedules);
        let call = self.pace.call as f64;
        let most = (rate * SWEEP_CATCH_UP.as_secs_f64()).max(call);
        self.owed = (self.owed + rate * self.accrued.elapsed().as_secs_f64()).min(most);
        self.accrued = Instant::now();
        while self.owed >= call {
            self.owed -= call;
            let step = sweep(store, self.cursor, self.pace.call)?;
            self.cursor = step.cursor;
            self.schedules = step.schedules;
            for (id, schedule) in step.lost {
                self.suspects
                    .entry(id)
                    .or_insert((schedule, Instant::now()));
            }
        }
        Ok(n)
    }
}
