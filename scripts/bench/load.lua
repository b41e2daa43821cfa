-- wrk script: a realistic query mix against the Sextant API, status codes counted.
-- Half /v1/retrieve (some filtered), a third /v1/search, the rest /v1/context; each thread
-- starts at a different point of the mix. The key comes from the SEXTANT_LOAD_KEY variable.
local key = os.getenv("SEXTANT_LOAD_KEY") or "sx_load"
local mix = {
  {"/v1/retrieve", '{"query": "How does Mastercard earn revenue from cross-border transactions?", "top_k": 5}'},
  {"/v1/search", '{"query": "Oracle cloud infrastructure revenue growth", "limit": 10}'},
  {"/v1/retrieve", '{"query": "capital expenditures and production outlook", "filters": {"tickers": ["XOM"]}, "top_k": 5}'},
  {"/v1/context", '{"question": "What was Mastercard\'s revenue in 2024?"}'},
  {"/v1/retrieve", '{"query": "share repurchase program", "top_k": 10}'},
  {"/v1/search", '{"query": "litigation and regulatory risks", "limit": 5, "entity": ["Mastercard"]}'},
  {"/v1/retrieve", '{"query": "What drove operating margin changes?", "filters": {"tickers": ["ORCL"], "year": 2025}, "top_k": 5}'},
  {"/v1/context", '{"question": "What risks does Exxon Mobil describe about climate regulation?"}'},
  {"/v1/retrieve", '{"query": "liquidity and capital resources", "top_k": 8}'},
  {"/v1/search", '{"query": "remaining performance obligations", "limit": 10}'},
}
local threads = {}
local counter = 1

function setup(thread)
  thread:set("id", counter)
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  statuses = {}
  i = id
  headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}
end

function request()
  local m = mix[(i % #mix) + 1]
  i = i + 1
  return wrk.format("POST", m[1], headers, m[2])
end

function response(status, hdrs, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local codes = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for code, n in pairs(s) do codes[code] = (codes[code] or 0) + n end
  end
  local parts = {}
  for code, n in pairs(codes) do table.insert(parts, string.format('"%d": %d', code, n)) end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "seconds": %.1f, "rps": %.1f, "p50_ms": %.1f, "p99_ms": %.1f, "p999_ms": %.1f, ' ..
    '"max_ms": %.1f, "status": {%s}, "socket_errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d}}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1e3, latency:percentile(99) / 1e3, latency:percentile(99.9) / 1e3, latency.max / 1e3,
    table.concat(parts, ", "), e.connect, e.read, e.write, e.timeout))
end
