-- finish: an admitted write is over (completed or aborted upstream); writes
-- under a newer token need not wait for it any more, and the gateways whose
-- writes wait on this lock hear so at once. Needs neither the clock nor
-- the rest of the lock's state.
-- args: 3 write id
-- Reply: {'removed'}
if redis.call('ZREM', KEYS[4], ARGV[3]) == 1 then
  local aw = redis.call('HGET', KEYS[1], 'aw')
  if aw then
    NAME = ARGV[2]
    wake_writers(aw)
    redis.call('HDEL', KEYS[1], 'aw')
  end
end
return {'removed'}
