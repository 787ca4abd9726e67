use std::collections::BTreeMap;

use super::{
    entry::{parse, Event, Skip},
    message::{Kind, Notification, MAX_BYTES},
    state,
};
use crate::history::{Entry, Outcome};

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

fn entry(job: &str, outcome: Outcome) -> Entry {
    Entry::new(job, outcome, 100.0, "worker")
}

#[test]
fn entries_are_read_leniently_and_skipped_with_a_reason() {
    let e = serde_json::to_string(&entry("A-x", Outcome::Failed)).unwrap();
    let run = parse(&fields(&[
        ("v", "1"),
        ("type", "run"),
        ("job", "A-x"),
        ("failed", "1"),
        ("entry", &e),
    ]));
    assert!(matches!(run, Ok(Event::Run { failed: true, .. })));
    // As the history lists store it: one-letter keys, the queue from the job id.
    let stored = r#"{"j":"x:Q","o":"failed","e":1.5,"x":3,"t":"out"}"#;
    match parse(&fields(&[
        ("v", "1"),
        ("type", "run"),
        ("job", "x:Q"),
        ("failed", "1"),
        ("entry", stored),
    ])) {
        Ok(Event::Run { entry, .. }) => {
            assert_eq!(
                (entry.queue.as_str(), entry.exit, entry.tail.as_str()),
                ("Q", Some(3), "out")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse(&fields(&[("v", "2"), ("type", "run")])),
        Err(Skip::Version("2".into()))
    );
    assert_eq!(
        parse(&fields(&[("type", "run")])),
        Err(Skip::Version(String::new()))
    );
    assert_eq!(
        parse(&fields(&[("v", "1"), ("type", "x\u{1b}")])),
        Err(Skip::Type("x\u{1b}".into()))
    );
    assert_eq!(
        parse(&fields(&[
            ("v", "1"),
            ("type", "run"),
            ("job", "A-x"),
            ("failed", "2"),
            ("entry", &e)
        ])),
        Err(Skip::Field("run", "failed"))
    );
    assert!(matches!(
        parse(&fields(&[
            ("v", "1"),
            ("type", "run"),
            ("job", "A-x"),
            ("failed", "1"),
            ("entry", "[")
        ])),
        Err(Skip::Unparsable(_))
    ));
    assert_eq!(
        parse(&fields(&[
            ("v", "1"),
            ("type", "stale"),
            ("job", "A-x"),
            ("since", "1")
        ])),
        Err(Skip::Field("stale", "bound"))
    );
    assert_eq!(
        parse(&fields(&[
            ("v", "1"),
            ("type", "action"),
            ("action", "set")
        ])),
        Ok(Event::Action)
    );
}

#[test]
fn only_failures_and_successes_change_a_jobs_run_state() {
    let run = |outcome, failed| Event::Run {
        job: "A-x".into(),
        failed,
        entry: Box::new(entry("A-x", outcome)),
    };
    let (r, n) = state::of_event("t", "5000-1", &run(Outcome::Failed, true), 0).unwrap();
    assert_eq!(
        (r.field.as_str(), r.state, r.quiet),
        ("run:A-x", "fail", "ok")
    );
    assert_eq!(n.kind, Kind::Failure);
    assert_eq!(n.time, 5);
    let (r, n) = state::of_event("t", "5000-1", &run(Outcome::Backoff, false), 0).unwrap();
    assert_eq!((r.state, n.kind), ("ok", Kind::Recovery));
    for neither in [
        Outcome::Stopped,
        Outcome::Unset,
        Outcome::Interrupted,
        Outcome::Skipped,
    ] {
        assert!(state::of_event("t", "1-0", &run(neither, false), 0).is_none());
    }
    assert!(state::of_event("t", "1-0", &Event::Action, 0).is_none());
}

#[test]
fn a_notification_is_bounded_whatever_the_entry_holds() {
    let mut e = entry("A-x", Outcome::Failed);
    e.tail = "é".repeat(100_000);
    e.detail = "d".repeat(100_000);
    let run = Notification::bounded_run(e);
    assert!(run.tail.len() <= 2048 && run.tail.starts_with('é'));
    assert_eq!(run.detail.len(), 1024);
    let n = Notification {
        v: 1,
        kind: Kind::Failure,
        prefix: "t".into(),
        job: Some("j".repeat(40_000)),
        queue: None,
        time: 0,
        id: "1-0".into(),
        summary: "s".repeat(40_000),
        run: Some(run),
        since: None,
        bound: None,
        hazard: None,
        overdue: None,
        suppressed: 0,
        redelivered: false,
    };
    let json = n.to_json();
    assert!(json.len() <= MAX_BYTES, "{}", json.len());
    let back: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(back["kind"], "failure");
    let env = n.env();
    assert!(env.iter().all(|(_, v)| v.len() <= 1024));
    assert!(env.contains(&("REDBIKE_NOTIFY_KIND".into(), "failure".into())));
}
