-- prelude.lua - shared by every lockcore script (prepended at build time).
--
-- Keys of lock N, all under hash tag {N}:
--   S  fg:{N}:s  hash   c token counter (HINCRBY), m mode (x|s), t token of
--                       the current/last grant, v value, o owner, ld
--                       lock-delay of the grant (ms), d lock-delay ends (ms),
--                       qs queue sequence, qd latest waiter deadline (ms),
--                       ft token of the writes in F, ob observers until (ms),
--                       g:<gw> gateway alive-until (ms)
--   H  fg:{N}:h  hash   lease -> "<holds>:<ttl_ms>"
--   E  fg:{N}:e  zset   lease -> expiry (ms, Redis clock)
--   Q  fg:{N}:q  zset   waiter id -> arrival sequence (FIFO)
--   W  fg:{N}:w  hash   waiter id -> json {g,m,t,ld,l,dl,v,o}
--   F  fg:{N}:f  zset   admitted write id -> its deadline (ms)
-- ARGV[1] idle-forget ms, ARGV[2] lock name; the rest is per script.
--
-- Invariants: a lease is in H iff it is in E; E scores are Redis TIME;
-- numbers above 2^31 cross into redis.call only through fmt() (tostring
-- and cjson round them); S is read once (HMGET) and written through sset,
-- so `st` is always what S holds; every script ends with keep(), which
-- moves the keys' expiry whenever what they hold moved, so they outlive it
-- by exactly the idle-forget time.
local S, H, E, Q, W, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local IDLE = tonumber(ARGV[1])
local NAME = ARGV[2]
local tm = redis.call('TIME')
local NOW = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local NOW_US = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local HANDOFF_MAX = 1000

local function fmt(n) return string.format('%.0f', n) end
local function num(v) return tonumber(v or 0) or 0 end

local FIELDS = {'c', 'm', 't', 'v', 'ld', 'd', 'qd', 'ft', 'ob'}
local st = {}
do
  local got = redis.call('HMGET', S, unpack(FIELDS))
  for i, f in ipairs(FIELDS) do st[f] = got[i] end
end
local dirty = false   -- the keys' horizon moved, or keys were created

local function sset(f, v)
  redis.call('HSET', S, f, v)
  st[f] = v
