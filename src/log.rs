//! Log lines on stderr, one per event, in a stable `key=value` shape:
//!
//! ```text
//! ts=2026-11-21T18:40:00.123Z level=info msg="dispatched 3 job(s) due by 1795287600"
//! ```
//!
//! When stderr is the journal stream that systemd names in `$JOURNAL_STREAM`, the line
//! starts with journald's priority prefix instead of the timestamp (the journal stamps
//! each line itself): `<6>level=info msg="..."`.
//!
//! The `msg` value is a JSON string, so a quote, a backslash or a newline inside a
//! message (a job's output line, say) is escaped and every event stays one line that
//! logfmt and JSON-string parsers can split. Control characters, C1 controls and
//! bidirectional overrides are `\u` escapes too ([`crate::terminal::json_safe`]): a
//! JSON reader gets the message back exactly, a terminal shows it and obeys nothing.
//!
//! The level is `info` unless `-v`/`-q` or `$REDBIKE_LOG` say otherwise; the flags beat
//! the variable (see [`choose_level`]).

use std::{
    ffi::OsStr,
    io::Write,
    str::FromStr,
    sync::{
        atomic::{AtomicU8, Ordering},
        OnceLock,
    },
};

/// The environment variable that sets the level when no `-v`/`-q` is given.
pub const LEVEL_ENV: &str = "REDBIKE_LOG";

/// How much to log, least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Only failures.
    Error = 0,
    /// Failures and things that need attention.
    Warn = 1,
    /// Also the events worth knowing (start, stop, batches, outages).
    Info = 2,
    /// Also each job.
    Debug = 3,
}

/// `$REDBIKE_LOG` names no level; a usage error (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{LEVEL_ENV}={0:?} is not a log level; use error, warn, info or debug")]
pub struct LevelError(pub String);

impl Level {
    const ALL: [Level; 4] = [Level::Error, Level::Warn, Level::Info, Level::Debug];

    /// The name in log lines and in `$REDBIKE_LOG`.
    pub fn name(self) -> &'static str {
        ["error", "warn", "info", "debug"][self as usize]
    }

    /// journald's (syslog's) priority: err 3, warning 4, info 6, debug 7.
    pub fn priority(self) -> u8 {
        [3, 4, 6, 7][self as usize]
    }
}

impl FromStr for Level {
    type Err = LevelError;

