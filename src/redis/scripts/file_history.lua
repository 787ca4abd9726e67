-- file_history: moves up to `n` of the oldest unfiled history entries (finish.lua
-- appends workers' entries there, so the oldest are at the head) into their jobs'
-- lists, each trimmed to the history limit, oldest first so that every list stays
-- newest first. It reads the entries itself, in the same atomic step that files and
-- removes them, so workers filing at once file each entry once, and no entry travels
-- to the worker and back.
-- Each entry names its job first (crate::history::unfiled_head: `{"j":"ID"` when the
-- id needs no escape); an id written with escapes is decoded with cjson. An entry
-- whose job has no schedule any more (it was unset, which drops the job's list) is
-- dropped, as is one whose list key holds another type (`redbike check` names it;
-- finish.lua would have dropped it too) or that names no job.
-- KEYS: unfiled runs, schedules
-- ARGV: history limit, n (1..10000), the start of every job's history key (the job id
--       completes it)
-- Returns {filed, dropped, entries left unfiled}.
local unfiled, schedules = KEYS[1], KEYS[2]
local bad = wrong_type({unfiled, "list", schedules, "hash"})
  or bad_number(ARGV[1], 1, 1000000, "history limit")
  or bad_number(ARGV[2], 1, 10000, "entries to file")
if bad then
  return bad
end
local limit, prefix = tonumber(ARGV[1]), ARGV[3]
local head = redis.call("LRANGE", unfiled, 0, tonumber(ARGV[2]) - 1)
local n = #head
if n == 0 then
  return {0, 0, 0}
end
-- Each entry's job id (false: none could be read).
local ids = {}
for i = 1, n do
  local entry = head[i]
  local id = string.match(entry, '^{"j":"([^"\\]*)"')
  if not id then
    local ok, decoded = pcall(cjson.decode, entry)
    id = ok and type(decoded) == "table" and type(decoded.j) == "string" and decoded.j
  end
  ids[i] = id or false
end
-- Whose jobs still have a schedule: one call for all of them.
local asked = {}
for i = 1, n do
  asked[i] = ids[i] or ""
end
local scheduled = chunked("HMGET", schedules, asked) or {}
local filed, dropped = 0, 0
for i = 1, n do
  local key = ids[i] and scheduled[i] and prefix .. ids[i]
  local len = key and redis.pcall("LPUSH", key, head[i])
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
