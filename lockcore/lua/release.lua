-- release: undo one hold; the last hold frees the lease, the last lease
-- frees the lock and hands it to the next waiter(s) in the same step.
-- A released grant's admitted writes end with it (prelude's follow_end()):
-- each is recorded only for the margin from now (the storage may still be
-- applying one whose last byte left) and its gateway is told to abort it
-- upstream, so the next holder never waits on them.
-- args: 3 lease, 4 margin ms (at least the margin the writes carry),
--       5 '1' if principal, 6 principal (absent: not asked)
-- Reply: {'granted', token, mode, holds left, ttl[, 1, now us]} |
--        {'expired'} | {'forbidden'} (the lease holds, for another
--        principal); the last two fields when the lock is left idle (no
--        holder, no waiter) and the call was not given the index's keys
--        (a Cluster): the gateway drops it from the listing's index
--        (index_drop.lua) unless a newer grant was indexed (`seen` as in
--        describe.lua). Given them, the call drops it itself.
local LEASE, MARGIN = ARGV[3], tonumber(ARGV[4])
local PRIN = (ARGV[5] == '1') and ARGV[6] or nil
begin(KEYS, ARGV, 'h:' .. LEASE, true)
MARGIN_FLOOR = MARGIN
advance()
local reply
local h = holder(LEASE)
if not h then
  reply = {'expired'}
elseif not owns(h, PRIN) then
  reply = {'forbidden'}
else
  reply = {'granted', tonumber(st.t), st.m, h.n - 1, h.ttl}
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
