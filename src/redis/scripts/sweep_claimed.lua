-- sweep_claimed: one call of the quick walk over all statuses that finds the jobs a
-- Python worker died with: status WRK (its claim wrote it), yet no lease, no queue entry
-- and no timeline entry. It looks further only at WRK statuses (the jobs running now, a
-- few), so a status costs Redis about half what a schedule costs the full walk
-- (sweep.lua), which still finds every other way out of circulation, more slowly. The
-- same rules as sweep.lua decide what is lost: a live schedule, or STOP (a one-off run
-- claimed and never recorded as done); held (DIE), unparsable (BAD) and paused jobs and
-- jobs without a schedule are left alone.
-- A call looks at about `count` statuses (a couple of thousand: it holds Redis a few
-- ms); the caller paces the calls, and sizes its pace by the number of statuses.
-- KEYS: statuses, schedules, timeline, paused
-- ARGV: prefix, cursor, count
-- Returns {next cursor, number of statuses, jobid1, schedule1, jobid2, ...}
local scan = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", tonumber(ARGV[3]))
local out = {scan[1], tostring(redis.call("HLEN", KEYS[1]))}
local page = scan[2]
local byte = string.byte
for i = 2, #page, 2 do
  -- "WRK:" without making a string of each status.
  local a, b, c, d = byte(page[i], 1, 4)
  if a == 87 and b == 82 and c == 75 and d == 58 then
    local jobid = page[i - 1]
    local schedule = redis.call("HGET", KEYS[2], jobid)
    if schedule and not redis.call("ZSCORE", KEYS[3], jobid) then
      local queue = ARGV[1] .. "-work-" .. string.match(jobid, "([^:]*)$")
      -- pcall: a members key of another type (see `redbike check`) leaves the job
      -- out, as nothing could put it back into that queue.
      if redis.pcall("SISMEMBER", queue .. "-members", jobid) == 0
          and redis.call("EXISTS", queue .. "-" .. jobid) == 0
          and redis.pcall("HEXISTS", KEYS[4], jobid) ~= 1 then
        out[#out + 1] = jobid
        out[#out + 1] = schedule
      end
    end
  end
end
return out
