//! Key collisions in the inherited layout (issue 14, class 7): queue names whose keys
//! are other keys are refused (tests/cli/bad_input.rs); keys the Python original or an
//! operator left behind are reported by `check`, which never stops on them.

use redis::Commands;

use crate::{harness::*, work::Setup};

#[test]
fn check_reports_odd_and_colliding_keys_and_never_dies() {
    let s = RedisServer::start();
    let d = workdir();
    for (id, schedule) in [("a:A", "NOW"), ("b:B", "FREQ=DAILY"), ("c:C", "CONTINUE")] {
        bike(&s, d.path()).args(["set", id, schedule]).ok();
    }
    let mut con = s.con();
    // What the original makes of `set x:C-members NOW` when queue C has no members
    // set yet, and of `set z:A-A NOW`; then keys of other types under our names.
    let _: () = con.del("t-work-C-members").unwrap();
    let _: () = con.lpush("t-work-C-members", "x:C-members").unwrap();
    let _: () = con.hset("t-schedules", "x:C-members", "STOP").unwrap();
    let _: () = con.lpush("t-work-A-A", "z:A-A").unwrap();
    let _: () = con.hset("t-schedules", "z:A-A", "STOP").unwrap();
    let _: () = con.hset("t-work-D", "x", "y").unwrap();
    let _: () = con.zadd("t-work-A-j:A", "x", 1).unwrap();
    let _: () = con.sadd("t-control", "HALT").unwrap();
    for args in [&["check"][..], &["check", "--repair"]] {
        let o = bike(&s, d.path()).args(args).run().code(1);
        for row in [
            "colliding-key,,\"queue \"\"A-A\"\": its list PREFIX-work-A-A is the lease key of job \"\"A\"\"; move its jobs to another queue name: `redbike unset` each",
            "colliding-key,,\"queue \"\"C-members\"\": its list PREFIX-work-C-members is the members set of queue \"\"C\"\"; move its jobs",
            "odd-key,,\"t-work-D holds a hash, which no redbike key of that name is\"",
            "odd-key,,\"t-work-A-j:A holds a zset, which no redbike key of that name is\"",
            "odd-key,,t-control holds a set where redbike keeps a string",
        ] {
            assert!(o.stdout.contains(row), "{args:?}: {row}\n{}", o.stdout);
        }
        assert!(!o.stderr.contains("redis error"), "{}", o.stderr);
        assert!(o.stderr.contains("problem(s)"), "{}", o.stderr);
    }
    // The odd keys are reported, never changed.
    let d_hash: Vec<String> = con.hgetall("t-work-D").unwrap();
    assert_eq!(d_hash, ["x", "y"]);
    let listed: Vec<String> = con.lrange("t-work-C-members", 0, -1).unwrap();
    assert_eq!(listed, ["x:C-members"]);
    // A schedules hash of another type: reported, and the job passes are left out.
    let _: () = con.del("t-schedules").unwrap();
    let _: () = con.set("t-schedules", "x").unwrap();
    let o = bike(&s, d.path()).args(["check"]).run().code(1);
    assert!(
        o.stdout
            .contains("odd-key,,t-schedules holds a string where redbike keeps a hash"),
        "{}",
        o.stdout
    );
    assert!(!o.stderr.contains("redis error"), "{}", o.stderr);
}

#[test]
fn a_worker_of_queue_control_is_woken_like_any_other() {
    // Queue `control` shares its wake channel with control signals (PREFIX-wake-control);
    // its workers used to ignore the wake-ups there and find jobs only by polling.
    let t = Setup::new();
    let mut w = Bg(Some(t.worker(&["control"])));
    // Listening before the first job: a wake-up sent earlier would be lost.
    assert!(wait_subscribed(&t.s, "t-wake-control"), "not subscribed");
    let mut quick = 0;
    for i in 0..6 {
        let id = format!("c{i}:control");
        t.set(&id, "NOW");
        let queued = std::time::Instant::now();
        assert!(wait_until(5.0, || t.runs().contains(&id)), "{id} ran");
        // Woken, a job starts within milliseconds; polled, anywhere within 950 ms
        // (POLL_EVERY): 5 of 6 under 300 ms by chance is about a 1.5 % event.
        if queued.elapsed() < std::time::Duration::from_millis(300) {
            quick += 1;
        }
        // Let the poll's phase drift between rounds.
        std::thread::sleep(std::time::Duration::from_millis(130 * i));
    }
    assert!(
        quick >= 5,
        "only {quick} of 6 started within 300 ms of being queued"
    );
    t.stop(w.0.take().expect("running"));
}
