//! `redbike events`: prints the entries of the event stream that `operator/events.rs`
//! reads, as text lines for people (text from jobs and operators escaped), JSON Lines
//! (every field exact) or CSV.

use std::io::Write;

use serde_json::{Map, Value};

use crate::{
    config::Config,
    error::{Error, ExitCode, Result},
    history::Outcome,
    operator::events::{self, Event, Filter},
    shutdown::Shutdown,
    terminal,
};

use super::{args::EventsFormat, out, parse_ts};

/// The CSV header row.
pub const CSV_HEADER: [&str; 18] = [
    "id", "time", "shard", "type", "job", "failed", "outcome", "action", "target", "detail",
    "user", "host", "pid", "via", "queue", "since", "bound", "entry",
];

/// In `--follow`, skipped entries are said at the first and then every this many.
const SAY_SKIPPED_EVERY: usize = 100;

pub(super) fn cmd_events(
    config: &Config,
    follow: bool,
    failures: bool,
    job: Option<String>,
    since: Option<&str>,
    format: EventsFormat,
) -> Result<ExitCode> {
    if let Some(id) = &job {
        crate::jobid::validate_stored(id)?;
    }
    let filter = Filter {
        failures,
        job,
        since: parse_ts("--since", since, config)?,
    };
    let mut printer = Printer::new(format)?;
    let skipped = if follow {
        let shutdown = Shutdown::new();
        shutdown
            .install_signals(false)
            .map_err(|e| Error::io("cannot install signal handlers", e))?;
        let mut said = 0;
        events::follow(
            config,
            &filter,
            &shutdown,
            |e| printer.print(e),
            |n| {
                if said == 0 || n >= said + SAY_SKIPPED_EVERY {
                    say_skipped(n);
                    said = n;
                }
            },
        )?
    } else {
        events::read(config, &filter, |e| printer.print(e))?
    };
    if skipped > 0 {
        say_skipped(skipped);
    }
    Ok(ExitCode::Success)
}

fn say_skipped(n: usize) {
    say!(
        "redbike: events: skipped {n} entr{} of another format or an unknown type (written by another version?)",
        if n == 1 { "y" } else { "ies" }
    );
}

/// Writes entries in one format, flushing each (a follower shows it at once).
struct Printer {
    format: EventsFormat,
    csv: Option<csv::Writer<std::io::Stdout>>,
    escape: bool,
}

fn write_error(e: std::io::Error) -> Error {
    Error::io("cannot write output", e)
}

impl Printer {
    fn new(format: EventsFormat) -> Result<Printer> {
        let escape = terminal::csv_escapes();
        let csv = match format {
            EventsFormat::Csv => {
                let mut w = csv::WriterBuilder::new()
                    .terminator(csv::Terminator::CRLF)
                    .from_writer(std::io::stdout());
                w.write_record(CSV_HEADER)
                    .and_then(|()| Ok(w.flush()?))
                    .map_err(|e| write_error(e.into()))?;
                Some(w)
            }
            _ => None,
        };
        Ok(Printer {
            format,
            csv,
            escape,
        })
    }

