-- check: is TOKEN the live grant of the lock? (CheckSequencer)
-- ARGV: 3 token
-- Reply: {'valid', token, mode} | {'stale'|'expired'|'forged', current}
local TOK = tonumber(ARGV[3])
advance()
local t = num(st.t)
local cur = math.max(num(st.c), t)
local reply
if TOK > math.max(cur, NOW_US) then
  reply = {'forged', cur}
elseif TOK == t and held() then
  reply = {'valid', t, st.m}
elseif TOK < cur then
  reply = {'stale', cur}
else
  reply = {'expired', cur}
end
keep()
return reply
