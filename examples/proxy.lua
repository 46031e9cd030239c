-- proxy.lua: reach servers through an HTTP CONNECT proxy or a SOCKS5 proxy, for ws://,
-- wss://, tcp:// and tls:// alike. The proxy is the first argument ("env" to take it from
-- HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, honouring NO_PROXY); the targets follow. With no
-- targets, it starts its own echo servers (wss:// and tls:// too when MW_TLS_CERT and
-- MW_TLS_KEY name a certificate and key; MW_TLS_CA is then the CA to trust).
--   moonwire run examples/proxy.lua http://user:pass@127.0.0.1:3128 wss://echo.example.org/
--   moonwire run examples/proxy.lua socks5://127.0.0.1:1080
local proxy = mw.args[1] or "env"
local targets = { table.unpack(mw.args, 2) }
local ca = os.getenv("MW_TLS_CA")

if #targets == 0 then
  local cert, key = os.getenv("MW_TLS_CERT"), os.getenv("MW_TLS_KEY")
  local schemes = cert and { "ws", "wss", "tcp", "tls" } or { "ws", "tcp" }
  for _, scheme in ipairs(schemes) do
    local secure = scheme == "wss" or scheme == "tls"
    local s = mw.listen(scheme .. "://127.0.0.1:0/", { tls = secure and { cert = cert, key = key } or nil })
    -- Through a proxy, the server sees the proxy's address, not ours.
    s:on_connect(function(peer, request) print(scheme .. " server: connection from " .. request.remote_address) end)
    s:on_message(function(peer, msg) peer:send(msg) end)
    targets[#targets + 1] = s:url()
  end
end

local failed = false
for _, url in ipairs(targets) do
  local c = mw.connect(url, {
    proxy = proxy ~= "env" and proxy or nil,  -- nil: the environment decides
    tls = ca and { ca = ca } or nil,
    reconnect = false,
  })
  local ok, err = c:wait_open(10)
  if ok then
    local reply = c:request("hello through the proxy", "^hello", 5)
    print(url .. " answered: " .. tostring(reply))
    c:close()
  else
    print(url .. " failed: " .. err)
    failed = true
  end
end
mw.exit(failed and 1 or 0)
