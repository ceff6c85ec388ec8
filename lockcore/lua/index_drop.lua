-- index_drop: forgets NAME in the listing's index when a look found the
-- lock idle with every token it issued at most ARGV[2] (describe.lua's
-- `seen`), and the index learned of no newer grant (index_add.lua).
-- On one Redis the call is also given the lock's keys (KEYS[3..6]: S, Q,
-- W, F), since there the lock scripts keep the index in the grant's own
-- step and write no token to :v (prelude's index()): the name is dropped
-- only if the lock is idle now, held by nobody, waited for by nobody, out
-- of lock-delay. A grant made since the look is seen in S itself.
-- Reply: 1 when dropped, 0 when kept
local v = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
if v > tonumber(ARGV[2]) then return 0 end
if KEYS[3] then
  local s = redis.call('HMGET', KEYS[3], 'n', 'qn', 'd')
  if tonumber(s[1] or '0') > 0 or tonumber(s[2] or '0') > 0 then return 0 end
  if s[3] then
    local tm = redis.call('TIME')
    local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    if tonumber(s[3]) > now then return 0 end
  end
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
