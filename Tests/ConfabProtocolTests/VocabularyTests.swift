import Foundation
import XCTest

@testable import ConfabProtocol

/// The enums are the protocol's words; docs/protocol.md is the contract. Each must list
/// exactly what the other does.
final class VocabularyTests: XCTestCase {

    private func protocolDocument() throws -> String {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/protocol.md").path
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    /// Names in backquotes that start a table row (`| \`name\` |`), or a `### \`name\`` heading,
    /// between `heading` and the next heading of its level.
    private func names(under heading: String, in document: String, headings: Bool) throws -> Set<String> {
        let lines = document.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else {
            XCTFail("no \(heading) in docs/protocol.md")
            return []
        }
        let level = heading.prefix { $0 == "#" } + " "
        var found: Set<String> = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix(level) { break }
            if !headings, line.hasPrefix("| `"), let end = line.dropFirst(3).firstIndex(of: "`") {
                found.insert(String(line[line.index(line.startIndex, offsetBy: 3) ..< end]))
            }
            if headings, line.hasPrefix("### `"), let end = line.dropFirst(5).firstIndex(of: "`") {
                found.insert(String(line[line.index(line.startIndex, offsetBy: 5) ..< end]))
            }
        }
        return found
    }

    func testMethodsAreTheDocumentedOnes() throws {
        let documented = try names(under: "## Methods", in: protocolDocument(), headings: true)
        XCTAssertEqual(Set(RPCMethod.allCases.map(\.rawValue)), documented)
    }

    func testNotificationsAreTheDocumentedOnes() throws {
        let documented = try names(under: "## Notifications", in: protocolDocument(), headings: false)
        XCTAssertEqual(Set(RPCNotification.allCases.map(\.rawValue)), documented)
    }

    func testReplyErrorCodesAreTheDocumentedOnes() throws {
        let document = try protocolDocument()
        guard let table = document.range(of: "Reply error codes") else { return XCTFail("no reply error codes in docs/protocol.md") }
        let rows = document[table.upperBound...].split(separator: "\n").drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        let documented = Set(rows.compactMap { row -> String? in
            guard row.hasPrefix("| `"), let end = row.dropFirst(3).firstIndex(of: "`") else { return nil }
            return String(row[row.index(row.startIndex, offsetBy: 3) ..< end])
        })
        XCTAssertEqual(Set(ReplyErrorCode.allCases.map(\.rawValue)), documented)
    }

    func testRolesAndStatusesAreTheDocumentedOnes() throws {
        let document = try protocolDocument()
        for status in MessageStatus.allCases { XCTAssertTrue(document.contains("`\(status.rawValue)`"), status.rawValue) }
        for role in [Role.user, .assistant, .tool] { XCTAssertTrue(document.contains("`\(role.rawValue)`"), role.rawValue) }
    }

    func testTypedEncodersWriteTheNames() throws {
        XCTAssertEqual(RPC.request(id: 1, method: .messageSend, params: ["content": "x"]),
                       RPC.request(id: 1, method: "message.send", params: ["content": "x"]))
        XCTAssertEqual(RPC.notification(.serverStopping, params: ["reason": "signal"]),
                       RPC.notification(method: "server.stopping", params: ["reason": "signal"]))
    }

    func testAMessageWithAnUnknownRoleOrErrorCodeIsNotAMessage() {
        let message = Message(id: "m2", conversation: "k3v9q2m8x7ad", role: .assistant, content: "x", status: .failed,
                              created: Timestamp(milliseconds: 0), error: MessageError(code: .rateLimited, message: "slow down", status: 429))
        XCTAssertEqual(Message(json: message.json), message)
        guard case .object(var object) = message.json else { return XCTFail("not an object") }
        object["role"] = "wizard"
        XCTAssertNil(Message(json: .object(object)))
        XCTAssertNil(MessageError(json: ["code": "upstream_mood", "message": "grumpy"]))
        XCTAssertEqual(MessageError(json: ["code": "storage", "message": "disk full"]), MessageError(code: .storage, message: "disk full"))
    }
}
