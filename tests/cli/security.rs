//! Security: passwords never appear in errors or logs, and a Redis ACL user limited to
//! one prefix's keys and channels and to the commands listed in docs/deployments.md can run
//! every command, a dispatcher and a worker, and nothing outside its prefix.

use std::time::Duration;

use crate::{dispatch::signal, harness::*};

/// The password in these tests; it must never be printed.
pub(crate) const SECRET: &str = "s3cret-pw";

/// The commands redbike needs, as the "Security / ACL" section of docs/deployments.md lists them.
pub(crate) const ACL_COMMANDS: &[&str] = &[
    "select",
    "ping",
    "info",
    "evalsha",
    "eval",
    "script|load",
    "get",
    "set",
    "del",
    "exists",
    "mget",
    "pttl",
    "type",
    "scan",
    "hget",
    "hmget",
    "hset",
    "hdel",
    "hexists",
    "hlen",
    "hscan",
    "hincrby",
    "hkeys",
    "hsetnx",
    "hgetall",
    "lpush",
    "rpush",
    "rpop",
    "lrem",
    "llen",
    "lindex",
    "lrange",
    "lpos",
    "ltrim",
    "sadd",
    "srem",
    "smembers",
    "sismember",
    "smismember",
    "sscan",
    "zadd",
    "zrem",
    "zscore",
    "zrange",
    "zrangebyscore",
    "zscan",
    "zcard",
    "zcount",
    "zmscore",
    "object|encoding",
    "xadd",
    "xrange",
    "xrevrange",
    "xread",
    "incrby",
    "time",
    "publish",
    "subscribe",
    "unsubscribe",
    "punsubscribe",
    "pubsub|channels",
];

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the password: {text}");
}

#[test]
fn unreachable_redis_error_masks_the_password() {
    let d = workdir();
    let url = format!("redis://user:{SECRET}@127.0.0.1:{}/0", dead_port());
    // From the flag...
    let o = bare(d.path())
        .args(["--redis-url", &url, "set", "j:A", "NOW"])
        .run()
        .fails(69, "cannot reach redis at redis://user:***@127.0.0.1:");
    assert_no_secret("error", &o.stderr);
    // ...and from the environment.
    let o = bare(d.path())
        .env("REDBIKE_REDIS_URL", &url)
        .args(["tell", "j:A"])
        .run()
        .fails(69, "redis://user:***@127.0.0.1:");
    assert_no_secret("error", &o.stderr);
}

#[test]
fn failed_auth_error_masks_the_password() {
    let s = RedisServer::start();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "rb", "on", ">right", "~*", "&*", "+@all"])
        .query(&mut s.con())
        .unwrap();
    let d = workdir();
    for url in [
        format!("redis://rb:{SECRET}@127.0.0.1:{}/0", s.port),
        format!("redis://nobody:{SECRET}@127.0.0.1:{}/0", s.port),
    ] {
        let o = bare(d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .args(["set", "j:A", "NOW"])
            .run()
            // Retrying cannot fix a wrong password: 78, not "unreachable" (69).
            .fails(78, ":***@127.0.0.1:");
        assert!(o.stderr.contains("authentication failed"), "{}", o.stderr);
        assert_no_secret("error", &o.stderr);
    }
    assert_eq!(s.dbsize(), 0);
}

/// Waits (bounded) until a client of user `user` is connected.
/// Waits until `n` connections of `user` are open.
fn wait_for_clients(s: &RedisServer, user: &str, n: usize) -> bool {
    wait_until(10.0, || {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut s.con())
            .unwrap();
        list.matches(&format!("user={user} ")).count() >= n
    })
}

