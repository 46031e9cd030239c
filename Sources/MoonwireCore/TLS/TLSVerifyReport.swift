#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOSSL

/// Watches a client handshake's certificate checks so that a refusal can be told in words
/// (`certificate verify failed (self-signed certificate)`, `certificate has expired`, `not
/// for this host: it is for localhost, 127.0.0.1`) rather than as BoringSSL's
/// `CERTIFICATE_VERIFY_FAILED`, which does not say why.
///
/// NIOSSL reports neither the X.509 error nor the certificate, so the report keeps the first
/// certificate BoringSSL refused and the last one it looked at (the server's own).
final class TLSVerifyReport {
    /// The name the certificate is checked against (`server_name`, else the URL's host).
    let host: String
    private var refused: NIOSSLCertificate?
    private var leaf: NIOSSLCertificate?

    init(host: String) {
        self.host = host
    }

    /// For NIOSSL's per-certificate callback: remembers, and leaves BoringSSL's verdict as it is.
    func observe(_ result: NIOSSLVerificationResult, _ certificate: NIOSSLCertificate) -> NIOSSLVerificationResult {
        self.leaf = certificate
        if case .failed = result, self.refused == nil { self.refused = certificate }
        return result
    }

    /// Why verification failed, as far as the refused certificate tells.
    var reason: String? {
        guard let certificate = self.refused else { return nil }
        let now = time(nil)
        if certificate.notValidAfter < now { return "certificate has expired" }
        if certificate.notValidBefore > now { return "certificate is not yet valid" }
        if Self.isSelfIssued(certificate) { return "self-signed certificate" }
        return "issued by an authority that is not trusted"
    }

    /// The names the server's certificate is for, for a host name mismatch.
    var names: [String] {
        self.leaf.map(Self.names(of:)) ?? []
    }

    /// The IP addresses a certificate is for, as bytes (4 or 16).
    static func ipAddresses(of certificate: NIOSSLCertificate) -> [[UInt8]] {
        certificate._subjectAlternativeNames().compactMap { $0.nameType == .ipAddress ? Array($0.contents) : nil }
    }

    /// An IPv4 or IPv6 address as bytes, nil for a name.
    static func ipBytes(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// A certificate's DNS names and IP addresses, as text.
    static func names(of certificate: NIOSSLCertificate) -> [String] {
        certificate._subjectAlternativeNames().compactMap { name in
            let bytes = Array(name.contents)
            switch name.nameType {
            case .dnsName: return String(decoding: bytes, as: UTF8.self)
            case .ipAddress where bytes.count == 4: return bytes.map(String.init).joined(separator: ".")
            case .ipAddress where bytes.count == 16:
                return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                    .joined(separator: ":")
            default: return nil
            }
        }
    }

    /// Issuer and subject are the same name: a self-signed certificate (or a root).
    static func isSelfIssued(_ certificate: NIOSSLCertificate) -> Bool {
        guard let der = try? certificate.toDERBytes(), let names = DERNames(der) else { return false }
        return names.issuer == names.subject
    }
}

/// The issuer and subject of a DER certificate, as raw bytes: `Certificate ::= SEQUENCE {
/// tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer,
/// validity, subject, ... }, ... }`.
private struct DERNames {
    var issuer: ArraySlice<UInt8>
    var subject: ArraySlice<UInt8>

    init?(_ der: [UInt8]) {
        guard let certificate = Self.element(der, at: 0), certificate.tag == 0x30,
              let tbs = Self.element(der, at: certificate.content.lowerBound), tbs.tag == 0x30 else { return nil }
        var fields: [Range<Int>] = []
        var index = tbs.content.lowerBound
        while index < tbs.content.upperBound, fields.count < 6, let field = Self.element(der, at: index) {
            if !(fields.isEmpty && field.tag == 0xA0) { fields.append(field.whole) }
            index = field.whole.upperBound
        }
        // serialNumber, signature, issuer, validity, subject
        guard fields.count >= 5 else { return nil }
        self.issuer = der[fields[2]]
        self.subject = der[fields[4]]
    }

    /// One TLV at `offset`: its tag, its content and the whole element.
    private static func element(_ der: [UInt8], at offset: Int) -> (tag: UInt8, content: Range<Int>, whole: Range<Int>)? {
        guard offset + 2 <= der.count else { return nil }
        let tag = der[offset]
        var length = Int(der[offset + 1])
        var start = offset + 2
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard count >= 1, count <= 4, start + count <= der.count else { return nil }
            length = der[start..<start + count].reduce(0) { $0 << 8 | Int($1) }
            start += count
        }
        guard start + length <= der.count else { return nil }
        return (tag, start..<start + length, offset..<start + length)
    }
}
