//! `redbike stats`: exact figures in each format, cheap reads by default, --scan.

use std::collections::{BTreeMap, BTreeSet};

use redis::Commands;
use serde_json::{json, Value};

use crate::harness::*;

/// Known contents, read back by every test:
/// - queue A: `b:A`, `a:A` (a:A at the RPOP end, status `ENQ:1000`)
/// - queue B: `c:B`, whose status says `WRK:5`, so its wait is unknown
/// - queue `my-q`: `g:my-q`, enqueued now
/// - queue Z: only a members set (found by --scan, length 0)
/// - timeline: `d:D` at 100, `e:D` at 200 (both due), `f:D` at 4000000000
/// - lease index `t-leases`: 2 members; one lease key `t-work-A-x:A`
/// - statuses: ENQ 3, TML 3, WRK 1, and one unparsable value; HALT is set
fn populate(s: &RedisServer, d: &tempfile::TempDir) {
    let set = |id: &str, sched: &str| {
        bike(s, d.path()).args(["set", id, sched]).ok();
    };
    for (id, sched) in [
        ("a:A", "NOW"),
        ("b:A", "NOW"),
        ("c:B", "NOW"),
        ("d:D", "AT:100"),
        ("e:D", "AT:200"),
        ("f:D", "AT:4000000000"),
        ("g:my-q", "NOW"),
    ] {
        set(id, sched);
    }
    let mut con = s.con();
    let _: () = con.hset("t-statuses", "a:A", "ENQ:1000").unwrap();
    let _: () = con.hset("t-statuses", "c:B", "WRK:5").unwrap();
    let _: () = con.hset("t-statuses", "bad:A", "garbage").unwrap();
    let _: () = con
        .zadd_multiple("t-leases", &[(1, "x:A"), (2, "y:B")])
        .unwrap();
    let _: () = con.set("t-work-A-x:A", "0123456789abcdef").unwrap();
    let _: () = con.sadd("t-work-Z-members", "z:Z").unwrap();
    bike(s, d.path()).args(["control", "HALT"]).ok();
}

/// Seconds since `g:my-q` was enqueued, at `time`.
fn age_of_g(s: &RedisServer, time: i64) -> i64 {
    let st: String = s.con().hget("t-statuses", "g:my-q").unwrap();
    time - st.strip_prefix("ENQ:").unwrap().parse::<i64>().unwrap()
}

fn stats_json(s: &RedisServer, d: &tempfile::TempDir, args: &[&str]) -> Value {
    let out = bike(s, d.path())
        .args(["stats", "--format", "json"])
        .args(args)
        .ok();
    serde_json::from_str(&out).expect("stats --format json prints JSON")
}

#[test]
fn json_with_scan_has_every_figure() {
    let s = RedisServer::start();
    let d = workdir();
    populate(&s, &d);
    let mut got = stats_json(&s, &d, &["--scan", "--queues", "A:C:A"]);
    let t = got["time"].as_i64().unwrap();
    // The Redis settings (tests/cli/hazards.rs covers them): a server of the harness
    // has no persistence and no maxmemory.
    let redis = got.as_object_mut().unwrap().remove("redis").unwrap();
    assert_eq!(redis["maxmemory_policy"], "noeviction");
    assert_eq!(redis["maxmemory_bytes"], 0);
    assert_eq!(redis["evicted_keys"], 0);
    assert_eq!(redis["persistence"], "off");
    assert_eq!(redis["hazards"][0]["kind"], "no-persistence");
    assert!((t - now()).abs() <= 5);
    let expected = json!({
        "prefix": "t",
        "time": t,
        "scanned": true,
        "schedules": 7,
        "halted": true,
        "timeline": {"jobs": 3, "due": 2, "oldest_due_lateness_seconds": t - 100},
        "running": 2,
        "queues": [
            {"queue": "A", "length": 2, "oldest_age_seconds": t - 1000, "limit": null, "leased": null},
            {"queue": "B", "length": 1, "oldest_age_seconds": null, "limit": null, "leased": null},
            {"queue": "C", "length": 0, "oldest_age_seconds": 0, "limit": null, "leased": null},
            {"queue": "Z", "length": 0, "oldest_age_seconds": 0, "limit": null, "leased": null},
            {"queue": "my-q", "length": 1, "oldest_age_seconds": age_of_g(&s, t), "limit": null, "leased": null},
        ],
        "statuses": {"ENQ": 3, "TML": 3, "WRK": 1},
        "unparsable_statuses": 1,
        "lease_keys": 1,
        "alive": {
            "dispatchers": 0, "failing": 0,
            "workers": 0,
            "workers_per_queue": {"A": 0, "B": 0, "C": 0, "Z": 0, "my-q": 0},
        },
        "overdue": {"jobs": 2, "after_seconds": 60},
        "recent_runs": {"runs_per_minute": 0, "lateness_samples": 0,
            "lateness_p50_seconds": null, "lateness_p99_seconds": null,
            "recent_failures": 0},
        "paused_jobs": 0,
        "retrying_jobs": 0,
        "backlog_jobs": 0,
        "stale": 0,
        "paused_queues": [],
        "history_unfiled": 0,
        "python_seen": null,
        "schedules_lost": null,
    });
    assert_eq!(got, expected);
}

