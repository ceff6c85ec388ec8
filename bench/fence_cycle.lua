-- wrk script: fencegate acquire+release cycles, any number of connections
-- per wrk thread (run.py uses -t2 -c32).
--
-- wrk keeps one Lua state per thread and does not say which connection a
-- request() or response() belongs to, so the state is per thread:
--   * the thread goes round a ring of its own lock names,
--     <prefix>-<thread>-<0 .. ring-1>;
--   * request(): if a granted lease waits for its release, DELETE it;
--     otherwise POST an acquire of the next name in the ring;
--   * response(): 200 carrying "name" and "lease" queues that lease for
--     release; 204 completes one cycle.
--     POST   /_fence/v1/locks/<name>  {"ttl_ms":30000}   -> 200 {"name":..,"lease":..}
--     DELETE /_fence/v1/locks/<name>  Fence-Lease: lease -> 204
-- A release may go out on another connection than its acquire (a lease is
-- not tied to a connection). The ring is long, so a name comes round again
-- only long after its release was answered; should it still be held (a
-- release that failed), the acquire fails and counts as an error. Every
-- answer other than the two above counts as an error, by status.
-- header-file: `Name: value` lines sent with every request (a bearer key);
-- a file, not wrk's -H, which wrk.format() leaves out when given headers,
-- and which would show the key in ps.
-- Usage: wrk -t2 -c32 -d10s -s fence_cycle.lua URL -- <name-prefix> [ring] [header-file]

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local prefix = "fgbench"
local ring = 4096
local slot = 0
local held = {} -- {name, lease} granted, not yet sent for release
cycles = 0
acquires = 0
errors = 0
errs = {}
errsummary = ""
sample = ""

local acq_hdr = { ["Content-Type"] = "application/json" }
local acq_body = '{"ttl_ms":30000}'
local extra = {}

local function read_headers(path)
   local f = io.open(path, "r")
   if not f then
      io.stderr:write("fence_cycle.lua: cannot open header file " .. path .. "\n")
      os.exit(2)
   end
   for line in f:lines() do
      local n, v = string.match(line, "^([^:%s]+):%s*(.-)%s*$")
      if n then
         extra[n] = v
      elseif string.match(line, "%S") then
         io.stderr:write("fence_cycle.lua: not a header line in " .. path .. "\n")
         os.exit(2)
      end
   end
   f:close()
end

function init(args)
   if args[1] then prefix = args[1] end
   if args[2] then ring = tonumber(args[2]) or ring end
   if args[3] and args[3] ~= "" then read_headers(args[3]) end
   for n, v in pairs(extra) do acq_hdr[n] = v end
   prefix = prefix .. "-" .. tostring(id) .. "-"
end

-- errs as "k=v,k=v" (a flat string travels between Lua states reliably)
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

function request()
   local h = table.remove(held)
   if h then
      local rh = { ["Fence-Lease"] = h[2] }
      for n, v in pairs(extra) do rh[n] = v end
      return wrk.format("DELETE", "/_fence/v1/locks/" .. h[1], rh)
   end
   slot = (slot + 1) % ring
   return wrk.format("POST", "/_fence/v1/locks/" .. prefix .. tostring(slot), acq_hdr, acq_body)
end

function response(status, headers, body)
   if status == 204 then
      cycles = cycles + 1
   elseif status == 200 then
      local n = string.match(body or "", '"name"%s*:%s*"([^"]+)"')
      local l = string.match(body or "", '"lease"%s*:%s*"([^"]+)"')
      if n and l then
         acquires = acquires + 1
         table.insert(held, { n, l })
      else
         fail("200-without-name-or-lease", status, body)
      end
   else
      fail("status", status, body)
   end
end

function done(summary, latency, requests)
   local total, nacq, errtotal, kinds, samp = 0, 0, 0, {}, ""
   for _, t in ipairs(threads) do
      total = total + (t:get("cycles") or 0)
      nacq = nacq + (t:get("acquires") or 0)
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
   io.write(string.format("RESULT cycles=%d acquires=%d secs=%.3f cps=%.1f app_errors=%d sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d http_ge400=%d requests=%d req_p50_ms=%.3f req_p99_ms=%.3f\n",
      total, nacq, secs, total / secs, errtotal, e.connect, e.read, e.write, e.timeout, e.status,
      summary.requests, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
   io.write("ERRKINDS " .. table.concat(kl, ",") .. "\n")
   io.write("ERRSAMPLE " .. string.gsub(samp, "%s+", " ") .. "\n")
end
