-- release: undo one hold; the last hold frees the lease, the last lease
-- frees the lock and hands it to the next waiter(s) in the same step.
-- A released grant's admitted writes end with it (prelude's follow_end()):
-- each is recorded only for the margin from now (the storage may still be
-- applying one whose last byte left) and its gateway is told to abort it
-- upstream, so the next holder never waits on them.
-- args: 3 lease, 4 margin ms (at least the margin the writes carry),
--       5 principal (absent: not asked)
-- Reply: {'granted', token, mode, holds left, ttl[, 1, now us]} |
--        {'expired'} | {'forbidden'} (the lease holds, for another
--        principal); the last two fields when the lock is left idle (no
--        holder, no waiter) and the call was not given the index's keys
--        (a Cluster): the gateway drops it from the listing's index
--        (index_drop.lua) unless a newer grant was indexed (`seen` as in
--        describe.lua). Given them, the call drops it itself.
-- (the event's a lease's last hold leaving: released, with the holder's
-- principal, owner and client; prelude/events.lua)
local LEASE = ARGV[3]
local HF = 'h:' .. LEASE
start(KEYS, ARGV)
local PRIN = ARGV[5] -- (after start(): it takes the events argument)

-- The common release, in short: the only holder, alive, with one hold,
-- nobody waiting and no write recorded (so advance() would change
-- nothing, follow_end() has no write to reach and no waiter is handed the
-- lock). It does what the general path below does in that case, without
-- `st` and its bookkeeping (it reads peek()'s reply as it is): the
-- grant's fields and the holder's go in one HDEL (v and o unread, as
-- del() does), then the listing's index and, unless the lease was near
-- its end, keep()'s PEXPIRE, the lock being free now.
-- (FIELD, then CORE's order)
local hv, c, m, t, ld, d, n, _, nx, qn, ft, _, ob, kx = unpack(peek(HF))
local ends = tonum(nx) or 0
if n == '1' and not qn and not ft and hv and ends > NOW then
  -- one hold ('1:'), its ttl, and the principal when one is asked
  -- about: as holder() reads the value, fewer strings made
  local ttl, p
  if PRIN or EV then
    ttl, p = smatch(hv, '^1:(%d+):%d+:?(.*)')
  else
    ttl = smatch(hv, '^1:(%d+):%d')
  end
  if ttl and (PRIN == nil or p == PRIN) then
    local reply = {'granted', tonum(t), m, 0, number(ttl)}
    -- its event first: its owner and client leave with the fields
    if EV then
      ev_holder('released', t, p, rcall('HGET', S, 'a:' .. LEASE) or nil)
    end
    if ld or d then
      rcall('HDEL', S, HF, 'a:' .. LEASE, 'm', 'v', 'o', 'n', 'x', 'nx',
        ld and 'ld' or 'm', d and 'd' or 'm')
    else
      rcall('HDEL', S, HF, 'a:' .. LEASE, 'm', 'v', 'o', 'n', 'x', 'nx')
    end
    announce(ob, nil)
    if not index(true) then
      -- seen(), of the counter and token just read
      local top = math.max(c and tonum(c) or 0, reply[2] or 0)
      reply[6], reply[7] = 1, fmt(top > 0 and top or NOW_US)
    end
    -- The keys expire at the grant's end plus IDLE or later (keep_to()
    -- at the grant and at every move of its end), never before the
    -- horizon of the lock now free. With little of the lease left (an
    -- eighth of IDLE at most) that expiry stays: the lock is remembered
    -- at most that much longer, and the release runs one command fewer
    -- (a PEXPIRE is about 4 % of a lock cycle's Redis work).
    if ends - NOW > IDLE / 8 then
      keep_to(horizon_at(0, 0, 0, num(ob), num(kx)), false, false)
    end
    return reply
  end
end

fetch(HF, true)
MARGIN_FLOOR = tonumber(ARGV[4])

advance()
local reply
local h = holder(LEASE)
if not h then
  reply = {'expired'}
elseif not owns(h, PRIN) then
  reply = {'forbidden'}
else
  reply = {'granted', tonumber(st.t), st.m, h.n - 1, h.ttl}
  -- the last hold leaves: recorded before the lock moves on to a waiter
  if EV and h.n <= 1 then
    ev_holder('released', st.t, h.p, hget('a:' .. LEASE))
  end
  if h.n > 1 then
    put('h:' .. LEASE, hval(h.n - 1, h.ttl, h.exp, h.p))
  elseif num(st.n) <= 1 then
    del('h:' .. LEASE)
    end_grant(NOW, false)
    if num(st.qn) > 0 then handoff() end
    if not held() and num(st.qn) == 0 and not index(true) then
      reply[6], reply[7] = 1, fmt(seen())
    end
  else
    del('h:' .. LEASE)
    recount()
    dirty = true
  end
end
return done(reply)
