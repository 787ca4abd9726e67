//! Errors and credentials at the edges: jobs never see redbike's Redis
//! credentials; failing loops back off and log once per change of state, and errors
//! that retrying cannot fix end a process with status 78; messages say what is wrong;
//! no backoff directory is left behind; a stale timefile is named.

use std::{
    io::{Read, Write},
    net::TcpListener,
    time::{Duration, Instant},
};

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
    security::{ACL_COMMANDS, SECRET},
    work::Setup,
};

/// Exit status of an error that retrying cannot fix (sysexits' EX_CONFIG).
const CANNOT_FIX: i32 = 78;

/// Creates ACL user `rb` (password [`SECRET`]) limited to prefix `t`, with docs/deployments.md's
/// commands less `without`, and with the prefix's channels unless `no_channels`.
fn acl_user(s: &RedisServer, without: &[&str], no_channels: bool) -> String {
    let mut args: Vec<String> = ["SETUSER", "rb", "reset", "on", &format!(">{SECRET}")]
        .iter()
        .map(|a| a.to_string())
        .collect();
    args.extend(["resetkeys", "~t-*", "resetchannels"].map(String::from));
    if !no_channels {
        args.push("&t-*".into());
    }
    args.push("-@all".into());
    args.extend(
        ACL_COMMANDS
            .iter()
            .filter(|c| !without.contains(c))
            .map(|c| format!("+{c}")),
    );
    let _: () = redis::cmd("ACL").arg(&args).query(&mut s.con()).unwrap();
    format!("redis://rb:{SECRET}@127.0.0.1:{}/0", s.port)
}

/// Stops a dispatcher or worker with SIGTERM and asserts that it exits 0.
fn stopped_by_sigterm(w: Bg) {
    signal(w.child(), libc::SIGTERM);
    let (code, err) = w.finish(10.0);
    assert_eq!(code, Some(0), "{err}");
}

/// Lines of `text` that contain `part`.
fn lines_with(text: &str, part: &str) -> usize {
    text.lines().filter(|l| l.contains(part)).count()
}

// ---------------------------------------------------------------------------------
// Class 3: a job's environment.

/// A job that writes its environment (and what it can read of its worker's) to files.
const ENV_JOB: &str = r#"#!/bin/sh
env > "$DUMP_DIR/env.$1"
cat "/proc/$PPID/environ" > "$DUMP_DIR/parent.$1" 2>/dev/null || echo unreadable > "$DUMP_DIR/parent.$1"
"#;

/// Runs `env:A` once under a worker given `REDBIKE_REDIS_URL` (with the password) and
/// `REDBIKE_CONFIG`; returns the job's environment and what it read of the worker's.
/// The worker runs as an unprivileged user when the test runs as root, so that reading
/// /proc/PPID/environ is a question of the worker's dumpability, not of root's powers.
fn job_environment(config: &str) -> (String, String) {
    let s = RedisServer::start();
    let url = acl_user(&s, &[], false);
    let d = workdir();
    for (name, text) in [("job.sh", ENV_JOB), ("redbike.conf", config)] {
        std::fs::write(path(&d, name), text).unwrap();
    }
    // The worker may run as another user (see below): it needs the directory and the job.
    std::process::Command::new("chmod")
        .args(["-R", "a+rwx"])
        .arg(d.path())
        .status()
        .unwrap();
    bike(&s, d.path())
        .env("REDBIKE_REDIS_URL", &url)
        .args(["set", "env:A", "NOW"])
        .ok();
    // SAFETY: geteuid(2) takes no arguments.
    let wrapper: &[&str] = if unsafe { libc::geteuid() } == 0 {
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        &[]
    };
    let cmd = bare_via(d.path(), wrapper)
        .env("REDBIKE_REDIS_URL", &url)
        .env("REDBIKE_CONFIG", path(&d, "redbike.conf"))
        .env("DUMP_DIR", d.path())
        .env("TMPDIR", d.path())
        .env("MY_OWN_VARIABLE", "kept")
        .args(["work", "A", "--"])
        .args([path(&d, "job.sh")]);
    let w = Bg(Some(cmd.spawn()));
    assert!(
        wait_until(10.0, || path(&d, "parent.env:A").exists()),
        "the job did not run: {}",
        stderr_of(w.child())
    );
    std::thread::sleep(Duration::from_millis(200));
    stopped_by_sigterm(w);
    let env = std::fs::read_to_string(path(&d, "env.env:A")).unwrap();
    let parent = std::fs::read(path(&d, "parent.env:A")).unwrap();
    (env, String::from_utf8_lossy(&parent).into_owned())
}

