//! The command line: parsing it (`args.rs`), running the subcommand it names and turning
//! errors into one line and an exit code. The subcommands are grouped by what they do:
//! jobs (`jobs.rs`), processes (`processes.rs`), reports on a prefix (`reports.rs`).
//! They only parse arguments and print; what they do is in the layers below.

/// Writes a line to stderr by the terminal rule (it may quote what Redis holds); a
/// closed stderr is no reason to panic.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($t)*);
        let _ = writeln!(std::io::stderr(), "{}", crate::terminal::text(&line));
    }};
}

mod args;
mod events;
pub mod help;
mod jobs;
mod processes;
mod reports;

pub use args::{Cli, Command, CompletionShell, HistoryFormat, WorkFlags};

use std::{
    ffi::OsString,
    io::{self, Write},
};

use clap::{CommandFactory, FromArgMatches};

use crate::{
    config::{Config, Overrides},
    error::{Error, ExitCode, Result},
    schedule::timestamp,
    schedule::ScheduleError,
};

/// Runs the command line `args` and returns the process exit code.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
    // A panic is a bug, never a user's mistake: one line, no backtrace noise.
    std::panic::set_hook(Box::new(|info| {
        say!("redbike: internal error (please report it): {info}");
    }));
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    // `--version` also names the commit (build.rs); the man pages keep the bare version.
    let parsed = Cli::command()
        .long_version(env!("REDBIKE_LONG_VERSION"))
        .try_get_matches_from(&args)
        .and_then(|mut m| {
            Cli::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut Cli::command()))
        });
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if empty_config_env(&e, &args) => {
            say!(
                "{}",
                crate::log::error_line(
                    "REDBIKE_CONFIG is set but empty (an empty line in an environment file?): \
                     name a config file in it, or unset it"
                )
            );
            return ExitCode::Usage as i32;
        }
        Err(e) => return usage_error(e),
    };
    if let Err(e) = crate::log::init(cli.verbose, cli.quiet) {
        say!("{}", crate::log::error_line(&e.to_string()));
        return ExitCode::Usage as i32;
    }
    match execute(cli) {
        Ok(code) => code as i32,
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            say!("{}", crate::log::error_line(&e.to_string()));
            e.exit_code() as i32
        }
    }
}

/// Whether clap's error is an empty `--config` that came from `$REDBIKE_CONFIG` (set to
/// "", and no `-c`/`--config` on the command line), which clap names as the flag.
fn empty_config_env(e: &clap::Error, args: &[OsString]) -> bool {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let about_config = matches!(
        e.get(ContextKind::InvalidArg),
        Some(ContextValue::String(arg)) if arg.starts_with("--config")
    );
    let flag_given = args.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        a.starts_with("--config") || (a.starts_with("-c") && !a.starts_with("--"))
    });
    e.kind() == ErrorKind::InvalidValue
        && about_config
        && !flag_given
        && std::env::var_os("REDBIKE_CONFIG").is_some_and(|v| v.is_empty())
}

/// Help and version go to stdout as clap renders them; errors become one line.
fn usage_error(e: clap::Error) -> i32 {
    if !e.use_stderr() {
        let _ = e.print();
        return 0;
    }
    say!(
        "{}",
        crate::log::error_line(&usage_line(&e.render().to_string()))
    );
    ExitCode::Usage as i32
}

/// Folds clap's rendering of a usage error into one line, keeping what names the
/// problem (the missing arguments, the possible values, a tip) and pointing at the
/// subcommand's help when the usage names it.
fn usage_line(rendered: &str) -> String {
    let mut line = String::new();
    let mut help = "redbike --help".to_string();
    for text in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(usage) = text.strip_prefix("Usage: ") {
            // `redbike set [OPTIONS] <JOBID>`: the words before the first option or value.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| {
                    !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
                .collect();
            help = format!("{} --help", words.join(" "));
        } else if text.starts_with("For more information") {
        } else if let Some(tip) = text.strip_prefix("tip: ") {
            line.push_str(&format!(" ({tip})"));
        } else if line.is_empty() {
            line.push_str(text.trim_start_matches("error: "));
        } else {
            line.push(' ');
            line.push_str(text);
        }
    }
    if line.is_empty() {
        line.push_str("invalid usage");
    }
    format!("{line}; try '{help}'")
}

