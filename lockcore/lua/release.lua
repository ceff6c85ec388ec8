-- release: undo one hold; the last hold frees the lease, the last lease
-- frees the lock and hands it to the next waiter(s) in the same step.
-- ARGV: 3 lease
-- Reply: {'granted', token, mode, holds left, ttl} | {'expired'}
local LEASE = ARGV[3]
advance()
local reply
local hv = redis.call('HGET', H, LEASE)
if not hv then
  reply = {'expired'}
else
  local holds, ttl = holds_of(hv)
  reply = {'granted', tonumber(st.t), st.m, holds - 1, ttl}
  if holds > 1 then
    redis.call('HSET', H, LEASE, (holds - 1) .. ':' .. ttl)
  else
    redis.call('HDEL', H, LEASE)
    redis.call('ZREM', E, LEASE)
    if redis.call('HLEN', H) == 0 then
      end_grant(NOW, false)
      handoff()
    end
    dirty = true
  end
end
keep()
return reply
