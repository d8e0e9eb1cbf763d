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

    func testTheIndexKeepsTheProviderAndTheUsageTotals() throws {
        let identity = FileIdentity(size: 10, inode: 20, modifiedNanoseconds: 30)
        var summary = LogSummary(header: header(provider: "claude"))
        summary.usage = UsageTotals(promptTokens: 9, completionTokens: 3, totalTokens: 12, estimatedReplies: 1)
        let entry = LogStore.IndexEntry(identity: identity, summary: summary)
        let encoded = LogStore.encode(entry)
        XCTAssertEqual(LogStore.decode(encoded)?.summary.header.provider, "claude")
        XCTAssertEqual(LogStore.decode(encoded)?.summary.usage, summary.usage)

        guard case .array(let fields) = encoded else { return XCTFail("not an array") }
        // The line before `model_default` (its last field) is read, as following no default.
        XCTAssertEqual(LogStore.decode(.array(Array(fields.dropLast())))?.summary.header.modelIsDefault, false)
        XCTAssertNil(LogStore.decode(.array(Array(fields.dropLast(2)))), "a line with fewer fields is not read")
        XCTAssertNil(LogStore.decode(.array(fields + [.null])), "a line with more fields is not read")
        var badProvider = fields
        badProvider[13] = .int(1)
        XCTAssertNil(LogStore.decode(.array(badProvider)), "a provider that is not a string")
        var badUsage = fields
        badUsage[14] = .array([.int(1), .int(2)])
        XCTAssertNil(LogStore.decode(.array(badUsage)), "usage that is not four counts")
    }

    /// An index entry as an earlier daemon wrote it (Tests/Fixtures/golden/2026-11-24-tools),
    /// by hand: its provider, usage totals, profile and parameters read from their places, and
    /// it writes back the same, so a field moved or renamed on both ends shows here.
    func testALiteralIndexEntryReadsToItsFieldsAndWritesBackTheSame() throws {
        let written = #"["hb2t7sft5dce",2769,16287022,1795639534933235158,1795639534862,"fake-model","tools","tools",1795639534934,4,false,"Use the tools.",null,"claude",[22,62,84,1],"helper",{"temperature":0.5}]"#
        // That daemon's line has no shares: it is not read (the logs are, once), since an
        // entry that cannot say who may see a conversation must not stand for it.
        XCTAssertNil(LogStore.decode(try JSON.parse(written)))
        // Nor is the next daemon's, with shares and no blobs: an entry that cannot say which
        // attached files its conversation names must not stand for it either.
        let withShares = #"["hb2t7sft5dce",2769,16287022,1795639534933235158,1795639534862,"fake-model","tools","tools",1795639534934,4,false,"Use the tools.",null,"claude",[22,62,84,1],"helper",{"temperature":0.5},[{"uid":1001,"login":"bob","role":"read"}]]"#
        XCTAssertNil(LogStore.decode(try JSON.parse(withShares)))
        // The next one's has the shares and the blobs its messages name after it; it is read,
        // and written back as today's, which adds whether the model follows the default.
        let digest = String(repeating: "ab", count: 32)
        let line = #"["hb2t7sft5dce",2769,16287022,1795639534933235158,1795639534862,"fake-model","tools","tools",1795639534934,4,false,"Use the tools.",null,"claude",[22,62,84,1],"helper",{"temperature":0.5},[{"uid":1001,"login":"bob","role":"read"}],[""#
            + digest + #""]]"#
        let json = try JSON.parse(line)
        let entry = try XCTUnwrap(LogStore.decode(json))
        XCTAssertEqual(entry.summary.shares, [ConversationShare(uid: 1001, login: "bob", role: .read)])
        XCTAssertEqual(entry.summary.blobs, [digest])
        XCTAssertEqual(entry.identity, FileIdentity(size: 2769, inode: 16287022, modifiedNanoseconds: 1795639534933235158))
        XCTAssertEqual(entry.summary.header.id, "hb2t7sft5dce")
        XCTAssertEqual(entry.summary.header.provider, "claude")
        XCTAssertEqual(entry.summary.header.system, "Use the tools.")
        XCTAssertEqual(entry.summary.usage, UsageTotals(promptTokens: 22, completionTokens: 62, totalTokens: 84, estimatedReplies: 1))
        XCTAssertEqual(entry.summary.header.profile, "helper")
        XCTAssertEqual(entry.summary.header.params.temperature, 0.5)
        XCTAssertEqual(entry.summary.messageCount, 4)
        guard case .array(let fields) = json else { return XCTFail("not an array") }
        XCTAssertEqual(LogStore.encode(entry), .array(fields + [.bool(false)]))
        let today = try XCTUnwrap(LogStore.decode(.array(fields + [.bool(true)])))
        XCTAssertTrue(today.summary.header.modelIsDefault)
        XCTAssertEqual(LogStore.encode(today), .array(fields + [.bool(true)]))
    }
}
