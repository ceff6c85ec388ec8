-- index_drop: forgets NAME in the listing's index when a look found the
-- lock idle with every token it issued at most ARGV[2] (describe.lua's
-- `seen`), and the index learned of no newer grant (index_add.lua).
-- Reply: 1 when dropped, 0 when kept
local v = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
if v > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
