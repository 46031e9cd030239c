// swift-tools-version:6.0
import Foundation
import PackageDescription

// AddressSanitizer for moonwire's own code (MOONWIRE_ASAN set: scripts/test.sh's last phase).
// Only moonwire's targets, Swift and C, are compiled and linked with it, so that phase reuses
// the debug build's objects of NIO, BoringSSL and every other dependency instead of building
// them a second time (eight of a 2-vCPU CI run's minutes). A dependency's own memory errors
// are not caught there; one in moonwire's code, the Lua bridge and the C codecs is.
let asan = ProcessInfo.processInfo.environment["MOONWIRE_ASAN"] != nil
let asanSwift: [SwiftSetting] = asan ? [.unsafeFlags(["-sanitize=address"])] : []
let asanClangFlags = ["-fsanitize=address", "-fno-omit-frame-pointer"]
let asanC: [CSetting] = asan ? [.unsafeFlags(asanClangFlags)] : []
let asanCXX: [CXXSetting] = asan ? [.unsafeFlags(asanClangFlags)] : []
let asanLink: [LinkerSetting] = asan ? [.unsafeFlags(["-sanitize=address"])] : []

// Release builds of moonwire's own modules skip Swift's run-time exclusivity checks: at
// 10 000 connections they were about 3 000 instructions per echo (swift_beginAccess and its
// thread-local access set, 30 checks on the message path; docs/performance.md). Everything
// runs on one event loop thread per Lua state, and debug builds (the tests, AddressSanitizer
// runs) keep checking, so an overlapping access still traps there.
let ownModuleSettings: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
] + asanSwift

