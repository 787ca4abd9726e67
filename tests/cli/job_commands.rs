//! The operator commands: set, unset, tell, statuses, schedules, control, next.

use redis::Commands;

use crate::harness::*;

fn zscore(s: &RedisServer, key: &str, member: &str) -> Option<i64> {
    let v: Option<f64> = s.con().zscore(key, member).unwrap();
    v.map(|v| v as i64)
}

fn hget(s: &RedisServer, key: &str, field: &str) -> Option<String> {
    s.con().hget(key, field).unwrap()
}

fn list(s: &RedisServer, key: &str) -> Vec<String> {
    s.con().lrange(key, 0, -1).unwrap()
}

#[test]
fn set_rule_puts_job_on_timeline_at_next_run() {
    let s = RedisServer::start();
    let d = workdir();
    // 2024-01-01T10:17:23Z; anchored at the hour, so the next 5-minute mark is 10:20:00.
    bike(&s, d.path())
        .args([
            "set",
            "job1:A",
            "FREQ=MINUTELY;INTERVAL=5",
            "--after",
            "1704104243",
        ])
        .run()
        .success()
        .stdout_is("job1:A: next run at 1704104400 (2024-01-01T10:20:00Z)\n");
    assert_eq!(zscore(&s, "t-timeline", "job1:A"), Some(1_704_104_400));
    assert_eq!(
        hget(&s, "t-schedules", "job1:A").as_deref(),
        Some("FREQ=MINUTELY;INTERVAL=5")
    );
    let status = hget(&s, "t-statuses", "job1:A").unwrap();
    assert!(status.starts_with("TML:"), "{status}");
    let ts: i64 = status[4..].parse().unwrap();
    assert!((ts - now()).abs() <= 2);
}

#[test]
fn set_now_enqueues_once_and_stores_stop() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["set", "a:b:Q", "now"])
        .run()
        .success()
        .stdout_is("a:b:Q: enqueued\n");
    bike(&s, d.path())
        .args(["set", "a:b:Q", "NOW"])
        .run()
        .success()
        .stdout_is("a:b:Q: already in its queue\n");
    assert_eq!(list(&s, "t-work-Q"), ["a:b:Q"]);
    let members: Vec<String> = s.con().smembers("t-work-Q-members").unwrap();
    assert_eq!(members, ["a:b:Q"]);
    assert_eq!(hget(&s, "t-schedules", "a:b:Q").as_deref(), Some("STOP"));
    assert!(hget(&s, "t-statuses", "a:b:Q").unwrap().starts_with("ENQ:"));
}

#[test]
fn set_does_not_queue_a_running_job() {
    let s = RedisServer::start();
    let d = workdir();
    let _: () = s.con().set("t-work-A-j:A", "abc").unwrap();
    bike(&s, d.path())
        .args(["set", "j:A", "CONTINUE"])
        .run()
        .success()
        .stdout_is("j:A: running now; it will run again when this run ends\n");
    assert!(list(&s, "t-work-A").is_empty());
    assert_eq!(hget(&s, "t-schedules", "j:A").as_deref(), Some("CONTINUE"));
}

#[test]
fn set_at_goes_on_timeline_and_stores_stop() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["set", "j", "AT:2090-01-01T00:00:00Z"])
        .run()
        .success()
        .stdout_is("j: next run at 3786912000 (2090-01-01T00:00:00Z)\n");
    assert_eq!(zscore(&s, "t-timeline", "j"), Some(3_786_912_000));
    assert_eq!(hget(&s, "t-schedules", "j").as_deref(), Some("STOP"));
    bike(&s, d.path()).args(["set", "j", "AT:1893456001"]).ok();
    assert_eq!(zscore(&s, "t-timeline", "j"), Some(1_893_456_001));
}

#[test]
fn set_stop_takes_job_off_timeline_and_queue() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "j:A", "FREQ=DAILY"]).ok();
    bike(&s, d.path()).args(["set", "k:A", "NOW"]).ok();
    bike(&s, d.path())
        .args(["set", "j:A", "stop"])
        .run()
        .success()
        .stdout_is("j:A: stopped\n");
    bike(&s, d.path()).args(["set", "k:A", "STOP"]).ok();
    assert_eq!(zscore(&s, "t-timeline", "j:A"), None);
    assert!(list(&s, "t-work-A").is_empty());
    let members: Vec<String> = s.con().smembers("t-work-A-members").unwrap();
    assert!(members.is_empty());
    assert!(hget(&s, "t-statuses", "j:A").unwrap().starts_with("STP:"));
    assert_eq!(hget(&s, "t-schedules", "j:A").as_deref(), Some("STOP"));
}

