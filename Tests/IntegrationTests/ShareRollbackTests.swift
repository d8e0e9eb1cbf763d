import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A share the disk refuses: the user it named keeps nothing of it.
extension PowerCutTests {
    func testAShareWhoseSyncFailsDetachesTheClientsThatAttachedMeanwhile() throws {
        try OtherUser.requireRoot()
        let reader: UInt32 = 4311
        try harness.writeConfig("[access]\nallow_uids = [\(reader)]\n")
        try startUnderTheShim()
        OtherUser.openSocket(harness)
        let owner = try harness.client(name: "ana")
        let conversation = try harness.createConversation(owner, title: "almost shared")
        let connection = try OtherUser.Connection(uid: reader, socketPath: harness.socketPath)
        defer { connection.stop() }
        let shared = connection.client
        _ = try shared.call(RPCMethod.hello.rawValue, ["client": "rollback-test"])

        // The share is written and its sync held: the summary holds it, the disk not yet.
        XCTAssertTrue(FileManager.default.createFile(atPath: control + "/hold", contents: nil))
        let shareID: JSON = .int(9001)
        try owner.sendRaw(RPC.request(id: shareID, method: RPCMethod.conversationShare.rawValue,
                                      params: ["conversation": .string(conversation), "uid": .int(Int(reader)), "role": "write"]))
        var attached: JSON?
        try waitFor("the reader's attach in the window") {
            let frame = try shared.request(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation), "history": 0])
            attached = frame["result"]
            return attached != nil
        }
        XCTAssertNotNil(attached)

        // The disk fails the sync: the share is refused, and the reader is not left attached.
        try "EIO".write(toFile: control + "/fail", atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: control + "/hold")
        let refused = try owner.response(to: shareID, timeout: 30)
        XCTAssertEqual(refused["error"]?["code"]?.int, RPCError.storageFailed, refused.text)
        try FileManager.default.removeItem(atPath: control + "/fail")
        let told = try shared.collect { method, _ in method == RPCNotification.conversationUnshared.rawValue }
        XCTAssertEqual(told.last?.params["conversation"]?.string, conversation)
        let again = try shared.request(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        XCTAssertEqual(again["error"]?["code"]?.int, RPCError.notFound, again.text)
        XCTAssertEqual(try owner.call(RPCMethod.status.rawValue)["clients"]?.int, 2)
    }
}
