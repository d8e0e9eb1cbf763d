import ConfabProtocol
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Power cuts, simulated below the daemon (docs/reliability.md, "Power cuts").
///
/// confabd runs with scripts/powercut/shim.c preloaded: it journals every write and sync on the
/// data directory, with a copy of each file as each sync covered it. After a SIGKILL,
/// `scripts/powercut.py rebuild` rewrites the data directory as a disk would hold it after a
/// power cut at that moment (strict: files as of their last sync, names as of their
/// directory's last sync), and the daemon starts again on it. The shim's control files stand
/// for the disk: while `hold` exists a sync does not return (the cut lands while the disk is
/// still writing, with no timing involved), and `fail` makes syncs fail with EIO or ENOSPC.
/// `make powercut` runs the same simulator many times under load.
final class PowerCutTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let simulator = repository + "/scripts/powercut.py"

    var harness: Harness!
    var shim = ""
    var journal = ""
    var control = ""

    override func setUpWithError() throws {
        guard Self.which("python3") != nil else { throw unavailable("python3 is needed to rebuild the data directory") }
        guard Self.which("cc") ?? Self.which("clang") != nil else { throw unavailable("cc or clang is needed to build the power-cut shim") }
        harness = try Harness()
        // The harness's daemon made the data directory; the ones under the shim start from it.
        harness.stopDaemon()
        shim = harness.directory + "/libconfab-powercut.so"
        journal = harness.directory + "/journal"
        control = harness.directory + "/control"
        try FileManager.default.createDirectory(atPath: control, withIntermediateDirectories: true)
        try run(["shim", shim])
    }

    override func tearDown() {
        harness?.tearDown()
    }

    // MARK: - Tests

    func testWhatWasAnnouncedSurvivesACutWhileTheNextSyncIsStillRunning() throws {
        let outcome = try cutWhileASendIsBeingSynced(announcingBeforeSync: false)
        XCTAssertEqual(outcome.missing, [], "announced messages lost by the cut")
        XCTAssertFalse(outcome.heldSendAnswered, "the send was answered while its fdatasync had not returned")
        XCTAssertEqual(outcome.problems, [])
    }

    func testTheSimulatorCatchesADaemonThatAnnouncesBeforeItsFdatasync() throws {
        let outcome = try cutWhileASendIsBeingSynced(announcingBeforeSync: true)
        XCTAssertTrue(outcome.heldSendAnswered, "the test-only switch should answer before the sync")
        XCTAssertEqual(outcome.missing, [outcome.heldSend], "the simulator should find the message announced before its sync gone")
    }

    func testAFailingFdatasyncRefusesTheSendWithAStorageErrorAndAnnouncesNothing() throws {
        for failure in ["EIO", "ENOSPC"] {
            try startUnderTheShim()
            let client = try harness.client(name: "writer")
            let id = try harness.createConversation(client, title: "failing disk \(failure)")
            try client.call("conversation.attach", ["conversation": .string(id)])
            let first = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:stored]] first"])
            let firstReply = try client.awaitReply(first["reply"]!.string!).final
            XCTAssertEqual(firstReply["status"]?.string, "complete")

            try failure.write(toFile: control + "/fail", atomically: true, encoding: .utf8)
            let refused = try client.request("message.send", ["conversation": .string(id), "content": "[[reply:never]] second"])
            XCTAssertEqual(refused["error"]?["code"]?.int, -32003, "\(failure): \(refused.text)")
            XCTAssertTrue(refused["error"]?["message"]?.string?.contains("fdatasync") ?? false, refused.text)
            try FileManager.default.removeItem(atPath: control + "/fail")
            XCTAssertTrue(try journalLines().contains { $0.hasPrefix("syncfail ") }, "the shim did not fail a sync")

            // The disk answers again: the next send is stored and answered, and nothing of the
            // refused one was announced on the way.
            let next = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:stored again]] third"])
            let nextReply = try client.awaitReply(next["reply"]!.string!)
            XCTAssertEqual(nextReply.final["status"]?.string, "complete")
            let created = nextReply.notes.filter { $0.method == "message.created" }.compactMap { $0.params["message"]?["content"]?.string }
            XCTAssertFalse(created.contains("[[reply:never]] second"), "\(failure): the refused send was announced")
            let announced = [first["message"]!, firstReply, next["message"]!, nextReply.final]
            client.close()

            // A power cut now: the refused record was written but never synced, so it is gone,
            // and everything announced is there, unchanged.
            harness.killDaemon()
            try rebuild()
            try harness.startDaemon()
            let reader = try harness.client(name: "reader")
            let messages = try history(reader, id)
            XCTAssertEqual(messages.map { $0["content"]?.string ?? "" }, announced.map { $0["content"]?.string ?? "" }, failure)
            for message in announced {
                XCTAssertEqual(messages.first { $0["id"] == message["id"] }, message, "\(failure): \(message.text)")
            }
            XCTAssertEqual(startProblems(), [], failure)
            reader.close()
            harness.stopDaemon()
        }
    }

    // MARK: - The cut

    struct Outcome {
        var heldSend: String
        var heldSendAnswered: Bool
        var missing: [String]
        var problems: [String]
    }

    /// Stores and announces a send and its reply, then holds the disk, sends again, and cuts
    /// the power once that send's sync is waiting on the disk; restarts on what the disk holds
    /// and lists the announced messages that are not there, unchanged.
    func cutWhileASendIsBeingSynced(announcingBeforeSync: Bool) throws -> Outcome {
        try startUnderTheShim(environment: announcingBeforeSync ? ["CONFAB_TEST_ONLY_ANNOUNCE_BEFORE_FDATASYNC": "1"] : [:])
        let client = try harness.client(name: "writer")
        let id = try harness.createConversation(client, title: "cut")
        try client.call("conversation.attach", ["conversation": .string(id)])
        let sent = try client.call("message.send", ["conversation": .string(id), "content": "[[reply:before the cut]] one"])
        let reply = try client.awaitReply(sent["reply"]!.string!).final
        XCTAssertEqual(reply["status"]?.string, "complete")
        var announced = [sent["message"]!, reply]
        // Everything written so far synced (with the switch on, the last sync may still be
        // running after its announcement): the cut below takes only what comes next.
        let log = harness.dataDirectory + "/conversations/\(id).jsonl"
        try waitFor("the log synced") {
            let size = (try FileManager.default.attributesOfItem(atPath: log)[.size] as? NSNumber)?.intValue
            let synced = try self.journalLines().last { $0.hasPrefix("sync ") && $0.hasSuffix(" conversations/\(id).jsonl") }
            return synced.map { $0.split(separator: " ")[3] } == size.map { Substring(String($0)) }
        }

        XCTAssertTrue(FileManager.default.createFile(atPath: control + "/hold", contents: nil))
        let heldID = 90
        try client.sendRaw(RPC.request(id: .int(heldID), method: "message.send",
                                       params: ["conversation": .string(id), "content": "[[reply:after]] two"]))
        try waitFor("a held sync", { try self.journalLines().contains { $0.hasPrefix("held conversations/\(id).jsonl") } })
        var heldAnswer: JSON?
        if announcingBeforeSync {
            // The broken daemon answers although the disk has not: wait for that answer.
            heldAnswer = try client.response(to: .int(heldID), timeout: 30)
        }
        harness.killDaemon()
        // Whatever the daemon wrote before it died: a correct one cannot have answered.
        while let frame = try? client.readFrame(timeout: 5) {
            if frame["id"] == .int(heldID) { heldAnswer = frame }
        }
        client.close()
        try? FileManager.default.removeItem(atPath: control + "/hold")
        let heldMessage = heldAnswer?["result"]?["message"]
        if let heldMessage { announced.append(heldMessage) }

        try rebuild()
        try harness.startDaemon()
        let reader = try harness.client(name: "reader")
        let messages = try history(reader, id)
        reader.close()
        let missing = announced.filter { message in messages.first { $0["id"] == message["id"] } != message }
            .compactMap { $0["id"]?.string }
        return Outcome(heldSend: heldMessage?["id"]?.string ?? "m3", heldSendAnswered: heldAnswer != nil,
                       missing: missing, problems: startProblems())
    }

    // MARK: - Helpers

    func startUnderTheShim(environment extra: [String: String] = [:]) throws {
        try? FileManager.default.removeItem(atPath: journal)
        try run(["snapshot", harness.dataDirectory, journal])
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = shim
        environment["CONFAB_POWERCUT_DIR"] = harness.dataDirectory
        environment["CONFAB_POWERCUT_JOURNAL"] = journal
        environment["CONFAB_POWERCUT_CONTROL"] = control
        for (key, value) in extra { environment[key] = value }
        try harness.startDaemon(environment: environment)
    }

    /// The data directory as the disk holds it after a cut now (strict: only what was synced).
    func rebuild() throws {
        let output = try run(["rebuild", harness.dataDirectory, journal, "strict"])
        let stats = try JSON.parse(output.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(stats["unrecorded"]?.int, 0, output)
        XCTAssertGreaterThan(stats["syncs"]?.int ?? 0, 0, "the shim recorded no sync: \(output)")
    }

    func journalLines() throws -> [String] {
        guard let text = try? String(contentsOfFile: journal + "/journal", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }

    /// Problems the daemon reported about the logs it loaded at its last start.
    func startProblems() -> [String] {
        harness.log().split(separator: "\n").filter { $0.contains("log problem:") }.map(String.init)
    }

    func history(_ client: RPCClient, _ id: String) throws -> [JSON] {
        try client.call("conversation.history", ["conversation": .string(id), "limit": 1000])["messages"]?.array ?? []
    }

    func waitFor(_ what: String, _ condition: () throws -> Bool) throws {
        // A guard against a hang, not a timing: the condition is what is waited for.
        let deadline = Date().addingTimeInterval(60)
        while try !condition() {
            if Date() > deadline { throw HarnessError(description: "no \(what) within 60 s:\n\(harness.log())") }
            usleep(5_000)
        }
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.which("python3")!)
        process.arguments = [Self.simulator] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError(description: "powercut.py \(arguments.first ?? ""): \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}
