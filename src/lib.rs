//! redbike: a cron dispatcher for pools of distributed workers, built on Redis.
//!
//! The library holds everything the `redbike` binary does; `main.rs` only calls
//! [`cli::run`]. It shares its Redis layout with the Python redbike 0.13.1, so both
//! can serve one prefix at the same time.
//!
//! # Layout
//!
//! - `cli/`: the command line, which only parses arguments and prints what the layers
//!   below return: the clap definitions (`args.rs`); one function per subcommand,
//!   grouped by what they do: jobs (`jobs.rs`: set, unset, run, kill, backfill, pause, resume, tell,
//!   holds-lease, history, next, load), processes (`processes.rs`: dispatch, work,
//!   control, ping) and reports (`reports.rs`: statuses, schedules, check, stats, ps,
//!   top), and `events.rs` (`redbike events`: its text, JSON Lines and CSV); running the command line, usage errors and exit codes (`mod.rs`); the long
//!   help texts the man pages are made from (`help.rs`).
//! - `redis/`: reaching Redis. The settings of `[redbike-redis]`, the Redis URL and
//!   password masking in `settings.rs`; the topology (standalone, Sentinel, Cluster) in
//!   `topology.rs`, derived once when the configuration is loaded and carried in
//!   `Config::redis` (an `Access`: settings, prefix, topology) to every connect;
//!   Redis's clock, the one a fleet shares, in `clock.rs`;
//!   connecting in `store.rs` (`connect`, `reach`, `with_store`), with retries and
//!   backoff in `retry.rs`; the connection a long-running loop keeps, and reconnects
//!   after a failover, in `link.rs`; pub/sub wake-ups and Sentinel switches in
//!   `listener.rs`; the key names in `keys.rs`; schedules and placements in `store.rs`
//!   (`Placed`, with the words the scripts answer for a placement),
//!   and many at once (`load`, `dispatch --schedules`) in `bulk.rs`; the Redis settings
//!   that lose jobs in `hazards.rs`; the registry of live dispatchers and workers
//!   (registration, heartbeats, listing) in `registry.rs`; whether Python peers share
//!   the prefix, and so how often idle processes look for work, in `peers.rs`; reading
//!   run history (`redbike history`, `tell`, `stats`) in `history.rs`; everything
//!   `tell` shows of one job in `tell.rs`; pauses of jobs and queues as stored
//!   (`pause.rs`); the number of shards a prefix records (`shards.lua`) in `shards.rs`;
//!   the audit entries of operators' actions for the event stream, and who acts, in
//!   `events.rs`.
//! - `redis/scripts/`: every Lua script, one `.lua` file each, prefixed with the
//!   helpers of `common.lua` it uses (the enqueue rule and the placement logic among
//!   them), and `mod.rs` that assembles and loads them. The typed functions that build the arguments of the worker's scripts
//!   (`claim.lua`, `refresh.lua`, `release.lua`, `finish.lua`) are in `worker.rs`, and
//!   of `recover.lua` (with `recover_job`, used by recovery and `check --repair`) in
//!   `recovery.rs`, of `skip.lua` in `skip.rs`, of `backfill.lua` and `cancel_backfill.lua` in
//!   `backlog.rs` (called by `operator/backfill.rs` and `dispatch/catchup.rs`), of `run.lua`,
//!   `pause.lua`, `resume.lua` and `kill.lua` in `control.rs`. Each typed function parses the words its script
//!   answers into an enum (`FinishReply`, `RecoverReply`, `SkipReply`, `RunReply`,
//!   ...), which callers match; a yes/no argument is `flag` (`"1"`/`"0"`) in every
//!   script. The other scripts are called from one
//!   place each: `place.lua`, `place_many.lua`, `unset.lua`, `places.lua` in
//!   `redis/store.rs`; `dispatch.lua` in `dispatch/pass.rs` (`pass`); `died.lua`
//!   in `work/death.rs`; `sweep.lua` and `sweep_claimed.lua`
//!   in `dispatch/lost_jobs.rs`; `stale.lua` in `dispatch/staleness.rs`; `repair.lua` in `operator/check/mod.rs`; `register.lua` in
//!   `redis/registry.rs`; `notify_state.lua` and
//!   `notify_release.lua` in `notify/state.rs`; `file_history.lua` in `redis/history.rs`; `run.lua`,
//!   `pause.lua`, `resume.lua` and `kill.lua` in `operator/control.rs`; `shards.lua` in
//!   `redis/shards.rs`.
//! - `dispatch/`: `redbike dispatch`. The dispatcher loop is `run` in
//!   `dispatch/dispatcher.rs`; one pass moves due jobs into their queues (`pass.rs`);
//!   what it knows between passes, how long it sleeps and the wake-ups it hears
//!   (`ahead.rs`); catch-up after downtime (`catchup.rs`: skip, or all through a backlog), recovery of jobs whose
//!   worker vanished (`lost_jobs.rs`: the expired leases and the sweep), jobs that went
//!   stale (`staleness.rs`, with `stale.lua`), the timefile (`timefile.rs`).
//! - `work/`: `redbike work`. The public API in `api.rs` (`Job`, the `JobRunner` trait
//!   with `FnRunner`, `Settings`); how a worker starts, its flags merged over the
//!   configuration and a loop per shard served (`launch.rs`); the event loop in
//!   `event_loop.rs` (`run` and `Loop`: when to send, wait and stop; how many jobs it
//!   claims, `event_loop/sizing.rs`) and what reaches it
//!   (`events.rs`: the events, the listener); the round trips in flight (`round_trip.rs`)
//!   and how each part takes back its own replies (`replies.rs`). The parts of a round trip, each owning its
//!   state: the outcomes and hand-backs to write (`outbox.rs`, with `finish.lua` and
//!   `release.lua`), the claims (`claims.rs`, with `claim.lua`), the poll and what rides
//!   on it (`poll.rs`), the refresh of the running index (`refresh.rs`, with
//!   `refresh.lua`). The queue cycle and claim sizing as pure functions (`claim.rs`); the
//!   deadlines of running jobs (`deadlines.rs`); the runs `redbike kill` stops
//!   (`kills.rs`); the slot threads (`slots.rs`) and the
//!   claimed jobs they share with the loop (`pool.rs`); the claim budget that lets a
//!   worker of several shards fill its free slots from whichever shards have work
//!   (`budget.rs`) and the run permits that keep it within `-j` (`permits.rs`); the command runner
//!   (`runner.rs`), spawning (`spawn.rs`), job output (`output.rs`), the guard that stops
//!   jobs of a frozen worker (`guard.rs`) and tells Redis of a dead one (`death.rs`),
//!   filing the run history while idle (`filing.rs`).
//! - `history.rs`: run history, what an entry is (`Entry`, `Outcome`), its bounds, and
//!   the figures made from entries; the scripts write entries, `redis/history.rs` reads
//!   them.
//! - `policy.rs`: the after-run policy, what becomes of a job after its run or after its
//!   worker vanished (`decide`, `decide_recovery`), and the words the scripts are told
//!   it in (`Action`, `AfterRun`, `Attempts`); the worker, recovery and `check` decide
//!   there.
//! - `backfill.rs`: runs of past occurrences (`redbike backfill`, catch-up `all`): the
//!   instants of a range, and what a job's backlog (`P-backlog-JOBID`) is.
//! - `stale.rs`: staleness, jobs that have not succeeded for longer than they should:
//!   the deadline a success (or a `set`) gives a job, from its schedule or its queue's
//!   `[redbike.stale]` bound, and what `P-stale` keeps of a stale job.
//! - `retries.rs`: retries of failed runs (`[redbike.retries.Q]`): the backoff, which
//!   attempt of which occurrence a run is, and the field `P-attempts` keeps of it.
//! - `operator/`: commands that read or repair a prefix, over all its shards, returning
//!   data the command line prints: `check/` (its walk over the keys in `keys.rs`), `statuses.rs`, `history.rs`
//!   (`redbike history`), `backup.rs` (`schedules`), `backfill.rs` (`backfill`), `loader.rs` (`load`, `dispatch
//!   --schedules`), `ping.rs`, `ps.rs` (the processes, and the table, CSV and JSON of
//!   `redbike ps`), `control.rs` (`control`, `run`, `pause`, `resume` of a job or a
//!   queue, `kill`), `events.rs` (`redbike events`: the event stream of every shard,
//!   merged, filtered and followed), and CSV reading and writing (`csvio.rs`); `stats/` is `redbike stats`: the
//!   figures as plain data (`stats/figures.rs`), read from Redis (`stats/read.rs`), and
//!   one file per rendering (`stats/text.rs`, `stats/json.rs`, `stats/prometheus.rs`).
//! - `top/`: `redbike top`, the live view: reading a snapshot of a prefix
//!   (`snapshot.rs`), the view's state and keys (`app.rs`), drawing it (`render.rs`),
//!   the terminal and the reader thread (`mod.rs`). Its `r`, `p`, `u` and `x` keys act
//!   through `operator/control.rs`, as `redbike run`, `pause`, `resume` and `kill` do.
//! - `serve/`: `redbike serve`, the HTTP view: the reads of a prefix, cached between
//!   viewers (`cache.rs`), the JSON API and `/metrics` (`api.rs`), the control routes
//!   and their token and origin checks (`control.rs`), the embedded dashboard
//!   (`dashboard.rs`, with `assets/`), the listener and its limits (`mod.rs`).
//! - `notify/`: `redbike notify`, which reports changes of state from the event stream:
//!   the loop over each shard (`mod.rs`), following the stream with a consumer group
//!   (`stream.rs`), what an entry says and the entries skipped (`entry.rs`), the state
//!   of each job and of the fleet that notifiers share, with the rate limit
//!   (`state.rs`, with `notify_state.lua` and `notify_release.lua`), a notification and its bounds
//!   (`message.rs`), and the command and webhook it goes to (`targets.rs`).
//! - `schedule/`: the schedule language: RRULEs (`rule.rs`: the rule and its
//!   evaluation; the parser in `rule/parse.rs`, the expansion in `rule/engine.rs`),
//!   cron lines (`cron.rs`), the calendar arithmetic both share (`calendar.rs`), unix
//!   times and ISO timestamps (`timestamp.rs`), and helpers of their unit tests
//!   (`testing.rs`).
//! - `shard.rs`: a prefix split into shards (`shards = N`): the shards' prefixes and
//!   configurations, the shard of a job, the number recorded in Redis, running a loop
//!   per shard, and reading the shards of a listing at once, merged in order with
//!   bounded memory (`read_all`, `map`); the commands in `cli/` route and merge
//!   through it.
//! - Top level: errors and exit codes (`error.rs`), the configuration (`config/`, with `[redbike.notify]` in `config/notify.rs`),
//!   logging (`log.rs`), signals (`shutdown.rs`), the bounds of settings and the output
//!   limits (`limits.rs`), the status codes (`status.rs`), job ids and their queues
//!   (`jobid.rs`), the test hooks only debug builds read (`test_hook.rs`), the rule for
//!   showing untrusted text to people, escaped on terminals and in logs, exact in JSON
//!   and piped CSV (`terminal.rs`), per-queue jitter (`jitter.rs`, used by the policy, dispatch and
//!   load alike), and the host: the name processes and history entries carry, and whether a program
//!   runs on it (`host.rs`).
//!
//! Unit tests live in `tests.rs` files beside the module they test.
//!
//! Imports point down, in this order (`tests/layers.rs` checks these rules, that no
//! modules nor files of a folder import each other in a circle, and that this section
//! names every file of `src/`; its table `MAY_IMPORT` holds the rules):
//!
//! 1. `cli` uses everything; `serve` is used by `cli` only, and uses `operator`, `top`
//!    and the layers below (never `dispatch` nor `work`'s loops); so is `notify`, which
//!    uses `operator` (the fleet's figures) and the layers below.
//! 2. `top`, which acts through `operator` (`control.rs`); `operator`, `dispatch` and
//!    `work`, never each other (`operator` and `top` read the worker's queue syntax
//!    from `work`).
//! 3. `shard` (uses `config`, `redis`, `jitter`, `shutdown`), and `config`: the file, the flags
//!    and the environment, merged; it checks the Redis settings and derives the
//!    topology through `redis`.
//! 4. `redis`: takes an `Access`, never the whole configuration.
//! 5. `history` (uses `error`, `host`, `jobid`, `log`, `schedule`, `status`,
//!    `terminal`), `policy` (uses `jitter`, `stale`, `retries`, `schedule`, `status`),
//!    `retries` (uses `jitter`, `jobid`, `schedule`), `backfill` (uses `jitter`,
//!    `schedule`), `status` (uses `schedule`: its instants are clamped as timestamps
//!    are), `stale` (uses `jitter`, `jobid`, `schedule`), `jitter` (uses `jobid`,
//!    `schedule`), `error` (the error of a command, `ConfigError` among its causes; uses
//!    `jobid`, `schedule`), `shutdown` (uses `log`).
//! 6. `log` (uses `terminal`), then `schedule`, `host`, `jobid`, `limits`, `test_hook`,
//!    `terminal`, which use no other module.
#![deny(missing_docs)]

pub mod backfill;
pub mod cli;
pub mod config;
pub mod dispatch;
pub mod error;
pub mod history;
pub(crate) mod host;
pub(crate) mod jitter;
pub mod jobid;
pub mod limits;
pub mod log;
pub mod notify;
pub mod operator;
mod policy;
pub mod redis;
pub mod retries;
pub mod schedule;
pub mod serve;
pub mod shard;
pub mod shutdown;
pub mod stale;
pub(crate) mod status;
pub mod terminal;
pub(crate) mod test_hook;
pub mod top;
pub mod work;
