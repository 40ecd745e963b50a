-- wrk script for issue 12's HTTP load test: cycles the queries of a query file through
-- `GET /search?q=...` with the server's default parameters, and counts the responses that are
-- not 2xx (wrk's own summary counts only >= 400 and socket errors).
--
--   wrk -t2 -c4 -d30s --latency -s bench/wrk_search.lua http://127.0.0.1:8080 [-- EXTRA]
--
-- EXTRA (wrk argument after `--`, or the env var WRK_EXTRA; both are joined) is appended to every
-- query string as is, e.g. `k=10` or `k=10&model=bm25&rerank=false`.
-- WRK_QUERIES: the query file, one query per line (default bench/queries/rust-docs.txt,
-- relative to the directory wrk runs in). bench/http_search.sh wraps all this.
-- Besides wrk's report, done() prints one line `wrk_json {...}` for scripts.

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local function urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c)
    return string.format("%%%02X", string.byte(c))
  end))
end

local requests = {}
local n = 0
local i = 0
non2xx = 0
statuses = {}

function init(args)
  local file = os.getenv("WRK_QUERIES") or "bench/queries/rust-docs.txt"
  local extra = {}
  if os.getenv("WRK_EXTRA") and os.getenv("WRK_EXTRA") ~= "" then
    table.insert(extra, os.getenv("WRK_EXTRA"))
  end
  for _, a in ipairs(args) do
    if a ~= "" then table.insert(extra, a) end
  end
  local suffix = ""
  if #extra > 0 then suffix = "&" .. table.concat(extra, "&") end
  local fh = io.open(file, "r")
  if not fh then
    io.stderr:write("wrk_search.lua: cannot open " .. file .. "\n")
    os.exit(2)
  end
  for line in fh:lines() do
    local q = line:gsub("^%s+", ""):gsub("%s+$", "")
    if q ~= "" then
      table.insert(requests, wrk.format("GET", "/search?q=" .. urlencode(q) .. suffix))
    end
  end
  fh:close()
  n = #requests
  if n == 0 then
    io.stderr:write("wrk_search.lua: no queries in " .. file .. "\n")
    os.exit(2)
  end
  -- Threads start at different places of the cycle.
  i = math.floor((id or 0) * n * 0.618) % n
end

function request()
  i = i % n + 1
  return requests[i]
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, _requests)
  local bad, by_status = 0, {}
  for _, t in ipairs(threads) do
    bad = bad + t:get("non2xx")
    local s = t:get("statuses")
    for code, c in pairs(s) do
      by_status[code] = (by_status[code] or 0) + c
    end
  end
  local codes = {}
  for code, c in pairs(by_status) do
    table.insert(codes, string.format('"%d":%d', code, c))
  end
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format("non-2xx responses: %d\n", bad))
  io.write(string.format(
    'wrk_json {"requests":%d,"duration_s":%.3f,"rps":%.2f,"p50_ms":%.3f,"p90_ms":%.3f,' ..
    '"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f,"non2xx":%d,"non2xx_by_status":{%s},' ..
    '"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d}}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3, latency.mean / 1e3, bad, table.concat(codes, ","),
    e.connect, e.read, e.write, e.timeout))
end
