# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_redbike_global_optspecs
    string join \n c/config= redis-url= prefix= v/verbose q/quiet h/help V/version
end

function __fish_redbike_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_redbike_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_redbike_using_subcommand
    set -l cmd (__fish_redbike_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c redbike -n "__fish_redbike_needs_command" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_needs_command" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_needs_command" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_needs_command" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_needs_command" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_needs_command" -s V -l version -d 'Print version'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "set" -d 'Store a job\'s schedule and place the job (timeline, queue or stopped)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "unset" -d 'Forget a job (a running job finishes first, then is dropped)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "run" -d 'Run a job once as soon as a worker is free, keeping its schedule'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "kill" -d 'Stop the current run of a job (SIGTERM, SIGKILL after the grace period), keeping its schedule'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "backfill" -d 'Run every occurrence of a job\'s schedule in a past range, once each, in order'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "pause" -d 'Pause a job (keep its schedule, take it out of circulation), or a queue with --queue'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "resume" -d 'Resume a paused job (placed per its schedule from now), or a queue with --queue'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "tell" -d 'Show what is known about a job, as JSON'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "holds-lease" -d 'For a job\'s own command: exit 0 if its run still holds the job\'s lease, 1 if not (another run may be under way: refuse to write)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "statuses" -d 'Print statuses as CSV rows JOBID,EVENT,TIMESTAMP, sorted by job id'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "schedules" -d 'Print schedules as CSV rows JOBID,SCHEDULE, sorted by job id'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "control" -d 'Signal dispatchers and workers: HALT stops them, RESUME clears HALT'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "load" -d 'Set many jobs from a CSV file of JOBID,SCHEDULE rows (all rows checked first)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "dispatch" -d 'Run the dispatcher: move due jobs from the timeline into their work queues'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "work" -d 'Run a worker: claim jobs from weighted queues and run COMMAND JOBID for each'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "check" -d 'Check the prefix for jobs out of circulation and inconsistent keys; CSV rows KIND,JOBID,DETAIL on stdout, a summary on stderr, exit 1 when anything is wrong'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "next" -d 'Preview the next run times of a schedule (does not touch Redis)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "history" -d 'Print the run history, newest first: one job\'s, or every job\'s recent runs, as CSV (header row: see below) or JSON'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "events" -d 'Print the event stream: run outcomes, staleness and operators\' actions (the audit log), oldest first; --follow keeps printing them as they come'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "stats" -d 'Print figures about the prefix: queues, timeline, running jobs, statuses'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "ps" -d 'List the dispatchers and workers alive (registered and heart-beating)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "top" -d 'A live view of the prefix: queues, running jobs, the next due, failures'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "serve" -d 'Serve the prefix over HTTP: a dashboard, a JSON API and Prometheus /metrics'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "notify" -d 'Follow the event stream and report changes of state (a job\'s first failure, its recovery, stale and fresh jobs, no dispatcher, Redis hazards) to a command or a webhook'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "ping" -d 'Connect with the effective settings and print the server, role, version and latency reached (to debug TLS, ACL, Sentinel and Cluster set-ups)'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c redbike -n "__fish_redbike_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c redbike -n "__fish_redbike_using_subcommand set" -s a -l after -d 'Reference instant for the next run [default: the timefile\'s time, else now]' -r
complete -c redbike -n "__fish_redbike_using_subcommand set" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand set" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand set" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand set" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand set" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand set" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand unset" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand unset" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand unset" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand unset" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand unset" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand unset" -s h -l help -d 'Print help'
complete -c redbike -n "__fish_redbike_using_subcommand run" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand run" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand run" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand run" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand run" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand kill" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand kill" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand kill" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand kill" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand kill" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand kill" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l from -d 'First instant of the range, included (unix seconds or ISO 8601)' -r
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l to -d 'Last instant of the range, included; not in the future' -r
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l max -d 'Most runs to queue, 1..=100000; a range holding more is refused' -r
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -l cancel -d 'Drop what is left of the job\'s backfill instead (a run under way finishes)'
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand backfill" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand pause" -l queue -d 'Pause this queue instead: redbike workers stop claiming from it' -r
complete -c redbike -n "__fish_redbike_using_subcommand pause" -l note -d 'Why, for whoever looks later (tell, check, stats); at most 1024 bytes' -r
complete -c redbike -n "__fish_redbike_using_subcommand pause" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand pause" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand pause" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand pause" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand pause" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand resume" -l queue -d 'Resume this queue instead: its redbike workers claim from it again' -r
complete -c redbike -n "__fish_redbike_using_subcommand resume" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand resume" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand resume" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand resume" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand resume" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand tell" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand tell" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand tell" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand tell" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand tell" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand tell" -s h -l help -d 'Print help'
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand holds-lease" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -s b -l before -d 'Only statuses at or before this time [default: now]' -r
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand statuses" -s h -l help -d 'Print help'
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand schedules" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand control" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand control" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand control" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand control" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand control" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand control" -s h -l help -d 'Print help'
complete -c redbike -n "__fish_redbike_using_subcommand load" -s a -l after -d 'Reference instant for next runs [default: the timefile\'s time, else now]' -r
complete -c redbike -n "__fish_redbike_using_subcommand load" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand load" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand load" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand load" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand load" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand load" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s s -l schedules -d 'Set the jobs of this CSV file (JOBID,SCHEDULE rows) before dispatching begins' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s a -l after -d 'Point in time of the first pass, and reference instant for --schedules [default: the timefile\'s time, else now]' -r
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -l history-limit -d 'History entries kept per job by recoveries and skips, 0..=10000; 0 writes none [default: `history-limit` in the config, else 20]' -r
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -l shards -d 'Serve only these shards of a prefix split into shards, e.g. 0,3 [default: every shard]' -r
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand dispatch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand work" -s j -l concurrency -d 'Jobs run at once, 1..=1024, over every shard served [default: `concurrency` in the config, else 1]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l timeout -d 'Seconds a job may run, for every queue, 1..=31536000 (a year) [default: per-queue `timeouts`, else `default-timeout`]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l grace -d 'Seconds between SIGTERM and SIGKILL when a job is stopped, 1..=86400; a vanished worker\'s jobs are recovered fence-after + grace + 2 s after their last confirmation [default: 5]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l fence-after -d 'Seconds a running job may go unconfirmed to Redis (an outage, a partition, a frozen worker) before it is stopped, 3..=86400; recovery of a vanished worker\'s jobs waits as much longer [default: `fence-after` in the config, else 35]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l on-failure -d 'What a failed job does: hold (leave it, as 0.13.1) or reschedule [default: reschedule]' -r -f -a "hold\t'Leave the job out of circulation, as the original does; find it with `statuses`'
reschedule\t'Keep status DIE visible and put the job back per its schedule'"
complete -c redbike -n "__fish_redbike_using_subcommand work" -l output-line-bytes -d 'Longest line of a job\'s output logged, for every queue; longer ones are cut (64 to 1048576) [default: `output-line-bytes` in the config, else 8192]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l output-log-lines -d 'Lines of a run\'s output logged, for every queue (0 to 1000000000) [default: `output-log-lines` in the config, else 10000]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l output-log-bytes -d 'Bytes of a run\'s output logged, for every queue (0 to 1099511627776) [default: `output-log-bytes` in the config, else 1048576]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l history-limit -d 'History entries kept per job, 0..=10000; 0 writes no history at all [default: `history-limit` in the config, else 20]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l shards -d 'Serve only these shards of a prefix split into shards, e.g. 0,3 [default: every shard]; -j is shared out among them and bounds the jobs run at once over all' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand work" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand work" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand work" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand work" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand check" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand check" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand check" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand check" -l repair -d 'Fix what is found (idempotent; safe while dispatchers and workers run)'
complete -c redbike -n "__fish_redbike_using_subcommand check" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand check" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand next" -s n -l count -d 'How many run times, 1..=100000' -r
complete -c redbike -n "__fish_redbike_using_subcommand next" -s a -l after -d 'Start after this instant, 1900..=9999 [default: now]' -r
complete -c redbike -n "__fish_redbike_using_subcommand next" -l job -d 'The runs of this job: with its queue\'s jitter (config `[redbike.jitter]`)' -r
complete -c redbike -n "__fish_redbike_using_subcommand next" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand next" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand next" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand next" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand next" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand next" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand history" -s n -l count -d 'At most this many entries, 1..=1000000' -r
complete -c redbike -n "__fish_redbike_using_subcommand history" -l since -d 'Only entries that ended at or after this time' -r
complete -c redbike -n "__fish_redbike_using_subcommand history" -l format -d 'Output format' -r -f -a "csv\t'RFC 4180 CSV with a header row'
json\t'One JSON array of entry objects'"
complete -c redbike -n "__fish_redbike_using_subcommand history" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand history" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand history" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand history" -l failures -d 'Only failures (every outcome but ok, backoff, stopped and unset)'
complete -c redbike -n "__fish_redbike_using_subcommand history" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand history" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand history" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand events" -l job -d 'Only this job\'s entries and the actions on it' -r
complete -c redbike -n "__fish_redbike_using_subcommand events" -l since -d 'Only entries written at or after this time' -r
complete -c redbike -n "__fish_redbike_using_subcommand events" -l format -d 'Output format' -r -f -a "text\t'One line per entry for people, text from jobs and operators escaped'
json\t'JSON Lines: one object per entry, every field exact'
csv\t'RFC 4180 CSV with a header row'"
complete -c redbike -n "__fish_redbike_using_subcommand events" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand events" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand events" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand events" -s f -l follow -d 'Print the last 10 entries (or those since --since), then each new one as it comes, until SIGINT or SIGTERM'
complete -c redbike -n "__fish_redbike_using_subcommand events" -l failures -d 'Only failures: runs that failed (DIE, TMO, KIL, FNC, BAD) and jobs gone stale'
complete -c redbike -n "__fish_redbike_using_subcommand events" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand events" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand events" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand stats" -l format -d 'Output format: text for people, json, or prometheus for node_exporter\'s textfile collector' -r -f -a "text\t'Lines for people; the shape may change'
json\t'One JSON object; fields are added, never renamed'
prometheus\t'Prometheus text exposition format, gauges named `redbike_*`'"
complete -c redbike -n "__fish_redbike_using_subcommand stats" -l queues -d 'Queues to report on, e.g. A:B [default: `queues` in the config]' -r
complete -c redbike -n "__fish_redbike_using_subcommand stats" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand stats" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand stats" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand stats" -l scan -d 'Also find every queue (SCAN of the whole keyspace) and count jobs per status event (HSCAN of the statuses); their cost grows with the data'
complete -c redbike -n "__fish_redbike_using_subcommand stats" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand stats" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand ps" -l format -d 'Output format: table for people, csv or json for scripts' -r -f -a "table\t'Aligned columns for people; the shape may change'
csv\t'RFC 4180 CSV with a header row; columns are added at the end, never renamed'
json\t'One JSON array of objects; fields are added, never renamed'"
complete -c redbike -n "__fish_redbike_using_subcommand ps" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand ps" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand ps" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand ps" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand ps" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand ps" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand top" -l queues -d 'Queues to show besides those of the config and of the jobs listed, e.g. A:B' -r
complete -c redbike -n "__fish_redbike_using_subcommand top" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand top" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand top" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand top" -l once -d 'Print one frame as plain text and exit (what runs when stdout is not a terminal)'
complete -c redbike -n "__fish_redbike_using_subcommand top" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand top" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l listen -d 'The address and port to listen on; keep it on loopback (or behind a proxy that adds TLS and logins) unless the prefix may be read by anyone who can reach it' -r
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l token-file -d 'Read the control token from this file (else from $REDBIKE_SERVE_TOKEN)' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l queues -d 'Queues to show besides those of the config and of the jobs listed, e.g. A:B; the queues /metrics reports on [default: `queues` in the config]' -r
complete -c redbike -n "__fish_redbike_using_subcommand serve" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand serve" -l allow-control -d 'Accept control requests (run now, pause, resume) that carry the token of $REDBIKE_SERVE_TOKEN or of --token-file as `Authorization: Bearer TOKEN`'
complete -c redbike -n "__fish_redbike_using_subcommand serve" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand serve" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand notify" -l webhook -d 'POST each notification as JSON to this http or https URL (the secret of $REDBIKE_NOTIFY_SECRET in the header X-Redbike-Secret)' -r
complete -c redbike -n "__fish_redbike_using_subcommand notify" -l exec -d 'Run this command for each notification, with its JSON on stdin and REDBIKE_NOTIFY_* in its environment; takes the rest of the command line' -r
complete -c redbike -n "__fish_redbike_using_subcommand notify" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand notify" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand notify" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand notify" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand notify" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand notify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand ping" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand ping" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand ping" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand ping" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand ping" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand ping" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand completions" -s c -l config -d 'Config file (TOML) [default: ./.redbike.conf when it exists]' -r -F
complete -c redbike -n "__fish_redbike_using_subcommand completions" -l redis-url -d 'Redis URL, beats the config file (redis://[user:password@]host[:port][/db])' -r
complete -c redbike -n "__fish_redbike_using_subcommand completions" -l prefix -d 'Key prefix, beats the config file [default: redbike]' -r
complete -c redbike -n "__fish_redbike_using_subcommand completions" -s v -l verbose -d 'Log more (repeat for more)'
complete -c redbike -n "__fish_redbike_using_subcommand completions" -s q -l quiet -d 'Log less (repeat for less)'
complete -c redbike -n "__fish_redbike_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "set" -d 'Store a job\'s schedule and place the job (timeline, queue or stopped)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "unset" -d 'Forget a job (a running job finishes first, then is dropped)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "run" -d 'Run a job once as soon as a worker is free, keeping its schedule'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "kill" -d 'Stop the current run of a job (SIGTERM, SIGKILL after the grace period), keeping its schedule'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "backfill" -d 'Run every occurrence of a job\'s schedule in a past range, once each, in order'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "pause" -d 'Pause a job (keep its schedule, take it out of circulation), or a queue with --queue'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "resume" -d 'Resume a paused job (placed per its schedule from now), or a queue with --queue'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "tell" -d 'Show what is known about a job, as JSON'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "holds-lease" -d 'For a job\'s own command: exit 0 if its run still holds the job\'s lease, 1 if not (another run may be under way: refuse to write)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "statuses" -d 'Print statuses as CSV rows JOBID,EVENT,TIMESTAMP, sorted by job id'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "schedules" -d 'Print schedules as CSV rows JOBID,SCHEDULE, sorted by job id'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "control" -d 'Signal dispatchers and workers: HALT stops them, RESUME clears HALT'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "load" -d 'Set many jobs from a CSV file of JOBID,SCHEDULE rows (all rows checked first)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "dispatch" -d 'Run the dispatcher: move due jobs from the timeline into their work queues'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "work" -d 'Run a worker: claim jobs from weighted queues and run COMMAND JOBID for each'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "check" -d 'Check the prefix for jobs out of circulation and inconsistent keys; CSV rows KIND,JOBID,DETAIL on stdout, a summary on stderr, exit 1 when anything is wrong'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "next" -d 'Preview the next run times of a schedule (does not touch Redis)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "history" -d 'Print the run history, newest first: one job\'s, or every job\'s recent runs, as CSV (header row: see below) or JSON'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "events" -d 'Print the event stream: run outcomes, staleness and operators\' actions (the audit log), oldest first; --follow keeps printing them as they come'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "stats" -d 'Print figures about the prefix: queues, timeline, running jobs, statuses'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "ps" -d 'List the dispatchers and workers alive (registered and heart-beating)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "top" -d 'A live view of the prefix: queues, running jobs, the next due, failures'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "serve" -d 'Serve the prefix over HTTP: a dashboard, a JSON API and Prometheus /metrics'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "notify" -d 'Follow the event stream and report changes of state (a job\'s first failure, its recovery, stale and fresh jobs, no dispatcher, Redis hazards) to a command or a webhook'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "ping" -d 'Connect with the effective settings and print the server, role, version and latency reached (to debug TLS, ACL, Sentinel and Cluster set-ups)'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c redbike -n "__fish_redbike_using_subcommand help; and not __fish_seen_subcommand_from set unset run kill backfill pause resume tell holds-lease statuses schedules control load dispatch work check next history events stats ps top serve notify ping completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
