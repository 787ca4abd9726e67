-- file_history: moves the oldest unfiled history entries (finish.lua appends workers'
-- entries there, so the oldest are at the head) into their jobs' lists, each trimmed
-- to the history limit, oldest first so that every list stays newest first. The
-- caller read those entries (the list's head) and names each one's job and list;
-- nothing is written unless the head still holds exactly them: another worker may
-- have filed them meanwhile.
-- An entry whose job has no schedule any more (it was unset, which drops the job's
-- list) is dropped, as is one whose list key holds another type (`redbike check` names
-- it; finish.lua would have dropped it too) or whose job id the caller could not read.
-- KEYS: unfiled runs, schedules, then each entry's history list, oldest entry first
-- ARGV: history limit, then per entry, oldest first: its job id ("" = unreadable),
--       the entry
-- Returns {filed, dropped, entries left unfiled}, or "moved" when the head changed.
local unfiled, schedules = KEYS[1], KEYS[2]
local n = #KEYS - 2
local bad = wrong_type({unfiled, "list", schedules, "hash"})
  or bad_number(ARGV[1], 1, 1000000, "history limit")
if bad then
  return bad
end
if #ARGV ~= 2 * n + 1 then
  return redis.error_reply("ERR " .. n .. " history keys for " .. (#ARGV - 1) ..
    " arguments; nothing was changed")
end
local limit = tonumber(ARGV[1])
local head = redis.call("LRANGE", unfiled, 0, n - 1)
if #head ~= n then
  return "moved"
end
for i = 1, n do
  if head[i] ~= ARGV[2 * i + 1] then
    return "moved"
  end
end
-- Whose jobs still have a schedule: one call for all of them.
local ids = {}
for i = 1, n do
  ids[i] = ARGV[2 * i]
end
local scheduled = chunked("HMGET", schedules, ids) or {}
local filed, dropped = 0, 0
for i = 1, n do
  local jobid, entry, key = ARGV[2 * i], ARGV[2 * i + 1], KEYS[2 + i]
  local len = jobid ~= "" and scheduled[i] and redis.pcall("LPUSH", key, entry)
  if type(len) == "number" then
    if len > limit then
      redis.call("LTRIM", key, 0, limit - 1)
    end
    filed = filed + 1
  else
    dropped = dropped + 1
  end
end
redis.call("LTRIM", unfiled, n, -1)
return {filed, dropped, redis.call("LLEN", unfiled)}
