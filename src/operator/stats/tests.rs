use super::{figures::*, *};
use crate::redis::{hazards::Health, keys::glob_escape};

fn sample() -> Stats {
    Stats {
        prefix: "p\"x".into(),
        time: 100,
        scanned: true,
        schedules: 3,
        halted: false,
        timeline: Timeline {
            jobs: 2,
            due: 1,
            oldest_due_lateness_seconds: 7,
        },
        running: 1,
        queues: vec![
            Queue {
                queue: "A".into(),
                length: 2,
                oldest_age_seconds: Some(5),
                limit: Some(3),
                leased: Some(1),
            },
            Queue {
                queue: "B\\n".into(),
                length: 1,
                oldest_age_seconds: None,
                limit: None,
                leased: None,
            },
        ],
        statuses: Some([("ENQ".to_string(), 3u64)].into_iter().collect()),
        unparsable_statuses: Some(0),
        lease_keys: Some(1),
        redis: Some(Health::from_info(
            "maxmemory_policy:allkeys-lru\r\nused_memory:950\r\nmaxmemory:1000\r\nevicted_keys:4\r\naof_enabled:0\r\n",
            Some(""),
            0,
        )),
        alive: Some(Alive {
            dispatchers: 1,
            workers: 2,
            workers_per_queue: [("A".to_string(), 2u64), ("C".to_string(), 0)]
                .into_iter()
                .collect(),
            failing: 0,
        }),
        overdue: Overdue {
            jobs: 4,
            after_seconds: 60,
        },
        recent_runs: crate::history::Recent {
            runs_per_minute: 12,
            lateness_samples: 3,
            lateness_p50_seconds: Some(0.25),
            lateness_p99_seconds: None,
            recent_failures: 1,
        },
        paused_jobs: 2,
        retrying_jobs: 3,
        backlog_jobs: 4,
        stale: 3,
        paused_queues: vec![PausedQueue {
            queue: "B".into(),
            since: 50,
            note: "disk full".into(),
        }],
        history_unfiled: 7,
        python_seen: Some(PythonSeen {
            evidence: "90 worker w-1: job j:A was queued without a wake-up".into(),
            expires_in_seconds: 3500,
        }),
        schedules_lost: None,
    }
}

