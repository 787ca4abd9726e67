-- notify_state: `redbike notify` records a state a stream entry (or a fleet check)
-- shows, and learns whether it is a change to report, so that notifiers sharing a
-- prefix agree on which entry changed a state and report each change once (see
-- src/notify/state.rs).
-- KEYS: the notifiers' state (P-notify-state, a hash), the jobs with changes held back
--   by the rate limit (P-notify-held, a sorted set: rate field -> end of the window, ms)
-- ARGV: field (`run:JOB`, `stale:JOB`, `fleet:NAME`), entry id (`MS-SEQ`, or `*`: now on
--   Redis's clock), the state it shows, the state a first record keeps quiet about
--   (`ok`: a job's first success is no news; empty: none), the rate field (`rate:JOB`,
--   empty for none), the rate limit in seconds (0: none)
-- A state field holds `LASTID STATE CHANGEID SAID TOLD`: the newest entry applied, the
-- state it left, the entry that made that state (`-` when its change was held back),
-- the count of suppressed changes that entry's notification carried, and the state
-- last reported (`-` for none). A rate field holds `SENTMS SUPPRESSED`.
-- Returns {word, previous state, suppressed, entry id}: `old` (older than, or the same
-- as, the newest entry applied: nothing to say), `same` (no change), `quiet` (a first
-- record of the quiet state), `suppressed` (a change within the rate limit: counted),
-- `changed` (a change to report, with the changes suppressed since the last report),
-- `again` (the entry that made the state, seen again: a redelivery to report again).
local bad = wrong_type({KEYS[1], "hash", KEYS[2], "zset"})
if bad then
  return bad
end
local field, id, state, quiet, rate_field = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local limit = tonumber(ARGV[6])
if not limit or limit < 0 then
  return redis.error_reply("ERR notify_state: bad rate limit " .. tostring(ARGV[6]))
end
if redis.replicate_commands then
  redis.replicate_commands()
end
local time = redis.call("TIME")
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if id == "*" then
  id = now_ms .. "-" .. (tonumber(time[2]) % 1000)
end
local function parse_id(text)
  local ms, seq = string.match(text or "", "^(%d+)-(%d+)$")
  return tonumber(ms), tonumber(seq)
end
local ms, seq = parse_id(id)
if not ms then
  return redis.error_reply("ERR notify_state: bad entry id " .. tostring(id))
end
local stored = redis.call("HGET", KEYS[1], field)
local last, prev, change, said, told = "", "", "", "0", "-"
if stored then
  last, prev, change, said, told = string.match(stored, "^(%S+) (%S+) (%S+) (%d+) (%S+)$")
  if not last then
    last, prev, change, said, told = "", "", "", "0", "-"
  end
end
local function put(c, s2, t)
  redis.call("HSET", KEYS[1], field, id .. " " .. state .. " " .. c .. " " .. s2 .. " " .. t)
end
if last ~= "" then
  if id == change then
    return {"again", prev, tonumber(said), id}
  end
  local lms, lseq = parse_id(last)
  if lms and (ms < lms or (ms == lms and seq <= lseq)) then
    return {"old", prev, 0, id}
  end
end
if prev == state then
  put(change, said, told)
  return {"same", prev, 0, id}
end
if prev == "" and state == quiet then
  put(id, "0", state)
  return {"quiet", prev, 0, id}
end
local suppressed = 0
if rate_field ~= "" then
  local sent, count = 0, 0
  local r = redis.call("HGET", KEYS[1], rate_field)
  if r then
    sent = tonumber(string.match(r, "^(%d+)")) or 0
    count = tonumber(string.match(r, "^%d+ (%d+)$")) or 0
  end
  if limit > 0 and now_ms - sent < limit * 1000 then
    redis.call("HSET", KEYS[1], rate_field, sent .. " " .. (count + 1))
    -- No entry made this state as far as a redelivery goes: it is not reported again;
    -- the release (notify_release.lua) reports it at the window's end if it lasts.
    put("-", "0", told)
    redis.call("ZADD", KEYS[2], sent + limit * 1000, rate_field)
    return {"suppressed", prev, count + 1, id}
  end
  suppressed = count
  redis.call("HSET", KEYS[1], rate_field, now_ms .. " 0")
end
put(id, tostring(suppressed), state)
return {"changed", prev, suppressed, id}
