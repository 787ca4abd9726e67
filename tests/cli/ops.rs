//! Operations: log lines, `stats`, shell completions and the systemd units.

mod completions;
mod logs;
pub(crate) mod stats;
mod systemd;
