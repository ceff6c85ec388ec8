-- inspect: the lock as it is now (expired holders purged first).
-- Reply: {held 0|1, mode or '', token or '', holders, waiters, ttl_ms, value or nil}
advance()
local held = redis.call('HLEN', H)
local ttl = 0
if held > 0 then ttl = grant_expiry() - NOW end
local reply = {held > 0 and 1 or 0, held > 0 and st.m or '', st.t or '', held,
  redis.call('ZCARD', Q), ttl, held > 0 and st.v or false}
keep()
return reply
