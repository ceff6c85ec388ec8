-- prelude.lua - shared by every lockcore script (prepended at build time).
--
-- Keys of lock N, all under hash tag {N}:
--   S  fg:{N}:s  hash   c token counter (HINCRBY), m mode (x|s), t token of
--                       the current/last grant, v value, o owner, ld
--                       lock-delay of the grant (ms), d lock-delay ends (ms),
--                       n holders, x latest and nx earliest holder expiry
--                       (ms), qn waiters, qs queue sequence, qd latest waiter
--                       deadline (ms), ft token of the writes in F, ob
--                       observers until (ms), aw gateways with writes
--                       waiting on F (space-separated), g:<gw> gateway
--                       alive-until (ms),
--                       h:<lease> "<holds>:<ttl_ms>:<expiry ms>" per holder
--   Q  fg:{N}:q  zset   waiter id -> arrival sequence (FIFO)
--   W  fg:{N}:w  hash   waiter id -> json {g,m,t,ld,l,dl,v,o}
--   F  fg:{N}:f  zset   admitted write id -> recorded until (ms)
-- ARGV[1] idle-forget ms, ARGV[2] lock name; the rest is per script.
--
-- Invariants: n, x and nx describe exactly the h: fields; qn is the size
-- of Q; expiries are Redis TIME; numbers above 2^31 cross into redis.call
-- only through fmt() (tostring and cjson round them); S is read once
-- (HMGET) and written through put/del, so `st` is always what S holds;
-- every script ends with keep(), which moves the keys' expiry whenever what
-- they hold moved, so they outlive it by exactly the idle-forget time. A
-- free lock with no waiters is one key; an unused one is none.
local S, Q, W, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local IDLE = tonumber(ARGV[1])
local NAME = ARGV[2]
local tm = redis.call('TIME')
local NOW = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local NOW_US = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local HANDOFF_MAX = 1000

local function fmt(n) return string.format('%.0f', n) end
local function num(v) return tonumber(v or 0) or 0 end

local FIELDS = {'c', 'm', 't', 'v', 'o', 'ld', 'd', 'n', 'x', 'nx', 'qn', 'qd', 'ft', 'ob', 'aw'}
local st = {}
do
  local got = redis.call('HMGET', S, unpack(FIELDS))
  for i, f in ipairs(FIELDS) do st[f] = got[i] end
end
local dirty = false   -- the keys' horizon moved, or keys were created

-- put('f', v, 'g', w, ...): one HSET for all, and the cache.
local function put(...)
  local a = {...}
  for i = 1, #a, 2 do
    if string.sub(a[i], 1, 2) ~= 'h:' and string.sub(a[i], 1, 2) ~= 'g:' then
      st[a[i]] = a[i + 1]
    end
  end
  redis.call('HSET', S, unpack(a))
