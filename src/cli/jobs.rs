//! The commands about jobs: `set`, `unset`, `run`, `backfill`, `pause`, `resume`, `tell`,
//! `holds-lease`, `history`, `next` and `load`. Each parses its arguments, calls the
//! layer below and prints what it returns.

use std::os::unix::ffi::OsStrExt;

use crate::{
    config::Config,
    dispatch::timefile,
    error::{Error, ExitCode, Result},
    jitter, jobid,
    operator::backfill,
    operator::control,
    operator::loader,
    redis::events::{Via, Who},
    redis::hazards::{self, Probe},
    redis::store::{with_store, PlaceItem, Placed},
    schedule::timestamp,
    schedule::{Placement, Schedule},
    shard,
};

use super::{out, parse_ts, parse_ts_with, print_line, rule_error, HistoryFormat};

/// Who acts through a command, for the audit entries of the event stream.
pub(super) fn who(config: &Config) -> Who {
    Who::new(config.events, Via::Cli)
}

pub(super) fn cmd_set(
    config: &Config,
    id: &str,
    text: &str,
    after: Option<&str>,
) -> Result<ExitCode> {
    jobid::validate(id)?;
    let schedule = Schedule::parse_new(text)?;
    let after = parse_ts("--after", after, config)?;
    let config = &shard::checked_for_job(config, id)?;
    let reference = timefile::reference_for_set(after, &config.timefile)?;
    let offset = jitter::offset_in(&config.jitter, id);
    let placement = jitter::placement(&schedule, reference, config.timezone, offset)
        .map_err(rule_error(text))?;
    let item = PlaceItem::new(id, &schedule, text, placement).with_deadline(
        &config.policy().bounds(),
        &schedule,
        timestamp::now(),
    );
    let probe = Probe::of(&config.redis);
    let who = who(config);
    let audit = who.audit("set", id, text);
    let placed = with_store(&config.redis, |store| {
        hazards::before_writing(store.con, &probe, 1)?;
        store
            .place(&item, timestamp::now(), &audit)
            .map_err(|e| loader::written_before(e, 0, 1))
    })?;
    print_line(&describe_placement(id, placement, placed))?;
    Ok(ExitCode::Success)
}

/// The line `set` prints.
fn describe_placement(id: &str, placement: Placement, placed: Placed) -> String {
    let shown = crate::terminal::id(id);
    match (placement, placed) {
        // Before the placement: a paused job's schedule is stored, never placed.
        (_, Placed::Paused) => {
            format!("{shown}: schedule stored; the job stays paused (`redbike resume {shown}` places it)")
        }
        (Placement::Timeline(ts), _) => {
            format!("{shown}: next run at {ts} ({})", timestamp::iso_utc(ts))
        }
        (_, Placed::Enqueued) => format!("{shown}: enqueued"),
        (_, Placed::AlreadyQueued) => format!("{shown}: already in its queue"),
        (_, Placed::Running) => {
            format!("{shown}: running now; it will run again when this run ends")
        }
        _ => format!("{shown}: stopped"),
    }
}

pub(super) fn cmd_run(config: &Config, id: &str) -> Result<ExitCode> {
    let shown = crate::terminal::id(id);
    let report = control::run(config, id, timestamp::now(), &who(config))?;
    let stays = if report.paused {
        "; it stays paused"
    } else {
        ""
    };
    print_line(&match report.ran {
        control::Ran::Enqueued => {
            format!("{shown}: enqueued; after the run it goes back per its schedule{stays}")
        }
        control::Ran::AlreadyQueued => format!("{shown}: already in its queue; nothing changed"),
        control::Ran::Running => format!(
            "{shown}: running now; it runs once more right after this run{stays} (a Python worker's run ignores this)"
        ),
    })?;
    if report.halted {
        say!("redbike: the prefix is halted (control HALT): nothing runs until `redbike control RESUME`");
    }
    Ok(ExitCode::Success)
}

pub(super) fn cmd_kill(config: &Config, id: &str) -> Result<ExitCode> {
    let shown = crate::terminal::id(id);
    match control::kill(config, id, &who(config))? {
        control::Killed::Asked { .. } => {
            print_line(&format!(
                "{shown}: its worker stops this run now (SIGTERM, SIGKILL after its grace period); the job then goes on per its schedule"
            ))?;
            return Ok(ExitCode::Success);
        }
        control::Killed::NotRunning => say!("redbike: {shown}: not running; nothing changed"),
        control::Killed::Halted => say!(
            "redbike: the prefix is halted (control HALT): its workers stop their runs anyway; nothing changed"
        ),
        control::Killed::Python => say!(
            "redbike: {shown}: run by a worker that takes no kills (the Python original); nothing changed"
        ),
    }
    Ok(ExitCode::Failure)
}

