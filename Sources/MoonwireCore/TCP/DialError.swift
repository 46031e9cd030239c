#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix
import NIOSSL

/// Names the step a TCP or TLS dial failed in (`dns`, `connect`, `tls`, `timeout`), with a
/// one-line message, from whatever NIO reported.
enum DialError {
    static func classify(_ error: Error, hostPort: String, timeout: TimeAmount, pinMismatch: [String]?, pins: String) -> WebSocketConnectionError {
        if let mismatch = pinMismatch {
            let presented = mismatch.map { "sha256/" + $0 }.joined(separator: ", ")
            return WebSocketConnectionError(step: .tls, message: "certificate pin mismatch (expected \(pins); server presented \(presented))")
        }
        switch error {
        case let error as WebSocketConnectionError:
            return error
        case let error as NIOConnectionError:
            guard let first = error.connectionErrors.first else {
                return WebSocketConnectionError(step: .dns, message: "cannot resolve host '\(error.host)' (port \(error.port))")
            }
            return WebSocketConnectionError(step: .connect, message: "\(describe(first.error)) (\(describe(first.target)))")
        case ChannelError.connectTimeout:
            return timedOut(hostPort: hostPort, timeout: timeout)
        case let error as NIOSSLError:
            return WebSocketConnectionError(step: .tls, message: tlsMessage(describe(tls: error), hostPort: hostPort))
        case let error as BoringSSLError:
            return WebSocketConnectionError(step: .tls, message: tlsMessage(describe(tls: error), hostPort: hostPort))
        default:
            return WebSocketConnectionError(step: .connect, message: describe(error))
        }
    }

    /// Names the host, and for a refused certificate what usually fixes it.
    static func tlsMessage(_ reason: String, hostPort: String) -> String {
        guard reason == "certificate verify failed" else { return "\(reason) for host \(hostPort)" }
        return "certificate verify failed for host \(hostPort) (self-signed, expired, or not for this host name?"
            + " trust its issuer with tls = { ca = \"file.pem\" }, or tls = { insecure = true } for testing)"
    }

    static func timedOut(hostPort: String, timeout: TimeAmount) -> WebSocketConnectionError {
        let ms = timeout.nanoseconds / 1_000_000
        let seconds = ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
        return WebSocketConnectionError(step: .timeout, message: "no connection to \(hostPort) within \(seconds)")
    }

    static func describe(_ error: Error) -> String {
        if let io = error as? IOError {
            return String(cString: strerror(io.errnoCode)).lowercased()
        }
        return "\(error)"
    }

    static func describe(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        return HostPort.format(host: ip, port: port)
    }

    /// BoringSSL errors end in `OPENSSL_internal:CERTIFICATE_VERIFY_FAILED`; that part reads best.
    static func describe(tls error: Error) -> String {
        let text = "\(error)"
        guard let range = text.range(of: "OPENSSL_internal:") else { return text }
        let reason = text[range.upperBound...].prefix(while: { $0.isLetter || $0 == "_" || $0.isNumber })
        return reason.lowercased().replacingOccurrences(of: "_", with: " ")
    }
}
