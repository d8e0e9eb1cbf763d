import XCTest

import ConfabProtocol
@testable import LogStore

/// A conversation's provider in its log header and in the index, and logs from before providers.
final class ProviderRecordTests: XCTestCase {
    private func header(provider: String?) -> ConversationHeader {
        ConversationHeader(id: Fixture.conversation, created: Fixture.created, title: "t", model: "claude-x", system: nil, provider: provider)
    }

    func testTheHeaderKeepsItsProvider() throws {
        let json = LogRecord.header(header(provider: "claude")).json(at: Fixture.created)
        XCTAssertEqual(json["provider"]?.string, "claude")
        XCTAssertEqual(LogRecord(json: json), .header(header(provider: "claude")))
    }

    func testAHeaderFromBeforeProvidersHasNone() throws {
        let json = LogRecord.header(header(provider: nil)).json(at: Fixture.created)
        XCTAssertNil(json["provider"], "nothing is written for it")
        XCTAssertEqual(LogRecord(json: json), .header(header(provider: nil)))
    }

    func testTheIndexKeepsTheProviderAndReadsAnIndexWrittenBeforeProviders() throws {
        let identity = FileIdentity(size: 10, inode: 20, modifiedNanoseconds: 30)
        let entry = LogStore.IndexEntry(identity: identity, summary: LogSummary(header: header(provider: "claude")))
        let encoded = LogStore.encode(entry)
        XCTAssertEqual(LogStore.decode(encoded)?.summary.header.provider, "claude")

        // A line of the index before providers: the same fields but the last.
        guard case .array(let fields) = encoded else { return XCTFail("not an array") }
        let old = LogStore.decode(.array(Array(fields.dropLast())))
        XCTAssertNotNil(old)
        XCTAssertNil(old?.summary.header.provider)
        XCTAssertNil(LogStore.decode(.array(fields + [.null])), "a line with more fields than either is not read")
        XCTAssertNil(LogStore.decode(.array(Array(fields.dropLast()) + [.int(1)])), "a provider that is not a string")
        XCTAssertEqual(LogStore.formatBeforeProviders["fields"]?.array?.count, LogStore.indexFields.count - 1)
    }
}
