-- claim: pop up to `n` jobs, walking the queue cycle (the original's round-robin
-- weighting, e.g. A:A:B) from `cursor`, and lease each one in the same atomic step, so
-- a job is always either queued or leased, never lost in between.
-- Each claimed job also enters the running index (leases), scored by when it is to be
-- recovered unless its worker refreshes it.
-- Per job only the pop and the lease are calls of their own; the members sets, the
-- running index, the statuses and the schedules are one call each for the batch.
-- KEYS: statuses, schedules, leases, then one (queue, members) pair per distinct queue
-- ARGV: now, n, cursor (0-based), cycle (comma-separated 1-based pair numbers),
--       recover-after time, then one lease TTL per pair, then n lease tags
-- Returns {next cursor, jobid1, schedule1 or false, pair1, jobid2, ...}
local now, n, cursor = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cycle = {}
for p in string.gmatch(ARGV[4], "[^,]+") do
  cycle[#cycle + 1] = tonumber(p)
end
local pairs_count = (#KEYS - 3) / 2
local recover_at = ARGV[5]
deferred_statuses = {}
local out, ids, indexed, popped = {}, {}, {}, {}
local taken, misses = 0, 0
while taken < n and misses < #cycle do
  local pair = cycle[cursor % #cycle + 1]
  cursor = cursor + 1
  local queue = KEYS[2 + 2 * pair]
  local jobid = redis.call("RPOP", queue)
  if jobid then
    misses = 0
    taken = taken + 1
    local ttl = ARGV[5 + pair]
    redis.call("SET", queue .. "-" .. jobid, ARGV[5 + pairs_count + taken], "EX", ttl)
    popped[pair] = popped[pair] or {}
    table.insert(popped[pair], jobid)
    ids[taken] = jobid
    indexed[#indexed + 1] = recover_at
    indexed[#indexed + 1] = jobid
    set_status(KEYS[1], jobid, "WRK", now)
    out[#out + 1] = jobid
    out[#out + 1] = false
    out[#out + 1] = pair
  else
    misses = misses + 1
  end
end
if taken > 0 then
  for pair = 1, pairs_count do
    if popped[pair] then
      chunked({"SREM", KEYS[3 + 2 * pair]}, popped[pair])
    end
  end
  chunked({"ZADD", KEYS[3]}, indexed)
  flush_statuses(KEYS[1])
  for i, schedule in ipairs(chunked({"HMGET", KEYS[2]}, ids)) do
    out[3 * i - 1] = schedule
  end
end
table.insert(out, 1, cursor % #cycle)
return out
