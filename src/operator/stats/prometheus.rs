//! The figures in the Prometheus text exposition format, gauges named `redbike_*`.

use super::{figures::Queue, Stats};
use crate::redis::hazards::{Kind, Persistence};

/// One metric family of the exposition (a gauge unless `kind` says otherwise).
struct Gauge {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, i64)>,
}

/// The run history's figures, in seconds (fractions): written apart from the integer
/// gauges.
fn history_metrics(s: &Stats, out: &mut String) {
    let r = &s.recent_runs;
    let prefix = escape_label(&s.prefix);
    let metrics: [(&str, &str, Option<f64>); 5] = [
        (
            "redbike_runs_per_minute",
            "Runs workers recorded over the last minute (estimated from per-minute counts).",
            Some(r.runs_per_minute as f64),
        ),
        (
            "redbike_recent_failures",
            "History entries of the last minute that are failures.",
            Some(r.recent_failures as f64),
        ),
        (
            "redbike_run_lateness_samples",
            "Runs of the last minute the lateness percentiles are taken from.",
            Some(r.lateness_samples as f64),
        ),
        (
            "redbike_run_lateness_p50_seconds",
            "Median seconds from due to start of the runs of the last minute.",
            r.lateness_p50_seconds,
        ),
        (
            "redbike_run_lateness_p99_seconds",
            "99th percentile of seconds from due to start of the runs of the last minute.",
            r.lateness_p99_seconds,
        ),
    ];
    for (name, help, value) in metrics {
        if let Some(v) = value {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{prefix=\"{prefix}\"}} {v}\n"
            ));
        }
    }
}

/// The exposition, newline-terminated.
pub(super) fn render(s: &Stats) -> String {
    let mut out = String::new();
    history_metrics(s, &mut out);
    for g in gauges(s).iter().filter(|g| !g.samples.is_empty()) {
        out.push_str(&format!(
            "# HELP {} {}\n# TYPE {} {}\n",
            g.name, g.help, g.name, g.kind
        ));
        for (labels, value) in &g.samples {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            out.push_str(&format!("{}{{{}}} {value}\n", g.name, labels.join(",")));
        }
    }
    out
}

/// The gauges of `s`; every sample carries the `prefix` label.
fn gauges(s: &Stats) -> Vec<Gauge> {
    let p = || ("prefix", s.prefix.clone());
    let one = |name, help, v: i64| Gauge {
        name,
        help,
        kind: "gauge",
        samples: vec![(vec![p()], v)],
    };
    let per_queue = |name, help, f: &dyn Fn(&Queue) -> Option<i64>| Gauge {
        name,
        help,
        kind: "gauge",
        samples: s
            .queues
            .iter()
            .filter_map(|q| Some((vec![p(), ("queue", q.queue.clone())], f(q)?)))
            .collect(),
    };
    let optional = |name, help, v: Option<u64>| Gauge {
        name,
        help,
        kind: "gauge",
        samples: v.map(|v| (vec![p()], v as i64)).into_iter().collect(),
    };
    let mut gauges = vec![
        one(
            "redbike_stats_time_seconds",
            "Unix time the figures were read.",
            s.time,
        ),
        one(
            "redbike_halted",
            "1 when the control key says HALT.",
            s.halted as i64,
        ),
        one("redbike_schedules", "Stored schedules.", s.schedules as i64),
        one(
            "redbike_timeline_jobs",
            "Jobs on the timeline.",
            s.timeline.jobs as i64,
        ),
        one(
            "redbike_timeline_due_jobs",
            "Timeline jobs due now or earlier, not yet dispatched.",
            s.timeline.due as i64,
        ),
        one(
            "redbike_timeline_oldest_due_lateness_seconds",
            "Seconds the oldest due timeline job is past its time (0 when none is due).",
            s.timeline.oldest_due_lateness_seconds,
        ),
        one(
            "redbike_running_jobs",
            "Jobs running under a lease in the lease index (Python workers' jobs are not counted).",
            s.running as i64,
        ),
        per_queue(
            "redbike_queue_length",
            "Jobs waiting in the work queue.",
            &|q| Some(q.length as i64),
        ),
        per_queue(
            "redbike_queue_limit",
            "The fleet-wide limit of the queue: most of its jobs leased at once ([redbike.limits]).",
            &|q| q.limit.map(|v| v as i64),
        ),
        per_queue(
            "redbike_queue_leased",
            "Jobs of a limited queue leased now, from the running index.",
            &|q| q.leased.map(|v| v as i64),
        ),
        per_queue(
            "redbike_queue_oldest_age_seconds",
            "Seconds the next job of the queue has waited (0 when empty; absent when unknown).",
            &|q| q.oldest_age_seconds,
        ),
        one(
            "redbike_paused_jobs",
            "Jobs paused with redbike pause.",
            s.paused_jobs as i64,
        ),
        one(
            "redbike_retrying_jobs",
            "Jobs waiting to retry a failed run ([redbike.retries.Q]).",
            s.retrying_jobs as i64,
        ),
        one(
            "redbike_backlog_jobs",
            "Jobs with runs of past occurrences to come (backfill, catch-up all).",
            s.backlog_jobs as i64,
        ),
        one(
            "redbike_history_unfiled",
            "Run history entries workers have not yet filed into their jobs' lists.",
            s.history_unfiled as i64,
        ),
        one(
            "redbike_python_peer_seen",
            "1 while the evidence of a Python redbike process on the prefix lasts (idle processes then look every second), else 0.",
            i64::from(s.python_seen.is_some()),
        ),
        Gauge {
            name: "redbike_queue_paused_since_seconds",
            help: "Unix time a queue was paused (redbike pause --queue; 0 when unknown); absent when not paused.",
            kind: "gauge",
            samples: s
                .paused_queues
                .iter()
                .map(|q| (vec![p(), ("queue", q.queue.clone())], q.since))
                .collect(),
        },
        Gauge {
            name: "redbike_status_jobs",
            help: "Jobs per status event (needs --scan).",
            kind: "gauge",
            samples: s
                .statuses
                .iter()
                .flatten()
                .map(|(e, n)| (vec![p(), ("event", e.clone())], *n as i64))
                .collect(),
        },
        one(
            "redbike_overdue_jobs",
            "Timeline jobs due for longer than overdue-after and not dispatched (no dispatcher runs, or HALT is set).",
            s.overdue.jobs as i64,
        ),
        one(
            "redbike_jobs_stale",
            "Jobs that have not succeeded within their bound (stale; see redbike check).",
            s.stale as i64,
        ),
        one(
            "redbike_overdue_after_seconds",
            "The overdue-after threshold, in seconds.",
            s.overdue.after_seconds as i64,
        ),
        optional(
            "redbike_dispatchers_alive",
            "Registered dispatchers alive (Python processes do not register).",
            s.alive.as_ref().map(|a| a.dispatchers),
        ),
        optional(
            "redbike_workers_alive",
            "Registered workers alive (Python processes do not register).",
            s.alive.as_ref().map(|a| a.workers),
        ),
        optional(
            "redbike_processes_failing",
            "Registered processes kept from their work by an error retrying cannot fix (redbike ps names it).",
            s.alive.as_ref().map(|a| a.failing),
        ),
        Gauge {
            name: "redbike_queue_workers_alive",
            help: "Registered workers alive that work the queue.",
            kind: "gauge",
            samples: s
                .alive
                .iter()
                .flat_map(|a| &a.workers_per_queue)
                .map(|(q, n)| (vec![p(), ("queue", q.clone())], *n as i64))
                .collect(),
        },
        optional(
            "redbike_unparsable_statuses",
            "Status values not of the shape EVENT:TS (needs --scan).",
            s.unparsable_statuses,
        ),
        optional(
            "redbike_lease_keys",
            "Lease keys of running jobs, any worker's (needs --scan).",
            s.lease_keys,
        ),
    ];
    gauges.extend(redis_gauges(s));
    gauges
}

