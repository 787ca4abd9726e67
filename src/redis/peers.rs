//! Python peers: whether processes of the Python original share the prefix, and so how
//! often an idle dispatcher or worker looks for work on its own.
//!
//! Our processes announce what they place (pub/sub wake-ups, see `keys.rs`); the
//! original announces nothing. An idle dispatcher or worker of a fleet without Python
//! processes therefore waits for wake-ups and looks on its own only every
//! [`QUIET_POLL`] (a safety net for wake-ups lost with a dropped subscription; each
//! (re)subscription also looks at once). Work placed without a wake-up is the
//! evidence of a Python peer: a dispatcher's pass finds a due job it was never told of,
//! or an idle worker's poll finds jobs in a queue that no wake-up announced. Whoever
//! sees it sets `P-python-seen` for [`SEEN_FOR`] (renewed by every new piece of
//! evidence) and says so on `P-wake-control`; while that key exists, every process of
//! the prefix looks every second, as the original's 1 s bound needs. The key is read
//! with the round trips the processes make anyway (the dispatcher's pass, the worker's
//! poll, in the `MGET` of the control key). Python processes do not register in
//! `P-procs`, but that is no evidence: every client that is no redbike process (an
//! operator's shell, a backup script) looks the same there.
//!
//! `python-peers` (config) overrides the evidence: `yes` looks every second always (no
//! Python job waits for the evidence), `no` never does (a Python job may then wait up to
//! [`QUIET_POLL`]).

use std::time::Duration;

use redis::{Pipeline, RedisResult, Value};
use serde::Deserialize;

use crate::schedule::timestamp;

/// How often an idle process looks for work on its own while no Python peer is seen.
pub const QUIET_POLL: Duration = Duration::from_secs(10);
/// Seconds `P-python-seen` lasts after the last evidence.
pub const SEEN_FOR: u64 = 3600;
/// The message on `P-wake-control` that tells the fleet a Python peer was seen.
pub const SEEN_SIGNAL: &str = "PYTHON";

/// The `python-peers` setting: `"auto"`, `"yes"` (or `true`), `"no"` (or `false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "Written")]
pub enum PythonPeers {
    /// Look every second while `P-python-seen` exists (the evidence).
    #[default]
    Auto,
    /// Always look every second.
    Yes,
    /// Never look every second for Python's sake.
    No,
}

/// `python-peers` as a config file may write it.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Flag(bool),
    Word(String),
}

impl TryFrom<Written> for PythonPeers {
    type Error = String;

    fn try_from(w: Written) -> Result<PythonPeers, String> {
        match w {
            Written::Flag(true) => Ok(PythonPeers::Yes),
            Written::Flag(false) => Ok(PythonPeers::No),
            Written::Word(w) => match w.as_str() {
                "auto" => Ok(PythonPeers::Auto),
                "yes" => Ok(PythonPeers::Yes),
                "no" => Ok(PythonPeers::No),
                _ => Err(format!(
                    "{w:?} is none of \"auto\" (the default), \"yes\" and \"no\""
                )),
            },
        }
    }
}

/// What one process knows about Python peers and its wake-ups.
#[derive(Debug)]
pub struct Peers {
    /// The setting.
    setting: PythonPeers,
    /// `P-python-seen`.
    key: String,
    /// `P-wake-control`.
    channel: String,
    /// `dispatcher` or `worker`, for the log.
    who: &'static str,
    /// Whether `P-python-seen` existed when last read (or this process just set it).
    seen: bool,
    /// Whether the listener is subscribed (wake-ups arrive).
    listening: bool,
    /// Evidence seen whose write was not yet answered: its description. Meanwhile a
    /// read that finds no key was sent before the write.
    evidence: Option<String>,
}

impl Peers {
    /// The state of a process (`who`) of `prefix` that is not yet listening.
    pub fn new(setting: PythonPeers, prefix: &str, who: &'static str) -> Peers {
        let keys = crate::redis::keys::Keys::new(prefix);
        Peers {
            setting,
            key: keys.python_seen,
            channel: keys.control_wake,
            who,
            seen: false,
            listening: false,
            evidence: None,
        }
    }

    /// `P-python-seen`, which the process reads with its control key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the process looks for work every second: Python peers are seen (or
    /// said to be), or wake-ups are not arriving.
    pub fn fast(&self) -> bool {
        !self.listening || self.python()
    }

    /// Whether Python peers share the prefix: seen (`auto`) or said to (`yes`).
    pub fn python(&self) -> bool {
        match self.setting {
            PythonPeers::Auto => self.seen,
            PythonPeers::Yes => true,
            PythonPeers::No => false,
        }
    }

