-- wrk script for issue 32's event throughput: POSTs JSON arrays of WRK_BATCH click events
-- (default 100) to /events, cycling the shown hits of the file WRK_QUERY_IDS (one per line:
-- query id, object id and position, tab-separated, as the answers showed them: the server
-- refuses a click on what its answer did not show), and counts the 2xx answers (acknowledged
-- batches) per thread.
--
--   WRK_QUERY_IDS=ids.txt wrk -t2 -c4 -d20s -s bench/wrk_events.lua http://127.0.0.1:8080
--
-- done() prints one line `wrk_json {...}` with the 2xx count for bench/events_load.py.

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local bodies = {}
local n = 0
local i = 0
ok = 0
non2xx = 0

function init(args)
  local file = os.getenv("WRK_QUERY_IDS")
  local batch = tonumber(os.getenv("WRK_BATCH") or "100")
  local shown = {}
  for line in io.lines(file) do
    local qid, object, position = line:match("^([^\t]+)\t([^\t]+)\t(%d+)$")
    if qid then table.insert(shown, { qid, object, tonumber(position) }) end
  end
  -- 50 distinct bodies, each `batch` clicks spread over the shown hits.
  local k = 0
  for b = 1, 50 do
    local events = {}
    for e = 1, batch do
      k = k + 1
      local hit = shown[(k * 7919 % #shown) + 1]
      table.insert(events, string.format(
        '{"action_name":"click","query_id":"%s","object_id":"%s","position":%d,"timestamp":%d}',
        hit[1], hit[2], hit[3], 1795845600000 + k))
    end
    table.insert(bodies, wrk.format("POST", "/events",
      { ["Content-Type"] = "application/json" }, "[" .. table.concat(events, ",") .. "]"))
  end
  n = #bodies
  i = (id or 0) * 7 % n
end

function request()
  i = i % n + 1
  return bodies[i]
end

function response(status, headers, body)
  if status >= 200 and status <= 299 then ok = ok + 1 else non2xx = non2xx + 1 end
end

function done(summary, latency, _requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do
    good = good + t:get("ok")
    bad = bad + t:get("non2xx")
  end
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'wrk_json {"requests":%d,"ok":%d,"non2xx":%d,"duration_s":%.3f,"p50_ms":%.3f,"p99_ms":%.3f,' ..
    '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d}}\n',
    summary.requests, good, bad, secs, latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, e.connect, e.read, e.write, e.timeout))
end