/// The commands Redis counted since the last CONFIG RESETSTAT, lower case.
fn commands_seen(s: &RedisServer) -> BTreeSet<String> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut s.con())
        .unwrap();
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

#[test]
fn default_path_reads_named_queues_with_cheap_commands_only() {
    let s = RedisServer::start();
    let d = workdir();
    populate(&s, &d);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut s.con())
        .unwrap();
    let got = stats_json(&s, &d, &["--queues", "B:A"]);
    let t = got["time"].as_i64().unwrap();
    assert_eq!(got["scanned"], json!(false));
    assert_eq!(
        got["queues"],
        json!([
            {"queue": "A", "length": 2, "oldest_age_seconds": t - 1000, "limit": null, "leased": null},
            {"queue": "B", "length": 1, "oldest_age_seconds": null, "limit": null, "leased": null},
        ])
    );
    for absent in ["statuses", "unparsable_statuses", "lease_keys"] {
        assert_eq!(got[absent], Value::Null, "{absent}");
    }
    let seen = commands_seen(&s);
    assert!(seen.contains("llen") && seen.contains("zcount"), "{seen:?}");
    // INFO and CONFIG GET save read the Redis settings (one round trip).
    let cheap = [
        "hlen",
        "get",
        "zcard",
        "zcount",
        "zrange",
        "llen",
        "lindex",
        "hget",
        "hgetall",
        "info",
        "config|get",
        "smembers",
        // The run history: HMGET of two per-minute counts, the recent runs: the
        // event stream's last 1000 entries and the bounded list.
        "hmget",
        "xrevrange",
        "lrange",
        // The evidence of a Python peer and its time left.
        "pttl",
    ];
    // Connection set-up and this test's own INFO and CONFIG.
    let setup = [
        "client|setinfo",
        "hello",
        "select",
        "ping",
        "info",
        "config|resetstat",
    ];
    for cmd in &seen {
        assert!(
            cheap.contains(&cmd.as_str()) || setup.contains(&cmd.as_str()),
            "stats without --scan sent {cmd}; all: {seen:?}"
        );
    }
}