#[test]
fn set_rule_moves_a_queued_job_to_the_timeline() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "j:A", "NOW"]).ok();
    bike(&s, d.path()).args(["set", "j:A", "FREQ=HOURLY"]).ok();
    assert!(list(&s, "t-work-A").is_empty());
    assert!(zscore(&s, "t-timeline", "j:A").is_some());
}

#[test]
fn set_exhausted_rule_stops() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args([
            "set",
            "j",
            "DTSTART:20200101T000000Z\nRRULE:FREQ=DAILY;COUNT=2",
        ])
        .run()
        .success()
        .stdout_is("j: stopped\n");
    assert!(hget(&s, "t-statuses", "j").unwrap().starts_with("STP:"));
    assert_eq!(zscore(&s, "t-timeline", "j"), None);
}

/// A rule whose occurrences are all past has ended, like STOP: `next` says so on
/// stderr and exits 0, `set` and `load` store it as a stopped job. (A rule that can
/// never fire at all is refused: see bad_input.)
#[test]
fn an_ended_rule_is_stopped_everywhere_and_next_says_so() {
    let s = RedisServer::start();
    let d = workdir();
    let ended = "FREQ=DAILY;UNTIL=20000101T000000Z";
    let o = bare(d.path())
        .args(["next", ended, "-a", "2024-01-01T00:00:00Z"])
        .run()
        .success()
        .stdout_is("");
    assert!(
        o.stderr
            .contains("no run after 2024-01-01T00:00:00Z: the schedule has ended"),
        "{}",
        o.stderr
    );
    // Runs out after one of the three runs asked for.
    let o = bare(d.path())
        .args([
            "next",
            "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;COUNT=2",
            "-n",
            "3",
            "-a",
            "2024-01-01T12:00:00Z",
        ])
        .run()
        .success()
        .stdout_is("1704186000 2024-01-02T09:00:00Z\n");
    assert!(
        o.stderr.contains("no run after 2024-01-02T09:00:00Z"),
        "{}",
        o.stderr
    );
    bike(&s, d.path())
        .args(["set", "j:A", ended])
        .run()
        .success()
        .stdout_is("j:A: stopped\n");
    std::fs::write(path(&d, "f.csv"), format!("k:A,{ended}\n")).unwrap();
    bike(&s, d.path()).args(["load", "f.csv"]).ok();
    for id in ["j:A", "k:A"] {
        assert!(hget(&s, "t-statuses", id).unwrap().starts_with("STP:"));
        assert_eq!(hget(&s, "t-schedules", id).as_deref(), Some(ended));
        assert_eq!(zscore(&s, "t-timeline", id), None);
    }
}

/// Rule sets: `next` previews them, `set` stores them as written.
#[test]
fn rule_sets_are_previewed_and_set() {
    let s = RedisServer::start();
    let d = workdir();
    let set = "DTSTART;TZID=Europe/Berlin:20241216T090000\n\
               RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR\n\
               EXDATE;VALUE=DATE:20241225,20241226\n\
               RDATE:20241228T120000";
    bare(d.path())
        .args(["next", set, "-n", "3", "-a", "2024-12-24T12:00:00Z"])
        .run()
        .success()
        .stdout_is(
            "1735286400 2024-12-27T08:00:00Z 2024-12-27T09:00:00+01:00 Europe/Berlin\n\
             1735383600 2024-12-28T11:00:00Z 2024-12-28T12:00:00+01:00 Europe/Berlin\n\
             1735545600 2024-12-30T08:00:00Z 2024-12-30T09:00:00+01:00 Europe/Berlin\n",
        );
    bike(&s, d.path())
        .args(["set", "h:A", set, "--after", "2024-12-24T12:00:00Z"])
        .ok();
    assert_eq!(zscore(&s, "t-timeline", "h:A"), Some(1735286400));
    assert_eq!(hget(&s, "t-schedules", "h:A").as_deref(), Some(set));
    // RDATEs alone: run on these dates (DTSTART itself is no run, as in dateutil).
    let dates = "DTSTART;TZID=Europe/Berlin:20250101T090000\n\
                 RDATE;TZID=Europe/Berlin:20250301T090000,20250115T090000\n\
                 RDATE:20250401T120000Z\n\
                 EXDATE;TZID=Europe/Berlin:20250301T090000";
    bare(d.path())
        .args(["next", dates, "-n", "5", "-a", "2024-12-01T00:00:00Z"])
        .run()
        .success()
        .stdout_is(
            "1736928000 2025-01-15T08:00:00Z 2025-01-15T09:00:00+01:00 Europe/Berlin\n\
             1743508800 2025-04-01T12:00:00Z 2025-04-01T14:00:00+02:00 Europe/Berlin\n",
        )
        .stderr_has("no run after 2025-04-01T12:00:00Z: the schedule has ended");
    bike(&s, d.path())
        .args(["set", "r:A", dates, "--after", "2025-02-01T00:00:00Z"])
        .ok();
    assert_eq!(zscore(&s, "t-timeline", "r:A"), Some(1743508800));
}

