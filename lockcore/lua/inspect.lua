-- inspect: the lock as it is now (expired holders purged first).
-- Reply: {held 0|1, mode or '', token or '', holders, waiters, ttl_ms, value or nil}
advance()
local held = redis.call('HLEN', H)
local ttl = 0
if held > 0 then ttl = grant_expiry() - NOW end
local reply = {held > 0 and 1 or 0, redis.call('HGET', S, 'm') or '',
  redis.call('HGET', S, 't') or '', held, redis.call('ZCARD', Q), ttl,
  redis.call('HGET', S, 'v')}
keep()
return reply
