-- index_add: the listing's index knows lock NAME (contract v1.3). Sent
-- after an acquire that granted or queued; the lock scripts never write
-- the index themselves, since their keys live in the lock's slot and the
-- index in its own (a Cluster).
-- Keys: N fg:{!index}:n zset of names (score 0: name order), V
-- fg:{!index}:v hash name -> the newest grant's token the index learned
-- of. A listing or a release drops a name only when it found the lock idle
-- at a moment past that token (index_drop.lua): a lock granted again after
-- such a look has a newer token, so it is never dropped for good.
-- args: 1 name, 2 the grant's token (0: a waiter queued, no new grant)
-- Reply: 1
local v = tonumber(ARGV[2])
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
if v > old or not redis.call('HGET', KEYS[2], ARGV[1]) then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%.0f', math.max(v, old)))
end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
