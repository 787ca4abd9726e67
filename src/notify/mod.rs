//! `redbike notify`: follows the event stream of every shard (docs/events.md) and
//! reports changes of state, not every run: a job's first failure after success, its
//! recovery, a job becoming stale or fresh again; and, from a periodic check of the
//! fleet by whichever notifier's turn it is, jobs overdue with no dispatcher alive and
//! a Redis hazard appearing or going away.
//!
//! The parts: following the stream with a consumer group (`stream.rs`), what an entry
//! says (`entry.rs`), the state of each job and of the fleet shared by every notifier
//! of the prefix (`state.rs`, with `notify_state.lua`, which also applies the per-job
//! rate limit), a notification and its bounds (`message.rs`), and where it goes
//! (`targets.rs`). This file is the loop. The notifier only reads the stream and writes
//! its own keys (`P-notify-state`, `P-notify-check`, the group): it never slows a
//! worker.

pub mod entry;
pub mod message;
pub mod state;
pub mod stream;
pub mod targets;

use std::time::{Duration, Instant};

use redis::Connection;

use crate::{
    config::Config,
    error::{Error, Result},
    redis::{hazards::Probe, keys::Keys, link::Link, store::Store},
    shard,
    shutdown::Shutdown,
};

use entry::Skips;
use state::Transition;
use stream::{Item, Stream};
use targets::{Bounds, Delivery, Targets};

/// Consumers of the group idle this long and holding nothing are dropped (dead
/// notifiers' names would pile up otherwise).
const CONSUMER_IDLE_MS: u64 = 3_600_000;
/// How long a read waits for a new entry before the loop looks at its other duties.
const BLOCK_MS: u64 = 1000;

/// What `redbike notify` does (from its flags and `[redbike.notify]`).
#[derive(Debug, Clone)]
pub struct Options {
    /// The command and its arguments (`--exec`); empty for none.
    pub exec: Vec<String>,
    /// The webhook URL (`--webhook`).
    pub webhook: Option<String>,
    /// The delivery bounds.
    pub bounds: Bounds,
    /// At most one notification per job per this many seconds (0: no limit).
    pub rate_limit: u64,
    /// Entries another notifier held unacknowledged this long are taken over.
    pub claim_after: Duration,
    /// How often the fleet is checked (dispatchers, hazards).
    pub check_every: Duration,
}

/// Runs the notifier until a stop signal: a loop per shard.
pub fn run(config: &Config, options: &Options) -> Result<()> {
    if options.exec.is_empty() && options.webhook.is_none() {
        return Err(Error::Input(
            "notify needs somewhere to send notifications: --exec COMMAND or --webhook URL".into(),
        ));
    }
    // Checked before anything runs: a bad URL is an input error.
    Targets::new(
        &options.exec,
        options.webhook.as_deref(),
        options.bounds.clone(),
    )
    .map_err(Error::Input)?;
    let shards = shard::checked_all(config)?;
    if config.events == 0 {
        crate::log_warn!(
            "notify: [redbike] events = 0 in this configuration: if the fleet's says so too, no events are written and there is nothing to report"
        );
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(true)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    shard::run_each(&shards, &shutdown, |config| {
        follow(config, options, &shutdown)
    })?;
    crate::log_info!("notify stopping");
    Ok(())
}

/// The loop of one shard.
struct Follower<'a> {
    config: &'a Config,
    options: &'a Options,
    keys: Keys,
    stream: Stream,
    targets: Targets,
    skips: Skips,
    probe: Probe,
    /// Entries lost to trimming, as last said.
    lost: u64,
    next_claim: Instant,
    next_check: Instant,
    /// When to look for changes held back by the rate limit whose window ended.
    next_release: Instant,
    /// Whether the group is known to exist on this connection.
    joined: bool,
    /// Whether this consumer's own held entries must be read again (after a
    /// reconnection or an error mid-batch).
    reread: bool,
}

/// Follows one shard's stream until a stop is requested.
fn follow(config: &Config, options: &Options, shutdown: &Shutdown) -> Result<()> {
    let keys = Keys::new(&config.prefix);
    let targets = Targets::new(
        &options.exec,
        options.webhook.as_deref(),
        options.bounds.clone(),
    )
    .map_err(Error::Input)?;
    let mut f = Follower {
        config,
        options,
        stream: Stream::new(&keys.events),
        keys,
        targets,
        skips: Skips::default(),
        probe: Probe::of(&config.redis),
        lost: 0,
        next_claim: Instant::now(),
        next_check: Instant::now(),
        next_release: Instant::now(),
        joined: false,
        reread: true,
    };
    let mut link = Link::new(&config.redis, "notify");
    while !shutdown.requested() {
        if link.get().is_none() {
            if let Some(e) = link.gave_up() {
                return Err(e);
            }
            let wait = link.wait().unwrap_or(Duration::from_millis(100));
            shutdown.sleep(wait.min(Duration::from_millis(500)));
            continue;
        }
        if link.take_fresh() {
            f.joined = false;
            f.reread = true;
        }
        let Some(con) = link.current() else {
            continue;
        };
        match f.step(con, shutdown) {
            Ok(()) => {
                link.ok();
                link.settle();
            }
            Err(e) => {
                f.joined = false;
                f.reread = true;
                link.failed(&e);
            }
        }
    }
    if let Some(con) = link.current() {
        let _ = f.stream.leave(con);
    }
    Ok(())
}

