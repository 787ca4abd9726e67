//! The figures as lines for people.

use super::Stats;
use crate::schedule::timestamp;

/// The text rendering, newline-terminated.
pub(super) fn render(s: &Stats) -> String {
    let mut lines = vec![
        format!("prefix      {}", s.prefix),
        format!("time        {} ({})", s.time, timestamp::iso_utc(s.time)),
        format!("halted      {}", if s.halted { "yes" } else { "no" }),
        format!("schedules   {}", s.schedules),
        format!(
            "timeline    {} job(s), {} due{}",
            s.timeline.jobs,
            s.timeline.due,
            match s.timeline.due {
                0 => String::new(),
                _ => format!(
                    ", the oldest due {}s late",
                    s.timeline.oldest_due_lateness_seconds
                ),
            }
        ),
        format!(
            "running     {} (from {}; Python workers' jobs are not counted)",
            s.running,
            crate::redis::keys::Keys::new(&s.prefix).leases
        ),
    ];
    match &s.alive {
        Some(a) => {
            lines.push(format!(
                "alive       {} dispatcher(s), {} worker(s) registered (Python processes do not register)",
                a.dispatchers, a.workers
            ));
            if !a.workers_per_queue.is_empty() {
                let per: Vec<String> = a
                    .workers_per_queue
                    .iter()
                    .map(|(q, n)| format!("{q}: {n}"))
                    .collect();
                lines.push(format!("workers     {}", per.join(", ")));
            }
            if a.failing > 0 {
                lines.push(format!(
                    "failing     {} process(es) kept from their work by an error retrying cannot fix (see redbike ps)",
                    a.failing
                ));
            }
        }
        None => lines.push(format!(
            "alive       unknown: {} holds another type than a set (see redbike check)",
            crate::redis::keys::Keys::new(&s.prefix).procs
        )),
    }
    lines.push(match s.overdue.jobs {
        0 => format!(
            "overdue     0 (no job due for over {}s)",
            s.overdue.after_seconds
        ),
        n => format!(
            "overdue     {n} job(s) due for over {}s and not dispatched: no dispatcher runs, or HALT is set",
            s.overdue.after_seconds
        ),
    });
    lines.push(match s.stale {
        0 => "stale       0 (every job succeeded within its bound)".to_string(),
        n => format!("stale       {n} job(s) not succeeded within their bound (see redbike check)"),
    });
    if s.queues.is_empty() {
        lines.push(
            "queues      none named: use --queues A:B, `queues` in the config, or --scan".into(),
        );
    }
    for q in &s.queues {
        let oldest = match q.oldest_age_seconds {
            _ if q.length == 0 => String::new(),
            Some(age) => format!(", the oldest for {age}s"),
            None => ", the oldest for an unknown time (its status is not ENQ)".into(),
        };
        let limit = match (q.limit, q.leased) {
            (Some(limit), Some(leased)) => format!(", limit {limit} ({leased} leased)"),
            _ => String::new(),
        };
        lines.push(format!(
            "queue       {}: {} waiting{oldest}{limit}",
            q.queue, q.length
        ));
    }
    if s.paused_jobs > 0 {
        lines.push(format!("paused      {} job(s)", s.paused_jobs));
    }
    if s.retrying_jobs > 0 {
        lines.push(format!("retrying    {} job(s)", s.retrying_jobs));
    }
    if s.backlog_jobs > 0 {
        lines.push(format!("backfilling {} job(s)", s.backlog_jobs));
    }
    for q in &s.paused_queues {
        let since = match q.since {
            0 => String::new(),
            t => format!(" since {}", timestamp::iso_utc(t)),
        };
        let note = match q.note.as_str() {
            "" => String::new(),
            n => format!(": \"{n}\""),
        };
        lines.push(format!(
            "paused      queue {}{since} (redbike workers do not claim from it){note}",
            q.queue
        ));
    }
    if let Some(events) = &s.statuses {
        let counts: Vec<String> = events.iter().map(|(e, n)| format!("{e} {n}")).collect();
        lines.push(format!("statuses    {}", counts.join(", ")));
    }
    if let Some(n) = s.unparsable_statuses.filter(|n| *n > 0) {
        lines.push(format!("unparsable  {n} status value(s)"));
    }
    if let Some(n) = s.lease_keys {
        lines.push(format!("lease keys  {n} (any worker's)"));
    }
    let r = &s.recent_runs;
    let secs = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}s"));
    lines.push(format!(
        "runs        {} per minute, {} failure(s) in the last minute; lateness p50 {}, p99 {} ({} run(s) of the last minute); {} history entr(ies) not yet filed",
        r.runs_per_minute,
        r.recent_failures,
        secs(r.lateness_p50_seconds),
        secs(r.lateness_p99_seconds),
        r.lateness_samples,
        s.history_unfiled
    ));
    if let Some(note) = &s.schedules_lost {
        lines.push(format!("lost        {note}"));
    }
    lines.push(match &s.python_seen {
        Some(p) => format!(
            "python      a Python redbike process was seen ({}); idle processes look every second for {}s more",
            p.evidence, p.expires_in_seconds
        ),
        None => "python      none seen in the last hour".into(),
    });
    match &s.redis {
        Some(h) => {
            lines.push(format!(
                "redis       maxmemory-policy {}, {}, {} key(s) evicted, persistence {}",
                h.maxmemory_policy,
                h.memory(),
                h.evicted_keys,
                h.persistence.name()
            ));
            for hazard in &h.hazards {
                lines.push(format!("warning     {hazard}"));
            }
        }
        None => lines.push("redis       settings unknown: INFO refused (allow +info)".into()),
    }
    // Queue names and notes come from Redis: each line is shown by the terminal rule.
    let lines: Vec<_> = lines.iter().map(|l| crate::terminal::text(l)).collect();
    lines.join("\n") + "\n"
}
