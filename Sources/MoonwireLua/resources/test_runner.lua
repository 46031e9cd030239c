-- The runner of `moonwire test` for one test file, in a Lua state of its own.
-- Started as the main chunk with (file, filter, timeout, seed, shuffle,
-- fail_fast, list, tags, exclude_tags, helper, lpath, cpath) and the test host
-- functions in `mw._test_host`; reports each test to Swift as it ends.
--
-- Design rules:
--  * busted's vocabulary as globals (describe/context/insulate/expose,
--    it/test/spec, pending, finally, randomize, the hooks) and luassert's
--    spy, stub, mock and match; luassert's assert in the test file's own
--    environment (Lua's stays everywhere else); what a test does to luassert's state
--    (spies, stubs, formatters) is reverted after it.
--  * The file runs once to collect the tree, then tests run in order (or
--    shuffled), each in a coroutine of its own, so that receive, request,
--    wait_open and mw.sleep work in them.
--  * A test ends by returning, by a failed assertion ("failed"), by
--    pending("why") ("skipped"), by any other error or its timeout ("error").
--    As in busted, a failure is what luassert's assertions raise (their
--    `error` is bound to `fail`); an error inside luassert (an unknown
--    assertion, a formatter that crashes) is an error. Whatever way it ended, its after_each
--    hooks run, and the timers, connections and servers it opened are closed
--    and hear nothing more: the next test starts clean.

local file, filter, timeout, seed, shuffle, fail_fast, list, tags, exclude_tags, helper, lpath, cpath = ...
timeout = tonumber(timeout)
shuffle, fail_fast, list = shuffle == "1", fail_fast == "1", list == "1"
local host = mw._test_host
mw._test_host = nil
local runner = coroutine.running()

-- The test file's folder, then the project's (where moonwire runs), like busted.
local dir = file:match("^(.*)/[^/]*$") or "."
package.path = ("%s/?.lua;%s/?/init.lua;./?.lua;./?/init.lua;"):format(dir, dir) .. package.path
-- --lpath and --cpath come first, as in busted.
if lpath ~= "" then package.path = lpath:gsub(";*$", ";") .. package.path end
if cpath ~= "" then package.cpath = cpath:gsub(";*$", ";") .. package.cpath end

