//! Draws the view from its state into a ratatui buffer: the live terminal and the
//! plain-text frame of `top --once` are the same drawing.

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style, Stylize},
    text::{Line, Span},
    widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Widget, Wrap},
};

use super::app::{App, Section, View};
use crate::schedule::timestamp;

/// Lines of the header.
const HEADER: u16 = 2;

/// A duration in seconds, short: `42s`, `3m20s`, `2h05m`, `3d04h`; negative ones too.
pub fn span(secs: i64) -> String {
    let sign = if secs < 0 { "-" } else { "" };
    let s = secs.unsigned_abs();
    let text = match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        86_400..=8_639_999 => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
        _ => format!("{}d", s / 86_400),
    };
    format!("{sign}{text}")
}

/// Seconds with a fraction, short: `0.12s`, `3.4s`, `42s`, then as [`span`].
fn seconds(secs: f64) -> String {
    match secs {
        s if s < 1.0 => format!("{s:.2}s"),
        s if s < 10.0 => format!("{s:.1}s"),
        s => span(s.round() as i64),
    }
}

/// `HH:MM:SS` UTC of a unix instant.
fn clock(ts: i64) -> String {
    let iso = timestamp::iso_utc(ts);
    iso.get(11..19).unwrap_or(&iso).to_string()
}

/// A section's table: its title, header cells, column widths and rows of
/// (job id or queue, other cells).
struct Pane {
    title: String,
    header: Vec<&'static str>,
    widths: Vec<Constraint>,
    rows: Vec<(Option<Section>, usize, Vec<String>)>,
    empty: &'static str,
}

impl Pane {
    /// Lines it needs to show every row: title, header, rows (or just the empty note).
    fn natural(&self) -> u16 {
        match self.rows.len() {
            0 => 2,
            n => 2 + n as u16,
        }
    }
}

/// Splits `total` lines between sections wanting `naturals`, one line at a time in
/// turn, so that a small terminal shows the top of every section.
fn split_heights(naturals: &[u16], total: u16) -> Vec<u16> {
    let mut got: Vec<u16> = naturals.iter().map(|n| (*n).min(3)).collect();
    let mut left = total.saturating_sub(got.iter().sum());
    while left > 0 {
        let mut gave = false;
        for (g, n) in got.iter_mut().zip(naturals) {
            if left > 0 && *g < *n {
                *g += 1;
                left -= 1;
                gave = true;
            }
        }
        if !gave {
            break;
        }
    }
    got
}

fn sections(app: &App) -> Vec<Pane> {
    let Some(s) = &app.snapshot else {
        return Vec::new();
    };
    let now = s.time;
    let queues = Pane {
        title: format!("queues ({})", s.queues.len()),
        header: vec![
            "QUEUE",
            "WAITING",
            "OLDEST",
            "RUN",
            "WRK",
            "RUNS/M",
            "FAIL/M",
            "LATE p50/p99",
        ],
        widths: vec![
            Constraint::Fill(1),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(4),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(12),
        ],
        rows: s
            .queues
            .iter()
            .map(|q| {
                let oldest = match (q.length, q.oldest_age) {
                    (0, _) => "-".to_string(),
                    (_, Some(age)) => span(age),
                    (_, None) => "?".to_string(),
                };
                let name = match q.paused_since {
                    Some(_) => format!("{} (paused)", q.queue),
                    None => q.queue.clone(),
                };
                (
                    None,
                    0,
                    vec![
                        name,
                        q.length.to_string(),
                        oldest,
                        match q.limit {
                            Some(limit) => format!("{}/{limit}", q.running),
                            None => q.running.to_string(),
                        },
                        q.workers.to_string(),
                        q.runs.runs.to_string(),
                        q.runs.failures.to_string(),
                        match (q.runs.late_p50, q.runs.late_p99) {
                            (Some(p50), Some(p99)) => format!("{}/{}", seconds(p50), seconds(p99)),
                            _ => "-".into(),
                        },
                    ],
                )
            })
            .collect(),
        empty: "no queue named or seen: use --queues A:B or `queues` in the config",
    };
    // A stale job (see crate::stale) is marked wherever it is listed.
    let job = |id: &String| match s.slow.stale.contains(id) {
        true => format!("{id} (stale)"),
        false => id.clone(),
    };
    let running = Pane {
        title: format!("running ({})", s.running_total),
        header: vec!["JOB", "ELAPSED", "TIMEOUT"],
        widths: vec![
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(8),
        ],
        rows: s
            .running
            .iter()
            .enumerate()
            .filter(|(_, r)| app.shows(&r.jobid))
            .map(|(i, r)| {
                let elapsed = r
                    .started
                    .map_or("?".into(), |t| span(now.saturating_sub(t).max(0)));
                (
                    Some(Section::Running),
                    i,
                    vec![job(&r.jobid), elapsed, span(r.timeout as i64)],
                )
            })
            .collect(),
        empty: "nothing runs",
    };
    let upcoming = Pane {
        title: format!("coming up ({} on the timeline, {} due)", s.timeline, s.due),
        header: vec!["JOB", "DUE IN", "AT (UTC)"],
        widths: vec![
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(19),
        ],
        rows: s
            .upcoming
            .iter()
            .enumerate()
            .filter(|(_, u)| app.shows(&u.jobid))
            .map(|(i, u)| {
                let at = timestamp::iso_utc(u.due).replace('T', " ");
                let at = at.trim_end_matches('Z').to_string();
                (
                    Some(Section::Upcoming),
                    i,
                    vec![job(&u.jobid), span(u.due.saturating_sub(now)), at],
                )
            })
            .collect(),
        empty: "nothing on the timeline",
    };
    let paused = Pane {
        title: format!("paused ({})", s.slow.paused_total),
        header: vec!["JOB", "SINCE", "NOTE"],
        widths: vec![
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Fill(1),
        ],
        rows: s
            .slow
            .paused
            .iter()
            .enumerate()
            .filter(|(_, p)| app.shows(&p.jobid))
            .map(|(i, p)| {
                let since = match p.since {
                    0 => "?".to_string(),
                    t => span(now.saturating_sub(t).max(0)),
                };
                (
                    Some(Section::Paused),
                    i,
                    vec![job(&p.jobid), since, p.note.clone()],
                )
            })
            .collect(),
        empty: "no job paused",
    };
    let failures = Pane {
        title: format!("recent failures ({} job(s) failed last)", s.failures_total),
        header: vec!["JOB", "OUTCOME", "AGO", "LAST OUTPUT"],
        widths: vec![
            Constraint::Fill(1),
            Constraint::Length(9),
            Constraint::Length(6),
            Constraint::Fill(1),
        ],
        rows: s
            .failures
            .iter()
            .enumerate()
            .filter(|(_, f)| app.shows(&f.jobid))
            .map(|(i, f)| {
                (
                    Some(Section::Failures),
                    i,
                    vec![
                        job(&f.jobid),
                        f.event.clone(),
                        span(now.saturating_sub(f.at).max(0)),
                        f.detail.clone(),
                    ],
                )
            })
            .collect(),
        empty: "no failure recorded",
    };
    vec![queues, running, upcoming, paused, failures]
}

