-- register: a dispatcher or worker registers as it starts (see registry.rs). It drops
-- the ids of processes whose description has expired (they stopped heart-beating
-- without deregistering: killed, or their host died), so the set of ids stays as small
-- as the number of processes alive, then writes its own description and adds its id.
-- KEYS: procs (set of ids), this process's description key
-- ARGV: prefix, process id, description (JSON, made in Rust), ttl in seconds
-- Returns how many expired ids were dropped.
local bad = wrong_type({KEYS[1], "set"}) or bad_number(ARGV[4], 1, MAX_TTL, "heartbeat ttl")
if bad then
  return bad
end
local dropped = 0
for _, id in ipairs(redis.call("SMEMBERS", KEYS[1])) do
  if redis.call("EXISTS", ARGV[1] .. "-proc-" .. id) == 0 then
    redis.call("SREM", KEYS[1], id)
    dropped = dropped + 1
  end
end
redis.call("SET", KEYS[2], ARGV[3], "EX", ARGV[4])
redis.call("SADD", KEYS[1], ARGV[2])
return dropped
