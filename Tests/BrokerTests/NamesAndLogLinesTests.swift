import XCTest

@testable import Broker
import ConfabLog
import ConfabProtocol
import LogStore

/// What another user may call itself, and what a log line may hold.
final class NamesAndLogLinesTests: XCTestCase {
    func testNamesThatPassForARoleOrTheDaemonAreRefused() {
        for name in ["assistant", "System", "TOOL", "confabd", "ConfaBD", " assistant: ", "Assistant:", "owner"] {
            XCTAssertNotNil(DisplayName.problem(name), name)
        }
        XCTAssertEqual(DisplayName.problem("system"), #"must not be "system": that name stands for a role in every transcript"#)
        XCTAssertEqual(DisplayName.problem("confabd"), #"must not be "confabd": that name stands for the daemon in every transcript"#)
        for name in ["Ana", "ana@pts/3", "assistant-bot", "my system", "Zoë", "数据"] {
            XCTAssertNil(DisplayName.problem(name), name)
        }
    }

    func testNamesHoldingControlBidiOrSeparatorCharactersAreRefused() {
        let refused = [
            "ana\u{1B}[2J", "ana\u{0}", "ana\nassistant", "ana\u{85}", "ana\u{7F}",
            "\u{202E}ana", "ana\u{202A}", "ana\u{2066}x", "ana\u{2069}", "ana\u{2028}", "ana\u{2029}",
            "assis\u{200B}tant", "\u{FEFF}ana",
        ]
        for name in refused {
            XCTAssertNotNil(DisplayName.problem(name), name.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " "))
        }
        XCTAssertEqual(DisplayName.problem("\u{202E}ana"),
                       "must not hold control, format (bidi, zero-width) or separator characters (it holds U+202E)")
        XCTAssertNotNil(DisplayName.problem(""))
        XCTAssertNotNil(DisplayName.problem(String(repeating: "a", count: 129)))
        XCTAssertNil(DisplayName.problem(String(repeating: "a", count: 128)))
    }

    func testANameIsCappedInBytesAndInCombiningMarks() {
        // One grapheme cluster of two million scalars: one character, four megabytes.
        let stacked = "a" + String(repeating: "\u{301}", count: 2_000_000)
        XCTAssertEqual(DisplayName.problem(stacked), "must be 1 to 128 bytes of UTF-8")
        XCTAssertEqual(DisplayName.problem("a\u{301}\u{302}\u{303}"),
                       "must not hold more than 2 combining marks on one character (U+0303 is one too many)")
        XCTAssertNotNil(DisplayName.characterProblem(stacked))
        for name in ["Zoe\u{308}", "Ho\u{302}\u{323}ng", "\u{1F44D}\u{FE0F}"] { XCTAssertNil(DisplayName.problem(name), name) }
        // A program name is cut to 64 bytes on a character's edge, never inside one.
        XCTAssertEqual(DisplayName.programName(String(repeating: "é", count: 40)), String(repeating: "é", count: 32))
        XCTAssertEqual(DisplayName.programName("confab-attach"), "confab-attach")
    }

    func testCharactersThatPushTheLoginOutOfSightAreRefused() {
        let refused = [
            "alice@pts/3" + String(repeating: "\u{3164}", count: 40), "ana\u{FFA0}", "\u{115F}ana", "ana\u{1160}",
            "ana\u{2800}", "ana\u{3000}bob", "ana\u{A0}", "ana  bob", " ana", "ana ", "ana\u{34F}", "ana\u{180E}",
        ]
        for name in refused {
            XCTAssertNotNil(DisplayName.problem(name), name.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " "))
        }
        XCTAssertEqual(DisplayName.problem("ana\u{3164}"), "must not hold characters drawn as nothing (it holds U+3164)")
        XCTAssertEqual(DisplayName.problem("ana\u{3000}"), "must not hold white space other than single spaces (it holds U+3000)")
        XCTAssertEqual(DisplayName.problem("ana  bob"), "must not begin with a space or hold two in a row")
        XCTAssertNil(DisplayName.problem("Ana Lima de Souza"))
    }

