-- What moonwire knows of its own API, read from the editor definitions
-- (moonwire_meta.lua, busted_meta.lua: the one place it is declared), and what is
-- made of it: the list of names (held against the live bindings by a test), the
-- luacheck std `moonwire init` writes, and `moonwire check`'s static check of
-- mw.* calls and methods.
--
-- Called with the two definition files' text; returns the tools.

local moonwire_meta, busted_meta = ...

-- The declarations:
--   module[name]   = "function" | "table" | "field" for every name under mw ("mw.json.encode")
--   classes[class] = { methods = { name = true }, fields = { name = true } } ("mw.Connection")
--   returns[name]  = the class a function of mw returns ("mw.connect" -> "mw.Connection")
--   handler_arg[class][method] = the class of a handler's first argument
--                                ("mw.Server", "on_connect" -> "mw.Peer")
--   test_globals[name] = true for the globals of a test file
local function declarations()
  local module, classes, returns, handler_arg, test_globals, params = {}, {}, {}, {}, {}, {}
  local alias, class, last_return, first_param = {}, nil, nil, nil
  local function class_of(name)
    classes[name] = classes[name] or { methods = {}, fields = {} }
    return classes[name]
  end
  for line in (moonwire_meta .. "\n"):gmatch("([^\n]*)\n") do
    local name = line:match("^%-%-%-@class ([%w_.]+)")
    if name then
      class = name
      if name:match("^mw%.%u") then class_of(name) end
    end
    local field = line:match("^%-%-%-@field ([%w_]+)")
    if field and class then
      if class == "mw" or not class:match("^mw%.%u") and class:match("^mw") then
        module[class .. "." .. field] = "field"
      elseif classes[class] then
        classes[class].fields[field] = true
      end
    end
    local ret = line:match("^%-%-%-@return ([%w_.]+)")
    if ret then last_return = last_return or ret end
    local param_class = line:match("^%-%-%-@param fn fun%([%w_]+: ([%w_.]+)")
    if param_class then first_param = param_class end
    local local_name = line:match("^local ([%w_]+) = {}")
    if local_name and class then alias[local_name] = class end
    local table_name = line:match("^([%w_.]+) = {}")
    if table_name then module[table_name] = "table" end
    local owner, method, owner_args = line:match("^function ([%w_]+):([%w_]+)(%b())")
    if owner and alias[owner] then
      local c = alias[owner]
      params[c .. ":" .. method] = owner_args
      class_of(c).methods[method] = true
      if first_param then
        handler_arg[c] = handler_arg[c] or {}
        handler_arg[c][method] = first_param
      end
    end
    local fname, fargs = line:match("^function (mw[%w_.]*)(%b())")
    if fname then
      params[fname] = fargs
      module[fname] = "function"
      returns[fname] = last_return
    end
    if line:match("^function") or line == "" then last_return, first_param = nil, nil end
  end
  -- A function returns an object only when its class is one of moonwire's objects.
  for fname, class in pairs(returns) do
    if not (classes[class] and next(classes[class].methods)) then returns[fname] = nil end
  end
  for line in (busted_meta .. "\n"):gmatch("([^\n]*)\n") do
    local name, args = line:match("^function ([%w_]+)(%b())")
    if name then params["test:" .. name] = args end
    name = name or line:match("^([%w_]+) = {}")
    if name then test_globals[name] = true end
  end
  return { module = module, classes = classes, returns = returns, handler_arg = handler_arg, test_globals = test_globals,
           params = params }
end

