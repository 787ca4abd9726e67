//! The clap definitions of the command line: the global flags and the subcommands.

use std::path::PathBuf;

use clap::{ArgAction, Parser, Subcommand};

use super::help;
use crate::{config::OnFailure, limits, operator::ps, operator::stats};

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

/// How `redbike events` prints its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EventsFormat {
    /// One line per entry for people, text from jobs and operators escaped.
    Text,
    /// JSON Lines: one object per entry, every field exact.
    Json,
    /// RFC 4180 CSV with a header row.
    Csv,
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
    /// Stop the current run of a job (SIGTERM, SIGKILL after the grace period), keeping its
    /// schedule
    #[command(after_long_help = help::KILL)]
    Kill {
        /// The job id
        jobid: String,
    },
    /// Run every occurrence of a job's schedule in a past range, once each, in order
    #[command(after_long_help = help::BACKFILL)]
    Backfill {
        /// The job id
        jobid: String,
        /// First instant of the range, included (unix seconds or ISO 8601)
        #[arg(
            long,
            value_name = "TIMESTAMP",
            allow_negative_numbers = true,
            required_unless_present = "cancel"
        )]
        from: Option<String>,
        /// Last instant of the range, included; not in the future
        #[arg(
            long,
            value_name = "TIMESTAMP",
            allow_negative_numbers = true,
            required_unless_present = "cancel"
        )]
        to: Option<String>,
        /// Drop what is left of the job's backfill instead (a run under way finishes)
        #[arg(long, conflicts_with_all = ["from", "to", "max"])]
        cancel: bool,
        /// Most runs to queue, 1..=100000; a range holding more is refused
        #[arg(long, value_name = "N", value_parser = limits::arg::backfill_max,
              default_value_t = limits::BACKFILL_MAX_DEFAULT, allow_negative_numbers = true)]
        max: u64,
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
    /// Print the event stream: run outcomes, staleness and operators' actions (the
    /// audit log), oldest first; --follow keeps printing them as they come
    #[command(after_long_help = help::EVENTS)]
    Events {
        /// Print the last 10 entries (or those since --since), then each new one as it
        /// comes, until SIGINT or SIGTERM
        #[arg(short, long)]
        follow: bool,
        /// Only failures: runs that failed (DIE, TMO, KIL, FNC, BAD) and jobs gone stale
        #[arg(long)]
        failures: bool,
        /// Only this job's entries and the actions on it
        #[arg(long, value_name = "JOBID")]
        job: Option<String>,
        /// Only entries written at or after this time
        #[arg(long, value_name = "TIMESTAMP", allow_negative_numbers = true)]
        since: Option<String>,
        /// Output format
        #[arg(long, value_enum, default_value_t = EventsFormat::Text, value_name = "FORMAT")]
        format: EventsFormat,
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
    /// Serve the prefix over HTTP: a dashboard, a JSON API and Prometheus /metrics
    #[command(after_long_help = help::SERVE)]
    Serve(crate::serve::Flags),
    /// Follow the event stream and report changes of state (a job's first failure, its
    /// recovery, stale and fresh jobs, no dispatcher, Redis hazards) to a command or a
    /// webhook
    #[command(after_long_help = help::NOTIFY)]
    Notify {
        /// POST each notification as JSON to this http or https URL (the secret of
        /// $REDBIKE_NOTIFY_SECRET in the header X-Redbike-Secret)
        #[arg(
            long,
            value_name = "URL",
            env = "REDBIKE_NOTIFY_WEBHOOK",
            hide_env_values = true
        )]
        webhook: Option<String>,
        /// Run this command for each notification, with its JSON on stdin and
        /// REDBIKE_NOTIFY_* in its environment; takes the rest of the command line
        #[arg(long, value_name = "CMD", num_args = 1.., allow_hyphen_values = true,
              trailing_var_arg = true)]
        exec: Vec<String>,
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
