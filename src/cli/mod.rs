//! The command line: clap definitions and one function per subcommand.

pub mod help;

use std::{
    ffi::OsString,
    io::{self, Write},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::{
    config::{Config, OnFailure, Overrides},
    dispatch::dispatcher,
    dispatch::timefile,
    error::{Error, ExitCode, Result},
    jitter, jobid, limits,
    operator::check,
    operator::control,
    operator::csvio::{SortedCsv, SPILL_ROWS},
    operator::loader,
    operator::ps,
    operator::stats,
    redis::hazards::{self, Probe},
    redis::registry,
    redis::store::{with_store, PlaceItem, Placed},
    schedule::timestamp,
    schedule::{Placement, Schedule, ScheduleError},
    shard,
    shutdown::Shutdown,
    status::Status,
    work,
    work::runner,
};

/// A cron dispatcher for pools of distributed workers, built on Redis.
#[derive(Debug, Parser)]
#[command(
    name = "redbike",
    version,
    about,
    long_about = help::MAIN,
    after_long_help = help::MAIN_AFTER
)]
pub struct Cli {
    /// Config file (TOML) [default: ./.redbike.conf when it exists]
    #[arg(
        short,
        long,
        env = "REDBIKE_CONFIG",
        global = true,
        value_name = "FILE"
    )]
    pub config: Option<PathBuf>,
    /// `--redis-url` (its help text is set apart: rustdoc would read its brackets as links).
    #[arg(
        help = "Redis URL, beats the config file (redis://[user:password@]host[:port][/db])",
        long,
        env = "REDBIKE_REDIS_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL"
    )]
    pub redis_url: Option<String>,
    /// Key prefix, beats the config file [default: redbike]
    #[arg(long, env = "REDBIKE_PREFIX", global = true, value_name = "PREFIX")]
    pub prefix: Option<String>,
    /// Log more (repeat for more)
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Log less (repeat for less)
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub quiet: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `work` flags, each beating its config key.
#[derive(Debug, clap::Args)]
pub struct WorkFlags {
    /// Queue weighting, e.g. A:A:B works A twice for each B [default: `queues` in the config]
    pub queues: Option<String>,
    /// Jobs run at once, 1..=1024, over every shard served [default: `concurrency` in
    /// the config, else 1]
    #[arg(short = 'j', long, value_name = "N", value_parser = limits::arg::concurrency,
          allow_negative_numbers = true)]
    pub concurrency: Option<usize>,
    /// Seconds a job may run, for every queue, 1..=31536000 (a year) [default: per-queue
    /// `timeouts`, else `default-timeout`]
    #[arg(long, value_name = "SECS", value_parser = limits::arg::timeout,
          allow_negative_numbers = true)]
    pub timeout: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL when a job is stopped, 1..=86400; a vanished
    /// worker's jobs are recovered fence-after + grace + 2 s after their last
    /// confirmation [default: 5]
    #[arg(long, value_name = "SECS", value_parser = limits::arg::grace,
          allow_negative_numbers = true)]
    pub grace: Option<u64>,
    /// Seconds a running job may go unconfirmed to Redis (an outage, a partition, a
    /// frozen worker) before it is stopped, 3..=86400; recovery of a vanished worker's
    /// jobs waits as much longer [default: `fence-after` in the config, else 35]
    #[arg(long, value_name = "SECS", value_parser = limits::arg::fence_after,
          allow_negative_numbers = true)]
    pub fence_after: Option<u64>,
    /// What a failed job does: hold (leave it, as 0.13.1) or reschedule [default: reschedule]
    #[arg(long, value_enum, value_name = "WHAT")]
    pub on_failure: Option<OnFailure>,
    /// Longest line of a job's output logged, for every queue; longer ones are cut (64 to 1048576) [default: `output-line-bytes` in the config, else 8192]
    #[arg(long, value_name = "BYTES", value_parser = limits::arg::output_line_bytes,
          allow_negative_numbers = true)]
    pub output_line_bytes: Option<u64>,
    /// Lines of a run's output logged, for every queue (0 to 1000000000) [default: `output-log-lines` in the config, else 10000]
    #[arg(long, value_name = "LINES", value_parser = limits::arg::output_log_lines,
          allow_negative_numbers = true)]
    pub output_log_lines: Option<u64>,
    /// Bytes of a run's output logged, for every queue (0 to 1099511627776) [default: `output-log-bytes` in the config, else 1048576]
    #[arg(long, value_name = "BYTES", value_parser = limits::arg::output_log_bytes,
          allow_negative_numbers = true)]
    pub output_log_bytes: Option<u64>,
    /// History entries kept per job, 0..=10000; 0 writes no history at all
    /// [default: `history-limit` in the config, else 20]
    #[arg(long, value_name = "N", value_parser = limits::arg::history_limit,
          allow_negative_numbers = true)]
    pub history_limit: Option<u64>,
    /// Serve only these shards of a prefix split into shards, e.g. 0,3 [default: every
    /// shard]; -j is shared out among them and bounds the jobs run at once over all
    #[arg(long, value_name = "LIST")]
    pub shards: Option<String>,
    /// The command to run per job (after `--`); the job id is appended
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How `redbike history` prints its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    /// RFC 4180 CSV with a header row.
    Csv,
    /// One JSON array of entry objects.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Store a job's schedule and place the job (timeline, queue or stopped)
    #[command(after_long_help = help::SCHEDULES)]
    Set {
        /// The job id; the part after its last ':' names its queue
        jobid: String,
        /// NOW, AT:TIMESTAMP, CONTINUE, STOP, an RRULE such as FREQ=DAILY;BYHOUR=9, or a
        /// cron line such as "CRON:0 9 * * MON-FRI"
        schedule: String,
        /// Reference instant for the next run [default: the timefile's time, else now]
        #[arg(short, long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        after: Option<String>,
    },
    /// Forget a job (a running job finishes first, then is dropped)
    Unset {
        /// The job id
        jobid: String,
    },
    /// Run a job once as soon as a worker is free, keeping its schedule
    #[command(after_long_help = help::RUN)]
    Run {
        /// The job id
        jobid: String,
    },
    /// Pause a job (keep its schedule, take it out of circulation), or a queue with --queue
    #[command(after_long_help = help::PAUSE)]
    Pause {
        /// The job id
        #[arg(required_unless_present = "queue", conflicts_with = "queue")]
        jobid: Option<String>,
        /// Pause this queue instead: redbike workers stop claiming from it
        #[arg(long, value_name = "QUEUE")]
        queue: Option<String>,
        /// Why, for whoever looks later (tell, check, stats); at most 1024 bytes
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Resume a paused job (placed per its schedule from now), or a queue with --queue
    #[command(after_long_help = help::RESUME)]
    Resume {
        /// The job id
        #[arg(required_unless_present = "queue", conflicts_with = "queue")]
        jobid: Option<String>,
        /// Resume this queue instead: its redbike workers claim from it again
        #[arg(long, value_name = "QUEUE")]
        queue: Option<String>,
    },
    /// Show what is known about a job, as JSON
    Tell {
        /// The job id
        jobid: String,
    },
    /// For a job's own command: exit 0 if its run still holds the job's lease, 1 if not
    /// (another run may be under way: refuse to write)
    #[command(after_long_help = help::HOLDS_LEASE)]
    HoldsLease {
        /// The job id
        #[arg(env = "REDBIKE_JOBID")]
        jobid: String,
        /// The run's fencing token
        #[arg(env = "REDBIKE_FENCING_TOKEN")]
        token: String,
    },
    /// Print statuses as CSV rows JOBID,EVENT,TIMESTAMP, sorted by job id
    Statuses {
        /// Only statuses at or before this time [default: now]
        #[arg(short, long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        before: Option<String>,
    },
    /// Print schedules as CSV rows JOBID,SCHEDULE, sorted by job id
    #[command(after_long_help = help::BACKUP)]
    Schedules,
    /// Signal dispatchers and workers: HALT stops them, RESUME clears HALT
    Control {
        /// HALT or RESUME (case-insensitive)
        signal: String,
    },
    /// Set many jobs from a CSV file of JOBID,SCHEDULE rows (all rows checked first)
    ///
    /// `redbike schedules > backup.csv` then `redbike load backup.csv` restores a
    /// prefix: see redbike-schedules(1) for what a backup keeps.
    ///
    /// The file is read twice, and held in memory a row at a time: every row is
    /// checked before the first is written (a bad row writes nothing), then the rows
    /// are written in batches of 1,000. Standard input, a pipe or a FIFO is copied to
    /// an anonymous temporary file (in TMPDIR) as it is read the first time. A file
    /// that changes between the two readings stops the load (exit 1, saying how many
    /// jobs were written).
    #[command(after_long_help = help::SCHEDULES)]
    Load {
        /// The CSV file (RFC 4180; `-` for standard input)
        file: PathBuf,
        /// Reference instant for next runs [default: the timefile's time, else now]
        #[arg(short, long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        after: Option<String>,
    },
    /// Run the dispatcher: move due jobs from the timeline into their work queues
    #[command(after_long_help = help::DISPATCH)]
    Dispatch {
        /// Set the jobs of this CSV file (JOBID,SCHEDULE rows) before dispatching begins
        #[arg(short, long, value_name = "FILE.csv")]
        schedules: Option<PathBuf>,
        /// Point in time of the first pass, and reference instant for --schedules
        /// [default: the timefile's time, else now]
        #[arg(short, long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        after: Option<String>,
        /// History entries kept per job by recoveries and skips, 0..=10000; 0 writes
        /// none [default: `history-limit` in the config, else 20]
        #[arg(long, value_name = "N", value_parser = limits::arg::history_limit,
          allow_negative_numbers = true)]
        history_limit: Option<u64>,
        /// Serve only these shards of a prefix split into shards, e.g. 0,3 [default: every shard]
        #[arg(long, value_name = "LIST")]
        shards: Option<String>,
    },
    /// Run a worker: claim jobs from weighted queues and run COMMAND JOBID for each
    #[command(after_long_help = help::WORK)]
    Work(WorkFlags),
    /// Check the prefix for jobs out of circulation and inconsistent keys; CSV rows
    /// KIND,JOBID,DETAIL on stdout, a summary on stderr, exit 1 when anything is wrong
    #[command(after_long_help = help::CHECK)]
    Check {
        /// Fix what is found (idempotent; safe while dispatchers and workers run)
        #[arg(long)]
        repair: bool,
    },
    /// Preview the next run times of a schedule (does not touch Redis)
    #[command(after_long_help = help::SCHEDULES)]
    Next {
        /// The schedule: NOW, AT:TIMESTAMP, CONTINUE, STOP, an RRULE or CRON:LINE
        schedule: String,
        /// How many run times, 1..=100000
        #[arg(short = 'n', long, default_value_t = 5, value_name = "COUNT",
              value_parser = limits::arg::count, allow_negative_numbers = true)]
        count: usize,
        /// Start after this instant, 1900..=9999 [default: now]
        #[arg(short, long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        after: Option<String>,
        /// The runs of this job: with its queue's jitter (config `[redbike.jitter]`)
        #[arg(long, value_name = "JOBID")]
        job: Option<String>,
    },
    /// Print the run history, newest first: one job's, or every job's recent runs, as
    /// CSV (header row: see below) or JSON
    #[command(after_long_help = help::HISTORY)]
    History {
        /// The job id [default: every job's recent runs]
        jobid: Option<String>,
        /// At most this many entries, 1..=1000000
        #[arg(short = 'n', long, value_name = "N", value_parser = limits::arg::history_count,
              allow_negative_numbers = true)]
        count: Option<usize>,
        /// Only failures (every outcome but ok, backoff, stopped and unset)
        #[arg(long)]
        failures: bool,
        /// Only entries that ended at or after this time
        #[arg(long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        since: Option<String>,
        /// Output format
        #[arg(long, value_enum, default_value_t = HistoryFormat::Csv, value_name = "FORMAT")]
        format: HistoryFormat,
    },
    /// Print figures about the prefix: queues, timeline, running jobs, statuses
    #[command(after_long_help = help::STATS)]
    Stats {
        /// Output format: text for people, json, or prometheus for node_exporter's textfile collector
        #[arg(long, value_enum, default_value_t = stats::Format::Text, value_name = "FORMAT")]
        format: stats::Format,
        /// Queues to report on, e.g. A:B [default: `queues` in the config]
        #[arg(long, value_name = "QUEUES")]
        queues: Option<String>,
        /// Also find every queue (SCAN of the whole keyspace) and count jobs per status
        /// event (HSCAN of the statuses); their cost grows with the data
        #[arg(long)]
        scan: bool,
    },
    /// List the dispatchers and workers alive (registered and heart-beating)
    #[command(after_long_help = help::PS)]
    Ps {
        /// Output format: table for people, csv or json for scripts
        #[arg(long, value_enum, default_value_t = ps::Format::Table, value_name = "FORMAT")]
        format: ps::Format,
    },
    /// A live view of the prefix: queues, running jobs, the next due, failures
    #[command(after_long_help = help::TOP)]
    Top {
        /// Print one frame as plain text and exit (what runs when stdout is not a terminal)
        #[arg(long)]
        once: bool,
        /// Queues to show besides those of the config and of the jobs listed, e.g. A:B
        #[arg(long, value_name = "QUEUES")]
        queues: Option<String>,
    },
    /// Connect with the effective settings and print the server, role, version and
    /// latency reached (to debug TLS, ACL, Sentinel and Cluster set-ups)
    #[command(after_long_help = help::PING)]
    Ping,
    /// Print a shell completion script
    #[command(after_long_help = help::COMPLETIONS)]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

