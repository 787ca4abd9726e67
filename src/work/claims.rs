//! The claims' share of a round trip: claim.lua for the free slots (and ahead of them),
//! the look at the leases of claims still to confirm (`wait-replicas`), and reading
//! what they took: the jobs, the queues skipped, the cycle position, Redis's clock.
//! How many jobs to claim, and the queue cycle, are `claim.rs`'s pure functions.

use std::time::{Duration, Instant};

use redis::{Pipeline, RedisError, RedisResult, Value};

use crate::{
    jobid::queue_of,
    redis::clock::RedisClock,
    redis::keys::Keys,
    redis::scripts::worker::{self as worker_scripts, Claim},
    retries::Attempt,
    work::{
        api::{Job, Settings},
        claim::{self, full_tag, worker_tag, Claimed, Cycle},
        pool::Ready,
        replies::{odd_detail, queue},
    },
};

/// What the loop keeps about claiming.
pub(super) struct Claims {
    /// The queue cycle.
    pub cycle: Cycle,
    /// Position in the cycle of the next claim.
    pub cursor: usize,
    /// Average run time of recent jobs (none yet: `None`).
    pub run_time: Option<Duration>,
    /// Whether a claim may find work (false after a claim came back short).
    pub may_have_work: bool,
    /// Claims whose replication was not confirmed (`wait-replicas`): run only if the
    /// master that turns out to be the master holds their lease.
    pub unconfirmed: Vec<Claimed>,
    /// The queues the last claim skipped (their keys hold other types), as indexes
    /// into the cycle's queues with why: logged when this changes.
    pub skipped: Vec<(usize, String)>,
}

