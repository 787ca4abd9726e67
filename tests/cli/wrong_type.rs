//! Scripts never write half-way: every script in src/redis/scripts/ checks the type of each key it
//! touches (and the numbers it is given) before its first write, since Redis does not
//! roll a script back when a command in it fails. Each script is run here with each of
//! its keys replaced in turn by a key of another type: it must answer one clear error
//! naming that key and leave Redis exactly as it was. The commands that run the scripts
//! are tested the same way against the real binary.

use redis::{Commands, Script};

use crate::harness::*;

const COMMON: &str = include_str!("../../src/redis/scripts/common.lua");

fn script(body: &str) -> Script {
    Script::new(&format!("{COMMON}{body}"))
}

/// A job `j:A` in queue A with a CONTINUE schedule, a status, a failure and a lease of
/// another job: every key a script may touch, seeded, so a write would show.
fn seed(s: &RedisServer) {
    let mut con = s.con();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let _: () = con.hset("t-schedules", "j:A", "CONTINUE").unwrap();
    let _: () = con.hset("t-schedules", "k:A", "FREQ=DAILY").unwrap();
    let _: () = con.hset("t-statuses", "j:A", "ENQ:1700000000").unwrap();
    let _: () = con.hset("t-failures", "j:A", "DIE:1700000000").unwrap();
    let _: () = con.zadd("t-timeline", "k:A", 1).unwrap();
    let _: () = con.lpush("t-work-A", "j:A").unwrap();
    let _: () = con.sadd("t-work-A-members", "j:A").unwrap();
    let _: () = con.zadd("t-leases", "x:A", 1).unwrap();
    let _: () = con.set("t-control", "RUN").unwrap();
    let _: () = con.lpush("t-unfiled-runs", UNFILED_ENTRY).unwrap();
}

/// The entry `seed` leaves unfiled.
const UNFILED_ENTRY: &str = r#"{"j":"j:A","o":"ok","e":1700000000.0}"#;

/// Replaces `key` with a key of another type than `kind`.
fn plant(s: &RedisServer, key: &str, kind: &str) {
    let mut con = s.con();
    let _: () = con.del(key).unwrap();
    if kind == "hash" {
        let _: () = con.rpush(key, "planted").unwrap();
    } else {
        let _: () = con.hset(key, "planted", "1").unwrap();
    }
}

/// Asserts that `err` holds `part` exactly once (one log line, not one per retry).
fn said_once(err: &str, part: &str) {
    assert_eq!(err.matches(part).count(), 1, "{part}: {err}");
}

/// Waits (up to 10 s) for job `id` to be recovered (status REC).
fn recovered(s: &RedisServer, id: &str) -> bool {
    wait_until(10.0, || {
        let st: Option<String> = s.con().hget("t-statuses", id).unwrap();
        st.is_some_and(|st| st.starts_with("REC:"))
    })
}

/// One script call: the script, its keys with the type each must have, its arguments,
/// and further keys it touches that are not among its KEYS (built from the prefix).
/// `tolerant`: the run history's keys among its KEYS, which a script never refuses
/// for: it leaves their entries out and goes on (see src/history.rs). `order`, when
/// not empty: the KEYS in the order the script takes them (else `keys`).
struct Call {
    name: &'static str,
    script: Script,
    keys: Vec<(&'static str, &'static str)>,
    args: Vec<String>,
    touched: Vec<(&'static str, &'static str)>,
    tolerant: Vec<(&'static str, &'static str)>,
    order: Vec<&'static str>,
}

fn call(
    name: &'static str,
    body: &str,
    keys: &[(&'static str, &'static str)],
    args: &[&str],
) -> Call {
    Call {
        name,
        script: script(body),
        keys: keys.to_vec(),
        args: args.iter().map(|a| a.to_string()).collect(),
        touched: Vec::new(),
        tolerant: Vec::new(),
        order: Vec::new(),
    }
}

const SCHEDULES: (&str, &str) = ("t-schedules", "hash");
const STATUSES: (&str, &str) = ("t-statuses", "hash");
const TIMELINE: (&str, &str) = ("t-timeline", "zset");
const QUEUE: (&str, &str) = ("t-work-A", "list");
const MEMBERS: (&str, &str) = ("t-work-A-members", "set");
const LEASE: (&str, &str) = ("t-work-A-j:A", "string");
const FAILURES: (&str, &str) = ("t-failures", "hash");
const LEASES: (&str, &str) = ("t-leases", "zset");
const CONTROL: (&str, &str) = ("t-control", "string");
const FENCING: (&str, &str) = ("t-fencing", "string");
const HISTORY: (&str, &str) = ("t-history-j:A", "list");
const RECENT_RUNS: (&str, &str) = ("t-recent-runs", "list");
const RECENT_FAILURES: (&str, &str) = ("t-recent-failures", "list");
const RUNS_PER_MINUTE: (&str, &str) = ("t-runs-per-minute", "hash");
const DUE: (&str, &str) = ("t-due", "hash");
/// The history keys of recover.lua and skip.lua, in their order.
const ENTRY_KEYS: [(&str, &str); 4] = [HISTORY, RECENT_RUNS, RECENT_FAILURES, DUE];
const PAUSED: (&str, &str) = ("t-paused", "hash");
const PAUSED_QUEUES: (&str, &str) = ("t-paused-queues", "hash");
const RERUN: (&str, &str) = ("t-rerun", "hash");
const UNFILED: (&str, &str) = ("t-unfiled-runs", "list");
const KILL: (&str, &str) = ("t-kill", "hash");
const ATTEMPTS: (&str, &str) = ("t-attempts", "hash");
const SHARDS: (&str, &str) = ("t-shards", "string");
const BACKLOGS: (&str, &str) = ("t-backlogs", "hash");
const BACKLOG: (&str, &str) = ("t-backlog-j:A", "list");
const EVENTS: (&str, &str) = ("t-events", "stream");
const FRESH_UNTIL: (&str, &str) = ("t-fresh-until", "zset");
const STALE: (&str, &str) = ("t-stale", "hash");

