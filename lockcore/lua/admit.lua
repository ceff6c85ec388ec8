-- admit: may a write fenced by TOKEN go upstream now? (CheckSequencer plus
-- the ordering guarantee.) A write is admitted only under the live grant's
-- token, and only once every write admitted under an older token has
-- finished or passed its recorded time, so the upstream sees admitted
-- writes in non-decreasing token order across all gateways. An admitted
-- write gets a send deadline: the grant's expiry minus a margin, so it can
-- never outlive the lease it was checked against. It is recorded until its
-- send deadline plus the margin: a newer token waits that long, so the
-- upstream has the margin to apply a write whose last byte left just in
-- time. A write told to wait leaves its gateway's name (aw), so the end of
-- a write wakes it (finish.lua) rather than its polling. See
-- docs/safety.md section 3.
-- args: 3 token, 4 write id, 5 margin ms, 6 longest write ms
-- Reply: {'admitted', deadline_in_ms, token} | {'wait', ms, current} |
--        {'stale'|'expiring'|'forged', current}
local TOK, WID = tonumber(ARGV[3]), ARGV[4]
local MARGIN, LONGEST = tonumber(ARGV[5]), tonumber(ARGV[6])
begin(KEYS, ARGV, nil, true)

-- The common write, in short: the live token as S holds it (so neither
-- forged nor stale), nobody waiting and no holder expired (advance()
-- would change nothing), F empty or holding this token's writes only (no
-- older write to wait for). It writes what the general path below
-- writes in that case; follow_end() has nothing to do (no end moved).
if ARGV[3] == st.t and held() and not st.qn and num(st.nx) > NOW and
    (not st.ft or st.ft == st.t) then
  local dl = num(st.x) - MARGIN
  if dl > NOW + LONGEST then dl = NOW + LONGEST end
  if dl > NOW then
    if not st.ft then
      rcall('HSET', S, 'ft', st.t, 'fm', ARGV[5])
    elseif MARGIN > num(st.fm) then
      rcall('HSET', S, 'fm', ARGV[5])
    end
    rcall('ZADD', F, fmt(dl + MARGIN), WID)
    keep_new_f()
    return {'admitted', dl - NOW, TOK}
  end
end

advance()
local cur = current()
local reply
if forged(TOK) then
  reply = {'forged', cur}
elseif not live(TOK) then
  reply = {'stale', cur}
else
  if num(st.ft) ~= TOK then
    -- The first write under this token: F holds only older ones.
    if st.ft then
      local last = redis.call('ZRANGE', F, -1, -1, 'WITHSCORES')
      if last[2] and tonumber(last[2]) > NOW then
        wait_for_writes(WID)
        reply = {'wait', tonumber(last[2]) - NOW, cur}
      elseif last[1] then
        redis.call('DEL', F)
      end
    end
    -- (the live token as S holds it, the margin as the gateway sent it:
    -- digits both, nothing to format)
    if not reply then put('ft', st.t, 'fm', ARGV[5]) end
  end
  if not reply then
    local dl = num(st.x) - MARGIN
    if dl > NOW + LONGEST then dl = NOW + LONGEST end
    if dl <= NOW then
      reply = {'expiring', cur}
    else
      -- a shortened lease cuts the record back by the largest margin
      -- a write under it was admitted with
      if MARGIN > num(st.fm) then put('fm', ARGV[5]) end
      redis.call('ZADD', F, fmt(dl + MARGIN), WID)
      keep_new_f()
      reply = {'admitted', dl - NOW, TOK}
    end
  end
end
return done(reply)