/// `CRON:` lines: `next` previews them (DST as for rules: 02:30 moves to 03:30 on the
/// spring-forward day and runs once on the fall-back day), `set` and `load` place them,
/// `tell` shows them.
#[test]
fn cron_lines_are_previewed_set_loaded_and_told() {
    let s = RedisServer::start();
    let d = workdir();
    bare(d.path())
        .args([
            "next",
            "CRON:*/5 * * * *",
            "-n",
            "2",
            "-a",
            "2024-01-01T10:17:23Z",
        ])
        .run()
        .success()
        .stdout_is("1704104400 2024-01-01T10:20:00Z\n1704104700 2024-01-01T10:25:00Z\n");
    bare(d.path())
        .args([
            "next",
            "CRON:CRON_TZ=Europe/Berlin 30 2 * * *",
            "-n",
            "2",
            "-a",
            "2024-03-30T12:00:00Z",
        ])
        .run()
        .success()
        .stdout_is(
            "1711848600 2024-03-31T01:30:00Z 2024-03-31T03:30:00+02:00 Europe/Berlin\n\
             1711931400 2024-04-01T00:30:00Z 2024-04-01T02:30:00+02:00 Europe/Berlin\n",
        );
    // Lines without a zone run in the configured one.
    std::fs::write(
        path(&d, "berlin.toml"),
        "[redbike]\ntimezone = \"Europe/Berlin\"\n",
    )
    .unwrap();
    bare(d.path())
        .args([
            "-c",
            "berlin.toml",
            "next",
            "CRON:30 2 * * *",
            "-n",
            "2",
            "-a",
            "2024-10-26T12:00:00Z",
        ])
        .run()
        .success()
        .stdout_is(
            "1729989000 2024-10-27T00:30:00Z 2024-10-27T02:30:00+02:00 Europe/Berlin\n\
             1730079000 2024-10-28T01:30:00Z 2024-10-28T02:30:00+01:00 Europe/Berlin\n",
        );
    // The 1st or any Monday (Vixie cron's day rule).
    bare(d.path())
        .args([
            "next",
            "CRON:0 9 1 * MON",
            "-n",
            "2",
            "-a",
            "2024-01-29T10:00:00Z",
        ])
        .run()
        .success()
        .stdout_is("1706778000 2024-02-01T09:00:00Z\n1707123600 2024-02-05T09:00:00Z\n");
    bike(&s, d.path())
        .args([
            "set",
            "c:A",
            "CRON:@daily",
            "--after",
            "2030-01-01T12:00:00Z",
        ])
        .run()
        .success()
        .stdout_is("c:A: next run at 1893542400 (2030-01-02T00:00:00Z)\n");
    std::fs::write(path(&d, "f.csv"), "k:A,CRON:0 9 * * MON-FRI\n").unwrap();
    bike(&s, d.path())
        .args(["load", "f.csv", "--after", "2030-01-04T12:00:00Z"])
        .ok();
    // 2030-01-04 is a Friday: next Monday 09:00.
    assert_eq!(zscore(&s, "t-timeline", "k:A"), Some(1894006800));
    assert_eq!(
        hget(&s, "t-schedules", "k:A").as_deref(),
        Some("CRON:0 9 * * MON-FRI")
    );
    let out = bike(&s, d.path()).args(["tell", "c:A"]).ok();
    assert!(out.contains("\"schedule\": \"CRON:@daily\""), "{out}");
    assert!(out.contains("2030-01-02T00:00:00Z"), "{out}");
}

