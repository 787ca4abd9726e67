//! `redbike top`: a live view of one prefix for an operator at a terminal.
//!
//! Two threads: the terminal thread draws the view and reads keys (never waiting on
//! Redis, so the screen stays alive through an outage), and a reader thread that owns
//! the Redis connection, reads a [`snapshot`] about once a second, reconnects with
//! backoff, and carries out what the keys ask (a job's detail, run now, pause). `top
//! --once`, and `top` whose stdout is not a terminal, prints one frame as plain text.

pub mod app;
pub mod render;
pub mod snapshot;

use std::{
    io::{self, IsTerminal, Write},
    sync::mpsc::{self, Receiver, RecvTimeoutError, Sender},
    time::{Duration, Instant},
};

use ratatui::{
    backend::CrosstermBackend,
    buffer::Buffer,
    crossterm::{
        cursor,
        event::{self, Event, KeyEventKind},
        execute,
        terminal::{self, EnterAlternateScreen, LeaveAlternateScreen},
    },
    layout::Rect,
    Terminal,
};
use redis::Connection;

use crate::{
    config::Config,
    error::{cannot_fix, describe_redis, is_connection_error, Error, Result},
    operator::control::{self, Killed, Paused, Ran, Resumed},
    redis::events::{Via, Who},
    redis::keys::Keys,
    redis::retry::Backoff,
    redis::store::{self, Store},
    redis::topology::{must_reconnect, Deployment, Topology},
    schedule::timestamp,
    schedule::Placement,
    shutdown::Shutdown,
};

use app::{Action, App, Effect};
use snapshot::{Plan, Slow, Snapshot, SLOW_EVERY};

/// How often the view reads Redis.
pub const REFRESH: Duration = Duration::from_secs(1);
/// How long the reader waits to connect, and for a reply, before it shows an outage.
const TIMEOUT: Duration = Duration::from_secs(3);
/// The note of a pause made with `p` (`redbike tell` shows it).
const PAUSE_NOTE: &str = "paused in redbike top";
/// Columns of a `--once` frame when `$COLUMNS` does not say.
const ONCE_WIDTH: u16 = 100;

/// What `redbike top` was asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Print one frame and exit.
    pub once: bool,
    /// Queues to show whatever they hold, besides the config's `queues`.
    pub queues: Vec<String>,
}

/// Runs `redbike top`.
pub fn run(config: &Config, opts: &Options) -> Result<()> {
    let plan = plan(config, &opts.queues)?;
    if opts.once || !io::stdout().is_terminal() {
        return print_once(config, plan);
    }
    live(config, plan)
}

/// The queues to show (the config's and `--queues`) and the timeouts of each.
fn plan(config: &Config, extra: &[String]) -> Result<Plan> {
    let mut queues: std::collections::BTreeSet<String> = extra.iter().cloned().collect();
    if let Some(text) = &config.worker.queues {
        queues.extend(crate::work::parse_queues(text)?);
    }
    queues.extend(config.limits.keys().cloned());
    Ok(Plan {
        queues,
        timeouts: config.worker.timeouts.clone(),
        default_timeout: config.default_timeout,
        limits: config.limits.clone(),
    })
}

/// How the server was found and which it is, for the header.
fn describe_server(topology: &Topology, server: &str) -> String {
    match topology.deployment {
        Deployment::Standalone => format!("standalone {server}"),
        Deployment::Sentinel => format!(
            "sentinel master {} at {server}",
            topology.master_name.as_deref().unwrap_or("?")
        ),
        Deployment::Cluster => format!("cluster node {server}"),
    }
}

/// Reads once (twice when jobs name queues not planned, so that they get figures)
/// and prints the frame.
fn print_once(config: &Config, mut plan: Plan) -> Result<()> {
    let topology = &config.redis.topology;
    let mut reached = store::reach(&config.redis, store::COMMAND_TIMEOUT)?;
    let keys = Keys::new(&config.prefix);
    let now = timestamp::now();
    let (mut snap, _) = snapshot::read(&mut reached.con, &keys, &plan, now, None)?;
    if !snap.unread_queues.is_empty() {
        plan.queues.extend(std::mem::take(&mut snap.unread_queues));
        snap = snapshot::read(&mut reached.con, &keys, &plan, now, None)?.0;
    }
    let mut app = App::new(false, now);
    app.connection.server = describe_server(topology, &reached.server);
    app.update(snap);
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 40)
        .unwrap_or(ONCE_WIDTH);
    let text = frame_text(&app, width, render::natural_height(&app));
    io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| Error::io("cannot write output", e))
}

