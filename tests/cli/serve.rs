//! `redbike serve`: the JSON API against the CLI's own outputs, `/metrics` through
//! Prometheus's exposition parser, bad requests, control and its token, a Redis outage,
//! and the Redis cost of many viewers.

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Child, Command},
    time::{Duration, Instant},
};

use redis::Commands;
use serde_json::Value;

use crate::{dispatch::finish, harness::*, work::Setup};

/// A token long enough for `--allow-control`.
const TOKEN: &str = "test-token-0123456789abcdef";

/// A job id that is HTML.
const HOSTILE: &str = "<script>alert(1)</script>:A";

/// A job script: `fail*` exits 3; every run prints a line with an ANSI escape and HTML.
const JOB: &str = "#!/bin/sh\necho \"start $1\" >> \"$TEST_LOG\"\nprintf 'out \\033[31mred\\033[0m <b>bold</b> %s\\n' \"$1\"\ncase \"$1\" in fail*) exit 3;; esac\n";

/// A running `redbike serve` and its base URL.
pub struct Served {
    /// The process.
    pub bg: Bg,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Served {
    /// Starts `bike` as `serve --listen` on a free port plus `args`, and waits until it
    /// answers.
    pub fn start(bike: Bike, args: &[&str]) -> Served {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = bike.args(["serve", "--listen", &listen]).args(args).spawn();
        let served = Served {
            bg: Bg(Some(child)),
            base: format!("http://{listen}"),
        };
        let up = wait_until(10.0, || TcpStream::connect(("127.0.0.1", port)).is_ok());
        assert!(up, "serve did not listen: {}", stderr_of(served.bg.child()));
        served
    }

    /// GET `path`: the status and the body.
    pub fn get(&self, path: &str) -> (u16, String) {
        let r = agent().get(format!("{}{path}", self.base)).call();
        reply(r)
    }

    /// GET `path`, asserting 200, as JSON.
    pub fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// POST `path` with no body and `headers`: the status and the body as JSON.
    pub fn post(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = agent().post(format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let (status, body) = reply(req.send_empty());
        let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        (status, value)
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into()
}

fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, String) {
    let mut r = r.expect("an HTTP reply");
    let status = r.status().as_u16();
    (status, r.body_mut().read_to_string().expect("a text body"))
}

/// `s` with its characters outside A-Z, a-z, 0-9 and `-._~` percent-encoded.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The CLI's JSON output for `args`.
fn cli_json(t: &Setup, args: &[&str]) -> Value {
    let out = bike(&t.s, t.d.path()).args(args).ok();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// `v` without the fields named in `skip`, at any depth (figures that move with the
/// clock between two reads).
fn without(v: &Value, skip: &[&str]) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !skip.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), without(v, skip)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| without(v, skip)).collect()),
        other => other.clone(),
    }
}

/// A prefix with runs: `ok:A` and the hostile id ran and succeeded, `fail:A` failed,
/// `later:A` waits on the timeline; a dispatcher stays alive (for ps).
fn prefix_with_runs() -> (Setup, Child) {
    let t = Setup::new();
    std::fs::write(path(&t.d, "job.sh"), JOB).unwrap();
    for (id, sched) in [("ok:A", "NOW"), ("fail:A", "NOW"), (HOSTILE, "NOW")] {
        t.set(id, sched);
    }
    t.set("later:A", "FREQ=DAILY");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(3), "{:?}", t.runs());
    assert!(t.wait_status("fail:A", "STP") || t.wait_status("fail:A", "DIE"));
    t.stop(w);
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    assert!(wait_until(10.0, || {
        bike(&t.s, t.d.path())
            .args(["ps", "--format", "json"])
            .ok()
            .contains("dispatcher")
    }));
    (t, disp)
}