/// `load` reads its input twice (check, then write): standard input and a FIFO (as
/// `load <(command)` gives) are copied as they are read the first time.
#[test]
fn load_reads_stdin_and_a_fifo_in_batches() {
    let s = RedisServer::start();
    let d = workdir();
    let rows = |tag: &str| -> String {
        (0..2_500)
            .map(|i| format!("\"{tag}{i},x:A\",FREQ=DAILY\r\n"))
            .collect()
    };
    let o = bike(&s, d.path())
        .args(["load", "-"])
        .stdin(rows("in"))
        .run()
        .success();
    assert_eq!(o.stdout.trim(), "loaded 2500 job(s) from -");
    let fifo = path(&d, "rows.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let writer = {
        let (fifo, data) = (fifo.clone(), rows("fifo"));
        std::thread::spawn(move || std::fs::write(fifo, data).unwrap())
    };
    bike(&s, d.path())
        .args(["load".as_ref(), fifo.as_os_str()])
        .run()
        .success();
    writer.join().unwrap();
    let n: usize = s.con().hlen("t-schedules").unwrap();
    assert_eq!(n, 5_000);
    assert!(hget(&s, "t-schedules", "fifo2499,x:A").is_some());
    assert!(hget(&s, "t-schedules", "in0,x:A").is_some());
}

#[test]
fn set_uses_timefile_as_reference_instant() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, ".redbike.timefile"), "1704104243").unwrap();
    bike(&s, d.path())
        .args(["set", "j", "FREQ=HOURLY"])
        .run()
        .success()
        .stdout_is("j: next run at 1704106800 (2024-01-01T11:00:00Z)\n");
    // --after beats the timefile.
    bike(&s, d.path())
        .args(["set", "j", "FREQ=HOURLY", "-a", "1704106800"])
        .run()
        .success()
        .stdout_is("j: next run at 1704110400 (2024-01-01T12:00:00Z)\n");
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["set", "seed:A", "FREQ=DAILY"])
        .ok();
    let before = s.dump();
    let cases: &[(&[&str], &str)] = &[
        (&["set", "j", "FREQ=DAYLY"], "bad schedule"),
        (&["set", "j", "FREQ=DAILY;INTERVAL=0"], "bad schedule"),
        (&["set", "j", "AT:soon"], "bad AT schedule"),
        (&["set", "j", "  "], "schedule is empty"),
        (&["set", "", "NOW"], "job id is empty"),
        (&["unset", ""], "job id is empty"),
        (&["tell", ""], "job id is empty"),
        (&["run", "q:A-A"], "cannot be used"),
        (&["set", "j:", "NOW"], "names its queue"),
        (&["set", "a\tb", "NOW"], "control character"),
        (&["set", "j", "NOW", "--after", "yesterday"], "--after"),
        (&["set", "j", "NOW", "--after", "-1"], "out of range"),
        (&["statuses", "--before", "x"], "--before"),
        (&["control", "STOMP"], "unknown control signal"),
        (&["set", "j"], "required"),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, msg) in cases {
        bike(&s, d.path()).args(*args).run().fails(2, msg);
    }
    assert_eq!(s.dump(), before);
}

#[test]
fn unset_removes_everything_but_a_running_lease() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "j:A", "NOW"]).ok();
    bike(&s, d.path())
        .args(["unset", "j:A"])
        .run()
        .success()
        .stdout_is("j:A: unset\n");
    // Nothing left of the job; the event stream keeps who set and unset it.
    let keys: Vec<String> = s.con().keys("*").unwrap();
    assert_eq!(keys, ["t-events"]);
    bike(&s, d.path())
        .args(["unset", "j:A"])
        .run()
        .success()
        .stdout_is("j:A: had no schedule; cleared anything left of it\n");
    // Unlike 0.13.1 the members set is cleared too, so the job can be queued again.
    bike(&s, d.path())
        .args(["set", "j:A", "NOW"])
        .run()
        .success()
        .stdout_is("j:A: enqueued\n");
}

