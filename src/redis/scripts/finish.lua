-- finish: record the outcomes of a batch of runs and put each job back per its
-- schedule, atomically. Only the lease holder reschedules (as in the original), so an
-- unset or set made while the job ran wins; but a job whose lease merely expired, and
-- that is nowhere else, is still put back so that it never falls out of circulation.
-- One call per round trip, whatever the number of jobs: a script call has a cost of
-- its own (arguments, the helpers of common.lua), paid once here. Likewise, from
-- BATCH_FROM jobs, the leases and schedules are read, and the leases, the running
-- index, the schedules and the statuses written, in one call each for the batch; each
-- wake channel is published to once. (The jobs of a batch are distinct: a worker
-- writes the outcome of a claim before it can claim that job again.)
-- History (crate::history): each job's entry, made in Rust, goes to the unfiled runs
-- (file_history.lua moves it to the job's own list later, off the worker's busy path:
-- a new key per job is most of what history costs Redis), or, once more than the
-- backlog wait there (`direct`), to the job's list (trimmed to the history limit) at
-- once; and to the recent runs (only while the event stream is off: else its run
-- events are the recent runs) and failures, with the runs of the minute counted; for a job unset, its history list
-- and due field go, and its entry goes to the recent lists only. Those writes are
-- pcalls: a history key of another type (`redbike check` names it) costs its entries,
-- never the outcome, and a failed write writes nothing. An outcome written again (its
-- reply was lost: the lease is gone) records no second entry when its entry is
-- already unfiled or heads the job's list. `history-limit = 0` (limit "0"): no history
-- is written at all, whatever the entries.
-- Events (docs/events.md): each outcome with an entry also goes to the event stream,
-- in one XADD (emit), with `failed` "1" for an entry of kind "f"; an outcome written
-- again writes no second event (the entry is recognised in the history as above, or,
-- when history is off or cannot tell, among the stream's last entries).
-- A paused job (`redbike pause`) is not placed after its run (status PAU unless the
-- run failed). A `rerun` marker (`redbike run` while the job ran) queues the job once
-- more instead, if this run started before the marker; an older marker (left by a
-- Python worker's run, which ignores it) is cleared, not honoured. A kill marker
-- (`redbike kill`, kill.lua) goes with the run it names.
-- A failed run to retry (crate::retries) goes on the timeline at its retry instant with
-- its field in `attempts` (ATTEMPT:DUE:AT) written; any other outcome clears the field,
-- except a run cut short by its worker (`=`: kept). A one-off run to retry ("oneoff"
-- with a due time) goes on the timeline only if it was a one-off run (oneoff_action),
-- else it stops: a `set JOB STOP` while it ran wins.
-- A job with a backlog (crate::backfill: `backfill`, catch-up `all`) whose run ended
-- (not a retry to come, not a run cut short by its worker, not paused nor asked to run
-- again, not held) is queued again at once for the next instant of its backlog, with
-- the due note INSTANT:NOW, instead of its placement; once the backlog is empty, it is
-- placed per its schedule, at the earliest of that placement and the one the backlog
-- put off (kept in `backlogs`), so no occurrence falls between. A STOP schedule (set,
-- or asked for by the job) and an unset drop the backlog. Looked up only while
-- `backlogs` is a hash (a key of another type: no backlog is run; `check` names it).
-- Staleness (crate::stale): a success with a deadline writes it to `fresh-until` (one
-- ZADD; in a batch one for all); a success of a job in `stale` takes it out and writes
-- a `fresh` event (docs/events.md) with when it went stale. `stale` is looked at only
-- while it is a hash, `fresh-until` written only while it is a sorted set (or none):
-- keys of another type (`check` names them) cost the staleness, never the outcome.
-- An unset job leaves both.
-- KEYS (FIXED of them): schedules, statuses, timeline, failures, leases, recent runs,
--       recent failures, runs per minute, due, paused, rerun, unfiled runs, attempts,
--       kill, backlogs, events, fresh-until, stale; then per queue of the jobs (QK
--       each): queue, members
-- ARGV per job (AS each): jobid, tag, its queue (the number of its queue's keys,
--       from 1), expected schedule ("\0" = none), mode (place|unset|hold|bad), action
--       (enqueue|timeline|stop, or oneoff: a STOP schedule whose run did not end by
--       itself, see oneoff_action), due, schedule to store ("" = keep), failure event
--       ("" = none), history entry ("" = none), its kind ("f" a failure of the job, "o"
--       another failure, for the recent failures only, "" other), the run's start on
--       Redis's clock (from claim.lua; "" or not a number = unknown), its attempts
--       field ("=" keep, "" clear, else ATTEMPT:DUE:AT to write), its staleness (""
--       not a success; "+" a success without a deadline; else a success and the unix
--       second by which it must succeed again)
--       then, once (ONCE of them): history limit per job, recent runs kept, recent
--       failures kept, the minute of now (unix seconds / 60), whether to write entries
--       to their jobs' lists at once, else to the unfiled runs (flag: "1" or "0"),
--       events kept in the stream ("0": none written), now, the timeline's wake
--       channel, the start of every job's history key and of its backlog key (the
--       job id completes each)
--       then per queue: its wake channel, whether it has a fleet-wide limit (flag:
--       its jobs' ends wake the workers waiting for room in it while jobs wait there)
-- A job's lease key is its queue's key, "-" and its id, as claim.lua makes it. (Values
-- shared by jobs are sent once, and keys made here rather than sent: each argument
-- costs Redis about a thousand instructions to parse and hand to Lua.)
-- Returns one reply per job, then the length of the unfiled runs (0 when this call
-- wrote none): {"changed", current schedule or false} when the schedule
-- is not the one the caller decided on (the caller decides again), "stale" when
-- another worker holds the job, {"odd", error} when its queue's keys hold other types
-- (nothing is written for it; the other jobs are recorded), else the result's word.

-- The one place that knows the layout of KEYS and ARGV.
local FIXED, QK, AS, ONCE = 18, 2, 14, 10
local queues = (#KEYS - FIXED) / QK
local jobs = (#ARGV - ONCE - 2 * queues) / AS
local o = AS * jobs
local limit = tonumber(ARGV[o + 1])
local keep_runs, keep_failures = ARGV[o + 2], ARGV[o + 3]
local minute = ARGV[o + 4]
local direct = ARGV[o + 5] == "1"
local events_kept = ARGV[o + 6]
local now, timeline_wake = ARGV[o + 7], ARGV[o + 8]
local history_prefix, backlog_prefix = ARGV[o + 9], ARGV[o + 10]
-- Each queue's keys, wake channel and limit flag, by its number as the jobs give it.
local queue_key, members_key, queue_wake_of, limited_of = {}, {}, {}, {}
for q = 1, queues do
  local n = tostring(q)
  queue_key[n], members_key[n] = KEYS[FIXED + QK * q - 1], KEYS[FIXED + QK * q]
  queue_wake_of[n], limited_of[n] = ARGV[o + ONCE + 2 * q - 1], ARGV[o + ONCE + 2 * q]
end
local history = limit ~= 0
local batch = jobs >= BATCH_FROM
-- In a batch, written at the end in one call each: leases to delete, jobs leaving the
-- running index, schedules to store, deadlines. Wake-ups are published once per channel.
local gone, done, stores, deadlines = nil, nil, nil, nil
if batch then
  gone, done, stores, deadlines = {}, {}, {}, {}
end
local woken, wake_order, first_due = nil, nil, nil

-- Notes a wake-up to publish at the end: once per channel, with its last payload.
local function wake(channel, payload)
  if channel == "" then
    return
  end
  -- Made on first use: most batches wake nothing (tables cost more than calls here).
  woken, wake_order = woken or {}, wake_order or {}
  if not woken[channel] then
    wake_order[#wake_order + 1] = channel
  end
  woken[channel] = payload
end

-- The entries of this call for the unfiled runs and the recent runs and failures,
-- written at the end (made on first use); how many were recorded.
local unfiled, recent, failed, recorded = nil, nil, nil, 0

-- Calls `command key items...` with pcall, in chunks as `chunked` does: the last
-- reply (a list's length), or false once a call fails (the key holds another type:
-- nothing was written by that call).
local function try_chunked(command, key, list)
  local r
  for i = 1, #list, 1000 do
    r = redis.pcall(command, key, unpack(list, i, math.min(i + 999, #list)))
    if type(r) == "table" and r.err then
      return false
    end
  end
  return r
end

-- The entries of the stream's last events (made on first use, by `emitted`).
local last_events = nil

-- Whether `entry` is among the stream's last events: an outcome written again.
-- Read once per call, and only for outcomes whose lease is gone (rare).
local function emitted(entry)
  if not last_events then
    last_events = {}
    local r = redis.pcall("XREVRANGE", KEYS[16], "+", "-", "COUNT", 1000)
    if type(r) == "table" and not r.err then
      for _, e in ipairs(r) do
        local f = e[2]
        for j = 1, #f - 1, 2 do
          if f[j] == "entry" then
            last_events[f[j + 1]] = true
          end
        end
      end
    end
  end
  return last_events[entry] == true
end

-- Records a job's history entry; false when it was recorded already (an outcome
-- written again).
local function record_history(k, jobid, entry, kind, unset, again)
  if unset then
    drop_history(history_prefix .. jobid)
    redis.pcall("HDEL", k.due, jobid)
  else
    -- From the tail, where a resent entry was appended moments ago.
    if again and (type(redis.pcall("LPOS", k.unfiled, entry, "RANK", -1)) == "number"
        or redis.pcall("LINDEX", history_prefix .. jobid, 0) == entry) then
      return false
    end
    if direct then
      local key = history_prefix .. jobid
      local n = redis.pcall("LPUSH", key, entry)
      if type(n) == "number" and n > limit then
        redis.call("LTRIM", key, 0, limit - 1)
      end
    else
      unfiled = unfiled or {}
      unfiled[#unfiled + 1] = entry
    end
  end
  if kind ~= "" then
    failed = failed or {}
    failed[#failed + 1] = entry
  end
  recorded = recorded + 1
  return true
end

-- Records a job's history entry (see the header) and its event; `unset`: the job is
-- gone.
local function record(k, jobid, entry, kind, unset, again)
  if entry == "" then
    return
  end
  if history then
    if unset or again or direct or kind ~= "" then
      if not record_history(k, jobid, entry, kind, unset, again) then
        return
      end
    else
      -- record_history's usual case, written out (a call costs more than it does):
      -- the entry waits unfiled.
      unfiled = unfiled or {}
      unfiled[#unfiled + 1] = entry
      recorded = recorded + 1
    end
  end
  local streamed = events_kept ~= "0" and ((again and emitted(entry))
    or emit_batched(k.events, events_kept, "type", "run", "job", jobid, "failed",
      kind == "f" and "1" or "0", "entry", entry))
  -- The stream's run events are the recent runs (crate::history::recent_runs): an
  -- entry goes to the recent runs' list only while the stream is off, or could not be
  -- written (a key of another type).
  if history and not streamed then
    recent = recent or {}
    recent[#recent + 1] = entry
  end
end

-- Writes what `record` collected: the unfiled runs, the recent lists (trimmed) and the
-- count of the minute (dropping the minutes before the last when a minute begins).
-- Returns the length of the unfiled runs, 0 when none were written.
local function flush_history(k)
  -- At the tail: appending moves no entry already there (LPUSH moves a listpack's
  -- whole content for each entry at its head).
  local backlog = unfiled and try_chunked("RPUSH", k.unfiled, unfiled) or 0
  if recent and try_chunked("LPUSH", k.recent_runs, recent) then
    redis.call("LTRIM", k.recent_runs, 0, keep_runs - 1)
  end
  if failed and try_chunked("LPUSH", k.recent_failures, failed) then
    redis.call("LTRIM", k.recent_failures, 0, keep_failures - 1)
  end
  if recorded > 0 then
    local n = redis.pcall("HINCRBY", k.runs_per_minute, minute, recorded)
    if n == recorded then
      for _, m in ipairs(redis.call("HKEYS", k.runs_per_minute)) do
        if tonumber(m) == nil or tonumber(m) < tonumber(minute) - 1 then
          redis.call("HDEL", k.runs_per_minute, m)
        end
      end
    end
  end
  return backlog
end

-- Whether any job is paused, asked to run again, waiting to retry or to be killed:
-- looked up per job only then.
local any_paused, any_rerun, any_attempts, any_kill = false, false, false, false
-- Whether `backlogs` is a hash: jobs' backlogs are looked up only then.
local any_backlog = false
-- Whether `stale` is a hash (from the checks), and whether `fresh-until` is a sorted
-- set or none: looked up once, at the first success of the call (nil: not yet).
local any_stale, fresh_ok = false, nil

-- A success (`fresh` as the header says): its deadline written, and the job taken out
-- of `stale` with a `fresh` event if it was stale.
local function freshen(k, jobid, fresh)
  if fresh_ok == nil then
    local t = redis.call("TYPE", k.fresh_until)["ok"]
    fresh_ok = t == "zset" or t == "none"
  end
  if fresh ~= "+" and fresh_ok then
    later(deadlines, "ZADD", k.fresh_until, fresh, jobid)
  end
  if any_stale then
    local field = redis.call("HGET", k.stale, jobid)
    if field then
      redis.call("HDEL", k.stale, jobid)
      emit_batched(k.events, events_kept, "type", "fresh", "job", jobid, "queue",
        string.match(jobid, "([^:]*)$"), "since", string.match(field, "([^:]*)$"))
    end
  end
end

-- An unset job leaves `fresh-until` and `stale` (never a key of another type).
local function forget_staleness(k, jobid)
  redis.pcall("ZREM", k.fresh_until, jobid)
  redis.pcall("HDEL", k.stale, jobid)
end

-- The next instant of a job's backlog, or nil and the instant to place it at instead
-- of `due` (nil: its placement stands) once the backlog is empty. `action`, `due`:
-- the placement decided; `schedule`: the one in force after the run.
local function backlog_next(k, jobid, action, due, schedule)
  if schedule == "STOP" then
    drop_backlog(k.backlogs, k.backlog, jobid)
    return nil, nil
  end
  -- A list of another type (`check` names it) ends the backlog.
  local instant = redis.pcall("LPOP", k.backlog)
  local resume = tonumber(redis.call("HGET", k.backlogs, jobid)) or 0
  if type(instant) == "string" then
    if action == "timeline" and (resume == 0 or tonumber(due) < resume) then
      redis.call("HSET", k.backlogs, jobid, due)
    end
    return instant, nil
  end
  redis.call("HDEL", k.backlogs, jobid)
  if action == "timeline" and resume > 0 and resume < tonumber(due) then
    return nil, resume
  end
  return nil, nil
end

-- Writes a job's field in `attempts` per `attempts` (see the header), once it is known
-- whether the job is placed.
local function note_attempts(k, jobid, attempts, placed)
  if attempts == "=" then
    return
  elseif attempts ~= "" and placed then
    redis.call("HSET", k.attempts, jobid, attempts)
    any_attempts = true
  elseif any_attempts then
    redis.call("HDEL", k.attempts, jobid)
  end
end

local function place_back(k, lease, current, jobid, tag, expected, mode, action, due,
                          store, failure, queue_wake, started, attempts)
  if lease ~= tag then
    if lease or redis.call("SISMEMBER", k.members, jobid) == 1
        or redis.call("ZSCORE", k.timeline, jobid) then
      return "stale"
    end
  end
  if mode ~= "unset" and (current or "\0") ~= expected then
    return "changed", current
  end
  if action == "oneoff" then
    action = oneoff_action(k.statuses, jobid)
    if action == "enqueue" and tonumber(due) > 0 then
      action = "timeline"
    end
  end
  -- From here on the job has no lease (in a batch, ours goes in the DEL at the end).
  -- (`later`'s work, written out: this is the per-job path, where a Lua function call
  -- costs Redis more than the rest of the step.)
  if lease == tag then
    if gone then
      gone[#gone + 1] = k.lease
    else
      redis.call("DEL", k.lease)
    end
  end
  k.lease_gone = true
  if done then
    done[#done + 1] = jobid
  else
    redis.call("ZREM", k.leases, jobid)
  end
  if any_kill then
    redis.call("HDEL", k.kill, jobid)
  end
  if mode == "unset" then
    redis.call("HDEL", k.schedules, jobid)
    redis.call("HDEL", k.statuses, jobid)
    redis.call("HDEL", k.failures, jobid)
    redis.call("HDEL", k.paused, jobid)
    redis.call("HDEL", k.rerun, jobid)
    redis.call("ZREM", k.timeline, jobid)
    dequeue(k.queue, k.members, jobid)
    note_attempts(k, jobid, "", false)
    if any_backlog then
      drop_backlog(k.backlogs, k.backlog, jobid)
    end
    forget_staleness(k, jobid)
    return "unset"
  end
  if attempts ~= "" or any_attempts then
    note_attempts(k, jobid, attempts, mode == "place" and action ~= "stop")
  end
  if failure ~= "" then
    redis.call("HSET", k.failures, jobid, failure .. ":" .. now)
    set_status(k.statuses, jobid, failure, now)
  end
  local paused = any_paused and redis.call("HEXISTS", k.paused, jobid) == 1
  local marker = any_rerun and redis.call("HGET", k.rerun, jobid)
  -- (A start that is not a number, which claim.lua never gives, counts as unknown.)
  local again = mode == "place" and marker and (tonumber(started) or math.huge)
    < (tonumber(marker) or 0)
  -- A paused job asked to run keeps its marker: it lets our claim run it (claim.lua).
  if marker and not (again and paused) then
    redis.call("HDEL", k.rerun, jobid)
  end
  -- What the placement stood for is kept in the schedule: a paused job's for `resume`,
  -- and the occurrence of a one-off due on the timeline that a rerun goes before.
  if (paused and not again and mode == "place") or (again and action == "timeline") then
    store = paused_schedule(action, due, store, current)
  end
  if store ~= "" then
    later(stores, "HSET", k.schedules, jobid, store)
  end
  if mode == "hold" then
    return "held"
  elseif mode == "bad" then
    set_status(k.statuses, jobid, "BAD", now)
    return "bad"
  end
  if again then
    action = "enqueue"
  elseif paused then
    if failure == "" then
      set_status(k.statuses, jobid, "PAU", now)
    end
    return "paused"
  end
  -- A run of the backlog next (a retry or a rerun goes first).
  if any_backlog and not again and attempts == ""
      and redis.call("HEXISTS", k.backlogs, jobid) == 1 then
    local instant, resume = backlog_next(k, jobid, action, due,
      store ~= "" and store or current)
    if instant then
      local result = place(k, jobid, "enqueue", 0, now, "", "")
      if result ~= "enqueued" then
        -- Queued already (by someone else meanwhile): that run goes first.
        redis.call("LPUSH", k.backlog, instant)
        return result
      end
      redis.pcall("HSET", k.due, jobid, instant .. ":" .. now)
      wake(queue_wake, "1")
      return result
    elseif resume then
      action, due = "timeline", string.format("%d", resume)
    end
  end
  if action == "stop" then
    -- The schedule ends here; a run someone placed while this one ran is kept, and a
    -- failure stays the visible status.
    if failure == "" then
      set_status(k.statuses, jobid, "STP", now)
    end
    return "stopped"
  end
  local result = place(k, jobid, action, due, now, "", "")
  if result == "enqueued" then
    wake(queue_wake, "1")
  elseif result == "timeline" then
    -- A dispatcher acts on the earliest due time only.
    first_due = math.min(first_due or tonumber(due), tonumber(due))
    wake(timeline_wake, string.format("%d", first_due))
  end
  if failure ~= "" then
    -- Keep the failure visible in the status until the next step of the job.
    set_status(k.statuses, jobid, failure, now)
  end
  return result
end

-- place_back, then the history entry (none while the caller must decide again). The
-- reply: the word, or {"changed", schedule} (a word costs Redis less than a table).
-- After `current`: the job's AS arguments, in their order (one `unpack` of ARGV costs
-- Lua less than reading them one by one).
local function finish(k, lease, current, jobid, tag, q, expected, mode, action, due,
                      store, failure, entry, kind, started, attempts, fresh)
  local queue_wake = queue_wake_of[q]
  local word, schedule = place_back(k, lease, current, jobid, tag, expected, mode,
    action, due, store, failure, queue_wake, started, attempts)
  if word == "changed" then
    return {word, schedule}
  end
  if entry ~= "" then
    record(k, jobid, entry, kind, word == "unset", lease ~= tag)
  end
  -- (A success without a deadline changes nothing while no job is stale.)
  if fresh ~= "" and (fresh ~= "+" or any_stale) and word ~= "stale" and word ~= "unset"
      and word ~= "held" and word ~= "bad" then
    freshen(k, jobid, fresh)
  end
  if limited_of[q] == "1" and word ~= "stale" and redis.call("LLEN", k.queue) > 0 then
    wake(queue_wake, "1")
  end
  return word
end

-- Everything that could fail, for every job, before the first write. (Leases are read
-- with MGET, which takes a key of any type: only the holder of a lease deletes it.)
-- A job whose queue's keys hold other types is skipped, not the whole batch: one odd
-- key must not keep a worker from recording every other outcome.
local seen = {}
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset", KEYS[4], "hash",
  KEYS[5], "zset"}, seen)
  -- Pauses, markers, retries, kills, backlogs, stale jobs: mostly all missing (one
  -- EXISTS). A kill, backlogs or stale key of another type (check names it) costs no
  -- outcome: it is left alone.
  or wrong_type_rare({KEYS[10], "hash", KEYS[11], "hash", KEYS[13], "hash", KEYS[14], "any",
    KEYS[15], "any", KEYS[18], "any"}, seen)
-- Once per queue (its members set goes with it), not per job.
local odd_queue = {}
for q = 1, queues do
  local n = tostring(q)
  odd_queue[n] = wrong_type({queue_key[n], "list", members_key[n], "set"}, seen)
end
-- A batch reads all leases and schedules up front, in one call each (their keys and
-- job ids gathered here).
local lease_keys, ids = batch and {} or nil, batch and {} or nil
for i = 0, jobs - 1 do
  local a = AS * i
  local queue = queue_key[ARGV[a + 3]]
  if batch and queue then
    lease_keys[i + 1], ids[i + 1] = queue .. "-" .. ARGV[a + 1], ARGV[a + 1]
  end
  bad = bad or (not queue and redis.error_reply("ERR job " .. (i + 1) .. " names queue "
      .. ARGV[a + 3] .. " of " .. queues .. "; nothing was changed"))
    or ((ARGV[a + 6] == "timeline" or ARGV[a + 6] == "oneoff")
      and bad_number(ARGV[a + 7], 0, MAX_UNIX, "due time"))
    or (ARGV[a + 14] ~= "" and ARGV[a + 14] ~= "+"
      and bad_number(ARGV[a + 14], 0, MAX_UNIX, "deadline"))
end
bad = bad or bad_number(limit, 0, 1000000, "history limit")
  or bad_number(keep_runs, 1, 1000000, "recent runs kept")
  or bad_number(keep_failures, 1, 1000000, "recent failures kept")
  or bad_number(minute, 0, MAX_UNIX, "minute")
  or bad_number(events_kept, 0, 10000000, "events kept")
if bad then
  return bad
end
-- The types the checks above read say which of these exist.
any_paused = seen[KEYS[10]] == "hash"
any_rerun = seen[KEYS[11]] == "hash"
any_attempts = seen[KEYS[13]] == "hash"
-- Another type under the name (check names it) costs no outcome: it is left alone.
any_kill = seen[KEYS[14]] == "hash"
any_backlog = seen[KEYS[15]] == "hash"
any_stale = seen[KEYS[18]] == "hash"

local leases, schedules = nil, nil
if batch then
  leases = chunked("MGET", false, lease_keys)
  schedules = chunked("HMGET", KEYS[1], ids)
end
deferred_statuses = batch and {} or nil
local out = {}
-- One table of keys for all jobs (a table per job costs more than the rest of a job).
local k = {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
           failures = KEYS[4], leases = KEYS[5], recent_runs = KEYS[6],
           recent_failures = KEYS[7], runs_per_minute = KEYS[8], due = KEYS[9],
           paused = KEYS[10], rerun = KEYS[11], unfiled = KEYS[12], attempts = KEYS[13],
           kill = KEYS[14], backlogs = KEYS[15], events = KEYS[16],
           fresh_until = KEYS[17], stale = KEYS[18]}
for i = 0, jobs - 1 do
  local a = AS * i
  local jobid, q = ARGV[a + 1], ARGV[a + 3]
  k.queue, k.members = queue_key[q], members_key[q]
  k.lease = batch and lease_keys[i + 1] or k.queue .. "-" .. jobid
  k.backlog = any_backlog and backlog_prefix .. jobid or nil
  k.lease_gone = false
  if odd_queue[q] then
    -- The run happened: its entry is recorded; its outcome is not.
    out[i + 1] = {"odd", odd_queue[q].err}
    record(k, jobid, ARGV[a + 10], ARGV[a + 11], false, true)
  else
    local lease, current
    if batch then
      lease, current = leases[i + 1], schedules[i + 1]
    else
      lease = redis.call("MGET", k.lease)[1]
      current = redis.call("HGET", k.schedules, jobid)
    end
    out[i + 1] = finish(k, lease, current, unpack(ARGV, a + 1, a + AS))
  end
end
if batch then
  chunked("DEL", false, gone)
  chunked("ZREM", KEYS[5], done)
  chunked("HSET", KEYS[1], stores)
  chunked("ZADD", KEYS[17], deadlines)
  flush_statuses(KEYS[2])
end
out[jobs + 1] = flush_history(k)
for _, channel in ipairs(wake_order or {}) do
  redis.call("PUBLISH", channel, woken[channel])
end
return out
