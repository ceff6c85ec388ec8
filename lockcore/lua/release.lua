-- release: undo one hold; the last hold frees the lease, the last lease
-- frees the lock and hands it to the next waiter(s) in the same step.
-- ARGV: 3 lease
-- Reply: {'granted', token, mode, holds left, ttl} | {'expired'}
local LEASE = ARGV[3]
advance()
local reply
local h = holder(LEASE)
if not h then
  reply = {'expired'}
else
  reply = {'granted', tonumber(st.t), st.m, h.n - 1, h.ttl}
  if h.n > 1 then
    put('h:' .. LEASE, hval(h.n - 1, h.ttl, h.exp))
  elseif num(st.n) <= 1 then
    del('h:' .. LEASE)
    end_grant(NOW, false)
    if num(st.qn) > 0 then handoff() end
  else
    del('h:' .. LEASE)
    recount()
    dirty = true
  end
end
keep()
return reply
