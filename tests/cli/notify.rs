//! `redbike notify`: changes of state from the event stream, to a webhook (a local
//! HTTP receiver of the test's own) and to a command; at least once across kill -9,
//! once across two notifiers; bad input skipped and said.
//!
//! Entries are written here as docs/events.md lays them out (XADD with v=1), so the
//! notifier is tested apart from the writers of the stream; `a_real_worker_*` runs the
//! whole path.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread,
    time::Duration,
};

use serde_json::Value;

use crate::harness::*;

/// One request the receiver got: its headers (lower-case names) and its JSON body.
#[derive(Debug, Clone)]
pub struct Got {
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

/// A local HTTP receiver on 127.0.0.1: records every POST; while `hold` is set it
/// reads the requests of jobs' notifications but never answers them.
pub struct Receiver {
    pub port: u16,
    pub got: Arc<Mutex<Vec<Got>>>,
    pub hold: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::on(0)
    }

    /// A receiver on `port` (0: any free one).
    pub fn on(port: u16) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the receiver");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let hold = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, h, s) = (got.clone(), hold.clone(), stop.clone());
        thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (g, h) = (g.clone(), h.clone());
                        thread::spawn(move || serve(conn, g, h));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Receiver {
            port,
            got,
            hold,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook?token=abc", self.port)
    }

    /// Every notification's body.
    pub fn all(&self) -> Vec<Value> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .map(|g| g.body.clone())
            .collect()
    }

    /// The bodies of the jobs' notifications (the fleet's left out: the test's Redis
    /// has no persistence, a hazard reported once).
    pub fn bodies(&self) -> Vec<Value> {
        self.all()
            .into_iter()
            .filter(|b| b.get("job").is_some())
            .collect()
    }

    pub fn count(&self) -> usize {
        self.bodies().len()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads requests from one connection (keep-alive) and answers 200, or holds.
fn serve(conn: TcpStream, got: Arc<Mutex<Vec<Got>>>, hold: Arc<AtomicBool>) {
    conn.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        let mut length = 0;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    length = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).expect("a JSON body");
        if hold.load(Ordering::SeqCst) && body.get("job").is_some() {
            // Read, never answered: the notifier waits for its timeout (or is killed).
            thread::sleep(Duration::from_secs(120));
            return;
        }
        got.lock().unwrap().push(Got { headers, body });
        let _ = writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    }
}

/// Writes a config with `[redbike.notify]` `settings` into `dir`.
pub fn notify_config(dir: &tempfile::TempDir, settings: &str) {
    std::fs::write(
        path(dir, "rb.toml"),
        format!("[redbike.notify]\n{settings}\n"),
    )
    .unwrap();
}

/// XADDs an entry with `fields` (v=1 added unless given) to `t-events`; its id.
pub fn xadd(s: &RedisServer, fields: &[(&str, &str)]) -> String {
    let mut cmd = redis::cmd("XADD");
    cmd.arg("t-events").arg("*");
    if !fields.iter().any(|(k, _)| *k == "v") {
        cmd.arg("v").arg("1");
    }
    for (k, v) in fields {
        cmd.arg(*k).arg(*v);
    }
    cmd.query(&mut s.con()).unwrap()
}

/// XADDs a run entry of `job` (queue A): a failure (exit 1) or a success.
pub fn run_entry(s: &RedisServer, job: &str, failed: bool) -> String {
    let outcome = if failed { "failed" } else { "ok" };
    // As the history lists store it (docs/history.md): one-letter keys.
    let entry = serde_json::json!({
        "j": job, "o": outcome, "e": now() as f64,
        "x": if failed { 1 } else { 0 }, "h": "h", "p": 1,
        "t": if failed { "boom\n" } else { "" },
    });
    xadd(
        s,
        &[
            ("type", "run"),
            ("job", job),
            ("failed", if failed { "1" } else { "0" }),
            ("entry", &entry.to_string()),
        ],
    )
}

/// Starts a notifier in `d` (config rb.toml) with `args`, and waits until it follows
/// the stream.
pub fn notifier(s: &RedisServer, d: &tempfile::TempDir, args: &[&str]) -> Bg {
    let child = bike(s, d.path())
        .args(["notify", "-c", "rb.toml"])
        .args(args)
        .spawn();
    assert!(
        wait_stderr(&child, "following t-events", 10.0),
        "notifier did not start: {}",
        stderr_of(&child)
    );
    Bg(Some(child))
}

