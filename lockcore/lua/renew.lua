-- renew: extend a held lease (or shorten it: its running writes then
-- follow the new end, prelude's follow_end()); optionally proclaim a new
-- value.
-- args: 3 lease, 4 ttl (0: the lease's own), 5 which of value and
--       principal follow: their letters 'v', 'p' in that order ('' or
--       absent: none; no principal: not asked), 6... their values in that
--       order (prelude's optional(), as acquire.lua takes them), then
--       the undo id when 5 has the letter 'u' (prelude's undo records)
-- Reply: {'granted', token, mode, holds, ttl} | {'expired'} (also: the
--        call was undone before it came) | {'forbidden'} (the lease
--        holds, for another principal)
local LEASE, TTL = ARGV[3], tonumber(ARGV[4])
begin(KEYS, ARGV, 'h:' .. LEASE, true)
-- (after begin(): it takes the events argument, which comes after these)
local VAL, _, PRIN = optional(ARGV, ARGV[5] or '', 6)
local UID = string.find(ARGV[5] or '', 'u', 1, true) and ARGV[#ARGV] or nil
advance()
local reply
local h = holder(LEASE)
local about = UID and h and about_get(LEASE)
if not h or undo_cancelled(about, UID) then
  reply = {'expired'}
elseif not owns(h, PRIN) then
  reply = {'forbidden'}
else
  local ttl = TTL > 0 and TTL or h.ttl
  local before = UID and hget('h:' .. LEASE)
  rehold(LEASE, h, h.n, ttl)
  set_meta(VAL, nil)
  if UID then undo_record(LEASE, about, UID, before, false) end
  -- a lock held is listed: an index update lost on the way (a Cluster's,
  -- sent by the gateway) is made good at the holder's next renewal
  if IX_N and not redis.call('ZSCORE', IX_N, NAME) then index() end
  reply = {'granted', tonumber(st.t), st.m, h.n, ttl}
end
return done(reply)
