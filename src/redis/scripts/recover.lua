-- recover: put back a job whose worker vanished mid-run, per its schedule, with status
-- REC. `how` says why it is thought lost: "index" (our worker stopped refreshing its
-- entry in the running index) or "orphan" (a live schedule with no lease, queue entry
-- or timeline entry: a Python worker died with it). Both are re-checked here, so a job
-- is never put back twice and never while its worker is known to be alive.
-- The index entry is compared with Redis's clock (TIME), the clock it was written by.
-- A recovery (or a job found unset or BAD) leaves the history entry it is given, made
-- in Rust (see record_entry), and its run event (record_run; `failed` for a job
-- marked BAD only: a recovery is not the job's failure).
-- A paused job is never put back (its lost run counts as its last one; status PAU). A
-- run asked while the lost run ran (`rerun`) is dropped with it, and so is a kill asked
-- of it (`kill`: the run is gone). A backlog (crate::backfill) is left as it is, to go
-- on after the job's next run, unless the job was unset.
-- KEYS: schedules, statuses, timeline, queue, members, lease, failures, leases,
--       history, recent runs, recent failures, due, paused, rerun, kill, backlogs,
--       backlog, events
-- ARGV: jobid, how, expected schedule ("\0" = none), action (enqueue|timeline|stop|bad,
--       or oneoff: a STOP schedule, see oneoff_action),
--       due, now, schedule to store ("" = keep), queue wake channel, timeline wake
--       channel, history entry ("" = none), history limit ("0": no history), recent
--       runs kept, recent failures kept, events kept ("0": none)
-- Returns {"changed", current schedule or false} when the caller must decide again,
-- {"alive"} or {"fine"} when there is nothing to do, else {result}.
local k = job_keys()
k.failures = KEYS[7]
k.leases = KEYS[8]
local jobid, how, expected = ARGV[1], ARGV[2], ARGV[3]
local action, due, now, store = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local h = {history = KEYS[9], recent_runs = KEYS[10], recent_failures = KEYS[11],
           due = KEYS[12]}
local entry = ARGV[10]
local ev = {KEYS[18], ARGV[14]}
local bad = wrong_job_type(k, {k.failures, "hash", k.leases, "zset", KEYS[13], "hash",
  KEYS[14], "hash"})
  or (action == "timeline" and bad_number(due, 0, MAX_UNIX, "due time"))
  or bad_number(ARGV[11], 0, 1000000, "history limit")
  or bad_number(ARGV[12], 1, 1000000, "recent runs kept")
  or bad_number(ARGV[13], 1, 1000000, "recent failures kept")
  or bad_number(ARGV[14], 0, 10000000, "events kept")
if bad then
  return bad
end
if how == "index" then
  local at = redis.call("ZSCORE", k.leases, jobid)
  if not at or tonumber(at) > redis_time() then
    return {"alive"}
  end
elseif redis.call("EXISTS", k.lease) == 1 then
  return {"alive"}
end
if redis.call("SISMEMBER", k.members, jobid) == 1 or redis.call("ZSCORE", k.timeline, jobid) then
  redis.call("ZREM", k.leases, jobid)
  return {"fine"}
end
local current = redis.call("HGET", k.schedules, jobid)
if (current or "\0") ~= expected then
  return {"changed", current}
end
if action == "oneoff" then
  action = oneoff_action(k.statuses, jobid)
end
redis.call("DEL", k.lease)
redis.call("ZREM", k.leases, jobid)
redis.call("HDEL", KEYS[14], jobid)
-- Another type under the name (check names it) is no reason to leave the job out.
redis.pcall("HDEL", KEYS[15], jobid)
if not current then
  -- Unset while it ran: nothing to put back.
  redis.call("HDEL", k.statuses, jobid)
  redis.call("HDEL", k.failures, jobid)
  redis.call("HDEL", KEYS[13], jobid)
  if redis.call("TYPE", KEYS[16])["ok"] == "hash" then
    drop_backlog(KEYS[16], KEYS[17], jobid)
  end
  record_run(h, jobid, entry, ARGV[11], ARGV[12], ARGV[13], true, ev, "0")
  return {"unset"}
end
if action == "bad" then
  set_status(k.statuses, jobid, "BAD", now)
  record_run(h, jobid, entry, ARGV[11], ARGV[12], ARGV[13], false, ev, "1")
  return {"bad"}
end
redis.call("HSET", k.failures, jobid, "REC:" .. now)
if redis.call("HEXISTS", KEYS[13], jobid) == 1 then
  store = paused_schedule(action, due, store, current)
  if store ~= "" then
    redis.call("HSET", k.schedules, jobid, store)
  end
  set_status(k.statuses, jobid, "PAU", now)
  record_run(h, jobid, entry, ARGV[11], ARGV[12], ARGV[13], false, ev, "0")
  return {"paused"}
end
if store ~= "" then
  redis.call("HSET", k.schedules, jobid, store)
end
local result = "stopped"
if action ~= "stop" then
  result = place(k, jobid, action, due, now, ARGV[8], ARGV[9])
end
set_status(k.statuses, jobid, "REC", now)
record_run(h, jobid, entry, ARGV[11], ARGV[12], ARGV[13], false, ev, "0")
return {result}