fn kinds(r: &Receiver) -> Vec<(String, String)> {
    r.bodies()
        .iter()
        .map(|b| {
            (
                b["kind"].as_str().unwrap_or("").to_string(),
                b["job"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn failing_three_times_then_succeeding_gives_one_failure_and_one_recovery() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let url = r.url();
    let n = notifier(&s, &d, &["--webhook", &url]);
    run_entry(&s, "A-ok", false); // a first success: no news
    let first = run_entry(&s, "x:A", true);
    run_entry(&s, "x:A", true);
    run_entry(&s, "x:A", true);
    let back = run_entry(&s, "x:A", false);
    run_entry(&s, "x:A", false);
    assert!(wait_until(10.0, || r.count() >= 2), "{:?}", r.bodies());
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        kinds(&r),
        [
            ("failure".to_string(), "x:A".to_string()),
            ("recovery".to_string(), "x:A".to_string())
        ]
    );
    let b = r.bodies();
    assert_eq!(b[0]["id"], first.as_str());
    assert_eq!(b[1]["id"], back.as_str());
    assert_eq!(b[0]["v"], 1);
    assert_eq!(b[0]["queue"], "A");
    assert_eq!(b[0]["run"]["exit"], 1);
    assert_eq!(b[0]["run"]["tail"], "boom\n");
    assert_eq!(b[0]["redelivered"], false);
    assert_eq!(b[0]["suppressed"], 0);
    // The state survives a restart: the same failure again is no news to a new notifier.
    drop(n);
    let _n = notifier(&s, &d, &["--webhook", &url]);
    run_entry(&s, "x:A", false);
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(r.count(), 2, "{:?}", r.bodies());
}

#[test]
fn stale_then_fresh_give_one_notification_each() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    let then = now() - 7200;
    let since = then.to_string();
    for _ in 0..2 {
        xadd(
            &s,
            &[
                ("type", "stale"),
                ("job", "A-s"),
                ("queue", "A"),
                ("since", &since),
                ("bound", "3600"),
            ],
        );
    }
    xadd(
        &s,
        &[
            ("type", "fresh"),
            ("job", "A-s"),
            ("queue", "A"),
            ("since", "5"),
        ],
    );
    xadd(
        &s,
        &[
            ("type", "action"),
            ("action", "set"),
            ("target", "A-s"),
            ("detail", "x"),
            ("user", "u"),
            ("host", "h"),
            ("pid", "1"),
        ],
    );
    assert!(wait_until(10.0, || r.count() >= 2), "{:?}", r.bodies());
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        kinds(&r),
        [
            ("stale".to_string(), "A-s".to_string()),
            ("fresh".to_string(), "A-s".to_string())
        ]
    );
    let b = r.bodies();
    assert_eq!(b[0]["bound"], 3600);
    assert_eq!(b[0]["since"], then);
}

#[test]
fn two_notifiers_deliver_each_notification_once() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let url = r.url();
    let _a = notifier(&s, &d, &["--webhook", &url]);
    let _b = notifier(&s, &d, &["--webhook", &url]);
    for i in 0..30 {
        run_entry(&s, &format!("A-{i}"), true);
    }
    assert!(wait_until(15.0, || r.count() >= 30), "{}", r.count());
    thread::sleep(Duration::from_millis(1500));
    let mut jobs: Vec<String> = kinds(&r).into_iter().map(|(_, j)| j).collect();
    assert_eq!(jobs.len(), 30);
    jobs.sort();
    jobs.dedup();
    assert_eq!(jobs.len(), 30, "each job once");
    // The fleet's check ran once per period, by one of them: the hazard is said once.
    let hazards: Vec<Value> = r
        .all()
        .into_iter()
        .filter(|b| b["kind"] == "hazard")
        .collect();
    assert_eq!(hazards.len(), 1, "{hazards:?}");
    assert_eq!(hazards[0]["hazard"], "no-persistence");
}

