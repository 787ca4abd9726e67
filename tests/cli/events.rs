//! The event stream (docs/events.md): run events written with their outcomes, the
//! audit entries of operator actions, and `redbike events`.

use std::collections::HashMap;

use redis::Commands;

use crate::{dispatch::finish, harness::*, work::Setup};

/// A job script: `flaky*` fails (exit 3) on its first run and succeeds after, `hang*`
/// runs 30 s, `esc*` prints an escape sequence; every run appends `start ID` to
/// $TEST_LOG (as `work::JOB` does).
const JOB: &str = r#"#!/bin/sh
echo "start $1" >> "$TEST_LOG"
case "$1" in
  flaky*) if [ -e "$1.done" ]; then echo "fine now"; exit 0; fi; touch "$1.done"; echo "broken"; exit 3;;
  hang*) echo $$ > "$TEST_LOG.pid"; exec sleep 30;;
  esc*) printf 'evil \033[2J\033]0;title\007 "quoted" \\ end\n';;
esac
"#;

fn setup() -> Setup {
    let t = Setup::new();
    std::fs::write(path(&t.d, "job.sh"), JOB).unwrap();
    t
}

/// One stream entry: its id and fields.
type Event = (String, HashMap<String, String>);

/// The entries of stream `key`, oldest first.
fn stream(s: &RedisServer, key: &str) -> Vec<Event> {
    let raw: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(&mut s.con())
        .unwrap();
    raw.into_iter()
        .map(|(id, f)| {
            let fields = f.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            (id, fields)
        })
        .collect()
}

/// The events of type `kind`, oldest first.
fn of_type(s: &RedisServer, kind: &str) -> Vec<HashMap<String, String>> {
    stream(s, "t-events")
        .into_iter()
        .map(|(_, f)| f)
        .filter(|f| f["type"] == kind)
        .collect()
}

/// The outcome (`o`) of a run event's entry.
fn outcome(f: &HashMap<String, String>) -> String {
    let e: serde_json::Value = serde_json::from_str(&f["entry"]).unwrap();
    e["o"].as_str().unwrap().to_string()
}

#[test]
fn a_failing_then_succeeding_job_gives_run_events_with_its_entries() {
    let t = setup();
    let w = t.worker(&["A"]);
    t.set("flaky:A", "NOW");
    assert!(t.wait_status("flaky:A", "DIE"));
    t.set("flaky:A", "NOW");
    assert!(wait_until(10.0, || of_type(&t.s, "run").len() >= 2));
    t.stop(w);
    let runs = of_type(&t.s, "run");
    assert_eq!(runs.len(), 2, "{runs:?}");
    for (f, (failed, o)) in runs.iter().zip([("1", "failed"), ("0", "ok")]) {
        assert_eq!(f["v"], "1");
        assert_eq!(f["job"], "flaky:A");
        assert_eq!(f["failed"], failed);
        assert_eq!(outcome(f), o);
        assert_eq!(f.len(), 5, "{f:?}");
    }
    // Exactly the entries the history holds (newest first there).
    let recent: Vec<String> = t.s.con().lrange("t-recent-runs", 0, -1).unwrap();
    assert_eq!(recent, [runs[1]["entry"].clone(), runs[0]["entry"].clone()]);
}

