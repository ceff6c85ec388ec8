-- prelude.lua - the head of the fencegate function library: what every
-- lockcore script shares. embed.py puts the `#!lua name=` line before it
-- and registers each script after it as a function fg_<script>_<version>.
--
-- Keys of lock N, all under hash tag {N}:
--   S  fg:{N}:s  hash   c token counter, m mode (x|s), t token of
--                       the current/last grant, v value, o owner, ld
--                       lock-delay of the grant (ms; absent: none), d
--                       lock-delay ends (ms),
--                       n holders, x latest and nx earliest holder expiry
--                       (ms), qn waiters, qs queue sequence, qd latest waiter
--                       deadline (ms), ft token of the writes in F, fm
--                       the largest margin they were admitted with (ms),
--                       ob observers until (ms), aw gateways with writes
--                       waiting on F (space-separated), kx latest end of
--                       a k: field (ms), g:<gw> gateway alive-until (ms),
--                       h:<lease> "<holds>:<ttl_ms>:<expiry ms>[:<principal>]"
--                       per holder (no principal: granted in open mode),
--                       a:<lease> json {s = granted at (ms), c = client
--                       address, o = owner} per holder, for the listing:
--                       there exactly while h:<lease> is (del_list()),
--                       k:<lease> given back until (ms): a call with that
--                       lease that reaches Redis late does nothing
--   Q  fg:{N}:q  zset   waiter id -> arrival sequence (FIFO)
--   W  fg:{N}:w  hash   waiter id -> json {g,m,t,ld,l,dl,v,o,p,c,s}
--                       (c client address, s queued at, ms)
--   F  fg:{N}:f  zset   admitted write id -> recorded until (ms)
-- Every function takes the keys S, Q, W, F and the arguments idle-forget
-- ms, lock name; the rest is per script. acquire, renew and release may
-- take one more key, the listing's index of names (fg:{!index}:n,
-- index_add.lua), where every key is on one Redis: they keep it
-- themselves (index(), the name set only), so
-- that a lock cycle costs one small call on it per change between idle
-- and active (renew too: it makes good a lost update); on a Cluster the
-- gateway keeps it.
--
-- Per call: the helpers below work on library-level variables that start()
-- and fetch() (begin() is both) set afresh in every call (Redis runs one
-- function at a time, so nothing of one call is seen by the next, but for
-- what is the same in every call: nums' parsed numbers, dur()'s formatted
-- ones, about_of()'s last client address).
--
-- Cost: a call's Redis CPU is mostly Lua work, not data work: every table
-- made (and grown), every number formatted or parsed, every redis.call
-- counts, and so does the garbage they leave. Hence tables made at their
-- size, put() and del() without varargs, numbers formatted once with
-- '%d' (never by '..', which formats a float), and strings compared
-- rather than parsed where a number is only tested; numbers that come
-- back call after call (the idle time, a ttl, the second of the clock)
-- parsed and formatted once (num(), number(), dur()), and the clock's
-- digits taken from TIME's reply rather than formatted (clock_s()).
--
-- Invariants: n, x and nx describe exactly the h: fields; the writes of F
-- are recorded no later than their grant's end (or the margin from the
-- moment it moved earlier), and their gateways hear of every move earlier
-- (follow_end(), from done()); qn is the size
-- of Q; F holds writes only while ft is set; expiries are Redis TIME;
-- numbers above 2^31 cross into redis.call only through fmt() (tostring
-- and cjson round them); each field of S is read once (begin()'s HMGET or
-- a short path's peek(), and LAZY's for the fields a call needs seldom) and every change of S goes
-- through put/del into one HSET and one HDEL at the end of the call
-- (done()), so `st` is always what S will hold; every script ends with
-- done(), whose keep() moves the keys' expiry whenever what they hold
-- moved, so they outlive it by exactly the idle-forget time (but for
-- release's short path, which may leave a grant's expiry in place: at
-- most an eighth of that time later). The one
-- exception: the short paths of acquire (a grant on a free lock), release
-- (of the only holder) and admit (a write under the live token, nothing
-- older in F) write S themselves, one HSET or HDEL, and end with keep_to()
-- (or keep_new_f()) instead of done(); each is taken only where done()
-- would have had nothing else to do (follow_end() no end to follow, no
-- other field to write). A free lock with no waiters is one key; an
-- unused one is none.
local S, Q, W, F, IDLE, NAME, NOW, NOW_US
local SEC_S, US_S, NOW_S, NOW_US_S -- TIME's reply; clock_s()
-- Redis' and Lua's functions the helpers call, as upvalues: a global is
-- two table lookups a use. The library's own code cannot reach them when
-- it is loaded, so start() binds them at a call's start (the same
-- functions every call); a helper that runs without begin()
-- (wake_writers(), for finish.lua) uses the globals.
local rcall, sformat, tonum, smatch, sbyte, ssub
local IX_N -- the listing's index of names when the call was given it
local st       -- the fields of FIELDS as S holds them (false: absent)
local pend     -- field -> value, or false to delete: written by done()
local pre      -- h:/g: fields read so far (false: absent)
local dirty    -- the keys' horizon moved, or keys were created
local ftop     -- latest record of F when known (false: F is empty)
local T0, X0, HELD0 -- the grant as the call found it: token, end, held
local MARGIN_FLOOR  -- a caller's own write margin, when it passes one
local HANDOFF_MAX = 1000
-- What acquire, release, renew, admit and check read at begin(): all that
-- a grant, a release and a write ask for. The others (LATER) are read
-- with one more HMGET the first time the call asks for one of them
-- (queueing, a handoff, follow_end() waking writers); a call that never
-- asks does not pay for them.
local CORE = {'c', 'm', 't', 'ld', 'd', 'n', 'x', 'nx', 'qn', 'ft', 'fm', 'ob',
  'kx'}