#[test]
fn jobs_overdue_without_a_dispatcher_are_said_once_and_so_is_the_end() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "check-every = 1");
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    let fleet = |kind: &str| r.all().into_iter().filter(|b| b["kind"] == kind).count();
    let _: () = redis::cmd("ZADD")
        .arg("t-timeline")
        .arg(now() - 600)
        .arg("A-late")
        .query(&mut s.con())
        .unwrap();
    assert!(
        wait_until(10.0, || fleet("dispatcher-absent") == 1),
        "{:?}",
        r.all()
    );
    let b = r
        .all()
        .into_iter()
        .find(|b| b["kind"] == "dispatcher-absent")
        .unwrap();
    assert_eq!(b["overdue"], 1);
    thread::sleep(Duration::from_millis(2500));
    assert_eq!(fleet("dispatcher-absent"), 1, "once per change");
    let _: () = redis::cmd("ZREM")
        .arg("t-timeline")
        .arg("A-late")
        .query(&mut s.con())
        .unwrap();
    assert!(
        wait_until(10.0, || fleet("dispatcher-back") == 1),
        "{:?}",
        r.all()
    );
    assert_eq!(fleet("hazard"), 1);
}

#[test]
fn kill_9_mid_delivery_loses_nothing_and_marks_the_redelivery() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "claim-after = 2\nwebhook-timeout = 60");
    let r = Receiver::start();
    let url = r.url();
    r.hold.store(true, Ordering::SeqCst);
    let mut first = notifier(&s, &d, &["--webhook", &url]);
    let id = run_entry(&s, "A-k", true);
    // The request arrives and is held: the notifier waits for the answer.
    assert!(wait_until(10.0, || {
        let (n, _): (i64, Value) = pending_count(&s);
        n == 1
    }));
    thread::sleep(Duration::from_millis(500));
    let pid = first.child().id() as i32;
    assert!(send_signal(pid, libc::SIGKILL));
    assert!(wait_until(5.0, || !first.alive()));
    r.hold.store(false, Ordering::SeqCst);
    assert_eq!(r.count(), 0);
    let second = notifier(&s, &d, &["--webhook", &url]);
    assert!(
        wait_until(15.0, || r.count() >= 1),
        "{}",
        stderr_of(second.child())
    );
    let b = r.bodies();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["id"], id.as_str());
    assert_eq!(b[0]["kind"], "failure");
    assert_eq!(b[0]["redelivered"], true);
    assert!(wait_until(5.0, || pending_count(&s).0 == 0), "acknowledged");
}

/// The group's pending count (XPENDING summary).
fn pending_count(s: &RedisServer) -> (i64, Value) {
    let v: redis::Value = redis::cmd("XPENDING")
        .arg("t-events")
        .arg("redbike-notify")
        .query(&mut s.con())
        .unwrap();
    let n = match &v {
        redis::Value::Array(a) => match a.first() {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        },
        _ => 0,
    };
    (n, Value::Null)
}

#[test]
fn a_webhook_down_for_a_while_gets_its_notifications_afterwards_in_order() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "backoff-max = 2");
    let port = free_port(); // nothing listens: connections are refused
    let url = format!("http://127.0.0.1:{port}/hook");
    let n = notifier(&s, &d, &["--webhook", &url]);
    let ids: Vec<String> = (0..3)
        .map(|i| run_entry(&s, &format!("A-{i}"), true))
        .collect();
    assert!(
        wait_stderr(n.child(), "failed", 10.0),
        "{}",
        stderr_of(n.child())
    );
    thread::sleep(Duration::from_secs(6));
    let r = Receiver::on(port);
    assert!(
        wait_until(15.0, || r.count() >= 3),
        "{}",
        stderr_of(n.child())
    );
    let got: Vec<String> = r
        .bodies()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, ids, "all of them, in order");
    assert!(wait_stderr(n.child(), "delivers again", 5.0));
    // One line when the trouble began, not one per attempt.
    assert_eq!(
        stderr_of(n.child()).matches("failed:").count(),
        1,
        "{}",
        stderr_of(n.child())
    );
}

#[test]
fn the_webhook_gets_the_secret_header_from_the_environment() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let child = bike(&s, d.path())
        .env("REDBIKE_NOTIFY_SECRET", "s3cret")
        .args(["notify", "-c", "rb.toml", "--webhook", &r.url()])
        .spawn();
    let _n = Bg(Some(child));
    assert!(wait_stderr(_n.child(), "following t-events", 10.0));
    run_entry(&s, "A-h", true);
    assert!(wait_until(10.0, || r.count() >= 1));
    let got = r
        .got
        .lock()
        .unwrap()
        .iter()
        .find(|g| g.body.get("job").is_some())
        .cloned()
        .unwrap();
    assert!(got
        .headers
        .contains(&("x-redbike-secret".to_string(), "s3cret".to_string())));
    assert!(got
        .headers
        .contains(&("content-type".to_string(), "application/json".to_string())));
}