#[test]
fn a_recovered_run_and_a_skipped_occurrence_are_events() {
    let t = setup();
    let conf = path(&t.d, "rb.toml");
    std::fs::write(&conf, "[redbike.catch-up.S]\npolicy = \"skip\"\n").unwrap();
    bike(&t.s, t.d.path())
        .args(["set", "late:S", "FREQ=DAILY", "--after", "2020-01-01"])
        .ok();
    t.set("hang:A", "CONTINUE");
    let disp = bike(&t.s, t.d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    let mut w = t.worker(&["A"]);
    let pid = format!("{}.pid", t.log().display());
    assert!(wait_until(10.0, || std::path::Path::new(&pid).exists()));
    let _ = w.kill();
    let _ = w.wait();
    assert!(wait_until(20.0, || t.status("hang:A").starts_with("REC")));
    assert!(t.wait_status("late:S", "SKP"));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let runs = of_type(&t.s, "run");
    let by_job = |job: &str| -> Vec<&HashMap<String, String>> {
        runs.iter().filter(|f| f["job"] == job).collect()
    };
    let rec = by_job("hang:A");
    assert_eq!(rec.len(), 1, "{runs:?}");
    assert_eq!(outcome(rec[0]), "recovered");
    assert_eq!(rec[0]["failed"], "0");
    let skip = by_job("late:S");
    assert_eq!(skip.len(), 1, "{runs:?}");
    assert_eq!(outcome(skip[0]), "skipped");
    assert_eq!(skip[0]["failed"], "0");
    // The same entries as the history's.
    let hist: Vec<String> = t.s.con().lrange("t-history-hang:A", 0, -1).unwrap();
    assert_eq!(hist, [rec[0]["entry"].clone()]);
}

#[test]
fn events_are_written_without_history_and_not_with_events_0() {
    for (conf, events) in [("history-limit = 0", true), ("events = 0", false)] {
        let t = setup();
        std::fs::write(
            path(&t.d, "rb.toml"),
            format!("[redbike]\n{conf}\n[redbike.catch-up.S]\npolicy = \"skip\"\n"),
        )
        .unwrap();
        bike(&t.s, t.d.path())
            .args(["set", "late:S", "FREQ=DAILY", "--after", "2020-01-01"])
            .ok();
        let disp = bike(&t.s, t.d.path())
            .args(["-c", "rb.toml", "dispatch"])
            .spawn();
        let w = bike(&t.s, t.d.path())
            .env("TEST_LOG", t.log())
            .args(["-c", "rb.toml", "work", "A", "--", "./job.sh"])
            .spawn();
        t.set("flaky:A", "NOW");
        assert!(t.wait_status("flaky:A", "DIE"));
        assert!(t.wait_status("late:S", "SKP"));
        t.stop(w);
        assert_eq!(finish(disp, 5.0).0, Some(0));
        let runs = of_type(&t.s, "run");
        if events {
            let jobs: Vec<&str> = runs.iter().map(|f| f["job"].as_str()).collect();
            assert!(
                jobs.contains(&"flaky:A") && jobs.contains(&"late:S") && jobs.len() == 2,
                "{runs:?}"
            );
            let f = runs.iter().find(|f| f["job"] == "flaky:A").unwrap();
            assert_eq!(f["failed"], "1");
            let e: serde_json::Value = serde_json::from_str(&f["entry"]).unwrap();
            assert_eq!(e["t"], "broken", "{e}");
            let keys: Vec<String> = t.s.con().keys("t-*").unwrap();
            for key in keys {
                assert!(
                    !key.starts_with("t-history-")
                        && !["t-recent-runs", "t-unfiled-runs", "t-recent-failures"]
                            .contains(&key.as_str()),
                    "{key} written with history-limit = 0"
                );
            }
        } else {
            let exists: bool = t.s.con().exists("t-events").unwrap();
            assert!(!exists, "events written with events = 0: {runs:?}");
        }
    }
}

/// `redbike ARGS` as user `alice`.
fn as_alice(t: &Setup, args: &[&str]) -> Outcome {
    bike(&t.s, t.d.path())
        .env("USER", "alice")
        .env("TEST_LOG", t.log())
        .args(args)
        .run()
}

#[test]
fn each_operator_action_is_one_audit_entry_naming_its_user() {
    let t = setup();
    let hour_ago = (now() - 3600).to_string();
    let later = (now() - 3600 + 150).to_string();
    std::fs::write(path(&t.d, "f.csv"), "l1:A,FREQ=MINUTELY\nl2:A,FREQ=DAILY\n").unwrap();
    let steps: &[(&[&str], (&str, &str, &str))] = &[
        (
            &["set", "j:A", "FREQ=MINUTELY"],
            ("set", "j:A", "FREQ=MINUTELY"),
        ),
        (&["run", "j:A"], ("run", "j:A", "")),
        // Already queued: nothing changes, nothing is written.
        (&["run", "j:A"], ("", "", "")),
        (
            &["pause", "j:A", "--note", "db work"],
            ("pause", "j:A", "db work"),
        ),
        (&["pause", "j:A"], ("", "", "")),
        (&["resume", "j:A"], ("resume", "j:A", "")),
        (&["pause", "--queue", "B"], ("pause", "queue:B", "")),
        (&["resume", "--queue", "B"], ("resume", "queue:B", "")),
        (&["control", "HALT"], ("control", "", "HALT")),
        (&["control", "RESUME"], ("control", "", "RESUME")),
        (&["load", "f.csv"], ("load", "", "2")),
        (
            &["backfill", "l1:A", "--from", &hour_ago, "--to", &later],
            ("backfill", "l1:A", ""),
        ),
        (
            &["backfill", "l1:A", "--cancel"],
            ("backfill", "l1:A", "cancel"),
        ),
        (&["unset", "l2:A"], ("unset", "l2:A", "")),
        (&["unset", "l2:A"], ("", "", "")),
    ];
    let mut want = Vec::new();
    for (args, entry) in steps {
        as_alice(&t, args).success();
        if !entry.0.is_empty() {
            want.push(*entry);
        }
    }
    // A repair: a timeline entry of a job without a schedule.
    let _: () = t.s.con().zadd("t-timeline", "ghost:A", 1).unwrap();
    as_alice(&t, &["check", "--repair"]);
    want.push(("repair", "ghost:A", "timeline-without-schedule"));
    // A kill of a running job.
    t.set("hang:A", "CONTINUE");
    let w = t.worker(&["A"]);
    let pid = format!("{}.pid", t.log().display());
    assert!(wait_until(10.0, || std::path::Path::new(&pid).exists()));
    as_alice(&t, &["kill", "hang:A"]).success();
    want.push(("kill", "hang:A", ""));
    t.stop(w);

    let actions = of_type(&t.s, "action");
    let got: Vec<(&str, &str, &str)> = actions
        .iter()
        .filter(|f| f["user"] == "alice")
        .map(|f| {
            (
                f["action"].as_str(),
                f["target"].as_str(),
                f["detail"].as_str(),
            )
        })
        .collect();
    // backfill's detail says what it queued.
    let got: Vec<(&str, &str, &str)> = got
        .into_iter()
        .map(|(a, t, d)| match (a, d) {
            ("backfill", d) if d.contains(" run(s) due from ") => (a, t, ""),
            _ => (a, t, d),
        })
        .collect();
    assert_eq!(got, want, "{actions:?}");
    for f in actions.iter().filter(|f| f["user"] == "alice") {
        assert_eq!(f["v"], "1");
        assert_eq!(f["via"], "cli");
        assert!(!f["host"].is_empty());
        assert!(f["pid"].parse::<u32>().unwrap() > 0);
        assert_eq!(f.len(), 9, "{f:?}");
    }
}
