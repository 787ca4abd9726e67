//! `redbike ps`: the registered dispatchers and workers (see
//! [`crate::redis::registry`]), as a table for people, CSV or JSON for scripts.

use crate::{
    config::Config,
    error::{Error, Result},
    redis::peers,
    redis::registry::{self, Listed},
    redis::store::with_store,
    schedule::timestamp,
    shard,
};

/// The processes of a prefix (all its shards), and whether a Python one shares it.
#[derive(Debug, Clone, Default)]
pub struct Processes {
    /// The dispatchers and workers registered, sorted by kind, host, pid and id; a
    /// process serving several shards once.
    pub listed: Vec<Listed>,
    /// What `P-python-seen` says of a Python process (which does not register).
    pub python_seen: Option<String>,
}

/// Lists the processes registered under `config`'s prefix, over all its shards.
pub fn collect(config: &Config) -> Result<Processes> {
    let mut listed: Vec<Listed> = Vec::new();
    let mut first = true;
    let mut python_seen: Option<String> = None;
    for config in shard::checked_all(config)? {
        let part = with_store(&config.redis, |store| {
            let seen = peers::python_seen(store)?;
            python_seen = python_seen.take().or(seen);
            Ok(registry::list(store)?)
        })?;
        if first {
            listed = part;
            first = false;
            continue;
        }
        // A process serving several shards registers a loop in each, each with the
        // process's whole `-j`: one row.
        for l in part {
            let d = &l.description;
            let same = |a: &Listed| {
                let e = &a.description;
                (&e.kind, &e.host, e.pid) == (&d.kind, &d.host, d.pid)
            };
            if !listed.iter().any(same) {
                listed.push(l);
            }
        }
    }
    listed.sort_by(|a, b| {
        let (a, b) = (&a.description, &b.description);
        (&a.kind, &a.host, a.pid, &a.id).cmp(&(&b.kind, &b.host, b.pid, &b.id))
    });
    Ok(Processes {
        listed,
        python_seen,
    })
}

/// How `redbike ps` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people; the shape may change.
    Table,
    /// RFC 4180 CSV with a header row; columns are added at the end, never renamed.
    Csv,
    /// One JSON array of objects; fields are added, never renamed.
    Json,
}

/// The CSV header row (also in the man page).
pub const CSV_HEADER: [&str; 12] = [
    "id",
    "kind",
    "host",
    "pid",
    "queues",
    "concurrency",
    "version",
    "started",
    "heartbeat",
    "expires_in_seconds",
    "failing",
    "limits",
];

/// A worker's limits as `Q=N` joined with `;` (empty: none).
fn limits_text(d: &crate::redis::registry::Description) -> String {
    let limits: Vec<String> = d.limits.iter().map(|(q, n)| format!("{q}={n}")).collect();
    limits.join(";")
}

/// Renders `listed` as of `now` (unix seconds, for the table's ages). What processes
/// wrote about themselves is shown by the terminal rule: the table escaped, the CSV
/// escaped when `escape` (a terminal, [`crate::terminal::csv_escapes`]), JSON exact.
pub fn render(listed: &[Listed], format: Format, now: i64, escape: bool) -> Result<Vec<u8>> {
    match format {
        Format::Table => Ok(table(listed, now).into_bytes()),
        Format::Csv => csv(listed, escape),
        Format::Json => {
            // Strings, numbers and lists of strings always serialize.
            let json = serde_json::to_string_pretty(listed).expect("Listed serializes");
            Ok(format!("{}\n", crate::terminal::json_safe(json)).into_bytes())
        }
    }
}

/// One CSV row per process; queues joined with `:`, a dispatcher's concurrency empty.
fn csv(listed: &[Listed], escape: bool) -> Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    let bad = |e: csv::Error| Error::io("cannot write output", e.into());
    w.write_record(CSV_HEADER).map_err(bad)?;
    for l in listed {
        let d = &l.description;
        let row = [
            d.id.clone(),
            d.kind.clone(),
            d.host.clone(),
            d.pid.to_string(),
            d.queues.join(":"),
            d.concurrency.map(|n| n.to_string()).unwrap_or_default(),
            d.version.clone(),
            d.started.to_string(),
            d.heartbeat.to_string(),
            format!("{:.3}", l.expires_in_seconds),
            d.failing.clone().unwrap_or_default(),
            limits_text(d),
        ];
        w.write_record(
            row.iter()
                .map(|f| crate::terminal::csv_field(f.as_bytes(), escape)),
        )
        .map_err(bad)?;
    }
    w.into_inner()
        .map_err(|e| Error::io("cannot write output", e.into_error()))
}

/// Aligned columns, each cell by the terminal rule; times as UTC and the heartbeat's age.
fn table(listed: &[Listed], now: i64) -> String {
    let mut rows = vec![[
        "KIND",
        "HOST",
        "PID",
        "QUEUES",
        "JOBS",
        "VERSION",
        "STARTED",
        "HEARTBEAT",
        "EXPIRES",
        "FAILING",
        "LIMITS",
    ]
    .map(String::from)];
    for l in listed {
        let d = &l.description;
        rows.push(
            [
                d.kind.clone(),
                d.host.clone(),
                d.pid.to_string(),
                match d.queues.is_empty() {
                    true => "-".into(),
                    false => d.queues.join(":"),
                },
                d.concurrency.map_or("-".into(), |n| n.to_string()),
                d.version.clone(),
                timestamp::iso_utc(d.started),
                format!("{}s ago", now.saturating_sub(d.heartbeat).max(0)),
                format!("in {:.0}s", l.expires_in_seconds.ceil()),
                d.failing.clone().unwrap_or_else(|| "-".into()),
                match d.limits.is_empty() {
                    true => "-".into(),
                    false => limits_text(d),
                },
            ]
            // Escaped before they are measured: the columns line up as shown, and each
            // row stays one line.
            .map(|cell| crate::terminal::text(&cell).into_owned()),
        );
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::registry::Description;

    fn worker() -> Listed {
        Listed {
            description: Description {
                id: "h-7-00000001".into(),
                kind: "worker".into(),
                host: "h".into(),
                pid: 7,
                queues: vec!["A".into(), "B,\"x\"".into()],
                concurrency: Some(4),
                version: "0.1.0".into(),
                started: 0,
                heartbeat: 95,
                ttl: 30,
                failing: None,
                limits: [("A".to_string(), 3)].into(),
            },
            expires_in_seconds: 25.5,
        }
    }

    #[test]
    fn csv_quotes_fields_and_has_the_documented_header() {
        let out = String::from_utf8(render(&[worker()], Format::Csv, 100, false).unwrap()).unwrap();
        assert_eq!(
            out,
            "id,kind,host,pid,queues,concurrency,version,started,heartbeat,expires_in_seconds,failing,limits\r\n\
             h-7-00000001,worker,h,7,\"A:B,\"\"x\"\"\",4,0.1.0,0,95,25.500,,A=3\r\n"
        );
    }

    #[test]
    fn table_aligns_columns() {
        let out = table(&[worker()], 100);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].find("HOST"), lines[1].find("h "));
        assert!(lines[1].contains("5s ago"), "{out}");
        assert!(lines[1].contains("1970-01-01T00:00:00Z"), "{out}");
        assert!(lines[1].ends_with("A=3"), "{out}");
    }
}
