-- prelude/grants.lua - grants and their holders: tokens, the h: fields
-- and their counts, the end of a grant, the queue's handoff to waiters,
-- and the listing's index where a lock's own call keeps it.
--
-- Invariants: n, x and nx describe exactly the h: fields (recount() makes
-- them so after any change it cannot follow by itself); qn is the size of
-- Q; a token is the counter's next value but never less than Redis' clock
-- in microseconds (token_after()), so a lock's tokens only grow.

local function held() return num(st.n) > 0 end

-- Change events go out only while some gateway observes the lock (OB:
-- the ob field; a short path passes what it read).
local function announce(ob, tok)
  if num(ob) > NOW then
    rcall('PUBLISH', 'fg:ev:' .. NAME, tok and fmt(tok) or '')
  end
end
local function publish(tok) announce(st.ob, tok) end

-- The guard against reissue: a token is the counter's next value, but never
-- less than Redis' clock in microseconds. A counter lost with Redis' data
-- (restart, failover to a stale replica, idle forgetting) restarts above
-- every token issued before, since no lock is granted a million times a
-- second. See docs/safety.md section 1.
-- C: the counter as S holds it. Returns the token, and its digits (the
-- clock's, TIME's own, when the token is the clock).
local function token_after(c)
  local t = (c and tonum(c) or 0) + 1
  if t <= NOW_US then
    local _, us = clock_s()
    return NOW_US, us
  end
  return t, fmt(t)
end
local function next_token()
  local t, ts = token_after(st.c)
  put1('c', ts)
  return t, ts
end

-- The newest token the lock knows of (0 once forgotten).
local function current() return math.max(num(st.c), num(st.t)) end

-- A bound for the listing's index (index_drop.lua): at least every token
-- the lock issued so far, below every one it will issue. Exact while the
-- lock remembers its counter (the next token is above it whatever the
-- clock does); Redis' clock only for a lock forgotten, as next_token()
-- itself relies on.
local function seen()
  local c = current()
  return c > 0 and c or NOW_US
end

-- Is TOK live (the token of the grant holding the lock now)? Is it forged
-- (beyond any token ever issued: every token is at most the Redis time of
-- its grant, docs/safety.md section 1)?
local function live(tok) return tok == num(st.t) and held() end
local function forged(tok) return tok > math.max(current(), NOW_US) end

-- A holder: {n = holds, ttl = ms, exp = ms, p = principal ('' for none)}
-- or nil.
local function holder(lease)
  local v = hget('h:' .. lease)
  if not v then return nil end
  local n, ttl, exp, p = smatch(v, '^(%d+):(%d+):(%d+):?(.*)')
  return {n = tonum(n), ttl = tonum(ttl), exp = tonum(exp), p = p}
end
local function hval(n, ttl, exp, p)
  -- one format for the three numbers ('..' would format each as a float)
  local v = sformat('%d:%d:%d', n, ttl, exp)
  if p and p ~= '' then v = v .. ':' .. p end
  return v
end

-- A grant belongs to its principal: may a call by P (nil: open mode, not
-- asked) act on holder h? The caller checked that h holds first, so a
-- lease that no longer holds is 'expired' whoever asks.
local function owns(h, p) return p == nil or h.p == p end