/// The shells `redbike completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    /// bash (with the bash-completion package)
    Bash,
    /// zsh
    Zsh,
    /// fish
    Fish,
}

/// Writes a line to stderr by the terminal rule (it may quote what Redis holds); a
/// closed stderr is no reason to panic.
macro_rules! say {
    ($($t:tt)*) => {{
        let line = format!($($t)*);
        let _ = writeln!(io::stderr(), "{}", crate::terminal::text(&line));
    }};
}

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
        } => cmd_set(&config, &jobid, &schedule, after.as_deref()),
        Command::Unset { jobid } => cmd_unset(&config, &jobid),
        Command::Tell { jobid } => cmd_tell(&config, &jobid),
        Command::Run { jobid } => cmd_run(&config, &jobid),
        Command::Pause { jobid, queue, note } => {
            cmd_pause(&config, jobid.as_deref(), queue.as_deref(), note.as_deref())
        }
        Command::Resume { jobid, queue } => cmd_resume(&config, jobid.as_deref(), queue.as_deref()),
        Command::HoldsLease { jobid, token } => cmd_holds_lease(&config, &jobid, &token),
        Command::Statuses { before } => cmd_statuses(&config, before.as_deref()),
        Command::Schedules => cmd_schedules(&config),
        Command::Control { signal } => cmd_control(&config, &signal),
        Command::Next {
            schedule,
            count,
            after,
            job,
        } => cmd_next(&config, &schedule, count, after.as_deref(), job.as_deref()),
        Command::Work(flags) => cmd_work(&config, flags),
        Command::Check { repair } => cmd_check(&config, repair),
        Command::Load { file, after } => cmd_load(&config, &file, after.as_deref()),
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
            cmd_dispatch(
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
            cmd_history(&config, &query, format)
        }
        Command::Stats {
            format,
            queues,
            scan,
        } => cmd_stats(&config, format, queues.as_deref(), scan),
        Command::Ps { format } => cmd_ps(&config, format),
        Command::Top { once, queues } => cmd_top(&config, once, queues.as_deref()),
        Command::Ping => cmd_ping(&config),
        Command::Completions { shell } => cmd_completions(shell),
    }
}

