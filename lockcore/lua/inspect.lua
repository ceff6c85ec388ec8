-- inspect: the lock as it is now (expired holders purged first).
-- Reply: {held 0|1, mode or '', token or '', holders, waiters, ttl_ms,
--         value or nil, owner or nil, delay_ms}
-- delay_ms: what remains of a lock-delay by Redis' clock, 0 when none (a
-- new grant ends one, so it is 0 while the lock is held).
begin(KEYS, ARGV)
advance()
local n = num(st.n)
local d = num(st.d)
return done({n > 0 and 1 or 0, n > 0 and st.m or '', st.t or '', n,
  num(st.qn), n > 0 and num(st.x) - NOW or 0, n > 0 and st.v or false,
  n > 0 and st.o or false, (n == 0 and d > NOW) and d - NOW or 0})
