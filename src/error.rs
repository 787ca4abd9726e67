//! The top-level error of a command and the exit code it maps to.

use std::path::PathBuf;

use crate::{jobid::JobIdError, schedule::ScheduleError};

/// A configuration problem; always an input error (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The named config file could not be read.
    #[error("cannot read config file {path:?}: {source}")]
    Read {
        /// The file named.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or has the wrong type.
    #[error("config file {path:?}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// One line naming the key and the problem.
        message: String,
    },
    /// A value is of the right type but not acceptable.
    #[error("bad config value for {key}: {message}")]
    Value {
        /// The key, e.g. `redbike.timezone`.
        key: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

/// Exit codes of the `redbike` binary (sysexits-style where one fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything went well.
    Success = 0,
    /// Any failure that is not one of the others (including `check` finding problems).
    Failure = 1,
    /// A usage error or bad input: nothing was written.
    Usage = 2,
    /// Redis could not be reached (EX_UNAVAILABLE).
    Unavailable = 69,
    /// Redis is out of memory: it refused a write, or evicted keys while a command wrote
    /// (EX_TEMPFAIL: run the command again once Redis has room).
    OutOfMemory = 75,
    /// An error that retrying cannot fix (EX_CONFIG): redis refused the login or a
    /// database, the ACL user lacks a permission, a key has the wrong type, the server
    /// lacks a command, the timefile cannot be written. The systemd units do not restart
    /// on it (`RestartPreventExitStatus=`).
    CannotFix = 78,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration could not be loaded.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A schedule given on the command line or in a file is malformed.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// A job id given on the command line or in a file is malformed.
    #[error(transparent)]
    JobId(#[from] JobIdError),
    /// Some other input (a timestamp, a CSV file, an argument) is malformed.
    #[error("{0}")]
    Input(String),
    /// Redis could not be reached at all.
    #[error("cannot reach redis at {url}: {reason}")]
    Unreachable {
        /// The Redis URL, password masked.
        url: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// Redis refused the connection for a reason that retrying cannot fix (a wrong
    /// password, a database that does not exist, a missing ACL permission).
    #[error("redis at {url} refused redbike: {reason}; retrying cannot fix this: {hint}")]
    Refused {
        /// The Redis URL, password masked.
        url: String,
        /// What the server said.
        reason: String,
        /// What to do.
        hint: &'static str,
    },
    /// Redis answered with an error, or the connection broke mid-command.
    #[error("redis error: {}", describe_redis(.0))]
    Redis(#[from] redis::RedisError),
    /// Something retrying cannot fix, other than a Redis reply (an unwritable timefile).
    #[error("{what}; retrying cannot fix this: {hint}")]
    CannotFix {
        /// What failed.
        what: String,
        /// What to do.
        hint: String,
    },
    /// The connection broke while `set` or `load` wrote: some batches are written.
    #[error(
        "the connection to redis broke after {written} of {total} job(s) were written, and perhaps the next {unsure} ({reason}); running the same command again is safe: it sets the same schedules again"
    )]
    LoadCut {
        /// Jobs written before the break (whole batches that Redis confirmed).
        written: usize,
        /// Jobs of the batch under way, which Redis may or may not have written.
        unsure: usize,
        /// Jobs the command was to write.
        total: usize,
        /// What the connection said.
        reason: String,
    },
    /// A file `load` had checked changed before its second reading had written it all.
    #[error(
        "{name} changed while it was loaded: {written} of {total} job(s) were written before the change was seen; check the file and load it again"
    )]
    Changed {
        /// The file.
        name: String,
        /// Jobs written before the change was seen.
        written: usize,
        /// Jobs the first reading found.
        total: usize,
    },
    /// Fewer replicas than `wait-replicas` acknowledged a write in time.
    #[error(
        "only {got} of {wanted} replica(s) acknowledged the write within {ms} ms (wait-replicas); it may be lost if the master fails over now: check with `redbike tell` and run the command again"
    )]
    NotAcknowledged {
        /// Replicas asked for.
        wanted: u32,
        /// Replicas that acknowledged.
        got: u32,
        /// The time allowed, in milliseconds.
        ms: u64,
    },
    /// Redis refused a write for want of memory (an OOM reply, or `maxmemory` reached
    /// under `noeviction`). The count comes from `written_before` in the loader (`operator/loader.rs`).
    #[error(
        "redis is out of memory ({detail}): {written} of {total} job(s) were written before it refused; free memory or raise maxmemory (docs/operating.md: Redis settings redbike needs), then run the command again"
    )]
    OutOfMemory {
        /// Jobs written before the refusal.
        written: usize,
        /// Jobs the command was to write.
        total: usize,
        /// What Redis said or reported.
        detail: String,
    },
    /// Redis evicted keys while a command wrote, and jobs written are gone.
    #[error(
        "redis evicted {evicted} key(s) while the jobs were written (maxmemory-policy {policy}): {missing} of {total} job(s) written have lost their schedule; set maxmemory-policy noeviction and give Redis room, then write them again and run `redbike check --repair`"
    )]
    Evicted {
        /// Keys Redis evicted meanwhile (any database's).
        evicted: u64,
        /// The policy that evicted them.
        policy: String,
        /// Jobs whose schedule is missing afterwards.
        missing: usize,
        /// Jobs written.
        total: usize,
    },
    /// Reading or writing a local file (timefile, CSV, output) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `cannot read timefile "x"`.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// The exit code this error ends the process with.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Config(_) | Error::Schedule(_) | Error::JobId(_) | Error::Input(_) => {
                ExitCode::Usage
            }
            Error::Unreachable { .. } | Error::LoadCut { .. } => ExitCode::Unavailable,
            Error::OutOfMemory { .. } | Error::Evicted { .. } => ExitCode::OutOfMemory,
            Error::Refused { .. } | Error::CannotFix { .. } => ExitCode::CannotFix,
            Error::Redis(e) if is_connection_error(e) => ExitCode::Unavailable,
            Error::Redis(e) if cannot_fix(e).is_some() => ExitCode::CannotFix,
            Error::Redis(_)
            | Error::Io { .. }
            | Error::NotAcknowledged { .. }
            | Error::Changed { .. } => ExitCode::Failure,
        }
    }

    /// Whether this is a write to a closed pipe (`redbike statuses | head -1`), which
    /// ends a command quietly. The csv crate wraps the pipe's error in one of its own.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if is_broken_pipe(source))
    }

    /// An [`Error::Io`] with a context line.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Whether `e` is, or wraps (as `csv::Error` into `io::Error` does), a broken pipe.
