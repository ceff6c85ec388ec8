-- break: ends the grant of TOKEN as if it had expired now (contract v1.2,
-- an operator's call). Every holder of it leaves, shared ones included;
-- its writes end on every gateway through prelude's follow_end(), as at a
-- release; its lock-delay counts from now. With no lock-delay the next
-- waiter(s) are granted in the same step. With one, the gateways whose
-- waiters are queued hear when it ends ("t <ms> <name>" on fg:gw:<id>):
-- their ticks were paced by the broken grant's old end, which may be much
-- later.
-- A token that is not the live grant's (older, newer, a lock free or in
-- lock-delay) changes nothing: a break never ends a grant its caller did
-- not name.
-- args: 3 token, 4 margin ms (at least the margin the writes carry),
--       5 the breaker's principal, for the event (absent: not known)
-- Reply: {'removed', token} | {'expired', current}
-- Event: broken, before any waiter's grant: the token, the holder's
-- principal, owner and client when it had one holder (not several shared
-- ones), detail {"by": the breaker} when known.
local TOK, MARGIN = tonumber(ARGV[3]), tonumber(ARGV[4])
begin(KEYS, ARGV)
local BY = ARGV[5] -- (after begin(): it takes the events argument)
MARGIN_FLOOR = MARGIN
advance()
if not TOK or not live(TOK) then
  return done({'expired', current()})
end
-- Every holder of the grant: the h: fields S holds, and any this call put.
local hs, gws, abouts = {}, {}, EV and {}
local all = redis.call('HGETALL', S)
for i = 1, #all, 2 do
  local f, p = all[i], string.sub(all[i], 1, 2)
  if p == 'h:' then
    hs[f] = all[i + 1]
  elseif abouts and p == 'a:' then
    abouts[string.sub(f, 3)] = all[i + 1]
  elseif p == 'g:' then
    pre[f] = all[i + 1]
    gws[#gws + 1] = f
  end
end
for f, v in pairs(pend) do
  if string.sub(f, 1, 2) == 'h:' then hs[f] = v or nil end
end
local fs = {}
for f in pairs(hs) do fs[#fs + 1] = f end
if EV then
  local p, raw
  if #fs == 1 then
    p = smatch(hs[fs[1]], '^%d+:%d+:%d+:(.*)')
    raw = pend['a:' .. string.sub(fs[1], 3)] or abouts[string.sub(fs[1], 3)]
  end
  ev_holder('broken', ARGV[3], p, raw,
    BY and BY ~= '' and ('{"by":' .. jstr(BY) .. '}') or nil)
end
del_list(fs)
end_grant(NOW, true)
if num(st.qn) > 0 then
  local d = num(st.d)
  if d > NOW then
    local msg = 't ' .. fmt(d - NOW + 1) .. ' ' .. NAME
    for _, f in ipairs(gws) do
      if num(hget(f)) >= NOW then
        redis.call('PUBLISH', 'fg:gw:' .. string.sub(f, 3), msg)
      end
    end
  else
    handoff()
  end
end
return done({'removed', TOK})
