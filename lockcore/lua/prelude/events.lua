-- prelude/events.lua - what a call did to its lock, appended to the lock's
-- event stream (contract v1.5) when the gateway gave the call the stream
-- (EV, start()): granted (every new holder: a fresh grant, a shared join,
-- a waiter handed the lock), released (a lease's last hold left),
-- broken, given_back. A re-entry and a renewal record nothing.
--
-- One entry: XADD EV MAXLEN ~ EV_MAX * k <kind> l <lock> and, of t
-- token, p principal, o owner, c client, g gateway id, d detail (a JSON
-- object's text), those that are not empty. Never a lease, a key or a
-- sequencer: a lease is what lets its holder act, and the stream is read
-- by whoever may observe.
--
-- Cost: one XADD per event and nothing else on a grant: the arguments go
-- in one table kept from call to call (EVT, filled from slot 11 on and
-- unpacked to where this event ends), and a grant's detail is formatted
-- once per mode and ttl (GDX, GDS).
local EVT = {'XADD', false, 'MAXLEN', '~', false, '*', 'k', false, 'l', false,
  false, false, false, false, false, false, false, false, false, false,
  false, false, false, false}

-- Appends the event KIND; TS the token's digits, P, O, C principal, owner
-- and client (nil or '': none), G the gateway id (nil: the call's), D
-- the detail's text (nil: none).
local function event(kind, ts, p, o, c, g, d)
  local a, n = EVT, 10
  a[2], a[5], a[8], a[10] = EV, EV_MAX, kind, NAME
  if ts then a[11], a[12], n = 't', ts, 12 end
  if p and p ~= '' then a[n + 1], a[n + 2], n = 'p', p, n + 2 end
  if o and o ~= '' then a[n + 1], a[n + 2], n = 'o', o, n + 2 end
  if c and c ~= '' then a[n + 1], a[n + 2], n = 'c', c, n + 2 end
  g = g or EV_G
  if g and g ~= '' then a[n + 1], a[n + 2], n = 'g', g, n + 2 end
  if d then a[n + 1], a[n + 2], n = 'd', d, n + 2 end
  -- An event is a record of the change, never a part of it: a stream
  -- Redis cannot append to (a key of another type, its ids used up, a user
  -- without +xadd) loses the event and not the call, which has written
  -- part of its change already (a function's writes stay when it fails).
  redis.pcall(unpack(a, 1, n))
end

-- A JSON string's text (the detail is put together by hand; only a
-- string that needs escaping goes through the encoder).
local function jstr(s)
  if string.find(s, '^[%w%.:%-_@/ ]*$') then return '"' .. s .. '"' end
  return cjson.encode(s)
end

-- A new holder: granted, detail {"mode", "ttl_ms"[, "waited": true]}.
-- TTL a number (the holder's ttl); G the waiter's gateway for a waiter
-- handed the lock (WAITED), else nil (the call's).
local GDX, GDS, NGD = {}, {}, 0
local function ev_granted(ts, mode, ttl, p, o, c, g, waited)
  local d
  if waited then
    d = '{"mode":"' .. (mode == 's' and 'shared' or 'exclusive') ..
      '","ttl_ms":' .. sformat('%d', ttl) .. ',"waited":true}'
  else
    if NGD > 64 then GDX, GDS, NGD = {}, {}, 0 end
    local cache = mode == 's' and GDS or GDX
    d = cache[ttl]
    if not d then
      d = '{"mode":"' .. (mode == 's' and 'shared' or 'exclusive') ..
        '","ttl_ms":' .. sformat('%d', ttl) .. '}'
      cache[ttl], NGD = d, NGD + 1
    end
  end
  event('granted', ts, p, o, c, g, d)
end

-- The owner and client of a holder's a: json (RAW, nil: none). Without
-- an escape in it, read by pattern (about_of() writes the strings as
-- "o":"..." and "c":"..."; cjson.encode of undo records too): a table
-- decoded costs a release more than its XADD.
local function about_oc(raw)
  if not raw then return nil, nil end
  if not string.find(raw, '\\', 1, true) then
    return smatch(raw, '"o":"([^"]*)"'), smatch(raw, '"c":"([^"]*)"')
  end
  local ok, a = pcall(cjson.decode, raw)
  if not ok or type(a) ~= 'table' then return nil, nil end
  local o, c = a.o, a.c
  return type(o) == 'string' and o or nil, type(c) == 'string' and c or nil
end

-- A holder's event (released, given_back): its principal P, owner and
-- client from its a: json RAW, the token TS.
local function ev_holder(kind, ts, p, raw, d)
  local o, c = about_oc(raw)
  event(kind, ts, p, o, c, nil, d)
end

-- given_back's detail: {"reason": WHY} (nil: none known).
local function gb_detail(why)
  if not why or why == '' then return nil end
  return '{"reason":' .. jstr(why) .. '}'
end
