//! `redbike top`: the printed frame (`--once`, or stdout not a terminal), the frame drawn
//! with ratatui's test backend from a snapshot of a real Redis, and the live view in a
//! real terminal (tmux) with a dispatcher and a worker.

use std::process::Command;

use redis::Commands;

use crate::harness::*;

/// A fixed instant (2100-01-01T00:00:00Z) and the job times around it, so the frame of
/// the test backend is the same on every run.
const T0: i64 = 4_102_444_800;

#[test]
fn once_prints_one_frame_of_the_prefix() {
    let s = RedisServer::start();
    let d = workdir();
    let rb = || bike(&s, d.path());
    rb().args(["set", "later:A", "AT:2100-01-01T00:00:00Z"])
        .ok();
    rb().args(["set", "q1:Q", "NOW"]).ok();
    rb().args(["set", "q2:Q", "NOW"]).ok();
    let mut con = s.con();
    let _: () = con
        .hset("t-failures", "broke:F", format!("DIE:{}", now() - 100))
        .unwrap();
    let out = rb().args(["top", "--once", "--queues", "Q:Z"]).ok();
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("prefix t") && lines[0].contains(&format!("127.0.0.1:{}", s.port)),
        "{out}"
    );
    assert!(
        lines[0].contains("standalone") && !lines[0].contains("HALT"),
        "{out}"
    );
    let row = |first: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(first))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {first}: {out}"))
    };
    // Queue Q holds two jobs; Z was named and is empty; A and F are the queues of jobs
    // listed (coming up, failed), read in a second pass. Queues named nowhere and
    // worked by no worker are not found (no SCAN).
    assert_eq!(row("Q")[1], "2", "{out}");
    assert_eq!(row("Z")[1..], ["0", "-", "0", "0", "0", "0", "-"], "{out}");
    assert_eq!(row("F")[1], "0", "{out}");
    assert_eq!(row("later:A")[2..], ["2100-01-01", "00:00:00"], "{out}");
    assert_eq!(row("broke:F")[1], "DIE", "{out}");
    assert!(!out.contains('\u{1b}'), "no escape sequences: {out:?}");
    // stdout not a terminal: plain `top` prints the same frame.
    let plain = rb().args(["top", "--queues", "Q:Z"]).ok();
    assert_eq!(plain.lines().nth(3), out.lines().nth(3), "{plain}");
    rb().args(["control", "HALT"]).ok();
    let halted = rb().args(["top"]).ok();
    assert!(halted.lines().next().unwrap().contains("HALT"), "{halted}");
}

#[test]
fn once_bad_input_and_unreachable_redis() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["top", "--once", "--queues", "A::B"])
        .run()
        .fails(2, "bad queue list");
    assert_eq!(s.dbsize(), 0);
    bare(d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://127.0.0.1:{}/0", dead_port()),
        )
        .args(["top", "--once"])
        .run()
        .fails(69, "cannot reach redis");
}

/// PUBSUB CHANNELS only adds the queues workers listen on: an ACL user without it gets
/// the view all the same.
#[test]
fn once_works_for_an_acl_user_without_pubsub() {
    let s = RedisServer::start();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "rb", "on", ">pw", "~*", "&*", "+@all", "-pubsub"])
        .query(&mut s.con())
        .unwrap();
    let d = workdir();
    let url = format!("redis://rb:pw@127.0.0.1:{}/0", s.port);
    let rb = || bare(d.path()).env("REDBIKE_REDIS_URL", &url);
    rb().args(["set", "later:A", "AT:2100-01-01T00:00:00Z"])
        .ok();
    let out = rb().args(["top", "--once"]).ok();
    assert!(out.contains("later:A"), "{out}");
    let refused: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut s.con()).unwrap();
    assert_eq!(refused.len(), 1, "PUBSUB CHANNELS was refused: {refused:?}");
}