/// Parses an optional timestamp argument, naming the flag in the error.
fn parse_ts(flag: &str, text: Option<&str>, config: &Config) -> Result<Option<i64>> {
    parse_ts_with(timestamp::parse, flag, text, config)
}

/// [`parse_ts`] with the given parser (`timestamp::parse_reference` for `next`).
fn parse_ts_with(
    parse: fn(&str, chrono_tz::Tz) -> std::result::Result<i64, String>,
    flag: &str,
    text: Option<&str>,
    config: &Config,
) -> Result<Option<i64>> {
    text.map(|t| parse(t, config.timezone).map_err(|e| Error::Input(format!("{flag}: {e}"))))
        .transpose()
}

fn rule_error(text: &str) -> impl Fn(crate::schedule::RuleError) -> Error + '_ {
    move |source| {
        ScheduleError::Rule {
            text: text.to_string(),
            source,
        }
        .into()
    }
}

fn out() -> io::StdoutLock<'static> {
    io::stdout().lock()
}

fn print_line(line: &str) -> Result<()> {
    writeln!(out(), "{line}").map_err(|e| Error::io("cannot write output", e))
}

fn cmd_set(config: &Config, id: &str, text: &str, after: Option<&str>) -> Result<ExitCode> {
    jobid::validate(id)?;
    let schedule = Schedule::parse_new(text)?;
    let after = parse_ts("--after", after, config)?;
    let config = &shard::checked_for_job(config, id)?;
    let reference = timefile::reference_for_set(after, &config.timefile)?;
    let offset = jitter::offset_in(&config.jitter, id);
    let placement = jitter::placement(&schedule, reference, config.timezone, offset)
        .map_err(rule_error(text))?;
    let item = PlaceItem::new(id, &schedule, text, placement);
    let probe = Probe::of(&config.redis);
    let placed = with_store(&config.redis, |store| {
        hazards::before_writing(store.con, &probe, 1)?;
        store
            .place(&item, timestamp::now())
            .map_err(|e| loader::written_before(e, 0, 1))
    })?;
    print_line(&describe_placement(id, placement, placed))?;
    Ok(ExitCode::Success)
}

