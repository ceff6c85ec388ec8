-- finish: an admitted write is over (completed or aborted upstream); writes
-- under a newer token need not wait for it any more.
-- ARGV: 3 write id
-- Reply: {'removed'}
redis.call('ZREM', F, ARGV[3])
keep()
return {'removed'}
