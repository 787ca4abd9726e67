//! Log lines: `ts=... level=... msg="..."`, journald priorities, level selection.

use std::{
    io::Read,
    os::{fd::AsFd, unix::fs::MetadataExt},
    process::{Child, Command, Stdio},
    thread::JoinHandle,
};

use redis::Commands;

use crate::{dispatch::finish, harness::*};

/// One log line, taken apart.
#[derive(Debug)]
struct Line {
    priority: Option<u8>,
    ts: Option<String>,
    level: String,
    msg: String,
}

/// Parses `[<N>][ts=TIME ]level=LEVEL msg="JSON string"`; panics on any other shape.
fn parse(line: &str) -> Line {
    let (priority, rest) = match line.strip_prefix('<') {
        Some(r) => {
            let (p, r) = r.split_once('>').expect("priority closes with >");
            (Some(p.parse().expect("numeric priority")), r)
        }
        None => (None, line),
    };
    let (ts, rest) = match rest.strip_prefix("ts=") {
        Some(r) => {
            let (ts, r) = r.split_once(' ').expect("a space after ts");
            (Some(ts.to_string()), r)
        }
        None => (None, rest),
    };
    let rest = rest.strip_prefix("level=").expect("level= comes next");
    let (level, rest) = rest.split_once(' ').expect("a space after level");
    let value = rest.strip_prefix("msg=").expect("msg= comes last");
    let msg: String = serde_json::from_str(value).expect("msg is one JSON string");
    assert!(
        ["error", "warn", "info", "debug"].contains(&level),
        "{line}"
    );
    Line {
        priority,
        ts,
        level: level.to_string(),
        msg,
    }
}

fn parse_all(stderr: &str) -> Vec<Line> {
    stderr.lines().map(parse).collect()
}

/// Asserts a plain line's timestamp: RFC 3339 UTC with milliseconds, close to now.
fn assert_ts(line: &Line) {
    let ts = line.ts.as_deref().expect("a ts");
    assert_eq!(ts.len(), "2026-11-21T18:40:00.123Z".len(), "{ts}");
    assert!(ts.ends_with('Z'), "{ts}");
    let at = chrono::DateTime::parse_from_rfc3339(ts).expect("RFC 3339");
    assert!((at.timestamp() - now()).abs() <= 60, "{ts}");
}

/// Starts `redbike ARGS` whose stderr is a pipe named by `$JOURNAL_STREAM`, as under
/// systemd; returns the child and a thread that collects the stderr.
fn spawn_journaled(
    s: &RedisServer,
    dir: &std::path::Path,
    args: &[&str],
) -> (Child, JoinHandle<String>) {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let meta = std::fs::File::from(writer.as_fd().try_clone_to_owned().unwrap())
        .metadata()
        .unwrap();
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .env_remove("REDBIKE_CONFIG")
        .env_remove("REDBIKE_LOG")
        .env("REDBIKE_REDIS_URL", s.url())
        .env("REDBIKE_PREFIX", "t")
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer);
    let child = cmd.spawn().unwrap();
    // Our copy of the write end goes with `cmd`, so reading ends when the child exits.
    drop(cmd);
    let collect = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = reader.read_to_string(&mut text);
        text
    });
    (child, collect)
}

/// Runs a dispatcher until it has queued `past:A`, then stops it with HALT.
fn dispatch_once(s: &RedisServer, d: &tempfile::TempDir, child: Child) -> Option<i32> {
    assert!(wait_until(5.0, || {
        s.con().llen::<_, usize>("t-work-A").unwrap() == 1
    }));
    bike(s, d.path()).args(["control", "HALT"]).ok();
    finish(child, 5.0).0
}

#[test]
fn dispatcher_lines_have_ts_level_and_a_quoted_msg() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "past:A", "AT:100"]).ok();
    let child = bike(&s, d.path())
        .env("REDBIKE_LOG", "debug")
        .args(["dispatch"])
        .spawn();
    assert!(wait_until(5.0, || {
        s.con().llen::<_, usize>("t-work-A").unwrap() == 1
    }));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    let (code, err) = finish(child, 5.0);
    assert_eq!(code, Some(0), "{err}");
    let lines = parse_all(&err);
    assert!(!lines.is_empty(), "{err}");
    for line in &lines {
        assert_eq!(line.priority, None, "{line:?}");
        assert_ts(line);
    }
    let dispatched = lines
        .iter()
        .find(|l| l.msg.starts_with("dispatched 1 job(s) due by "))
        .unwrap_or_else(|| panic!("no dispatched line in {err}"));
    assert_eq!(dispatched.level, "info");
    assert!(err.contains(" level=info msg=\"dispatched 1 job(s) due by "));
}

