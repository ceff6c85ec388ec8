-- index_drop: forgets NAME in the listing's index when a listing found the
-- lock idle at ARGV[2] (us, the lock's Redis clock) and no acquire has
-- been sent for it since (its mark in V is older; index_add.lua).
-- Reply: 1 when dropped, 0 when kept
local v = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
if v >= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
