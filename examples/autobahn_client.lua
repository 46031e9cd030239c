-- autobahn_client.lua: drives the Autobahn|Testsuite fuzzing server. It asks
-- for the number of cases, runs each one by echoing every message back until
-- the server closes, then asks the server to write its report.
--   moonwire run examples/autobahn_client.lua ws://127.0.0.1:9001 moonwire [compress]
local base = mw.args[1] or "ws://127.0.0.1:9001"
local agent = mw.args[2] or "moonwire"
local opts = {
  compress = mw.args[3] == "compress",
  max_message = 64 * 1024 * 1024,
  heartbeat = false,
  reconnect = false,
}

-- Echoes until the connection ends; receive gives nil, "closed" then.
local function echo(url)
  local c = mw.connect(url, opts)
  while true do
    local message, kind = c:receive()
    if not message then return end
    c:send(message, kind)
  end
end

local counter = mw.connect(base .. "/getCaseCount", opts)
local count = tonumber((assert(counter:receive(10))))
mw.log.info("%d cases", count)

for case = 1, count do
  echo(("%s/runCase?case=%d&agent=%s"):format(base, case, agent))
end

local report = mw.connect(("%s/updateReports?agent=%s"):format(base, agent), opts)
report:receive(30)
mw.log.info("report updated")
