-- set/load: store a schedule and place the job.
-- A paused job (`redbike pause`) is not placed: only its schedule is stored, in the
-- form that keeps a one-off's run for `resume` (NOW, AT:TS).
-- Refused, before any write, when the prefix was split into shards since this process
-- checked (see split_refusal).
-- A new schedule starts its attempts afresh: a retry pending is forgotten (see
-- crate::retries).
-- A new schedule gives the job its deadline (crate::stale: the second by which it must
-- succeed, so that a job that never succeeds goes stale too), or takes it away; only
-- while `fresh-until` is a sorted set or none (another type: `check` names it).
-- The operator's audit entry (audit in common.lua) goes to the event stream.
-- KEYS: schedules, statuses, timeline, queue, members, lease, paused, shards marker,
--       attempts, fresh-until, events
-- ARGV: jobid, stored schedule, action (enqueue|timeline|stop), due, now,
--       queue wake channel, timeline wake channel, schedule stored instead when the
--       job cannot be queued because it is running (NOW: the worker that finishes it
--       applies NOW, queueing it once more, as the Python original would too),
--       schedule stored instead when it is paused, deadline ("" leave it, "-" remove
--       it, else the unix second), then the audit entry (8)
-- Returns the placement's result, or "paused".
local k = job_keys()
local jobid = ARGV[1]
local bad = wrong_job_type(k, {KEYS[7], "hash", KEYS[8], "string", KEYS[9], "hash"})
  or (ARGV[3] == "timeline" and bad_number(ARGV[4], 0, MAX_UNIX, "due time"))
  or (ARGV[10] ~= "" and ARGV[10] ~= "-" and bad_number(ARGV[10], 0, MAX_UNIX, "deadline"))
  or split_refusal(KEYS[8])
if bad then
  return bad
end
redis.call("HDEL", KEYS[9], jobid)
set_deadline(KEYS[10], jobid, ARGV[10])
audit(KEYS[11], 11)
if redis.call("HEXISTS", KEYS[7], jobid) == 1 then
  redis.call("HSET", k.schedules, jobid, ARGV[9])
  return "paused"
end
return place_and_store(k, jobid, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[2],
  ARGV[8])
