-- acquire: re-enter, grant now, or queue.
-- args: 3 lease, 4 mode, 5 ttl, 6 the client's address (for the listing),
--       7 the letters of the optional arguments that follow, in this
--       order ('' or absent: none), 8... their values in that order:
--         d  lock-delay (absent: none)
--         w  wait, waiter id, gateway id, liveness, max waiters (five
--            values; absent: wait 0, the call never queues)
--         r  the re-entry lease (absent: a fresh lease)
--         v  value, o  owner
--         p  principal (absent: open mode; a grant is stored with it, a
--            re-entry must come from it)
--         u  undo id of a re-entry (prelude's undo records; absent:
--            none), always the last argument
--       (a call carries only those it has: every argument costs Redis a
--       string and a slot of ARGV, and a ninth one a larger table; a
--       common grant is seven)
-- Reply: {'granted', token, mode, holds, ttl} | {'queued', wake_in} |
--        {'busy', wake_in, delay} (delay: what remains of the lock-delay
--        when it alone refused the call, i.e. the lock is free and nobody
--        queued; else 0) | {'expired'} (re-entry: the lease holds nothing;
--        a fresh lease: it was given back) | {'toomany'} |
--        {'forbidden'} (re-entry: the lease holds, for another principal)
start(KEYS, ARGV)
local LEASE, MODE = ARGV[3], ARGV[4]
-- (numbers a grant does not need are read where they are needed)
local TTL, CLIENT = number(ARGV[5]), ARGV[6] or ''
local LETTERS, LD, RE = ARGV[7] or '', '0', ''
local WAIT, WID, GW, LIVE, MAXW
local at = 8
if LETTERS ~= '' then
  if string.find(LETTERS, 'd', 1, true) then LD, at = ARGV[at], at + 1 end
  if string.find(LETTERS, 'w', 1, true) then
    WAIT, WID, GW, LIVE, MAXW = ARGV[at], ARGV[at + 1], ARGV[at + 2],
      ARGV[at + 3], ARGV[at + 4]
    at = at + 5
  end
  if string.find(LETTERS, 'r', 1, true) then RE, at = ARGV[at], at + 1 end
end
local VAL, OWN, PRIN = optional(ARGV, LETTERS, at)
local UID = RE ~= '' and string.find(LETTERS, 'u', 1, true) and ARGV[#ARGV]
  or nil

-- A fresh lease's k: field says this call was given back before it got
-- here (its answer was lost and the gateway undid it): it does nothing.
local KF = 'k:' .. LEASE

-- The common grant, in short: a fresh lease on a lock nobody holds or
-- waits for, out of lock-delay and with no lock-delay field left (so
-- advance() would change nothing and grant_new() would delete no field).
-- It writes what grant_new(), set_meta() and index() write, in one HSET,
-- then keep()'s PEXPIRE, without `st` and the pending-write bookkeeping:
-- it reads peek()'s reply as it is.
if RE == '' then
  -- (FIELD, then CORE's order)
  local k, c, _, _, ld, d, n, _, _, qn, ft, _, ob, kx = unpack(peek(KF))
  if not (k or n or qn or d or ld) then
    local t, ts = token_after(c)
    local exp = fmt(NOW + TTL)
    -- (the holder's value is put together from digits at hand, as hval()
    -- would format it)
    local hv = PRIN and PRIN ~= '' and ('1:' .. ARGV[5] .. ':' .. exp ..
      ':' .. PRIN) or ('1:' .. ARGV[5] .. ':' .. exp)
    if LD == '0' and not VAL and not OWN then
      -- (the usual fields, as arguments: no table)
      rcall('HSET', S, 'c', ts, 't', ts, 'm', MODE, 'n', '1', 'x', exp,
        'nx', exp, 'h:' .. LEASE, hv, 'a:' .. LEASE, about_of(CLIENT))
    else
      local hs = {'c', ts, 't', ts, 'm', MODE, 'n', '1', 'x', exp, 'nx', exp,
        'h:' .. LEASE, hv, 'a:' .. LEASE, about_of(CLIENT, OWN), nil, nil,
        nil, nil, nil, nil}
      local i = 17
      if LD ~= '0' then hs[i], hs[i + 1], i = 'ld', LD, i + 2 end
      if VAL then hs[i], hs[i + 1], i = 'v', VAL, i + 2 end
      if OWN then hs[i], hs[i + 1] = 'o', OWN end
      rcall('HSET', S, unpack(hs))
    end
    announce(ob, t)
    index()
    if EV then ev_granted(ts, MODE, TTL, PRIN, OWN, CLIENT) end
    keep_to(horizon_at(NOW + TTL, 0, 0, num(ob), num(kx)), false, ft)
    return {'granted', t, MODE, 1, TTL}
  end
end
fetch(RE ~= '' and ('h:' .. RE) or KF, true)

advance()
local reply
if RE == '' and hget('k:' .. LEASE) then
  reply = {'expired'}
elseif RE ~= '' then
  local h = holder(RE)
  local about = UID and h and about_get(RE)
  if not h or undo_cancelled(about, UID) then
    reply = {'expired'}
  elseif not owns(h, PRIN) then
    reply = {'forbidden'}
  else
    local before = UID and hget('h:' .. RE)
    rehold(RE, h, h.n + 1, TTL)
    set_meta(VAL, OWN)
    if UID then undo_record(RE, about, UID, before, true) end
    reply = {'granted', tonumber(st.t), st.m, h.n + 1, TTL}
  end
else
  local queued = num(st.qn)
  local delayed = num(st.d) > NOW
  if queued == 0 and not held() and not delayed then
    local t, ts = grant_new(LEASE, MODE, TTL, LD, PRIN, CLIENT, OWN)
    index()
    set_meta(VAL, OWN)
    if EV then ev_granted(ts, MODE, TTL, PRIN, OWN, CLIENT) end
    reply = {'granted', t, MODE, 1, TTL}
  elseif queued == 0 and held() and MODE == 's' and st.m == 's' then
    local t = join(LEASE, TTL, PRIN, CLIENT, OWN)
    set_meta(VAL, OWN)
    if EV then ev_granted(st.t, MODE, TTL, PRIN, OWN, CLIENT) end
    reply = {'granted', t, MODE, 1, TTL}
  elseif (tonumber(WAIT) or 0) == 0 then
    local only_delay = queued == 0 and not held() and delayed
    reply = {'busy', wake_in(), only_delay and num(st.d) - NOW or 0}
  elseif queued >= tonumber(MAXW) then
    reply = {'toomany'}
  else
    local seq = num(st.qs) + 1
    local dl = NOW + tonumber(WAIT)
    redis.call('ZADD', Q, seq, WID)
    -- (e: the gateway its events name, when events are recorded: GW is
    -- the channel of one of its loops)
    redis.call('HSET', W, WID, cjson.encode({g = GW, m = MODE, t = TTL,
      ld = tonumber(LD), l = LEASE, dl = fmt(dl), v = VAL, o = OWN, p = PRIN,
      c = CLIENT, s = fmt(NOW), e = EV and EV_G or nil}))
    put('qs', seq, 'qn', queued + 1, 'g:' .. GW, fmt(NOW + tonumber(LIVE)))
    if dl > num(st.qd) then put('qd', fmt(dl)) end
    dirty = true
    index()
    reply = {'queued', wake_in()}
  end
end
return done(reply)
