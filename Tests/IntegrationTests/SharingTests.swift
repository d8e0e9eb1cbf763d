import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A tool that needs somebody's yes, offered in every new conversation.
private let guardedToolConfig = """
    [tools.guarded]
    description = "Echo what it is given, once somebody allows it"
    parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
    approval = "always"
    [tools.guarded.request]
    method = "GET"
    url = "$UPSTREAM/tool/echo?x=2"

    [profiles.helper]
    tools = ["guarded"]

    """

/// Conversations shared with other users by role (`conversation.share`), with real other
/// uids connecting through `OtherUser` (root only). The owner is the daemon's own uid (root).
final class SharingTests: XCTestCase {
    /// uids no account has: their logins are their numbers.
    static let reader: UInt32 = 4301
    static let writer: UInt32 = 4302
    /// Allowed to connect, shared nothing.
    static let bystander: UInt32 = 4303

    var harness: Harness!
    var connections: [OtherUser.Connection] = []

    override func setUpWithError() throws {
        try OtherUser.requireRoot()
        harness = try Harness(config: "[access]\nallow_uids = [\(Self.reader), \(Self.writer), \(Self.bystander)]\n")
        OtherUser.openSocket(harness)
    }

    override func tearDown() {
        for connection in connections { connection.stop() }
        harness?.tearDown()
    }

    private func connect(_ uid: UInt32) throws -> RPCClient {
        let connection = try OtherUser.Connection(uid: uid, socketPath: harness.socketPath)
        connections.append(connection)
        _ = try connection.client.call("hello", ["client": "sharing-test"])
        return connection.client
    }

    /// The error a call gets, failing the test when it succeeds.
    private func refusal(_ client: RPCClient, _ method: RPCMethod, _ params: JSON, file: StaticString = #filePath, line: UInt = #line) throws -> RPCError? {
        let frame = try client.request(method.rawValue, params)
        guard let error = frame["error"].flatMap(RPCError.init(json:)) else {
            XCTFail("\(method.rawValue) was allowed: \(frame.text)", file: file, line: line)
            return nil
        }
        return error
    }

    private func assertNotPermitted(_ client: RPCClient, _ method: RPCMethod, _ params: JSON, needs: String,
                                    file: StaticString = #filePath, line: UInt = #line) throws {
        let error = try refusal(client, method, params, file: file, line: line)
        XCTAssertEqual(error?.code, RPCError.notPermitted, "\(method.rawValue): \(String(describing: error))", file: file, line: line)
        XCTAssertEqual(error?.data?["needs"]?.string, needs, "\(method.rawValue)", file: file, line: line)
    }

    private func assertNotFound(_ client: RPCClient, _ method: RPCMethod, _ params: JSON, file: StaticString = #filePath, line: UInt = #line) throws {
        let error = try refusal(client, method, params, file: file, line: line)
        XCTAssertEqual(error?.code, RPCError.notFound, "\(method.rawValue): \(String(describing: error))", file: file, line: line)
    }

