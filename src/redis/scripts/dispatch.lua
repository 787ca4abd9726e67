-- dispatch: move up to `limit` due jobs from the timeline into their queues, with the
-- original's enqueue rule, in one atomic step (so racing dispatchers never move one
-- occurrence twice). Also reads the control key, so an idle pass costs one round trip.
-- Also returns the earliest recovery time of the running index, so recovery costs
-- nothing while no worker has vanished, and Redis's clock (TIME) to compare it with.
-- Also carries the dispatcher's heartbeat when one is due (see registry.rs), so that
-- registering costs an idle dispatcher no round trip of its own, and reads whether a
-- Python peer was seen (with the control key, one MGET; see peers.rs), and the head of
-- the timeline before and after the pass, so that the dispatcher sleeps until the next
-- due job and can tell a job it was never told of (evidence of a Python peer).
-- Each job queued in another second than the one it was due in gets its due field,
-- `SCORE:NOW` (the score it was due at and the time of the ENQ status written with
-- it; see crate::history::due_at: the run's `REDBIKE_DUE` and its history's due
-- instant); for the others the ENQ status says the same, and an older field of
-- theirs goes (so that a run never takes another's), unless the due key holds
-- another type (`redbike check` names it).
-- A paused job found due (a Python worker put it back after its run) leaves the
-- timeline without being queued, with status PAU.
-- Also reads the earliest deadline of `fresh-until` (crate::stale), so that the
-- dispatcher wakes for the first job to go stale at no cost of its own (a key of
-- another type there reads as none: `check` names it).
-- KEYS: timeline, statuses, control, leases, due, paused, python-seen, fresh-until[,
--       procs, this dispatcher's description key]
-- ARGV: prefix, point in time ("" = Redis's clock: a live pass), limit, now (the
--       statuses' time of a pass at a given point)[, process id, description (JSON),
--       ttl]
-- A live pass judges what is due on Redis's clock, and writes its statuses with it, so
-- that the machines' clocks play no part in which occurrence is due (a worker decides
-- the next one from the clock its claim read: see crate::redis::clock). A pass at a
-- given point (the first after a stop, from the timefile or --after) takes what was
-- due by then.
-- A due job that is running (its lease exists) stays on the timeline, due again in a
-- second, so a run placed while it ran is not lost (0.13.1 drops it), announced on the
-- timeline's wake channel so that other dispatchers know it; a job already in its queue
-- leaves the timeline (it is in one place only).
-- Returns {taken, enqueued, deferred (running, or its queue's keys of another type),
-- halted 0/1, earliest recovery or false, deferred for their queue's keys' types,
-- Redis's clock (seconds, as a string: an integer reply would cut it; "0" when the
-- pass read none: the running index and, for a live pass, the timeline empty), heartbeat: 1
-- written, 0 none asked, -1 refused (procs holds another type: the pass goes on),
-- paused jobs dropped, python-seen's value or false, the timeline's first score when
-- the pass began or false, {its first score when the pass ended or false, the point in
-- time the pass took due jobs by or false (none: the timeline was empty), the earliest
-- deadline of fresh-until or false}}
local timeline, statuses = KEYS[1], KEYS[2]
local prefix, now = ARGV[1], ARGV[4]
local live = ARGV[2] == ""
-- An idle pass only reads (the control key, the heads of the running index and of the
-- timeline) and counts against the budget of an idle dispatcher (at most 5 commands a
-- second, BENCHMARKS.md): so the reads come first, with pcall, and the type checks (a
-- TYPE per key) only when a read failed, to name the key, or before the first write.
local function failed(reply)
  return type(reply) == "table" and reply.err ~= nil
end
local seen = {}
-- MGET: a control key of another type reads as no HALT here (and is refused before
-- the first write, below).
local control = redis.pcall("MGET", KEYS[3], KEYS[7])
local head = redis.pcall("ZRANGE", KEYS[4], 0, 0, "WITHSCORES")
local first = redis.pcall("ZRANGE", timeline, 0, 0, "WITHSCORES")
local fresh = redis.pcall("ZRANGE", KEYS[8], 0, 0, "WITHSCORES")
local deadline = not failed(fresh) and fresh[2] or false
if failed(control) or failed(head) or failed(first) then
  local bad = wrong_type({timeline, "zset", KEYS[3], "string", KEYS[4], "zset"}, seen)
  if bad then
    return bad
  end
  -- Another error (NOPERM, say): the first one, as Redis gave it.
  for _, reply in ipairs({control, head, first}) do
    if failed(reply) then
      return reply
    end
  end
end
local halted = control[1] == "HALT" and 1 or 0
local python = control[2]
local lease = head[2] or false
-- Redis's clock, only needed to compare the earliest recovery instant, or, in a live
-- pass, the timeline's head with.
local time = (lease or (live and #first > 0)) and redis_time()
local clock = time and string.format("%.6f", time) or "0"
local point = ARGV[2]
if live then
  point = time and math.floor(time)
  now = point or now
end
-- The heartbeat: SADD first (it fails on a key of another type, before anything is
-- written), then the description.
local beat = 0
if ARGV[5] then
  if bad_number(ARGV[7], 1, MAX_TTL, "heartbeat ttl") or failed(redis.pcall("SADD", KEYS[9], ARGV[5])) then
    beat = -1
  else
    redis.call("SET", KEYS[10], ARGV[6], "EX", ARGV[7])
    beat = 1
  end
end
local head = first[2] or false
if #first == 0 or tonumber(first[2]) > tonumber(point) then
  return {0, 0, 0, halted, lease, 0, clock, beat, 0, python, head,
    {head, point or false, deadline}}
end
-- Due jobs: from here on the pass writes, so every key it touches is checked first.
local bad = wrong_type({timeline, "zset", statuses, "hash", KEYS[3], "string", KEYS[4], "zset",
  KEYS[6], "hash"}, seen)
if bad then
  return bad
end
local with_scores = redis.call("ZRANGEBYSCORE", timeline, "-inf", point, "WITHSCORES",
  "LIMIT", 0, tonumber(ARGV[3]))
local due, score = {}, {}
for i = 1, #with_scores, 2 do
  due[#due + 1] = with_scores[i]
  score[with_scores[i]] = with_scores[i + 1]
end
local due_type = redis.call("TYPE", KEYS[5])["ok"]
local write_due, drop_due = due_type == "hash" or due_type == "none", due_type == "hash"
redis.call("ZREM", timeline, unpack(due))
-- Paused jobs are looked up only while some job is paused.
local runnable, paused = due, 0
if redis.call("EXISTS", KEYS[6]) == 1 then
  local flags = redis.call("HMGET", KEYS[6], unpack(due))
  local st = {}
  runnable = {}
  for i, jobid in ipairs(due) do
    if flags[i] then
      st[#st + 1] = jobid
      st[#st + 1] = "PAU:" .. now
    else
      runnable[#runnable + 1] = jobid
    end
  end
  if #st > 0 then
    redis.call("HSET", statuses, unpack(st))
    paused = #st / 2
  end
end
-- Group by queue (the part after the last ':'), keeping due order.
local groups, order = {}, {}
for _, jobid in ipairs(runnable) do
  local q = string.match(jobid, "([^:]*)$")
  if groups[q] == nil then
    groups[q] = {}
    order[#order + 1] = q
  end
  table.insert(groups[q], jobid)
end
local enqueued, deferred, odd = 0, 0, 0
local retry = tonumber(now) + 1
for _, q in ipairs(order) do
  local jobs = groups[q]
  local queue = prefix .. "-work-" .. q
  local members = queue .. "-members"
  local leases = {}
  for i, jobid in ipairs(jobs) do
    leases[i] = queue .. "-" .. jobid
  end
  -- A queue whose keys hold other types (see `redbike check`) would fail mid-way: its
  -- jobs wait on the timeline, due again in a second, while the other queues go on.
  local odd_queue = wrong_type({queue, "list", members, "set"})
  local queued = odd_queue and {} or redis.call("SMISMEMBER", members, unpack(jobs))
  local leased = odd_queue and {} or redis.call("MGET", unpack(leases))
  local push, st, dues, stale = {}, {}, {}, {}
  for i, jobid in ipairs(jobs) do
    if odd_queue or leased[i] then
      redis.call("ZADD", timeline, retry, jobid)
      deferred = deferred + 1
      odd = odd + (odd_queue and 1 or 0)
    elseif queued[i] == 0 then
      push[#push + 1] = jobid
      st[#st + 1] = jobid
      st[#st + 1] = "ENQ:" .. now
      if write_due and math.floor(tonumber(score[jobid])) ~= tonumber(now) then
        dues[#dues + 1] = jobid
        dues[#dues + 1] = score[jobid] .. ":" .. now
      elseif drop_due then
        stale[#stale + 1] = jobid
      end
    end
  end
  if #push > 0 then
    redis.call("LPUSH", queue, unpack(push))
    redis.call("SADD", members, unpack(push))
    redis.call("HSET", statuses, unpack(st))
    if #dues > 0 then
      redis.call("HSET", KEYS[5], unpack(dues))
    end
    if #stale > 0 then
      redis.call("HDEL", KEYS[5], unpack(stale))
    end
    redis.call("PUBLISH", prefix .. "-wake-" .. q, #push)
    enqueued = enqueued + #push
  end
end
if deferred > 0 then
  redis.call("PUBLISH", prefix .. "-wake-timeline", retry)
end
local after = redis.call("ZRANGE", timeline, 0, 0, "WITHSCORES")
return {#due, enqueued, deferred, halted, lease, odd, clock, beat, paused, python, head,
  {after[2] or false, point, deadline}}
