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
  local u = a and type(a.u) == 'table' and a.u or nil
  if u and u.i == UID and not u.x then
    local _, pttl, pexp = smatch(u.h or '', '^(%d+):(%d+):(%d+)')
    pttl, pexp = tonum(pttl) or h.ttl, tonum(pexp) or h.exp
    if u.r and h.n <= 1 then
      -- the re-entry added the last hold: the lease goes as at a release
      del('h:' .. LEASE)
      if num(st.n) <= 1 then
        end_grant(NOW, false)
      else
        recount()
      end
    else
      put('h:' .. LEASE, hval(u.r and h.n - 1 or h.n, pttl, pexp, h.p))
      -- an expiry put back that has passed ends the grant then
      local gone, last = recount()
      if gone > 0 and not held() then end_grant(last, true) end
    end
    if u.nv then del('v') elseif u.v then put('v', u.v) end
    if u.no then del('o') elseif u.o then put('o', u.o) end
    advance()
    undone = true
  end
  -- the id is spent: the call does nothing should it come now
  if a and hget('h:' .. LEASE) and not (u and u.i ~= UID and not u.x) then
    a.u = {i = UID, x = 1}
    put1('a:' .. LEASE, cjson.encode(a))
  end
  dirty = true
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