end
local function del(...)
  local gone = {}
  for _, f in ipairs({...}) do
    if string.sub(f, 1, 2) == 'h:' or st[f] then gone[#gone + 1] = f end
    st[f] = false
  end
  if #gone > 0 then redis.call('HDEL', S, unpack(gone)) end
end

local function held() return num(st.n) > 0 end

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
-- second. See docs/safety.md section 1.
local function next_token()
  local t = redis.call('HINCRBY', S, 'c', 1)
  if t < NOW_US then
    t = NOW_US
    redis.call('HSET', S, 'c', fmt(t))
  end
  st.c = fmt(t)
  return t
end

-- The newest token the lock knows of (0 once forgotten).
local function current() return math.max(num(st.c), num(st.t)) end

-- Is TOK live (the token of the grant holding the lock now)? Is it forged
-- (beyond any token ever issued: every token is at most the Redis time of
-- its grant, docs/safety.md section 1)?
local function live(tok) return tok == num(st.t) and held() end
local function forged(tok) return tok > math.max(current(), NOW_US) end

-- A holder: {n = holds, ttl = ms, exp = ms} or nil.
local function holder(lease)
  local v = redis.call('HGET', S, 'h:' .. lease)
  if not v then return nil end
  local n, ttl, exp = string.match(v, '^(%d+):(%d+):(%d+)$')
  return {n = tonumber(n), ttl = tonumber(ttl), exp = tonumber(exp)}
end
local function hval(n, ttl, exp) return n .. ':' .. ttl .. ':' .. fmt(exp) end

-- Recounts n, x and nx from the h: fields (only with several holders, or
-- when some expired). Returns the leases whose expiry passed, and the
-- latest such expiry.
local function recount()
  local all = redis.call('HGETALL', S)
  local n, x, nx, gone, last = 0, 0, 0, {}, 0
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'h:' then
      local e = tonumber(string.match(all[i + 1], ':(%d+)$'))
      if e <= NOW then
        gone[#gone + 1] = f
        if e > last then last = e end
      else
        n = n + 1
        if e > x then x = e end
        if nx == 0 or e < nx then nx = e end
      end
    end
  end
  if #gone > 0 then redis.call('HDEL', S, unpack(gone)) end
  if n > 0 then
    put('n', n, 'x', fmt(x), 'nx', fmt(nx))
  else
    del('n', 'x', 'nx')
  end
  return #gone, last
end

local function set_meta(v, o)
  if v and o then put('v', v, 'o', o)
  elseif v then put('v', v)
  elseif o then put('o', o) end
end

-- The last holder left. An end by expiry starts lock-delay; a release
-- ends the grant at once.
local function end_grant(ended_at, by_expiry)
  local ld = num(st.ld)
  del('m', 'v', 'o', 'ld', 'd', 'n', 'x', 'nx')
  if by_expiry and ld > 0 and ended_at + ld > NOW then
    put('d', fmt(ended_at + ld))
  end
  dirty = true
  publish(nil)
end

local function purge()
  if not held() or num(st.nx) > NOW then return end
  local gone, last = recount()
  if gone > 0 and not held() then end_grant(last, true) end
end

local function grant_new(lease, mode, ttl, ld)
  local t = next_token()
  if st.d then del('d') end
  local exp = fmt(NOW + ttl)
  put('m', mode, 't', fmt(t), 'ld', tostring(ld), 'n', 1, 'x', exp, 'nx', exp,
      'h:' .. lease, hval(1, ttl, NOW + ttl))
  dirty = true
  publish(t)
  return t
end

-- A shared grant is joined under its current token.
local function join(lease, ttl)
  local exp = NOW + ttl
  local x, nx = num(st.x), num(st.nx)
  if exp > x then x = exp end
  if nx == 0 or exp < nx then nx = exp end
  put('n', num(st.n) + 1, 'x', fmt(x), 'nx', fmt(nx), 'h:' .. lease, hval(1, ttl, exp))
  dirty = true
  return tonumber(st.t)
end

-- Sets a holder's expiry (renew, re-entry) and keeps x/nx exact.
local function rehold(lease, holds, ttl)
  local exp = NOW + ttl
  if num(st.n) == 1 then
    put('h:' .. lease, hval(holds, ttl, exp), 'x', fmt(exp), 'nx', fmt(exp))
  else
    put('h:' .. lease, hval(holds, ttl, exp))
    recount()
  end
  dirty = true
end

-- Grants the lock to the head of the queue (an exclusive waiter, or a run
-- of shared ones) while it can. Only the granted waiters' gateways hear of
-- it: no herd. Waiters whose gateway stopped ticking, or whose deadline
-- passed, are dropped on the way. Returns true when it stopped at
-- HANDOFF_MAX (the caller's gateway ticks again at once).
local function handoff()
  local popped, more = 0, true
  while popped < HANDOFF_MAX do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then more = false; break end
    local raw = redis.call('HGET', W, head)
    local r = raw and cjson.decode(raw)
    if r and held() and not (r.m == 's' and st.m == 's') then more = false; break end
    redis.call('ZREM', Q, head)
    redis.call('HDEL', W, head)
    popped = popped + 1
    if r then
      local gk = 'g:' .. r.g
      if num(redis.call('HGET', S, gk)) < NOW then
        redis.call('HDEL', S, gk)
      elseif tonumber(r.dl) >= NOW then
        local t
        if held() then t = join(r.l, r.t) else t = grant_new(r.l, r.m, r.t, r.ld) end
        set_meta(r.v, r.o)
        redis.call('PUBLISH', 'fg:gw:' .. r.g, head .. ' ' .. fmt(t) .. ' ' .. r.m)
        if r.m == 'x' then more = false; break end
      end
    end
  end
  if popped > 0 then
    local left = num(st.qn) - popped
    if left > 0 then put('qn', left) else del('qn') end
    dirty = true
  end
  return more and num(st.qn) > 0
end

local function advance()
  purge()
  if num(st.d) > NOW or num(st.qn) == 0 then return false end
  return handoff()
end

-- When can the lock change hands without anyone asking? -1: not by itself.
local function wake_in()
  if held() then return num(st.x) - NOW + 1 end
  local d = num(st.d)
  if d > NOW then return d - NOW + 1 end
  if num(st.qn) > 0 then return 0 end
  return -1
end

-- A write id is "<gateway id>-w<n>"; its gateway listens on fg:gw:<id>.
local function gateway_of(wid) return string.match(wid, '^(.*)%-w%d+$') end

-- A write waits on F: its gateway hears when a write of F ends.
local function wait_for_writes(wid)
  local gw = gateway_of(wid)
  if not gw then return end
  local aw = st.aw or ''
  if string.find(' ' .. aw .. ' ', ' ' .. gw .. ' ', 1, true) then return end
  put('aw', aw == '' and gw or (aw .. ' ' .. gw))
end

-- A write of F ended: every gateway with writes waiting asks again (once).
local function wake_writers()
  if not st.aw then return end
  for gw in string.gmatch(st.aw, '%S+') do
    redis.call('PUBLISH', 'fg:gw:' .. gw, 'w ' .. NAME)
  end
  del('aw')
end

-- The grant of F's writes ended by release: each write is recorded until
-- `untl` at the most, and its gateway aborts it upstream.
local function end_writes(untl)
  local all = redis.call('ZRANGE', F, 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local wid, score = all[i], tonumber(all[i + 1])
    if score > NOW then
      if score > untl then redis.call('ZADD', F, fmt(untl), wid) end
      local gw = gateway_of(wid)
      if gw then redis.call('PUBLISH', 'fg:gw:' .. gw, 'x ' .. wid) end
    end
  end
  wake_writers()
  dirty = true
end

-- Moves every existing key's expiry to IDLE ms past the lock's horizon:
-- its grant's expiry, its lock-delay, its waiters' and writes' deadlines.
local function keep()
  if not dirty then return end
  local horizon = NOW
  if held() and num(st.x) > horizon then horizon = num(st.x) end
  if num(st.d) > horizon then horizon = num(st.d) end
  local queued = num(st.qn) > 0
  if queued and num(st.qd) > horizon then horizon = num(st.qd) end
  if st.ft then
    local top = redis.call('ZRANGE', F, -1, -1, 'WITHSCORES')
    if top[2] and tonumber(top[2]) > horizon then horizon = tonumber(top[2]) end
  end
  if num(st.ob) > horizon then horizon = num(st.ob) end
  local ms = fmt(horizon - NOW + IDLE)
  redis.call('PEXPIRE', S, ms)
  if queued then
    redis.call('PEXPIRE', Q, ms)
    redis.call('PEXPIRE', W, ms)
  end
  if st.ft then redis.call('PEXPIRE', F, ms) end
end
