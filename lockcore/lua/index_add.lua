-- index_add: the listing's index knows lock NAME (contract v1.3). Sent
-- with every acquire that may make a lock active; the index is never
-- written by the lock scripts themselves, whose keys live in the lock's
-- slot, so on a Cluster it is its own key in its own slot.
-- Keys: N fg:{!index}:n zset of names (score 0: name order), V
-- fg:{!index}:v hash name -> the time (us, Redis' clock, plus ARGV[2])
-- before which no listing may drop it: a listing drops a name only when it
-- found the lock idle at a time past that (index_drop.lua), so a lock that
-- became active after the look that found it idle stays listed.
-- args: 1 name, 2 margin us (for clocks of other nodes)
-- Reply: 1
local tm = redis.call('TIME')
local v = tonumber(tm[1]) * 1000000 + tonumber(tm[2]) + tonumber(ARGV[2])
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
if v > old then
  redis.call('HSET', KEYS[2], ARGV[1], string.format('%.0f', v))
end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 1