-- "#tag" words in a test's full name select it (--tags) or leave it out (--exclude-tags).
local function words(list)
  local out = {}
  for word in list:gmatch("[^,%s]+") do out[#out + 1] = word end
  return out
end
tags, exclude_tags = words(tags), words(exclude_tags)
if seed ~= "" then math.randomseed(math.tointeger(tonumber(seed)) or 0) end

local assert_module = require("luassert")
local say = require("say")
local _ = say
local inspect = mw.inspect

-- As in busted, the `error` of luassert's assertions (and of plain
-- assert(v, msg)) raises a failure: a table that carries the message with
-- its position. Any other error, luassert's own included, stays an error.
local failure_mt = { __tostring = function(e) return e.message end }
local raised_failures = setmetatable({}, { __mode = "k" })
local failure_texts = {}
local function fail(message, level)
  level = type(level) == "number" and level > 0 and level or 1
  local _, positioned = pcall(error, message, level + 2)
  if type(positioned) ~= "string" then positioned = inspect(positioned) end
  local e = setmetatable({ message = positioned }, failure_mt)
  raised_failures[e] = true
  failure_texts[#failure_texts + 1] = positioned
  error(e, level + 1)
end

local function bind_error(f)
  for i = 1, 255 do
    local name = debug.getupvalue(f, i)
    if name == nil then return end
    if name == "_ENV" then
      local env = setmetatable({ error = fail }, { __index = _G })
      debug.upvaluejoin(f, i, function() return env end, 1)
      return
    end
  end
end
bind_error(getmetatable(assert_module).__call)
bind_error(getmetatable(assert_module.is_true).__call)

-- Strings with control bytes or invalid UTF-8 show as a hex dump in failures.
local hexdump = require("luassert.formatters.binarystring")
assert_module:add_formatter(function(value)
  if type(value) == "string" and (value:find("[%z\1-\8\11\12\14-\31\127]") or not utf8.len(value)) then
    return hexdump(value)
  end
end)

-- The tree ------------------------------------------------------------------

local function new_block(name, parent, envmode)
  return { name = name, parent = parent, children = {}, before_each = {}, after_each = {},
           setup = {}, teardown = {}, envmode = envmode }
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

-- insulate: what a block does to the globals and package.loaded is undone
-- when it ends (when its body runs to collect the tests, and when they run).
local function save_globals()
  local g, loaded = {}, {}
  for k, v in next, _G do g[k] = v end
  for k, v in next, package.loaded do loaded[k] = v end
  return { g = g, loaded = loaded, mt = getmetatable(_G) }
end

local function restore_globals(state)
  setmetatable(_G, state.mt)
  for k in next, _G do if state.g[k] == nil then rawset(_G, k, nil) end end
  for k, v in next, state.g do rawset(_G, k, v) end
  for k in next, package.loaded do if state.loaded[k] == nil then package.loaded[k] = nil end end
  for k, v in next, state.loaded do package.loaded[k] = v end
end

-- What the block's body changed, when it ran to collect the tests: applied
-- again while its tests run (busted runs the body just before them).
local NIL = {}
local function changes(before, after)
  local diff = { g = {}, loaded = {} }
  for _, part in ipairs({ "g", "loaded" }) do
    for k, v in next, after[part] do if before[part][k] ~= v then diff[part][k] = v end end
    for k in next, before[part] do if after[part][k] == nil then diff[part][k] = NIL end end
  end
  return diff
end

local function apply(diff)
  for k, v in next, diff.g do rawset(_G, k, v ~= NIL and v or nil) end
  for k, v in next, diff.loaded do package.loaded[k] = v ~= NIL and v or nil end
end

local function insulated(block, fn, ...)
  if block.envmode ~= "insulate" then return fn(...) end
  local saved = save_globals()
  if block.changes then apply(block.changes) end
  local results = table.pack(pcall(fn, ...))
  if not block.changes then block.changes = changes(saved, save_globals()) end
  restore_globals(saved)
  if not results[1] then error(results[2], 0) end
  return table.unpack(results, 2, results.n)
end

local function block_kind(kind, envmode)
  return function(name, fn)
    check_name(kind, name)
    if type(fn) ~= "function" then error(("bad argument #2 to '%s' (function expected, got %s)"):format(kind, type(fn)), 2) end
    local block = new_block(name, current, envmode)
    block.location = where(3)
    table.insert(current.children, block)
    local outer = current
    current = block
    local ok, err = pcall(insulated, block, fn)
    current = outer
    if not ok then error(err, 0) end
  end
end

describe = block_kind("describe")
context = block_kind("context")
insulate = block_kind("insulate", "insulate")
-- Each file has a Lua state of its own: what an expose block sets stays for
-- the rest of the file, as it would in a plain describe.
expose = block_kind("expose")

-- randomize() / randomize(true|false) / randomize(seed): the tests and blocks
-- of this describe (or of the file) run in a random order.
function randomize(...)
  local on, seed_arg = true, nil
  if select("#", ...) > 0 then
    local a, b = ...
    if type(a) == "number" then seed_arg = a else on = a and true or false; seed_arg = tonumber(b) end
  end
  current.randomize = on
  current.seed = seed_arg
end

local function add_test(kind, name, fn)
  check_name(kind, name)
  table.insert(current.children, { test = true, name = full_name(current, name), title = name, fn = fn,
                                   block = current, location = where() })
end

function it(name, fn) add_test("it", name, fn) end
test, spec = it, it

-- The test running now (for pending and finally inside a test).
local running

-- pending("why") declares a pending test; inside a running test it ends the
-- test as pending, with the line it was called from.
local pending_mt = { __tostring = function(e) return e.message end }
local collecting = true
function pending(name)
  if running and running.body then
    local info = debug.getinfo(2, "Sl")
    local at = info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline .. ": ") or ""
    error(setmetatable({ pending = true, message = at .. tostring(name or "") }, pending_mt), 0)
  end
  if not collecting then error("'pending' not supported inside current context block", 2) end
  add_test("pending", name, nil)
end

