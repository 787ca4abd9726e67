-- repair: one fix of `redbike check --repair`, or dry-run only whether its condition
-- still holds (check confirms each finding this way: a SCAN walk is not a snapshot).
-- Each op re-checks its condition, so it is idempotent and safe while dispatchers and
-- workers run; the schedule hash is the source of truth.
-- A fix (not a dry run) writes the operator's audit entry (audit in common.lua).
-- KEYS: schedules, statuses, timeline, queue list, members set, lease, failures, paused,
--       rerun, events
-- ARGV: op, jobid, expected schedule (unparsable-schedule), now, dry run (flag: "1" or
--       "0"), then the audit entry (8)
-- Returns 1 when the condition held (and, unless dry, was fixed), else 0.
local schedules, statuses, timeline, queue, members, lease, failures, paused, rerun =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local op, jobid, dry = ARGV[1], ARGV[2], ARGV[5] == "1"
local bad = wrong_type({schedules, "hash", statuses, "hash", timeline, "zset", queue, "list",
  members, "set", lease, "string", failures, "hash", paused, "hash", rerun, "hash"})
if bad then
  return bad
end
local scheduled = redis.call("HEXISTS", schedules, jobid) == 1
local in_list = redis.call("LPOS", queue, jobid)
local member = redis.call("SISMEMBER", members, jobid) == 1

-- Each entry: the condition, and the fix.
local ops = {
  ["queued-and-timeline"] = {
    function() return member and redis.call("ZSCORE", timeline, jobid) end,
    -- Queued wins: it runs sooner, and its worker re-places it afterwards.
    function() redis.call("ZREM", timeline, jobid) end},
  ["queued-while-running"] = {
    function() return member and redis.call("EXISTS", lease) == 1 end,
    function() redis.call("SREM", members, jobid); redis.call("LREM", queue, 0, jobid) end},
  ["entry-without-member"] = {
    function() return in_list and not member end,
    function()
      if scheduled then redis.call("SADD", members, jobid) else redis.call("LREM", queue, 0, jobid) end
    end},
  ["duplicate-entry"] = {
    function() return #redis.call("LPOS", queue, jobid, "COUNT", 0) > 1 end,
    function() redis.call("LREM", queue, #redis.call("LPOS", queue, jobid, "COUNT", 0) - 1, jobid) end},
  ["member-without-entry"] = {
    function() return member and not in_list end,
    function() redis.call("SREM", members, jobid) end},
  ["wrong-queue"] = {
    function() return member or in_list end,
    function() redis.call("SREM", members, jobid); redis.call("LREM", queue, 0, jobid) end},
  ["timeline-without-schedule"] = {
    function() return not scheduled and redis.call("ZSCORE", timeline, jobid) end,
    function() redis.call("ZREM", timeline, jobid) end},
  ["status-of-unknown-job"] = {
    function() return not scheduled and redis.call("HEXISTS", statuses, jobid) == 1 end,
    function() redis.call("HDEL", failures, jobid); redis.call("HDEL", statuses, jobid) end},
  -- A paused job belongs nowhere (a Python process put it back); one queued with a
  -- run asked (`redbike run`) is where it should be.
  ["paused-on-timeline"] = {
    function()
      return redis.call("HEXISTS", paused, jobid) == 1 and redis.call("ZSCORE", timeline, jobid)
    end,
    function() redis.call("ZREM", timeline, jobid) end},
  ["paused-in-queue"] = {
    function()
      return member and redis.call("HEXISTS", paused, jobid) == 1
        and redis.call("HEXISTS", rerun, jobid) == 0
    end,
    function() redis.call("SREM", members, jobid); redis.call("LREM", queue, 0, jobid) end},
  ["paused-without-schedule"] = {
    function() return not scheduled and redis.call("HEXISTS", paused, jobid) == 1 end,
    function() redis.call("HDEL", paused, jobid) end},
  -- A run asked that nothing will honour: the job neither runs nor waits in its queue.
  ["stale-rerun"] = {
    function()
      return redis.call("HEXISTS", rerun, jobid) == 1 and redis.call("EXISTS", lease) == 0
        and not member
    end,
    function() redis.call("HDEL", rerun, jobid) end},
  ["unparsable-schedule"] = {
    function() return redis.call("HGET", schedules, jobid) == ARGV[3] end,
    function()
      redis.call("HSET", statuses, jobid, "BAD:" .. ARGV[4])
      redis.call("ZREM", timeline, jobid)
      if member then
        redis.call("SREM", members, jobid)
        redis.call("LREM", queue, 0, jobid)
      end
    end},
}
local entry = ops[op]
if not entry then
  return redis.error_reply("unknown repair " .. tostring(op))
end
if not entry[1]() then
  return 0
end
if not dry then
  entry[2]()
  audit(KEYS[10], 6)
end
return 1
