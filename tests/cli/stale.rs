//! Stale jobs: a job that has not succeeded for longer than it should (its queue's
//! `[redbike.stale]` bound, or two of its schedule's intervals plus a grace) is marked
//! stale by a dispatcher, with one `stale` event; its next success takes it out, with
//! a `fresh` event. `check`, `stats` and `tell` show it.

use std::collections::HashMap;

use redis::Commands;
use serde_json::Value;

use crate::harness::*;

fn setup(config: &str) -> (RedisServer, tempfile::TempDir) {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), config).unwrap();
    (s, d)
}

fn start(s: &RedisServer, d: &std::path::Path, args: &[&str]) -> Bg {
    Bg(Some(bike(s, d).args(["-c", "rb.toml"]).args(args).spawn()))
}

fn run(s: &RedisServer, d: &std::path::Path, args: &[&str]) -> String {
    bike(s, d).args(["-c", "rb.toml"]).args(args).ok()
}

/// The entries of the event stream of type `kind`, as field maps.
fn events(s: &RedisServer, kind: &str) -> Vec<HashMap<String, String>> {
    events_of(s, "t-events", kind)
}

/// The entries of type `kind` of the event stream `key`.
fn events_of(s: &RedisServer, key: &str, kind: &str) -> Vec<HashMap<String, String>> {
    let reply: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(&mut s.con())
        .unwrap();
    reply
        .into_iter()
        .map(|(_, fields)| {
            fields
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect::<HashMap<_, _>>()
        })
        .filter(|m| m.get("type").map(String::as_str) == Some(kind))
        .collect()
}

fn stale_field(s: &RedisServer, job: &str) -> Option<String> {
    s.con().hget("t-stale", job).unwrap()
}

fn deadline(s: &RedisServer, job: &str) -> Option<i64> {
    let score: Option<f64> = s.con().zscore("t-fresh-until", job).unwrap();
    score.map(|t| t as i64)
}

/// A job succeeding every second in a queue that must succeed within 3 s goes stale
/// once its worker stops: one `stale` event, listed by `check`, counted by `stats`,
/// shown by `tell`; a worker started again brings it back with one `fresh` event.
#[test]
fn a_job_whose_worker_stops_goes_stale_and_comes_back() {
    let (s, d) = setup("[redbike]\n[redbike.stale]\nA = 3\n");
    // Started first: `set` starts the job's 3 s, which a slow start of both on a
    // loaded machine could use up before the first success (one `stale` more).
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    run(&s, d.path(), &["set", "j:A", "FREQ=SECONDLY"]);
    assert!(
        wait_until(20.0, || deadline(&s, "j:A").is_some()),
        "a success writes the deadline"
    );
    let d1 = deadline(&s, "j:A").unwrap();
    assert!((d1 - now()).abs() <= 5, "within 3 s of the success: {d1}");
    drop(work);
    let stopped = now();
    assert!(
        wait_until(20.0, || stale_field(&s, "j:A").is_some()),
        "stale within its bound plus the pass delay"
    );
    let went = now();
    assert!(went - stopped <= 3 + 11, "{} s", went - stopped);
    assert_eq!(deadline(&s, "j:A"), None, "moved out of fresh-until");
    let stale = events(&s, "stale");
    assert_eq!(stale.len(), 1, "{stale:?}");
    let e = &stale[0];
    assert_eq!(e["job"], "j:A");
    assert_eq!(e["queue"], "A");
    assert_eq!(e["bound"], "3");
    assert_eq!(e["v"], "1");
    let since: i64 = e["since"].parse().unwrap();
    assert!((since - stopped).abs() <= 5, "{since} vs {stopped}");
    // check lists it, stats counts it, tell shows it.
    let check = bike(&s, d.path())
        .args(["-c", "rb.toml", "check"])
        .run()
        .code(0);
    assert!(
        check.stdout.contains("stale,j:A,stale since "),
        "{}",
        check.stdout
    );
    assert!(check.stderr.contains("1 job(s) stale"), "{}", check.stderr);
    let json: Value =
        serde_json::from_str(&run(&s, d.path(), &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["stale"], 1, "{json}");
    let text = run(&s, d.path(), &["stats"]);
    assert!(text.contains("stale"), "{text}");
    let prom = run(&s, d.path(), &["stats", "--format", "prometheus"]);
    assert!(
        prom.contains("redbike_jobs_stale{prefix=\"t\"} 1"),
        "{prom}"
    );
    let tell: Value = serde_json::from_str(&run(&s, d.path(), &["tell", "j:A"])).unwrap();
    assert_eq!(tell["stale"]["since"], since, "{tell}");
    assert_eq!(tell["stale"]["bound"], 3, "{tell}");
    let top = run(&s, d.path(), &["top", "--once", "--queues", "A"]);
    assert!(top.contains("1 STALE"), "{top}");
    let field = stale_field(&s, "j:A").unwrap();
    let marked_at = field.rsplit(':').next().unwrap().to_string();
    assert_eq!(field, format!("{since}:3:{marked_at}"));
    // Back: a success takes it out, with one fresh event.
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(20.0, || stale_field(&s, "j:A").is_none()));
    assert!(wait_until(5.0, || deadline(&s, "j:A").is_some()));
    let fresh = events(&s, "fresh");
    assert_eq!(fresh.len(), 1, "{fresh:?}");
    assert_eq!(fresh[0]["job"], "j:A");
    assert_eq!(fresh[0]["since"], marked_at, "when it went stale");
    assert_eq!(fresh[0]["queue"], "A");
    let check = run(&s, d.path(), &["check"]);
    assert!(!check.contains("stale"), "{check}");
    assert_eq!(events(&s, "stale").len(), 1, "no second stale event");
    drop(work);
    drop(disp);
}

