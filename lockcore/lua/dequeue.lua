-- dequeue: a waiter gives up (deadline, client gone), or asks (peek).
-- It leaves before the lock moves on, so a waiter at its deadline is not
-- granted on the way out.
-- ARGV: 3 waiter id, 4 its lease, 5 '1' to only peek
-- Reply: {'removed'} | {'queued'} | {'granted', token, mode, holds, ttl} | {'expired'}
local WID, LEASE, PEEK = ARGV[3], ARGV[4], ARGV[5] == '1'
local reply
if redis.call('ZSCORE', Q, WID) then
  if PEEK then
    reply = {'queued'}
  else
    redis.call('ZREM', Q, WID)
    redis.call('HDEL', W, WID)
    reply = {'removed'}
  end
  advance()
else
  advance()
  local hv = redis.call('HGET', H, LEASE)
  if hv then
    local holds, ttl = holds_of(hv)
    reply = {'granted', tonumber(st.t), st.m, holds, ttl}
  else
    reply = {'expired'}
  end
end
keep()
return reply
