-- custom_framing.lua: a framing function for a protocol no built-in mode
-- covers: messages start with "$", then a decimal length and ":", then the
-- payload. The function gets the bytes buffered so far and returns one
-- message and how many bytes it used, or nil to wait for more.
--   moonwire run examples/custom_framing.lua
local function dollar_framing(buffer)
  local length, header = buffer:match("^%$(%d+):()")
  if not length then return nil end
  local finish = header + tonumber(length) - 1
  if #buffer < finish then return nil end
  return buffer:sub(header, finish), finish
end

local function frame(text) return ("$%d:%s"):format(#text, text) end

-- The server answers in the same format; it reads with "raw" framing and
-- sends every reply in one piece, glued, to show the client splitting them.
local server = assert(mw.listen("tcp://127.0.0.1:0", { framing = "raw" }))
server:on_message(function(peer)
  peer:send(frame("first") .. frame("second, with $3:odd bytes") .. frame(""), "binary")
end)

local c = mw.connect(server:url(), { framing = dollar_framing, reconnect = false })
c:send("go")
for _ = 1, 3 do print(("[%s]"):format(assert(c:receive(2)))) end
c:close()
server:close()
