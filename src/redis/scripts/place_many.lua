-- load: set and place a batch of jobs in one call (each exactly as place.lua would);
-- one call per batch instead of per job is what makes bulk loading fast.
-- KEYS: schedules, statuses, timeline
-- ARGV: prefix, now, then per job: jobid, stored schedule, action, due, schedule stored
--       instead when it is running
-- Wake-ups are published by the caller, once per batch.
local prefix, now = ARGV[1], ARGV[2]
-- Everything that could fail, for the whole batch, before the first write.
local seen = {}
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset"}, seen)
for i = 3, #ARGV, 5 do
  if bad then
    return bad
  end
  local jobid = ARGV[i]
  local queue = prefix .. "-work-" .. string.match(jobid, "([^:]*)$")
  bad = wrong_type({queue, "list", queue .. "-members", "set"}, seen)
    or (own_queue(jobid) and wrong_type({queue .. "-" .. jobid, "string"}))
    or (ARGV[i + 2] == "timeline" and bad_number(ARGV[i + 3], 0, MAX_UNIX, "due time"))
end
if bad then
  return bad
end
for i = 3, #ARGV, 5 do
  local jobid = ARGV[i]
  local queue = prefix .. "-work-" .. string.match(jobid, "([^:]*)$")
  local k = {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
             queue = queue, members = queue .. "-members", lease = queue .. "-" .. jobid}
  local result = place(k, jobid, ARGV[i + 2], ARGV[i + 3], now, "", "")
  if result == "running" then
    redis.call("HSET", k.schedules, jobid, ARGV[i + 4])
  else
    redis.call("HSET", k.schedules, jobid, ARGV[i + 1])
  end
end
return (#ARGV - 2) / 5
