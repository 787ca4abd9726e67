-- sweep: one call of the slow walk over all schedules that finds jobs out of
-- circulation: a live schedule (not STOP) but no lease, no queue entry and no timeline
-- entry. Jobs held on purpose (status DIE: the original's and `hold`'s failed jobs),
-- unparsable ones (BAD) and paused ones (`redbike pause`) are left alone. A STOP schedule
-- with status WRK is out too: a one-off run was claimed and never recorded as done (a
-- Python worker died with it; see oneoff_action).
-- A call looks at about `count` schedules (a few hundred: it holds Redis a few ms); the
-- caller paces the calls, and sizes its pace by the number of schedules it returns.
-- KEYS: schedules, timeline, statuses, paused
-- ARGV: prefix, cursor, count
-- Returns {next cursor, number of schedules, jobid1, schedule1, jobid2, ...}
local scan = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", tonumber(ARGV[3]))
local out = {scan[1], tostring(redis.call("HLEN", KEYS[1]))}
local page = scan[2]
-- Most schedules are on the timeline: one ZMSCORE for a slice of the page rather than
-- a ZSCORE a schedule (a small hash's HSCAN returns it whole, however large `count`).
local SLICE = 500
for first = 1, #page, 2 * SLICE do
  local last = math.min(#page, first + 2 * SLICE - 1)
  local ids = {}
  for i = first, last, 2 do
    ids[#ids + 1] = page[i]
  end
  local due = redis.call("ZMSCORE", KEYS[2], unpack(ids))
  for k, jobid in ipairs(ids) do
    if not due[k] then
      local schedule = page[first + 2 * (k - 1) + 1]
      local queue = ARGV[1] .. "-work-" .. string.match(jobid, "([^:]*)$")
      -- pcall: a members key of another type (see `redbike check`) leaves the job
      -- out, as nothing could put it back into that queue.
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
end
return out
