//! The outbox: what becomes of the jobs the worker holds, to write in the next round
//! trip: the outcomes of ended jobs (finish.lua: the next run decided by the after-run
//! policy, the run history entry) and the jobs claimed ahead to hand back to their
//! queues (release.lua). Writes whose replies were lost go back to it, to be written
//! again (both scripts are idempotent).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use redis::{Pipeline, RedisError, RedisResult, Value};

use crate::{
    policy::{decide, End, Policy, RunResult},
    redis::clock::RedisClock,
    redis::keys::Keys,
    redis::registry,
    redis::scripts::worker::{self as worker_scripts, FinishReply, Finished, Release},
    retries::Attempt,
    schedule::Schedule,
    work::{
        filing::Filing,
        pool::{Ended, Pool, Ready},
        replies::{odd_detail, queue},
    },
};

/// How long outcomes may wait to be written together, while every slot has its next job
/// claimed already: one round trip then records several jobs.
pub(super) const BATCH_FOR: Duration = Duration::from_millis(5);

/// What is to be written to Redis in the next round trip.
#[derive(Default)]
pub(super) struct Outbox {
    /// Outcomes not yet written.
    pub pending: Vec<Ended>,
    /// Since when the oldest of them waits (`BATCH_FOR`).
    pub pending_since: Option<Instant>,
    /// Jobs claimed ahead that are to be handed back to their queues.
    pub releases: Vec<Ready>,
}

/// What the outbox sent in one round trip.
#[derive(Default)]
pub(super) struct OutboxSent {
    /// The outcomes its finish.lua call writes (none: no call).
    pub outcomes: Vec<Ended>,
    /// The jobs its release.lua calls hand back, oldest first.
    pub releases: Vec<Ready>,
    /// How many replies it brings.
    pub replies: usize,
}

/// What the outcomes are decided and written with.
pub(super) struct Writing<'a> {
    /// Key names.
    pub keys: &'a Keys,
    /// The after-run policy.
    pub policy: &'a Policy,
    /// Redis's clock, from the claims' replies.
    pub clock: &'a RedisClock,
    /// Run history entries kept per job (0: none written).
    pub history_limit: u64,
    /// Entries kept in the event stream (`events`; 0: none written).
    pub events: u64,
    /// Whether entries go to their jobs' lists at once (see [`Filing::full`]).
    pub file_directly: bool,
    /// Whether the prefix lost its schedules (see [`registry::Registration`]).
    pub lost_schedules: bool,
    /// The fleet-wide limits of queues (`[redbike.limits]`): the end of a run of a
    /// limited queue wakes the workers waiting for room in it.
    pub limits: &'a BTreeMap<String, u64>,
}

