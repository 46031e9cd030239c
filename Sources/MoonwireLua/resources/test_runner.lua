-- The runner of `moonwire test` for one test file, in a Lua state of its own.
-- Started as the main chunk with (file, filter, timeout, seed, shuffle,
-- fail_fast, list) and the test host functions in `mw._test_host`; reports each
-- test to Swift as it ends.
--
-- Design rules:
--  * busted's vocabulary as globals (describe, it/test, pending, before_each,
--    after_each, setup, teardown) and luassert as `assert`.
--  * The file runs once to collect the tree, then tests run in order (or
--    shuffled), each in a coroutine of its own, so that receive, request,
--    wait_open and mw.sleep work in them.
--  * A test ends by returning, by a failed assertion ("failed"), by any other
--    error or its timeout ("error"). Whatever way it ended, its after_each
--    hooks run, and the timers, connections and servers it opened are closed
--    and hear nothing more: the next test starts clean.

local file, filter, timeout, seed, shuffle, fail_fast, list = ...
timeout = tonumber(timeout)
shuffle, fail_fast, list = shuffle == "1", fail_fast == "1", list == "1"
local host = mw._test_host
mw._test_host = nil
local runner = coroutine.running()

-- The test file's folder, then the project's (where moonwire runs), like busted.
local dir = file:match("^(.*)/[^/]*$") or "."
package.path = ("%s/?.lua;%s/?/init.lua;./?.lua;./?/init.lua;"):format(dir, dir) .. package.path
if seed ~= "" then math.randomseed(math.tointeger(tonumber(seed)) or 0) end

local assert_module = require("luassert")
local say = require("say")
local _ = say

-- Strings with control bytes or invalid UTF-8 show as a hex dump in failures.
local hexdump = require("luassert.formatters.binarystring")
assert_module:add_formatter(function(value)
  if type(value) == "string" and (value:find("[%z\1-\8\11\12\14-\31\127]") or not utf8.len(value)) then
    return hexdump(value)
  end
end)

-- The tree ------------------------------------------------------------------

local function new_block(name, parent)
  return { name = name, parent = parent, children = {}, before_each = {}, after_each = {},
           setup = {}, teardown = {} }
end

local root = new_block(nil, nil)
local current = root

local function full_name(block, name)
  local parts = { name }
  while block and block.name do
    table.insert(parts, 1, block.name)
    block = block.parent
  end
  return table.concat(parts, " ")
end

-- Where the test was declared: the caller of it/test/pending (or describe, level 3).
local function where(level)
  local info = debug.getinfo(level or 4, "Sl")
  return info and (info.short_src .. ":" .. (info.currentline or 0)) or file
end

local function check_name(kind, name)
  if type(name) ~= "string" then
    error(("bad argument #1 to '%s' (string expected, got %s)"):format(kind, type(name)), 3)
  end
end

function describe(name, fn)
  check_name("describe", name)
  if type(fn) ~= "function" then error("bad argument #2 to 'describe' (function expected, got " .. type(fn) .. ")", 2) end
  local block = new_block(name, current)
  block.location = where(3)
  table.insert(current.children, block)
  local outer = current
  current = block
  fn()
  current = outer
end

local function add_test(kind, name, fn)
  check_name(kind, name)
  table.insert(current.children, { test = true, name = full_name(current, name), fn = fn,
                                   block = current, location = where() })
end

function it(name, fn) add_test("it", name, fn) end
test = it
function pending(name) add_test("pending", name, nil) end

local function add_hook(kind)
  return function(fn)
    if type(fn) ~= "function" then error(("bad argument #1 to '%s' (function expected, got %s)"):format(kind, type(fn)), 2) end
    table.insert(current[kind], fn)
  end
end

before_each = add_hook("before_each")
after_each = add_hook("after_each")
setup = add_hook("setup")
teardown = add_hook("teardown")
lazy_setup, lazy_teardown, strict_setup, strict_teardown = setup, teardown, setup, teardown
assert = assert_module

-- What a test opens, it closes ----------------------------------------------

