-- check: is TOKEN the live grant of the lock? (CheckSequencer)
-- args: 3 token
-- Reply: {'valid', token, mode} | {'stale'|'expired'|'forged', current}
local TOK = tonumber(ARGV[3])
begin(KEYS, ARGV, nil, true)
advance()
local cur = current()
local reply
if forged(TOK) then
  reply = {'forged', cur}
elseif live(TOK) then
  reply = {'valid', TOK, st.m}
elseif TOK < cur then
  reply = {'stale', cur}
else
  reply = {'expired', cur}
end
return done(reply)
