-- set/load: store a schedule and place the job.
-- KEYS: schedules, statuses, timeline, queue, members, lease
-- ARGV: jobid, stored schedule, action (enqueue|timeline|stop), due, now,
--       queue wake channel, timeline wake channel
local k = job_keys()
local jobid = ARGV[1]
redis.call("HSET", k.schedules, jobid, ARGV[2])
return place(k, jobid, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