fn is_broken_pipe(e: &std::io::Error) -> bool {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return true;
    }
    let Some(inner) = e.get_ref() else {
        return false;
    };
    if let Some(e) = inner.downcast_ref::<std::io::Error>() {
        return is_broken_pipe(e);
    }
    matches!(inner.downcast_ref::<csv::Error>().map(csv::Error::kind),
             Some(csv::ErrorKind::Io(e)) if is_broken_pipe(e))
}

/// Whether a Redis error means the server is gone (as opposed to it refusing a command).
pub fn is_connection_error(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

/// Whether Redis refused a command for a key of another type (WRONGTYPE; the scripts
/// answer so, naming the key, before their first write).
pub fn is_wrong_type(e: &redis::RedisError) -> bool {
    e.code() == Some("WRONGTYPE")
}

/// The error a script answers for `key` of type `found` where redbike keeps `want`.
pub fn wrong_type(key: &str, found: &str, want: &str) -> redis::RedisError {
    redis::make_extension_error(
        "WRONGTYPE".into(),
        Some(format!(
            "key {key} holds a {found} where redbike keeps a {want}; nothing was changed; see `redbike check`"
        )),
    )
}

/// What to do about a Redis error that retrying cannot fix; `None` for errors that may
/// go away by themselves (an outage, a failover, OOM, a busy script).
pub fn cannot_fix(e: &redis::RedisError) -> Option<&'static str> {
    let text = e.to_string();
    let has = |code: &str| e.code() == Some(code) || text.contains(code);
    if e.kind() == redis::ErrorKind::AuthenticationFailed || has("WRONGPASS") || has("NOAUTH") {
        Some("check the user name and password (url, or username and password in [redbike-redis])")
    } else if has("NOPERM")
        || text.contains("can't run this command")
        || text.contains("No permissions to access")
    {
        Some("grant the ACL user the commands, keys and channels that docs/deployments.md lists under Security / ACL")
    } else if has("SPLIT") {
        Some("another process split the prefix into shards: give this one the same `shards` setting (see docs/deployments.md, shards)")
    } else if has("WRONGTYPE") {
        Some("a key of the prefix holds the wrong type of value: find it with `redbike check` (or TYPE) and delete or rename it")
    } else if text.contains("DB index is out of range") || text.contains("invalid DB index") {
        Some("the server has no such database: give a db below its `databases` setting")
    } else if text.contains("unknown command") || text.contains("unknown subcommand") {
        Some("the server lacks a command redbike needs: use Redis 6.2 or later, with no command renamed or disabled")
    } else {
        None
    }
}

/// Whether Redis refused a command for want of memory (`-OOM`; Redis before 7 reports
/// a refused write inside a script as an `ERR` that quotes it, and a script's error
/// reply may reach us as `"OOM": command not allowed ...`).
pub fn is_oom(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM")
        || e.to_string()
            .contains("command not allowed when used memory")
}

/// A Redis error in one line, without redis-rs's quoting of the code (`WRONGTYPE
/// Operation against a key ...`), and for an error retrying cannot fix, what to do.
/// Out of memory is named as such: it passes once memory is freed.
pub fn describe_redis(e: &redis::RedisError) -> String {
    let text = redis_text(e);
    if is_oom(e) {
        return format!(
            "redis is out of memory ({text}): free memory or raise maxmemory (docs/operating.md: Redis settings redbike needs)"
        );
    }
    match cannot_fix(e) {
        Some(hint) => format!("{text}; retrying cannot fix this: {hint}"),
        None => text,
    }
}

/// A Redis error in one line, without what to do about it.
pub fn redis_text(e: &redis::RedisError) -> String {
    let first = |s: &str| s.lines().next().unwrap_or("").trim().to_string();
    match (e.code(), e.detail()) {
        _ if e.kind() == redis::ErrorKind::AuthenticationFailed => {
            "authentication failed: wrong user name or password".to_string()
        }
        _ if is_not_utf8(e) => {
            "a value is not UTF-8 text where this command reads text (written by \
             another program?)"
                .to_string()
        }
        _ if is_parse_error(e) => {
            "the reply is not in the Redis protocol (is this port a Redis server?)".to_string()
        }
        (Some(code), Some(detail)) => format!("{code} {}", first(detail)),
        _ => first(&e.to_string()),
    }
}

/// Whether the server's reply could not be parsed: something other than Redis answered.
pub fn is_parse_error(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Parse
}

/// Whether a well-formed reply held bytes that are not UTF-8 where text was read:
/// redis-rs reports that as a parse error too, which would blame the server.
fn is_not_utf8(e: &redis::RedisError) -> bool {
    is_parse_error(e) && e.to_string().contains("UTF-8")
}

/// The result type of the library's commands.
pub type Result<T, E = Error> = std::result::Result<T, E>;
