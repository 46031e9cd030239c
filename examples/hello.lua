-- hello.lua: the smallest moonwire script. It reads its arguments, prints,
-- logs to stderr, and ends by itself because nothing is left to do.
--   moonwire run examples/hello.lua moon
local name = mw.args[1] or "world"
print(("hello, %s"):format(name))
print(mw.json.encode({ greeting = name }))
print(mw.hex("moon"), mw.base64("moon"))
mw.log.info("moonwire %s on %s", mw._VERSION, _VERSION)
