-- wrk script of the benchmarks (crosscheck, overload, soak): one call (by default POST the
-- order), a pause on each connection between calls (Debian's wrk has no rate option), and the
-- count of each HTTP status at the end, since wrk itself only says "Non-2xx". Values come from
-- the environment: the body as text (WIRELAB_WRK_BODY) or from a file (WIRELAB_WRK_BODY_FILE,
-- any bytes), and with WIRELAB_WRK_CHUNK_BYTES above 0 it goes with Transfer-Encoding: chunked,
-- one HTTP chunk per that many bytes (wrk.format would add a Content-Length).
wrk.method = os.getenv("WIRELAB_WRK_METHOD") or "POST"
local body_file = os.getenv("WIRELAB_WRK_BODY_FILE") or ""
if body_file ~= "" then
  local f = assert(io.open(body_file, "rb"))
  wrk.body = f:read("*a")
  f:close()
else
  wrk.body = os.getenv("WIRELAB_WRK_BODY")
end
if wrk.body == "" then
  wrk.body = nil
end
local content_type = os.getenv("WIRELAB_WRK_CONTENT_TYPE") or "application/json"
if content_type ~= "" and wrk.body then
  wrk.headers["Content-Type"] = content_type
end

local pause_ms = tonumber(os.getenv("WIRELAB_WRK_DELAY_MS") or "0")
local chunk_bytes = tonumber(os.getenv("WIRELAB_WRK_CHUNK_BYTES") or "0")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  if chunk_bytes > 0 then
    local body = wrk.body or ""
    local parts = {}
    for i = 1, #body, chunk_bytes do
      local piece = body:sub(i, i + chunk_bytes - 1)
      table.insert(parts, string.format("%x\r\n%s\r\n", #piece, piece))
    end
    table.insert(parts, "0\r\n\r\n")
    wrk.headers["Transfer-Encoding"] = "chunked"
    wrk.body = nil
    chunked = wrk.format() .. table.concat(parts)
  end
end

if chunk_bytes > 0 then
  function request()
    return chunked
  end
end

-- Only a paced run has the hook: with it wrk sends each connection's next call from a timer,
-- and the connections' timers firing together sent closed-loop calls in bursts that queued
-- behind each other (REST medians 2-5x vegeta's and wirelab-loadgen's at 5 connections).
if pause_ms > 0 then
  function delay()
    return pause_ms
  end
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

-- Each thread counts in its own Lua state; the main state reads them back here.
function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + n
    end
  end
  for status, n in pairs(total) do
    io.write(string.format("status %d %d\n", status, n))
  end
end