#[test]
fn exec_gets_the_json_on_stdin_and_in_its_environment() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let out = path(&d, "out");
    std::fs::create_dir(&out).unwrap();
    let script = format!(
        "cat > {0}/$REDBIKE_NOTIFY_ID.json; env > {0}/all.env; env | grep ^REDBIKE_NOTIFY_ | sort > {0}/$REDBIKE_NOTIFY_ID.env",
        out.display()
    );
    let child = bike(&s, d.path())
        .env("REDBIKE_NOTIFY_SECRET", "s3cret")
        .args(["notify", "-c", "rb.toml", "--exec", "sh", "-c", &script])
        .spawn();
    let n = Bg(Some(child));
    assert!(wait_stderr(n.child(), "following t-events", 10.0));
    let id = run_entry(&s, "e:A", true);
    let json = out.join(format!("{id}.json"));
    let env = out.join(format!("{id}.env"));
    assert!(
        wait_until(10.0, || std::fs::read_to_string(&env)
            .is_ok_and(|e| e.contains("KIND"))),
        "{}",
        stderr_of(n.child())
    );
    let body: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(body["kind"], "failure");
    assert_eq!(body["job"], "e:A");
    let env = std::fs::read_to_string(env).unwrap();
    for want in [
        "REDBIKE_NOTIFY_KIND=failure",
        "REDBIKE_NOTIFY_JOB=e:A",
        "REDBIKE_NOTIFY_QUEUE=A",
        "REDBIKE_NOTIFY_EXIT=1",
        "REDBIKE_NOTIFY_OUTCOME=failed",
        "REDBIKE_NOTIFY_REDELIVERED=0",
        "REDBIKE_NOTIFY_PREFIX=t",
    ] {
        assert!(env.contains(want), "{want} in {env}");
    }
    assert!(env.contains(&format!("REDBIKE_NOTIFY_ID={id}")));
    // Neither redbike's way to Redis nor the webhook's secret.
    let all = std::fs::read_to_string(out.join("all.env")).unwrap();
    assert!(
        !all.contains("REDBIKE_REDIS_URL") && !all.contains("s3cret"),
        "{all}"
    );
}

#[test]
fn a_hanging_command_times_out_and_the_notifier_goes_on() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "exec-timeout = 1\nexec-attempts = 2\nbackoff-max = 1");
    let out = path(&d, "got");
    let script = format!(
        "if [ \"$REDBIKE_NOTIFY_JOB\" = A-hang ]; then sleep 300; fi; echo $REDBIKE_NOTIFY_JOB >> {}",
        out.display()
    );
    let n = notifier(&s, &d, &["--exec", "sh", "-c", &script]);
    run_entry(&s, "A-hang", true);
    run_entry(&s, "A-next", true);
    assert!(
        wait_until(15.0, || std::fs::read_to_string(&out)
            .is_ok_and(|t| t.contains("A-next"))),
        "{}",
        stderr_of(n.child())
    );
    let err = stderr_of(n.child());
    assert!(err.contains("past its timeout of 1s"), "{err}");
    assert!(err.contains("gave up the failure notification"), "{err}");
    // The killed command's process group went with it: no sleep is left behind.
    let pid = n.child().id();
    assert!(wait_until(5.0, || children_named(pid, "sleep").is_empty()));
    // (The fleet's notifications, without a job, write empty lines.)
    let jobs: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    assert_eq!(jobs, ["A-next"]);
}

