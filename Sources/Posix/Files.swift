#if canImport(Glibc)
import Glibc
#endif

/// Whole-file reads and directory listings, the two file chores several modules share.
public enum Files {
    /// Everything `fd` yields up to end of file. Fails with EFBIG past `limit` bytes, so
    /// a file that should be small (a config, a key) cannot make the caller hold gigabytes.
    public static func readAll(_ fd: Int32, limit: Int = .max) throws(Errno) -> [UInt8] {
        // A regular file is read straight into one array of its size: growing it chunk by chunk
        // copies a long log several times over.
        if let seen = try? status(of: fd), seen.kind == .regular, seen.size > 0, seen.size <= Int64(min(limit, Int.max / 2)) {
            return try readRegular(fd, expected: Int(seen.size), limit: limit)
        }
        var bytes: [UInt8] = []
        return try readRest(fd, after: &bytes, limit: limit)
    }

    /// A file expected to hold `expected` bytes: read into an array of that size, then on to the
    /// end should it have grown meanwhile.
    private static func readRegular(_ fd: Int32, expected: Int, limit: Int) throws(Errno) -> [UInt8] {
        var failure: Errno?
        var bytes = [UInt8](unsafeUninitializedCapacity: expected) { buffer, filled in
            while filled < buffer.count {
                let count = Glibc.read(fd, buffer.baseAddress! + filled, buffer.count - filled)
                if count > 0 {
                    filled += count
                } else if count == 0 {
                    return
                } else if errno != EINTR {
                    failure = .current
                    return
                }
            }
        }
        if let failure { throw failure }
        guard bytes.count == expected else { return bytes }
        return try readRest(fd, after: &bytes, limit: limit)
    }

    /// `bytes`, then what `fd` yields up to end of file, in 64 KiB reads; EFBIG past `limit`.
    private static func readRest(_ fd: Int32, after bytes: inout [UInt8], limit: Int) throws(Errno) -> [UInt8] {
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

    /// Why a directory is not one to keep private state in.
    public enum PrivateDirectoryProblem: Error, Equatable, CustomStringConvertible {
        case notADirectory(String)
        case notOwned(String, owner: UInt32)
        case openToOthers(String, mode: mode_t)
        case failed(String, Errno)

        public var description: String {
            switch self {
            case .notADirectory(let path):
                return "\(path) is not a directory (a symbolic link or a file)"
            case .notOwned(let path, let owner):
                return "\(path) belongs to uid \(owner), not to you (uid \(getuid()))"
            case .openToOthers(let path, let mode):
                let digits = String(mode, radix: 8)
                return "\(path) has mode \(String(repeating: "0", count: max(0, 4 - digits.count)) + digits); it must be 0700 (yours alone)"
            case .failed(let path, let error):
                return "cannot use \(path): \(error)"
            }
        }
    }

    /// Makes the directory `path` with mode 0700 unless it exists (not its parents), then
    /// checks that it is one only this user can read or change: a real directory (not a
    /// symbolic link), owned by this uid, with no permission for group or others. A
    /// directory someone else made first (in /tmp, say) is refused, never used.
    public static func ensurePrivateDirectory(_ path: String) throws(PrivateDirectoryProblem) {
        if mkdir(path, 0o700) != 0, errno != EEXIST { throw .failed(path, Errno.current) }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .failed(path, Errno.current) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .notADirectory(path) }
        guard info.st_uid == getuid() else { throw .notOwned(path, owner: info.st_uid) }
        guard info.st_mode & 0o077 == 0 else { throw .openToOthers(path, mode: info.st_mode & 0o777) }
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