local owned
local function track(make)
  return function(...)
    local handle, err = make(...)
    if owned and handle ~= nil then owned[#owned + 1] = handle end
    return handle, err
  end
end
mw.after = track(mw.after)
mw.every = track(mw.every)
mw.connect = track(mw.connect)
mw.listen = track(mw.listen)
mw.spawn = track(mw.spawn)

local function close_owned(handles)
  for i = #handles, 1, -1 do
    local handle = handles[i]
    if type(handle) == "thread" then
      host.abandon(handle)
    elseif handle.cancel then
      handle:cancel()
    else
      host.detach(handle)
      if handle.close then pcall(handle.close, handle) end
    end
  end
end

-- Running -------------------------------------------------------------------

-- A failed assertion is raised from inside luassert; anything else (a Lua
-- error, misuse of the API) is an error of the test. Decided by the first
-- frame of the traceback that is Lua code.
local function is_assertion(traceback)
  for line in traceback:gmatch("[^\n]+") do
    if line:find("^%s+") and not line:find("^%s+%[C%]") and line:find(":") then
      return line:find("luassert/", 1, true) ~= nil
    end
  end
  return false
end

local function handler(err)
  if type(err) == "table" and err.traceback then return err end
  if type(err) ~= "string" then
    local meta = getmetatable(err)
    err = (meta and meta.__tostring) and tostring(err) or ("(error object is a " .. type(err) .. " value)")
  end
  local full = debug.traceback(nil, 2)
  -- The runner's own frames say nothing about the user's test: leave them out.
  local lines = {}
  for line in full:gmatch("[^\n]+") do
    if not line:find("moonwire/test_runner.lua", 1, true) and not line:find("in function 'xpcall'", 1, true) then
      lines[#lines + 1] = line
    end
  end
  return { message = err, traceback = table.concat(lines, "\n"), failure = is_assertion(full) }
end

-- Where a suspended coroutine waits: the first frame of the user's code, and
-- the moonwire call it waits in ("c:receive", "mw.sleep").
local function waiting_at(co)
  local callee
  for level = 0, 200 do
    local info = debug.getinfo(co, level, "Sln")
    if not info then return nil end
    local ours = info.what == "C" or info.source:sub(1, 10) == "@moonwire/"
    if not ours and info.currentline > 0 then return info.short_src .. ":" .. info.currentline, host.waiting_in(co) or callee end
    if ours and info.what ~= "C" and info.name and info.name ~= "wait" then
      callee = (info.namewhat == "method" and "c:" or "mw.") .. info.name
    end
  end
end

-- An error from a callback (on_message, a timer) while a test runs: that
-- test ends with it. Set by run_bounded while it waits.
local on_uncaught

-- Swift calls this (from a clean stack) after a callback raised.
host.on_uncaught(function()
  if on_uncaught then on_uncaught() end
end)

-- The message of an error a callback raised: "file:line: message" and the
-- traceback after it.
local function uncaught_failure(text)
  local message, traceback = text:match("^(.-)\n(stack traceback:.*)$")
  message, traceback = message or text, traceback or ""
  return { message = message, traceback = traceback, failure = is_assertion(traceback) }
end

-- Runs fn in a coroutine of its own, bounded by the timeout; returns true, or
-- false and { message, traceback, failure }. The runner waits in
-- coroutine.yield and is woken on a clean stack (a timer), never from inside
-- the test's coroutine.
local function run_bounded(fn)
  local finished, outcome, waiting = false, nil, false
  local co
  local function wake()
    if waiting then
      waiting = false
      host.resume(runner)
    end
  end
  local function finish(result)
    if finished then return end
    finished, outcome = true, result
    host.watchdog(false)
    if waiting then host.after(0, wake) end
  end
  co = coroutine.create(function()
    local ok, err = xpcall(fn, handler)
    -- A memory error skips the handler: Lua's bare "not enough memory".
    if not ok and type(err) ~= "table" then
      err = { message = host.explain_error(tostring(err)), traceback = "", failure = false }
    end
    finish(ok or err)
  end)
  host.take_uncaught()
  host.watchdog(true, timeout)
  local timer = host.after(timeout, function()
    if finished then return end
    local at, callee = waiting_at(co)
    host.abandon(co)
    local message = ("timed out after %g s"):format(timeout)
    if callee then message = message .. " waiting in " .. callee end
    finish({ message = at and (at .. ": " .. message) or message, traceback = "" })
  end)
  on_uncaught = function()
    local text = host.take_uncaught()
    if finished or not text then return end
    host.abandon(co)
    finish(uncaught_failure(text))
  end
  local ok, err = coroutine.resume(co)
  if not ok then finish(handler(err)) end
  if not finished then
    waiting = true
    coroutine.yield()
  end
  on_uncaught = nil
  timer:cancel()
  local uncaught = host.take_uncaught()
  if outcome == true and uncaught then outcome = uncaught_failure(uncaught) end
  if outcome == true then return true end
  return false, outcome
end

local function chain(block, kind, outer_first)
  local list = {}
  while block do
    local hooks = block[kind]
    for i = #hooks, 1, -1 do table.insert(list, 1, hooks[i]) end
    block = block.parent
  end
  if not outer_first then
    local reversed = {}
    for i = #list, 1, -1 do reversed[#reversed + 1] = list[i] end
    list = reversed
  end
  return list
end

local function selected(node)
  if node.test then return filter == "" or node.name:find(filter) ~= nil end
  for _, child in ipairs(node.children) do
    if selected(child) then return true end
  end
  return false
end

local function status_of(failure)
  return failure.failure and "failed" or "error"
end

local function report(name, status, started, failure, location)
  host.report(name, status, mw.now() - started, failure and failure.message or "", failure and failure.traceback or "", location or "")
end

local stopped = false

local function run_test(t)
  local started = mw.now()
  if not t.fn then return report(t.name, "skipped", started, nil, t.location) end
  owned = {}
  local befores, afters = chain(t.block, "before_each", true), chain(t.block, "after_each", false)
  local ok, failure = run_bounded(function()
    for _, hook in ipairs(befores) do hook() end
    t.fn()
  end)
  -- after_each runs whatever way the test ended, in a coroutine of its own.
  if afters[1] then
    local after_ok, after_failure = run_bounded(function()
      for _, hook in ipairs(afters) do hook() end
    end)
    if ok and not after_ok then ok, failure = false, after_failure end
  end
  local mine = owned
  owned = nil
  close_owned(mine)
  -- Every failure line starts with a file:line, the test's own when the
  -- failure has none.
  if not ok and not tostring(failure.message):find("^[^\n]-:%d+:") then
    failure.message = t.location .. ": " .. tostring(failure.message)
  end
  local status = ok and "passed" or status_of(failure)
  if not ok and fail_fast then stopped = true end
  report(t.name, status, started, failure, t.location)
end

local function shuffled(children)
  local order = {}
  for i, child in ipairs(children) do order[i] = child end
  if shuffle then
    for i = #order, 2, -1 do
      local j = math.random(i)
      order[i], order[j] = order[j], order[i]
    end
  end
  return order
end

local function run_block(block)
  if not selected(block) then return end
  if list then
    for _, child in ipairs(shuffled(block.children)) do
      if child.test then
        if selected(child) then report(child.name, "skipped", mw.now(), nil, child.location) end
      else
        run_block(child)
      end
    end
    return
  end
  local hooks_ok, failure = true, nil
  for _, hook in ipairs(block.setup) do
    hooks_ok, failure = run_bounded(hook)
    if not hooks_ok then break end
  end
  for _, child in ipairs(shuffled(block.children)) do
    if stopped then break end
    if child.test then
      if selected(child) then
        if hooks_ok then run_test(child)
        else
          report(child.name, status_of(failure), mw.now(),
            { message = "setup failed: " .. failure.message, traceback = failure.traceback }, child.location)
        end
      end
    else
      run_block(child)
    end
  end
  for _, hook in ipairs(block.teardown) do
    local ok, err = run_bounded(hook)
    if not ok then report(full_name(block, "teardown"), status_of(err), mw.now(), err, block.location or file) end
  end
end

local function main()
  local chunk, compile_error = loadfile(file, "t")
  if not chunk then
    report(file, "error", mw.now(), { message = compile_error }, file)
  else
    local ok, err = xpcall(chunk, handler)
    if not ok then
      report(file, "error", mw.now(), err, file)
    else
      run_block(root)
    end
  end
end

-- The file's state ends only here (Swift holds it open until mw.exit): even a
-- fault of the runner itself must reach this line, or the file would never end.
local ok, err = xpcall(main, debug.traceback)
if not ok then report(file, "error", mw.now(), { message = "moonwire test: " .. tostring(err), traceback = "" }, file) end
mw.exit(0)