#[test]
fn the_api_says_what_tell_history_stats_and_ps_say() {
    let (t, disp) = prefix_with_runs();
    let srv = Served::start(bike(&t.s, t.d.path()), &["--queues", "A"]);

    // tell: the same document, field by field.
    for id in ["ok:A", "fail:A", HOSTILE, "later:A", "never:A"] {
        let api = srv.json(&format!("/api/v1/jobs/{}", encode(id)));
        assert_eq!(api, cli_json(&t, &["tell", id]), "{id}");
    }
    let hostile = srv.json(&format!("/api/v1/jobs/{}", encode(HOSTILE)));
    let tail = hostile["last_runs"][0]["tail"].as_str().unwrap();
    assert_eq!(
        tail,
        "out \u{1b}[31mred\u{1b}[0m <b>bold</b> <script>alert(1)</script>:A"
    );

    // history, with its options as parameters.
    for (query, args) in [
        ("", vec![]),
        ("?job=fail:A", vec!["fail:A"]),
        ("?count=2", vec!["-n", "2"]),
        ("?failures=true", vec!["--failures"]),
        (
            "?since=2000-01-01T00:00:00Z&count=1",
            vec!["--since", "2000-01-01T00:00:00Z", "-n", "1"],
        ),
    ] {
        let mut cli = vec!["history", "--format", "json"];
        cli.extend(args);
        let api = srv.json(&format!("/api/v1/history{query}"));
        assert_eq!(api, cli_json(&t, &cli), "{query}");
    }
    let failures = srv.json("/api/v1/history?failures=1");
    assert_eq!(failures.as_array().unwrap().len(), 1, "{failures}");
    assert_eq!(failures[0]["job"], "fail:A");

    // stats: the same figures, but those that move with the clock.
    let moving = [
        "time",
        "used_memory_bytes",
        "oldest_due_lateness_seconds",
        "oldest_age_seconds",
    ];
    let api = srv.json("/api/v1/stats");
    let cli = cli_json(&t, &["stats", "--format", "json", "--queues", "A"]);
    assert_eq!(without(&api, &moving), without(&cli, &moving));
    assert_eq!(api["schedules"], 4, "{api}");

    // ps: the same processes.
    let moving = ["heartbeat", "expires_in_seconds"];
    let api = srv.json("/api/v1/ps");
    assert_eq!(api.as_array().unwrap().len(), 1, "{api}");
    assert_eq!(
        without(&api, &moving),
        without(&cli_json(&t, &["ps", "--format", "json"]), &moving)
    );

    // The overview: queue A, the job on the timeline, the failure with its last line.
    let o = srv.json("/api/v1/overview");
    assert_eq!(o["prefix"], "t");
    assert_eq!(o["schedules"], 4);
    assert_eq!(o["dispatchers"], 1);
    let a = o["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "A");
    assert_eq!(a.map(|q| &q["length"]), Some(&Value::from(0)), "{o}");
    assert!(
        o["upcoming"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["jobid"] == "later:A"),
        "{o}"
    );
    let failed = &o["failures"][0];
    assert_eq!(failed["jobid"], "fail:A", "{o}");
    assert_eq!(
        failed["detail"], "out \u{1b}[31mred\u{1b}[0m <b>bold</b> fail:A",
        "{o}"
    );
    assert_eq!(
        srv.json("/api/v1/paused"),
        serde_json::json!({"jobs": [], "jobs_total": 0, "queues": {}})
    );

    // /metrics: what `stats --format prometheus` prints, through Prometheus's parser.
    let (status, metrics) = srv.get("/metrics");
    assert_eq!(status, 200);
    let cli = bike(&t.s, t.d.path())
        .args(["stats", "--format", "prometheus", "--queues", "A"])
        .ok();
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(' ').next().map(str::to_string))
            .collect()
    };
    assert_eq!(names(&metrics), names(&cli));
    assert!(
        metrics.contains("redbike_schedules{prefix=\"t\"} 4"),
        "{metrics}"
    );
    parse_exposition(&metrics);
    finish(disp, 10.0);
}

/// Parses `text` with Prometheus's exposition parser (Debian's
/// python3-prometheus-client), asserting it reads every sample.
fn parse_exposition(text: &str) {
    const PARSE: &str = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\nn = sum(len(f.samples) for f in p(sys.stdin.read()))\nprint(n)\n";
    let python = "/usr/bin/python3";
    let has = Command::new(python)
        .args(["-c", "import prometheus_client.parser"])
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        skip("python3-prometheus-client is not installed (no Prometheus parser for /metrics)");
        return;
    }
    let mut child = Command::new(python)
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    assert_eq!(samples, lines, "{text}");
}

