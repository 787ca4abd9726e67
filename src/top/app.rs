//! The state of the live view and what each key does to it, free of terminal and
//! Redis: a key press changes the state and may ask for work ([`Effect`]) that the
//! loop in [`super`] hands to the thread that talks to Redis.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::snapshot::Snapshot;

/// How many rows PageUp and PageDown move.
const PAGE: usize = 10;

/// An operator's action on one job, asked for with a key and confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run the job once now, keeping its schedule (`redbike run`).
    RunNow(String),
    /// Pause the job (`redbike pause`).
    Pause(String),
    /// Resume the paused job (`redbike resume`).
    Resume(String),
    /// Stop the job's current run (`redbike kill`).
    Kill(String),
}

impl Action {
    /// The question the confirmation asks.
    pub fn question(&self) -> String {
        match self {
            Action::RunNow(id) => format!("run {id} now (its schedule stays)?"),
            Action::Pause(id) => format!("pause {id}?"),
            Action::Resume(id) => format!("resume {id}?"),
            Action::Kill(id) => format!("kill the current run of {id} (its schedule stays)?"),
        }
    }
}

/// What a key press asks of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing beyond the new state.
    None,
    /// Leave the view.
    Quit,
    /// Read what `tell` says about a job, for the detail view.
    Detail(String),
    /// Carry out a confirmed action.
    Act(Action),
}

/// What takes the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// The lists, with a selected job.
    Normal,
    /// Typing the filter after `/`.
    Filter,
    /// The key help (`?`).
    Help,
    /// A job's detail (Enter), scrolled by `scroll` lines; empty while it is read.
    Detail {
        /// The job id.
        jobid: String,
        /// The lines to show.
        lines: Vec<String>,
        /// Lines scrolled past.
        scroll: usize,
    },
    /// Waiting for y or n.
    Confirm(Action),
}

/// Which list a job row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Running jobs.
    Running,
    /// The next jobs due.
    Upcoming,
    /// Paused jobs.
    Paused,
    /// Recent failures.
    Failures,
}

/// A selectable row: a job in one of the lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Its list.
    pub section: Section,
    /// Its index in that list of the snapshot.
    pub index: usize,
    /// The job id.
    pub jobid: String,
}

/// Where the view is connected, and since when it is not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Connection {
    /// How the server was found and which it is, e.g. `standalone 127.0.0.1:6379`.
    pub server: String,
    /// Since when Redis cannot be reached (unix seconds), while it cannot.
    pub down_since: Option<i64>,
    /// Why, while it cannot.
    pub down_reason: Option<String>,
}

/// The whole state of the view.
#[derive(Debug, Clone)]
pub struct App {
    /// The last snapshot read (kept through an outage).
    pub snapshot: Option<Snapshot>,
    /// The connection's state.
    pub connection: Connection,
    /// The clock shown, unix seconds.
    pub now: i64,
    /// The selected row among [`App::rows`].
    pub selected: usize,
    /// Only jobs whose id contains this are listed.
    pub filter: String,
    /// What takes the keys.
    pub view: View,
    /// The outcome of the last action, shown in the footer until the next key.
    pub message: Option<String>,
    /// Whether this is the live view (with a footer of keys) or one printed frame.
    pub interactive: bool,
}

impl App {
    /// A view with nothing read yet.
    pub fn new(interactive: bool, now: i64) -> App {
        App {
            snapshot: None,
            connection: Connection::default(),
            now,
            selected: 0,
            filter: String::new(),
            view: View::Normal,
            message: None,
            interactive,
        }
    }

    /// Whether a job id passes the filter.
    pub fn shows(&self, jobid: &str) -> bool {
        jobid.contains(self.filter.as_str())
    }

