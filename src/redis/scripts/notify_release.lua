-- notify_release: at the end of a job's rate-limit window, `redbike notify` reports the
-- changes held back (see notify_state.lua) whose state lasted: each state field of the
-- job whose state is not the one last reported. Taken by one notifier (ZREM), so each is
-- reported once.
-- KEYS: the notifiers' state (P-notify-state, a hash), the jobs with changes held back
--   (P-notify-held, a sorted set: rate field -> end of the window, ms)
-- ARGV: the most jobs to release, the state fields' kinds (`run,stale`)
-- Returns a flat list: field, the newest entry applied to it, its state, the changes
-- suppressed (given with the first field of a job), for each field to report.
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "zset"})
if bad then
  return bad
end
local count = tonumber(ARGV[1])
if not count or count < 1 then
  return redis.error_reply("ERR notify_release: bad count " .. tostring(ARGV[1]))
end
if redis.replicate_commands then
  redis.replicate_commands()
end
local time = redis.call("TIME")
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local out = {}
for _, rate_field in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", now_ms, "LIMIT", 0, count)) do
  redis.call("ZREM", KEYS[2], rate_field)
  local job = string.sub(rate_field, 6)
  local r = redis.call("HGET", KEYS[1], rate_field) or ""
  local suppressed = tonumber(string.match(r, "^%d+ (%d+)$")) or 0
  local given = false
  for kind in string.gmatch(ARGV[2], "[^,]+") do
    local field = kind .. ":" .. job
    local stored = redis.call("HGET", KEYS[1], field)
    if stored then
      local last, state, change, said, told = string.match(stored, "^(%S+) (%S+) (%S+) (%d+) (%S+)$")
      if last and state ~= told then
        redis.call("HSET", KEYS[1], field, last .. " " .. state .. " " .. change .. " " .. said .. " " .. state)
        out[#out + 1] = field
        out[#out + 1] = last
        out[#out + 1] = state
        out[#out + 1] = given and 0 or suppressed
        given = true
      end
    end
  end
  if given then
    redis.call("HSET", KEYS[1], rate_field, now_ms .. " 0")
  end
end
return out