/// The Redis settings' figures; none when INFO was refused.
fn redis_gauges(s: &Stats) -> Vec<Gauge> {
    let Some(h) = &s.redis else {
        return Vec::new();
    };
    let p = || ("prefix", s.prefix.clone());
    let one = |name, help, v: u64| Gauge {
        name,
        help,
        kind: "gauge",
        samples: vec![(vec![p()], v as i64)],
    };
    let persistence = match h.persistence {
        Persistence::Unknown => None,
        other => Some(u64::from(other != Persistence::Off)),
    };
    vec![
        one(
            "redbike_redis_used_memory_bytes",
            "Memory Redis uses (INFO used_memory).",
            h.used_memory_bytes,
        ),
        one(
            "redbike_redis_maxmemory_bytes",
            "Redis maxmemory (0: no limit).",
            h.maxmemory_bytes,
        ),
        Gauge {
            name: "redbike_redis_evicted_keys_total",
            help: "Keys Redis evicted since it started, any database's (INFO evicted_keys).",
            kind: "counter",
            samples: vec![(vec![p()], h.evicted_keys as i64)],
        },
        Gauge {
            name: "redbike_redis_maxmemory_policy",
            help: "Redis maxmemory-policy, as the label policy (always 1).",
            kind: "gauge",
            samples: vec![(vec![p(), ("policy", h.maxmemory_policy.clone())], 1)],
        },
        Gauge {
            name: "redbike_redis_persistence",
            help:
                "1 when Redis persists (AOF or RDB save points), 0 when not; absent when unknown.",
            kind: "gauge",
            samples: persistence
                .map(|v| (vec![p()], v as i64))
                .into_iter()
                .collect(),
        },
        Gauge {
            name: "redbike_redis_hazard",
            help: "1 when the Redis setting or figure named by kind can lose jobs.",
            kind: "gauge",
            samples: Kind::ALL
                .iter()
                .map(|k| {
                    let on = h.hazards.iter().any(|x| x.kind == *k);
                    (vec![p(), ("kind", k.name().to_string())], i64::from(on))
                })
                .collect(),
        },
    ]
}

/// Label values escape backslash, double quote and newline (exposition format 0.0.4).
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