    /// How long an idle process may wait before it looks on its own.
    pub fn every(&self, fast: Duration) -> Duration {
        if self.fast() {
            fast
        } else {
            QUIET_POLL
        }
    }

    /// Whether wake-ups arrive: the listener (re)subscribed, or lost its subscription.
    pub fn listening(&mut self, on: bool) {
        self.listening = on;
    }

    /// Whether evidence counts: the process listens (a job found while it did not may
    /// have been announced in vain) and the setting asks for it.
    pub fn judging(&self) -> bool {
        self.listening && self.setting != PythonPeers::No
    }

    /// What a read of `P-python-seen` found (its value, if it exists); logs a change.
    pub fn read(&mut self, value: Option<String>) {
        let seen = value.is_some();
        if seen == self.seen || (self.evidence.is_some() && !seen) {
            return;
        }
        self.seen = seen;
        if self.setting != PythonPeers::Auto {
            return;
        }
        match value {
            Some(v) => crate::log_info!(
                "{}: Python peers seen ({}: {v}); looking for work every second until it expires",
                self.who,
                self.key
            ),
            None => crate::log_info!(
                "{}: {} is gone (no Python peer seen for {}s, or it was deleted); waiting for wake-ups, looking on its own every {}s",
                self.who,
                self.key,
                SEEN_FOR,
                QUIET_POLL.as_secs()
            ),
        }
    }

    /// Notes evidence of a Python peer (`what` describes it): from now on this process
    /// looks every second, and the next round trip writes it ([`Peers::add_to`]).
    pub fn found(&mut self, what: String) {
        if !self.judging() {
            return;
        }
        crate::log_debug!("{}: evidence of a Python peer: {what}", self.who);
        self.read(Some(what.clone()));
        self.evidence = Some(what);
    }

    /// Whether evidence waits to be written.
    pub fn to_write(&self) -> bool {
        self.evidence.is_some()
    }

    /// Adds the evidence waiting to be written to `pipe` (`SET P-python-seen ... EX`,
    /// and the signal on `P-wake-control`); returns how many replies it brings. It is
    /// added again until [`Peers::read_replies`] reads them (a round trip may be lost).
    pub fn add_to(&self, pipe: &mut Pipeline, id: &str) -> usize {
        let Some(what) = &self.evidence else {
            return 0;
        };
        let value = format!("{} {} {id}: {what}", timestamp::now(), self.who);
        pipe.cmd("SET")
            .arg(&self.key)
            .arg(value)
            .arg("EX")
            .arg(SEEN_FOR);
        pipe.cmd("PUBLISH").arg(&self.channel).arg(SEEN_SIGNAL);
        2
    }

    /// Reads the replies of [`Peers::add_to`]; a refusal is only logged (the process
    /// itself looks every second anyway).
    pub fn read_replies(
        &mut self,
        replies: &mut impl Iterator<Item = RedisResult<Value>>,
        n: usize,
    ) {
        if n > 0 {
            self.evidence = None;
        }
        for reply in replies.take(n) {
            if let Err(e) = reply {
                crate::log_debug!("{}: cannot write {}: {e}", self.who, self.key);
            }
        }
    }
}

/// What `P-python-seen` says of the Python process last seen on `store`'s prefix
/// (`None`: none seen lately).
pub fn python_seen(store: &mut crate::redis::store::Store<'_>) -> RedisResult<Option<String>> {
    redis::cmd("GET")
        .arg(&store.keys.python_seen)
        .query(store.con)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_every_second_while_seen_or_deaf() {
        let mut p = Peers::new(PythonPeers::Auto, "p", "worker");
        assert!(p.fast(), "not listening yet");
        p.listening(true);
        assert!(!p.fast());
        assert_eq!(p.every(Duration::from_secs(1)), QUIET_POLL);
        p.found("job j:A queued without a wake-up".into());
        assert!(p.fast() && p.to_write());
        let mut pipe = redis::pipe();
        assert_eq!(p.add_to(&mut pipe, "h-1-0"), 2);
        p.read(None);
        assert!(p.fast(), "a read sent before the write");
        p.read_replies(&mut vec![Ok(Value::Okay), Ok(Value::Int(1))].into_iter(), 2);
        assert!(!p.to_write());
        p.read(None);
        assert!(!p.fast());
        p.listening(false);
        assert!(p.fast());
        assert!(!p.judging());
    }

    #[test]
    fn the_setting_beats_the_evidence() {
        let mut yes = Peers::new(PythonPeers::Yes, "p", "worker");
        yes.listening(true);
        assert!(yes.fast());
        let mut no = Peers::new(PythonPeers::No, "p", "worker");
        no.listening(true);
        no.read(Some("seen".into()));
        no.found("job j:A queued without a wake-up".into());
        assert!(!no.fast() && !no.to_write());
    }
}
