-- prelude/undo.lua - undo records: a renewal or a re-entry whose answer
-- was lost.
--
-- The gateway sends each renewal and re-entry with an undo id (letter
-- 'u', the call's last argument). Such a call records in its holder's
-- a: json what it changed: in the list `u` (the last UNDO_KEEP calls
-- not undone, oldest first) {i = id, b = "<ttl>:<expiry>" before it, a =
-- the same after it, r = 1 for a re-entry (its hold)}. When the gateway
-- cannot learn what a call did and answers 503, it sends giveback.lua with
-- the id: the call's hold goes, and its expiry is taken out of the chain
-- (the last call's goes back to what it was before it, unless a call
-- without an id moved it since; an earlier call's "before" becomes the
-- next one's), so undoing several calls in any order leaves what none of
-- them did. An id undone, or undone before its call came, is kept in the
-- list `x` (the last UNDO_SPENT), so that the call does nothing if it
-- comes. The records live in a: so that they leave with their holder
-- (del1()). A value or owner a call set is not taken back. A grant whose
-- a: field an older library did not write gets no records.
local UNDO_KEEP, UNDO_SPENT = 4, 8

-- The holder's a: json as a table (nil: none).
local function about_get(lease)
  local raw = hget('a:' .. lease)
  if not raw then return nil end
  local ok, a = pcall(cjson.decode, raw)
  if ok and type(a) == 'table' then return a end
  return nil
end

-- A's list named F (nil when there is none, or not a list).
local function about_list(a, f)
  local l = a and a[f]
  if type(l) == 'table' and l[1] ~= nil then return l end
  return nil
end

-- Was the call with undo id ID undone before it came?
local function undo_cancelled(a, id)
  local x = id and about_list(a, 'x')
  if not x then return false end
  for _, v in ipairs(x) do if v == id then return true end end
  return false
end

-- Appends V to A's list F, the oldest going past MAX.
local function about_push(a, f, v, max)
  local l = about_list(a, f) or {}
  l[#l + 1] = v
  while #l > max do table.remove(l, 1) end
  a[f] = l
end

-- A holder value's "<ttl>:<expiry>" (nil: not one).
local function ttl_exp(hv)
  return hv and smatch(hv, '^%d+:(%d+:%d+)')
end

-- Records call ID, which changed LEASE's holder from value BEFORE, in A
-- (about_get()'s, read before the call changed anything).
local function undo_record(lease, a, id, before, reentry)
  if not id or not a or not before then return end
  local r = {i = id, b = ttl_exp(before), a = ttl_exp(hget('h:' .. lease))}
  if reentry then r.r = 1 end
  about_push(a, 'u', r, UNDO_KEEP)
  put1('a:' .. lease, cjson.encode(a))
end
