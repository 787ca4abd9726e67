//! A Redis connection for long-running loops that rides out outages without blocking
//! the loop: it reconnects with capped backoff when asked, and logs one line when a
//! failure begins, changes or ends (with a reminder while it lasts, see
//! [`crate::redis::retry::Trouble`]). An error that retrying cannot fix, met before the loop
//! has ever done its work (see [`Link::settle`]), ends the loop instead.

use std::time::{Duration, Instant};

use redis::{Connection, RedisError};

use crate::{
    error::{cannot_fix, describe_redis, is_connection_error, Error},
    redis::retry::Trouble,
    redis::settings::mask_urls_in,
    redis::store,
    redis::topology::{self, must_reconnect, Access},
};

/// How long a loop waits to connect before it gets on with its other duties.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a loop waits for a reply before it treats Redis as gone.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection state of one loop.
pub struct Link {
    /// Where to connect.
    access: Access,
    /// Who is talking, for log lines (`dispatcher`, `worker`).
    who: &'static str,
    /// The connection while it is up.
    con: Option<Connection>,
    /// No attempt before this instant.
    retry_at: Instant,
    /// The failure going on, logged once per change of state.
    trouble: Trouble,
    /// Whether the failure going on is an outage (the connection, not a command).
    outage: bool,
    /// Set when a new connection was made; cleared by [`Link::take_fresh`].
    fresh: bool,
    /// The Sentinels' master switches counted when the connection was made.
    switches: u64,
    /// `host:port` of the server connected to.
    server: String,
    /// Whether the loop has done its work once (see [`Link::settle`]).
    settled: bool,
    /// An error retrying cannot fix, met before the loop settled: the loop ends.
    gave_up: Option<Error>,
    /// The kind of the error retrying cannot fix that is going on after the loop
    /// settled (`NOPERM`, `WRONGTYPE`, ...): the process says so in its registration.
    unfixable: Option<String>,
}

impl Link {
    /// A link that connects on first use.
    pub fn new(access: &Access, who: &'static str) -> Link {
        Link {
            access: access.clone(),
            who,
            con: None,
            retry_at: Instant::now(),
            trouble: Trouble::new(who),
            outage: false,
            fresh: false,
            switches: 0,
            server: String::new(),
            settled: false,
            gave_up: None,
            unfixable: None,
        }
    }

    /// The connection, (re)connecting when an attempt is due; `None` while Redis is down.
    pub fn get(&mut self) -> Option<&mut Connection> {
        if Instant::now() < self.retry_at {
            return None; // backing off
        }
        if self.con.is_some() && topology::master_switches() != self.switches {
            crate::log_info!(
                "{}: the master switched; connecting to the new one",
                self.who
            );
            self.con = None;
        }
        if self.con.is_none() {
            self.switches = topology::master_switches();
            match store::reach(&self.access, CONNECT_TIMEOUT) {
                Ok(reached) => {
                    let _ = reached.con.set_read_timeout(Some(REPLY_TIMEOUT));
                    self.con = Some(reached.con);
                    self.server = reached.server;
                    self.fresh = true;
                }
                Err(Error::Unreachable { reason, .. }) => {
                    let url = self.access.display_url();
                    self.down(&format!("redis at {url} failed: {reason}"));
                }
                Err(e @ Error::Refused { .. }) => {
                    self.outage = false;
                    let message = e.to_string();
                    self.cannot_fix("refused", &message, e);
                }
                Err(e) => self.down(&e.to_string()),
            }
        }
        self.con.as_mut()
    }

    /// The connection as it is, without connecting: round trips in flight on it must
    /// be read from this same connection.
    pub fn current(&mut self) -> Option<&mut Connection> {
        self.con.as_mut()
    }

    /// Whether the connection is new since the last call (scripts may need loading).
    pub fn take_fresh(&mut self) -> bool {
        std::mem::take(&mut self.fresh)
    }

