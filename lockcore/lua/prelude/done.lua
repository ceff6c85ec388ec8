-- prelude/done.lua - the end of every call: S written once, and the
-- keys' expiry moved with what they hold.
--
-- Invariants: every script ends with done(), whose keep() moves the keys'
-- expiry whenever what they hold moved, so they outlive it by exactly the
-- idle-forget time (but for release's short path, which may leave a
-- grant's expiry in place: at most an eighth of that time later). The one
-- exception: the short paths of acquire (a grant on a free lock), release
-- (of the only holder) and admit (a write under the live token, nothing
-- older in F) write S themselves, one HSET or HDEL, and end with keep_to()
-- (or keep_new_f()) instead of done(); each is taken only where done()
-- would have had nothing else to do (follow_end() no end to follow, no
-- other field to write). A free lock with no waiters is one key; an
-- unused one is none.

-- The lock's horizon without F: its grant's expiry (X, 0 when free), its
-- lock-delay (D), its waiters' deadlines (QD, 0 when none), its observers
-- (OB), its given-back leases (KX). horizon() is it for S as `st` has it.
local function horizon_at(x, d, qd, ob, kx)
  local h = NOW
  if x > h then h = x end
  if d > h then h = d end
  if qd > h then h = qd end
  if ob > h then h = ob end
  if kx > h then h = kx end
  return h
end
local function horizon()
  return horizon_at(held() and num(st.x) or 0, num(st.d),
    num(st.qn) > 0 and num(st.qd) or 0, num(st.ob), num(st.kx))
end

-- Moves every existing key's expiry to IDLE ms past the lock's horizon H
-- (without F), its writes' records included: QUEUED, there are waiters
-- (Q and W exist); WRITES, ft is set (F may hold records). keep() is it
-- for S as `st` has it; a short path, which has no `st`, passes what it
-- knows.
local function keep_to(h, queued, writes)
  if writes and ftop == nil then
    local top = rcall('ZRANGE', F, -1, -1, 'WITHSCORES')
    ftop = top[2] and tonum(top[2]) or false
  end
  if writes and ftop and ftop > h then h = ftop end
  local ms = dur(h - NOW + IDLE)
  rcall('PEXPIRE', S, ms)
  if queued then
    rcall('PEXPIRE', Q, ms)
    rcall('PEXPIRE', W, ms)
  end
  if writes and ftop then rcall('PEXPIRE', F, ms) end
end
local function keep() keep_to(horizon(), num(st.qn) > 0, st.ft) end

-- CMD S with the list's items as arguments (in slices: unpack is bounded;
-- even-sized, so HSET's pairs stay whole).
local function hcall(cmd, list)
  for i = 1, #list, 1000 do
    rcall(cmd, S, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- Ends every call that began: writes S, then moves the keys' expiry if
-- their horizon moved. Returns the reply.
local function done(reply)
  follow_end()
  local hs, hd, nh, nd = {}, {}, 0, 0
  for f, v in pairs(pend) do
    if v then
      hs[nh + 1], hs[nh + 2] = f, v
      nh = nh + 2
    else
      nd = nd + 1
      hd[nd] = f
    end
  end
  if nh > 0 then hcall('HSET', hs) end
  if nd > 0 then hcall('HDEL', hd) end
  if dirty then keep() end
  return reply
end

-- A write was recorded in F under the live grant, no later than the
-- grant's expiry: the horizon did not move. F has an expiry unless this
-- call created it; then it gets the lock's.
local function keep_new_f()
  if dirty then return end
  rcall('PEXPIRE', F, fmt(horizon() - NOW + IDLE), 'NX')
end
