import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A full or failing disk, against the real daemon.
///
/// The disk is "full" through the daemon's file-size limit (RLIMIT_FSIZE), set with
/// util-linux `prlimit`: at launch (`prlimit --fsize=N:unlimited -- confabd …`) or on the
/// running daemon (`prlimit --pid PID --fsize=N:unlimited`). confabd ignores SIGXFSZ, so an
/// append that would pass the limit writes what fits and then fails with EFBIG, just as a
/// full file system writes what fits and fails with ENOSPC. The limit is per file offset,
/// so it is set from the size of the log under test. Raising it again is the disk gaining
/// room, without a restart. The daemon's stderr goes to a pipe (a file would be under the
/// limit too). One test also fills a real tmpfs (ENOSPC) where mounting one is allowed.
final class DiskFullTests: XCTestCase {
    static let prlimit = "/usr/bin/prlimit"
    var harness: Harness!
    var daemon: LimitedDaemon?
    var mountPoint: String?

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.prlimit) else {
            throw unavailable("\(Self.prlimit) (util-linux) is not installed")
        }
        harness = try Harness()
        // The harness's own daemon runs without a limit; these tests start theirs.
        harness.stopDaemon()
    }

    override func tearDown() {
        daemon?.stop()
        daemon = nil
        if let mountPoint {
            if Self.run(["/usr/bin/umount", mountPoint]).status != 0 { _ = Self.run(["/usr/bin/umount", "-l", mountPoint]) }
        }
        harness?.tearDown()
    }

    // MARK: - Tests

    func testSendThatCannotBeStoredGets32003AndNothingStoredIsDamaged() throws {
        let daemon = try start()
        let client = try harness.client(name: "a")
        let id = try harness.createConversation(client, title: "before the disk filled", system: "sys")
        try client.call("conversation.attach", ["conversation": .string(id)])
        for n in 1...2 {
            let sent = try client.call("message.send", ["conversation": .string(id), "content": .string("[[reply:answer \(n)]] question \(n)")])
            XCTAssertEqual(try client.awaitReply(sent["reply"]!.string!).final["status"]?.string, "complete")
        }
        let other = try harness.createConversation(client, title: "other")
        try client.call("conversation.attach", ["conversation": .string(other)])
        let otherSent = try client.call("message.send", ["conversation": .string(other), "content": "[[reply:elsewhere]]"])
        _ = try client.awaitReply(otherSent["reply"]!.string!)
        let before = try history(client, id)
        XCTAssertEqual(before.count, 4)
        let path = logPath(id)
        let size = try fileSize(path)

        // Room for 40 more bytes: the record is longer, so part of it is written before EFBIG.
        try daemon.setFileSizeLimit(size + 40)
        let refused = try client.request("message.send", ["conversation": .string(id), "content": "this cannot be stored"])
        let error = try XCTUnwrap(refused["error"].flatMap(RPCError.init(json:)), refused.text)
        XCTAssertEqual(error.code, -32003)
        XCTAssertTrue(error.message.contains("the message was not stored"), error.message)
        XCTAssertTrue(error.message.contains("File too large"), error.message)
        XCTAssertEqual(try fileSize(path), size, "the part written before EFBIG was cut off again")
        XCTAssertEqual(try lastByte(path), 0x0A)
        // A rename cannot be stored either.
        let rename = try client.request("conversation.rename", ["conversation": .string(id), "title": "never"])
        XCTAssertEqual(rename["error"]?["code"]?.int, -32003, rename.text)

        // Reads still work while the disk is full, for this client and a new one.
        XCTAssertEqual(try history(client, id), before, "the refused message is not in history")
        let reader = try harness.client(name: "reader")
        let listed = try reader.call("conversation.list")["conversations"]?.array ?? []
        XCTAssertEqual(Set(listed.compactMap { $0["id"]?.string }), [id, other])
        let info = try reader.call("conversation.get", ["conversation": .string(id)])["conversation"]
        XCTAssertEqual(info?["title"]?.string, "before the disk filled")
        XCTAssertEqual(info?["message_count"]?.int, 4)
        let attached = try reader.call("conversation.attach", ["conversation": .string(id), "history": 100])
        XCTAssertEqual(attached["messages"]?.array, before)
        XCTAssertEqual(attached["pending"], .null)
        XCTAssertEqual(try reader.call("status")["server"]?.string, "confabd")
        XCTAssertTrue(daemon.waitForLog("cannot store message"), daemon.log())

        // Room again, same process: sends work without a restart.
        try daemon.setFileSizeLimit(nil)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:after]] stored now"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        XCTAssertEqual(try client.awaitReply(reply).final["content"]?.string, "after")
        XCTAssertTrue(daemon.isRunning)
        let after = try history(client, id)
        XCTAssertEqual(Array(after.prefix(4)), before)
        XCTAssertEqual(after.count, 6)
        XCTAssertFalse(after.contains { $0["content"]?.string == "this cannot be stored" })

        // Reload: everything stored is there, once, and the log is whole lines only.
        client.close()
        reader.close()
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        XCTAssertEqual(try history(again, id), after)
        XCTAssertEqual(try again.call("conversation.get", ["conversation": .string(other)])["conversation"]?["message_count"]?.int, 2)
        try assertWholeRecords(path, daemonLog: restarted.log())
        try assertWholeRecords(logPath(other), daemonLog: restarted.log())
    }

    func testAToolCallWhoseResultCannotBeStoredEndsTheReplyWithStorageAndLosesNothing() throws {
        try harness.writeConfig("""
            [tools.slow]
            description = "Answers after a second and a half"
            [tools.slow.request]
            url = "$UPSTREAM/tool/slow?ms=1500"
            [profiles.helper]
            tools = ["slow"]
            """)
        let daemon = try start()
        let client = try harness.client()
        let created = try client.call("conversation.create", ["profile": "helper"])
        let id = try XCTUnwrap(created["conversation"]?["id"]?.string)
        try client.call("conversation.attach", ["conversation": .string(id)])
        _ = try client.call("message.send", ["conversation": .string(id), "content": "[[tool:slow {}]]"])
        _ = try client.collect(until: { method, _ in method == "tool.started" })
        try daemon.setFileSizeLimit(try fileSize(logPath(id)))
        let notes = try client.collect(until: { method, params in
            (method == "message.failed" || method == "message.completed") && params["message"]?["id"]?.string == "m2.2"
        }, timeout: 15)
        let result = try XCTUnwrap(notes.first { $0.method == "tool.completed" }?.params["message"])
        XCTAssertEqual(result["status"]?.string, "failed")
        XCTAssertEqual(result["error"]?["code"]?.string, "storage")
        XCTAssertEqual(notes.last?.method, "message.failed")
        XCTAssertEqual(notes.last?.params["error"]?["code"]?.string, "storage")
        XCTAssertEqual(try client.call("status")["streams"]?.int, 0, "the reply's stream is free")

        // Room again: the conversation goes on, the call given to the model with a result.
        try daemon.setFileSizeLimit(nil)
        let next = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:on we go]]"])
        XCTAssertEqual(try client.awaitReply(try XCTUnwrap(next["reply"]?.string)).final["content"]?.string, "on we go")
        client.close()
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        let messages = try history(again, id)
        XCTAssertEqual(messages.map { $0["id"]?.string }, ["m1", "m2", "m2.1", "m3", "m4"])
        XCTAssertEqual(messages[2]["status"]?.string, "interrupted", "the call's start was stored, its end was not")
        try assertWholeRecords(logPath(id), daemonLog: restarted.log())
    }

    func testReplyWhoseFinalRecordCannotBeWrittenFailsWithStorageForEveryClient() throws {
        let daemon = try start()
        let a = try harness.client(name: "a"), b = try harness.client(name: "b")
        let id = try harness.createConversation(a)
        for client in [a, b] { try client.call("conversation.attach", ["conversation": .string(id)]) }
        let first = try a.call("message.send", ["conversation": .string(id), "content": "[[reply:stored before]]"])
        for client in [a, b] { _ = try client.awaitReply(first["reply"]!.string!) }
        let stored = try history(a, id)

        let words = 300
        let full = (1...words).map { "w\($0)" }.joined(separator: " ")
        // Every piece streamed, then held before the end until the disk is full.
        let sent = try a.call("message.send", ["conversation": .string(id), "content": .string("[[words:\(words)]] [[delay:3]] [[hold:100000 full-disk]] go")])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        // Some text saved while streaming (every 250 ms), then the disk fills, then the end comes.
        try harness.waitForSavedText(of: reply, in: id, atLeast: 1)
        try daemon.setFileSizeLimit(try fileSize(logPath(id)))
        try harness.releaseUpstream("full-disk")

        for client in [a, b] {
            let (notes, final) = try client.awaitReply(reply)
            XCTAssertEqual(notes.last?.method, "message.failed", final.text)
            XCTAssertEqual(final["status"]?.string, "failed")
            let error = try XCTUnwrap(notes.last?.params["error"])
            XCTAssertEqual(error["code"]?.string, "storage")
            XCTAssertTrue(error["message"]?.string?.contains("File too large") == true, error.text)
            XCTAssertEqual(final["error"], error)
            XCTAssertEqual(final["content"]?.string, full, "the text so far (here all of it) is kept in the message")
            if client === a { XCTAssertEqual(RPCClient.deltas(notes, for: reply).joined(), full, "every delta went out") }
        }
        XCTAssertTrue(daemon.waitForLog("cannot store reply"), daemon.log())

        // Still serving reads; the failed reply is shown as failed while the daemon runs.
        let c = try harness.client(name: "c")
        let attached = try c.call("conversation.attach", ["conversation": .string(id)])
        XCTAssertEqual(attached["pending"], .null)
        XCTAssertEqual(attached["messages"]?.array?.map { $0["status"]?.string }, ["complete", "complete", "complete", "failed"])
        XCTAssertEqual(try c.call("status")["streams"]?.int, 0, "the stream slot was given back")

        try daemon.setFileSizeLimit(nil)
        let next = try a.call("message.send", ["conversation": .string(id), "content": "[[reply:room again]]"])
        for client in [a, b, c] {
            XCTAssertEqual(try client.awaitReply(next["reply"]!.string!).final["content"]?.string, "room again")
        }

        // After a restart the reply that could not be finished is what its log holds: started,
        // with the text saved before the disk filled, never finished, so `interrupted`.
        for client in [a, b, c] { client.close() }
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        let reloaded = try history(again, id)
        XCTAssertEqual(Array(reloaded.prefix(2)), stored)
        XCTAssertEqual(reloaded.map { $0["id"]?.string }, ["m1", "m2", "m3", "m4", "m5", "m6"])
        XCTAssertEqual(reloaded[3]["status"]?.string, "interrupted")
        let saved = try XCTUnwrap(reloaded[3]["content"]?.string)
        XCTAssertTrue(full.hasPrefix(saved), saved)
        XCTAssertFalse(saved.isEmpty, "some text was saved before the disk filled")
        XCTAssertEqual(reloaded[5]["content"]?.string, "room again")
        try assertWholeRecords(logPath(id), daemonLog: restarted.log())
    }

    func testReplyThatCannotStartFailsWithStorageAfterItsMessageWasStored() throws {
        let daemon = try start()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // Same length of content as the next send, so its record is as long as this one's.
        let warm = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]] 1"])
        _ = try client.awaitReply(warm["reply"]!.string!)
        let path = logPath(id)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        let messageRecord = try XCTUnwrap(lines.first { $0.contains(#""type":"message""#) })
        let replyStarted = try XCTUnwrap(lines.first { $0.contains(#""type":"reply.started""#) })
        XCTAssertGreaterThan(replyStarted.utf8.count, 40)

        // Room for the user message, not for the reply's first record.
        try daemon.setFileSizeLimit(try fileSize(path) + messageRecord.utf8.count + 1 + 20)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:two]] 2"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        let (notes, final) = try client.awaitReply(reply)
        XCTAssertEqual(notes.map(\.method), ["message.created", "message.created", "message.failed"])
        XCTAssertEqual(notes[1].params["message"]?["status"]?.string, "streaming")
        XCTAssertEqual(final["status"]?.string, "failed")
        XCTAssertEqual(final["error"]?["code"]?.string, "storage")
        XCTAssertEqual(try client.call("status")["streams"]?.int, 0)
        XCTAssertEqual(try lastByte(path), 0x0A)

        try daemon.setFileSizeLimit(nil)
        let next = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:three]] 3"])
        XCTAssertEqual(try client.awaitReply(next["reply"]!.string!).final["content"]?.string, "three")
        client.close()
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        // The stored user message survives; its reply never got a record, so it is absent.
        let reloaded = try history(again, id)
        XCTAssertEqual(reloaded.map { $0["id"]?.string }, ["m1", "m2", "m3", "m5", "m6"])
        XCTAssertEqual(reloaded[2]["content"]?.string, "[[reply:two]] 2")
        try assertWholeRecords(path, daemonLog: restarted.log())
    }

    func testCreateThatCannotBeStoredGets32003AndLeavesNoFile() throws {
        // Launched with the limit in place: not even a header fits.
        let daemon = try start(fileSizeLimit: 64)
        let client = try harness.client()
        let refused = try client.request("conversation.create", ["title": "no room"])
        let error = try XCTUnwrap(refused["error"].flatMap(RPCError.init(json:)), refused.text)
        XCTAssertEqual(error.code, -32003)
        XCTAssertTrue(error.message.hasPrefix("storage failed"), error.message)
        XCTAssertTrue(error.message.contains("File too large"), error.message)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: conversationsDirectory), [], "no file left behind")
        XCTAssertEqual(try client.call("conversation.list")["conversations"]?.array?.count, 0)
        XCTAssertEqual(try client.call("status")["conversations"]?.int, 0)

        try daemon.setFileSizeLimit(nil)
        let id = try harness.createConversation(client, title: "room now")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: conversationsDirectory), ["\(id).jsonl"])
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:fine]]"])
        XCTAssertEqual(try client.awaitReply(sent["reply"]!.string!).final["content"]?.string, "fine")
    }

    func testCrashThenFullDiskAtStartStillLoadsAndServes() throws {
        var daemon = try start()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:2000]] [[delay:2]] [[hold:1000 crash]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitForSavedText(of: reply, in: id, atLeast: 6)
        daemon.kill()
        client.close()
        let path = logPath(id)

        // Restart with no room: the interrupted reply cannot be recorded, but it loads and serves.
        daemon = try start(fileSizeLimit: 1)
        let size = try fileSize(path)
        XCTAssertTrue(daemon.waitForLog("cannot record interrupted replies"), daemon.log())
        let reader = try harness.client()
        let messages = try history(reader, id)
        XCTAssertEqual(messages.map { $0["status"]?.string }, ["complete", "interrupted"])
        let partial = try XCTUnwrap(messages[1]["content"]?.string)
        XCTAssertTrue(partial.hasPrefix("w1 w2"), partial)
        let refused = try reader.request("message.send", ["conversation": .string(id), "content": "no room"])
        XCTAssertEqual(refused["error"]?["code"]?.int, -32003, refused.text)
        XCTAssertEqual(try fileSize(path), size)

        try daemon.setFileSizeLimit(nil)
        try reader.call("conversation.attach", ["conversation": .string(id)])
        let next = try reader.call("message.send", ["conversation": .string(id), "content": "[[reply:later]]"])
        _ = try reader.awaitReply(next["reply"]!.string!)
        reader.close()
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        let reloaded = try history(again, id)
        // m3 and m4 went to the refused send.
        XCTAssertEqual(reloaded.map { $0["id"]?.string }, ["m1", "m2", "m5", "m6"])
        XCTAssertEqual(reloaded[1]["status"]?.string, "interrupted")
        XCTAssertEqual(reloaded[1]["content"]?.string, partial)
        try assertWholeRecords(path, daemonLog: restarted.log())
    }

    /// On SIGTERM the reply in flight is written as `interrupted`; when that write fails,
    /// shutdown must not send `message.completed` (which promises the message is on disk) but
    /// `message.failed`/`storage`, as finishing a reply does: after a restart the message is
    /// what the disk held, the text saved before it filled.
    func testShutdownWithTheDiskFullDoesNotAnnounceAnUnstoredReplyAsCompleted() throws {
        let daemon = try start()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        // Held after 1,000 pieces: in flight when SIGTERM comes, whatever the machine's speed.
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[words:3000]] [[delay:2]] [[hold:1000 shutdown]] go"])
        let reply = try XCTUnwrap(sent["reply"]?.string)
        try harness.waitForSavedText(of: reply, in: id, atLeast: 1)
        try daemon.setFileSizeLimit(try fileSize(logPath(id)))
        Glibc.kill(daemon.pid, SIGTERM)
        let notes = try client.collect(until: { method, _ in method == "server.stopping" })
        let ending = try XCTUnwrap(notes.last { $0.params["message"]?["id"]?.string == reply && $0.method != "message.created" })
        XCTAssertTrue(daemon.waitForLog("cannot save interrupted reply"), daemon.log())
        XCTAssertEqual(ending.method, "message.failed", "an unstored reply must not be announced as stored")
        XCTAssertEqual(ending.params["error"]?["code"]?.string, "storage")
        let announced = ending.params["message"]?["content"]?.string ?? ""
        client.close()
        daemon.stop()

        try start()
        let again = try harness.client()
        let restored = try XCTUnwrap(try history(again, id).last)
        XCTAssertEqual(restored["status"]?.string, "interrupted")
        let saved = restored["content"]?.string ?? ""
        XCTAssertTrue(announced.hasPrefix(saved))
        XCTAssertEqual(saved, harness.savedText(of: reply, in: id), "what the log held before the disk filled")
    }

    /// A reply id that clients were told about never names another message after a restart.
    /// A reply that could not start (disk full) was announced as `m4` (`message.created`,
    /// `message.failed`) and has no record; after a restart the ids go on after the reply id
    /// the trailing user message `m3` reserved (`Conversation.init(replayed:)`), so the next
    /// send's user message is `m5`.
    func testAnAnnouncedReplyIDIsNotReusedAfterARestart() throws {
        let daemon = try start()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let warm = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:one]] 1"])
        _ = try client.awaitReply(warm["reply"]!.string!)
        let path = logPath(id)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        let messageRecord = try XCTUnwrap(lines.first { $0.contains(#""type":"message""#) })
        try daemon.setFileSizeLimit(try fileSize(path) + messageRecord.utf8.count + 1 + 20)
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:two]] 2"])
        XCTAssertEqual(sent["reply"]?.string, "m4")
        let (notes, _) = try client.awaitReply("m4")
        XCTAssertEqual(notes.last?.method, "message.failed")
        client.close()
        daemon.stop()

        try start()
        let again = try harness.client()
        let next = try again.call("message.send", ["conversation": .string(id), "content": "[[reply:three]] 3"])
        XCTAssertEqual(next["message"]?["id"]?.string, "m5", "m4 was announced as a (failed) reply; it must not name a user message")
    }

    /// A real full file system: a small tmpfs, filled by a file of our own. Needs the right
    /// to mount (root here in a container); skipped otherwise.
    func testRealFullTmpfsRefusesWithENOSPCAndRecoversWhenSpaceIsFreed() throws {
        let point = harness.dataDirectory
        try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/mount"),
              Self.run(["/usr/bin/mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", point]).status == 0 else {
            throw unavailable("cannot mount a tmpfs here; the prlimit tests cover the same paths with EFBIG")
        }
        mountPoint = point
        let daemon = try start()
        let client = try harness.client()
        let id = try harness.createConversation(client)
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:kept]]"])
        _ = try client.awaitReply(sent["reply"]!.string!)
        let before = try history(client, id)
        let path = logPath(id)
        let size = try fileSize(path)

        // Fill every free block.
        let filler = point + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let block = [UInt8](repeating: 0x78, count: 4096)
        var total = 0
        while total < 1 << 20 {
            let n = block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            total += n
        }
        XCTAssertEqual(errno, ENOSPC)
        Glibc.close(fd)

        let refused = try client.request("message.send", ["conversation": .string(id), "content": .string(String(repeating: "z", count: 8000))])
        let error = try XCTUnwrap(refused["error"].flatMap(RPCError.init(json:)), refused.text)
        XCTAssertEqual(error.code, -32003)
        XCTAssertTrue(error.message.contains("No space left on device"), error.message)
        XCTAssertEqual(try fileSize(path), size)
        let created = try client.request("conversation.create", ["title": "no room"])
        XCTAssertEqual(created["error"]?["code"]?.int, -32003, created.text)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: conversationsDirectory), ["\(id).jsonl"])
        XCTAssertEqual(try history(client, id), before)

        unlink(filler)
        let next = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:space again]]"])
        XCTAssertEqual(try client.awaitReply(next["reply"]!.string!).final["content"]?.string, "space again")
        client.close()
        daemon.stop()
        let restarted = try start()
        let again = try harness.client()
        XCTAssertEqual(Array(try history(again, id).prefix(2)), before)
        try assertWholeRecords(path, daemonLog: restarted.log())
    }

    // MARK: - Helpers

    var conversationsDirectory: String { harness.dataDirectory + "/conversations" }
    func logPath(_ id: String) -> String { conversationsDirectory + "/\(id).jsonl" }

    /// Starts confabd through prlimit (limit nil: unlimited), waits until it serves.
    @discardableResult
    func start(fileSizeLimit: Int? = nil) throws -> LimitedDaemon {
        daemon?.stop()
        let started = try LimitedDaemon(harness: harness, fileSizeLimit: fileSizeLimit)
        daemon = started
        return started
    }

    func history(_ client: RPCClient, _ id: String) throws -> [JSON] {
        try client.call("conversation.history", ["conversation": .string(id), "limit": 1000])["messages"]?.array ?? []
    }

    func fileSize(_ path: String) throws -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { throw HarnessError(description: "stat \(path): \(String(cString: strerror(errno)))") }
        return Int(info.st_size)
    }

    func lastByte(_ path: String) throws -> UInt8? {
        try Data(contentsOf: URL(fileURLWithPath: path)).last
    }

    /// Every line of the log is a whole record, the file ends with a newline, and loading it
    /// reported nothing wrong.
    func assertWholeRecords(_ path: String, daemonLog: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(data.last, 0x0A, "log ends with a whole line", file: file, line: line)
        for (number, text) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let record = try? JSON.parse(String(text))
            XCTAssertNotNil(record?["type"]?.string, "line \(number + 1) is not a record: \(text.prefix(120))", file: file, line: line)
        }
        XCTAssertFalse(daemonLog.contains("log problem"), daemonLog, file: file, line: line)
    }

    @discardableResult
    static func run(_ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return (-1, "\(error)") }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}