/// The frame of `app` drawn on `width` x `height` cells, as text.
pub fn frame_text(app: &App, width: u16, height: u16) -> String {
    let area = Rect::new(0, 0, width, height);
    let mut buf = Buffer::empty(area);
    render::draw(app, area, &mut buf);
    render::plain(&buf)
}

/// What the terminal thread asks of the reader.
enum Request {
    /// What `tell` says about a job.
    Detail(String),
    /// A confirmed action.
    Act(Action),
}

/// What the reader tells the terminal thread.
enum Reply {
    /// A new snapshot, from the server described.
    Snapshot(Box<Snapshot>, String),
    /// Redis cannot be reached, or refuses the reads: since when, and why.
    Down(i64, String),
    /// The lines of a job's detail.
    Detail(String, Vec<String>),
    /// The outcome of an action, for the footer.
    Done(String),
    /// An error that retrying cannot fix, met before anything was read: exit with it.
    Fatal(Error),
}

/// The live view: until q, Ctrl-C or a stop signal.
fn live(config: &Config, plan: Plan) -> Result<()> {
    let topology = config.redis.topology.clone();
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(false)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    let (ask, requests) = mpsc::channel();
    let (tell, replies) = mpsc::channel();
    let reader = Reader {
        config: config.clone(),
        topology,
        keys: Keys::new(&config.prefix),
        plan,
        con: None,
        server: String::new(),
        retry_at: Instant::now(),
        backoff: Backoff::new(),
        down_since: None,
        worked: false,
        slow: None,
    };
    let stop = shutdown.clone();
    std::thread::Builder::new()
        .name("top-reader".into())
        .spawn(move || reader.run(&requests, &tell, &stop))
        .map_err(|e| Error::io("cannot start the reader thread", e))?;
    // Log lines on stderr would scribble over the screen; the header shows outages.
    crate::log::set_level(crate::log::Level::Error);
    Screen::enter()
        .map_err(|e| Error::io("cannot set up the terminal", e))
        .and_then(|mut screen| screen.show(&replies, &ask, &shutdown))
}

/// The terminal in raw mode on the alternate screen; put back on drop, and by the
/// panic hook that [`Screen::enter`] installs.
struct Screen {
    terminal: Terminal<CrosstermBackend<io::Stdout>>,
}

/// Leaves raw mode and the alternate screen and shows the cursor; harmless when the
/// terminal is already restored.
fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

impl Screen {
    fn enter() -> io::Result<Screen> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        let screen = Screen {
            terminal: Terminal::new(CrosstermBackend::new(io::stdout()))?,
        };
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }

    /// Draws and handles keys until asked to leave.
    fn show(
        &mut self,
        replies: &Receiver<Reply>,
        ask: &Sender<Request>,
        shutdown: &Shutdown,
    ) -> Result<()> {
        let mut app = App::new(true, timestamp::now());
        let tty = |e| Error::io("cannot use the terminal", e);
        while !shutdown.requested() {
            while let Ok(reply) = replies.try_recv() {
                match reply {
                    Reply::Snapshot(snap, server) => {
                        app.connection.server = server;
                        app.connection.down_since = None;
                        app.connection.down_reason = None;
                        app.update(*snap);
                    }
                    Reply::Down(since, why) => {
                        app.connection.down_since = Some(since);
                        app.connection.down_reason = Some(why);
                    }
                    Reply::Detail(id, lines) => app.detail(&id, lines),
                    Reply::Done(message) => app.message = Some(message),
                    Reply::Fatal(e) => return Err(e),
                }
            }
            app.now = timestamp::now();
            self.terminal
                .draw(|f| render::draw(&app, f.area(), f.buffer_mut()))
                .map_err(tty)?;
            // A short wait keeps the clock ticking and a stop signal heard at once; a
            // resize shows at the next draw, which takes the new size.
            if terminal_hung_up(Duration::from_millis(200)) {
                break;
            }
            if !event::poll(Duration::ZERO).map_err(tty)? {
                continue;
            }
            let Event::Key(key) = event::read().map_err(tty)? else {
                continue;
            };
            if key.kind == KeyEventKind::Release {
                continue;
            }
            let request = match app.key(key) {
                Effect::Quit => break,
                Effect::None => continue,
                Effect::Detail(id) => Request::Detail(id),
                Effect::Act(action) => {
                    app.message = Some(format!("{} ...", action.question()));
                    Request::Act(action)
                }
            };
            if ask.send(request).is_err() {
                break; // the reader ended; its reason is in the replies
            }
        }
        Ok(())
    }
}