let package = Package(
    name: "moonwire",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "moonwire", targets: ["moonwire"]),
        .library(name: "MoonwireCore", targets: ["MoonwireCore"]),
        .library(name: "MoonwireLua", targets: ["MoonwireLua"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLua",
            pkgConfig: "lua5.4",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        .systemLibrary(
            name: "CLibEdit",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        .target(
            name: "CLuaShim",
            dependencies: ["CLua"],
            cSettings: asanC
        ),
        // mw.json: RapidJSON (Debian's rapidjson-dev, header-only) parses into a token
        // tape in C++; C builds the Lua values and writes the text.
        .target(
            name: "CMoonJSON",
            dependencies: ["CLua"],
            cSettings: [.unsafeFlags(["-O2"])] + asanC,
            cxxSettings: [.unsafeFlags(["-O2", "-fno-exceptions", "-fno-rtti"])] + asanCXX
        ),
        // mw.msgpack and mw.cbor: native decoders and encoder in C, bytes straight to Lua
        // values and back, with mw.json's markers (bench/formats: as fast as a codec on
        // Debian's msgpack-c, faster than one on libcbor; docs/formats.md).
        .target(
            name: "CMoonPack",
            dependencies: ["CLua", "CMoonJSON"],
            cSettings: [.unsafeFlags(["-O2"])] + asanC
        ),
        // mw.protobuf: Debian's libprotobuf parses .proto files at run time (C++, no Lua);
        // C walks the descriptors between the wire bytes and Lua tables. pkg-config's
        // `protobuf` is just -lprotobuf; the parser (compiler::Importer) is in it too.
        .target(
            name: "CMoonProto",
            dependencies: ["CLua", "CMoonJSON"],
            cSettings: [.unsafeFlags(["-O2"])] + asanC,
            cxxSettings: [.unsafeFlags(["-O2"])] + asanCXX,
            linkerSettings: [.linkedLibrary("protobuf")]
        ),
        .target(
            name: "MoonwireCore",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOSOCKS", package: "swift-nio-extras"),
            ],
            swiftSettings: ownModuleSettings,
            // Every product links MoonwireCore, so the sanitizer's runtime comes with it.
            linkerSettings: asanLink
        ),
        .target(
            name: "MoonwireLua",
            dependencies: ["CLua", "CLuaShim", "CMoonJSON", "CMoonPack", "CMoonProto", "MoonwireCore"],
            resources: [
                .embedInCode("resources/prelude/runtime.lua"),
                .embedInCode("resources/prelude/connections.lua"),
                .embedInCode("resources/prelude/sessions.lua"),
                .embedInCode("resources/prelude/servers.lua"),
                .embedInCode("resources/prelude/glue.lua"),
                .embedInCode("resources/prelude/metrics.lua"),
                .embedInCode("resources/prelude/load_models.lua"),
                .embedInCode("resources/prelude/module.lua"),
                .embedInCode("resources/test_runner.lua"),
                .embedInCode("resources/interpreter.lua"),
                .embedInCode("resources/json.lua"),
                .embedInCode("resources/protobuf.lua"),
                .embedInCode("resources/console_codec.lua"),
                .embedInCode("resources/inspect.lua"),
                .embedInCode("resources/replay_test_helpers.lua"),
                .embedInCode("resources/listen_handlers.lua"),
                .embedInCode("resources/connect_protocol.lua"),
                // The protocol modules (BundledModules.swift lists them for require).
                .embedInCode("resources/modules/moonwire/socketio.lua"),
                .embedInCode("resources/modules/moonwire/graphql_ws.lua"),
                .embedInCode("resources/modules/moonwire/mqtt.lua"),
                .embedInCode("resources/modules/moonwire/ocpp.lua"),
                .embedInCode("resources/modules/moonwire/stomp.lua"),
                .embedInCode("resources/definitions/moonwire_meta.lua"),
                .embedInCode("resources/definitions/busted_meta.lua"),
                .embedInCode("resources/definitions/api_tools.lua"),
            ],
            swiftSettings: ownModuleSettings
        ),
        .executableTarget(
            name: "moonwire",
            dependencies: [
                "MoonwireCore",
                "MoonwireLua",
                "CMoonJSON",
                "CLibEdit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            resources: [
                .embedInCode("resources/report.css"),
                .embedInCode("resources/report.js"),
                .embedInCode("resources/init/bot.lua"),
                .embedInCode("resources/init/greeting.lua"),
                .embedInCode("resources/init/greeting_spec.lua"),
            ],
            swiftSettings: ownModuleSettings
        ),
        .executableTarget(
            name: "moonwire-bench",
            dependencies: [
                "MoonwireLua", "MoonwireCore", "CLuaShim",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "bench/Sources/moonwire-bench",
            swiftSettings: asanSwift
        ),
        .testTarget(
            name: "MoonwireCoreTests",
            dependencies: [
                "MoonwireCore", .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Peers"]
        ),
        .testTarget(name: "MoonwireLuaTests", dependencies: ["MoonwireLua", "CLua", "CLuaShim"], swiftSettings: asanSwift),
        .testTarget(name: "moonwireTests", dependencies: ["moonwire"], exclude: ["Fixtures", "Interactive"]),
    ],
    swiftLanguageModes: [.v5]
)

// The sanitizer phase runs MoonwireLuaTests only: the other test targets are not built there.
if asan {
    package.targets.removeAll { $0.name == "MoonwireCoreTests" || $0.name == "moonwireTests" }
}

// libFuzzer targets (scripts/fuzz.sh): only when MOONWIRE_FUZZ is set, so that ordinary
// builds never link an executable whose main() comes from -sanitize=fuzzer.
if ProcessInfo.processInfo.environment["MOONWIRE_FUZZ"] != nil {
    package.targets.append(.target(name: "LuaCoverage", dependencies: ["CLua"], path: "Fuzz/LuaCoverage"))
    package.targets.append(.executableTarget(
        name: "moonwire-fuzz",
        dependencies: [
            "MoonwireCore",
            "MoonwireLua",
            "LuaCoverage",
            "CMoonPack",
            "CMoonProto",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ],
        path: "Fuzz/MoonwireFuzz",
        resources: [.embedInCode("lua_json.lua"), .embedInCode("lua_pack.lua"), .embedInCode("lua_protobuf.lua")],
        swiftSettings: [.unsafeFlags(["-parse-as-library"])]
    ))
    package.products.append(.executable(name: "moonwire-fuzz", targets: ["moonwire-fuzz"]))
}
