-- `moonwire listen URL --script FILE`: listens on URL, prints every peer's connect,
-- messages and close as `listen` does, and hands each event to FILE's handlers:
-- on_connect(peer, request), on_message(peer, msg, kind), on_close(peer, code, reason),
-- defined as globals or in a table FILE returns. FILE gets the server as `...`.
-- mw.args: URL, FILE, echo, relay ("1" or ""), framing, max_message, protocols
-- (comma-separated), compress, TLS certificate, TLS key.
local url, file, echo, relay, framing, max, protocols, compress, cert, key = table.unpack(mw.args)

local opts = { max_message = tonumber(max), compress = compress == "1" }
if protocols ~= "" then
  opts.protocols = {}
  for p in protocols:gmatch("[^,]+") do opts.protocols[#opts.protocols + 1] = p end
end
if cert ~= "" then opts.tls = { cert = cert, key = key ~= "" and key or nil } end
if framing == "crlf" then
  opts.framing = { delimiter = "\r\n" }
elseif framing:match("^length:") then
  opts.framing = { length = tonumber(framing:sub(8)) }
elseif framing ~= "" then
  opts.framing = framing
end

local server, err = mw.listen(url, opts)
if not server then
  io.stderr:write("moonwire: cannot listen on ", url, ": ", err, "\n")
  mw.exit(1)
end

local chunk, problem = loadfile(file)
if not chunk then error(problem, 0) end
local returned = chunk(server)
local handlers = type(returned) == "table" and returned or _G

io.stderr:write("moonwire: listening on ", server:url(), "\n")

local function shown(msg, kind)
  if kind == "binary" then return "binary " .. mw.hex(msg) end
  return msg
end

server:on_connect(function(peer, request)
  print(("[%d] connected from %s %s"):format(peer.id, peer.remote_address, request.path or ""))
  if handlers.on_connect then handlers.on_connect(peer, request) end
end)

server:on_message(function(peer, msg, kind)
  print(("[%d] < %s"):format(peer.id, shown(msg, kind)))
  if echo == "1" then peer:send(msg, kind) end
  if relay == "1" then
    for _, other in ipairs(server:peers()) do
      if other.id ~= peer.id then other:send(msg, kind) end
    end
  end
  if handlers.on_message then handlers.on_message(peer, msg, kind) end
end)

server:on_close(function(peer, code, reason)
  print(("[%d] closed: %d %s"):format(peer.id, code, reason or ""))
  if handlers.on_close then handlers.on_close(peer, code, reason) end
end)
