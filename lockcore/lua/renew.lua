-- renew: extend a held lease (or shorten it: its running writes then
-- follow the new end, prelude's follow_end()); optionally proclaim a new
-- value.
-- args: 3 lease, 4 ttl (0: the lease's own), 5 which of value and
--       principal follow: their letters 'v', 'p' in that order ('' or
--       absent: none; no principal: not asked), 6... their values in that
--       order (prelude's optional(), as acquire.lua takes them)
-- Reply: {'granted', token, mode, holds, ttl} | {'expired'} |
--        {'forbidden'} (the lease holds, for another principal)
local LEASE, TTL = ARGV[3], tonumber(ARGV[4])
local VAL, _, PRIN = optional(ARGV, ARGV[5] or '', 6)
begin(KEYS, ARGV, 'h:' .. LEASE, true)
advance()
local reply
local h = holder(LEASE)
if not h then
  reply = {'expired'}
elseif not owns(h, PRIN) then
  reply = {'forbidden'}
else
  local ttl = TTL > 0 and TTL or h.ttl
  rehold(LEASE, h, h.n, ttl)
  set_meta(VAL, nil)
  -- a lock held is listed: an index update lost on the way (a Cluster's,
  -- sent by the gateway) is made good at the holder's next renewal
  if IX_N and not redis.call('ZSCORE', IX_N, NAME) then index() end
  reply = {'granted', tonumber(st.t), st.m, h.n, ttl}
end
return done(reply)