#[test]
fn tell_shows_state_as_json() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["set", "j:A", "AT:3786912000"])
        .ok();
    let _: () = s.con().set_ex("t-work-A-j:A", "tag", 30).unwrap();
    let out = bike(&s, d.path()).args(["tell", "j:A"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schedule"], "STOP");
    assert_eq!(v["next_run"], 3_786_912_000_i64);
    assert_eq!(v["next_run_utc"], "2090-01-01T00:00:00Z");
    assert_eq!(v["working"], true);
    assert_eq!(v["queue"], "A");
    assert_eq!(v["queued"], false);
    assert!(v["status"].as_str().unwrap().starts_with("TML:"));
    assert!(v["lease_seconds_left"].as_f64().unwrap() > 20.0);
    let out = bike(&s, d.path()).args(["tell", "nobody"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["status"].is_null() && v["schedule"].is_null() && v["next_run"].is_null());
    assert_eq!(v["working"], false);
}

#[test]
fn statuses_are_sorted_filtered_csv() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    let _: () = con
        .hset_multiple(
            "t-statuses",
            &[
                ("b:A", "ENQ:200"),
                ("a,\"x\":A", "TML:100"),
                ("c\nd:A", "NEW:300"),
                ("late", "WRK:900"),
            ],
        )
        .unwrap();
    bike(&s, d.path())
        .args(["statuses", "--before", "300"])
        .run()
        .success()
        .stdout_is("\"a,\"\"x\"\":A\",TML,100\r\nb:A,ENQ,200\r\n\"c\nd:A\",NEW,300\r\n");
    let all = bike(&s, d.path()).args(["statuses"]).ok();
    assert!(all.ends_with("late,WRK,900\r\n"), "{all}");
}

#[test]
fn schedules_round_trip_through_csv() {
    let s = RedisServer::start();
    let d = workdir();
    let rule = "DTSTART;TZID=Europe/Berlin:20240101T093000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU";
    for (id, sched) in [
        ("z:A", "CONTINUE"),
        ("a,b:A", rule),
        ("q\"uote:B", "FREQ=DAILY"),
    ] {
        bike(&s, d.path()).args(["set", id, sched]).ok();
    }
    let out = bike(&s, d.path()).args(["schedules"]).ok();
    let rows: Vec<(String, String)> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(out.as_bytes())
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[0].to_string(), r[1].to_string())
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("a,b:A".to_string(), rule.to_string()),
            ("q\"uote:B".to_string(), "FREQ=DAILY".to_string()),
            ("z:A".to_string(), "CONTINUE".to_string())
        ]
    );
}

#[test]
fn control_halt_and_resume() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["control", "halt"]).ok();
    let v: Option<String> = s.con().get("t-control").unwrap();
    assert_eq!(v.as_deref(), Some("HALT"));
    bike(&s, d.path()).args(["control", "RESUME"]).ok();
    let v: Option<String> = s.con().get("t-control").unwrap();
    assert_eq!(v, None);
}

#[test]
fn next_previews_without_redis() {
    let d = workdir();
    bare(d.path())
        .args([
            "next",
            "FREQ=DAILY;BYHOUR=9",
            "-n",
            "2",
            "--after",
            "2024-01-01T10:00:00Z",
        ])
        .run()
        .success()
        .stdout_is("1704186000 2024-01-02T09:00:00Z\n1704272400 2024-01-03T09:00:00Z\n");
    bare(d.path())
        .args([
            "next",
            "DTSTART;TZID=Europe/Berlin:20240330T023000\nRRULE:FREQ=DAILY",
            "-n",
            "2",
            "-a",
            "1711756800",
        ])
        .run()
        .success()
        .stdout_is(
            "1711762200 2024-03-30T01:30:00Z 2024-03-30T02:30:00+01:00 Europe/Berlin\n\
             1711848600 2024-03-31T01:30:00Z 2024-03-31T03:30:00+02:00 Europe/Berlin\n",
        );
    // DTSTART from 1900 on: an anniversary rule that started in 1950.
    bare(d.path())
        .args([
            "next",
            "DTSTART;TZID=Europe/Berlin:19500315T090000\nRRULE:FREQ=YEARLY",
            "-n",
            "1",
            "-a",
            "2024-06-01T00:00:00Z",
        ])
        .run()
        .success()
        .stdout_is("1742025600 2025-03-15T08:00:00Z 2025-03-15T09:00:00+01:00 Europe/Berlin\n");
    // Reference instants of `next` reach back to 1900 too (set and load: 1970).
    bare(d.path())
        .args([
            "next",
            "DTSTART;TZID=Europe/Berlin:19500315T090000\nRRULE:FREQ=YEARLY",
            "-n",
            "2",
            "-a",
            "1965-01-01T00:00:00Z",
        ])
        .run()
        .success()
        .stdout_is(
            "-151430400 1965-03-15T08:00:00Z 1965-03-15T09:00:00+01:00 Europe/Berlin\n\
             -119894400 1966-03-15T08:00:00Z 1966-03-15T09:00:00+01:00 Europe/Berlin\n",
        );
    bare(d.path())
        .args(["next", "FREQ=DAILY;BYHOUR=9", "-n", "1", "-a", "1900-01-01"])
        .run()
        .success()
        .stdout_is("-2208956400 1900-01-01T09:00:00Z\n");
    bare(d.path())
        .args(["next", "FREQ=DAILY", "-a", "1899-12-31T23:59:59Z"])
        .run()
        .fails(2, "--after: timestamp \"1899-12-31T23:59:59Z\" is out of range; use a time between 1900 and 9999");
    bare(d.path())
        .args(["next", "AT:100"])
        .run()
        .success()
        .stdout_is("100 1970-01-01T00:01:40Z\n");
    bare(d.path())
        .args(["next", "nonsense"])
        .run()
        .fails(2, "bad schedule");
}