impl Outbox {
    /// Whether anything waits to be written.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.releases.is_empty()
    }

    /// Whether outcomes or hand-backs wait to be written, or ended jobs to be taken.
    pub fn to_write(&self) -> bool {
        self.pending_since.is_some() || !self.releases.is_empty()
    }

    /// Jobs ended: their outcomes are batched from now on.
    pub fn ended(&mut self) {
        self.pending_since.get_or_insert_with(Instant::now);
    }

    /// Takes the jobs that ended (from the pool) into the outcomes to write.
    pub fn record(&mut self, ended: Vec<Ended>) {
        for e in ended {
            let secs = e.ran.as_secs_f64();
            match &e.end {
                End::TimedOut | End::Recovered => {
                    crate::log_warn!("job {} was stopped after {secs:.2}s (TMO)", e.job.id)
                }
                End::Killed => crate::log_warn!(
                    "job {} was stopped after {secs:.2}s as redbike kill asked (KIL)",
                    e.job.id
                ),
                End::Interrupted => crate::log_warn!(
                    "job {} was stopped after {secs:.2}s because the worker is stopping (INT)",
                    e.job.id
                ),
                End::Fenced => crate::log_warn!(
                    "job {} was stopped after {secs:.2}s: its worker could not confirm it to redis (FNC)",
                    e.job.id
                ),
                End::Reported(RunResult::Failed(why)) => {
                    crate::log_warn!("job {} failed after {secs:.2}s: {why} (DIE)", e.job.id)
                }
                End::Reported(o) => {
                    crate::log_debug!("job {} ended after {secs:.2}s: {o:?}", e.job.id)
                }
            }
            self.pending.push(e);
        }
    }

    /// Adds one finish.lua call for every pending outcome (none: no call) and a
    /// release.lua call for each of the first `releases` hand-backs to `pipe`; returns
    /// how many replies they bring. They leave the outbox once sent ([`Outbox::sent`]).
    pub fn add_to(&self, pipe: &mut Pipeline, w: &Writing, releases: usize, now: i64) -> usize {
        queue(pipe, |pipe| {
            if !self.pending.is_empty() {
                self.add_finish(pipe, w, now);
            }
            // Newest first: each goes to the head of its queue, so the oldest ends up next.
            for r in self.releases[..releases].iter().rev() {
                let release = Release {
                    jobid: &r.job.id,
                    tag: &r.tag,
                    queue: &r.job.queue,
                    now,
                };
                worker_scripts::add_release(pipe, w.keys, &release);
            }
        })
    }

    /// The round trip with what [`Outbox::add_to`] added went out: the outcomes and
    /// the first `releases` hand-backs leave the outbox. `more`: jobs ended since,
    /// whose outcomes are batched from now.
    pub fn sent(
        &mut self,
        releases: usize,
        replies: usize,
        more: impl FnOnce() -> bool,
    ) -> OutboxSent {
        let outcomes = std::mem::take(&mut self.pending);
        if !outcomes.is_empty() {
            self.pending_since = more().then(Instant::now);
        }
        OutboxSent {
            outcomes,
            releases: self.releases.drain(..releases).collect(),
            replies,
        }
    }

    /// Takes back the outcomes and hand-backs of round trips whose replies were lost,
    /// oldest first, ahead of those that came since, to be sent again.
    pub fn take_back(&mut self, trips: impl DoubleEndedIterator<Item = OutboxSent>) {
        for t in trips.rev() {
            self.pending.splice(0..0, t.outcomes);
            self.releases.splice(0..0, t.releases);
        }
        if !self.pending.is_empty() {
            self.pending_since.get_or_insert_with(Instant::now);
        }
    }

    /// The instant a job's next run is decided from: Redis's clock, never before the
    /// claim of the run that ended (that claim came after the occurrence it served fell
    /// due on Redis's clock, so the next run is a later occurrence; see
    /// [`crate::redis::clock`]), in whole seconds.
    fn reference(clock: &RedisClock, f: &Ended) -> i64 {
        let claimed = f.job.claimed_at.unwrap_or(f64::MIN);
        clock.now().max(claimed).floor() as i64
    }

    /// Adds one finish.lua call for every pending outcome to `pipe`.
    fn add_finish(&self, pipe: &mut Pipeline, w: &Writing, now: i64) {
        // The entry goes to the history and to the run's event.
        let entry = w.history_limit > 0 || w.events > 0;
        let runs = self.pending.iter().map(|f| {
            let schedule = f.job.schedule.as_deref();
            let at = Self::reference(w.clock, f);
            let attempt = Attempt {
                number: f.job.attempt,
                due: f.job.due,
            };
            let decision = decide(&f.job.id, schedule, &f.end, attempt, at, w.policy);
            let (entry, kind) = match entry {
                true => run_entry(f, &decision, w.lost_schedules),
                false => (String::new(), ""),
            };
            let fresh = matches!(f.end, End::Reported(RunResult::Success { .. })).then(|| {
                // The schedule in force after the run: NOW and AT leave STOP.
                let after = decision.store.or(schedule)?;
                let parsed = Schedule::parse(after).ok()?;
                let ran = f.ran.as_secs_f64().ceil() as u64;
                w.policy.bounds().deadline(&f.job.id, &parsed, at, ran)
            });
            Finished {
                jobid: &f.job.id,
                tag: &f.tag,
                schedule,
                decision,
                entry,
                kind,
                claimed_at: f.job.claimed_at,
                limited: w.limits.contains_key(&f.job.queue),
                fresh,
            }
        });
        worker_scripts::add_finish(
            pipe,
            w.keys,
            runs,
            now,
            w.history_limit,
            w.file_directly,
            w.events,
        );
    }

    /// Reads the replies of what `sent` wrote; returns the first error Redis answered
    /// with (the outcomes and hand-backs it concerns are kept to be written again).
    pub fn read(
        &mut self,
        sent: OutboxSent,
        mut replies: impl Iterator<Item = RedisResult<Value>>,
        filing: &mut Filing,
        pool: &Pool,
    ) -> Option<RedisError> {
        let mut error = None;
        let outcomes = sent.outcomes;
        let results = match outcomes.is_empty() {
            true => Vec::new(),
            false => {
                let (results, unfiled) = finish_results(replies.next(), outcomes.len());
                filing.heard(unfiled);
                results
            }
        };
        for (mut f, reply) in outcomes.into_iter().zip(results) {
            match reply {
                Ok(FinishReply::Changed(current)) => {
                    // Someone set or unset the job while it ran: decide again.
                    f.job.schedule = current;
                    self.pending.push(f);
                }
                Ok(FinishReply::Stale) => {
                    crate::log_warn!(
                        "job {}: its lease is held by another worker; leaving it alone",
                        f.job.id
                    );
                }
                Ok(FinishReply::Odd(detail)) => {
                    // Its queue's keys hold other types: written again, it would fail
                    // again. Dropped (once, so one line): its index entry is no longer
                    // refreshed, and recovery puts the job back once the key is fixed.
                    crate::log_warn!(
                        "job {}: cannot record its outcome: {}; the outcome is dropped: recovery puts the job back once the key is fixed",
                        f.job.id,
                        odd_detail(detail)
                    );
                }
                Ok(r) => crate::log_debug!("job {} recorded: {}", f.job.id, r.word()),
                Err(e) => {
                    crate::log_debug!("job {}: cannot record its outcome: {e}", f.job.id);
                    error.get_or_insert(e);
                    self.pending.push(f);
                }
            }
        }
        let mut failed = Vec::new();
        for (r, reply) in sent.releases.into_iter().rev().zip(replies.by_ref()) {
            match reply.and_then(|v| redis::from_redis_value::<String>(v).map_err(Into::into)) {
                Ok(result) => crate::log_debug!("job {} handed back: {result}", r.job.id),
                // As with an outcome: handed back again, it would fail again. Dropped
                // (its lease expires; recovery puts it back once the key is fixed).
                Err(e) if crate::error::is_wrong_type(&e) => crate::log_warn!(
                    "job {}: cannot hand it back: {}; recovery puts the job back once the key is fixed",
                    r.job.id,
                    odd_detail(e.detail().map(str::to_string))
                ),
                Err(e) => {
                    crate::log_debug!("job {}: cannot hand it back: {e}", r.job.id);
                    error.get_or_insert(e);
                    failed.insert(0, r);
                }
            }
        }
        self.releases.splice(0..0, failed);
        // Jobs that ended during the round trip told the loop so (`Event::Ended`).
        if self.pending.is_empty() && pool.lock().ended.is_empty() {
            self.pending_since = None;
        } else if !self.pending.is_empty() {
            self.pending_since.get_or_insert_with(Instant::now);
        }
        error
    }
}

