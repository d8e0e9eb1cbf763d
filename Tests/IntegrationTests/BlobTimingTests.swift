import ConfabProtocol
import Foundation
import XCTest

/// `blob.put` takes the same work for bytes the store already holds as for new ones: found,
/// it answered at once for known bytes and after a write and an fsync for new ones, so any
/// allowed uid learned whether the owner ever attached given bytes (`PIN=4711` in 0.15 ms,
/// other PINs in 0.8 ms). Not timed here: the evidence is what the daemon does on disk. A
/// known blob is written whole again and renamed into place, so its file is a new one (a
/// new inode) after the second store, exactly as a new blob's is after the first.
final class BlobTimingTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func inode(_ path: String) throws -> UInt64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try XCTUnwrap((attributes[.systemFileNumber] as? NSNumber)?.uint64Value, "\(attributes)")
    }

    func testKnownBytesAreWrittenAgainAsNewOnesAre() throws {
        harness = try Harness()
        let owner = try harness.client(name: "ana")
        let secret = Array("PIN=4711\n".utf8)
        let digest = try XCTUnwrap(try AttachmentTests.upload(owner, secret)["attachment"]?["sha256"]?.string)
        let path = harness.dataDirectory + "/blobs/" + digest.prefix(2) + "/" + digest
        let first = try inode(path)
        // Named by a message, so the blob stays whatever happens to the connection.
        let id = try harness.createConversation(owner)
        try owner.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": "the pin",
                                                         "attachments": [["name": "pin.txt", "sha256": .string(digest)]]])

        // Another connection guesses the same bytes: stored by the same path as new bytes.
        let guesser = try harness.client(name: "guesser")
        let answer = try AttachmentTests.upload(guesser, secret)
        XCTAssertEqual(answer["attachment"]?["sha256"]?.string, digest)
        let second = try inode(path)
        XCTAssertNotEqual(first, second, "bytes already stored were answered without being written")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(secret))

        // And once more: every store of them is a write.
        try AttachmentTests.upload(guesser, secret)
        XCTAssertNotEqual(try inode(path), second)
        // No temporary file is left beside it.
        let names = try FileManager.default.contentsOfDirectory(atPath: harness.dataDirectory + "/blobs/" + digest.prefix(2))
        XCTAssertEqual(names, [digest])
    }
}
