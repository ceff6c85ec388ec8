-- tick: a gateway with waiters on the lock says it is alive, and hands the
-- lock on if it became free by expiry or the end of lock-delay; with
-- observers, it also asks for change events until its next tick is due.
-- args: 3 gateway id, 4 liveness ms, 5 '1' when observing
-- Reply: {'queued', wake_in}
begin(KEYS, ARGV)
local until_ = NOW + tonumber(ARGV[4])
if ARGV[5] == '1' then
  if until_ > num(st.ob) then put('ob', fmt(until_)) end
else
  put('g:' .. ARGV[3], fmt(until_))
end
dirty = true
advance()
return done({'queued', wake_in()})
