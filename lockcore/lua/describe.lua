-- describe: the lock as the listing shows it (contract v1.3), expired
-- holders purged and due hand-offs made first. Never returns a lease.
-- Reply: {active 0|1, mode or '', token or '', ttl_ms, delay_ms, seen,
--         holders, waiters} where active is "held, waited for or in
--         lock-delay", and holders and waiters are flat lists of four
--         strings per party: owner ('-' for none, else '+' .. owner),
--         principal ('' for none), client address, ms held or waited.
--         Holders longest held first, waiters in queue order; at most
--         ARGV[3] of each (0: no party is read). seen: prelude's seen();
--         the listing's index drops the name only if no grant it learned
--         of since is newer (index_drop.lua).
local MAXP = tonumber(ARGV[3])
begin(KEYS, ARGV)
advance()
done(nil)
local n, qn, d = num(st.n), num(st.qn), num(st.d)
local delay = (n == 0 and d > NOW) and d - NOW or 0
local active = (n > 0 or qn > 0 or delay > 0) and 1 or 0
local holders, waiters = {}, {}
local function party(out, o, p, c, since)
  out[#out + 1] = o and ('+' .. o) or '-'
  out[#out + 1] = p or ''
  out[#out + 1] = c or ''
  local s = tonumber(since or '')
  out[#out + 1] = fmt(s and math.max(NOW - s, 0) or 0)
end
if n > 0 and MAXP > 0 then
  local all = redis.call('HGETALL', S)
  local abouts, hs = {}, {}
  for i = 1, #all, 2 do
    local pfx = string.sub(all[i], 1, 2)
    if pfx == 'a:' then abouts[string.sub(all[i], 3)] = all[i + 1]
    elseif pfx == 'h:' then hs[#hs + 1] = {string.sub(all[i], 3), all[i + 1]} end
  end
  local rows = {}
  for _, h in ipairs(hs) do
    local p = string.match(h[2], '^%d+:%d+:%d+:?(.*)$')
    local a = abouts[h[1]] and cjson.decode(abouts[h[1]]) or {}
    rows[#rows + 1] = {o = a.o, p = p, c = a.c, s = tonumber(a.s or '') or NOW}
  end
  table.sort(rows, function(x, y) return x.s < y.s end)
  for i = 1, math.min(#rows, MAXP) do
    local r = rows[i]
    party(holders, type(r.o) == 'string' and r.o or nil, r.p, r.c, r.s)
  end
end
if qn > 0 and MAXP > 0 then
  local ids = redis.call('ZRANGE', Q, 0, MAXP - 1)
  if #ids > 0 then
    -- in slices: unpack is bounded (hcall())
    local raws = {}
    for i = 1, #ids, 1000 do
      local part = redis.call('HMGET', W, unpack(ids, i, math.min(i + 999, #ids)))
      for k = 1, #part do raws[i + k - 1] = part[k] end
    end
    for i = 1, #ids do
      if raws[i] then
        local r = cjson.decode(raws[i])
        party(waiters, type(r.o) == 'string' and r.o or nil,
              type(r.p) == 'string' and r.p or nil,
              type(r.c) == 'string' and r.c or nil, r.s)
      end
    end
  end
end
return {active, n > 0 and st.m or '', st.t or '',
  fmt(n > 0 and num(st.x) - NOW or 0), fmt(delay), fmt(seen()), holders,
  waiters}
