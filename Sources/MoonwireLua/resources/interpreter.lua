-- `moonwire lua`: lua5.4's command line and REPL, in a script's Lua state with
-- `mw` loaded and its event loop running. Started as the main chunk with
-- (options, script, nsteps, steps..., argv...) and the host functions in
-- `mw._interpreter_host`; `options` has "i" (the REPL last), "E" (no
-- LUA_INIT), "s" (the script is stdin); `script` is the script's index in
-- argv (0: none); each step is a pair ("e", stat), ("l", mod) or ("W", "").
--
-- Design rules:
--  * lua.c's order and words: LUA_INIT, then -e/-l/-W as given, then the
--    script with its arguments, then the REPL; an error outside the REPL is
--    reported as "lua: message" with its traceback, and ends with 1.
--  * Every chunk can wait (c:receive, mw.sleep, c:wait_open) as a script's
--    main chunk can; the prompt comes back once it has ended. A REPL chunk
--    runs in a coroutine of its own, so that Ctrl-C can stop it. Messages and timers keep being
--    handled while the prompt waits for a line.
--  * The REPL reads as lua.c does: "=expr" and a bare expression print their
--    values (here through mw.inspect), an incomplete chunk asks for more with
--    _PROMPT2 (">> ").

local args = table.pack(...)
local options, script, nsteps = args[1], math.tointeger(tonumber(args[2])), tonumber(args[3])
local host = mw._interpreter_host
mw._interpreter_host = nil
local EXIT, resume = host.exit_sentinel, host.resume
local inspect = mw.inspect

