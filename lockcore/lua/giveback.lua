-- giveback: undoes a lock call whose answer was lost (the gateway answered
-- 503 without learning what it did), or hands back a grant nobody
-- received. The waiter leaves the queue if it is there, and the lease's
-- grant ends with all its holds, as at a release (no lock-delay; the next
-- waiter is granted in the same step). The lease is remembered (k:) for
-- TOMB ms, so that the call itself, should it reach Redis only now (the
-- last bytes of a dropped connection), does nothing. Idempotent: the
-- gateway sends it until Redis answers.
-- With an undo id (arg 6), it undoes a renewal or a re-entry of LEASE
-- instead (the lease is the client's: it keeps the lease): what the
-- call's undo record says is put back (prelude's undo records), or, if
-- the call has not come yet, it is marked so that it does nothing when it
-- comes. A renewal's holder gets its ttl and expiry back (an expiry that
-- has passed ends the grant then, as an expiry does); a re-entry's loses
-- the hold it added (its last one: the lease ends as at a release) and
-- gets its expiry back; a value or owner the call set is put back.
-- args: 3 lease (fresh: nobody else knows it), 4 waiter id or '',
--       5 remembered ms, 6 undo id (absent: a fresh lease's give-back)
-- Reply: {'removed'} (a grant or a waiter was undone; a call's effects
--        were put back) | {'expired'} (none)
local LEASE, WID, TOMB = ARGV[3], ARGV[4], tonumber(ARGV[5])
local UID = ARGV[6]
begin(KEYS, ARGV, 'h:' .. LEASE)

if UID then
  advance()
  local undone = false
  local h = holder(LEASE)
  local a = h and about_get(LEASE)
  local r = undo_find(a, UID)
  if r and not r.x then
    -- the expiry goes back only if no later call moved it
    local ttl, exp = h.ttl, h.exp
    local _, nttl, nexp = smatch(r.n or '', '^(%d+):(%d+):(%d+)')
    if tonum(nttl) == ttl and tonum(nexp) == exp then
      local _, pttl, pexp = smatch(r.h or '', '^(%d+):(%d+):(%d+)')
      ttl, exp = tonum(pttl) or ttl, tonum(pexp) or exp
    end
    -- the value and owner only if nobody set them since
    local back_v = r.sv ~= nil and st.v == r.sv
    local back_o = r.so ~= nil and st.o == r.so
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
    -- (onto the grant the call ran under only: an ended one has none)
    if held() and st.t == T0 then
      if back_v then if r.nv then del('v') else put('v', r.v) end end
      if back_o then if r.no then del('o') else put('o', r.o) end end
    end
    advance()
    undone = true
    r.h, r.n, r.v, r.o, r.sv, r.so, r.nv, r.no, r.r = nil, nil, nil, nil, nil,
      nil, nil, nil, nil
    r.x = 1
  elseif a and not r then
    -- not come yet: it does nothing when it comes
    undo_push(a, {i = UID, x = 1})
  end
  if a and hget('h:' .. LEASE) then put1('a:' .. LEASE, cjson.encode(a)) end
  if undone then dirty = true end
  return done({undone and 'removed' or 'expired'})
end

local undone = false
-- out of the queue first, so that it is not granted on the way out
if WID ~= '' and redis.call('ZREM', Q, WID) == 1 then
  redis.call('HDEL', W, WID)
  local left = num(st.qn) - 1
  if left > 0 then put('qn', left) else del('qn') end
  undone = true
  dirty = true
end
advance()
if holder(LEASE) then
  undone = true
  del('h:' .. LEASE)
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