    private func share(_ owner: RPCClient, _ conversation: String, uid: UInt32, role: ShareRole) throws -> JSON {
        try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(uid)), "role": .string(role.rawValue)])
    }

    private func ids(_ list: JSON) -> Set<String> {
        Set(list["conversations"]?.array?.compactMap { $0["id"]?.string } ?? [])
    }

    private func waitForLog(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if harness.log().contains(text) { return }
            usleep(20_000)
        }
        XCTFail("no log line with \"\(text)\":\n\(harness.log())", file: file, line: line)
    }

    /// Each role's allowed and refused calls, and that an unshared conversation does not exist
    /// for another user.
    func testEachRoleCanDoWhatItsRoleAllowsAndNoMore() throws {
        let owner = try harness.client()
        let shared = try harness.createConversation(owner, title: "shared")
        let secret = try harness.createConversation(owner, title: "private")
        // Attached before sending: a reply that ends before the attach is never announced to it.
        _ = try owner.call("conversation.attach", ["conversation": .string(shared), "history": 0])
        let sent = try owner.call("message.send", ["conversation": .string(shared), "content": "needle in shared [[reply:shared answer]]"])
        _ = try owner.call("message.send", ["conversation": .string(secret), "content": "needle in private [[reply:private answer]]"])
        _ = try owner.awaitReply(sent["reply"]!.string!)

        _ = try share(owner, shared, uid: Self.reader, role: .read)
        let info = try share(owner, shared, uid: Self.writer, role: .write)["conversation"]
        let listed = info?["shared_with"]?.array?.compactMap(ConversationShare.init(json:))
        XCTAssertEqual(listed, [ConversationShare(uid: Self.reader, login: String(Self.reader), role: .read),
                                ConversationShare(uid: Self.writer, login: String(Self.writer), role: .write)])

        let reader = try connect(Self.reader)
        let writer = try connect(Self.writer)
        let bystander = try connect(Self.bystander)
        let onShared: JSON = ["conversation": .string(shared)]
        let onSecret: JSON = ["conversation": .string(secret)]

        // Read: list, get, attach, history, search, status, within what is shared.
        XCTAssertEqual(ids(try reader.call("conversation.list")), [shared])
        XCTAssertEqual(try reader.call("conversation.get", onShared)["conversation"]?["title"]?.string, "shared")
        XCTAssertEqual(try reader.call("conversation.history", onShared)["messages"]?.array?.count, 2)
        let attached = try reader.call("conversation.attach", onShared)
        XCTAssertEqual(attached["messages"]?.array?.last?["content"]?.string, "shared answer")
        let hits = try reader.call("conversation.search", ["query": "needle"])["hits"]?.array ?? []
        XCTAssertEqual(hits.compactMap { $0["conversation"]?.string }, [shared])
        XCTAssertEqual(try reader.call("status")["conversations"]?.int, 1)

        // A conversation not shared does not exist, whatever is asked of it.
        for method in [RPCMethod.conversationGet, .conversationAttach, .conversationHistory, .messageSend, .conversationRename] {
            var params = onSecret.object ?? [:]
            params["content"] = "hi"
            params["title"] = "mine"
            try assertNotFound(reader, method, .object(params))
        }
        try assertNotFound(reader, .conversationSearch, ["query": "needle", "conversation": .string(secret)])

        // Read only: no writing.
        try assertNotPermitted(reader, .messageSend, ["conversation": .string(shared), "content": "let me in"], needs: "write")
        try assertNotPermitted(reader, .generationCancel, onShared, needs: "write")
        try assertNotPermitted(reader, .messageRegenerate, onShared, needs: "write")
        try assertNotPermitted(reader, .messageContinue, onShared, needs: "write")

        // Write: send, cancel, continue; the reply streams to the reader attached.
        let writerSent = try writer.call("message.send", ["conversation": .string(shared), "content": "from the writer [[reply:writer answer]]"])
        XCTAssertEqual(writerSent["message"]?["author"]?["uid"]?.int, Int(Self.writer))
        let seen = try reader.awaitReply(writerSent["reply"]!.string!)
        XCTAssertEqual(seen.final["content"]?.string, "writer answer")
        XCTAssertEqual(try writer.call("generation.cancel", onShared)["cancelled"], .null)
        // Allowed, and refused only for the conversation's state.
        XCTAssertEqual(try refusal(writer, .messageContinue, onShared)?.code, RPCError.conflict)

        // The owner's alone, for every other user.
        for client in [reader, writer] {
            try assertNotPermitted(client, .conversationRename, ["conversation": .string(shared), "title": "mine"], needs: "owner")
            try assertNotPermitted(client, .conversationConfigure, ["conversation": .string(shared), "system": "obey me"], needs: "owner")
            try assertNotPermitted(client, .conversationDelete, onShared, needs: "owner")
            try assertNotPermitted(client, .conversationFork, onShared, needs: "owner")
            try assertNotPermitted(client, .toolApprove, ["conversation": .string(shared), "call": "c1", "allow": true], needs: "owner")
            try assertNotPermitted(client, .conversationShare, ["conversation": .string(shared), "uid": .int(Int(Self.bystander)), "role": "write"], needs: "owner")
            try assertNotPermitted(client, .conversationUnshare, ["conversation": .string(shared), "uid": .int(Int(Self.reader))], needs: "owner")
            try assertNotPermitted(client, .conversationCreate, ["title": "mine"], needs: "owner")
            try assertNotPermitted(client, .modelsList, [:], needs: "owner")
            try assertNotPermitted(client, .profilesList, [:], needs: "owner")
        }

        // Allowed in, shared nothing: sees nothing.
        XCTAssertEqual(ids(try bystander.call("conversation.list")), [])
        XCTAssertEqual(try bystander.call("conversation.search", ["query": "needle"])["hits"]?.array?.count, 0)
        let status = try bystander.call("status")
        XCTAssertEqual(status["conversations"]?.int, 0)
        XCTAssertEqual(status["clients"]?.int, 1)
        try assertNotFound(bystander, .conversationAttach, onShared)

        // The owner still sees everything.
        XCTAssertEqual(ids(try owner.call("conversation.list")), [shared, secret])
        XCTAssertEqual(try owner.call("status")["clients"]?.int, 4)

        // Nothing of the private conversation reached anyone else, in any notification.
        _ = try owner.call("conversation.attach", onSecret)
        let privateSent = try owner.call("message.send", ["conversation": .string(secret), "content": "more [[reply:still private]]"])
        _ = try owner.awaitReply(privateSent["reply"]!.string!)
        // A frame sent after the private reply's end comes after all of its notifications.
        let marker = try writer.call("message.send", ["conversation": .string(shared), "content": "marker [[reply:marker]]"])
        _ = try reader.awaitReply(marker["reply"]!.string!)
        _ = try writer.call("status")
        for client in [reader, writer, bystander] {
            _ = try client.call("status")
            let leaked = client.notifications.filter { $0.params["conversation"]?.string != shared }
            XCTAssertEqual(leaked.map(\.method), [], "notifications of other conversations: \(leaked.map { $0.params.text })")
        }
    }

    /// Unsharing detaches the user's clients at once, telling them; taking a uid off
    /// `allow_uids` and reloading closes its connections.
    func testUnshareDetachesAndReloadClosesConnectionsOfARemovedUID() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "briefly shared")
        _ = try share(owner, conversation, uid: Self.reader, role: .write)
        _ = try owner.call("conversation.attach", ["conversation": .string(conversation)])
        let reader = try connect(Self.reader)
        _ = try reader.call("conversation.attach", ["conversation": .string(conversation)])
        _ = try owner.collect { method, _ in method == RPCNotification.clientAttached.rawValue }

        let result = try owner.call(RPCMethod.conversationUnshare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(Self.reader))])
        XCTAssertEqual(result["unshared"]?.bool, true)
        XCTAssertEqual(result["conversation"]?["shared_with"]?.array?.count, 0)
        let told = try reader.collect { method, _ in method == RPCNotification.conversationUnshared.rawValue }
        XCTAssertEqual(told.last?.params["conversation"]?.string, conversation)
        XCTAssertEqual(told.last?.params["by"]?["uid"]?.int, 0)
        let left = try owner.collect { method, _ in method == RPCNotification.clientDetached.rawValue }
        XCTAssertEqual(left.last?.params["client"]?["uid"]?.int, Int(Self.reader))

        // Nothing more of it reaches the reader, and it is gone for it.
        let sent = try owner.call("message.send", ["conversation": .string(conversation), "content": "after [[reply:not for you]]"])
        _ = try owner.awaitReply(sent["reply"]!.string!)
        try assertNotFound(reader, .messageSend, ["conversation": .string(conversation), "content": "still here?"])
        try assertNotFound(reader, .conversationAttach, ["conversation": .string(conversation)])
        XCTAssertEqual(ids(try reader.call("conversation.list")), [])
        XCTAssertEqual(reader.notifications.map(\.method), [], "\(reader.notifications.map { $0.params.text })")
        // A second unshare has nothing to take away.
        XCTAssertEqual(try owner.call(RPCMethod.conversationUnshare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(Self.reader))])["unshared"]?.bool, false)

        // Reload without the writer's uid: its connection closes at once; the others stay.
        let writer = try connect(Self.writer)
        try harness.writeConfig("[access]\nallow_uids = [\(Self.reader)]\n")
        harness.daemon?.signal(SIGHUP)
        XCTAssertNil(try writer.readFrame(timeout: 20), "the removed uid's connection stays open")
        waitForLog("uid=\(Self.writer) is no longer in access.allow_uids")
        XCTAssertNotNil(try reader.call("status")["clients"])
        XCTAssertEqual(try owner.call("status")["clients"]?.int, 2)
    }

    /// A fork is the owner's alone; shares are in the log and hold across restarts, read from
    /// the index and from the logs alike.
    func testAForkIsNotSharedAndSharesSurviveARestart() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "kept")
        _ = try owner.call("conversation.attach", ["conversation": .string(conversation), "history": 0])
        let sent = try owner.call("message.send", ["conversation": .string(conversation), "content": "hi [[reply:hello]]"])
        _ = try owner.awaitReply(sent["reply"]!.string!)
        _ = try share(owner, conversation, uid: Self.reader, role: .write)
        // Sharing again changes the role; the other share stays.
        _ = try share(owner, conversation, uid: Self.writer, role: .write)
        _ = try share(owner, conversation, uid: Self.reader, role: .read)
        let login = try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(conversation), "login": "daemon", "role": "read"])
        let expected = [ConversationShare(uid: 1, login: "daemon", role: .read),
                        ConversationShare(uid: Self.reader, login: String(Self.reader), role: .read),
                        ConversationShare(uid: Self.writer, login: String(Self.writer), role: .write)]
        XCTAssertEqual(login["conversation"]?["shared_with"]?.array?.compactMap(ConversationShare.init(json:)), expected)

        let fork = try owner.call("conversation.fork", ["conversation": .string(conversation)])["conversation"]
        let forkID = try XCTUnwrap(fork?["id"]?.string)
        XCTAssertEqual(fork?["shared_with"]?.array?.count, 0)
        let reader = try connect(Self.reader)
        XCTAssertEqual(ids(try reader.call("conversation.list")), [conversation])
        try assertNotFound(reader, .conversationAttach, ["conversation": .string(forkID)])
        connections.forEach { $0.stop() }
        connections = []

        func sharesAfterRestart() throws -> [ConversationShare]? {
            OtherUser.openSocket(harness)
            let reader = try connect(Self.reader)
            defer { connections.forEach { $0.stop() }; connections = [] }
            let listed = try reader.call("conversation.list")["conversations"]?.array ?? []
            XCTAssertEqual(listed.compactMap { $0["id"]?.string }, [conversation])
            try assertNotPermitted(reader, .messageSend, ["conversation": .string(conversation), "content": "hi"], needs: "write")
            return listed.first?["shared_with"]?.array?.compactMap(ConversationShare.init(json:))
        }
        // From the index the daemon writes at shutdown.
        try harness.restartDaemon()
        XCTAssertTrue(harness.log().contains("2 conversations listed from the index, 0 logs read"), harness.log())
        XCTAssertEqual(try sharesAfterRestart(), expected)
        // From the logs alone.
        harness.stopDaemon()
        try? FileManager.default.removeItem(atPath: harness.dataDirectory + "/index.jsonl")
        try harness.startDaemon()
        XCTAssertTrue(harness.log().contains("0 conversations listed from the index, 2 logs read"), harness.log())
        XCTAssertEqual(try sharesAfterRestart(), expected)
    }

    /// The client's commands: share, ls -l, show and unshare as the owner; ls as the reader.
    func testTheClientSharesListsAndUnshares() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "client shared")
        let shared = try harness.runClient(["share", conversation, String(Self.reader), "--read-only"])
        XCTAssertEqual(shared.status, 0, shared.stderr)
        XCTAssertEqual(shared.stdout, "shared \(conversation) with uid \(Self.reader), read only\n")
        let notAllowed = try harness.runClient(["share", conversation, "daemon"])
        XCTAssertEqual(notAllowed.status, 0, notAllowed.stderr)
        XCTAssertEqual(notAllowed.stdout, "shared \(conversation) with daemon (uid 1), read and write\n")
        XCTAssertTrue(notAllowed.stderr.contains("uid 1 is not in confabd's access.allow_uids"), notAllowed.stderr)

        let long = try harness.runClient(["ls", "-l"])
        XCTAssertTrue(long.stdout.contains("SHARED") && long.stdout.contains("daemon,\(Self.reader):r"), long.stdout)
        let show = try harness.runClient(["show", conversation])
        XCTAssertTrue(show.stdout.contains("shared with daemon (write), \(Self.reader) (read)\n"), show.stdout)

        let listedByReader = try OtherUser.run(Self.reader, OtherUser.client, ["--socket", harness.socketPath, "ls"],
                                               environment: ["CONFAB_DAEMON_USER": String(getuid())])
        XCTAssertEqual(listedByReader.status, 0, listedByReader.stderr)
        XCTAssertTrue(listedByReader.stdout.contains(conversation), listedByReader.stdout)
        let refused = try OtherUser.run(Self.reader, OtherUser.client, ["--socket", harness.socketPath, "rename", conversation, "mine"],
                                        environment: ["CONFAB_DAEMON_USER": String(getuid())])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("not permitted"), refused.stderr)

        let unshared = try harness.runClient(["unshare", conversation, String(Self.reader)])
        XCTAssertEqual(unshared.status, 0, unshared.stderr)
        let again = try harness.runClient(["unshare", conversation, String(Self.reader)])
        XCTAssertTrue(again.stderr.contains("was not shared with \(Self.reader)"), again.stderr)
        let after = try OtherUser.run(Self.reader, OtherUser.client, ["--socket", harness.socketPath, "ls"],
                                      environment: ["CONFAB_DAEMON_USER": String(getuid())])
        XCTAssertFalse(after.stdout.contains(conversation), after.stdout)
    }

    /// The overflow uid is every unmapped user under PrivateUsers=yes: refused at start and on reload.
    func testTheOverflowUIDIsRefusedInAllowUIDs() throws {
        try harness.writeConfig("[access]\nallow_uids = [\(Self.reader), 65534]\n")
        harness.daemon?.signal(SIGHUP)
        waitForLog("config reload rejected")
        XCTAssertTrue(harness.log().contains("the overflow uid"), harness.log())
        // The old list stands.
        let reader = try connect(Self.reader)
        XCTAssertNotNil(try reader.call("status")["clients"])

        harness.stopDaemon()
        XCTAssertThrowsError(try harness.startDaemon()) { error in
            XCTAssertTrue("\(error)".contains("65534, the overflow uid"), "\(error)")
        }
    }

    /// `confab ask` by a shared user whose share is taken away mid-reply ends with status 5 and
    /// says why, instead of waiting for a reply it will never see the end of.
    func testAskEndsWhenTheOwnerUnsharesMidReply() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "taken back")
        _ = try share(owner, conversation, uid: Self.writer, role: .write)
        _ = try owner.call("conversation.attach", ["conversation": .string(conversation)])

        let ask = Process()
        ask.executableURL = URL(fileURLWithPath: OtherUser.setpriv!)
        ask.arguments = ["--reuid=\(Self.writer)", "--regid=\(Self.writer)", "--clear-groups", "--", OtherUser.client,
                         "--socket", harness.socketPath, "ask", "-c", conversation, "tell a long one [[words:3000]] [[delay:40]]"]
        ask.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CONFAB_DAEMON_USER": String(getuid())]
        ask.currentDirectoryURL = URL(fileURLWithPath: "/")
        let errors = Pipe()
        ask.standardOutput = FileHandle.nullDevice
        ask.standardError = errors
        ask.standardInput = FileHandle.nullDevice
        try ask.run()
        defer { if ask.isRunning { kill(ask.processIdentifier, SIGKILL) } }

        // The reply streams (the owner sees its text), then the owner takes the share away.
        _ = try owner.collect(until: { method, _ in method == RPCNotification.messageDelta.rawValue }, timeout: 60)
        _ = try owner.call(RPCMethod.conversationUnshare.rawValue, ["conversation": .string(conversation), "uid": .int(Int(Self.writer))])

        let deadline = Date().addingTimeInterval(30)
        while ask.isRunning && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(ask.isRunning, "ask still waits for a reply it can no longer see")
        guard !ask.isRunning else { return }
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(ask.terminationStatus, 5, stderr)
        XCTAssertTrue(stderr.contains("stopped sharing the conversation with you"), stderr)
    }

    /// A shared writer's `ask` does not ask about a call it may not answer (nor deny it for
    /// want of a terminal): it says the call waits for the owner, and goes on once the owner
    /// approves.
    func testAskBySharedUserWaitsForTheOwnersApproval() throws {
        try harness.writeConfig("[access]\nallow_uids = [\(Self.writer)]\n" + guardedToolConfig, topLevel: "default_profile = \"helper\"")
        try harness.restartDaemon()
        OtherUser.openSocket(harness)
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "guarded")
        _ = try share(owner, conversation, uid: Self.writer, role: .write)
        _ = try owner.call("conversation.attach", ["conversation": .string(conversation)])

        let ask = Process()
        ask.executableURL = URL(fileURLWithPath: OtherUser.setpriv!)
        ask.arguments = ["--reuid=\(Self.writer)", "--regid=\(Self.writer)", "--clear-groups", "--", OtherUser.client,
                         "--socket", harness.socketPath, "ask", "-c", conversation, #"check [[tool:guarded {"city":"Paris"}]]"#]
        ask.environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CONFAB_DAEMON_USER": String(getuid())]
        ask.currentDirectoryURL = URL(fileURLWithPath: "/")
        let errors = Pipe()
        ask.standardOutput = FileHandle.nullDevice
        ask.standardError = errors
        ask.standardInput = FileHandle.nullDevice
        try ask.run()
        defer { if ask.isRunning { kill(ask.processIdentifier, SIGKILL) } }

        let requested = try owner.collect(until: { method, _ in method == RPCNotification.toolApprovalRequested.rawValue }, timeout: 60)
        let call = try XCTUnwrap(requested.last?.params["call"]?.string)
        _ = try owner.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(conversation), "call": .string(call), "allow": true])

        let deadline = Date().addingTimeInterval(30)
        while ask.isRunning && Date() < deadline { usleep(20_000) }
        XCTAssertFalse(ask.isRunning, "ask did not end after the owner's approval")
        guard !ask.isRunning else { return }
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(ask.terminationStatus, 0, stderr)
        XCTAssertTrue(stderr.contains("call guarded waits for the owner's approval"), stderr)
        XCTAssertFalse(stderr.contains("no terminal to ask on"), stderr)
    }

}