/// finish.lua's reply for one outcome: its result words, or why there is none.
type FinishResult = redis::RedisResult<FinishReply>;

/// The replies for each of `n` outcomes from finish.lua's one reply: always `n` of
/// them, an error for each outcome the reply does not answer (it is written again);
/// and the length of the unfiled runs the reply ends with (see [`crate::history`]).
fn finish_results(
    reply: Option<redis::RedisResult<Value>>,
    n: usize,
) -> (Vec<FinishResult>, Option<u64>) {
    let items = reply
        .unwrap_or_else(|| Err((redis::ErrorKind::UnexpectedReturnType, "no reply").into()))
        .and_then(|v| redis::from_redis_value::<Vec<Value>>(v).map_err(Into::into));
    match items {
        Ok(mut items) if items.len() == n + 1 => {
            let unfiled = items
                .pop()
                .and_then(|v| redis::from_redis_value::<u64>(v).ok());
            let results = items
                .into_iter()
                .map(|v| {
                    // A word, or a list of them ("changed" and "odd" say more).
                    let words = match v {
                        Value::BulkString(_) | Value::SimpleString(_) => {
                            redis::from_redis_value::<String>(v).map(|w| vec![Some(w)])
                        }
                        v => redis::from_redis_value::<Vec<Option<String>>>(v),
                    };
                    words
                        .map_err(Into::into)
                        .and_then(|words| FinishReply::parse(&words))
                })
                .collect();
            (results, unfiled)
        }
        Ok(items) => {
            let e = format!("{} replies for {n} outcomes", items.len());
            let results = (0..n)
                .map(|_| {
                    Err((
                        redis::ErrorKind::UnexpectedReturnType,
                        "finish.lua",
                        e.clone(),
                    )
                        .into())
                })
                .collect();
            (results, None)
        }
        Err(e) => ((0..n).map(|_| Err(e.clone())).collect(), None),
    }
}

