//! Redis settings that lose jobs without an error (an evicting maxmemory-policy, no
//! persistence, memory at maxmemory, evicted keys) are named by `ping`, `stats` (every
//! format), `check` and the start-up log of `dispatch` and `work`; `load` and `set`
//! refuse to write into a full Redis and never report as loaded what is not there.

use redis::Commands;
use serde_json::Value;

use crate::{dispatch::signal, harness::*};

/// A file of `n` rows `jobI:A,FREQ=DAILY;BYHOUR=9`.
fn schedules_file(d: &tempfile::TempDir, n: usize) -> std::path::PathBuf {
    let file = path(d, "jobs.csv");
    let rows: String = (0..n)
        .map(|i| format!("job{i}:A,FREQ=DAILY;BYHOUR=9\n"))
        .collect();
    std::fs::write(&file, rows).unwrap();
    file
}

fn ping(s: &RedisServer, d: &tempfile::TempDir) -> String {
    bike(s, d.path()).args(["ping"]).ok()
}

fn stats(s: &RedisServer, d: &tempfile::TempDir, format: &str) -> String {
    bike(s, d.path()).args(["stats", "--format", format]).ok()
}

fn stats_json(s: &RedisServer, d: &tempfile::TempDir) -> Value {
    serde_json::from_str(&stats(s, d, "json")).expect("stats --format json prints JSON")
}