#[test]
fn config_file_lookup_and_overrides() {
    let s = RedisServer::start();
    let d = workdir();
    let conf = format!(
        "[redbike]\nprefix = \"fromfile\"\n[redbike-redis]\nurl = \"{}\"\n",
        s.url()
    );
    std::fs::write(path(&d, ".redbike.conf"), &conf).unwrap();
    std::fs::write(path(&d, "other.conf"), conf.replace("fromfile", "other")).unwrap();
    // ./.redbike.conf is found.
    bare(d.path())
        .env_remove("REDBIKE_PREFIX")
        .args(["set", "j", "NOW"])
        .ok();
    // $REDBIKE_CONFIG beats it, -c beats that.
    bare(d.path())
        .env_remove("REDBIKE_PREFIX")
        .env("REDBIKE_CONFIG", "other.conf")
        .args(["set", "k", "NOW"])
        .ok();
    bare(d.path())
        .env_remove("REDBIKE_PREFIX")
        .env("REDBIKE_CONFIG", "missing.conf")
        .args(["-c", "other.conf", "set", "m", "NOW"])
        .ok();
    // --prefix beats the file.
    bare(d.path())
        .args(["--prefix", "flag", "set", "l", "NOW"])
        .ok();
    let mut con = s.con();
    let q = |c: &mut redis::Connection, k: &str| -> Vec<String> { c.lrange(k, 0, -1).unwrap() };
    assert_eq!(q(&mut con, "fromfile-work-j"), ["j"]);
    assert_eq!(q(&mut con, "other-work-k"), ["k"]);
    assert_eq!(q(&mut con, "other-work-m"), ["m"]);
    assert_eq!(q(&mut con, "flag-work-l"), ["l"]);
}

#[test]
fn config_errors_name_the_problem() {
    let d = workdir();
    let cases = [
        ("[redbike]\nprefx = \"x\"\n", "prefx"),
        ("[redbike]\ndefault-timeout = \"ten\"\n", "default-timeout"),
        ("[redbike]\ntimezone = \"Mars/Base\"\n", "unknown time zone"),
        (
            "[redbike-redis]\nurl = \"http://nope\"\n",
            "redbike-redis.url",
        ),
        ("[redbike-redis]\nport = 70000\n", "port"),
        ("[redbike\n", "config file"),
        ("[other]\nx = 1\n", "other"),
    ];
    for (text, msg) in cases {
        std::fs::write(path(&d, "bad.conf"), text).unwrap();
        bare(d.path())
            .args(["-c", "bad.conf", "next", "NOW"])
            .run()
            .fails(2, msg);
    }
    bare(d.path())
        .args(["-c", "missing.conf", "next", "NOW"])
        .run()
        .fails(2, "missing.conf");
}

#[test]
fn unreachable_redis_exits_69_with_masked_url() {
    let d = workdir();
    let port = dead_port();
    bare(d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://user:s3cret@127.0.0.1:{port}/0"),
        )
        .args(["tell", "j"])
        .run()
        .fails(69, "user:***@127.0.0.1")
        .stderr_has("cannot reach redis");
    let o = bare(d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://user:s3cret@127.0.0.1:{port}/0"),
        )
        .args(["schedules"])
        .run();
    assert!(!o.stderr.contains("s3cret"));
}

#[test]
fn help_and_version_exit_zero() {
    let d = workdir();
    let out = bare(d.path()).args(["--help"]).ok();
    assert!(out.contains("Usage: redbike"));
    let out = bare(d.path()).args(["--version"]).ok();
    assert!(out.starts_with("redbike "));
}

#[test]
fn example_config_parses() {
    let d = workdir();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/redbike.conf.example");
    bare(d.path())
        .args(["-c", example, "next", "AT:100"])
        .run()
        .success()
        .stdout_is("100 1970-01-01T00:01:40Z\n");
}
