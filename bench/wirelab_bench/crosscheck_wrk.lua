-- wrk script for the Locust cross-check (python -m wirelab_bench.crosscheck): POST one order and
-- pace each connection, since Debian's wrk has no rate option. Values come from the environment.
wrk.method = "POST"
wrk.body = os.getenv("WIRELAB_WRK_BODY")
wrk.headers["Content-Type"] = "application/json"

local pause_ms = tonumber(os.getenv("WIRELAB_WRK_DELAY_MS") or "0")

function delay()
  return pause_ms
end