#[test]
fn malformed_entries_are_skipped_and_said() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let n = notifier(&s, &d, &["--webhook", &r.url()]);
    xadd(&s, &[("v", "2"), ("type", "run"), ("job", "A-v2")]);
    xadd(&s, &[("v", "2"), ("type", "run"), ("job", "A-v2")]);
    xadd(&s, &[("type", "bogus"), ("job", "A-b")]);
    xadd(&s, &[("type", "run"), ("failed", "1"), ("entry", "{}")]);
    xadd(
        &s,
        &[
            ("type", "run"),
            ("job", "A-j"),
            ("failed", "1"),
            ("entry", "{not json"),
        ],
    );
    xadd(
        &s,
        &[
            ("type", "stale"),
            ("job", "A-j"),
            ("since", "x"),
            ("bound", "1"),
        ],
    );
    let huge = "x".repeat(1_000_000);
    let entry = serde_json::json!({"job": "A-big", "queue": "A", "outcome": "failed", "end": 1.0, "tail": huge, "detail": huge});
    xadd(
        &s,
        &[
            ("type", "run"),
            ("job", "A-big"),
            ("failed", "1"),
            ("entry", &entry.to_string()),
        ],
    );
    let good = run_entry(&s, "A-good", true);
    assert!(
        wait_until(10.0, || r.count() >= 2),
        "{}",
        stderr_of(n.child())
    );
    thread::sleep(Duration::from_millis(1000));
    let b = r.bodies();
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!(b[0]["job"], "A-big");
    assert!(b[0].to_string().len() <= 16 * 1024);
    assert_eq!(b[0]["run"]["tail"].as_str().unwrap().len(), 2048);
    assert_eq!(b[1]["id"], good.as_str());
    let err = stderr_of(n.child());
    assert!(err.contains("skipping entries of format v=2"), "{err}");
    assert!(err.contains("skipped 2 entries"), "{err}");
    assert!(err.contains("unknown type bogus"), "{err}");
    assert!(err.contains("without a valid field job"), "{err}");
    assert!(err.contains("not a history entry"), "{err}");
    assert!(err.contains("without a valid field since"), "{err}");
    assert_eq!(
        err.matches("format v=2").count(),
        2,
        "one line each way: {err}"
    );
}

#[test]
fn the_rate_limit_holds_back_changes_and_says_how_many() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "rate-limit = 3");
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    run_entry(&s, "A-r", true);
    run_entry(&s, "A-r", false);
    run_entry(&s, "A-r", true);
    assert!(wait_until(10.0, || r.count() >= 1));
    thread::sleep(Duration::from_millis(3500));
    run_entry(&s, "A-r", false);
    assert!(wait_until(10.0, || r.count() >= 2));
    let b = r.bodies();
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!(b[0]["kind"], "failure");
    assert_eq!(b[1]["kind"], "recovery");
    assert_eq!(b[1]["suppressed"], 2);
}

#[test]
fn bad_notify_settings_and_flags_are_refused() {
    let d = workdir();
    notify_config(&d, "rate-limit = 100000");
    bare(d.path())
        .args([
            "notify",
            "-c",
            "rb.toml",
            "--webhook",
            "http://127.0.0.1:1/",
        ])
        .run()
        .fails(2, "rate-limit");
    notify_config(&d, "retry-after = 3");
    bare(d.path())
        .args([
            "notify",
            "-c",
            "rb.toml",
            "--webhook",
            "http://127.0.0.1:1/",
        ])
        .run()
        .fails(2, "retry-after");
    notify_config(&d, "");
    bare(d.path())
        .args(["notify", "-c", "rb.toml"])
        .run()
        .fails(2, "--exec COMMAND or --webhook URL");
    bare(d.path())
        .args(["notify", "-c", "rb.toml", "--webhook", "ftp://example.com/"])
        .run()
        .fails(2, "not an http or https URL");
}

#[test]
fn a_stream_trimmed_past_the_group_says_how_many_were_lost() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let url = r.url();
    let n = notifier(&s, &d, &["--webhook", &url]);
    assert!(send_signal(n.child().id() as i32, libc::SIGTERM));
    let (code, _) = n.finish(10.0);
    assert_eq!(code, Some(0));
    for i in 0..20 {
        run_entry(&s, &format!("A-{i}"), true);
    }
    let _: i64 = redis::cmd("XTRIM")
        .arg("t-events")
        .arg("MAXLEN")
        .arg(5)
        .query(&mut s.con())
        .unwrap();
    let n = notifier(&s, &d, &["--webhook", &url]);
    assert!(
        wait_stderr(n.child(), "15 entries were never read", 10.0),
        "{}",
        stderr_of(n.child())
    );
    assert!(wait_until(10.0, || r.count() >= 5));
    thread::sleep(Duration::from_millis(500));
    let jobs: Vec<String> = kinds(&r).into_iter().map(|(_, j)| j).collect();
    assert_eq!(jobs, ["A-15", "A-16", "A-17", "A-18", "A-19"]);
}