/// The line `set` prints.
fn describe_placement(id: &str, placement: Placement, placed: Placed) -> String {
    let shown = crate::terminal::id(id);
    match (placement, placed) {
        // Before the placement: a paused job's schedule is stored, never placed.
        (_, Placed::Paused) => {
            format!("{shown}: schedule stored; the job stays paused (`redbike resume {shown}` places it)")
        }
        (Placement::Timeline(ts), _) => {
            format!("{shown}: next run at {ts} ({})", timestamp::iso_utc(ts))
        }
        (_, Placed::Enqueued) => format!("{shown}: enqueued"),
        (_, Placed::AlreadyQueued) => format!("{shown}: already in its queue"),
        (_, Placed::Running) => {
            format!("{shown}: running now; it will run again when this run ends")
        }
        _ => format!("{shown}: stopped"),
    }
}

fn cmd_run(config: &Config, id: &str) -> Result<ExitCode> {
    jobid::validate_placeable(id)?;
    let shown = crate::terminal::id(id);
    let config = &shard::checked_for_job(config, id)?;
    let report = with_store(&config.redis, |store| {
        control::run_job(store, id, timestamp::now())
    })?;
    let stays = if report.paused {
        "; it stays paused"
    } else {
        ""
    };
    print_line(&match report.ran {
        control::Ran::Enqueued => {
            format!("{shown}: enqueued; after the run it goes back per its schedule{stays}")
        }
        control::Ran::AlreadyQueued => format!("{shown}: already in its queue; nothing changed"),
        control::Ran::Running => format!(
            "{shown}: running now; it runs once more right after this run{stays} (a Python worker's run ignores this)"
        ),
    })?;
    if report.halted {
        say!("redbike: the prefix is halted (control HALT): nothing runs until `redbike control RESUME`");
    }
    Ok(ExitCode::Success)
}

/// The longest `--note` accepted, in bytes.
const MAX_NOTE_BYTES: usize = 1024;

fn cmd_pause(
    config: &Config,
    id: Option<&str>,
    queue: Option<&str>,
    note: Option<&str>,
) -> Result<ExitCode> {
    let note = note.unwrap_or_default();
    if note.len() > MAX_NOTE_BYTES {
        return Err(Error::Input(format!(
            "--note is {} bytes long; the limit is {MAX_NOTE_BYTES}",
            note.len()
        )));
    }
    let now = timestamp::now();
    if let Some(q) = queue {
        control::validate_queue(q)?;
        let shown_q = crate::terminal::id(q);
        let mut added = false;
        for config in shard::checked_all(config)? {
            added |= with_store(&config.redis, |store| {
                control::pause_queue(store, q, note, now)
            })?;
        }
        print_line(&if added {
            format!("queue {shown_q}: paused; redbike workers stop claiming from it (jobs keep arriving in it)")
        } else {
            format!("queue {shown_q}: already paused; nothing changed")
        })?;
        return Ok(ExitCode::Success);
    }
    // clap requires the job id when --queue is absent.
    let id = id.unwrap_or_default();
    jobid::validate_stored(id)?;
    let shown = crate::terminal::id(id);
    let config = &shard::checked_for_job(config, id)?;
    let paused = with_store(&config.redis, |store| {
        control::pause_job(store, id, note, now)
    })?;
    print_line(&match paused {
        control::Paused::Paused => {
            format!("{shown}: paused; its schedule is kept (`redbike resume {shown}` places it)")
        }
        control::Paused::Running => {
            format!("{shown}: paused; its current run finishes, then it is not placed")
        }
        control::Paused::Already => format!("{shown}: already paused; nothing changed"),
    })?;
    Ok(ExitCode::Success)
}

