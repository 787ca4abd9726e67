-- sweep: one step of the slow walk over all schedules that finds jobs out of
-- circulation: a live schedule (not STOP) but no lease, no queue entry and no timeline
-- entry. Jobs held on purpose (status DIE: the original's and `hold`'s failed jobs),
-- unparsable ones (BAD) and paused ones (`redbike pause`) are left alone. A STOP schedule with status WRK is out too: a
-- one-off run was claimed and never recorded as done (a Python worker died with it;
-- see oneoff_action).
-- The step's HSCAN count grows with the number of schedules, so that a whole pass
-- takes about `steps` steps (a bounded time) until the count reaches `most`, which
-- caps what one step costs Redis.
-- KEYS: schedules, timeline, statuses, paused
-- ARGV: prefix, cursor, least count, most count, steps per pass
-- Returns {next cursor, count used, jobid1, schedule1, jobid2, ...}
local count = math.ceil(redis.call("HLEN", KEYS[1]) / tonumber(ARGV[5]))
count = math.max(tonumber(ARGV[3]), math.min(tonumber(ARGV[4]), count))
local scan = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", count)
local out = {scan[1], tostring(count)}
local page = scan[2]
for i = 1, #page, 2 do
  local jobid, schedule = page[i], page[i + 1]
  if not redis.call("ZSCORE", KEYS[2], jobid) then
    local queue = ARGV[1] .. "-work-" .. string.match(jobid, "([^:]*)$")
    -- pcall: a members key of another type (see `redbike check`) leaves the job out,
    -- as nothing could put it back into that queue.
    if redis.pcall("SISMEMBER", queue .. "-members", jobid) == 0
        and redis.call("EXISTS", queue .. "-" .. jobid) == 0 then
      local status = redis.call("HGET", KEYS[3], jobid) or ""
      local event = string.sub(status, 1, 3)
      local lost
      if schedule == "STOP" then
        lost = event == "WRK"
      else
        lost = event ~= "DIE" and event ~= "BAD"
      end
      if lost and redis.pcall("HEXISTS", KEYS[4], jobid) ~= 1 then
        out[#out + 1] = jobid
        out[#out + 1] = schedule
      end
    end
  end
end
return out
