-- load: set and place a batch of jobs in one call (each exactly as place.lua would);
-- one call per batch instead of per job is what makes bulk loading fast.
-- Refused, before any write, when the prefix was split into shards since this process
-- checked (see split_refusal).
-- Each job's deadline (crate::stale) is written as place.lua writes it, in one call per
-- batch, while `fresh-until` is a sorted set or none.
-- KEYS: schedules, statuses, timeline, paused, shards marker, fresh-until
-- ARGV: prefix, now, then per job: jobid, stored schedule, action, due, schedule stored
--       instead when it is running, schedule stored instead when it is paused,
--       deadline ("" leave it, "-" remove it, else the unix second)
-- Wake-ups are published by the caller, once per batch.
local prefix, now = ARGV[1], ARGV[2]
-- Everything that could fail, for the whole batch, before the first write.
local seen = {}
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "hash", KEYS[3], "zset", KEYS[4], "hash",
  KEYS[5], "string"}, seen) or split_refusal(KEYS[5])
for i = 3, #ARGV, 7 do
  if bad then
    return bad
  end
  local jobid = ARGV[i]
  local queue = prefix .. "-work-" .. string.match(jobid, "([^:]*)$")
  bad = wrong_type({queue, "list", queue .. "-members", "set"}, seen)
    or (own_queue(jobid) and wrong_type({queue .. "-" .. jobid, "string"}))
    or (ARGV[i + 2] == "timeline" and bad_number(ARGV[i + 3], 0, MAX_UNIX, "due time"))
    or (ARGV[i + 6] ~= "" and ARGV[i + 6] ~= "-"
      and bad_number(ARGV[i + 6], 0, MAX_UNIX, "deadline"))
end
if bad then
  return bad
end
-- A paused job only gets its schedule (see place.lua): read once for the batch.
local paused = nil
if redis.call("EXISTS", KEYS[4]) == 1 then
  paused = {}
  for i = 3, #ARGV, 7 do
    paused[#paused + 1] = ARGV[i]
  end
  paused = chunked("HMGET", KEYS[4], paused)
end
local fresh_type = redis.call("TYPE", KEYS[6])["ok"]
local deadlines, gone = nil, nil
if fresh_type == "zset" or fresh_type == "none" then
  deadlines, gone = {}, {}
end
for i = 3, #ARGV, 7 do
  local jobid = ARGV[i]
  if deadlines and ARGV[i + 6] == "-" then
    gone[#gone + 1] = jobid
  elseif deadlines and ARGV[i + 6] ~= "" then
    deadlines[#deadlines + 1] = ARGV[i + 6]
    deadlines[#deadlines + 1] = jobid
  end
  local queue = prefix .. "-work-" .. string.match(jobid, "([^:]*)$")
  local k = {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
             queue = queue, members = queue .. "-members", lease = queue .. "-" .. jobid}
  local result = "paused"
  if not (paused and paused[(i - 3) / 7 + 1]) then
    result = place(k, jobid, ARGV[i + 2], ARGV[i + 3], now, "", "")
  end
  if result == "paused" then
    redis.call("HSET", k.schedules, jobid, ARGV[i + 5])
  elseif result == "running" then
    redis.call("HSET", k.schedules, jobid, ARGV[i + 4])
  else
    redis.call("HSET", k.schedules, jobid, ARGV[i + 1])
  end
end
if deadlines then
  chunked("ZADD", KEYS[6], deadlines)
  chunked("ZREM", KEYS[6], gone)
end
return (#ARGV - 2) / 7
