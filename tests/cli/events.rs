//! The event stream (docs/events.md): run events written with their outcomes, the
//! audit entries of operator actions, and `redbike events`.

use std::collections::HashMap;

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
    work::Setup,
};

/// A job script: `flaky*` fails (exit 3) on its first run and succeeds after, `hang*`
/// runs 30 s, `esc*` prints escape sequences and fails; every run appends `start ID` to
/// $TEST_LOG (as `work::JOB` does).
const JOB: &str = r#"#!/bin/sh
echo "start $1" >> "$TEST_LOG"
case "$1" in
  flaky*) if [ -e "$1.done" ]; then echo "fine now"; exit 0; fi; touch "$1.done"; echo "broken"; exit 3;;
  hang*) echo $$ > "$TEST_LOG.pid"; exec sleep 30;;
  esc*) printf 'evil \033[2J\033]0;title\007 "quoted" \\ end\n'; exit 3;;
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
    // Exactly the entries the history holds (unfiled yet, or filed), and not copied
    // to the recent runs: the stream's run events are those.
    let mut held: Vec<String> = t.s.con().lrange("t-unfiled-runs", 0, -1).unwrap();
    let filed: Vec<String> = t.s.con().lrange("t-history-flaky:A", 0, -1).unwrap();
    held.extend(filed);
    held.sort();
    let mut streamed = [runs[0]["entry"].clone(), runs[1]["entry"].clone()];
    streamed.sort();
    assert_eq!(held, streamed);
    let recent: Vec<String> = t.s.con().lrange("t-recent-runs", 0, -1).unwrap();
    assert!(recent.is_empty(), "{recent:?}");
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
            // (The commands run without rb.toml write their actions.)
            assert!(runs.is_empty(), "events written with events = 0: {runs:?}");
        }
    }
}

