import ConfabProtocol
import XCTest

@testable import Broker

/// The role table (docs/protocol.md, "Sharing and roles"): what each method needs, and what
/// each user has.
final class AccessRulesTests: XCTestCase {
    private let owner: UInt32 = 1000

    func testEachMethodNeedsWhatTheProtocolSays() {
        let anyone: Set<RPCMethod> = [.hello, .status, .conversationList, .conversationSearch, .blobPut]
        let read: Set<RPCMethod> = [.conversationGet, .conversationAttach, .conversationDetach, .conversationHistory, .attachmentGet]
        let write: Set<RPCMethod> = [.messageSend, .generationCancel, .messageRegenerate, .messageEdit, .messageContinue,
                                     .conversationCompact, .conversationUncompact]
        let ownerOnly: Set<RPCMethod> = [.conversationCreate, .conversationConfigure, .conversationRename, .conversationDelete,
                                         .conversationFork, .toolApprove, .conversationShare, .conversationUnshare,
                                         .modelsList, .profilesList, .toolsList, .mcpRestart, .usageSummary]
        XCTAssertEqual(anyone.union(read).union(write).union(ownerOnly), Set(RPCMethod.allCases), "every method is in the table once")
        XCTAssertEqual(anyone.count + read.count + write.count + ownerOnly.count, RPCMethod.allCases.count)
        for method in anyone { XCTAssertEqual(MethodAccess.of(method), .anyone, method.rawValue) }
        for method in read { XCTAssertEqual(MethodAccess.of(method), .needs(.read), method.rawValue) }
        for method in write { XCTAssertEqual(MethodAccess.of(method), .needs(.write), method.rawValue) }
        for method in ownerOnly { XCTAssertEqual(MethodAccess.of(method), .needs(.owner), method.rawValue) }
    }

    func testTheOwnerHasEverythingAndOthersOnlyTheirShare() {
        let shares = [ConversationShare(uid: 1001, login: "bob", role: .read), ConversationShare(uid: 1002, login: "carol", role: .write)]
        XCTAssertEqual(Permission.of(owner, owner: owner, shares: []), .owner)
        XCTAssertEqual(Permission.of(1001, owner: owner, shares: shares), .read)
        XCTAssertEqual(Permission.of(1002, owner: owner, shares: shares), .write)
        XCTAssertNil(Permission.of(1003, owner: owner, shares: shares))
        XCTAssertNil(Permission.of(0, owner: owner, shares: shares), "root is another user to a daemon it does not run")
    }

    func testWhoMayCallWhat() {
        let shares = [ConversationShare(uid: 1001, login: "bob", role: .read), ConversationShare(uid: 1002, login: "carol", role: .write)]
        func allowed(_ uid: UInt32, _ method: RPCMethod) -> Bool {
            switch MethodAccess.of(method) {
            case .anyone: return true
            case .needs(let needed): return Permission.of(uid, owner: owner, shares: shares).map { $0 >= needed } ?? false
            }
        }
        for method in RPCMethod.allCases { XCTAssertTrue(allowed(owner, method), method.rawValue) }
        XCTAssertTrue(allowed(1001, .conversationAttach))
        XCTAssertTrue(allowed(1001, .conversationHistory))
        XCTAssertFalse(allowed(1001, .messageSend))
        XCTAssertFalse(allowed(1001, .generationCancel))
        XCTAssertTrue(allowed(1002, .messageSend))
        XCTAssertTrue(allowed(1002, .messageRegenerate))
        XCTAssertTrue(allowed(1002, .messageContinue))
        for method in [RPCMethod.toolApprove, .conversationConfigure, .conversationDelete, .conversationRename, .conversationFork, .conversationShare] {
            XCTAssertFalse(allowed(1002, method), "a writer may not \(method.rawValue)")
        }
        XCTAssertFalse(allowed(1003, .conversationGet))
    }

    func testARefusalNamesBothRoles() {
        let error = RPCError.notPermitted(.messageSend, has: .read, needs: .write)
        XCTAssertEqual(error.code, RPCError.notPermitted)
        XCTAssertEqual(error.data?["role"]?.string, "read")
        XCTAssertEqual(error.data?["needs"]?.string, "write")
        XCTAssertTrue(error.message.contains("needs the write role"), error.message)
        let ownerOnly = RPCError.notPermitted(.conversationCreate, has: nil, needs: .owner)
        XCTAssertNil(ownerOnly.data?["role"])
        XCTAssertTrue(ownerOnly.message.contains("only the owner"), ownerOnly.message)
    }
}