#[test]
fn bad_requests_get_json_errors() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "x:A", "FREQ=DAILY"]).ok();
    let srv = Served::start(bike(&s, d.path()), &[]);
    let error = |path: &str, want: u16, part: &str| {
        let (status, body) = srv.get(path);
        assert_eq!(status, want, "{path}: {body}");
        let v: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        let msg = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {body}"));
        assert!(msg.contains(part), "{path}: {msg}");
    };
    error("/nope", 404, "no such page");
    error("/api/v2/stats", 404, "no such page");
    error("/api/v1/history?count=0", 400, "count");
    error("/api/v1/history?count=x", 400, "count");
    error("/api/v1/history?failures=maybe", 400, "failures");
    error("/api/v1/history?since=yesterday", 400, "since");
    error("/api/v1/history?bogus=1", 400, "bogus");
    error("/api/v1/history?job=", 400, "empty");
    error("/api/v1/jobs/%FF", 400, "UTF-8");
    // Control is refused when serve is read-only.
    let (status, v) = srv.post(
        "/api/v1/jobs/x:A/run",
        &[("Authorization", "Bearer anything-at-all-here")],
    );
    assert_eq!(
        (status, v["error"].as_str().unwrap().contains("read-only")),
        (403, true)
    );
    let before = s.dump();
    // Oversized bodies are refused before any handler.
    let big = vec![b'x'; 100_000];
    let r = agent()
        .post(format!("{}/api/v1/jobs/x:A/run", srv.base))
        .send(&big[..]);
    let (status, body) = reply(r);
    assert_eq!(status, 413, "{body}");
    assert_eq!(s.dump(), before);
    // Oversized heads too.
    let (status, _) = reply(
        agent()
            .get(format!("{}/api/v1/stats", srv.base))
            .header("X-Big", "y".repeat(64 * 1024))
            .call(),
    );
    assert!(status == 431 || status == 400, "{status}");
    // A client that never finishes its headers is cut off.
    let port: u16 = srv.base.rsplit(':').next().unwrap().parse().unwrap();
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let _ = slow.read(&mut buf);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "slow client kept {took:?}");
    // It still serves.
    assert_eq!(srv.json("/api/v1/jobs/x:A")["schedule"], "FREQ=DAILY");
}

