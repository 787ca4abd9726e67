//! Untrusted text (docs/configuration.md, "Text for people, values for programs"): what
//! jobs print, notes, schedules and ids stored by another implementation reach people
//! escaped and programs exact; ids `set` refuses stay addressable; backups holding them
//! restore.

use redis::Commands;

use crate::{harness::*, work::Setup};

/// A job that prints what a terminal would obey: an OSC title and a screen clear, a C1
/// CSI, bidirectional overrides, NUL, DEL, invalid UTF-8, a bare CR and a 20,000-byte
/// line ending in escapes (longer than a logged line and than a history tail); then
/// fails.
const HOSTILE_JOB: &str = r#"#!/bin/sh
head -c 20000 /dev/zero | tr '\000' 'x'; printf '\033[2J\302\233long\n'
printf '\033]0;pwned\007\033[2J title\n'
printf 'c1 \302\233 31m bidi \342\200\256 evil \342\201\246 end\n'
printf 'nul \000 del \177 bad \377\376 cr\rx\n'
exit 3
"#;

/// A job id as the Python original may store it: escape sequences, C1, bidi.
const EVIL_ID: &str = "evil\u{1b}]0;x\u{7}\u{9b}\u{202e}:A";
/// A note and a schedule of the same kind.
const EVIL_NOTE: &str = "note\u{1b}[2J\u{85}\u{2067}\u{7f}\tend";
const EVIL_SCHEDULE: &str = "FREQ=DAILY\u{1b}]0;x\u{7}";

