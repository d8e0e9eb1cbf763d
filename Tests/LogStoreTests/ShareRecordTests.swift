import XCTest

import ConfabProtocol
@testable import LogStore

/// `share` and `unshare` records: as written and read, folded into the summary (latest per uid,
/// in uid order) and kept by the index.
final class ShareRecordTests: XCTestCase {
    private let bob = ConversationShare(uid: 1001, login: "bob", role: .write)
    private let carol = ConversationShare(uid: 1002, login: "carol", role: .read)

    private func fold(_ records: [LogRecord]) throws -> ReplayedConversation {
        let entries = ([.header(Fixture.header())] + records).enumerated().map { index, record in
            (record: record, at: Optional(Fixture.at(Int64(index) * 1000)))
        }
        return try XCTUnwrap(Replay.fold(entries))
    }

    func testTheRecordsReadBackAsWritten() throws {
        let shared = LogRecord.shared(bob)
        let json = shared.json(at: Fixture.created)
        XCTAssertEqual(json["type"]?.string, "share")
        XCTAssertEqual(json["uid"]?.int, 1001)
        XCTAssertEqual(json["login"]?.string, "bob")
        XCTAssertEqual(json["role"]?.string, "write")
        XCTAssertEqual(LogRecord(json: json), shared)

        let unshared = LogRecord.unshared(uid: 1002)
        XCTAssertEqual(unshared.json(at: Fixture.created)["type"]?.string, "unshare")
        XCTAssertEqual(LogRecord(json: unshared.json(at: Fixture.created)), unshared)

        let at = "2026-11-22T04:15:30.123Z"
        XCTAssertNil(LogRecord(json: ["type": "share", "v": 1, "at": .string(at), "uid": 1001, "login": "bob", "role": "admin"]))
        XCTAssertNil(LogRecord(json: ["type": "share", "v": 1, "at": .string(at), "uid": -1, "login": "bob", "role": "read"]))
        XCTAssertNil(LogRecord(json: ["type": "share", "v": 1, "at": .string(at), "uid": 1001, "role": "read"]))
        XCTAssertNil(LogRecord(json: ["type": "unshare", "v": 1, "at": .string(at), "uid": "bob"]))
    }

    func testTheLatestRecordPerUIDWinsAndAnUnshareTakesItAway() throws {
        let state = try fold([
            .shared(carol),
            .message(Fixture.user(1, "hello")),
            .shared(bob),
            .shared(ConversationShare(uid: 1002, login: "carol", role: .write)),
            .unshared(uid: 1001),
            .unshared(uid: 4242),
        ])
        XCTAssertEqual(state.summary.shares, [ConversationShare(uid: 1002, login: "carol", role: .write)])
        XCTAssertEqual(state.messages.count, 1, "shares are not messages")
        XCTAssertEqual(state.summary.messageCount, 1)
        XCTAssertEqual(state.summary.updated, Fixture.at(6000), "a share moves the conversation's time, as any record")

        let again = try fold([.shared(carol), .shared(bob)])
        XCTAssertEqual(again.summary.shares, [bob, carol], "in uid order")
    }

    func testTheIndexKeepsTheShares() throws {
        var summary = LogSummary(header: Fixture.header())
        summary.apply(.shared(carol), at: Fixture.at(1000))
        summary.apply(.shared(bob), at: Fixture.at(2000))
        let entry = LogStore.IndexEntry(identity: FileIdentity(size: 1, inode: 2, modifiedNanoseconds: 3), summary: summary)
        let decoded = try XCTUnwrap(LogStore.decode(LogStore.encode(entry)))
        XCTAssertEqual(decoded.summary.shares, [bob, carol])
        let fromBytes = LogStore.encode(entry).bytes.withUnsafeBufferPointer { LogStore.decode(line: $0) }
        XCTAssertEqual(fromBytes?.summary.shares, [bob, carol])

        var fields = try XCTUnwrap(LogStore.encode(entry).array)
        fields[fields.count - 1] = .array([["uid": 1001, "login": "bob", "role": "owner"]])
        XCTAssertNil(LogStore.decode(.array(fields)), "a share the index cannot read means reading the log")
    }
}
