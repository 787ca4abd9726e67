//! Run history: entries written by workers and dispatchers, `history`, `tell`'s last
//! runs, `stats`' lateness and runs per minute, and `history-limit`.

use redis::Commands;
use serde_json::Value;

use crate::{
    dispatch::finish,
    harness::*,
    work::{score, Setup},
};

/// A job script for these tests: `fail*` exits 3, `stop*` 100, `unset*` 101, `back*`
/// asks for a 30 s backoff, `big*` prints 10,000 lines, `hang*` runs 30 s; every run
/// prints `output of ID` and appends `start ID` to $TEST_LOG (as `work::JOB` does).
const JOB: &str = r#"#!/bin/sh
echo "start $1" >> "$TEST_LOG"
echo "output of $1"
case "$1" in
  fail*) exit 3;;
  stop*) exit 100;;
  unset*) exit 101;;
  back*) echo 30 > "$REDBIKE_BACKOFF_FILE";;
  big*) i=0; while [ $i -lt 10000 ]; do echo "line $i"; i=$((i+1)); done;;
  hang*) echo $$ > "$TEST_LOG.pid"; exec sleep 30;;
esac
"#;

fn setup() -> Setup {
    let t = Setup::new();
    std::fs::write(path(&t.d, "job.sh"), JOB).unwrap();
    t
}

/// `history ARGS --format json` as entries.
fn entries(t: &Setup, args: &[&str]) -> Vec<Value> {
    let out = bike(&t.s, t.d.path())
        .args(["history"].iter().chain(args).chain(&["--format", "json"]))
        .ok();
    match serde_json::from_str(&out).unwrap() {
        Value::Array(a) => a,
        other => panic!("not an array: {other}"),
    }
}

fn outcomes(list: &[Value]) -> Vec<String> {
    list.iter()
        .map(|e| e["outcome"].as_str().unwrap().to_string())
        .collect()
}

const HEADER: &str =
    "job,queue,outcome,due,start,end,duration,late,exit,signal,host,pid,by,detail,tail,attempt\r\n";