-- finally(fn) inside a test: fn runs when the test's body has ended, whatever
-- way. As in busted, a test has one: a second call replaces the first.
function finally(fn)
  if type(fn) ~= "function" then error("bad argument #1 to 'finally' (function expected, got " .. type(fn) .. ")", 2) end
  if not running then error("finally: only inside a test (it)", 2) end
  running.finally = { fn }
end

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
-- As in busted, luassert's assert is the test file's: the file runs in an
-- environment of its own where `assert` is luassert, and everything else is
-- the globals (what it sets goes there too). Modules it requires, and the
-- helper, keep Lua's assert: `assert(false, "msg")` there raises "msg".
local spec_env = setmetatable({ assert = assert_module }, {
  __index = _G,
  __newindex = function(env, k, v)
    if k == "assert" then rawset(env, k, v) else _G[k] = v end
  end,
})
spy = require("luassert.spy")
stub = require("luassert.stub")
mock = require("luassert.mock")
match = require("luassert.match")

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

-- Where an error was raised: the first frame of the user's code.
local function raised_at(level)
  for l = level, 200 do
    local info = debug.getinfo(l, "Sl")
    if not info then return nil end
    if info.what ~= "C" and info.source:sub(1, 10) ~= "@moonwire/" and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline
    end
  end
end