    /// The selectable rows in screen order: running, coming up, paused, failures.
    pub fn rows(&self) -> Vec<JobRow> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        let running = s.running.iter().map(|r| (Section::Running, &r.jobid));
        let upcoming = s.upcoming.iter().map(|u| (Section::Upcoming, &u.jobid));
        let paused = s.slow.paused.iter().map(|p| (Section::Paused, &p.jobid));
        let failures = s.failures.iter().map(|f| (Section::Failures, &f.jobid));
        let mut rows = Vec::new();
        for (section, list) in [
            (Section::Running, running.collect::<Vec<_>>()),
            (Section::Upcoming, upcoming.collect()),
            (Section::Paused, paused.collect()),
            (Section::Failures, failures.collect()),
        ] {
            for (index, (_, id)) in list.into_iter().enumerate() {
                if self.shows(id) {
                    rows.push(JobRow {
                        section,
                        index,
                        jobid: id.clone(),
                    });
                }
            }
        }
        rows
    }

    /// The selected row, if any.
    pub fn selection(&self) -> Option<JobRow> {
        let rows = self.rows();
        rows.get(self.selected.min(rows.len().saturating_sub(1)))
            .cloned()
    }

    /// Takes a new snapshot, keeping the same job selected when it is still listed.
    pub fn update(&mut self, snapshot: Snapshot) {
        let before = self.selection();
        self.snapshot = Some(snapshot);
        let rows = self.rows();
        if let Some(b) = before {
            if let Some(i) = rows
                .iter()
                .position(|r| r.section == b.section && r.jobid == b.jobid)
                .or_else(|| rows.iter().position(|r| r.jobid == b.jobid))
            {
                self.selected = i;
            }
        }
        self.selected = self.selected.min(rows.len().saturating_sub(1));
    }

    /// Whether a job is paused, as the last snapshot says.
    pub fn is_paused(&self, jobid: &str) -> bool {
        self.snapshot
            .as_ref()
            .is_some_and(|s| s.slow.paused.iter().any(|p| p.jobid == jobid))
    }

    /// Handles one key press.
    pub fn key(&mut self, key: KeyEvent) -> Effect {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            return Effect::Quit;
        }
        match self.view.clone() {
            View::Normal => self.normal_key(key),
            View::Filter => {
                match key.code {
                    KeyCode::Enter => self.view = View::Normal,
                    KeyCode::Esc => {
                        self.filter.clear();
                        self.view = View::Normal;
                    }
                    KeyCode::Backspace => {
                        self.filter.pop();
                    }
                    KeyCode::Char(c) if !c.is_control() => self.filter.push(c),
                    _ => {}
                }
                self.selected = 0;
                Effect::None
            }
            View::Help => {
                if key.code == KeyCode::Char('q') {
                    return Effect::Quit;
                }
                self.view = View::Normal;
                Effect::None
            }
            View::Detail {
                jobid,
                lines,
                scroll,
            } => {
                let scroll = match key.code {
                    KeyCode::Char('q') => return Effect::Quit,
                    KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
                    KeyCode::Down | KeyCode::Char('j') => {
                        (scroll + 1).min(lines.len().saturating_sub(1))
                    }
                    KeyCode::PageUp => scroll.saturating_sub(PAGE),
                    KeyCode::PageDown => (scroll + PAGE).min(lines.len().saturating_sub(1)),
                    _ => {
                        self.view = View::Normal;
                        return Effect::None;
                    }
                };
                self.view = View::Detail {
                    jobid,
                    lines,
                    scroll,
                };
                Effect::None
            }
            View::Confirm(action) => {
                self.view = View::Normal;
                match key.code {
                    KeyCode::Char('y' | 'Y') => Effect::Act(action),
                    _ => {
                        self.message = Some("cancelled".into());
                        Effect::None
                    }
                }
            }
        }
    }

    fn normal_key(&mut self, key: KeyEvent) -> Effect {
        self.message = None;
        let last = self.rows().len().saturating_sub(1);
        let selected = self.selected.min(last);
        match key.code {
            KeyCode::Char('q') => return Effect::Quit,
            KeyCode::Up | KeyCode::Char('k') => self.selected = selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected = (selected + 1).min(last),
            KeyCode::PageUp => self.selected = selected.saturating_sub(PAGE),
            KeyCode::PageDown => self.selected = (selected + PAGE).min(last),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = last,
            KeyCode::Char('/') => self.view = View::Filter,
            KeyCode::Char('?') => self.view = View::Help,
            KeyCode::Esc => self.filter.clear(),
            KeyCode::Enter => {
                if let Some(row) = self.selection() {
                    self.view = View::Detail {
                        jobid: row.jobid.clone(),
                        lines: vec!["reading ...".into()],
                        scroll: 0,
                    };
                    return Effect::Detail(row.jobid);
                }
            }
            KeyCode::Char('r') => {
                if let Some(row) = self.selection() {
                    self.view = View::Confirm(Action::RunNow(row.jobid));
                }
            }
            KeyCode::Char('x') => {
                if let Some(row) = self.selection() {
                    self.view = View::Confirm(Action::Kill(row.jobid));
                }
            }
            KeyCode::Char('p') => {
                if let Some(row) = self.selection() {
                    let action = if self.is_paused(&row.jobid) {
                        Action::Resume(row.jobid)
                    } else {
                        Action::Pause(row.jobid)
                    };
                    self.view = View::Confirm(action);
                }
            }
            _ => {}
        }
        Effect::None
    }

    /// Shows what was read for the detail view of `jobid`, if it is still open.
    pub fn detail(&mut self, jobid: &str, lines: Vec<String>) {
        if let View::Detail { jobid: open, .. } = &self.view {
            if open == jobid {
                self.view = View::Detail {
                    jobid: jobid.to_string(),
                    lines,
                    scroll: 0,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::snapshot::{Failure, Running, Upcoming};

    fn press(app: &mut App, code: KeyCode) -> Effect {
        app.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn app() -> App {
        let mut app = App::new(true, 100);
        app.update(Snapshot {
            running: vec![Running {
                jobid: "r:A".into(),
                started: Some(90),
                timeout: 60,
            }],
            upcoming: vec![
                Upcoming {
                    jobid: "u1:B".into(),
                    due: 200,
                },
                Upcoming {
                    jobid: "u2:A".into(),
                    due: 300,
                },
            ],
            failures: vec![Failure {
                jobid: "f:B".into(),
                event: "DIE".into(),
                at: 50,
                detail: String::new(),
            }],
            ..Snapshot::default()
        });
        app
    }

    #[test]
    fn arrows_walk_the_lists_in_screen_order_and_stop_at_the_ends() {
        let mut app = app();
        let ids = |app: &App| app.selection().map(|r| r.jobid);
        assert_eq!(ids(&app).as_deref(), Some("r:A"));
        press(&mut app, KeyCode::Up);
        assert_eq!(ids(&app).as_deref(), Some("r:A"));
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Down);
        assert_eq!(ids(&app).as_deref(), Some("u2:A"));
        press(&mut app, KeyCode::PageDown);
        assert_eq!(ids(&app).as_deref(), Some("f:B"));
        press(&mut app, KeyCode::Home);
        assert_eq!(ids(&app).as_deref(), Some("r:A"));
    }

    #[test]
    fn the_filter_narrows_every_list_and_esc_clears_it() {
        let mut app = app();
        press(&mut app, KeyCode::Char('/'));
        for c in ":B".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(press(&mut app, KeyCode::Enter), Effect::None);
        let ids: Vec<String> = app.rows().into_iter().map(|r| r.jobid).collect();
        assert_eq!(ids, ["u1:B", "f:B"]);
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.rows().len(), 4);
    }

    #[test]
    fn actions_wait_for_a_yes() {
        let mut app = app();
        press(&mut app, KeyCode::Down);
        assert_eq!(press(&mut app, KeyCode::Char('r')), Effect::None);
        assert_eq!(app.view, View::Confirm(Action::RunNow("u1:B".into())));
        assert_eq!(
            press(&mut app, KeyCode::Char('y')),
            Effect::Act(Action::RunNow("u1:B".into()))
        );
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(press(&mut app, KeyCode::Char('n')), Effect::None);
        assert_eq!(app.view, View::Normal);
        assert_eq!(app.message.as_deref(), Some("cancelled"));
        press(&mut app, KeyCode::Char('x'));
        assert_eq!(app.view, View::Confirm(Action::Kill("u1:B".into())));
        assert_eq!(
            press(&mut app, KeyCode::Char('y')),
            Effect::Act(Action::Kill("u1:B".into()))
        );
    }

    #[test]
    fn p_resumes_a_paused_job_and_pauses_any_other() {
        let mut app = app();
        let mut s = app.snapshot.clone().unwrap();
        s.slow.paused.push(crate::top::snapshot::PausedJob {
            jobid: "z:A".into(),
            since: 10,
            note: String::new(),
        });
        app.update(s);
        press(&mut app, KeyCode::End);
        assert_eq!(app.selection().unwrap().jobid, "f:B");
        press(&mut app, KeyCode::Up);
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(app.view, View::Confirm(Action::Resume("z:A".into())));
        press(&mut app, KeyCode::Char('n'));
        press(&mut app, KeyCode::Home);
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(app.view, View::Confirm(Action::Pause("r:A".into())));
    }

    #[test]
    fn q_and_ctrl_c_quit_but_q_is_a_letter_in_the_filter() {
        let mut app = app();
        press(&mut app, KeyCode::Char('/'));
        assert_eq!(press(&mut app, KeyCode::Char('q')), Effect::None);
        assert_eq!(app.filter, "q");
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.key(ctrl_c), Effect::Quit);
        press(&mut app, KeyCode::Enter);
        assert_eq!(press(&mut app, KeyCode::Char('q')), Effect::Quit);
    }

    #[test]
    fn the_selection_follows_its_job_across_refreshes() {
        let mut app = app();
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Down); // u2:A
        let mut s = app.snapshot.clone().unwrap();
        s.upcoming.remove(0);
        app.update(s);
        assert_eq!(app.selection().unwrap().jobid, "u2:A");
    }
}
