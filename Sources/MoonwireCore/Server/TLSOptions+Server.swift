import NIOCore
import NIOSSL

extension TLSOptions {
    /// The NIOSSL context of a `wss://` or `tls://` server: its certificate chain and key
    /// from `certificateFile` / `privateKeyFile` (the key may sit in the certificate file),
    /// and, with `caFile`, mandatory client certificates issued by that CA.
    func makeServerContext() throws(ServerListenError) -> NIOSSLContext {
        guard let certificateFile = self.certificateFile else {
            throw ServerListenError("a TLS server needs a certificate: set tls.cert (and tls.key)")
        }
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: self.privateKeyFile ?? certificateFile, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            if let caFile = self.caFile {
                configuration.trustRoots = .file(caFile)
                configuration.certificateVerification = .noHostnameVerification
            }
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ServerListenError("cannot set up TLS: \(error)")
        }
    }
}