/// The history entry of a run and its kind for finish.lua ([`crate::history::Outcome::kind`]).
/// Made from the run alone (not the time of the write), so an outcome written again
/// makes the same entry, which finish.lua then recognises. Borrowed from the run: a
/// worker of short jobs makes many.
/// `lost`: the prefix lost its schedules, which an unset or a recovery then says.
fn run_entry(f: &Ended, d: &crate::policy::Decision, lost: bool) -> (String, &'static str) {
    use crate::history::{millis, origin, Outcome as H, Stored, WORKER};
    use crate::policy::{AfterRun, Attempts};
    use std::borrow::Cow;
    let outcome = match (&f.end, d.after) {
        (_, AfterRun::Unset) => H::Unset,
        (_, AfterRun::Bad) => H::Bad,
        (End::TimedOut, _) => H::TimedOut,
        (End::Killed, _) => H::Killed,
        (End::Interrupted, _) => H::Interrupted,
        (End::Fenced, _) => H::Fenced,
        (End::Recovered, _) => H::Recovered,
        (End::Reported(RunResult::Failed(_)), _) => H::Failed,
        (End::Reported(RunResult::Stop), _) => H::Stopped,
        (End::Reported(RunResult::Unset), _) => H::Unset,
        (End::Reported(RunResult::Success { backoff: Some(_) }), _) => H::Backoff,
        (End::Reported(RunResult::Success { backoff: None }), _) => H::Ok,
    };
    let (start, end) = f.span;
    let (host, pid) = origin();
    let detail = match &f.end {
        End::Reported(RunResult::Failed(why)) => Cow::Borrowed(why.as_str()),
        End::Reported(RunResult::Success { backoff: Some(n) }) => format!("backoff {n}s").into(),
        _ if outcome == H::Bad => "its schedule cannot be read".into(),
        _ if lost && matches!(outcome, H::Unset | H::Recovered) => registry::LOST_SCHEDULES.into(),
        _ => "".into(),
    };
    // A retry is late by its backoff: its lateness is left out (stats' figures of
    // lateness measure dispatch, not retries).
    let retry = f.job.attempt > 1;
    let entry = Stored {
        job: Cow::Borrowed(&f.job.id),
        outcome,
        due: f.job.due,
        start: Some(millis(start)),
        end: millis(end),
        duration: Some(millis(f.ran.as_secs_f64())),
        late: f
            .job
            .due
            .filter(|_| !retry)
            .map(|due| millis(start - due as f64)),
        exit: f.details.exit,
        signal: f.details.signal,
        host: Cow::Borrowed(host),
        pid: *pid,
        by: Cow::Borrowed(WORKER),
        detail,
        tail: Cow::Borrowed(&f.details.tail),
        attempt: (retry || matches!(d.attempts, Attempts::Retry(..))).then_some(f.job.attempt),
    };
    (entry.to_json(), outcome.kind())
}