    func testLogLinesEscapeEveryControlCharacter() {
        let forged = "cX\u{0}<0>FORGED\u{1B}]0;LOGTITLE\u{07}\u{1B}[2J"
        XCTAssertEqual(LogText.escapingControls(forged), #"cX\x00<0>FORGED\x1B]0;LOGTITLE\x07\x1B[2J"#)
        XCTAssertEqual(LogText.escapingControls("a\nb\r\tc\u{7F}\u{85}\u{9B}d"), #"a\nb\r\tc\x7F\u{0085}\u{009B}d"#)
        XCTAssertEqual(LogText.escapingControls("x\u{202E}y\u{2066}z\u{2028}"), #"x\u{202E}y\u{2066}z\u{2028}"#)
        XCTAssertEqual(LogText.escapingControls("plain ✓ Zoë"), "plain ✓ Zoë")
        let escaped = LogText.escapingControls(String(decoding: (0...0x9F).map { UInt8($0 < 0x80 ? $0 : 0x20) }, as: UTF8.self)
            + String(String.UnicodeScalarView((0x80...0x9F).compactMap(Unicode.Scalar.init))))
        XCTAssertFalse(escaped.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }
}

/// What `status` tells another user of the searches running or waiting.
final class SearchCountTests: XCTestCase {
    func testAnotherUserCountsOnlyItsOwnSearches() throws {
        let broker = try InProcessBroker()
        defer { broker.close() }
        let other: UInt32 = 4321
        let own = broker.broker.ownUID
        let query = try XCTUnwrap(SearchQuery("needle"))
        for (client, uid) in [("c90", own), ("c91", own), ("c92", other)] {
            broker.broker.pendingSearches.append(SearchJob(client: client, uid: uid, query: query, limit: 1, scope: nil, respond: Broker.Respond { _ in }))
        }
        XCTAssertEqual(broker.broker.searchCount(visibleTo: own), 3)
        XCTAssertEqual(broker.broker.searchCount(visibleTo: other), 1)
        XCTAssertEqual(broker.broker.searchCount(visibleTo: other + 1), 0)
        XCTAssertEqual(try broker.call(.status)["searches"]?.int, 3)
        broker.broker.pendingSearches = []
    }
}

/// Searches take turns by user first, then by connection within a user.
final class SearchRotationTests: XCTestCase {
    func testAUserWithManyConnectionsDoesNotMakeAnotherWaitBehindThemAll() throws {
        let broker = try InProcessBroker()
        defer { broker.close() }
        let other: UInt32 = 4321
        let own = broker.broker.ownUID
        let query = try XCTUnwrap(SearchQuery("needle"))
        for (client, uid) in [("b1", other), ("b1", other), ("b2", other), ("b2", other), ("b3", other), ("b3", other), ("o1", own), ("o2", own)] {
            broker.broker.enqueue(SearchJob(client: client, uid: uid, query: query, limit: 1, scope: nil, respond: Broker.Respond { _ in }))
        }
        var order: [String] = []
        while let job = broker.broker.takeNextSearch() { order.append(job.client) }
        XCTAssertEqual(order, ["b1", "o1", "b2", "o2", "b3", "b1", "b2", "b3"])
        // A connection that leaves takes its turns with it.
        for client in ["b1", "b1", "b2"] {
            broker.broker.enqueue(SearchJob(client: client, uid: other, query: query, limit: 1, scope: nil, respond: Broker.Respond { _ in }))
        }
        _ = broker.broker.cancelSearches(of: "b1")
        XCTAssertEqual(broker.broker.takeNextSearch()?.client, "b2")
        XCTAssertNil(broker.broker.takeNextSearch())
        XCTAssertEqual(broker.broker.searchRotation, [])
    }
}