/// The kinds of hazard in `stats --format json`.
fn json_kinds(v: &Value) -> Vec<String> {
    v["redis"]["hazards"]
        .as_array()
        .expect("redis.hazards")
        .iter()
        .map(|h| h["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The value of `redbike_redis_hazard{prefix="t",kind=KIND}`.
fn prometheus_hazard(text: &str, kind: &str) -> Option<i64> {
    let series = format!("redbike_redis_hazard{{prefix=\"t\",kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map(|v| v.parse().unwrap())
}

/// Starts a dispatcher and a worker, waits until each has logged every one of `parts`
/// (at most 10 s each), stops them, and returns their logs.
fn startup_logs(s: &RedisServer, d: &tempfile::TempDir, parts: &[&str]) -> [String; 2] {
    startup_logs_as(s, d, &s.url(), parts)
}

/// [`startup_logs`] with the Redis URL `url`.
fn startup_logs_as(
    s: &RedisServer,
    d: &tempfile::TempDir,
    url: &str,
    parts: &[&str],
) -> [String; 2] {
    let rb = || bike(s, d.path()).env("REDBIKE_REDIS_URL", url);
    let dispatcher = Bg(Some(rb().args(["dispatch"]).spawn()));
    let worker = Bg(Some(rb().args(["work", "A", "--", "true"]).spawn()));
    for p in [&dispatcher, &worker] {
        for part in parts {
            wait_stderr(p.child(), part, 10.0);
        }
        signal(p.child(), libc::SIGTERM);
    }
    [dispatcher, worker].map(|p| {
        let (code, err) = p.finish(15.0);
        assert_eq!(code, Some(0), "{err}");
        err
    })
}

/// Asserts each of `parts` is in a warn line of both logs.
fn logged(logs: &[String; 2], parts: &[&str]) {
    for (who, log) in ["dispatcher", "worker"].iter().zip(logs) {
        for part in parts {
            let line = log
                .lines()
                .find(|l| l.contains(part))
                .unwrap_or_else(|| panic!("{who} did not log {part:?}: {log}"));
            assert!(
                line.contains("level=warn") && line.contains(&format!("msg=\"{who}: ")),
                "{line}"
            );
        }
    }
}

#[test]
fn an_evicting_policy_is_named_everywhere() {
    let s = RedisServer::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    let d = workdir();
    let warning = "maxmemory-policy is allkeys-lru: when memory runs out Redis deletes any key";
    let out = ping(&s, &d);
    assert!(out.contains("\nmaxmemory-policy: allkeys-lru\n"), "{out}");
    assert!(out.contains(&format!("\nwarning: {warning}")), "{out}");
    assert!(
        out.contains("\nmemory: ") && out.contains(" used of maxmemory 64.0 MiB ("),
        "{out}"
    );
    assert!(out.contains("\nevicted-keys: 0\n"), "{out}");

    let text = stats(&s, &d, "text");
    assert!(
        text.contains("redis       maxmemory-policy allkeys-lru, "),
        "{text}"
    );
    assert!(text.contains(&format!("warning     {warning}")), "{text}");
    let json = stats_json(&s, &d);
    assert_eq!(json["redis"]["maxmemory_policy"], "allkeys-lru");
    assert_eq!(json["redis"]["maxmemory_bytes"], 64 * 1024 * 1024);
    assert!(json["redis"]["used_memory_bytes"].as_u64().unwrap() > 0);
    assert!(
        json_kinds(&json).contains(&"eviction-policy".to_string()),
        "{json}"
    );
    let prom = stats(&s, &d, "prometheus");
    assert!(
        prom.contains("redbike_redis_maxmemory_policy{prefix=\"t\",policy=\"allkeys-lru\"} 1\n"),
        "{prom}"
    );
    assert!(
        prom.contains("redbike_redis_maxmemory_bytes{prefix=\"t\"} 67108864\n"),
        "{prom}"
    );
    assert_eq!(
        prometheus_hazard(&prom, "eviction-policy"),
        Some(1),
        "{prom}"
    );

    let check = bike(&s, d.path()).args(["check"]).run().success();
    assert!(
        check.stderr.contains(&format!("check: redis: {warning}")),
        "{}",
        check.stderr
    );
    // set and load write, but warn loudly.
    let set = bike(&s, d.path())
        .args(["set", "j:A", "NOW"])
        .run()
        .success();
    assert!(set.stderr.contains(warning), "{}", set.stderr);

    logged(&startup_logs(&s, &d, &[warning]), &[warning]);
}

#[test]
fn a_volatile_policy_is_named_for_the_leases() {
    let s = RedisServer::start_with(&["--maxmemory-policy", "volatile-lru"]);
    let d = workdir();
    let out = ping(&s, &d);
    assert!(
        out.contains("warning: maxmemory-policy is volatile-lru: when memory runs out Redis deletes keys that have an expiry, which are the leases of running jobs"),
        "{out}"
    );
}

#[test]
fn no_persistence_is_named_everywhere_and_aof_is_not() {
    let s = RedisServer::start_with(&["--save", "", "--appendonly", "no"]);
    let d = workdir();
    let warning = "no persistence: appendonly is no and save has no snapshot points";
    let out = ping(&s, &d);
    assert!(out.contains("\npersistence: off\n"), "{out}");
    assert!(out.contains(&format!("\nwarning: {warning}")), "{out}");
    assert!(out.contains("\nmaxmemory-policy: noeviction\n"), "{out}");
    assert!(out.contains(" used, no maxmemory\n"), "{out}");
    let text = stats(&s, &d, "text");
    assert!(text.contains(", persistence off\n"), "{text}");
    assert!(text.contains(&format!("warning     {warning}")), "{text}");
    let json = stats_json(&s, &d);
    assert_eq!(json["redis"]["persistence"], "off");
    assert_eq!(json_kinds(&json), ["no-persistence"]);
    let prom = stats(&s, &d, "prometheus");
    assert!(
        prom.contains("redbike_redis_persistence{prefix=\"t\"} 0\n"),
        "{prom}"
    );
    assert_eq!(prometheus_hazard(&prom, "no-persistence"), Some(1));
    assert_eq!(prometheus_hazard(&prom, "eviction-policy"), Some(0));
    let check = bike(&s, d.path()).args(["check"]).run().success();
    assert!(
        check.stderr.contains(&format!("check: redis: {warning}")),
        "{}",
        check.stderr
    );
    logged(&startup_logs(&s, &d, &[warning]), &[warning]);

    // With AOF: no finding at all.
    let s = RedisServer::start_with(&["--appendonly", "yes"]);
    let out = ping(&s, &d);
    assert!(out.contains("\npersistence: aof\n"), "{out}");
    assert!(!out.contains("warning"), "{out}");
    let json = stats_json(&s, &d);
    assert_eq!(json["redis"]["persistence"], "aof");
    assert_eq!(json_kinds(&json), Vec::<String>::new());
    let prom = stats(&s, &d, "prometheus");
    assert!(
        prom.contains("redbike_redis_persistence{prefix=\"t\"} 1\n"),
        "{prom}"
    );
    let check = bike(&s, d.path()).args(["check"]).run().success();
    assert!(!check.stderr.contains("check: redis"), "{}", check.stderr);
}

#[test]
fn a_load_into_a_full_redis_stops_and_says_what_was_written() {
    let s = RedisServer::start_with(&[
        "--maxmemory",
        "3mb",
        "--maxmemory-policy",
        "noeviction",
        "--appendonly",
        "yes",
    ]);
    let d = workdir();
    let file = schedules_file(&d, 50_000);
    let o = bike(&s, d.path())
        .args(["load".as_ref(), file.as_os_str()])
        .run()
        .fails(75, "redis is out of memory (");
    assert_eq!(o.stdout, "", "nothing is reported as loaded");
    let written: usize = o
        .stderr
        .split("): ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {}", o.stderr));
    assert!(
        o.stderr.contains(&format!(
            "{written} of 50000 job(s) were written before it refused"
        )),
        "{}",
        o.stderr
    );
    assert!(written > 0 && written < 50_000, "{written}");
    let stored: usize = s.con().hlen("t-schedules").unwrap();
    assert_eq!(stored, written, "the count is what Redis holds");

    // Memory hovers around the limit (the load's connection and its buffers are gone
    // now): lower the limit well under what is used, so that Redis stays full.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "2mb"])
        .query(&mut s.con())
        .unwrap();
    // Full: set refuses and writes nothing.
    bike(&s, d.path())
        .args(["set", "late:A", "NOW"])
        .run()
        .fails(75, "0 of 1 job(s) were written before it refused");
    let late: Option<String> = s.con().hget("t-schedules", "late:A").unwrap();
    assert_eq!(late, None);

    let full = "memory is full: ";
    let out = ping(&s, &d);
    assert!(out.contains(&format!("\nwarning: {full}")), "{out}");
    assert!(out.contains("\npersistence: aof\n"), "{out}");
    let json = stats_json(&s, &d);
    assert_eq!(json_kinds(&json), ["memory-near-limit"], "{json}");
    let used = json["redis"]["used_memory_bytes"].as_u64().unwrap();
    assert!(used >= 2 * 1024 * 1024, "{json}");
    let prom = stats(&s, &d, "prometheus");
    assert_eq!(prometheus_hazard(&prom, "memory-near-limit"), Some(1));
    assert!(
        prom.contains("redbike_redis_used_memory_bytes{prefix=\"t\"} "),
        "{prom}"
    );
    assert!(stats(&s, &d, "text").contains(&format!("warning     {full}")));
    logged(&startup_logs(&s, &d, &[full]), &[full]);
}

#[test]
fn keys_evicted_under_a_load_fail_it_and_are_named() {
    let s = RedisServer::start_with(&["--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru"]);
    let d = workdir();
    let file = schedules_file(&d, 50_000);
    let o = bike(&s, d.path())
        .args(["load".as_ref(), file.as_os_str()])
        .run()
        .code(75);
    assert_eq!(o.stdout, "", "nothing is reported as loaded");
    assert!(
        o.stderr.contains("maxmemory-policy is allkeys-lru"),
        "{}",
        o.stderr
    );
    let error = o.stderr.lines().last().unwrap();
    assert!(error.starts_with("redbike: redis evicted "), "{error}");
    let missing: i64 = error
        .split("(maxmemory-policy allkeys-lru): ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {error}"));
    assert!(
        error.contains(&format!(
            "{missing} of 50000 job(s) written have lost their schedule"
        )),
        "{error}"
    );
    let stored: i64 = s.con().hlen("t-schedules").unwrap();
    assert_eq!(stored, 50_000 - missing, "{error}");
    // Room again, so that the count of evicted keys stays where it is.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "64mb"])
        .query(&mut s.con())
        .unwrap();

    let evicted = "Redis has evicted ";
    let out = ping(&s, &d);
    let count: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("evicted-keys: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(count > 0, "{out}");
    assert!(
        out.contains(&format!("warning: {evicted}{count} key(s)")),
        "{out}"
    );
    let json = stats_json(&s, &d);
    assert_eq!(json["redis"]["evicted_keys"], count);
    assert!(
        json_kinds(&json).contains(&"keys-evicted".to_string()),
        "{json}"
    );
    let prom = stats(&s, &d, "prometheus");
    assert!(
        prom.contains(&format!(
            "redbike_redis_evicted_keys_total{{prefix=\"t\"}} {count}\n"
        )),
        "{prom}"
    );
    assert_eq!(prometheus_hazard(&prom, "keys-evicted"), Some(1));
    let check = bike(&s, d.path()).args(["check"]).run().code(1);
    assert!(
        check.stderr.contains(&format!("check: redis: {evicted}")),
        "{}",
        check.stderr
    );
    logged(&startup_logs(&s, &d, &[evicted]), &[evicted]);
}

#[test]
fn without_info_the_settings_are_unknown_and_everything_still_works() {
    let s = RedisServer::start();
    crate::security::acl_setuser(&s, "rb", "t");
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "rb", "-info"])
        .query(&mut s.con())
        .unwrap();
    let d = workdir();
    let url = format!(
        "redis://rb:{}@127.0.0.1:{}/0",
        crate::security::SECRET,
        s.port
    );
    let rb = || bike(&s, d.path()).env("REDBIKE_REDIS_URL", &url);
    let out = rb().args(["ping"]).ok();
    assert!(
        out.contains("\nredis-settings: unknown: cannot read INFO (")
            && out.contains("allow +info"),
        "{out}"
    );
    rb().args(["set", "j:A", "AT:4000000000"]).ok();
    let json: Value = serde_json::from_str(&rb().args(["stats", "--format", "json"]).ok()).unwrap();
    assert_eq!(json["redis"], Value::Null);
    assert_eq!(json["schedules"], 1);
    let prom = rb().args(["stats", "--format", "prometheus"]).ok();
    assert!(!prom.contains("redbike_redis_"), "{prom}");
    let check = rb().args(["check"]).run().success();
    assert!(
        check.stderr.contains("check: redis settings unchecked"),
        "{}",
        check.stderr
    );
    let refused = "cannot read Redis INFO (";
    let logs = startup_logs_as(&s, &d, &url, &[refused]);
    logged(&logs, &[refused]);
    for log in &logs {
        assert_eq!(log.matches(refused).count(), 1, "{log}");
    }
}

#[test]
fn a_redis_out_of_memory_starts_a_one_off_once() {
    // At maxmemory Redis refuses the writes that keep a run confirmed, so the running
    // one-off is fenced and a dispatcher puts it back; the worker must not claim it
    // again while Redis still refuses writes (it was started and fenced over and over).
    let t = crate::work::Setup::new();
    t.set("hang:A", "NOW");
    let disp = Bg(Some(bike(&t.s, t.d.path()).args(["dispatch"]).spawn()));
    let w = Bg(Some(t.worker(&["A", "--grace", "1", "--fence-after", "3"])));
    assert!(t.wait_status("hang:A", "WRK"));
    let set_max = |v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(v)
            .query(&mut t.s.con())
            .unwrap();
    };
    set_max("1mb");
    // Fenced after 3 s, recovered after 3 s + grace + 2 s: well within this.
    std::thread::sleep(std::time::Duration::from_secs(15));
    let during = t.runs().len();
    set_max("0");
    assert_eq!(during, 1, "started again while redis was out of memory");
    // Writes work again: the one-off runs again (its first run was cut short). A bound,
    // not a pause: the dispatcher's recovery and the worker's claim each wait out a
    // backoff of up to 5 s after the refused writes, then a pass and a claim, which
    // took over 20 s once with both cores busy.
    assert!(wait_until(60.0, || t.runs().len() == 2), "{:?}", t.runs());
    drop(w);
    drop(disp);
}
