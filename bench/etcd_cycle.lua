-- wrk script: etcd v3 lock API cycles through etcd's JSON gateway.
--
-- Run with -t N -c N (one connection per wrk thread; the Lua state is per
-- thread, so each connection runs its own state machine). Each connection
-- grants ONE lease once ({"TTL":30}) and then reuses it for every cycle:
--   POST <api>/lock/lock   {"name": b64(name), "lease": ID} -> 200 {"key": k}
--   POST <api>/lock/unlock {"key": k}                       -> 200
-- A cycle (lock + unlock, the analogue of fencegate's acquire + release)
-- counts only when the unlock answered 200. Any other answer counts as an
-- error (by step:status) and the connection moves on to a fresh lock name.
-- Usage: wrk -t32 -c32 -d10s -s etcd_cycle.lua URL -- <name-prefix> [/v3]

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local prefix = "fgbench"
local api = "/v3"
local state = "grant"
local leaseid = nil
local key = nil
local gen = 0
cycles = 0
errors = 0
grants = 0
errs = {}
errsummary = ""
sample = ""

function init(args)
   if args[1] then prefix = args[1] end
   if args[2] then api = args[2] end
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

local function lockname()
   return b64(prefix .. "-" .. tostring(id) .. "-" .. tostring(gen))
end

function errstr()
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

function request()
   if state == "grant" then
      return wrk.format("POST", api .. "/lease/grant", hdr, '{"TTL":30}')
   elseif state == "lock" then
      return wrk.format("POST", api .. "/lock/lock", hdr,
         '{"name":"' .. lockname() .. '","lease":"' .. leaseid .. '"}')
   end
   return wrk.format("POST", api .. "/lock/unlock", hdr, '{"key":"' .. key .. '"}')
end

function response(status, headers, body)
   if state == "grant" then
      local l = status == 200 and string.match(body or "", '"ID"%s*:%s*"?(%d+)')
      if l then
         leaseid = l
         grants = grants + 1
         state = "lock"
      else
         fail("grant", status, body)
      end
   elseif state == "lock" then
      local k = status == 200 and string.match(body or "", '"key"%s*:%s*"([^"]+)"')
      if k then
         key = k
         state = "unlock"
      else
         fail("lock", status, body)
         gen = gen + 1
      end
   else
      if status == 200 and not string.find(body or "", '"error"', 1, true) then
         cycles = cycles + 1
      else
         fail("unlock", status, body)
         gen = gen + 1
      end
      state = "lock"
   end
end

function done(summary, latency, requests)
   local total, errtotal, ngrants, kinds, samp = 0, 0, 0, {}, ""
   for _, t in ipairs(threads) do
      total = total + (t:get("cycles") or 0)
      errtotal = errtotal + (t:get("errors") or 0)
      ngrants = ngrants + (t:get("grants") or 0)
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
   io.write(string.format("RESULT cycles=%d secs=%.3f cps=%.1f app_errors=%d sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d http_ge400=%d requests=%d req_p50_ms=%.3f req_p99_ms=%.3f lease_grants=%d\n",
      total, secs, total / secs, errtotal, e.connect, e.read, e.write, e.timeout, e.status,
      summary.requests, latency:percentile(50) / 1000, latency:percentile(99) / 1000, ngrants))
   io.write("ERRKINDS " .. table.concat(kl, ",") .. "\n")
   io.write("ERRSAMPLE " .. string.gsub(samp, "%s+", " ") .. "\n")
end
