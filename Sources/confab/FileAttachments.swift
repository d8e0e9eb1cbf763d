#if canImport(Glibc)
import Glibc
#endif
import ConfabProtocol
import Posix
import Terminal

/// A file read for attaching: its bytes as they were when read, the name it goes under and
/// its type, found from the bytes as the daemon will find it.
struct FileAttachment {
    /// As the person gave it, for messages.
    let path: String
    let name: String
    let type: AttachmentType
    let bytes: [UInt8]

    var size: Int { bytes.count }

    /// `diagram.png, 212 KiB, image/png`: the name made safe for a terminal.
    var summary: String { AttachmentText.summary(name: name, size: size, type: type) }

    /// Reads `path` whole and checks it as the daemon will: a regular file (or a pipe, as
    /// `<(git diff)` gives, unless `regularOnly`), text or an image by its bytes, within its
    /// type's size limit.
    static func read(_ path: String, regularOnly: Bool = false) throws(AttachmentProblem) -> FileAttachment {
        let status: FileStatus
        do {
            status = try Files.status(path: path)
        } catch {
            if error.code == ENOENT || error.code == ENOTDIR, !path.isEmpty { throw .missing(path: path) }
            throw .unreadable(path: path, reason: error.description)
        }
        switch status.kind {
        case .directory: throw .directory(path: path)
        case .socket: throw .unreadable(path: path, reason: "it is a socket")
        // A pipe nobody writes to, or a device, would hold the screen until it is written.
        case .other where regularOnly: throw .unreadable(path: path, reason: "it is not a regular file")
        default: break
        }
        // A regular file too big for any attachment is not read at all: its first bytes say
        // what it is, and so which limit it passes.
        if status.kind == .regular, status.size > AttachmentLimits.maxImageBytes {
            let head = try readBytes(path, limit: 64 << 10).bytes
            throw refusal(path, head: head, size: Int(status.size))
        }
        let (bytes, whole) = try readBytes(path, limit: AttachmentLimits.maxImageBytes)
        guard whole else { throw refusal(path, head: Array(bytes.prefix(64 << 10)), size: nil) }
        guard let type = AttachmentType.detect(bytes) else {
            throw .unknownType(path: path, why: AttachmentType.refusal(of: bytes) ?? "its type is not one confab takes")
        }
        if bytes.count > AttachmentProblem.limit(for: type) { throw .tooBig(path: path, size: bytes.count, type: type) }
        return FileAttachment(path: path, name: AttachmentName.reduced(fromPath: path), type: type, bytes: bytes)
    }

    /// Why a file too big to read whole is refused: by its type as its first bytes show it
    /// (text cut in the middle of a character still counts as text).
    private static func refusal(_ path: String, head: [UInt8], size: Int?) -> AttachmentProblem {
        if let type = AttachmentType.detect(head), type.isImage { return .tooBig(path: path, size: size, type: type) }
        if head.contains(0) {
            return .unknownType(path: path, why: AttachmentType.refusal(of: head) ?? "it is not text")
        }
        var text = head
        // Up to three bytes of a character the cut split.
        for _ in 0..<3 where AttachmentType.detect(text) == nil && !text.isEmpty { text.removeLast() }
        if AttachmentType.detect(text) == nil {
            return .unknownType(path: path, why: AttachmentType.refusal(of: head) ?? "it is not text")
        }
        return .tooBig(path: path, size: size, type: .text)
    }

    /// At most `limit` bytes of `path`; `whole` when that was all of it.
    private static func readBytes(_ path: String, limit: Int) throws(AttachmentProblem) -> (bytes: [UInt8], whole: Bool) {
        let fd: Int32
        do {
            fd = try Files.open(path, O_RDONLY)
        } catch {
            if error.code == ENOENT { throw .missing(path: path) }
            throw .unreadable(path: path, reason: error.description)
        }
        defer { Files.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while bytes.count <= limit {
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { (raw) throws(Errno) -> Int in try Files.read(fd, into: raw) }
            } catch let error as Errno {
                if error.code == EISDIR { throw .directory(path: path) }
                throw .unreadable(path: path, reason: error.description)
            } catch {
                throw .unreadable(path: path, reason: "\(error)")
            }
            if count == 0 { return (bytes, true) }
            bytes += chunk[0..<count]
        }
        return (Array(bytes.prefix(limit)), false)
    }

    /// Every file of `paths`, read and checked, then checked together against the limits of
    /// one message: all of it before anything is sent.
    static func readAll(_ paths: [String], alreadyPending: [FileAttachment] = [], regularOnly: Bool = false) throws(AttachmentProblem) -> [FileAttachment] {
        let count = alreadyPending.count + paths.count
        if count > AttachmentLimits.maxCount { throw .tooMany(count: count) }
        var files: [FileAttachment] = []
        var total = alreadyPending.reduce(0) { $0 + $1.size }
        for path in paths {
            let file = try read(path, regularOnly: regularOnly)
            total += file.size
            // Said as soon as it is known, before reading the files that remain.
            if total > AttachmentLimits.maxMessageBytes { throw .messageTooBig(total: total) }
            files.append(file)
        }
        return files
    }

    /// Stores the file with `blob.put`, chunk by chunk; what the daemon stored.
    func upload(_ connection: Connection) throws(Failure) -> AttachmentRef {
        var upload: String?
        let ranges = AttachmentChunks.ranges(count: bytes.count)
        for (index, range) in ranges.enumerated() {
            let params = BlobPutParams(upload: upload, data: Base64.encode(bytes[range]), isFinal: index == ranges.count - 1 ? true : nil)
            let answer: BlobPutResult
            do throws(Failure) {
                answer = try connection.call(BlobPutCall.self, params)
            } catch {
                if case .rpc(let refusal) = error { throw .message("cannot attach \(path): \(refusal.message)") }
                throw error
            }
            if index == ranges.count - 1 {
                guard let stored = answer.attachment, Attachment.isDigest(stored.sha256) else {
                    throw .message("confabd's answer to \(RPCMethod.blobPut.rawValue) for \(path) names no stored file")
                }
                return AttachmentRef(name: name, sha256: stored.sha256)
            }
            guard let id = answer.upload else {
                throw .message("confabd's answer to \(RPCMethod.blobPut.rawValue) for \(path) has no upload id")
            }
            upload = id
        }
        throw .message("nothing was uploaded for \(path)")
    }
}

extension AttachmentRef {
    /// Uploads every file; the `attachments` parameter of `message.send`.
    static func upload(_ files: [FileAttachment], over connection: Connection) throws(Failure) -> [AttachmentRef] {
        var stored: [AttachmentRef] = []
        for file in files { stored.append(try file.upload(connection)) }
        return stored
    }
}