#[test]
fn under_the_journal_lines_carry_priorities_and_no_ts() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "past:A", "AT:100"]).ok();
    let (child, err) = spawn_journaled(&s, d.path(), &["dispatch"]);
    assert_eq!(dispatch_once(&s, &d, child), Some(0));
    let err = err.join().unwrap();
    let lines = parse_all(&err);
    assert!(lines
        .iter()
        .any(|l| l.msg.starts_with("dispatched 1 job(s)")));
    for line in &lines {
        assert_eq!(line.ts, None, "{err}");
        let expected = match line.level.as_str() {
            "error" => 3,
            "warn" => 4,
            "info" => 6,
            _ => 7,
        };
        assert_eq!(line.priority, Some(expected), "{err}");
    }
    // The final error of a command is priority err there.
    let (child, err) = spawn_journaled(&s, d.path(), &["control", "BOGUS"]);
    assert_eq!(finish(child, 10.0).0, Some(2));
    let err = err.join().unwrap();
    assert!(
        err.starts_with("<3>redbike: unknown control signal"),
        "{err}"
    );
    // So is a usage error caught by the argument parser.
    let (child, err) = spawn_journaled(&s, d.path(), &["dispatch", "--bogus"]);
    assert_eq!(finish(child, 10.0).0, Some(2));
    let err = err.join().unwrap();
    assert!(err.starts_with("<3>redbike: unexpected argument"), "{err}");
}

#[test]
fn a_journal_stream_naming_another_file_is_ignored() {
    let s = RedisServer::start();
    let d = workdir();
    let _: () = s.con().hset("t-statuses", "x:A", "garbage").unwrap();
    let o = bike(&s, d.path())
        .env("JOURNAL_STREAM", "1:1")
        .args(["statuses"])
        .run()
        .success();
    let lines = parse_all(&o.stderr);
    assert_eq!(lines.len(), 1, "{}", o.stderr);
    assert_eq!(lines[0].priority, None);
    assert_ts(&lines[0]);
}

#[test]
fn quotes_and_control_characters_in_a_message_keep_one_line() {
    let s = RedisServer::start();
    let d = workdir();
    let _: () = s
        .con()
        .hset("t-statuses", "x:A", "gar\"bage\nsecond line\u{1b}[31m")
        .unwrap();
    let o = bike(&s, d.path()).args(["statuses"]).run().success();
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(!o.stderr.contains('\u{1b}'), "{}", o.stderr);
    let line = parse(o.stderr.trim_end_matches('\n'));
    assert_eq!(line.level, "warn");
    assert_eq!(
        line.msg,
        "status of \"x:A\" is \"gar\\\"bage\\nsecond line\\u{1b}[31m\", not EVENT:TIMESTAMP; left out"
    );
}

/// Runs `statuses` (which warns about one bad status) with `env` and `flags`; returns
/// whether the warning was written.
fn warns(s: &RedisServer, d: &tempfile::TempDir, env: Option<&str>, flags: &[&str]) -> bool {
    let mut b = bike(s, d.path()).args(flags).args(["statuses"]);
    b = match env {
        Some(v) => b.env("REDBIKE_LOG", v),
        None => b.env_remove("REDBIKE_LOG"),
    };
    let o = b.run().success();
    parse_all(&o.stderr).iter().any(|l| l.level == "warn")
}

#[test]
fn level_comes_from_flags_then_redbike_log() {
    let s = RedisServer::start();
    let d = workdir();
    let _: () = s.con().hset("t-statuses", "x:A", "garbage").unwrap();
    assert!(warns(&s, &d, None, &[]));
    assert!(!warns(&s, &d, Some("error"), &[]));
    assert!(warns(&s, &d, Some("WARNING"), &[]));
    assert!(warns(&s, &d, Some(""), &[]));
    // Any flag beats the variable: -v counts up from info, -q down.
    assert!(warns(&s, &d, Some("error"), &["-v"]));
    assert!(warns(&s, &d, Some("error"), &["-q"]));
    assert!(!warns(&s, &d, Some("debug"), &["-qq"]));
}

#[test]
fn a_bad_redbike_log_is_a_usage_error_and_writes_nothing() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .env("REDBIKE_LOG", "loud")
        .args(["set", "x:A", "NOW"])
        .run()
        .fails(2, "REDBIKE_LOG=\"loud\" is not a log level");
    assert_eq!(s.dbsize(), 0);
}

#[test]
fn job_output_with_quotes_and_escapes_stays_one_line_each() {
    let s = RedisServer::start();
    let d = workdir();
    let job = "#!/bin/sh\nprintf '%s\\n' 'he said \"hi\" \\ and left'\nprintf 'esc\\033[31m red\\ttab\\r\\n'\n";
    std::fs::write(path(&d, "job.sh"), job).unwrap();
    let _ = Command::new("chmod")
        .arg("+x")
        .arg(path(&d, "job.sh"))
        .status();
    bike(&s, d.path()).args(["set", "q:A", "NOW"]).ok();
    let child = bike(&s, d.path())
        .args(["work", "A", "--", "./job.sh"])
        .spawn();
    assert!(wait_until(10.0, || {
        let st: Option<String> = s.con().hget("t-statuses", "q:A").unwrap();
        st.is_some_and(|v| v.starts_with("STP:"))
    }));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
    let msgs: Vec<String> = parse_all(&err).into_iter().map(|l| l.msg).collect();
    assert!(
        msgs.contains(&"[q:A] he said \"hi\" \\ and left".to_string()),
        "{err}"
    );
    assert!(
        msgs.contains(&"[q:A] esc\u{1b}[31m red\ttab".to_string()),
        "{err}"
    );
    assert!(!err.contains('\u{1b}') && !err.contains('\t'), "{err}");
}
