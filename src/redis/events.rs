//! The writers' side of the event stream `P-events` (docs/events.md) for operators'
//! actions: who did it ([`Actor`], [`Who`]) and the audit entry itself ([`Audit`]),
//! passed to the action's script (its last arguments, read by `audit` in
//! common.lua) or, for an action without a script, written after it ([`Audit::write`]).
//! Run events are written by finish.lua, recover.lua and skip.lua themselves.

use std::sync::LazyLock;

use redis::{Connection, RedisResult, ScriptInvocation};

use crate::redis::keys::Keys;

/// The process that acts: its user, host and pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The login name: `$USER`, else `$LOGNAME`, else the name of the process's uid,
    /// else its number.
    pub user: String,
    /// The host name (as the registry and the run history name it).
    pub host: String,
    /// The process id.
    pub pid: u32,
}

/// This process, read once.
pub fn actor() -> &'static Actor {
    static ACTOR: LazyLock<Actor> = LazyLock::new(|| Actor {
        user: login_name(),
        host: crate::host::name().to_string(),
        pid: std::process::id(),
    });
    &ACTOR
}

/// `$USER`, else `$LOGNAME`, else the name of the uid (the password database), else
/// the uid's number.
fn login_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Some(name) = std::env::var_os(var) {
            let name = name.to_string_lossy().trim().to_string();
            if !name.is_empty() {
                return name;
            }
        }
    }
    // SAFETY: getuid(2) cannot fail.
    let uid = unsafe { libc::getuid() };
    uid_name(uid).unwrap_or_else(|| uid.to_string())
}

/// The name of `uid` in the password database, if it has one.
fn uid_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: zeroed is a valid passwd (null pointers, zero numbers); getpwuid_r only
    // writes into it and into `buf`, within the length given.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for what getpwuid_r writes (see above).
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    let name = name.to_string_lossy().to_string();
    (!name.is_empty()).then_some(name)
}

/// Through what an action came: the command line, `redbike serve`'s control routes or
/// `redbike top`'s keys (the `via` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A `redbike` command.
    Cli,
    /// `redbike serve`'s control API (the user is the server's).
    Serve,
    /// `redbike top`'s keys.
    Top,
}

impl Via {
    /// The word in the stream.
    pub fn word(self) -> &'static str {
        match self {
            Via::Cli => "cli",
            Via::Serve => "serve",
            Via::Top => "top",
        }
    }
}

/// Who acts, and how many entries the stream keeps (`events`; 0: none written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Who {
    /// Entries kept in the stream (0: the action is written nowhere).
    pub events: u64,
    /// Through what.
    pub via: Via,
}

impl Who {
    /// An action through `via` on a prefix whose stream keeps `events` entries
    /// (`Config::events`).
    pub fn new(events: u64, via: Via) -> Who {
        Who { events, via }
    }

    /// Writes nothing (internal callers, tests).
    pub const NOBODY: Who = Who {
        events: 0,
        via: Via::Cli,
    };

    /// The audit entry of `action` on `target` (a job id, `queue:NAME` or empty).
    pub fn audit<'a>(&self, action: &'a str, target: &'a str, detail: &'a str) -> Audit<'a> {
        Audit {
            who: *self,
            action,
            target,
            detail,
        }
    }
}

/// One operator's action: `type` = `action` in the stream.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    /// Who, and the stream's length.
    pub who: Who,
    /// `set`, `unset`, `load`, `run`, `pause`, `resume`, `kill`, `control`, `repair`,
    /// `backfill`.
    pub action: &'a str,
    /// A job id, `queue:NAME`, or empty.
    pub target: &'a str,
    /// The schedule set, the number of jobs loaded, the control word...
    pub detail: &'a str,
}

impl Audit<'_> {
    /// Adds the stream as the script's last key and the entry as its last arguments
    /// (what `audit` in common.lua reads): call it after every other key and argument.
    pub(crate) fn add_to(&self, inv: &mut ScriptInvocation, keys: &Keys) {
        let a = actor();
        inv.key(&keys.events)
            .arg(self.who.events)
            .arg(self.action)
            .arg(self.target)
            .arg(self.detail)
            .arg(&a.user)
            .arg(&a.host)
            .arg(a.pid)
            .arg(self.who.via.word());
    }

    /// Writes the entry on its own (an action without a script): one XADD, unless the
    /// stream is off.
    pub fn write(&self, con: &mut Connection, keys: &Keys) -> RedisResult<()> {
        if self.who.events == 0 {
            return Ok(());
        }
        let a = actor();
        let written = redis::cmd("XADD")
            .arg(&keys.events)
            .arg("MAXLEN")
            .arg("~")
            .arg(self.who.events)
            .arg("*")
            .arg("v")
            .arg("1")
            .arg("type")
            .arg("action")
            .arg("action")
            .arg(self.action)
            .arg("target")
            .arg(self.target)
            .arg("detail")
            .arg(self.detail)
            .arg("user")
            .arg(&a.user)
            .arg("host")
            .arg(&a.host)
            .arg("pid")
            .arg(a.pid)
            .arg("via")
            .arg(self.who.via.word())
            .query::<redis::Value>(con);
        match written {
            // A key of another type under the name (`check` names it) costs the entry,
            // never the action, which is done.
            Err(e) if crate::error::is_wrong_type(&e) => {
                crate::log_warn!(
                    "the action was not written to the event stream: {}",
                    e.detail().unwrap_or("its key holds another type")
                );
                Ok(())
            }
            other => other.map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_actor_has_a_name_host_and_pid() {
        let a = actor();
        assert!(!a.user.is_empty());
        assert!(!a.host.is_empty());
        assert_eq!(a.pid, std::process::id());
    }

    #[test]
    fn the_uid_of_root_is_named() {
        assert_eq!(uid_name(0).as_deref(), Some("root"));
    }
}
