#if canImport(Glibc)
import Glibc
#endif

/// What `stat` says about a file, in Swift types.
public struct FileStatus: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case regular, directory, socket, symbolicLink, other
    }

    public var kind: Kind
    /// The permission bits (and set-id and sticky bits): `st_mode` without the type.
    public var permissions: UInt32
    public var size: Int64
    public var device: UInt64
    public var inode: UInt64
    public var owner: UInt32
    public var modifiedNanoseconds: Int64

    /// Anyone may create entries, only their owners remove them (`/tmp`).
    public var isSticky: Bool { permissions & UInt32(S_ISVTX) != 0 }

    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFSOCK: kind = .socket
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        permissions = UInt32(info.st_mode & ~S_IFMT)
        size = Int64(info.st_size)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        owner = UInt32(info.st_uid)
        modifiedNanoseconds = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }
}

/// A failed step on a path, naming the step and the path: `mkdir -p` fails on one of several
/// directories, an atomic write in one of its steps.
public struct PathError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, in the system call's words: `mkdir`, `open`, `create`, `write`, `fsync`, `rename`.
    public let operation: String
    public let path: String
    public let errno: Errno
    public init(_ operation: String, path: String, errno: Errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }
    public var description: String { "\(operation) \(path): \(errno)" }
}

/// Descriptors, metadata, durability and directories: the file chores of the daemon and the
/// client, each with its errno turned into a thrown `Errno` and EINTR ridden out.
extension Files {
    /// `open(2)` with close-on-exec always added.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { throw Errno.current }
        }
    }

    /// Closes a descriptor; the result is of no use (Linux frees the descriptor even on EINTR).
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// One `read(2)` into `buffer` (through EINTR): the count, 0 at end of file.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno != EINTR { throw Errno.current }
        }
    }

    /// What the descriptor refers to.
    public static func status(of fd: Int32) throws(Errno) -> FileStatus {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Errno.current }
        return FileStatus(info)
    }

    /// What is at `path`; with `followingLinks` false, a symbolic link itself (`lstat`).
    public static func status(path: String, followingLinks: Bool = true) throws(Errno) -> FileStatus {
        var info = stat()
        let result: Int32
        if followingLinks { result = stat(path, &info) } else { result = lstat(path, &info) }
        guard result == 0 else { throw Errno.current }
        return FileStatus(info)
    }

    /// The status of each name in `directory` (nil where it cannot be seen), looked up relative
    /// to the directory: one path walk for it, not one per name.
    public static func statuses(of names: [String], in directory: String) -> [FileStatus?] {
        let directoryFD = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if directoryFD >= 0 { Glibc.close(directoryFD) } }
        var info = stat()
        return names.map { fstatat(directoryFD, $0, &info, 0) == 0 ? FileStatus(info) : nil }
    }

    /// Cuts the file back (or extends it) to `size` bytes.
    public static func truncate(_ fd: Int32, to size: Int64) throws(Errno) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw Errno.current }
    }

    /// `fdatasync(2)`: the file's data, and the metadata needed to read it, on stable storage.
    public static func syncData(_ fd: Int32) throws(Errno) {
        guard fdatasync(fd) == 0 else { throw Errno.current }
    }

    /// `fsync(2)`: the file and all its metadata on stable storage.
    public static func sync(_ fd: Int32) throws(Errno) {
        guard fsync(fd) == 0 else { throw Errno.current }
    }

    /// Makes the directory's entries (a file created, renamed or removed in it) durable.
    public static func syncDirectory(_ path: String) throws(PathError) {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw PathError("open", path: path, errno: .current) }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw PathError("fsync", path: path, errno: .current) }
    }

    /// Removes the file (`unlink(2)`).
    public static func remove(_ path: String) throws(Errno) {
        guard unlink(path) == 0 else { throw Errno.current }
    }

    /// Sets the permission bits of `path`.
    public static func setPermissions(_ path: String, _ mode: mode_t) throws(Errno) {
        guard chmod(path, mode) == 0 else { throw Errno.current }
    }

    /// Marks an inherited descriptor close-on-exec.
    public static func setCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Runs `body` with the file-creation mask set to `mask`, restoring it after.
    public static func withCreationMask<Result>(_ mask: mode_t, _ body: () throws -> Result) rethrows -> Result {
        let previous = umask(mask)
        defer { umask(previous) }
        return try body()
    }

    /// `mkdir -p`: each missing directory of `path` made, the last with `mode` and those above
    /// it with `parentMode`; one that exists is left as it is. With `durable`, the parent of each
    /// directory made is fsynced, so the new entry survives a power cut once this returns. The
    /// error names the step and the directory that failed.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700, parentMode: mode_t = 0o700,
                                       durable: Bool = false) throws(PathError) {
        var current = path.hasPrefix("/") ? "" : "."
        let components = path.split(separator: "/")
        for (index, component) in components.enumerated() {
            let parent = current.isEmpty ? "/" : current
            current += "/" + component
            let last = index == components.count - 1
            if mkdir(current, last ? mode : parentMode) == 0 {
                if durable { try syncDirectory(parent) }
            } else if errno != EEXIST {
                throw PathError("mkdir", path: current, errno: .current)
            }
        }
    }

    /// The whole file in `buffer` (reused from call to call: its storage is kept when large
    /// enough), read up to the size `fstat` gives: a file growing while it is read is taken up
    /// to that size only.
    public static func readWhole(path: String, into buffer: inout [UInt8]) throws(Errno) {
        let fd = try open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        let size = Int(try status(of: fd).size)
        if buffer.count < size { buffer = [UInt8](repeating: 0, count: size) }
        var total = 0
        var failure: Errno?
        buffer.withUnsafeMutableBytes { raw in
            while total < size {
                do throws(Errno) {
                    let count = try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[total..<size]))
                    if count == 0 { break }
                    total += count
                } catch {
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
        buffer.removeLast(buffer.count - total)
    }

    /// The whole file, read with one buffer of its size (a file of megabytes grown chunk by
    /// chunk would be copied over and over); a file growing while it is read is read to its end.
    public static func readWhole(path: String) throws(Errno) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        let expected = Int(try status(of: fd).size)
        var failure: Errno?
        var bytes = [UInt8](unsafeUninitializedCapacity: expected + 1) { buffer, count in
            while count < buffer.count {
                do throws(Errno) {
                    let n = try read(fd, into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[count...])))
                    if n == 0 { return }
                    count += n
                } catch {
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
        if bytes.count > expected {
            // Grew while being read: take the rest too.
            bytes += try readAll(fd)
        }
        return bytes
    }

    /// Replaces the file at `path` with `bytes` in one step: written whole to `temporary`
    /// (by default a name beside it) and renamed over it, so a reader sees the old content or
    /// the new, never a part. With `durable`, the file is fsynced before the rename and the
    /// directory after it, so the new content survives a power cut once this returns. On
    /// failure the temporary file is removed and the error names the step's file.
    public static func writeAtomically(path: String, bytes: [UInt8], mode: mode_t = 0o600,
                                       temporary: String? = nil, durable: Bool = false) throws(PathError) {
        let temporary = temporary ?? path + ".\(getpid()).tmp"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw PathError("create", path: temporary, errno: .current) }
        var failure = writeAll(fd, bytes).failure.map { PathError("write", path: temporary, errno: Errno($0)) }
        if failure == nil, durable, fsync(fd) != 0 { failure = PathError("fsync", path: temporary, errno: .current) }
        Glibc.close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = PathError("rename", path: temporary, errno: .current) }
        if let failure {
            unlink(temporary)
            throw failure
        }
        if durable {
            let slash = path.lastIndex(of: "/")
            let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
            try syncDirectory(directory)
        }
    }
}

