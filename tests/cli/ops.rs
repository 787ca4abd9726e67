//! Operations: log lines.

mod logs;
