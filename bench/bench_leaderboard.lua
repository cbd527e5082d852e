-- The load of bench/bench_leaderboard.py for wrk (4.x): the same reads as its Python clients.
--
--   wrk -c 50 -t 1 -d 20s -s bench/bench_leaderboard.lua http://127.0.0.1:PORT -- KIND [SEED] [IDS]
--
-- KIND is "leaderboard" (sorts, directions and offsets mixed, 50 rows a page), "one" (the first
-- page only), "front" (the Pareto front) or "submission" (the pages of IDS, a comma-separated
-- list of submission ids).
-- Every response that is not a 2xx counts as an error, and so does every socket error
-- (connect, read, write, timeout). done() prints one line that the Python script reads:
--   NEVIS_WRK {"requests": ..., "duration_us": ..., "p50_us": ..., ..., "non_2xx": ..., ...}

local SORTS = {"rank", "E", "cflop", "date", "learner", "tasks"}
local DIRECTIONS = {"true", "false"}
local threads = {}
local counter = 0

function setup(thread)
   counter = counter + 1
   thread:set("id", counter)
   table.insert(threads, thread)
end

function init(args)
   kind = args[1] or "leaderboard"
   math.randomseed((tonumber(args[2]) or 0) * 1000 + id)
   ids = {}
   for value in string.gmatch(args[3] or "", "%d+") do
      table.insert(ids, value)
   end
   non_2xx = 0
end

function request()
   local path
   if kind == "leaderboard" then
      path = "/v1/leaderboard?sort=" .. SORTS[math.random(#SORTS)] .. "&descending="
         .. DIRECTIONS[math.random(2)] .. "&limit=50&offset=" .. (50 * math.random(0, 4))
   elseif kind == "one" then
      path = "/v1/leaderboard?limit=50"
   elseif kind == "front" then
      path = "/v1/leaderboard/front"
   else
      path = "/submissions/" .. ids[math.random(#ids)]
   end
   return wrk.format("GET", path)
end

function response(status, headers, body)
   if status < 200 or status > 299 then
      non_2xx = non_2xx + 1
   end
end

function done(summary, latency, requests)
   local bad = 0
   for _, thread in ipairs(threads) do
      bad = bad + thread:get("non_2xx")
   end
   local e = summary.errors
   io.write(string.format(
      'NEVIS_WRK {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
      .. '"max_us": %d, "mean_us": %.1f, "non_2xx": %d, "connect": %d, "read": %d, "write": %d, '
      .. '"timeout": %d}\n',
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
      latency:percentile(99), latency.max, latency.mean, bad, e.connect, e.read, e.write, e.timeout))
end