extension Files {
    /// The current working directory as the kernel knows it (symbolic links resolved).
    public static func workingDirectory() -> String? {
        guard let path = getcwd(nil, 0) else { return nil }
        defer { free(path) }
        return String(cString: path)
    }

    /// Whether two paths name the same file (same device and inode).
    public static func sameFile(_ first: String, _ second: String) -> Bool {
        guard let a = try? status(path: first), let b = try? status(path: second) else { return false }
        return a.device == b.device && a.inode == b.inode
    }
}

extension Files {
    /// A new file, private to us (0600), named `prefix`, six random characters and `suffix`
    /// in `directory` (`mkstemps(3)`): its descriptor and path.
    public static func makeTemporaryFile(in directory: String, prefix: String, suffix: String) throws(Errno) -> (fd: Int32, path: String) {
        var template = Array((directory + "/" + prefix + "XXXXXX" + suffix).utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, Int32(suffix.utf8.count)) }
        guard fd >= 0 else { throw Errno.current }
        return (fd, String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}

extension Files {
    /// Up to `count` bytes of the file at `path` from byte `offset` (`pread(2)`, through short
    /// reads and EINTR): fewer only at the end of the file, none past it.
    public static func read(path: String, offset: Int, count: Int) throws(Errno) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        return try read(fd, offset: offset, count: count)
    }

    /// Up to `count` bytes of the file open as `fd` from byte `offset` (`pread(2)`, through short
    /// reads and EINTR; the descriptor's position is left alone): fewer only at the end of the file.
    public static func read(_ fd: Int32, offset: Int, count: Int) throws(Errno) -> [UInt8] {
        var failure: Errno?
        let bytes = [UInt8](unsafeUninitializedCapacity: max(count, 0)) { buffer, filled in
            do throws(Errno) {
                filled = try read(fd, offset: offset, into: buffer)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Fills `buffer` from the file open as `fd` from byte `offset` (`pread(2)`, through short
    /// reads and EINTR); returns how many bytes it holds, fewer only at the end of the file. For
    /// a reader that goes through a long file in pieces with one buffer.
    public static func read(_ fd: Int32, offset: Int, into buffer: UnsafeMutableBufferPointer<UInt8>) throws(Errno) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = pread(fd, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset + filled))
            if n > 0 {
                filled += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw .current
            }
        }
        return filled
    }
}
