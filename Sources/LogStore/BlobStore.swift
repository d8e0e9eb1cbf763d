import CBytes
import ConfabProtocol
import EventLoop
import Posix
#if canImport(Glibc)
import Glibc
#endif

/// The files user messages carry, each stored once under the SHA-256 of its bytes:
/// `<data>/blobs/xx/<sha256>`, `xx` the digest's first two hex digits (so no directory holds
/// more than a few hundred of a store's files), directories 0700 and files 0600 as the logs.
///
/// A blob is written whole to a temporary name, fsynced, renamed into place and its directory
/// fsynced, all on the thread pool, before it is announced: a crash leaves a whole blob or none.
/// A blob is stored before any message names it, so a crash between the two leaves a blob
/// nothing references (collected later), never a message naming a missing blob.
/// Removal is the broker's decision (it knows what is referenced); it unlinks on the loop,
/// which is what lets a store answered on the loop check that its blob is still there.
public final class BlobStore {
    /// `<data>/blobs`.
    public let directory: String
    let loop: Loop
    private let syncEnabled: Bool
    /// Numbers the temporary files, so two stores of the same bytes at once never share one.
    private var nextTemporary = 1

    init(dataDirectory: String, loop: Loop, syncEnabled: Bool) throws(StoreError) {
        directory = dataDirectory + "/blobs"
        self.loop = loop
        self.syncEnabled = syncEnabled
        do {
            try Files.makeDirectories(directory, durable: syncEnabled)
        } catch {
            throw StoreError(errno: error.errno.code, operation: "\(error.operation) \(error.path)")
        }
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex digits.
    public static func sha256(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { raw in
            digest.withUnsafeMutableBufferPointer { out in cbytes_sha256(raw.baseAddress, raw.count, out.baseAddress) }
        }
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest { text += [hex[Int(byte >> 4)], hex[Int(byte & 15)]] }
        return String(decoding: text, as: UTF8.self)
    }

    /// Where the blob named `sha256` is (or would be).
    public func path(of sha256: String) -> String {
        precondition(Attachment.isDigest(sha256), "blob names are checked digests before they reach the store")
        return directory + "/" + sha256.prefix(2) + "/" + sha256
    }

    /// Whether the blob is in the store (on the loop: one `stat`).
    public func contains(_ sha256: String) -> Bool {
        (try? Files.status(path: path(of: sha256)))?.kind == .regular
    }

    /// Hashes `bytes` and stores them, off the loop, by the same work whether or not a blob of
    /// that digest is already there; `done` runs on the loop with the digest once it is durable.
    public func store(_ bytes: [UInt8], done: @escaping (Result<String, StoreError>) -> Void) {
        let directory = directory, syncEnabled = syncEnabled
        let temporaryNumber = nextTemporary
        nextTemporary += 1
        loop.queueWork({ () -> Result<String, StoreError> in
            let digest = Self.sha256(bytes)
            return Self.write(bytes, digest: digest, in: directory, temporaryNumber: temporaryNumber, durable: syncEnabled).map { digest }
        }, done: { [weak self] result in
            guard let self, case .success(let digest) = result, !contains(digest) else { return done(result) }
            // Removed on the loop while the write was on the pool (nothing referenced it yet):
            // written again, so that what is answered is there.
            store(bytes, done: done)
        })
    }

    private static func write(_ bytes: [UInt8], digest: String, in directory: String, temporaryNumber: Int,
                              durable: Bool) -> Result<Void, StoreError> {
        let subdirectory = directory + "/" + digest.prefix(2)
        let path = subdirectory + "/" + digest
        // Written whole, fsynced and renamed into place whether or not a blob of that digest is
        // there already: bytes the store holds take the same work, and so the same time, as new
        // ones, so that whoever uploads cannot learn from the answer whether anyone (the owner)
        // ever stored these bytes. A blob already there is replaced by the same bytes; one cut
        // short or damaged behind the store's back is mended so.
        do {
            try Files.makeDirectories(subdirectory, durable: durable)
            try Files.writeAtomically(path: path, bytes: bytes, mode: 0o600,
                                      temporary: subdirectory + "/.\(digest).\(ThisProcess.id).\(temporaryNumber).tmp", durable: durable)
            return .success(())
        } catch {
            return .failure(StoreError(errno: error.errno.code, operation: "\(error.operation) \(error.path)"))
        }
    }

    /// The whole blob, read off the loop; nil when it is missing or unreadable. `done` runs on the loop.
    public func read(_ sha256: String, done: @escaping ([UInt8]?) -> Void) {
        let path = path(of: sha256)
        loop.queueWork({ try? Files.readWhole(path: path) }, done: done)
    }

    /// Up to `count` bytes of the blob from `offset`, read off the loop; `done` runs on the loop.
    public func read(_ sha256: String, offset: Int, count: Int, done: @escaping (Result<[UInt8], StoreError>) -> Void) {
        let path = path(of: sha256)
        loop.queueWork({ () -> Result<[UInt8], StoreError> in
            do throws(Errno) {
                return .success(try Files.read(path: path, offset: offset, count: count))
            } catch {
                return .failure(StoreError(errno: error.code, operation: "read \(path)"))
            }
        }, done: done)
    }

    /// Removes the blobs named, on the loop (an unlink each; not fsynced: a removal a power cut
    /// undoes leaves a blob nothing references, which the next start collects). Returns how
    /// many were there.
    @discardableResult
    public func remove(_ digests: some Sequence<String>) -> Int {
        var removed = 0
        for digest in digests where Attachment.isDigest(digest) {
            if (try? Files.remove(path(of: digest))) != nil { removed += 1 }
        }
        return removed
    }

    /// Every blob in the store, by digest, and removes what a crash left half-written
    /// (temporary files). For start-up, on the loop before anything else runs.
    public func storedDigests() -> [String] {
        var digests: [String] = []
        guard let subdirectories = try? Files.names(in: directory) else { return [] }
        for subdirectory in subdirectories where subdirectory.utf8.count == 2 {
            let path = directory + "/" + subdirectory
            guard let names = try? Files.names(in: path) else { continue }
            for name in names {
                if name.hasPrefix("."), name.hasSuffix(".tmp") {
                    try? Files.remove(path + "/" + name)
                } else if Attachment.isDigest(name), name.hasPrefix(subdirectory) {
                    digests.append(name)
                }
            }
        }
        return digests.sorted()
    }
}
