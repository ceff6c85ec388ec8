-- inspect: the lock as it is now (expired holders purged first).
-- Reply: {held 0|1, mode or '', token or '', holders, waiters, ttl_ms,
--         value or nil, owner or nil}
begin(KEYS, ARGV)
advance()
local n = num(st.n)
return done({n > 0 and 1 or 0, n > 0 and st.m or '', st.t or '', n,
  num(st.qn), n > 0 and num(st.x) - NOW or 0, n > 0 and st.v or false,
  n > 0 and st.o or false})