fn calls() -> Vec<Call> {
    let job = [SCHEDULES, STATUSES, TIMELINE, QUEUE, MEMBERS, LEASE];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = job.to_vec();
        v.extend_from_slice(extra);
        v
    };
    let mut place_many = call(
        "place_many",
        include_str!("../../src/redis/scripts/place_many.lua"),
        &[SCHEDULES, STATUSES, TIMELINE, PAUSED, SHARDS],
        &[
            "t",
            "1700000000",
            "j:A",
            "STOP",
            "enqueue",
            "0",
            "NOW",
            "NOW",
            "1800000100",
        ],
    );
    place_many.touched = vec![QUEUE, MEMBERS];
    place_many.order = vec![
        SCHEDULES.0,
        STATUSES.0,
        TIMELINE.0,
        PAUSED.0,
        SHARDS.0,
        FRESH_UNTIL.0,
    ];
    place_many.tolerant = vec![FRESH_UNTIL];
    let own = Call {
        order: vec![
            SCHEDULES.0,
            STATUSES.0,
            TIMELINE.0,
            "t-work-B",
            "t-work-B-members",
            "t-work-B-B",
            PAUSED.0,
            SHARDS.0,
            ATTEMPTS.0,
            FRESH_UNTIL.0,
        ],
        ..call(
            "place (job named as its queue)",
            include_str!("../../src/redis/scripts/place.lua"),
            &[
                SCHEDULES,
                STATUSES,
                TIMELINE,
                ("t-work-B", "list"),
                ("t-work-B-members", "set"),
                ("t-work-B-B", "string"),
                PAUSED,
                SHARDS,
                ATTEMPTS,
            ],
            &[
                "B",
                "STOP",
                "enqueue",
                "0",
                "1700000000",
                "w",
                "w",
                "NOW",
                "NOW",
                "-",
            ],
        )
    };
    let mut place_order: Vec<&'static str> = with(&[PAUSED, SHARDS, ATTEMPTS])
        .iter()
        .map(|(k, _)| *k)
        .collect();
    place_order.push(FRESH_UNTIL.0);
    vec![
        Call {
            order: place_order,
            tolerant: vec![FRESH_UNTIL],
            ..call(
                "place",
                include_str!("../../src/redis/scripts/place.lua"),
                &with(&[PAUSED, SHARDS, ATTEMPTS]),
                &[
                    "j:A",
                    "FREQ=DAILY",
                    "timeline",
                    "1800000000",
                    "1700000000",
                    "w",
                    "w",
                    "FREQ=DAILY",
                    "FREQ=DAILY",
                    "1800000100",
                ],
            )
        },
        call(
            "run",
            include_str!("../../src/redis/scripts/run.lua"),
            &with(&[PAUSED, RERUN, CONTROL]),
            &["j:A", "1700000000", "w"],
        ),
        call(
            "kill",
            include_str!("../../src/redis/scripts/kill.lua"),
            &[SCHEDULES, LEASE, LEASES, KILL, CONTROL],
            &["j:A", "w"],
        ),
        call(
            "pause",
            include_str!("../../src/redis/scripts/pause.lua"),
            &with(&[PAUSED, RERUN]),
            &["j:A", "{}", "1700000000"],
        ),
        call(
            "resume",
            include_str!("../../src/redis/scripts/resume.lua"),
            &with(&[PAUSED, RERUN]),
            &[
                "j:A",
                "CONTINUE",
                "CONTINUE",
                "enqueue",
                "0",
                "1700000000",
                "w",
                "w",
                "CONTINUE",
            ],
        ),
        own,
        place_many,
        call(
            "died",
            include_str!("../../src/redis/scripts/died.lua"),
            &[LEASES],
            &["t", "abcdef01234567", "w", "0", "10"],
        ),
        Call {
            order: vec![
                SCHEDULES.0,
                STATUSES.0,
                TIMELINE.0,
                QUEUE.0,
                MEMBERS.0,
                FAILURES.0,
                HISTORY.0,
                DUE.0,
                PAUSED.0,
                RERUN.0,
                ATTEMPTS.0,
                BACKLOGS.0,
                BACKLOG.0,
                FRESH_UNTIL.0,
                STALE.0,
            ],
            tolerant: vec![HISTORY, DUE, BACKLOG, FRESH_UNTIL, STALE],
            ..call(
                "unset",
                include_str!("../../src/redis/scripts/unset.lua"),
                &[
                    SCHEDULES, STATUSES, TIMELINE, QUEUE, MEMBERS, FAILURES, PAUSED, RERUN,
                    ATTEMPTS, BACKLOGS,
                ],
                &["j:A"],
            )
        },
        Call {
            // The Python peer key is only read (MGET takes any type).
            order: vec![
                TIMELINE.0,
                STATUSES.0,
                CONTROL.0,
                LEASES.0,
                DUE.0,
                PAUSED.0,
                "t-python-seen",
                FRESH_UNTIL.0,
            ],
            tolerant: vec![DUE, FRESH_UNTIL],
            ..call(
                "dispatch",
                include_str!("../../src/redis/scripts/dispatch.lua"),
                &[TIMELINE, STATUSES, CONTROL, LEASES, PAUSED],
                &["t", "1700000000", "1000", "1700000000"],
            )
        },
        Call {
            order: vec![
                STATUSES.0,
                SCHEDULES.0,
                LEASES.0,
                FENCING.0,
                DUE.0,
                PAUSED.0,
                PAUSED_QUEUES.0,
                RERUN.0,
                ATTEMPTS.0,
                QUEUE.0,
                MEMBERS.0,
                "t-work-A-A",
            ],
            tolerant: vec![DUE],
            ..call(
                "claim",
                include_str!("../../src/redis/scripts/claim.lua"),
                &[
                    STATUSES,
                    SCHEDULES,
                    LEASES,
                    FENCING,
                    PAUSED,
                    PAUSED_QUEUES,
                    RERUN,
                    ATTEMPTS,
                    QUEUE,
                    MEMBERS,
                    ("t-work-A-A", "string"),
                ],
                &["1700000000", "1", "0", "1", "10", "tag", "30", "A", "0"],
            )
        },
        Call {
            // The schedules hash is only looked at with EXISTS (any type); the kill
            // markers are read only from a hash.
            order: vec![LEASES.0, SCHEDULES.0, KILL.0],
            tolerant: vec![KILL],
            ..call(
                "refresh",
                include_str!("../../src/redis/scripts/refresh.lua"),
                &[LEASES],
                &["10", "x:A"],
            )
        },
        call(
            "release",
            include_str!("../../src/redis/scripts/release.lua"),
            &with(&[LEASES]),
            &["j:A", "tag", "1700000000", "w"],
        ),
        Call {
            // finish.lua reads the lease with MGET (any type): not checked.
            order: vec![
                SCHEDULES.0,
                STATUSES.0,
                TIMELINE.0,
                FAILURES.0,
                LEASES.0,
                RECENT_RUNS.0,
                RECENT_FAILURES.0,
                RUNS_PER_MINUTE.0,
                DUE.0,
                PAUSED.0,
                RERUN.0,
                UNFILED.0,
                ATTEMPTS.0,
                KILL.0,
                BACKLOGS.0,
                EVENTS.0,
                FRESH_UNTIL.0,
                STALE.0,
                QUEUE.0,
                MEMBERS.0,
            ],
            // (Its lease, history and backlog keys are made from the queue's key and
            // the prefixes among its arguments.)
            tolerant: vec![
                HISTORY,
                RECENT_RUNS,
                RECENT_FAILURES,
                RUNS_PER_MINUTE,
                UNFILED,
                KILL,
                BACKLOGS,
                EVENTS,
                FRESH_UNTIL,
                STALE,
                BACKLOG,
            ],
            ..call(
                "finish",
                include_str!("../../src/redis/scripts/finish.lua"),
                &[
                    SCHEDULES, STATUSES, TIMELINE, FAILURES, LEASES, PAUSED, RERUN, ATTEMPTS,
                    QUEUE, MEMBERS,
                ],
                &[
                    [
                        "j:A",
                        "tag",
                        "1",
                        "CONTINUE",
                        "place",
                        "timeline",
                        "1800000000",
                        "",
                        "DIE",
                        "{}",
                        "f",
                        "",
                        "",
                        "1800000100",
                    ]
                    .as_slice(),
                    &finish_once_args("20", "0"),
                ]
                .concat(),
            )
        },
        Call {
            order: vec![
                SCHEDULES.0,
                STATUSES.0,
                TIMELINE.0,
                QUEUE.0,
                MEMBERS.0,
                LEASE.0,
                FAILURES.0,
                LEASES.0,
                HISTORY.0,
                RECENT_RUNS.0,
                RECENT_FAILURES.0,
                DUE.0,
                PAUSED.0,
                RERUN.0,
                KILL.0,
                BACKLOGS.0,
                BACKLOG.0,
                EVENTS.0,
            ],
            tolerant: [&ENTRY_KEYS[..], &[KILL, BACKLOGS, BACKLOG, EVENTS]].concat(),
            ..call(
                "recover",
                include_str!("../../src/redis/scripts/recover.lua"),
                &with(&[FAILURES, LEASES, PAUSED, RERUN]),
                &[
                    "j:A",
                    "orphan",
                    "CONTINUE",
                    "enqueue",
                    "0",
                    "1700000000",
                    "",
                    "w",
                    "w",
                    "{}",
                    "20",
                    "1000",
                    "1000",
                    "10000",
                ],
            )
        },
        Call {
            order: [
                &job.map(|(k, _)| k)[..],
                &[PAUSED.0, CONTROL.0, BACKLOGS.0, BACKLOG.0, DUE.0, EVENTS.0],
            ]
            .concat(),
            tolerant: vec![EVENTS],
            ..call(
                "backfill",
                include_str!("../../src/redis/scripts/backfill.lua"),
                &with(&[PAUSED, CONTROL, BACKLOGS, BACKLOG, DUE]),
                &[
                    "j:A",
                    "CONTINUE",
                    "1700000000",
                    "w",
                    "",
                    "10000",
                    "backfill",
                    "j:A",
                    "",
                    "user",
                    "host",
                    "1",
                    "cli",
                    "1600000000",
                ],
            )
        },
        call(
            "cancel_backfill",
            include_str!("../../src/redis/scripts/cancel_backfill.lua"),
            &[BACKLOGS, BACKLOG],
            &["j:A"],
        ),
        call(
            "repair",
            include_str!("../../src/redis/scripts/repair.lua"),
            &with(&[FAILURES, PAUSED, RERUN]),
            &["wrong-queue", "j:A", "", "1700000000", ""],
        ),
        Call {
            // The event is a pcall: a stream key of another type costs the event.
            order: vec![FRESH_UNTIL.0, STALE.0, EVENTS.0],
            tolerant: vec![EVENTS],
            ..call(
                "stale",
                include_str!("../../src/redis/scripts/stale.lua"),
                &[FRESH_UNTIL, STALE],
                &["100", "k:A", "1700000000", "1700000000:60"],
            )
        },
        Call {
            // The job's list is named by the script (the prefix, then the id the entry
            // gives).
            tolerant: vec![HISTORY],
            ..call(
                "file_history",
                include_str!("../../src/redis/scripts/file_history.lua"),
                &[UNFILED, SCHEDULES],
                &["20", "500", "t-history-"],
            )
        },
    ]
}