    /// Reports a failed command: a lost connection, or a server that is no longer the
    /// one to talk to (READONLY after a failover, MOVED after a resharding), is dropped
    /// and connected anew with backoff, which asks the Sentinels or the cluster again;
    /// other errors (OOM, WRONGTYPE, NOPERM ...) back off on the same connection.
    pub fn failed(&mut self, e: &RedisError) {
        if is_connection_error(e) || must_reconnect(e) {
            self.con = None;
            let url = self.access.display_url();
            let text = mask_urls_in(&describe_redis(e));
            self.down(&format!("redis at {url} failed: {text}"));
            return;
        }
        // Redis answered: not an outage, but the command cannot do its work.
        self.outage = false;
        let text = mask_urls_in(&describe_redis(e));
        let message = format!("redis refused a command: {text}");
        if cannot_fix(e).is_some() {
            self.cannot_fix(&kind_of(e), &message, Error::Redis(e.clone()));
        } else {
            let d = self.trouble.failed(&kind_of(e), &message, false);
            self.delay(d);
        }
    }

    /// Reports a connection that can no longer be used, whatever the error: replies
    /// it owes are lost, so it is dropped and connected anew with backoff.
    pub fn lost(&mut self, e: &RedisError) {
        self.con = None;
        let url = self.access.display_url();
        let text = mask_urls_in(&describe_redis(e));
        self.down(&format!("redis at {url} failed: {text}"));
    }

    /// Whether the Sentinels vouch for the server connected to as the master, with no
    /// failover going on (see [`crate::redis::topology::Topology::sentinels_confirm`]).
    pub fn sentinels_confirm(&self) -> bool {
        self.con.is_some() && self.access.topology.sentinels_confirm(&self.server)
    }

    /// Reports writes that replicas did not acknowledge (`wait-replicas`): perhaps a
    /// failover, so connect anew (asking the Sentinels again) after a backoff.
    pub fn unconfirmed(&mut self) {
        self.con = None;
        let url = self.access.display_url();
        self.down(&format!(
            "redis at {url}: writes not acknowledged by replicas (wait-replicas)"
        ));
    }

    /// An outage: the connection failed. However it fails next, it is one outage: one
    /// state, logged once (and reminded).
    fn down(&mut self, message: &str) {
        self.outage = true;
        let delay = self.trouble.failed("outage", message, false);
        self.delay(delay);
    }

    fn delay(&mut self, d: Duration) {
        self.retry_at = Instant::now() + d;
    }

    /// An error retrying cannot fix ends the loop (the caller reports it), unless the
    /// loop ever did its work: then the cause may be new (a key or an ACL changed
    /// under it) and fixed again while the loop backs off, without dropping the jobs
    /// it runs.
    fn cannot_fix(&mut self, kind: &str, message: &str, e: Error) {
        if self.settled {
            let d = self.trouble.failed(kind, message, true);
            self.delay(d);
            self.unfixable = Some(kind.to_string());
        } else {
            self.gave_up = Some(e);
        }
    }

    /// The kind of the error retrying cannot fix that keeps the loop from its work, while
    /// it lasts.
    pub fn unfixable(&self) -> Option<&str> {
        self.unfixable.as_deref()
    }

    /// Reports that the loop did its work once (a dispatcher's pass, a worker's claim):
    /// from now on errors that retrying cannot fix are retried, not fatal.
    pub fn settle(&mut self) {
        self.settled = true;
    }

    /// The error that ends the loop: one that retrying cannot fix, met before the loop
    /// ever did its work (at start-up).
    pub fn gave_up(&mut self) -> Option<Error> {
        self.gave_up.take()
    }

    /// Reports a successful command, ending a failure.
    pub fn ok(&mut self) {
        self.unfixable = None;
        if let Some(t) = self.trouble.ok() {
            if self.outage {
                crate::log_info!(
                    "{}: redis at {} is back after {:.1}s; carrying on",
                    self.who,
                    self.access.display_url(),
                    t.as_secs_f64()
                );
            } else {
                crate::log_info!(
                    "{}: redis commands work again after {:.1}s; carrying on",
                    self.who,
                    t.as_secs_f64()
                );
            }
            self.outage = false;
        }
    }

    /// Whether an outage is going on (the connection failed and no command has worked
    /// since). A command that Redis refused is not an outage.
    pub fn is_down(&self) -> bool {
        self.trouble.failing() && self.outage
    }

    /// How long until the next attempt is due, while a failure goes on.
    pub fn wait(&self) -> Option<Duration> {
        self.trouble
            .failing()
            .then(|| self.retry_at.saturating_duration_since(Instant::now()))
    }
}

/// The kind of a Redis error, for telling one failure from the next: the connection,
/// or the error code Redis answered with.
pub fn kind_of(e: &RedisError) -> String {
    if is_connection_error(e) {
        "connection".into()
    } else {
        e.code().unwrap_or(e.category()).to_string()
    }
}