    /// Case-insensitive; `warning` is accepted for `warn`, as syslog spells it.
    fn from_str(s: &str) -> Result<Level, LevelError> {
        let lower = s.trim().to_ascii_lowercase();
        let lower = if lower == "warning" { "warn" } else { &lower };
        Level::ALL
            .into_iter()
            .find(|l| l.name() == lower)
            .ok_or_else(|| LevelError(s.to_string()))
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// The level from the flags and the variable's value. Any `-v`/`-q` beats the
/// variable: the level is then `info`, one up per `-v` and one down per `-q`, so a
/// `-v` on the command line means the same whatever the service's environment says.
/// Without flags the variable decides; unset or empty means `info`. A variable naming
/// no level is an error even when flags win, so a typo in an environment file shows.
pub fn choose_level(verbose: u8, quiet: u8, var: Option<&OsStr>) -> Result<Level, LevelError> {
    let from_var = match var {
        Some(v) if !v.is_empty() => Some(
            v.to_str()
                .ok_or_else(|| LevelError(v.to_string_lossy().into_owned()))?
                .parse::<Level>()?,
        ),
        _ => None,
    };
    if verbose == 0 && quiet == 0 {
        return Ok(from_var.unwrap_or(Level::Info));
    }
    let n = (Level::Info as i16 + verbose as i16 - quiet as i16).clamp(0, 3);
    Ok(Level::ALL[n as usize])
}

/// Sets the level from `-v`/`-q` counts and `$REDBIKE_LOG`; see [`choose_level`].
pub fn init(verbose: u8, quiet: u8) -> Result<Level, LevelError> {
    let level = choose_level(verbose, quiet, std::env::var_os(LEVEL_ENV).as_deref())?;
    set_level(level);
    Ok(level)
}

/// Sets the level directly (for embedders of the library).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether lines of `level` are written.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Whether stderr is systemd's journal stream. `$JOURNAL_STREAM` is `DEV:INODE` of
/// that stream; it is inherited by every child, so it only counts when stderr is still
/// that very file (systemd.exec(5) recommends this check): `redbike ... 2>file` run
/// from a service writes timestamps, not priority prefixes, into the file.
pub fn journal_stream() -> bool {
    static JOURNAL: OnceLock<bool> = OnceLock::new();
    *JOURNAL.get_or_init(|| {
        let Some(var) = std::env::var_os("JOURNAL_STREAM") else {
            return false;
        };
        stderr_identity().is_some_and(|(dev, ino)| matches_stream(&var, dev, ino))
    })
}

/// Whether a `$JOURNAL_STREAM` value names device `dev`, inode `ino`.
fn matches_stream(var: &OsStr, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = var.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

/// Device and inode of stderr, read through a duplicate of its descriptor.
fn stderr_identity() -> Option<(u64, u64)> {
    use std::os::{fd::AsFd, unix::fs::MetadataExt};
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// One log line, newline included. `now` is left out under the journal.
pub fn format_line(
    level: Level,
    msg: &str,
    journal: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    // Serializing a str to JSON cannot fail: it only escapes characters.
    let msg = crate::terminal::json_safe(serde_json::to_string(msg).expect("a str serializes"));
    let name = level.name();
    if journal {
        format!("<{}>level={name} msg={msg}\n", level.priority())
    } else {
        let ts = now.format("%Y-%m-%dT%H:%M:%S%.3fZ");
        format!("ts={ts} level={name} msg={msg}\n")
    }
}

/// Writes one line at `level`.
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let msg = args.to_string();
    let line = format_line(level, &msg, journal_stream(), chrono::Utc::now());
    // One write per line so lines from several threads do not interleave.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The final one-line error of a command, `redbike: message`. Under the journal it gets
/// priority err, so a service that dies shows why in `journalctl -p err`; it keeps its
/// plain shape otherwise, as it is what a person at a shell reads.
pub fn error_line(msg: &str) -> String {
    let msg = crate::terminal::text(msg);
    if journal_stream() {
        format!("<{}>redbike: {msg}", Level::Error.priority())
    } else {
        format!("redbike: {msg}")
    }
}

/// Logs at error level.
#[macro_export]
macro_rules! log_error { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Error, format_args!($($t)*)) } }
/// Logs at warn level.
#[macro_export]
macro_rules! log_warn { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Warn, format_args!($($t)*)) } }
/// Logs at info level.
#[macro_export]
macro_rules! log_info { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Info, format_args!($($t)*)) } }
/// Logs at debug level.
#[macro_export]
macro_rules! log_debug { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Debug, format_args!($($t)*)) } }

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> chrono::DateTime<chrono::Utc> {
        // 2026-11-21T18:40:00.123Z
        chrono::Utc.timestamp_millis_opt(1_795_286_400_123).unwrap()
    }

    #[test]
    fn plain_line_has_ts_level_and_quoted_msg() {
        let line = format_line(Level::Info, "dispatched 3 job(s) due by 17", false, at());
        assert_eq!(
            line,
            "ts=2026-11-21T18:40:00.123Z level=info msg=\"dispatched 3 job(s) due by 17\"\n"
        );
    }

    #[test]
    fn journal_line_has_priority_and_no_ts() {
        assert_eq!(
            format_line(Level::Warn, "x", true, at()),
            "<4>level=warn msg=\"x\"\n"
        );
        let prios: Vec<u8> = Level::ALL.iter().map(|l| l.priority()).collect();
        assert_eq!(prios, [3, 4, 6, 7]);
    }

    #[test]
    fn quotes_newlines_and_controls_stay_inside_one_line() {
        let msg = "[j:A] said \"hi\\\" \nrm -rf\r\t\u{1b}[31m\u{7f}\u{9b}\u{202e}\u{2069}";
        let line = format_line(Level::Error, msg, false, at());
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.ends_with('\n'));
        let value = line.split_once(" msg=").unwrap().1.trim_end_matches('\n');
        let back: String = serde_json::from_str(value).unwrap();
        assert_eq!(back, msg);
        assert!(!value.chars().any(crate::terminal::is_unsafe), "{value}");
    }

    #[test]
    fn flags_beat_the_variable() {
        let var = |s: &str| Some(OsStr::new(s).to_owned());
        let pick = |v: u8, q: u8, e: Option<std::ffi::OsString>| choose_level(v, q, e.as_deref());
        assert_eq!(pick(0, 0, None), Ok(Level::Info));
        assert_eq!(pick(0, 0, var("")), Ok(Level::Info));
        assert_eq!(pick(0, 0, var("DEBUG")), Ok(Level::Debug));
        assert_eq!(pick(0, 0, var("warning")), Ok(Level::Warn));
        assert_eq!(pick(0, 0, var("error")), Ok(Level::Error));
        assert_eq!(pick(1, 0, var("error")), Ok(Level::Debug));
        assert_eq!(pick(0, 1, var("debug")), Ok(Level::Warn));
        assert_eq!(pick(0, 5, None), Ok(Level::Error));
        assert_eq!(pick(5, 0, None), Ok(Level::Debug));
        assert_eq!(pick(0, 0, var("loud")), Err(LevelError("loud".into())));
        assert!(pick(1, 0, var("loud")).is_err());
    }

    #[test]
    fn journal_stream_value_must_name_the_file() {
        assert!(matches_stream(OsStr::new("8:12345"), 8, 12345));
        assert!(!matches_stream(OsStr::new("8:12345"), 8, 1));
        assert!(!matches_stream(OsStr::new("garbage"), 8, 12345));
        assert!(!matches_stream(OsStr::new(""), 0, 0));
    }
}