fn cmd_resume(config: &Config, id: Option<&str>, queue: Option<&str>) -> Result<ExitCode> {
    if let Some(q) = queue {
        control::validate_queue(q)?;
        let shown_q = crate::terminal::id(q);
        let mut removed = false;
        for config in shard::checked_all(config)? {
            removed |= with_store(&config.redis, |store| control::resume_queue(store, q))?;
        }
        print_line(&if removed {
            format!("queue {shown_q}: resumed; its workers claim from it again")
        } else {
            format!("queue {shown_q}: not paused; nothing changed")
        })?;
        return Ok(ExitCode::Success);
    }
    // clap requires the job id when --queue is absent.
    let id = id.unwrap_or_default();
    jobid::validate_placeable(id)?;
    let shown = crate::terminal::id(id);
    let config = &shard::checked_for_job(config, id)?;
    let resumed = with_store(&config.redis, |store| {
        control::resume_job(store, config, id, timestamp::now())
    })?;
    print_line(&match resumed {
        control::Resumed::NotPaused => format!("{shown}: not paused; nothing changed"),
        control::Resumed::RunAsked => format!(
            "{shown}: resumed; the run asked with `redbike run` comes first, then it goes back per its schedule"
        ),
        control::Resumed::Placed(placement, placed) => {
            format!("{} (resumed)", describe_placement(id, placement, placed))
        }
    })?;
    Ok(ExitCode::Success)
}

fn cmd_unset(config: &Config, id: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let shown = crate::terminal::id(id);
    let config = &shard::checked_for_job(config, id)?;
    if with_store(&config.redis, |store| store.unset(id))? {
        print_line(&format!("{shown}: unset"))?;
    } else {
        print_line(&format!(
            "{shown}: had no schedule; cleared anything left of it"
        ))?;
    }
    Ok(ExitCode::Success)
}

fn cmd_tell(config: &Config, id: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let config = &shard::checked_for_job(config, id)?;
    let info = with_store(&config.redis, |store| store.tell(id))?;
    // Serializing a struct of strings, numbers and bools cannot fail.
    let json = serde_json::to_string_pretty(&info).expect("JobInfo serializes");
    print_line(&crate::terminal::json_safe(json))?;
    Ok(ExitCode::Success)
}

fn cmd_history(
    config: &Config,
    query: &crate::history::Query,
    format: HistoryFormat,
) -> Result<ExitCode> {
    let shards = match &query.job {
        Some(id) => {
            jobid::validate_stored(id)?;
            vec![shard::checked_for_job(config, id)?]
        }
        None => shard::checked_all(config)?,
    };
    let mut entries = Vec::new();
    for config in &shards {
        entries.extend(with_store(&config.redis, |store| {
            crate::redis::history::read(store, query)
        })?);
    }
    if shards.len() > 1 {
        // Each shard's entries are newest first; so are all of them together.
        entries.sort_by(|a, b| b.end.total_cmp(&a.end));
        entries.truncate(query.limit.unwrap_or(usize::MAX));
    }
    match format {
        HistoryFormat::Csv => {
            crate::history::write_csv(&entries, out(), crate::terminal::csv_escapes())?
        }
        HistoryFormat::Json => crate::history::write_json(&entries, out())?,
    }
    Ok(ExitCode::Success)
}

fn cmd_holds_lease(config: &Config, id: &str, token: &str) -> Result<ExitCode> {
    jobid::validate_stored(id)?;
    let config = &shard::for_job(config, id)?;
    let token: u64 = token.trim().parse().map_err(|_| {
        Error::Input(format!(
            "bad fencing token {token:?}: give the whole number the job got in REDBIKE_FENCING_TOKEN"
        ))
    })?;
    if with_store(&config.redis, |store| store.holds_lease(id, token))? {
        Ok(ExitCode::Success)
    } else {
        Ok(ExitCode::Failure)
    }
}

fn cmd_statuses(config: &Config, before: Option<&str>) -> Result<ExitCode> {
    let before = parse_ts("--before", before, config)?.unwrap_or_else(timestamp::now);
    // Every shard's rows go into one sort: the order is that of an unsplit prefix.
    let mut sorted = SortedCsv::new(SPILL_ROWS).escaping(crate::terminal::csv_escapes());
    for config in shard::checked_all(config)? {
        with_store(&config.redis, |store| {
            let key = store.keys.statuses.clone();
            store.scan_hash(&key, |id, raw| {
                match Status::parse(&String::from_utf8_lossy(&raw)) {
                    Some(s) if s.at <= before => sorted.push(vec![
                        id,
                        s.event.into_bytes(),
                        s.at.to_string().into_bytes(),
                    ])?,
                    Some(_) => {}
                    None => crate::log_warn!(
                        "status of {:?} is {:?}, not EVENT:TIMESTAMP; left out",
                        String::from_utf8_lossy(&id),
                        String::from_utf8_lossy(&raw)
                    ),
                }
                Ok(())
            })
        })?;
    }
    sorted.finish(out())?;
    Ok(ExitCode::Success)
}

fn cmd_schedules(config: &Config) -> Result<ExitCode> {
    let mut sorted = SortedCsv::new(SPILL_ROWS).escaping(crate::terminal::csv_escapes());
    for config in shard::checked_all(config)? {
        with_store(&config.redis, |store| {
            crate::operator::backup::each_row(store, |id, schedule| sorted.push(vec![id, schedule]))
        })?;
    }
    sorted.finish(out())?;
    Ok(ExitCode::Success)
}