#[test]
fn each_run_leaves_an_entry_with_its_outcome() {
    let t = setup();
    for (id, sched) in [
        ("once:A", "NOW"),
        ("stop:A", "CONTINUE"),
        ("unset:A", "CONTINUE"),
        ("back:A", "CONTINUE"),
    ] {
        t.set(id, sched);
    }
    // Due long ago and moved into its queue by a dispatcher: due is the score.
    bike(&t.s, t.d.path())
        .args(["set", "fail:A", "FREQ=DAILY", "--after", "2020-01-01"])
        .ok();
    let due: i64 = t.s.con().zscore("t-timeline", "fail:A").unwrap();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(5));
    assert!(t.wait_status("back:A", "TML"));
    assert!(t.wait_status("once:A", "STP"));
    assert!(t.wait_status("stop:A", "STP"));
    assert!(wait_until(10.0, || score(&t.s, "fail:A").is_some_and(|s| s > now())));
    t.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));

    let once = entries(&t, &["once:A"]);
    assert_eq!(outcomes(&once), ["ok"]);
    let e = &once[0];
    assert_eq!(e["job"], "once:A");
    assert_eq!(e["queue"], "A");
    assert_eq!(e["exit"], 0);
    assert_eq!(e["signal"], Value::Null);
    assert_eq!(e["tail"], "output of once:A");
    assert_eq!(e["by"], "worker");
    assert!(e["pid"].as_u64().unwrap() > 0);
    assert!(!e["host"].as_str().unwrap().is_empty());
    let (start, end) = (e["start"].as_f64().unwrap(), e["end"].as_f64().unwrap());
    assert!(start <= end && (now() as f64 - end).abs() < 60.0, "{e}");
    assert!(e["duration"].as_f64().unwrap() >= 0.0);
    // Queued by `set` (NOW): due when it entered its queue, a moment before its start.
    let late = e["late"].as_f64().unwrap();
    assert!((-1.0..10.0).contains(&late), "{e}");

    let fail = entries(&t, &["fail:A"]);
    assert_eq!(outcomes(&fail), ["failed"]);
    assert_eq!(fail[0]["exit"], 3);
    assert_eq!(fail[0]["detail"], "exit code 3");
    assert_eq!(fail[0]["due"], due);
    assert!(fail[0]["late"].as_f64().unwrap() > (now() - due - 60) as f64);
    assert_eq!(outcomes(&entries(&t, &["stop:A"])), ["stopped"]);
    let back = entries(&t, &["back:A"]);
    assert_eq!(outcomes(&back), ["backoff"]);
    assert_eq!(back[0]["detail"], "backoff 30s");
    // An unset job's history goes with it; its last entry stays in the recent runs.
    assert!(!t.s.con().exists::<_, bool>("t-history-unset:A").unwrap());
    bike(&t.s, t.d.path())
        .args(["history", "unset:A"])
        .run()
        .success()
        .stdout_is(HEADER);
    let all = entries(&t, &[]);
    let mut jobs: Vec<String> = all
        .iter()
        .map(|e| {
            format!(
                "{}={}",
                e["job"].as_str().unwrap(),
                e["outcome"].as_str().unwrap()
            )
        })
        .collect();
    jobs.sort();
    assert_eq!(
        jobs,
        [
            "back:A=backoff",
            "fail:A=failed",
            "once:A=ok",
            "stop:A=stopped",
            "unset:A=unset"
        ]
    );
    // Newest first.
    let ends: Vec<f64> = all.iter().map(|e| e["end"].as_f64().unwrap()).collect();
    assert!(ends.windows(2).all(|w| w[0] >= w[1]), "{ends:?}");
    assert_eq!(outcomes(&entries(&t, &["--failures"])), ["failed"]);
    assert_eq!(
        outcomes(&entries(&t, &["fail:A", "--failures"])),
        ["failed"]
    );
    assert!(entries(&t, &["once:A", "--failures"]).is_empty());

    // CSV: the header row, then one row per entry; a field with a comma or newline is
    // quoted (RFC 4180).
    let csv = bike(&t.s, t.d.path()).args(["history"]).ok();
    assert!(csv.starts_with(HEADER), "{csv}");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 5);
    let failed = rows.iter().find(|r| &r[0] == "fail:A").unwrap();
    assert_eq!(
        (&failed[2], &failed[3], &failed[8]),
        ("failed", &*due.to_string(), "3")
    );
    assert_eq!(&failed[12], "worker");

    // tell: the last runs, and the last success.
    let tell: Value =
        serde_json::from_str(&bike(&t.s, t.d.path()).args(["tell", "fail:A"]).ok()).unwrap();
    assert_eq!(tell["last_runs"][0]["outcome"], "failed");
    assert_eq!(tell["last_success"], Value::Null);
    let tell: Value =
        serde_json::from_str(&bike(&t.s, t.d.path()).args(["tell", "back:A"]).ok()).unwrap();
    assert_eq!(tell["last_success"]["outcome"], "backoff");
}

#[test]
fn a_timeout_records_its_signal_and_a_tail_is_bounded() {
    let t = setup();
    std::fs::write(
        path(&t.d, "rb.toml"),
        "[redbike]\ngrace-period = 1\n[redbike.timeouts]\nH = 1\n",
    )
    .unwrap();
    t.set("hang:H", "NOW");
    t.set("big:A", "NOW");
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .args(["-c", "rb.toml", "work", "A:H", "--", "./job.sh"])
        .spawn();
    assert!(t.wait_status("hang:H", "TMO"));
    assert!(t.wait_status("big:A", "STP"));
    t.stop(w);
    let hang = entries(&t, &["hang:H"]);
    assert_eq!(outcomes(&hang), ["timed-out"]);
    assert_eq!(hang[0]["signal"], libc::SIGTERM);
    assert_eq!(hang[0]["exit"], Value::Null);
    assert!(hang[0]["duration"].as_f64().unwrap() >= 1.0);
    assert_eq!(hang[0]["tail"], "output of hang:H");
    let big = entries(&t, &["big:A"]);
    let tail = big[0]["tail"].as_str().unwrap();
    assert!(tail.len() <= 2048 && tail.len() > 2000, "{}", tail.len());
    // Whole lines only, the last one last.
    assert!(
        tail.starts_with("line ") && tail.ends_with("line 9999"),
        "{tail}"
    );
    assert_eq!(outcomes(&entries(&t, &["--failures"])), ["timed-out"]);
}

