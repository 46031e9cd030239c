-- Found by require "helpers" because it sits next to the test files.
local helpers = {}

-- An echo server on a free port, its URL, and the messages it received.
function helpers.echo_server(opts)
  local server = assert(mw.listen("ws://127.0.0.1:0", opts))
  local received = {}
  server:on_message(function(peer, m)
    received[#received + 1] = m
    peer:send(m)
  end)
  return server, server:url(), received
end

-- For what has no event to wait for (a counter, a field): checks `cond`
-- every 10 ms, up to `timeout` seconds; returns whether it held.
function helpers.eventually(cond, timeout)
  local deadline = mw.now() + (timeout or 5)
  while not cond() do
    if mw.now() > deadline then return false end
    mw.sleep(0.01)
  end
  return true
end

return helpers
