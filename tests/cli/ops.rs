//! Operations: log lines, `stats`, shell completions and the systemd units.

mod completions;
mod logs;
mod stats;
mod systemd;