/// The lines the frame needs to show everything (for `--once`).
pub fn natural_height(app: &App) -> u16 {
    let body: u16 = sections(app).iter().map(Pane::natural).sum();
    HEADER + body.max(1) + u16::from(app.interactive)
}

/// Draws the whole view into `area` of `buf`.
pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let footer = u16::from(app.interactive);
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(HEADER),
        Constraint::Fill(1),
        Constraint::Length(footer),
    ])
    .areas(area);
    header(app, head, buf);
    let sections = sections(app);
    if sections.is_empty() {
        Paragraph::new("reading ...").render(body, buf);
    } else {
        let naturals: Vec<u16> = sections.iter().map(Pane::natural).collect();
        let heights = split_heights(&naturals, body.height);
        let areas = Layout::vertical(heights.iter().map(|h| Constraint::Length(*h))).split(body);
        let selected = app.selection();
        for (section, rect) in sections.iter().zip(areas.iter()) {
            table(section, selected.as_ref(), app.interactive, *rect, buf);
        }
    }
    if app.interactive {
        footer_line(app, foot, buf);
        overlay(app, area, buf);
    }
}

fn header(app: &App, area: Rect, buf: &mut Buffer) {
    let c = &app.connection;
    let prefix = app.snapshot.as_ref().map_or("", |s| s.prefix.as_str());
    let mut first = vec![
        Span::from("redbike top").bold(),
        Span::from(format!("  prefix {prefix}  {}", c.server)),
        Span::from(format!("  {} UTC", clock(app.now))),
    ];
    if app.snapshot.as_ref().is_some_and(|s| s.halted) {
        first.push(Span::from("  HALT").red().bold().reversed());
    }
    if let Some(n) = app
        .snapshot
        .as_ref()
        .map(|s| s.slow.stale_total)
        .filter(|n| *n > 0)
    {
        first.push(Span::from(format!("  {n} STALE")).red().bold());
    }
    let second = match (c.down_since, &app.snapshot) {
        (Some(since), _) => Line::from(vec![Span::from(format!(
            "disconnected since {} ({} ago): {}",
            clock(since),
            span(app.now.saturating_sub(since)),
            c.down_reason.as_deref().unwrap_or("")
        ))
        .red()
        .bold()]),
        (None, Some(s)) => {
            let alive = format!(
                "dispatchers {}  workers {}",
                s.slow.dispatchers, s.slow.workers
            );
            Line::from(vec![
                Span::from(format!(
                    "schedules {}  timeline {} ({} due)  running {}  failed {}  ",
                    s.schedules, s.timeline, s.due, s.running_total, s.failures_total
                )),
                // No dispatcher alive: nothing is moved to the queues any more.
                if s.slow.dispatchers == 0 {
                    Span::from(alive).red().bold()
                } else {
                    Span::from(alive)
                },
            ])
        }
        (None, None) => Line::from("connecting ..."),
    };
    Paragraph::new(vec![Line::from(first), second]).render(area, buf);
}

