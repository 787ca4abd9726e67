-- Helpers shared by the redbike scripts; scripts.rs prepends this file to each of them.

-- Records a status: EVENT:UNIXSECONDS, as redbike 0.13.1 writes it.
local function set_status(statuses, jobid, event, now)
  redis.call("HSET", statuses, jobid, event .. ":" .. now)
end

-- The original's enqueue rule: never twice in a queue, never while its lease exists.
-- Returns "enqueued", "queued" (already there) or "running" (leased).
local function enqueue(queue, members, lease, statuses, jobid, now, wake)
  if redis.call("SISMEMBER", members, jobid) == 1 then
    return "queued"
  end
  if redis.call("EXISTS", lease) == 1 then
    return "running"
  end
  redis.call("LPUSH", queue, jobid)
  redis.call("SADD", members, jobid)
  set_status(statuses, jobid, "ENQ", now)
  if wake ~= "" then
    redis.call("PUBLISH", wake, "1")
  end
  return "enqueued"
end

-- Takes a job out of its queue (both the list and the members set). LREM scans the
-- list, so it runs only when the members set says the job is there.
local function dequeue(queue, members, jobid)
  if redis.call("SREM", members, jobid) == 1 then
    redis.call("LREM", queue, 0, jobid)
  end
end

-- Wake channels may be "" when the caller publishes once for a whole batch.
-- Puts a job where its schedule says: "enqueue", "timeline" (due at `due`) or "stop".
-- A job is in one place only, so each placement removes it from the others.
local function place(k, jobid, action, due, now, queue_wake, timeline_wake)
  if action == "enqueue" then
    redis.call("ZREM", k.timeline, jobid)
    return enqueue(k.queue, k.members, k.lease, k.statuses, jobid, now, queue_wake)
  elseif action == "timeline" then
    dequeue(k.queue, k.members, jobid)
    redis.call("ZADD", k.timeline, due, jobid)
    set_status(k.statuses, jobid, "TML", now)
    if timeline_wake ~= "" then
      redis.call("PUBLISH", timeline_wake, due)
    end
    return "timeline"
  elseif action == "stop" then
    redis.call("ZREM", k.timeline, jobid)
    dequeue(k.queue, k.members, jobid)
    set_status(k.statuses, jobid, "STP", now)
    return "stopped"
  end
  return redis.error_reply("unknown placement " .. tostring(action))
end

-- The standard KEYS of a single-job script.
local function job_keys()
  return {schedules = KEYS[1], statuses = KEYS[2], timeline = KEYS[3],
          queue = KEYS[4], members = KEYS[5], lease = KEYS[6]}
end