/// An audit entry's action, target and detail (empty: the step writes none).
type Action<'a> = (&'a str, &'a str, &'a str);

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
    std::fs::write(path(&t.d, "empty.csv"), "").unwrap();
    let steps: &[(&[&str], Action)] = &[
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
        // No job loaded: nothing changed.
        (&["load", "empty.csv"], ("", "", "")),
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

/// `redbike events ARGS` (exit 0): its stdout.
fn events(t: &Setup, args: &[&str]) -> String {
    bike(&t.s, t.d.path())
        .args(["events"].iter().chain(args))
        .ok()
}

/// `redbike events ARGS --format json`, each line parsed.
fn json_events(t: &Setup, args: &[&str]) -> Vec<serde_json::Value> {
    events(t, &[args, &["--format", "json"]].concat())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn events_filter_and_print_as_text_json_and_csv() {
    let t = setup();
    let w = t.worker(&["A"]);
    t.set("flaky:A", "NOW");
    assert!(t.wait_status("flaky:A", "DIE"));
    t.set("esc:A", "NOW");
    assert!(t.wait_status("esc:A", "DIE"));
    // Everything after this second is --since's.
    let since = now() + 1;
    assert!(wait_until(3.0, || now() >= since));
    t.set("flaky:A", "NOW");
    assert!(wait_until(10.0, || of_type(&t.s, "run").len() >= 3));
    t.stop(w);
    bike(&t.s, t.d.path())
        .args(["pause", "esc:A", "--note", "\x1b]0;pwned\x07 note"])
        .ok();

    // JSON Lines: every field as stored; the entry as history prints it, exact.
    let all = json_events(&t, &[]);
    let kinds: Vec<String> = all
        .iter()
        .map(|e| {
            let subject = e.get("job").or(e.get("target")).unwrap();
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                subject.as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "action flaky:A",
            "run flaky:A",
            "action esc:A",
            "run esc:A",
            "action flaky:A",
            "run flaky:A",
            "action ",
            "action esc:A"
        ]
    );
    let esc = all.iter().find(|e| e["job"] == "esc:A").unwrap();
    let history: serde_json::Value = serde_json::from_str(
        &bike(&t.s, t.d.path())
            .args(["history", "esc:A", "--format", "json"])
            .ok(),
    )
    .unwrap();
    assert_eq!(esc["entry"], history[0], "{esc}");
    assert_eq!(
        esc["entry"]["tail"],
        "evil \x1b[2J\x1b]0;title\x07 \"quoted\" \\ end"
    );
    assert_eq!(esc["failed"], "1");
    assert_eq!(esc["v"], "1");
    let id = esc["id"].as_str().unwrap();
    let millis: i64 = id.split_once('-').unwrap().0.parse().unwrap();
    assert!((millis / 1000 - now()).abs() < 60, "{id}");
    assert!(esc["time"].as_str().unwrap().ends_with('Z'));
    let note = all.last().unwrap();
    assert_eq!(note["detail"], "\x1b]0;pwned\x07 note");
    assert_eq!(note["user"].as_str().map(str::is_empty), Some(false));

    // Text: one line per entry, nothing a terminal obeys.
    let text = events(&t, &[]);
    assert_eq!(text.lines().count(), 8, "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
    let esc_line = text
        .lines()
        .find(|l| l.contains(" run ") && l.contains("esc:A"))
        .unwrap();
    assert!(
        esc_line.contains(
            "failed: exit code 3; output: evil \\x1b[2J\\x1b]0;title\\x07 \"quoted\" \\ end"
        ),
        "{esc_line}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("pause $'\\x1b]0;pwned\\x07 note'"),
        "{text}"
    );

    // Filters.
    let subjects = |list: Vec<serde_json::Value>| -> Vec<String> {
        list.iter()
            .map(|e| {
                let entry = e.get("entry").map(|x| x["outcome"].as_str().unwrap());
                format!(
                    "{} {}",
                    e["type"].as_str().unwrap(),
                    entry.unwrap_or(e["action"].as_str().unwrap_or(""))
                )
            })
            .collect()
    };
    assert_eq!(
        subjects(json_events(&t, &["--failures"])),
        ["run failed", "run failed"]
    );
    assert_eq!(
        subjects(json_events(&t, &["--job", "flaky:A"])),
        ["action set", "run failed", "action set", "run ok"]
    );
    assert_eq!(
        subjects(json_events(&t, &["--job", "flaky:A", "--failures"])),
        ["run failed"]
    );
    assert_eq!(
        subjects(json_events(&t, &["--since", &since.to_string()])),
        ["action set", "run ok", "action control", "action pause"]
    );

    // CSV: a header row, then one row per entry.
    let csv = events(&t, &["--format", "csv", "--failures"]);
    let mut lines = csv.split("\r\n");
    assert_eq!(
        lines.next().unwrap(),
        "id,time,shard,type,job,failed,outcome,action,target,detail,user,host,pid,via,queue,since,bound,entry"
    );
    let rows: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(rows[0].contains(",run,flaky:A,1,failed,"), "{csv}");

    // Bad input: exit 2, nothing written.
    let before = t.s.dump();
    for bad in [
        &["--format", "xml"][..],
        &["--since", "yesterday-ish"],
        &["--job", ""],
        &["--bogus"],
    ] {
        bike(&t.s, t.d.path())
            .args(["events"].iter().chain(bad))
            .run()
            .code(2);
    }
    assert_eq!(t.s.dump(), before);
}

#[test]
fn entries_of_another_format_are_skipped_and_counted_and_no_redis_is_69() {
    let t = setup();
    t.set("a:A", "FREQ=DAILY");
    for fields in [&["v", "2", "type", "run"][..], &["v", "1", "type", "later"]] {
        let _: String = redis::cmd("XADD")
            .arg("t-events")
            .arg("*")
            .arg(fields)
            .query(&mut t.s.con())
            .unwrap();
    }
    let o = bike(&t.s, t.d.path()).args(["events"]).run().success();
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.stdout);
    assert!(o.stderr.contains("skipped 2 entries"), "{}", o.stderr);
    bare(t.d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://127.0.0.1:{}", dead_port()),
        )
        .args(["events"])
        .run()
        .code(69);
}

#[test]
fn follow_prints_what_comes_after_it_started_and_stops_on_sigterm() {
    let t = setup();
    t.set("before:A", "FREQ=DAILY");
    let out = path(&t.d, "follow.out");
    let child = std::process::Command::new(BIN)
        .current_dir(t.d.path())
        .env_remove("REDBIKE_CONFIG")
        .env("REDBIKE_PREFIX", "t")
        .env("REDBIKE_REDIS_URL", t.s.url())
        .args(["events", "--follow", "--format", "json"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child = Bg(Some(child));
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_until(10.0, || lines().contains("before:A")),
        "{}",
        lines()
    );
    t.set("after:A", "FREQ=DAILY");
    assert!(
        wait_until(10.0, || lines().contains("after:A")),
        "{}",
        lines()
    );
    assert_eq!(lines().lines().count(), 2, "{}", lines());
    signal(child.child(), libc::SIGTERM);
    let (code, err) = child.finish(5.0);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_split_prefix_merges_its_shards_streams_in_order() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        format!(
            "[redbike]\nprefix = \"{{s}}\"\nshards = 2\n\n[redbike-redis]\nurl = {:?}\n",
            s.url()
        ),
    )
    .unwrap();
    let rb = || {
        bare(d.path())
            .env_remove("REDBIKE_PREFIX")
            .args(["-c", "rb.toml"])
    };
    let ids: Vec<String> = (0..12).map(|i| format!("j{i}:A")).collect();
    for id in &ids {
        rb().args(["set", id, "FREQ=DAILY"]).ok();
    }
    for k in 0..2 {
        let n: usize = redis::cmd("XLEN")
            .arg(format!("{{s/{k}}}-events"))
            .query(&mut s.con())
            .unwrap();
        assert!(n > 0 && n < 12, "shard {k}: {n}");
    }
    let out = rb().args(["events", "--format", "json"]).ok();
    let targets: Vec<String> = out
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["target"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(targets, ids);
    // Once, not once per shard: a control of the whole prefix.
    rb().args(["control", "HALT"]).ok();
    let text = rb().args(["events", "--job", "j3:A"]).ok();
    assert_eq!(text.lines().count(), 1, "{text}");
    let all = rb().args(["events"]).ok();
    assert_eq!(
        all.lines().filter(|l| l.contains(" control ")).count(),
        1,
        "{all}"
    );
}

/// A key of another type under the stream's name costs the events, never an outcome
/// or an action; `check` names it.
#[test]
fn a_stream_key_of_another_type_costs_events_only_and_check_names_it() {
    let t = setup();
    let _: () = t.s.con().hset("t-events", "planted", "1").unwrap();
    let w = t.worker(&["A"]);
    t.set("flaky:A", "NOW");
    assert!(t.wait_status("flaky:A", "DIE"));
    bike(&t.s, t.d.path()).args(["pause", "--queue", "B"]).ok();
    bike(&t.s, t.d.path()).args(["run", "flaky:A"]).ok();
    assert!(wait_until(10.0, || t.runs().len() >= 2));
    t.stop(w);
    let history: usize = t.s.con().llen("t-recent-runs").unwrap();
    assert_eq!(history, 2);
    let planted: HashMap<String, String> = t.s.con().hgetall("t-events").unwrap();
    assert_eq!(planted, [("planted".to_string(), "1".to_string())].into());
    let o = bike(&t.s, t.d.path()).args(["check"]).run().code(1);
    assert!(
        o.stdout
            .contains("odd-key,,t-events holds a hash where redbike keeps a stream"),
        "{}",
        o.stdout
    );
    // Reading it says which key to look at (exit 78, as other WRONGTYPE refusals).
    bike(&t.s, t.d.path())
        .args(["events"])
        .run()
        .fails(78, "redbike check");
}

#[test]
fn long_streams_are_read_in_pages_and_merged_in_order() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        format!(
            "[redbike]\nprefix = \"{{s}}\"\nshards = 2\n\n[redbike-redis]\nurl = {:?}\n",
            s.url()
        ),
    )
    .unwrap();
    let n = 2500;
    let mut pipe = redis::pipe();
    for i in 1..=n {
        // Ids of both shards interleaved, some in the same millisecond.
        let id = format!("{}-{}", 999_500 + i / 3, i % 3);
        pipe.cmd("XADD")
            .arg(format!("{{s/{}}}-events", i % 2))
            .arg(id)
            .arg(&["v", "1", "type", "action", "action", "set"])
            .arg("target")
            .arg(format!("j{i}:A"))
            .ignore();
    }
    let _: () = pipe.query(&mut s.con()).unwrap();
    let rb = || {
        bare(d.path())
            .env_remove("REDBIKE_PREFIX")
            .args(["-c", "rb.toml", "events", "--format", "csv"])
    };
    let out = rb().ok();
    let targets: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(8).unwrap())
        .collect();
    let want: Vec<String> = (1..=n).map(|i| format!("j{i}:A")).collect();
    assert_eq!(targets, want);
    let o = rb().args(["--since", "1000"]).ok();
    // From 1,000,000 ms: i / 3 >= 500.
    assert_eq!(o.lines().count(), 1 + (n - 1500 + 1), "{o}");
}