/// `/share` and `/unshare` in `confab attach`, with the shared user's own attach in another
/// pane, run as that uid.
final class SharingAttachTests: XCTestCase {
    static let reader: UInt32 = 4311
    var harness: Harness!
    var tmux: Tmux!

    override func setUpWithError() throws {
        try OtherUser.requireRoot()
        harness = try Harness(config: "[access]\nallow_uids = [\(Self.reader)]\n")
        OtherUser.openSocket(harness)
        tmux = Tmux(directory: harness.directory)
    }

    override func tearDown() {
        tmux?.kill()
        harness?.tearDown()
    }

    func testTheOwnerSharesInAttachAndTheSharedUserIsToldWhenItEnds() throws {
        let id = try harness.runClient(["new", "--title", "pair"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let owner = try tmux.start(harness.confabCommand(["attach", id, "--name", "ana"]), width: 120, height: 24)
        try tmux.waitForText(owner, "here: ana (you)")
        try tmux.type(owner, "/share \(Self.reader) --read-only")
        try tmux.send(owner, ["Enter"])
        try tmux.waitForText(owner, "shared with \(Self.reader) (read)")

        // The shared user's own client, as that uid, with a home of its own for the line history.
        let home = harness.directory + "/home-\(Self.reader)"
        XCTAssertEqual(mkdir(home, 0o700), 0)
        XCTAssertEqual(chown(home, Self.reader, Self.reader), 0)
        let command = ["/usr/bin/env", "HOME=\(home)", "CONFAB_DAEMON_USER=\(getuid())", OtherUser.setpriv!, "--reuid=\(Self.reader)",
                       "--regid=\(Self.reader)", "--clear-groups", "--", OtherUser.client, "--socket", harness.socketPath,
                       "attach", id, "--name", "bob"].map(Tmux.quoted).joined(separator: " ")
        let reader = try tmux.start(command, width: 120, height: 24)
        try tmux.waitForText(reader, "here: bob (you)")
        try tmux.waitForText(owner, "bob (\(Self.reader)) joined")
        try tmux.type(reader, "may I?")
        try tmux.send(reader, ["Enter"])
        try tmux.waitForText(reader, "needs the write role")
        try tmux.type(reader, "/rename mine")
        try tmux.send(reader, ["Enter"])
        try tmux.waitForText(reader, "only the owner")

        try tmux.type(owner, "/unshare \(Self.reader)")
        try tmux.send(owner, ["Enter"])
        try tmux.waitForText(reader, "the owner stopped sharing this conversation with you")
        try tmux.waitForText(reader, "[exit 0]")
        try tmux.waitForText(owner, "bob (\(Self.reader)) left")
        try tmux.waitForText(owner, "shared with nobody")
    }
    /// A reader is offered neither an answer to a call (it waits for the owner) nor /continue
    /// for a reply cut off at the length limit.
    func testASharedReaderIsOfferedNeitherApprovalNorContinue() throws {
        try harness.writeConfig("[access]\nallow_uids = [\(Self.reader)]\n" + guardedToolConfig, topLevel: "default_profile = \"helper\"")
        try harness.restartDaemon()
        OtherUser.openSocket(harness)
        let owner = try harness.client()
        let id = try harness.createConversation(owner, title: "watched")
        _ = try owner.call(RPCMethod.conversationShare.rawValue, ["conversation": .string(id), "uid": .int(Int(Self.reader)), "role": "read"])
        _ = try owner.call("conversation.attach", ["conversation": .string(id)])

        let home = harness.directory + "/home-reader"
        XCTAssertEqual(mkdir(home, 0o700), 0)
        XCTAssertEqual(chown(home, Self.reader, Self.reader), 0)
        let command = ["/usr/bin/env", "HOME=\(home)", "CONFAB_DAEMON_USER=\(getuid())", OtherUser.setpriv!, "--reuid=\(Self.reader)",
                       "--regid=\(Self.reader)", "--clear-groups", "--", OtherUser.client, "--socket", harness.socketPath,
                       "attach", id, "--name", "bob"].map(Tmux.quoted).joined(separator: " ")
        let reader = try tmux.start(command, width: 120, height: 24)
        try tmux.waitForText(reader, "here: bob (you)")

        _ = try owner.call("message.send", ["conversation": .string(id), "content": #"check [[tool:guarded {"city":"Paris"}]]"#])
        let requested = try owner.collect(until: { method, _ in method == RPCNotification.toolApprovalRequested.rawValue }, timeout: 60)
        try tmux.waitForText(reader, "waits for the owner's approval")
        let asked = try tmux.screen(reader)
        XCTAssertFalse(asked.contains("y/n"), asked)
        let call = try XCTUnwrap(requested.last?.params["call"]?.string)
        _ = try owner.call(RPCMethod.toolApprove.rawValue, ["conversation": .string(id), "call": .string(call), "allow": true])
        try tmux.waitForText(reader, "tool results: [guarded]")

        let sent = try owner.call("message.send", ["conversation": .string(id), "content": "go on [[reply:cut short]] [[finish:length]]"])
        _ = try owner.awaitReply(sent["reply"]!.string!)
        try tmux.waitForText(reader, "[cut off at the length limit]")
        let cut = try tmux.screen(reader)
        XCTAssertFalse(cut.contains("/continue"), cut)
    }
}

/// Another user is always seen when it attaches.
extension SharingTests {
    func testAnotherUsersQuietAttachIsAnnounced() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "watched")
        _ = try share(owner, conversation, uid: Self.reader, role: .read)
        _ = try owner.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        let reader = try connect(Self.reader)
        _ = try reader.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation), "quiet": true])
        let joined = try owner.collect { method, _ in method == RPCNotification.clientAttached.rawValue }
        XCTAssertEqual(joined.last?.params["client"]?["uid"]?.int, Int(Self.reader))
        let listed = try owner.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation), "history": 0])
        XCTAssertEqual(listed["clients"]?.array?.compactMap { $0["uid"]?.int }, [Int(Self.reader)])
        _ = try reader.call(RPCMethod.conversationDetach.rawValue, ["conversation": .string(conversation)])
        let left = try owner.collect { method, _ in method == RPCNotification.clientDetached.rawValue }
        XCTAssertEqual(left.last?.params["client"]?["uid"]?.int, Int(Self.reader))
    }
}