impl Claims {
    /// Nothing claimed yet along `cycle`.
    pub fn new(cycle: Cycle) -> Claims {
        Claims {
            cycle,
            cursor: 0,
            run_time: None,
            may_have_work: true,
            unconfirmed: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Takes a run that lasted `ran` into the average run time.
    pub fn ran(&mut self, ran: Duration) {
        self.run_time = Some(claim::average_run_time(self.run_time, ran));
    }
}

/// What the claims sent in one round trip.
#[derive(Default)]
pub(super) struct ClaimSent {
    /// The lease tags of its claim (none: no claim).
    pub tags: Vec<String>,
    /// Whether it reads the leases of the claims to confirm.
    pub verify: bool,
    /// How many replies it brings.
    pub replies: usize,
}

/// What the replies of a round trip's claim brought.
pub(super) struct ClaimRead {
    /// The jobs claimed, to start (none: no claim, or it failed).
    pub claimed: Option<Vec<Claimed>>,
    /// The held claims the confirmed master holds the leases of, to start too (none:
    /// not asked, or no answer: asked again next round).
    pub confirmed: Option<Vec<Claimed>>,
    /// Why the claim failed (every queue skipped, or Redis's error).
    pub error: Option<RedisError>,
}

impl Claims {
    /// Adds a claim.lua call for `n` jobs (none: no call) and the look at the leases
    /// of the claims to confirm to `pipe`. The cursor moves once it was sent
    /// ([`Claims::sent`]).
    pub fn add_to(
        &self,
        pipe: &mut Pipeline,
        keys: &Keys,
        n: usize,
        recover_after: u64,
        now: i64,
    ) -> ClaimSent {
        let tags: Vec<String> = (0..n).map(|_| worker_tag().to_string()).collect();
        let verify = !self.unconfirmed.is_empty();
        let replies = queue(pipe, |pipe| {
            if n > 0 {
                let cycle = &self.cycle;
                let claim = Claim {
                    queues: &cycle.queues,
                    order: &cycle.order,
                    cursor: self.cursor,
                    ttls: &cycle.ttls,
                    limits: &cycle.limits,
                    n,
                    tag: worker_tag(),
                    recover_after,
                    now,
                };
                worker_scripts::add_claim(pipe, keys, &claim);
            }
            if verify {
                let leases: Vec<String> =
                    self.unconfirmed.iter().map(|c| keys.lease(&c.id)).collect();
                pipe.cmd("MGET").arg(leases);
            }
        });
        ClaimSent {
            tags,
            verify,
            replies,
        }
    }

    /// A round trip with `sent` went out. A full claim moves the cursor by one
    /// position per job; a short one (queues ran dry) is corrected by its reply.
    pub fn sent(&mut self, sent: &ClaimSent) {
        self.cursor = self.cycle.advance(self.cursor, sent.tags.len());
    }

    /// The claim's reply alone, when the round trip's writes were not acknowledged
    /// (`wait-replicas`): its jobs are held until a confirmed master shows whether
    /// it has their leases.
    pub fn hold(
        &mut self,
        sent: &ClaimSent,
        mut replies: impl Iterator<Item = RedisResult<Value>>,
        at: Instant,
        clock: &mut RedisClock,
        claiming: bool,
    ) {
        if sent.tags.is_empty() {
            return;
        }
        if let Some(Ok(reply)) = replies.next() {
            let claimed = self.parse(reply, &sent.tags, at, clock, claiming);
            self.unconfirmed.extend(claimed);
        }
    }

    /// Reads the replies of the claim and of the look at the leases. `claiming`: a
    /// claim sent since is still in flight. When every queue was skipped (their keys
    /// hold other types), that is the error: the worker can do nothing (at start-up it
    /// exits, see [`crate::redis::link::Link::settle`]).
    pub fn read(
        &mut self,
        sent: &ClaimSent,
        mut replies: impl Iterator<Item = RedisResult<Value>>,
        at: Instant,
        clock: &mut RedisClock,
        claiming: bool,
    ) -> ClaimRead {
        let claim_reply = (!sent.tags.is_empty()).then(|| replies.next()).flatten();
        let leases = sent.verify.then(|| replies.next().and_then(|r| r.ok()));
        let mut read = ClaimRead {
            claimed: None,
            confirmed: None,
            error: None,
        };
        match claim_reply {
            Some(Ok(v)) => {
                let claimed = self.parse(v, &sent.tags, at, clock, claiming);
                let none_left = self.skipped.len() == self.cycle.queues.len();
                // While every queue is skipped, each round trip claims (and fails, backing
                // off): one that did not would look like the failure ending.
                self.may_have_work = claimed.len() == sent.tags.len() || none_left;
                read.claimed = Some(claimed);
                read.error = none_left
                    .then(|| self.skipped.first())
                    .flatten()
                    .map(|(_, why)| {
                        redis::make_extension_error("WRONGTYPE".into(), Some(why.clone()))
                    });
            }
            Some(Err(e)) => {
                crate::log_debug!("claim failed: {e}");
                read.error = Some(e);
            }
            None => {}
        }
        if let Some(leases) = leases {
            read.confirmed = self.confirmed(leases);
        }
        read
    }

    /// The held claims whose lease the confirmed master holds with their tag; forgets
    /// the others (that master never saw the claim: the job is still queued there).
    /// `leases` is the MGET reply, in the order of `unconfirmed`.
    fn confirmed(&mut self, leases: Option<Value>) -> Option<Vec<Claimed>> {
        // No answer: asked again next round.
        let leases = leases.and_then(|v| redis::from_redis_value::<Vec<Option<String>>>(v).ok())?;
        let held = std::mem::take(&mut self.unconfirmed);
        let mut confirmed = Vec::new();
        for (c, lease) in held.into_iter().zip(leases) {
            if lease.as_deref() == Some(c.tag.as_str()) {
                confirmed.push(c);
            } else {
                crate::log_info!(
                    "job {}: its claim did not survive the failover; it runs from the new master",
                    c.id
                );
            }
        }
        Some(confirmed)
    }

    /// Notes the queues a claim skipped (`{pair, error, ...}`): one log line per change.
    fn note_skipped(&mut self, reply: Option<Value>) {
        let items: Vec<Value> = reply
            .and_then(|v| redis::from_redis_value(v).ok())
            .unwrap_or_default();
        let mut skipped = Vec::new();
        let mut items = items.into_iter();
        while let (Some(pair), Some(why)) = (items.next(), items.next()) {
            if let (Ok(pair), Ok(why)) = (
                redis::from_redis_value::<usize>(pair),
                redis::from_redis_value::<String>(why),
            ) {
                skipped.push((pair.saturating_sub(1), odd_detail(Some(why))));
            }
        }
        if skipped == self.skipped {
            return;
        }
        let names = |list: &[(usize, String)]| {
            list.iter()
                .filter_map(|(i, _)| self.cycle.queues.get(*i).map(String::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let back: Vec<(usize, String)> = self
            .skipped
            .iter()
            .filter(|(i, _)| !skipped.iter().any(|(j, _)| j == i))
            .cloned()
            .collect();
        // Every queue skipped is the claim's failure, which the link logs (as it logs
        // the end of it): these lines are for some queues skipped among others.
        let all = self.cycle.queues.len();
        if !back.is_empty() && self.skipped.len() < all {
            crate::log_info!("worker: claiming from queue(s) {} again", names(&back));
        }
        if !skipped.is_empty() && skipped.len() < all {
            let why: Vec<&str> = skipped.iter().map(|(_, why)| why.as_str()).collect();
            crate::log_warn!(
                "worker: skipping queue(s) {}: {}; the other queues go on",
                names(&skipped),
                why.join("; ")
            );
        }
        self.skipped = skipped;
    }

    /// The jobs of claim.lua's reply (and the cycle position it moved to). `claiming`:
    /// a claim sent since is in flight.
    fn parse(
        &mut self,
        reply: Value,
        tags: &[String],
        sent: Instant,
        clock: &mut RedisClock,
        claiming: bool,
    ) -> Vec<Claimed> {
        let Ok(items) = redis::from_redis_value::<Vec<Value>>(reply) else {
            return Vec::new();
        };
        let mut items = items.into_iter();
        let cursor = items.next().map(redis::from_redis_value::<usize>);
        let first_token = items
            .next()
            .and_then(|v| redis::from_redis_value::<u64>(v).ok())
            .unwrap_or(0);
        self.note_skipped(items.next());
        let claimed_at = items
            .next()
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .and_then(|s| s.parse::<f64>().ok());
        if let Some(t) = claimed_at {
            clock.heard(t);
        }
        // A claim sent since started where this one was expected to end; its reply
        // corrects the cursor in turn.
        if let (Some(Ok(cursor)), false) = (cursor, claiming) {
            self.cursor = cursor;
        }
        let mut claimed = Vec::new();
        // The `n`th job of the reply holds the `n`th tag and token, whether or not the
        // jobs before it could be read.
        let mut n = 0;
        while let (Some(id), Some(schedule), Some(pair), Some(status), Some(due), Some(attempts)) = (
            items.next(),
            items.next(),
            items.next(),
            items.next(),
            items.next(),
            items.next(),
        ) {
            n += 1;
            let (Ok(id), Ok(schedule), Ok(pair)) = (
                redis::from_redis_value::<Vec<u8>>(id),
                redis::from_redis_value::<Option<Vec<u8>>>(schedule),
                redis::from_redis_value::<usize>(pair),
            ) else {
                continue;
            };
            let (id, schedule) = match (String::from_utf8(id), schedule.map(String::from_utf8)) {
                (Ok(id), None) => (id, None),
                (Ok(id), Some(Ok(schedule))) => (id, Some(schedule)),
                (id, _) => {
                    // Written by another program; this worker carries ids and schedules
                    // as text. The job stays leased, and recovery puts it back; `check`
                    // names it.
                    let id = id.map_or_else(|e| e.into_bytes(), String::into_bytes);
                    crate::log_warn!(
                        "job {}: its id or schedule is not UTF-8 text; not run (recovery puts it back; fix it with redis-cli)",
                        crate::terminal::bytes(&id)
                    );
                    continue;
                }
            };
            let text = |v| redis::from_redis_value::<Option<String>>(v).ok().flatten();
            let due = crate::history::due_at(text(status).as_deref(), text(due).as_deref());
            let token = first_token + n - 1;
            claimed.push(Claimed {
                id,
                schedule,
                queue_index: pair.saturating_sub(1),
                tag: full_tag(&tags[n as usize - 1], token),
                token,
                claimed: sent,
                due,
                attempts: text(attempts),
                claimed_at,
            });
        }
        claimed
    }
}

/// A job a claim handed out, made ready for a slot: which attempt of which occurrence
/// its run is (see [`crate::retries`]), and when it is fenced unless confirmed.
pub(super) fn ready(c: Claimed, prefix: &str, timeout: Duration, settings: &Settings) -> Ready {
    let attempt = Attempt::of_claim(
        c.attempts.as_deref(),
        c.due,
        c.schedule.as_deref(),
        settings.timezone,
    );
    let job = Job {
        queue: queue_of(&c.id).to_string(),
        id: c.id,
        schedule: c.schedule,
        prefix: prefix.to_string(),
        slot: 0,
        token: Some(c.token),
        fence_at: Some(c.claimed + settings.fence_after),
        due: attempt.due,
        attempt: attempt.number,
        claimed_at: c.claimed_at,
    };
    Ready {
        job,
        tag: c.tag,
        timeout,
        claimed: c.claimed,
    }
}