fn cmd_control(config: &Config, signal: &str) -> Result<ExitCode> {
    let signal = signal.trim().to_ascii_uppercase();
    if signal != "HALT" && signal != "RESUME" {
        return Err(Error::Input(format!(
            "unknown control signal {signal:?}; use HALT or RESUME"
        )));
    }
    for config in shard::checked_all(config)? {
        with_store(&config.redis, |store| {
            if signal == "HALT" {
                store.control("HALT")
            } else {
                store.clear_control()
            }
        })?;
    }
    Ok(ExitCode::Success)
}

fn cmd_ping(config: &Config) -> Result<ExitCode> {
    let report = crate::operator::ping::ping(config)?;
    out()
        .write_all(report.to_string().as_bytes())
        .map_err(|e| Error::io("cannot write output", e))?;
    if config.shards > 1 {
        print_line(&format!("shards: {}", config.shards))?;
        for (k, shard) in shard::all(config)?.iter().enumerate() {
            print_line(&crate::operator::ping::shard_line(k, shard)?)?;
        }
    }
    Ok(ExitCode::Success)
}

fn cmd_next(
    config: &Config,
    text: &str,
    count: usize,
    after: Option<&str>,
    job: Option<&str>,
) -> Result<ExitCode> {
    if let Some(id) = job {
        jobid::validate(id)?;
    }
    let offset = job.map_or(0, |id| jitter::offset_in(&config.jitter, id));
    let schedule = Schedule::parse_new(text)?;
    // Only computes runs, so it may reach back as far as rules do (1900).
    let mut after = parse_ts_with(timestamp::parse_reference, "--after", after, config)?
        .unwrap_or_else(timestamp::now);
    let zone =
        Some(schedule.own_zone().unwrap_or(config.timezone)).filter(|z| *z != chrono_tz::Tz::UTC);
    let line = |ts: i64| match zone {
        Some(z) => format!(
            "{ts} {} {} {z}",
            timestamp::iso_utc(ts),
            timestamp::iso_in(ts, z)
        ),
        None => format!("{ts} {}", timestamp::iso_utc(ts)),
    };
    match &schedule {
        Schedule::Rule(_) | Schedule::Cron(_) => {
            for _ in 0..count {
                match jitter::placement(&schedule, after, config.timezone, offset)
                    .map_err(rule_error(text))?
                {
                    Placement::Timeline(ts) => {
                        print_line(&line(ts))?;
                        after = ts;
                    }
                    _ => {
                        // Like STOP: a valid rule that has ended, not an error.
                        say!(
                            "redbike: no run after {}: the schedule has ended (UNTIL or COUNT \
                             used up, or the year 9999 ends); set and load store it as a \
                             stopped job (status STP)",
                            timestamp::iso_utc(after)
                        );
                        break;
                    }
                }
            }
        }
        Schedule::At(ts) => print_line(&line(*ts))?,
        Schedule::Now => print_line(&line(after))?,
        Schedule::Continue => {
            print_line(&line(after))?;
            say!("redbike: CONTINUE runs again as soon as each run ends");
        }
        Schedule::Stop => say!("redbike: STOP never runs"),
    }
    Ok(ExitCode::Success)
}

/// The reference instant of `load` and `dispatch --schedules`.
fn reference(config: &Config, after: Option<i64>) -> Result<i64> {
    timefile::reference_for_set(after, &config.timefile)
}

/// A planner for `config`'s shard: its timefile is the reference instant.
fn planner(config: &Config, after: Option<i64>) -> Result<loader::Planner<'_>> {
    Ok(loader::Planner::new(
        reference(config, after)?,
        config.timezone,
        &config.jitter,
    ))
}

/// Keeps only the rows of shard `k` of `config` in `source`'s readings.
fn only_shard(source: &mut loader::Source, config: &Config, k: usize) {
    let n = config.shards;
    source.only(move |id| shard::of_job(id, n) as usize == k);
}

fn cmd_load(config: &Config, file: &std::path::Path, after: Option<&str>) -> Result<ExitCode> {
    let after = parse_ts("--after", after, config)?;
    let mut source = loader::Source::open(file)?;
    // Every row is checked before anything is written; a split prefix then checks and
    // writes one shard's rows at a time (two more readings a shard).
    let mut checked = loader::check(&mut source, planner(config, after)?)?;
    let shards = shard::checked_all(config)?;
    let mut n = 0;
    if shards.len() == 1 {
        let probe = Probe::of(&config.redis);
        n = with_store(&config.redis, |store| {
            loader::load(store, &mut checked, &probe)
        })?;
    } else {
        drop(checked);
        for (k, config) in shards.iter().enumerate() {
            only_shard(&mut source, config, k);
            let mut checked = loader::check(&mut source, planner(config, after)?)?;
            let probe = Probe::of(&config.redis);
            n += with_store(&config.redis, |store| {
                loader::load(store, &mut checked, &probe)
            })?;
        }
    }
    print_line(&format!("loaded {n} job(s) from {}", file.display()))?;
    Ok(ExitCode::Success)
}

