-- wrk script: 1 KiB object GETs or PUTs, optionally fenced (driven by run.py).
--
-- The objects are <path-prefix>0 .. <path-prefix><nobj-1>; wrk thread t of
-- <nthreads> owns those whose number is t modulo nthreads, and its
-- connections take them in turn, one request each. The requests are made
-- once in init(); request() only hands the next one out, so wrk costs the
-- same per request whatever the target.
--
--   GET : GET <path-prefix><i>
--   PUT : PUT <path-prefix><i> with a <size>-byte body; when a token file is
--         given, also `Fencing-Token: <sequencer of object i>`. run.py
--         acquires the locks (one per object, named by the path without its
--         leading '/') before the run and writes "<i> <sequencer>" lines.
--   header-file: `Name: value` lines added to every request (a bearer key,
--         `Connection: close`). A file, not wrk's -H: wrk.format() leaves
--         -H out when given headers, and a key on the command line would
--         show in ps.
--   pace-ms: each connection waits that long on the average after an
--         answer before its next request (wrk's delay()), so that C
--         connections offer at most C * 1000 / pace-ms requests a second:
--         a load below what any target saturates at, whose p50 is the
--         path's more than a queue's. wrk times a request from its
--         sending, the wait apart.
--
-- Usage: wrk -tT -cC -d10s -s object_io.lua URL -- <tag> GET|PUT <path-prefix> <nobj> <nthreads> [size] [token-file] [header-file] [pace-ms]
-- (<tag> is ignored: run.py passes a different one for the warm-up run;
-- an empty token-file or header-file is none, a pace of 0 or none no wait.)
-- Answers >= 400 are counted by wrk itself (http_ge400 below).

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local function die(msg)
   io.stderr:write("object_io.lua: " .. msg .. "\n")
   os.exit(2)
end

local reqs = {}
local nreq = 0
local k = 0

-- read_headers FILE -> { name = value } from its `Name: value` lines
local function read_headers(path)
   local hs = {}
   local f = io.open(path, "r")
   if not f then die("cannot open header file " .. path) end
   for line in f:lines() do
      local n, v = string.match(line, "^([^:%s]+):%s*(.-)%s*$")
      if n then hs[n] = v elseif string.match(line, "%S") then die("not a header line in " .. path) end
   end
   f:close()
   return hs
end

function init(args)
   local method = args[2] or "GET"
   local prefix = args[3] or "/obj-"
   local nobj = tonumber(args[4] or "1") or 1
   local nthreads = tonumber(args[5] or "1") or 1
   local size = tonumber(args[6] or "1024") or 1024
   local tokfile = args[7]
   local extra = {}
   if args[8] and args[8] ~= "" then extra = read_headers(args[8]) end
   local pace = tonumber(args[9] or "0") or 0
   -- (wrk asks for delay() after init(): defined only when pacing.) The
   -- wait is drawn from pace-ms/2 .. 3*pace-ms/2 (whole ms, pace-ms on
   -- the average), so that the connections do not fall into step and
   -- arrive as one burst every pace-ms.
   if pace > 0 then
      local lo = math.floor(pace / 2)
      local hi = 2 * pace - lo
      math.randomseed(os.time() * 1000 + id)
      delay = function() return math.random(lo, hi) end
   end
   local toks = {}
   if tokfile and tokfile ~= "" then
      local f = io.open(tokfile, "r")
      if not f then die("cannot open token file " .. tokfile) end
      for line in f:lines() do
         local n, s = string.match(line, "^(%d+)%s+(%S+)")
         if n then toks[tonumber(n)] = s end
      end
      f:close()
   end
   local body = nil
   if method == "PUT" then body = string.rep("x", size) end
   for i = id % nthreads, nobj - 1, nthreads do
      local h = {}
      for n, v in pairs(extra) do h[n] = v end
      if method == "PUT" then h["Content-Type"] = "application/octet-stream" end
      if tokfile and tokfile ~= "" then
         if not toks[i] then die("no sequencer for object " .. i .. " in " .. tokfile) end
         h["Fencing-Token"] = toks[i]
      end
      table.insert(reqs, wrk.format(method, prefix .. tostring(i), h, body))
   end
   nreq = #reqs
   if nreq == 0 then die("thread " .. id .. " has no object (nobj " .. nobj .. ", nthreads " .. nthreads .. ")") end
end

function request()
   k = k % nreq + 1
   return reqs[k]
end

function done(summary, latency, requests)
   local secs = summary.duration / 1e6
   local e = summary.errors
   local ok = summary.requests - e.status
   io.write(string.format("RESULT requests=%d secs=%.3f rps=%.1f ok_rps=%.1f app_errors=0 sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d http_ge400=%d req_p50_ms=%.3f req_p99_ms=%.3f req_max_ms=%.3f bytes=%d\n",
      summary.requests, secs, summary.requests / secs, ok / secs, e.connect, e.read, e.write,
      e.timeout, e.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
      latency.max / 1000, summary.bytes))
end
