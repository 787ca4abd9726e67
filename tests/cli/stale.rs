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
    let reply: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("t-events")
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
    run(&s, d.path(), &["set", "j:A", "FREQ=SECONDLY"]);
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
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
    assert!(check.stdout.contains("stale,j:A,stale since "), "{}", check.stdout);
    assert!(check.stderr.contains("1 job(s) stale"), "{}", check.stderr);
    let json: Value = serde_json::from_str(&run(&s, d.path(), &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["stale"], 1, "{json}");
    let text = run(&s, d.path(), &["stats"]);
    assert!(text.contains("stale"), "{text}");
    let prom = run(&s, d.path(), &["stats", "--format", "prometheus"]);
    assert!(prom.contains("redbike_jobs_stale{prefix=\"t\"} 1"), "{prom}");
    let tell: Value = serde_json::from_str(&run(&s, d.path(), &["tell", "j:A"])).unwrap();
    assert_eq!(tell["stale"]["since"], since, "{tell}");
    assert_eq!(tell["stale"]["bound"], 3, "{tell}");
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