local LATER = {'v', 'o', 'qs', 'qd', 'aw'}
local FIELDS = {'c', 'm', 't', 'ld', 'd', 'n', 'x', 'nx', 'qn', 'ft', 'fm', 'ob',
  'kx', 'v', 'o', 'qs', 'qd', 'aw'} -- CORE, then LATER (begin())
local IS_LATER = {v = true, o = true, qs = true, qd = true, aw = true}
local peeked   -- this call's peek(): HMGET's reply

local nums     -- string -> its number, false if none (num(), number())
-- The tables behind pend, pre and nums live as long as the library:
-- fetch() empties the first two rather than making them anew (tables made
-- per call, and the collector's work on them, were 6 % of an acquire's
-- Redis instructions). nums keeps its entries from call to call, a
-- string's number being the same in every call; NNUM counts them, so that
-- it stays small.
local PEND, PRE, NUMS, NNUM = {}, {}, {}, 0
local snext    -- next(), bound by start() as the other upvalues are

-- Empties T; returns how many entries it had.
local function clear(t)
  local n = 0
  for k in snext, t do
    t[k] = nil
    n = n + 1
  end
  return n
end

-- An integer as digits. Every number fmt() is given is an integer below
-- 2^53 (times in ms, tokens in us, counts); Lua 5.1's '%d' formats it as
-- a C long, exactly, and costs less than '%.0f'.
local function fmt(n) return sformat('%d', n) end
-- An argument's number (nil: not a number), parsed once: a call's
-- durations are the same from call to call, and nums keeps them (false:
-- not a number). (A string met once, a token or a time, is better parsed
-- where it is used: tonumber() parses it twice, and arithmetic on the
-- string, once.)
local function number(v)
  local n = nums[v]
  if n == nil then
    n = tonum(v) or false
    nums[v] = n
    NNUM = NNUM + 1
  end
  return n or nil
end
-- A field's number (0: absent or not a number). The helpers ask for the
-- same few fields many times a call; each string is parsed once (a
-- string seen before is answered here, without a call).
local function num(v)
  if not v then return 0 end
  local n = nums[v]
  if n ~= nil then return n or 0 end
  return number(v) or 0
end