/// The frame of a known state at 80x24, drawn with ratatui's test backend from a
/// snapshot read from a real Redis, whose state the real binary wrote (and the test
/// pinned the times of).
#[test]
fn frame_of_a_known_prefix_at_80x24() {
    use ratatui::{backend::TestBackend, Terminal};
    use redbike::{
        operator::control::Pause,
        redis::keys::Keys,
        top::{app::App, render, snapshot},
    };
    let s = RedisServer::start();
    let d = workdir();
    let rb = || bike(&s, d.path());
    rb().args(["set", "nightly:A", "AT:2100-01-01T02:00:00Z"])
        .ok();
    rb().args(["set", "hourly:B", "AT:2100-01-01T00:00:30Z"])
        .ok();
    rb().args(["set", "waiting:A", "NOW"]).ok();
    rb().args(["set", "busy:B", "CONTINUE"]).ok();
    rb().args(["set", "weekly:C", "FREQ=WEEKLY"]).ok();
    rb().args(["pause", "weekly:C", "--note", "disk full"]).ok();
    rb().args(["pause", "--queue", "C"]).ok();
    let mut con = s.con();
    // Pin the times: the queued job waits since T0-75; busy:B runs since T0-5 (its
    // lease is what a worker's claim writes: out of its queue, in the running index).
    let _: () = redis::pipe()
        .hset("t-statuses", "waiting:A", format!("ENQ:{}", T0 - 75))
        .hset("t-statuses", "busy:B", format!("WRK:{}", T0 - 5))
        .lrem("t-work-B", 0, "busy:B")
        .srem("t-work-B-members", "busy:B")
        .set("t-work-B-busy:B", "x")
        .zadd("t-leases", "busy:B", T0 + 30)
        .hset("t-failures", "broke:C", format!("TMO:{}", T0 - 3600))
        .hset(
            "t-paused",
            "weekly:C",
            Pause::new(T0 - 120, "disk full").to_json(),
        )
        .hset("t-paused-queues", "C", Pause::new(T0 - 60, "").to_json())
        .query(&mut con)
        .unwrap();
    let plan = snapshot::Plan {
        queues: ["A", "B", "C"].map(String::from).into(),
        timeouts: [("B".to_string(), 90)].into(),
        default_timeout: 3600,
        limits: [("B".to_string(), 4)].into(),
    };
    // A worker of queue B registers (and finds nothing to claim: busy:B is leased).
    let _worker = Bg(Some(rb().args(["work", "B", "--", "true"]).spawn()));
    let registered = wait_until(10.0, || {
        rb().args(["ps", "--format", "csv"])
            .ok()
            .contains(",worker,")
    });
    assert!(registered, "the worker did not register");
    let (snap, commands) = snapshot::read(&mut con, &Keys::new("t"), &plan, T0, None).unwrap();
    assert_eq!(
        commands, 28,
        "7 each time; HLEN thrice, HSCAN, XREVRANGE, LRANGE, HSCAN and HGETALL of the pauses, HLEN and HSCAN of the stale jobs, PUBSUB, \
         SMEMBERS, GET and PTTL per process; 2 per queue; HMGET"
    );
    let carried = snap.slow.clone();
    let (again, commands) =
        snapshot::read(&mut con, &Keys::new("t"), &plan, T0, Some(&carried)).unwrap();
    assert_eq!(commands, 14, "the slow ones carried over");
    assert_eq!(again, snap);
    let mut app = App::new(true, T0);
    app.connection.server = "standalone redis".into();
    app.update(snap);
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    term.draw(|f| render::draw(&app, f.area(), f.buffer_mut()))
        .unwrap();
    let text = render::plain(term.backend().buffer());
    let expected = "\
redbike top  prefix t  standalone redis  00:00:00 UTC
schedules 5  timeline 2 (0 due)  running 1  failed 1  dispatchers 0  workers 1
 queues (3) ────────────────────────────────────────────────────────────────────
QUEUE                        WAITING OLDEST RUN  WRK  RUNS/M FAIL/M LATE p50/p99
A                            1       1m15s  0    0    0      0      -
B                            0       -      1/4  1    0      0      -
C (paused)                   0       -      0    0    0      0      -
 running (1) ───────────────────────────────────────────────────────────────────
JOB                                                            ELAPSED  TIMEOUT
busy:B                                                         5s       1m30s
 coming up (2 on the timeline, 0 due) ──────────────────────────────────────────
JOB                                                 DUE IN   AT (UTC)
hourly:B                                            30s      2100-01-01 00:00:30
nightly:A                                           2h00m    2100-01-01 02:00:00
 paused (1) ────────────────────────────────────────────────────────────────────
JOB                                             SINCE    NOTE
weekly:C                                        2m00s    disk full
 recent failures (1 job(s) failed last) ────────────────────────────────────────
JOB                             OUTCOME   AGO    LAST OUTPUT
broke:C                         TMO       1h00m



q quit  arrows move  / filter  Enter detail  r run now  p pause/resume  ? help
";
    assert_eq!(text, expected, "got:\n{text}");
}

