#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open descriptors (`ulimit -n`): every connection holds one.
///
/// Debian's default soft limit is 1 024 with a hard limit far above it, so a load test
/// of a few thousand connections would fail at 1 021 for no reason: the CLI raises the
/// soft limit to the hard one at start (``raiseToHard()``), and a connection or an
/// accept refused for want of descriptors says how many this process may have.
public enum DescriptorLimit {
    /// The soft limit now, or nil if it cannot be read.
    public static var current: UInt64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return UInt64(limit.rlim_cur)
    }

    /// How many more descriptors the process can open, counted up to `wanted` by opening
    /// them (and closing them again at once); nil when /dev/null cannot be opened for
    /// another reason than the limit.
    public static func available(upTo wanted: Int) -> Int? {
        var opened: [CInt] = []
        defer { opened.forEach { close($0) } }
        while opened.count < wanted {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            if fd < 0 { return errno == EMFILE || errno == ENFILE ? opened.count : nil }
            opened.append(fd)
        }
        return opened.count
    }

    /// Raises the soft limit to the hard limit; returns the soft limit in force after.
    @discardableResult
    public static func raiseToHard() -> UInt64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(raised.rlim_cur) }
        }
        return UInt64(limit.rlim_cur)
    }

    /// `too many open files (this process may have 1024 open; see ulimit -n)`-style words
    /// for an errno: the limit is named when the errno is EMFILE.
    static func explain(errno code: Int32) -> String {
        var reason = String(cString: strerror(code)).lowercased()
        if code == EMFILE, let limit = current {
            reason += " (this process may have \(limit) open; see ulimit -n)"
        }
        return reason
    }
}