/// Runs `c` with its keys as given (in `order` when it has one).
fn invoke(c: &Call, con: &mut redis::Connection) -> redis::RedisResult<redis::Value> {
    let mut inv = c.script.prepare_invoke();
    match c.order.is_empty() {
        true => c.keys.iter().for_each(|(k, _)| {
            inv.key(*k);
        }),
        false => c.order.iter().for_each(|k| {
            inv.key(*k);
        }),
    }
    for a in &c.args {
        inv.arg(a);
    }
    inv.invoke(con)
}

#[test]
fn every_script_checks_every_key_before_its_first_write() {
    let s = RedisServer::start();
    let mut checked = 0;
    for c in calls() {
        for &(key, kind) in c.keys.iter().chain(&c.touched) {
            seed(&s);
            plant(&s, key, kind);
            let before = s.dump();
            let reply = invoke(&c, &mut s.con());
            checked += 1;
            // dispatch.lua defers the jobs of a queue whose keys are odd, claim.lua
            // skips that queue, finish.lua that job (naming the key): the others go
            // on. Every other case is a refusal.
            let per_queue = match c.name {
                "dispatch" | "finish" => key == QUEUE.0 || key == MEMBERS.0,
                "claim" => key == QUEUE.0 || key == MEMBERS.0 || key == "t-work-A-A",
                _ => false,
            };
            // unset forgets the job everywhere but in a queue list of another type,
            // which under a colliding queue name is another key of ours (X-X is job
            // X's lease): it is left as it was.
            if c.name == "unset" && key == QUEUE.0 {
                assert!(reply.is_ok(), "unset: {key}: {reply:?}");
                assert_eq!(s.dump().get(key), before.get(key), "unset: {key} changed");
                continue;
            }
            if per_queue {
                let reply = format!("{reply:?}");
                assert!(reply.starts_with("Ok("), "{}: {key}: {reply}", c.name);
                if c.name != "dispatch" {
                    assert!(
                        reply.contains(&format!("key {key} holds a")),
                        "{}: {reply}",
                        c.name
                    );
                    // The run's history entry is still recorded: nothing else.
                    let history = |k: &String| c.tolerant.iter().any(|(t, _)| t == k);
                    let (mut after, mut before) = (s.dump(), before.clone());
                    after.retain(|k, _| !history(k));
                    before.retain(|k, _| !history(k));
                    assert_eq!(after, before, "{}: {key} planted: Redis changed", c.name);
                }
                continue;
            }
            let err = match reply {
                Ok(v) => panic!("{}: {key} of the wrong type was accepted: {v:?}", c.name),
                Err(e) => e.to_string(),
            };
            assert!(
                err.contains(&format!("key {key} holds a"))
                    && err.contains(&format!("where redbike keeps a {kind}"))
                    && err.contains("nothing was changed")
                    && !err.contains("user_script"),
                "{}: {key}: {err}",
                c.name
            );
            assert_eq!(s.dump(), before, "{}: {key} planted: Redis changed", c.name);
        }
    }
    assert!(checked >= 50, "{checked} cases");
}