/// A tmux server of the test's own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached session of `width` x `height` running `sh -c script`; `None` (after
    /// [`skip`]) when tmux is missing.
    fn start(width: u16, height: u16, script: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            skip("tmux is not installed (apt-get install tmux)");
            return None;
        }
        let t = Tmux {
            socket: format!("redbike-top-{}-{}", std::process::id(), free_port()),
        };
        let ok = t
            .tmux(&["new-session", "-d", "-x", &width.to_string()])
            .args(["-y", &height.to_string(), "sh", "-c", script])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session");
        Some(t)
    }

    fn tmux(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    /// What the pane shows.
    fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends keys (tmux key names, e.g. `Down`, `Enter`, `q`).
    fn keys(&self, keys: &[&str]) {
        let mut c = self.tmux(&["send-keys"]);
        c.args(keys);
        assert!(c.status().unwrap().success(), "tmux send-keys {keys:?}");
    }

    /// The pid of `redbike top`: the one child of the pane's shell.
    fn top_pid(&self) -> i32 {
        let pane = self
            .tmux(&["display", "-p", "#{pane_pid}"])
            .output()
            .unwrap();
        let shell = String::from_utf8_lossy(&pane.stdout).trim().to_string();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .unwrap_or_default();
        children.split_whitespace().next().unwrap().parse().unwrap()
    }

    /// Waits (at most `secs`) until the screen shows `part`; the screen.
    fn wait_for(&self, part: &str, secs: f64) -> String {
        self.wait_for_all(&[part], secs)
    }

    /// Waits (at most `secs`) until the screen shows each of `parts` at once.
    fn wait_for_all(&self, parts: &[&str], secs: f64) -> String {
        let mut screen = String::new();
        let seen = wait_until(secs, || {
            screen = self.screen();
            parts.iter().all(|p| screen.contains(p))
        });
        assert!(seen, "the screen never showed {parts:?}:\n{screen}");
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]).status();
    }
}

/// The shell line that runs `redbike top` against `s` in `dir`, then says how it
/// ended and whether the terminal is back in canonical mode, and waits to be read.
fn top_script(s: &RedisServer, dir: &std::path::Path) -> String {
    format!(
        "cd '{}' && REDBIKE_REDIS_URL='{}' REDBIKE_PREFIX=t '{BIN}' top; \
         echo \"EXIT=$?\"; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        dir.display(),
        s.url()
    )
}

