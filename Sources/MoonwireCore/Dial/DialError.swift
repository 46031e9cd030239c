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
    static func classify(
        _ error: Error, hostPort: String, timeout: TimeAmount, pinMismatch: [String]?, pins: String,
        verify: TLSVerifyReport?, proxy: ProxySettings?
    ) -> ConnectionError {
        if let mismatch = pinMismatch {
            let presented = mismatch.map { "sha256/" + $0 }.joined(separator: ", ")
            return ConnectionError(step: .tls, message: "certificate pin mismatch (expected \(pins); server presented \(presented))")
        }
        switch error {
        case let error as ConnectionError:
            return error
        case let error as NIOConnectionError:
            guard let first = error.connectionErrors.first else {
                return ConnectionError(step: .dns, message: "cannot resolve host '\(error.host)' (port \(error.port))")
            }
            return ConnectionError(step: .connect, message: "\(describe(first.error)) (\(describe(first.target)))")
        case ChannelError.connectTimeout:
            return timedOut(hostPort: hostPort, timeout: timeout, proxy: proxy)
        case let error as NIOSSLError:
            return ConnectionError(step: .tls, message: tlsMessage(describe(tls: error), hostPort: hostPort, verify: verify))
        case let error as BoringSSLError:
            return ConnectionError(step: .tls, message: tlsMessage(describe(tls: error), hostPort: hostPort, verify: verify))
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            let host = verify?.host ?? hostPort
            let names = verify?.names ?? []
            let holder = names.isEmpty ? "" : ": it is for \(names.joined(separator: ", "))"
            return ConnectionError(
                step: .tls,
                message: "certificate verify failed (not for this host name\(holder)) for host \(host)"
                    + " (connect by a name the certificate lists, or set tls = { server_name = \"...\" })"
            )
        case let error as NIOSSLExtraError:
            return ConnectionError(step: .tls, message: "\(error) for host \(verify?.host ?? hostPort)")
        default:
            return ConnectionError(step: .connect, message: describe(error))
        }
    }

    /// Names the host, and for a refused certificate why (as far as known) and what usually
    /// fixes it: `certificate verify failed (self-signed certificate) for host example.org (...)`.
    static func tlsMessage(_ reason: String, hostPort: String, verify: TLSVerifyReport? = nil) -> String {
        let host = verify?.host ?? hostPort
        guard reason == "certificate verify failed" else { return "\(reason) for host \(host)" }
        let why = verify?.reason ?? "self-signed, expired, or issued by an authority that is not trusted?"
        let fix = why == "certificate has expired" || why == "certificate is not yet valid"
            ? "check the server's certificate and this machine's clock, or tls = { insecure = true } for testing"
            : "trust its issuer with tls = { ca = \"file.pem\" }, or tls = { insecure = true } for testing"
        return "certificate verify failed (\(why)) for host \(host) (\(fix))"
    }

    static func timedOut(hostPort: String, timeout: TimeAmount, proxy: ProxySettings? = nil) -> ConnectionError {
        let ms = timeout.nanoseconds / 1_000_000
        let seconds = ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
        let via = proxy.map { " through \($0.name)" } ?? ""
        return ConnectionError(step: .timeout, message: "no connection to \(hostPort)\(via) within \(seconds)")
    }

    static func describe(_ error: Error) -> String {
        if let io = error as? IOError {
            return DescriptorLimit.explain(errno: io.errnoCode)
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