fn table(
    s: &Pane,
    selected: Option<&super::app::JobRow>,
    interactive: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(Span::from(format!(" {} ", s.title)).bold());
    if s.rows.is_empty() {
        Paragraph::new(Line::from(s.empty).italic())
            .block(block)
            .wrap(Wrap { trim: true })
            .render(area, buf);
        return;
    }
    let picked = s.rows.iter().position(|(section, index, _)| {
        interactive && selected.is_some_and(|r| Some(r.section) == *section && r.index == *index)
    });
    // Keep the selected row in sight: scroll so that it is the last line shown.
    let visible = area.height.saturating_sub(2) as usize;
    let skip = picked.map_or(0, |p| (p + 1).saturating_sub(visible));
    let rows = s
        .rows
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(i, (_, _, cells))| {
            // Ids, queue names and statuses come from Redis: shown by the terminal rule.
            let row = Row::new(
                cells
                    .iter()
                    .map(|c| Cell::from(crate::terminal::text(c).into_owned())),
            );
            if Some(i) == picked {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        });
    Table::new(rows, s.widths.clone())
        .header(Row::new(s.header.clone()).style(Style::default().add_modifier(Modifier::DIM)))
        .block(block)
        .render(area, buf);
}

fn footer_line(app: &App, area: Rect, buf: &mut Buffer) {
    let line = match (&app.view, &app.message) {
        (View::Filter, _) => Line::from(format!("/{}_", app.filter)),
        (_, Some(message)) => Line::from(crate::terminal::text(message).into_owned()).bold(),
        _ => {
            let filter = if app.filter.is_empty() {
                String::new()
            } else {
                format!("filter {:?} (Esc clears)  ", app.filter)
            };
            Line::from(format!(
                "{filter}q quit  arrows move  / filter  Enter detail  r run now  p pause/resume  ? help"
            ))
            .dim()
        }
    };
    Paragraph::new(line).render(area, buf);
}

/// A rectangle of `w` x `h` centred in `area` (shrunk to fit).
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// The help text of `?`.
pub const HELP: &[&str] = &[
    "q, Ctrl-C        quit",
    "Up/Down, j/k     move the selection",
    "PgUp/PgDn        move by ten rows",
    "Home/End, g/G    first or last row",
    "/                filter jobs by id (Enter keeps it, Esc clears)",
    "Enter            the selected job's detail (what `tell` says)",
    "r                run the selected job now (asks first)",
    "p                pause or resume the selected job (asks first)",
    "x                kill the selected job's current run (asks first)",
    "?                this help; any key closes it",
];

fn overlay(app: &App, area: Rect, buf: &mut Buffer) {
    match &app.view {
        View::Help => {
            let rect = centred(area, 72, HELP.len() as u16 + 2);
            Clear.render(rect, buf);
            Paragraph::new(HELP.iter().map(|l| Line::from(*l)).collect::<Vec<_>>())
                .block(Block::bordered().title(" keys "))
                .render(rect, buf);
        }
        View::Detail {
            jobid,
            lines,
            scroll,
        } => {
            let rect = centred(
                area,
                area.width.saturating_sub(4),
                area.height.saturating_sub(2),
            );
            Clear.render(rect, buf);
            let text: Vec<Line> = lines
                .iter()
                .skip(*scroll)
                .map(|l| Line::from(crate::terminal::text(l).into_owned()))
                .collect();
            Paragraph::new(text)
                .block(
                    Block::bordered()
                        .title(format!(" {} ", crate::terminal::id(jobid)))
                        .title_bottom(" Esc closes, arrows scroll "),
                )
                .render(rect, buf);
        }
        View::Confirm(action) => {
            let question = crate::terminal::text(&action.question()).into_owned();
            let rect = centred(area, question.len() as u16 + 6, 5);
            Clear.render(rect, buf);
            Paragraph::new(vec![
                Line::from(question),
                Line::from(""),
                Line::from("y yes, n no"),
            ])
            .block(Block::bordered().title(" confirm "))
            .render(rect, buf);
        }
        View::Normal | View::Filter => {}
    }
}

/// The text of a buffer, one line per row, trailing spaces cut.
pub fn plain(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        for x in area.left()..area.right() {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_short() {
        assert_eq!(span(0), "0s");
        assert_eq!(span(59), "59s");
        assert_eq!(span(200), "3m20s");
        assert_eq!(span(7500), "2h05m");
        assert_eq!(span(3 * 86_400 + 4 * 3600 + 5), "3d04h");
        assert_eq!(span(-65), "-1m05s");
        assert_eq!(span(26_701 * 86_400 + 7200), "26701d");
        assert_eq!(seconds(0.123), "0.12s");
        assert_eq!(seconds(3.45), "3.5s");
        assert_eq!(seconds(75.2), "1m15s");
    }

    #[test]
    fn small_screens_show_the_top_of_every_section() {
        assert_eq!(split_heights(&[5, 20, 20, 20], 21), [5, 6, 5, 5]);
        assert_eq!(split_heights(&[2, 4, 4, 4], 100), [2, 4, 4, 4]);
        assert_eq!(split_heights(&[10, 10], 3), [3, 3]);
    }
}