#[test]
fn jobs_never_see_redbikes_redis_credentials() {
    let (env, parent) = job_environment("");
    for name in ["REDBIKE_REDIS_URL", "REDBIKE_CONFIG"] {
        assert!(
            !env.contains(&format!("{name}=")),
            "{name} reaches the job:\n{env}"
        );
    }
    assert!(
        !env.contains(SECRET),
        "the password reaches the job:\n{env}"
    );
    // Everything else of the worker's environment, and the job's own variables.
    for line in [
        "MY_OWN_VARIABLE=kept",
        "REDBIKE_JOBID=env:A",
        "REDBIKE_QUEUE=A",
        "REDBIKE_PREFIX=t",
        "REDBIKE_SCHEDULE=STOP",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing:\n{env}");
    }
    assert!(env.contains("REDBIKE_BACKOFF_FILE="), "{env}");
    // Nor can the job read its worker's environment through /proc.
    assert!(
        !parent.contains(SECRET),
        "read from /proc/PPID/environ: {parent}"
    );
    assert_eq!(parent.trim(), "unreadable");
}

#[test]
fn pass_redis_env_gives_jobs_redbikes_own_variables() {
    let (env, _) = job_environment("[redbike]\npass-redis-env = true\n");
    assert!(
        env.lines()
            .any(|l| l.starts_with("REDBIKE_REDIS_URL=") && l.contains(SECRET)),
        "{env}"
    );
    assert!(env.contains("REDBIKE_CONFIG="), "{env}");
}

// ---------------------------------------------------------------------------------
// Class 6: failing loops back off, log once per change of state; errors retrying
// cannot fix end a process that never worked with status 78.

#[test]
fn a_worker_whose_queue_key_has_the_wrong_type_exits_78_at_start() {
    let t = Setup::new();
    let _: () = t.s.con().set("t-work-A", "not a list").unwrap();
    let w = Bg(Some(t.worker(&["A"])));
    let (code, err) = w.finish(10.0);
    assert_eq!(code, Some(CANNOT_FIX), "{err}");
    assert_eq!(lines_with(&err, "WRONGTYPE"), 1, "{err}");
    assert!(err.contains("retrying cannot fix this"), "{err}");
    assert!(err.lines().count() <= 4, "{err}");
}

