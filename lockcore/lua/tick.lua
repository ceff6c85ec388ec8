-- tick: a gateway with waiters on the lock says it is alive, and hands the
-- lock on if it became free by expiry or the end of lock-delay.
-- ARGV: 3 gateway id, 4 liveness ms
-- Reply: {'queued', wake_in}
redis.call('HSET', S, 'g:' .. ARGV[3], fmt(NOW + tonumber(ARGV[4])))
advance()
local reply = {'queued', wake_in()}
keep()
return reply
