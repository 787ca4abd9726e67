-- kill: `redbike kill`: ask the worker that runs a job to stop this run (SIGTERM to its
-- process group, SIGKILL after its grace period, status KIL; the job then goes on per
-- its schedule). The run is named by its lease tag, so a kill never reaches a later
-- run of the job. The request is a message on the control channel, which every idle
-- redbike worker of the prefix listens to anyway, and a marker in `kill` (job id ->
-- tag) that the worker's refresh reads while it holds the job, should its listener
-- miss the message (reconnecting). The marker goes when the run's outcome is written
-- (finish.lua) or the job is unset (unset.lua).
-- A lease that the running index does not hold is a Python worker's: it knows nothing
-- of kills, so nothing is asked.
-- The operator's audit entry (audit in common.lua) goes to the event stream when the
-- script changed something.
-- KEYS: schedules, lease, leases, kill, control, events
-- ARGV: jobid, control channel, then the audit entry (8)
-- Returns {result, tag or false}: result "unknown" (no schedule and not running),
-- "halted" (the control key says HALT: the workers are stopping their runs anyway),
-- "idle" (not running), "python" (run by a worker that takes no kills) or "asked"
-- (marker written, message published); nothing is written unless "asked".
local jobid, channel = ARGV[1], ARGV[2]
local schedules, lease, leases, kill, control = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local bad = wrong_type({schedules, "hash", lease, "string", leases, "zset", kill, "hash",
  control, "string"})
if bad then
  return bad
end
local tag = redis.call("GET", lease)
-- A job unset while it runs has no schedule, but its run can still be stopped.
if not tag and redis.call("HEXISTS", schedules, jobid) == 0 then
  return {"unknown", false}
end
if redis.call("GET", control) == "HALT" then
  return {"halted", tag or false}
end
if not tag then
  return {"idle", false}
end
if not redis.call("ZSCORE", leases, jobid) then
  return {"python", tag}
end
redis.call("HSET", kill, jobid, tag)
audit(KEYS[6], 3)
redis.call("PUBLISH", channel, "KILL " .. tag .. " " .. jobid)
return {"asked", tag}
