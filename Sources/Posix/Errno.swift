#if canImport(Glibc)
import Glibc
#endif

/// A failed system call's `errno`, printed the way the C library words it.
public struct Errno: Error, Equatable, CustomStringConvertible, Sendable {
    public let code: Int32

    public init(_ code: Int32) { self.code = code }

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(errno) }

    public var description: String { String(cString: strerror(code)) }
}