#[test]
fn queues_come_from_the_config_and_text_reads_well() {
    let s = RedisServer::start();
    let d = workdir();
    populate(&s, &d);
    std::fs::write(path(&d, ".redbike.conf"), "[redbike]\nqueues = \"B:A:B\"\n").unwrap();
    let out = bike(&s, d.path()).args(["stats"]).ok();
    // The Redis settings' lines (their figures vary; tests/cli/hazards.rs checks them).
    let (redis, out): (Vec<&str>, Vec<&str>) = out
        .lines()
        .partition(|l| l.starts_with("redis ") || l.starts_with("warning "));
    assert_eq!(redis.len(), 2, "{redis:?}");
    assert!(redis[0].ends_with(" used, no maxmemory, 0 key(s) evicted, persistence off"));
    assert!(redis[1].starts_with("warning     no persistence: "));
    let out = out.join("\n") + "\n";
    let t: i64 = out
        .lines()
        .find_map(|l| l.strip_prefix("time        "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let iso = chrono::DateTime::from_timestamp(t, 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ");
    let expected = format!(
        "prefix      t
time        {t} ({iso})
halted      yes
schedules   7
timeline    3 job(s), 2 due, the oldest due {}s late
running     2 (from t-leases; Python workers' jobs are not counted)
alive       0 dispatcher(s), 0 worker(s) registered (Python processes do not register)
workers     A: 0, B: 0
overdue     2 job(s) due for over 60s and not dispatched: no dispatcher runs, or HALT is set
stale       0 (every job succeeded within its bound)
queue       A: 2 waiting, the oldest for {}s
queue       B: 1 waiting, the oldest for an unknown time (its status is not ENQ)
runs        0 per minute, 0 failure(s) in the last minute; lateness p50 -, p99 - (0 run(s) of the last minute); 0 history entr(ies) not yet filed
python      none seen in the last hour
",
        t - 100,
        t - 1000
    );
    assert_eq!(out, expected);
}

/// One parsed sample: name and labels.
type Series = (String, BTreeMap<String, String>);

/// Parses a label set `k="v",...` with the exposition format's escapes.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").expect("label=\"");
        assert!(valid_name(key), "label name {key:?}");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("label value closes") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    c => panic!("bad escape \\{c}"),
                },
                (_, c) => value.push(c),
            }
        };
        assert!(labels.insert(key.to_string(), value).is_none(), "{text}");
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    labels
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks the text exposition format and returns every sample: HELP and TYPE before
/// the samples of a family, each family in one block, each series once.
pub(crate) fn parse_exposition(text: &str) -> BTreeMap<Series, f64> {
    assert!(text.ends_with('\n'));
    let mut samples = BTreeMap::new();
    let mut typed: BTreeMap<String, bool> = BTreeMap::new(); // name -> HELP seen
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(!help.is_empty() && !typed.contains_key(name), "{line}");
            typed.insert(name.to_string(), false);
            if let Some(prev) = current.replace(name.to_string()) {
                done.insert(prev);
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            // Counters end in _total; everything else is a gauge.
            let kind = |n: &String| match n.ends_with("_total") {
                true => format!("{n} counter"),
                false => format!("{n} gauge"),
            };
            assert_eq!(Some(rest), current.as_ref().map(kind).as_deref());
            typed.insert(current.clone().unwrap(), true);
        } else {
            let (series, value) = line.rsplit_once(' ').expect("name{labels} value");
            let (name, labels) = series.split_once('{').expect("labels");
            let labels = labels.strip_suffix('}').expect("labels close");
            assert!(valid_name(name) && name.starts_with("redbike_"), "{line}");
            assert_eq!(
                current.as_deref(),
                Some(name),
                "sample outside its family: {line}"
            );
            assert_eq!(typed.get(name), Some(&true), "TYPE before samples: {line}");
            assert!(!done.contains(name));
            let labels = parse_labels(labels);
            assert!(labels.contains_key("prefix"), "{line}");
            let value: f64 = value.parse().expect("a number");
            let key = (name.to_string(), labels);
            assert!(
                samples.insert(key, value).is_none(),
                "duplicate series: {line}"
            );
        }
    }
    samples
}

fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let mut l: BTreeMap<String, String> = [("prefix".to_string(), "t".to_string())].into();
    for (k, v) in labels {
        l.insert(k.to_string(), v.to_string());
    }
    (name.to_string(), l)
}

