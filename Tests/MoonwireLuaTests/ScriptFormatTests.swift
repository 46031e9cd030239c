import Foundation
import Testing

@testable import MoonwireLua

/// mw.json's numbers and shapes, mw.inspect, mw.hexdump and mw.log, run in a real runtime.
@Suite(.timeLimit(.minutes(5))) struct ScriptFormatTests {
    /// Runs `source`, which sets the global `out` to a string.
    private func output(_ source: String) throws -> String? {
        let harness = ScriptHarness()
        try harness.run(source)
        #expect(harness.reported.isEmpty, "\(harness.reported)")
        return try harness.global("out").text
    }

    @Test func jsonKeepsIntegersExactAndFloatsFloats() throws {
        let out = try output("""
            local v = assert(mw.json.decode('{"id":9007199254740993,"min":-9223372036854775808,"f":1.0,"g":0.1,"n":3}'))
            out = table.concat({
              math.type(v.id), tostring(v.id), math.type(v.min), tostring(v.min), math.type(v.f), math.type(v.n),
              mw.json.encode({ 2^53, 1.0, 9007199254740993, 0.30000000000000004, 3, -0.5, 1e300 }),
              -- a float from 1e16 to 1e17 that needs 17 digits (found by the lua-json fuzz target)
              mw.json.encode({ 28130484166435404.0, -14437268945947546.0 }),
              math.type(mw.json.decode(mw.json.encode(28130484166435404.0))),
            }, " ")
            """)
        #expect(out == "integer 9007199254740993 integer -9223372036854775808 float integer "
            + "[9007199254740992.0,1.0,9007199254740993,0.30000000000000004,3,-0.5,1e+300] "
            + "[28130484166435404.0,-14437268945947546.0] float")
    }

    /// The lua-json fuzz target's seeds and kept crash inputs (Fuzz/corpus/lua-json,
    /// Fuzz/crashes/lua-json-*) through its checks (Fuzz/MoonwireFuzz/lua_json.lua), in the
    /// ordinary build: what the fuzzer once found stays fixed.
    @Test func jsonFuzzInputsStillPass() throws {
        let fuzz = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz")
        let files = FileManager.default
        let corpus = fuzz.appendingPathComponent("corpus/lua-json")
        let crashes = fuzz.appendingPathComponent("crashes")
        let inputs = try files.contentsOfDirectory(atPath: corpus.path).map { corpus.appendingPathComponent($0).path }
            + files.contentsOfDirectory(atPath: crashes.path).filter { $0.hasPrefix("lua-json-") }
            .map { crashes.appendingPathComponent($0).path }
        #expect(inputs.count > 1)
        let harness = ScriptHarness()
        try harness.run("""
            local check = assert(loadfile(mw.args[1]))(mw.json)
            local failures = {}
            for i = 2, #mw.args do
              local file = assert(io.open(mw.args[i], "rb"))
              local ok, err = pcall(check, file:read("a"))
              file:close()
              if not ok then failures[#failures + 1] = mw.args[i] .. ": " .. err end
            end
            out = table.concat(failures, "\\n")
            """, arguments: [fuzz.appendingPathComponent("MoonwireFuzz/lua_json.lua").path] + inputs)
        #expect(harness.reported.isEmpty, "\(harness.reported)")
        #expect(try harness.global("out").text == "")
    }

    @Test func jsonNullArraysObjectsAndPretty() throws {
        let out = try output("""
            local v = assert(mw.json.decode('{"a":[],"b":{},"c":null,"d":[1,{"x":[]}]}'))
            local lines = {
              tostring(v.c == mw.json.null),
              mw.json.encode({ list = mw.json.array{}, map = {}, none = mw.json.null }, { sort_keys = true }),
              mw.json.encode(v, { sort_keys = true }),
              mw.json.encode({ b = 1, a = { 1, 2 } }, { pretty = true }),
            }
            out = table.concat(lines, "\\n")
            """)
        #expect(out == """
            true
            {"list":[],"map":{},"none":null}
            {"a":[],"b":{},"c":null,"d":[1,{"x":[]}]}
            {
              "a": [
                1,
                2
              ],
              "b": 1
            }
            """)
    }

    @Test func jsonMisuseAndBadInputInWords() throws {
        let out = try output("""
            local lines = {}
            local function try(f, ...) local ok, err = pcall(f, ...) lines[#lines + 1] = tostring(err) end
            try(mw.json.encode, { 1, nil, 3 })
            try(mw.json.encode, { f = print })
            local t = {} t.self = t
            try(mw.json.encode, t)
            try(mw.json.encode, 0/0)
            try(function() local s = mw.json.encode({}, { prety = true }) end)
            lines[#lines + 1] = select(2, mw.json.decode('[1, 2'))
            lines[#lines + 1] = select(2, mw.json.decode('{"a":1}\\n x'))
            lines[#lines + 1] = select(2, mw.json.decode(string.rep("[", 1000)))
            out = table.concat(lines, "\\n")
            """)
        #expect(out == """
            mw.json.encode: value: a sparse list (2 items up to index 3) cannot be written as JSON; use mw.json.null for missing items
            mw.json.encode: value.f: a function cannot be written as JSON
            mw.json.encode: value.self: a table that contains itself cannot be written as JSON
            mw.json.encode: value: NaN cannot be written as JSON
            test.lua:8: bad argument #2 to 'mw.json.encode' (unknown option 'opts.prety')
            ',' or ']' expected at line 1 column 6 (byte 6)
            text after the JSON value at line 2 column 2 (byte 10)
            nested more than 500 levels deep at line 1 column 501 (byte 501)
            """)
    }

    @Test func inspectMarksCyclesAndHexdumpShowsBytes() throws {
        let out = try output("""
            local t = { 1, "two", op = "x", nested = { ok = true }, ["a key"] = 1.5 }
            t.nested.parent = t
            out = mw.inspect(t) .. "\\n" .. mw.inspect("bin\\0\\255") .. "\\n" .. mw.hexdump("hello\\0\\1 world, more than 16")
            """)
        #expect(out == """
            {
              1,
              "two",
              ["a key"] = 1.5,
              nested = { ok = true, parent = <cycle: table 1> },
              op = "x"
            }
            "bin\\x00\\xff"
            00000000  68 65 6c 6c 6f 00 01 20  77 6f 72 6c 64 2c 20 6d  |hello.. world, m|
            00000010  6f 72 65 20 74 68 61 6e  20 31 36                 |ore than 16|
            """)
    }

    @Test func logTakesAnyValues() throws {
        let out = try output("""
            local ok1 = pcall(mw.log, "plain", 1, nil, { a = 1 })
            local ok2 = pcall(mw.log.warn, { 1, 2 })
            local ok3 = pcall(mw.log.info, "%d items", 3)
            local ok4, err = pcall(mw.log.info, "%d items", "x")
            out = tostring(ok1 and ok2 and ok3) .. " " .. tostring(ok4) .. " " .. err
            """)
        #expect(out == "true false mw.log.info: bad argument #2 to 'string.format' (number expected, got string)")
    }
}
