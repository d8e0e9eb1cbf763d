import XCTest

@testable import ConfabProtocol

final class TimestampTests: XCTestCase {

    func testEpochZero() {
        XCTAssertEqual(Timestamp(milliseconds: 0).description, "1970-01-01T00:00:00.000Z")
    }

    func testMillisecondsAreZeroPadded() {
        XCTAssertEqual(Timestamp(milliseconds: 5).description, "1970-01-01T00:00:00.005Z")
        XCTAssertEqual(Timestamp(milliseconds: 50).description, "1970-01-01T00:00:00.050Z")
        XCTAssertEqual(Timestamp(milliseconds: 999).description, "1970-01-01T00:00:00.999Z")
        XCTAssertEqual(Timestamp(milliseconds: 1000).description, "1970-01-01T00:00:01.000Z")
        XCTAssertEqual(Timestamp(milliseconds: 3_723_004).description, "1970-01-01T01:02:03.004Z")
    }

    func testKnownInstant() {
        // 2026-11-22T04:15:30Z is 1795320930 seconds after the epoch.
        XCTAssertEqual(Timestamp(milliseconds: 1_795_320_930_123).description, "2026-11-22T04:15:30.123Z")
        XCTAssertEqual(Timestamp(rfc3339: "2026-11-22T04:15:30.123Z")?.milliseconds, 1_795_320_930_123)
        XCTAssertEqual(Timestamp(rfc3339: "2026-11-22T04:15:30Z")?.milliseconds, 1_795_320_930_000, "fraction optional")
    }

