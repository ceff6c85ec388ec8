-- finish: an admitted write is over (completed or aborted upstream); writes
-- under a newer token need not wait for it any more, and the gateways whose
-- writes wait on this lock hear so at once.
-- ARGV: 3 write id
-- Reply: {'removed'}
if redis.call('ZREM', F, ARGV[3]) == 1 then wake_writers() end
keep()
return {'removed'}
