-- renew: extend a held lease; optionally proclaim a new value.
-- ARGV: 3 lease, 4 ttl (0: the lease's own), 5 '1' if value, 6 value
-- Reply: {'granted', token, mode, holds, ttl} | {'expired'}
local LEASE, TTL = ARGV[3], tonumber(ARGV[4])
local VAL = (ARGV[5] == '1') and ARGV[6] or nil
advance()
local reply
local hv = redis.call('HGET', H, LEASE)
if not hv then
  reply = {'expired'}
else
  local holds, ttl = holds_of(hv)
  if TTL > 0 then ttl = TTL end
  redis.call('HSET', H, LEASE, holds .. ':' .. ttl)
  redis.call('ZADD', E, fmt(NOW + ttl), LEASE)
  set_meta(VAL, nil)
  dirty = true
  reply = {'granted', tonumber(st.t), st.m, holds, ttl}
end
keep()
return reply
