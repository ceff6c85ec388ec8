-- wrk script: 1 KiB object GETs or PUTs, optionally fenced (driven by run.sh).
--
-- Each wrk thread works on one object, <path-prefix><id % nobj>, and sends
-- the same request over and over (a static request: no Lua runs per
-- request, so wrk costs the same for every target). With -t N -c N every
-- connection has its own object; with fewer threads a thread's connections
-- share one (fine for GET).
--
--   GET : GET <path-prefix><i>
--   PUT : PUT <path-prefix><i> with an <size>-byte body; when a token file is
--         given, also `Fencing-Token: <sequencer of object i>`. run.sh
--         acquires the locks (one per object, named by the path without its
--         leading '/') before the run and writes "<i> <sequencer>" lines.
--
-- Usage: wrk -tN -cN -d10s -s object_io.lua URL -- <tag> GET|PUT <path-prefix> <nobj> [size] [token-file]
-- (<tag> is ignored: run.sh passes a different one for the warm-up run.)
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

function init(args)
   local method = args[2] or "GET"
   local prefix = args[3] or "/obj-"
   local nobj = tonumber(args[4] or "1") or 1
   local size = tonumber(args[5] or "1024") or 1024
   local tokfile = args[6]
   local i = id % nobj
   wrk.method = method
   wrk.path = prefix .. tostring(i)
   if method == "PUT" then
      wrk.body = string.rep("x", size)
      wrk.headers["Content-Type"] = "application/octet-stream"
   end
   if tokfile and tokfile ~= "" then
      local f = io.open(tokfile, "r")
      if not f then die("cannot open token file " .. tokfile) end
      local tok = nil
      for line in f:lines() do
         local n, s = string.match(line, "^(%d+)%s+(%S+)")
         if n and tonumber(n) == i then tok = s end
      end
      f:close()
      if not tok then die("no sequencer for object " .. i .. " in " .. tokfile) end
      wrk.headers["Fencing-Token"] = tok
   end
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
