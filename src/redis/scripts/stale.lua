-- stale: move jobs whose deadline passed from `fresh-until` into `stale`, each with a
-- `stale` event (docs/events.md), atomically: a job moves only if its deadline is
-- still the one the caller read (a success since then wrote a later one), so racing
-- dispatchers mark a job, and write its event, once. A job already in `stale` (a
-- `set` gave it a deadline again before it succeeded) leaves `fresh-until` without a
-- second event. A job the caller found without a bound any more (its schedule or its
-- queue's bound changed since: crate::stale) leaves `fresh-until` unmarked.
-- The event is a pcall (emit): a stream key of another type costs the event, never
-- the marking.
-- KEYS: fresh-until, stale, events
-- ARGV: events kept (the stream's cap, "0": none written), then per job: jobid, the
--       deadline read, and "-" (no bound any more) or SINCE:BOUND (its last success,
--       0 when none is known, and the seconds it had to succeed within after it, 0
--       when not known)
-- Returns {jobs marked stale, jobs dropped, the earliest deadline left or false}.
local bad = wrong_type({KEYS[1], "zset", KEYS[2], "hash"})
  or bad_number(ARGV[1], 0, 1000000000, "events kept")
if bad then
  return bad
end
for i = 2, #ARGV, 3 do
  if not tonumber(ARGV[i + 1]) then
    return redis.error_reply("ERR deadline " .. ARGV[i + 1] .. " is not a number; nothing was changed")
  end
end
local now = string.format("%d", math.floor(redis_time()))
local marked, dropped = 0, 0
for i = 2, #ARGV, 3 do
  local jobid, deadline, verdict = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local score = redis.call("ZSCORE", KEYS[1], jobid)
  if score and tonumber(score) == tonumber(deadline) then
    redis.call("ZREM", KEYS[1], jobid)
    if verdict == "-" then
      dropped = dropped + 1
    elseif redis.call("HSETNX", KEYS[2], jobid, verdict .. ":" .. now) == 1 then
      marked = marked + 1
      local since, bound = string.match(verdict, "^([^:]*):([^:]*)$")
      emit(KEYS[3], ARGV[1], "type", "stale", "job", jobid, "queue",
        string.match(jobid, "([^:]*)$"), "since", since or "0", "bound", bound or "0")
    end
  end
end
local head = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {marked, dropped, head[2] or false}
