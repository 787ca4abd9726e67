-- unset: forget a job everywhere but its lease (a running job finishes, then finds its
-- schedule gone and is dropped). Unlike 0.13.1 this also clears the members set, so a
-- later set of the same id can queue it again. Its pause and a run asked go too.
-- Its run history goes too (the list and its due field, never a key of another type
-- under their names, so such a key never stops an unset; `redbike check` names it).
-- A retry it waited for goes too, and its backlog (crate::backfill), and its deadline
-- and staleness (crate::stale; pcalls: keys of another type under those names are left
-- alone, and never stop an unset).
-- The operator's audit entry (audit in common.lua) goes to the event stream when the
-- job had a schedule.
-- KEYS: schedules, statuses, timeline, queue, members, failures, history, due, paused,
--       rerun, attempts, backlogs, backlog, fresh-until, stale, events
-- ARGV: jobid, then the audit entry (8)
local jobid = ARGV[1]
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset",
  KEYS[5], "set", KEYS[6], "hash", KEYS[9], "hash", KEYS[10], "hash", KEYS[11], "hash", KEYS[12], "hash"})
if bad then
  return bad
end
-- Under a colliding queue name (queue X-X's list is job X's lease, queue X-members's
-- list is queue X's members set) the queue key may be another key of ours: the job is
-- not in it then, and unset leaves it alone, so such a job can always be unset.
local queue_type = redis.call("TYPE", KEYS[4])["ok"]
local found = redis.call("HDEL", KEYS[1], jobid)
redis.call("HDEL", KEYS[2], jobid)
redis.call("HDEL", KEYS[6], jobid)
redis.call("HDEL", KEYS[9], jobid)
redis.call("HDEL", KEYS[10], jobid)
redis.call("HDEL", KEYS[11], jobid)
redis.call("ZREM", KEYS[3], jobid)
if queue_type == "list" or queue_type == "none" then
  dequeue(KEYS[4], KEYS[5], jobid)
else
  redis.call("SREM", KEYS[5], jobid)
end
drop_history(KEYS[7])
drop_backlog(KEYS[12], KEYS[13], jobid)
redis.pcall("HDEL", KEYS[8], jobid)
redis.pcall("ZREM", KEYS[14], jobid)
redis.pcall("HDEL", KEYS[15], jobid)
if found == 1 then
  audit(KEYS[16], 2)
end
return found