#[test]
fn control_needs_the_token_and_the_same_origin() {
    let s = RedisServer::start();
    let d = workdir();
    let rb = || bike(&s, d.path());
    rb().args(["set", "job:A", "FREQ=DAILY"]).ok();
    // No token, a short one: bad input, nothing served.
    rb().args(["serve", "--allow-control"])
        .env_remove("REDBIKE_SERVE_TOKEN")
        .run()
        .fails(2, "REDBIKE_SERVE_TOKEN");
    rb().args(["serve", "--allow-control"])
        .env("REDBIKE_SERVE_TOKEN", "short")
        .run()
        .fails(2, "shorter than 16");
    rb().args(["serve", "--token-file", "x"]).run().code(2);

    let srv = Served::start(rb().env("REDBIKE_SERVE_TOKEN", TOKEN), &["--allow-control"]);
    let bearer = format!("Bearer {TOKEN}");
    let before = s.dump();
    for headers in [
        vec![],
        vec![("Authorization", "Bearer wrong-token-0123456789abcd")],
        vec![("Authorization", TOKEN)],
    ] {
        let (status, v) = srv.post("/api/v1/jobs/job:A/run", &headers);
        assert_eq!(status, 401, "{headers:?}: {v}");
    }
    for headers in [
        vec![
            ("Authorization", bearer.as_str()),
            ("Origin", "http://evil.example"),
        ],
        vec![
            ("Authorization", bearer.as_str()),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        vec![("Authorization", bearer.as_str()), ("Origin", "null")],
    ] {
        let (status, v) = srv.post("/api/v1/jobs/job:A/pause", &headers);
        assert_eq!(status, 403, "{headers:?}: {v}");
    }
    assert_eq!(s.dump(), before, "refused requests wrote nothing");
    // GET never controls.
    assert_eq!(srv.get("/api/v1/jobs/job:A/run").0, 405);

    let auth = [("Authorization", bearer.as_str())];
    let same_origin = [
        ("Authorization", bearer.as_str()),
        ("Origin", srv.base.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let (status, v) = srv.post("/api/v1/jobs/job:A/run", &same_origin);
    assert_eq!(
        (status, &v["result"]),
        (200, &Value::from("enqueued")),
        "{v}"
    );
    let queued: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["job:A"]);
    let (status, v) = srv.post("/api/v1/jobs/job:A/pause", &auth);
    assert_eq!((status, &v["result"]), (200, &Value::from("paused")), "{v}");
    let tell = cli_json_of(&s, &d, &["tell", "job:A"]);
    assert_eq!(tell["paused"]["note"], "paused in redbike serve", "{tell}");
    let (status, v) = srv.post("/api/v1/jobs/job:A/resume", &auth);
    assert_eq!(
        (status, &v["result"]),
        (200, &Value::from("resumed")),
        "{v}"
    );
    let (status, v) = srv.post("/api/v1/queues/A/pause", &auth);
    assert_eq!((status, &v["result"]), (200, &Value::from("paused")), "{v}");
    assert!(wait_until(5.0, || {
        srv.json("/api/v1/paused")["queues"].get("A").is_some()
    }));
    let (status, v) = srv.post("/api/v1/queues/A/resume", &auth);
    assert_eq!(
        (status, &v["result"]),
        (200, &Value::from("resumed")),
        "{v}"
    );
    // Each action is an audit entry of the event stream, via serve.
    let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("t-events")
        .arg("-")
        .arg("+")
        .query(&mut s.con())
        .unwrap();
    let actions: Vec<String> = raw
        .iter()
        .map(|(_, f)| {
            let f: std::collections::HashMap<&str, &str> = f
                .chunks(2)
                .map(|p| (p[0].as_str(), p[1].as_str()))
                .collect();
            format!("{} {} {}", f["action"], f["target"], f["via"])
        })
        .filter(|a| !a.ends_with(" cli"))
        .collect();
    assert_eq!(
        actions,
        [
            "run job:A serve",
            "pause job:A serve",
            "resume job:A serve",
            "pause queue:A serve",
            "resume queue:A serve"
        ]
    );
    // Kill: nothing runs, so nothing to stop, and nothing written.
    let before = s.dump();
    let (status, v) = srv.post("/api/v1/jobs/job:A/kill", &auth);
    assert_eq!(
        (status, &v["result"]),
        (200, &Value::from("not_running")),
        "{v}"
    );
    assert_eq!(
        s.dump(),
        before,
        "a kill of a job not running wrote something"
    );
    let (status, v) = srv.post("/api/v1/jobs/unknown:A/kill", &auth);
    assert_eq!(status, 400, "{v}");
    let (status, v) = srv.post("/api/v1/jobs/unknown:A/run", &auth);
    assert_eq!(status, 400, "{v}");
    let (status, v) = srv.post("/api/v1/queues/a:b/pause", &auth);
    assert_eq!(status, 400, "{v}");

    // The token from a file.
    let file = path(&d, "token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let srv = Served::start(
        rb().env_remove("REDBIKE_SERVE_TOKEN"),
        &["--allow-control", "--token-file", file.to_str().unwrap()],
    );
    assert_eq!(srv.post("/api/v1/jobs/job:A/run", &auth).0, 200);
}

fn cli_json_of(s: &RedisServer, d: &tempfile::TempDir, args: &[&str]) -> Value {
    let out = bike(s, d.path()).args(args).ok();
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_lost_redis_gives_503_then_serve_recovers() {
    let mut s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "x:A", "FREQ=DAILY"]).ok();
    let mut srv = Served::start(bike(&s, d.path()), &[]);
    assert_eq!(srv.json("/api/v1/overview")["schedules"], 1);
    s.stop();
    std::thread::sleep(Duration::from_millis(1100));
    let (status, body) = srv.get("/api/v1/overview");
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
    assert_eq!(srv.get("/metrics").0, 503);
    // The page itself is still served (its script shows the banner).
    assert_eq!(srv.get("/").0, 200);
    s.restart();
    bike(&s, d.path()).args(["set", "y:A", "FREQ=DAILY"]).ok();
    assert!(
        wait_until(20.0, || srv.get("/api/v1/overview").0 == 200),
        "{}",
        stderr_of(srv.bg.child())
    );
    // A server without persistence comes back empty: y:A only.
    assert_eq!(srv.json("/api/v1/overview")["upcoming"][0]["jobid"], "y:A");
    assert!(srv.bg.alive());
    // A stop signal ends it cleanly.
    let pid = srv.bg.child().id() as i32;
    assert!(send_signal(pid, libc::SIGTERM));
    let (code, err) = srv.bg.finish(10.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("redis answers again"), "{err}");
}

/// Redis commands run so far (INFO commandstats), and the server's own INFO calls.
fn commands(s: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut s.con())
        .unwrap();
    info.lines()
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|v| v.split(',').next()?.parse::<u64>().ok())
        .sum()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The bound docs/serve.md states for this set-up (three queues, one process alive):
