-- The process-wide send budget for a server's peers: two clients that do not read,
-- broadcasts until the process's budget (1 MiB, far under the peers' own 8 MiB) turns
-- them away; peer:send refused with the process's words; once the clients read, the
-- peers drain and every broadcast a peer took arrives.
local default = mw.limits().send_budget
print(default > 0 and default <= 1024 * 1024 * 1024)
print(select(2, pcall(mw.limits, { send_budget = -1 })))
mw.limits { send_budget = 1024 * 1024 }   -- unless --send-budget chose
print(mw.limits().send_budget)

local s = assert(mw.listen("ws://127.0.0.1:0/", { queue = { bytes = 8 * 1024 * 1024 } }))
local peers = {}
s:on_connect(function(peer) peers[#peers + 1] = peer end)
local clients = {}
for i = 1, 2 do
  clients[i] = mw.connect(s:url())
  assert(clients[i]:wait_open(5))
end
while #peers < 2 do mw.sleep(0.01) end

-- The clients do not read yet: their inboxes fill and pause their sockets.
local payload = string.rep("b", 64 * 1024)
local broadcasts, took = 0, 0
repeat
  broadcasts = broadcasts + 1
  local n = s:broadcast(payload)
  took = took + n
until n < 2 or broadcasts == 4000
print(peers[1]:send(payload))
local dropped = { peers[1]:stats().dropped, peers[2]:stats().dropped }
print(took > 0, dropped[1] + dropped[2] > 0, took + dropped[1] + dropped[2] == 2 * broadcasts)

local received, done = { 0, 0 }, 0
for i = 1, 2 do
  mw.spawn(function()
    while true do
      local msg = assert(clients[i]:receive(30))
      if msg == "end" then break end
      received[i] = received[i] + 1
    end
    done = done + 1
  end)
end
for i = 1, 2 do
  assert(peers[i]:drain(30))
  assert(peers[i]:send("end"))
end
while done < 2 do mw.sleep(0.01) end
print(received[1] == broadcasts - dropped[1], received[2] == broadcasts - dropped[2])
mw.exit(0)
