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
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
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
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno.current }
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
}