#[test]
fn prometheus_output_is_valid_exposition_with_exact_figures() {
    let s = RedisServer::start();
    let d = workdir();
    populate(&s, &d);
    let out = bike(&s, d.path())
        .args([
            "stats",
            "--format",
            "prometheus",
            "--scan",
            "--queues",
            "A:C",
        ])
        .ok();
    let mut got = parse_exposition(&out);
    let t = got[&series("redbike_stats_time_seconds", &[])] as i64;
    let used = got
        .remove(&series("redbike_redis_used_memory_bytes", &[]))
        .unwrap();
    assert!(used > 0.0);
    let q = |name: &str, queue: &str| series(name, &[("queue", queue)]);
    let ev = |event: &str| series("redbike_status_jobs", &[("event", event)]);
    let hazard = |kind: &str| series("redbike_redis_hazard", &[("kind", kind)]);
    let expected: BTreeMap<Series, f64> = [
        (series("redbike_stats_time_seconds", &[]), t),
        (series("redbike_halted", &[]), 1),
        (series("redbike_schedules", &[]), 7),
        (series("redbike_timeline_jobs", &[]), 3),
        (series("redbike_timeline_due_jobs", &[]), 2),
        (
            series("redbike_timeline_oldest_due_lateness_seconds", &[]),
            t - 100,
        ),
        (series("redbike_running_jobs", &[]), 2),
        (series("redbike_overdue_jobs", &[]), 2),
        (series("redbike_overdue_after_seconds", &[]), 60),
        (series("redbike_dispatchers_alive", &[]), 0),
        (series("redbike_workers_alive", &[]), 0),
        (series("redbike_processes_failing", &[]), 0),
        (q("redbike_queue_workers_alive", "A"), 0),
        (q("redbike_queue_workers_alive", "B"), 0),
        (q("redbike_queue_workers_alive", "C"), 0),
        (q("redbike_queue_workers_alive", "Z"), 0),
        (q("redbike_queue_workers_alive", "my-q"), 0),
        (q("redbike_queue_length", "A"), 2),
        (q("redbike_queue_length", "B"), 1),
        (q("redbike_queue_length", "C"), 0),
        (q("redbike_queue_length", "Z"), 0),
        (q("redbike_queue_length", "my-q"), 1),
        (q("redbike_queue_oldest_age_seconds", "A"), t - 1000),
        (q("redbike_queue_oldest_age_seconds", "C"), 0),
        (q("redbike_queue_oldest_age_seconds", "Z"), 0),
        (
            q("redbike_queue_oldest_age_seconds", "my-q"),
            age_of_g(&s, t),
        ),
        (ev("ENQ"), 3),
        (ev("TML"), 3),
        (ev("WRK"), 1),
        (series("redbike_unparsable_statuses", &[]), 1),
        (series("redbike_lease_keys", &[]), 1),
        (series("redbike_redis_maxmemory_bytes", &[]), 0),
        (series("redbike_redis_evicted_keys_total", &[]), 0),
        (
            series(
                "redbike_redis_maxmemory_policy",
                &[("policy", "noeviction")],
            ),
            1,
        ),
        (series("redbike_redis_persistence", &[]), 0),
        (series("redbike_paused_jobs", &[]), 0),
        (series("redbike_retrying_jobs", &[]), 0),
        (series("redbike_backlog_jobs", &[]), 0),
        (series("redbike_jobs_stale", &[]), 0),
        (series("redbike_history_unfiled", &[]), 0),
        (series("redbike_python_peer_seen", &[]), 0),
        (hazard("eviction-policy"), 0),
        (hazard("no-persistence"), 1),
        (hazard("memory-near-limit"), 0),
        (hazard("keys-evicted"), 0),
        (series("redbike_runs_per_minute", &[]), 0),
        (series("redbike_recent_failures", &[]), 0),
        (series("redbike_run_lateness_samples", &[]), 0),
    ]
    .into_iter()
    .map(|(k, v)| (k, v as f64))
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn scan_matches_the_prefix_literally() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    let _: () = con.lpush("t*-work-A", "a:A").unwrap();
    let _: () = con.lpush("tx-work-B", "b:B").unwrap();
    let out = bike(&s, d.path())
        .args(["--prefix", "t*", "stats", "--scan", "--format", "json"])
        .ok();
    let got: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = got["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["A"]);
    // Nothing at all: zeros, and no queue to report.
    let empty = stats_json(&s, &d, &[]);
    assert_eq!(empty["schedules"], json!(0));
    assert_eq!(empty["running"], json!(0));
    assert_eq!(empty["queues"], json!([]));
}

#[test]
fn bad_queue_list_is_a_usage_error() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["stats", "--queues", "A::B"])
        .run()
        .fails(2, "bad queue list");
    bike(&s, d.path())
        .args(["stats", "--format", "xml"])
        .run()
        .fails(2, "invalid value 'xml'");
    assert_eq!(s.dbsize(), 0);
}
