import XCTest

import ConfabProtocol
@testable import LogStore

/// A conversation's profile and sampling parameters in its log header and in the index.
final class ProfileRecordTests: XCTestCase {
    private let params = SamplingParameters(temperature: 0.2, topP: 1, maxTokens: 50, presencePenalty: -1, frequencyPenalty: 0.5,
                                            stop: ["END"], seed: 3)

    private func header(profile: String?, params: SamplingParameters) -> ConversationHeader {
        ConversationHeader(id: Fixture.conversation, created: Fixture.created, title: "t", model: "m", system: nil, provider: "default",
                           profile: profile, params: params)
    }

    func testTheHeaderKeepsProfileAndParams() throws {
        let json = LogRecord.header(header(profile: "coder", params: params)).json(at: Fixture.created)
        XCTAssertEqual(json["profile"]?.string, "coder")
        XCTAssertEqual(json["params"]?.text, #"{"frequency_penalty":0.5,"max_tokens":50,"presence_penalty":-1,"seed":3,"stop":["END"],"temperature":0.2,"top_p":1}"#)
        XCTAssertEqual(LogRecord(json: json), .header(header(profile: "coder", params: params)))
    }

    func testAHeaderWithoutThemWritesNeither() throws {
        let json = LogRecord.header(header(profile: nil, params: SamplingParameters())).json(at: Fixture.created)
        XCTAssertNil(json["profile"])
        XCTAssertNil(json["params"])
        XCTAssertEqual(LogRecord(json: json), .header(header(profile: nil, params: SamplingParameters())))
    }

    func testTheIndexKeepsThem() throws {
        let entry = LogStore.IndexEntry(identity: FileIdentity(size: 1, inode: 2, modifiedNanoseconds: 3),
                                        summary: LogSummary(header: header(profile: "coder", params: params)))
        let encoded = LogStore.encode(entry)
        XCTAssertEqual(LogStore.decode(encoded)?.summary.header.profile, "coder")
        XCTAssertEqual(LogStore.decode(encoded)?.summary.header.params, params)
        guard case .array(let fields) = encoded else { return XCTFail("not an array") }
        var badProfile = fields
        badProfile[15] = .int(1)
        XCTAssertNil(LogStore.decode(.array(badProfile)), "a profile that is not a string")
        var badParams = fields
        badParams[16] = ["temperature": 9]
        XCTAssertNil(LogStore.decode(.array(badParams)), "parameters out of range")
    }

    func testAMessageKeepsItsParamsAndQuickReplies() throws {
        let message = Message(id: MessageID.make(1), conversation: Fixture.conversation, role: .assistant, content: "Hi", status: .complete,
                              created: Fixture.created, params: params, quickReplies: ["yes", "no"])
        XCTAssertEqual(message.json["quick_replies"], ["yes", "no"])
        XCTAssertEqual(Message(json: message.json), message)
        let plain = Message(id: MessageID.make(1), conversation: Fixture.conversation, role: .assistant, content: "Hi", status: .complete,
                            created: Fixture.created)
        XCTAssertNil(plain.json["params"])
        XCTAssertNil(plain.json["quick_replies"])
    }
}
