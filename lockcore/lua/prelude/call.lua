-- prelude/call.lua - the head of the fencegate function library, and the
-- state of one call. The prelude is the files of lockcore/lua/prelude,
-- joined by embed.py in the order lockcore/meson.build lists them (call,
-- events, grants, writes, done, undo) after the `#!lua name=` line; each script
-- after them is registered as a function fg_<script>_<version>. Their
-- helpers are library-level locals of one chunk: a file may use what the
-- files before it declare, never what a later one does (a name not yet
-- declared would be read as a global).
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
--   W  fg:{N}:w  hash   waiter id -> json {g,m,t,ld,l,dl,v,o,p,c,s,e}
--                       (c client address, s queued at, ms, e the
--                       gateway id its events name: g is its loop's)
--   F  fg:{N}:f  zset   admitted write id -> recorded until (ms)
-- Every function takes the keys S, Q, W, F and the arguments idle-forget
-- ms, lock name; the rest is per script. acquire, renew and release may
-- take one more key, the listing's index of names (fg:{!index}:n,
-- index_add.lua), where every key is on one Redis: they keep it
-- themselves (index(), the name set only), so
-- that a lock cycle costs one small call on it per change between idle
-- and active (renew too: it makes good a lost update); on a Cluster the
-- gateway keeps it.
-- Events (contract v1.5): acquire, renew, release, tick, dequeue, break,
-- giveback, admit, extend and check (every call that can hand the lock
-- to a waiter, but the looks of inspect and describe, whose calls stay
-- as they were) take one more key when the gateway records events, the
-- lock's event stream (fg:{!ev}:s on one Redis, the slot's on a
-- Cluster), after the index's when they have that one; with it comes
-- one more argument, the last, "<retain> <gateway id>". start() takes
-- both (prelude/events.lua appends).
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
-- Invariants: expiries are Redis TIME; numbers above 2^31 cross into
-- redis.call only through fmt() (tostring and cjson round them); each
-- field of S is read once (begin()'s HMGET or a short path's peek(), and
-- LAZY's for the fields a call needs seldom) and every change of S goes
-- through put/del into one HSET and one HDEL at the end of the call
-- (done(), prelude/done.lua), so `st` is always what S will hold.
local S, Q, W, F, IDLE, NAME, NOW, NOW_US
local SEC_S, US_S, NOW_S, NOW_US_S -- TIME's reply; clock_s()
-- Redis' and Lua's functions the helpers call, as upvalues: a global is
-- two table lookups a use. The library's own code cannot reach them when
-- it is loaded, so start() binds them at a call's start (the same
-- functions every call); a helper that runs without begin()
-- (wake_writers(), for finish.lua) uses the globals.
local rcall, sformat, tonum, smatch, sbyte, ssub
local IX_N -- the listing's index of names when the call was given it
local IX_KEY = 'fg:{!index}:n' -- its name (calls.c)
-- The event stream when the call was given it (else nil: no events), the
-- gateway id of the call, MAXLEN of every append (prelude/events.lua);
-- EVA_IN, the last events argument they were read from (a gateway sends
-- the same one call after call: read once).
local EV, EV_G, EV_MAX
local EVA_IN = false
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
  -- keys 5 and 6: the index's, then the stream; either may be missing
  -- (an interned string's == is a pointer's)
  local k5 = keys[5]
  if k5 == IX_KEY then IX_N, EV = k5, keys[6] else IX_N, EV = nil, k5 end
  if EV then
    -- the events argument, the last, leaves ARGV: every script reads its
    -- own arguments as they were before events were
    local n = #args
    local a = args[n]
    args[n] = nil
    if a ~= EVA_IN then
      EV_MAX, EV_G = smatch(a, '^(%d+) (.*)$')
      if not EV_MAX then EV_MAX, EV_G = '100000', '' end
      EVA_IN = a
    end
  end
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
