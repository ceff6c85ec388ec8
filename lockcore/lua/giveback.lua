-- giveback: undoes a lock call whose answer was lost (the gateway answered
-- 503 without learning what it did), or hands back a grant nobody
-- received. The waiter leaves the queue if it is there, and the lease's
-- grant ends with all its holds, as at a release (no lock-delay; the next
-- waiter is granted in the same step). The lease is remembered (k:) for
-- TOMB ms, so that the call itself, should it reach Redis only now (the
-- last bytes of a dropped connection), does nothing. Idempotent: the
-- gateway sends it until Redis answers.
-- args: 3 lease (fresh: nobody else knows it), 4 waiter id or '',
--       5 remembered ms
-- Reply: {'removed'} (a grant or a waiter was undone) | {'expired'} (none)
local LEASE, WID, TOMB = ARGV[3], ARGV[4], tonumber(ARGV[5])
begin(KEYS, ARGV, 'h:' .. LEASE)
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