#[test]
fn unfiled_history_and_python_peers_in_every_format() {
    let mut s = sample();
    let prom = prometheus::render(&s);
    for line in [
        "redbike_history_unfiled{prefix=\"p\\\"x\"} 7\n",
        "redbike_python_peer_seen{prefix=\"p\\\"x\"} 1\n",
    ] {
        assert!(prom.contains(line), "{line} in {prom}");
    }
    let text = text::render(&s);
    assert!(
        text.contains("; 7 history entr(ies) not yet filed\n"),
        "{text}"
    );
    assert!(
        text.contains("python      a Python redbike process was seen (90 worker w-1: job j:A was queued without a wake-up); idle processes look every second for 3500s more\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(json["history_unfiled"], 7);
    assert_eq!(json["python_seen"]["expires_in_seconds"], 3500);
    s.python_seen = None;
    assert!(prometheus::render(&s).contains("redbike_python_peer_seen{prefix=\"p\\\"x\"} 0\n"));
    assert!(text::render(&s).contains("python      none seen in the last hour\n"));
    let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(json["python_seen"], serde_json::Value::Null);
}

#[test]
fn alive_and_overdue_in_every_format() {
    let s = sample();
    let prom = prometheus::render(&s);
    for line in [
        "redbike_dispatchers_alive{prefix=\"p\\\"x\"} 1\n",
        "redbike_workers_alive{prefix=\"p\\\"x\"} 2\n",
        "redbike_queue_workers_alive{prefix=\"p\\\"x\",queue=\"C\"} 0\n",
        "redbike_overdue_jobs{prefix=\"p\\\"x\"} 4\n",
        "redbike_overdue_after_seconds{prefix=\"p\\\"x\"} 60\n",
    ] {
        assert!(prom.contains(line), "{line} in {prom}");
    }
    let text = text::render(&s);
    assert!(
        text.contains("alive       1 dispatcher(s), 2 worker(s)"),
        "{text}"
    );
    assert!(text.contains("workers     A: 2, C: 0\n"), "{text}");
    assert!(
        text.contains("overdue     4 job(s) due for over 60s"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(json["alive"]["workers_per_queue"]["A"], 2);
    assert_eq!(json["overdue"]["jobs"], 4);
    let mut unknown = s.clone();
    unknown.alive = None;
    assert!(!prometheus::render(&unknown).contains("alive"));
}

#[test]
fn paused_queues_in_every_format() {
    let s = sample();
    let text = text::render(&s);
    assert!(text.contains("paused      2 job(s)\n"), "{text}");
    assert!(
        text.contains("paused      queue B since 1970-01-01T00:00:50Z (redbike workers do not claim from it): \"disk full\"\n"),
        "{text}"
    );
    let prom = prometheus::render(&s);
    assert!(
        prom.contains("redbike_paused_jobs{prefix=\"p\\\"x\"} 2\n"),
        "{prom}"
    );
    assert!(
        prom.contains("redbike_queue_paused_since_seconds{prefix=\"p\\\"x\",queue=\"B\"} 50\n"),
        "{prom}"
    );
    let json: serde_json::Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(json["paused_queues"][0]["queue"], "B");
    assert_eq!(json["paused_jobs"], 2);
    assert_eq!(json["retrying_jobs"], 3);
    assert_eq!(json["queues"][0]["limit"], 3);
    assert!(
        prom.contains("redbike_queue_limit{prefix=\"p\\\"x\",queue=\"A\"} 3\n"),
        "{prom}"
    );
    assert!(
        prom.contains("redbike_queue_leased{prefix=\"p\\\"x\",queue=\"A\"} 1\n"),
        "{prom}"
    );
    assert!(
        !prom.contains("redbike_queue_limit{prefix=\"p\\\"x\",queue=\"B"),
        "{prom}"
    );
    assert!(render(&s, Format::Text)
        .contains("queue       A: 2 waiting, the oldest for 5s, limit 3 (1 leased)\n"));
    assert_eq!(json["backlog_jobs"], 4);
    assert_eq!(json["stale"], 3);
    assert!(
        prom.contains("redbike_jobs_stale{prefix=\"p\\\"x\"} 3\n"),
        "{prom}"
    );
    assert!(
        text.contains("stale       3 job(s) not succeeded within their bound"),
        "{text}"
    );
    assert!(
        prom.contains("redbike_backlog_jobs{prefix=\"p\\\"x\"} 4\n"),
        "{prom}"
    );
    assert!(
        prom.contains("redbike_retrying_jobs{prefix=\"p\\\"x\"} 3\n"),
        "{prom}"
    );
}

#[test]
fn labels_are_escaped() {
    let out = prometheus::render(&sample());
    assert!(
        out.contains("redbike_schedules{prefix=\"p\\\"x\"} 3\n"),
        "{out}"
    );
    assert!(out.contains("queue=\"B\\\\n\"} 1\n"), "{out}");
    // Unknown age: no sample for B.
    assert_eq!(out.matches("redbike_queue_oldest_age_seconds{").count(), 1);
}

#[test]
fn text_leaves_out_lateness_when_nothing_is_due() {
    let mut s = sample();
    assert!(text::render(&s).contains("2 job(s), 1 due, the oldest due 7s late\n"));
    s.timeline.due = 0;
    s.timeline.oldest_due_lateness_seconds = 0;
    assert!(text::render(&s).contains("2 job(s), 0 due\n"));
}

#[test]
fn history_figures_are_in_seconds() {
    let out = prometheus::render(&sample());
    assert!(
        out.contains("redbike_run_lateness_p50_seconds{prefix=\"p\\\"x\"} 0.25\n"),
        "{out}"
    );
    assert!(out.contains("redbike_runs_per_minute{prefix=\"p\\\"x\"} 12\n"));
    // No sample: no line.
    assert!(!out.contains("redbike_run_lateness_p99_seconds{"));
    assert!(text::render(&sample()).contains("lateness p50 0.250s, p99 -"));
}

#[test]
fn glob_characters_are_escaped() {
    assert_eq!(glob_escape("a*b?[c]\\-work-"), "a\\*b\\?\\[c\\]\\\\-work-");
}

#[test]
fn queue_age_needs_an_enq_status() {
    assert_eq!(read::enqueued_age(Some("ENQ:90"), 100), Some(10));
    assert_eq!(read::enqueued_age(Some("ENQ:120"), 100), Some(0));
    assert_eq!(read::enqueued_age(Some("WRK:90"), 100), None);
    assert_eq!(read::enqueued_age(None, 100), None);
}

#[test]
fn queue_names_are_deduplicated() {
    assert_eq!(parse_queue_names("B:A:A").unwrap(), ["A", "B"]);
    assert!(parse_queue_names("A::B").is_err());
}