    fn print(&mut self, e: &Event) -> Result<()> {
        match self.format {
            EventsFormat::Text => {
                let mut o = out();
                writeln!(o, "{}", text_line(e))
                    .and_then(|()| o.flush())
                    .map_err(write_error)
            }
            EventsFormat::Json => {
                let line = terminal::json_safe(json_object(e).to_string());
                let mut o = out();
                writeln!(o, "{line}")
                    .and_then(|()| o.flush())
                    .map_err(write_error)
            }
            EventsFormat::Csv => {
                let row = csv_row(e);
                let escape = self.escape;
                match &mut self.csv {
                    Some(w) => w
                        .write_record(
                            row.iter()
                                .map(|f| terminal::csv_field(f.as_bytes(), escape)),
                        )
                        .and_then(|()| Ok(w.flush()?))
                        .map_err(|e| write_error(e.into())),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One line for people: time, type, subject, what, who; every value from Redis
/// escaped.
pub fn text_line(e: &Event) -> String {
    let get = |name| terminal::text(e.get(name).unwrap_or("")).into_owned();
    let (subject, what, who) = match e.kind() {
        "run" => {
            let failed = e.get("failed") == Some("1");
            match e.entry() {
                Some(entry) => {
                    // `failed` says it already; other outcomes that count as failures
                    // (timed-out, killed, fenced, bad) say so.
                    let marker = match failed && entry.outcome != Outcome::Failed {
                        true => " (failure)",
                        false => "",
                    };
                    let mut detail = match entry.detail.as_str() {
                        "" => String::new(),
                        d => format!(": {}", terminal::text(d)),
                    };
                    // A failure's last line of output says most about it.
                    let last = entry.tail.lines().rev().find(|l| !l.trim().is_empty());
                    if let (true, Some(line)) = (failed, last) {
                        detail.push_str(&format!("; output: {}", terminal::text(line)));
                    }
                    (
                        get("job"),
                        format!("{}{marker}{detail}", entry.outcome.name()),
                        format!(
                            "{} {} pid {}",
                            terminal::text(&entry.by),
                            terminal::text(&entry.host),
                            entry.pid
                        ),
                    )
                }
                None => (get("job"), "?".to_string(), String::new()),
            }
        }
        "stale" => (
            get("job"),
            format!(
                "stale: no success since {} (must succeed within {}s)",
                since_text(e.get("since")),
                get("bound")
            ),
            String::new(),
        ),
        "fresh" => (
            get("job"),
            format!("fresh again (stale since {})", since_text(e.get("since"))),
            String::new(),
        ),
        _ => {
            let detail = match e.get("detail").unwrap_or("") {
                "" => String::new(),
                d => format!(" {}", terminal::id(d)),
            };
            let target = match e.get("target").unwrap_or("") {
                "" => "-".to_string(),
                t => terminal::id(t).into_owned(),
            };
            (
                target,
                format!("{}{detail}", get("action")),
                format!(
                    "by {}@{} pid {} via {}",
                    get("user"),
                    get("host"),
                    get("pid"),
                    get("via")
                ),
            )
        }
    };
    let subject = if subject.is_empty() {
        "-".into()
    } else {
        subject
    };
    let line = format!("{} {:<6} {subject} {what}", e.time(), e.kind());
    match who.is_empty() {
        true => line,
        false => format!("{line} [{who}]"),
    }
}

/// A `since` field (unix seconds, 0: never) as people read it.
fn since_text(since: Option<&str>) -> String {
    match since.and_then(|s| s.parse::<i64>().ok()) {
        Some(0) => "never".into(),
        Some(ts) => crate::schedule::timestamp::iso_utc(ts),
        None => terminal::text(since.unwrap_or("")).into_owned(),
    }
}

/// The entry as one JSON object: id, time, shard, then its fields as stored, except a
/// run's entry, as `history --format json` prints it.
pub fn json_object(e: &Event) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), Value::from(e.id.as_str()));
    o.insert("time".into(), Value::from(e.time()));
    o.insert("shard".into(), Value::from(e.shard));
    for (k, v) in &e.fields {
        let value = match k.as_str() {
            "entry" => match e.entry() {
                // An Entry of strings and numbers always serializes.
                Some(entry) => serde_json::to_value(entry).unwrap_or(Value::Null),
                None => serde_json::from_str(v).unwrap_or_else(|_| Value::from(v.as_str())),
            },
            _ => Value::from(v.as_str()),
        };
        o.insert(k.clone(), value);
    }
    Value::Object(o)
}

/// The CSV row, in the order of [`CSV_HEADER`].
fn csv_row(e: &Event) -> Vec<String> {
    let entry = e.entry();
    CSV_HEADER
        .iter()
        .map(|&col| match col {
            "id" => e.id.clone(),
            "time" => e.time(),
            "shard" => e.shard.to_string(),
            "outcome" => entry
                .as_ref()
                .map(|x| x.outcome.name().to_string())
                .unwrap_or_default(),
            "detail" if e.kind() == "run" => {
                entry.as_ref().map(|x| x.detail.clone()).unwrap_or_default()
            }
            "host" if e.kind() == "run" => {
                entry.as_ref().map(|x| x.host.clone()).unwrap_or_default()
            }
            "pid" if e.kind() == "run" => entry
                .as_ref()
                .map(|x| x.pid.to_string())
                .unwrap_or_default(),
            "type" => e.kind().to_string(),
            col => e.get(col).unwrap_or("").to_string(),
        })
        .collect()
}