local steps = {}
local at = 4
for _ = 1, nsteps do
  steps[#steps + 1] = { kind = args[at], value = args[at + 1] }
  at = at + 2
end
-- argv[0] is the interpreter, as lua.c's.
local argv = {}
for i = at, args.n do argv[i - at] = args[i] end

-- arg as lua.c makes it: the script at 0, its arguments after it, the
-- interpreter and its options before; with no script, the interpreter at 0.
arg = {}
for i = 0, #argv do arg[i - script] = argv[i] end
local script_args = {}
if script > 0 then
  for i = script + 1, #argv do script_args[#script_args + 1] = argv[i] end
end
mw.args = script_args

-- The traceback without moonwire's own frames: they say nothing about the user's code.
local function traceback(message)
  local lines = {}
  for line in debug.traceback(message, 2):gmatch("[^\n]+") do
    if not line:find("moonwire/", 1, true) and not line:find("in function 'xpcall'", 1, true) then
      lines[#lines + 1] = line
    end
  end
  return table.concat(lines, "\n")
end

-- lua.c's msghandler: a message that is not a string is named by its
-- __tostring, else by its type.
local function handler(message)
  if message == EXIT then return message end
  if type(message) ~= "string" then
    local meta = getmetatable(message)
    if meta and meta.__tostring then
      local text = tostring(message)
      if type(text) == "string" then return text end
    end
    message = ("(error object is a %s value)"):format(type(message))
  end
  return traceback(message)
end

-- Calls fn; returns true and its results, or false and the message. mw.exit
-- and os.exit go through.
local function docall(fn, ...)
  local results = table.pack(xpcall(fn, handler, ...))
  if not results[1] and results[2] == EXIT then error(EXIT, 0) end
  return results
end

local progname = "lua"
local function report(message)
  host.write_error((progname and (progname .. ": ") or "") .. tostring(message) .. "\n")
end

-- Runs a chunk (or reports why it did not load); true when it ran through.
local function dochunk(fn, err, ...)
  if not fn then
    report(err)
    return false
  end
  local results = docall(fn, ...)
  if not results[1] then report(results[2]) end
  return results[1]
end

local function run_steps()
  if not options:find("E", 1, true) then
    local name, init = "=LUA_INIT_5_4", os.getenv("LUA_INIT_5_4")
    if not init then name, init = "=LUA_INIT", os.getenv("LUA_INIT") end
    if init then
      local ok
      if init:sub(1, 1) == "@" then ok = dochunk(loadfile(init:sub(2))) else ok = dochunk(load(init, name)) end
      if not ok then return false end
    end
  end
  for _, step in ipairs(steps) do
    if step.kind == "e" then
      if not dochunk(load(step.value, "=(command line)")) then return false end
    elseif step.kind == "l" then
      local global, module = step.value:match("^([^=]+)=(.*)$")
      if not global then global, module = step.value, step.value end
      local results = docall(require, module)
      if not results[1] then
        report(results[2])
        return false
      end
      _G[global] = results[2]
    elseif step.kind == "W" then
      warn("@on")
    end
  end
  if script > 0 or options:find("s", 1, true) then
    -- loadfile() reads stdin, as lua's "-" does.
    local fn, err
    if options:find("s", 1, true) then fn, err = loadfile() else fn, err = loadfile(argv[script]) end
    if not dochunk(fn, err, table.unpack(script_args)) then return false end
  end
  return true
end

-- The REPL ----------------------------------------------------------------

local me = coroutine.running()
local function read_line(prompt)
  host.read_line(prompt, function(line) resume(me, line) end)
  return coroutine.yield()
end

local function prompt(first)
  local p = rawget(_G, first and "_PROMPT" or "_PROMPT2")
  if p == nil then return first and "> " or ">> " end
  return tostring(p)
end

local function incomplete(err)
  return err:sub(-5) == "<eof>"
end

-- A chunk from one or more lines, as lua.c's loadline: the line as an
-- expression first ("return " .. line), else as statements, asking for more
-- lines while the chunk is incomplete. Returns nil at the end of input.
local function load_line()
  local line = read_line(prompt(true))
  if line == nil then return nil end
  if line:sub(1, 1) == "=" then line = "return " .. line:sub(2) end
  local fn = load("return " .. line .. ";", "=stdin")
  if fn then return fn end
  local buffer = line
  while true do
    local err
    fn, err = load(buffer, "=stdin")
    if fn or not incomplete(err) then return fn, err end
    local more = read_line(prompt(false))
    if more == nil then return fn, err end
    buffer = buffer .. "\n" .. more
  end
end

-- Each chunk runs in a coroutine of its own, so that Ctrl-C can stop it as
-- lua.c does ("interrupted!", then the prompt). A chunk computing gets the
-- error raised in its Lua code by the host; a chunk waiting (mw.sleep,
-- c:receive) is left where it waits, abandoned as a timed-out test is: what
-- would wake it later wakes nothing.
local chunk -- { co =, results =, waiting = } while a chunk runs

-- Where a waiting coroutine waits, as "stdin:3" (its first frame of the user's).
local function waiting_at(co)
  for level = 0, 50 do
    local info = debug.getinfo(co, level, "Sl")
    if not info then return nil end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" then
      return info.short_src .. ":" .. (info.currentline or 0)
    end
  end
end

host.on_interrupt(function()
  local c = chunk
  if not c or c.results or coroutine.status(c.co) ~= "suspended" then return end
  host.abandon(c.co)
  local at, callee = waiting_at(c.co), host.waiting_in(c.co)
  local message = (at and (at .. ": ") or "") .. "interrupted!" .. (callee and (" (waiting in " .. callee .. ")") or "")
  c.results = { false, message, n = 2 }
  if c.waiting then resume(me) end
end)

local function run_chunk(fn)
  local c = {}
  c.co = coroutine.create(function()
    local results = docall(fn)
    if c.results then return end -- interrupted while it waited, and woken since
    c.results = results
    if c.waiting then resume(me) end
  end)
  chunk = c
  host.chunk_running(true)
  resume(c.co)
  if not c.results then
    c.waiting = true
    coroutine.yield()
  end
  host.chunk_running(false)
  chunk = nil
  return c.results
end

local function repl()
  progname = nil
  while true do
    local fn, err = load_line()
    if fn == nil and err == nil then break end
    if not fn then
      report(err)
    else
      local results = run_chunk(fn)
      if not results[1] then
        report(results[2])
      elseif results.n > 1 then
        local parts = {}
        for i = 2, results.n do parts[#parts + 1] = inspect(results[i]) end
        print(table.concat(parts, "\t"))
      end
    end
  end
  print()
end

if not run_steps() then mw.exit(1) end
if options:find("i", 1, true) then
  repl()
  mw.exit(0)
end