-- A duration (ms) as digits, for PEXPIRE: the same few come back from
-- call to call (a ttl, plus the idle time), so each is formatted once.
local DURS, NDUR = {}, 0
local function dur(ms)
  local v = DURS[ms]
  if not v then
    if NDUR > 64 then DURS, NDUR = {}, 0 end
    v = fmt(ms)
    DURS[ms], NDUR = v, NDUR + 1
  end
  return v
end

-- st's LATER fields, read on first ask: those put() or del() set since
-- begin() keep what they were set to (they are what S will hold).
local LAZY = {__index = function(t, f)
  if not IS_LATER[f] then return nil end
  setmetatable(t, nil)
  local got = rcall('HMGET', S, unpack(LATER))
  for i, g in ipairs(LATER) do
    if rawget(t, g) == nil then t[g] = got[i] end
  end
  return t[f]
end}

-- Starts a call: its keys, arguments and Redis' clock, nothing of S read
-- yet. The short paths of acquire and release then peek(), and go on
-- with fetch() only when they do not apply; every other call begins with
-- begin(), both at once.
local function start(keys, args)
  if not rcall then
    rcall, sformat, tonum = redis.call, string.format, tonumber
    smatch, sbyte, ssub = string.match, string.byte, string.sub
    snext = next
  end
  S, Q, W, F = keys[1], keys[2], keys[3], keys[4]
  IX_N = keys[5]
  if NNUM > 64 then NUMS, NNUM = {}, 0 end
  nums = NUMS
  IDLE, NAME = number(args[1]), args[2]
  -- (the second is the same for many calls; the microseconds are new)
  local tm = rcall('TIME')
  SEC_S, US_S, NOW_S, NOW_US_S = tm[1], tm[2], nil, nil
  local sec, us = number(SEC_S), US_S + 0
  NOW = sec * 1000 + (us - us % 1000) / 1000
  NOW_US = sec * 1000000 + us
  dirty, ftop, peeked = false, nil, nil
end

-- The value, owner and principal of acquire and renew, each given or not:
-- LETTERS names those given ('v', 'o', 'p', among the call's other
-- letters), and they follow in that order from ARGS[AT] on. Returns the
-- three, nil for each not given.
local function optional(args, letters, at)
  if letters == '' then return nil, nil, nil end
  local v, o, p
  if string.find(letters, 'v', 1, true) then v, at = args[at], at + 1 end
  if string.find(letters, 'o', 1, true) then o, at = args[at], at + 1 end
  if string.find(letters, 'p', 1, true) then p = args[at] end
  return v, o, p
end

-- A short path's read: FIELD and CORE, the HMGET that fetch() would
-- make. Returns its reply, which the path reads by position (FIELD, then
-- CORE's order); if the path does not apply, fetch() makes `st` of it.
-- (Every field an HMGET asks for costs, found or not: Redis looks it up in
-- the hash, and its reply becomes a Lua table grown one field at a time.
-- Reading only what the short path tests would save some of that, but
-- cost every other path of the call a second HMGET, more than it saves.)
local function peek(field)
  peeked = rcall('HMGET', S, field, unpack(CORE))
  return peeked
end

-- NOW and NOW_US as digits: TIME's own, put together (the microseconds
-- padded to six), which costs less than formatting the numbers.
local function clock_s()
  if not NOW_S then
    local u = US_S
    if #u < 6 then u = ssub('00000', #u) .. u end
    NOW_S, NOW_US_S = SEC_S .. ssub(u, 1, 3), SEC_S .. u
  end
  return NOW_S, NOW_US_S
end

