/// Why a WebSocket connection could not be established or was failed.
///
/// The `step` names the stage the error happened in, as the scripting API reports it;
/// `description` is one readable line such as `connect: connection refused (127.0.0.1:9)`,
/// `handshake: HTTP 401` or `tls: certificate pin mismatch (expected sha256/AbC=)`.
public struct ConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stage a connection failed in.
    public enum Step: String, Sendable, Hashable {
        /// The host name did not resolve.
        case dns
        /// The TCP connection could not be made or broke before the handshake.
        case connect
        /// TLS negotiation or certificate verification failed.
        case tls
        /// The HTTP upgrade was refused or its response was not acceptable.
        case handshake
        /// `connect_timeout` elapsed before the connection opened.
        case timeout
        /// The peer broke the WebSocket protocol; the connection was closed with `closeCode`.
        case `protocol`
    }

    /// The stage that failed.
    public var step: Step
    /// What went wrong, without the step prefix.
    public var message: String
    /// The HTTP status of a refused handshake, when there was a response.
    public var httpStatus: Int?
    /// The close code sent for a protocol violation.
    public var closeCode: UInt16?

    /// Creates an error; prefer the static constructors.
    public init(step: Step, message: String, httpStatus: Int? = nil, closeCode: UInt16? = nil) {
        self.step = step
        self.message = message
        self.httpStatus = httpStatus
        self.closeCode = closeCode
    }

    /// `step: message`.
    public var description: String { "\(self.step.rawValue): \(self.message)" }

    static func protocolViolation(_ violation: WebSocketProtocolViolation) -> ConnectionError {
        ConnectionError(
            step: .protocol,
            message: "\(violation.reason) (closed with \(violation.code))",
            closeCode: violation.code
        )
    }
}

/// A peer's breach of RFC 6455 / RFC 7692 and the close code it earns.
public struct WebSocketProtocolViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// The close code to send: 1002, 1007 or 1009.
    public var code: UInt16
    /// A short reason, also used as the close frame's reason.
    public var reason: String

    /// Creates a violation.
    public init(code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// `reason (code)`.
    public var description: String { "\(self.reason) (\(self.code))" }

    static func protocolError(_ reason: String) -> Self { Self(code: CloseCode.protocolError, reason: reason) }
    static func invalidPayload(_ reason: String) -> Self { Self(code: CloseCode.invalidPayload, reason: reason) }
    static func tooBig(_ limit: Int) -> Self {
        Self(code: CloseCode.messageTooBig, reason: "message larger than max_message (\(limit) bytes)")
    }
}

extension ConnectionError {
    static func handshake(_ message: String, status: Int? = nil) -> ConnectionError {
        ConnectionError(step: .handshake, message: message, httpStatus: status)
    }
}
