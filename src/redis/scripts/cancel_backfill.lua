-- cancel_backfill: `redbike backfill JOBID --cancel` drops what is left of a job's
-- backlog (crate::backfill): its list and its field in `backlogs`. A run of it already
-- queued or running still runs; after it the job goes back per its schedule.
-- The operator's audit entry (audit in common.lua) goes to the event stream when a
-- backlog was dropped.
-- KEYS: backlogs, backlog, events
-- ARGV: jobid, then the audit entry (8)
-- Returns the number of instants dropped, or -1 when the job had no backlog (nothing
-- was written).
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "list"})
if bad then
  return bad
end
local n = redis.call("LLEN", KEYS[2])
if n == 0 and redis.call("HEXISTS", KEYS[1], ARGV[1]) == 0 then
  return -1
end
drop_backlog(KEYS[1], KEYS[2], ARGV[1])
audit(KEYS[3], 2)
return n