-- Reads the state hash, for a call that start() began. FIELD, when given
-- (h:<lease>, the holder the call is about; k:<lease>), is read with it.
-- SOME: only CORE now, LATER when first asked for. After peek() (of the
-- same FIELD, with SOME), what it read.
local function fetch(field, some)
  -- A table that a large call filled is dropped for a new one, so that
  -- emptying stays cheap for the calls after it.
  if clear(PEND) > 32 then PEND = {} end
  if clear(PRE) > 32 then PRE = {} end
  pend, pre = PEND, PRE
  MARGIN_FLOOR = 0
  local got, o
  -- (st is made at its size, a constructor with every field: a table
  -- that grows is copied at every power of two)
  if peeked and some then
    got, o = peeked, 1
    pre[field] = got[1]
  elseif field then
    got, o = rcall('HMGET', S, field, unpack(some and CORE or FIELDS)), 1
    pre[field] = got[1]
  else
    got, o = rcall('HMGET', S, unpack(some and CORE or FIELDS)), 0
  end
  -- in the order of CORE, then (all of FIELDS) LATER's
  if some then
    st = setmetatable({c = got[o + 1], m = got[o + 2], t = got[o + 3],
      ld = got[o + 4], d = got[o + 5], n = got[o + 6], x = got[o + 7],
      nx = got[o + 8], qn = got[o + 9], ft = got[o + 10], fm = got[o + 11],
      ob = got[o + 12], kx = got[o + 13]}, LAZY)
  else
    st = {c = got[o + 1], m = got[o + 2], t = got[o + 3], ld = got[o + 4],
      d = got[o + 5], n = got[o + 6], x = got[o + 7], nx = got[o + 8],
      qn = got[o + 9], ft = got[o + 10], fm = got[o + 11], ob = got[o + 12],
      kx = got[o + 13], v = got[o + 14], o = got[o + 15], qs = got[o + 16],
      qd = got[o + 17], aw = got[o + 18]}
  end
  T0, X0, HELD0 = st.t, num(st.x), num(st.n) > 0
end

local function begin(keys, args, field, some)
  start(keys, args)
  fetch(field, some)
end

-- h:, a:, g: and k: fields are not in `st`: theirs is the only name
-- of S with ':' second (string.byte: no string is made to ask).
local COLON, HBYTE = 58, 104 -- string.byte(':'), ('h') (not callable at load)
local function perfield(f) return sbyte(f, 2) == COLON end

-- put('f', v, 'g', w, ...): into the cache and the pending write. Pairs
-- are named parameters, not varargs: a call makes no table.
local function put1(f, v)
  pend[f] = v
  if sbyte(f, 2) ~= COLON then st[f] = v end
end
local function put(f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, f6, v6, f7, v7)
  put1(f1, v1)
  if not f2 then return end
  put1(f2, v2)
  if not f3 then return end
  put1(f3, v3)
  if not f4 then return end
  put1(f4, v4)
  if not f5 then return end
  put1(f5, v5)
  if not f6 then return end
  put1(f6, v6)
  if f7 then put1(f7, v7) end
end
local function del1(f)
  if sbyte(f, 2) == COLON then
    pend[f] = false
    -- a holder's listing record leaves with it
    if sbyte(f, 1) == HBYTE then pend['a:' .. ssub(f, 3)] = false end
  else
    -- (a field not read yet is deleted without reading it)
    local v = rawget(st, f)
    if v == nil or v or pend[f] then pend[f] = false end
    st[f] = false
  end
end
local function del_list(fs)
  for i = 1, #fs do del1(fs[i]) end
end
-- del('f', 'g', ...): as put(), no table.
local function del(f1, f2, f3, f4, f5, f6, f7, f8)
  del1(f1)
  if not f2 then return end
  del1(f2)
  if not f3 then return end
  del1(f3)
  if f4 then del1(f4) end
  if f5 then del1(f5) end
  if f6 then del1(f6) end
  if f7 then del1(f7) end
  if f8 then del1(f8) end
end

-- An h: or g: field as S will hold it (nil: absent).
local function hget(f)
  local v = pend[f]
  if v == nil then v = pre[f] end
  if v == nil then
    v = rcall('HGET', S, f)
    pre[f] = v
  end
  return v or nil
end

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

-- A write id is "<gateway id>-w<n>"; its gateway listens on fg:gw:<id>.
local function gateway_of(wid) return smatch(wid, '^(.*)%-w%d+$') end

