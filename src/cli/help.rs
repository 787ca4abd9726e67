//! The long help texts of the command line; they also fill the man pages.

/// `redbike --help`: what it is, files, environment, exit codes.
pub const MAIN: &str = "\
redbike keeps job schedules in Redis and runs them on pools of workers. It shares its \
Redis layout with the Python redbike 0.13.1, so both can serve one prefix at once.

Keys under PREFIX: PREFIX-schedules (hash), PREFIX-statuses (hash of EVENT:UNIXSECONDS), \
PREFIX-timeline (sorted set by next run), PREFIX-work-Q (list per queue Q) with \
PREFIX-work-Q-members, PREFIX-work-Q-JOBID (lease of a running job), PREFIX-control, \
PREFIX-failures, PREFIX-leases (running index), PREFIX-fencing (fencing tokens), \
PREFIX-procs (set of registered process ids) with PREFIX-proc-ID (a process's JSON \
description, expiring), PREFIX-paused and PREFIX-paused-queues (pauses), \
PREFIX-rerun (runs asked), PREFIX-kill (runs to stop), and the run history: PREFIX-history-JOBID, PREFIX-recent-runs, \
PREFIX-recent-failures (lists), PREFIX-runs-per-minute, PREFIX-due (hashes). Status \
events: TML timeline, ENQ queued, WRK running, STP stopped, DIE failed, TMO timed out, \
INT stopped because its worker stopped, FNC stopped because its worker could not \
confirm it to Redis (fencing), REC recovered after its worker vanished, SKP a late run \
skipped (catch-up), PAU paused, KIL stopped by redbike kill, BAD unparsable schedule.";

/// Files, environment and exit codes, after the options of `redbike --help`.
pub const MAIN_AFTER: &str = "\
Files: ./.redbike.conf is the TOML config read when no other is named (see \
redbike.conf.example); .redbike.timefile is the dispatcher's clock (config key timefile).

Environment: REDBIKE_CONFIG names the config file (like --config); REDBIKE_REDIS_URL \
the Redis URL (like --redis-url; keeps passwords out of files); REDBIKE_PREFIX the key \
prefix (like --prefix); REDBIKE_LOG the log level, error, warn, info (the default) or \
debug (-v and -q beat it: any of them counts from info).

Logs: one line per event on stderr, ts=TIME level=LEVEL msg=\"TEXT\", the message a \
JSON string (quotes and newlines escaped). When stderr is the journal stream named by \
JOURNAL_STREAM (under systemd), lines start with journald's priority (<3> error, <4> \
warn, <6> info, <7> debug) instead of the timestamp.

Exit codes: 0 success; 1 any other failure; 2 usage error or bad input, nothing was \
written to Redis; 69 Redis unreachable; 75 Redis out of memory: set or load refused to \
write into a full Redis, or Redis evicted jobs load wrote (the message says how many \
were written); 78 an error that retrying cannot fix (Redis \
refused the password or the database, the ACL user lacks a permission, a key has the \
wrong type, the server lacks a command, the timefile cannot be written): a dispatcher \
or worker that meets one before its first pass or claim worked exits with it, later it \
logs it and tries again every few seconds; 128+N a dispatcher or worker ended by a second signal N.

Redis settings that lose jobs without an error (a maxmemory-policy other than \
noeviction, no persistence, memory near maxmemory, evicted keys) are named by ping, \
stats and check, and logged by dispatch and work at start and when they change.

Shards: shards = N in [redbike] (N > 1, the prefix needs a hash tag such as {app}) \
splits the prefix into N prefixes {app/0} ... {app/N-1}, each in a hash slot of its \
own, so a Redis Cluster spreads it over its nodes; a job lives in shard H mod N, H \
the 64-bit FNV-1a hash of JOBID through SplitMix64's finalizer. Commands about one job go to its shard, listings read every shard and merge \
(statuses and schedules print what an unsplit prefix would), dispatch and work run a \
loop per shard (--shards for a subset). The prefix's key PREFIX-shards records N; a \
command configured with another number exits 2. ping lists each shard's node.

Examples:

redbike set report:A 'FREQ=DAILY;BYHOUR=9'

redbike next 'FREQ=WEEKLY;BYDAY=MO,FR;BYHOUR=7' -n 3

redbike dispatch

redbike work A -j 4 -- /usr/local/bin/run-job

redbike schedules > backup.csv && redbike load backup.csv

redbike control HALT

redbike stats --format prometheus";

/// Schedule syntax and semantics, for `set`, `load` and `next`.
pub const SCHEDULES: &str = "\
Schedules: NOW runs once, at once (stored as STOP). AT:TS runs once at TS, unix \
seconds or ISO 8601, UTC unless it says otherwise (stored as STOP). CONTINUE runs again \
as soon as each run ends, or after the backoff the job asks for. STOP does not run, and \
takes the job off the timeline and out of its queue. Anything else is an iCal RRULE: \
FREQ=..., RRULE:FREQ=..., or DTSTART[;TZID=zone]:... and RRULE:... on two lines; case \
and surrounding space do not matter. CRON:LINE is a cron line (below).

The next run is the first occurrence strictly after the reference instant: --after, \
else the time in the timefile when it exists, else now. A rule with no occurrence left \
(UNTIL passed, COUNT used up) has ended, like STOP: set and load store it and stop the \
job (status STP), and next says so on stderr and exits 0.

DTSTART and UNTIL may be any date in the years 1900..=9999, and so may next's --after \
(other timestamps: 1970..=9999).

Refused everywhere (exit 2, nothing written), as RFC 5545 says MUST NOT: BYYEARDAY \
with FREQ=DAILY, WEEKLY or MONTHLY; BYMONTHDAY with WEEKLY; BYWEEKNO without YEARLY; a \
numbered BYDAY (2MO) except under MONTHLY or YEARLY; BYSETPOS without another BY part; \
COUNT with UNTIL. Also refused: a rule that can never fire (BYMONTH=2;BYMONTHDAY=30, \
UNTIL before DTSTART), and one whose next run takes more than 500000 steps to find \
(\"too costly to evaluate\": EXRULEs excluding many runs in a row, COUNT counted from \
a DTSTART long ago). A worker that meets such a rule stored by Python redbike runs \
the job, then marks it BAD.

Without DTSTART a rule is anchored at the start of the calendar period containing the \
reference instant, in the configured timezone: the hour for SECONDLY and MINUTELY, the \
day for HOURLY and DAILY, the ISO week (Monday) for WEEKLY, the month for MONTHLY, the \
year for YEARLY. So FREQ=DAILY;BYHOUR=9 fires at 09:00:00 and FREQ=MINUTELY;INTERVAL=5 \
at :00, :05, ... This deliberately differs from Python redbike 0.13.1, which takes \
\"now\" as DTSTART and so inherits its seconds and drifts by each job's run time.

Rule sets: after DTSTART, several RRULE lines and RDATE, EXRULE and EXDATE lines \
(EXDATE;TZID=zone:..., values comma-separated), or RDATE lines alone; the runs are the \
RRULE and RDATE times that no EXRULE or EXDATE excludes. EXDATE;VALUE=DATE:20241225 excludes that whole day \
in the rule's zone (python-dateutil: only its 00:00).

BYSETPOS counts positions from the start of each FREQ period, the first one too (RFC \
5545), and drops those before DTSTART: DTSTART:20241023T090000Z with \
RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYSETPOS=2 fires on 2024-10-23, 10-30, 11-06. \
python-dateutil (and so Python redbike 0.13.1) cuts the first week short at DTSTART \
and fires on 10-25 first.

CRON: takes a crontab's time fields: five (minute hour day-of-month month \
day-of-week), six with a leading seconds field, or @yearly, @annually, @monthly, \
@weekly, @daily, @midnight, @hourly. Fields are lists of *, N, A-B with optional /STEP; \
JAN..DEC and SUN..SAT names; 7 is Sunday. As in Vixie cron, when both day fields are \
restricted a day matches either (0 9 1 * MON: the 1st and every Monday); when one \
starts with * it must match both. It runs in the configured timezone or the zone of a \
CRON_TZ= or TZ= prefix (CRON:CRON_TZ=Europe/Berlin 30 2 * * *), with DST handled as \
for rules (below). Python redbike 0.13.1 cannot parse cron lines: its workers mark such \
jobs BAD.

Time zones follow RFC 5545: a local time that does not exist (spring forward) moves \
forward by the length of the gap; an ambiguous one (fall back) takes its first \
occurrence. A daily 02:30 rule in Europe/Berlin fires once on each day around both \
transitions.

Jitter: [redbike.jitter] Q = S (seconds, 0..=86400) shifts every run of each recurring \
job (rule, rule set, cron line) of queue Q by a fixed offset in [0, S): FNV-1a 64 of \
the job id's UTF-8 bytes, modulo S, so a job keeps its own slot. set, load, the \
workers, recovery and the dispatcher's catch-up skips apply it; next --job JOBID shows \
that job's runs with it, tell shows the shifted next_run. NOW, AT and CONTINUE are not \
shifted.";

/// The worker's job contract, for `work`.
pub const WORK: &str = "\
Each job runs COMMAND ARGS... JOBID, never through a shell, with stdin from /dev/null, \
in its own process group, and with the worker's environment less REDBIKE_REDIS_URL and \
REDBIKE_CONFIG (redbike's way to Redis, password included; pass-redis-env = true in \
[redbike] keeps them), plus REDBIKE_JOBID, REDBIKE_QUEUE, REDBIKE_PREFIX, \
REDBIKE_SCHEDULE, REDBIKE_BACKOFF_FILE, REDBIKE_FENCING_TOKEN (larger for every \
later run; see holds-lease), REDBIKE_DUE (the instant the occurrence the run serves \
was due, unix seconds, also for late, caught-up, backfilled and retried runs) and REDBIKE_ATTEMPT \
(1, or more for a retry of a failed run: [redbike.retries.Q] in the config). Its \
output lines go to the log prefixed with [JOBID].

A job's output is bounded per run: a line longer than --output-line-bytes (default \
8192) is cut there and marked <cut at N bytes>, its rest skipped; past \
--output-log-lines lines (default 10000) or --output-log-bytes bytes (default \
1048576) the rest is read and counted, not logged, and one line at the end of the \
output says how much was not logged. A line more than a quarter control characters \
(tab and CR aside) or invalid UTF-8 is logged as <N NUL bytes> or <N binary bytes>, \
and so is a run of 4 or more such bytes in other lines. The worker holds at most one line of a job's output, \
whatever it prints, and keeps reading, so the job never blocks on a full pipe. In the \
config file, output-line-bytes, output-log-lines and output-log-bytes set these for the \
worker and [redbike.output-limits.Q] (line-bytes, log-lines, log-bytes) for queue Q; \
the flags beat both.

Exit code 0 is success: the job is rescheduled from its current schedule; whole \
seconds N written to $REDBIKE_BACKOFF_FILE put a CONTINUE job on the timeline at now + \
N. Exit code 100 is stop: the schedule becomes STOP (status STP). Exit code 101 is \
unset: the job is removed. Any other exit, death by signal, or a command that cannot \
start is a failure, status DIE: with --on-failure reschedule (the default) DIE stays \
visible and the job goes back per its schedule (a CONTINUE job after failure-delay \
seconds); with hold it stays out of circulation, as in Python redbike 0.13.1.

A job running past its timeout gets SIGTERM on its process group, SIGKILL after the \
grace period, status TMO, and goes back into circulation per its schedule, once. If \
the worker dies, even by kill -9, its guard process (redbike-guard) kills the process \
group of every job it was running.

Fencing: a worker that has not confirmed a running job to Redis for --fence-after \
seconds (default 35; frozen, or cut off from Redis) stops it itself: SIGTERM, SIGKILL \
after the grace period; its guard does the same if the worker itself is frozen. A \
dispatcher may recover the job only fence-after + grace + 2 s after the last \
confirmation (42 s with the defaults), on Redis's clock, so the fenced run is gone by \
then. So Redis stalled or unreachable for up to 30 s kills no running job. A worker \
that dies (kill -9, a crash) is not silent: its guard kills its jobs and tells Redis \
at once, and a dispatcher recovers them within a pass, whatever fence-after and the \
grace period. A shorter --fence-after recovers the jobs of a frozen or cut-off worker \
sooner, at the cost of stopping running jobs at every Redis stall longer than it. Once \
it reaches Redis again the worker records status FNC (and last_failure FNC) unless the \
job was recovered meanwhile.

QUEUES is the weighting string: A:A:B works queue A twice for each time it works B. \
The queue of a job is the part of its id after the last ':'.

An idle worker waits for wake-ups (pub/sub, sent by set, load, run, the dispatchers \
and other workers) and looks on its own for queued jobs and HALT every 10 s; about \
every second while it holds jobs, while its listener is not subscribed, or while a \
Python peer was seen in the last hour (PREFIX-python-seen, written by whichever \
process found a job queued without a wake-up; see python-peers in \
docs/configuration.md).

While its jobs are short (under 50 ms on average), a worker claims a few more than it \
has free slots (up to 50 ms of work per slot, at most max(32, concurrency)), so a slot \
starts its next job without waiting for Redis. Such a job is leased like a running one \
(status WRK); if it waits more than 2 s for a slot (a job in front turned out long), or \
the worker stops, it goes back to the head of its queue, status ENQ, as if never \
claimed.

control HALT and SIGTERM, SIGINT, SIGHUP, SIGQUIT stop claiming, hand back the jobs \
claimed ahead, let running jobs finish for up to the grace period, then stop them as \
on timeout (status INT instead of TMO; a one-off job so cut short is queued again), \
record every outcome and exit 0. A second signal kills the jobs and exits at once \
(jobs claimed ahead are then recovered by a dispatcher, status REC, like the killed \
ones). The directory of backoff files (redbike-work-* under $TMPDIR) is removed at an \
orderly stop.

A worker whose claims fail backs off (at most every 5 s) and logs one line when the \
failure begins, changes or ends, and a reminder every minute. An error that retrying \
cannot fix (wrong password, missing ACL permission, a wrong-typed key on every one \
of its queues) exits with status 78 when it comes before the first claim worked; \
later it is retried, so that a running worker carries on by itself once the cause is \
fixed. A queue whose keys are of another type is skipped, with one warning each time \
the set of skipped queues changes, while the other queues are claimed from; a run \
whose queue's keys turned odd while it ran has its outcome dropped (one warning) and \
is recovered once the key is fixed (see `redbike check`).

One-off jobs (NOW, AT) run at least once: one whose run may not have completed \
(its worker died, was stopped by a second signal, cut it short while stopping, or \
fenced it) is queued again, unless set to STOP meanwhile. One that ran out of its own timeout is \
done (status TMO), as one that failed (DIE).

With shards = N (a prefix split into shards), a worker runs one loop per shard, each \
with its own connection; --shards 0,3 serves only those shards. The loops share -j: \
whichever shards have work fill every free slot, each claiming up to the whole -j (and \
jobs ahead) less what the others hold. A loop that waited 1 s for room gets the turn for \
1 s: the room it lacks is kept for it, so no shard starves. -j stays the bound on the jobs the worker runs at once: a slot \
waits for one of -j run permits, which go first come, first served (a job claimed \
ahead that waits 2 s for one goes back to its queue). It checks at start that the prefix records the same number of shards \
(exit 2 if not).";

/// What `schedules` prints, for backups.
pub const BACKUP: &str = "\
Each row is what load needs to resume the job, so `redbike schedules > backup.csv` \
then `redbike load backup.csv` restores a prefix (after a FLUSHALL, say). The \
schedules hash itself stays as Python redbike 0.13.1 stores it: a one-off job (NOW, \
AT) is stored as STOP, so its row is rendered from where it stands: AT:TS while it waits \
on the timeline, NOW while it is queued or claimed (status WRK: running, or its worker \
died with it; restored, it runs again, at least once), STOP once it ran or was \
stopped. Other schedules are printed as stored.

A restore does not keep: statuses (save them with redbike statuses); the backoff of a \
CONTINUE job waiting on the timeline (it runs at once); a failed job held out of \
circulation (status DIE under on-failure hold: it is live again); the next run of a \
rule, computed again from load's reference instant (the same for rules with whole \
fields or a DTSTART).";

/// What `holds-lease` checks, for jobs that write elsewhere.
pub const HOLDS_LEASE: &str = "\
Run by a job's own command before a write it must not make twice: exit 0 if this run \
(REDBIKE_JOBID, REDBIKE_FENCING_TOKEN) still holds the job's lease (the lease key holds \
its tag and its running-index entry is not past its recovery instant, on Redis's \
clock), 1 if not, 69 if Redis is unreachable, 2 on bad input. It needs to reach Redis \
itself (jobs do not get the worker's credentials unless pass-redis-env = true: give \
it a config file, --redis-url or REDBIKE_REDIS_URL). A check is true at the \
moment it is made only; a store that keeps the highest REDBIKE_FENCING_TOKEN it has \
seen and refuses writes with a lower one is safe even against a machine paused \
between the check and the write.";

/// The dispatcher's behaviour, for `dispatch`.
pub const DISPATCH: &str = "\
A pass runs when the earliest job on the timeline falls due (every placement of \
redbike's announces its due instant), at once when set, load or a worker publish a due \
job, and otherwise when a recovery or heartbeat is due or 10 s after the last pass; \
while a Python peer was seen in the last hour (PREFIX-python-seen: a job placed \
without a wake-up; see python-peers in docs/configuration.md) it runs at the start of \
every second. It moves every job due by then into its queue, in atomic batches, so several \
dispatchers may share a prefix (run two for high availability, each with its own \
timefile). The timefile holds the time of the last completed pass; the first pass uses \
--after, else the timefile, else now, and a job due then runs once, however late. A \
queue whose config table [redbike.catch-up.Q] says policy = \"skip\" has its late runs \
skipped instead: a job of it due more than grace seconds ago (default 60, 5..=86400) \
is not queued but put at its next occurrence after now (a one-off leaves the \
timeline), with status SKP, last_failure SKP and a log line. Under policy = \"all\" \
such a job runs for each occurrence it missed, oldest first, one at a time, each with \
its own REDBIKE_DUE, up to the table's max runs (default 10; see redbike-backfill(1)). control HALT stops it \
within a second (a HALT the Python original writes, within 10 s); a stop \
signal after the current pass; a second signal at once. Redis outages are ridden out \
with capped backoff, one log line when a failure begins, changes or ends, and a \
reminder every minute. An error that retrying cannot fix (see exit status 78) before \
the first pass worked ends the dispatcher with status 78; later it is retried.

With shards = N (a prefix split into shards), a dispatcher runs one loop per shard, \
each with its own connection and its own timefile (TIMEFILE.K for shard K); \
--shards 0,3 serves only those shards. It checks at start that the prefix records the \
same number of shards (exit 2 if not, 69 if Redis cannot be reached).";

/// What `check` reports and how `--repair` fixes it.
pub const CHECK: &str = "\
Kinds: out-of-circulation (a live schedule, but no timeline entry, queue entry or lease, \
or a STOP schedule with status WRK and none of them: a one-off run claimed and never \
recorded as done; repair puts it back per its schedule, a one-off into its queue, with \
status REC), queued-and-timeline (repair \
keeps the queue entry), queued-while-running (repair drops the queue entry), \
entry-without-member and member-without-entry (the queue list and its members set \
disagree), duplicate-entry, wrong-queue (a job in a queue that is not its own), \
timeline-without-schedule, status-of-unknown-job, unparsable-schedule (repair marks it \
BAD and takes it out of the timeline and queue), odd-key (a key of the prefix of another \
type than redbike keeps under its name, e.g. left by hand; never repaired: remove or \
rename it) and colliding-key (a queue list whose name is also another key of ours: \
queue X-members is queue X's members set, queue X-X is job X's lease; move its jobs to \
another queue: `redbike unset` each, then set it under another queue name), colliding-id \
(such a job, stored by the Python original; never repaired: unset it), odd-id (a stored \
job id `set` refuses, white space at its ends or control characters; informational, \
every other command names it), not-utf8 (a job id that is not UTF-8, written by another \
program; a row per key that holds it, left out of the other checks; never repaired: \
remove it with redis-cli), overdue (a job on the timeline due for longer than overdue-after, \
default 60 s: no dispatcher runs, or HALT is set; never repaired, since what is \
missing is a dispatcher: start one, or `redbike control RESUME`; like held rows it is \
reported, not counted as a problem), stale (a job that has not succeeded by its deadline: no success within its queue's [redbike.stale] bound, or within two of its schedule's intervals and a grace; marked by a dispatcher, or its deadline passed with none marking it; reported, not counted as a problem; see Stale jobs in docs/liveness.md). Odd keys never stop the walk: the jobs and queues they touch are left \
out until they are fixed. held rows are failed jobs kept out of \
circulation on purpose (status DIE with on-failure hold, or by Python redbike) and bad \
rows are unparsable schedules already marked BAD: they are not problems, but an \
operator has to set or unset them. The schedule hash is the source of truth. Every repair re-checks its \
condition atomically, so --repair is idempotent and safe while dispatchers and workers \
run.";
/// `stats`: what each figure is and which need a scan.
pub const STATS: &str = "\
Figures: schedules (HLEN of PREFIX-schedules); whether PREFIX-control says HALT; the \
timeline's size, the jobs due now or earlier and how late the oldest of them is \
(ZCARD, ZCOUNT, ZRANGE 0 0); running jobs from the lease index PREFIX-leases (ZCARD, \
0 when absent; Python workers do not write it, so their jobs are not counted); per \
queue its length and how long its next job has waited, from that job's ENQ status \
(LLEN, LINDEX -1, HGET); the Redis settings that can lose jobs: maxmemory-policy, \
used memory and maxmemory, evicted keys, persistence, and each finding (INFO, and \
CONFIG GET save as the default user); from the run history, runs per minute (estimated \
from per-minute counts), failures of the last minute, and the lateness of the last \
minute's runs, p50 and p99 of start minus due among the last 1000 runs (HMGET, LRANGE; \
see redbike-history(1)); and, when a dispatcher or worker found the prefix's schedules \
and its own registration gone at once, the note it left in PREFIX-schedules-lost (GET; \
Redis came back empty?); jobs with runs of a backfill or catch-up to come (HLEN of \
PREFIX-backlogs; see redbike-backfill(1)); stale jobs, not succeeded within their bound (HLEN of PREFIX-stale and ZCOUNT of the passed deadlines in PREFIX-fresh-until). These are cheap: a few round trips whatever the size of the \
data.

Alive: registered dispatchers and workers, and workers per queue (each queue reported, \
0 when no worker works it, and each queue a live worker works), as `redbike ps` lists \
them; Python processes do not register and are not counted. Overdue: jobs on the \
timeline due for longer than overdue-after (config key, default 60 s, 5..=31536000) \
(ZCOUNT): a dispatcher moves a due job within a second (one the Python original \
placed, within 10 s), so overdue jobs mean that no \
dispatcher runs or HALT is set. Queued and running jobs are never counted: they are \
not on the timeline. A queue with waiting jobs and no worker alive shows as its length \
and age next to 0 workers (unless Python workers serve it).

Queues reported: those of --queues, else of `queues` in the config; with --scan also \
every non-empty queue found by SCAN of PREFIX-work-*.

--scan also counts jobs per status event (HSCAN of PREFIX-statuses) and lease keys of \
any worker, Python's included. SCAN walks the whole keyspace and HSCAN every status, so \
their cost grows with the data: use them for a look, or every few minutes, not every \
second on a large instance.

--format prometheus writes gauges named redbike_* with labels prefix and queue (and \
event) in the text exposition format, among them redbike_dispatchers_alive, \
redbike_workers_alive, redbike_queue_workers_alive, redbike_overdue_jobs, \
redbike_overdue_after_seconds and redbike_jobs_stale, for node_exporter's textfile collector; write to \
a temporary file and rename it, as contrib/systemd/redbike-stats.service does. \
--format json writes one object whose fields are only ever added.";

/// `ps`: what it lists, the CSV columns, and what is not listed.
pub const PS: &str = "\
Every redbike dispatcher and worker registers as it starts and heart-beats every third \
of heartbeat-ttl (config key, default 30 s, 3..=3600); its entry expires heartbeat-ttl \
seconds after its last heartbeat (a process killed with SIGKILL, or whose host died, \
vanishes then) and is deleted when it stops cleanly. Python redbike 0.13.1 processes \
do not register: they are never listed.

--format table (the default) prints aligned columns for people: KIND, HOST, PID, \
QUEUES (a worker's distinct queues), JOBS (its concurrency), VERSION, STARTED (UTC), \
HEARTBEAT (seconds since the last one, by this host's clock), EXPIRES (when the \
entry expires unless it heart-beats, by Redis's clock), FAILING (the error retrying \
cannot fix that keeps it from its work, such as NOPERM or WRONGTYPE, or -) and LIMITS \
(the fleet-wide limits it applies to its queues, Q=N, or -).

--format csv prints RFC 4180 rows under the header row \
id,kind,host,pid,queues,concurrency,version,started,heartbeat,expires_in_seconds,failing,limits: id is \
HOST-PID-RANDOM, kind dispatcher or worker, queues joined by ':' (empty for a \
dispatcher), concurrency empty for a dispatcher, started and heartbeat unix seconds by \
the process's own clock, expires_in_seconds with milliseconds, failing empty while it \
works, limits the fleet-wide limits a worker applies to its queues ([redbike.limits]) as \
Q=N joined by ';'. --format json prints an array of objects with the same fields (queues a list, \
concurrency null for a dispatcher, failing absent while it works, limits an object, \
absent when none, and ttl). Rows are sorted by kind, host and pid.

Keys: PREFIX-procs (set of ids) and PREFIX-proc-ID (the JSON description, expiring); \
reading them costs SMEMBERS, then GET and PTTL per process.";

/// `events`: the stream, the formats and the filters.
pub const EVENTS: &str = "\
Every prefix (every shard of a split prefix) keeps a capped Redis stream, \
PREFIX-events, of about `events` entries (config key; default 10000; 0 writes none): \
one per run outcome, written with the outcome itself; one when a job goes stale or \
fresh again; and one per operator action (set, unset, load, run, pause, resume, kill, \
control, check --repair, backfill), naming the user, host and pid that did it. This \
command prints the entries of every shard merged in the order of their ids (Redis's \
clock), oldest first; --follow prints the last 10 (or all since --since) and then each \
new one as it comes, riding out Redis outages, until SIGINT or SIGTERM (exit 0). \
Entries of another format or of a type this version does not know are skipped, and \
their number said on standard error.

Text: one line per entry: its time (ISO 8601, UTC, milliseconds), its type, the job or \
target, the outcome (with failed when it counts as a failure) or the action and its \
detail, and who (a run's process, an action's user@host and pid, and via cli, serve or \
top). Text from jobs and operators is escaped. --format json prints JSON Lines: one \
object per entry with id, time, shard and every field of the entry as stored (strings), \
except entry, a run's history entry, printed as the object history --format json \
prints. --format csv: the header row \
id,time,shard,type,job,failed,outcome,action,target,detail,user,host,pid,via,queue,since,bound,entry \
(entry: the history entry as stored, JSON). See docs/events.md for the fields and how \
to size the stream.
";

/// `history`: the columns and where the entries come from.
pub const HISTORY: &str = "\
Every run a redbike worker makes leaves an entry, and so does every recovery, skip \
(catch-up) or refusal (an unreadable schedule) a dispatcher makes. A job's last \
history-limit entries (config key, or --history-limit of work and dispatch; default \
20; 0 writes no history) are in PREFIX-history-JOBID, where workers file them from \
PREFIX-unfiled-runs when idle (this command and tell read both); without JOBID the \
command prints every job's last 1000 entries (PREFIX-recent-runs), with --failures the last 1000 \
failures (PREFIX-recent-failures). A valid job id without history prints the header \
only (exit 0); an invalid one exits 2.

CSV header row (RFC 4180, CRLF line ends): \
job,queue,outcome,due,start,end,duration,late,exit,signal,host,pid,by,detail,tail. \
job and queue: the job and its queue. outcome: ok, backoff (succeeded and asked to \
wait), stopped (asked to stop), unset, failed (DIE), timed-out (TMO), killed (KIL: \
redbike kill), interrupted \
(INT: its worker was stopping), fenced (FNC), recovered (REC: its worker vanished), \
skipped (SKP: catch-up), bad (BAD: unreadable schedule). due: unix seconds the run was \
due: the timeline score a redbike dispatcher queued it at, else (NOW, CONTINUE, a job \
queued by set, a rerun, or by the Python original) when it entered its queue; empty \
when unknown. start, end: unix seconds with milliseconds (a dispatcher's entry has no \
start: end is when it acted). duration: seconds the run took. late: start minus due \
(for a skip, end minus due). exit, signal: how the command ended (empty when it did \
not start, or for a dispatcher's entry). host, pid, by: the process that wrote the \
entry, by = worker or dispatcher. detail: why, in words (a failure's reason, a skip's \
next run). tail: the last lines of the run's output, at most 2 KiB. Empty fields are \
unknown or do not apply. --format json prints one array of objects with the same \
fields (numbers as numbers, null when unknown).";

/// `top`: what the live view shows, its keys and what it costs.
pub const TOP: &str = "\
A full-screen view of the prefix, read about once a second: a header (prefix, how the \
server was found and which it is, the clock in UTC, HALT, the dispatchers and workers \
alive, and \"disconnected since\" while Redis cannot be reached: it keeps running and \
reconnects), the queues (jobs waiting, how long the oldest has waited, running, \
workers alive, and from the run history the runs, failures and lateness p50/p99 of \
the last minute), the running jobs (elapsed against \
the timeout this machine's config gives their queue), the next jobs due with \
countdowns, the paused jobs (paused queues are marked), and the recent failures with the last line of their output (the run \
history's PREFIX-recent-failures; each job's last failure from PREFIX-failures when \
there is no history).

Keys: q or Ctrl-C quits; Up/Down (j/k), PgUp/PgDn, Home/End (g/G) move; / filters \
jobs by id (Enter keeps the filter, Esc clears it); Enter shows the selected job's \
detail (what tell says); r runs the selected job now, p pauses or resumes it and x \
kills its current run, each after a y to confirm; ? shows the keys. The terminal is restored on every exit: q, \
Ctrl-C, SIGTERM, SIGHUP, a panic.

Queues shown: those of --queues and of `queues` in the config, the queues workers \
listen on (PUBSUB CHANNELS of their wake-up channels) and the queues of the jobs \
listed (running, coming up, failed) and the paused queues. No SCAN: every refresh is two pipelined round \
trips of bounded commands (GET, ZCARD, ZCOUNT, ZRANGE of the first 50 timeline \
entries and 100 running jobs, LRANGE of the last 20 recent failures, LLEN and LINDEX \
per queue, one HMGET of statuses; every fifth refresh also HLEN twice, one HSCAN page \
of up to 200 failures, LRANGE of the last 1000 recent runs, PUBSUB CHANNELS and the \
registry as ps reads it, HLEN and one HSCAN page of the paused jobs, HGETALL of the \
paused queues): 8 commands plus 2 per queue, about 16 a \
second with three queues, so ten \
operators watching do not disturb a prefix. A prefix with more than 200 failed jobs \
shows a sample of them.

--once prints one frame as plain text and exits (for scripts and logs), and is what \
runs when standard output is not a terminal; its width is $COLUMNS, else 100.";

/// `serve`: the routes, the Redis cost, control and its safeguards.
pub const SERVE: &str = "\
Serves one unsplit prefix over HTTP until SIGTERM or Ctrl-C: a dashboard at / (queues \
with their depth, running jobs with their run time, the next due, recent failures, \
paused jobs and queues, the processes alive, and a page per job with its schedule, next \
run, history and output tails; it refreshes every 2 seconds and fits a phone), \
Prometheus metrics at /metrics (what stats --format prometheus prints), and a JSON API: \
/api/v1/overview, /api/v1/jobs/JOBID (what tell prints), /api/v1/history (history's \
options as parameters: job, count, failures, since), /api/v1/stats (stats --format \
json), /api/v1/ps (ps --format json) and /api/v1/paused. Errors are JSON, \
{\"error\": \"...\"}: 404 for an unknown path, 400 for a bad parameter, 413 for a body \
over 4096 bytes, 503 while Redis cannot be reached (serve keeps running and reconnects). \
docs/serve.md lists every field.

Redis cost: one connection; every reply is cached and shared by all viewers, and read \
again only when asked for and older than 1 second (the overview, top's read), 2 seconds \
(ps) or 5 seconds (stats and /metrics); a job's tell and each history query are cached \
for 1 second. Nothing is read while nobody looks. With three queues and one process \
alive the dashboard and /metrics cost at most about 25 commands a second in all, \
however many people watch.

Control: with --allow-control, POST /api/v1/jobs/JOBID/run, .../pause, .../resume, \
.../kill, and /api/v1/queues/QUEUE/pause and .../resume do what run, pause, resume and \
kill do. Each needs \
Authorization: Bearer TOKEN, the token of $REDBIKE_SERVE_TOKEN or of --token-file (at \
least 16 characters; never on the command line, where ps would show it); requests from \
another site (Origin, Sec-Fetch-Site) are refused. Without --allow-control these routes \
answer 403. Serve speaks plain HTTP: keep it on loopback, or behind a proxy that adds \
TLS, before sending a token over a network.";

/// `notify`: what it reports, where, and what it costs.
pub const NOTIFY: &str = "\
Follows the event stream of every shard (docs/events.md) until SIGTERM or Ctrl-C and \
reports changes of state, not every run: a job's first failure after success (or its \
first run, failed), its recovery (the first success after failures), a job becoming \
stale and fresh again, jobs overdue while no dispatcher is alive (dispatcher-absent, \
dispatcher-back), and a Redis hazard appearing or going away (hazard, hazard-cleared; \
these two are checked every check-every seconds by one notifier of the prefix).

Each notification is one JSON object (docs/notify.md): v, kind, prefix, job, queue, \
time, id (the stream entry's), summary, run (the history entry, its output tail at most \
2 KiB), suppressed (changes of the job left unsaid by the rate limit since its last \
notification) and redelivered (true when it may have been delivered before); at most \
16 KiB. --exec runs the command with the JSON on stdin and REDBIKE_NOTIFY_KIND, _JOB, \
_QUEUE, _PREFIX, _TIME, _ID, _SUMMARY, _OUTCOME, _EXIT, _HAZARD, _SUPPRESSED and \
_REDELIVERED in its environment (but not REDBIKE_REDIS_URL, REDBIKE_CONFIG nor the \
webhook's URL and secret), killing its process group after exec-timeout seconds \
and trying exec-attempts times in all. --webhook POSTs the JSON with a timeout \
(webhook-timeout), retrying with exponential backoff up to backoff-max seconds for \
retry-for seconds (a 4xx answer other than 408 and 429 is not retried); \
$REDBIKE_NOTIFY_SECRET, if set, goes in the header X-Redbike-Secret. With rate-limit, a \
job gets at most one notification per that many seconds; a state that lasts to the end \
of the window is reported then. Notifications of \
one shard are delivered in order: the next waits until this one is delivered or given \
up. Those settings and rate-limit are in [redbike.notify] (docs/configuration.md).

Notifiers sharing a prefix share the consumer group redbike-notify and the state \
PREFIX-notify-state: each notification is delivered once, by one of them. One killed \
(even with -9) leaves the entries it held; after claim-after seconds another notifier, \
or itself restarted, takes them over and delivers them, marked redelivered: at least \
once. Entries of another format or type, or missing a field, are skipped and said in \
the log (one line when skipping begins, one with the count when it ends). The group is \
created at the end of the stream: what happened before the first notifier started is \
not reported.

Redis cost: a blocking XREADGROUP a second per shard, an EVALSHA and an XACK per \
entry, and a fleet check (stats' reads) every check-every seconds by one notifier. \
Workers are never slowed: the notifier only reads the stream and writes its own keys.";

/// `ping`: what it prints and how each deployment is configured.
pub const PING: &str = "\
Prints one line per fact, KEY: VALUE: server (host:port reached), mode (standalone, \
sentinel or cluster), master-name (sentinel), slot (the prefix's hash slot, cluster), \
role, version (unknown when an ACL refuses HELLO), tls (on or off), user, prefix, \
latency_ms (median of 5 PINGs), then from INFO maxmemory-policy, memory (used, and \
maxmemory), evicted-keys and persistence (aof, rdb, off, or unknown for an ACL user \
with AOF off), and a warning: line for each Redis setting that can lose jobs; \
redis-settings: unknown when INFO is refused. Exit 0 when the server answered, 69 when it cannot be \
reached (the error says which address failed and why), 2 for bad settings.

Deployments, all in [redbike-redis] (see redbike.conf.example): TLS with a rediss:// \
URL or tls = true, plus tls-ca, tls-cert and tls-key (PEM files) and tls-insecure for \
self-signed test set-ups; an ACL user with username and password; Sentinel with \
sentinels = [\"host:port\", ...] and master-name (the master is asked for at every \
connect and followed through a failover); Redis Cluster with cluster-nodes = \
[\"host:port\", ...] and a prefix with a hash tag such as {app}, so that all keys of \
the prefix share one hash slot. wait-replicas = N makes writes count only once N \
replicas acknowledge them (exactly-once across a Sentinel failover).";

/// `completions`: how to install the scripts.
pub const COMPLETIONS: &str = "\
Install: redbike completions bash > /etc/bash_completion.d/redbike (or \
~/.local/share/bash-completion/completions/redbike); redbike completions zsh > \
\"${fpath[1]}/_redbike\"; redbike completions fish > \
~/.config/fish/completions/redbike.fish.";

/// `redbike run`: what each state of the job leads to.
pub const RUN: &str = "\
The job runs once as soon as a worker is free; its schedule is unchanged. On the \
timeline (or stopped, or held after a failure): it moves into its queue now (status \
ENQ, the original's queue rules), and the worker that runs it puts it back per its \
schedule afterwards; a one-off waiting on the timeline keeps its occurrence (its \
schedule becomes AT:TS until then). Already queued: nothing changes, and the command \
says so. Running: it runs once more right after this run ends (a marker in \
PREFIX-rerun; honoured only by a redbike worker, for a run that started before it: a \
Python worker's run ignores it, and a later run clears it). Paused: it runs once and \
stays paused. While the prefix is halted (control HALT) nothing runs: the command \
warns. A Python worker runs a queued job as any other and places it per its schedule \
afterwards, as ours does.

Exit codes: 0 done (or nothing to do); 2 bad job id or unknown job (nothing written). \
See docs/control.md.";

/// `redbike kill`: what it stops and how the worker hears of it.
pub const KILL: &str = "\
The worker that runs the job stops this run at once, as on a timeout: SIGTERM to its \
process group, SIGKILL after the worker's grace period; status KIL (and last_failure \
KIL), history outcome killed. The job keeps its schedule and goes on per it, like a \
job that timed out: a rule at its next occurrence, a CONTINUE job after failure-delay \
seconds; a one-off is done. A paused job stays paused. The request reaches the worker \
as a message on PREFIX-wake-control, which workers listen to anyway (an idle fleet \
pays nothing for it), and as a marker in PREFIX-kill (job id -> the lease tag of the \
run) that the worker reads with its refresh, about every second while it runs jobs, in \
case its listener missed the message. The marker names the run, so a kill never \
reaches a later run of the job; it goes once the run's outcome is written. A run of \
the Python original (its lease is not in the running index) cannot be stopped: the \
command says so.

Exit codes: 0 the worker was asked to stop the run; 1 nothing was written: the job is \
not running, the prefix is halted (control HALT: its workers stop their runs anyway), \
or a Python worker runs it; 2 bad job id or unknown job (nothing written). See \
docs/control.md.";

/// `redbike backfill`.
pub const BACKFILL: &str = "\
Every run of the job's schedule (a rule or a cron line, with the job's jitter offset) \
from --from to --to, both included, runs once, oldest first, one at a time, each with \
its own due instant as REDBIKE_DUE (and in its history entry). The instants go into \
the job's backlog (PREFIX-backlog-JOBID, with the job in PREFIX-backlogs): when the job \
is neither running nor queued, the first run is queued now (the job leaves the \
timeline); else they begin when the current run ends. After each run a redbike worker \
queues the job again for the next instant; after the last, the job goes back per its \
schedule, at the earliest of its next run and the one the backlog put off. A retry, a \
rerun (run) and a pause go first; a run cut short by its worker (stopping, vanished, \
fenced) leaves the backlog to go on after the job's next run; unset drops it, and \
so does a run that ends under a STOP schedule. tell shows the backlog (backlog: runs_left, next_due). A Python worker ignores \
it: the backlog goes on after the job's next run by a redbike worker. --cancel drops \
what is left of the backlog (a run of it queued or running still runs, then the job \
goes back per its schedule).

Refused, with one line, exit 2 and nothing written: --from after --to, --to in the \
future, a range with no run or with more than --max runs (default 100; --max takes up \
to 100000), an unknown job, a schedule that is not a rule or cron line (NOW, AT, \
CONTINUE, STOP), a paused job, a halted prefix (control HALT), a job with a backlog \
already. See docs/schedules.md.";

/// `redbike pause`: jobs and queues.
pub const PAUSE: &str = "\
A paused job keeps its schedule but leaves the timeline and its queue (status PAU; \
PREFIX-paused holds since and note, shown by tell and check). A running job finishes, \
then is not placed. set stores a new schedule and the job stays paused; unset forgets \
the job and its pause. Recovery never puts a paused job back; check reports it as \
paused, never as out of circulation, and reports (--repair: removes) a paused job \
found on the timeline or in its queue.

With --queue Q, redbike workers stop claiming from Q (jobs keep arriving in it); stats \
shows the paused queues. Q need not exist yet; its name must be valid. \
The Python original knows nothing of pauses: its dispatcher queues a paused job found \
on the timeline, and its workers claim from a paused queue and run a paused job they \
find queued. Ours drop a paused job from the timeline and from a queue. See \
docs/control.md.";

/// `redbike resume`: jobs and queues.
pub const RESUME: &str = "\
A job is placed per its schedule from now, as set places it (status TML, ENQ or STP): \
occurrences missed while it was paused are not run; a one-off whose time passed runs \
once now. With --queue Q, redbike workers of Q claim from it again and idle ones are \
woken at once. Resuming what is not paused changes nothing and says so. See \
docs/control.md.";

#[cfg(test)]
mod tests {
    #[test]
    fn work_says_how_many_jobs_are_claimed_ahead() {
        let said = format!("at most max({}, concurrency)", crate::work::AHEAD_AT_MOST);
        assert!(super::WORK.contains(&said), "help::WORK lacks {said:?}");
    }
}
