//! `redbike check [--repair]`.

use redis::Commands;

use crate::{dispatch::finish, harness::*, work::Setup};

fn kinds(out: &str) -> Vec<String> {
    let mut k: Vec<String> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(out.as_bytes())
        .records()
        .map(|r| {
            let r = r.unwrap();
            format!("{} {}", &r[0], &r[1])
        })
        .collect();
    k.sort();
    k
}

#[test]
fn check_reports_every_kind_and_repair_fixes_each() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "ok:A", "FREQ=DAILY"]).ok();
    bike(&s, d.path()).args(["set", "both:A", "CONTINUE"]).ok();
    let mut con = s.con();
    let raw: &[&[&str]] = &[
        &[
            "HSET",
            "t-schedules",
            "lost:A",
            "CONTINUE",
            "bad:A",
            "FREQ=NOPE",
            "held:A",
            "CONTINUE",
        ],
        &[
            "HSET",
            "t-schedules",
            "dup:A",
            "CONTINUE",
            "nomember:A",
            "CONTINUE",
            "wrong:A",
            "CONTINUE",
        ],
        &["HSET", "t-statuses", "held:A", "DIE:5", "ghost", "TML:5"],
        &["ZADD", "t-timeline", "5", "ghost2", "5", "both:A"],
        &["LPUSH", "t-work-A", "nomember:A", "dup:A", "dup:A"],
        &["SADD", "t-work-A-members", "dup:A", "noentry:A"],
        &["LPUSH", "t-work-B", "wrong:A"],
        &["SADD", "t-work-B-members", "wrong:A"],
    ];
    for args in raw {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        let _: redis::Value = cmd.query(&mut con).unwrap();
    }
    let o = bike(&s, d.path()).args(["check"]).run().code(1);
    assert_eq!(
        kinds(&o.stdout),
        [
            "duplicate-entry dup:A",
            "entry-without-member nomember:A",
            "held held:A",
            "member-without-entry noentry:A",
            "out-of-circulation lost:A",
            "out-of-circulation nomember:A",
            "out-of-circulation wrong:A",
            "queued-and-timeline both:A",
            "status-of-unknown-job ghost",
            "timeline-without-schedule ghost2",
            "unparsable-schedule bad:A",
            "wrong-queue wrong:A",
        ]
    );
    assert!(
        o.stderr
            .contains("problem(s) in 8 job(s) across 2 queue(s)"),
        "{}",
        o.stderr
    );
    bike(&s, d.path())
        .args(["check", "--repair"])
        .run()
        .success();
    let o = bike(&s, d.path()).args(["check"]).run().success();
    assert_eq!(kinds(&o.stdout), ["bad bad:A", "held held:A"]);
    // Idempotent: nothing left to change.
    let before = s.dump();
    bike(&s, d.path())
        .args(["check", "--repair"])
        .run()
        .success();
    assert_eq!(s.dump(), before);
    // What the repairs did.
    let status: String = con.hget("t-statuses", "lost:A").unwrap();
    assert!(status.starts_with("REC:"), "{status}");
    let q: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(q.iter().filter(|j| *j == "dup:A").count(), 1);
    assert!(!con.exists::<_, bool>("t-work-B").unwrap());
    let due: Option<f64> = con.zscore("t-timeline", "both:A").unwrap();
    assert_eq!(due, None, "queued wins over the timeline");
    let bad: String = con.hget("t-statuses", "bad:A").unwrap();
    assert!(bad.starts_with("BAD:"));
}

#[test]
fn a_busy_healthy_prefix_checks_clean_and_repair_changes_nothing_live() {
    let t = Setup::new();
    let rows: String = (0..20)
        .map(|i| format!("c{i}:A,CONTINUE\ns{i}:A,FREQ=SECONDLY\nd{i}:B,FREQ=DAILY\n"))
        .collect();
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A", "-j", "3"]);
    assert!(t.wait_runs(40));
    for _ in 0..5 {
        let o = bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
        assert_eq!(o.code, 0, "{} {}", o.stdout, o.stderr);
        assert_eq!(o.stdout, "", "no findings while healthy");
    }
    let before = t.runs().len();
    assert!(
        wait_until(10.0, || t.runs().len() > before + 40),
        "work goes on"
    );
    t.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}
