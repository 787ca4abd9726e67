-- repair: one fix of `redbike check --repair`. Each op re-checks its condition, so it is
-- idempotent and safe while dispatchers and workers run; the schedule hash is the
-- source of truth.
-- KEYS: schedules, statuses, timeline, queue list, members set, lease, failures
-- ARGV: op, jobid, expected schedule (mark-bad), now
-- Returns 1 when something changed, else 0.
local schedules, statuses, timeline, queue, members, lease, failures =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local op, jobid = ARGV[1], ARGV[2]
local scheduled = redis.call("HEXISTS", schedules, jobid) == 1
local in_list = redis.call("LPOS", queue, jobid)
if op == "queued-and-timeline" then
  -- Queued wins: it runs sooner, and its worker re-places it afterwards.
  if redis.call("SISMEMBER", members, jobid) == 1 then
    return redis.call("ZREM", timeline, jobid)
  end
elseif op == "queued-while-running" then
  if redis.call("EXISTS", lease) == 1 then
    redis.call("SREM", members, jobid)
    return redis.call("LREM", queue, 0, jobid)
  end
elseif op == "entry-without-member" then
  if not in_list or redis.call("SISMEMBER", members, jobid) == 1 then
    return 0
  end
  if scheduled then
    return redis.call("SADD", members, jobid)
  end
  return redis.call("LREM", queue, 0, jobid)
elseif op == "duplicate-entry" then
  local at = redis.call("LPOS", queue, jobid, "COUNT", 0)
  if #at > 1 then
    redis.call("LREM", queue, #at - 1, jobid)
    return 1
  end
elseif op == "member-without-entry" or op == "wrong-queue" then
  if op == "wrong-queue" or not in_list then
    local n = redis.call("SREM", members, jobid)
    return n + redis.call("LREM", queue, 0, jobid)
  end
elseif op == "timeline-without-schedule" then
  if not scheduled then
    return redis.call("ZREM", timeline, jobid)
  end
elseif op == "status-of-unknown-job" then
  if not scheduled then
    redis.call("HDEL", failures, jobid)
    return redis.call("HDEL", statuses, jobid)
  end
elseif op == "unparsable-schedule" then
  if redis.call("HGET", schedules, jobid) == ARGV[3] then
    redis.call("HSET", statuses, jobid, "BAD:" .. ARGV[4])
    redis.call("ZREM", timeline, jobid)
    if redis.call("SREM", members, jobid) == 1 then
      redis.call("LREM", queue, 0, jobid)
    end
    return 1
  end
end
return 0