/// Asserts that `out` holds nothing a terminal obeys: valid UTF-8 (no stray 8-bit C1
/// byte), no C0 control but newline, tab and the CR of a CRLF, no DEL, no C1 control,
/// no bidirectional mark, embedding, override or isolate.
fn assert_inert(what: &str, out: &[u8]) {
    let text = std::str::from_utf8(out).unwrap_or_else(|e| {
        panic!(
            "{what}: not UTF-8 ({e}): {:?}",
            String::from_utf8_lossy(out)
        )
    });
    for (i, c) in text.char_indices() {
        let allowed = c == '\n' || c == '\t' || (c == '\r' && text[i + 1..].starts_with('\n'));
        let obeyed = matches!(c,
            '\0'..='\x1f' | '\x7f'..='\u{9f}' | '\u{61c}' | '\u{200e}' | '\u{200f}'
            | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(
            allowed || !obeyed,
            "{what}: {c:?} at byte {i} reaches the terminal: {text:?}"
        );
    }
}

fn has(out: &[u8], part: &str) -> bool {
    String::from_utf8_lossy(out).contains(part)
}

#[test]
fn hostile_text_reaches_people_escaped_and_programs_exact() {
    let t = Setup::new();
    let job = path(&t.d, "hostile.sh");
    std::fs::write(&job, HOSTILE_JOB).unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&job)
        .status();
    let rb = || bike(&t.s, t.d.path());
    // A backup another implementation wrote: the hostile id is restored, with a line.
    let csv = path(&t.d, "backup.csv");
    std::fs::write(&csv, format!("\"{EVIL_ID}\",NOW\r\nother:B,FREQ=DAILY\r\n")).unwrap();
    let (code, out, err) = rb().args(["load".as_ref(), csv.as_os_str()]).run_bytes();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert!(
        has(&out, "loaded 2 job(s)"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert_inert("load's lines", &err);
    assert!(
        has(&err, "$'evil\\\\x1b]0;x\\\\x07\\\\u009b\\\\u202e:A'"),
        "{}",
        String::from_utf8_lossy(&err)
    );
    let mut con = t.s.con();
    let _: () = con.hset("t-schedules", "py:C", EVIL_SCHEDULE).unwrap();
    let _: () = con.hset("t-statuses", "py:C", "TML:1").unwrap();
    rb().args(["pause", "other:B", "--note", EVIL_NOTE]).ok();
    rb().args(["pause", "--queue", "B", "--note", EVIL_NOTE])
        .ok();

    let w = bike(&t.s, t.d.path())
        .args(["work", "A", "--", "./hostile.sh"])
        .spawn();
    assert!(t.wait_status(EVIL_ID, "DIE"), "{}", stderr_of(&w));
    assert!(wait_until(10.0, || has(
        &rb().args(["history", "--format", "json"]).run_bytes().1,
        "pwned"
    )));
    let log = t.stop(w);
    assert!(log.contains("pwned") && log.contains("xxxx"), "{log}");
    assert_inert("worker log", log.as_bytes());

    // Piped, CSV keeps the exact bytes: the id, and the output as the tail kept it.
    let (_, piped, _) = rb().args(["history"]).run_bytes();
    assert!(has(&piped, EVIL_ID), "{piped:?}");
    assert!(has(&piped, "\u{1b}]0;pwned\u{7}"), "{piped:?}");
    let (_, schedules, _) = rb().args(["schedules"]).run_bytes();
    assert!(has(&schedules, EVIL_SCHEDULE), "{schedules:?}");
    // JSON keeps them as \u escapes: the same value, nothing a terminal obeys.
    let (_, json, _) = rb().args(["history", "--format", "json"]).run_bytes();
    assert_inert("history --format json", &json);
    let entries: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(entries[0]["job"], EVIL_ID);
    let (_, tell, _) = rb().args(["tell", EVIL_ID]).run_bytes();
    assert_inert("tell", &tell);
    assert!(has(&tell, "pwned"), "{tell:?}");

    // A process description another writer left (ps lists what processes say).
    let desc = serde_json::json!({"id": "evil", "kind": "worker",
        "host": "h\u{1b}[2J\u{202e}", "pid": 1, "queues": ["A\u{9b}"], "concurrency": 1,
        "version": "0", "started": 1, "heartbeat": 1, "ttl": 30});
    let _: () = con.sadd("t-procs", "evil").unwrap();
    let _: () = con.set_ex("t-proc-evil", desc.to_string(), 60).unwrap();
    let (_, ps, _) = rb().args(["ps", "--format", "json"]).run_bytes();
    assert_inert("ps --format json", &ps);

    // On a terminal every command shows them escaped.
    for args in [
        &["ps"][..],
        &["ps", "--format", "csv"],
        &["history"],
        &["statuses"],
        &["schedules"],
        &["check"],
        &["stats", "--scan"],
        &["top", "--once", "--queues", "A:B"],
        &["unset", EVIL_ID],
    ] {
        let Some((_, out)) = rb().args(args).run_on_terminal() else {
            return;
        };
        assert_inert(&format!("{args:?} on a terminal"), &out);
        let seen = String::from_utf8_lossy(&out);
        match args[0] {
            "history" => assert!(seen.contains("\\x1b]0;pwned\\x07"), "{seen}"),
            "statuses" => assert!(
                seen.contains("evil\\x1b]0;x\\x07\\u009b\\u202e:A"),
                "{seen}"
            ),
            "schedules" => assert!(seen.contains("FREQ=DAILY\\x1b]0;x\\x07"), "{seen}"),
            "check" => assert!(
                seen.contains("note\\x1b[2J\\u0085\\u2067\\x7f\\x09end"),
                "{seen}"
            ),
            "stats" => assert!(seen.contains("note\\x1b[2J"), "{seen}"),
            "ps" => assert!(seen.contains("h\\x1b[2J\\u202e"), "{seen}"),
            "unset" => assert!(
                seen.contains("$'evil\\x1b]0;x\\x07\\u009b\\u202e:A': unset"),
                "{seen}"
            ),
            _ => assert!(seen.contains("evil"), "{seen}"),
        }
    }
}

#[test]
fn ids_set_refuses_are_addressable_and_restore() {
    let s = RedisServer::start();
    let d = workdir();
    let rb = || bike(&s, d.path());
    // A backup of a prefix the Python original served: ' lead:A' is restored, the
    // rows whose keys would be other keys of ours (or that name nothing) are left out.
    let csv = path(&d, "backup.csv");
    std::fs::write(
        &csv,
        " lead:A,FREQ=DAILY\r\nq:A-A,NOW\r\n,NOW\r\nok:A,FREQ=DAILY\r\n",
    )
    .unwrap();
    let o = rb()
        .args(["load".as_ref(), csv.as_os_str()])
        .run()
        .success();
    assert!(o.stdout.contains("loaded 2 job(s)"), "{}", o.stdout);
    assert!(
        o.stderr
            .contains("line 1: job id $' lead:A' restored as it is"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("line 2: job id q:A-A left out"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("line 3: job id $'' left out"),
        "{}",
        o.stderr
    );
    assert_eq!(o.stderr.lines().count(), 3, "{}", o.stderr);
    let mut con = s.con();
    let stored: Option<String> = con.hget("t-schedules", " lead:A").unwrap();
    assert_eq!(stored.as_deref(), Some("FREQ=DAILY"));
    assert!(!con.hexists::<_, _, bool>("t-schedules", "q:A-A").unwrap());

    // Every command that names a stored job names this one.
    let lead = " lead:A";
    let tell = rb().args(["tell", lead]).ok();
    assert!(tell.contains("FREQ=DAILY"), "{tell}");
    rb().args(["pause", lead]).run().success().stdout_is(
        "$' lead:A': paused; its schedule is kept (`redbike resume $' lead:A'` places it)\n",
    );
    assert!(rb().args(["resume", lead]).ok().contains("next run at"));
    assert!(rb()
        .args(["run", lead])
        .ok()
        .starts_with("$' lead:A': enqueued"));
    rb().args(["history", lead]).ok();
    let check = rb().args(["check"]).run();
    assert!(check.stdout.contains("odd-id, lead:A,"), "{}", check.stdout);
    assert!(
        check.stderr.contains("1 job id(s) `set` refuses"),
        "{}",
        check.stderr
    );
    rb().args(["unset", lead])
        .run()
        .success()
        .stdout_is("$' lead:A': unset\n");

    // A job the original placed in queue A-A, whose list is job A's lease key while A
    // runs: check names it, and its advice can be followed with redbike.
    let _: () = con.hset("t-schedules", "q:A-A", "FREQ=DAILY").unwrap();
    let _: () = con.set("t-work-A-A", "a-lease-tag").unwrap();
    let check = rb().args(["check"]).run().code(1);
    assert!(
        check.stdout.contains("colliding-id,q:A-A,")
            && check.stdout.contains("`redbike unset q:A-A`"),
        "{}",
        check.stdout
    );
    rb().args(["run", "q:A-A"])
        .run()
        .fails(2, "queue name \"A-A\" cannot be used");
    rb().args(["unset", "q:A-A"])
        .run()
        .success()
        .stdout_is("q:A-A: unset\n");
    let lease: String = con.get("t-work-A-A").unwrap();
    assert_eq!(lease, "a-lease-tag", "unset leaves job A's lease alone");
    let check = rb().args(["check"]).run();
    assert!(!check.stdout.contains("colliding-id"), "{}", check.stdout);

    // What is printed pastes back: a shell turns the $'…' string into the id.
    let odd = "it's \u{1b}[2J\\:A";
    let _: () = con.hset("t-schedules", odd, "FREQ=DAILY").unwrap();
    let printed = rb().args(["pause", odd]).ok();
    let quoted = printed.split(": paused").next().unwrap();
    assert_eq!(quoted, "$'it\\'s \\x1b[2J\\\\:A'");
    if std::process::Command::new("bash")
        .arg("--version")
        .output()
        .is_err()
    {
        skip("bash is not installed");
        return;
    }
    bare_via(d.path(), &["bash", "-c", &format!("\"$0\" unset {quoted}")])
        .env("REDBIKE_REDIS_URL", s.url())
        .run()
        .success()
        .stdout_is(&format!("{quoted}: unset\n"));
    assert!(!con.hexists::<_, _, bool>("t-schedules", odd).unwrap());
}

#[test]
fn out_of_memory_is_named_as_such() {
    let t = Setup::new();
    t.set("j:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "1"])
        .query(&mut t.s.con())
        .unwrap();
    let _: () = t.s.con().lpush("t-work-A", "j:A").unwrap_or(());
    let said = wait_until(20.0, || stderr_of(&w).contains("out of memory"));
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query(&mut t.s.con())
        .unwrap();
    let log = t.stop(w);
    assert!(said, "{log}");
    assert!(!log.contains("odd key"), "{log}");
}

#[test]
fn set_of_a_paused_job_says_it_stays_paused() {
    let t = Setup::new();
    let rb = || bike(&t.s, t.d.path());
    t.set("p:A", "FREQ=DAILY");
    rb().args(["pause", "p:A"]).ok();
    rb().args(["run", "p:A"]).ok();
    rb().args(["set", "p:A", "FREQ=HOURLY"])
        .run()
        .success()
        .stdout_is("p:A: schedule stored; the job stays paused (`redbike resume p:A` places it)\n");
}

#[test]
fn a_tail_of_multibyte_text_keeps_its_bound_and_whole_characters() {
    let t = Setup::new();
    let job = path(&t.d, "wide.sh");
    // 3000 bytes of a 3-byte character on one line: its last 2048 bytes start inside one.
    std::fs::write(
        &job,
        "#!/bin/sh\ni=0\nwhile [ $i -lt 1000 ]; do printf '\\340\\244\\271'; i=$((i+1)); done\n",
    )
    .unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&job)
        .status();
    t.set("wide:A", "NOW");
    let w = bike(&t.s, t.d.path())
        .args(["work", "A", "--", "./wide.sh"])
        .spawn();
    assert!(t.wait_status("wide:A", "STP"), "{}", stderr_of(&w));
    t.stop(w);
    let json = bike(&t.s, t.d.path())
        .args(["history", "wide:A", "--format", "json"])
        .ok();
    let entries: serde_json::Value = serde_json::from_str(&json).unwrap();
    let tail = entries[0]["tail"].as_str().unwrap();
    assert!(tail.len() <= 2048, "{} bytes", tail.len());
    assert!(tail.len() > 2000, "{} bytes", tail.len());
    assert!(tail.chars().all(|c| c == '\u{939}'), "{tail:?}");
}

#[test]
fn an_empty_config_variable_is_named_as_the_variable() {
    let d = workdir();
    bare(d.path())
        .env("REDBIKE_CONFIG", "")
        .args(["statuses"])
        .run()
        .fails(2, "REDBIKE_CONFIG is set but empty");
    // The flag, given empty, is still named as the flag.
    let o = bare(d.path())
        .env("REDBIKE_CONFIG", "")
        .args(["-c", "", "statuses"])
        .run()
        .fails(2, "--config");
    assert!(!o.stderr.contains("REDBIKE_CONFIG"), "{}", o.stderr);
}

#[test]
fn a_prefix_that_lost_its_schedules_is_named_as_such() {
    let mut t = Setup::new();
    std::fs::write(path(&t.d, "rb.toml"), "[redbike]\nheartbeat-ttl = 3\n").unwrap();
    let rb = |t: &Setup| bike(&t.s, t.d.path()).args(["-c", "rb.toml"]);
    std::fs::write(path(&t.d, "slow.sh"), "#!/bin/sh\nsleep 3\n").unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path(&t.d, "slow.sh"))
        .status();
    rb(&t).args(["set", "slow:A", "CONTINUE"]).ok();
    let disp = rb(&t).args(["dispatch"]).spawn();
    let w = rb(&t).args(["work", "A", "--", "./slow.sh"]).spawn();
    assert!(t.wait_status("slow:A", "WRK"), "{}", stderr_of(&w));
    // Both registered before Redis goes: a dispatcher still starting up would register
    // in the Redis that came back, and rightly see nothing lost.
    assert!(wait_until(10.0, || {
        let ids: Vec<String> = t.s.con().smembers("t-procs").unwrap_or_default();
        ids.len() == 2
    }));
    // Redis comes back empty (no persistence) while the job runs.
    t.s.restart();
    let said = |c: &std::process::Child| {
        wait_until(20.0, || {
            stderr_of(c).contains("the prefix lost its schedules: redis came back empty?")
        })
    };
    assert!(said(&w), "worker: {}", stderr_of(&w));
    assert!(said(&disp), "dispatcher: {}", stderr_of(&disp));
    let stats = rb(&t).args(["stats"]).ok();
    assert!(
        stats.contains("lost        the prefix lost its schedules: redis came back empty?"),
        "{stats}"
    );
    // The run that was going on ends; its entry says what happened.
    assert!(wait_until(20.0, || rb(&t)
        .args(["history", "--format", "json"])
        .ok()
        .contains("lost its schedules")));
    // Schedules come back: the note goes.
    rb(&t).args(["set", "other:B", "FREQ=DAILY"]).ok();
    assert!(wait_until(20.0, || !rb(&t)
        .args(["stats"])
        .ok()
        .contains("lost  ")));
    // The worker says so at its next heartbeat (each second with this ttl): waited
    // for, not assumed to have come before the HALT.
    assert!(
        wait_stderr(&w, "holds schedules again", 20.0),
        "{}",
        stderr_of(&w)
    );
    let log = t.stop(w);
    assert!(!log.contains("recovered while it ran"), "{log}");
    crate::dispatch::finish(disp, 5.0);
}

/// Numbers no clock or counter reaches, and text where a number belongs, in every
/// field and score redbike reads, as another program or a hand could leave them: data,
/// never a crash. Each value goes everywhere at once; then the read commands, `top
/// --once`, `serve`'s pages, the commands that write a job, a dispatcher and a worker
/// run over it. None may panic
/// (exit 101, "internal error"); the dispatcher and the worker keep running until
/// told to stop, and stop cleanly.
#[test]
fn numbers_out_of_range_in_redis_are_data_not_a_crash() {
    let s = RedisServer::start();
    let d = workdir();
    for v in [
        "inf",
        "-inf",
        "1e400",
        "nan",
        "99999999999999999999",
        "9223372036854775807",
        "-9223372036854775808",
        "-1",
        "x",
    ] {
        let mut con = s.con();
        let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
        let entry = format!(
            r#"{{"j":"j:A","o":"ok","d":{v},"s":{v},"e":{v},"u":{v},"l":{v},"x":{v},"h":"h","p":{v}}}"#
        );
        let mut pipe = redis::pipe();
        pipe.hset_multiple(
            "t-schedules",
            &[("j:A", "CONTINUE"), ("k:A", "CONTINUE"), ("p:A", "CONTINUE")],
        )
        .hset_multiple(
            "t-statuses",
            &[("j:A", format!("WRK:{v}")), ("k:A", format!("ENQ:{v}"))],
        )
        .hset("t-failures", "j:A", format!("DIE:{v}"))
        .hset_multiple("t-due", &[("j:A", format!("{v}:{v}")), ("k:A", format!("{v}:{v}"))])
        // k:A is dispatched and run: its due field, attempts and backlog are read.
        .hset_multiple(
            "t-attempts",
            &[("j:A", format!("{v}:{v}:{v}")), ("k:A", format!("1:{v}:{v}"))],
        )
        .hset_multiple("t-backlogs", &[("j:A", v), ("k:A", v)])
        .rpush("t-backlog-j:A", v)
        .rpush("t-backlog-k:A", v)
        .hset("t-stale", "j:A", format!("{v}:{v}:{v}"))
        .hset("t-rerun", "j:A", v)
        .hset("t-paused", "p:A", format!(r#"{{"since":{v},"note":"n"}}"#))
        .hset("t-paused-queues", "Q", format!(r#"{{"since":{v},"note":"n"}}"#))
        .hset("t-runs-per-minute", v, v)
        .hset("t-kill", "j:A", v)
        .set("t-fencing", v)
        .set("t-work-A-j:A", "tag")
        .lpush("t-history-j:A", &entry)
        .lpush("t-recent-runs", &entry)
        .lpush("t-recent-failures", &entry)
        .rpush("t-unfiled-runs", &entry)
        .sadd("t-procs", "w1")
        .set(
            "t-proc-w1",
            format!(r#"{{"id":"w1","role":"worker","pid":{v},"host":"h","started":{v},"beat":{v},"concurrency":{v},"queues":["A"]}}"#),
        );
        for (kind, field) in [("run", "entry"), ("stale", "since"), ("set", "at")] {
            pipe.cmd("XADD")
                .arg("t-events")
                .arg("*")
                .arg("v")
                .arg("1")
                .arg("type")
                .arg(kind)
                .arg("job")
                .arg("j:A")
                .arg(field)
                .arg(if kind == "run" { entry.as_str() } else { v });
        }
        // Scores: Redis refuses what is not a number or out of range, so those go as
        // the largest score it takes instead.
        let score = match v {
            "x" | "nan" | "1e400" => "1e300",
            _ => v,
        };
        for key in ["t-timeline", "t-leases", "t-fresh-until"] {
            pipe.cmd("ZADD").arg(key).arg(score).arg("z:A");
        }
        pipe.zadd("t-leases", "j:A", 1).zadd("t-timeline", "k:A", 1);
        let _: () = pipe.query(&mut con).unwrap();
        let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
        let mut work = Bg(Some(
            bike(&s, d.path())
                .args(["work", "A", "-j", "1", "--", "/bin/true"])
                .spawn(),
        ));
        // Both registered: each has been through its first pass or claim.
        let registered = wait_until(10.0, || s.con().scard::<_, usize>("t-procs").unwrap() >= 3);
        assert!(registered, "{v}: {}", stderr_of(disp.child()));
        for args in [
            &["tell", "j:A"][..],
            &["tell", "p:A"],
            &["statuses"],
            &["schedules"],
            &["stats"],
            &["stats", "--format", "json"],
            &["check"],
            &["history", "j:A"],
            &["history", "--format", "json"],
            &["events"],
            &["events", "--format", "json"],
            &["ps"],
            &["ps", "--format", "json"],
            &["top", "--once"],
            &["resume", "p:A"],
            &["run", "k:A"],
            &["kill", "j:A"],
            &["unset", "k:A"],
        ] {
            let (code, _, err) = bike(&s, d.path()).args(args).run_bytes();
            assert!(
                code != 101 && !has(&err, "internal error"),
                "{v}: {args:?}: exit {code}: {}",
                String::from_utf8_lossy(&err)
            );
        }
        let served = crate::serve::Served::start(bike(&s, d.path()), &[]);
        for path in [
            "/",
            "/metrics",
            "/api/v1/overview",
            "/api/v1/stats",
            "/api/v1/ps",
            "/api/v1/paused",
            "/api/v1/history",
            "/api/v1/jobs/j:A",
            "/api/v1/jobs/j:A/next",
        ] {
            let (status, body) = served.get(path);
            assert!(status < 500, "{v}: GET {path}: {status} {body}");
        }
        crate::dispatch::signal(served.bg.child(), 15);
        let (code, said) = served.bg.finish(10.0);
        assert_eq!(code, Some(0), "{v}: serve: {said}");
        assert!(!said.contains("internal error"), "{v}: serve: {said}");
        assert!(
            work.alive(),
            "{v}: the worker stopped: {}",
            stderr_of(work.child())
        );
        bike(&s, d.path()).args(["control", "HALT"]).ok();
        for (what, p) in [("dispatcher", disp), ("worker", work)] {
            let (code, err) = p.finish(15.0);
            assert_eq!(code, Some(0), "{v}: {what}: {err}");
            assert!(!err.contains("internal error"), "{v}: {what}: {err}");
        }
    }
}

/// `ps`'s table escapes what a process wrote of itself cell by cell: a host with a
/// line feed and escapes stays in its row, each row one line, the columns aligned.
#[test]
fn ps_table_escapes_each_cell_and_keeps_its_rows() {
    let s = RedisServer::start();
    let d = workdir();
    let desc = serde_json::json!({"id": "evil", "kind": "worker",
        "host": "h\nFAKE\u{1b}[2J", "pid": 1, "queues": ["A\u{9b}"], "concurrency": 1,
        "version": "0\u{202e}", "started": 1, "heartbeat": 1, "ttl": 30});
    let mut con = s.con();
    let _: () = con.sadd("t-procs", "evil").unwrap();
    let _: () = con.set_ex("t-proc-evil", desc.to_string(), 60).unwrap();
    let (code, out, err) = bike(&s, d.path()).args(["ps"]).run_bytes();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert_inert("ps", &out);
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[1].starts_with("worker  h\\x0aFAKE\\x1b[2J  1    A\\u009b  1     0\\u202e"),
        "{out}"
    );
    assert_eq!(lines[0].find("PID"), lines[1].find("1 "), "{out}");
}

/// `ping` shows the prefix (a bidirectional override is a valid prefix) and what the
/// server answers by the terminal rule.
#[test]
fn ping_escapes_what_it_shows() {
    let s = RedisServer::start();
    let d = workdir();
    let (code, out, err) = bike(&s, d.path())
        .args(["--prefix", "t\u{202e}x", "ping"])
        .run_bytes();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert_inert("ping", &out);
    assert!(has(&out, "\nprefix: t\\u202ex\n"), "{out:?}");
}

/// `load`'s line names its file by the terminal rule, as its errors do: a file name may
/// hold escape sequences and bytes that are not UTF-8.
#[test]
fn load_names_its_file_escaped() {
    use std::os::unix::ffi::OsStrExt;
    let s = RedisServer::start();
    let d = workdir();
    let name = std::ffi::OsStr::from_bytes(b"b\x1b]0;x\x07\xff.csv");
    std::fs::write(d.path().join(name), "x:A,FREQ=DAILY\r\n").unwrap();
    let (code, out, err) = bike(&s, d.path()).args(["load".as_ref(), name]).run_bytes();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "loaded 1 job(s) from b\\x1b]0;x\\x07\\xff.csv\n"
    );
}

/// Job x:A with a status that is not UTF-8, and z:A with such a schedule.
fn plant_not_utf8(con: &mut redis::Connection) {
    let _: () = con.hset("t-schedules", "x:A", "FREQ=DAILY").unwrap();
    let _: () = con.hset("t-statuses", "x:A", b"TML:1\xff").unwrap();
    let _: () = con.hset("t-schedules", "z:A", b"FREQ=DAILY\xff").unwrap();
}

/// Bytes that are not UTF-8 where a command reads text (another program may write
/// any) are named as such, never blamed on the server as a reply out of protocol.
#[test]
fn values_not_utf8_are_named_as_such() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    plant_not_utf8(&mut con);
    let o = bike(&s, d.path()).args(["resume", "z:A"]).run().code(1);
    assert!(
        o.stderr
            .contains("a value is not UTF-8 text where this command reads text"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("protocol"), "{}", o.stderr);
    // `tell` shows such a value (U+FFFD for the byte) rather than refuse the job.
    let told: serde_json::Value =
        serde_json::from_str(&bike(&s, d.path()).args(["tell", "x:A"]).ok()).unwrap();
    assert_eq!(told["status"], "TML:1\u{fffd}", "{told}");
    assert_eq!(told["schedule"], "FREQ=DAILY", "{told}");
}

/// `check` names a job id that is not UTF-8 (`not-utf8`, a row per key that holds it:
/// exact in CSV on a pipe, escaped on a terminal), leaves it out of the other checks,
/// and checks values that are not UTF-8 with U+FFFD for their bytes: the other problems
/// still come out, and once they are repaired the odd id alone makes it exit 1.
#[test]
fn check_names_ids_not_utf8_and_goes_on() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    // x:A out of circulation, its status not UTF-8; z:A's schedule does not parse.
    plant_not_utf8(&mut con);
    // An id that is not UTF-8, on the timeline, and another in a queue.
    let _: () = con.hset("t-schedules", b"y\xff:A", "FREQ=DAILY").unwrap();
    let _: () = con.zadd("t-timeline", b"y\xff:A", 1).unwrap();
    let _: () = con.rpush("t-work-A", b"q\xff:A").unwrap();
    let _: () = con.sadd("t-work-A-members", b"q\xff:A").unwrap();
    let (code, out, err) = bike(&s, d.path()).args(["check"]).run_bytes();
    let err = String::from_utf8_lossy(&err);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("check: 5 problem(s) in 3 job(s)"), "{err}");
    let row = |kind: &str, id: &[u8], detail: &str| {
        let mut r = format!("{kind},").into_bytes();
        r.extend_from_slice(id);
        r.extend_from_slice(format!(",{detail}").as_bytes());
        r
    };
    for want in [
        row("out-of-circulation", b"x:A", "schedule FREQ=DAILY"),
        row(
            "unparsable-schedule",
            b"z:A",
            "\"bad schedule \"\"FREQ=DAILY\u{fffd}\"\"",
        ),
        row(
            "not-utf8",
            b"y\xff:A",
            "\"t-schedules holds this job id, which is not UTF-8",
        ),
        row("not-utf8", b"y\xff:A", "\"t-timeline holds"),
        // Once, though both the list and the members set hold it.
        row("not-utf8", b"q\xff:A", "\"t-work-A holds"),
    ] {
        let n = out.windows(want.len()).filter(|w| *w == want).count();
        assert_eq!(
            n,
            1,
            "{}: {}",
            String::from_utf8_lossy(&want),
            String::from_utf8_lossy(&out)
        );
    }
    if let Some((code, shown)) = bike(&s, d.path()).args(["check"]).run_on_terminal() {
        assert_eq!(code, 1);
        assert_inert("check on a terminal", &shown);
        assert!(
            has(&shown, "not-utf8,y\\xff:A,\"t-schedules holds"),
            "{}",
            String::from_utf8_lossy(&shown)
        );
    }
    // The repairs fix what they can; the odd ids stay, and are the only problems.
    bike(&s, d.path()).args(["check", "--repair"]).run().code(1);
    let o = bike(&s, d.path()).args(["check"]).run().code(1);
    assert!(
        o.stderr.contains("check: 3 problem(s) in 3 job(s)"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.contains("bad,z:A,"), "{}", o.stdout);
    let _: () = con.hdel("t-schedules", b"y\xff:A").unwrap();
    let _: () = con.zrem("t-timeline", b"y\xff:A").unwrap();
    let _: () = con.del(&["t-work-A", "t-work-A-members"]).unwrap();
    bike(&s, d.path()).args(["check"]).run().code(0);
}

/// `stats` and `top --once` read ids, queue names and values another program wrote with
/// bytes that are not UTF-8 (U+FFFD for each such byte) and give their figures.
#[test]
fn monitors_read_values_not_utf8() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    let _: () = con.hset("t-schedules", "x:A", "FREQ=DAILY").unwrap();
    let _: () = con.hset("t-statuses", "x:A", b"TML:1\xff").unwrap();
    let _: () = con
        .hset(
            "t-paused-queues",
            b"Q\xff",
            b"{\"since\":1700000000,\"note\":\"n\xff\"}",
        )
        .unwrap();
    let _: () = con.hset("t-paused", b"p\xff:A", "1700000000").unwrap();
    let _: () = con.zadd("t-timeline", b"u\xff:A", 1).unwrap();
    let _: () = con.zadd("t-leases", b"y\xff:A", 1).unwrap();
    let _: () = con.hset("t-failures", b"f\xff:A", "DIE:5").unwrap();
    let _: () = con.rpush("t-work-A", b"q\xff:A").unwrap();
    let _: () = con
        .hset("t-statuses", b"q\xff:A", "ENQ:1700000000")
        .unwrap();
    let _: () = con.set("t-control", b"H\xff").unwrap();
    let text = bike(&s, d.path())
        .args(["stats", "--scan", "--queues", "A"])
        .ok();
    assert!(text.contains("paused      queue Q\u{fffd} "), "{text}");
    assert!(text.contains("unparsable  1 status value(s)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(
        &bike(&s, d.path())
            .args(["stats", "--format", "json", "--queues", "A"])
            .ok(),
    )
    .unwrap();
    assert_eq!(json["paused_queues"][0]["queue"], "Q\u{fffd}", "{json}");
    assert_eq!(json["paused_queues"][0]["since"], 1700000000, "{json}");
    assert_eq!(json["running"], 1, "{json}");
    // The queue's oldest entry found its status by the id as stored.
    assert!(
        json["queues"][0]["oldest_age_seconds"].as_i64() > Some(0),
        "{json}"
    );
    let top = bike(&s, d.path())
        .args(["top", "--once", "--queues", "A"])
        .ok();
    for shown in [
        "Q\u{fffd} (paused)",
        "y\u{fffd}:A",
        "u\u{fffd}:A",
        "p\u{fffd}:A",
        "f\u{fffd}:A",
    ] {
        assert!(top.contains(shown), "{shown}: {top}");
    }
}

/// A claim that hands out a job whose schedule is not UTF-8 text (another program wrote
/// it): the worker does not run that one and says so, and every other job of the same
/// claim runs and is recorded under its own lease (its tag and token are its own, not
/// shifted by the one left out).
#[test]
fn a_claimed_job_whose_schedule_is_not_utf8_leaves_the_others_of_its_claim_whole() {
    let t = Setup::new();
    let mut con = t.s.con();
    t.set("good:A", "NOW");
    // Popped first (RPOP), so that it comes before good:A in the claim's reply.
    let _: () = con.hset("t-schedules", "odd:A", b"FREQ=DAILY\xff").unwrap();
    let _: () = con.rpush("t-work-A", "odd:A").unwrap();
    let _: () = con.sadd("t-work-A-members", "odd:A").unwrap();
    let w = Bg(Some(t.worker(&["A", "-j", "2"])));
    assert!(t.wait_status("good:A", "STP"), "{}", stderr_of(w.child()));
    assert!(
        t.status("odd:A").starts_with("WRK:"),
        "{}",
        t.status("odd:A")
    );
    assert_eq!(t.runs(), ["good:A"]);
    let (_, err) = w.finish(0.5);
    let said = err.matches("job odd:A: its id or schedule is not UTF-8 text; not run");
    assert_eq!(said.count(), 1, "{err}");
    assert!(!err.contains("held by another worker"), "{err}");
}

/// A job id another program wrote with bytes that are not UTF-8, in the running index
/// or out of circulation, keeps no other job from recovery: the dispatcher names it
/// once and moves on (before, every recovery and sweep call failed on it).
#[test]
fn recovery_and_the_sweep_go_past_ids_not_utf8() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    for id in [&b"lost:A"[..], b"odd\xff:A"] {
        let _: () = con.hset("t-schedules", id, "CONTINUE").unwrap();
        let _: () = con.hset("t-statuses", id, "WRK:1").unwrap();
        let _: () = con.zadd("t-leases", id, 1).unwrap();
    }
    // Out of circulation, as a Python worker that died leaves them: found by the sweep.
    let _: () = con.hset("t-schedules", "orphan:A", "CONTINUE").unwrap();
    let _: () = con.hset("t-statuses", "orphan:A", "WRK:1").unwrap();
    let _: () = con.hset("t-schedules", "odd2:A", b"CONTINUE\xff").unwrap();
    let _: () = con.hset("t-statuses", "odd2:A", "WRK:1").unwrap();
    let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    let status = |id: &str| -> String {
        let v: Option<String> = s.con().hget("t-statuses", id).unwrap();
        v.unwrap_or_default()
    };
    assert!(
        wait_until(10.0, || status("lost:A").starts_with("REC:")),
        "{}",
        stderr_of(disp.child())
    );
    assert!(
        wait_until(30.0, || status("orphan:A").starts_with("REC:")),
        "{}",
        stderr_of(disp.child())
    );
    let (_, err) = disp.finish(0.5);
    // (The log line is JSON: the escape's backslash is doubled.)
    let said = err.matches("cannot recover job odd\\\\xff:A: its id is not UTF-8 text");
    assert_eq!(said.count(), 1, "{err}");
    assert!(
        !err.contains("not UTF-8 text where this command reads text"),
        "{err}"
    );
}
