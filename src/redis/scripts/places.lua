-- places: where each of a batch of jobs is, read atomically (a pipeline is not: a job
-- moving between two reads would look lost).
-- KEYS: timeline, statuses, paused, rerun
-- ARGV: prefix, jobid1, jobid2, ...
-- Returns per job: {on timeline 0/1, queued 0/1, leased 0/1, status or false,
--                   timeline score or false, paused 0/1, run asked 0/1}
local out = {}
for i = 2, #ARGV do
  local jobid = ARGV[i]
  local queue = ARGV[1] .. "-work-" .. string.match(jobid, "([^:]*)$")
  local score = redis.call("ZSCORE", KEYS[1], jobid)
  out[#out + 1] = score and 1 or 0
  -- A members key of another type (a colliding queue name) reads as "not queued";
  -- `check` reports the key itself.
  local member = redis.pcall("SISMEMBER", queue .. "-members", jobid)
  out[#out + 1] = member == 1 and 1 or 0
  out[#out + 1] = redis.call("EXISTS", queue .. "-" .. jobid)
  out[#out + 1] = redis.call("HGET", KEYS[2], jobid)
  out[#out + 1] = score
  out[#out + 1] = redis.pcall("HEXISTS", KEYS[3], jobid) == 1 and 1 or 0
  out[#out + 1] = redis.pcall("HEXISTS", KEYS[4], jobid) == 1 and 1 or 0
end
return out
