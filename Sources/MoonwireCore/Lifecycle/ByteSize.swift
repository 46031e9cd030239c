#if canImport(Glibc)
import Glibc
#endif

/// Sizes of memory as people read them, and the machine's.
///
/// ```swift
/// ByteSize.describe(256 << 20)   // "256 MiB"
/// ```
public enum ByteSize {
    /// `512 MiB`, `1.5 GiB`, `300 KiB`: how a limit reads in a message.
    public static func describe(_ bytes: Int) -> String {
        for (unit, name) in [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] where bytes >= unit {
            let value = Double(bytes) / Double(unit)
            return value == value.rounded() ? "\(Int(value)) \(name)" : "\((value * 10).rounded() / 10) \(name)"
        }
        return "\(bytes) bytes"
    }

    /// The machine's physical memory in bytes; 0 or less when unknown.
    public static var physicalMemory: Int {
        Int(sysconf(Int32(_SC_PHYS_PAGES))) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