-- A write waits on F: its gateway hears when a write of F ends.
local function wait_for_writes(wid)
  local gw = gateway_of(wid)
  if not gw then return end
  local aw = st.aw or ''
  if string.find(' ' .. aw .. ' ', ' ' .. gw .. ' ', 1, true) then return end
  put('aw', aw == '' and gw or (aw .. ' ' .. gw))
end

-- A write of F ended: every gateway with writes waiting asks again (once).
local function wake_writers(aw)
  for gw in string.gmatch(aw, '%S+') do
    redis.call('PUBLISH', 'fg:gw:' .. gw, 'w ' .. NAME)
  end
end

-- Every end of a lease reaches its writes (docs/safety.md section 3). When
-- this call ended the grant that F's writes were admitted under (release,
-- give-back, break), or moved its end earlier (a renewal or re-entry with
-- a smaller ttl, a shared holder leaving), each of those writes is
-- recorded no later than the new end (a write admitted against the old
-- end may be running now: it gets the margin from now at the most), and
-- its gateway is told: "x <write id>" to abort it, "e <write id> <ms>"
-- that the grant now ends in ms (the gateway clamps the write's deadline
-- at once, then asks for it again). Writes waiting on F ask again too. An end by
-- expiry needs nothing: every record already ends by the grant's end.
-- One place for all of them: done() calls it before writing S.
local function follow_end()
  if not st.ft or st.ft ~= T0 or not HELD0 then return end
  local ended = not held() or st.t ~= T0
  local new_end = ended and NOW or num(st.x)
  if new_end >= X0 then return end
  local soon = NOW + math.max(num(st.fm), MARGIN_FLOOR)
  local untl = math.max(new_end, soon)
  local all = rcall('ZRANGE', F, 0, -1, 'WITHSCORES')
  local top = false
  for i = 1, #all, 2 do
    local wid, score = all[i], tonum(all[i + 1])
    if score > NOW then
      if score > untl then
        rcall('ZADD', F, fmt(untl), wid)
        score = untl
      end
      if not top or score > top then top = score end
      local gw = gateway_of(wid)
      if gw and ended then
        rcall('PUBLISH', 'fg:gw:' .. gw, 'x ' .. wid)
      elseif gw then
        rcall('PUBLISH', 'fg:gw:' .. gw, 'e ' .. wid .. ' ' ..
          fmt(new_end - NOW))
      end
    end
  end
  if not top and ended then
    if #all > 0 then rcall('DEL', F) end
    del('ft', 'fm')
  end
  ftop = top
  if st.aw then
    wake_writers(st.aw)
    del('aw')
  end
  dirty = true
end

-- The lock's horizon without F: its grant's expiry (X, 0 when free), its
-- lock-delay (D), its waiters' deadlines (QD, 0 when none), its observers
-- (OB), its given-back leases (KX). horizon() is it for S as `st` has it.
local function horizon_at(x, d, qd, ob, kx)
  local h = NOW
  if x > h then h = x end
  if d > h then h = d end
  if qd > h then h = qd end
  if ob > h then h = ob end
  if kx > h then h = kx end
  return h
end
local function horizon()
  return horizon_at(held() and num(st.x) or 0, num(st.d),
    num(st.qn) > 0 and num(st.qd) or 0, num(st.ob), num(st.kx))
end

-- Moves every existing key's expiry to IDLE ms past the lock's horizon H
-- (without F), its writes' records included: QUEUED, there are waiters
-- (Q and W exist); WRITES, ft is set (F may hold records). keep() is it
-- for S as `st` has it; a short path, which has no `st`, passes what it
-- knows.
local function keep_to(h, queued, writes)
  if writes and ftop == nil then
    local top = rcall('ZRANGE', F, -1, -1, 'WITHSCORES')
    ftop = top[2] and tonum(top[2]) or false
  end
  if writes and ftop and ftop > h then h = ftop end
  local ms = dur(h - NOW + IDLE)
  rcall('PEXPIRE', S, ms)
  if queued then
    rcall('PEXPIRE', Q, ms)
    rcall('PEXPIRE', W, ms)
  end
  if writes and ftop then rcall('PEXPIRE', F, ms) end
