-- backfill: gives a job a backlog of due instants, each to be run once, in order, one
-- run at a time (crate::backfill): `redbike backfill`, and the dispatcher's catch-up
-- `all` of a late job. The first instant runs at once when the job is neither running
-- nor queued: it leaves the timeline for its queue, with status ENQ and the due note
-- `INSTANT:NOW` (so its claim reads due = INSTANT, crate::history::due_at), and its
-- timeline score is kept in `backlogs` as the instant its schedule goes back to. The
-- other instants go into its backlog list, which finish.lua takes from after each run.
-- A job running or queued keeps its run; the backlog begins when that run ends.
-- Everything is checked before the first write; nothing is written unless the job
-- still has the schedule the instants were computed from.
-- What it wrote goes to the event stream as the operator's audit entry (audit in
-- common.lua; catch-up passes one with "0" events kept: none).
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused, control,
--       backlogs, backlog, due, events
-- ARGV: jobid, schedule read, now, queue wake channel, expected timeline score ("" for
--       `backfill`; else catch-up: only a job still due at that score, neither running
--       nor queued nor paused), the audit entry (8), then the instants, oldest first
--       (at least one)
-- Returns {word, n}: "unknown" (no schedule), "changed" (not the schedule read, or,
-- for catch-up, no longer at that score), "paused", "halted" (`backfill` only),
-- "pending" (the job has a backlog already; n: its length), "left" (catch-up: running,
-- queued or paused, left to the pass), "started" (the first instant's run is queued;
-- n: instants left in the backlog), "waiting" (running or queued: n instants wait for
-- that run to end). Only "started" and "waiting" wrote anything.
local k = job_keys()
local paused_key, control, backlogs, backlog, due_key =
  KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local jobid, read, now, wake, expected = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local FIRST = 14
local bad = wrong_job_type(k, {paused_key, "hash", control, "string", backlogs, "hash",
  backlog, "list", due_key, "hash"})
  or bad_number(now, 0, MAX_UNIX, "now")
  or (expected ~= "" and not tonumber(expected)
    and redis.error_reply("ERR expected score " .. expected .. " is not a number"))
  or (#ARGV < FIRST and redis.error_reply("ERR no instant to backfill; nothing was changed"))
for i = FIRST, #ARGV do
  bad = bad or bad_number(ARGV[i], 0, MAX_UNIX, "due instant")
end
if bad then
  return bad
end
local schedule = redis.call("HGET", k.schedules, jobid)
if not schedule then
  return {"unknown", 0}
elseif schedule ~= read then
  return {"changed", 0}
end
local catch_up = expected ~= ""
local paused = redis.call("HEXISTS", paused_key, jobid) == 1
local running = redis.call("EXISTS", k.lease) == 1
local queued = redis.call("SISMEMBER", k.members, jobid) == 1
local score = redis.call("ZSCORE", k.timeline, jobid)
if catch_up then
  if not score or tonumber(score) ~= tonumber(expected) then
    return {"changed", 0}
  elseif running or queued or paused then
    return {"left", 0}
  end
elseif paused then
  return {"paused", 0}
elseif redis.call("GET", control) == "HALT" then
  return {"halted", 0}
end
local pending = redis.call("LLEN", backlog)
if pending > 0 or redis.call("HEXISTS", backlogs, jobid) == 1 then
  return {"pending", pending}
end
-- The instants after `from`, for one RPUSH per thousand (see chunked).
local function after(from)
  local list = {}
  for i = from, #ARGV do
    list[#list + 1] = ARGV[i]
  end
  return list
end
if running or queued then
  chunked("RPUSH", backlog, after(FIRST))
  redis.call("HSET", backlogs, jobid, 0)
  audit(KEYS[12], 6)
  return {"waiting", #ARGV - FIRST + 1}
end
-- The schedule's own placement, taken off the timeline for the backlog, comes back
-- after it (finish.lua), unless the backlog runs it (a late job's first instant).
local resume = 0
if score and tonumber(score) > tonumber(ARGV[#ARGV]) then
  resume = string.format("%d", tonumber(score))
end
redis.call("HSET", backlogs, jobid, resume)
place(k, jobid, "enqueue", 0, now, wake, "")
redis.call("HSET", due_key, jobid, ARGV[FIRST] .. ":" .. now)
chunked("RPUSH", backlog, after(FIRST + 1))
audit(KEYS[12], 6)
return {"started", #ARGV - FIRST}