impl Follower<'_> {
    /// One turn: join the group, take back what is held, claim the dead's, check the
    /// fleet when due, read new entries.
    fn step(&mut self, con: &mut Connection, shutdown: &Shutdown) -> redis::RedisResult<()> {
        if !self.joined {
            if self.stream.ensure_group(con)? {
                crate::log_info!(
                    "notify: created consumer group {} on {} at its end",
                    stream::GROUP,
                    self.stream.key
                );
            }
            crate::log_info!(
                "notify: following {} as {} (group {})",
                self.stream.key,
                self.stream.consumer,
                stream::GROUP
            );
            self.joined = true;
        }
        if self.reread {
            loop {
                let held = self.stream.read(con, 0, true)?;
                if held.is_empty() {
                    break;
                }
                if !self.handle(con, held, shutdown)? {
                    return Ok(());
                }
            }
            self.reread = false;
        }
        if Instant::now() >= self.next_claim {
            let idle = self.options.claim_after.as_millis() as u64;
            let (claimed, deleted) = self.stream.claim(con, idle)?;
            if deleted > 0 {
                crate::log_warn!(
                    "notify: {}: {deleted} entries another notifier held were trimmed away before they were delivered: lost",
                    self.stream.key
                );
            }
            let more = claimed.len() == stream::COUNT;
            if !claimed.is_empty() {
                crate::log_info!(
                    "notify: {}: took over {} entries another notifier held for over {}s",
                    self.stream.key,
                    claimed.len(),
                    self.options.claim_after.as_secs()
                );
                if !self.handle(con, claimed, shutdown)? {
                    return Ok(());
                }
            }
            if !more {
                self.next_claim =
                    Instant::now() + (self.options.claim_after / 2).max(Duration::from_millis(500));
            }
        }
        if self.options.rate_limit > 0 && Instant::now() >= self.next_release {
            self.next_release = Instant::now() + Duration::from_secs(1);
            self.release(con, shutdown)?;
        }
        if Instant::now() >= self.next_check {
            self.next_check = Instant::now() + self.options.check_every;
            self.check_fleet(con, shutdown)?;
        }
        let fresh = self.stream.read(con, BLOCK_MS, false);
        let fresh = match fresh {
            Err(e) if e.code() == Some("NOGROUP") => {
                // The stream (and its group) was deleted: join again.
                self.joined = false;
                return Ok(());
            }
            other => other?,
        };
        if !fresh.is_empty() {
            self.handle(con, fresh, shutdown)?;
        }
        Ok(())
    }

    /// Deals with `items` in order; false when a stop was requested mid-way (the rest
    /// stay held, for a redelivery).
    fn handle(
        &mut self,
        con: &mut Connection,
        items: Vec<Item>,
        shutdown: &Shutdown,
    ) -> redis::RedisResult<bool> {
        let mut held: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
        for item in items {
            if shutdown.requested() {
                return Ok(false);
            }
            match self.one(con, &item, &held, shutdown)? {
                Delivery::Stopped => return Ok(false),
                Delivery::Delivered | Delivery::GaveUp => {}
            }
            self.stream.ack(con, &item.id)?;
            held.retain(|id| *id != item.id);
        }
        Ok(true)
    }

    /// One entry: what it says, whether it is a change, the delivery.
    fn one(
        &mut self,
        con: &mut Connection,
        item: &Item,
        held: &[String],
        shutdown: &Shutdown,
    ) -> redis::RedisResult<Delivery> {
        let key = self.stream.key.clone();
        let Some(fields) = &item.fields else {
            self.skips.skipped(&key, &item.id, entry::Skip::Trimmed);
            return Ok(Delivery::GaveUp);
        };
        let event = match entry::parse(fields) {
            Ok(e) => {
                self.skips.ended(&key);
                e
            }
            Err(why) => {
                self.skips.skipped(&key, &item.id, why);
                return Ok(Delivery::GaveUp);
            }
        };
        let Some((record, mut n)) = state::of_event(
            &self.config.prefix,
            &item.id,
            &event,
            self.options.rate_limit,
        ) else {
            return Ok(Delivery::Delivered);
        };
        let (t, _) = state::apply(con, &self.keys, &record)?;
        match t {
            Transition::Changed { suppressed, .. } => {
                n.suppressed = suppressed;
                n.redelivered = item.redelivered;
            }
            Transition::Again { suppressed } => {
                n.suppressed = suppressed;
                n.redelivered = true;
            }
            Transition::Old | Transition::Same | Transition::Quiet | Transition::Suppressed => {
                return Ok(Delivery::Delivered)
            }
        }
        Ok(self.send(con, &n, held, shutdown))
    }

    /// Delivers `n`, keeping the entries `held` from other notifiers meanwhile.
    fn send(
        &mut self,
        con: &mut Connection,
        n: &message::Notification,
        held: &[String],
        shutdown: &Shutdown,
    ) -> Delivery {
        let stream = &self.stream;
        let mut last = Instant::now();
        let every = (self.options.claim_after / 3).max(Duration::from_millis(300));
        let mut keepalive = || {
            if last.elapsed() >= every {
                let _ = stream.touch(con, held);
                last = Instant::now();
            }
        };
        let result = self.targets.deliver(n, shutdown, &mut keepalive);
        if result == Delivery::Delivered {
            crate::log_info!(
                "notify: sent {} {}{}",
                n.kind.name(),
                n.summary,
                if n.redelivered { " (redelivered)" } else { "" }
            );
        }
        result
    }

    /// Reports the changes the rate limit held back whose window ended and whose state
    /// lasted, built from their stream entries.
    fn release(&mut self, con: &mut Connection, shutdown: &Shutdown) -> redis::RedisResult<()> {
        for r in state::release(con, &self.keys)? {
            let fields = self.stream.entry(con, &r.id)?;
            let built = fields
                .and_then(|f| entry::parse(&f).ok())
                .and_then(|e| state::of_event(&self.config.prefix, &r.id, &e, 0).map(|(_, n)| n));
            let mut n =
                built.unwrap_or_else(|| state::released_without_entry(&self.config.prefix, &r));
            n.suppressed = r.suppressed;
            if self.send(con, &n, &[], shutdown) == Delivery::Stopped {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The fleet's check, by whichever notifier takes `P-notify-check` first: jobs
    /// overdue with no dispatcher alive, the Redis hazards; and entries lost to trimming.
    fn check_fleet(&mut self, con: &mut Connection, shutdown: &Shutdown) -> redis::RedisResult<()> {
        if let Ok(Some(lost)) = self.stream.lost(con) {
            if lost > self.lost {
                crate::log_warn!(
                    "notify: {} was trimmed past this group's position: {} entries were never read (raise [redbike] events, or keep a notifier running)",
                    self.stream.key,
                    lost - self.lost
                );
            }
            self.lost = lost;
        }
        let ms = self.options.check_every.as_millis().max(1) as u64;
        let mine: Option<String> = redis::cmd("SET")
            .arg(&self.keys.notify_check)
            .arg(&self.stream.consumer)
            .arg("NX")
            .arg("PX")
            .arg(ms.saturating_sub(100).max(1))
            .query(con)?;
        if mine.is_none() {
            return Ok(());
        }
        let dropped = self.stream.drop_idle(con, CONSUMER_IDLE_MS)?;
        if dropped > 0 {
            crate::log_debug!(
                "notify: {}: dropped {dropped} consumer(s) idle for over an hour, holding nothing",
                self.stream.key
            );
        }
        let opts = crate::operator::stats::Options {
            overdue_after: self.config.overdue_after,
            ..Default::default()
        };
        let now = crate::schedule::timestamp::now();
        let mut store = Store {
            con,
            keys: &self.keys,
        };
        let figures = match crate::operator::stats::collect(&mut store, &opts, &self.probe, now) {
            Ok(f) => f,
            Err(Error::Redis(e)) => return Err(e),
            Err(e) => {
                crate::log_debug!("notify: fleet check failed: {e}");
                return Ok(());
            }
        };
        let states = state::fleet_states(
            &self.config.prefix,
            figures.alive.as_ref().map(|a| a.dispatchers),
            figures.overdue.jobs,
            figures.redis.as_ref(),
            now,
        );
        for s in states {
            let record = state::Record {
                field: s.field,
                id: "*",
                state: s.state,
                quiet: "good",
                rate: None,
            };
            let (t, id) = state::apply(con, &self.keys, &record)?;
            if let Transition::Changed { .. } = t {
                let mut n = s.notification;
                n.id = id;
                if self.send(con, &n, &[], shutdown) == Delivery::Stopped {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
