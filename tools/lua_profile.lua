-- Counts the Lua VM instructions a job costs in claim.lua or finish.lua, line by line,
-- on the calls of a drain captured by tools/redis_instructions.sh:
--
--     tools/lua_profile.py CAPTURE.mon CAPTURED_SCRIPTS calls.lua
--     lua5.1 tools/lua_profile.lua calls.lua SCRIPTS claim|finish
--
-- (Lua 5.1, as Redis runs: Debian's lua5.1, or deps/lua/src/lua of a Redis source
-- tree.) SCRIPTS is the folder of scripts to measure, as tools/redis_instructions.sh
-- says; its arguments must be laid out as the capture's. Redis's own work is not
-- counted: `redis` is a stub that answers as a Redis holding the capture's queue
-- would (types by key name, prefix "t"; leases held by their runs; schedules NOW
-- before a claim, STOP after). A VM instruction
-- cost redis-server about 85 to 110 machine instructions in all (callees, allocation
-- and garbage collection included) on the captures of benches/HISTORY.md, so this
-- shows where a script's own share goes in seconds rather than a callgrind run.
local calls_file, scripts, which = arg[1], arg[2], arg[3]
dofile(calls_file)
local function read(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end
local src = read(scripts .. "/common.lua") .. read(scripts .. "/" .. which .. ".lua")
local chunk = assert(loadstring(src, "@" .. which))

local function key_type(k)
  if k:match("%-schedules$") or k:match("%-statuses$") or k:match("%-failures$")
      or k:match("%-runs%-per%-minute$") then
    return "hash"
  elseif k:match("%-timeline$") or k:match("%-leases$") then
    return "zset"
  elseif k:match("%-members$") then
    return "set"
  elseif k:match("^t%-work%-[^-]*$") or k:match("%-unfiled%-runs$") or k:match("%-recent") then
    return "list"
  elseif k:match("%-fencing$") then
    return "string"
  elseif k:match("%-events$") then
    return "stream"
  end
  return "none"
end

local lease_of, popped = {}, 0
local schedule = which == "finish" and "STOP" or "NOW"
local function call(cmd, ...)
  local a = {...}
  if cmd == "TYPE" then
    return {ok = key_type(a[1])}
  elseif cmd == "EXISTS" or cmd == "HINCRBY" then
    return 0
  elseif cmd == "GET" or cmd == "HGET" then
    return false
  elseif cmd == "TIME" then
    return {"1764300000", "123456"}
  elseif cmd == "INCRBY" then
    return 1764300000123456 + a[2]
  elseif cmd == "LLEN" then
    return 1000
  elseif cmd == "RPOP" then
    local r = {}
    for i = 1, a[2] do
      popped = popped + 1
      r[i] = "j" .. popped .. ":A"
    end
    return r
  elseif cmd == "MGET" then
    local r = {}
    for i, k in ipairs(a) do
      r[i] = lease_of[k] or false
    end
    return r
  elseif cmd == "HMGET" then
    local r = {}
    for i = 2, #a do
      r[i - 1] = a[1]:match("%-schedules$") and schedule or false
    end
    return r
  elseif cmd == "XADD" then
    return "1-1"
  elseif cmd == "ZRANGE" or cmd == "HKEYS" or cmd == "LRANGE" then
    return {}
  end
  return 1
end
redis = {call = call, pcall = call,
  error_reply = function(s) return {err = s} end,
  status_reply = function(s) return {ok = s} end}

-- finish.lua's layout: fixed keys, keys a queue, arguments a job, arguments once.
local FIXED, QK, AS, ONCE = read(scripts .. "/finish.lua")
  :match("local FIXED, QK, AS, ONCE = (%d+), (%d+), (%d+), (%d+)")
FIXED, QK, AS, ONCE = tonumber(FIXED), tonumber(QK), tonumber(AS), tonumber(ONCE)
local counts, jobs = {}, 0
local function hook()
  local info = debug.getinfo(2, "Sl")
  if info and info.source == "@" .. which then
    counts[info.currentline] = (counts[info.currentline] or 0) + 1
  end
end
for _, c in ipairs(CALLS[which]) do
  KEYS, ARGV = c.keys, c.argv
  if which == "finish" then
    local queues = (#KEYS - FIXED) / QK
    local n = (#ARGV - ONCE - 2 * queues) / AS
    for i = 0, n - 1 do
      -- A job's lease key: its queue's key, "-" and its id.
      local queue = KEYS[FIXED + QK * tonumber(ARGV[AS * i + 3]) - 1]
      lease_of[queue .. "-" .. ARGV[AS * i + 1]] = ARGV[AS * i + 2]
    end
    jobs = jobs + n
  else
    jobs = jobs + tonumber(ARGV[2])
  end
  debug.sethook(hook, "", 1)
  local r = chunk()
  debug.sethook()
  if type(r) == "table" and r.err then
    print("error reply: " .. r.err)
  end
end

local lines = {}
for l in src:gmatch("([^\n]*)\n?") do
  lines[#lines + 1] = l
end
local total, rows = 0, {}
for l, n in pairs(counts) do
  total = total + n
  rows[#rows + 1] = {l, n}
end
table.sort(rows, function(x, y) return x[2] > y[2] end)
print(string.format("%s: %d VM instructions a job (%d jobs, %d calls); by line of common.lua + %s.lua:",
  which, total / jobs, jobs, #CALLS[which], which))
for i = 1, math.min(30, #rows) do
  local l, n = rows[i][1], rows[i][2]
  print(string.format("%7.1f %5d  %s", n / jobs, l, (lines[l] or ""):sub(1, 90)))
end
