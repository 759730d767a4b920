-- wrk script of the benchmarks (crosscheck, overload, soak): POST one order, pause each
-- connection between calls (Debian's wrk has no rate option), and print the count of each HTTP
-- status at the end, since wrk itself only says "Non-2xx". Values come from the environment.
wrk.method = "POST"
wrk.body = os.getenv("WIRELAB_WRK_BODY")
wrk.headers["Content-Type"] = "application/json"

local pause_ms = tonumber(os.getenv("WIRELAB_WRK_DELAY_MS") or "0")
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
end

function delay()
  return pause_ms
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
