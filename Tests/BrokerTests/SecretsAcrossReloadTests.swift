import XCTest

@testable import Broker
import ConfabProtocol

/// A reload replaces the settings, not what the daemon must keep hidden: a reply started with
/// the old key may be answered by a server quoting that key after the reload.
final class SecretsAcrossReloadTests: XCTestCase {
    private var b: InProcessBroker!

    override func setUpWithError() throws {
        b = try InProcessBroker()
    }

    override func tearDown() {
        b?.close()
        b = nil
    }

    func testAKeyReplacedByAReloadIsStillRedacted() throws {
        let oldKey = "sk-old-key-0123456789"
        let newKey = "sk-new-key-9876543210"
        var settings = b.broker.settings
        settings.upstream.apiKey = oldKey
        b.broker.settings = settings

        let created = try b.call(.conversationCreate)
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try b.call(.conversationAttach, ["conversation": .string(id)])
        try b.call(.messageSend, ["conversation": .string(id), "content": "hello"])
        b.turn(until: { !b.upstream.streams.isEmpty })
        let stream = try XCTUnwrap(b.upstream.streams.first, "the reply asked for no stream")

        settings.upstream.apiKey = newKey
        b.broker.settings = settings
        stream.fail(MessageError(code: .upstreamAuth, message: "Incorrect API key provided: \(oldKey) (new one: \(newKey))", status: 401))

        let failed = try XCTUnwrap(b.waitFor(.messageFailed), "the reply did not fail")
        let text = failed.text
        XCTAssertFalse(text.contains("0123456789"), text)
        XCTAssertFalse(text.contains("9876543210"), text)
        XCTAssertTrue(text.contains("Incorrect API key provided: [secret] (new one: [secret])"), text)
    }
}
