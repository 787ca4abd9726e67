//! What an entry of the event stream says (docs/events.md), read leniently: an entry
//! of another format or type, or one missing a field, is a [`Skip`] with its reason,
//! which the notifier says once per change (see [`Skips`]).

use std::collections::BTreeMap;

use crate::history::{Entry, Stored};

/// An entry of the stream, as the notifier uses it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A run's outcome.
    Run {
        /// The job.
        job: String,
        /// A failure (`failed` = 1).
        failed: bool,
        /// The run's history entry (stored with one-letter keys, docs/history.md).
        entry: Box<Entry>,
    },
    /// A job became stale.
    Stale {
        /// The job.
        job: String,
        /// Its queue.
        queue: String,
        /// Unix seconds of its last success, 0 if never.
        since: i64,
        /// Seconds it must succeed within.
        bound: i64,
    },
    /// A stale job succeeded.
    Fresh {
        /// The job.
        job: String,
        /// Its queue.
        queue: String,
        /// When it went stale, unix seconds.
        since: i64,
    },
    /// An operator's action: not a change of state, nothing to report.
    Action,
}

/// Why an entry is skipped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// `v` is not 1 (another version of redbike wrote it).
    Version(String),
    /// A `type` this notifier does not know.
    Type(String),
    /// A field its type needs is missing, or not a number where one is needed.
    Field(&'static str, &'static str),
    /// The `entry` of a run is not a history entry.
    Unparsable(String),
    /// Trimmed away from the stream while a notifier held it.
    Trimmed,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::Version(v) => write!(f, "entries of format v={v} (this notifier reads v=1)"),
            Skip::Type(t) => write!(f, "entries of unknown type {t}"),
            Skip::Field(t, field) => write!(f, "{t} entries without a valid field {field}"),
            Skip::Unparsable(why) => {
                write!(f, "run entries whose entry is not a history entry ({why})")
            }
            Skip::Trimmed => write!(f, "entries trimmed away before they were delivered"),
        }
    }
}

/// Reads an entry's fields (names and values as Redis holds them).
pub fn parse(fields: &BTreeMap<String, Vec<u8>>) -> Result<Event, Skip> {
    let text = |name: &str| {
        fields
            .get(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let v = text("v").unwrap_or_default();
    if v != "1" {
        // Log lines escape what they show (src/log.rs): kept exact here.
        return Err(Skip::Version(v));
    }
    let kind = text("type").unwrap_or_default();
    let need = |t: &'static str, name: &'static str| {
        text(name)
            .filter(|s| !s.is_empty())
            .ok_or(Skip::Field(t, name))
    };
    let number = |t: &'static str, name: &'static str| {
        need(t, name)?
            .trim()
            .parse::<i64>()
            .map_err(|_| Skip::Field(t, name))
    };
    match kind.as_str() {
        "run" => {
            let job = need("run", "job")?;
            let failed = match need("run", "failed")?.as_str() {
                "1" => true,
                "0" => false,
                _ => return Err(Skip::Field("run", "failed")),
            };
            let raw = fields.get("entry").ok_or(Skip::Field("run", "entry"))?;
            // As the history lists store it (one-letter keys), or as `history --format
            // json` prints it.
            let entry: Entry = match serde_json::from_slice::<Stored>(raw) {
                Ok(stored) => stored.into(),
                Err(_) => serde_json::from_slice(raw).map_err(|e| {
                    Skip::Unparsable(match e.classify() {
                        serde_json::error::Category::Data => {
                            "a field is missing or mistyped".into()
                        }
                        _ => "not JSON".into(),
                    })
                })?,
            };
            Ok(Event::Run {
                job,
                failed,
                entry: Box::new(entry),
            })
        }
        "stale" => Ok(Event::Stale {
            job: need("stale", "job")?,
            queue: text("queue").unwrap_or_default(),
            since: number("stale", "since")?,
            bound: number("stale", "bound")?,
        }),
        "fresh" => Ok(Event::Fresh {
            job: need("fresh", "job")?,
            queue: text("queue").unwrap_or_default(),
            since: text("since")
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
        }),
        "action" => Ok(Event::Action),
        other => Err(Skip::Type(other.to_string())),
    }
}

/// The entries skipped, said once per change of reason: the first of a reason is
/// logged, and the count when good entries come again (no flood of lines for a
/// stream full of an other version's entries).
#[derive(Debug, Default)]
pub struct Skips {
    /// The reason being skipped now, its first entry id and how many so far.
    current: Option<(Skip, String, u64)>,
}

impl Skips {
    /// Notes a skipped entry `id` of `stream`.
    pub fn skipped(&mut self, stream: &str, id: &str, why: Skip) {
        if let Some((reason, _, n)) = &mut self.current {
            if *reason == why {
                *n += 1;
                return;
            }
        }
        self.ended(stream);
        crate::log_warn!("notify: {stream}: skipping {why}, from entry {id} on");
        self.current = Some((why, id.to_string(), 1));
    }

    /// Notes an entry read well: ends a run of skips, saying how many.
    pub fn ended(&mut self, stream: &str) {
        if let Some((why, first, n)) = self.current.take() {
            crate::log_warn!("notify: {stream}: skipped {n} entries ({why}) from {first} on");
        }
    }
}
