import CLua
import CLuaShim
import Foundation
import Testing

@testable import MoonwireLua

@Suite(.timeLimit(.minutes(5))) struct LuaBridgeTests {
    @Test func valuesRoundTripThroughSwift() throws {
        let vm = LuaVM()
        defer { withExtendedLifetime(vm) {} }
        let lua = vm.state
        let binary: [UInt8] = [0, 0xff, 0xfe, 0x41, 0, 0xc3, 0x28, 0xed, 0xa0, 0x80]
        let original: LuaValue = .table([
            .integer(1): .string(binary),
            .text("flag"): .boolean(true),
            .text("pi"): .number(3.25),
            .text("big"): .integer(Int64.max),
            .text("nested"): .table([.text("empty"): .string([])]),
        ])
        lua.push(original)
        let copied = try lua.value(at: -1)
        #expect(copied == original)
        #expect(lua.top == 1)
    }

    @Test func binaryStringsRoundTripLuaSwiftLua() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local all = {}
            for i = 0, 255 do all[#all + 1] = string.char(i) end
            original = table.concat(all) .. "\\0\\0\\xc3\\x28\\xf0\\x28\\x8c\\x28"
            -- through Swift and back, twice: as hex and as base64
            back_hex = mw.unhex(mw.hex(original))
            back_b64 = mw.unbase64(mw.base64(original))
            """)
        let original = try harness.global("original")
        guard case .string(let bytes) = original else {
            Issue.record("not a string")
            return
        }
        #expect(bytes.count == 264)
        #expect(try harness.global("back_hex") == original)
        #expect(try harness.global("back_b64") == original)
        // And Swift -> Lua -> Swift, byte for byte.
        let echoed = try harness.onLoop { lua -> LuaValue in
            lua.push(bytes)
            defer { lua.pop() }
            return try lua.value(at: -1)
        }
        #expect(echoed == .string(bytes))
    }

    /// Lua's small blocks come from the guard's per-size lists (CLuaShim.c): blocks
    /// that grow and shrink across the sizes keep their bytes, and the guard counts
    /// exactly the bytes Lua counts, after the collector has freed most of them.
    @Test func smallBlocksKeepTheirBytesAndTheCount() throws {
        let vm = LuaVM()
        defer { withExtendedLifetime(vm) {} }
        let source = """
            local ok = true
            for round = 1, 3 do
              local kept = {}
              for n = 1, 600, 7 do
                local t = {}
                for i = 1, n do t[i] = i * round end        -- the array grows through every size
                for i = n, 1, -1 do if t[i] ~= i * round then ok = false end end
                local s = string.rep(string.char(65 + n % 26), n)  -- buffers grow and shrink
                if #s ~= n or s:byte(n) ~= 65 + n % 26 then ok = false end
                local h = {}
                for i = 1, n % 40 do h["k" .. i] = s end    -- hash parts of each size
                for i = 1, n % 40 do if h["k" .. i] ~= s then ok = false end end
                for i = 1, n, 2 do t[i] = nil end
                kept[#kept + 1] = { t, s, h }
              end
              collectgarbage()
            end
            collectgarbage()
            return ok, collectgarbage("count") * 1024
            """
        try vm.state.load(source: Array(source.utf8), chunkName: "=blocks")
        try vm.state.call(arguments: 0, results: 2)
        #expect(try vm.state.value(at: -2) == .boolean(true))
        let luaCount = try vm.state.value(at: -1)
        vm.state.pop(2)
        #expect(luaCount == .number(Double(mw_guard_memory_used(vm.guardState))))
    }

    @Test func cyclicTablesAreRefusedNotFollowed() throws {
        let vm = LuaVM()
        defer { withExtendedLifetime(vm) {} }
        try vm.state.load(source: Array("local t = {} t.self = t return t".utf8), chunkName: "=cycle")
        try vm.state.call(arguments: 0, results: 1)
        #expect(throws: LuaConversionError.self) { try vm.state.value(at: -1) }
        #expect(vm.state.top == 1)
    }

    @Test func badArgumentsRaiseCatchableErrorsAtTheCallersLine() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local ok, err = pcall(function() return mw.after("soon", print) end)
            message = err
            local ok2, err2 = pcall(function() return mw.every(0, print) end)
            message2 = err2
            local t = mw.after(10, print)
            local ok3, err3 = pcall(function() return t.cancel(42) end)
            message3 = err3
            t:cancel()
            """)
        #expect(try harness.global("message").text == "test.lua:1: bad argument #1 to 'mw.after' (number expected, got string)")
        #expect(try harness.global("message2").text == "test.lua:3: bad argument #1 to 'mw.every' (the interval must be more than 0 seconds)")
        #expect(try harness.global("message3").text == "test.lua:6: bad self to 'timer:cancel' (timer expected, got number)")
    }

    /// 100 000 Swift-backed calls with bad arguments, each raising a Lua error
    /// caught by pcall: no crash, and Lua's heap does not grow. (The process's
    /// RSS is checked by the CLI tests, in a process of its own.)
    @Test func manyRaisedErrorsLeakNothing() throws {
        let harness = ScriptHarness()
        try harness.run("""
            local function burst(n)
              local caught = 0
              for i = 1, n do
                if not pcall(mw.hex, {}) then caught = caught + 1 end
                if not pcall(mw.after, nil, i) then caught = caught + 1 end
              end
              collectgarbage("collect")
              collectgarbage("collect")
              return caught
            end
            warm = burst(10000)
            before = collectgarbage("count")
            caught = burst(100000)
            after = collectgarbage("count")
            """)
        #expect(try harness.global("caught") == .integer(200_000))
        let before = try #require(try harness.global("before").double)
        let after = try #require(try harness.global("after").double)
        #expect(after - before < 16, "Lua heap grew by \(after - before) KiB")
    }

    @Test func userdataIsReleasedByTheCollectorAndClosedByClose() throws {
        let harness = ScriptHarness()
        try harness.run("""
            fired = 0
            do
              local t <close> = mw.after(0.01, function() fired = fired + 1 end)
            end
            mw.after(0, function() end)   -- dropped handle: still fires
            local weak = setmetatable({}, { __mode = "v" })
            weak[1] = mw.after(0.001, function() end)
            mw.sleep(0.05)
            collectgarbage("collect")
            collected = weak[1] == nil
            """)
        #expect(try harness.global("fired") == .integer(0))
        #expect(try harness.global("collected") == .boolean(true))
    }
}