#[test]
fn live_view_shows_the_jobs_of_a_dispatcher_and_a_worker_and_q_restores_the_terminal() {
    let s = RedisServer::start();
    let d = workdir();
    let rb = || bike(&s, d.path());
    rb().args(["set", "later:A", "AT:2100-01-01T00:00:00Z"])
        .ok();
    rb().args(["set", "busy:A", "NOW"]).ok();
    rb().args(["set", "daily:A", "FREQ=DAILY"]).ok();
    let _dispatcher = Bg(Some(rb().args(["dispatch"]).spawn()));
    let _worker = Bg(Some(
        rb().args([
            "work",
            "A",
            "--timeout",
            "600",
            "--",
            "sh",
            "-c",
            "sleep 60",
        ])
        .spawn(),
    ));
    let Some(t) = Tmux::start(100, 30, &top_script(&s, d.path())) else {
        return;
    };
    // A capture may catch a frame half written: wait for all of it.
    let screen = t.wait_for_all(&["running (1)", "busy:A", "later:A", "daily:A"], 20.0);
    assert!(screen.contains("prefix t"), "{screen}");
    // Queue A is named nowhere: found from the jobs listed and the worker listening on
    // it, it gets its row from the next refresh on.
    let row_a = |screen: &str| {
        let row = screen.lines().find(|l| l.starts_with("A "));
        row.map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let seen = wait_until(10.0, || {
        row_a(&t.screen()).as_deref() == Some("A 0 - 1 1 0 0 -")
    });
    assert!(seen, "{}", t.screen());
    // Who is alive, from the registry.
    t.wait_for("dispatchers 1  workers 1", 10.0);
    // A failed run, from the run history: its queue's runs and failures of the last
    // minute, and the last line of its output.
    let _failing = Bg(Some(
        rb().args([
            "work",
            "F",
            "--",
            "sh",
            "-c",
            "echo first; echo boom-output; exit 3",
        ])
        .spawn(),
    ));
    rb().args(["set", "fail:F", "NOW"]).ok();
    let screen = t.wait_for_all(&["dispatchers 1  workers 2", "boom-output"], 20.0);
    assert!(screen.contains("fail:F"), "{screen}");
    let row_f = |screen: &str| {
        let row = screen.lines().find(|l| l.starts_with("F "));
        row.map(|l| l.split_whitespace().take(7).collect::<Vec<_>>().join(" "))
    };
    let seen = wait_until(10.0, || {
        row_f(&t.screen()).as_deref() == Some("F 0 - 0 1 1 1")
    });
    assert!(seen, "{}", t.screen());
    // Enter on the first row (the running job) shows what `tell` says.
    t.keys(&["Home", "Enter"]);
    t.wait_for("\"working\": true", 10.0);
    // Any key but the scroll keys closes the detail (Esc followed at once by another
    // key would read as Alt+key).
    t.keys(&["Enter"]);
    t.wait_for("running (1)", 10.0);
    // The filter hides what does not match.
    t.keys(&["/", "l", "a", "t", "Enter"]);
    let screen = t.wait_for("filter \"lat\"", 10.0);
    assert!(!screen.contains("busy:A"), "{screen}");
    t.keys(&["Escape"]);
    t.wait_for("busy:A", 10.0);

    // r runs the selected job now (its worker is busy: it waits in its queue).
    let mut con = s.con();
    let status = |con: &mut redis::Connection, id: &str| -> String {
        con.hget::<_, _, Option<String>>("t-statuses", id)
            .unwrap()
            .unwrap_or_default()
    };
    assert!(status(&mut con, "later:A").starts_with("TML:"));
    t.keys(&["/", "l", "a", "t", "Enter"]);
    t.wait_for("filter \"lat\"", 10.0);
    t.keys(&["r"]);
    t.wait_for("run later:A now (its schedule stays)?", 10.0);
    t.keys(&["y"]);
    t.wait_for("later:A: queued to run now", 10.0);
    assert!(status(&mut con, "later:A").starts_with("ENQ:"));
    let queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["later:A"]);
    t.keys(&["Escape"]);
    t.wait_for("busy:A", 10.0);

    // p pauses the selected job, and on a paused job resumes it.
    t.keys(&["/", "d", "a", "i", "l", "y", "Enter"]);
    t.wait_for("filter \"daily\"", 10.0);
    t.keys(&["p"]);
    t.wait_for("pause daily:A?", 10.0);
    t.keys(&["y"]);
    t.wait_for_all(&["daily:A: paused", "paused (1)"], 10.0);
    let paused: bool = con.hexists("t-paused", "daily:A").unwrap();
    assert!(paused);
    t.keys(&["p"]);
    t.wait_for("resume daily:A?", 10.0);
    t.keys(&["y"]);
    t.wait_for_all(&["daily:A: resumed; next run at", "paused (0)"], 10.0);
    let paused: bool = con.hexists("t-paused", "daily:A").unwrap();
    assert!(!paused);
    t.keys(&["Escape"]);
    // A paused queue is marked (and listed even when named nowhere else).
    rb().args(["pause", "--queue", "Z"]).ok();
    t.wait_for("Z (paused)", 10.0);
    // A resize is taken at the next frame: the footer moves to the new last line.
    assert!(t
        .tmux(&["resize-window", "-x", "80", "-y", "24"])
        .status()
        .unwrap()
        .success());
    let seen = wait_until(10.0, || {
        let screen = t.screen();
        let lines: Vec<&str> = screen.lines().collect();
        lines.len() == 24 && lines[23].starts_with("q quit")
    });
    assert!(seen, "{}", t.screen());
    t.keys(&["?"]);
    t.wait_for("this help; any key closes it", 10.0);
    t.keys(&["q"]);
    let screen = t.wait_for("icanon", 10.0);
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("\nicanon"),
        "canonical mode is back: {screen}"
    );
    assert!(
        !screen.contains("running (1)"),
        "the alternate screen is gone: {screen}"
    );
}

