import Foundation
import Testing

@testable import MoonwireLua

/// The native mw.json (RapidJSON + C, Sources/CMoonJSON) against json.lua, the pure-Lua
/// codec it replaced (still in the binary as the reference decoder for rejected input):
/// each exactness rule, and the whole lua-json fuzz corpus through both.
@Suite(.timeLimit(.minutes(5))) struct JSONNativeTests {
    /// Runs `source` with `old` (json.lua's module) and `new` (mw.json) as locals; the
    /// script sets the global `out`.
    private func output(_ source: String, arguments: [String] = []) throws -> String? {
        let harness = ScriptHarness()
        let old = String(decoding: PackageResources.json_lua, as: UTF8.self)
        // json.lua's module sharing mw.json.null (its argument), so that each codec can write
        // the other's values.
        try harness.run("""
            local old = assert(load(mw.args[1], "=json.lua"))(mw.json.null)
            local new = mw.json
            local args = { table.unpack(mw.args, 2) }
            assert(new.encode ~= old.encode and new.decode ~= old.decode, "mw.json is not the native codec")
            \(source)
            """, arguments: [old] + arguments)
        #expect(harness.reported.isEmpty, "\(harness.reported)")
        return try harness.global("out").text
    }

    /// Lua helpers: `same(a, b)` compares values as the codec sees them (integer or
    /// float, float bits, array or object kind, null); `kind(t)` is a table's JSON kind.
    private static let helpers = """
        local function kind(t)
          local m = getmetatable(t)
          if m and m.__jsontype then return m.__jsontype end
          return "none"
        end
        local function same(a, b)
          if type(a) ~= type(b) then return false end
          if type(a) == "number" then
            return math.type(a) == math.type(b) and string.pack("<n", a) == string.pack("<n", b)
          end
          if type(a) ~= "table" or a == new.null or b == new.null or a == old.null or b == old.null then
            return a == b or ((a == new.null or a == old.null) and (b == new.null or b == old.null))
          end
          if kind(a) ~= kind(b) then return false end
          for k, v in pairs(a) do if not same(v, b[k]) then return false end end
          for k in pairs(b) do if a[k] == nil then return false end end
          return true
        end
        """

    @Test func integersStayIntegersAndFloatsFloats() throws {
        let out = try output(Self.helpers + "\n" + """
            local lines = {}
            for _, text in ipairs({ "9007199254740993", "-9223372036854775808", "9223372036854775807",
                "9223372036854775808", "-9223372036854775809", "123456789012345678901234567890", "-0", "0",
                "1.0", "2e3", "1E400", "-1e400", "-0.0", "0.1", "5e-324", "1e-400", "2.2250738585072014e-308" }) do
              local v = new.decode(text)
              lines[#lines + 1] = text .. " " .. math.type(v) .. " " .. string.format(math.type(v) == "integer" and "%d" or "%.17g", v)
              assert(same(v, old.decode(text)), text)
            end
            out = table.concat(lines, "\\n")
            """)
        #expect(out == """
            9007199254740993 integer 9007199254740993
            -9223372036854775808 integer -9223372036854775808
            9223372036854775807 integer 9223372036854775807
            9223372036854775808 float 9.2233720368547758e+18
            -9223372036854775809 float -9.2233720368547758e+18
            123456789012345678901234567890 float 1.2345678901234568e+29
            -0 integer 0
            0 integer 0
            1.0 float 1
            2e3 float 2000
            1E400 float inf
            -1e400 float -inf
            -0.0 float -0
            0.1 float 0.10000000000000001
            5e-324 float 4.9406564584124654e-324
            1e-400 float 0
            2.2250738585072014e-308 float 2.2250738585072014e-308
            """)
    }

    @Test func floatsEncodeAsJsonLuaWritesThem() throws {
        // Fixed cases, then 200 000 random bit patterns and 100 000 random short decimals:
        // the same text as json.lua, and the text reads back to the same float.
        let out = try output(Self.helpers + "\n" + """
            local fixed = { 0.0, -0.0, 1.0, -1.0, 0.5, 2^53, 2^53 + 2, 1e16, -1e16, 1e17, 2^63, 2^64, 1e300, 5e-324,
              2.2250738585072014e-308, 2.2250738585072009e-308, 1.7976931348623157e308, 0.1, 0.3, 0.1 + 0.2, 1 / 3, 1e-5, 1e-4,
              123456789012345.6, 28130484166435404.0, 1e15 + 0.5, 9.999999999999999e22, 1e23, 4.35, 100.125 }
            local texts = {}
            for _, x in ipairs(fixed) do
              local a, b = new.encode(x), old.encode(x)
              assert(a == b, ("%.17g: %s vs %s"):format(x, a, b))
              texts[#texts + 1] = a
            end
            local seed = 12345
            local function rand64()
              seed = (seed * 6364136223846793005 + 1442695040888963407)
              return seed
            end
            local checked = 0
            for _ = 1, 200000 do
              local x = string.unpack("<d", string.pack("<i8", rand64()))
              if x == x and x ~= math.huge and x ~= -math.huge then
                local a, b = new.encode(x), old.encode(x)
                if a ~= b then error(("%a: native %s, json.lua %s"):format(x, a, b)) end
                assert(same(new.decode(a), x), a)
                checked = checked + 1
              end
            end
            for _ = 1, 100000 do
              local digits = rand64() % 100000000
              local x = digits / 10.0 ^ (rand64() % 20) * (rand64() % 2 == 0 and 1 or -1)
              local a, b = new.encode(x), old.encode(x)
              if a ~= b then error(("%a: native %s, json.lua %s"):format(x, a, b)) end
            end
            out = table.concat(texts, " ") .. "\\n" .. tostring(checked > 190000)
            """)
        #expect(out == """
            0.0 -0.0 1.0 -1.0 0.5 9007199254740992.0 9007199254740994.0 1e+16 -1e+16 1e+17 9.223372036854776e+18 \
            1.8446744073709552e+19 1e+300 4.94065645841247e-324 2.2250738585072014e-308 2.225073858507201e-308 \
            1.7976931348623157e+308 0.1 0.3 0.30000000000000004 0.3333333333333333 1e-05 0.0001 123456789012345.6 \
            28130484166435404.0 1000000000000000.5 1e+23 1e+23 4.35 100.125
            true
            """)
    }

    /// A control character among bytes >= 0x80, at every offset: the lua-json fuzz target
    /// found RapidJSON's SSE2 in-situ scan letting one through.
    @Test func aControlCharacterAmongHighBytesIsRefusedAtEveryOffset() throws {
        let out = try output(Self.helpers + "\n" + """
            local refused = 0
            for k = 0, 47 do
              local t = '"}' .. string.rep("\\xff", k) .. "\\30" .. string.rep("\\xff", 60 - k) .. '"'
              local a, ea = new.decode(t)
              local b, eb = old.decode(t)
              assert(a == nil and a == b and ea == eb, k .. ": " .. tostring(ea))
              refused = refused + 1
            end
            out = tostring(refused)
            """)
        #expect(out == "48")
    }

    @Test func stringsEscapesSurrogatesAndInvalidUTF8() throws {
        let out = try output(Self.helpers + "\n" + """
            local lines = {}
            local all = {}
            for b = 0, 255 do all[#all + 1] = string.char(b) end
            all = table.concat(all)
            local text = new.encode(all)
            assert(text == old.encode(all))
            assert(new.decode(text) == all)
            for _, t in ipairs({ [["\\u00e9\\ud83d\\ude00"]], [["\\ud800"]], [["\\udc00"]], [["\\ud800x"]], [["\\ud800\\u0041"]],
                [["\\uDBFF\\uDFFF"]], '"\\xff\\xfe"', '"\\xed\\xa0\\x80"', '"a\\127b"', '"a\\31b"', [["\\/\\b\\f\\n\\r\\t"]],
                [["\\x"]], [["\\u12"]] }) do
              local a, ea = new.decode(t)
              local b, eb = old.decode(t)
              assert(a == b and ea == eb, t)
              lines[#lines + 1] = a and mw.hex(a) or ea
            end
            lines[#lines + 1] = new.encode("\\0\\1\\31\\127\\"\\\\/\\xff")
            out = table.concat(lines, "\\n")
            """)
        #expect(out == """
            c3a9f09f9880
            eda080
            edb080
            eda08078
            eda08041
            f48fbfbf
            fffe
            eda080
            control character in string at line 1 column 3 (byte 3)
            control character in string at line 1 column 3 (byte 3)
            2f080c0a0d09
            bad escape \\x at line 1 column 2 (byte 2)
            bad \\u escape at line 1 column 2 (byte 2)
            "\\u0000\\u0001\\u001f\\u007f\\"\\\\/\u{FF}"
            """.replacingOccurrences(of: "\u{FF}", with: "\u{FFFD}"))
    }

    @Test func nullArraysObjectsOrderAndErrors() throws {
        let out = try output(Self.helpers + "\n" + """
            local lines = {}
            local v = new.decode('{"a":[],"b":{},"c":null,"d":[1,{"x":[]}],"e":[null,null]}')
            assert(same(v, old.decode('{"a":[],"b":{},"c":null,"d":[1,{"x":[]}],"e":[null,null]}')))
            lines[#lines + 1] = new.encode(v, { sort_keys = true })
            lines[#lines + 1] = tostring(v.c == mw.json.null) .. " " .. #v.e
            local t = { zeta = 1, alpha = { 3, 2, 1 }, [10] = "ten", mid = mw.json.array(), o = mw.json.object({}) }
            lines[#lines + 1] = new.encode(t, { sort_keys = true })
            lines[#lines + 1] = new.encode(t, { pretty = true })
            assert(new.encode(t, { pretty = true }) == old.encode(t, { pretty = true }))
            assert(new.encode(t, { indent = "\\t" }) == old.encode(t, { indent = "\\t" }))
            -- Unsorted keys come in pairs order, as json.lua writes them.
            local big = {}
            for i = 1, 50 do big["k" .. i] = i end
            assert(new.encode(big) == old.encode(big))
            -- Errors, word for word.
            local function err(f, ...) return select(2, pcall(f, ...)) end
            local cases = {
              { { 1, nil, 3 } }, { { f = print } }, { { [true] = 1 } }, { { x = { y = { 1 / 0 } } } },
              { { a = { b = coroutine.create(print) }, [{}] = 1 } }, { { [1 / 0] = 1 } }, { mw.json.array({ 1, 2, [4] = 4 }) },
              { {}, { prety = true } }, { {}, { pretty = 1 } }, { {}, { indent = "x" } }, { {}, 5 },
            }
            local deep = {}
            local d = deep
            for _ = 1, 501 do d[1] = {} d = d[1] end
            cases[#cases + 1] = { deep }
            local selfish = {} selfish.me = { selfish }
            cases[#cases + 1] = { selfish }
            for _, c in ipairs(cases) do
              local a, b = err(new.encode, table.unpack(c)), err(old.encode, table.unpack(c))
              -- json.lua names the caller's line differently only for argument errors from pcall: none here.
              assert(a == b, tostring(a) .. " | " .. tostring(b))
              lines[#lines + 1] = a
            end
            for _, text in ipairs({ "", "  ", "[1,]", "{\\"a\\" 1}", "01", "-", "1.", "1e", "[1 2]", "tru", "\\"abc",
                "{\\"a\\":1}\\n x", string.rep("[", 501) .. string.rep("]", 501), "1\\0", "\\"a\\0\\"" }) do
              local a, ea = new.decode(text)
              local b, eb = old.decode(text)
              assert(ea == eb and same(a, b), text)
              lines[#lines + 1] = ea
            end
            lines[#lines + 1] = select(2, pcall(new.decode, 42))
            out = table.concat(lines, "\\n")
            """)
        #expect(out == """
            {"a":[],"b":{},"c":null,"d":[1,{"x":[]}],"e":[null,null]}
            true 2
            {"10":"ten","alpha":[3,2,1],"mid":[],"o":{},"zeta":1}
            {
              "10": "ten",
              "alpha": [
                3,
                2,
                1
              ],
              "mid": [],
              "o": {},
              "zeta": 1
            }
            mw.json.encode: value: a sparse list (2 items up to index 3) cannot be written as JSON; use mw.json.null for missing items
            mw.json.encode: value.f: a function cannot be written as JSON
            mw.json.encode: value: a boolean key cannot be written as JSON
            mw.json.encode: value.x.y[1]: inf cannot be written as JSON
            mw.json.encode: value: a table key cannot be written as JSON
            mw.json.encode: value: inf cannot be written as JSON
            [1,2]
            bad argument #2 to 'mw.json.encode' (unknown option 'opts.prety')
            bad argument #2 to 'mw.json.encode' (opts.pretty: boolean expected, got number)
            bad argument #2 to 'mw.json.encode' (opts.indent: spaces or tabs expected, got string)
            bad argument #2 to 'mw.json.encode' (table expected, got number)
            mw.json.encode: value\(String(repeating: "[1]", count: 501)): nested more than 500 levels deep
            mw.json.encode: value.me[1]: a table that contains itself cannot be written as JSON
            unexpected end of text at line 1 column 1 (byte 1)
            unexpected end of text at line 1 column 3 (byte 3)
            unexpected character ']' at line 1 column 4 (byte 4)
            ':' expected at line 1 column 6 (byte 6)
            number with a leading zero at line 1 column 1 (byte 1)
            unexpected character '-' at line 1 column 1 (byte 1)
            text after the JSON value at line 1 column 2 (byte 2)
            text after the JSON value at line 1 column 2 (byte 2)
            ',' or ']' expected at line 1 column 4 (byte 4)
            unexpected character 't' at line 1 column 1 (byte 1)
            unterminated string at line 1 column 1 (byte 1)
            text after the JSON value at line 2 column 2 (byte 10)
            nested more than 500 levels deep at line 1 column 501 (byte 501)
            text after the JSON value at line 1 column 2 (byte 2)
            control character in string at line 1 column 3 (byte 3)
            bad argument #1 to 'mw.json.decode' (string expected, got number)
            """)
    }

    /// Every input of the lua-json fuzz target (corpus and kept crashes), both ways it uses
    /// them: decoded as text (and each line of it) by both codecs, the same value or the
    /// same error, each value written by both (compact, sorted, pretty) to the same text;
    /// and run through the target's own checks (Fuzz/MoonwireFuzz/lua_json.lua, which
    /// builds values from the bytes and round-trips them) with a codec that calls both
    /// and requires the same result from each call.
    @Test func fuzzCorpusDecodesAndEncodesTheSameWithBothCodecs() throws {
        let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz").standardized
        let files = FileManager.default
        let corpus = fuzz.appendingPathComponent("corpus/lua-json")
        let crashes = fuzz.appendingPathComponent("crashes")
        let inputs = try files.contentsOfDirectory(atPath: corpus.path).map { corpus.appendingPathComponent($0).path }
            + files.contentsOfDirectory(atPath: crashes.path).filter { $0.hasPrefix("lua-json-") }.map { crashes.appendingPathComponent($0).path }
        #expect(inputs.count > 100)
        let target = fuzz.appendingPathComponent("MoonwireFuzz/lua_json.lua").path
        let out = try output(Self.helpers + "\n" + """
            local values, errors = 0, 0
            -- The target compares every encode and decode of its checks with the reference.
            local check = assert(loadfile(args[1]))(new, old)
            for i = 2, #args do
              local path = args[i]
              local f = assert(io.open(path, "rb"))
              local input = f:read("a")
              f:close()
              local ok, err = pcall(check, input)
              if not ok then error(path .. ": " .. tostring(err), 0) end
              -- The raw input, and each line of it (seeds are JSON texts; found inputs are bytes).
              local texts = { input }
              for line in input:gmatch("[^\\n]+") do texts[#texts + 1] = line end
              for _, text in ipairs(texts) do
                local a, ea = new.decode(text)
                local b, eb = old.decode(text)
                if ea ~= eb or not same(a, b) then error(path .. ": decode differs: " .. tostring(ea) .. " | " .. tostring(eb), 0) end
                if a == nil then
                  errors = errors + 1
                else
                  values = values + 1
                  for _, opts in ipairs({ false, { sort_keys = true }, { pretty = true } }) do
                    for _, v in ipairs({ a, b }) do
                      local ok1, t1 = pcall(new.encode, v, opts or nil)
                      local ok2, t2 = pcall(old.encode, v, opts or nil)
                      if ok1 ~= ok2 or (ok1 and t1 ~= t2) then error(path .. ": encode differs: " .. t1 .. " | " .. t2, 0) end
                    end
                  end
                end
              end
            end
            out = values .. " values, " .. errors .. " errors"
            """, arguments: [target] + inputs)
        print("lua-json corpus through both codecs: \(out ?? "nothing")")
        #expect(out?.hasSuffix(" errors") == true)
    }
}
