//! Operations: log lines, `stats` and shell completions.

mod completions;
mod logs;
mod stats;
