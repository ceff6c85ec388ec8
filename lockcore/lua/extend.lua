-- extend: an admitted write still running moves its deadline with the
-- lease (a renewal extends it); a write whose grant ended cannot. Its new
-- record ends no later than the grant: the keys' horizon does not move.
-- args: 3 token, 4 write id, 5 margin ms, 6 ms left of its longest time
-- Reply: {'admitted', deadline_in_ms, token} | {'stale', current}
local TOK, WID = tonumber(ARGV[3]), ARGV[4]
local MARGIN, LEFT = tonumber(ARGV[5]), tonumber(ARGV[6])
begin(KEYS, ARGV)
advance()
local reply
if live(TOK) and redis.call('ZSCORE', F, WID) then
  local dl = num(st.x) - MARGIN
  if dl > NOW + LEFT then dl = NOW + LEFT end
  if dl > NOW then
    redis.call('ZADD', F, fmt(dl + MARGIN), WID)
    reply = {'admitted', dl - NOW, TOK}
  end
end
if not reply then reply = {'stale', current()} end
return done(reply)