fn execute(cli: Cli) -> Result<ExitCode> {
    // Completion scripts depend on nothing but the clap definitions: no config needed.
    if let Command::Completions { shell } = cli.command {
        return cmd_completions(shell);
    }
    let overrides = Overrides {
        config: cli.config,
        redis_url: cli.redis_url,
        prefix: cli.prefix,
    };
    let config = Config::load(&overrides)?;
    match cli.command {
        Command::Set {
            jobid,
            schedule,
            after,
        } => jobs::cmd_set(&config, &jobid, &schedule, after.as_deref()),
        Command::Unset { jobid } => jobs::cmd_unset(&config, &jobid),
        Command::Tell { jobid } => jobs::cmd_tell(&config, &jobid),
        Command::Run { jobid } => jobs::cmd_run(&config, &jobid),
        Command::Kill { jobid } => jobs::cmd_kill(&config, &jobid),
        Command::Backfill {
            jobid,
            from,
            to,
            max,
            cancel,
        } => match (cancel, from, to) {
            (false, Some(from), Some(to)) => jobs::cmd_backfill(&config, &jobid, &from, &to, max),
            // clap requires --from and --to unless --cancel, which conflicts with them.
            _ => jobs::cmd_cancel_backfill(&config, &jobid),
        },
        Command::Pause { jobid, queue, note } => {
            jobs::cmd_pause(&config, jobid.as_deref(), queue.as_deref(), note.as_deref())
        }
        Command::Resume { jobid, queue } => {
            jobs::cmd_resume(&config, jobid.as_deref(), queue.as_deref())
        }
        Command::HoldsLease { jobid, token } => jobs::cmd_holds_lease(&config, &jobid, &token),
        Command::Statuses { before } => reports::cmd_statuses(&config, before.as_deref()),
        Command::Schedules => reports::cmd_schedules(&config),
        Command::Control { signal } => processes::cmd_control(&config, &signal),
        Command::Next {
            schedule,
            count,
            after,
            job,
        } => jobs::cmd_next(&config, &schedule, count, after.as_deref(), job.as_deref()),
        Command::Work(flags) => processes::cmd_work(&config, flags),
        Command::Check { repair } => reports::cmd_check(&config, repair),
        Command::Load { file, after } => jobs::cmd_load(&config, &file, after.as_deref()),
        Command::Dispatch {
            schedules,
            after,
            history_limit,
            shards,
        } => {
            let config = Config {
                history_limit: history_limit.unwrap_or(config.history_limit),
                ..config
            };
            processes::cmd_dispatch(
                &config,
                schedules.as_deref(),
                after.as_deref(),
                shards.as_deref(),
            )
        }
        Command::History {
            jobid,
            count,
            failures,
            since,
            format,
        } => {
            let since = parse_ts("--since", since.as_deref(), &config)?;
            let query = crate::history::Query {
                job: jobid,
                failures,
                since,
                limit: count,
            };
            jobs::cmd_history(&config, &query, format)
        }
        Command::Events {
            follow,
            failures,
            job,
            since,
            format,
        } => events::cmd_events(&config, follow, failures, job, since.as_deref(), format),
        Command::Stats {
            format,
            queues,
            scan,
        } => reports::cmd_stats(&config, format, queues.as_deref(), scan),
        Command::Ps { format } => reports::cmd_ps(&config, format),
        Command::Top { once, queues } => reports::cmd_top(&config, once, queues.as_deref()),
        Command::Serve(flags) => crate::serve::run(&config, &flags).map(|()| ExitCode::Success),
        Command::Notify { webhook, exec } => processes::cmd_notify(&config, exec, webhook),
        Command::Ping => processes::cmd_ping(&config),
        Command::Completions { shell } => cmd_completions(shell),
    }
}

/// Parses an optional timestamp argument, naming the flag in the error.
pub(super) fn parse_ts(flag: &str, text: Option<&str>, config: &Config) -> Result<Option<i64>> {
    parse_ts_with(timestamp::parse, flag, text, config)
}

/// [`parse_ts`] with the given parser (`timestamp::parse_reference` for `next`).
pub(super) fn parse_ts_with(
    parse: fn(&str, chrono_tz::Tz) -> std::result::Result<i64, String>,
    flag: &str,
    text: Option<&str>,
    config: &Config,
) -> Result<Option<i64>> {
    text.map(|t| parse(t, config.timezone).map_err(|e| Error::Input(format!("{flag}: {e}"))))
        .transpose()
}

pub(super) fn rule_error(text: &str) -> impl Fn(crate::schedule::RuleError) -> Error + '_ {
    move |source| {
        ScheduleError::Rule {
            text: text.to_string(),
            source,
        }
        .into()
    }
}

pub(super) fn out() -> io::StdoutLock<'static> {
    io::stdout().lock()
}

pub(super) fn print_line(line: &str) -> Result<()> {
    writeln!(out(), "{line}").map_err(|e| Error::io("cannot write output", e))
}

fn cmd_completions(shell: CompletionShell) -> Result<ExitCode> {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    // clap_complete panics when its writer fails; render into memory, then write, so a
    // closed pipe is an ordinary error.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "redbike", &mut script);
    out()
        .write_all(&script)
        .map_err(|e| Error::io("cannot write output", e))?;
    Ok(ExitCode::Success)
}
