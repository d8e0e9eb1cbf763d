#if canImport(Glibc)
import Glibc
#endif

/// Whole-file reads and directory listings, the two file chores several modules share.
public enum Files {
    /// Everything `fd` yields up to end of file. Fails with EFBIG past `limit` bytes, so
    /// a file that should be small (a config, a key) cannot make the caller hold gigabytes.
    public static func readAll(_ fd: Int32, limit: Int = .max) throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Errno.current
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { throw Errno(EFBIG) }
        }
    }

    /// The file at `path`, read with plain reads (so a pipe or `/dev/null` works too).
    public static func readAll(path: String, limit: Int = .max) throws(Errno) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { close(fd) }
        return try readAll(fd, limit: limit)
    }

    /// The names in a directory, without `.` and `..`, in no particular order.
    public static func names(in directory: String) throws(Errno) -> [String] {
        guard let handle = opendir(directory) else { throw Errno.current }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Writes all of `bytes` at the descriptor's position, through short writes and EINTR.
    /// Returns how many bytes went out and, when not all did, the errno that stopped it (EIO
    /// for a write that took nothing): a caller cutting back a partial record needs both.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> (written: Int, failure: Int32?) {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    /// `writeAll` of bytes the caller holds in place (a String's UTF-8, a reused buffer).
    public static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> (written: Int, failure: Int32?) {
        var written = 0
        let failure: Int32? = {
            while written < raw.count {
                let n = write(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { return EIO }
                written += n
            }
            return nil
        }()
        return (written, failure)
    }

    /// Makes the directory (not its parents) unless it exists.
    public static func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(Errno) {
        if mkdir(path, mode) != 0, errno != EEXIST { throw Errno.current }
    }

    /// Where a symbolic link points (`/proc/self/exe`: this program's file).
    public static func linkTarget(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { raw in
            readlink(path, raw.baseAddress!.assumingMemoryBound(to: CChar.self), raw.count - 1)
        }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}
