//! The commands that report on a prefix: `statuses`, `schedules`, `check`, `stats`,
//! `ps` and `top`.

use std::io::Write;

use crate::{
    config::Config,
    error::{Error, ExitCode, Result},
    operator::check,
    operator::csvio::{SortedCsv, SPILL_ROWS},
    operator::ps,
    operator::stats,
    operator::statuses,
    redis::hazards::Probe,
    redis::store::with_store,
    schedule::timestamp,
    shard,
};

use super::{out, parse_ts};

pub(super) fn cmd_statuses(config: &Config, before: Option<&str>) -> Result<ExitCode> {
    let before = parse_ts("--before", before, config)?.unwrap_or_else(timestamp::now);
    // Every shard's rows go into one sort: the order is that of an unsplit prefix.
    let mut sorted = SortedCsv::new(SPILL_ROWS).escaping(crate::terminal::csv_escapes());
    statuses::each_status(config, before, |(id, s)| {
        sorted.push(vec![
            id,
            s.event.into_bytes(),
            s.at.to_string().into_bytes(),
        ])
    })?;
    sorted.finish(out())?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_schedules(config: &Config) -> Result<ExitCode> {
    let mut sorted = SortedCsv::new(SPILL_ROWS).escaping(crate::terminal::csv_escapes());
    crate::operator::backup::each_schedule(config, |(id, schedule)| {
        sorted.push(vec![id, schedule])
    })?;
    sorted.finish(out())?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_check(config: &Config, repair: bool) -> Result<ExitCode> {
    let mut rows = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out());
    let mut write_error = None;
    let escape = crate::terminal::csv_escapes();
    let who = super::jobs::who(config);
    let report = check::check_all(config, repair, &who, |f: &check::Finding| {
        let record = [f.kind.as_bytes(), &f.jobid, f.detail.as_bytes()]
            .map(|field| crate::terminal::csv_field(field, escape));
        if let Err(e) = rows.write_record(record).and_then(|()| Ok(rows.flush()?)) {
            write_error.get_or_insert(e);
        }
    })?;
    let check::Report {
        summary,
        hazards,
        unread,
    } = report;
    if let Some(e) = write_error {
        return Err(Error::io("cannot write output", e.into()));
    }
    let remaining = summary.problems - summary.repaired.min(summary.problems);
    say!(
        "check: {} problem(s) in {} job(s) across {} queue(s){}{}{}{}{}{}",
        summary.problems,
        summary.jobs,
        summary.queues,
        if repair {
            format!(", {} repaired", summary.repaired)
        } else {
            String::new()
        },
        if summary.held > 0 {
            format!(", {} job(s) held (failed or BAD)", summary.held)
        } else {
            String::new()
        },
        if summary.overdue > 0 {
            format!(
                ", {} job(s) overdue (no dispatcher runs, or HALT is set)",
                summary.overdue
            )
        } else {
            String::new()
        },
        if summary.stale > 0 {
            format!(
                ", {} job(s) stale (no success within their bound)",
                summary.stale
            )
        } else {
            String::new()
        },
        if summary.paused > 0 {
            format!(", {} job(s) paused", summary.paused)
        } else {
            String::new()
        },
        if summary.odd_ids > 0 {
            format!(", {} job id(s) `set` refuses (odd-id)", summary.odd_ids)
        } else {
            String::new()
        },
    );
    for hazard in &hazards {
        say!("check: redis: {hazard}");
    }
    if let Some(why) = unread {
        say!("check: redis settings unchecked: cannot read INFO ({why}); allow +info");
    }
    Ok(if remaining > 0 {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

pub(super) fn cmd_stats(
    config: &Config,
    format: stats::Format,
    queues: Option<&str>,
    scan: bool,
) -> Result<ExitCode> {
    let queues = match queues.or(config.worker.queues.as_deref()) {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    let opts = stats::Options {
        queues,
        scan,
        overdue_after: config.overdue_after,
        limits: config.limits.clone(),
    };
    let now = timestamp::now();
    let parts = shard::map(&shard::checked_all(config)?, |config| {
        let probe = Probe::of(&config.redis);
        with_store(&config.redis, |store| {
            stats::collect(store, &opts, &probe, now)
        })
    })?;
    // There is at least one shard.
    let figures = stats::merge(&config.prefix, parts).expect("a prefix has a shard");
    out()
        .write_all(stats::render(&figures, format).as_bytes())
        .map_err(|e| Error::io("cannot write output", e))?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_ps(config: &Config, format: ps::Format) -> Result<ExitCode> {
    let ps::Processes {
        listed,
        python_seen,
    } = ps::collect(config)?;
    let text = ps::render(
        &listed,
        format,
        timestamp::now(),
        crate::terminal::csv_escapes(),
    )?;
    out()
        .write_all(&text)
        .map_err(|e| Error::io("cannot write output", e))?;
    if listed.is_empty() && format == ps::Format::Table {
        say!(
            "redbike: no dispatcher or worker is registered under prefix {} (Python processes never are)",
            config.prefix
        );
    }
    if let (Some(seen), ps::Format::Table) = (python_seen, format) {
        say!("redbike: a Python redbike process shares this prefix, which ps cannot list (it does not register): {seen}");
    }
    Ok(ExitCode::Success)
}

pub(super) fn cmd_top(config: &Config, once: bool, queues: Option<&str>) -> Result<ExitCode> {
    if config.shards > 1 {
        return Err(Error::Input(format!(
            "top shows one unsplit prefix, and {} is split into {} shards: look at a shard with shards = 1 and --prefix set to its prefix (`redbike ping` lists them)",
            config.prefix, config.shards
        )));
    }
    shard::check_recorded(config)?;
    let queues = match queues {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    crate::top::run(config, &crate::top::Options { once, queues })?;
    Ok(ExitCode::Success)
}
