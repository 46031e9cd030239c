import CLua
import MoonwireCore
import NIOCore

/// A server as Lua sees it (`mw.listen`): events go to the prelude's
/// dispatchers. While it listens, the runtime holds it, which keeps the script
/// running. It holds the runtime, and its `MessageServer` holds it, strongly (a
/// message reaches Lua without a weak load) until the server has closed: the
/// server cuts its link then, the runtime this one (and both when the script ends).
final class LuaServer: MessageServerDelegate {
    static let className = "moonwire.server"

    var runtime: ScriptRuntime?
    let server: MessageServer
    var handle: LuaReference?
    /// The Lua side of every open peer, by the Core peer's id.
    var peers: [Int: LuaPeer] = [:]
    /// `codec = "json"`, `"msgpack"`, `"cbor"` or a protobuf codec: messages are decoded
    /// from their bytes and sends encoded straight into the frame, by the native codec.
    var codec: NativeCodec?
    /// Sees every event first (`moonwire listen --script` prints them); it reports the
    /// server's own failures then, instead of the runtime's log.
    var observer: (any MessageServerDelegate)?

    init(runtime: ScriptRuntime, server: MessageServer) {
        self.runtime = runtime
        self.server = server
    }

    /// Cuts the links between the runtime, this object and its server (as
    /// ``LuaConnection/detach()`` does for a connection).
    func detach() {
        server.delegate = nil
        runtime = nil
    }

    func server(_ server: MessageServer, didConnect peer: ServerPeer, request: ServerPeerRequest) {
        observer?.server(server, didConnect: peer, request: request)
        guard let runtime else { return }
        let p = LuaPeer(peer: peer, codec: codec)
        peers[peer.id] = p
        runtime.dispatch(.connect, for: self) { lua in
            p.handle = lua.pushHandle(object: p, class: LuaPeer.className)
            if case .protobuf? = codec, let server = handle {
                // The peer's userdata keeps the server's schema too (its sends and messages use it).
                lua.push(server)
                lua_getiuservalue(lua.L, -1, 1)
                lua_setiuservalue(lua.L, -3, 1)
                lua.pop()
            }
            lua.pushHandshake(headers: request.headers, subprotocol: request.subprotocol,
                              own: ["path": .text(request.path), "remote_address": .text(request.remoteAddress)])
            return 2
        }
    }

    func session(_ peer: ServerPeer, didReceive message: ByteBuffer, kind: MessageKind) {
        observer?.session(peer, didReceive: message, kind: kind)
        // The one dispatcher of both roles' messages, with the peer as the session.
        guard let p = peers[peer.id] else { return }
        runtime?.dispatchMessage(message, kind: kind, for: p)
    }

    func session(_ peer: ServerPeer, didClose info: CloseInfo) {
        observer?.session(peer, didClose: info)
        guard let p = peers.removeValue(forKey: peer.id), let handle = p.handle, let runtime else { return }
        runtime.dispatch(.close, for: self) { lua in
            lua.push(handle)
            lua.push(Int(info.code))
            lua.push(info.reason)
            return 3
        }
        p.releaseReferences(in: runtime.lua)
    }

    func server(_ server: MessageServer, peerDidDrain peer: ServerPeer) {
        observer?.server(server, peerDidDrain: peer)
        guard let p = peers[peer.id] else { return }
        runtime?.dispatch(.drain, for: p) { _ in 0 }
    }

    func server(_ server: MessageServer, peerReachedBudget peer: ServerPeer) {
        observer?.server(server, peerReachedBudget: peer)
        runtime?.warnBudgetReached("peer \(peer.id) (\(peer.remoteAddress)) of \(server.url)", queued: peer.queued, buffered: peer.buffered)
    }

    func session(_ peer: ServerPeer, didFail error: ConnectionError) {
        if let observer { return observer.session(peer, didFail: error) }
        logFailure(error)
    }

    func server(_ server: MessageServer, didFail error: ConnectionError) {
        if let observer { return observer.server(server, didFail: error) }
        logFailure(error)
    }

    /// A peer's failure or the server's own, in the runtime's log (without an observer).
    private func logFailure(_ error: ConnectionError) {
        runtime?.options.logger.warning("server \(server.url): \(error)")
    }

    func server(_ server: MessageServer, accepting event: AcceptPause) {
        if let observer { return observer.server(server, accepting: event) }
        guard let logger = runtime?.options.logger else { return }
        if case .paused = event {
            logger.warning("server \(server.url): \(event)")
        } else {
            logger.info("server \(server.url): \(event)")
        }
    }
}

/// One client of a `mw.listen` server: a ``LuaSession`` whose codec is its server's.
final class LuaPeer: LuaSession {
    static let className = "moonwire.peer"

    let peer: ServerPeer

    init(peer: ServerPeer, codec: NativeCodec?) {
        self.peer = peer
        super.init(session: peer, codec: codec)
    }
}