local api = declarations()
local tools = {}

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- Every declared name, one a line: "mw.connect", "mw.Connection:send", "test:describe".
function tools.names()
  local out = {}
  for _, name in ipairs(sorted_keys(api.module)) do
    if name ~= "mw" then out[#out + 1] = name end
  end
  for _, class in ipairs(sorted_keys(api.classes)) do
    for _, method in ipairs(sorted_keys(api.classes[class].methods)) do out[#out + 1] = class .. ":" .. method end
  end
  for _, name in ipairs(sorted_keys(api.test_globals)) do out[#out + 1] = "test:" .. name end
  return table.concat(out, "\n") .. "\n"
end

-- The declared parameters of every function, one a line: "mw.connect 2",
-- "mw.Connection:send 3" (self counts, as Lua counts it), "mw.spawn 1+" (and `...`).
function tools.params()
  local out = {}
  for _, name in ipairs(sorted_keys(api.params)) do
    local list = api.params[name]:sub(2, -2)
    local count, vararg = 0, false
    for p in list:gmatch("[^,%s]+") do
      if p == "..." then vararg = true else count = count + 1 end
    end
    if name:find(":", 1, true) and not name:match("^test:") then count = count + 1 end
    out[#out + 1] = ("%s %d%s"):format(name, count, vararg and "+" or "")
  end
  return table.concat(out, "\n") .. "\n"
end

-- The luacheck definition of `mw` below `prefix`: its fields, each a table of fields
-- when it is a namespace, else open (data such as mw.args may hold anything).
local function luacheck_fields(prefix, indent)
  local lines = {}
  for _, name in ipairs(sorted_keys(api.module)) do
    local key = name:match("^" .. prefix:gsub("%.", "%%.") .. "%.([%w_]+)$")
    if key then
      local kind = api.module[name]
      if kind == "table" then
        lines[#lines + 1] = ("%s%s = { fields = {\n%s%s} },"):format(indent, key, luacheck_fields(name, indent .. "  "), indent)
      elseif kind == "field" then
        lines[#lines + 1] = ("%s%s = { other_fields = true },"):format(indent, key)
      else
        lines[#lines + 1] = ("%s%s = {},"):format(indent, key)
      end
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The .luacheckrc moonwire init writes: a std for scripts (mw), one for test files
-- (busted's globals and luassert's), both from the declarations.
function tools.luacheckrc()
  local test = {}
  for _, name in ipairs(sorted_keys(api.test_globals)) do
    test[#test + 1] = ("    %s = { other_fields = true },"):format(name)
  end
  return table.concat({
    "-- luacheck configuration for moonwire scripts and tests, written by moonwire init",
    "-- from moonwire's own API declarations: mw and its fields, and the globals of test",
    "-- files. Regenerate it with a newer moonwire: moonwire init --force.",
    "stds.moonwire = {",
    "  read_globals = {",
    "    mw = { fields = {",
    luacheck_fields("mw", "      ") .. "    } },",
    "  },",
    "}",
    "stds.moonwire_test = {",
    "  read_globals = {",
    table.concat(test, "\n"),
    "  },",
    "}",
    'std = "lua54+moonwire"',
    "-- Handlers get fixed arguments (c, msg, kind): one a handler does not use is no mistake.",
    'ignore = { "212" }',
    "for _, pattern in ipairs { \"**/*_spec.lua\", \"**/*_test.lua\", \"**/test_*.lua\", \"spec/**/*.lua\", \"tests/**/*.lua\" } do",
    '  files[pattern] = { std = "+moonwire_test" }',
    "end",
    "",
  }, "\n")
end

-- A Lua lexer good enough to find names: tokens with their lines, strings and
-- comments skipped (long brackets too).
local function tokens(source)
  local out, i, line, n = {}, 1, 1, #source
  local function long_bracket(at)
    local eq = source:match("^%[(=*)%[", at)
    if not eq then return nil end
    local close = "]" .. eq .. "]"
    local _, stop = source:find(close, at, true)
    stop = stop or n
    local text = source:sub(at, stop)
    local _, newlines = text:gsub("\n", "")
    line = line + newlines
    return stop + 1
  end
  while i <= n do
    local c = source:sub(i, i)
    if c == "\n" then
      line = line + 1
      i = i + 1
    elseif c:match("%s") then
      i = i + 1
    elseif source:sub(i, i + 1) == "--" then
      i = long_bracket(i + 2) or ((source:find("\n", i, true) or n + 1))
    elseif c == "[" and source:match("^%[=*%[", i) then
      out[#out + 1] = { kind = "string", line = line }
      i = long_bracket(i)
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = source:sub(j, j)
        if d == "\\" then
          if source:sub(j + 1, j + 1) == "\n" then line = line + 1 end
          j = j + 2
        elseif d == c or d == "\n" then
          break
        else
          j = j + 1
        end
      end
      out[#out + 1] = { kind = "string", line = line }
      i = j + 1
    elseif c:match("[%a_]") then
      local word = source:match("^[%w_]+", i)
      out[#out + 1] = { kind = "name", text = word, line = line }
      i = i + #word
    elseif c:match("%d") then
      local num = source:match("^0[xX][%x%.pP+-]+", i) or source:match("^[%d%.eE]+[+-]?%d*", i) or c
      i = i + #num
      out[#out + 1] = { kind = "number", line = line }
    else
      local op = source:match("^%.%.%.", i) or source:match("^[=~<>]=", i) or source:match("^::", i)
        or source:match("^%.%.", i) or source:match("^//", i) or source:match("^<<", i) or source:match("^>>", i) or c
      out[#out + 1] = { kind = "op", text = op, line = line }
      i = i + #op
    end
  end
  return out
end

-- Levenshtein distance, for "did you mean".
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

local function suggestion(name, candidates, render)
  local best, best_d
  for _, c in ipairs(candidates) do
    local d = distance(name, c)
    if d <= 2 and (not best_d or d < best_d) then best, best_d = c, d end
  end
  return best and (" (did you mean " .. render(best) .. "?)") or ""
end

local CLASS_WORDS = {
  ["mw.Connection"] = "a connection", ["mw.Server"] = "a server", ["mw.Peer"] = "a peer",
  ["mw.Timer"] = "a timer", ["mw.Counter"] = "a counter", ["mw.Gauge"] = "a gauge",
  ["mw.Histogram"] = "a histogram", ["mw.Timing"] = "a timing", ["mw.Future"] = "a future",
}

-- `moonwire check`'s look at one file: mw.* names that do not exist, and methods
-- that objects of moonwire do not have, on variables whose type the file shows
-- (`local c = mw.connect(...)`, a handler's first argument). Returns
-- "chunk:line: message" lines.
function tools.check(source, chunk)
  local t = tokens(source)
  local problems = {}
  local function report(line, message) problems[#problems + 1] = ("%s:%d: %s"):format(chunk, line, message) end
  local function tok(i) return t[i] or {} end
  local function is_op(i, text) return tok(i).kind == "op" and tok(i).text == text end

  -- mw.a.b...: the longest declared path; the next step must exist below a namespace.
  -- Returns the full name reached and the index after it.
  local function mw_path(i, quiet)
    local name, j = "mw", i + 1
    while is_op(j, ".") and tok(j + 1).kind == "name" do
      local next_name = name .. "." .. tok(j + 1).text
      if api.module[name] == "field" or api.module[name] == "function" then break end
      if not api.module[next_name] then
        -- An assignment defines the script's own field: not a misspelling.
        local assigned = is_op(j + 2, "=")
        if not assigned and not quiet then
          local siblings = {}
          for k in pairs(api.module) do
            if k:match("^" .. name:gsub("%.", "%%.") .. "%.[%w_]+$") then siblings[#siblings + 1] = k:match("([%w_]+)$") end
          end
          table.sort(siblings)
          report(tok(j + 1).line, ("unknown %s.%s: moonwire has no such %s%s"):format(name, tok(j + 1).text,
            name == "mw" and "function or field" or "name here",
            suggestion(tok(j + 1).text, siblings, function(s) return name .. "." .. s end)))
        end
        return nil, j + 2
      end
      name, j = next_name, j + 2
    end
    return name, j
  end

  -- Pass 1: the class of each variable, from what it is assigned or which handler it
  -- is the first argument of; a name given two classes is left alone.
  local var_class, conflicted = {}, {}
  local function give(name, class)
    if conflicted[name] then return end
    if var_class[name] and var_class[name] ~= class then
      var_class[name], conflicted[name] = nil, true
    else
      var_class[name] = class
    end
  end
  for i = 1, #t do
    -- NAME = [assert(] mw.x(...)
    if tok(i).kind == "name" and is_op(i + 1, "=") then
      local j = i + 2
      if tok(j).text == "assert" and is_op(j + 1, "(") then j = j + 2 end
      if tok(j).text == "mw" then
        local fname, after = mw_path(j, true)
        if fname and api.returns[fname] and is_op(after, "(") then give(tok(i).text, api.returns[fname]) end
      end
    end
  end
  -- Handlers: VAR:on_x(function(ARG — ARG's class from the declarations (twice, so a
  -- peer that is itself a handler's argument types its own handlers' arguments).
  for _ = 1, 2 do
    for i = 1, #t do
      local var = tok(i).kind == "name" and var_class[tok(i).text]
      if var and is_op(i + 1, ":") and tok(i + 2).kind == "name" and is_op(i + 3, "(")
          and tok(i + 4).text == "function" and is_op(i + 5, "(") and tok(i + 6).kind == "name" then
        local arg_class = api.handler_arg[var] and api.handler_arg[var][tok(i + 2).text]
        if arg_class then give(tok(i + 6).text, arg_class) end
      end
    end
  end

  -- Pass 2: report.
  for i = 1, #t do
    local x = tok(i)
    if x.kind == "name" and x.text == "mw" and not is_op(i - 1, ".") and not is_op(i - 1, ":") then
      mw_path(i)
    elseif x.kind == "name" and var_class[x.text] and is_op(i + 1, ":") and tok(i + 2).kind == "name"
        and not is_op(i - 1, ".") and not is_op(i - 1, ":") then
      local class = api.classes[var_class[x.text]]
      local method = tok(i + 2).text
      if class and not class.methods[method] then
        report(tok(i + 2).line, ("unknown method %s:%s: %s has no method '%s'%s"):format(x.text, method,
          CLASS_WORDS[var_class[x.text]] or var_class[x.text], method,
          suggestion(method, sorted_keys(class.methods), function(s) return x.text .. ":" .. s end)))
      end
    end
  end
  return table.concat(problems, "\n")
end

return tools
