//! The top-level error of a command and the exit code it maps to.

use crate::{config::ConfigError, jobid::JobIdError, schedule::ScheduleError};

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
    /// Redis answered with an error, or the connection broke mid-command.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),
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
    /// under `noeviction`). The count comes from [`crate::loader::written_before`].
    #[error(
        "redis is out of memory ({detail}): {written} of {total} job(s) were written before it refused; free memory or raise maxmemory (README: Redis settings redbike needs), then run the command again"
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
            Error::Unreachable { .. } => ExitCode::Unavailable,
            Error::OutOfMemory { .. } | Error::Evicted { .. } => ExitCode::OutOfMemory,
            Error::Redis(e) if is_connection_error(e) => ExitCode::Unavailable,
            Error::Redis(_) | Error::Io { .. } | Error::NotAcknowledged { .. } => ExitCode::Failure,
        }
    }

    /// An [`Error::Io`] with a context line.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
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

/// The result type of the library's commands.
pub type Result<T, E = Error> = std::result::Result<T, E>;
