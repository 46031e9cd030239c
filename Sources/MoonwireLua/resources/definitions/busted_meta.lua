---@meta busted
-- The globals of a moonwire test file (moonwire test): busted's vocabulary and
-- luassert's assert, spy, stub, mock and match. Reference: docs/testing.md.

---A group of tests.
---@param name string
---@param fn fun()
function describe(name, fn) end

---@param name string
---@param fn fun()
function context(name, fn) end

---A group whose changes to globals and package.loaded are undone after it.
---@param name string
---@param fn fun()
function insulate(name, fn) end

---A group whose changes to globals stay for the rest of the file.
---@param name string
---@param fn fun()
function expose(name, fn) end

---Runs the tests of this block (and its children) in random order.
---@param on? boolean|integer
function randomize(on) end

---A test; its body runs in a coroutine of its own.
---@param name string
---@param fn? fun()
function it(name, fn) end

---@param name string
---@param fn? fun()
function test(name, fn) end

---@param name string
---@param fn? fun()
function spec(name, fn) end

---Declares a pending test; inside a test, ends it as pending.
---@param name? string
function pending(name) end

---Inside a test: `fn` runs when the test's body has ended, whatever way.
---@param fn fun()
function finally(fn) end

---@param fn fun()
function before_each(fn) end

---@param fn fun()
function after_each(fn) end

---@param fn fun()
function setup(fn) end

---@param fn fun()
function teardown(fn) end

---@param fn fun()
function lazy_setup(fn) end

---@param fn fun()
function lazy_teardown(fn) end

---@param fn fun()
function strict_setup(fn) end

---@param fn fun()
function strict_teardown(fn) end

---luassert: `assert(v, msg)` as Lua's, and `assert.are.same(a, b)`, `assert.is_true(v)`,
---`assert.has_error(fn, msg)`, `assert.spy(s).was.called()`, ...
---@class luassert
---@overload fun(v: any, message?: any, ...: any): any
---@field is luassert
---@field is_not luassert
---@field are luassert
---@field are_not luassert
---@field has luassert
---@field has_no luassert
---@field was luassert
---@field was_not luassert
---@field no luassert
---@field message fun(msg: string): luassert
---@field same fun(expected: any, actual: any, message?: string)
---@field equal fun(expected: any, actual: any, message?: string)
---@field equals fun(expected: any, actual: any, message?: string)
---@field near fun(expected: number, actual: number, tolerance: number, message?: string)
---@field matches fun(pattern: string, actual: string, message?: string)
---@field unique fun(list: table, deep?: boolean, message?: string)
---@field truthy fun(value: any, message?: string)
---@field falsy fun(value: any, message?: string)
---@field error fun(fn: function, err?: any, message?: string)
---@field errors fun(fn: function, err?: any, message?: string)
---@field has_error fun(fn: function, err?: any, message?: string)
---@field has_no_error fun(fn: function, message?: string)
---@field error_matches fun(fn: function, pattern: string, message?: string)
---@field is_true fun(value: any, message?: string)
---@field is_false fun(value: any, message?: string)
---@field is_nil fun(value: any, message?: string)
---@field is_not_nil fun(value: any, message?: string)
---@field is_truthy fun(value: any, message?: string)
---@field is_falsy fun(value: any, message?: string)
---@field is_string fun(value: any, message?: string)
---@field is_number fun(value: any, message?: string)
---@field is_table fun(value: any, message?: string)
---@field is_function fun(value: any, message?: string)
---@field is_boolean fun(value: any, message?: string)
---@field are_same fun(expected: any, actual: any, message?: string)
---@field are_equal fun(expected: any, actual: any, message?: string)
---@field spy fun(s: any): luassert
---@field stub fun(s: any): luassert
---@field called fun(times?: integer)
---@field called_with fun(...: any)
---@field returned_with fun(...: any)
---@field register fun(kind: string, name: string, fn: function, positive?: string, negative?: string)
assert = {}

---luassert's spies: `spy.new(fn)`, `spy.on(t, "name")`.
---@class luassert.spy
---@overload fun(fn?: function): table
---@field new fun(fn?: function): table
---@field on fun(t: table, name: string): table
---@field is_spy fun(v: any): boolean
spy = {}

---luassert's stubs: `stub(t, "name", ...)`, `stub.new(t, "name", ...)`.
---@class luassert.stub
---@overload fun(t: table, name: string, ...: any): table
---@field new fun(t: table, name: string, ...: any): table
stub = {}

---luassert's mocks: `mock(t [, dostub])` spies (or stubs) every function of `t`.
---@class luassert.mock
---@overload fun(t: table, dostub?: boolean): table
---@field clear fun(t: table)
---@field revert fun(t: table)
mock = {}

---luassert's matchers for called_with: `match._`, `match.is_string()`, `match.is_ref(t)`, ...
---@class luassert.match
---@field _ any
---@field is_ref fun(t: any): any
---@field is_string fun(): any
---@field is_number fun(): any
---@field is_table fun(): any
---@field is_true fun(): any
---@field is_false fun(): any
---@field is_nil fun(): any
---@field is_truthy fun(): any
---@field is_falsy fun(): any
---@field is_same fun(v: any): any
---@field is_equal fun(v: any): any
---@field is_matches fun(pattern: string): any
match = {}