/// Another user's comings and goings cannot flood the owner's screen.
extension SharingTests {
    func testAnotherUserAlternatingAttachAndDetachIsRefusedPastItsBudget() throws {
        let owner = try harness.client()
        let conversation = try harness.createConversation(owner, title: "busy door")
        _ = try share(owner, conversation, uid: Self.reader, role: .read)
        _ = try owner.call(RPCMethod.conversationAttach.rawValue, ["conversation": .string(conversation)])
        let reader = try connect(Self.reader)
        let onConversation: JSON = ["conversation": .string(conversation), "history": 0]
        // Attach and detach until refused, at most 300 times: only a machine that took two
        // seconds a round for ten minutes would never be (the budget grows one every two seconds).
        let rounds = 300
        let started = Date()
        var attached = 0
        var refusal: JSON?
        for _ in 0..<rounds where refusal == nil {
            let frame = try reader.request(RPCMethod.conversationAttach.rawValue, onConversation)
            if let error = frame["error"] {
                refusal = error
                continue
            }
            attached += 1
            _ = try reader.call(RPCMethod.conversationDetach.rawValue, ["conversation": .string(conversation)])
        }
        let elapsed = Date().timeIntervalSince(started)
        // Ten attaches in hand and one more every two seconds, whatever the machine's pace.
        XCTAssertLessThanOrEqual(Double(attached), 10 + elapsed / 2 + 1, "\(attached) attaches in \(elapsed) s")
        XCTAssertGreaterThanOrEqual(attached, 10)
        XCTAssertEqual(refusal?["code"]?.int, RPCError.limitReached, refusal?.text ?? "never refused")
        XCTAssertTrue(refusal?["message"]?.string?.hasPrefix("attached and detached too often: try again in ") ?? false)
        // Every attach that went through was announced, and so was every detach.
        _ = try owner.call(RPCMethod.status.rawValue)
        _ = try reader.call(RPCMethod.status.rawValue)
        _ = try owner.call(RPCMethod.status.rawValue)
        XCTAssertEqual(owner.notifications.filter { $0.method == RPCNotification.clientAttached.rawValue }.count, attached)
        XCTAssertEqual(owner.notifications.filter { $0.method == RPCNotification.clientDetached.rawValue }.count, attached)

        // The owner's own clients come and go freely.
        let second = try harness.client()
        for _ in 0..<rounds {
            _ = try second.call(RPCMethod.conversationAttach.rawValue, onConversation)
            _ = try second.call(RPCMethod.conversationDetach.rawValue, ["conversation": .string(conversation)])
        }
    }
}

