//! Operations: log lines, `stats`, shell completions, the systemd units and `--version`.

mod alerts;
mod completions;
mod logs;
pub(crate) mod stats;
mod systemd;
mod version;