/// A history key of another type costs its entries, never the script's work: the
/// script answers as usual and leaves that key as it was.
#[test]
fn a_history_key_of_another_type_is_left_alone() {
    let s = RedisServer::start();
    let mut checked = 0;
    for c in calls() {
        for &(key, kind) in &c.tolerant {
            seed(&s);
            // So that each script gets to its history: recover.lua finds j:A lost,
            // finish.lua finds it placed by someone else (its entry is still recorded).
            let mut con = s.con();
            match c.name {
                "recover" => {
                    let _: () = con.srem("t-work-A-members", "j:A").unwrap();
                    let _: () = con.lrem("t-work-A", 0, "j:A").unwrap();
                }
                "finish" => {
                    let _: () = con.zadd("t-timeline", "j:A", 1).unwrap();
                    let _: () = con.hset("t-stale", "j:A", "1:2:3").unwrap();
                }
                "stale" => {
                    let _: () = con.zadd("t-fresh-until", "k:A", 1700000000).unwrap();
                }
                _ => {}
            }
            plant(&s, key, kind);
            let planted = s.dump()[key].clone();
            let reply = invoke(&c, &mut s.con());
            checked += 1;
            assert!(reply.is_ok(), "{}: {key}: {reply:?}", c.name);
            assert_eq!(s.dump()[key], planted, "{}: {key} was written", c.name);
        }
    }
    assert!(checked >= 10, "{checked} cases");
}

