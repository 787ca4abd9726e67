-- dispatch: move up to `limit` due jobs from the timeline into their queues, with the
-- original's enqueue rule, in one atomic step (so racing dispatchers never move one
-- occurrence twice). Also reads the control key, so an idle pass costs one round trip.
-- KEYS: timeline, statuses, control
-- ARGV: prefix, point in time, limit, now
-- Returns {taken, enqueued, earliest remaining score or false, halted 0/1}
local timeline, statuses = KEYS[1], KEYS[2]
local prefix, now = ARGV[1], ARGV[4]
local halted = redis.call("GET", KEYS[3]) == "HALT" and 1 or 0
local first = redis.call("ZRANGE", timeline, 0, 0, "WITHSCORES")
if #first == 0 or tonumber(first[2]) > tonumber(ARGV[2]) then
  return {0, 0, first[2] or false, halted}
end
local due = redis.call("ZRANGEBYSCORE", timeline, "-inf", ARGV[2], "LIMIT", 0, tonumber(ARGV[3]))
redis.call("ZREM", timeline, unpack(due))
-- Group by queue (the part after the last ':'), keeping due order.
local groups, order = {}, {}
for _, jobid in ipairs(due) do
  local q = string.match(jobid, "([^:]*)$")
  if groups[q] == nil then
    groups[q] = {}
    order[#order + 1] = q
  end
  table.insert(groups[q], jobid)
end
local enqueued = 0
for _, q in ipairs(order) do
  local jobs = groups[q]
  local queue = prefix .. "-work-" .. q
  local members = queue .. "-members"
  local leases = {}
  for i, jobid in ipairs(jobs) do
    leases[i] = queue .. "-" .. jobid
  end
  local queued = redis.call("SMISMEMBER", members, unpack(jobs))
  local leased = redis.call("MGET", unpack(leases))
  local push, st = {}, {}
  for i, jobid in ipairs(jobs) do
    if queued[i] == 0 and not leased[i] then
      push[#push + 1] = jobid
      st[#st + 1] = jobid
      st[#st + 1] = "ENQ:" .. now
    end
  end
  if #push > 0 then
    redis.call("LPUSH", queue, unpack(push))
    redis.call("SADD", members, unpack(push))
    redis.call("HSET", statuses, unpack(st))
    redis.call("PUBLISH", prefix .. "-wake-" .. q, #push)
    enqueued = enqueued + #push
  end
end
local rest = redis.call("ZRANGE", timeline, 0, 0, "WITHSCORES")
return {#due, enqueued, rest[2] or false, halted}