/// confabd launched as `prlimit --fsize=LIMIT:unlimited -- confabd …` (prlimit execs it, so
/// the PID is confabd's), its stderr drained from a pipe by a thread of ours.
final class LimitedDaemon {
    let process = Process()
    private let output: PipeCollector

    init(harness: Harness, fileSizeLimit: Int?) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw HarnessError(description: "pipe failed") }
        // Neither end leaks into other children; the daemon gets the write end as its fd 1 and 2.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        output = PipeCollector(fd: fds[0])
        process.executableURL = URL(fileURLWithPath: DiskFullTests.prlimit)
        process.arguments = ["--fsize=\(fileSizeLimit.map(String.init) ?? "unlimited"):unlimited", "--", Binaries.path("confabd"),
                             "--socket", harness.socketPath, "--data-dir", harness.dataDirectory, "--config", harness.configPath,
                             "--log-level", "info"]
        var environment = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"] {
            environment.removeValue(forKey: key)
        }
        process.environment = environment
        let writer = FileHandle(fileDescriptor: fds[1], closeOnDealloc: false)
        process.standardOutput = writer
        process.standardError = writer
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            Glibc.close(fds[1])
            output.closeWhenDone()
            throw error
        }
        Glibc.close(fds[1])
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let client = try? RPCClient(path: harness.socketPath) {
                client.close()
                // Load problems are logged before "ready"; let our reader catch up to it.
                _ = waitForLog(" ready")
                return
            }
            if !process.isRunning {
                throw HarnessError(description: "confabd exited at start-up (\(process.terminationStatus)):\n\(log())")
            }
            usleep(10_000)
        }
        stop()
        throw HarnessError(description: "confabd did not start listening:\n\(log())")
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// What the daemon wrote to stderr so far (as far as our reading thread got).
    func log() -> String { output.text }

    /// Whether the log holds `text` within `seconds`: the pipe is read on another thread.
    func waitForLog(_ text: String, seconds: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !log().contains(text) {
            if Date() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// `prlimit --pid PID --fsize=N:unlimited` (nil: unlimited), then checks /proc says so.
    func setFileSizeLimit(_ bytes: Int?) throws {
        let value = bytes.map(String.init) ?? "unlimited"
        let result = DiskFullTests.run([DiskFullTests.prlimit, "--pid", String(pid), "--fsize=\(value):unlimited"])
        guard result.status == 0 else { throw HarnessError(description: "prlimit --pid \(pid) failed: \(result.output)") }
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max file size") }),
              line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first.map(String.init) == value else {
            throw HarnessError(description: "file size limit of \(pid) is not \(value):\n\(limits)")
        }
    }

    func kill() {
        if process.isRunning { Glibc.kill(pid, SIGKILL) }
        process.waitUntilExit()
        output.closeWhenDone()
    }

    func stop() {
        if process.isRunning {
            Glibc.kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { Glibc.kill(pid, SIGKILL) }
        }
        process.waitUntilExit()
        output.closeWhenDone()
    }
}

/// Reads a pipe on its own thread until end of file, keeping everything.
final class PipeCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private let done = DispatchSemaphore(value: 0)
    private let fd: Int32

    init(fd: Int32) {
        self.fd = fd
        Thread.detachNewThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 16384)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                lock.withLock { bytes.append(contentsOf: chunk[0..<n]) }
            }
            done.signal()
        }
    }

    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }

    /// Once every writer is gone the thread sees end of file; waits for it (2 s at most), closes the pipe.
    func closeWhenDone() {
        guard lock.withLock({ fdOpen }) else { return }
        // Still reading after that (a writer we do not know of)? Then leave the descriptor be.
        guard done.wait(timeout: .now() + 2) == .success else { return }
        lock.withLock {
            if fdOpen { Glibc.close(fd) }
            fdOpen = false
        }
    }

    private var fdOpen = true
}
