-- wrk script: etcd v3 lock API cycles through etcd's JSON gateway, any
-- number of connections per wrk thread (run.py uses -t2 -c32).
--
-- run.py grants the leases before the run ({"TTL":600}) and passes their
-- IDs; wrk thread i uses lease i (modulo their number) for all its locks.
-- wrk keeps one Lua state per thread and does not say which connection a
-- request() or response() belongs to, so the state is per thread:
--   * the thread goes round a ring of its own lock names,
--     b64(<prefix>-<thread>-<0 .. ring-1>);
--   * request(): if a held lock key waits for its unlock, unlock it;
--     otherwise lock the next name in the ring;
--   * response(): 200 carrying "key" queues that key for unlock; 200
--     without "key" or "error" completes one cycle (the unlock).
--     POST <api>/lock/lock   {"name": b64(name), "lease": ID} -> 200 {"key": k}
--     POST <api>/lock/unlock {"key": k}                       -> 200
-- A cycle (lock + unlock) is the analogue of fencegate's acquire + release.
-- Any other answer counts as an error, by status.
-- Usage: wrk -t2 -c32 -d10s -s etcd_cycle.lua URL -- <name-prefix> <api> <lease,lease,...> [ring]

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local prefix = "fgbench"
local api = "/v3"
local leaseid = nil
local ring = 4096
local slot = 0
local keys = {} -- lock keys held, not yet sent for unlock
cycles = 0
errors = 0
errs = {}
errsummary = ""
sample = ""

local function die(msg)
   io.stderr:write("etcd_cycle.lua: " .. msg .. "\n")
   os.exit(2)
end

function init(args)
   if args[1] then prefix = args[1] end
   if args[2] then api = args[2] end
   local ids = {}
   for l in string.gmatch(args[3] or "", "%d+") do table.insert(ids, l) end
   if #ids == 0 then die("no lease IDs given") end
   leaseid = ids[id % #ids + 1]
   if args[4] then ring = tonumber(args[4]) or ring end
   prefix = prefix .. "-" .. tostring(id) .. "-"
end

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
   local out = {}
   for i = 1, #s, 3 do
      local a, b, c = string.byte(s, i, i + 2)
      local n = a * 65536 + (b or 0) * 256 + (c or 0)
      local c1 = math.floor(n / 262144) % 64
      local c2 = math.floor(n / 4096) % 64
      local c3 = math.floor(n / 64) % 64
      local c4 = n % 64
      table.insert(out, string.sub(b64chars, c1 + 1, c1 + 1))
      table.insert(out, string.sub(b64chars, c2 + 1, c2 + 1))
      table.insert(out, b and string.sub(b64chars, c3 + 1, c3 + 1) or "=")
      table.insert(out, c and string.sub(b64chars, c4 + 1, c4 + 1) or "=")
   end
   return table.concat(out)
end

local function errstr()
   local out = {}
   for k, v in pairs(errs) do table.insert(out, k .. "=" .. v) end
   return table.concat(out, ",")
end

local function fail(what, status, body)
   errors = errors + 1
   local k = what .. ":" .. tostring(status)
   errs[k] = (errs[k] or 0) + 1
   errsummary = errstr()
   if sample == "" then
      sample = what .. " -> " .. tostring(status) .. " " .. string.sub(body or "", 1, 200)
   end
end

local hdr = { ["Content-Type"] = "application/json" }
local names = {} -- b64 of each ring slot's name, made once

function request()
   local k = table.remove(keys)
   if k then
      return wrk.format("POST", api .. "/lock/unlock", hdr, '{"key":"' .. k .. '"}')
   end
   slot = (slot + 1) % ring
   local n = names[slot]
   if not n then
      n = b64(prefix .. tostring(slot))
      names[slot] = n
   end
   return wrk.format("POST", api .. "/lock/lock", hdr, '{"name":"' .. n .. '","lease":"' .. leaseid .. '"}')
end

function response(status, headers, body)
   if status ~= 200 or string.find(body or "", '"error"', 1, true) then
      fail("status", status, body)
      return
   end
   local k = string.match(body or "", '"key"%s*:%s*"([^"]+)"')
   if k then
      table.insert(keys, k)
   else
      cycles = cycles + 1
   end
end

function done(summary, latency, requests)
   local total, errtotal, kinds, samp = 0, 0, {}, ""
   for _, t in ipairs(threads) do
      total = total + (t:get("cycles") or 0)
      errtotal = errtotal + (t:get("errors") or 0)
      local s = t:get("errsummary") or ""
      for k, v in string.gmatch(s, "([^,=]+)=(%d+)") do
         kinds[k] = (kinds[k] or 0) + tonumber(v)
      end
      local sm = t:get("sample")
      if samp == "" and sm and sm ~= "" then samp = sm end
   end
   local kl = {}
   for k, v in pairs(kinds) do table.insert(kl, k .. "=" .. v) end
   local secs = summary.duration / 1e6
   local e = summary.errors
   io.write(string.format("RESULT cycles=%d secs=%.3f cps=%.1f app_errors=%d sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d http_ge400=%d requests=%d req_p50_ms=%.3f req_p99_ms=%.3f\n",
      total, secs, total / secs, errtotal, e.connect, e.read, e.write, e.timeout, e.status,
      summary.requests, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
   io.write("ERRKINDS " .. table.concat(kl, ",") .. "\n")
   io.write("ERRSAMPLE " .. string.gsub(samp, "%s+", " ") .. "\n")
end