#[test]
fn a_worker_missing_an_acl_permission_exits_78_at_start() {
    let t = Setup::new();
    t.set("j:A", "NOW");
    let url = acl_user(&t.s, &["rpop"], false);
    let w = Bg(Some(
        bike(&t.s, t.d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .args(["work", "A", "--", "./job.sh"])
            .spawn(),
    ));
    let (code, err) = w.finish(10.0);
    assert_eq!(code, Some(CANNOT_FIX), "{err}");
    assert!(err.contains("grant the ACL user"), "{err}");
    assert!(err.lines().count() <= 4, "{err}");
    assert!(!err.contains(SECRET), "{err}");
    assert_eq!(t.status("j:A").split(':').next(), Some("ENQ"));
}

#[test]
fn a_queue_key_turning_wrong_type_later_is_retried_with_few_log_lines() {
    let t = Setup::new();
    let w = Bg(Some(t.worker(&["A"])));
    // Listening before the wake-up below, which it would otherwise miss.
    assert!(wait_subscribed(&t.s, "t-wake-A"), "not subscribed");
    // And past its first claim, after which such an error is retried (before it, the
    // worker ends: exit 78, see
    // a_worker_whose_queue_key_has_the_wrong_type_exits_78_at_start).
    t.set("first:A", "NOW");
    assert!(t.wait_status("first:A", "STP"), "first:A did not run");
    let _: () = t.s.con().del("t-work-A").unwrap();
    let _: () = t.s.con().set("t-work-A", "not a list").unwrap();
    // Woken (as `set` wakes it), the worker claims and meets the key; for 4 s it keeps
    // trying with backoff and says so once (a reminder comes only after a minute).
    let _: () = t.s.con().publish("t-wake-A", 1).unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let mut w = w;
    assert!(w.alive(), "{}", stderr_of(w.child()));
    let err = stderr_of(w.child());
    assert_eq!(lines_with(&err, "WRONGTYPE"), 1, "{err}");
    // (Less the line of the first job's output.)
    let lines = err.lines().filter(|l| !l.contains("[first:A]"));
    assert!(lines.count() <= 3, "{err}");
    assert!(err.contains("until an operator fixes it"), "{err}");
    assert!(!err.contains("***"), "an error text masked as a URL: {err}");
    // Fixed, the worker carries on by itself.
    let _: () = t.s.con().del("t-work-A").unwrap();
    t.set("after:A", "NOW");
    assert!(t.wait_runs(2), "{}", stderr_of(w.child()));
    assert!(wait_stderr(w.child(), "commands work again", 10.0));
    let err = t.stop(w.0.take().unwrap());
    assert!(err.lines().count() <= 8, "{err}");
}

#[test]
fn a_dispatcher_whose_timeline_has_the_wrong_type_exits_78_at_start() {
    let s = RedisServer::start();
    let d = workdir();
    let _: () = s.con().set("t-timeline", "not a sorted set").unwrap();
    let w = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    let (code, err) = w.finish(10.0);
    assert_eq!(code, Some(CANNOT_FIX), "{err}");
    assert_eq!(lines_with(&err, "WRONGTYPE"), 1, "{err}");
    assert!(err.lines().count() <= 4, "{err}");
}

#[test]
fn a_dispatcher_meeting_a_wrong_type_later_logs_it_once_as_refused_not_an_outage() {
    let s = RedisServer::start();
    let d = workdir();
    let w = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    assert!(wait_stderr(w.child(), "dispatcher starting", 10.0));
    // Past its first pass (a due job queued), after which such an error is retried
    // (before it, the dispatcher ends: exit 78, see the test above).
    bike(&s, d.path()).args(["set", "due:A", "FREQ=DAILY"]).ok();
    let _: () = s.con().zadd("t-timeline", "due:A", 1).unwrap();
    assert!(wait_until(10.0, || s
        .con()
        .llen::<_, usize>("t-work-A")
        .unwrap()
        == 1));
    let _: () = s.con().del("t-timeline").unwrap();
    let _: () = s.con().set("t-timeline", "not a sorted set").unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let mut w = w;
    assert!(w.alive());
    let err = stderr_of(w.child());
    assert_eq!(lines_with(&err, "WRONGTYPE"), 1, "{err}");
    assert!(err.contains("redis refused a command: WRONGTYPE"), "{err}");
    // It needs an operator: an error, not a warning.
    let line = err
        .lines()
        .find(|l| l.contains("WRONGTYPE"))
        .unwrap_or_default();
    assert!(line.contains("level=error"), "{line}");
    assert!(!err.contains("***"), "an error text masked as a URL: {err}");
    let _: () = s.con().del("t-timeline").unwrap();
    assert!(wait_stderr(w.child(), "commands work again", 10.0));
    assert!(!stderr_of(w.child()).contains("is back after"));
    stopped_by_sigterm(w);
}

#[test]
fn a_timefile_failing_later_is_logged_once_and_its_recovery_too() {
    let s = RedisServer::start();
    let d = workdir();
    let w = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    let tf = path(&d, ".redbike.timefile");
    assert!(wait_until(10.0, || tf.exists()));
    // A directory where the file was: every rename onto it fails (even for root).
    std::fs::remove_file(&tf).unwrap();
    std::fs::create_dir(&tf).unwrap();
    std::fs::write(tf.join("keep"), "").unwrap();
    // An idle dispatcher passes (and writes the timefile) every 10 s, and at once when
    // woken: woken every 100 ms for 4 s, it fails many passes and says so once.
    let nudge = || {
        let _: () = s.con().publish("t-wake-control", "nudge").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    };
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(4) {
        nudge();
    }
    assert_eq!(
        lines_with(&stderr_of(w.child()), "cannot write timefile"),
        1,
        "{}",
        stderr_of(w.child())
    );
    std::fs::remove_dir_all(&tf).unwrap();
    assert!(wait_until(10.0, || {
        nudge();
        wait_stderr(w.child(), "the timefile is written again", 0.0)
    }));
    assert!(tf.is_file());
    stopped_by_sigterm(w);
}

#[test]
fn a_listener_refused_its_channels_says_so_once() {
    let t = Setup::new();
    let url = acl_user(&t.s, &[], true);
    let w = Bg(Some(
        bike(&t.s, t.d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .args(["work", "A", "--", "./job.sh"])
            .spawn(),
    ));
    std::thread::sleep(Duration::from_secs(4));
    let mut w = w;
    assert!(w.alive(), "{}", stderr_of(w.child()));
    let err = stderr_of(w.child());
    assert_eq!(
        lines_with(&err, "cannot subscribe to the wake-up channels"),
        1,
        "{err}"
    );
    assert!(err.lines().count() <= 3, "{err}");
}

#[test]
fn the_systemd_units_do_not_restart_on_errors_retrying_cannot_fix() {
    for unit in ["redbike-dispatch.service", "redbike-work@.service"] {
        let text = std::fs::read_to_string(format!(
            "{}/contrib/systemd/{unit}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("RestartPreventExitStatus="))
            .unwrap_or("");
        let codes: Vec<&str> = line.split_whitespace().collect();
        assert!(
            codes.contains(&"2") && codes.contains(&"78"),
            "{unit}: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Class 8: messages that say what is wrong.

#[test]
fn a_wrong_password_or_database_says_so_and_exits_78() {
    let s = RedisServer::start();
    let url = acl_user(&s, &[], false);
    let d = workdir();
    let wrong = url.replace(SECRET, "not-the-password");
    let o = bare(d.path())
        .env("REDBIKE_REDIS_URL", &wrong)
        .args(["set", "j:A", "NOW"])
        .run()
        .fails(
            CANNOT_FIX,
            "authentication failed: wrong user name or password",
        );
    assert!(
        o.stderr.contains("retrying cannot fix this"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("cannot reach"), "{}", o.stderr);
    let o = bare(d.path())
        .env("REDBIKE_REDIS_URL", url.replace("/0", "/99"))
        .args(["tell", "j:A"])
        .run()
        .fails(CANNOT_FIX, "DB index is out of range");
    assert!(o.stderr.contains("no such database"), "{}", o.stderr);
    assert!(!o.stderr.contains(SECRET), "{}", o.stderr);
    // A worker or dispatcher started so gives up at once, as systemd must see it.
    for args in [&["dispatch"][..], &["work", "A", "--", "/bin/true"][..]] {
        let w = Bg(Some(
            bare(d.path())
                .env("REDBIKE_REDIS_URL", &wrong)
                .args(args)
                .spawn(),
        ));
        let (code, err) = w.finish(10.0);
        assert_eq!(code, Some(CANNOT_FIX), "{args:?}: {err}");
        assert_eq!(lines_with(&err, "authentication failed"), 1, "{err}");
    }
    assert_eq!(s.dbsize(), 0);
}

/// A loopback port that answers each connection with an HTTP error page.
fn http_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\noops\n",
            );
        }
    });
    port
}

#[test]
fn a_port_that_speaks_http_is_named_in_one_line() {
    let d = workdir();
    let o = bare(d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://127.0.0.1:{}/0", http_port()),
        )
        .args(["tell", "j:A"])
        .run()
        .fails(
            69,
            "the reply is not in the Redis protocol (is this port a Redis server?)",
        );
    assert!(!o.stderr.contains("Unexpected"), "{}", o.stderr);
}

#[test]
fn a_server_that_never_answers_times_out_saying_so() {
    // Accepts connections (the kernel does, from its backlog) and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let d = workdir();
    let started = Instant::now();
    let o = bare(d.path())
        .env("REDBIKE_REDIS_URL", format!("redis://127.0.0.1:{port}/0"))
        .args(["tell", "j:A"])
        .run()
        .fails(69, "no answer within 10s (timed out)");
    assert!(!o.stderr.contains("os error"), "{}", o.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));
    drop(listener);
}

#[test]
fn a_load_cut_off_says_how_many_rows_were_written_and_that_loading_again_is_safe() {
    let s = RedisServer::start();
    let d = workdir();
    let rows: String = (0..20_000)
        .map(|i| format!("job{i}:A,CONTINUE\n"))
        .collect();
    std::fs::write(path(&d, "big.csv"), rows).unwrap();
    let load = bike(&s, d.path()).args(["load", "big.csv"]).spawn();
    // Once some rows are in, hold the writes, and drop the loader's connection while
    // its next batch waits.
    let mut con = s.con();
    assert!(wait_until(30.0, || con
        .hlen::<_, i64>("t-schedules")
        .unwrap_or(0)
        > 0));
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "10000", "WRITE"])
        .query(&mut con)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _: () = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query(&mut con)
        .map(|_: i64| ())
        .unwrap();
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
    let (code, err) = finish(load, 30.0);
    let written: usize = con.hlen("t-schedules").unwrap();
    assert_eq!(code, Some(69), "{err}");
    // Whole batches of 1,000 were confirmed; the one under way may be in or not.
    let said =
        |n: usize| format!("after {n} of 20000 job(s) were written, and perhaps the next 1000");
    assert!(
        err.contains(&said(written)) || err.contains(&said(written.saturating_sub(1000))),
        "{written} written: {err}"
    );
    assert!(
        err.contains("running the same command again is safe"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // And it is: the same load again sets every job.
    bike(&s, d.path()).args(["load", "big.csv"]).ok();
    assert_eq!(con.hlen::<_, i64>("t-schedules").unwrap(), 20_000);
}

// ---------------------------------------------------------------------------------
// Class 9: small things.

#[test]
fn a_worker_stopped_cleanly_leaves_no_directory_behind() {
    let t = Setup::new();
    let tmp = workdir();
    t.set("j:A", "NOW");
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .env("TMPDIR", tmp.path())
        .args(["work", "A", "--", "./job.sh"])
        .spawn();
    assert!(t.wait_runs(1));
    let made = || {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("redbike-work-"))
            .count()
    };
    assert_eq!(made(), 1);
    t.stop(w);
    assert_eq!(made(), 0);
}

#[test]
fn help_lists_every_status_event() {
    let d = workdir();
    let help = bare(d.path()).args(["--help"]).ok();
    let words: Vec<&str> = help.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    // Every event src/status.rs names, in its table or as a constant, so that a new one
    // cannot be left out.
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/status.rs")).unwrap();
    let events: std::collections::BTreeSet<&str> = source
        .lines()
        .filter_map(|l| {
            let row = l.strip_prefix("//! | `").and_then(|r| r.split('`').next());
            row.or_else(|| l.strip_prefix("pub const ")?.split(':').next())
        })
        .collect();
    assert!(events.len() >= 10, "{events:?}");
    for event in events {
        assert!(words.contains(&event), "--help lacks {event}");
    }
    assert!(words.contains(&"78"), "--help lacks exit status 78");
}

#[test]
fn a_stale_timefile_makes_set_and_load_warn() {
    let s = RedisServer::start();
    let d = workdir();
    let old = now() - 3 * 3600;
    std::fs::write(path(&d, ".redbike.timefile"), old.to_string()).unwrap();
    let o = bike(&s, d.path())
        .args(["set", "j:A", "FREQ=HOURLY"])
        .run()
        .success();
    assert!(o.stderr.contains("the timefile"), "{}", o.stderr);
    assert!(o.stderr.contains("ago), not now"), "{}", o.stderr);
    std::fs::write(path(&d, "jobs.csv"), "k:A,FREQ=HOURLY\n").unwrap();
    bike(&s, d.path())
        .args(["load", "jobs.csv"])
        .run()
        .success()
        .stderr_has("not now");
    // A timefile a dispatcher keeps fresh, or --after, says nothing.
    std::fs::write(path(&d, ".redbike.timefile"), now().to_string()).unwrap();
    let o = bike(&s, d.path())
        .args(["set", "j:A", "FREQ=HOURLY"])
        .run()
        .success();
    assert_eq!(o.stderr, "");
    std::fs::write(path(&d, ".redbike.timefile"), old.to_string()).unwrap();
    let o = bike(&s, d.path())
        .args(["set", "j:A", "FREQ=HOURLY", "-a", &old.to_string()])
        .run()
        .success();
    assert_eq!(o.stderr, "");
}

#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let s = RedisServer::start();
    let d = workdir();
    // More rows than a pipe holds, CSV through the csv crate, JSON, text and help.
    let rows: String = (0..3000).map(|i| format!("p{i}:A,FREQ=DAILY\n")).collect();
    std::fs::write(d.path().join("f.csv"), rows).unwrap();
    bike(&s, d.path()).args(["load", "f.csv"]).ok();
    let commands: &[&[&str]] = &[
        &["statuses"],
        &["schedules"],
        &["history"],
        &["history", "--format", "json"],
        &["stats"],
        &["stats", "--format", "json"],
        &["stats", "--format", "prometheus"],
        &["ps", "--format", "csv"],
        &["ps", "--format", "json"],
        &["top", "--once"],
        &["tell", "p1:A"],
        &["set", "p1:A", "FREQ=DAILY"],
        &["next", "FREQ=MINUTELY", "-n", "10000"],
        &["completions", "bash"],
        &["ping"],
        &["set", "--help"],
    ];
    for args in commands {
        let o = bike(&s, d.path()).args(*args).run_into_closed_pipe();
        assert_eq!(o.code, 0, "{args:?}: {o:?}");
        for bad in ["pipe", "panicked", "cannot write"] {
            assert!(!o.stderr.contains(bad), "{args:?}: {o:?}");
        }
    }
}