#[test]
fn a_recovery_after_kill_9_is_an_entry() {
    let t = setup();
    t.set("hang:A", "CONTINUE");
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let mut w = t.worker(&["A"]);
    assert!(wait_until(10.0, || std::path::Path::new(&format!(
        "{}.pid",
        t.log().display()
    ))
    .exists()));
    let _ = w.kill();
    let _ = w.wait();
    assert!(wait_until(20.0, || t.status("hang:A").starts_with("REC")));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let list = entries(&t, &["hang:A"]);
    assert_eq!(outcomes(&list), ["recovered"]);
    let e = &list[0];
    assert_eq!(e["by"], "dispatcher");
    assert_eq!(e["detail"], "its worker stopped refreshing its lease");
    assert_eq!(e["start"], Value::Null);
    assert_eq!(outcomes(&entries(&t, &["--failures"])), ["recovered"]);
}

#[test]
fn a_catch_up_skip_is_an_entry() {
    let t = setup();
    let conf = path(&t.d, "rb.toml");
    std::fs::write(&conf, "[redbike.catch-up.S]\npolicy = \"skip\"\n").unwrap();
    bike(&t.s, t.d.path())
        .args(["set", "late:S", "FREQ=DAILY", "--after", "2020-01-01"])
        .ok();
    let due: i64 = t.s.con().zscore("t-timeline", "late:S").unwrap();
    let disp = bike(&t.s, t.d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    assert!(t.wait_status("late:S", "SKP"));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let list = entries(&t, &["late:S"]);
    assert_eq!(outcomes(&list), ["skipped"]);
    assert_eq!(list[0]["due"], due);
    assert_eq!(list[0]["by"], "dispatcher");
    assert!(list[0]["late"].as_f64().unwrap() > (now() - due - 60) as f64);
    assert!(list[0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("next run at "));
}

/// A dispatcher notes when a job was due only if it queues the job in a later second
/// than that (otherwise its ENQ status says the same), and drops an older note of a
/// job it queues on time, so that its run cannot take that note for its own.
#[test]
fn due_notes_only_for_jobs_queued_late() {
    let s = RedisServer::start();
    let mut con = s.con();
    let now = now();
    let _: () = con.zadd("t-timeline", "late:A", now - 100).unwrap();
    let _: () = con.zadd("t-timeline", "ontime:A", now).unwrap();
    let _: () = con.hset("t-due", "ontime:A", "1:2").unwrap();
    let _: redis::Value = redbike::redis::scripts::DISPATCH
        .key("t-timeline")
        .key("t-statuses")
        .key("t-control")
        .key("t-leases")
        .key("t-due")
        .key("t-paused")
        .key("t-python-seen")
        .key("t-fresh-until")
        .arg("t")
        .arg(now)
        .arg(10)
        .arg(now)
        .arg("1")
        .invoke(&mut con)
        .unwrap();
    let queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued.len(), 2, "{queued:?}");
    let notes: std::collections::HashMap<String, String> = con.hgetall("t-due").unwrap();
    assert_eq!(
        notes,
        [("late:A".to_string(), format!("{}:{now}", now - 100))].into()
    );
}

/// The keys history writes; with history off, none may exist.
const HISTORY_KEYS: &[&str] = &[
    "t-recent-runs",
    "t-unfiled-runs",
    "t-recent-failures",
    "t-runs-per-minute",
];

#[test]
fn history_limit_trims_and_zero_writes_nothing() {
    let t = setup();
    t.set("loop:A", "CONTINUE");
    let w = t.worker(&["A", "--history-limit", "3"]);
    assert!(wait_until(10.0, || t.runs().len() >= 10));
    // Paused, the job stops running: the idle worker files its entries, trimmed.
    bike(&t.s, t.d.path()).args(["pause", "loop:A"]).ok();
    assert!(wait_until(5.0, || unfiled(&t) == 0));
    t.stop(w);
    let len: usize = t.s.con().llen("t-history-loop:A").unwrap();
    assert_eq!(len, 3);
    assert_eq!(entries(&t, &["loop:A", "-n", "2"]).len(), 2);
    let recent = entries(&t, &[]).len();
    assert!(recent >= 10, "{recent}");

    // Off: a worker, a dispatcher (due fields) and a skip write no history at all.
    let off = setup();
    let conf = path(&off.d, "rb.toml");
    std::fs::write(
        &conf,
        "[redbike]\nhistory-limit = 0\n[redbike.catch-up.S]\npolicy = \"skip\"\n",
    )
    .unwrap();
    off.set("loop:A", "CONTINUE");
    off.set("fail:A", "NOW");
    for id in ["rule:A", "late:S"] {
        bike(&off.s, off.d.path())
            .args(["set", id, "FREQ=DAILY", "--after", "2020-01-01"])
            .ok();
    }
    let disp = bike(&off.s, off.d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    let w = bike(&off.s, off.d.path())
        .env("TEST_LOG", off.log())
        .args(["-c", "rb.toml", "work", "A", "--", "./job.sh"])
        .spawn();
    assert!(wait_until(10.0, || off.runs().len() >= 10));
    assert!(off.wait_status("late:S", "SKP"));
    assert!(wait_until(10.0, || off
        .runs()
        .contains(&"rule:A".to_string())));
    off.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let keys: Vec<String> = off.s.con().keys("t-*").unwrap();
    for key in &keys {
        assert!(
            !key.starts_with("t-history-") && !HISTORY_KEYS.contains(&key.as_str()),
            "{key} written with history-limit = 0"
        );
    }
    // The due notes are not history: they give jobs their REDBIKE_DUE.
    let note: Option<String> = off.s.con().hget("t-due", "rule:A").unwrap();
    assert!(note.is_some());
    // The event stream still has the runs (events are on), and its run events are the
    // recent runs `history` lists without a job.
    let listed = bike(&off.s, off.d.path()).args(["history"]).ok();
    assert!(
        listed.starts_with(HEADER) && listed.contains("\nloop:A,"),
        "{listed}"
    );
    bike(&off.s, off.d.path())
        .args(["history", "loop:A"])
        .run()
        .success()
        .stdout_is(HEADER);
}

#[test]
fn history_filters_and_refuses_bad_input() {
    let t = setup();
    t.set("once:A", "NOW");
    t.set("fail:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_status("once:A", "STP"));
    assert!(wait_until(10.0, || t.runs().len() >= 2));
    t.stop(w);
    assert_eq!(entries(&t, &[]).len(), 2);
    assert_eq!(entries(&t, &["-n", "1"]).len(), 1);
    let future = (now() + 3600).to_string();
    assert!(entries(&t, &["--since", &future]).is_empty());
    assert_eq!(entries(&t, &["--since", "2020-01-01T00:00:00Z"]).len(), 2);
    // A valid job without history: the header only; JSON: an empty array.
    bike(&t.s, t.d.path())
        .args(["history", "never:A"])
        .run()
        .success()
        .stdout_is(HEADER);
    bike(&t.s, t.d.path())
        .args(["history", "never:A", "--format", "json"])
        .run()
        .success()
        .stdout_is("[]\n");
    let before = t.s.dump();
    for (args, part) in [
        (&["history", ""][..], "job id"),
        (&["history", "-n", "0"][..], "--count"),
        (&["history", "--since", "yesterday"][..], "--since"),
        (&["history", "--format", "xml"][..], "xml"),
        (
            &["work", "A", "--history-limit", "10001", "--", "true"][..],
            "10001",
        ),
    ] {
        bike(&t.s, t.d.path()).args(args).run().fails(2, part);
    }
    std::fs::write(path(&t.d, "bad.toml"), "[redbike]\nhistory-limit = -1\n").unwrap();
    bike(&t.s, t.d.path())
        .args(["-c", "bad.toml", "history"])
        .run()
        .fails(2, "history-limit");
    assert_eq!(t.s.dump(), before);
}

#[test]
fn stats_reports_lateness_and_runs_per_minute() {
    let t = setup();
    t.set("loop:A", "CONTINUE");
    t.set("fail:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(wait_until(10.0, || t.runs().len() >= 20));
    t.stop(w);
    let json: Value = serde_json::from_str(
        &bike(&t.s, t.d.path())
            .args(["stats", "--format", "json"])
            .ok(),
    )
    .unwrap();
    let r = &json["recent_runs"];
    let runs = t.runs().len() as u64;
    // All runs were within the last minute (the estimate counts part of the minute
    // before only when it began there).
    let per_minute = r["runs_per_minute"].as_u64().unwrap();
    assert!(per_minute <= runs && per_minute >= runs.min(20) / 2, "{r}");
    assert!(r["lateness_samples"].as_u64().unwrap() >= 20, "{r}");
    let p50 = r["lateness_p50_seconds"].as_f64().unwrap();
    let p99 = r["lateness_p99_seconds"].as_f64().unwrap();
    assert!(p50 <= p99 && (-1.0..5.0).contains(&p50), "{r}");
    assert_eq!(r["recent_failures"], 1);
    let prom = bike(&t.s, t.d.path())
        .args(["stats", "--format", "prometheus"])
        .ok();
    for name in [
        "redbike_runs_per_minute{prefix=\"t\"} ",
        "redbike_run_lateness_p50_seconds{prefix=\"t\"} ",
        "redbike_run_lateness_p99_seconds{prefix=\"t\"} ",
        "redbike_recent_failures{prefix=\"t\"} 1\n",
    ] {
        assert!(prom.contains(name), "{name} missing: {prom}");
    }
    let text = bike(&t.s, t.d.path()).args(["stats"]).ok();
    assert!(
        text.contains(" per minute, 1 failure(s) in the last minute; lateness p50 "),
        "{text}"
    );
}

#[test]
fn an_odd_history_key_costs_its_entries_only_and_check_names_it() {
    let t = setup();
    t.set("once:A", "NOW");
    let _: () = t.s.con().set("t-history-once:A", "x").unwrap();
    let w = t.worker(&["A"]);
    assert!(t.wait_status("once:A", "STP"));
    t.stop(w);
    // The outcome was recorded; the entry went to the recent runs only.
    assert_eq!(outcomes(&entries(&t, &[])), ["ok"]);
    let out = bike(&t.s, t.d.path()).args(["check"]).run().code(1);
    assert!(
        out.stdout
            .contains("odd-key,,t-history-once:A holds a string where redbike keeps a list"),
        "{}",
        out.stdout
    );
    // Without it, check finds nothing odd in the history keys.
    let _: () = t.s.con().del("t-history-once:A").unwrap();
    bike(&t.s, t.d.path()).args(["check"]).run().success();
}

/// Entries in `t-unfiled-runs`.
fn unfiled(t: &Setup) -> usize {
    t.s.con().llen("t-unfiled-runs").unwrap()
}

/// Job lists `t-history-*`.
fn job_lists(t: &Setup) -> Vec<String> {
    t.s.con().keys("t-history-*").unwrap()
}

/// Runs `n` one-off jobs `nI:A` with a worker that files only past `backlog` (the
/// test hook keeps an idle worker from filing), then stops it.
fn burst(t: &Setup, n: usize, backlog: u64) {
    std::fs::write(
        path(&t.d, "rb.toml"),
        format!("[redbike]\nhistory-backlog = {backlog}\n"),
    )
    .unwrap();
    for i in 0..n {
        t.set(&format!("n{i}:A"), "NOW");
    }
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .env("REDBIKE_TEST_NO_IDLE_FILING", "1")
        .args(["-c", "rb.toml", "work", "A", "--", "./job.sh"])
        .spawn();
    assert!(
        wait_until(20.0, || t.runs().len() >= n),
        "{}",
        t.runs().len()
    );
    assert!(t.wait_status(&format!("n{}:A", n - 1), "STP"));
    t.stop(w);
}

#[test]
fn a_burst_leaves_its_entries_unfiled_where_readers_find_them_then_they_are_filed() {
    let t = setup();
    burst(&t, 30, 1000);
    // Within the backlog: no key per job yet, every entry unfiled, as stats says.
    assert_eq!(unfiled(&t), 30);
    let stats = |t: &Setup| -> Value {
        let out = bike(&t.s, t.d.path())
            .args(["stats", "--format", "json"])
            .ok();
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(stats(&t)["history_unfiled"], 30);
    assert_eq!(job_lists(&t), Vec::<String>::new());
    let list = entries(&t, &["n7:A"]);
    assert_eq!(outcomes(&list), ["ok"]);
    assert_eq!(list[0]["job"], "n7:A");
    let tell: Value =
        serde_json::from_str(&bike(&t.s, t.d.path()).args(["tell", "n7:A"]).ok()).unwrap();
    assert_eq!(tell["last_runs"][0]["outcome"], "ok");
    assert_eq!(tell["last_success"]["job"], "n7:A");
    // An idle worker files them (its first poll finds them), once each.
    let w = t.worker(&["A"]);
    assert!(wait_until(5.0, || unfiled(&t) == 0));
    t.stop(w);
    assert_eq!(stats(&t)["history_unfiled"], 0);
    assert_eq!(job_lists(&t).len(), 30);
    let len: usize = t.s.con().llen("t-history-n7:A").unwrap();
    assert_eq!(len, 1);
    assert_eq!(outcomes(&entries(&t, &["n7:A"])), ["ok"]);
}

#[test]
fn past_its_backlog_a_busy_worker_writes_entries_to_their_jobs_lists() {
    let t = setup();
    burst(&t, 60, 5);
    // Bounded by the backlog and the entries of one round trip; the rest filed.
    let left = unfiled(&t);
    assert!(left < 40, "{left} unfiled");
    assert!(job_lists(&t).len() >= 20, "{:?}", job_lists(&t));
    for i in [0, 30, 59] {
        assert_eq!(outcomes(&entries(&t, &[&format!("n{i}:A")])), ["ok"]);
    }
}

#[test]
fn filing_keeps_order_counts_an_entry_once_and_drops_unset_jobs() {
    let t = setup();
    t.set("j:A", "FREQ=DAILY");
    let entry = |job: &str, end: u32| format!(r#"{{"j":"{job}","o":"ok","e":{end}.0}}"#);
    let mut con = t.s.con();
    // Older entries filed; a newer one and one filed while read (in both) unfiled,
    // with one of a job since unset.
    let _: () = con
        .rpush("t-history-j:A", &[entry("j:A", 200), entry("j:A", 100)])
        .unwrap();
    let _: () = con
        .rpush(
            "t-unfiled-runs",
            &[entry("j:A", 200), entry("gone:A", 250), entry("j:A", 300)],
        )
        .unwrap();
    let ends = |t: &Setup| -> Vec<f64> {
        entries(t, &["j:A"])
            .iter()
            .map(|e| e["end"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(ends(&t), [300.0, 200.0, 100.0]);
    let w = t.worker(&["A"]);
    assert!(wait_until(5.0, || unfiled(&t) == 0));
    t.stop(w);
    assert_eq!(ends(&t), [300.0, 200.0, 100.0]);
    assert_eq!(job_lists(&t), ["t-history-j:A"]);
}

/// Filing reads each entry's job from the entry itself: ids that JSON writes with
/// escapes (a quote, a backslash) or that are not ASCII reach their own lists; an entry
/// that names no job is dropped.
#[test]
fn filing_finds_the_job_of_entries_whose_ids_need_escapes() {
    let t = setup();
    let ids = ["say \"hi\":A", "back\\slash:A", "caf\u{e9}:A", "plain:A"];
    let mut con = t.s.con();
    for id in ids {
        let _: () = con.hset("t-schedules", id, "FREQ=DAILY").unwrap();
        let entry = serde_json::json!({"j": id, "o": "ok", "e": 100.0}).to_string();
        let _: () = con.rpush("t-unfiled-runs", &entry).unwrap();
    }
    let _: () = con.rpush("t-unfiled-runs", "not an entry").unwrap();
    let w = t.worker(&["A"]);
    assert!(wait_until(5.0, || unfiled(&t) == 0));
    t.stop(w);
    for id in ids {
        let listed: Vec<String> = con.lrange(format!("t-history-{id}"), 0, -1).unwrap();
        assert_eq!(listed.len(), 1, "{id}: {listed:?}");
        let entry: serde_json::Value = serde_json::from_str(&listed[0]).unwrap();
        assert_eq!(entry["j"], id);
    }
    assert_eq!(job_lists(&t).len(), ids.len(), "{:?}", job_lists(&t));
}

#[test]
fn a_jobs_unfiled_entries_are_found_across_pages() {
    let t = setup();
    let mine = [0, 999, 1000, 1500, 2499];
    let planted: Vec<String> = (0..2500)
        .map(|i| match mine.contains(&i) {
            true => format!(r#"{{"j":"j:A","o":"ok","e":{i}.0}}"#),
            false => format!(r#"{{"j":"j:AB","o":"ok","e":{i}.0}}"#),
        })
        .collect();
    let _: () = t.s.con().rpush("t-unfiled-runs", &planted).unwrap();
    let ends: Vec<f64> = entries(&t, &["j:A"])
        .iter()
        .map(|e| e["end"].as_f64().unwrap())
        .collect();
    assert_eq!(ends, [2499.0, 1500.0, 1000.0, 999.0, 0.0]);
}

/// finish.lua with one outcome of `j:A` (lease tag `tag`) and its entry, `limit`
/// history entries kept per job.
fn finish_once(s: &RedisServer, entry: &str, limit: &'static str) -> redis::Value {
    let script = redis::Script::new(&format!(
        "{}{}",
        include_str!("../../src/redis/scripts/common.lua"),
        include_str!("../../src/redis/scripts/finish.lua")
    ));
    let mut inv = script.prepare_invoke();
    for key in [
        "t-schedules",
        "t-statuses",
        "t-timeline",
        "t-failures",
        "t-leases",
        "t-recent-runs",
        "t-recent-failures",
        "t-runs-per-minute",
        "t-due",
        "t-paused",
        "t-rerun",
        "t-unfiled-runs",
        "t-attempts",
        "t-kill",
        "t-backlogs",
        "t-events",
        "t-fresh-until",
        "t-stale",
        "t-work-A",
        "t-work-A-members",
    ] {
        inv.key(key);
    }
    for arg in [
        "j:A", "tag", "1", "CONTINUE", "place", "enqueue", "0", "", "", entry, "", "", "", "",
    ]
    .into_iter()
    .chain(finish_once_args(limit, ""))
    {
        inv.arg(arg);
    }
    inv.invoke(&mut s.con()).unwrap()
}

#[test]
fn an_outcome_written_again_records_one_entry() {
    let s = RedisServer::start();
    let mut con = s.con();
    let _: () = con.hset("t-schedules", "j:A", "CONTINUE").unwrap();
    let _: () = con.set("t-work-A-j:A", "tag").unwrap();
    let _: () = con.zadd("t-leases", "j:A", 1).unwrap();
    let entry = r#"{"j":"j:A","o":"ok","e":1700000000.0}"#;
    // The first write takes the lease; the second (its reply was lost) finds it gone.
    for _ in 0..2 {
        finish_once(&s, entry, "20");
    }
    let unfiled: Vec<String> = con.lrange("t-unfiled-runs", 0, -1).unwrap();
    assert_eq!(unfiled, [entry]);
    // Not in the recent runs' list: the stream's run event is the recent run.
    let recent: usize = con.llen("t-recent-runs").unwrap();
    assert_eq!(recent, 0);
    // And one event.
    let events: usize = redis::cmd("XLEN").arg("t-events").query(&mut con).unwrap();
    assert_eq!(events, 1);
}

#[test]
fn an_outcome_written_again_without_history_writes_one_event_and_no_history() {
    let s = RedisServer::start();
    let mut con = s.con();
    let _: () = con.hset("t-schedules", "j:A", "CONTINUE").unwrap();
    let _: () = con.set("t-work-A-j:A", "tag").unwrap();
    let _: () = con.zadd("t-leases", "j:A", 1).unwrap();
    let entry = r#"{"j":"j:A","o":"ok","e":1700000000.0}"#;
    for _ in 0..2 {
        finish_once(&s, entry, "0");
    }
    let events: usize = redis::cmd("XLEN").arg("t-events").query(&mut con).unwrap();
    assert_eq!(events, 1);
    for key in [
        "t-unfiled-runs",
        "t-recent-runs",
        "t-history-j:A",
        "t-runs-per-minute",
    ] {
        let exists: bool = con.exists(key).unwrap();
        assert!(!exists, "{key} written with history off");
    }
}

#[test]
fn workers_filing_together_file_each_entry_once() {
    let t = setup();
    let n = 3000;
    let mut con = t.s.con();
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.hset("t-schedules", format!("f{i}:A"), "FREQ=DAILY")
            .ignore();
        pipe.rpush(
            "t-unfiled-runs",
            format!(r#"{{"j":"f{i}:A","o":"ok","e":{i}.0}}"#),
        )
        .ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    let workers: Vec<_> = (0..3).map(|_| t.worker(&["A"])).collect();
    assert!(
        wait_until(20.0, || unfiled(&t) == 0),
        "{} left",
        unfiled(&t)
    );
    for w in workers {
        t.stop(w);
    }
    let mut lengths = redis::pipe();
    for i in 0..n {
        lengths.llen(format!("t-history-f{i}:A"));
    }
    let lengths: Vec<usize> = lengths.query(&mut con).unwrap();
    let wrong: Vec<(usize, &usize)> = lengths
        .iter()
        .enumerate()
        .filter(|(_, n)| **n != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "jobs without exactly one entry: {wrong:?}"
    );
}