#[test]
fn scripts_refuse_numbers_out_of_range_before_writing() {
    let s = RedisServer::start();
    let calls = calls();
    let by = |name: &str| calls.iter().find(|c| c.name == name).unwrap();
    for (name, index, value, says) in [
        ("claim", 6, "10000000000000000", "lease time"),
        ("claim", 6, "0", "lease time"),
        ("claim", 8, "1000001", "queue limit"),
        ("claim", 4, "x", "recovery delay"),
        ("place", 3, "1e400", "due time"),
        ("place_many", 5, "-1", "due time"),
        ("place", 9, "-5", "deadline"),
        ("place_many", 8, "x", "deadline"),
        ("finish", 13, "-1", "deadline"),
        ("finish", 19, "-1", "events kept"),
        ("finish", 6, "99999999999999999", "due time"),
        ("backfill", 13, "-1", "due instant"),
    ] {
        let mut c = Call {
            name: by(name).name,
            script: script(match name {
                "claim" => include_str!("../../src/redis/scripts/claim.lua"),
                "place" => include_str!("../../src/redis/scripts/place.lua"),
                "place_many" => include_str!("../../src/redis/scripts/place_many.lua"),
                "backfill" => include_str!("../../src/redis/scripts/backfill.lua"),
                _ => include_str!("../../src/redis/scripts/finish.lua"),
            }),
            keys: by(name).keys.clone(),
            args: by(name).args.clone(),
            touched: Vec::new(),
            tolerant: Vec::new(),
            order: by(name).order.clone(),
        };
        if name == "place_many" {
            c.args[4] = "timeline".into();
        }
        c.args[index] = value.into();
        seed(&s);
        let before = s.dump();
        let err = invoke(&c, &mut s.con()).unwrap_err().to_string();
        assert!(
            err.contains(says) && err.contains("not a whole number in"),
            "{name} {value}: {err}"
        );
        assert_eq!(s.dump(), before, "{name} {value}: Redis changed");
    }
}

#[test]
fn read_only_scripts_take_odd_members_keys_in_their_stride() {
    let s = RedisServer::start();
    seed(&s);
    plant(&s, MEMBERS.0, MEMBERS.1);
    let places: Vec<redis::Value> = script(include_str!("../../src/redis/scripts/places.lua"))
        .key(TIMELINE.0)
        .key(STATUSES.0)
        .key(PAUSED.0)
        .key(RERUN.0)
        .arg("t")
        .arg("j:A")
        .invoke(&mut s.con())
        .unwrap();
    assert_eq!(places.len(), 7);
    assert_eq!(places[1], redis::Value::Int(0), "not queued: {places:?}");
    let page: Vec<redis::Value> = script(include_str!("../../src/redis/scripts/sweep.lua"))
        .key(SCHEDULES.0)
        .key(TIMELINE.0)
        .key(STATUSES.0)
        .key(PAUSED.0)
        .arg("t")
        .arg("0")
        .arg("100")
        .invoke(&mut s.con())
        .unwrap();
    // Only the cursor and the number of schedules: j:A cannot be put back into a queue whose keys
    // are odd.
    assert_eq!(page.len(), 2, "{page:?}");
}

// ------------------------------------------------------------ through the binary

