//! Deployments: TLS, an ACL user, Sentinel with a failover and Redis Cluster,
//! each on a real local topology from `topology.rs`, configured through the
//! `[redbike-redis]` table of a file passed with `-c`, and `redbike ping`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use tempfile::TempDir;

use crate::{
    dispatch::signal,
    harness::*,
    security::{acl_setuser, SECRET},
    topology::*,
};

/// A job that appends its id to the file named by its first argument, taking ~20 ms.
const JOB: &str = "#!/bin/sh\necho \"$REDBIKE_JOBID\" >> \"$1\"\nsleep 0.005\n";

/// A TOML string.
fn q(s: impl std::fmt::Display) -> String {
    format!("{:?}", s.to_string())
}

/// A TOML array of strings.
fn list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(q).collect();
    format!("[{}]", items.join(", "))
}

/// Writes `rb.toml` in `d`: `[redbike] prefix` and the `[redbike-redis]` lines.
fn config(d: &TempDir, prefix: &str, redis: &str) {
    let text = format!(
        "[redbike]\nprefix = {}\n\n[redbike-redis]\n{redis}\n",
        q(prefix)
    );
    std::fs::write(path(d, "rb.toml"), text).unwrap();
}

/// `redbike -c rb.toml` in `d`, with no Redis or prefix from the environment.
fn rb(d: &TempDir) -> Bike {
    bare(d.path())
        .env_remove("REDBIKE_PREFIX")
        .args(["-c", "rb.toml"])
}

/// Writes the job script into `d`; returns the path of the log it appends to.
fn job_script(d: &TempDir) -> PathBuf {
    let job = path(d, "job.sh");
    std::fs::write(&job, JOB).unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&job)
        .status();
    path(d, "runs.log")
}

