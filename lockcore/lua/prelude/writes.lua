-- prelude/writes.lua - the records of admitted writes (F, and ft, fm,
-- aw of S): the gateways that wait on them, and every end of a grant
-- reaching them.
--
-- Invariants: the writes of F are recorded no later than their grant's
-- end (or the margin from the moment it moved earlier), and their
-- gateways hear of every move earlier (follow_end(), which done() runs
-- before it writes S); F holds writes only while ft is set.

-- A write id is "<gateway id>-w<n>"; its gateway listens on fg:gw:<id>.
local function gateway_of(wid) return smatch(wid, '^(.*)%-w%d+$') end

-- A write waits on F: its gateway hears when a write of F ends.
local function wait_for_writes(wid)
  local gw = gateway_of(wid)
  if not gw then return end
  local aw = st.aw or ''
  if string.find(' ' .. aw .. ' ', ' ' .. gw .. ' ', 1, true) then return end
  put('aw', aw == '' and gw or (aw .. ' ' .. gw))
end

-- A write of F ended: every gateway with writes waiting asks again (once).
local function wake_writers(aw)
  for gw in string.gmatch(aw, '%S+') do
    redis.call('PUBLISH', 'fg:gw:' .. gw, 'w ' .. NAME)
  end
end

-- Every end of a lease reaches its writes (docs/safety.md section 3). When
-- this call ended the grant that F's writes were admitted under (release,
-- give-back, break), or moved its end earlier (a renewal or re-entry with
-- a smaller ttl, a shared holder leaving), each of those writes is
-- recorded no later than the new end (a write admitted against the old
-- end may be running now: it gets the margin from now at the most), and
-- its gateway is told: "x <write id>" to abort it, "e <write id> <ms>"
-- that the grant now ends in ms (the gateway clamps the write's deadline
-- at once, then asks for it again). Writes waiting on F ask again too. An end by
-- expiry needs nothing: every record already ends by the grant's end.
-- One place for all of them: done() calls it before writing S.
local function follow_end()
  if not st.ft or st.ft ~= T0 or not HELD0 then return end
  local ended = not held() or st.t ~= T0
  local new_end = ended and NOW or num(st.x)
  if new_end >= X0 then return end
  local soon = NOW + math.max(num(st.fm), MARGIN_FLOOR)
  local untl = math.max(new_end, soon)
  local all = rcall('ZRANGE', F, 0, -1, 'WITHSCORES')
  local top = false
  for i = 1, #all, 2 do
    local wid, score = all[i], tonum(all[i + 1])
    if score > NOW then
      if score > untl then
        rcall('ZADD', F, fmt(untl), wid)
        score = untl
      end
      if not top or score > top then top = score end
      local gw = gateway_of(wid)
      if gw and ended then
        rcall('PUBLISH', 'fg:gw:' .. gw, 'x ' .. wid)
      elseif gw then
        rcall('PUBLISH', 'fg:gw:' .. gw, 'e ' .. wid .. ' ' ..
          fmt(new_end - NOW))
      end
    end
  end
  if not top and ended then
    if #all > 0 then rcall('DEL', F) end
    del('ft', 'fm')
  end
  ftop = top
  if st.aw then
    wake_writers(st.aw)
    del('aw')
  end
  dirty = true
end