/// Runs a `redbike` command that must fail on a planted key: one line naming the key,
/// no Lua location, Redis unchanged.
fn refused(s: &RedisServer, d: &std::path::Path, args: &[&str], key: &str) {
    let before = s.dump();
    let o = bike(s, d).args(args).run();
    assert!(o.code != 0 && o.code != 2, "{args:?}: {o:?}");
    let code = o.code;
    let o = o.fails(code, &format!("key {key} holds a"));
    assert!(!o.stderr.contains("user_script"), "{}", o.stderr);
    assert_eq!(s.dump(), before, "{args:?}: Redis changed");
}

#[test]
fn set_load_and_unset_write_nothing_over_a_key_of_another_type() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "old:A", "CONTINUE"]).ok();
    let mut con = s.con();
    // The issue's case: a schedules key of the wrong type made `set` write statuses,
    // timeline and queue before it failed.
    let _: () = con.rename("t-schedules", "t-kept").unwrap();
    let _: () = con.rpush("t-schedules", "x").unwrap();
    refused(&s, d.path(), &["set", "a1:A", "NOW"], "t-schedules");
    refused(&s, d.path(), &["set", "a1:A", "FREQ=DAILY"], "t-schedules");
    let _: () = con.del("t-schedules").unwrap();
    let _: () = con.rename("t-kept", "t-schedules").unwrap();
    // A members set that is a list (the Python original's queue "A-members").
    let _: () = con.del("t-work-A-members").unwrap();
    let _: () = con.lpush("t-work-A-members", "x:A-members").unwrap();
    refused(&s, d.path(), &["set", "a1:A", "NOW"], "t-work-A-members");
    refused(&s, d.path(), &["unset", "old:A"], "t-work-A-members");
    // A load of several batches checks every key before the first: the odd queue's
    // job is the last of 2,500 rows.
    let mut rows: String = (0..2500).map(|i| format!("j{i}:B,NOW\n")).collect();
    rows.push_str("last:A,NOW\n");
    std::fs::write(d.path().join("f.csv"), rows).unwrap();
    refused(&s, d.path(), &["load", "f.csv"], "t-work-A-members");
    // With more queues than `load` keeps while it checks a file (10,000), it reads the
    // file once more to check their keys, batch by batch, before the first write.
    let mut rows: String = (0..10_500).map(|i| format!("j{i}:Q{i},NOW\n")).collect();
    rows.push_str("last:A,NOW\n");
    std::fs::write(d.path().join("f.csv"), rows).unwrap();
    refused(&s, d.path(), &["load", "f.csv"], "t-work-A-members");
    // Job A's lease key is queue A-A's list (made by the original): `set A NOW` used
    // to say "running now" and never run it.
    let _: () = con.del("t-work-A-members").unwrap();
    let _: () = con.lpush("t-work-A-A", "z:A-A").unwrap();
    refused(&s, d.path(), &["set", "A", "NOW"], "t-work-A-A");
    // The same job last of many rows whose queue A was seen before.
    let mut rows: String = (0..2500).map(|i| format!("j{i}:A,NOW\n")).collect();
    rows.push_str("A,NOW\n");
    std::fs::write(d.path().join("f.csv"), rows).unwrap();
    refused(&s, d.path(), &["load", "f.csv"], "t-work-A-A");
}

#[test]
fn dispatch_moves_other_queues_and_keeps_an_odd_queue_s_jobs() {
    let s = RedisServer::start();
    let d = workdir();
    for id in ["a:A", "b:B"] {
        bike(&s, d.path()).args(["set", id, "AT:1700000000"]).ok();
    }
    let mut con = s.con();
    let _: () = con.hset("t-work-B", "x", "y").unwrap();
    let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    assert!(
        wait_until(10.0, || {
            let n: i64 = s.con().llen("t-work-A").unwrap();
            n == 1
        }),
        "queue A was dispatched"
    );
    assert!(wait_stderr(
        disp.child(),
        "1 due job(s) wait on the timeline: their queue's keys hold other types",
        5.0
    ));
    let b: Option<f64> = con.zscore("t-timeline", "b:B").unwrap();
    assert!(b.is_some(), "b:B stays on the timeline");
    let hash: Vec<String> = con.hgetall("t-work-B").unwrap();
    assert_eq!(hash, ["x", "y"], "the odd key is left alone");
    // A fixed key of another type: every pass fails, nothing is written.
    let _: () = con.del("t-statuses").unwrap();
    let _: () = con.rpush("t-statuses", "x").unwrap();
    let before = s.dump();
    assert!(wait_stderr(
        disp.child(),
        "key t-statuses holds a list",
        5.0
    ));
    let (_, err) = disp.finish(0.5);
    assert!(!err.contains("user_script"), "{err}");
    let mut after = s.dump();
    after.remove("t-control");
    assert_eq!(after, before);
}

