import ConfabProtocol
import Foundation
import XCTest

/// Text files are bounded per request as images are: the newest 20 and 4 MiB of them go, each
/// older one as a line naming it, so a writer who attaches files to message after message
/// cannot make every later reply of a conversation without a context budget read and send
/// hundreds of megabytes. Checked by the exact bodies the fake upstream received.
final class TextAttachmentLimitTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func start() throws -> (RPCClient, String) {
        harness = try Harness()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(id)])
        return (client, id)
    }

    private func store(_ client: RPCClient, _ text: String) throws -> String {
        try XCTUnwrap(try AttachmentTests.upload(client, Array(text.utf8))["attachment"]?["sha256"]?.string)
    }

    private func ask(_ client: RPCClient, _ id: String, _ content: String, _ files: [(name: String, sha256: String)]) throws {
        let sent = try client.call(RPCMethod.messageSend.rawValue, ["conversation": .string(id), "content": .string(content),
                                                                     "attachments": .array(files.map { ["name": .string($0.name), "sha256": .string($0.sha256)] })])
        let final = try client.awaitReply(try XCTUnwrap(sent["reply"]?.string)).final
        XCTAssertEqual(final["status"]?.string, MessageStatus.complete.rawValue, "\(final)")
    }

    private func lastMessages() throws -> [JSON] {
        try XCTUnwrap(harness.upstreamRequests().last?["body"]?["messages"]?.array, "no request")
    }

    private static func fenced(_ name: String, _ text: String) -> String { name + ":\n```\n" + text + "```" }

    private static func line(_ name: String, _ size: Int, files: Int = 20, bytes: String = "4 MiB") -> String {
        "[attached file \(name) (text/plain, \(size) B) not sent: one request carries the newest \(files) text files and \(bytes) of text files at most]"
    }

    func testOneRequestCarriesTheNewestTwentyTextFilesAndNamesTheOlderOnes() throws {
        let (client, id) = try start()
        var first: [(name: String, sha256: String, text: String)] = [], second: [(name: String, sha256: String, text: String)] = []
        for number in 0..<16 {
            let text = "file a\(number) of the first message\n"
            first.append(("a\(number).txt", try store(client, text), text))
        }
        for number in 0..<6 {
            let text = "file b\(number) of the second\n"
            second.append(("b\(number).txt", try store(client, text), text))
        }
        try ask(client, id, "first", first.map { ($0.name, $0.sha256) })
        let whole = "first\n\n" + first.map { Self.fenced($0.name, $0.text) }.joined(separator: "\n\n")
        XCTAssertEqual(try lastMessages().first, ["role": "user", "content": .string(whole)])

        try ask(client, id, "second", second.map { ($0.name, $0.sha256) })
        let messages = try lastMessages()
        XCTAssertEqual(messages.count, 3)
        // Newest turn first: all six of the second; of the first, its first fourteen in the
        // order attached, and a line for each of the two after them.
        let kept = first.prefix(14).map { Self.fenced($0.name, $0.text) }
        let named = first.suffix(2).map { Self.line($0.name, $0.text.utf8.count) }
        XCTAssertEqual(messages[0], ["role": "user", "content": .string((["first"] + kept + named).joined(separator: "\n\n"))])
        XCTAssertEqual(messages[2], ["role": "user", "content": .string((["second"] + second.map { Self.fenced($0.name, $0.text) }).joined(separator: "\n\n"))])
        XCTAssertTrue(harness.log().contains("2 older text files sent as a line"), harness.log())
    }

    func testOneRequestCarriesAtMostFourMebibytesOfTextFiles() throws {
        let (client, id) = try start()
        // The fake's reply is short: it would otherwise say back megabytes.
        // Five files of 1 MiB less a little: four fit in 4 MiB, the fifth (the oldest) does not.
        let size = (1 << 20) - 100
        var files: [(name: String, sha256: String, text: String)] = []
        for number in 0..<5 {
            let text = String(repeating: String(UnicodeScalar(UInt8(ascii: "a") + UInt8(number))), count: size - 1) + "\n"
            files.append(("big\(number).txt", try store(client, text), text))
        }
        try ask(client, id, "old [[reply:ok]]", [(files[0].name, files[0].sha256)])
        try ask(client, id, "new [[reply:ok]]", files.dropFirst().map { ($0.name, $0.sha256) })
        let messages = try lastMessages()
        XCTAssertEqual(messages[0], ["role": "user", "content": .string("old [[reply:ok]]\n\n[attached file big0.txt (text/plain, 1024 KiB) not sent: one request carries the newest 20 text files and 4 MiB of text files at most]")])
        XCTAssertEqual(messages[2], ["role": "user", "content": .string((["new [[reply:ok]]"] + files.dropFirst().map { Self.fenced($0.name, $0.text) }).joined(separator: "\n\n"))])
    }
}
