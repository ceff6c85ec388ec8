-- wrk script: fencegate acquire+release cycles.
--
-- Run with -t N -c N (one connection per wrk thread): the Lua state is per
-- thread, so each connection runs its own little state machine:
--   POST   /_fence/v1/locks/<name>  {"ttl_ms":30000}   -> 200 {"lease":...}
--   DELETE /_fence/v1/locks/<name>  Fence-Lease: lease -> 204
-- A cycle counts only when the DELETE answered 204. Every other answer is
-- counted as an error (by status) and the connection moves on to a fresh
-- lock name, so a lock left held by a failure can never stall the run.
-- Usage: wrk -t32 -c32 -d10s -s fence_cycle.lua URL -- <name-prefix>

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local prefix = "fgbench"
local state = "acquire"
local lease = nil
local gen = 0
cycles = 0
errors = 0
errs = {}
errsummary = ""
sample = ""

function init(args)
   if args[1] then prefix = args[1] end
end

local function lockname()
   return prefix .. "-" .. tostring(id) .. "-" .. tostring(gen)
end

-- errs as "k=v,k=v" (a flat string travels between Lua states reliably)
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
      sample = what .. " " .. lockname() .. " -> " .. tostring(status) .. " " .. string.sub(body or "", 1, 200)
   end
   gen = gen + 1 -- never reuse a name whose state we no longer know
   state = "acquire"
end

function request()
   local path = "/_fence/v1/locks/" .. lockname()
   if state == "acquire" then
      return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, '{"ttl_ms":30000}')
   end
   return wrk.format("DELETE", path, { ["Fence-Lease"] = lease })
end

function response(status, headers, body)
   if state == "acquire" then
      if status == 200 then
         local l = string.match(body or "", '"lease"%s*:%s*"([^"]+)"')
         if l then
            lease = l
            state = "release"
         else
            fail("acquire-nolease", status, body)
         end
      else
         fail("acquire", status, body)
      end
   else
      if status == 204 then
         cycles = cycles + 1
         state = "acquire"
      else
         fail("release", status, body)
      end
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
