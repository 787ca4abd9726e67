//! Operations: log lines and `stats`.

mod logs;
mod stats;