fn cmd_dispatch(
    config: &Config,
    schedules: Option<&std::path::Path>,
    after: Option<&str>,
    shards: Option<&str>,
) -> Result<ExitCode> {
    let after = parse_ts("--after", after, config)?;
    if schedules.is_some() && shards.is_some() {
        return Err(Error::Input(
            "--schedules sets jobs of every shard: leave out --shards, or load the file with `redbike load`".into(),
        ));
    }
    let chosen = shard::chosen(config, shards)?;
    let mut loops: Vec<(Config, Vec<PlaceItem>)> = Vec::new();
    let mut source = schedules.map(loader::Source::open).transpose()?;
    for (k, c) in chosen.into_iter().enumerate() {
        let items = match &mut source {
            Some(source) => {
                if config.shards > 1 {
                    only_shard(source, config, k);
                }
                loader::plan_all(source, planner(&c, after)?)?
            }
            None => Vec::new(),
        };
        loops.push((c, items));
    }
    if config.shards > 1 {
        shard::check_recorded(config)?;
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(true)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    shard::run_each(&loops, &shutdown, |(config, preload)| {
        let options = dispatcher::Options {
            after,
            preload: preload.clone(),
        };
        dispatcher::run(config, options, &shutdown)
    })?;
    Ok(ExitCode::Success)
}

fn cmd_work(config: &Config, flags: WorkFlags) -> Result<ExitCode> {
    // The guard of a worker that died execs the worker's command line again, to tell
    // Redis (see work/death.rs).
    if let Some(tag) = std::env::var_os(work::death::TAG_ENV) {
        work::death::report(&shard::all(config)?, &tag.to_string_lossy())?;
        return Ok(ExitCode::Success);
    }
    let w = &config.worker;
    let queues = flags.queues.or_else(|| w.queues.clone()).ok_or_else(|| {
        Error::Input(
            "no queues to work: give them as `redbike work A:A:B` or set `queues` in [redbike]"
                .into(),
        )
    })?;
    let queues = work::parse_queues(&queues)?;
    let command = if flags.command.is_empty() {
        w.command.clone()
    } else {
        flags.command
    };
    // The flags' ranges were checked by clap (limits::arg), the config's by Config.
    let timeouts: std::collections::BTreeMap<String, Duration> = match flags.timeout {
        Some(t) => queues
            .iter()
            .map(|q| (q.clone(), Duration::from_secs(t)))
            .collect(),
        None => w
            .timeouts
            .iter()
            .map(|(q, t)| (q.clone(), Duration::from_secs(*t)))
            .collect(),
    };
    let mut settings = work::Settings::from_config(config);
    if let Some(n) = flags.history_limit {
        settings.history_limit = n;
    }
    if let Some(n) = flags.concurrency {
        settings.concurrency = n;
    }
    if let Some(g) = flags.grace {
        settings.grace = Duration::from_secs(g);
    }
    if let Some(f) = flags.fence_after {
        settings.fence_after = Duration::from_secs(f);
    }
    if let Some((_, ms)) = settings.wait {
        // A round trip may wait this long for the replicas; three of them must fit in
        // the fencing interval, or every running job is fenced while a replica lags.
        if Duration::from_millis(ms * 3) >= settings.fence_after {
            return Err(crate::error::ConfigError::Value {
                key: "redbike-redis.wait-timeout-ms",
                message: format!(
                    "{ms} ms is too long for a fencing interval of {} s: give less than a third of fence-after",
                    settings.fence_after.as_secs()
                ),
            }
            .into());
        }
    }
    if let Some(f) = flags.on_failure {
        settings.on_failure = f;
    }
    let mut output_limits = w.output_limits;
    let mut queue_output_limits = w.queue_output_limits.clone();
    for limits in std::iter::once(&mut output_limits).chain(queue_output_limits.values_mut()) {
        if let Some(n) = flags.output_line_bytes {
            // Within limits::OUTPUT_LINE_BYTES (clap checked), so it fits a usize.
            limits.line_bytes = n as usize;
        }
        limits.log_lines = flags.output_log_lines.unwrap_or(limits.log_lines);
        limits.log_bytes = flags.output_log_bytes.unwrap_or(limits.log_bytes);
    }
    let chosen = shard::chosen(config, flags.shards.as_deref())?;
    if config.shards > 1 {
        shard::check_recorded(config)?;
    }
    // One loop per shard, each with its share of the concurrency and a runner of its
    // own (a runner's state is per slot, and each loop has its slots). A loop needs a
    // slot: with fewer jobs at once than shards, the slots share `-j` run permits.
    let total = settings.concurrency;
    let n = chosen.len();
    let permits = (n > total).then(|| work::Permits::new(total));
    let mut loops: Vec<(Config, work::Settings, Arc<dyn work::JobRunner>)> = Vec::new();
    for (i, c) in chosen.into_iter().enumerate() {
        let settings = work::Settings {
            concurrency: (total / n + usize::from(i < total % n)).max(1),
            permits: permits.clone(),
            process_concurrency: Some(total),
            ..settings.clone()
        };
        let runner = runner::CommandRunner::new(
            command.clone(),
            queues.clone(),
            timeouts.clone(),
            w.pass_redis_env,
            settings.grace,
        )?
        .with_output_limits(output_limits, queue_output_limits.clone())
        .with_history(settings.history_limit > 0);
        loops.push((c, settings, Arc::new(runner)));
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(false)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    shard::run_each(&loops, &shutdown, |(config, settings, runner)| {
        work::run(config, Arc::clone(runner), settings.clone(), &shutdown)
    })?;
    Ok(ExitCode::Success)
}

fn cmd_check(config: &Config, repair: bool) -> Result<ExitCode> {
    let policy = config.policy();
    let mut rows = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(out());
    let mut write_error = None;
    let mut summary = check::Summary::default();
    // The Redis settings of each shard's node; a hazard of several is said once.
    let mut hazards: Vec<String> = Vec::new();
    let mut unread = None;
    for config in shard::checked_all(config)? {
        let probe = Probe::of(&config.redis);
        let mut health = Err(String::new());
        let part = with_store(&config.redis, |store| {
            health = probe.query(store.con)?;
            let emit = |f: &check::Finding| {
                let escape = crate::terminal::csv_escapes();
                let record = [f.kind, &f.jobid, &f.detail]
                    .map(|field| crate::terminal::csv_field(field.as_bytes(), escape));
                if let Err(e) = rows.write_record(record).and_then(|()| Ok(rows.flush()?)) {
                    write_error.get_or_insert(e);
                }
            };
            let walk = check::Check::new(store, repair, &policy, emit);
            Ok(walk.overdue_after(config.overdue_after).run()?)
        })?;
        summary.add(&part);
        match health {
            Ok(health) => {
                for hazard in health.hazards {
                    if !hazards.contains(&hazard.message) {
                        hazards.push(hazard.message);
                    }
                }
            }
            Err(why) => unread = Some(why),
        }
    }
    if let Some(e) = write_error {
        return Err(Error::io("cannot write output", e.into()));
    }
    let remaining = summary.problems - summary.repaired.min(summary.problems);
    say!(
        "check: {} problem(s) in {} job(s) across {} queue(s){}{}{}{}{}",
        summary.problems,
        summary.jobs,
        summary.queues,
        if repair {
            format!(", {} repaired", summary.repaired)
        } else {
            String::new()
        },
        if summary.held > 0 {
            format!(", {} job(s) held (failed or BAD)", summary.held)
        } else {
            String::new()
        },
        if summary.overdue > 0 {
            format!(
                ", {} job(s) overdue (no dispatcher runs, or HALT is set)",
                summary.overdue
            )
        } else {
            String::new()
        },
        if summary.paused > 0 {
            format!(", {} job(s) paused", summary.paused)
        } else {
            String::new()
        },
        if summary.odd_ids > 0 {
            format!(", {} job id(s) `set` refuses (odd-id)", summary.odd_ids)
        } else {
            String::new()
        },
    );
    for hazard in &hazards {
        say!("check: redis: {hazard}");
    }
    if let Some(why) = unread {
        say!("check: redis settings unchecked: cannot read INFO ({why}); allow +info");
    }
    Ok(if remaining > 0 {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

fn cmd_stats(
    config: &Config,
    format: stats::Format,
    queues: Option<&str>,
    scan: bool,
) -> Result<ExitCode> {
    let queues = match queues.or(config.worker.queues.as_deref()) {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    let opts = stats::Options {
        queues,
        scan,
        overdue_after: config.overdue_after,
    };
    let mut parts = Vec::new();
    for config in shard::checked_all(config)? {
        let probe = Probe::of(&config.redis);
        parts.push(with_store(&config.redis, |store| {
            stats::collect(store, &opts, &probe, timestamp::now())
        })?);
    }
    // There is at least one shard.
    let figures = stats::merge(&config.prefix, parts).expect("a prefix has a shard");
    out()
        .write_all(stats::render(&figures, format).as_bytes())
        .map_err(|e| Error::io("cannot write output", e))?;
    Ok(ExitCode::Success)
}

fn cmd_ps(config: &Config, format: ps::Format) -> Result<ExitCode> {
    let mut listed: Vec<registry::Listed> = Vec::new();
    let mut first = true;
    let mut python_seen: Option<String> = None;
    for config in shard::checked_all(config)? {
        let part = with_store(&config.redis, |store| {
            let seen: Option<String> = redis::cmd("GET")
                .arg(&store.keys.python_seen)
                .query(store.con)?;
            python_seen = python_seen.take().or(seen);
            Ok(registry::list(store)?)
        })?;
        if first {
            listed = part;
            first = false;
            continue;
        }
        // A process serving several shards registers a loop in each, each with the
        // process's whole `-j`: one row.
        for l in part {
            let d = &l.description;
            let same = |a: &registry::Listed| {
                let e = &a.description;
                (&e.kind, &e.host, e.pid) == (&d.kind, &d.host, d.pid)
            };
            if !listed.iter().any(same) {
                listed.push(l);
            }
        }
    }
    listed.sort_by(|a, b| {
        let (a, b) = (&a.description, &b.description);
        (&a.kind, &a.host, a.pid, &a.id).cmp(&(&b.kind, &b.host, b.pid, &b.id))
    });
    let text = ps::render(
        &listed,
        format,
        timestamp::now(),
        crate::terminal::csv_escapes(),
    )?;
    out()
        .write_all(&text)
        .map_err(|e| Error::io("cannot write output", e))?;
    if listed.is_empty() && format == ps::Format::Table {
        say!(
            "redbike: no dispatcher or worker is registered under prefix {} (Python processes never are)",
            config.prefix
        );
    }
    if let (Some(seen), ps::Format::Table) = (python_seen, format) {
        say!("redbike: a Python redbike process shares this prefix, which ps cannot list (it does not register): {seen}");
    }
    Ok(ExitCode::Success)
}

fn cmd_top(config: &Config, once: bool, queues: Option<&str>) -> Result<ExitCode> {
    if config.shards > 1 {
        return Err(Error::Input(format!(
            "top shows one unsplit prefix, and {} is split into {} shards: look at a shard with shards = 1 and --prefix set to its prefix (`redbike ping` lists them)",
            config.prefix, config.shards
        )));
    }
    shard::check_recorded(config)?;
    let queues = match queues {
        Some(text) => stats::parse_queue_names(text)?,
        None => Vec::new(),
    };
    crate::top::run(config, &crate::top::Options { once, queues })?;
    Ok(ExitCode::Success)
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