end
local function keep() keep_to(horizon(), num(st.qn) > 0, st.ft) end

-- CMD S with the list's items as arguments (in slices: unpack is bounded;
-- even-sized, so HSET's pairs stay whole).
local function hcall(cmd, list)
  for i = 1, #list, 1000 do
    rcall(cmd, S, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- Ends every call that began: writes S, then moves the keys' expiry if
-- their horizon moved. Returns the reply.
local function done(reply)
  follow_end()
  local hs, hd, nh, nd = {}, {}, 0, 0
  for f, v in pairs(pend) do
    if v then
      hs[nh + 1], hs[nh + 2] = f, v
      nh = nh + 2
    else
      nd = nd + 1
      hd[nd] = f
    end
  end
  if nh > 0 then hcall('HSET', hs) end
  if nd > 0 then hcall('HDEL', hd) end
  if dirty then keep() end
  return reply
end

-- A write was recorded in F under the live grant, no later than the
-- grant's expiry: the horizon did not move. F has an expiry unless this
-- call created it; then it gets the lock's.
local function keep_new_f()
  if dirty then return end
  rcall('PEXPIRE', F, fmt(horizon() - NOW + IDLE), 'NX')
end

-- ---- Undo records: a renewal or a re-entry whose answer was lost --------
-- The gateway sends each renewal and re-entry with an undo id (letter
-- 'u', the call's last argument). Such a call records in its holder's
-- a: json what it changed: in the list `u` (the last UNDO_KEEP calls
-- not undone, oldest first) {i = id, b = "<ttl>:<expiry>" before it, a =
-- the same after it, r = 1 for a re-entry (its hold)}. When the gateway
-- cannot learn what a call did and answers 503, it sends giveback.lua with
-- the id: the call's hold goes, and its expiry is taken out of the chain
-- (the last call's goes back to what it was before it, unless a call
-- without an id moved it since; an earlier call's "before" becomes the
-- next one's), so undoing several calls in any order leaves what none of
-- them did. An id undone, or undone before its call came, is kept in the
-- list `x` (the last UNDO_SPENT), so that the call does nothing if it
-- comes. The records live in a: so that they leave with their holder
-- (del1()). A value or owner a call set is not taken back. A grant whose
-- a: field an older library did not write gets no records.
local UNDO_KEEP, UNDO_SPENT = 4, 8

-- The holder's a: json as a table (nil: none).
local function about_get(lease)
  local raw = hget('a:' .. lease)
  if not raw then return nil end
  local ok, a = pcall(cjson.decode, raw)
  if ok and type(a) == 'table' then return a end
  return nil
end

-- A's list named F (nil when there is none, or not a list).
local function about_list(a, f)
  local l = a and a[f]
  if type(l) == 'table' and l[1] ~= nil then return l end
  return nil
end

-- Was the call with undo id ID undone before it came?
local function undo_cancelled(a, id)
  local x = id and about_list(a, 'x')
  if not x then return false end
  for _, v in ipairs(x) do if v == id then return true end end
  return false
end

-- Appends V to A's list F, the oldest going past MAX.
local function about_push(a, f, v, max)
  local l = about_list(a, f) or {}
  l[#l + 1] = v
  while #l > max do table.remove(l, 1) end
  a[f] = l
end

-- A holder value's "<ttl>:<expiry>" (nil: not one).
local function ttl_exp(hv)
  return hv and smatch(hv, '^%d+:(%d+:%d+)')
end

-- Records call ID, which changed LEASE's holder from value BEFORE, in A
-- (about_get()'s, read before the call changed anything).
local function undo_record(lease, a, id, before, reentry)
  if not id or not a or not before then return end
  local r = {i = id, b = ttl_exp(before), a = ttl_exp(hget('h:' .. lease))}
  if reentry then r.r = 1 end
  about_push(a, 'u', r, UNDO_KEEP)
  put1('a:' .. lease, cjson.encode(a))
end
