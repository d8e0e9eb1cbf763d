#if canImport(Glibc)
import Glibc
#endif

/// Splits a byte stream into lines ending in LF (a CR before the LF is dropped), with a
/// hard limit on line length so a peer can never make us buffer without bound.
public struct LineFramer: Sendable {
    public enum Failure: Error, Equatable, Sendable { case lineTooLong(limit: Int) }

    public let maxLineBytes: Int
    private var pending: [UInt8] = []
    private var failed = false

    public init(maxLineBytes: Int) {
        precondition(maxLineBytes > 0)
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes held while waiting for the end of a line.
    public var bufferedByteCount: Int { pending.count }

    /// Calls `line` for every complete line in `bytes`. After `lineTooLong` the framer
    /// stays failed: the stream has lost its framing and must be closed.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ line: (ArraySlice<UInt8>) -> Void) throws(Failure) {
        if failed { throw .lineTooLong(limit: maxLineBytes) }
        var start = 0
        let count = bytes.count
        while start < count {
            // memchr: a history page is a line of megabytes, and a byte-by-byte search was a
            // tenth of an export's time in the client.
            guard let found = memchr(bytes.baseAddress! + start, 0x0A, count - start) else {
                pending.append(contentsOf: bytes[start..<count])
                if pending.count > maxLineBytes { failed = true; pending = []; throw .lineTooLong(limit: maxLineBytes) }
                return
            }
            let newline = UnsafeRawPointer(found) - UnsafeRawPointer(bytes.baseAddress!)
            if pending.isEmpty {
                if newline - start > maxLineBytes { failed = true; throw .lineTooLong(limit: maxLineBytes) }
                var end = newline
                if end > start, bytes[end - 1] == 0x0D { end -= 1 }
                let lineBytes = Array(bytes[start..<end])
                line(lineBytes[...])
            } else {
                pending.append(contentsOf: bytes[start..<newline])
                if pending.count > maxLineBytes { failed = true; pending = []; throw .lineTooLong(limit: maxLineBytes) }
                if pending.last == 0x0D { pending.removeLast() }
                let complete = pending
                pending = []
                line(complete[...])
            }
            start = newline + 1
        }
    }

    public mutating func feed(_ bytes: [UInt8], _ line: (ArraySlice<UInt8>) -> Void) throws(Failure) {
        var failure: Failure?
        bytes.withUnsafeBytes { raw in
            do throws(Failure) { try feed(raw, line) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}