#[test]
fn a_claim_over_a_key_of_another_type_pops_nothing() {
    let t = crate::work::Setup::new();
    t.set("j:A", "NOW");
    t.set("A", "NOW");
    let mut con = t.s.con();
    // Job A's lease key is queue A-A's list (the Python original's queue).
    let _: () = con.lpush("t-work-A-A", "z:A-A").unwrap();
    let before = t.s.dump();
    // Its only queue skipped, a worker can do nothing: at start-up it exits (78).
    let w = Bg(Some(t.worker(&["A"])));
    let (code, err) = w.finish(10.0);
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("key t-work-A-A holds a list"), "{err}");
    assert_eq!(t.s.dump(), before, "a claim wrote");
    assert!(t.runs().is_empty(), "{err}");
    // Before, the claim popped jobs and then failed on EXPIRE; `tell` said queued.
    let _: () = con.del("t-work-A-A").unwrap();
    let _: () = con.del("t-work-A-members").unwrap();
    let _: () = con.set("t-work-A-members", "x").unwrap();
    let before = t.s.dump();
    let w = Bg(Some(t.worker(&["A"])));
    assert!(wait_stderr(
        w.child(),
        "key t-work-A-members holds a string",
        10.0
    ));
    assert_eq!(t.s.dump(), before, "a claim wrote");
    w.finish(0.5);
}

#[test]
fn a_backoff_beyond_a_year_is_capped() {
    let t = crate::work::Setup::new();
    std::fs::write(
        path(&t.d, "far.sh"),
        "#!/bin/sh\necho 1000000000000 > \"$REDBIKE_BACKOFF_FILE\"\n",
    )
    .unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path(&t.d, "far.sh"))
        .status();
    t.set("far:A", "CONTINUE");
    let w = Bg(Some(
        bike(&t.s, t.d.path())
            .args(["work", "A", "--", "./far.sh"])
            .spawn(),
    ));
    assert!(wait_until(10.0, || crate::work::score(&t.s, "far:A").is_some()));
    let due = crate::work::score(&t.s, "far:A").unwrap();
    assert!(
        due <= now() + 365 * 24 * 3600 + 5 && due >= now() + 365 * 24 * 3600 - 30,
        "due {due}"
    );
    assert!(wait_stderr(
        w.child(),
        "wrote a backoff of 1000000000000 seconds; the limit is 31536000",
        5.0
    ));
}

#[test]
fn recovery_skips_a_job_whose_keys_are_odd_and_goes_on() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    // Two jobs whose workers vanished (their recovery time has passed), one of them in
    // a queue whose members key is a string; and a due job to dispatch.
    for id in ["lost:A", "odd:B"] {
        let _: () = con.hset("t-schedules", id, "CONTINUE").unwrap();
        let _: () = con.zadd("t-leases", id, 1).unwrap();
    }
    let _: () = con.set("t-work-B-members", "x").unwrap();
    bike(&s, d.path())
        .args(["set", "due:A", "AT:1700000000"])
        .ok();
    let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    assert!(recovered(&s, "lost:A"), "lost:A recovered");
    assert!(wait_until(5.0, || {
        let q: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
        q.contains(&"due:A".to_string())
    }));
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let (_, err) = disp.finish(0.5);
    said_once(
        &err,
        "cannot recover job odd:B: key t-work-B-members holds a string",
    );
    let still: Option<f64> = con.zscore("t-leases", "odd:B").unwrap();
    assert!(still.is_some());
    let members: String = con.get("t-work-B-members").unwrap();
    assert_eq!(members, "x");
}

#[test]
fn claim_refuses_a_fencing_counter_that_is_not_a_count() {
    let s = RedisServer::start();
    let c = calls().into_iter().find(|c| c.name == "claim").unwrap();
    for value in ["x", "-1", "1e300", "1.5"] {
        seed(&s);
        let _: () = s.con().set(FENCING.0, value).unwrap();
        let before = s.dump();
        let err = invoke(&c, &mut s.con()).unwrap_err().to_string();
        assert!(err.contains("fencing token counter"), "{value}: {err}");
        assert_eq!(s.dump(), before, "{value}: Redis changed");
    }
}

/// A job whose queue's keys turn odd while it runs costs its own outcome only: the
/// worker records the others of its batch and every later one, and names it once.
#[test]
fn a_worker_records_other_outcomes_past_a_job_whose_keys_turned_odd() {
    let t = crate::work::Setup::new();
    t.set("sleep-good:A", "NOW");
    t.set("sleep-odd:B", "NOW");
    let w = Bg(Some(t.worker(&["A:B", "-j", "3"])));
    assert!(wait_until(10.0, || {
        let runs = t.runs();
        runs.iter().any(|r| r == "sleep-good:A") && runs.iter().any(|r| r == "sleep-odd:B")
    }));
    // While both run (1 s), queue B's members key becomes a string.
    let mut con = t.s.con();
    let _: () = con.set("t-work-B-members", "x").unwrap();
    assert!(
        t.wait_status("sleep-good:A", "STP"),
        "the good outcome was recorded"
    );
    // Later outcomes are recorded too.
    for i in 0..3 {
        let id = format!("more{i}:A");
        t.set(&id, "NOW");
        assert!(t.wait_status(&id, "STP"), "{id} was recorded");
    }
    assert!(t.status("sleep-odd:B").starts_with("WRK"));
    let (_, err) = w.finish(0.5);
    said_once(
        &err,
        "job sleep-odd:B: cannot record its outcome: key t-work-B-members holds a string",
    );
    let lines = err
        .lines()
        .filter(|l| l.contains("sleep-odd:B") && !l.contains("output of"));
    assert_eq!(lines.count(), 1, "{err}");
    let members: String = con.get("t-work-B-members").unwrap();
    assert_eq!(members, "x");
}

