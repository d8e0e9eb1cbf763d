#if canImport(Glibc)
import Glibc
#endif

/// Signals turned into bytes on a pipe, for a program whose main loop is `poll(2)`: the
/// handler only writes the signal's number (async-signal-safe) and returns; the loop reads
/// it and acts, in its own time, with all its state at hand.
public enum SignalPipe {
    /// Written only by `install`, before any handler can run; read by the handler.
    nonisolated(unsafe) private static var writeEnd: Int32 = -1
    nonisolated(unsafe) private static var readEnd: Int32 = -1

    /// Catches `signals` from now on; returns the descriptor to poll for reading. A second
    /// call adds signals to the same pipe.
    @discardableResult
    public static func install(_ signals: [Int32]) throws(Errno) -> Int32 {
        if readEnd < 0 {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw Errno.current }
            for end in ends {
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            }
            readEnd = ends[0]
            writeEnd = ends[1]
        }
        for number in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                let saved = errno
                var byte = UInt8(truncatingIfNeeded: number)
                // A full pipe already holds a wake-up; losing this byte loses nothing.
                _ = write(SignalPipe.writeEnd, &byte, 1)
                errno = saved
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            guard sigaction(number, &action, nil) == 0 else { throw Errno.current }
        }
        return readEnd
    }

    /// The signals caught since the last call, oldest first.
    public static func drain() -> [Int32] {
        guard readEnd >= 0 else { return [] }
        var caught: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count <= 0 { return caught }
            caught += buffer[0..<count].map { Int32($0) }
        }
    }
}