/// Waits up to `timeout` for input; whether the terminal hung up (an SSH session
/// dropped, a tmux pane killed). Its input then reads end-of-file at once, for ever,
/// and a timed crossterm poll spins on it without returning, so a stop signal would
/// never be looked at: the waiting is done here, and crossterm only reads what is
/// there.
fn terminal_hung_up(timeout: Duration) -> bool {
    let mut input = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut input, 1, millis) };
    ready > 0 && input.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// The thread that talks to Redis.
struct Reader {
    config: Config,
    topology: Topology,
    keys: Keys,
    plan: Plan,
    con: Option<Connection>,
    /// How the server was found and which it is.
    server: String,
    /// No connection attempt before this instant.
    retry_at: Instant,
    backoff: Backoff,
    /// Since when reads fail.
    down_since: Option<i64>,
    /// Whether a read ever worked: until then an error retrying cannot fix ends `top`.
    worked: bool,
    /// The slow figures of the last read, and how many reads ago they were read.
    slow: Option<(Slow, u64)>,
}

impl Reader {
    fn run(mut self, requests: &Receiver<Request>, tell: &Sender<Reply>, stop: &Shutdown) {
        let mut next = Instant::now();
        while !stop.requested() {
            match requests.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Ok(request) => {
                    let acted = matches!(request, Request::Act(_));
                    let reply = self.serve(request);
                    if tell.send(reply).is_err() {
                        return;
                    }
                    if acted {
                        // Show what it did at once, pauses (a slow figure) included.
                        self.slow = None;
                        next = Instant::now();
                    }
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            next = Instant::now() + REFRESH;
            let reply = match self.refresh() {
                Ok(reply) => reply,
                Err(fatal) => {
                    let _ = tell.send(Reply::Fatal(fatal));
                    return;
                }
            };
            if tell.send(reply).is_err() {
                return;
            }
        }
    }

    /// The connection, (re)connecting when an attempt is due.
    fn connection(&mut self) -> Result<&mut Connection> {
        if self.con.is_none() {
            if Instant::now() < self.retry_at {
                return Err(Error::Input("waiting to reconnect".into()));
            }
            match store::reach(&self.config.redis, TIMEOUT) {
                Ok(reached) => {
                    let _ = reached.con.set_read_timeout(Some(TIMEOUT));
                    self.server = describe_server(&self.topology, &reached.server);
                    self.con = Some(reached.con);
                    self.backoff = Backoff::new();
                }
                Err(e) => {
                    self.retry_at = Instant::now() + self.backoff.step();
                    return Err(e);
                }
            }
        }
        self.con
            .as_mut()
            .ok_or_else(|| Error::Input("no connection".into()))
    }

    /// Reads a snapshot; `Err` only for an error that ends `top`: one that retrying
    /// cannot fix (a refused password, a missing permission), met before anything was
    /// read. Later the same error is shown and retried, as the cause may be fixed.
    fn refresh(&mut self) -> Result<Reply> {
        let now = timestamp::now();
        let (keys, plan) = (self.keys.clone(), self.plan.clone());
        // The slow figures are read every SLOW_EVERY refreshes, and after an error.
        let slow = match self.slow.take() {
            Some((slow, age)) if age + 1 < SLOW_EVERY => Some((slow, age + 1)),
            _ => None,
        };
        let outcome = self.connection().and_then(|con| {
            let carried = slow.as_ref().map(|(s, _)| s);
            snapshot::read(con, &keys, &plan, now, carried).map_err(Error::Redis)
        });
        match outcome {
            Ok((snap, _)) => {
                self.slow = Some(slow.unwrap_or_else(|| (snap.slow.clone(), 0)));
                self.worked = true;
                self.down_since = None;
                self.plan.queues.extend(snap.unread_queues.iter().cloned());
                Ok(Reply::Snapshot(Box::new(snap), self.server.clone()))
            }
            Err(e) => {
                let fatal = match &e {
                    Error::Refused { .. } => true,
                    Error::Redis(r) => cannot_fix(r).is_some(),
                    _ => false,
                };
                if fatal && !self.worked {
                    return Err(e);
                }
                if let Error::Redis(r) = &e {
                    // A lost connection, or a server no longer the one to talk to, is
                    // made anew; so is any other failed read, after the backoff.
                    if is_connection_error(r) || must_reconnect(r) || !fatal {
                        self.con = None;
                        self.retry_at = Instant::now() + self.backoff.step();
                    }
                }
                let why = match &e {
                    Error::Redis(r) => describe_redis(r),
                    Error::Unreachable { reason, .. } => format!("unreachable: {reason}"),
                    other => other.to_string(),
                };
                let since = *self.down_since.get_or_insert(now);
                Ok(Reply::Down(
                    since,
                    crate::redis::settings::mask_urls_in(&why),
                ))
            }
        }
    }

    /// Carries out a request from the keys.
    fn serve(&mut self, request: Request) -> Reply {
        let (keys, config) = (self.keys.clone(), self.config.clone());
        let con = match self.connection() {
            Ok(con) => con,
            Err(e) => {
                let why = e.to_string();
                return match request {
                    Request::Detail(id) => Reply::Detail(id, vec![format!("cannot read: {why}")]),
                    Request::Act(_) => Reply::Done(format!("not done: {why}")),
                };
            }
        };
        let mut store = Store { con, keys: &keys };
        match request {
            Request::Detail(id) => {
                let lines = match detail(&mut store, &id) {
                    Ok(lines) => lines,
                    Err(e) => vec![format!("cannot read: {e}")],
                };
                Reply::Detail(id, lines)
            }
            Request::Act(action) => Reply::Done(act(&mut store, &config, &action)),
        }
    }
}

/// What `tell` says about a job, as lines.
fn detail(store: &mut Store<'_>, jobid: &str) -> Result<Vec<String>> {
    let info = store.tell(jobid)?;
    // A struct of strings, numbers and bools always serializes.
    let json = crate::terminal::json_safe(
        serde_json::to_string_pretty(&info).expect("JobInfo serializes"),
    );
    Ok(json.lines().map(str::to_string).collect())
}

/// Carries out an action with the operator commands' own functions (`redbike run`,
/// `pause`, `resume`, `kill`); the line for the footer.
fn act(store: &mut Store<'_>, config: &Config, action: &Action) -> String {
    let now = timestamp::now();
    let who = &Who::new(config.events, Via::Top);
    let outcome = match action {
        Action::RunNow(id) => control::run_job(store, id, now, who).map(|r| {
            let what = match r.ran {
                Ran::Enqueued => "queued to run now; its schedule stays",
                Ran::AlreadyQueued => "already in its queue; nothing changed",
                Ran::Running => "running; it runs once more right after this run",
            };
            let paused = if r.paused { " (it stays paused)" } else { "" };
            let halted = if r.halted {
                "; HALT is set: nothing runs until `control RESUME`"
            } else {
                ""
            };
            format!("{id}: {what}{paused}{halted}")
        }),
        Action::Pause(id) => control::pause_job(store, id, PAUSE_NOTE, now, who).map(|p| {
            let what = match p {
                Paused::Paused => "paused",
                Paused::Running => "paused; its run finishes, then it is not placed",
                Paused::Already => "paused already; nothing changed",
            };
            format!("{id}: {what}")
        }),
        Action::Resume(id) => control::resume_job(store, config, id, now, who).map(|r| match r {
            Resumed::NotPaused => format!("{id}: was not paused; nothing changed"),
            Resumed::RunAsked => format!("{id}: resumed; the asked run comes first"),
            Resumed::Placed(Placement::Timeline(ts), _) => {
                format!("{id}: resumed; next run at {}", timestamp::iso_utc(ts))
            }
            Resumed::Placed(Placement::Enqueue, _) => format!("{id}: resumed; queued"),
            Resumed::Placed(Placement::Stop, _) => format!("{id}: resumed; stopped (STOP)"),
        }),
        Action::Kill(id) => control::kill_job(store, id, who).map(|k| {
            let what = match k {
                Killed::Asked { .. } => "its worker stops this run now; its schedule stays",
                Killed::NotRunning => "not running; nothing changed",
                Killed::Halted => "HALT is set: its workers stop their runs anyway",
                Killed::Python => "run by a Python worker, which takes no kills",
            };
            format!("{id}: {what}")
        }),
    };
    outcome.unwrap_or_else(|e| format!("not done: {e}"))
}
