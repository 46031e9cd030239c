import Crypto
import NIOCore
import NIOSSL

/// TLS settings of a `wss://` (or `tls://`) client connection: the `tls` table of
/// `mw.connect`.
///
/// ```swift
/// var tls = TLSOptions()
/// tls.caFile = "ca.pem"                          // trust only this CA
/// tls.pinSHA256 = ["r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]
/// ```
public struct TLSOptions: Sendable, Hashable {
    /// A PEM file of CA certificates to trust instead of the system store.
    public var caFile: String?
    /// Skip certificate verification (testing only). Pins, if any, are still enforced.
    public var insecure: Bool
    /// Accepted SPKI pins: base64 of the SHA-256 of a certificate's DER SubjectPublicKeyInfo
    /// (`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`),
    /// optionally prefixed `sha256/`. When set, a server is trusted if any certificate of the
    /// chain it presents has one of these keys; the CA store is then not consulted, as with
    /// SocketRocket's pinned certificates.
    public var pinSHA256: [String]
    /// The name for SNI and hostname verification, when it differs from the URL's host.
    public var serverName: String?
    /// A PEM client certificate (chain) for mutual TLS.
    public var certificateFile: String?
    /// The PEM private key of `certificateFile`.
    public var privateKeyFile: String?

    /// System trust, full verification, no pins, no client certificate.
    public init(
        caFile: String? = nil,
        insecure: Bool = false,
        pinSHA256: [String] = [],
        serverName: String? = nil,
        certificateFile: String? = nil,
        privateKeyFile: String? = nil
    ) {
        self.caFile = caFile
        self.insecure = insecure
        self.pinSHA256 = pinSHA256
        self.serverName = serverName
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
    }

    /// Builds the NIOSSL context (loads CA and key files). Errors are `tls` connection errors.
    /// Without `checkHostname`, the chain is verified but the name is left to the caller.
    func makeContext(checkHostname: Bool = true) throws(ConnectionError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if self.insecure && self.pinSHA256.isEmpty {
            configuration.certificateVerification = .none
        } else if !checkHostname {
            configuration.certificateVerification = .noHostnameVerification
        }
        if let caFile = self.caFile {
            configuration.trustRoots = .file(caFile)
        }
        do {
            if let certificateFile = self.certificateFile {
                let chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
                configuration.certificateChain = chain.map { .certificate($0) }
                let keyFile = self.privateKeyFile ?? certificateFile
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
            }
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ConnectionError(step: .tls, message: "cannot set up TLS: \(error)")
        }
    }

    /// The TLS handler of a client dial to `host` (SNI and verification use `serverName`
    /// when set), with the pin check or the report that words a refusal.
    ///
    /// NIOSSL checks an IP address host against the address the socket is connected to:
    /// through a proxy that is the proxy's, so there the certificate's IP addresses are
    /// checked against the target's here instead.
    func makeClientHandler(
        context: NIOSSLContext, host: String, hostIsIPAddress: Bool, throughProxy: Bool
    ) throws -> (handler: NIOSSLClientHandler, pins: TLSPinVerifier?, report: TLSVerifyReport?) {
        let serverName = self.serverName ?? (hostIsIPAddress ? nil : host)
        if throughProxy, serverName == nil, self.pinSHA256.isEmpty, !self.insecure {
            let target = TLSVerifyReport.ipBytes(host)
            let handler = try NIOSSLClientHandler._makeSSLClientHandler(
                context: try self.makeContext(checkHostname: false),
                serverHostname: nil,
                additionalPeerCertificateVerificationCallback: { leaf, channel in
                    let names = TLSVerifyReport.names(of: leaf)
                    guard let target, TLSVerifyReport.ipAddresses(of: leaf).contains(target) else {
                        let holder = names.isEmpty ? "" : ": it is for \(names.joined(separator: ", "))"
                        return channel.eventLoop.makeFailedFuture(ConnectionError(
                            step: .tls, message: "certificate verify failed (not for this host name\(holder)) for host \(host)"))
                    }
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
            )
            return (handler, nil, nil)
        }
        guard self.pinSHA256.isEmpty else {
            let verifier = TLSPinVerifier(pins: self.normalizedPins)
            let handler = try NIOSSLClientHandler(
                context: context,
                serverHostname: serverName,
                customVerificationCallback: { chain, promise in verifier.verify(chain, promise) }
            )
            return (handler, verifier, nil)
        }
        // The per-certificate callback (deprecated in favour of one that replaces BoringSSL's
        // verification) is the only one that sees BoringSSL's verdict and the refused certificate.
        let report = TLSVerifyReport(host: self.serverName ?? host)
        return (try NIOSSLClientHandler(context: context, serverHostname: serverName, verificationCallback: report.observe), nil, report)
    }

    /// The pins normalised to bare base64.
    var normalizedPins: Set<String> {
        Set(self.pinSHA256.map { $0.hasPrefix("sha256/") ? String($0.dropFirst(7)) : $0 })
    }

    /// `sha256/AAA=, sha256/BBB=` for error messages.
    var pinList: String {
        self.normalizedPins.sorted().map { "sha256/" + $0 }.joined(separator: ", ")
    }

    /// The SPKI pin of a certificate, as base64.
    public static func spkiPin(of certificate: NIOSSLCertificate) throws -> String {
        let spki = try certificate.extractPublicKey().toSPKIBytes()
        return BinaryText.base64(Array(SHA256.hash(data: spki)))
    }
}

/// Checks the server's chain against SPKI pins from NIOSSL's custom verification callback,
/// and remembers a mismatch so the handshake failure can be reported as one.
final class TLSPinVerifier {
    let pins: Set<String>
    private(set) var mismatch: [String]?

    init(pins: Set<String>) {
        self.pins = pins
    }

    func verify(_ chain: [NIOSSLCertificate], _ promise: EventLoopPromise<NIOSSLVerificationResult>) {
        let presented = chain.compactMap { try? TLSOptions.spkiPin(of: $0) }
        if presented.contains(where: self.pins.contains) {
            promise.succeed(.certificateVerified)
        } else {
            self.mismatch = presented
            promise.succeed(.failed)
        }
    }
}