#[test]
fn a_stop_signal_ends_a_delivery_under_way_and_the_next_notifier_delivers_it() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "claim-after = 1\nwebhook-timeout = 60");
    let r = Receiver::start();
    r.hold.store(true, Ordering::SeqCst);
    let url = r.url();
    let n = notifier(&s, &d, &["--webhook", &url]);
    let id = run_entry(&s, "A-t", true);
    assert!(wait_until(10.0, || pending_count(&s).0 == 1));
    thread::sleep(Duration::from_millis(300));
    let start = std::time::Instant::now();
    assert!(send_signal(n.child().id() as i32, libc::SIGTERM));
    let (code, err) = n.finish(10.0);
    assert_eq!(code, Some(0), "{err}");
    // The request in flight is abandoned at once, not waited out.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    r.hold.store(false, Ordering::SeqCst);
    let _n = notifier(&s, &d, &["--webhook", &url]);
    assert!(wait_until(10.0, || r.count() >= 1));
    let b = r.bodies();
    assert_eq!(b[0]["id"], id.as_str());
    assert_eq!(b[0]["redelivered"], true);
}

#[test]
fn a_split_prefix_is_followed_on_every_shard() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        "[redbike]\nprefix = \"{s}\"\nshards = 2\n[redbike.notify]\n",
    )
    .unwrap();
    let r = Receiver::start();
    let child = bike(&s, d.path())
        .env_remove("REDBIKE_PREFIX")
        .args(["notify", "-c", "rb.toml", "--webhook", &r.url()])
        .spawn();
    let n = Bg(Some(child));
    for shard in ["{s/0}-events", "{s/1}-events"] {
        assert!(
            wait_stderr(n.child(), &format!("following {shard}"), 10.0),
            "{}",
            stderr_of(n.child())
        );
    }
    for (k, job) in [(0, "A-zero"), (1, "A-one")] {
        let entry = serde_json::json!({"job": job, "queue": "A", "outcome": "failed", "end": 1.0});
        let _: String = redis::cmd("XADD")
            .arg(format!("{{s/{k}}}-events"))
            .arg("*")
            .arg(&["v", "1", "type", "run", "job", job, "failed", "1"])
            .arg("entry")
            .arg(entry.to_string())
            .query(&mut s.con())
            .unwrap();
    }
    assert!(
        wait_until(10.0, || r.count() >= 2),
        "{}",
        stderr_of(n.child())
    );
    let mut got: Vec<(String, String)> = r
        .bodies()
        .iter()
        .map(|b| {
            (
                b["prefix"].as_str().unwrap().into(),
                b["job"].as_str().unwrap().into(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("{s/0}".to_string(), "A-zero".to_string()),
            ("{s/1}".to_string(), "A-one".to_string())
        ]
    );
}

#[test]
fn a_change_the_rate_limit_held_back_is_reported_when_its_window_ends() {
    let s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "rate-limit = 2");
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    run_entry(&s, "A-h", true);
    let back = run_entry(&s, "A-h", false);
    assert!(wait_until(10.0, || r.count() >= 1));
    thread::sleep(Duration::from_millis(500));
    assert_eq!(r.count(), 1, "held back");
    assert!(wait_until(10.0, || r.count() >= 2));
    thread::sleep(Duration::from_millis(1500));
    let b = r.bodies();
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!(b[1]["kind"], "recovery");
    assert_eq!(b[1]["id"], back.as_str());
    assert_eq!(b[1]["suppressed"], 1);
    assert_eq!(b[1]["run"]["outcome"], "ok");
}

