//! A Redis connection for long-running loops that rides out outages without blocking
//! the loop: it reconnects with capped backoff when asked, logs one line when Redis goes
//! away and one when it is back.

use std::time::{Duration, Instant};

use redis::{Connection, RedisError};

use crate::{
    config::Config,
    error::is_connection_error,
    retry::Backoff,
    store,
    topology::{self, must_reconnect, Topology},
};

/// How long a loop waits to connect before it gets on with its other duties.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a loop waits for a reply before it treats Redis as gone.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection state of one loop.
pub struct Link {
    /// Where to connect.
    config: Config,
    /// Who is talking, for log lines (`dispatcher`, `worker`).
    who: &'static str,
    /// The connection while it is up.
    con: Option<Connection>,
    /// Delays between attempts while Redis is down.
    backoff: Backoff,
    /// No attempt before this instant.
    retry_at: Instant,
    /// When the current outage began (logged once).
    down_since: Option<Instant>,
    /// Set when a new connection was made; cleared by [`Link::take_fresh`].
    fresh: bool,
    /// The Sentinels' master switches counted when the connection was made.
    switches: u64,
    /// `host:port` of the server connected to.
    server: String,
}

impl Link {
    /// A link that connects on first use.
    pub fn new(config: &Config, who: &'static str) -> Link {
        Link {
            config: config.clone(),
            who,
            con: None,
            backoff: Backoff::new(),
            retry_at: Instant::now(),
            down_since: None,
            fresh: false,
            switches: 0,
            server: String::new(),
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
            match store::reach(&self.config, CONNECT_TIMEOUT) {
                Ok(reached) => {
                    let _ = reached.con.set_read_timeout(Some(REPLY_TIMEOUT));
                    self.con = Some(reached.con);
                    self.server = reached.server;
                    self.fresh = true;
                }
                Err(crate::error::Error::Unreachable { reason, .. }) => self.down(&reason),
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
    /// other errors (OOM, NOSCRIPT...) back off on the same connection.
    pub fn failed(&mut self, e: &RedisError) {
        if is_connection_error(e) || must_reconnect(e) {
            self.con = None;
        }
        self.down(&crate::config::mask_url(&e.to_string()));
    }

    /// Reports a connection that can no longer be used, whatever the error: replies
    /// it owes are lost, so it is dropped and connected anew with backoff.
    pub fn lost(&mut self, e: &RedisError) {
        self.con = None;
        self.down(&crate::config::mask_url(&e.to_string()));
    }

    /// Whether the Sentinels vouch for the server connected to as the master, with no
    /// failover going on (see [`crate::topology::Topology::sentinels_confirm`]).
    pub fn sentinels_confirm(&self) -> bool {
        self.con.is_some()
            && Topology::of(&self.config).is_ok_and(|t| t.sentinels_confirm(&self.server))
    }

    /// Reports writes that replicas did not acknowledge (`wait-replicas`): perhaps a
    /// failover, so connect anew (asking the Sentinels again) after a backoff.
    pub fn unconfirmed(&mut self) {
        self.con = None;
        self.down("writes not acknowledged by replicas (wait-replicas)");
    }

    fn down(&mut self, why: &str) {
        if self.down_since.is_none() {
            crate::log_warn!(
                "{}: redis at {} failed: {why}; retrying with backoff (at most every {}s)",
                self.who,
                self.config.redis.display_url(),
                Backoff::MAX.as_secs()
            );
            self.down_since = Some(Instant::now());
        }
        self.retry_at = Instant::now() + self.backoff.step();
    }

    /// Reports a successful command, ending an outage.
    pub fn ok(&mut self) {
        if let Some(t) = self.down_since.take() {
            crate::log_info!(
                "{}: redis at {} is back after {:.1}s; carrying on",
                self.who,
                self.config.redis.display_url(),
                t.elapsed().as_secs_f64()
            );
            self.backoff = Backoff::new();
        }
    }

    /// Whether an outage is going on (a command failed and none has worked since).
    pub fn is_down(&self) -> bool {
        self.down_since.is_some()
    }

    /// How long until the next attempt is due, while Redis is down or backing off.
    pub fn wait(&self) -> Option<Duration> {
        self.down_since
            .map(|_| self.retry_at.saturating_duration_since(Instant::now()))
    }
}
