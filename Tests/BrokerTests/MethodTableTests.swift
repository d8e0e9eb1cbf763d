import XCTest

@testable import Broker
import ConfabProtocol
import ServiceSettings

/// The method table's columns, checked against the daemon as clients see it: what a stopping
/// daemon refuses, and how a method that acts on one conversation answers without one.
final class MethodTableTests: XCTestCase {
    private var b: InProcessBroker!

    override func setUpWithError() throws {
        b = try InProcessBroker()
    }

    override func tearDown() {
        b?.close()
        b = nil
    }

    /// A method's params that pass its own checks as far as they can without the call running:
    /// a conversation that exists, and each required field.
    private func params(_ method: RPCMethod, conversation: String) -> JSON {
        var params: [String: JSON] = ["conversation": .string(conversation)]
        switch method {
        case .messageSend: params["content"] = "hello"
        case .messageEdit: (params["message"], params["content"]) = ("m1", "again")
        case .blobPut: params = ["data": "YWJj"]
        case .conversationSearch: params = ["query": "hello"]
        case .conversationCreate, .modelsList: params = [:]
        default: break
        }
        return .object(params)
    }

    func testEveryMethodRefusedWhileStoppingAnswersShuttingDown() throws {
        let created = try b.call(.conversationCreate)
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        b.broker.isStopping = true
        defer { b.broker.isStopping = false }
        let refused = RPCMethod.allCases.filter { MethodRow.of($0).refusedWhileStopping }
        XCTAssertEqual(Set(refused), [.conversationCreate, .messageSend, .messageRegenerate, .messageEdit, .messageContinue,
                                      .conversationFork, .conversationSearch, .modelsList, .blobPut, .conversationCompact])
        for method in refused {
            XCTAssertThrowsError(try b.call(method, params(method, conversation: id)), method.rawValue) { error in
                XCTAssertEqual((error as? InProcessBroker.Refused)?.code, RPCError.shuttingDown, "\(method.rawValue): \(error)")
            }
        }
        // The others still answer: reading, and ending what runs, is what a stopping daemon is for.
        XCTAssertNoThrow(try b.call(.conversationGet, ["conversation": .string(id)]))
        XCTAssertNoThrow(try b.call(.status))
    }

    /// `mcp.restart` is not refused by the table (a name no server has is `-32602` whatever the
    /// daemon's state), but a server the config has is not restarted while the daemon stops:
    /// `-32005`, as docs/protocol.md says, and nothing is started.
    func testMCPRestartOfAKnownServerWhileStoppingAnswersShuttingDown() throws {
        b.close()
        b = try InProcessBroker { $0.mcpServers = [MCPServerSettings(name: "idle", command: "/bin/false")] }
        try b.call(.status)     // connected before the stop: a stopping daemon takes no new connection
        b.broker.isStopping = true
        defer { b.broker.isStopping = false }
        XCTAssertThrowsError(try b.call(.mcpRestart, ["server": "idle"])) { error in
            XCTAssertEqual((error as? InProcessBroker.Refused)?.code, RPCError.shuttingDown, "\(error)")
        }
        XCTAssertThrowsError(try b.call(.mcpRestart, ["server": "other"])) { error in
            XCTAssertEqual((error as? InProcessBroker.Refused)?.code, RPCError.invalidParams, "\(error)")
        }
        XCTAssertEqual(b.broker.replies.toolSources.listing(for: nil).servers.map(\.state), [.stopped], "nothing was started")
    }

    func testEveryMethodOnAConversationWithoutOneAnswersTheSameInvalidParams() throws {
        let targeted = RPCMethod.allCases.filter { MethodRow.of($0).isAboutOneConversation }
        XCTAssertEqual(targeted.count, 19)
        for method in targeted {
            var params = params(method, conversation: "")
            params = .object((params.object ?? [:]).filter { $0.key != "conversation" })
            XCTAssertThrowsError(try b.call(method, params), method.rawValue) { error in
                let refused = error as? InProcessBroker.Refused
                XCTAssertEqual(refused?.code, RPCError.invalidParams, method.rawValue)
                XCTAssertEqual(refused?.message, "missing parameter \"conversation\"", method.rawValue)
            }
            XCTAssertThrowsError(try b.call(method, ["conversation": "not an id"]), method.rawValue) { error in
                XCTAssertEqual((error as? InProcessBroker.Refused)?.message,
                               "parameter \"conversation\" is not a conversation id (12 characters of 0-9 and a-z without i, l, o, u)", method.rawValue)
            }
        }
    }

    /// The role column is the access table (`MethodAccess`), and every method has a row.
    func testTheTableIsTheAccessTable() {
        for method in RPCMethod.allCases {
            let row = MethodRow.of(method)
            XCTAssertEqual(MethodAccess.of(method), row.access, method.rawValue)
            XCTAssertEqual(MethodAccess.isAboutOneConversation(method), row.isAboutOneConversation, method.rawValue)
            // A method that only reads, or ends what runs, is never refused for the daemon stopping.
            if row.access == .needs(.read) { XCTAssertFalse(row.refusedWhileStopping, method.rawValue) }
        }
    }
}