/// Without a bound of its queue, a job every 2 s goes stale once two of its runs in a
/// row are missed, plus a grace of 10 s: not before.
#[test]
fn the_default_bound_comes_from_the_schedule() {
    let (s, d) = setup("[redbike]\n");
    run(&s, d.path(), &["set", "j:A", "FREQ=SECONDLY;INTERVAL=2"]);
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    // A success, and the deadline it gives: two runs and the grace later.
    let ran = |s: &RedisServer| {
        let n: u64 = redis::cmd("XLEN")
            .arg("t-events")
            .query(&mut s.con())
            .unwrap();
        n >= 3
    };
    assert!(wait_until(20.0, || ran(&s)), "two runs recorded");
    drop(work);
    let stopped = now();
    assert!(
        wait_until(40.0, || stale_field(&s, "j:A").is_some()),
        "stale within two intervals, the grace and the pass delay"
    );
    let went = now();
    let e = &events(&s, "stale")[0];
    let since: i64 = e["since"].parse().unwrap();
    let bound: i64 = e["bound"].parse().unwrap();
    assert!(
        (since - stopped).abs() <= 3,
        "the last success: {since} vs {stopped}"
    );
    // Two intervals of 2 s and 10 s of grace at least, a run's second and a little
    // more at most.
    assert!((14..=17).contains(&bound), "{bound}");
    assert!(
        went - since >= 14,
        "not before two intervals and the grace: {}",
        went - since
    );
    assert_eq!(events(&s, "stale").len(), 1);
    drop(disp);
}

/// A job set but never run goes stale too (its `set` gave it a deadline), and two
/// dispatchers mark it once, with one event. Its unset leaves no stale state.
#[test]
fn two_dispatchers_mark_a_job_once_and_unset_forgets_it() {
    let (s, d) = setup("[redbike]\nqueues = \"B\"\n[redbike.stale]\nA = 2\n");
    let before = now();
    run(&s, d.path(), &["set", "j:A", "FREQ=SECONDLY"]);
    let seeded = deadline(&s, "j:A").expect("set writes a deadline");
    assert!((seeded - before - 2).abs() <= 1, "{seeded}");
    // NOW runs once: no deadline.
    run(&s, d.path(), &["set", "once:A", "NOW"]);
    assert_eq!(deadline(&s, "once:A"), None);
    let one = start(&s, d.path(), &["dispatch"]);
    let two = start(&s, d.path(), &["dispatch"]);
    assert!(wait_until(20.0, || stale_field(&s, "j:A").is_some()));
    // Both dispatchers have passed since (a pass at least every 10 s).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let stale = events(&s, "stale");
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0]["bound"], "2");
    let since: i64 = stale[0]["since"].parse().unwrap();
    assert_eq!(since, seeded - 2, "not succeeded since it was set");
    assert!(!run(&s, d.path(), &["check"]).contains("once:A"));
    run(&s, d.path(), &["unset", "j:A"]);
    assert_eq!(stale_field(&s, "j:A"), None);
    assert_eq!(deadline(&s, "j:A"), None);
    let json: Value =
        serde_json::from_str(&run(&s, d.path(), &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["stale"], 0, "{json}");
    drop((one, two));
}