#[test]
fn dispatcher_and_worker_log_the_url_masked() {
    let s = RedisServer::start();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "rb",
            "on",
            &format!(">{SECRET}"),
            "~*",
            "&*",
            "+@all",
        ])
        .query(&mut s.con())
        .unwrap();
    let d = workdir();
    let url = format!("redis://rb:{SECRET}@127.0.0.1:{}/0", s.port);
    let dispatcher = Bg(Some(
        bike(&s, d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .args(["dispatch"])
            .spawn(),
    ));
    let worker = Bg(Some(
        bike(&s, d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .args(["work", "A", "--", "true"])
            .spawn(),
    ));
    // Each has its connection and its listener's once started (and has cleared HALT, as
    // both do at start); then HALT stops them.
    assert!(
        wait_for_clients(&s, "rb", 4),
        "dispatcher and worker did not connect"
    );
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    for (who, p) in [("dispatcher", dispatcher), ("worker", worker)] {
        let (code, err) = p.finish(15.0);
        assert_eq!(code, Some(0), "{who}: {err}");
        let masked = format!("redis=redis://rb:***@127.0.0.1:{}/0", s.port);
        assert!(
            err.contains(&format!("{who} starting: ")) && err.contains(&masked),
            "{who} start line lacks {masked}: {err}"
        );
        assert_no_secret(who, &err);
    }

    // An outage is logged with the URL masked too: a dispatcher whose Redis is not there.
    let dead = format!("redis://rb:{SECRET}@127.0.0.1:{}/0", dead_port());
    let p = Bg(Some(
        bike(&s, d.path())
            .env("REDBIKE_REDIS_URL", &dead)
            .args(["dispatch"])
            .spawn(),
    ));
    std::thread::sleep(Duration::from_millis(1500));
    signal(p.child(), libc::SIGTERM);
    let (code, err) = p.finish(15.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("rb:***@127.0.0.1"), "{err}");
    assert!(err.contains("retrying"), "{err}");
    assert_no_secret("outage log", &err);
}

/// `ACL SETUSER NAME on >PASSWORD resetkeys ~PREFIX-* resetchannels &PREFIX-* -@all
/// +cmd...`, as docs/deployments.md shows it.
pub(crate) fn acl_setuser(s: &RedisServer, name: &str, prefix: &str) {
    let mut args: Vec<String> = vec![
        "SETUSER".into(),
        name.into(),
        "reset".into(),
        "on".into(),
        format!(">{SECRET}"),
        "resetkeys".into(),
        format!("~{prefix}-*"),
        "resetchannels".into(),
        format!("&{prefix}-*"),
        "-@all".into(),
    ];
    args.extend(ACL_COMMANDS.iter().map(|c| format!("+{c}")));
    let _: () = redis::cmd("ACL").arg(&args).query(&mut s.con()).unwrap();
}

/// A job that appends its id to the file named by its first argument; in queue H it
/// then hangs (for a worker to be killed under it).
const JOB: &str = "#!/bin/sh\necho \"$2\" >> \"$1\"\ncase \"$2\" in *:H) exec sleep 60;; esac\n";

#[test]
fn acl_user_limited_to_its_prefix_runs_everything() {
    let s = RedisServer::start();
    acl_setuser(&s, "rb", "t");
    let d = workdir();
    let job = path(&d, "job.sh");
    std::fs::write(&job, JOB).unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&job)
        .status();
    let runs = path(&d, "runs.log");
    let csv = path(&d, "jobs.csv");
    std::fs::write(
        &csv,
        "l1:B,STOP\r\nl2:C,AT:2090-01-01T00:00:00Z\r\nl3:A,CONTINUE\r\n",
    )
    .unwrap();
    // A key of another prefix, which the user must not be able to touch.
    let _: () = redis::cmd("SET")
        .arg("other-control")
        .arg("keep")
        .query(&mut s.con())
        .unwrap();

    let url = format!("redis://rb:{SECRET}@127.0.0.1:{}/0", s.port);
    // A stream long enough for every event of the test: l3:A (CONTINUE) runs hundreds
    // of times a second, and a trimmed stream would lose the first events checked below.
    let conf = path(&d, "rb.toml");
    std::fs::write(&conf, "[redbike]\nevents = 1000000\n").unwrap();
    let rb = || {
        bike(&s, d.path())
            .env("REDBIKE_REDIS_URL", &url)
            .env("REDBIKE_CONFIG", &conf)
    };
    rb().args(["set", "j:A", "FREQ=SECONDLY"]).ok();
    rb().args(["set", "gone:A", "FREQ=DAILY"]).ok();
    rb().args(["unset", "gone:A"])
        .run()
        .success()
        .stdout_is("gone:A: unset\n");
    rb().args(["load".as_ref(), csv.as_os_str()]).ok();
    // ping reads the Redis settings with INFO; CONFIG GET is not tried as an ACL user
    // (the ACL LOG check below would catch it), so the save points stay unknown.
    let pinged = rb().args(["ping"]).ok();
    assert!(
        pinged.contains("\nmaxmemory-policy: noeviction\n"),
        "{pinged}"
    );
    assert!(pinged.contains("\npersistence: unknown\n"), "{pinged}");
    let told = rb().args(["tell", "j:A"]).ok();
    assert!(told.contains("\"schedule\": \"FREQ=SECONDLY\""), "{told}");
    assert_no_secret("tell", &told);
    let statuses = rb().args(["statuses"]).ok();
    assert!(statuses.contains("l1:B,STP,"), "{statuses}");
    let schedules = rb().args(["schedules"]).ok();
    assert!(schedules.contains("j:A,FREQ=SECONDLY\r\n"), "{schedules}");
    let topped = rb().args(["top", "--once"]).ok();
    assert!(topped.contains("j:A"), "{topped}");
    // run, pause and resume (docs/control.md).
    rb().args(["pause", "l2:C", "--note", "acl"]).ok();
    rb().args(["resume", "l2:C"]).ok();
    rb().args(["run", "l2:C"]).ok();
    rb().args(["pause", "--queue", "Z"]).ok();
    rb().args(["resume", "--queue", "Z"]).ok();

    let dispatcher = Bg(Some(rb().args(["dispatch"]).spawn()));
    let work = |queue: &str| {
        Bg(Some(
            rb().args([
                "work".as_ref(),
                queue.as_ref(),
                "--".as_ref(),
                job.as_os_str(),
                runs.as_os_str(),
            ])
            .spawn(),
        ))
    };
    let worker = work("A");
    // j:A runs, is put back on the timeline, dispatched and runs again; l3:A (CONTINUE)
    // goes straight back into its queue.
    let count = |id: &str| {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == id)
            .count()
    };
    let ran = wait_until(20.0, || count("j:A") >= 2 && count("l3:A") >= 2);

    // Recovery runs as this user too: a worker killed under its job (the dispatcher
    // recovers the job from the lease index) and a job a Python worker left nowhere
    // (the dispatcher's sweep finds it).
    rb().args(["set", "hang:H", "CONTINUE"]).ok();
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg("t-schedules")
        .arg("orphan:A")
        .arg("CONTINUE")
        .ignore()
        .cmd("HSET")
        .arg("t-statuses")
        .arg("orphan:A")
        .arg("WRK:100")
        .ignore()
        .query(&mut s.con())
        .unwrap();
    let hanging = work("H");
    let hung = wait_until(10.0, || count("hang:H") == 1);
    drop(hanging); // SIGKILL; the job dies with its worker
    let status = |id: &str| -> String {
        redis::cmd("HGET")
            .arg("t-statuses")
            .arg(id)
            .query::<Option<String>>(&mut s.con())
            .unwrap()
            .unwrap_or_default()
    };
    let recovered = hung
        && wait_until(30.0, || {
            let failure: Option<String> = redis::cmd("HGET")
                .arg("t-failures")
                .arg("hang:H")
                .query(&mut s.con())
                .unwrap();
            failure.is_some_and(|f| f.starts_with("REC:")) && count("orphan:A") >= 1
        });

    rb().args(["control", "HALT"]).ok();
    let mut logs = String::new();
    for (who, p) in [("dispatcher", dispatcher), ("worker", worker)] {
        let (code, err) = p.finish(15.0);
        assert_eq!(code, Some(0), "{who}: {err}");
        for bad in ["NOPERM", "NoPerm", "no permissions", "level=error"] {
            assert!(!err.contains(bad), "{who} logged {bad}: {err}");
        }
        assert_no_secret(who, &err);
        logs.push_str(&err);
    }
    assert!(ran, "the job did not run twice: {logs}");
    assert!(
        recovered,
        "not recovered: hang:H {:?}, orphan:A {:?}: {logs}",
        status("hang:H"),
        status("orphan:A")
    );
    let rescheduled: Option<f64> = redis::cmd("ZSCORE")
        .arg("t-timeline")
        .arg("j:A")
        .query(&mut s.con())
        .unwrap();
    assert!(rescheduled.is_some(), "j:A is not back on the timeline");
    rb().args(["control", "RESUME"]).ok();
    rb().args(["next", "FREQ=DAILY", "-n", "1"]).ok();

    // check and check --repair: a member of a queue's set that is in no list.
    let _: () = redis::cmd("SADD")
        .arg("t-work-A-members")
        .arg("ghost:A")
        .query(&mut s.con())
        .unwrap();
    let found = rb().args(["check"]).run().code(1);
    assert!(found.stdout.contains("ghost:A"), "{}", found.stdout);
    rb().args(["check", "--repair"]).run().success();
    rb().args(["check"]).run().success();
    let figures = rb().args(["stats", "--queues", "A:B:H"]).ok();
    assert!(figures.contains("schedules"), "{figures}");
    let scanned = rb()
        .args(["stats", "--scan", "--format", "prometheus"])
        .ok();
    assert!(scanned.contains("redbike_"), "{scanned}");
    rb().args(["ps", "--format", "csv"]).ok();
    // The run history the worker and dispatcher wrote as this user.
    let history = rb().args(["history", "j:A"]).ok();
    assert!(history.lines().count() >= 3, "{history}");
    let recovered = rb().args(["history", "hang:H", "--failures"]).ok();
    assert!(recovered.contains(",recovered,"), "{recovered}");
    // And the event stream: runs, recoveries, actions.
    let events = rb().args(["events"]).ok();
    for part in [
        " run    j:A ok",
        " run    hang:H recovered",
        " action l2:C pause acl",
    ] {
        assert!(events.contains(part), "{part}: {events}");
    }
    let followed = Bg(Some(rb().args(["events", "--follow"]).spawn()));
    std::thread::sleep(Duration::from_millis(1500));
    signal(followed.child(), libc::SIGTERM);
    let (code, err) = followed.finish(5.0);
    assert_eq!(code, Some(0), "{err}");

    // No command was refused (Redis logs every refusal in the ACL log).
    let refused: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut s.con()).unwrap();
    assert!(refused.is_empty(), "ACL LOG: {refused:?}");

    // The same user cannot touch another prefix: not through redbike...
    // (an error retrying cannot fix: exit 78, with what to do)
    for args in [&["set", "j:A", "NOW"][..], &["control", "HALT"][..]] {
        let o = rb().args(["--prefix", "other"]).args(args).run().code(78);
        assert!(
            o.stderr.to_lowercase().contains("no permissions")
                && o.stderr.contains("grant the ACL user"),
            "{}",
            o.stderr
        );
    }
    // ...nor directly, nor with commands redbike does not need.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut con = client.get_connection().unwrap();
    let denied = |cmd: &mut redis::Cmd, con: &mut redis::Connection| {
        let e = cmd.query::<redis::Value>(con).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("no permissions") || e.contains("can't access"),
            "{e}"
        );
    };
    denied(redis::cmd("GET").arg("other-control"), &mut con);
    denied(redis::cmd("PUBLISH").arg("other-wake-A").arg(1), &mut con);
    denied(redis::cmd("KEYS").arg("*"), &mut con);
    denied(&mut redis::cmd("FLUSHALL"), &mut con);
    denied(
        redis::cmd("EVAL")
            .arg("return redis.call('GET', 'other-control')")
            .arg(0),
        &mut con,
    );
    let kept: String = redis::cmd("GET")
        .arg("other-control")
        .query(&mut s.con())
        .unwrap();
    assert_eq!(kept, "keep");
}

#[test]
fn docs_list_the_tested_acl_commands() {
    let doc = include_str!("../../docs/deployments.md");
    let line = doc
        .lines()
        .skip_while(|l| !l.contains("ACL SETUSER"))
        .take_while(|l| !l.starts_with("```"))
        .collect::<Vec<_>>()
        .join(" ");
    let listed: Vec<&str> = line
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('+'))
        .collect();
    assert_eq!(
        listed, ACL_COMMANDS,
        "docs/deployments.md's ACL SETUSER and the test differ"
    );
}