/// the overview at most once a second, ps every 2 s and stats every 5 s, whatever the
/// number of viewers.
const COMMANDS_PER_SECOND_BOUND: f64 = 30.0;

#[test]
fn twenty_viewers_cost_redis_a_bounded_rate() {
    let (t, disp) = prefix_with_runs();
    let srv = Served::start(bike(&t.s, t.d.path()), &["--queues", "A:B:C"]);
    let pid = srv.bg.child().id();
    let base = srv.base.clone();
    // 10 s in the suite; docs/serve.md's figure is of a 60 s run
    // (REDBIKE_SERVE_VIEWER_SECONDS=60).
    let run_for = Duration::from_secs(
        std::env::var("REDBIKE_SERVE_VIEWER_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    // Warm up: first reads and connections.
    srv.json("/api/v1/overview");
    std::thread::sleep(Duration::from_millis(1500));
    // What the dispatcher costs alone, taken off below.
    let base_cmds = commands(&t.s);
    std::thread::sleep(Duration::from_secs(3));
    let baseline = (commands(&t.s) - base_cmds) as f64 / 3.0;
    let start_cmds = commands(&t.s);
    let started = Instant::now();
    let viewers: Vec<_> = (0..20)
        .map(|i| {
            let base = base.clone();
            std::thread::spawn(move || {
                let a = agent();
                let mut n = 0u64;
                let end = Instant::now() + run_for;
                while Instant::now() < end {
                    // What the dashboard asks, many times faster than it does.
                    for p in ["/api/v1/overview", "/api/v1/ps", "/metrics"] {
                        let (status, _) = reply(a.get(format!("{base}{p}")).call());
                        assert_eq!(status, 200, "viewer {i}: {p}");
                        n += 1;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                n
            })
        })
        .collect();
    std::thread::sleep(run_for / 3);
    let mid_rss = rss_kib(pid);
    let requests: u64 = viewers.into_iter().map(|v| v.join().unwrap()).sum();
    let secs = started.elapsed().as_secs_f64();
    let rate = (commands(&t.s) - start_cmds) as f64 / secs - baseline;
    let end_rss = rss_kib(pid);
    eprintln!("serve: {requests} requests in {secs:.1} s cost {rate:.1} redis commands a second (besides the dispatcher's {baseline:.1}); RSS {mid_rss} KiB then {end_rss} KiB");
    assert!(requests > 20 * 3 * 20, "{requests} requests");
    assert!(
        rate < COMMANDS_PER_SECOND_BOUND,
        "{rate:.1} commands a second"
    );
    assert!(
        end_rss < mid_rss + 8 * 1024,
        "RSS grew from {mid_rss} to {end_rss} KiB"
    );
    // Nobody looks: nothing is read (the dispatcher stopped, only INFO counts).
    assert!(send_signal(disp.id() as i32, libc::SIGTERM));
    assert_eq!(finish(disp, 10.0).0, Some(0));
    let idle = commands(&t.s);
    std::thread::sleep(Duration::from_secs(3));
    let idle_cost = commands(&t.s) - idle;
    assert!(idle_cost <= 2, "{idle_cost} commands while nobody looked");
    drop(srv);
}

/// The flags `chromium` runs with in the tests: headless, nothing fetched behind the
/// test's back, a profile of its own.
const CHROMIUM_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// A chromedriver of the test's own, killed on drop.
struct Driver(Child, u16);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver, or `None` (and a [`skip`]) when chromium or chromedriver is
/// missing.
fn chromedriver() -> Option<Driver> {
    let found = |name: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !found("chromium") || !found("chromedriver") {
        skip(
            "chromium or chromedriver is not installed (apt-get install chromium chromium-driver)",
        );
        return None;
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver(child, port);
    assert!(wait_until(15.0, || TcpStream::connect(("127.0.0.1", port)).is_ok()));
    Some(driver)
}

/// Evaluates `script` (a function body) in the page until it returns something other
/// than null or false, for at most `secs`.
async fn until(c: &fantoccini::Client, secs: u64, script: &str) -> Value {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let v = c.execute(script, vec![]).await.expect("script runs");
        if !(v.is_null() || v == Value::Bool(false)) {
            return v;
        }
        assert!(Instant::now() < end, "not within {secs} s: {script}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn the_dashboard_in_a_real_browser() {
    let Some(driver) = chromedriver() else {
        return;
    };
    let t = Setup::new();
    std::fs::write(
        path(&t.d, "job.sh"),
        JOB.replace("case", "case \"$1\" in slow*) sleep 4;; esac\ncase"),
    )
    .unwrap();
    t.set(HOSTILE, "FREQ=DAILY");
    t.set("job:A", "FREQ=DAILY");
    let srv = Served::start(
        bike(&t.s, t.d.path()).env("REDBIKE_SERVE_TOKEN", TOKEN),
        &["--allow-control"],
    );
    let profile = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    args.push("--window-size=1100,900".into());
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({ "args": args }),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = fantoccini::ClientBuilder::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        )
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.1))
        .await
        .expect("a chromium session");
        c.goto(&format!("{}/", srv.base)).await.unwrap();

        // The jobs set by the CLI, the hostile id as text: no script element made.
        let ids = until(
            &c,
            15,
            "const a = [...document.querySelectorAll('#upcoming a.jobid')].map(e => e.textContent);
             return a.length >= 2 ? a : null;",
        )
        .await;
        let ids: Vec<&str> = ids.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert!(ids.contains(&HOSTILE) && ids.contains(&"job:A"), "{ids:?}");
        let scripts = c
            .execute("return document.querySelectorAll('body script').length", vec![])
            .await
            .unwrap();
        assert_eq!(scripts, 0);
        let prefix = c
            .execute("return document.getElementById('prefix').textContent", vec![])
            .await
            .unwrap();
        assert_eq!(prefix, "t");

        // A run appears live in the running table.
        let w = t.worker(&["A"]);
        t.set("slow:A", "NOW");
        until(
            &c,
            15,
            "return [...document.querySelectorAll('#running a.jobid')].some(e => e.textContent === 'slow:A');",
        )
        .await;
        if std::env::var_os("REDBIKE_UPDATE_SCREENSHOT").is_some() {
            let png = c.screenshot().await.unwrap();
            let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/serve-dashboard.png");
            std::fs::write(out, png).unwrap();
        }
        t.stop(w);
        bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();

        // Its output on its page: the escape sequence and the HTML as text.
        c.goto(&format!("{}/#job={}", srv.base, encode("slow:A"))).await.unwrap();
        let tail = until(
            &c,
            10,
            "const t = document.querySelector('#job-history td.text'); return t && t.textContent.includes('slow:A') ? t.textContent : null;",
        )
        .await;
        assert_eq!(tail, "out \u{1b}[31mred\u{1b}[0m <b>bold</b> slow:A");
        let made = c
            .execute("return document.querySelectorAll('#job-history b').length", vec![])
            .await
            .unwrap();
        assert_eq!(made, 0);

        // The job page: its schedule, then run now refused without the token...
        c.goto(&format!("{}/#job={}", srv.base, encode("job:A"))).await.unwrap();
        until(
            &c,
            10,
            "return document.getElementById('job-fields').textContent.includes('FREQ=DAILY');",
        )
        .await;
        c.find(fantoccini::Locator::Id("run-now")).await.unwrap().click().await.unwrap();
        let refused = until(
            &c,
            10,
            "const r = document.getElementById('control-result'); return r.dataset.status ? [r.dataset.status, r.textContent] : null;",
        )
        .await;
        assert_eq!(refused[0], "401", "{refused}");
        let queued: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
        assert!(queued.is_empty(), "{queued:?}");
        // ...and done with it.
        c.execute("document.getElementById('token-box').open = true; document.getElementById('control-result').dataset.status = '';", vec![])
            .await
            .unwrap();
        c.find(fantoccini::Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
        c.find(fantoccini::Locator::Id("token-save")).await.unwrap().click().await.unwrap();
        c.find(fantoccini::Locator::Id("run-now")).await.unwrap().click().await.unwrap();
        let done = until(
            &c,
            10,
            "const r = document.getElementById('control-result'); return r.dataset.status ? [r.dataset.status, r.textContent] : null;",
        )
        .await;
        assert_eq!(done[0], "200", "{done}");
        let queued: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
        assert_eq!(queued, ["job:A"]);

        // The hostile job's page: its id and output as text.
        c.goto(&format!("{}/#job={}", srv.base, encode(HOSTILE))).await.unwrap();
        let wanted = serde_json::to_string(HOSTILE).unwrap();
        until(
            &c,
            10,
            &format!("return document.getElementById('job-id').textContent === {wanted} && document.getElementById('job-fields').textContent.includes('FREQ=DAILY');"),
        )
        .await;
        let scripts = c
            .execute("return document.querySelectorAll('body script').length", vec![])
            .await
            .unwrap();
        assert_eq!(scripts, 0);
        c.close().await.unwrap();
    });
}

/// `/api/v1/jobs/JOBID/next` lists what `redbike next SCHEDULE --job JOBID` prints,
/// jitter included; `count` is checked.
#[test]
fn next_runs_are_those_next_prints() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, ".redbike.conf"), "[redbike.jitter]\nA = 3600\n").unwrap();
    let daily = "FREQ=DAILY;BYHOUR=3;BYMINUTE=0;BYSECOND=0";
    bike(&s, d.path()).args(["set", "daily:A", daily]).ok();
    bike(&s, d.path())
        .args(["set", "at:A", "AT:4000000000"])
        .ok();
    let srv = Served::start(bike(&s, d.path()), &[]);
    // A one-off is stored as STOP: its timeline run is its only one.
    for (id, schedule, stored, count) in [
        ("daily:A", daily, daily, 3),
        ("at:A", "AT:4000000000", "STOP", 2),
    ] {
        let api = srv.json(&format!("/api/v1/jobs/{}/next?count={count}", encode(id)));
        let printed = bike(&s, d.path())
            .args(["next", schedule, "--job", id, "-n", &count.to_string()])
            .ok();
        let runs: Vec<String> = api["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r["unix"], r["utc"].as_str().unwrap()))
            .collect();
        let lines: Vec<String> = printed.lines().map(str::to_string).collect();
        assert_eq!(runs, lines, "{id}");
        assert_eq!(api["schedule"], stored);
        assert_eq!(api["unreadable"], Value::Null);
    }
    let api = srv.json("/api/v1/jobs/daily:A/next");
    assert_eq!(api["runs"].as_array().unwrap().len(), 5);
    let unknown = srv.json("/api/v1/jobs/nobody:A/next");
    assert_eq!(unknown["runs"], serde_json::json!([]));
    for bad in ["0", "101", "x"] {
        let (status, body) = srv.get(&format!("/api/v1/jobs/daily:A/next?count={bad}"));
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains("count"), "{body}");
    }
}
