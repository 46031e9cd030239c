/// The Lua modules that ship inside the binary, `require`d by name ("moonwire.mqtt"): the
/// protocol modules (docs/protocols.md). Each is a `.lua` file in resources/modules/,
/// embedded by Package.swift; this table is the one list of them. `require` finds them
/// through a searcher the prelude puts after `package.preload` (module.lua), so a module
/// of the same name on `package.path` does not shadow the shipped one.
enum BundledModules {
    static let sources: [String: [UInt8]] = [
        "moonwire.socketio": PackageResources.socketio_lua,
        "moonwire.graphql_ws": PackageResources.graphql_ws_lua,
        "moonwire.mqtt": PackageResources.mqtt_lua,
        "moonwire.ocpp": PackageResources.ocpp_lua,
        "moonwire.stomp": PackageResources.stomp_lua,
    ]

    /// The chunk name errors and tracebacks show: "@moonwire/NAME.lua", which the prelude's
    /// error reporting passes over, so an error raised in a module names the script's line.
    static func chunkName(_ module: String) -> String {
        "@" + module.replacingOccurrences(of: ".", with: "/") + ".lua"
    }
}