/// A deadline passed with no dispatcher running: `check` and `stats` count the job
/// stale all the same; `tell` says so, and the next success brings it back, with no
/// event (it was never marked).
#[test]
fn a_passed_deadline_counts_without_a_dispatcher() {
    let (s, d) = setup("[redbike]\n[redbike.stale]\nA = 1\n");
    run(&s, d.path(), &["set", "j:A", "CRON:0 0 1 1 *"]);
    assert!(wait_until(5.0, || deadline(&s, "j:A").is_some_and(|t| t < now())));
    let check = run(&s, d.path(), &["check"]);
    assert!(
        check.contains("stale,j:A,no success by its deadline"),
        "{check}"
    );
    let json: Value =
        serde_json::from_str(&run(&s, d.path(), &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["stale"], 1, "{json}");
    let tell: Value = serde_json::from_str(&run(&s, d.path(), &["tell", "j:A"])).unwrap();
    assert_eq!(tell["stale"]["marked"], false, "{tell}");
    assert!(events(&s, "stale").is_empty());
    // A dispatcher marks it; top marks it where it is listed (on the timeline).
    let disp = start(&s, d.path(), &["dispatch"]);
    assert!(wait_until(20.0, || stale_field(&s, "j:A").is_some()));
    let top = run(&s, d.path(), &["top", "--once", "--queues", "A"]);
    assert!(
        top.contains("1 STALE") && top.contains("j:A (stale)"),
        "{top}"
    );
    assert_eq!(
        run(&s, d.path(), &["check"]).matches("stale,j:A,").count(),
        1
    );
    drop(disp);
    // Set again while stale, and no dispatcher: its new deadline passes too; it is
    // still one stale job.
    run(&s, d.path(), &["set", "j:A", "CRON:0 0 1 1 *"]);
    assert!(wait_until(5.0, || deadline(&s, "j:A").is_some_and(|t| t < now())));
    assert!(stale_field(&s, "j:A").is_some());
    assert_eq!(
        run(&s, d.path(), &["check"]).matches("stale,j:A,").count(),
        1
    );
    let json: Value =
        serde_json::from_str(&run(&s, d.path(), &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["stale"], 1, "{json}");
}

/// `load` gives recurring jobs their deadline, none to one-offs, none to CONTINUE
/// jobs of a queue without a bound.
#[test]
fn load_gives_recurring_jobs_a_deadline() {
    let (s, d) = setup("[redbike]\n[redbike.stale]\nB = 100\n");
    std::fs::write(
        path(&d, "jobs.csv"),
        "daily:A,FREQ=DAILY\nonce:A,NOW\nloop:A,CONTINUE\nloop:B,CONTINUE\n",
    )
    .unwrap();
    let t = now();
    run(&s, d.path(), &["load", "jobs.csv"]);
    let daily = deadline(&s, "daily:A").expect("a rule has a deadline");
    // The second day after now, plus a tenth of a day.
    assert!(
        daily > t + 86_400 + 8_640 && daily <= t + 2 * 86_400 + 8_640 + 2,
        "{daily}"
    );
    assert_eq!(deadline(&s, "once:A"), None);
    assert_eq!(deadline(&s, "loop:A"), None);
    let b = deadline(&s, "loop:B").expect("a queue bound covers CONTINUE");
    assert!((b - t - 100).abs() <= 2, "{b}");
    // A new schedule without one takes it away.
    run(&s, d.path(), &["set", "daily:A", "STOP"]);
    assert_eq!(deadline(&s, "daily:A"), None);
}

/// `P-fresh-until` and `P-stale` of other types cost no outcome: the worker goes on
/// recording runs, and `check` names the keys.
#[test]
fn staleness_keys_of_another_type_cost_no_outcome() {
    let (s, d) = setup("[redbike]\n[redbike.stale]\nA = 30\n");
    let _: () = s.con().set("t-fresh-until", "x").unwrap();
    let _: () = s.con().rpush("t-stale", "x").unwrap();
    run(&s, d.path(), &["set", "j:A", "CONTINUE"]);
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    let runs = |s: &RedisServer| {
        let n: Option<u64> = s.con().get("t-fencing").unwrap();
        n.unwrap_or(0)
    };
    assert!(wait_until(20.0, || runs(&s) >= 5), "runs go on");
    let check = bike(&s, d.path())
        .args(["-c", "rb.toml", "check"])
        .run()
        .code(1);
    assert!(
        check
            .stdout
            .contains("t-fresh-until holds a string where redbike keeps a zset")
            && check
                .stdout
                .contains("t-stale holds a list where redbike keeps a hash"),
        "{}",
        check.stdout
    );
    let _: String = s.con().get("t-fresh-until").unwrap();
    drop((work, disp));
}

#[test]
fn bad_stale_config_exits_2() {
    for (config, says) in [
        ("[redbike.stale]\nA = 0\n", "redbike.stale"),
        ("[redbike.stale]\nA = 40000000\n", "redbike.stale"),
        ("[redbike.stale]\nA = \"x\"\n", "rb.toml"),
        ("[redbike.stale]\n\"A-members\" = 10\n", "redbike.stale"),
    ] {
        let (s, d) = setup(config);
        let out = bike(&s, d.path())
            .args(["-c", "rb.toml", "set", "j:A", "NOW"])
            .run()
            .code(2);
        assert!(out.stderr.contains(says), "{config}: {}", out.stderr);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert_eq!(s.dbsize(), 0, "nothing written");
    }
}

/// A split prefix: each shard keeps its own deadlines, stale jobs and events; `check`
/// and `stats` merge the shards.
#[test]
fn each_shard_marks_its_own_jobs_and_listings_merge() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        "[redbike]\nprefix = \"{s}\"\nshards = 2\n[redbike.stale]\nA = 1\n",
    )
    .unwrap();
    let rb = || {
        bare(d.path())
            .env_remove("REDBIKE_PREFIX")
            .env("REDBIKE_REDIS_URL", s.url())
    };
    // Four of these ids are in shard 0 and four in shard 1.
    for k in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        rb().args(["-c", "rb.toml", "set", &format!("{k}:A"), "CRON:0 0 1 1 *"])
            .ok();
    }
    let disp = Bg(Some(rb().args(["-c", "rb.toml", "dispatch"]).spawn()));
    let marked = |s: &RedisServer| {
        (0..2)
            .map(|k| {
                let n: u64 = s.con().hlen(format!("{{s/{k}}}-stale")).unwrap();
                n
            })
            .collect::<Vec<_>>()
    };
    assert!(
        wait_until(20.0, || marked(&s) == [4, 4]),
        "{:?}",
        marked(&s)
    );
    let streams: usize = (0..2)
        .map(|k| events_of(&s, &format!("{{s/{k}}}-events"), "stale").len())
        .sum();
    assert_eq!(streams, 8, "one stale event a job, in its shard's stream");
    let check = rb().args(["-c", "rb.toml", "check"]).ok();
    assert_eq!(check.matches("stale,").count(), 8, "{check}");
    let json: Value = serde_json::from_str(
        &rb()
            .args(["-c", "rb.toml", "stats", "--format", "json"])
            .ok(),
    )
    .unwrap();
    assert_eq!(json["stale"], 8, "{json}");
    drop(disp);
}

/// A paused job does not go stale: a dispatcher drops its deadline; `resume` gives it a
/// new one, so it goes stale if it does not succeed after.
#[test]
fn a_paused_job_is_not_stale_until_resumed() {
    let (s, d) = setup("[redbike]\n[redbike.stale]\nA = 1\n");
    run(&s, d.path(), &["set", "j:A", "CRON:0 0 1 1 *"]);
    run(&s, d.path(), &["pause", "j:A"]);
    let disp = start(&s, d.path(), &["dispatch"]);
    assert!(
        wait_until(20.0, || deadline(&s, "j:A").is_none()),
        "the passed deadline of a paused job is dropped"
    );
    assert_eq!(stale_field(&s, "j:A"), None);
    assert!(events(&s, "stale").is_empty());
    run(&s, d.path(), &["resume", "j:A"]);
    assert!(
        deadline(&s, "j:A").is_some(),
        "resume starts the clock again"
    );
    assert!(wait_until(20.0, || stale_field(&s, "j:A").is_some()));
    assert_eq!(events(&s, "stale").len(), 1);
    drop(disp);
}
