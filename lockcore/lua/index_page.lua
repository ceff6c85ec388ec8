-- index_page: the next names of the listing's index (index_add.lua) in
-- name order: at most ARGV[3] of them in the range ARGV[1]..ARGV[2]
-- (ZRANGEBYLEX bounds). A page costs its size, however many names exist.
-- Reply: {name, ...}
return redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0,
  tonumber(ARGV[3]))
