-- giveback: undoes a lock call whose answer was lost (the gateway answered
-- 503 without learning what it did), or hands back a grant nobody
-- received. The waiter leaves the queue if it is there, and the lease's
-- grant ends with all its holds, as at a release (no lock-delay; the next
-- waiter is granted in the same step). The lease is remembered (k:) for
-- TOMB ms, so that the call itself, should it reach Redis only now (the
-- last bytes of a dropped connection), does nothing. Idempotent: the
-- gateway sends it until Redis answers.
-- With an undo id (arg 6), it undoes a renewal or a re-entry of LEASE
-- instead (the lease is the client's: it keeps the lease): the call's
-- hold goes (its last one: the lease ends as at a release) and its
-- expiry is taken out of the lease's chain of calls (prelude's undo
-- records: an expiry put back that has passed ends the grant then, as an
-- expiry does); if the call has not come yet, its id is kept as spent so
-- that it does nothing when it comes.
-- args: 3 lease (fresh: nobody else knows it), 4 waiter id or '',
--       5 remembered ms, 6 undo id (absent: a fresh lease's give-back),
--       7 '1' when the call is known to have run (its answer was not
--       delivered): a re-entry whose record is gone still loses its hold
--       then, with the events' stream, why it is given back (the
--       event's detail), before the events' own argument
-- Reply: {'removed'} (a grant or a waiter was undone; a call's effects
--        were put back) | {'expired'} (none)
-- Event: given_back, when the lease's grant ended here (its token, the
-- holder's principal, owner and client) or its waiter left the queue
-- (the waiter's), detail {"reason": why}. A hold taken back from a lease
-- that keeps holding records nothing, as the re-entry did not.
local LEASE, WID, TOMB = ARGV[3], ARGV[4], tonumber(ARGV[5])
begin(KEYS, ARGV, 'h:' .. LEASE)
-- (after begin(): it took the events argument; the reason is then last)
local WHY
if EV then
  WHY = ARGV[#ARGV]
  ARGV[#ARGV] = nil
end
local UID, RAN = ARGV[6], ARGV[7] == '1'

-- The lease's grant ended in this call: given_back, with what its holder
-- H (holder()) and a: json RAW (read before it went) say, and the token
-- of the grant the call found (T0; before any waiter is handed the lock,
-- so that the stream has them in their order).
local function gave_back(h, raw)
  if EV and h and not hget('h:' .. LEASE) then
    ev_holder('given_back', T0, h.p, raw, gb_detail(WHY))
  end
end

if UID then
  advance()
  local undone = false
  local h = holder(LEASE)
  local a = h and about_get(LEASE)
  local raw = EV and h and hget('a:' .. LEASE)
  local u = about_list(a, 'u')
  local k
  for n, r in ipairs(u or {}) do
    if type(r) == 'table' and r.i == UID then k = n end
  end
  if k then
    local r = u[k]
    local ttl, exp = h.ttl, h.exp
    if k == #u then
      -- the last call: its expiry goes back, unless a call without an
      -- id moved it since
      if r.a == ttl_exp(hget('h:' .. LEASE)) and r.b then
        local pt, pe = smatch(r.b, '^(%d+):(%d+)$')
        ttl, exp = tonum(pt), tonum(pe)
      end
    elseif type(u[k + 1]) == 'table' then
      -- a later call set the expiry: what was before this one is now
      -- before that one
      u[k + 1].b = r.b
    end
    table.remove(u, k)
    if #u == 0 then a.u = nil end
    local holds = r.r and h.n - 1 or h.n
    if holds <= 0 then
      -- the re-entry's hold was the last: the lease goes as at a release
      del('h:' .. LEASE)
      if num(st.n) <= 1 then end_grant(NOW, false) else recount() end
    else
      put('h:' .. LEASE, hval(holds, ttl, exp, h.p))
      -- an expiry put back that has passed ends the grant then
      local gone, last = recount()
      if gone > 0 and not held() then end_grant(last, true) end
    end
    gave_back(h, raw)
    advance()
    undone = true
  elseif RAN and h then
    -- the call ran (its answer was not delivered) but its record is gone
    -- (later calls pushed it out): its hold goes all the same
    if h.n > 1 then
      put('h:' .. LEASE, hval(h.n - 1, h.ttl, h.exp, h.p))
    else
      del('h:' .. LEASE)
      if num(st.n) <= 1 then end_grant(NOW, false) else recount() end
      gave_back(h, raw)
      advance()
    end
    undone = true
  end
  -- spent: the call does nothing should it come now
  if a and not undo_cancelled(a, UID) then
    about_push(a, 'x', UID, UNDO_SPENT)
  end
  if a and hget('h:' .. LEASE) then put1('a:' .. LEASE, cjson.encode(a)) end
  if undone then dirty = true end
  return done({undone and 'removed' or 'expired'})
end

local undone = false
-- out of the queue first, so that it is not granted on the way out
if WID ~= '' and redis.call('ZREM', Q, WID) == 1 then
  if EV then
    local raw = redis.call('HGET', W, WID)
    local ok, r = pcall(cjson.decode, raw or '')
    if ok and type(r) == 'table' then
      -- (the gateway that gives a waiter back is the one that queued it)
      event('given_back', nil, r.p, r.o, r.c, nil, gb_detail(WHY))
    end
  end
  redis.call('HDEL', W, WID)
  local left = num(st.qn) - 1
  if left > 0 then put('qn', left) else del('qn') end
  undone = true
  dirty = true
end
advance()
local h = holder(LEASE)
if h then
  undone = true
  local raw = EV and hget('a:' .. LEASE)
  del('h:' .. LEASE)
  gave_back(h, raw)
  if num(st.n) <= 1 then
    end_grant(NOW, false)
    if num(st.qn) > 0 then handoff() end
  else
    recount()
    dirty = true
  end
end
-- Old remembered leases go when a new one comes: a lock has few.
local all = redis.call('HGETALL', S)
local kx = NOW + TOMB
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'k:' then
    local e = tonumber(all[i + 1]) or 0
    if e <= NOW then del(all[i]) elseif e > kx then kx = e end
  end
end
put('k:' .. LEASE, fmt(NOW + TOMB), 'kx', fmt(kx))
dirty = true
return done({undone and 'removed' or 'expired'})
