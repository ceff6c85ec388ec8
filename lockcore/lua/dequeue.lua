-- dequeue: a waiter gives up (deadline, client gone), or asks (peek).
-- It leaves before the lock moves on, so a waiter at its deadline is not
-- granted on the way out.
-- args: 3 waiter id, 4 its lease, 5 '1' to only peek
-- Reply: {'removed'} | {'queued'} | {'granted', token, mode, holds, ttl} | {'expired'}
local WID, LEASE, PEEK = ARGV[3], ARGV[4], ARGV[5] == '1'
begin(KEYS, ARGV, 'h:' .. LEASE)
local reply
if redis.call('ZSCORE', Q, WID) then
  if PEEK then
    reply = {'queued'}
  else
    redis.call('ZREM', Q, WID)
    redis.call('HDEL', W, WID)
    local left = num(st.qn) - 1
    if left > 0 then put('qn', left) else del('qn') end
    reply = {'removed'}
  end
  advance()
else
  advance()
  local h = holder(LEASE)
  if h then
    reply = {'granted', tonumber(st.t), st.m, h.n, h.ttl}
  else
    reply = {'expired'}
  end
end
return done(reply)