#[test]
fn a_notifier_rides_out_a_redis_restart_that_lost_everything() {
    let mut s = RedisServer::start();
    let d = workdir();
    notify_config(&d, "");
    let r = Receiver::start();
    let n = notifier(&s, &d, &["--webhook", &r.url()]);
    run_entry(&s, "A-1", true);
    assert!(wait_until(10.0, || r.count() >= 1));
    s.stop();
    thread::sleep(Duration::from_millis(1500));
    s.restart(); // empty: no persistence, so the stream and its group are gone
    assert!(
        wait_stderr(n.child(), "is back", 15.0),
        "{}",
        stderr_of(n.child())
    );
    // The group is made again; what comes next is reported (the state was lost too:
    // a first failure again).
    assert!(wait_until(10.0, || {
        run_entry(&s, "A-2", true);
        thread::sleep(Duration::from_millis(300));
        r.count() >= 2
    }));
    let jobs: Vec<String> = kinds(&r).into_iter().map(|(_, j)| j).collect();
    assert_eq!(jobs, ["A-1", "A-2"], "{}", stderr_of(n.child()));
}

/// Fails while its count of runs is below 3, then succeeds.
const FLAKY: &str = r#"#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$0.count"
echo "run $((n + 1)) of $1"
[ "$n" -lt 3 ] && exit 1
exit 0
"#;

#[test]
fn a_real_worker_failing_three_times_then_succeeding_gives_one_failure_and_one_recovery() {
    let s = RedisServer::start();
    let d = job_dir(
        "[redbike]\nfailure-delay = 0\n[redbike.notify]\nclaim-after = 5\n",
        FLAKY,
    );
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    let rb = || bike(&s, d.path()).args(["-c", "rb.toml"]);
    rb().args(["set", "flaky:A", "FREQ=SECONDLY"]).ok();
    let _disp = Bg(Some(rb().args(["dispatch"]).spawn()));
    let _work = Bg(Some(rb().args(["work", "A", "--", "./job.sh"]).spawn()));
    let count = path(&d, "job.sh.count");
    assert!(
        wait_until(30.0, || std::fs::read_to_string(&count).is_ok_and(|n| n
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
            >= 6)),
        "the job ran"
    );
    assert!(wait_until(10.0, || r.count() >= 2), "{:?}", r.bodies());
    thread::sleep(Duration::from_millis(1500));
    let b = r.bodies();
    assert_eq!(
        kinds(&r),
        [
            ("failure".to_string(), "flaky:A".to_string()),
            ("recovery".to_string(), "flaky:A".to_string())
        ],
        "{b:?}"
    );
    assert_eq!(b[0]["run"]["outcome"], "failed");
    assert_eq!(b[0]["run"]["exit"], 1);
    assert!(b[0]["run"]["tail"]
        .as_str()
        .unwrap()
        .contains("run 1 of flaky:A"));
    assert_eq!(b[1]["run"]["outcome"], "ok");
    assert!(b[1]["run"]["tail"]
        .as_str()
        .unwrap()
        .contains("run 4 of flaky:A"));
}

/// Succeeds while the file `ok` exists beside it, else fails.
const STEADY: &str = "#!/bin/sh\n[ -e \"$(dirname \"$0\")/ok\" ]\n";

#[test]
fn a_real_job_whose_worker_stops_goes_stale_once_and_fresh_once() {
    let s = RedisServer::start();
    let d = job_dir("[redbike.stale]\nA = 3\n[redbike.notify]\n", STEADY);
    std::fs::write(path(&d, "ok"), "").unwrap();
    let r = Receiver::start();
    let _n = notifier(&s, &d, &["--webhook", &r.url()]);
    let rb = || bike(&s, d.path()).args(["-c", "rb.toml"]);
    rb().args(["set", "steady:A", "FREQ=SECONDLY"]).ok();
    let _disp = Bg(Some(rb().args(["dispatch"]).spawn()));
    let work = Bg(Some(rb().args(["work", "A", "--", "./job.sh"]).spawn()));
    let kinds_now = || kinds(&r).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    thread::sleep(Duration::from_secs(2));
    drop(work); // the worker is gone: no success from now on
    assert!(
        wait_until(20.0, || kinds_now().contains(&"stale".to_string())),
        "{:?}",
        r.bodies()
    );
    thread::sleep(Duration::from_secs(2));
    let _work = Bg(Some(rb().args(["work", "A", "--", "./job.sh"]).spawn()));
    assert!(
        wait_until(20.0, || kinds_now().contains(&"fresh".to_string())),
        "{:?}",
        r.bodies()
    );
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(kinds_now(), ["stale", "fresh"], "{:?}", r.bodies());
    let b = r.bodies();
    assert_eq!(b[0]["job"], "steady:A");
    assert_eq!(b[0]["bound"], 3);
}
