import Foundation
import XCTest

import ConfabProtocol
import EventLoop
@testable import LogStore

/// The blob store: SHA-256 names, where and how blobs are written, read and removed, and the
/// digests a conversation's summary and the index keep for collecting unreferenced blobs.
final class BlobStoreTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var loop: Loop!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        loop = try Loop()
    }

    override func tearDown() {
        loop?.close()
        directory?.remove()
    }

    private func makeStore() throws -> LogStore {
        try LogStore(directory: directory.path + "/data", loop: loop, syncEnabled: true)
    }

    // MARK: - SHA-256

    func testSHA256MatchesTheFIPS180Vectors() {
        XCTAssertEqual(BlobStore.sha256([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(BlobStore.sha256(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(BlobStore.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(BlobStore.sha256(Array(("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                                               + "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu").utf8)),
                       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        XCTAssertEqual(BlobStore.sha256([UInt8](repeating: 0x61, count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testSHA256AtThePaddingBoundaries() {
        // Lengths around the 55/56 and 64-byte edges, where the length goes into one block or two.
        let expected = [
            55: "576a1bf8d4478657e6dc4af9398544765c2a92cde28478b019235cfed315fc09",
            56: "9b20501dfd1d99161c257950f3444f3e49230c351c5c8e0943ef369f85f5205d",
            63: "30b345906b493f06f69444b6521113511c242f30e29840462950035043682f1e",
            64: "d8bc63b4fc1156e5e7d95a418b9bf54cd3174bedbc2db40f74895349b229b3c0",
            65: "1ee23b0fbcaecc1aff4a9e8f1645f35ab2c8e13609cd73b68df8b5e3f63ce073",
            119: "7a6589821178918ca8d9edaba5abfc1e9b2669564f4469b66885379c1530b2c8",
            120: "655250427d56b1b0eeb8497d21428704273458a01772d6881b65c0abac0f8a98",
        ]
        for (length, digest) in expected {
            XCTAssertEqual(BlobStore.sha256((0..<length).map { UInt8(($0 * 7) % 256) }), digest, "length \(length)")
        }
    }

    // MARK: - Storing

    private func inodeNumber(_ path: String) -> UInt64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt64(info.st_ino)
    }

    private func store(_ bytes: [UInt8], in blobs: BlobStore) throws -> String {
        var result: Result<String, StoreError>?
        blobs.store(bytes) { result = $0 }
        loop.run()
        return try XCTUnwrap(result).get()
    }

    func testABlobIsKeptOnceUnderItsDigestWithPrivateModes() throws {
        let blobs = try makeStore().blobs
        let bytes = Array("hello, blob\n".utf8)
        let digest = try store(bytes, in: blobs)
        XCTAssertEqual(digest, BlobStore.sha256(bytes))
        let path = blobs.path(of: digest)
        XCTAssertEqual(path, directory.path + "/data/blobs/" + digest.prefix(2) + "/" + digest)
        XCTAssertEqual(Files.bytes(path), bytes)
        XCTAssertEqual(Files.permissions(path), 0o600)
        XCTAssertEqual(Files.permissions(blobs.directory), 0o700)
        XCTAssertEqual(Files.permissions(blobs.directory + "/" + digest.prefix(2)), 0o700)
        let inode = inodeNumber(path)

        // Stored again, the same bytes take the same path as new ones (written whole, synced,
        // renamed over): answering known bytes at once would tell any uploader whether the owner
        // ever attached them (BlobTimingTests). One file under the digest all the same.
        XCTAssertEqual(try store(bytes, in: blobs), digest)
        XCTAssertNotEqual(inodeNumber(path), inode, "known bytes are written again, as new ones are")
        XCTAssertEqual(Files.bytes(path), bytes)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: blobs.directory + "/" + digest.prefix(2)), [digest],
                       "no temporary file left")
        XCTAssertEqual(blobs.storedDigests(), [digest])
    }

    func testABlobOfTheWrongSizeIsWrittenAgainWhenItsBytesAreStored() throws {
        let blobs = try makeStore().blobs
        let bytes = (0..<5000).map { UInt8($0 % 253) }
        let digest = try store(bytes, in: blobs)
        let path = blobs.path(of: digest)
        XCTAssertEqual(truncate(path, 1200), 0, "cut short behind the store's back")
        XCTAssertEqual(try store(bytes, in: blobs), digest)
        XCTAssertEqual(Files.bytes(path)?.count, bytes.count, "stored again whole")
        XCTAssertTrue(Files.bytes(path) == bytes)
        var whole: [UInt8]??
        blobs.read(digest) { whole = $0 }
        loop.run()
        XCTAssertTrue(whole == .some(bytes), "read back exactly")
        XCTAssertEqual(Files.permissions(path), 0o600)
    }

    func testABlobRemovedWhileBeingStoredIsWrittenAgainBeforeTheAnswer() throws {
        let blobs = try makeStore().blobs
        let bytes = Array("raced".utf8)
        let digest = BlobStore.sha256(bytes)
        var result: Result<String, StoreError>?
        blobs.store(bytes) { result = $0 }
        // The store's work is on the pool; the loop removes the blob (as a collection would)
        // before the answer is given: whatever the order, the answer finds the blob there.
        blobs.remove([digest])
        loop.run()
        XCTAssertEqual(try XCTUnwrap(result).get(), digest)
        XCTAssertTrue(blobs.contains(digest))
    }

    func testReadsWholeAndInRanges() throws {
        let blobs = try makeStore().blobs
        let bytes = (0..<3000).map { UInt8($0 % 251) }
        let digest = try store(bytes, in: blobs)
        var whole: [UInt8]??
        blobs.read(digest) { whole = $0 }
        var part: Result<[UInt8], StoreError>?
        blobs.read(digest, offset: 2900, count: 500) { part = $0 }
        var missing: [UInt8]??
        blobs.read(String(repeating: "0", count: 64)) { missing = $0 }
        loop.run()
        XCTAssertEqual(whole, .some(bytes))
        XCTAssertEqual(try XCTUnwrap(part).get(), Array(bytes[2900...]), "short at the end of the file")
        XCTAssertEqual(missing, .some(nil))
    }

    func testRemovalAndWhatACrashLeftHalfWritten() throws {
        let blobs = try makeStore().blobs
        let first = try store(Array("one".utf8), in: blobs)
        let second = try store(Array("two".utf8), in: blobs)
        let subdirectory = blobs.directory + "/" + first.prefix(2)
        XCTAssertTrue(FileManager.default.createFile(atPath: subdirectory + "/." + first + ".123.1.tmp", contents: Data("half".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: subdirectory + "/not-a-blob", contents: Data("kept, not listed".utf8)))
        XCTAssertEqual(blobs.storedDigests(), [first, second].sorted())
        XCTAssertFalse(Files.exists(subdirectory + "/." + first + ".123.1.tmp"), "a temporary file is a crash's leftover")
        XCTAssertEqual(blobs.remove([first, String(repeating: "f", count: 64), "../escape"]), 1)
        XCTAssertEqual(blobs.storedDigests(), [second])
    }

    // MARK: - References in the summary and the index

    func testTheSummaryAndTheIndexKeepTheDigestsMessagesName() throws {
        let store = try makeStore()
        let digestA = String(repeating: "a", count: 64), digestB = String(repeating: "b", count: 64)
        var message = Fixture.user(1, "see files")
        message.attachments = [Attachment(name: "a.txt", type: .text, size: 3, sha256: digestA),
                               Attachment(name: "b.png", type: .png, size: 9, sha256: digestB)]
        var created: Result<ConversationLog, StoreError>?
        store.create(Fixture.header(), records: [.message(message), .replyFinished(Fixture.reply(2, "seen", status: .complete))]) { created = $0 }
        loop.run()
        let log = try XCTUnwrap(created).get()
        XCTAssertEqual(log.blobs, [digestA, digestB])
        store.close()

        let opened = try makeStore().openConversations()
        XCTAssertEqual(opened.fromIndex, 1, "listed from the index")
        XCTAssertEqual(opened.items.first?.log.blobs, [digestA, digestB])

        // A full read finds the same.
        try FileManager.default.removeItem(atPath: directory.path + "/data/index.jsonl")
        let reread = try makeStore().openConversations()
        XCTAssertEqual(reread.read, 1)
        XCTAssertEqual(reread.items.first?.log.blobs, [digestA, digestB])
    }
}

/// A user message's attachments in its log record.
final class AttachmentRecordTests: XCTestCase {
    private let digest = String(repeating: "0123456789abcdef", count: 4)

    func testAMessageWithAttachmentsRoundTripsInOrder() throws {
        var message = Fixture.user(1, "")
        message.attachments = [Attachment(name: "z last.txt", type: .text, size: 0, sha256: digest),
                               Attachment(name: "a ünïcode.png", type: .png, size: 5_000_000, sha256: digest),
                               Attachment(name: "c.webp", type: .webp, size: 1, sha256: String(repeating: "f", count: 64))]
        for record in [LogRecord.message(message), .replyFinished(message)] {
            let json = record.json(at: Fixture.at(1))
            XCTAssertEqual(json["message"]?["attachments"]?.array?.count, 3)
            XCTAssertEqual(json["message"]?["attachments"]?.array?.first?["type"], "text/plain")
            XCTAssertEqual(LogRecord(json: try JSON.parse(json.bytes)), record)
        }
    }

    func testAMessageWithoutAttachmentsWritesNoKeyAndOldRecordsReadAsBefore() throws {
        let json = LogRecord.message(Fixture.user(1, "plain")).json(at: Fixture.at(1))
        XCTAssertNil(json["message"]?["attachments"], "old readers see the same line as before")
        let old = #"{"type":"message","v":1,"at":"2026-11-23T10:00:00.000Z","message":{"id":"m1","conversation":"k3v9q2m8x7ad","role":"user","content":"hi","status":"complete","created":"2026-11-23T10:00:00.000Z"}}"#
        guard case .message(let message)? = LogRecord(json: try JSON.parse(Array(old.utf8))) else { return XCTFail("not read") }
        XCTAssertNil(message.attachments)
        XCTAssertEqual(message.content, "hi")
    }

    func testAnAttachmentOfATypeThisVersionDoesNotKnowKeepsItsBlobReferenced() throws {
        let other = String(repeating: "c", count: 64)
        let line = #"{"type":"message","v":1,"at":"2026-11-23T10:00:00.000Z","message":{"id":"m1","conversation":"k3v9q2m8x7ad","role":"user","content":"files","status":"complete","created":"2026-11-23T10:00:00.000Z","attachments":[{"name":"a.pdf","type":"application/pdf","size":12,"sha256":""# + other + #""},{"name":"b.txt","type":"text/plain","size":1,"sha256":""# + digest + #""},{"name":"junk","sha256":"../x"}]}}"#
        guard case .message(let message)? = LogRecord(json: try JSON.parse(Array(line.utf8))) else { return XCTFail("not read") }
        XCTAssertEqual(message.attachments, [Attachment(name: "b.txt", type: .text, size: 1, sha256: digest)])
        XCTAssertEqual(message.attachmentDigests, [digest, other])
        // Written again (a copy in a fork), the reference is still there, as it was written.
        let rewritten = message.json["attachments"]?.array ?? []
        XCTAssertEqual(rewritten.count, 2, "the reference without a digest names no blob and is dropped")
        XCTAssertEqual(rewritten.last?["type"], "application/pdf")
        XCTAssertEqual(rewritten.last?["sha256"]?.string, other)
        let records: [(record: LogRecord, at: Timestamp?)] = [(.header(Fixture.header()), Fixture.at(0)), (.message(message), Fixture.at(1))]
        XCTAssertEqual(try XCTUnwrap(Replay.fold(records)).summary.blobs, [digest, other])
    }

    func testTheSummaryKeepsDigestsOfSupersededMessagesToo() throws {
        var first = Fixture.user(1, "one")
        first.attachments = [Attachment(name: "a.txt", type: .text, size: 1, sha256: digest)]
        var second = Fixture.user(3, "two")
        second.attachments = [Attachment(name: "b.txt", type: .text, size: 1, sha256: String(repeating: "e", count: 64))]
        let records: [(record: LogRecord, at: Timestamp?)] = [
            (.header(Fixture.header()), Fixture.at(0)), (.message(first), Fixture.at(1)),
            (.message(second), Fixture.at(2)), (.superseded(message: "m1", by: "m3"), Fixture.at(3)),
        ]
        let state = try XCTUnwrap(Replay.fold(records))
        XCTAssertEqual(state.summary.blobs, [digest, String(repeating: "e", count: 64)])
        XCTAssertEqual(state.messages.first?.attachments, first.attachments)
    }
}