/// The job ids in the run log, in order.
fn runs(log: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `redbike dispatch` and `redbike work A -j N -- job.sh runs.log` with `d`'s config.
fn start_pair(d: &TempDir, jobs: usize) -> (Bg, Bg) {
    let dispatcher = Bg(Some(rb(d).args(["dispatch"]).spawn()));
    let worker = Bg(Some(
        rb(d)
            .args([
                "work",
                "A",
                "-j",
                &jobs.to_string(),
                "--",
                "./job.sh",
                "runs.log",
            ])
            .spawn(),
    ));
    (dispatcher, worker)
}

/// Stops both with `control HALT` and asserts they exit 0 without a panic; returns
/// their logs.
fn halt(d: &TempDir, pair: (Bg, Bg)) -> String {
    rb(d).args(["control", "HALT"]).ok();
    let mut logs = String::new();
    for (who, p) in [("dispatcher", pair.0), ("worker", pair.1)] {
        let (code, err) = p.finish(20.0);
        assert_eq!(code, Some(0), "{who}: {err}");
        assert!(!err.contains("panicked"), "{who}: {err}");
        logs += &err;
    }
    logs
}

/// Parses `key: value` lines.
fn fields(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `redbike ping` succeeds; its fields, with the ones every mode prints checked for
/// form (the version is compared with the server's own where the test knows it).
fn ping(d: &TempDir) -> BTreeMap<String, String> {
    let out = rb(d).args(["ping"]).ok();
    let f = fields(&out);
    for key in [
        "server",
        "mode",
        "role",
        "version",
        "tls",
        "user",
        "latency_ms",
    ] {
        assert!(f.contains_key(key), "ping lacks {key}: {out}");
    }
    let latency: f64 = f["latency_ms"]
        .parse()
        .unwrap_or_else(|_| panic!("latency_ms: {out}"));
    assert!((0.0..5000.0).contains(&latency), "{out}");
    assert_eq!(f["role"], "master", "{out}");
    f
}

/// The redis_version a server reports.
fn version(port: u16) -> String {
    info_field(&text(port, &["INFO", "server"]), "redis_version").unwrap()
}

/// A failed run: `code`, one line on stderr, no panic; returns stderr in lower case.
fn refused(o: Outcome, code: i32) -> String {
    o.fails(code, "").stderr.to_lowercase()
}

// ---------------------------------------------------------------------------------
// TLS

/// rediss:// to `s`, trusting the test CA, with the client certificate.
fn client_cert_config(d: &TempDir, s: &TlsServer) {
    let c = &s.certs;
    config(
        d,
        "t",
        &format!(
            "url = {}\ntls-ca = {}\ntls-cert = {}\ntls-key = {}",
            q(s.url()),
            q(c.ca.display()),
            q(c.client_cert.display()),
            q(c.client_key.display())
        ),
    );
}

#[test]
fn tls_ping_trusts_the_given_ca_only() {
    let Some(s) = TlsServer::start(false) else {
        return;
    };
    let d = workdir();
    let (ca, other) = (s.certs.ca.display(), s.certs.other_ca.display());
    config(
        &d,
        "t",
        &format!("url = {}\ntls-ca = {}", q(s.url()), q(&ca)),
    );
    let f = ping(&d);
    assert_eq!(f["mode"], "standalone");
    assert_eq!(f["tls"], "on");
    assert_eq!(f["server"], format!("127.0.0.1:{}", s.tls_port));
    assert_eq!(f["user"], "default");
    assert_eq!(f["version"], version(s.port));

    // The same with host/port and `tls = true` instead of a rediss:// URL.
    config(
        &d,
        "t",
        &format!(
            "host = \"127.0.0.1\"\nport = {}\ntls = true\ntls-ca = {}",
            s.tls_port,
            q(&ca)
        ),
    );
    assert_eq!(ping(&d)["tls"], "on");

    // A CA that did not sign the server's certificate: refused, nothing written.
    config(
        &d,
        "t",
        &format!("url = {}\ntls-ca = {}", q(s.url()), q(&other)),
    );
    for args in [&["ping"][..], &["set", "j:A", "NOW"]] {
        let err = refused(rb(&d).args(args).run(), 69);
        assert!(
            err.contains("certificate") || err.contains("tls"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(s.dbsize(), 0);

    // `tls-insecure` skips verification: no CA needed for a self-signed setup.
    config(
        &d,
        "t",
        &format!("url = {}\ntls-insecure = true", q(s.url())),
    );
    assert_eq!(ping(&d)["tls"], "on");
}

#[test]
fn tls_client_certificate_when_the_server_requires_one() {
    let Some(s) = TlsServer::start(true) else {
        return;
    };
    let d = workdir();
    let c = &s.certs;
    client_cert_config(&d, &s);
    assert_eq!(ping(&d)["tls"], "on");
    rb(&d).args(["set", "j:A", "NOW"]).ok();
    assert!(s.dbsize() > 0);

    // Without a certificate the server hangs up (with TLS 1.3 only after the
    // handshake, on the first read): still a clean exit 69.
    let d2 = workdir();
    config(
        &d2,
        "t",
        &format!("url = {}\ntls-ca = {}", q(s.url()), q(c.ca.display())),
    );
    let before = s.dbsize();
    refused(rb(&d2).args(["ping"]).run(), 69);
    refused(rb(&d2).args(["set", "k:A", "NOW"]).run(), 69);
    assert_eq!(s.dbsize(), before);
}

#[test]
fn tls_round_trip_dispatches_and_runs_a_job() {
    let Some(s) = TlsServer::start(true) else {
        return;
    };
    let d = workdir();
    client_cert_config(&d, &s);
    let log = job_script(&d);
    rb(&d).args(["set", "x:A", "NOW"]).ok();
    // A one-off job due shortly, so the dispatcher has something to move too.
    rb(&d)
        .args(["set", "later:A", &format!("AT:{}", now() + 1)])
        .ok();
    let pair = start_pair(&d, 1);
    let ran = wait_until(20.0, || {
        let r = runs(&log);
        r.contains(&"x:A".into()) && r.contains(&"later:A".into())
    });
    // Both processes talk to the TLS port (the plain one is the test's alone).
    let over_tls = s.tls_clients().len();
    for p in [&pair.0, &pair.1] {
        signal(p.child(), libc::SIGTERM);
    }
    let mut logs = String::new();
    for (who, p) in [("dispatcher", pair.0), ("worker", pair.1)] {
        let (code, err) = p.finish(20.0);
        assert_eq!(code, Some(0), "{who}: {err}");
        logs += &err;
    }
    assert!(ran, "jobs did not run over TLS: {:?} {logs}", runs(&log));
    assert!(over_tls >= 2, "{over_tls} TLS client(s): {logs}");
    assert_eq!(runs(&log), ["x:A", "later:A"]);
    let status: String = redis::cmd("HGET")
        .arg("t-statuses")
        .arg("x:A")
        .query(&mut s.con())
        .unwrap();
    assert!(status.starts_with("STP"), "{status}");
}

// ---------------------------------------------------------------------------------
// ACL

#[test]
fn acl_user_is_named_by_ping() {
    // The restricted user of docs/deployments.md (security.rs): ping must work with its commands.
    let s = RedisServer::start();
    acl_setuser(&s, "rb", "t");
    let d = workdir();
    config(
        &d,
        "t",
        &format!(
            "host = \"127.0.0.1\"\nport = {}\nusername = \"rb\"\npassword = {}",
            s.port,
            q(SECRET)
        ),
    );
    let out = rb(&d).args(["ping"]).ok();
    assert!(!out.contains(SECRET), "{out}");
    let f = ping(&d);
    assert_eq!(f["user"], "rb");
    assert_eq!(f["tls"], "off");
    assert_eq!(f["mode"], "standalone");
    assert_eq!(f["server"], format!("127.0.0.1:{}", s.port));
}

// ---------------------------------------------------------------------------------
// Configuration rules

#[test]
fn deployment_keys_that_exclude_each_other_are_refused() {
    let d = workdir();
    let sentinels = format!(
        "sentinels = [\"127.0.0.1:{}\"]\nmaster-name = \"mymaster\"",
        dead_port()
    );
    let nodes = format!("cluster-nodes = [\"127.0.0.1:{}\"]", dead_port());
    // (the [redbike-redis] lines, the keys the message must name)
    let cases: Vec<(String, &[&str])> = vec![
        (
            format!("{sentinels}\nurl = \"redis://127.0.0.1:1/0\""),
            &["sentinels", "url"],
        ),
        (
            format!("{sentinels}\nhost = \"127.0.0.1\""),
            &["sentinels", "host"],
        ),
        (format!("{sentinels}\nport = 1"), &["sentinels", "port"]),
        (
            format!("{nodes}\nurl = \"redis://127.0.0.1:1/0\""),
            &["cluster-nodes", "url"],
        ),
        (
            format!("{sentinels}\n{nodes}"),
            &["sentinels", "cluster-nodes"],
        ),
        (
            format!("sentinels = [\"127.0.0.1:{}\"]", dead_port()),
            &["master-name"],
        ),
    ];
    for (redis, keys) in cases {
        config(&d, "{app}", &redis);
        for args in [&["ping"][..], &["set", "j:A", "NOW"]] {
            let err = refused(rb(&d).args(args).run(), 2);
            for key in keys {
                assert!(err.contains(key), "{redis:?} {args:?}: {err}");
            }
        }
    }
    // Sentinels that are all unreachable: 69, like any unreachable Redis.
    config(&d, "t", &sentinels);
    refused(rb(&d).args(["ping"]).run(), 69);
}

// ---------------------------------------------------------------------------------
// Sentinel

fn sentinel_config(d: &TempDir, sentinels: &[String]) {
    config(
        d,
        "t",
        &format!(
            // wait-replicas = 1: the fence that makes a failover exactly-once (docs/deployments.md).
            // Without it this test saw a job run twice in 1 of 4 runs, and a manual run
            // with a busier worker 47 duplicates and 32 lost `set`s out of 400.
            "sentinels = {}\nmaster-name = \"mymaster\"\nwait-replicas = 1",
            list(sentinels)
        ),
    );
}

#[test]
fn sentinel_ping_names_the_master() {
    let set = SentinelSet::start();
    let master = set.master_port();
    let d = workdir();
    sentinel_config(&d, &set.sentinel_addrs());
    let f = ping(&d);
    assert_eq!(f["mode"], "sentinel");
    assert_eq!(f["server"], format!("127.0.0.1:{master}"));
    assert_eq!(f["master-name"], MASTER_NAME);
    assert_eq!(f["tls"], "off");
    assert_eq!(f["version"], version(master));
    // A dead sentinel first in the list: the next one answers.
    let mut addrs = vec![format!("127.0.0.1:{}", dead_port())];
    addrs.extend(set.sentinel_addrs());
    sentinel_config(&d, &addrs);
    assert_eq!(ping(&d)["server"], format!("127.0.0.1:{master}"));
}

/// `redbike set ID SCHEDULE` with `d`'s config, retried (as an operator would) while
/// it fails during the failover, for at most `secs`. Whether it succeeded.
fn set_retrying(d: &TempDir, id: &str, schedule: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if rb(d).args(["set", id, schedule]).run().code == 0 {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Writes `ID,SCHEDULE` rows to a CSV and loads it.
fn load(d: &TempDir, name: &str, rows: &[(String, String)]) {
    let csv: String = rows.iter().map(|(id, s)| format!("{id},{s}\r\n")).collect();
    std::fs::write(path(d, name), csv).unwrap();
    rb(d).args(["load", name]).ok();
}

#[test]
fn sentinel_failover_loses_no_job_and_runs_none_twice() {
    let set = SentinelSet::start();
    let old = set.master_port();
    let d = workdir();
    sentinel_config(&d, &set.sentinel_addrs());
    let log = job_script(&d);

    // Before: 300 jobs straight into the queue (NOW) and 100 one-offs due over the next
    // 1-4 s, for the dispatcher to move while the failover happens. Every schedule is
    // one-shot, so a job that runs twice shows up in the log twice.
    let t0 = now();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    let mut rows = vec![];
    for i in 0..400 {
        let id = format!("pre{i}:A");
        let sched = if i < 300 {
            "NOW".to_string()
        } else {
            format!("AT:{}", t0 + 1 + (i % 4))
        };
        expected.insert(id.clone());
        rows.push((id, sched));
    }
    load(&d, "pre.csv", &rows);

    let mut pair = start_pair(&d, 4);
    assert!(
        wait_until(60.0, || runs(&log).len() >= 30),
        "jobs do not run: {:?}",
        runs(&log).len()
    );

    // During: a steady trickle of `set`s from another thread while the sentinels fail
    // over; each retried until it succeeds (it may fail while there is no writable
    // master) and only then counted as expected. The trickle goes on until the
    // failover is over and at least 5 were made: on a loaded host each is slow (a
    // process start and retries), so a fixed time after the failover made too few.
    let stop = Arc::new(AtomicBool::new(false));
    let mid: Arc<Mutex<(Vec<String>, Vec<String>)>> = Arc::default();
    let first_set: Arc<Mutex<Option<Instant>>> = Arc::default();
    let setter = {
        let (stop, mid, first_set) = (stop.clone(), mid.clone(), first_set.clone());
        let dir = d.path().to_path_buf();
        thread::spawn(move || {
            let d = tempfile::TempDir::new_in(&dir).unwrap();
            std::fs::copy(dir.join("rb.toml"), d.path().join("rb.toml")).unwrap();
            let mut i = 0;
            while (!stop.load(Ordering::SeqCst) || i < 5) && i < 150 {
                first_set.lock().unwrap().get_or_insert_with(Instant::now);
                let id = format!("mid{i}:A");
                let sched = if i % 2 == 0 {
                    "NOW".to_string()
                } else {
                    format!("AT:{}", now() + 1)
                };
                let ok = set_retrying(&d, &id, &sched, 15);
                let mut m = mid.lock().unwrap();
                if ok { &mut m.0 } else { &mut m.1 }.push(id);
                drop(m);
                i += 1;
                thread::sleep(Duration::from_millis(30));
            }
        })
    };
    thread::sleep(Duration::from_millis(300));
    let before = runs(&log).len();
    let (new, took) = set.failover();
    let failed_over = Instant::now();
    // Jobs must still be in flight while it happens, or the test proves little.
    println!(
        "sentinel failover took {took:?}; jobs run before it {before}, after it {}",
        runs(&log).len()
    );
    assert!(
        before < 300,
        "the failover came after most jobs ran ({before})"
    );
    assert_ne!(new, old);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    setter.join().unwrap();
    let (mid_ok, mid_failed) = std::mem::take(&mut *mid.lock().unwrap());
    assert!(
        mid_failed.is_empty(),
        "`set` did not get through within 15 s: {mid_failed:?}"
    );
    // The trickle began before the failover was over, so it met it.
    assert!(
        first_set.lock().unwrap().is_some_and(|at| at < failed_over),
        "no set was made during the failover"
    );
    assert!(mid_ok.len() >= 5, "only {} sets", mid_ok.len());
    expected.extend(mid_ok);

    // After: both processes are still up, and a final batch lands on the new master.
    assert!(pair.0.alive(), "dispatcher exited");
    assert!(pair.1.alive(), "worker exited");
    let post: Vec<(String, String)> = (0..30)
        .map(|i| (format!("post{i}:A"), "NOW".to_string()))
        .collect();
    load(&d, "post.csv", &post);
    let mut on_new = con(new);
    for (id, _) in &post {
        let sched: Option<String> = redis::cmd("HGET")
            .arg("t-schedules")
            .arg(id)
            .query(&mut on_new)
            .unwrap();
        assert_eq!(sched.as_deref(), Some("STOP"), "{id} not on the new master");
        expected.insert(id.clone());
    }
    assert_eq!(replication(new).0, "master");

    let all_ran = wait_until(60.0, || {
        let done: BTreeSet<String> = runs(&log).into_iter().collect();
        expected.is_subset(&done)
    });
    // Let a duplicate that is on its way show up before counting.
    thread::sleep(Duration::from_millis(1500));
    let logs = halt(&d, pair);

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in runs(&log) {
        *counts.entry(id).or_default() += 1;
    }
    let lost: Vec<&String> = expected
        .iter()
        .filter(|id| !counts.contains_key(*id))
        .collect();
    let twice: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    let unknown: Vec<&String> = counts.keys().filter(|id| !expected.contains(*id)).collect();
    assert!(
        all_ran && lost.is_empty(),
        "lost {} job(s): {lost:?}\n{logs}",
        lost.len()
    );
    assert!(twice.is_empty(), "ran more than once: {twice:?}\n{logs}");
    assert!(unknown.is_empty(), "unexpected runs: {unknown:?}");
    assert_eq!(counts.len(), expected.len());
}

// ---------------------------------------------------------------------------------
// Cluster

fn cluster_config(d: &TempDir, prefix: &str, nodes: &[String], extra: &str) {
    config(
        d,
        prefix,
        &format!("cluster-nodes = {}\n{extra}", list(nodes)),
    );
}

#[test]
fn cluster_ping_and_the_hash_tag_rule() {
    let c = Cluster::start();
    let slot = c.keyslot("app");
    let owner = c.owner_of_slot(slot);
    // Only a node that does not serve the prefix's slot: redbike must find the owner.
    let elsewhere: Vec<String> = c
        .nodes
        .iter()
        .filter(|n| n.port != owner)
        .take(1)
        .map(Proc::addr)
        .collect();
    let d = workdir();
    for prefix in ["{app}", "{app}-jobs"] {
        cluster_config(&d, prefix, &elsewhere, "");
        let f = ping(&d);
        assert_eq!(f["mode"], "cluster", "{prefix}");
        assert_eq!(f["slot"], slot.to_string(), "{prefix}");
        assert_eq!(f["server"], format!("127.0.0.1:{owner}"), "{prefix}");
        assert_eq!(f["version"], version(owner));
    }

    // A prefix without a (non-empty) hash tag would scatter one prefix's keys over
    // the slots, where its Lua scripts cannot run: refused with advice, nothing written.
    for prefix in ["app", "{}app", "app}{"] {
        cluster_config(&d, prefix, &c.addrs(), "");
        for args in [&["ping"][..], &["set", "j:A", "NOW"]] {
            let err = refused(rb(&d).args(args).run(), 2);
            assert!(
                err.contains("hash") && err.contains("{app}"),
                "{prefix} {args:?}: {err}"
            );
        }
    }
    // A cluster has only database 0.
    cluster_config(&d, "{app}", &c.addrs(), "db = 1");
    let err = refused(rb(&d).args(["set", "j:A", "NOW"]).run(), 2);
    assert!(err.contains("db"), "{err}");
    for n in &c.nodes {
        assert_eq!(c.keys_on(n.port), Vec::<String>::new());
    }
}

#[test]
fn cluster_prefixes_spread_over_nodes_and_each_runs() {
    let c = Cluster::start();
    // Tags whose slots (15495 and 3300) are served by different nodes.
    let tags = ["a", "b"];
    let owners: Vec<u16> = tags.iter().map(|t| c.owner(t)).collect();
    assert_ne!(owners[0], owners[1], "pick tags on different nodes");

    let mut apps = vec![];
    for tag in tags {
        let d = workdir();
        cluster_config(&d, &format!("{{{tag}}}"), &c.addrs(), "");
        let log = job_script(&d);
        let mut rows: Vec<(String, String)> =
            (0..5).map(|i| (format!("j{i}:A"), "NOW".into())).collect();
        // One for the dispatcher to move.
        rows.push(("later:A".into(), format!("AT:{}", now() + 1)));
        load(&d, "jobs.csv", &rows);
        let pair = start_pair(&d, 2);
        apps.push((d, log, pair, rows));
    }
    for (d, log, pair, rows) in apps {
        let ran = wait_until(20.0, || runs(&log).len() >= rows.len());
        let logs = halt(&d, pair);
        assert!(ran, "{:?}: {logs}", runs(&log));
        let mut got = runs(&log);
        got.sort();
        let mut want: Vec<String> = rows.into_iter().map(|r| r.0).collect();
        want.sort();
        assert_eq!(got, want);
    }

    // Each prefix's keys are all on the node serving its tag, and nowhere else.
    for (tag, owner) in tags.iter().zip(&owners) {
        let mark = format!("{{{tag}}}");
        for n in &c.nodes {
            let here: Vec<String> = c
                .keys_on(n.port)
                .into_iter()
                .filter(|k| k.starts_with(&mark))
                .collect();
            if n.port == *owner {
                assert!(here.contains(&format!("{mark}-statuses")), "{here:?}");
            } else {
                assert!(here.is_empty(), "{mark} keys on {}: {here:?}", n.port);
            }
        }
        let status: String = redis::cmd("HGET")
            .arg(format!("{mark}-statuses"))
            .arg("j0:A")
            .query(&mut con(*owner))
            .unwrap();
        assert!(status.starts_with("STP"), "{status}");
    }
}

// ---------------------------------------------------------------------------------
// Shards: one prefix split over hash slots (issue 19 part 3)

/// Writes `rb.toml` in `d`: `prefix`, `shards` and the `[redbike-redis]` lines.
fn sharded_config(d: &TempDir, prefix: &str, shards: u32, redis: &str) {
    let text = format!(
        "[redbike]\nprefix = {}\nshards = {shards}\n\n[redbike-redis]\n{redis}\n",
        q(prefix)
    );
    std::fs::write(path(d, "rb.toml"), text).unwrap();
}

/// The shard of job `id` in a prefix split into `n`: FNV-1a 64 of the id, through
/// SplitMix64's finalizer, mod n (written out again here, as docs/deployments.md says).
fn shard_of(id: &str, n: u64) -> u64 {
    let mut z = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % n
}

#[test]
fn a_split_racing_an_unsplit_write_never_strands_a_job() {
    // `load` with shards = 4 and `set` with shards = 1 on the same empty prefix at the
    // same moment: one of them may win, but a job never lands in the unsplit layout of
    // a prefix recorded as split (no sharded process would ever read it).
    let server = RedisServer::start();
    let url = format!("url = {}", q(server.url()));
    let one = workdir();
    sharded_config(&one, "{race}", 1, &url);
    let four = workdir();
    sharded_config(&four, "{race}", 4, &url);
    std::fs::write(path(&four, "jobs.csv"), "a:A,STOP\r\nb:A,STOP\r\n").unwrap();
    let mut refused = 0;
    for round in 0..50 {
        let _: () = redis::cmd("FLUSHALL").query(&mut server.con()).unwrap();
        let (split, set) = std::thread::scope(|s| {
            let split = s.spawn(|| rb(&four).args(["load", "jobs.csv"]).run());
            let set = s.spawn(|| rb(&one).args(["set", "x:A", "STOP"]).run());
            (split.join().unwrap(), set.join().unwrap())
        });
        let mut con = server.con();
        let marker: Option<String> = redis::Commands::get(&mut con, "{race}-shards").unwrap();
        let unsplit: i64 = redis::Commands::hlen(&mut con, "{race}-schedules").unwrap();
        assert!(
            !(marker.as_deref() == Some("4") && unsplit > 0),
            "round {round}: a job stranded in the unsplit layout; load: {} {}; set: {} {}",
            split.code,
            split.stderr,
            set.code,
            set.stderr
        );
        assert!(
            split.code == 0 || set.code == 0,
            "round {round}: both failed"
        );
        if set.code != 0 && split.code == 0 {
            assert!(set.stderr.contains("split"), "{}", set.stderr);
            refused += 1;
        }
    }
    eprintln!("the unsplit set was refused in {refused} of 50 rounds");
}

/// An output with its times cut out: the last field of `statuses` rows, and every ISO
/// time (`2026-01-01T00:00:00Z`).
fn without_times(out: &str) -> String {
    let iso = |w: &[u8]| {
        w.len() == 20
            && w.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    };
    out.lines()
        .map(|l| match l.rsplit_once(',') {
            Some((row, t)) if t.trim().parse::<i64>().is_ok() && row.matches(',').count() == 1 => {
                row.to_string()
            }
            _ => {
                let b = l.as_bytes();
                let mut kept = String::new();
                let mut i = 0;
                while i < b.len() {
                    if b.len() - i >= 20 && iso(&b[i..i + 20]) {
                        kept.push_str("TIME");
                        i += 20;
                    } else {
                        // ISO times are ASCII: cutting at a byte inside one is safe, and
                        // any other byte is copied whole below.
                        let c = l[i..].chars().next().unwrap_or(' ');
                        kept.push(c);
                        i += c.len_utf8();
                    }
                }
                kept
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn shards_route_by_job_and_list_as_an_unsplit_prefix() {
    let server = RedisServer::start();
    let url = format!("url = {}", q(server.url()));
    // The same jobs under an unsplit prefix and under one split into 4 shards.
    let one = workdir();
    sharded_config(&one, "{one}", 1, &url);
    let four = workdir();
    sharded_config(&four, "{four}", 4, &url);
    let t0 = now();
    let rows: Vec<(String, String)> = (0..60)
        .map(|i| {
            let sched = match i % 4 {
                0 => "NOW".to_string(),
                1 => format!("AT:{}", t0 + 3 * 3600),
                2 => "FREQ=HOURLY".to_string(),
                _ => "CRON:*/5 * * * *".to_string(),
            };
            (format!("job{i}:Q{}", i % 3), sched)
        })
        .collect();
    // One reference instant for both loads, a whole hour 1 to 2 hours ahead (before
    // the AT rows): both prefixes get the same next runs, none of them due while the
    // test runs (from now, a 5-minute boundary between the two loads, or between the
    // two `stats`, made `timeline.due` and `tell` differ).
    let after = ((t0 / 3600 + 2) * 3600).to_string();
    let csv: String = rows.iter().map(|(id, s)| format!("{id},{s}\r\n")).collect();
    for d in [&one, &four] {
        std::fs::write(path(d, "jobs.csv"), &csv).unwrap();
        rb(d).args(["load", "jobs.csv", "--after", &after]).ok();
        // From a pipe too: a split prefix reads it again for each shard.
        let piped: String = (0..8).map(|i| format!("piped{i}:Q1,STOP\r\n")).collect();
        let out = rb(d).args(["load", "-"]).stdin(piped).ok();
        assert!(out.contains("loaded 8 job(s)"), "{out}");
        rb(d).args(["set", "extra:Q0", "STOP"]).ok();
        rb(d).args(["unset", "job7:Q1"]).ok();
        rb(d).args(["pause", "job9:Q0"]).ok();
    }

    // Listings: byte for byte what the unsplit prefix prints.
    let before = (t0 + 10).to_string();
    for args in [
        &["statuses", "-b", &before][..],
        &["schedules"],
        &["check"],
        &["history"],
    ] {
        // Times (statuses', a pause's) are those of the two prefixes' writes, which
        // may fall in two seconds: compared without them.
        let a = without_times(&rb(&one).args(args).ok());
        let b = without_times(&rb(&four).args(args).ok());
        assert_eq!(a, b, "{args:?}");
    }
    let stats = |d: &TempDir| {
        let out = rb(d).args(["stats", "--format", "json", "--scan"]).ok();
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
        for k in ["prefix", "time", "redis", "lease_keys"] {
            v.as_object_mut().unwrap().remove(k);
        }
        // Ages count from the two prefixes' writes, which may fall in two seconds.
        for q in v["queues"].as_array_mut().into_iter().flatten() {
            q.as_object_mut().unwrap().remove("oldest_age_seconds");
        }
        v
    };
    assert_eq!(stats(&one), stats(&four));
    // One job's commands go to its shard.
    // (`tell` without the times of the writes: statuses, the pause's since.)
    let tell = |d: &TempDir, id: &str| {
        let mut v: serde_json::Value =
            serde_json::from_str(&rb(d).args(["tell", id]).ok()).unwrap();
        if let Some(s) = v["status"].as_str() {
            v["status"] = s.split(':').next().unwrap_or_default().into();
        }
        if let Some(p) = v["paused"].as_object_mut() {
            p.remove("since");
            p.remove("since_utc");
        }
        v
    };
    for id in ["job0:Q0", "job9:Q0", "job2:Q2"] {
        assert_eq!(tell(&one, id), tell(&four, id), "{id}");
    }

    // Keys: the unsplit prefix is named as ever and records nothing; the split one
    // holds no job itself, records 4, and each job is in the shard its id hashes to.
    let keys = server.dump();
    assert!(keys.contains_key("{one}-schedules"), "{keys:?}");
    assert!(!keys.contains_key("{one}-shards"));
    assert!(!keys.keys().any(|k| k.starts_with("{one/")), "{keys:?}");
    assert!(!keys.contains_key("{four}-schedules"));
    let mut con = server.con();
    let recorded: String = redis::cmd("GET")
        .arg("{four}-shards")
        .query(&mut con)
        .unwrap();
    assert_eq!(recorded, "4");
    let mut used = BTreeSet::new();
    for (id, _) in &rows {
        let k = shard_of(id, 4);
        used.insert(k);
        if id == "job7:Q1" {
            continue;
        }
        let held: bool = redis::cmd("HEXISTS")
            .arg(format!("{{four/{k}}}-schedules"))
            .arg(id)
            .query(&mut con)
            .unwrap();
        assert!(held, "{id} not in shard {k}");
    }
    assert_eq!(used.len(), 4, "the jobs use every shard");
    // ping names every shard; top shows one unsplit prefix and says how to look at one.
    let out = rb(&four).args(["ping"]).ok();
    for k in 0..4 {
        assert!(
            out.contains(&format!("shard {k}: prefix {{four/{k}}} server ")),
            "{out}"
        );
    }
    let err = refused(rb(&four).args(["top", "--once"]).run(), 2);
    assert!(err.contains("--prefix"), "{err}");

    // Another number of shards is refused, nothing written; so is the unsplit view.
    let dbsize = server.dbsize();
    for (shards, why) in [(3, "split into 4 shard(s)"), (1, "split into 4 shard(s)")] {
        sharded_config(&four, "{four}", shards, &url);
        for args in [&["set", "x:Q0", "NOW"][..], &["statuses"], &["dispatch"]] {
            if shards == 1 && args[0] == "dispatch" {
                continue; // an unsplit dispatcher does not ask (it finds nothing to do)
            }
            let err = refused(rb(&four).args(args).run(), 2);
            assert!(err.contains(why), "{shards} {args:?}: {err}");
        }
    }
    assert_eq!(server.dbsize(), dbsize);
    // A prefix holding jobs of its own cannot be split in place.
    sharded_config(&one, "{one}", 2, &url);
    let err = refused(rb(&one).args(["set", "x:Q0", "NOW"]).run(), 2);
    assert!(err.contains("holds 68 job(s) of its own"), "{err}");
    // A split prefix needs a hash tag.
    sharded_config(&one, "plain", 2, &url);
    let err = refused(rb(&one).args(["statuses"]).run(), 2);
    assert!(err.contains("no hash tag"), "{err}");
    assert_eq!(server.dbsize(), dbsize);
    // Bad input is found before the recorded number is asked: exit 2 without Redis.
    let dead = format!("url = \"redis://127.0.0.1:{}/0\"", dead_port());
    sharded_config(&one, "{one}", 2, &dead);
    for args in [&["set", "bad:", "NOW"][..], &["set", "j:A", "FREQ=NEVER"]] {
        refused(rb(&one).args(args).run(), 2);
    }
    refused(rb(&one).args(["set", "j:A", "NOW"]).run(), 69);
}

/// A job that appends `+` to the file named by its first argument as it starts and `-`
/// as it ends, 0.2 s apart, then its id (appended to the command) to the second: the
/// marks' order is that of the starts and ends, so their running sum is the jobs
/// running at once.
const COUNTED: &str =
    "#!/bin/sh\necho + >> \"$1\"\nsleep 0.2\necho - >> \"$1\"\necho \"$3\" >> \"$2\"\n";

/// From the marks `COUNTED` left: the jobs still running at the end, and the most
/// that ran at once.
fn at_once(marks: &PathBuf) -> (i64, usize) {
    let (mut now, mut most) = (0i64, 0i64);
    for mark in runs(marks) {
        now += if mark == "+" { 1 } else { -1 };
        most = most.max(now);
    }
    (now, usize::try_from(most).unwrap_or(0))
}

/// A Redis and a prefix `{TAG}` split into `shards`, with `COUNTED` in the directory.
fn counted_shards(tag: &str, shards: u32) -> (RedisServer, TempDir) {
    let server = RedisServer::start();
    let d = workdir();
    sharded_config(
        &d,
        &format!("{{{tag}}}"),
        shards,
        &format!("url = {}", q(server.url())),
    );
    std::fs::write(path(&d, "counted.sh"), COUNTED).unwrap();
    (server, d)
}

/// `work A -j J` running `COUNTED` with the files `marks` and `ids`.
fn counted_worker(d: &TempDir, j: usize, marks: &str, ids: &str) -> Bg {
    let j = j.to_string();
    Bg(Some(
        rb(d)
            .args(["work", "A", "-j", &j, "--", "sh", "counted.sh", marks, ids])
            .spawn(),
    ))
}

/// `n` NOW rows of queue A whose ids (`STEM` and a number) fall in shard `k` of `of`.
fn rows_in_shard(stem: &str, k: u64, of: u64, n: usize) -> Vec<(String, String)> {
    (0..n * of as usize * 10)
        .map(|i| format!("{stem}{i}:A"))
        .filter(|id| shard_of(id, of) == k)
        .take(n)
        .map(|id| (id, "NOW".to_string()))
        .collect()
}

#[test]
fn j_bounds_the_jobs_a_worker_of_several_shards_runs_at_once() {
    let (_server, d) = counted_shards("j", 4);
    // Four shards and fewer permits: `-j` still bounds the jobs run at once (without
    // permits, up to four ran), and every job runs.
    for j in [2, 1] {
        let (marks, ids) = (format!("marks{j}"), format!("ids{j}"));
        let rows: Vec<(String, String)> = (0..16)
            .map(|i| (format!("j{j}n{i}:A"), "NOW".to_string()))
            .collect();
        let spread: BTreeSet<u64> = rows.iter().map(|(id, _)| shard_of(id, 4)).collect();
        assert_eq!(spread.len(), 4, "the jobs use every shard");
        load(&d, &format!("jobs{j}.csv"), &rows);
        let worker = counted_worker(&d, j, &marks, &ids);
        let ran = || runs(&path(&d, &ids));
        let all = wait_until(30.0, || ran().len() >= rows.len());
        // Listed once, with its `-j` (each shard's loop registers it).
        let ps: serde_json::Value =
            serde_json::from_str(&rb(&d).args(["ps", "--format", "json"]).ok()).unwrap();
        let workers: Vec<&serde_json::Value> = ps
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["kind"] == "worker")
            .collect();
        assert_eq!(workers.len(), 1, "{ps}");
        assert_eq!(workers[0]["concurrency"], j, "{ps}");
        rb(&d).args(["control", "HALT"]).ok();
        let (code, err) = worker.finish(20.0);
        assert_eq!(code, Some(0), "{err}");
        assert!(all, "-j {j}: {} of {} ran\n{err}", ran().len(), rows.len());
        let mut ran = ran();
        ran.sort();
        let mut expected: Vec<String> = rows.into_iter().map(|(id, _)| id).collect();
        expected.sort();
        assert_eq!(ran, expected, "-j {j}: each job runs once");
        let (now, most) = at_once(&path(&d, &marks));
        assert_eq!(now, 0, "-j {j}: every job ended");
        // Up to the bound and no more: -j 2 does run two at once.
        assert_eq!(most, j, "-j {j}: {most} jobs ran at once\n{err}");
    }
}

#[test]
fn a_busy_shard_fills_the_slots_of_idle_ones() {
    let (_server, d) = counted_shards("b", 4);
    // Every job in one shard: its loop runs all of `-j` at once (with an even share of
    // `-j`, one at a time), and never more.
    let rows = rows_in_shard("busy", 2, 4, 12);
    assert_eq!(rows.len(), 12);
    load(&d, "jobs.csv", &rows);
    let worker = counted_worker(&d, 4, "marks", "ids");
    let ran = || runs(&path(&d, "ids"));
    let all = wait_until(30.0, || ran().len() >= rows.len());
    rb(&d).args(["control", "HALT"]).ok();
    let (code, err) = worker.finish(20.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(all, "{} of {} ran\n{err}", ran().len(), rows.len());
    let (now, most) = at_once(&path(&d, "marks"));
    assert_eq!(now, 0, "every job ended");
    assert_eq!(most, 4, "{most} jobs ran at once\n{err}");
}

#[test]
fn a_shard_with_a_backlog_does_not_starve_the_others() {
    let (_server, d) = counted_shards("f", 2);
    // Forty jobs of 0.2 s in shard 0 (4 s at -j 2), loaded first, then four in shard 1:
    // within about a turn (1 s) shard 1's loop gets room, so its jobs end among the
    // first of the run, not after shard 0's backlog.
    let (busy, other) = (rows_in_shard("s", 0, 2, 40), rows_in_shard("t", 1, 2, 4));
    assert_eq!((busy.len(), other.len()), (40, 4));
    load(&d, "busy.csv", &busy);
    let worker = counted_worker(&d, 2, "marks", "ids");
    // Shard 0's loop has all the room by the time shard 1's jobs come.
    assert!(wait_until(10.0, || runs(&path(&d, "ids")).len() >= 2));
    load(&d, "other.csv", &other);
    let total = busy.len() + other.len();
    let all = wait_until(30.0, || runs(&path(&d, "ids")).len() >= total);
    rb(&d).args(["control", "HALT"]).ok();
    let (code, err) = worker.finish(20.0);
    assert_eq!(code, Some(0), "{err}");
    let ran = runs(&path(&d, "ids"));
    assert!(all, "{} of {total} ran\n{err}", ran.len());
    let last = other
        .iter()
        .map(|(id, _)| ran.iter().position(|r| r == id).unwrap())
        .max()
        .unwrap();
    assert!(
        last < 25,
        "shard 1's last job ended {last}th of {total}: {ran:?}"
    );
}

/// Commands and their Redis CPU (microseconds) on the node at `port` since its last
/// CONFIG RESETSTAT, from INFO commandstats; and the node's own CPU seconds (INFO cpu).
fn node_load(port: u16) -> (u64, u64, f64) {
    let stats = text(port, &["INFO", "commandstats"]);
    let (mut calls, mut usec) = (0, 0);
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        for part in line.split([':', ',']) {
            if let Some(n) = part.strip_prefix("calls=") {
                calls += n.parse::<u64>().unwrap_or(0);
            } else if let Some(n) = part.strip_prefix("usec=") {
                usec += n.parse::<u64>().unwrap_or(0);
            }
        }
    }
    let cpu = text(port, &["INFO", "cpu"]);
    let secs = |f: &str| {
        info_field(&cpu, f)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (calls, usec, secs("used_cpu_sys") + secs("used_cpu_user"))
}

/// Waits (at most 10 s) until every replica has what its master wrote.
fn replicas_caught_up(c: &Cluster) -> bool {
    wait_until(10.0, || {
        c.nodes[..3].iter().all(|m| {
            let info = try_text(m.port, &["INFO", "replication"]).unwrap_or_default();
            let Some(offset) = info_field(&info, "master_repl_offset") else {
                return true; // a killed master
            };
            info.contains(&format!("offset={offset},"))
        })
    })
}

#[test]
fn sharded_prefix_spreads_over_a_cluster_runs_each_job_once_and_survives_a_failover() {
    let c = Cluster::start_with_replicas();
    let masters: Vec<u16> = c.nodes[..3].iter().map(|n| n.port).collect();
    let d = workdir();
    let shards = 12;
    // Twelve shards of {s}: four on each master (the cluster's CRC16 spreads tags; a tag whose
    // shards met on fewer nodes would need more shards).
    let owners: Vec<u16> = (0..shards).map(|k| c.owner(&format!("s/{k}"))).collect();
    for m in &masters {
        assert_eq!(owners.iter().filter(|o| *o == m).count(), 4, "{owners:?}");
    }
    sharded_config(
        &d,
        "{s}",
        shards,
        &format!("cluster-nodes = {}", list(&c.addrs())),
    );
    let log = job_script(&d);
    for m in &masters {
        text(*m, &["CONFIG", "RESETSTAT"]);
    }

    // Before: jobs straight into their queues and one-offs for the dispatchers to move.
    let t0 = now();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    let mut batch = |name: &str, n: usize, sched: &dyn Fn(usize) -> String| {
        let rows: Vec<(String, String)> =
            (0..n).map(|i| (format!("{name}{i}:A"), sched(i))).collect();
        expected.extend(rows.iter().map(|r| r.0.clone()));
        load(&d, &format!("{name}.csv"), &rows);
    };
    batch("pre", 240, &|i| {
        if i < 180 {
            "NOW".into()
        } else {
            format!("AT:{}", t0 + 2)
        }
    });
    let mut pair = start_pair(&d, 6);
    let ran = wait_until(30.0, || runs(&log).len() >= 240);
    assert!(ran, "only {} of 240 ran", runs(&log).len());

    // The work spread over the masters: each holds keys of the prefix, and served a
    // share of the commands.
    let mut figures = vec![];
    for m in &masters {
        let keys: Vec<String> = c
            .keys_on(*m)
            .into_iter()
            .filter(|k| k.starts_with("{s/"))
            .collect();
        assert!(keys.len() >= 8, "node {m}: {keys:?}");
        figures.push(node_load(*m));
    }
    let total: u64 = figures.iter().map(|f| f.0).sum();
    for (m, (calls, usec, cpu)) in masters.iter().zip(&figures) {
        println!(
            "node {m}: {calls} commands ({:.0}% of {total}), {usec} us of commands, {cpu:.2} s cpu",
            *calls as f64 * 100.0 / total as f64
        );
        assert!(
            *calls * 6 >= total,
            "node {m} served {calls} of {total} commands"
        );
    }

    // Failover: one-offs due in a few seconds are on every shard (and replicated); a
    // master is killed; its replica takes over and they still run, once.
    batch("mid", 60, &|_| format!("AT:{}", now() + 5));
    assert!(replicas_caught_up(&c), "replicas lag");
    // The master of a shard, not node 0 (which answers the test's cluster queries).
    let (victim, slot) = (1..shards)
        .map(|k| c.keyslot(&format!("s/{k}")))
        .find_map(|slot| {
            let owner = c.owner_of_slot(slot);
            let i = masters.iter().position(|m| *m == owner)?;
            (i != 0).then_some((i, slot))
        })
        .expect("a shard on node 1 or 2");
    let dead = masters[victim];
    let mut nodes = c;
    nodes.nodes[victim].kill();
    let took = Instant::now();
    let promoted = wait_until(30.0, || {
        let info = try_text(nodes.nodes[0].port, &["CLUSTER", "INFO"]).unwrap_or_default();
        info_field(&info, "cluster_state").as_deref() == Some("ok")
            && nodes.owner_of_slot(slot) != dead
    });
    assert!(promoted, "no failover");
    println!("cluster failover took {:?}", took.elapsed());
    // After: new jobs land on the promoted replica too.
    batch("post", 60, &|_| "NOW".into());
    let all = wait_until(40.0, || runs(&log).len() >= expected.len());
    assert!(pair.0.alive() && pair.1.alive(), "a process exited");
    let logs = halt(&d, pair);
    let got = runs(&log);
    assert!(all, "{} of {} ran\n{logs}", got.len(), expected.len());
    let mut seen = BTreeSet::new();
    let twice: Vec<&String> = got.iter().filter(|id| !seen.insert(*id)).collect();
    assert!(twice.is_empty(), "ran twice: {twice:?}");
    assert_eq!(seen.into_iter().cloned().collect::<BTreeSet<_>>(), expected);
    rb(&d).args(["check"]).ok();
}

/// The figures of docs/scale.md (a split prefix on a Cluster): N one-off jobs
/// (`REDBIKE_SHARD_JOBS`, default 20000) due at once over S shards
/// (`REDBIKE_SHARDS`, default 12) of a 3-master cluster, moved by one dispatcher and run by one worker (`-j 16`, a command that
/// exits at once); prints commands, their Redis CPU and each node's CPU per master,
/// per job, and the jobs per second. Run it explicitly:
/// `REDBIKE_SHARD_JOBS=20000 cargo test --release --test cli shard_load -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: run explicitly (see the doc comment)"]
fn shard_load_per_node() {
    let n: usize = std::env::var("REDBIKE_SHARD_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let shards: usize = std::env::var("REDBIKE_SHARDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let c = Cluster::start();
    let masters: Vec<u16> = c.nodes.iter().map(|n| n.port).collect();
    let d = workdir();
    sharded_config(
        &d,
        "{s}",
        shards as u32,
        &format!("cluster-nodes = {}", list(&c.addrs())),
    );
    let due = now() + 5;
    let rows: Vec<(String, String)> = (0..n)
        .map(|i| (format!("job{i}:A"), format!("AT:{due}")))
        .collect();
    load(&d, "jobs.csv", &rows);
    let dispatcher = Bg(Some(rb(&d).args(["dispatch"]).spawn()));
    let worker = Bg(Some(
        rb(&d)
            .args([
                "work",
                "A",
                "-j",
                "16",
                "--history-limit",
                "0",
                "--",
                "true",
            ])
            .spawn(),
    ));
    // Count from the moment the jobs fall due: dispatch, claim and finish only.
    while now() < due {
        thread::sleep(Duration::from_millis(50));
    }
    for m in &masters {
        text(*m, &["CONFIG", "RESETSTAT"]);
    }
    let before: Vec<f64> = masters.iter().map(|m| node_load(*m).2).collect();
    let start = Instant::now();
    // Jobs not yet done: on a timeline, in a queue or running, in any shard (a few
    // dozen commands a poll, next to some 25 a job).
    let prefix = |k: usize| match shards {
        1 => "s".to_string(),
        _ => format!("s/{k}"),
    };
    let owners: Vec<u16> = (0..shards).map(|k| c.owner(&prefix(k))).collect();
    let left = || -> u64 {
        (0..shards)
            .map(|k| {
                let p = format!("{{{}}}", prefix(k));
                let (a, b, c): (u64, u64, u64) = redis::pipe()
                    .zcard(format!("{p}-timeline"))
                    .llen(format!("{p}-work-A"))
                    .zcard(format!("{p}-leases"))
                    .query(&mut con(owners[k]))
                    .unwrap();
                a + b + c
            })
            .sum()
    };
    let done = wait_until(600.0, || {
        thread::sleep(Duration::from_millis(200));
        left() == 0
    });
    let secs = start.elapsed().as_secs_f64();
    let logs = halt(&d, (dispatcher, worker));
    assert!(done, "{} of {n} left\n{logs}", left());
    println!(
        "{n} jobs over {shards} shard(s) of 3 masters in {secs:.1} s: {:.0} jobs/s",
        n as f64 / secs
    );
    let mut total = 0;
    for (m, cpu0) in masters.iter().zip(before) {
        let (calls, usec, cpu) = node_load(*m);
        let here = owners.iter().filter(|o| *o == m).count();
        let jobs = (here as f64 * n as f64 / shards as f64).max(1.0);
        total += calls;
        println!(
            "node {m}: {here} shard(s) (~{jobs:.0} jobs): {calls} commands, {:.1} per job; {usec} us of commands, {:.1} us per job; node cpu {:.2} s, {:.1} us per job",
            calls as f64 / jobs,
            usec as f64 / jobs,
            cpu - cpu0,
            (cpu - cpu0) * 1e6 / jobs
        );
    }
    println!(
        "all nodes: {total} commands, {:.1} per job",
        total as f64 / n as f64
    );
    let stats = text(masters[0], &["INFO", "commandstats"]);
    let mut by_calls: Vec<(u64, &str)> = stats
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((calls, name))
        })
        .collect();
    by_calls.sort_unstable_by(|a, b| b.cmp(a));
    println!("node {} commands: {by_calls:?}", masters[0]);
}