/// Hand-backs over odd keys are dropped, not retried for ever: the worker still stops.
/// (The jobs stay in the running index, for recovery once the key is fixed.)
#[test]
fn hand_backs_over_odd_keys_do_not_keep_a_worker_from_stopping() {
    use redbike::work::RunResult;
    use std::sync::{Arc, Mutex};
    let t = crate::work::Setup::new();
    crate::work::queue_in_order(&t, &crate::work::ids("a", 40));
    let ran = Arc::new(Mutex::new(0usize));
    let count = Arc::clone(&ran);
    let stop = Arc::new(Mutex::new(None::<redbike::shutdown::Shutdown>));
    let stopper = Arc::clone(&stop);
    let url = t.s.url();
    let (shutdown, th) = crate::work::in_process(&t, "A", 1, move |_| {
        // Short jobs (5 ms): the worker claims several ahead.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut n = count.lock().unwrap();
        *n += 1;
        if *n == 12 {
            let mut con = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let _: () = con.del("t-work-A-members").unwrap();
            let _: () = con.set("t-work-A-members", "x").unwrap();
            if let Some(s) = stopper.lock().unwrap().as_ref() {
                s.request();
            }
        }
        RunResult::Success { backoff: None }
    });
    *stop.lock().unwrap() = Some(shutdown.clone());
    // (A second stop request would end the test process: none is made.)
    assert!(
        wait_until(10.0, || th.is_finished()),
        "the worker did not stop"
    );
    th.join().unwrap().unwrap();
    let mut con = t.s.con();
    let members: String = con.get("t-work-A-members").unwrap();
    assert_eq!(members, "x");
    let leased: usize = con.zcard("t-leases").unwrap();
    assert!(leased >= 1, "the jobs held stay in the running index");
}

/// A queue whose keys hold other types is skipped by the claim; the others run.
#[test]
fn a_worker_claims_from_its_other_queues_past_an_odd_one() {
    let t = crate::work::Setup::new();
    let _: () = t.s.con().hset("t-work-B", "x", "y").unwrap();
    t.set("a:A", "NOW");
    let w = Bg(Some(t.worker(&["A:B"])));
    assert!(t.wait_status("a:A", "STP"), "a:A ran");
    // Once the key is fixed, queue B is claimed from again.
    let mut con = t.s.con();
    let _: () = con.del("t-work-B").unwrap();
    t.set("b:B", "NOW");
    assert!(t.wait_status("b:B", "STP"), "b:B ran");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (_, err) = w.finish(0.5);
    said_once(&err, "skipping queue(s) B: key t-work-B holds a hash");
    said_once(&err, "claiming from queue(s) B again");
}

/// Stale index entries behind many odd ones are still recovered; the odd entries are
/// moved out of the way, each named once.
#[test]
fn recovery_finds_stale_entries_behind_odd_ones() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    for i in 0..120 {
        let id = format!("odd{i}:B");
        let _: () = con.hset("t-schedules", &id, "CONTINUE").unwrap();
        let _: () = con.zadd("t-leases", &id, 1).unwrap();
    }
    let _: () = con.set("t-work-B-members", "x").unwrap();
    let _: () = con.hset("t-schedules", "lost:A", "CONTINUE").unwrap();
    let _: () = con.zadd("t-leases", "lost:A", 2).unwrap();
    let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    assert!(recovered(&s, "lost:A"), "lost:A recovered");
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let (_, err) = disp.finish(0.5);
    said_once(&err, "cannot recover job odd7:B");
    let at: f64 = con.zscore("t-leases", "odd7:B").unwrap();
    let now: f64 = redis::cmd("TIME").query::<Vec<f64>>(&mut con).unwrap()[0];
    assert!(at > now, "odd7:B moved ahead: {at} vs {now}");
}

#[test]
fn a_shards_key_not_holding_a_number_of_shards_cannot_be_fixed_by_retrying() {
    let s = RedisServer::start();
    let d = workdir();
    // A split prefix's dispatcher asks too (an unsplit one has nothing to ask).
    std::fs::write(
        d.path().join("two.toml"),
        "[redbike]\nprefix = \"{t}\"\nshards = 2\n",
    )
    .unwrap();
    let commands: [&[&str]; 4] = [
        &["statuses"],
        &["set", "j:A", "NOW"],
        &["-c", "two.toml", "set", "j:A", "NOW"],
        &["-c", "two.toml", "dispatch"],
    ];
    for value in ["x", "0", "-1", "1.5", "1025"] {
        let _: () = s.con().set("{t}-shards", value).unwrap();
        let before = s.dump();
        for args in commands {
            let o = bike(&s, d.path())
                .env("REDBIKE_PREFIX", "{t}")
                .args(args)
                .run()
                .fails(78, "key {t}-shards holds");
            assert!(o.stderr.contains("retrying cannot fix"), "{args:?}: {o:?}");
            assert_eq!(s.dump(), before, "{value} {args:?}");
        }
    }
}
