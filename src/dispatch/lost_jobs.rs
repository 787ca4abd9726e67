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
//! That full walk costs Redis about 3 µs a schedule at 10 million, so its pace is capped
//! and its pass grows past 2.4 million schedules (10 million: 42 minutes). A Python
//! worker that dies with a job in hand leaves status `WRK` (its claim wrote it), so
//! while Python peers share the prefix and the full pass runs long, a quick walk over
//! the statuses (sweep_claimed.lua: it looks further only at `WRK` statuses, about half
//! the cost a schedule) finds those jobs within a bounded pass ([`SweepPace::CLAIMED`]:
//! 10 minutes up to 7.2 million, 10 million in 14 minutes); the full walk remains the
//! safety net for the rest (keys deleted by hand or evicted, a Python reschedule cut
//! between its steps). Without Python peers our own workers' jobs are in the running
//! index, so the quick walk does not run and an idle dispatcher costs what it did.

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
/// million: 42 minutes, in 8 calls a second). [`SweepPace::CLAIMED`] paces the quick
/// walk over the statuses.
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

    /// The pace of the quick walk over the statuses (sweep_claimed.lua), which runs
    /// while Python peers share the prefix and the full walk is at its most: calls of
    /// 2,000 statuses (a few ms of Redis at 10 million: about 1.5 µs a status on this
    /// project's 2-core machine, see docs/scale.md), a pass in 10 minutes up to 7.2
    /// million, at most 12,000 a second (10 million: 14 minutes, in 6 calls a second).
    pub const CLAIMED: SweepPace = SweepPace {
        call: 2_000,
        least: 100,
        most: 12_000,
        pass: Duration::from_secs(600),
    };

    /// `base` ([`SweepPace::DEFAULT`] or [`SweepPace::CLAIMED`]), except for the pass
    /// when the test hook `REDBIKE_TEST_SWEEP_PASS` sets its seconds (so a test covers
    /// many schedules in seconds), and, with `most_hook` (the full walk), for the most
    /// a second when `REDBIKE_TEST_SWEEP_MOST` sets it (so a test makes the full pass
    /// long with few schedules). Debug builds only.
    fn from_env(base: SweepPace, most_hook: bool) -> SweepPace {
        let number =
            |value: Option<String>| value.and_then(|s| s.parse::<u64>().ok()).filter(|&n| n > 0);
        let pass =
            number(crate::test_hook::value("REDBIKE_TEST_SWEEP_PASS")).map(Duration::from_secs);
        let most = number(crate::test_hook::value("REDBIKE_TEST_SWEEP_MOST"))
            .filter(|_| most_hook)
            .and_then(|n| usize::try_from(n).ok());
        SweepPace {
            pass: pass.unwrap_or(base.pass),
            most: most.unwrap_or(base.most).max(base.least),
            ..base
        }
    }

    /// The pace of each of `shards` shards of a prefix: the least pace is the
    /// prefix's, shared out among its shards, so that the sweep of a prefix split into
    /// small shards does not cost Redis a floor per shard (12 shards of 1,700 schedules
    /// walked 1,200 a second, 12 times the floor of the same schedules unsplit). Each
    /// shard's pass stays within the pass time: at its least pace a shard holds fewer
    /// schedules than the pass time walks.
    pub fn per_shard(self, shards: u32) -> SweepPace {
        let n = usize::try_from(shards.max(1)).unwrap_or(usize::MAX);
        SweepPace {
            least: self.least.div_ceil(n).max(1),
            ..self
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
    let reply: Vec<Vec<u8>> = scripts::SWEEP
        .key(&store.keys.schedules)
        .key(&store.keys.timeline)
        .key(&store.keys.statuses)
        .key(&store.keys.paused)
        .arg(&store.keys.prefix)
        .arg(cursor)
        .arg(count)
        .invoke(store.con)?;
    Ok(parse_step(reply))
}

/// One call of the quick walk (sweep_claimed.lua) from `cursor`, looking at about
/// `count` statuses; [`SweepStep::schedules`] counts the statuses then.
pub fn sweep_claimed(store: &mut Store<'_>, cursor: u64, count: usize) -> RedisResult<SweepStep> {
    let reply: Vec<Vec<u8>> = scripts::SWEEP_CLAIMED
        .key(&store.keys.statuses)
        .key(&store.keys.schedules)
        .key(&store.keys.timeline)
        .key(&store.keys.paused)
        .arg(&store.keys.prefix)
        .arg(cursor)
        .arg(count)
        .invoke(store.con)?;
    Ok(parse_step(reply))
}

/// A sweep script's reply: cursor, count, then pairs of job id and schedule.
/// Read as bytes: a job whose id or schedule another program wrote with bytes that are
/// not UTF-8 is left out (`check` names it), not the whole page, whose cursor would
/// then never move on.
fn parse_step(reply: Vec<Vec<u8>>) -> SweepStep {
    let mut it = reply.into_iter().map(String::from_utf8);
    let cursor = it.next().and_then(|c| c.ok()?.parse().ok()).unwrap_or(0);
    let schedules = it.next().and_then(|c| c.ok()?.parse().ok()).unwrap_or(0);
    let mut lost = Vec::new();
    while let (Some(id), Some(schedule)) = (it.next(), it.next()) {
        if let (Ok(id), Ok(schedule)) = (id, schedule) {
            lost.push((id, schedule));
        }
    }
    SweepStep {
        cursor,
        schedules,
        lost,
    }
}

/// One walk of the sweep, paced: its cursor and the calls it owes.
struct Walk {
    /// How fast it walks.
    pace: SweepPace,
    /// Its HSCAN cursor.
    cursor: u64,
    /// Entries it is to look at now, accrued at its pace.
    owed: f64,
    /// When `owed` was last accrued.
    accrued: Instant,
    /// The size of the hash it walks, as its last call found it.
    size: usize,
}

impl Walk {
    /// A walk at `pace` whose first call is due at once.
    fn new(pace: SweepPace) -> Walk {
        Walk {
            pace,
            cursor: 0,
            owed: pace.call as f64,
            accrued: Instant::now(),
            size: 0,
        }
    }

    /// When its next call is owed, while it walks faster than its least pace.
    fn due(&self) -> Option<Instant> {
        let rate = self.pace.per_second(self.size);
        if rate <= self.pace.least as f64 {
            return None;
        }
        let left = (self.pace.call as f64 - self.owed).max(0.0);
        Some(self.accrued + Duration::from_secs_f64(left / rate))
    }

    /// Accrues what the pace owes since the last time (up to [`SWEEP_CATCH_UP`] of it)
    /// and returns the number of calls to make now.
    fn calls_owed(&mut self) -> usize {
        let rate = self.pace.per_second(self.size);
        let call = self.pace.call as f64;
        let most = (rate * SWEEP_CATCH_UP.as_secs_f64()).max(call);
        self.owed = (self.owed + rate * self.accrued.elapsed().as_secs_f64()).min(most);
        self.accrued = Instant::now();
        let calls = (self.owed / call).floor();
        self.owed -= calls * call;
        calls as usize
    }

    /// Whether it walks at its most (its pass runs longer than the pace's pass).
    fn at_most(&self) -> bool {
        self.pace.per_second(self.size) >= self.pace.most as f64
    }

    /// Forgets what it owes (it pauses): its next call comes when it resumes.
    fn pause(&mut self) {
        self.owed = self.pace.call as f64;
        self.accrued = Instant::now();
    }
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
    /// The full walk over the schedules (sweep.lua).
    full: Walk,
    /// The quick walk over the statuses (sweep_claimed.lua), while Python peers share
    /// the prefix and the full walk is at its most.
    claimed: Walk,
    /// Whether the quick walk runs.
    claimed_on: bool,
    /// Jobs that could not be recovered because one of their keys is of another type
    /// (named once while they stay so; `redbike check` reports the key).
    odd: HashSet<String>,
}

impl Recovery {
    /// Recovery with the given settings; the first sweep call is due at once.
    /// `shards` is the number of shards of the prefix (see [`SweepPace::per_shard`]).
    pub(crate) fn new(policy: Policy, history_limit: u64, events: u64, shards: u32) -> Recovery {
        Recovery {
            policy,
            history_limit,
            events,
            quiet_until: Instant::now(),
            suspects: HashMap::new(),
            full: Walk::new(SweepPace::from_env(SweepPace::DEFAULT, true).per_shard(shards)),
            claimed: Walk::new(SweepPace::from_env(SweepPace::CLAIMED, false).per_shard(shards)),
            claimed_on: false,
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
    /// [`crate::redis::peers`]), at most one every 10 s. The quick walk's calls count
    /// while it runs.
    pub fn sweep_due(&self) -> Option<Instant> {
        let claimed = self.claimed.due().filter(|_| self.claimed_on);
        let due = match (self.full.due(), claimed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        due.map(|d| d.max(self.quiet_until))
    }

    /// Does what is due: recover stale index entries (`earliest` is the earliest
    /// recovery instant in the index, `redis_now` Redis's clock) and the sweep calls
    /// owed since the last tick (ticks about once a second spread them evenly);
    /// `python`: Python peers share the prefix (the quick walk may run); `now` is what
    /// statuses record. Returns jobs recovered.
    pub fn tick(
        &mut self,
        store: &mut Store<'_>,
        earliest: Option<f64>,
        redis_now: f64,
        python: bool,
        now: i64,
    ) -> RedisResult<usize> {
        if Instant::now() < self.quiet_until {
            return Ok(0);
        }
        let mut n = 0;
        if earliest.is_some_and(|t| t <= redis_now) {
            n += self.recover_index(store, redis_now, now)?;
        }
        n += self.sweep_step(store, python, now)?;
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
            // Bytes: an id another program queued may not be UTF-8, and must not keep
            // every other job of the page from recovery.
            let stale: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
                .arg(&store.keys.leases)
                .arg("-inf")
                .arg(redis_now)
                .arg("LIMIT")
                .arg(0)
                .arg(BATCH)
                .query(store.con)?;
            let mut odd: Vec<&[u8]> = Vec::new();
            let mut done = 0;
            for raw in &stale {
                let Ok(id) = std::str::from_utf8(raw) else {
                    // Not a job this dispatcher can carry (ids are text here): moved
                    // ahead like a job whose keys are odd; `check` names it.
                    let shown = crate::terminal::bytes(raw).into_owned();
                    if self.odd.insert(shown.clone()) {
                        crate::log_warn!(
                            "cannot recover job {shown}: its id is not UTF-8 text (written by another program); remove it with redis-cli"
                        );
                    }
                    odd.push(raw);
                    continue;
                };
                match self.recover_one(store, id, Lost::Index, now)? {
                    None => odd.push(raw),
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
    /// 5 s, as an idle dispatcher always did. The quick walk runs the same way while
    /// Python peers share the prefix (`python`) and the full walk is at its most.
    fn sweep_step(&mut self, store: &mut Store<'_>, python: bool, now: i64) -> RedisResult<usize> {
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
        for _ in 0..self.full.calls_owed() {
            let step = sweep(store, self.full.cursor, self.full.pace.call)?;
            self.full.cursor = step.cursor;
            self.full.size = step.schedules;
            self.suspect(step.lost);
        }
        let on = python && self.full.at_most();
        if on != self.claimed_on {
            self.claimed_on = on;
            self.claimed.pause();
        }
        if on {
            for _ in 0..self.claimed.calls_owed() {
                let step = sweep_claimed(store, self.claimed.cursor, self.claimed.pace.call)?;
                self.claimed.cursor = step.cursor;
                self.claimed.size = step.schedules;
                self.suspect(step.lost);
            }
        }
        Ok(n)
    }

    /// Jobs a sweep call found out of circulation become suspects (the first sighting
    /// counts).
    fn suspect(&mut self, lost: Vec<(String, String)>) {
        for (id, schedule) in lost {
            self.suspects
                .entry(id)
                .or_insert((schedule, Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds a whole pass over `n` takes at `pace`.
    fn pass(pace: SweepPace, n: usize) -> f64 {
        n as f64 / pace.per_second(n)
    }

    #[test]
    fn the_full_walk_is_capped_and_the_quick_walk_bounds_a_pass() {
        assert_eq!(pass(SweepPace::DEFAULT, 2_400_000), 600.0);
        // A shard of 12 walks a twelfth of the floor, still within the pass time.
        let shard = SweepPace::DEFAULT.per_shard(12);
        assert_eq!(shard.least, 9);
        assert_eq!(shard.per_second(1_700), 9.0);
        assert!(pass(shard, 5_000) <= 600.0);
        assert_eq!(SweepPace::DEFAULT.per_shard(0).least, 100);
        assert_eq!(pass(SweepPace::DEFAULT, 10_000_000), 2_500.0);
        assert_eq!(pass(SweepPace::CLAIMED, 7_200_000), 600.0);
        // 10 million within 15 minutes: 13.9.
        assert!(pass(SweepPace::CLAIMED, 10_000_000) <= 15.0 * 60.0);
    }
}