end
local function sdel(...)
  local fs = {...}
  local gone = {}
  for _, f in ipairs(fs) do
    if st[f] then gone[#gone + 1] = f; st[f] = false end
  end
  if #gone > 0 then redis.call('HDEL', S, unpack(gone)) end
end

-- Change events go out only while some gateway observes the lock.
local function publish(tok)
  if num(st.ob) > NOW then
    redis.call('PUBLISH', 'fg:ev:' .. NAME, tok and fmt(tok) or '')
  end
end

-- The guard against reissue: a token is the counter's next value, but never
-- less than Redis' clock in microseconds. A counter lost with Redis' data
-- (restart, failover to a stale replica, idle forgetting) restarts above
-- every token issued before, since no lock is granted a million times a
-- second. See docs/safety.md.
local function next_token()
  local t = redis.call('HINCRBY', S, 'c', 1)
  if t < NOW_US then
    t = NOW_US
    redis.call('HSET', S, 'c', fmt(t))
  end
  st.c = fmt(t)
  return t
end

local function grant_expiry()
  local top = redis.call('ZRANGE', E, -1, -1, 'WITHSCORES')
  if top[2] then return tonumber(top[2]) end
  return 0
end

local function holds_of(hv)
  local n, ttl = string.match(hv, '^(%d+):(%d+)$')
  return tonumber(n), tonumber(ttl)
end

local function set_meta(v, o)
  if v then sset('v', v) end
  if o then sset('o', o) end
end

-- The last holder left. An end by expiry starts lock-delay; a release
-- ends the grant at once.
local function end_grant(ended_at, by_expiry)
  local ld = num(st.ld)
  sdel('m', 'v', 'o', 'ld', 'd')
  if by_expiry and ld > 0 and ended_at + ld > NOW then
    sset('d', fmt(ended_at + ld))
  end
  dirty = true
  publish(nil)
end

local function purge()
  local gone = redis.call('ZRANGEBYSCORE', E, '-inf', NOW, 'WITHSCORES')
  if #gone == 0 then return end
  local last = 0
  local leases = {}
  for i = 1, #gone, 2 do
    leases[#leases + 1] = gone[i]
    local x = tonumber(gone[i + 1])
    if x > last then last = x end
  end
  redis.call('HDEL', H, unpack(leases))
  redis.call('ZREMRANGEBYSCORE', E, '-inf', NOW)
  if redis.call('HLEN', H) == 0 then end_grant(last, true) end
end

local function grant_new(lease, mode, ttl, ld)
  local t = next_token()
  if st.d then sdel('d') end
  redis.call('HSET', S, 'm', mode, 't', fmt(t), 'ld', ld)
  st.m, st.t, st.ld = mode, fmt(t), tostring(ld)
  redis.call('HSET', H, lease, '1:' .. ttl)
  redis.call('ZADD', E, fmt(NOW + ttl), lease)
  dirty = true
  publish(t)
  return t
end

-- A shared grant is joined under its current token.
local function join(lease, ttl)
  redis.call('HSET', H, lease, '1:' .. ttl)
  redis.call('ZADD', E, fmt(NOW + ttl), lease)
  dirty = true
  return tonumber(st.t)
end

-- Grants the lock to the head of the queue (an exclusive waiter, or a run
-- of shared ones) while it can. Only the granted waiters' gateways hear of
-- it: no herd. Waiters whose gateway stopped ticking, or whose deadline
-- passed, are dropped on the way. Returns true when it stopped at
-- HANDOFF_MAX (the caller's gateway ticks again at once).
local function handoff()
  local n = 0
  while n < HANDOFF_MAX do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then return false end
    local raw = redis.call('HGET', W, head)
    local r = raw and cjson.decode(raw)
    local held = redis.call('HLEN', H) > 0
    if r and held and not (r.m == 's' and st.m == 's') then
      return false
    end
    redis.call('ZREM', Q, head)
    redis.call('HDEL', W, head)
    n = n + 1
    if r then
      local gk = 'g:' .. r.g
      if num(redis.call('HGET', S, gk)) < NOW then
        redis.call('HDEL', S, gk)
      elseif tonumber(r.dl) >= NOW then
        local t
        if held then t = join(r.l, r.t) else t = grant_new(r.l, r.m, r.t, r.ld) end
        set_meta(r.v, r.o)
        redis.call('PUBLISH', 'fg:gw:' .. r.g, head .. ' ' .. fmt(t) .. ' ' .. r.m)
        if r.m == 'x' then return false end
      end
    end
  end
  return true
end

local function advance()
  purge()
  if num(st.d) > NOW then return false end
  return handoff()
end

-- When can the lock change hands without anyone asking? -1: not by itself.
local function wake_in()
  if redis.call('HLEN', H) > 0 then return grant_expiry() - NOW + 1 end
  local d = num(st.d)
  if d > NOW then return d - NOW + 1 end
  if redis.call('ZCARD', Q) > 0 then return 0 end
  return -1
end

-- Moves every existing key's expiry to IDLE ms past the lock's horizon:
-- its grant's expiry, its lock-delay, its waiters' and writes' deadlines.
local function keep()
  if not dirty then return end
  local horizon = NOW
  local x = grant_expiry()
  if x > horizon then horizon = x end
  local d = num(st.d)
  if d > horizon then horizon = d end
  local queued = redis.call('ZCARD', Q) > 0
  if queued and num(st.qd) > horizon then horizon = num(st.qd) end
  if st.ft then
    local top = redis.call('ZRANGE', F, -1, -1, 'WITHSCORES')
    if top[2] and tonumber(top[2]) > horizon then horizon = tonumber(top[2]) end
  end
  if num(st.ob) > horizon then horizon = num(st.ob) end
  local ms = fmt(horizon - NOW + IDLE)
  redis.call('PEXPIRE', S, ms)
  if x > 0 then
    redis.call('PEXPIRE', H, ms)
    redis.call('PEXPIRE', E, ms)
  end
  if queued then
    redis.call('PEXPIRE', Q, ms)
    redis.call('PEXPIRE', W, ms)
  end
  if st.ft then redis.call('PEXPIRE', F, ms) end
end