local function handler(err)
  if type(err) == "table" and err.traceback then return err end
  local failure, pending_reason = raised_failures[err] == true, type(err) == "table" and getmetatable(err) == pending_mt
  if type(err) ~= "string" then
    local meta = getmetatable(err)
    if meta and meta.__tostring then
      err = tostring(err)
    else
      -- A table, nil or a number is printed, as busted does, where it was raised.
      local text = err == nil and "Nil error" or type(err) == "table" and inspect(err) or tostring(err)
      local at = raised_at(3)
      err = at and (at .. ": " .. text) or text
    end
  end
  local full = debug.traceback(nil, 2)
  -- The runner's own frames say nothing about the user's test: leave them out.
  local lines = {}
  for line in full:gmatch("[^\n]+") do
    if not line:find("moonwire/test_runner.lua", 1, true) and not line:find("in function 'xpcall'", 1, true) then
      lines[#lines + 1] = line
    end
  end
  return { message = err, traceback = table.concat(lines, "\n"), failure = failure, pending = pending_reason }
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
  local failure = false
  for _, raised in ipairs(failure_texts) do
    if message:sub(1, #raised) == raised then failure = true end
  end
  return { message = message, traceback = traceback, failure = failure }
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
  local timer = host.wall_after(timeout, function()
    if finished then return end
    local at, callee = waiting_at(co)
    host.abandon(co)
    local message = ("timed out after %g s"):format(timeout)
    if callee then message = message .. " waiting in " .. callee end
    finish({ message = at and (at .. ": " .. message) or message, traceback = "" })
  end)
  -- A callback can raise in the same loop turn as the body ends (a timer due
  -- with the body's own mw.sleep): once finished, its error is left where the
  -- check after the body finds it.
  on_uncaught = function()
    if finished then return end
    local text = host.take_uncaught()
    if not text then return end
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

local function has_tag(name, list)
  for _, tag in ipairs(list) do
    if name:find("#" .. tag, 1, true) then return true end
  end
  return false
end

local function selected(node)
  if node.test then
    return (filter == "" or node.name:find(filter) ~= nil)
      and (#tags == 0 or has_tag(node.name, tags)) and not has_tag(node.name, exclude_tags)
  end
  for _, child in ipairs(node.children) do
    if selected(child) then return true end
  end
  return false
end

local function status_of(failure)
  return failure.pending and "skipped" or failure.failure and "failed" or "error"
end

-- How busted merges the outcomes of a test's parts: a failure or an error
-- stays; pending gives way to a failure or an error.
local function merge(ok, failure, part_ok, part_failure)
  if part_ok then return ok, failure end
  if ok or (failure.pending and not part_failure.pending) then return false, part_failure end
  return ok, failure
end

local function report(name, status, started, failure, location, title)
  host.report(name, status, host.wall_now() - started, failure and failure.message or "", failure and failure.traceback or "",
    location or "", title or name)
end

local stopped = false

local function run_test(t)
  local started = host.wall_now()
  if not t.fn then return report(t.name, "skipped", started, nil, t.location, t.title) end
  owned = {}
  failure_texts = {}
  -- Spies, stubs, formatters and parameters of luassert a test (or its
  -- hooks) sets up are reverted after it.
  local snapshot = assert_module:snapshot()
  local befores, afters = chain(t.block, "before_each", true), chain(t.block, "after_each", false)
  local test = { finally = {} }
  running = test
  local ok, failure = run_bounded(function()
    for _, hook in ipairs(befores) do hook() end
    test.body = true
    t.fn()
  end)
  -- As in busted, only the test's body fails: a failed assertion in a hook
  -- or in finally is an error.
  if not ok and failure.failure and not test.body then failure.failure = false end
  test.body = false
  local function outside(part_ok, part_failure)
    if not part_ok then part_failure.failure = false end
    return part_ok, part_failure
  end
  for i = #test.finally, 1, -1 do
    ok, failure = merge(ok, failure, outside(run_bounded(test.finally[i])))
  end
  running = nil
  -- after_each runs whatever way the test ended, in a coroutine of its own.
  if afters[1] then
    ok, failure = merge(ok, failure, outside(run_bounded(function()
      for _, hook in ipairs(afters) do hook() end
    end)))
  end
  pcall(snapshot.revert, snapshot)
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
  report(t.name, status, started, failure, t.location, t.title)
end

local function shuffled(block)
  local children = block.children
  local order = {}
  for i, child in ipairs(children) do order[i] = child end
  if block.seed and block.randomize then math.randomseed(math.tointeger(block.seed) or 0) end
  if block.randomize or (shuffle and block.randomize ~= false) then
    for i = #order, 2, -1 do
      local j = math.random(i)
      order[i], order[j] = order[j], order[i]
    end
  end
  return order
end

local run_block_body
local function run_block(block)
  if not selected(block) then return end
  insulated(block, run_block_body, block)
end

function run_block_body(block)
  if list then
    for _, child in ipairs(shuffled(block)) do
      if child.test then
        if selected(child) then report(child.name, "skipped", host.wall_now(), nil, child.location, child.title) end
      else
        run_block(child)
      end
    end
    return
  end
  local hooks_ok, failure = true, nil
  for _, hook in ipairs(block.setup) do
    hooks_ok, failure = run_bounded(hook)
    if not hooks_ok then
      failure.failure = false
      break
    end
  end
  for _, child in ipairs(shuffled(block)) do
    if stopped then break end
    if child.test then
      if selected(child) then
        if hooks_ok then run_test(child)
        else
          report(child.name, status_of(failure), host.wall_now(),
            { message = "setup failed: " .. failure.message, traceback = failure.traceback }, child.location, child.title)
        end
      end
    else
      run_block(child)
    end
  end
  for _, hook in ipairs(block.teardown) do
    local ok, err = run_bounded(hook)
    if not ok then report(full_name(block, "teardown"), "error", host.wall_now(), err, block.location or file) end
  end
end

local function main()
  -- --helper: a Lua file run before the test file, in its state.
  if helper ~= "" then
    local helper_chunk, helper_error = loadfile(helper, "t")
    local ok, err = false, { message = helper_error }
    if helper_chunk then ok, err = xpcall(helper_chunk, handler) end
    if not ok then return report(file, "error", host.wall_now(), { message = "helper " .. helper .. ": " .. err.message, traceback = err.traceback or "" }, file) end
  end
  local chunk, compile_error = loadfile(file, "t", spec_env)
  if not chunk then
    report(file, "error", host.wall_now(), { message = compile_error }, file)
  else
    local ok, err = xpcall(chunk, handler)
    collecting = false
    if not ok then
      report(file, "error", host.wall_now(), err, file)
    else
      run_block(root)
    end
  end
end

-- The file's state ends only here (Swift holds it open until mw.exit): even a
-- fault of the runner itself must reach this line, or the file would never end.
local ok, err = xpcall(main, debug.traceback)
if not ok then report(file, "error", host.wall_now(), { message = "moonwire test: " .. tostring(err), traceback = "" }, file) end
mw.exit(0)
