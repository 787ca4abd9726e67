//! `redbike stats`: figures about one prefix for people (text), scripts (JSON) and
//! monitoring (Prometheus text exposition format, for node_exporter's textfile
//! collector).
//!
//! The figures are plain data (`figures.rs`), read from Redis in `read.rs`; each
//! rendering has its own file (`text.rs`, `json.rs`, `prometheus.rs`).

pub mod figures;
mod json;
mod prometheus;
mod read;
mod text;

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};

pub use figures::{merge, Stats};
pub use read::collect;

/// How `redbike stats` prints its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Lines for people; the shape may change.
    Text,
    /// One JSON object; fields are added, never renamed.
    Json,
    /// Prometheus text exposition format, gauges named `redbike_*`.
    Prometheus,
}

/// What to read.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Queues to report on whatever they hold (from `--queues` or the config).
    pub queues: Vec<String>,
    /// Also walk the keyspace for every queue and the statuses for counts per event.
    pub scan: bool,
    /// Seconds a job may be due before it counts as overdue (`overdue-after`).
    pub overdue_after: u64,
    /// The fleet-wide limits of queues (`[redbike.limits]`): such a queue is reported
    /// with its limit and its jobs leased now.
    pub limits: BTreeMap<String, u64>,
}

/// Renders the figures in `format`, newline-terminated.
pub fn render(stats: &Stats, format: Format) -> String {
    match format {
        Format::Text => text::render(stats),
        Format::Json => json::render(stats),
        Format::Prometheus => prometheus::render(stats),
    }
}

/// Parses the `--queues` value: the weighting string's names, each once.
pub fn parse_queue_names(text: &str) -> Result<Vec<String>> {
    let names = crate::work::parse_queues(text)?;
    let unique: BTreeSet<String> = names.into_iter().collect();
    if unique.is_empty() {
        return Err(Error::Input("--queues names no queue".into()));
    }
    Ok(unique.into_iter().collect())
}

#[cfg(test)]
mod tests;
