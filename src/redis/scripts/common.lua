-- Helpers shared by the redbike scripts; scripts/mod.rs (`assemble`) puts before each
-- script the helpers it uses.

-- The globals the scripts use, as locals of the chunk: a global is a table lookup by
-- name at each use (`redis.call` two), a local or upvalue a register read; about 1 %
-- of what a job costs Redis (tools/redis_instructions.sh).
local redis, KEYS, ARGV, tonumber, tostring, type, unpack, ipairs, pairs, next, string,
  math, table = redis, KEYS, ARGV, tonumber, tostring, type, unpack, ipairs, pairs, next,
  string, math, table

-- Statuses a script collects to write in one HSET at its end (flush_statuses), as
-- field-value pairs, or nil: each is written at once. Only for scripts that never
-- read a status back.
local deferred_statuses = nil

-- Records a status: EVENT:UNIXSECONDS, as redbike 0.13.1 writes it.
local function set_status(statuses, jobid, event, now)
  local d = deferred_statuses
  if d then
    local n = #d
    d[n + 1] = jobid
    d[n + 2] = event .. ":" .. now
  else
    redis.call("HSET", statuses, jobid, event .. ":" .. now)
  end
end

-- Calls `command` (after `key`, unless that is false) with the items of `list` as
-- its further arguments: one call for many items, which is what batching saves (each
-- redis.call has a cost of its own). Lua's unpack takes a few thousand values at most,
-- so a longer list goes in chunks of 1000 (an even number: field-value pairs stay
-- whole). Returns the reply (for reads, MGET and HMGET, the items of all chunks'
-- replies in order), or nil for an empty list. (Tables cost more than calls in Redis's
-- Lua: none is made unless the list is long.)
local function chunked(command, key, list)
  local n = #list
  if n == 0 then
    return nil
  elseif n <= 1000 then
    if key then
      return redis.call(command, key, unpack(list))
    end
    return redis.call(command, unpack(list))
  end
  local out = {}
  for i = 1, n, 1000 do
    local last = math.min(i + 999, n)
    local reply
    if key then
      reply = redis.call(command, key, unpack(list, i, last))
    else
      reply = redis.call(command, unpack(list, i, last))
    end
    if type(reply) == "table" then
      for _, v in ipairs(reply) do
        out[#out + 1] = v
      end
    end
  end
  return out
end

-- From how many jobs a call batches its writes and reads (`later`, `chunked`): below
-- that the tables a batch needs cost Redis's Lua more than the calls they save.
local BATCH_FROM = 4

-- Adds `a` (and `b`) to `list`, to go in one call for the whole batch at the end (see
-- chunked); without a list (a small batch), calls `command [key] a [b]` at once.
local function later(list, command, key, a, b)
  if list then
    list[#list + 1] = a
    list[#list + 1] = b
  elseif not key then
    redis.call(command, a)
  elseif b == nil then
    redis.call(command, key, a)
  else
    redis.call(command, key, a, b)
  end
end

-- Writes the statuses collected since deferred_statuses was set, and stops collecting.
local function flush_statuses(statuses)
  chunked("HSET", statuses, deferred_statuses)
  deferred_statuses = nil
end

-- The original's enqueue rule: never twice in a queue, never while its lease exists.
-- `lease_gone`: the caller knows there is no lease (it just removed its own).
-- Returns "enqueued", "queued" (already there) or "running" (leased).
local function enqueue(queue, members, lease, statuses, jobid, now, wake, lease_gone)
  if not lease_gone then
    if redis.call("SISMEMBER", members, jobid) == 1 then
      return "queued"
    end
    if redis.call("EXISTS", lease) == 1 then
      return "running"
    end
  end
  if redis.call("SADD", members, jobid) == 0 then
    return "queued"
  end
  redis.call("LPUSH", queue, jobid)
  set_status(statuses, jobid, "ENQ", now)
  if wake ~= "" then
    redis.call("PUBLISH", wake, "1")
  end
  return "enqueued"
end

-- Takes a job out of its queue (both the list and the members set). LREM scans the
-- list, so it runs only when the members set says the job is there.
local function dequeue(queue, members, jobid)
  if redis.call("SREM", members, jobid) == 1 then
    redis.call("LREM", queue, 0, jobid)
  end
end

-- Wake channels may be "" when the caller publishes once for a whole batch.
-- Puts a job where its schedule says: "enqueue", "timeline" (due at `due`) or "stop".
-- A job is in one place only, so each placement removes it from the others.
-- `k.lease_gone` set: the caller knows the job has no lease.
local function place(k, jobid, action, due, now, queue_wake, timeline_wake)
  if action == "enqueue" then
    redis.call("ZREM", k.timeline, jobid)
    return enqueue(k.queue, k.members, k.lease, k.statuses, jobid, now, queue_wake,
      k.lease_gone)
  elseif action == "timeline" then
    dequeue(k.queue, k.members, jobid)
    redis.call("ZADD", k.timeline, due, jobid)
    set_status(k.statuses, jobid, "TML", now)
    if timeline_wake ~= "" then
      redis.call("PUBLISH", timeline_wake, due)
    end
    return "timeline"
  elseif action == "stop" then
    redis.call("ZREM", k.timeline, jobid)
    dequeue(k.queue, k.members, jobid)
    set_status(k.statuses, jobid, "STP", now)
    return "stopped"
  end
  return redis.error_reply("unknown placement " .. tostring(action))
end

-- What becomes of a job with a STOP schedule whose run did not end by itself (its
-- worker died, or stopped it while stopping): STOP is both what NOW and AT leave
-- behind for a one-off run and what an operator's `set JOB STOP` stores. The claim
-- writes status WRK (as the original's does too) and a set writes its own status
-- (STP, TML, ENQ), so a WRK status means the run in hand was a one-off run, never
-- recorded as done and never stopped since: it is queued again ("enqueue", at least
-- once). Anything else: "stop".
local function oneoff_action(statuses, jobid)
  if string.sub(redis.call("HGET", statuses, jobid) or "", 1, 4) == "WRK:" then
    return "enqueue"
  end
  return "stop"
end

-- The standard KEYS of a single-job script.
local function job_keys()
  return {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
          queue = KEYS[4], members = KEYS[5], lease = KEYS[6]}
end

-- Keeps the running index (leases) a skiplist once it holds SKIPLIST_FROM jobs or more
-- (`kind`: its type before this call; one made by this call is left as Redis made it).
-- Redis keeps a small sorted set as a listpack, where each ZADD and ZREM of a member
-- walks the whole set: at a few dozen jobs running, about 6 % of what a job costs
-- Redis. A member longer than zset-max-listpack-value makes Redis convert the set, and
-- removing that member does not convert it back (a reload does, hence the OBJECT
-- call): one ZADD and one ZREM each time the index grows to SKIPLIST_FROM as a
-- listpack. No reader sees that member: it comes and goes within the call. It cannot
-- be a job's id (NUL bytes, and longer than the longest id redbike accepts).
local SKIPLIST_FROM = 8
local function keep_skiplist(key, kind)
  if kind ~= "zset" then
    return
  end
  -- (A user without OBJECT ENCODING, as docs/deployments.md listed the commands before,
  -- gets an error here: the index then stays as it is.)
  local encoding = redis.pcall("OBJECT", "ENCODING", key)
  if (encoding == "listpack" or encoding == "ziplist")
      and redis.call("ZCARD", key) >= SKIPLIST_FROM then
    -- (Made here, not once per script call: string.rep costs Redis per byte.)
    local long = string.rep("\0", 1100)
    redis.call("ZADD", key, 0, long)
    redis.call("ZREM", key, long)
  end
end

-- Redis does not roll a script back when a command fails half-way, so each script
-- checks first whatever could fail: the type of every key it touches, and the numbers
-- it is given. `list` holds key, type, key, type...; a missing key is fine. `seen`
-- (optional) remembers the keys checked so far in this call with their type (`none`
-- when missing), so that a script also learns from it which keys exist without a
-- call of its own; the type `any` accepts every type, to learn it. Returns an error reply
-- naming the first key of another type (the script returns it before any write), or
-- nil.
local function wrong_type(list, seen)
  for i = 1, #list, 2 do
    local key, want = list[i], list[i + 1]
    if not (seen and seen[key]) then
      local t = redis.call("TYPE", key)["ok"]
      if t ~= want and t ~= "none" and want ~= "any" then
        return redis.error_reply("WRONGTYPE key " .. key .. " holds a " .. t ..
          " where redbike keeps a " .. want .. "; nothing was changed; see `redbike check`")
      end
      if seen then
        seen[key] = t
      end
    end
  end
  return nil
end

-- wrong_type for keys that are mostly all missing (pauses, markers, retries): one
-- EXISTS call tells when none of them is there, and each is then recorded in `seen` as
-- missing without a TYPE call of its own (a call from Lua costs Redis about as much as
-- the work of a small job); else wrong_type checks them one by one.
local function wrong_type_rare(list, seen)
  local keys = {}
  for i = 1, #list, 2 do
    keys[#keys + 1] = list[i]
  end
  if redis.call("EXISTS", unpack(keys)) == 0 then
    for _, key in ipairs(keys) do
      seen[key] = "none"
    end
    return nil
  end
  return wrong_type(list, seen)
end

-- An error reply when `marker` (P-shards of the prefix written to) records that the
-- prefix was split into shards, or nil. A process configured with shards = 1 checks
-- at start, but a process with more shards may split the empty prefix after that (a
-- `load` with shards = 4 racing a `set` with shards = 1): a job written into the
-- unsplit layout then would be read by no process. A shard's own marker never exists.
local function split_refusal(marker)
  local n = redis.call("GET", marker)
  if n and n ~= "1" then
    return redis.error_reply("SPLIT prefix split into " .. n ..
      " shards (key " .. marker .. ") while this process writes unsplit; nothing was changed")
  end
  return nil
end

-- The latest instant redbike accepts (9999-12-31T23:59:59Z), and the longest lease.
local MAX_UNIX = 253402300799
local MAX_TTL = 2147483647

-- An error reply unless `value` is a whole number in lo..hi (the caller bounds its
-- inputs; this keeps a script from failing half-way on a number that slipped past).
local function bad_number(value, lo, hi, what)
  local n = tonumber(value)
  if not n or n ~= math.floor(n) or n < lo or n > hi then
    return redis.error_reply("ERR " .. what .. " " .. tostring(value) ..
      " is not a whole number in " .. string.format("%d..%d", lo, hi) ..
      "; nothing was changed")
  end
  return nil
end

-- wrong_type for the keys of `job_keys` (`k`), then the pairs of `more` (key, type...).
local function wrong_job_type(k, more)
  local list = {k.schedules, "hash", k.statuses, "hash", k.timeline, "zset",
    k.queue, "list", k.members, "set", k.lease, "string"}
  for _, v in ipairs(more) do
    list[#list + 1] = v
  end
  return wrong_type(list)
end

-- Places one job as `place` does and stores its schedule: `stored`, or
-- `stored_if_running` when it runs and could not be queued (see place.lua).
local function place_and_store(k, jobid, action, due, now, queue_wake, timeline_wake,
                               stored, stored_if_running)
  local result = place(k, jobid, action, due, now, queue_wake, timeline_wake)
  if result == "running" then
    redis.call("HSET", k.schedules, jobid, stored_if_running)
  else
    redis.call("HSET", k.schedules, jobid, stored)
  end
  return result
end

-- The lease key of a job id without ':' (its own queue) can be another queue's list
-- (job A's lease is the list of queue A-A): its type is checked like the others.
local function own_queue(jobid)
  return not string.find(jobid, ":", 1, true)
end

-- Redis's clock, in seconds with microseconds: the one clock of the running index, so
-- the recovery instants that workers write and dispatchers compare mean the same
-- whatever the clocks of their machines say.
local function redis_time()
  local t = redis.call("TIME")
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- Deletes a job's history list, and nothing of another type under its name.
local function drop_history(key)
  if redis.call("TYPE", key)["ok"] == "list" then
    redis.call("DEL", key)
  end
end

-- Drops a job's backlog (crate::backfill): its list, never a key of another type under
-- its name, and its field in `backlogs` (a hash: the caller checked its type).
local function drop_backlog(backlogs, backlog, jobid)
  if redis.call("TYPE", backlog)["ok"] == "list" then
    redis.call("DEL", backlog)
  end
  redis.call("HDEL", backlogs, jobid)
end

-- Records one history entry made by a dispatcher (recover.lua, skip.lua; finish.lua
-- batches its own): to the job's list, trimmed to `limit` (or, with `gone`, the job's
-- list and due field are deleted: it was unset), to the recent runs and
-- to the recent failures. pcalls: a history key of another type (`redbike check` names
-- it) costs the entry only. `h`: {history, recent_runs, recent_failures, due};
-- `keep_runs`, `keep_failures`: the recent lists' lengths.
local function record_entry(h, jobid, entry, limit, keep_runs, keep_failures, gone)
  if entry == "" then
    return
  end
  if gone then
    drop_history(h.history)
    redis.pcall("HDEL", h.due, jobid)
  else
    local n = redis.pcall("LPUSH", h.history, entry)
    if type(n) == "number" and n > tonumber(limit) then
      redis.call("LTRIM", h.history, 0, tonumber(limit) - 1)
    end
  end
  for _, list in ipairs({{h.recent_runs, keep_runs}, {h.recent_failures, keep_failures}}) do
    if type(redis.pcall("LPUSH", list[1], entry)) == "number" then
      redis.call("LTRIM", list[1], 0, tonumber(list[2]) - 1)
    end
  end
end

-- Appends an entry (field-value pairs) to the prefix's event stream (docs/events.md),
-- trimmed to about `cap` entries; `cap` "0": no stream is written. A pcall: a key of
-- another type under its name (`check` names it) costs the event, never the outcome.
local function emit(events, cap, ...)
  if cap ~= "0" then
    redis.pcall("XADD", events, "MAXLEN", "~", cap, "*", "v", "1", ...)
  end
end

-- emit for a script that writes many events: only its first XADD to a stream trims it
-- (MAXLEN costs Redis about half as much again as the XADD), so the stream holds at
-- most a call's events more than its cap until the next call. Returns whether the
-- entry was written.
local trimmed = nil
local function emit_batched(events, cap, ...)
  if cap == "0" then
    return false
  end
  local r
  if trimmed == events then
    r = redis.pcall("XADD", events, "*", "v", "1", ...)
  else
    r = redis.pcall("XADD", events, "MAXLEN", "~", cap, "*", "v", "1", ...)
    trimmed = events
  end
  return not (type(r) == "table" and r.err)
end

-- An operator's action to the event stream (docs/events.md), from the arguments at
-- ARGV[i] on (redis::events::Audit): events kept ("0": none written), action, target,
-- detail, user, host, pid, via. Nothing when the caller passed none.
local function audit(events, i)
  if ARGV[i + 7] then
    emit(events, ARGV[i], "type", "action", "action", ARGV[i + 1], "target", ARGV[i + 2],
      "detail", ARGV[i + 3], "user", ARGV[i + 4], "host", ARGV[i + 5], "pid", ARGV[i + 6],
      "via", ARGV[i + 7])
  end
end

-- A dispatcher's entry of a run (recover.lua, skip.lua): to the history as
-- record_entry writes it, unless `limit` is "0" (history off), and to the event stream
-- (`ev`: {key, cap}) as a run event, `failed` "1" or "0".
local function record_run(h, jobid, entry, limit, keep_runs, keep_failures, gone, ev,
                          failed)
  if entry == "" then
    return
  end
  if limit ~= "0" then
    record_entry(h, jobid, entry, limit, keep_runs, keep_failures, gone)
  end
  emit(ev[1], ev[2], "type", "run", "job", jobid, "failed", failed, "entry", entry)
end

-- Writes a job's deadline (crate::stale) as `deadline` says: "" leave it, "-" remove
-- it, else the unix second; nothing while `fresh-until` holds another type than a
-- sorted set (`check` names it). For place.lua and place_many.lua.
local function set_deadline(fresh_until, jobid, deadline)
  if deadline == "" then
    return
  end
  local t = redis.call("TYPE", fresh_until)["ok"]
  if t ~= "zset" and t ~= "none" then
    return
  end
  if deadline == "-" then
    redis.call("ZREM", fresh_until, jobid)
  else
    redis.call("ZADD", fresh_until, deadline, jobid)
  end
end

-- The schedule to store for a paused job that is not placed now, so that `resume`
-- still makes the run its placement stood for: a STOP schedule (what NOW and AT leave
-- behind) becomes NOW for a job that would be queued and AT:due for one due on the
-- timeline. `store` is the schedule the caller was to store ("" = keep `current`).
local function paused_schedule(action, due, store, current)
  if (store == "STOP" or (store == "" and current == "STOP")) then
    if action == "enqueue" then
      return "NOW"
    elseif action == "timeline" then
      return string.format("AT:%d", tonumber(due))
    end
  end
  return store
end
