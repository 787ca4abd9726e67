//! Log lines on stderr: `TIME LEVEL message`, or journald's `<N>message` when running
//! under systemd (`$JOURNAL_STREAM` set), which adds its own timestamp.

use std::{
    io::Write,
    sync::atomic::{AtomicU8, Ordering},
};

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

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the level from `-q`/`-v` counts: each `-v` one level up, each `-q` one down.
pub fn init(verbose: u8, quiet: u8) {
    let level = (Level::Info as i16 + verbose as i16 - quiet as i16).clamp(0, 3);
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether lines of `level` are written.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes one line at `level`.
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = if std::env::var_os("JOURNAL_STREAM").is_some() {
        // syslog priorities: err 3, warning 4, info 6, debug 7.
        let prio = [3, 4, 6, 7][level as usize];
        format!("<{prio}>{args}\n")
    } else {
        let name = ["ERROR", "WARN", "INFO", "DEBUG"][level as usize];
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        format!("{now} {name} {args}\n")
    };
    // One write per line so lines from several threads do not interleave.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
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