-- Recounts n, x and nx from the h: fields (only with several holders, or
-- when some expired). Returns the leases whose expiry passed, and the
-- latest such expiry.
local function recount()
  local all = rcall('HGETALL', S)
  local hs = {}
  for i = 1, #all, 2 do
    if ssub(all[i], 1, 2) == 'h:' then hs[all[i]] = all[i + 1] end
  end
  for f, v in pairs(pend) do
    if ssub(f, 1, 2) == 'h:' then hs[f] = v or nil end
  end
  local n, x, nx, gone, last = 0, 0, 0, {}, 0
  for f, v in pairs(hs) do
    local e = tonum(smatch(v, '^%d+:%d+:(%d+)'))
    if e <= NOW then
      gone[#gone + 1] = f
      if e > last then last = e end
    else
      n = n + 1
      if e > x then x = e end
      if nx == 0 or e < nx then nx = e end
    end
  end
  del_list(gone)
  if n > 0 then
    put('n', n, 'x', fmt(x), 'nx', fmt(nx))
  else
    del('n', 'x', 'nx')
  end
  return #gone, last
end

-- The index learns of this lock (granted, or a waiter queued), or
-- forgets it (gone): kept in the call itself where the call has its keys
-- (one Redis). Only the name set is written: the token that index_add.lua
-- keeps in :v is what lets index_drop.lua tell a grant made after its
-- look where the index is kept apart from the lock (a Cluster); here
-- index_drop.lua is given the lock's keys and sees such a grant in S.
-- (A token an older version of the library left in :v for a name this
-- call unlists stays there, a few bytes, harmless: it only ever keeps a
-- name, and every later look's bound is above it.) Returns whether it
-- was kept here. (The score goes as the string '0': Redis turns a Lua
-- number argument into text with a '%.17g' format at every call.)
local function index(gone)
  if not IX_N then return false end
  if gone then
    rcall('ZREM', IX_N, NAME)
  else
    rcall('ZADD', IX_N, '0', NAME)
  end
  return true
end

local function set_meta(v, o)
  if v then put('v', v) end
  if o then put('o', o) end
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

-- What the listing shows of a new holder: since when it holds, the
-- client address its call came from, its owner; json {s, c, o}, as
-- describe.lua (of every library version) reads it. Written by hand: a
-- table and an encoder run cost a grant more than the rest of its Lua.
-- Only the owner may need escaping; an address that needs it (never one
-- the gateway sends) is encoded too.
-- (A gateway's calls come from a few addresses: the last one's json is
-- kept from call to call.)
local QC_IN, QC_OUT = '', '""'
local function about_of(client, owner)
  client = client or ''
  if client ~= QC_IN then
    QC_OUT = string.find(client, '^[%w%.:%%]*$') and ('"' .. client .. '"')
      or cjson.encode(client)
    QC_IN = client
  end
  return '{"s":"' .. clock_s() .. '","c":' .. QC_OUT ..
    (owner and (',"o":' .. cjson.encode(owner)) or '') .. '}'
end
local function about(lease, client, owner)
  put1('a:' .. lease, about_of(client, owner))
end

-- (acquire.lua's short path writes the same fields for a lock it finds
-- free and clean: keep the two alike.)
-- (UNTL: the holder's expiry when not NOW + ttl: a waiter's grant,
-- handoff())
local function grant_new(lease, mode, ttl, ld, p, client, owner, untl)
  local t, ts = next_token()
  if st.d then del('d') end
  local ends = untl or NOW + ttl
  local exp = fmt(ends)
  -- no lock-delay is no field (num() reads it as 0): one field less to
  -- write, and to delete at the end
  if ld ~= 0 and ld ~= '0' then put1('ld', tostring(ld))
  elseif st.ld then del1('ld') end
  put('m', mode, 't', ts, 'n', '1', 'x', exp, 'nx', exp,
      'h:' .. lease, hval(1, ttl, ends, p))
  about(lease, client, owner)
  dirty = true
  publish(t)
  return t, ts
end

-- A shared grant is joined under its current token.
local function join(lease, ttl, p, client, owner, untl)
  local exp = untl or NOW + ttl
  local x, nx = num(st.x), num(st.nx)
  if exp > x then x = exp end
  if nx == 0 or exp < nx then nx = exp end
  put('n', num(st.n) + 1, 'x', fmt(x), 'nx', fmt(nx), 'h:' .. lease,
      hval(1, ttl, exp, p))
  about(lease, client, owner)
  dirty = true
  return tonum(st.t)
end

-- Sets a holder's expiry (renew, re-entry) and keeps x/nx exact; its
-- principal stays.
local function rehold(lease, h, holds, ttl)
  local exp = NOW + ttl
  if num(st.n) == 1 then
    put('h:' .. lease, hval(holds, ttl, exp, h.p), 'x', fmt(exp), 'nx', fmt(exp))
  else
    put('h:' .. lease, hval(holds, ttl, exp, h.p))
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
    local head = rcall('ZRANGE', Q, 0, 0)[1]
    if not head then more = false; break end
    local raw = rcall('HGET', W, head)
    local r = raw and cjson.decode(raw)
    if r and held() and not (r.m == 's' and st.m == 's') then more = false; break end
    rcall('ZREM', Q, head)
    rcall('HDEL', W, head)
    popped = popped + 1
    if r then
      local gk = 'g:' .. r.g
      local alive = num(hget(gk))
      if alive < NOW then
        del(gk)
      elseif tonum(r.dl) >= NOW then
        local t
        -- Held only as long as its gateway is known to be alive (a
        -- second at least) until that gateway confirms it (a renewal,
        -- before it answers its client): a grant to a waiter whose
        -- gateway died is not held by nobody for its whole ttl.
        local untl = math.min(NOW + tonum(r.t), math.max(alive, NOW + 1000))
        -- the grant carries the principal the waiter queued with
        if held() then t = join(r.l, r.t, r.p, r.c, r.o, untl)
        else t = grant_new(r.l, r.m, r.t, r.ld, r.p, r.c, r.o, untl) end
        set_meta(r.v, r.o)
        -- its event names the waiter's gateway, not the caller's (none
        -- when it was queued by a gateway that recorded no events)
        if EV then
          ev_granted(st.t, r.m, r.t, r.p, r.o, r.c, r.e or '', true)
        end
        -- lease and name ride along: a gateway that no longer knows
        -- the waiter gives the grant back at once
        rcall('PUBLISH', 'fg:gw:' .. r.g, head .. ' ' .. fmt(t) .. ' ' ..
          r.m .. ' ' .. r.l .. ' ' .. NAME)
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
  if num(st.qn) == 0 or num(st.d) > NOW then return false end
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