pub(super) fn cmd_backfill(
    config: &Config,
    id: &str,
    from: &str,
    to: &str,
    max: u64,
) -> Result<ExitCode> {
    let parse = |flag, text| parse_ts(flag, Some(text), config).map(Option::unwrap_or_default);
    let range = backfill::Range {
        from: parse("--from", from)?,
        to: parse("--to", to)?,
        max,
    };
    let done = backfill::backfill(config, id, &range, timestamp::now(), &who(config))?;
    let shown = crate::terminal::id(id);
    let (first, last) = match (done.runs.first(), done.runs.last()) {
        (Some(f), Some(l)) => (timestamp::iso_utc(*f), timestamp::iso_utc(*l)),
        // backfill refuses a range with no run.
        _ => return Err(Error::Input(format!("{shown}: no run to backfill"))),
    };
    let when = if done.started {
        "the first is queued now"
    } else {
        "they begin when its current run ends"
    };
    print_line(&format!(
        "{shown}: {} run(s) to backfill, due {first} to {last}, one at a time; {when}",
        done.runs.len()
    ))?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_cancel_backfill(config: &Config, id: &str) -> Result<ExitCode> {
    let shown = crate::terminal::id(id);
    print_line(&match backfill::cancel(config, id, &who(config))? {
        Some(n) => format!(
            "{shown}: backfill cancelled, {n} run(s) dropped; a run of it queued or running still runs"
        ),
        None => format!("{shown}: no backfill to cancel; nothing changed"),
    })?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_pause(
    config: &Config,
    id: Option<&str>,
    queue: Option<&str>,
    note: Option<&str>,
) -> Result<ExitCode> {
    let note = note.unwrap_or_default();
    let now = timestamp::now();
    if let Some(q) = queue {
        let added = control::pause_queue_everywhere(config, q, note, now, &who(config))?;
        let shown_q = crate::terminal::id(q);
        print_line(&if added {
            format!("queue {shown_q}: paused; redbike workers stop claiming from it (jobs keep arriving in it)")
        } else {
            format!("queue {shown_q}: already paused; nothing changed")
        })?;
        return Ok(ExitCode::Success);
    }
    // clap requires the job id when --queue is absent.
    let id = id.unwrap_or_default();
    let paused = control::pause(config, id, note, now, &who(config))?;
    let shown = crate::terminal::id(id);
    print_line(&match paused {
        control::Paused::Paused => {
            format!("{shown}: paused; its schedule is kept (`redbike resume {shown}` places it)")
        }
        control::Paused::Running => {
            format!("{shown}: paused; its current run finishes, then it is not placed")
        }
        control::Paused::Already => format!("{shown}: already paused; nothing changed"),
    })?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_resume(
    config: &Config,
    id: Option<&str>,
    queue: Option<&str>,
) -> Result<ExitCode> {
    if let Some(q) = queue {
        let removed = control::resume_queue_everywhere(config, q, &who(config))?;
        let shown_q = crate::terminal::id(q);
        print_line(&if removed {
            format!("queue {shown_q}: resumed; its workers claim from it again")
        } else {
            format!("queue {shown_q}: not paused; nothing changed")
        })?;
        return Ok(ExitCode::Success);
    }
    // clap requires the job id when --queue is absent.
    let id = id.unwrap_or_default();
    let resumed = control::resume(config, id, timestamp::now(), &who(config))?;
    let shown = crate::terminal::id(id);
    print_line(&match resumed {
        control::Resumed::NotPaused => format!("{shown}: not paused; nothing changed"),
        control::Resumed::RunAsked => format!(
            "{shown}: resumed; the run asked with `redbike run` comes first, then it goes back per its schedule"
        ),
        control::Resumed::Placed(placement, placed) => {
            format!("{} (resumed)", describe_placement(id, placement, placed))
        }
    })?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_unset(config: &Config, id: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let shown = crate::terminal::id(id);
    let config = &shard::checked_for_job(config, id)?;
    let who = who(config);
    let audit = who.audit("unset", id, "");
    if with_store(&config.redis, |store| store.unset(id, &audit))? {
        print_line(&format!("{shown}: unset"))?;
    } else {
        print_line(&format!(
            "{shown}: had no schedule; cleared anything left of it"
        ))?;
    }
    Ok(ExitCode::Success)
}

pub(super) fn cmd_tell(config: &Config, id: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let config = &shard::checked_for_job(config, id)?;
    let info = with_store(&config.redis, |store| store.tell(id))?;
    // Serializing a struct of strings, numbers and bools cannot fail.
    let json = serde_json::to_string_pretty(&info).expect("JobInfo serializes");
    print_line(&crate::terminal::json_safe(json))?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_history(
    config: &Config,
    query: &crate::history::Query,
    format: HistoryFormat,
) -> Result<ExitCode> {
    let entries = crate::operator::history::read(config, query)?;
    match format {
        HistoryFormat::Csv => {
            crate::history::write_csv(&entries, out(), crate::terminal::csv_escapes())?
        }
        HistoryFormat::Json => crate::history::write_json(&entries, out())?,
    }
    Ok(ExitCode::Success)
}

pub(super) fn cmd_holds_lease(config: &Config, id: &str, token: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let config = &shard::for_job(config, id)?;
    let token: u64 = token.trim().parse().map_err(|_| {
        Error::Input(format!(
            "bad fencing token {token:?}: give the whole number the job got in REDBIKE_FENCING_TOKEN"
        ))
    })?;
    if with_store(&config.redis, |store| store.holds_lease(id, token))? {
        Ok(ExitCode::Success)
    } else {
        Ok(ExitCode::Failure)
    }
}

pub(super) fn cmd_next(
    config: &Config,
    text: &str,
    count: usize,
    after: Option<&str>,
    job: Option<&str>,
) -> Result<ExitCode> {
    if let Some(id) = job {
        jobid::validate(id)?;
    }
    let offset = job.map_or(0, |id| jitter::offset_in(&config.jitter, id));
    let schedule = Schedule::parse_new(text)?;
    // Only computes runs, so it may reach back as far as rules do (1900).
    let after = parse_ts_with(timestamp::parse_reference, "--after", after, config)?
        .unwrap_or_else(timestamp::now);
    let zone =
        Some(schedule.own_zone().unwrap_or(config.timezone)).filter(|z| *z != chrono_tz::Tz::UTC);
    let line = |ts: i64| match zone {
        Some(z) => format!(
            "{ts} {} {} {z}",
            timestamp::iso_utc(ts),
            timestamp::iso_in(ts, z)
        ),
        None => format!("{ts} {}", timestamp::iso_utc(ts)),
    };
    match &schedule {
        Schedule::Rule(_) | Schedule::Cron(_) => {
            let runs = jitter::next_runs(&schedule, after, config.timezone, offset, count)
                .map_err(rule_error(text))?;
            for ts in &runs {
                print_line(&line(*ts))?;
            }
            if runs.len() < count {
                // Like STOP: a valid rule that has ended, not an error.
                say!(
                    "redbike: no run after {}: the schedule has ended (UNTIL or COUNT \
                     used up, or the year 9999 ends); set and load store it as a \
                     stopped job (status STP)",
                    timestamp::iso_utc(runs.last().copied().unwrap_or(after))
                );
            }
        }
        Schedule::At(ts) => print_line(&line(*ts))?,
        Schedule::Now => print_line(&line(after))?,
        Schedule::Continue => {
            print_line(&line(after))?;
            say!("redbike: CONTINUE runs again as soon as each run ends");
        }
        Schedule::Stop => say!("redbike: STOP never runs"),
    }
    Ok(ExitCode::Success)
}

/// The reference instant of `load` and `dispatch --schedules`.
fn reference(config: &Config, after: Option<i64>) -> Result<i64> {
    timefile::reference_for_set(after, &config.timefile)
}

/// A planner for `config`'s shard: its timefile is the reference instant.
pub(super) fn planner(config: &Config, after: Option<i64>) -> Result<loader::Planner<'_>> {
    Ok(
        loader::Planner::new(reference(config, after)?, config.timezone, &config.jitter)
            .with_stale(&config.stale),
    )
}

/// Keeps only the rows of shard `k` of `config` in `source`'s readings.
pub(super) fn only_shard(source: &mut loader::Source, config: &Config, k: usize) {
    let n = config.shards;
    source.only(move |id| shard::of_job(id, n) as usize == k);
}

pub(super) fn cmd_load(
    config: &Config,
    file: &std::path::Path,
    after: Option<&str>,
) -> Result<ExitCode> {
    let after = parse_ts("--after", after, config)?;
    let mut source = loader::Source::open(file)?;
    // Every row is checked before anything is written, then written in one more
    // reading, each row to its shard; each shard's timefile is its reference instant.
    let configs = shard::all(config)?;
    let planners = configs
        .iter()
        .map(|shard| {
            let at = reference(shard, after)?;
            Ok(loader::Planner::new(at, config.timezone, &config.jitter).with_stale(&config.stale))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut checked = loader::check_split(&mut source, planners)?;
    let shards = shard::checked_all(config)?;
    let n = if shards.len() == 1 {
        let probe = Probe::of(&config.redis);
        with_store(&config.redis, |store| {
            loader::load(store, &mut checked, &probe)
        })?
    } else {
        loader::load_split(&shards, &mut checked)?
    };
    // An action is recorded when it changed something (docs/events.md).
    if n > 0 {
        control::write_once(&shards, &who(config), "load", "", &n.to_string())?;
    }
    // A file name may hold any byte: shown by the terminal rule, as errors show it.
    let shown = crate::terminal::bytes(file.as_os_str().as_bytes());
    print_line(&format!("loaded {n} job(s) from {shown}"))?;
    Ok(ExitCode::Success)
}