    func testLeapDayAndYearEnd() {
        // 2024-02-29T23:59:59.999Z
        XCTAssertEqual(Timestamp(milliseconds: 1_709_251_199_999).description, "2024-02-29T23:59:59.999Z")
        XCTAssertEqual(Timestamp(milliseconds: 1_709_251_200_000).description, "2024-03-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp(milliseconds: 946_684_799_999).description, "1999-12-31T23:59:59.999Z")
    }

    func testNegativeMillisecondsFloorCorrectly() {
        XCTAssertEqual(Timestamp(milliseconds: -1).description, "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp(milliseconds: -1000).description, "1969-12-31T23:59:59.000Z")
        XCTAssertEqual(Timestamp(milliseconds: -1001).description, "1969-12-31T23:59:58.999Z")
        XCTAssertEqual(Timestamp(rfc3339: "1969-12-31T23:59:59.999Z")?.milliseconds, -1)
    }

    func testFourDigitYearIsPadded() {
        // 0999-01-01T00:00:00Z
        XCTAssertEqual(Timestamp(milliseconds: -30_641_760_000_000).description, "0999-01-01T00:00:00.000Z")
    }

    func testRoundTrip() {
        var rng = SplitMix64(seed: 0xC0FFEE)
        var values: [Int64] = [0, 1, -1, 999, 1000, 1_795_320_930_123, 4_102_444_799_999, -86_400_001]
        for _ in 0..<500 { values.append(Int64(rng.next() % 8_000_000_000_000) - 1_000_000_000_000) }
        for ms in values {
            let text = Timestamp(milliseconds: ms).description
            XCTAssertEqual(text.utf8.count, 24, text)
            XCTAssertEqual(Timestamp(rfc3339: text)?.milliseconds, ms, text)
        }
    }

    func testNowIsPlausibleAndRoundTrips() throws {
        let now = Timestamp.now()
        XCTAssertGreaterThan(now.milliseconds, 1_700_000_000_000)
        XCTAssertEqual(try XCTUnwrap(Timestamp(rfc3339: now.description)), now)
    }

    func testOrdering() {
        XCTAssertLessThan(Timestamp(milliseconds: 1), Timestamp(milliseconds: 2))
        XCTAssertLessThan(Timestamp(milliseconds: -5), Timestamp(milliseconds: 0))
        XCTAssertFalse(Timestamp(milliseconds: 2) < Timestamp(milliseconds: 2))
    }

    func testMalformedStringsAreRejected() {
        let bad = [
            "", "Z", "2026-11-22", "2026-11-22T04:15:30.123", "2026-11-22T04:15:30", "2026-11-22T04:15:30.12Z",
            "2026-11-22T04:15:30.1234Z", "2026-11-22T04:15:30.123+00:00", "2026-11-22T04:15:30.123ZZ",
            "2026-11-22 04:15:30.123Z", "2026-11-22t04:15:30.123Z", "2026/11/22T04:15:30.123Z",
            "2026-11-22T04-15-30.123Z", "2026-11-22T04:15:30,123Z", "2026-11-22T04:15:30.123X",
            "abcd-11-22T04:15:30.123Z", "2026-1a-22T04:15:30.123Z", "2026-11-22T04:15:30.1a3Z", "2026-11-22T04:15:3xZ",
            "-026-11-22T04:15:30.123Z", "2026-+1-22T04:15:30.123Z", "2026- 1-22T04:15:30.123Z",
            "2026-13-01T00:00:00.000Z", "2026-00-01T00:00:00.000Z", "2026-11-00T00:00:00.000Z",
            "2026-11-32T00:00:00.000Z", "2026-11-22T24:00:00.000Z", "2026-11-22T04:60:00.000Z",
            "2026-11-22T04:15:61.000Z", "２026-11-22T04:15:30.123Z", "2026-11-22T04:15:30.12é",
        ]
        for text in bad {
            XCTAssertNil(Timestamp(rfc3339: text), text)
        }
    }

    /// The calendar arithmetic against the C library's `gmtime_r` and `timegm`, which it
    /// replaced: every millisecond count written the same, every text read the same.
    func testWritingAndReadingAgreeWithTheCLibrary() {
        func libcDescription(_ milliseconds: Int64) -> String {
            var seconds = time_t(milliseconds >= 0 || milliseconds % 1000 == 0 ? milliseconds / 1000 : milliseconds / 1000 - 1)
            let millis = Int(milliseconds - Int64(seconds) * 1000)
            var parts = tm()
            gmtime_r(&seconds, &parts)
            func pad(_ value: Int32, _ width: Int) -> String {
                let digits = String(value)
                return String(repeating: "0", count: max(0, width - digits.count)) + digits
            }
            return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
                + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
        }
        func libcRead(_ year: Int32, _ month: Int32, _ day: Int32, _ hour: Int32, _ minute: Int32, _ second: Int32) -> Int64? {
            var parts = tm()
            (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, month - 1, day)
            (parts.tm_hour, parts.tm_min, parts.tm_sec) = (hour, minute, second)
            var seconds = timegm(&parts)
            var check = tm()
            gmtime_r(&seconds, &check)
            guard check.tm_mday == day, check.tm_mon == month - 1 else { return nil }
            return Int64(seconds) * 1000
        }
        var generator = SystemRandomNumberGenerator()
        let yearMs: Int64 = 31_556_952_000
        var instants: [Int64] = [0, -1, 1, -999, -1000, -1001, 86_399_999, -86_400_000, 951_782_400_000, 4_107_542_399_999]
        for _ in 0..<20_000 { instants.append(Int64.random(in: (-1975 * yearMs)...(9000 * yearMs), using: &generator)) }
        for _ in 0..<2_000 { instants.append(Int64.random(in: (-40_000 * yearMs)...(40_000 * yearMs), using: &generator)) }
        for milliseconds in instants {
            let timestamp = Timestamp(milliseconds: milliseconds)
            XCTAssertEqual(timestamp.description, libcDescription(milliseconds), "\(milliseconds)")
            var written: [UInt8] = [0x2A]
            timestamp.write(into: &written)
            XCTAssertEqual(written, [0x2A] + Array(timestamp.description.utf8))
            if (0...9999).contains(Int(timestamp.description.prefix(4)) ?? -1), timestamp.description.count == 24 {
                XCTAssertEqual(Timestamp(rfc3339: timestamp.description), timestamp)
            }
        }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        for _ in 0..<20_000 {
            let year = Int32.random(in: 0...9999, using: &generator)
            let month = Int32.random(in: 1...12, using: &generator), day = Int32.random(in: 28...31, using: &generator)
            let hour = Int32.random(in: 22...23, using: &generator), minute = Int32.random(in: 58...59, using: &generator)
            let second = Int32.random(in: 58...60, using: &generator)
            let text = String(repeating: "0", count: 4 - String(year).count) + "\(year)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second)).250Z"
            XCTAssertEqual(Timestamp(rfc3339: text)?.milliseconds, libcRead(year, month, day, hour, minute, second).map { $0 + 250 }, text)
        }
    }

    func testImpossibleCalendarDatesAreRejected() {
        // "Reads what `description` writes; nil for anything else." description never writes
        // these, and RFC 3339 (5.7) rules them out; accepting them silently shifts the date.
        for text in ["2026-02-30T00:00:00.000Z", "2026-02-29T00:00:00.000Z", "2026-04-31T00:00:00.000Z"] {
            let parsed = Timestamp(rfc3339: text)
            XCTAssertNil(parsed, "\(text) was read as \(parsed.map(\.description) ?? "")")
        }
    }
}

final class IDTests: XCTestCase {

    private let alphabet = Set("0123456789abcdefghjkmnpqrstvwxyz")

    func testMakeIsValid() {
        var seen: Set<String> = []
        for _ in 0..<1000 {
            let id = ConversationID.make()
            XCTAssertEqual(id.count, 12)
            XCTAssertEqual(id.utf8.count, 12)
            XCTAssertTrue(ConversationID.isValid(id), id)
            XCTAssertTrue(id.allSatisfy { alphabet.contains($0) }, id)
            seen.insert(id)
        }
        XCTAssertEqual(seen.count, 1000, "60 bits of randomness do not repeat in 1000 draws")
    }

    func testMakeUsesTheWholeAlphabet() {
        var used: Set<Character> = []
        for _ in 0..<500 { used.formUnion(ConversationID.make()) }
        XCTAssertEqual(used, alphabet)
    }

    func testValidIds() {
        XCTAssertTrue(ConversationID.isValid("k3v9q2m8x7ad"))
        XCTAssertTrue(ConversationID.isValid("000000000000"))
        XCTAssertTrue(ConversationID.isValid("zzzzzzzzzzzz"))
    }

    func testInvalidConversationIds() {
        let bad = [
            "", "abc", "../etc/passwd", "/abs", "/k3v9q2m8x7a", "k3v9q2m8x7a/", "../k3v9q2m8x", "k3v9q2m8x7a.",
            "k3v9q2m8x7a\u{0}", "k3v9q2m8x7a\u{0}d", "\u{0}k3v9q2m8x7a", "K3V9Q2M8X7AD", "k3v9q2m8x7aD",
            "k3v9q2m8x7ai", "k3v9q2m8x7al", "k3v9q2m8x7ao", "k3v9q2m8x7au", "k3v9q2m8x7adx", "k3v9q2m8x7a",
            "k3v9q2m8x7a ", " k3v9q2m8x7a", "k3v9q2m8x7a-", "k3v9q2m8x7a_", "k3v9q2m8x7aé", "k3v9q2m8x7\u{301}a",
            "k3v9q2m8x7a\n", "k3v9q2m8x7ａ",
        ]
        for id in bad {
            XCTAssertFalse(ConversationID.isValid(id), id.debugDescription)
        }
    }

    func testMessageIdSequences() {
        XCTAssertEqual(MessageID.sequence(of: "m1"), 1)
        XCTAssertEqual(MessageID.sequence(of: "m42"), 42)
        XCTAssertEqual(MessageID.sequence(of: "m10"), 10)
        XCTAssertEqual(MessageID.sequence(of: "m999999999999999"), 999_999_999_999_999)
        XCTAssertEqual(MessageID.make(7), "m7")
        for n in [1, 2, 9, 10, 11, 100, 12345] {
            XCTAssertEqual(MessageID.sequence(of: MessageID.make(n)), n)
        }
    }

    func testInvalidMessageIds() {
        let bad = [
            "", "m", "m0", "m00", "m01", "m007", "x1", "M1", "1", "m-1", "m+1", "m1a", "ma1", "m 1", "m1 ", " m1",
            "m1.0", "m1e3", "mm1", "m\u{0}1", "m1\u{0}", "m١", "m１", "m" + String(repeating: "9", count: 16),
            "m" + String(repeating: "1", count: 40), "m99999999999999999999",
        ]
        for id in bad {
            XCTAssertNil(MessageID.sequence(of: id), id.debugDescription)
        }
    }
}

final class ModelJSONTests: XCTestCase {

    private let author = Author(uid: 1000, login: "ana", name: "Ana \"A\" é", clientID: "c7")
    private let created = Timestamp(milliseconds: 1_795_320_930_123)

    private var fullReply: Message {
        Message(id: "m4", conversation: "k3v9q2m8x7ad", role: .assistant, content: "Hi!\nline two", status: .failed,
                created: created, author: nil, model: "gpt-4o-mini", finishReason: "stop",
                usage: Usage(promptTokens: 9, completionTokens: 3, totalTokens: 12),
                error: MessageError(code: .upstreamHTTP, message: "bad gateway", status: 502))
    }

    private var userMessage: Message {
        Message(id: "m3", conversation: "k3v9q2m8x7ad", role: .user, content: "hello", status: .complete,
                created: created, author: author)
    }

    /// The way values travel: written to bytes and parsed back.
    private func wire(_ json: JSON) throws -> JSON { try JSON.parse(json.bytes) }

    func testMessageRoundTrip() throws {
        for message in [fullReply, userMessage] {
            XCTAssertEqual(Message(json: message.json), message)
            XCTAssertEqual(Message(json: try wire(message.json)), message)
        }
        for status in MessageStatus.allCases {
            var message = userMessage
            message.status = status
            XCTAssertEqual(Message(json: try wire(message.json)), message)
        }
    }

    func testMessageJSONShape() {
        let json = userMessage.json
        XCTAssertEqual(json, [
            "id": "m3", "conversation": "k3v9q2m8x7ad", "role": "user", "content": "hello", "status": "complete",
            "created": "2026-11-22T04:15:30.123Z",
            "author": ["uid": 1000, "login": "ana", "name": "Ana \"A\" é", "client_id": "c7"],
        ])
        let reply = fullReply.json
        XCTAssertEqual(reply["finish_reason"], "stop")
        XCTAssertEqual(reply["usage"], ["prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12])
        XCTAssertEqual(reply["error"], ["code": "upstream_http", "message": "bad gateway", "status": 502])
        XCTAssertNil(reply["author"], "absent optionals are omitted")
        XCTAssertNil(json["model"])
        XCTAssertNil(json["usage"])
        XCTAssertNil(json["error"])
    }

    func testMessageRejectsMissingFields() {
        guard case .object(let members) = userMessage.json else { return XCTFail() }
        for key in ["id", "conversation", "role", "content", "status", "created"] {
            var without = members
            without[key] = nil
            XCTAssertNil(Message(json: .object(without)), "without \(key)")
            var wrongType = members
            wrongType[key] = .int(1)
            XCTAssertNil(Message(json: .object(wrongType)), "\(key) as a number")
        }
        XCTAssertNil(Message(json: "m1"))
        XCTAssertNil(Message(json: [:]))
    }

    func testMessageRejectsBadIdsStatusAndTimestamp() {
        guard case .object(let members) = userMessage.json else { return XCTFail() }
        for id: JSON in ["x1", "m0", "m01", "m", "", "m-1", "1", .null, .int(3)] {
            var copy = members
            copy["id"] = id
            XCTAssertNil(Message(json: .object(copy)), "id \(id)")
        }
        for status: JSON in ["done", "", "COMPLETE"] {
            var copy = members
            copy["status"] = status
            XCTAssertNil(Message(json: .object(copy)), "status \(status)")
        }
        for created: JSON in ["yesterday", "2026-11-22", "2026-13-22T04:15:30.123Z"] {
            var copy = members
            copy["created"] = created
            XCTAssertNil(Message(json: .object(copy)), "created \(created)")
        }
    }

    func testMessageSequence() {
        XCTAssertEqual(userMessage.sequence, 3)
    }

    func testAuthorRoundTrip() throws {
        XCTAssertEqual(Author(json: try wire(author.json)), author)
        XCTAssertEqual(Author(json: ["uid": 5, "login": "bo", "name": "Bo"]),
                       Author(uid: 5, login: "bo", name: "Bo", clientID: ""), "client_id defaults to empty")
        XCTAssertNil(Author(json: ["login": "bo", "name": "Bo"]))
        XCTAssertNil(Author(json: ["uid": "5", "login": "bo", "name": "Bo"]))
        XCTAssertNil(Author(json: ["uid": 5, "name": "Bo"]))
        XCTAssertNil(Author(json: ["uid": 5, "login": "bo"]))
        let root = Author(uid: 0, login: "root", name: "root", clientID: "c1")
        XCTAssertEqual(Author(json: root.json), root)
        let maxUID = Author(uid: UInt32.max - 1, login: "nobody", name: "n", clientID: "c2")
        XCTAssertEqual(Author(json: try wire(maxUID.json)), maxUID)
    }

    func testUsageRoundTrip() throws {
        let usage = Usage(promptTokens: 100, completionTokens: 23, totalTokens: 130)
        XCTAssertEqual(Usage(json: try wire(usage.json)), usage)
        XCTAssertEqual(Usage(json: ["prompt_tokens": 4, "completion_tokens": 6]),
                       Usage(promptTokens: 4, completionTokens: 6, totalTokens: 10), "total defaults to the sum")
        XCTAssertNil(Usage(json: ["prompt_tokens": 4]))
        XCTAssertNil(Usage(json: ["completion_tokens": 4]))
    }

    func testAnEstimateIsMarkedAndCountsAboutFourBytesATokenPlusFraming() throws {
        let estimate = Usage.estimate(prompt: ["be brief", "hello"], completion: "hi there")
        // 3 for the reply's priming, 4 a message, ceil(8/4) + ceil(5/4) for the texts.
        XCTAssertEqual(estimate, Usage(promptTokens: 3 + 4 + 2 + 4 + 2, completionTokens: 2, totalTokens: 17, isEstimated: true))
        XCTAssertEqual(try wire(estimate.json)["estimated"], .bool(true))
        XCTAssertEqual(Usage(json: try wire(estimate.json)), estimate)
        XCTAssertNil(Usage(promptTokens: 1, completionTokens: 1, totalTokens: 2).json["estimated"], "reported usage carries no mark")
        XCTAssertEqual(Usage.estimate(prompt: [], completion: "").totalTokens, 3)
    }

    func testMessageErrorRoundTrip() throws {
        let withStatus = MessageError(code: .rateLimited, message: "slow down", status: 429)
        let without = MessageError(code: .upstreamTimeout, message: "no byte for 60 s")
        XCTAssertEqual(MessageError(json: try wire(withStatus.json)), withStatus)
        XCTAssertEqual(MessageError(json: try wire(without.json)), without)
        XCTAssertNil(without.json["status"], "no status key without a status")
        XCTAssertNil(MessageError(json: ["code": "x"]))
        XCTAssertNil(MessageError(json: ["message": "x"]))
    }

    func testConversationInfoRoundTrip() throws {
        let info = ConversationInfo(id: "k3v9q2m8x7ad", title: "demo", created: created,
                                    updated: Timestamp(milliseconds: created.milliseconds + 5000),
                                    model: "gpt-4o-mini", system: "You are terse.", messageCount: 4)
        XCTAssertEqual(ConversationInfo(json: try wire(info.json)), info)
        var noSystem = info
        noSystem.system = nil
        XCTAssertEqual(ConversationInfo(json: try wire(noSystem.json)), noSystem)
        XCTAssertNil(noSystem.json["system"], "system is omitted when there is none")
        XCTAssertEqual(info.json["message_count"], 4)
        XCTAssertEqual(info.json["updated"], "2026-11-22T04:15:35.123Z")
        guard case .object(let members) = info.json else { return XCTFail() }
        for key in ["id", "title", "created", "updated", "model"] {
            var without = members
            without[key] = nil
            XCTAssertNil(ConversationInfo(json: .object(without)), "without \(key)")
        }
    }

    func testClientInfoRoundTrip() throws {
        let client = ClientInfo(id: "c7", uid: 1000, login: "ana", name: "Ana", client: "confab-attach")
        XCTAssertEqual(ClientInfo(json: try wire(client.json)), client)
        XCTAssertEqual(client.json, ["id": "c7", "uid": 1000, "login": "ana", "name": "Ana", "client": "confab-attach"])
        XCTAssertEqual(ClientInfo(json: ["id": "c1", "uid": 1, "login": "a", "name": "b"])?.client, "")
        XCTAssertNil(ClientInfo(json: ["uid": 1, "login": "a", "name": "b"]))
        XCTAssertNil(ClientInfo(json: ["id": "c1", "login": "a", "name": "b"]))
    }
}

/// Deterministic generator so failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
