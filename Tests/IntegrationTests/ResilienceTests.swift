import ConfabProtocol
import Foundation
import XCTest

/// Retries, limits, hostile clients and the API key: the promises of docs/reliability.md.
final class ResilienceTests: XCTestCase {
    var harness: Harness!

    override func tearDown() { harness?.tearDown() }

    private func attachedClient(_ name: String = "tester") throws -> (RPCClient, String) {
        let client = try harness.client(name: name)
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        return (client, id)
    }

    func testRefusalThatStreamedNothingIsRetriedVisiblyAndThenSucceeds() throws {
        harness = try Harness(retries: 2)
        let (client, id) = try attachedClient()
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[fail-first:1]] [[status:429]] [[reply:second try]]"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let (notes, final) = try client.awaitReply(reply)
        let retrying = notes.filter { $0.method == "message.retrying" }
        XCTAssertEqual(retrying.count, 1)
        XCTAssertEqual(retrying.first?.params["attempt"]?.int, 1)
        XCTAssertEqual(retrying.first?.params["delay_ms"]?.int, 1000, "the upstream's Retry-After: 1")
        XCTAssertEqual(retrying.first?.params["error"]?["code"]?.string, "rate_limited")
        XCTAssertEqual(final["status"]?.string, "complete")
        XCTAssertEqual(final["content"]?.string, "second try")
        XCTAssertEqual(harness.upstreamRequests().count, 2)
    }

    func testRetriesAreBoundedThenTheReplyFails() throws {
        harness = try Harness(retries: 1)
        let (client, id) = try attachedClient()
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[status:503]]"])
        let (notes, final) = try client.awaitReply(sent["reply"]!.string!)
        XCTAssertEqual(notes.filter { $0.method == "message.retrying" }.count, 1)
        XCTAssertEqual(notes.last?.method, "message.failed")
        XCTAssertEqual(final["error"]?["status"]?.int, 503)
        XCTAssertEqual(harness.upstreamRequests().count, 2, "one try and one retry")
    }

    func testErrorsThatAreNotSafeToRetryAreNot() throws {
        harness = try Harness(retries: 2)
        let (client, id) = try attachedClient()
        // 401 is not retried; neither is a stream that already produced text.
        for content in ["[[status:401]]", "[[drop:2]] [[chunk:3]] hello"] {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string(content)])
            let (notes, _) = try client.awaitReply(sent["reply"]!.string!)
            XCTAssertEqual(notes.filter { $0.method == "message.retrying" }.count, 0, content)
            XCTAssertEqual(notes.last?.method, "message.failed", content)
        }
        XCTAssertEqual(harness.upstreamRequests().count, 2)
    }

    func testCancelDuringRetryWaitStopsIt() throws {
        harness = try Harness(retries: 2)
        let (client, id) = try attachedClient()
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[status:429]] first"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let retrying = try client.collect(until: { method, _ in method == "message.retrying" })
        XCTAssertEqual(retrying.last?.params["delay_ms"]?.int, 1000)
        XCTAssertEqual(try client.call("generation.cancel", ["conversation": .string(id)])["cancelled"]?.string, reply)
        let (_, final) = try client.awaitReply(reply)
        XCTAssertEqual(final["status"]?.string, "cancelled")
        // No sleep to see nothing happen: a second reply's retry timer, also 1 s and set later,
        // is due after the first one's. libuv runs timers in order of their due time, so once
        // the second retry has been asked for, the first would have been too, had it survived.
        let second = try client.call("message.send", ["conversation": .string(id), "content": "[[fail-first:1]] [[status:429]] [[reply:second]]"])
        let (notes, secondFinal) = try client.awaitReply(try XCTUnwrap(second["reply"]?.string))
        XCTAssertEqual(notes.filter { $0.method == "message.retrying" }.last?.params["delay_ms"]?.int, 1000)
        XCTAssertEqual(secondFinal["content"]?.string, "second")
        let asked = harness.upstreamRequests().compactMap { request in
            request["body"]?["messages"]?.array?.last?["content"]?.string
        }
        XCTAssertEqual(asked.filter { $0.hasSuffix("first") }.count, 1, "no retry after the cancel: \(asked)")
        XCTAssertEqual(asked.count, 3, "the cancelled reply's one try, the second reply's two: \(asked)")
    }

    /// A daemon allowed one stream at a time, and a client attached to two conversations.
    private func oneStreamTwoConversations() throws -> (client: RPCClient, first: String, second: String) {
        harness = try Harness(config: "[limits]\nmax_streams = 1\n")
        let client = try harness.client()
        let first = try harness.createConversation(client), second = try harness.createConversation(client)
        for id in [first, second] { try client.call("conversation.attach", ["conversation": .string(id)]) }
        return (client, first, second)
    }

    func testRaisingMaxStreamsOnReloadStartsWaitingRepliesAtOnce() throws {
        let (client, first, second) = try oneStreamTwoConversations()
        // Held until the end of the test: the long reply cannot end before the reload, however slow it is.
        let long = try client.call("message.send", ["conversation": .string(first), "content": "[[words:400]] [[delay:10]] [[hold:2 long]]"])
        let short = try client.call("message.send", ["conversation": .string(second), "content": "[[reply:no more waiting]]"])
        XCTAssertEqual(try client.call("status")["queued"]?.int, 1)

        let config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "max_streams = 1", with: "max_streams = 2\n[storage]\nfsync = false")
            .write(toFile: harness.configPath, atomically: true, encoding: .utf8)
        harness.daemon?.signal(SIGHUP)
        let notes = try client.collect(until: { method, params in
            method == "message.completed" && params["message"]?["id"]?.string == short["reply"]?.string && params["conversation"]?.string == second
        })
        XCTAssertFalse(notes.contains { $0.method == "message.completed" && $0.params["conversation"]?.string == first },
                       "the waiting reply started on reload, not after the long one ended")
        let log = harness.log()
        XCTAssertTrue(log.contains("storage.fsync = false takes effect at the next start"), log)
        XCTAssertNotNil(long["reply"])
        try harness.releaseUpstream("long")
    }

    func testThousandsOfConnectionsOpenedAndDroppedLeaveNothingBehind() throws {
        harness = try Harness(config: "[limits]\nmax_clients = 64\n")
        let observer = try harness.client(name: "observer")
        var refused = 0
        for round in 0..<2000 {
            let client = try RPCClient(path: harness.socketPath)
            if round % 2 == 0 {
                // Hang-ups are seen on a later turn of the daemon's loop, so connections opened
                // faster than that can find it at max_clients: it closes them at once, and the
                // send meets a closed socket. That is the limit working, not a leak.
                do {
                    try client.sendRaw(#"{"jsonrpc":"2.0","id":1,"method":"status"}"# + "\n")
                } catch {
                    refused += 1
                }
            }
            client.close()
        }
        XCTAssertLessThan(refused, 1000, "every connection was refused")
        // Give the daemon a moment to see the last hang-ups, then count.
        var clients = -1
        for _ in 0..<100 {
            clients = try observer.call("status")["clients"]?.int ?? -1
            if clients == 1 { break }
            usleep(20_000)
        }
        XCTAssertEqual(clients, 1)
        let pid = try XCTUnwrap(harness.daemon?.pid)
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        XCTAssertLessThan(fds, 40, "descriptors leaked: \(fds)")
    }

    func testTheAPIKeyNeverLeaks() throws {
        let key = "sk-confab-test-secret-4f7a"
        harness = try Harness(config: "api_key = \"\(key)\"\n")
        chmod(harness.configPath, 0o644)
        try harness.restartDaemon()
        let (client, id) = try attachedClient()
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[context]] secret?"])
        let (_, final) = try client.awaitReply(sent["reply"]!.string!)
        let failing = try client.call("message.send", ["conversation": .string(id), "content": "[[status:401]]"])
        _ = try client.awaitReply(failing["reply"]!.string!)
        let status = try client.call("status")
        XCTAssertFalse(status.text.contains(key))
        XCTAssertFalse(final.text.contains(key))
        XCTAssertEqual(harness.upstreamRequests().first?["authorization"], .bool(true), "the key was sent upstream")
        harness.stopDaemon()
        let log = harness.log()
        XCTAssertFalse(log.contains(key))
        XCTAssertTrue(log.contains("can be read by others"), "a world-readable config with a key is warned about")
        let history = try String(contentsOfFile: harness.dataDirectory + "/conversations/\(id).jsonl", encoding: .utf8)
        XCTAssertFalse(history.contains(key))
    }

    func testAnAPIKeyFileReadableByOthersIsWarnedAboutWithoutShowingTheKey() throws {
        let key = "sk-confab-test-keyfile-9c2e"
        var template = Array("/tmp/confab-key-XXXXXX".utf8CString)
        let keyDirectory = String(cString: try XCTUnwrap(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: keyDirectory) }
        let keyFile = keyDirectory + "/api-key"
        try (key + "\n").write(toFile: keyFile, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(keyFile, 0o640), 0)
        harness = try Harness(config: "api_key_file = \"\(keyFile)\"\n")
        let (client, id) = try attachedClient()
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "hi"])
        _ = try client.awaitReply(sent["reply"]!.string!)
        XCTAssertEqual(harness.upstreamRequests().first?["authorization"], .bool(true), "the key from the file was sent upstream")
        harness.stopDaemon()
        var log = harness.log()
        XCTAssertTrue(log.contains("the API key file \(keyFile) (upstream.api_key_file) can be read by others: chmod 600 \(keyFile)"), log)
        XCTAssertFalse(log.contains(key))
        XCTAssertFalse(log.contains("holds an API key"), "the config file names a key file but holds no key")

        // Group-writable only is not readable: no warning. Then 0600: none either.
        for mode: mode_t in [0o620, 0o600] {
            XCTAssertEqual(chmod(keyFile, mode), 0)
            try "".write(toFile: harness.daemonLog, atomically: false, encoding: .utf8)
            try harness.startDaemon()
            harness.stopDaemon()
            log = harness.log()
            XCTAssertTrue(log.contains("ready"), log)
            XCTAssertFalse(log.contains("can be read by others"), "mode \(String(mode, radix: 8)): \(log)")
        }
    }

    // MARK: - Access to the socket

    private func runDaemon(socket: String, in harness: Harness) throws -> (status: Int32, log: String) {
        let log = harness.directory + "/second.log"
        let second = try Child(Binaries.path("confabd"), ["--socket", socket, "--data-dir", harness.directory + "/data2",
                                                          "--config", harness.configPath], logFile: log)
        let status = second.wait(seconds: 10)
        if status == nil { second.stop() }
        return (status ?? -1, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    func testSocketIsPrivateAndASecondDaemonDoesNotStealIt() throws {
        harness = try Harness()
        var info = stat()
        XCTAssertEqual(lstat(harness.socketPath, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let second = try runDaemon(socket: harness.socketPath, in: harness)
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.log.contains("already running"), second.log)
        XCTAssertEqual(try harness.client().call("status")["server"]?.string, "confabd", "the first daemon still serves")
    }

    func testTwoDaemonsStartingTogetherLeaveExactlyOneServing() throws {
        harness = try Harness()
        let socket = harness.directory + "/race/confabd.sock"
        for round in 0..<5 {
            let logs = (0..<2).map { harness.directory + "/race-\(round)-\($0).log" }
            let daemons = try (0..<2).map {
                try Child(Binaries.path("confabd"), ["--socket", socket, "--data-dir", harness.directory + "/race-data-\($0)",
                                                     "--config", harness.configPath], logFile: logs[$0])
            }
            defer { for daemon in daemons { daemon.stop() } }
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline, (try? RPCClient(path: socket))?.close() == nil { usleep(20_000) }
            // The loser gives up once it finds the lock taken; on a loaded machine that can take
            // a while, so wait for it rather than for a fixed time.
            var exited: [Int] = []
            while Date() < deadline {
                exited = daemons.indices.filter { daemons[$0].wait(seconds: 0) != nil }
                if !exited.isEmpty { break }
                usleep(20_000)
            }
            XCTAssertEqual(exited.count, 1, "round \(round): exactly one gives up")
            for index in exited {
                XCTAssertEqual(daemons[index].process.terminationStatus, 1)
                let log = (try? String(contentsOfFile: logs[index], encoding: .utf8)) ?? ""
                XCTAssertTrue(log.contains("already running"), log)
            }
            // The one left is the one the socket reaches.
            let serving = try XCTUnwrap(daemons.first { $0.process.isRunning })
            let client = try RPCClient(path: socket)
            _ = try client.call("hello", ["client": "race"])
            XCTAssertEqual(try client.call("status")["clients"]?.int, 1)
            client.close()
            serving.stop()
        }
    }

    func testStaleSocketFromADeadDaemonIsReplaced() throws {
        harness = try Harness()
        harness.killDaemon()
        XCTAssertTrue(FileManager.default.fileExists(atPath: harness.socketPath), "kill -9 leaves the socket file")
        try harness.startDaemon()
        XCTAssertEqual(try harness.client().call("status")["server"]?.string, "confabd")
    }

    func testSocketDirectoryIsCreatedPrivateAndASymlinkIsRefused() throws {
        harness = try Harness()
        let made = try runDaemonAndStop(socket: harness.directory + "/run/confab/confabd.sock")
        XCTAssertEqual(made, 0o700)
        let target = harness.directory + "/elsewhere"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: harness.directory + "/linked", withDestinationPath: target)
        let refused = try runDaemon(socket: harness.directory + "/linked/confabd.sock", in: harness)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.log.contains("symlink") || refused.log.contains("not a directory"), refused.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/confabd.sock"))
    }

    func testASocketInASharedStickyDirectoryLeavesTheDirectoryOpen() throws {
        harness = try Harness()
        // Like /tmp: world-writable and sticky.
        let shared = harness.directory + "/shared"
        XCTAssertEqual(mkdir(shared, 0o700), 0)
        XCTAssertEqual(chmod(shared, 0o1777), 0)
        _ = try runDaemonAndStop(socket: shared + "/confabd.sock")
        var info = stat()
        XCTAssertEqual(lstat(shared, &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o1777, "the daemon must not make a shared directory private")
    }

    /// Starts a daemon on `socket`, waits for it to listen, stops it; returns the socket directory's mode.
    private func runDaemonAndStop(socket: String) throws -> mode_t {
        let daemon = try Child(Binaries.path("confabd"), ["--socket", socket, "--data-dir", harness.directory + "/data3",
                                                          "--config", harness.configPath], logFile: harness.directory + "/third.log")
        defer { daemon.stop() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, (try? RPCClient(path: socket))?.close() == nil { usleep(20_000) }
        var info = stat()
        XCTAssertEqual(lstat((socket as NSString).deletingLastPathComponent, &info), 0)
        return info.st_mode & 0o777
    }
}