#[test]
fn live_view_shows_an_outage_and_reconnects() {
    let mut s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path())
        .args(["set", "later:A", "AT:2100-01-01T00:00:00Z"])
        .ok();
    let Some(t) = Tmux::start(80, 24, &top_script(&s, d.path())) else {
        return;
    };
    t.wait_for("later:A", 10.0);
    s.stop();
    let screen = t.wait_for("disconnected since", 15.0);
    assert!(
        screen.contains("later:A"),
        "the last snapshot stays: {screen}"
    );
    s.restart();
    bike(&s, d.path())
        .args(["set", "again:B", "AT:2100-01-01T00:00:00Z"])
        .ok();
    let screen = t.wait_for("again:B", 20.0);
    assert!(!screen.contains("disconnected"), "{screen}");
    t.keys(&["C-c"]);
    let screen = t.wait_for("icanon", 10.0);
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("\nicanon"), "{screen}");
}

#[test]
fn live_view_restores_the_terminal_on_sigterm() {
    let s = RedisServer::start();
    let d = workdir();
    let Some(t) = Tmux::start(80, 24, &top_script(&s, d.path())) else {
        return;
    };
    t.wait_for("nothing runs", 10.0);
    send_signal(t.top_pid(), libc::SIGTERM);
    let screen = t.wait_for("icanon", 10.0);
    assert!(
        screen.contains("EXIT=0") && screen.contains("\nicanon"),
        "{screen}"
    );
    assert!(!screen.contains("nothing runs"), "{screen}");
}

#[test]
fn live_view_ends_when_its_terminal_goes_away() {
    let s = RedisServer::start();
    let d = workdir();
    let Some(t) = Tmux::start(80, 24, &top_script(&s, d.path())) else {
        return;
    };
    t.wait_for("nothing runs", 10.0);
    let pid = t.top_pid();
    // Killing the tmux server hangs up the pane's terminal, as a dropped SSH session
    // does: `top` must end, not spin on a terminal that reads end-of-file for ever.
    drop(t);
    let ended = wait_until(10.0, || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.split_whitespace().nth(2) == Some("Z"))
    });
    if !ended {
        send_signal(pid, libc::SIGKILL);
    }
    assert!(
        ended,
        "redbike top (pid {pid}) still runs after its terminal hung up"
    );
}