/// Other users cannot take every connection.
extension SharingTests {
    func testAnotherUserHasAConnectionCapAndTheOwnerKeepsSlots() throws {
        harness.stopDaemon()
        // One connection per other user, and of two, one kept for the owner.
        try harness.writeConfig("[access]\nallow_uids = [\(Self.reader), \(Self.writer)]\n[limits]\nmax_clients = 2\n")
        try harness.startDaemon()
        OtherUser.openSocket(harness)
        _ = try connect(Self.reader)

        let second = try OtherUser.Connection(uid: Self.reader, socketPath: harness.socketPath)
        connections.append(second)
        let perUser = try XCTUnwrap(try second.client.readFrame(timeout: 20))
        XCTAssertEqual(perUser["error"]?["code"]?.int, RPCError.limitReached, perUser.text)
        XCTAssertEqual(perUser["error"]?["message"]?.string, "too many connections of uid \(Self.reader) (limit 1 per user)")
        XCTAssertNil(try second.client.readFrame(timeout: 20))

        let writer = try OtherUser.Connection(uid: Self.writer, socketPath: harness.socketPath)
        connections.append(writer)
        let kept = try XCTUnwrap(try writer.client.readFrame(timeout: 20))
        XCTAssertEqual(kept["error"]?["code"]?.int, RPCError.limitReached, kept.text)
        XCTAssertEqual(kept["error"]?["message"]?.string, "too many clients (limit 2, 1 kept for the owner)")

        // The owner still gets in.
        let owner = try harness.client()
        XCTAssertEqual(try owner.call(RPCMethod.status.rawValue)["clients"]?.int, 2)
    }
}
