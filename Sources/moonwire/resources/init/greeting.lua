-- greeting.lua: the bot's message format, a module that the bot and its test
-- both require (moonwire run and moonwire test find it next to them).
local greeting = {}

function greeting.hello(name)
  return "hello from " .. name
end

function greeting.is_reply(msg)
  return type(msg) == "string" and msg:find("^hello from ") ~= nil
end

return greeting
